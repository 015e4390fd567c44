//! The shared segment of an `shm:` session: one sealed memfd, mapped by both
//! sides, holding a header and two rings (layout in [`crate::layout`]).
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
use std::sync::Arc;

use shmlink_ring::{Consumer, Memory, Producer, RawMemory, RingError, RingHeader};
use shmlink_sys::{memfd, Mapping};

use crate::layout::{SegmentHeader, DATA_AT, SEGMENT_HEADER_LEN};

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
}

impl Segment {
    /// Server side: creates, maps and initialises a segment; returns it with
    /// the memfd to pass to the client.
    ///
    /// # Errors
    /// When the kernel refuses the memfd or the mapping.
    pub(crate) fn create(c2s: usize, s2c: usize) -> std::io::Result<(Segment, OwnedFd)> {
        let layout = SegmentHeader::for_rings(c2s, s2c);
        let fd = memfd::create_sealed("shmlink-session", layout.total_len)?;
        let map = Mapping::map_shared(&fd, layout.total_len as usize, false)?;
        // The ring headers after it are all zero (a fresh memfd), which is
        // their valid initial state.
        map.write_at(0, &layout.encode());
        Ok((Segment { map, layout }, fd))
    }

    /// Client side: checks and maps a segment received from the server.
    ///
    /// # Errors
    /// A message saying which check failed, with the values.
    pub(crate) fn open(fd: impl AsFd, c2s: usize, s2c: usize) -> Result<Segment, String> {
        let expect = SegmentHeader::for_rings(c2s, s2c);
        let facts = memfd::inspect(&fd)
            .map_err(|e| format!("segment descriptor is not a sealed memfd: {e}"))?;
        if !facts.sealed {
            return Err("segment is not sealed against resizing".into());
        }
        if facts.len != expect.total_len {
            return Err(format!(
                "segment is {} bytes, expected {}",
                facts.len, expect.total_len
            ));
        }
        let map = Mapping::map_shared(&fd, expect.total_len as usize, false)
            .map_err(|e| format!("cannot map segment of {} bytes: {e}", expect.total_len))?;
        // A copy: the server may write the header at any time; we only
        // compare what we copied.
        let mut bytes = [0u8; SEGMENT_HEADER_LEN];
        map.read_at(0, &mut bytes);
        let got = SegmentHeader::decode(&bytes);
        if got != Some(expect) {
            return Err(format!(
                "segment header {got:?} does not match the negotiated layout {expect:?}"
            ));
        }
        Ok(Segment {
            map,
            layout: expect,
        })
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
}
