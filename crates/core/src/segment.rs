//! The shared segment of an `shm:` session: one sealed memfd, mapped by both
//! sides, holding a header and two rings (layout in [`shmlink_wire::layout`]).
//!
//! The server creates and fills it; the client recomputes the layout from
//! the negotiated ring sizes and refuses a segment that differs in any
//! field, is not sealed against shrinking, or has the wrong size.
//!
//! The ring ends ([`Endpoints`]) own what they point into: each handle into
//! the mapping holds the `Arc<Segment>` that keeps it mapped, so no ring end
//! can outlive its memory, whatever order things are dropped or moved in.
#![allow(unsafe_code)]

use std::ops::Deref;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use shmlink_ring::{Consumer, Memory, Producer, RawMemory, RingError, RingHeader};
use shmlink_sys::futex;
use shmlink_sys::memfd::{self, FileId};
use shmlink_sys::Mapping;

use shmlink_wire::layout::{SegmentHeader, DATA_AT, SEGMENT_HEADER_LEN};

/// Most segments kept at once for their processes' next sessions: by a
/// server (`server/reuse.rs`), and as mappings by a client process
/// (`kept.rs`).
pub(crate) const KEPT: usize = 8;
/// How long a segment is kept for its process to come back (both sides).
pub(crate) const KEEP_FOR: std::time::Duration = std::time::Duration::from_secs(2);
/// Largest segment kept (larger ones are freed when their session ends):
/// rings of up to 2 MiB - 2 KiB each (both sides).
pub(crate) const KEEP_AT_MOST: u64 = 4 << 20;

/// Which way a ring carries frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Client to server (requests).
    ClientToServer,
    /// Server to client (responses).
    ServerToClient,
}

/// A mapped segment.
#[derive(Debug)]
pub(crate) struct Segment {
    map: Mapping,
    layout: SegmentHeader,
    /// The file mapped, on the client side (see [`crate::kept`]); `None`
    /// for a segment this process created.
    file: Option<FileId>,
}

impl Segment {
    /// Server side: creates, maps and initialises a segment; returns it with
    /// the memfd to pass to the client.
    ///
    /// # Errors
    /// When the kernel refuses the memfd or the mapping.
    pub(crate) fn create(c2s: usize, s2c: usize) -> std::io::Result<(Segment, OwnedFd)> {
        Self::create_named("shmlink-session", c2s, s2c)
    }

    /// [`Segment::create`] with the memfd named `name` (as `/proc/PID/maps`
    /// shows it: `shmlink-line` for a direct line's).
    ///
    /// # Errors
    /// As [`Segment::create`].
    pub(crate) fn create_named(
        name: &str,
        c2s: usize,
        s2c: usize,
    ) -> std::io::Result<(Segment, OwnedFd)> {
        let layout = SegmentHeader::for_rings(c2s, s2c);
        let fd = memfd::create_sealed(name, layout.total_len)?;
        let map = Mapping::map_shared(&fd, layout.total_len as usize, false)?;
        // The ring headers after it are all zero (a fresh memfd), which is
        // their valid initial state.
        map.write_at(0, &layout.encode());
        Ok((
            Segment {
                map,
                layout,
                file: None,
            },
            fd,
        ))
    }

    /// Checks and maps a segment received from its maker: a direct line's,
    /// from the supervisor that made it (a client opens its sessions'
    /// through [`crate::kept::open`], which may find the file mapped
    /// already).
    ///
    /// # Errors
    /// A message saying which check failed, with the values.
    pub(crate) fn open(fd: impl AsFd, c2s: usize, s2c: usize) -> Result<Segment, String> {
        let file = memfd::identify(&fd).map_err(not_a_memfd)?;
        Segment::open_identified(fd, file, c2s, s2c)
    }

    /// [`Segment::open`] for a descriptor already identified (`fstat`):
    /// checks its seals and size, maps it and checks its header.
    ///
    /// # Errors
    /// As [`Segment::open`].
    pub(crate) fn open_identified(
        fd: impl AsFd,
        (id, len): (FileId, u64),
        c2s: usize,
        s2c: usize,
    ) -> Result<Segment, String> {
        let expect = SegmentHeader::for_rings(c2s, s2c);
        let seals = memfd::seals(&fd).map_err(not_a_memfd)?;
        if !seals.sealed {
            return Err("segment is not sealed against resizing".into());
        }
        if len != expect.total_len {
            return Err(format!(
                "segment is {len} bytes, expected {}",
                expect.total_len
            ));
        }
        let map = Mapping::map_shared(&fd, expect.total_len as usize, false)
            .map_err(|e| format!("cannot map segment of {} bytes: {e}", expect.total_len))?;
        let segment = Segment {
            map,
            layout: expect,
            file: Some(id),
        };
        segment.check_header()?;
        Ok(segment)
    }

