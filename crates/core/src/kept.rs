//! Client side: mappings of segments kept after a session ended with our
//! `Goodbye`, for the next session that is given the same segment.
//!
//! A server keeps the segment of a session its client ended with a
//! `Goodbye` for that client process's next session (`server/reuse.rs`),
//! which then costs it no memfd and no mapping. The client side of the same
//! saving: instead of unmapping the segment when the session closes and
//! mapping it again (and faulting its pages in again) when the same file
//! comes back in a later welcome, the client keeps its mapping and uses it
//! again. On this VM that is `mmap` ~4 µs, two or three first-touch faults
//! of ~1.7 µs each and `munmap` ~5 µs out of a session of ~45 µs.
//!
//! Whether a welcome's segment is one we kept is known by its file's
//! identity (`fstat`: device and inode), which no other file can have while
//! our mapping keeps the file alive. A kept file was checked when it was
//! first mapped (sealed against resizing, seals frozen: nothing can undo
//! that), so only its header is checked again, as for any segment, and the
//! ring headers by the ring ends as they start. Nothing here trusts the
//! server more than a fresh mapping does: a server that sends the same file
//! to two sessions could do the same with fresh mappings.
//!
//! Bounds, as on the server: at most [`KEPT`] mappings, each of a segment
//! of at most [`KEEP_AT_MOST`] bytes, for [`KEEP_FOR`] (checked whenever a
//! session starts or ends with a mapping to keep). The list is a process
//! global taken with `try_lock` only: a contended list, or one a `fork()`
//! left locked in the child, means mapping afresh, never waiting.

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use shmlink_sys::memfd::{self, FileId};

use crate::segment::{self, Segment};
use shmlink_wire::layout::SegmentHeader;

// The bounds are the server's own: a mapping is worth keeping as long as
// the server keeps the segment.
use crate::segment::{KEEP_AT_MOST, KEEP_FOR, KEPT};

struct Kept {
    file: FileId,
    segment: Arc<Segment>,
    since: Instant,
}

/// The mappings kept, oldest first.
struct List(Vec<Kept>);

impl List {
    /// Takes out the entries older than [`KEEP_FOR`] at `now` (returned, to
    /// be unmapped after the lock is released).
    fn expire(&mut self, now: Instant) -> Vec<Kept> {
        self.0
            .extract_if(.., |k| now.duration_since(k.since) >= KEEP_FOR)
            .collect()
    }

    /// The kept mapping of `file` with this layout that nothing else uses,
    /// and what expired (to be unmapped after the lock is released).
    fn take(
        &mut self,
        file: FileId,
        layout: &SegmentHeader,
        now: Instant,
    ) -> (Option<Arc<Segment>>, Vec<Kept>) {
        let gone = self.expire(now);
        let at = self.0.iter().position(|k| {
            k.file == file && k.segment.layout() == layout && Arc::strong_count(&k.segment) == 1
        });
        (at.map(|at| self.0.remove(at).segment), gone)
    }

    /// Keeps `segment`'s mapping (a client segment of at most
    /// [`KEEP_AT_MOST`] bytes); the oldest goes when there are [`KEPT`].
    /// Returns what leaves the list.
    fn keep(&mut self, segment: Arc<Segment>, now: Instant) -> Vec<Kept> {
        let Some(file) = segment.file() else {
            return Vec::new();
        };
        if segment.layout().total_len > KEEP_AT_MOST {
            return Vec::new();
        }
        let mut gone = self.expire(now);
        if self.0.len() >= KEPT {
            gone.push(self.0.remove(0));
        }
        self.0.push(Kept {
            file,
            segment,
            since: now,
        });
        gone
    }
}

static LIST: Mutex<List> = Mutex::new(List(Vec::new()));

/// Client side: the segment a welcome carried, as a kept mapping when we
/// still map that file (its header checked again), else checked and
/// mapped afresh ([`Segment::open_identified`]).
///
/// # Errors
/// A message saying which check failed, with the values.
pub(crate) fn open(fd: impl AsFd, c2s: usize, s2c: usize) -> Result<Arc<Segment>, String> {
    let file = memfd::identify(&fd).map_err(segment::not_a_memfd)?;
    let layout = SegmentHeader::for_rings(c2s, s2c);
    let (found, gone) = match LIST.try_lock() {
        Ok(mut list) => list.take(file.0, &layout, Instant::now()),
        Err(_) => (None, Vec::new()),
    };
    // Unmapped here, not under the lock.
    drop(gone);
    if let Some(segment) = found {
        segment.check_header()?;
        return Ok(segment);
    }
    Segment::open_identified(fd, file, c2s, s2c).map(Arc::new)
}

