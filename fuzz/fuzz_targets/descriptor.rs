//! `Descriptor::decode` and `Descriptor::resolve` on arbitrary bytes. Input:
//!
//! ```text
//! 1 byte   number of slots in the segment table: byte % 5 (0..=4)
//! 8 bytes  max_message (u64 LE)
//! per slot, 17 bytes: tag (even: free slot, None; odd: registered),
//!          generation (u64 LE), segment length (u64 LE)
//! rest     the descriptor body (any length; only 32 bytes can be accepted)
//! ```
//!
//! Never panics; an accepted body is exactly 32 bytes, re-encodes to exactly
//! those bytes and decodes again to the same descriptor; `resolve` accepts
//! exactly when an independent u128 check of slot, generation, bounds and
//! max_message does, and a resolved range starts at the offset, has the
//! descriptor's length (≤ max_message) and lies within its segment.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::{Descriptor, SegmentEntry, DESCRIPTOR_LEN};

fn u64_at(data: &mut &[u8]) -> Option<u64> {
    let (word, rest) = data.split_first_chunk::<8>()?;
    *data = rest;
    Some(u64::from_le_bytes(*word))
}

/// The segment table and max_message at the front of the input; `data` is
/// left at the descriptor body.
fn table(data: &mut &[u8]) -> Option<(Vec<Option<SegmentEntry>>, u64)> {
    let (&n, rest) = data.split_first()?;
    *data = rest;
    let max_message = u64_at(data)?;
    let mut table = Vec::new();
    for _ in 0..n % 5 {
        let (&tag, rest) = data.split_first()?;
        *data = rest;
        let generation = u64_at(data)?;
        let len = u64_at(data)?;
        table.push((tag % 2 == 1).then_some(SegmentEntry { generation, len }));
    }
    Some((table, max_message))
}

fuzz_target!(|data: &[u8]| {
    let mut body = data;
    let Some((table, max_message)) = table(&mut body) else {
        return;
    };
    let Ok(d) = Descriptor::decode(body) else {
        return;
    };
    assert_eq!(
        body.len(),
        DESCRIPTOR_LEN,
        "accepted a body of another length"
    );
    assert_eq!(&d.encode()[..], body, "round trip of {d:?}");
    assert_eq!(Descriptor::decode(&d.encode()), Ok(d));
    assert_eq!(d.offset % 8, 0, "misaligned offset in {d:?}");

    let entry = usize::try_from(d.slot)
        .ok()
        .and_then(|i| table.get(i).copied().flatten());
    let end = u128::from(d.offset) + u128::from(d.length);
    let expected = entry.is_some_and(|e| {
        e.generation == d.generation
            && end <= u128::from(e.len)
            && d.length <= max_message
            && usize::try_from(end).is_ok()
    });
    match d.resolve(&table, max_message) {
        Ok(range) => {
            assert!(expected, "{d:?} resolved in {table:?} (max {max_message})");
            let e = entry.expect("resolved a free or unknown slot");
            assert_eq!(range.start as u64, d.offset, "start of {d:?}");
            assert_eq!(range.len() as u64, d.length, "length of {d:?}");
            assert!(range.end as u64 <= e.len, "{range:?} past {e:?}");
            assert!(
                range.len() as u64 <= max_message,
                "{range:?} over {max_message}"
            );
        }
        Err(e) => {
            assert!(
                !expected,
                "{d:?} refused in {table:?} (max {max_message}): {e}"
            );
            assert!(!e.0.is_empty());
        }
    }
});
