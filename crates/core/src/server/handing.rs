//! Where the monitor and the session threads meet during a hand-over
//! (`handover.rs`): each `shm:` session thread, stopped at a message
//! boundary, files what the successor needs of it (or why it cannot be
//! handed), then waits for the verdict: the successor took everything (the
//! thread lets its session go without a word to the client), or the
//! hand-over failed (it serves on as if nothing happened).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use shmlink_wire::handover::SessionRecord;

use super::sync::lock;

/// What a session gives its successor.
#[derive(Debug)]
pub(crate) struct Parted {
    /// Its terms (the listener index is filled in by the monitor).
    pub(crate) record: SessionRecord,
    /// Its listener's address.
    pub(crate) address: String,
    /// Its control socket, its memfd, and its client's bell if any; a
    /// stream session's socket.
    pub(crate) fds: Vec<OwnedFd>,
    /// A stream session's bytes read and not yet parsed.
    pub(crate) read_ahead: Vec<u8>,
}

/// How a hand-over ended, for the sessions that filed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The successor took the sessions: let them go.
    Took,
    /// Serve on.
    Resume,
}

#[derive(Debug, Default)]
struct State {
    /// A hand-over is under way.
    active: bool,
    /// The round: a session that filed in one round waits for its verdict.
    round: u64,
    reports: BTreeMap<u64, Result<Parted, String>>,
    /// The verdict of each round that has one (the last few).
    verdicts: BTreeMap<u64, Verdict>,
}

/// The meeting place.
#[derive(Debug, Default)]
pub(crate) struct Handing {
    state: Mutex<State>,
    changed: Condvar,
}

impl Handing {
    /// Starts a round.
    pub(crate) fn begin(&self) {
        let mut s = lock(&self.state);
        s.active = true;
        s.round += 1;
        s.reports.clear();
    }

    /// Whether a round is under way (a session registered meanwhile joins).
    pub(crate) fn active(&self) -> bool {
        lock(&self.state).active
    }

    /// Files session `id`'s part and waits for the round's verdict.
    pub(crate) fn file(&self, id: u64, part: Result<Parted, String>) -> Verdict {
        let mut s = lock(&self.state);
        if !s.active {
            return Verdict::Resume;
        }
        let round = s.round;
        s.reports.insert(id, part);
        self.changed.notify_all();
        loop {
            if let Some(&v) = s.verdicts.get(&round) {
                return v;
            }
            s = self
                .changed
                .wait(s)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Waits until every session of `expected()` (asked again whenever a
    /// part comes, and every 10 ms) has filed, or `deadline`; then takes
    /// the parts. `Err`: the ids that did not file in time, or the first
    /// reason a session gave that it cannot be handed.
    pub(crate) fn gather(
        &self,
        mut expected: impl FnMut() -> Option<Vec<u64>>,
        deadline: Instant,
    ) -> Result<Vec<(u64, Parted)>, String> {
        let mut s = lock(&self.state);
        loop {
            if let Some(ids) = expected() {
                let missing: Vec<u64> = ids
                    .iter()
                    .copied()
                    .filter(|id| !s.reports.contains_key(id))
                    .collect();
                if missing.is_empty() {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "sessions {missing:?} did not reach a message boundary in time (a handler still running?)"
                    ));
                }
            } else if Instant::now() >= deadline {
                return Err("handshakes still under way at the deadline".into());
            }
            let slice = deadline
                .saturating_duration_since(Instant::now())
                .min(std::time::Duration::from_millis(10));
            s = self
                .changed
                .wait_timeout(s, slice)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let reports = std::mem::take(&mut s.reports);
        let mut parts = Vec::with_capacity(reports.len());
        let mut why = None;
        for (id, r) in reports {
            match r {
                Ok(p) => parts.push((id, p)),
                Err(e) => {
                    why.get_or_insert(e);
                }
            }
        }
        // Parts not taken stay with their sessions (the descriptors here are
        // duplicates): dropping them closes nothing the sessions use.
        match why {
            Some(e) => Err(e),
            None => Ok(parts),
        }
    }

    /// Ends the round with `v`: every session that filed learns it.
    pub(crate) fn decide(&self, v: Verdict) {
        let mut s = lock(&self.state);
        let round = s.round;
        s.verdicts.insert(round, v);
        while s.verdicts.len() > 4 {
            s.verdicts.pop_first();
        }
        s.active = false;
        s.reports.clear();
        self.changed.notify_all();
    }
}
