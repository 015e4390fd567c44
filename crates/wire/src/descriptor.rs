//! Descriptor bodies: the whole payload of a [`Kind::Descriptor`] frame, which
//! describes a zero-copy payload placed in a separately registered shared
//! segment instead of carrying it in the ring.
//!
//! ```text
//! offset size field
//!  0     2    version     DESCRIPTOR_VERSION (u16 LE)
//!  2     2    flags       reserved, zero
//!  4     4    slot        index into the session's table of registered segments (u32 LE)
//!  8     8    generation  the slot's generation when the segment was registered (u64 LE)
//! 16     8    offset      byte offset of the payload in that segment, a multiple of 8 (u64 LE)
//! 24     8    length      payload bytes (u64 LE)
//! ```
//!
//! Only the format and its validation exist: no code sends descriptors yet,
//! and a received descriptor frame is still refused, since the capability
//! [`CAP_DESCRIPTORS`] is never negotiated. [`Descriptor::decode`] checks the
//! body on its own; [`Descriptor::resolve`] checks it against the segment
//! table and the largest message, and yields the byte range to read.
//!
//! [`Kind::Descriptor`]: crate::frame::Kind::Descriptor
//! [`CAP_DESCRIPTORS`]: crate::handshake::CAP_DESCRIPTORS

use std::ops::Range;

use crate::le::{u16_at, u32_at, u64_at};

/// Encoded size of a descriptor body.
pub const DESCRIPTOR_LEN: usize = 32;

/// The descriptor body version this build reads and writes.
pub const DESCRIPTOR_VERSION: u16 = 1;

/// Required alignment of [`Descriptor::offset`].
const OFFSET_ALIGN: u64 = 8;

/// A decoded descriptor: where a zero-copy payload lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// Index into the session's table of registered segments.
    pub slot: u32,
    /// The slot's generation when the segment was registered; a descriptor
    /// naming an older generation refers to a segment since replaced.
    pub generation: u64,
    /// Byte offset of the payload in the segment, a multiple of 8.
    pub offset: u64,
    /// Payload bytes.
    pub length: u64,
}

/// One registered segment, as the receiver's segment table records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentEntry {
    /// The slot's generation at registration.
    pub generation: u64,
    /// Size of the segment in bytes.
    pub len: u64,
}

/// Why a descriptor body is invalid, or does not fit the segment table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptorError(pub String);
crate::le::text_error!(DescriptorError);

impl Descriptor {
    /// Encodes the body (version [`DESCRIPTOR_VERSION`], flags zero).
    pub fn encode(&self) -> [u8; DESCRIPTOR_LEN] {
        let mut b = [0u8; DESCRIPTOR_LEN];
        b[0..2].copy_from_slice(&DESCRIPTOR_VERSION.to_le_bytes());
        b[4..8].copy_from_slice(&self.slot.to_le_bytes());
        b[8..16].copy_from_slice(&self.generation.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.length.to_le_bytes());
        b
    }

    /// Decodes and validates a body: exactly [`DESCRIPTOR_LEN`] bytes, the
    /// known version, zero flags, and an offset that is a multiple of 8.
    ///
    /// # Errors
    /// [`DescriptorError`] naming the bad field and its value.
    pub fn decode(body: &[u8]) -> Result<Descriptor, DescriptorError> {
        let b: &[u8; DESCRIPTOR_LEN] = body.try_into().map_err(|_| {
            DescriptorError(format!(
                "descriptor body is {} bytes, expected {DESCRIPTOR_LEN}",
                body.len()
            ))
        })?;
        let version = u16_at(b, 0);
        if version != DESCRIPTOR_VERSION {
            return Err(DescriptorError(format!(
                "unknown descriptor version {version} (this build reads {DESCRIPTOR_VERSION})"
            )));
        }
        let flags = u16_at(b, 2);
        if flags != 0 {
            return Err(DescriptorError(format!(
                "descriptor flags {flags:#06x} are reserved and must be zero"
            )));
        }
        let d = Descriptor {
            slot: u32_at(b, 4),
            generation: u64_at(b, 8),
            offset: u64_at(b, 16),
            length: u64_at(b, 24),
        };
        d.check_alignment()?;
        Ok(d)
    }