    /// Client side: whether the header the server wrote describes the
    /// layout this segment was opened with (checked whenever a session
    /// starts on it, kept mappings included).
    ///
    /// # Errors
    /// A message with what was found and what was expected.
    pub(crate) fn check_header(&self) -> Result<(), String> {
        // A copy: the server may write the header at any time; we only
        // compare what we copied.
        let mut bytes = [0u8; SEGMENT_HEADER_LEN];
        self.map.read_at(0, &mut bytes);
        let got = SegmentHeader::decode(&bytes);
        if got != Some(self.layout) {
            return Err(format!(
                "segment header {got:?} does not match the negotiated layout {:?}",
                self.layout
            ));
        }
        Ok(())
    }

    /// The file mapped, when this side received it (client side).
    pub(crate) fn file(&self) -> Option<FileId> {
        self.file
    }

    /// The layout in force.
    pub(crate) fn layout(&self) -> &SegmentHeader {
        &self.layout
    }

    fn ring_header_ptr(&self, dir: Direction) -> NonNull<RingHeader> {
        let off = match dir {
            Direction::ClientToServer => self.layout.c2s_header,
            Direction::ServerToClient => self.layout.s2c_header,
        } as usize;
        // SAFETY: `off` is RING_HEADERS_AT or RING_HEADERS_AT + RingHeader::SIZE
        // (the layout's own values, never a peer's), so the header lies inside
        // the first page of a mapping of at least DATA_AT bytes (asserted in
        // `layout`); the result is in bounds and not null.
        unsafe { NonNull::new_unchecked(self.map.as_ptr().add(off).cast::<RingHeader>()) }
    }

    /// The header of one ring.
    pub(crate) fn ring_header(&self, dir: Direction) -> &RingHeader {
        // SAFETY: the pointer is in bounds (see `ring_header_ptr`) and aligned
        // to 128 as RingHeader needs (a page-aligned mapping plus a multiple of
        // 128, asserted in `layout`). RingHeader consists only of atomics, for
        // which every bit pattern is valid and concurrent access from the peer
        // is well defined; the reference lives no longer than `self`, which
        // owns the mapping.
        unsafe { self.ring_header_ptr(dir).as_ref() }
    }

    /// Whether the rings have these sizes.
    pub(crate) fn has_rings(&self, c2s: usize, s2c: usize) -> bool {
        self.layout == SegmentHeader::for_rings(c2s, s2c)
    }

    /// Wakes the side that may sleep on the client-to-server ring's data
    /// bell (the server's side, or a worker's on a direct line), whatever
    /// the ring holds: the increment makes a wait that read the old value
    /// return, and what the waker wrote before it (Release) is seen.
    pub(crate) fn ring_server_bell(&self) {
        let inn = self.ring_header(Direction::ClientToServer);
        inn.data_bell.fetch_add(1, Ordering::AcqRel);
        futex::wake(&inn.data_bell, u32::MAX);
    }

    /// Puts a used segment back into the state of a new one (server side,
    /// after its session ended): everything before the rings' data (the
    /// segment header, the ring headers) as `create` leaves it. The rings'
    /// data stays; nothing reads it before it is written again.
    pub(crate) fn reset(&self) {
        self.map.write_at(0, &[0u8; DATA_AT]);
        self.map.write_at(0, &self.layout.encode());
    }

    /// Faults in the pages a session's first calls touch (the header page is
    /// written by `create`; this touches the first page of each ring), so
    /// that neither side pays for allocating them on its critical path.
    pub(crate) fn prefault_first_pages(&self) {
        for off in [self.layout.c2s_data, self.layout.s2c_data] {
            // Writing zero over zero: the segment is not shared yet, and a
            // peer could observe nothing anyway.
            self.map.write_at(off as usize, &[0]);
        }
    }
}

