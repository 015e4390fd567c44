//! The shared segment: one memfd holding a header and two rings.
//!
//! ```text
//! 0      SegmentHeader (72 bytes)
//! 512    RingHeader, client -> server  (768 bytes)
//! 1280   RingHeader, server -> client  (768 bytes)
//! 4096   data of the client -> server ring (c2s bytes)
//! 4096+c2s  data of the server -> client ring (s2c bytes)
//! ```
//! The server creates and fills it; the client recomputes the layout from the
//! negotiated ring sizes and refuses a segment that differs in any field, is
//! not sealed against shrinking, or has the wrong size.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use shmlink_ring::{Consumer, Producer, RawMemory, RingError, RingHeader};
use shmlink_sys::{memfd, Mapping};

/// Identifies a shmlink segment: "SHMLSEG\0".
pub const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"SHMLSEG\0");
/// Version of this layout; bumped on any change.
pub const LAYOUT_VERSION: u32 = 1;

const RING_HEADERS_AT: usize = 512;
const DATA_AT: usize = 4096;

/// The first bytes of a segment, as `#[repr(C)]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// [`SEGMENT_MAGIC`].
    pub magic: u64,
    /// [`LAYOUT_VERSION`].
    pub layout_version: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Size of the whole segment.
    pub total_len: u64,
    /// Offset of the client -> server ring header.
    pub c2s_header: u64,
    /// Offset of the client -> server ring data.
    pub c2s_data: u64,
    /// Length of the client -> server ring data.
    pub c2s_len: u64,
    /// Offset of the server -> client ring header.
    pub s2c_header: u64,
    /// Offset of the server -> client ring data.
    pub s2c_data: u64,
    /// Length of the server -> client ring data.
    pub s2c_len: u64,
}

const _: () = assert!(std::mem::size_of::<SegmentHeader>() == 72);
const _: () = assert!(std::mem::size_of::<RingHeader>() == RingHeader::SIZE);
const _: () = assert!(RING_HEADERS_AT + 2 * std::mem::size_of::<RingHeader>() <= DATA_AT);
const _: () = assert!(RING_HEADERS_AT.is_multiple_of(std::mem::align_of::<RingHeader>()));
const _: () = assert!(RingHeader::SIZE.is_multiple_of(std::mem::align_of::<RingHeader>()));

impl SegmentHeader {
    /// The layout for the given ring sizes.
    pub fn for_rings(c2s: usize, s2c: usize) -> SegmentHeader {
        let (c2s, s2c) = (c2s as u64, s2c as u64);
        let ring = std::mem::size_of::<RingHeader>() as u64;
        SegmentHeader {
            magic: SEGMENT_MAGIC,
            layout_version: LAYOUT_VERSION,
            reserved: 0,
            total_len: DATA_AT as u64 + c2s + s2c,
            c2s_header: RING_HEADERS_AT as u64,
            c2s_data: DATA_AT as u64,
            c2s_len: c2s,
            s2c_header: RING_HEADERS_AT as u64 + ring,
            s2c_data: DATA_AT as u64 + c2s,
            s2c_len: s2c,
        }
    }
}

/// Which way a ring carries frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server (requests).
    ClientToServer,
    /// Server to client (responses).
    ServerToClient,
}

/// A mapped segment.
#[derive(Debug)]
pub struct Segment {
    map: Mapping,
    layout: SegmentHeader,
}

impl Segment {
    /// Server side: creates, maps and initialises a segment; returns it with
    /// the memfd to pass to the client.
    ///
    /// # Errors
    /// When the kernel refuses the memfd or the mapping.
    pub fn create(c2s: usize, s2c: usize) -> std::io::Result<(Segment, OwnedFd)> {
        let layout = SegmentHeader::for_rings(c2s, s2c);
        let fd = memfd::create_sealed("shmlink-session", layout.total_len)?;
        let map = Mapping::map_shared(&fd, layout.total_len as usize, false)?;
        // SAFETY: the mapping is at least DATA_AT bytes long and page aligned,
        // so the header fits and is aligned; nobody else maps it yet, and the
        // ring headers it precedes are all zero (fresh memfd), which is their
        // valid initial state.
        unsafe { map.as_ptr().cast::<SegmentHeader>().write_volatile(layout) };
        Ok((Segment { map, layout }, fd))
    }

