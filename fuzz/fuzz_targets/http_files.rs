//! What the HTTP server makes of a request's path and its conditional and
//! range headers when it sends files itself (docs/protocol.md, "Files the
//! server sends"), on arbitrary bytes. Input: 1 byte choosing (even: a
//! request target; odd: a file size from the next 8 bytes, then
//! NUL-separated `Range`, `If-Range`, `If-None-Match`,
//! `If-Modified-Since`).
//!
//! Never panics; a path is relative and never climbs (`..`, a root, a NUL);
//! the bytes sent always lie within the file and are never none for a 206.
#![no_main]

use std::path::Component;

use libfuzzer_sys::fuzz_target;
use shmlink_http::fuzzing::{file_path, file_range};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        let Ok(target) = std::str::from_utf8(rest) else {
            return;
        };
        if let Some(p) = file_path(target) {
            assert!(
                p.components().all(|c| matches!(c, Component::Normal(_))),
                "{target:?} gave {p:?}"
            );
            assert!(!p.as_os_str().as_encoded_bytes().contains(&0));
        }
        return;
    }
    if rest.len() < 8 {
        return;
    }
    let (size, text) = rest.split_at(8);
    let size = u64::from_le_bytes(size.try_into().expect("8 bytes")) >> 8;
    let text = String::from_utf8_lossy(text);
    let mut parts = text.split('\0').map(|s| (!s.is_empty()).then_some(s));
    let mut next = || parts.next().flatten();
    let (range, if_range, inm, ims) = (next(), next(), next(), next());
    if let Some((start, len)) = file_range(range, if_range, inm, ims, size, 1_700_000_000) {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= size),
            "{start}+{len} > {size}"
        );
        if start != 0 || len != size {
            assert!(len > 0, "an empty range is a 416");
        }
    }
});