    /// Checks the descriptor against the session's segment table (indexed by
    /// slot, `None` for a free slot) and the largest message, with checked
    /// arithmetic: a registered slot, the same generation, `offset <= len`,
    /// `offset + length <= len` without overflow, `length <= max_message`,
    /// and a range that fits in `usize`. The offset's alignment is checked
    /// again, since the fields are public.
    ///
    /// Returns the payload's byte range inside that segment.
    ///
    /// # Errors
    /// [`DescriptorError`] naming the bad value and the limit it breaks.
    pub fn resolve(
        &self,
        table: &[Option<SegmentEntry>],
        max_message: u64,
    ) -> Result<Range<usize>, DescriptorError> {
        let Descriptor {
            slot,
            generation,
            offset,
            length,
        } = *self;
        self.check_alignment()?;
        let entry = match usize::try_from(slot).ok().and_then(|i| table.get(i)) {
            None => {
                return Err(DescriptorError(format!(
                    "descriptor slot {slot} is outside the segment table ({} slots)",
                    table.len()
                )))
            }
            Some(None) => {
                return Err(DescriptorError(format!(
                    "descriptor slot {slot} has no registered segment"
                )))
            }
            Some(Some(entry)) => entry,
        };
        let len = entry.len;
        if generation != entry.generation {
            return Err(DescriptorError(format!(
                "descriptor generation {generation} of slot {slot} is stale: \
                 the slot is at generation {}",
                entry.generation
            )));
        }
        if offset > len {
            return Err(DescriptorError(format!(
                "descriptor offset {offset} is past the end of segment {slot} ({len} bytes)"
            )));
        }
        let end = offset.checked_add(length).ok_or_else(|| {
            DescriptorError(format!(
                "descriptor range {offset}+{length} overflows u64 (segment {slot} has {len} bytes)"
            ))
        })?;
        if end > len {
            return Err(DescriptorError(format!(
                "descriptor range {offset}+{length} runs past the end of segment {slot} ({len} bytes)"
            )));
        }
        if length > max_message {
            return Err(DescriptorError(format!(
                "descriptor length {length} is over the largest message ({max_message} bytes)"
            )));
        }
        match (usize::try_from(offset), usize::try_from(end)) {
            (Ok(start), Ok(end)) => Ok(start..end),
            _ => Err(DescriptorError(format!(
                "descriptor range {offset}+{length} does not fit in usize (max {})",
                usize::MAX
            ))),
        }
    }

