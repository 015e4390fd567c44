//! Release bodies and segment notices from a hostile peer, against an owner
//! that lent a few buffers. Input:
//!
//! ```text
//! 1 byte   how many buffers the owner lends first: byte % 5 (0..=4)
//! rest     a release body (any length), also decoded as a segment notice
//! ```
//!
//! Never panics; a decoded release has exactly len / 24 entries and
//! re-encodes to the same bytes; the owner accepts an entry exactly when it
//! names a buffer still lent in that generation, and each accepted buffer is
//! lent no more (a second release of it is refused).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_arena::{Key, Owner};
use shmlink_wire::{decode_release, encode_release, SegmentNotice, RELEASE_LEN};

fuzz_target!(|data: &[u8]| {
    let Some((&n, body)) = data.split_first() else {
        return;
    };
    if let Ok(notice) = SegmentNotice::decode(body) {
        assert_eq!(&notice.encode()[..], body);
    }
    let owner = Owner::new(64 << 20);
    let lent: Vec<Key> = (0..n % 5)
        .filter_map(|i| owner.loan(4096 << i).ok())
        .map(|loan| owner.lend(loan))
        .collect();
    let Ok(entries) = decode_release(body) else {
        return;
    };
    assert_eq!(entries.len(), body.len() / RELEASE_LEN);
    assert!(!entries.is_empty());
    assert_eq!(encode_release(&entries), body);
    let mut still: Vec<Key> = lent.clone();
    for (slot, generation, offset) in entries {
        let key = Key {
            slot,
            generation,
            offset,
        };
        let was_lent = still.contains(&key);
        match owner.release(key) {
            Ok(()) => {
                assert!(was_lent, "released {key:?}, never lent");
                still.retain(|k| *k != key);
            }
            Err(e) => assert!(!was_lent, "refused {key:?}, which was lent: {e}"),
        }
    }
    assert_eq!(owner.lent_count(), still.len());
});
