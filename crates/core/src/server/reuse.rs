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
//! segment is taken or given back, and by the monitor, which wakes for the
//! next expiry: an idle server holds nothing longer), and each stays counted against the
//! server's `max_shm_bytes` (a session that finds the limit reached has the
//! kept segments freed first).

use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::Instant;

use super::sync::lock;
use crate::segment::Segment;

pub(crate) use crate::segment::{KEEP_AT_MOST, KEEP_FOR, KEPT};

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
        // `remove`, not `swap_remove`: the list stays oldest first, which
        // `give_back` evicts by.
        let k = kept.remove(at);
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

    /// When the oldest kept segment expires, if one is kept.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        lock(&self.kept)
            .first()
            .and_then(|k| k.since.checked_add(KEEP_FOR))
    }

    /// How many segments are kept, and their bytes.
    pub(crate) fn held(&self) -> (u32, u64) {
        let kept = lock(&self.kept);
        let bytes = kept.iter().map(|k| k.segment.layout().total_len).sum();
        (kept.len() as u32, bytes)
    }

    /// Frees the segments kept for [`KEEP_FOR`] or longer.
    pub(crate) fn expire(&self, now: Instant) {
        lock(&self.kept).retain(|k| now.duration_since(k.since) < KEEP_FOR);
    }

    /// Frees every kept segment; true when there was one.
    pub(crate) fn clear(&self) -> bool {
        let mut kept = lock(&self.kept);
        let any = !kept.is_empty();
        kept.clear();
        any
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::segment::Endpoints;
    use shmlink_wire::layout::SegmentHeader;

    const ME: ClientProcess = ClientProcess {
        pid: 4242,
        uid: 1000,
    };

    /// A charge that records, when dropped, which segment it counted.
    struct Charge {
        id: usize,
        dropped: Arc<Mutex<Vec<usize>>>,
    }

    impl Drop for Charge {
        fn drop(&mut self) {
            lock(&self.dropped).push(self.id);
        }
    }

    #[derive(Default)]
    struct Charges(Arc<Mutex<Vec<usize>>>);

    impl Charges {
        fn charge(&self, id: usize) -> Charge {
            Charge {
                id,
                dropped: Arc::clone(&self.0),
            }
        }

        /// The ids dropped so far, in order.
        fn dropped(&self) -> Vec<usize> {
            lock(&self.0).clone()
        }
    }

    fn inode(fd: &OwnedFd) -> u64 {
        let file = File::from(fd.try_clone().expect("dup the memfd"));
        file.metadata().expect("fstat the memfd").ino()
    }

    /// Gives back a new segment with rings `(c2s, s2c)` for `owner`,
    /// charged as `id`; returns its memfd's inode.
    fn keep(
        r: &Reusable<Charge>,
        charges: &Charges,
        owner: ClientProcess,
        (c2s, s2c): (usize, usize),
        id: usize,
    ) -> u64 {
        let (seg, fd) = Segment::create(c2s, s2c).expect("create");
        let ino = inode(&fd);
        r.give_back(owner, seg, fd, charges.charge(id));
        ino
    }

    /// Takes what `owner` left with rings `(c2s, s2c)`: its memfd's inode
    /// and its charge's id.
    fn take(
        r: &Reusable<Charge>,
        owner: ClientProcess,
        (c2s, s2c): (usize, usize),
    ) -> Option<(u64, usize)> {
        let (seg, fd, charge) = r.take(owner, c2s, s2c)?;
        assert!(seg.has_rings(c2s, s2c));
        Some((inode(&fd), charge.id))
    }

    #[test]
    fn only_the_same_process_gets_its_segment_back() {
        let (r, charges) = (Reusable::default(), Charges::default());
        let ino = keep(&r, &charges, ME, (4096, 4096), 1);
        let other_pid = ClientProcess { pid: 4243, ..ME };
        let other_uid = ClientProcess { uid: 1001, ..ME };
        assert_eq!(take(&r, other_pid, (4096, 4096)), None, "another pid");
        assert_eq!(
            take(&r, other_uid, (4096, 4096)),
            None,
            "same pid, another uid"
        );
        assert!(charges.dropped().is_empty(), "still kept");
        let (got, charge) = take(&r, ME, (4096, 4096)).expect("the owner's");
        assert_eq!((got, charge), (ino, 1), "the same segment, with its charge");
        assert_eq!(charges.dropped(), vec![1], "handed back, then dropped here");
        assert_eq!(take(&r, ME, (4096, 4096)), None, "taken once only");
        assert!(!r.clear());
    }

    #[test]
    fn only_segments_with_the_same_rings_are_taken() {
        let (r, charges) = (Reusable::default(), Charges::default());
        let ino = keep(&r, &charges, ME, (4096, 8192), 1);
        for rings in [(8192, 4096), (4096, 4096), (8192, 8192), (4096, 16384)] {
            assert_eq!(take(&r, ME, rings), None, "{rings:?}");
        }
        assert!(charges.dropped().is_empty());
        assert_eq!(take(&r, ME, (4096, 8192)), Some((ino, 1)));
    }

    /// A process with several kept segments gets each once, newest first,
    /// and each with its own charge.
    #[test]
    fn a_process_may_have_several_kept() {
        let (r, charges) = (Reusable::default(), Charges::default());
        let a = keep(&r, &charges, ME, (4096, 4096), 1);
        let b = keep(&r, &charges, ME, (4096, 4096), 2);
        assert_ne!(a, b);
        assert_eq!(take(&r, ME, (4096, 4096)), Some((b, 2)));
        assert_eq!(take(&r, ME, (4096, 4096)), Some((a, 1)));
        assert_eq!(take(&r, ME, (4096, 4096)), None);
    }

    /// A segment is given back reset: the next session's ends find empty
    /// rings, whatever the last one left in them.
    #[test]
    fn a_segment_comes_back_reset() {
        let r: Reusable<()> = Reusable::default();
        let (seg, fd) = Segment::create(4096, 4096).expect("create");
        let seg = Arc::new(seg);
        let mut server = Endpoints::new(Arc::clone(&seg), true).expect("server ends");
        let client_seg = Arc::new(Segment::open(&fd, 4096, 4096).expect("open"));
        let mut client = Endpoints::new(client_seg, false).expect("client ends");
        for _ in 0..3 {
            assert!(client.producer.try_push(&[b"unread request"]).is_ok());
            assert!(server.producer.try_push(&[b"unread response"]).is_ok());
        }
        drop((server, client));
        let seg = Arc::try_unwrap(seg).expect("the ends are gone");
        r.give_back(ME, seg, fd, ());
        let (seg, fd, ()) = r.take(ME, 4096, 4096).expect("kept");
        let mut server = Endpoints::new(Arc::new(seg), true).expect("server ends");
        let opened = Segment::open(&fd, 4096, 4096).expect("the client accepts it");
        let mut client = Endpoints::new(Arc::new(opened), false).expect("client ends");
        let empty = |p: shmlink_ring::Pop<()>| matches!(p, shmlink_ring::Pop::Empty);
        assert!(empty(server.consumer.try_pop(|_| ()).expect("pop")), "c2s");
        assert!(empty(client.consumer.try_pop(|_| ()).expect("pop")), "s2c");
    }

    #[test]
    fn the_oldest_goes_when_more_than_kept_are_given_back() {
        let (r, charges) = (Reusable::default(), Charges::default());
        let owner = |i: usize| ClientProcess {
            pid: 100 + i as i32,
            uid: 1000,
        };
        let inodes: Vec<u64> = (0..=KEPT)
            .map(|i| keep(&r, &charges, owner(i), (4096, 4096), i))
            .collect();
        assert_eq!(charges.dropped(), vec![0], "the first one's charge went");
        assert_eq!(take(&r, owner(0), (4096, 4096)), None, "the first one went");
        for i in (1..=KEPT).rev() {
            assert_eq!(
                take(&r, owner(i), (4096, 4096)),
                Some((inodes[i], i)),
                "kept for process {i}"
            );
        }
        // The same holds for one process giving back more than KEPT.
        let inodes: Vec<u64> = (0..=KEPT)
            .map(|i| keep(&r, &charges, ME, (4096, 4096), 100 + i))
            .collect();
        assert_eq!(charges.dropped().last(), Some(&100));
        for i in (1..=KEPT).rev() {
            assert_eq!(take(&r, ME, (4096, 4096)), Some((inodes[i], 100 + i)));
        }
        assert_eq!(take(&r, ME, (4096, 4096)), None);
    }

    /// Found by this test: `take` removed with `swap_remove`, which moved
    /// the newest kept segment into the taken one's place, so `give_back`'s
    /// `remove(0)` no longer evicted the oldest once anything was taken from
    /// the front.
    #[test]
    fn the_oldest_goes_even_after_a_take() {
        let (r, charges) = (Reusable::default(), Charges::default());
        let owner = |i: usize| ClientProcess {
            pid: 100 + i as i32,
            uid: 1000,
        };
        // Kept in this order: 0 (oldest) .. KEPT - 1 (newest).
        for i in 0..KEPT {
            keep(&r, &charges, owner(i), (4096, 4096), i);
        }
        assert!(take(&r, owner(0), (4096, 4096)).is_some());
        // KEPT again, then one more: the oldest left (1) must go.
        keep(&r, &charges, owner(KEPT), (4096, 4096), KEPT);
        keep(&r, &charges, owner(KEPT + 1), (4096, 4096), KEPT + 1);
        assert_eq!(
            charges.dropped(),
            vec![0, 1],
            "the taken one's charge, then the oldest's"
        );
        assert_eq!(take(&r, owner(1), (4096, 4096)), None, "the oldest went");
        assert!(
            take(&r, owner(KEPT - 1), (4096, 4096)).is_some(),
            "a newer one stays"
        );
    }

    #[test]
    fn a_segment_over_keep_at_most_is_not_kept() {
        let (r, charges) = (Reusable::default(), Charges::default());
        // Rings of 2 MiB each: 4 MiB and the header page.
        let big = (2 << 20, 2 << 20);
        assert!(SegmentHeader::for_rings(big.0, big.1).total_len > KEEP_AT_MOST);
        keep(&r, &charges, ME, big, 1);
        assert_eq!(charges.dropped(), vec![1], "freed at once");
        assert_eq!(take(&r, ME, big), None);
        assert!(!r.clear(), "nothing was kept");
        // The largest rings that fit are kept.
        let fits = (2 << 20, 1 << 20);
        assert!(SegmentHeader::for_rings(fits.0, fits.1).total_len <= KEEP_AT_MOST);
        let ino = keep(&r, &charges, ME, fits, 2);
        assert_eq!(take(&r, ME, fits), Some((ino, 2)));
    }

    /// A kept segment goes (and its charge with it) once `KEEP_FOR` has
    /// passed, at the next take or give-back, whoever's it was. The test
    /// waits for the time itself to pass: there is nothing else to wait for.
    #[test]
    fn a_segment_is_kept_for_keep_for_only() {
        let (r, charges) = (Reusable::default(), Charges::default());
        keep(&r, &charges, ME, (4096, 4096), 1);
        keep(
            &r,
            &charges,
            ClientProcess { pid: 1, uid: 0 },
            (4096, 4096),
            2,
        );
        // After both were given back: each was kept at or before this.
        let given = Instant::now();
        while given.elapsed() < KEEP_FOR {
            std::thread::sleep(KEEP_FOR.saturating_sub(given.elapsed()));
        }
        assert_eq!(take(&r, ME, (4096, 4096)), None, "expired");
        let mut dropped = charges.dropped();
        dropped.sort_unstable();
        assert_eq!(dropped, vec![1, 2], "both expired ones went");
        assert!(!r.clear());
    }

    #[test]
    fn clear_frees_everything_kept_and_says_whether_there_was_any() {
        let (r, charges) = (Reusable::default(), Charges::default());
        assert!(!r.clear(), "nothing kept");
        keep(&r, &charges, ME, (4096, 4096), 1);
        keep(
            &r,
            &charges,
            ClientProcess { pid: 1, uid: 0 },
            (8192, 4096),
            2,
        );
        assert!(r.clear());
        let mut dropped = charges.dropped();
        dropped.sort_unstable();
        assert_eq!(dropped, vec![1, 2], "both charges went");
        assert!(!r.clear(), "nothing left");
        assert_eq!(take(&r, ME, (4096, 4096)), None);
    }
}