    fn check_alignment(&self) -> Result<(), DescriptorError> {
        if !self.offset.is_multiple_of(OFFSET_ALIGN) {
            return Err(DescriptorError(format!(
                "descriptor offset {} is not a multiple of {OFFSET_ALIGN}",
                self.offset
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Descriptor = Descriptor {
        slot: 3,
        generation: 7,
        offset: 4096,
        length: 100,
    };

    /// Slots 0 and 2 free, slot 1 at generation 1, slot 3 (8 KiB) at generation 7.
    fn table() -> Vec<Option<SegmentEntry>> {
        let seg = |generation, len| Some(SegmentEntry { generation, len });
        vec![None, seg(1, 1 << 20), None, seg(7, 8192)]
    }

    #[test]
    fn round_trips() {
        let d = Descriptor {
            slot: u32::MAX,
            generation: u64::MAX,
            offset: u64::MAX - 7,
            length: u64::MAX,
        };
        assert_eq!(Descriptor::decode(&d.encode()), Ok(d));
        assert_eq!(Descriptor::decode(&D.encode()), Ok(D));
        let b = D.encode();
        assert_eq!(&b[0..4], &[1, 0, 0, 0], "version 1, zero flags");
        assert_eq!(&b[4..8], &3u32.to_le_bytes());
        assert_eq!(&b[8..16], &7u64.to_le_bytes());
        assert_eq!(&b[16..24], &4096u64.to_le_bytes());
        assert_eq!(&b[24..32], &100u64.to_le_bytes());
    }

    /// Each refusal of `decode`: `D` encoded, changed, and the message.
    #[test]
    fn decode_refusals_name_the_value() {
        type Change = fn(&mut Vec<u8>);
        let cases: [(Change, &str); 8] = [
            (|b| b.clear(), "descriptor body is 0 bytes, expected 32"),
            (
                |b| b.truncate(31),
                "descriptor body is 31 bytes, expected 32",
            ),
            (|b| b.push(0), "descriptor body is 33 bytes, expected 32"),
            (
                |b| b.resize(64, 0),
                "descriptor body is 64 bytes, expected 32",
            ),
            (
                |b| b[0] = 2,
                "unknown descriptor version 2 (this build reads 1)",
            ),
            (
                |b| b[0] = 0,
                "unknown descriptor version 0 (this build reads 1)",
            ),
            (
                |b| b[3] = 0x80,
                "descriptor flags 0x8000 are reserved and must be zero",
            ),
            (
                |b| b[16] = 0x01,
                "descriptor offset 4097 is not a multiple of 8",
            ),
        ];
        for (change, want) in cases {
            let mut b = D.encode().to_vec();
            change(&mut b);
            assert_eq!(
                Descriptor::decode(&b),
                Err(DescriptorError(want.into())),
                "{b:?}"
            );
        }
    }

    /// Each refusal of `resolve` against [`table`] with a 1 MiB limit.
    #[test]
    fn resolve_refusals_name_the_value_and_limit() {
        let cases = [
            // Misaligned (only a hand-built descriptor: decode refuses it).
            (
                Descriptor { offset: 12, ..D },
                "descriptor offset 12 is not a multiple of 8",
            ),
            // Unknown slot.
            (
                Descriptor { slot: 4, ..D },
                "descriptor slot 4 is outside the segment table (4 slots)",
            ),
            (
                Descriptor {
                    slot: u32::MAX,
                    ..D
                },
                "descriptor slot 4294967295 is outside the segment table (4 slots)",
            ),
            // Empty slot.
            (
                Descriptor { slot: 2, ..D },
                "descriptor slot 2 has no registered segment",
            ),
            // Stale generation.
            (
                Descriptor { generation: 6, ..D },
                "descriptor generation 6 of slot 3 is stale: the slot is at generation 7",
            ),
            // Offset past the end, even with nothing to read.
            (
                Descriptor {
                    offset: 8200,
                    length: 0,
                    ..D
                },
                "descriptor offset 8200 is past the end of segment 3 (8192 bytes)",
            ),
            // Range past the end.
            (
                Descriptor {
                    offset: 4096,
                    length: 8192,
                    ..D
                },
                "descriptor range 4096+8192 runs past the end of segment 3 (8192 bytes)",
            ),
        ];
        for (d, want) in cases {
            assert_eq!(
                d.resolve(&table(), 1 << 20),
                Err(DescriptorError(want.into())),
                "{d:?}"
            );
        }
        assert!(D.resolve(&[], 1 << 20).is_err(), "empty table");
    }

    #[test]
    fn refuses_overflow_at_u64_max() {
        let table = [Some(SegmentEntry {
            generation: 0,
            len: u64::MAX,
        })];
        let d = Descriptor {
            slot: 0,
            generation: 0,
            offset: u64::MAX - 7,
            length: 8,
        };
        let e = d.resolve(&table, u64::MAX).expect_err("overflow");
        assert_eq!(
            e.0,
            format!(
                "descriptor range {}+8 overflows u64 (segment 0 has {} bytes)",
                u64::MAX - 7,
                u64::MAX
            )
        );
        let d = Descriptor {
            offset: 8,
            length: u64::MAX,
            ..d
        };
        assert!(d.resolve(&table, u64::MAX).is_err());
    }

    #[test]
    fn refuses_length_over_max_message() {
        let d = Descriptor {
            slot: 1,
            generation: 1,
            offset: 0,
            length: 1000,
        };
        assert_eq!(
            d.resolve(&table(), 999),
            Err(DescriptorError(
                "descriptor length 1000 is over the largest message (999 bytes)".into()
            ))
        );
        assert_eq!(d.resolve(&table(), 1000), Ok(0..1000));
    }

    #[test]
    fn accepts_exact_fit() {
        let d = Descriptor {
            offset: 4096,
            length: 4096,
            ..D
        };
        assert_eq!(d.resolve(&table(), 1 << 20), Ok(4096..8192));
        let d = Descriptor {
            offset: 0,
            length: 8192,
            ..D
        };
        assert_eq!(d.resolve(&table(), 8192), Ok(0..8192));
    }

    #[test]
    fn accepts_zero_length() {
        let d = Descriptor { length: 0, ..D };
        assert_eq!(d.resolve(&table(), 0), Ok(4096..4096));
        let d = Descriptor {
            offset: 8192,
            length: 0,
            ..D
        };
        assert_eq!(d.resolve(&table(), 0), Ok(8192..8192), "at the very end");
    }

    #[test]
    fn resolves_a_decoded_body() {
        let d = Descriptor::decode(&D.encode()).expect("decode");
        assert_eq!(d.resolve(&table(), 1 << 20), Ok(4096..4196));
    }
}