/// The error of a segment descriptor whose size or seals cannot be read.
pub(crate) fn not_a_memfd(e: std::io::Error) -> String {
    format!("segment descriptor is not a sealed memfd: {e}")
}

/// A ring's control block in a segment; keeps the segment mapped.
pub(crate) struct HeaderRef {
    ptr: NonNull<RingHeader>,
    _segment: Arc<Segment>,
}

// SAFETY: the pointee is a RingHeader (atomics only, `Sync`) inside a mapping
// that `_segment` keeps alive wherever this handle goes; `Arc<Segment>` is
// itself Send + Sync.
unsafe impl Send for HeaderRef {}
// SAFETY: as for Send: shared access hands out `&RingHeader`, which is Sync.
unsafe impl Sync for HeaderRef {}

impl Deref for HeaderRef {
    type Target = RingHeader;

    #[inline(always)]
    fn deref(&self) -> &RingHeader {
        // SAFETY: `ptr` came from `Segment::ring_header_ptr` of `_segment`
        // (in bounds, aligned, atomics only), and `_segment` keeps the
        // mapping alive as long as `self`; the reference borrows `self`.
        unsafe { self.ptr.as_ref() }
    }
}

/// A ring's data area in a segment, reached only by copies; keeps the
/// segment mapped.
pub(crate) struct RingData {
    raw: RawMemory,
    _segment: Arc<Segment>,
}

impl Memory for RingData {
    #[inline(always)]
    fn len(&self) -> usize {
        self.raw.len()
    }
    #[inline(always)]
    fn write(&self, off: usize, src: &[u8]) {
        self.raw.write(off, src);
    }
    #[inline(always)]
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.raw.read(off, dst);
    }
    #[inline(always)]
    fn append(&self, off: usize, len: usize, out: &mut Vec<u8>) {
        self.raw.append(off, len, out);
    }
    #[inline(always)]
    fn prefetch(&self, off: usize, len: usize) {
        self.raw.prefetch(off, len);
    }
}

fn ring_parts(segment: &Arc<Segment>, dir: Direction) -> (HeaderRef, RingData) {
    let (off, len) = match dir {
        Direction::ClientToServer => (segment.layout.c2s_data, segment.layout.c2s_len),
        Direction::ServerToClient => (segment.layout.s2c_data, segment.layout.s2c_len),
    };
    // SAFETY: [off, off + len) lies inside the mapping by construction of the
    // layout (its total length was checked against the file and mapped in
    // full); the ring only copies through this pointer, never forming
    // references; and the `Arc` stored beside it in `RingData` keeps the
    // mapping alive for as long as the RawMemory exists.
    let raw = unsafe { RawMemory::new(segment.map.as_ptr().add(off as usize), len as usize) };
    (
        HeaderRef {
            ptr: segment.ring_header_ptr(dir),
            _segment: Arc::clone(segment),
        },
        RingData {
            raw,
            _segment: Arc::clone(segment),
        },
    )
}

/// The producing end of a ring in a segment.
pub(crate) type RingProducer = Producer<HeaderRef, RingData>;
/// The consuming end of a ring in a segment.
pub(crate) type RingConsumer = Consumer<HeaderRef, RingData>;

/// The two ring ends one side of a session uses. Each owns a reference to
/// the segment, so either may be moved out and used on its own.
pub(crate) struct Endpoints {
    /// Where this side writes.
    pub(crate) producer: RingProducer,
    /// Where this side reads.
    pub(crate) consumer: RingConsumer,
    /// The segment (the server's monitor wakes its bells on stop).
    pub(crate) segment: Arc<Segment>,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("layout", self.segment.layout())
            .finish_non_exhaustive()
    }
}

