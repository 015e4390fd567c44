//! Segments given back by sessions that ended cleanly, kept for the next
//! session of the same client process: a process that connects for every
//! request (PHP-FPM workers without persistent sessions) then costs no
//! memfd, mapping or first-touch faults per session, only the welcome.
//!
//! Only the process that had a segment may get it again: it may still hold
//! the old mapping, so handing it to anyone else would let one client read
//! or write another's session. A segment is kept when its session ended by
//! the client's `Goodbye` (the library no longer touches a segment after
//! it; a process that does anyway harms only its own sessions), under the
//! client's pid and uid (a pid reused by a process of another uid never
//! matches). Kept segments have their header rewritten and their ring
//! headers zeroed, the state of a new segment; the rings' data is stale and
//! never read before it is written again.
//!
//! What is kept is bounded: at most [`KEPT`] segments of at most
//! [`KEEP_AT_MOST`] bytes each, for [`KEEP_FOR`] (checked whenever a
//! segment is taken or given back), and each stays counted against the
//! server's `max_shm_bytes` (a session that finds the limit reached has the
//! kept segments freed first).

use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::sync::lock;
use crate::segment::Segment;

/// Most segments kept at once.
pub(crate) const KEPT: usize = 8;
/// How long a segment is kept for its process to come back.
pub(crate) const KEEP_FOR: Duration = Duration::from_secs(2);
/// Largest segment kept (larger ones are freed when their session ends):
/// rings of up to 2 MiB - 2 KiB each.
pub(crate) const KEEP_AT_MOST: u64 = 4 << 20;

/// The client process a segment belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientProcess {
    pub(crate) pid: i32,
    pub(crate) uid: u32,
}

struct Kept<C> {
    owner: ClientProcess,
    segment: Segment,
    fd: OwnedFd,
    charge: C,
    since: Instant,
}

/// The segments kept for their processes, each with what counts it against
/// the server's limit (`C`, dropped with the segment).
pub(crate) struct Reusable<C> {
    kept: Mutex<Vec<Kept<C>>>,
}

impl<C> Default for Reusable<C> {
    fn default() -> Self {
        Reusable {
            kept: Mutex::new(Vec::new()),
        }
    }
}

impl<C> std::fmt::Debug for Reusable<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reusable")
    }
}

impl<C> Reusable<C> {
    /// The segment `owner` left with rings of these sizes, if one is kept.
    pub(crate) fn take(
        &self,
        owner: ClientProcess,
        c2s: usize,
        s2c: usize,
    ) -> Option<(Segment, OwnedFd, C)> {
        let mut kept = lock(&self.kept);
        let now = Instant::now();
        kept.retain(|k| now.duration_since(k.since) < KEEP_FOR);
        let at = kept
            .iter()
            .rposition(|k| k.owner == owner && k.segment.has_rings(c2s, s2c))?;
        let k = kept.swap_remove(at);
        Some((k.segment, k.fd, k.charge))
    }

    /// Keeps `segment` (with its memfd, still counted by `charge`) for
    /// `owner`, reset to the state of a new one; the oldest kept segment
    /// goes when there are [`KEPT`]. A segment over [`KEEP_AT_MOST`] is
    /// freed instead.
    pub(crate) fn give_back(&self, owner: ClientProcess, segment: Segment, fd: OwnedFd, charge: C) {
        if segment.layout().total_len > KEEP_AT_MOST {
            return;
        }
        segment.reset();
        let mut kept = lock(&self.kept);
        let now = Instant::now();
        kept.retain(|k| now.duration_since(k.since) < KEEP_FOR);
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(Kept {
            owner,
            segment,
            fd,
            charge,
            since: now,
        });
    }

    /// Frees every kept segment; true when there was one.
    pub(crate) fn clear(&self) -> bool {
        let mut kept = lock(&self.kept);
        let any = !kept.is_empty();
        kept.clear();
        any
    }
}
