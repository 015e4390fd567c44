//! `FrameHeader::decode` on arbitrary bytes: never panics; whatever it accepts
//! re-encodes to exactly the first 24 input bytes (reserved bytes must be zero
//! and nothing is normalised, so the round trip is byte-exact).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::{FrameHeader, FLAG_MORE, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = FrameHeader::decode(data) else {
        return;
    };
    assert!(data.len() >= HEADER_LEN, "accepted a short header");
    assert_eq!(&h.encode()[..], &data[..HEADER_LEN], "round trip of {h:?}");
    assert!(u64::from(h.len) <= h.total, "len over total in {h:?}");
    assert_eq!(h.flags & !FLAG_MORE, 0, "unknown flags in {h:?}");
    assert_eq!(h.more(), h.flags & FLAG_MORE != 0);
    assert_eq!(FrameHeader::decode(&h.encode()), Ok(h));
});