impl Endpoints {
    /// The ends for the client (`server == false`) or the server.
    ///
    /// # Errors
    /// When the ring headers hold values the ring cannot start from.
    pub(crate) fn new(segment: Arc<Segment>, server: bool) -> Result<Endpoints, RingError> {
        let (out, inn) = if server {
            (Direction::ServerToClient, Direction::ClientToServer)
        } else {
            (Direction::ClientToServer, Direction::ServerToClient)
        };
        let (out_hdr, out_data) = ring_parts(&segment, out);
        let (in_hdr, in_data) = ring_parts(&segment, inn);
        Ok(Endpoints {
            producer: Producer::new(out_hdr, out_data)?,
            consumer: Consumer::new(in_hdr, in_data)?,
            segment,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_accepts_what_the_server_made_and_nothing_else() {
        let (_seg, fd) = Segment::create(4096, 8192).expect("create");
        assert!(Segment::open(&fd, 4096, 8192).is_ok());
        let swapped = Segment::open(&fd, 8192, 4096).expect_err("swapped sizes");
        assert!(swapped.contains("does not match"), "{swapped}");
        let wrong = Segment::open(&fd, 8192, 8192).expect_err("wrong size");
        assert!(wrong.contains("expected"), "{wrong}");
        let plain = memfd::create_sealed("x", 4096 + 4096 + 8192).expect("memfd");
        assert!(Segment::open(&plain, 4096, 8192)
            .expect_err("no header")
            .contains("does not match"));
    }

    /// A ring end moved out of its `Endpoints` keeps the mapping alive after
    /// everything else is dropped (it used to hold a `'static` borrow).
    #[test]
    fn a_ring_end_outlives_everything_else() {
        let (seg, fd) = Segment::create(4096, 4096).expect("create");
        let server = Endpoints::new(Arc::new(seg), true).expect("server ends");
        let client_seg = Arc::new(Segment::open(&fd, 4096, 4096).expect("open"));
        let Endpoints {
            producer: mut to_server,
            ..
        } = Endpoints::new(client_seg, false).expect("client ends");
        drop(fd);
        let mut from_client = server.consumer;
        assert!(to_server.try_push(&[b"still mapped"]).is_ok());
        let popped = from_client
            .try_pop(|r| {
                let mut v = Vec::new();
                r.read_to_vec(&mut v);
                v
            })
            .expect("pop");
        assert_eq!(
            popped,
            shmlink_ring::Pop::Done {
                value: b"still mapped".to_vec(),
                wake: false
            }
        );
    }

    /// Pops one record whole, or `None` when the ring is empty.
    fn pop(c: &mut RingConsumer) -> Option<Vec<u8>> {
        let got = c
            .try_pop(|r| {
                let mut v = Vec::new();
                r.read_to_vec(&mut v);
                v
            })
            .expect("pop");
        match got {
            shmlink_ring::Pop::Done { value, .. } => Some(value),
            shmlink_ring::Pop::Empty => None,
        }
    }

    /// Pushes one record; panics when the ring is full.
    fn push(p: &mut RingProducer, record: &[u8]) {
        match p.try_push(&[record]).expect("push") {
            shmlink_ring::Push::Done { .. } => {}
            shmlink_ring::Push::Full => panic!("ring full for a {} byte record", record.len()),
        }
    }

    /// A record of `len` bytes that differs with `seed` and every position.
    fn record(seed: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Both sides' ends over one segment (the server's `seg`, the client's
    /// mapping opened from `fd`), checked as a client checks them.
    fn both_ends(seg: Segment, fd: &OwnedFd, c2s: usize, s2c: usize) -> (Endpoints, Endpoints) {
        let server = Endpoints::new(Arc::new(seg), true).expect("server ends");
        let opened = Segment::open(fd, c2s, s2c).expect("the client accepts the segment");
        let client = Endpoints::new(Arc::new(opened), false).expect("client ends");
        (server, client)
    }

    /// Records go both ways intact, enough of them to wrap both rings
    /// (records of several sizes, so pads are needed at the wrap too).
    fn records_pass_both_ways(server: &mut Endpoints, client: &mut Endpoints, seed: u8) {
        let mut sent = 0usize;
        for (i, len) in [0usize, 1, 7, 100, 1000, 1500, 333, 2000]
            .iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            let seed = seed.wrapping_add(i as u8);
            let up = record(seed, *len);
            push(&mut client.producer, &up);
            assert_eq!(
                pop(&mut server.consumer).as_deref(),
                Some(&up[..]),
                "c2s {i}"
            );
            let down = record(seed ^ 0x5A, *len + 3);
            push(&mut server.producer, &down);
            assert_eq!(
                pop(&mut client.consumer).as_deref(),
                Some(&down[..]),
                "s2c {i}"
            );
            sent += len;
        }
        assert!(sent > 2 * 8192, "the rings wrapped ({sent} bytes each way)");
        assert_eq!(pop(&mut server.consumer), None);
        assert_eq!(pop(&mut client.consumer), None);
    }

    /// A header page scribbled over (segment header, both ring headers:
    /// what no client accepts and no ring can start from) is, after
    /// `reset`, a segment both sides accept again, whose rings carry
    /// records intact.
    #[test]
    fn reset_undoes_a_scribbled_header_page() {
        let (c2s, s2c) = (4096, 8192);
        let (seg, fd) = Segment::create(c2s, s2c).expect("create");
        let garbage: Vec<u8> = (0..DATA_AT).map(|i| ((i as u8) ^ 0xA5) | 1).collect();
        seg.map.write_at(0, &garbage);
        let refused = Segment::open(&fd, c2s, s2c).expect_err("a scribbled header");
        assert!(refused.contains("does not match"), "{refused}");
        let seg = Arc::new(seg);
        assert!(
            Endpoints::new(Arc::clone(&seg), true).is_err(),
            "scribbled ring headers"
        );
        let seg = Arc::try_unwrap(seg).expect("nothing else holds the segment");

        seg.reset();
        let mut header = [0u8; SEGMENT_HEADER_LEN];
        seg.map.read_at(0, &mut header);
        assert_eq!(
            SegmentHeader::decode(&header),
            Some(SegmentHeader::for_rings(c2s, s2c))
        );
        let mut rest = vec![0u8; DATA_AT - SEGMENT_HEADER_LEN];
        seg.map.read_at(SEGMENT_HEADER_LEN, &mut rest);
        assert!(rest.iter().all(|&b| b == 0), "the ring headers are zeroed");
        let (mut server, mut client) = both_ends(seg, &fd, c2s, s2c);
        records_pass_both_ways(&mut server, &mut client, 1);
    }

    /// A segment used by a session (rings wrapped, a record left unread in
    /// each, a consumer announced asleep) starts over after `reset`: its
    /// next session's ends see empty rings (the stale data is never read)
    /// and pass records intact.
    #[test]
    fn reset_starts_a_used_segment_over() {
        let (c2s, s2c) = (4096, 4096);
        let (seg, fd) = Segment::create(c2s, s2c).expect("create");
        let (mut server, mut client) = both_ends(seg, &fd, c2s, s2c);
        records_pass_both_ways(&mut server, &mut client, 2);
        // The server's consumer announces sleep on its empty ring and is
        // woken by a record it never reads; the client leaves one too.
        assert!(server.consumer.prepare_sleep().expect("sleep").is_some());
        match client
            .producer
            .try_push(&[b"left unread (c2s)"])
            .expect("push")
        {
            shmlink_ring::Push::Done { wake } => assert!(wake, "the bell was rung"),
            shmlink_ring::Push::Full => panic!("ring full"),
        }
        push(&mut server.producer, b"left unread (s2c)");
        let Endpoints {
            segment,
            producer,
            consumer,
        } = server;
        drop((producer, consumer, client));
        let seg = Arc::try_unwrap(segment).expect("the session's ends are gone");
        let o = std::sync::atomic::Ordering::Relaxed;
        assert_ne!(
            seg.ring_header(Direction::ClientToServer).data_bell.load(o),
            0
        );

        seg.reset();
        for dir in [Direction::ClientToServer, Direction::ServerToClient] {
            let h = seg.ring_header(dir);
            let words = (h.tail.load(o), h.head.load(o));
            let bells = (
                h.data_bell.load(o),
                h.data_sleep.load(o),
                h.space_bell.load(o),
                h.space_sleep.load(o),
            );
            assert_eq!((words, bells), ((0, 0), (0, 0, 0, 0)), "{dir:?}");
        }
        let (mut server, mut client) = both_ends(seg, &fd, c2s, s2c);
        assert_eq!(pop(&mut server.consumer), None, "nothing stale c2s");
        assert_eq!(pop(&mut client.consumer), None, "nothing stale s2c");
        records_pass_both_ways(&mut server, &mut client, 3);
    }

    #[test]
    fn has_rings_compares_both_sizes() {
        let (seg, _fd) = Segment::create(4096, 8192).expect("create");
        assert!(seg.has_rings(4096, 8192));
        assert!(!seg.has_rings(8192, 4096), "swapped");
        assert!(!seg.has_rings(4096, 4096));
        assert!(!seg.has_rings(8192, 8192));
        assert!(!seg.has_rings(4096, 16384));
    }
}
