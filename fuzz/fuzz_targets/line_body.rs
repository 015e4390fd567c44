//! `LineBody::decode` (the body of a `Line` frame, capability bit 7) on
//! arbitrary bytes. Input:
//!
//! ```text
//! 1 byte   descriptors that came with the frame: byte % 4 (0..=3)
//! rest     the body (any length; only 40 bytes can be accepted)
//! ```
//!
//! Never panics; a body is accepted exactly when an independent reading of
//! docs/protocol.md "Direct lines" accepts it (40 bytes, a known op,
//! reserved bytes zero, two descriptors on a grant and none on anything
//! else, the line id where the op needs one and the fields it does not use
//! zero), and an accepted body re-encodes to exactly its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::{LineBody, LINE_LEN};

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from(u32_at(b, o)) | (u64::from(u32_at(b, o + 4)) << 32)
}

/// docs/protocol.md's rules, written apart from the decoder.
fn acceptable(b: &[u8], fds: usize) -> bool {
    if b.len() != LINE_LEN || u32_at(b, 4) != 0 || u32_at(b, 36) != 0 {
        return false;
    }
    let (op, line) = (u32_at(b, 0), u64_at(b, 8));
    let (c2s, s2c, value, limit) = (u32_at(b, 16), u32_at(b, 20), u64_at(b, 24), u32_at(b, 32));
    let no_rings = c2s == 0 && s2c == 0;
    match op {
        1 | 3 => fds == 0 && line == 0 && no_rings && value == 0 && limit == 0,
        2 => fds == 2 && line != 0 && c2s != 0 && s2c != 0,
        4 => fds == 0 && line != 0 && no_rings && value == 0 && limit == 0,
        5 => fds == 0 && line != 0 && no_rings && limit == 0,
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, body)) = data.split_first() else {
        return;
    };
    let fds = usize::from(n % 4);
    let want = acceptable(body, fds);
    match LineBody::decode(body, fds) {
        Ok(d) => {
            assert!(want, "accepted {body:02x?} with {fds} descriptors as {d:?}");
            assert_eq!(&d.encode()[..], body, "round trip of {d:?}");
        }
        Err(e) => {
            assert!(!want, "refused {body:02x?} with {fds} descriptors: {e}");
            assert!(!e.is_empty());
        }
    }
});
