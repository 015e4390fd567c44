//! The arena's other two frame bodies (capability bit 2), beside the
//! descriptor body of [`crate::descriptor`]:
//!
//! A **segment notice** (kind 7, id 0, 16 bytes), sent by the owner of an
//! arena segment before any descriptor names it, with the segment's memfd
//! attached (`fds = 1`), or, to retire it, without (`fds = 0`):
//!
//! ```text
//! offset size field
//!  0     4    slot        the segment's slot (u32 LE)
//!  4     4    flags       bit 0 RETIRE; other bits zero (u32 LE)
//!  8     8    generation  the segment's generation (u64 LE)
//! ```
//!
//! A **release** (kind 8, id 0, 24 × n bytes, n ≥ 1), sent by the reader of
//! lent buffers to their owner when done with them:
//!
//! ```text
//! offset size field            (repeated n times)
//!  0     4    slot        (u32 LE)
//!  4     4    reserved, zero
//!  8     8    generation  (u64 LE)
//! 16     8    offset      (u64 LE)
//! ```

use crate::le::{u32_at, u64_at};

/// Size of a segment notice body.
pub const NOTICE_LEN: usize = 16;
/// Flag of a notice that retires its segment.
pub const NOTICE_RETIRE: u32 = 1;
/// Size of one entry of a release body.
pub const RELEASE_LEN: usize = 24;

/// A decoded segment notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentNotice {
    /// The segment's slot.
    pub slot: u32,
    /// Whether it retires the segment (else it registers it).
    pub retire: bool,
    /// The segment's generation.
    pub generation: u64,
}

/// Why an arena body is malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArenaWireError(pub String);
crate::le::text_error!(ArenaWireError);

impl SegmentNotice {
    /// Encodes the body.
    pub fn encode(&self) -> [u8; NOTICE_LEN] {
        let mut b = [0u8; NOTICE_LEN];
        b[0..4].copy_from_slice(&self.slot.to_le_bytes());
        let flags = if self.retire { NOTICE_RETIRE } else { 0 };
        b[4..8].copy_from_slice(&flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.generation.to_le_bytes());
        b
    }

    /// Decodes a body: exactly [`NOTICE_LEN`] bytes, known flags.
    ///
    /// # Errors
    /// [`ArenaWireError`] naming what is wrong.
    pub fn decode(b: &[u8]) -> Result<SegmentNotice, ArenaWireError> {
        if b.len() != NOTICE_LEN {
            return Err(ArenaWireError(format!(
                "segment notice of {} bytes, expected {NOTICE_LEN}",
                b.len()
            )));
        }
        let flags = u32_at(b, 4);
        if flags & !NOTICE_RETIRE != 0 {
            return Err(ArenaWireError(format!(
                "segment notice flags {flags:#x}: only bit 0 (retire) is defined"
            )));
        }
        Ok(SegmentNotice {
            slot: u32_at(b, 0),
            retire: flags & NOTICE_RETIRE != 0,
            generation: u64_at(b, 8),
        })
    }
}

/// Encodes a release body of `keys` (slot, generation, offset).
pub fn encode_release(keys: &[(u32, u64, u64)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(keys.len() * RELEASE_LEN);
    for &(slot, generation, offset) in keys {
        b.extend_from_slice(&slot.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&generation.to_le_bytes());
        b.extend_from_slice(&offset.to_le_bytes());
    }
    b
}

/// Decodes a release body into (slot, generation, offset) entries.
///
/// # Errors
/// [`ArenaWireError`] for an empty body, a length that is not a multiple of
/// [`RELEASE_LEN`], or a non-zero reserved field.
pub fn decode_release(b: &[u8]) -> Result<Vec<(u32, u64, u64)>, ArenaWireError> {
    if b.is_empty() || !b.len().is_multiple_of(RELEASE_LEN) {
        return Err(ArenaWireError(format!(
            "release body of {} bytes: expected a non-zero multiple of {RELEASE_LEN}",
            b.len()
        )));
    }
    b.chunks_exact(RELEASE_LEN)
        .enumerate()
        .map(|(i, e)| {
            if u32_at(e, 4) != 0 {
                return Err(ArenaWireError(format!(
                    "release entry {i}: reserved bytes are not zero"
                )));
            }
            Ok((u32_at(e, 0), u64_at(e, 8), u64_at(e, 16)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn the_examples_are_the_ones_in_the_protocol() {
        // docs/protocol.md, "Arena": a notice and a release.
        let n = SegmentNotice {
            slot: 0,
            retire: false,
            generation: 1,
        };
        assert_eq!(hex(&n.encode()), "00000000000000000100000000000000");
        assert_eq!(
            hex(&encode_release(&[(0, 1, 0), (0, 1, 131072)])),
            "0000000000000000010000000000000000000000000000000000000000000000\
             01000000000000000000020000000000"
        );
    }

    #[test]
    fn bodies_round_trip_and_refuse_garbage() {
        let n = SegmentNotice {
            slot: 3,
            retire: true,
            generation: 9,
        };
        assert_eq!(SegmentNotice::decode(&n.encode()), Ok(n));
        let mut bad = n.encode();
        bad[4] = 2;
        assert!(SegmentNotice::decode(&bad).is_err());
        assert!(SegmentNotice::decode(&bad[..15]).is_err());
        let keys = [(1, 2, 4096), (7, 8, 0)];
        assert_eq!(decode_release(&encode_release(&keys)), Ok(keys.to_vec()));
        assert!(decode_release(&[]).is_err());
        assert!(decode_release(&[0; 25]).is_err());
        let mut r = encode_release(&keys);
        r[28] = 1;
        assert!(decode_release(&r).is_err());
    }
}
