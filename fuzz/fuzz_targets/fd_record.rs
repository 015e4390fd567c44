//! `FdRecord::decode` (the record announcing a message's descriptors on an
//! `shm:` control socket, capability bit 4) on arbitrary bytes.
//!
//! Never panics; bytes are accepted exactly when an independent reading of
//! docs/protocol.md "File descriptors" accepts them (16 bytes starting
//! `SLFD`), and an accepted record re-encodes to exactly its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::{FdRecord, FD_RECORD_LEN};

fuzz_target!(|data: &[u8]| {
    let spec_accepts = data.len() == FD_RECORD_LEN && data.starts_with(b"SLFD");
    match FdRecord::decode(data) {
        Some(r) => {
            assert!(spec_accepts, "accepted {data:02x?}");
            assert_eq!(&r.encode()[..], data, "does not re-encode to its bytes");
        }
        None => assert!(!spec_accepts, "refused {data:02x?}"),
    }
});