    /// Client side: checks and maps a segment received from the server.
    ///
    /// # Errors
    /// A message saying which check failed, with the values.
    pub fn open(fd: impl AsFd, c2s: usize, s2c: usize) -> Result<Segment, String> {
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
        // SAFETY: the mapping is `total_len >= DATA_AT` bytes, page aligned; a
        // volatile read copies the header out (the server may write it at any
        // time, we only compare the copy).
        let got = unsafe { map.as_ptr().cast::<SegmentHeader>().read_volatile() };
        if got != expect {
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
    pub fn layout(&self) -> &SegmentHeader {
        &self.layout
    }

    /// The header of one ring.
    pub fn ring_header(&self, dir: Direction) -> &RingHeader {
        let off = match dir {
            Direction::ClientToServer => self.layout.c2s_header,
            Direction::ServerToClient => self.layout.s2c_header,
        } as usize;
        // SAFETY: `off` is RING_HEADERS_AT or RING_HEADERS_AT + RingHeader::SIZE,
        // so the header lies inside the first page of a mapping of at least
        // DATA_AT bytes (asserted above), aligned to 128 as RingHeader needs
        // (the mapping is page aligned). RingHeader consists only of atomics,
        // for which every bit pattern is valid and concurrent access from the
        // peer is well defined; the reference lives no longer than `self`,
        // which owns the mapping.
        unsafe { &*self.map.as_ptr().add(off).cast::<RingHeader>() }
    }

    fn ring_memory(&self, dir: Direction) -> RawMemory {
        let (off, len) = match dir {
            Direction::ClientToServer => (self.layout.c2s_data, self.layout.c2s_len),
            Direction::ServerToClient => (self.layout.s2c_data, self.layout.s2c_len),
        };
        // SAFETY: [off, off + len) lies inside the mapping by construction of
        // the layout (checked against the file size in `open`); the ring only
        // copies through this pointer, never forming references, and the
        // `Arc<Segment>` held next to every `RawMemory` keeps the mapping alive.
        unsafe { RawMemory::new(self.map.as_ptr().add(off as usize), len as usize) }
    }

    /// Faults in the pages a session's first calls touch (the header page is
    /// written by `create`; this touches the first page of each ring), so that neither side pays for
    /// allocating them on its critical path.
    pub fn prefault_first_pages(&self) {
        for off in [self.layout.c2s_data, self.layout.s2c_data] {
            // SAFETY: each offset is inside the mapping (layout invariant); the
            // segment is not shared yet, and writing zero over zero changes
            // nothing a peer could observe.
            unsafe { self.map.as_ptr().add(off as usize).write_volatile(0) };
        }
    }
}

/// The two ring ends one side of a session uses, tied to the segment they
/// live in.
pub struct Endpoints {
    /// Where this side writes.
    pub producer: Producer<'static, RawMemory>,
    /// Where this side reads.
    pub consumer: Consumer<'static, RawMemory>,
    /// Keeps the mapping alive; declared last so it is dropped after the ring ends.
    pub segment: Arc<Segment>,
}

impl Endpoints {
    /// The ends for the client (`server == false`) or the server.
    ///
    /// # Errors
    /// When the ring headers hold values the ring cannot start from.
    pub fn new(segment: Arc<Segment>, server: bool) -> Result<Endpoints, RingError> {
        let (out, inn) = if server {
            (Direction::ServerToClient, Direction::ClientToServer)
        } else {
            (Direction::ClientToServer, Direction::ServerToClient)
        };
        // SAFETY: the references point into the mapping owned by `segment`,
        // which this struct holds until after the producer and consumer are
        // dropped (field order), and the `Arc` keeps the mapping at a fixed
        // address; so 'static never outlives the memory.
        let (out_hdr, in_hdr): (&'static RingHeader, &'static RingHeader) = unsafe {
            (
                &*std::ptr::from_ref(segment.ring_header(out)),
                &*std::ptr::from_ref(segment.ring_header(inn)),
            )
        };
        let producer = Producer::new(out_hdr, segment.ring_memory(out))?;
        let consumer = Consumer::new(in_hdr, segment.ring_memory(inn))?;
        Ok(Endpoints {
            producer,
            consumer,
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
}
