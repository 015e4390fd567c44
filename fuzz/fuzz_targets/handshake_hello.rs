//! `Hello::decode` on arbitrary bytes: never panics; what it accepts
//! re-encodes byte-exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::{Hello, HELLO_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = Hello::decode(data) else {
        return;
    };
    assert_eq!(data.len(), HELLO_LEN);
    assert_eq!(&h.encode()[..], data, "round trip of {h:?}");
    assert!(h.version_min <= h.version_max);
    assert_eq!(Hello::decode(&h.encode()), Ok(h));
});