/// Client side, once our `Goodbye` is on the ring (after which the library
/// no longer touches the segment): keeps the mapping for a later session.
/// Does nothing for a segment this process created, one too large, or
/// when the list is contended.
pub(crate) fn keep(segment: Arc<Segment>) {
    let gone = match LIST.try_lock() {
        Ok(mut list) => list.keep(segment, Instant::now()),
        Err(_) => return,
    };
    // Unmapped here, not under the lock.
    drop(gone);
}

/// Unmaps the segments this process keeps mapped for later sessions (a
/// client keeps the mapping of an `shm:` session it closed, up to 8 of at
/// most 4 MiB each for 2 s, and uses it again when the server gives the
/// same segment to its next session). For a process done with its
/// sessions that wants the memory back at once rather than after 2 s;
/// sessions in use are not affected, and later ones map their segments
/// afresh.
pub fn release_kept_mappings() {
    let gone = std::mem::take(&mut LIST.lock().unwrap_or_else(|p| p.into_inner()).0);
    drop(gone);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_segment(c2s: usize, s2c: usize) -> (Arc<Segment>, std::os::fd::OwnedFd) {
        let (_server, fd) = Segment::create(c2s, s2c).expect("create");
        (Arc::new(Segment::open(&fd, c2s, s2c).expect("open")), fd)
    }

    fn id(fd: &std::os::fd::OwnedFd) -> FileId {
        memfd::identify(fd).expect("fstat").0
    }

    #[test]
    fn a_kept_mapping_comes_back_for_its_file_and_layout_only() {
        let mut list = List(Vec::new());
        let t = Instant::now();
        let (seg, fd) = client_segment(4096, 4096);
        let at = seg.layout().total_len;
        let base = Arc::as_ptr(&seg);
        assert!(list.keep(seg, t).is_empty());
        let (_other, other_fd) = client_segment(4096, 4096);
        let layout = SegmentHeader::for_rings(4096, 4096);
        assert!(
            list.take(id(&other_fd), &layout, t).0.is_none(),
            "another file"
        );
        let bigger = SegmentHeader::for_rings(8192, 4096);
        assert!(list.take(id(&fd), &bigger, t).0.is_none(), "another layout");
        let back = list.take(id(&fd), &layout, t).0.expect("the same file");
        assert_eq!(Arc::as_ptr(&back), base, "the very mapping");
        assert_eq!(back.layout().total_len, at);
        assert!(list.take(id(&fd), &layout, t).0.is_none(), "taken once");
    }

    #[test]
    fn a_mapping_still_in_use_is_not_handed_out() {
        let mut list = List(Vec::new());
        let t = Instant::now();
        let (seg, fd) = client_segment(4096, 4096);
        let held = Arc::clone(&seg);
        list.keep(seg, t);
        let layout = SegmentHeader::for_rings(4096, 4096);
        assert!(list.take(id(&fd), &layout, t).0.is_none());
        drop(held);
        assert!(list.take(id(&fd), &layout, t).0.is_some());
    }

    #[test]
    fn kept_mappings_are_bounded_in_number_age_and_size() {
        let mut list = List(Vec::new());
        let t = Instant::now();
        let mut fds = Vec::new();
        for _ in 0..KEPT + 1 {
            let (seg, fd) = client_segment(4096, 4096);
            fds.push(fd);
            let gone = list.keep(seg, t);
            assert!(gone.len() <= 1);
        }
        assert_eq!(list.0.len(), KEPT);
        let layout = SegmentHeader::for_rings(4096, 4096);
        assert!(
            list.take(id(&fds[0]), &layout, t).0.is_none(),
            "oldest evicted"
        );
        assert!(list.take(id(&fds[1]), &layout, t).0.is_some());
        let later = t + KEEP_FOR;
        assert!(
            list.take(id(&fds[2]), &layout, later).0.is_none(),
            "expired"
        );
        assert!(list.0.is_empty());

        // Over the size bound (rings of 4 MiB): not kept.
        let (big, _big_fd) = client_segment(4 << 20, 4096);
        list.keep(big, t);
        assert!(list.0.is_empty());
        // A segment this process created: not kept.
        let (own, _fd) = Segment::create(4096, 4096).expect("create");
        list.keep(Arc::new(own), t);
        assert!(list.0.is_empty());
    }

    #[test]
    fn a_kept_mapping_whose_header_was_scribbled_on_is_refused() {
        let (_server, fd) = Segment::create(4096, 4096).expect("create");
        let seg = open(&fd, 4096, 4096).expect("open");
        let len = seg.layout().total_len as usize;
        keep(seg);
        // Another mapping of the same file: a hostile server rewrites the
        // header before sending the file again.
        let scribbler = shmlink_sys::Mapping::map_shared(&fd, len, false).expect("map");
        scribbler.write_at(0, &[0xAB; shmlink_wire::layout::SEGMENT_HEADER_LEN]);
        let err = open(&fd, 4096, 4096).expect_err("scribbled");
        assert!(err.contains("does not match"), "{err}");
    }
}
