//! The record that announces a message's file descriptors on an `shm:`
//! session's control socket (capability bit 4): the frame goes through the
//! ring, its descriptors through the control socket in this record, sent
//! just before the frame is pushed.
//!
//! ```text
//! offset size field
//!  0     4    magic  "SLFD"
//!  4     4    count  descriptors attached (u32 LE), the frame's `fds`
//!  8     8    id     the frame's call id (u64 LE)
//! ```

use crate::le::{u32_at, u64_at};

/// Size of the record.
pub const FD_RECORD_LEN: usize = 16;
/// The record's first bytes.
pub const FD_RECORD_MAGIC: [u8; 4] = *b"SLFD";

/// A descriptor record: `count` descriptors of call `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdRecord {
    /// The frame's call id.
    pub id: u64,
    /// How many descriptors came with it.
    pub count: u32,
}

impl FdRecord {
    /// The record's bytes.
    pub fn encode(&self) -> [u8; FD_RECORD_LEN] {
        let mut b = [0u8; FD_RECORD_LEN];
        b[0..4].copy_from_slice(&FD_RECORD_MAGIC);
        b[4..8].copy_from_slice(&self.count.to_le_bytes());
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b
    }

    /// The record in `b`, or `None` when `b` is not one (another length,
    /// another magic).
    pub fn decode(b: &[u8]) -> Option<FdRecord> {
        (b.len() == FD_RECORD_LEN && b[0..4] == FD_RECORD_MAGIC).then(|| FdRecord {
            count: u32_at(b, 4),
            id: u64_at(b, 8),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_the_one_in_the_protocol() {
        // docs/protocol.md, "File descriptors": 2 descriptors with call 4.
        let want = "534c4644020000000400000000000000";
        let r = FdRecord { id: 4, count: 2 };
        let got: String = r.encode().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want);
        assert_eq!(FdRecord::decode(&r.encode()), Some(r));
        assert_eq!(FdRecord::decode(&r.encode()[..15]), None);
        let mut bad = r.encode();
        bad[0] = b'X';
        assert_eq!(FdRecord::decode(&bad), None);
    }
}
