//! `Report::decode` (the inspection report, capability bit 8) on arbitrary
//! bytes: the whole report as a client reads it after the welcome.
//!
//! Never panics; a report is accepted exactly when an independent reading
//! of docs/protocol.md "Inspection" accepts it (the magic, version 1,
//! header and record lengths from 96 to 4096, reserved bytes zero, at most
//! 65,536 records, exactly the announced length, each record with a known
//! transport, known flags, reserved bytes zero and fills within their
//! rings); an accepted report of this build's lengths re-encodes to exactly
//! its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::Report;

fn u16_at(b: &[u8], o: usize) -> usize {
    usize::from(u16::from_le_bytes([b[o], b[o + 1]]))
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// docs/protocol.md's rules, written apart from the decoder.
fn acceptable(b: &[u8]) -> bool {
    if b.len() < 96 || &b[0..8] != b"SHMLNKIR" || u16_at(b, 8) != 1 {
        return false;
    }
    let (header, record) = (u16_at(b, 10), u16_at(b, 12));
    let n = u32_at(b, 16) as usize;
    if !(96..=4096).contains(&header) || !(96..=4096).contains(&record) {
        return false;
    }
    if u16_at(b, 14) != 0 || u32_at(b, 84) != 0 || n > 65_536 {
        return false;
    }
    if b.len() != header + n * record {
        return false;
    }
    (0..n).all(|i| {
        let r = &b[header + i * record..];
        matches!(r[16], 1..=3)
            && r[17] <= 1
            && r[18..24].iter().all(|&x| x == 0)
            && u32_at(r, 68) <= u32_at(r, 64)
            && u32_at(r, 76) <= u32_at(r, 72)
    })
}

fuzz_target!(|data: &[u8]| {
    let want = acceptable(data);
    match Report::decode(data) {
        Ok(r) => {
            assert!(want, "accepted {} bytes as {r:?}", data.len());
            if u16_at(data, 10) == 96 && u16_at(data, 12) == 96 {
                assert_eq!(r.encode(), data, "round trip of {r:?}");
            }
        }
        Err(e) => {
            assert!(!want, "refused {} acceptable bytes: {e}", data.len());
            assert!(!e.0.is_empty());
        }
    }
});
