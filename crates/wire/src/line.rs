//! The body of a `Line` frame (kind 9, id 0, capability bit 7), 40 bytes:
//!
//! ```text
//! offset size field
//!  0     4    op         1 ask, 2 grant, 3 deny, 4 revoke, 5 returned (u32 LE)
//!  4     4    reserved   zero
//!  8     8    line       the line's id (u64 LE); 0 in an ask and a deny
//! 16     4    ring_c2s   grant: the line's caller-to-worker ring size; else 0
//! 20     4    ring_s2c   grant: the line's worker-to-caller ring size; else 0
//! 24     8    value      grant: the largest message the other end accepts;
//!                        returned: the calls served on the line; else 0
//! 32     4    limit      grant to a worker: calls it may serve on the line
//!                        (0: no limit); grant to a caller: the call timeout
//!                        in ms (0: none); else 0
//! 36     4    reserved   zero
//! ```
//!
//! A grant carries two descriptors (`fds = 2`): its end of the line's
//! socket pair, then the line's segment (a sealed memfd). No other op
//! carries any.

use crate::le::{u32_at, u64_at};

/// Size of a line body.
pub const LINE_LEN: usize = 40;
/// Descriptors a grant carries.
pub const GRANT_FDS: usize = 2;

/// What a line frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Caller to server: lend me a worker.
    Ask = 1,
    /// Server to caller, supervisor to worker: here is a line.
    Grant = 2,
    /// Server to caller: no line now.
    Deny = 3,
    /// Supervisor to worker: give the line back after the call in hand.
    Revoke = 4,
    /// Worker to supervisor: the line is closed.
    Returned = 5,
}

/// A line body, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineBody {
    /// What it says.
    pub op: Op,
    /// The line's id (0 in an ask and a deny).
    pub line: u64,
    /// Grant: the caller-to-worker ring size.
    pub ring_c2s: u32,
    /// Grant: the worker-to-caller ring size.
    pub ring_s2c: u32,
    /// Grant: the other end's largest message; returned: calls served.
    pub value: u64,
    /// Grant: calls allowed (to a worker) or call timeout in ms (to a caller).
    pub limit: u32,
}

impl LineBody {
    /// A body of `op` for `line` with every other field zero.
    pub fn of(op: Op, line: u64) -> LineBody {
        LineBody {
            op,
            line,
            ring_c2s: 0,
            ring_s2c: 0,
            value: 0,
            limit: 0,
        }
    }

    /// Encodes the body.
    pub fn encode(&self) -> [u8; LINE_LEN] {
        let mut b = [0u8; LINE_LEN];
        b[0..4].copy_from_slice(&(self.op as u32).to_le_bytes());
        b[8..16].copy_from_slice(&self.line.to_le_bytes());
        b[16..20].copy_from_slice(&self.ring_c2s.to_le_bytes());
        b[20..24].copy_from_slice(&self.ring_s2c.to_le_bytes());
        b[24..32].copy_from_slice(&self.value.to_le_bytes());
        b[32..36].copy_from_slice(&self.limit.to_le_bytes());
        b
    }

    /// Decodes a body with `fds` descriptors attached.
    ///
    /// # Errors
    /// A wrong size, an unknown op, non-zero reserved bytes, a field an op
    /// does not use that is not zero, descriptors on anything but a grant
    /// or a grant without its two.
    pub fn decode(b: &[u8], fds: usize) -> Result<LineBody, String> {
        if b.len() != LINE_LEN {
            return Err(format!(
                "line frame of {} bytes; a line body has {LINE_LEN}",
                b.len()
            ));
        }
        let op = match u32_at(b, 0) {
            1 => Op::Ask,
            2 => Op::Grant,
            3 => Op::Deny,
            4 => Op::Revoke,
            5 => Op::Returned,
            other => return Err(format!("line frame with unknown op {other}")),
        };
        if u32_at(b, 4) != 0 || u32_at(b, 36) != 0 {
            return Err("line frame with non-zero reserved bytes".into());
        }
        let body = LineBody {
            op,
            line: u64_at(b, 8),
            ring_c2s: u32_at(b, 16),
            ring_s2c: u32_at(b, 20),
            value: u64_at(b, 24),
            limit: u32_at(b, 32),
        };
        let want_fds = if op == Op::Grant { GRANT_FDS } else { 0 };
        if fds != want_fds {
            return Err(format!(
                "line {op:?} with {fds} file descriptors; it carries {want_fds}"
            ));
        }
        let rings = body.ring_c2s != 0 || body.ring_s2c != 0;
        let fine = match op {
            Op::Ask | Op::Deny => body == LineBody::of(op, 0),
            Op::Grant => body.line != 0 && body.ring_c2s != 0 && body.ring_s2c != 0,
            Op::Revoke => body.line != 0 && !rings && body.value == 0 && body.limit == 0,
            Op::Returned => body.line != 0 && !rings && body.limit == 0,
        };
        if !fine {
            return Err(format!(
                "line {op:?} with fields it does not use set, or without its line id: {body:?}"
            ));
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_and_bad_ones_are_refused() {
        let grant = LineBody {
            op: Op::Grant,
            line: 3,
            ring_c2s: 65536,
            ring_s2c: 65536,
            value: 1 << 20,
            limit: 1000,
        };
        assert_eq!(LineBody::decode(&grant.encode(), 2), Ok(grant));
        assert!(LineBody::decode(&grant.encode(), 0)
            .unwrap_err()
            .contains("carries 2"));
        let ask = LineBody::of(Op::Ask, 0);
        assert_eq!(LineBody::decode(&ask.encode(), 0), Ok(ask));
        assert!(LineBody::decode(&LineBody::of(Op::Ask, 5).encode(), 0).is_err());
        assert!(LineBody::decode(&LineBody::of(Op::Revoke, 0).encode(), 0).is_err());
        let mut bad = ask.encode();
        bad[0] = 9;
        assert!(LineBody::decode(&bad, 0)
            .unwrap_err()
            .contains("unknown op 9"));
        bad = ask.encode();
        bad[5] = 1;
        assert!(LineBody::decode(&bad, 0).unwrap_err().contains("reserved"));
        assert!(LineBody::decode(&[0u8; 39], 0)
            .unwrap_err()
            .contains("39 bytes"));
    }
}
