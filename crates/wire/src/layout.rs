//! The layout of a session segment, as plain values: where the header, the
//! two ring headers and the two data areas lie for given ring sizes. Both
//! sides compute it; the server writes the header, the client compares.
//!
//! ```text
//! 0      SegmentHeader (72 bytes)
//! 512    RingHeader, client -> server  (768 bytes)
//! 1280   RingHeader, server -> client  (768 bytes)
//! 4096   data of the client -> server ring (c2s bytes)
//! 4096+c2s  data of the server -> client ring (s2c bytes)
//! ```

use crate::le::{u32_at, u64_at};

/// Identifies a shmlink segment: "SHMLSEG\0".
pub const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"SHMLSEG\0");
/// Version of this layout; bumped on any change.
pub const LAYOUT_VERSION: u32 = 1;
/// Encoded size of [`SegmentHeader`].
pub const SEGMENT_HEADER_LEN: usize = 72;
/// Offset of the first ring header.
pub const RING_HEADERS_AT: usize = 512;
/// Offset of the first ring's data.
pub const DATA_AT: usize = 4096;
/// Size of a ring header (the ring crate's `RingHeader`, which the core
/// checks against this at compile time).
pub const RING_HEADER_LEN: usize = 768;
/// Alignment of a ring header.
pub const RING_HEADER_ALIGN: usize = 128;

/// The first bytes of a segment, as `#[repr(C)]` (every field little-endian
/// on the little-endian machines shmlink runs on).
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

const _: () = assert!(std::mem::size_of::<SegmentHeader>() == SEGMENT_HEADER_LEN);
const _: () = assert!(RING_HEADERS_AT >= SEGMENT_HEADER_LEN);
const _: () = assert!(RING_HEADERS_AT + 2 * RING_HEADER_LEN <= DATA_AT);
const _: () = assert!(RING_HEADERS_AT.is_multiple_of(RING_HEADER_ALIGN));
const _: () = assert!(RING_HEADER_LEN.is_multiple_of(RING_HEADER_ALIGN));

impl SegmentHeader {
    /// The layout for the given ring sizes.
    pub fn for_rings(c2s: usize, s2c: usize) -> SegmentHeader {
        let (c2s, s2c) = (c2s as u64, s2c as u64);
        let ring = RING_HEADER_LEN as u64;
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

    /// The header's bytes, as they lie at offset 0 of the segment.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut b = [0u8; SEGMENT_HEADER_LEN];
        b[0..8].copy_from_slice(&self.magic.to_le_bytes());
        b[8..12].copy_from_slice(&self.layout_version.to_le_bytes());
        b[12..16].copy_from_slice(&self.reserved.to_le_bytes());
        let words = [
            self.total_len,
            self.c2s_header,
            self.c2s_data,
            self.c2s_len,
            self.s2c_header,
            self.s2c_data,
            self.s2c_len,
        ];
        for (i, w) in words.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Reads the fields from the first [`SEGMENT_HEADER_LEN`] bytes of `b`
    /// (no check of their values: compare with [`SegmentHeader::for_rings`]).
    /// `None` when `b` is shorter.
    pub fn decode(b: &[u8]) -> Option<SegmentHeader> {
        let b = b.get(..SEGMENT_HEADER_LEN)?;
        let w = |i: usize| u64_at(b, 16 + 8 * i);
        Some(SegmentHeader {
            magic: u64_at(b, 0),
            layout_version: u32_at(b, 8),
            reserved: u32_at(b, 12),
            total_len: w(0),
            c2s_header: w(1),
            c2s_data: w(2),
            c2s_len: w(3),
            s2c_header: w(4),
            s2c_data: w(5),
            s2c_len: w(6),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_match_the_repr_c_struct_and_round_trip() {
        let h = SegmentHeader::for_rings(4096, 8192);
        let b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Some(h));
        assert_eq!(&b[0..8], b"SHMLSEG\0");
        assert_eq!(SegmentHeader::decode(&b[..71]), None);
        // The encoding is the in-memory layout of the #[repr(C)] struct.
        assert_eq!(std::mem::offset_of!(SegmentHeader, total_len), 16);
        assert_eq!(std::mem::offset_of!(SegmentHeader, s2c_len), 64);
        assert_eq!(h.s2c_data, 4096 + 4096);
        assert_eq!(h.total_len, 4096 + 4096 + 8192);
    }
}
