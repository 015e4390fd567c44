//! `Welcome::decode_fixed` + `with_text` as the client reads a welcome: the
//! fixed 56 bytes, then the announced refusal text (truncated to what the
//! input has). Never panics; the announced text length is at most 1024; an
//! accepted welcome re-encodes byte-exactly; a refusal re-encodes to one that
//! decodes to the same code and a prefix of the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::{Welcome, MAX_REFUSAL_TEXT, WELCOME_LEN};

fuzz_target!(|data: &[u8]| {
    let fixed = &data[..data.len().min(WELCOME_LEN)];
    let Ok((w, text_len)) = Welcome::decode_fixed(fixed) else {
        return;
    };
    assert_eq!(fixed.len(), WELCOME_LEN);
    assert!(
        text_len <= MAX_REFUSAL_TEXT,
        "text of {text_len} bytes accepted"
    );
    let text = &data[WELCOME_LEN..data.len().min(WELCOME_LEN + text_len)];
    let w = w.with_text(text);
    let enc = w.encode();
    match &w {
        Welcome::Accepted { .. } => {
            assert_eq!(text_len, 0);
            assert_eq!(&enc[..], fixed, "round trip of {w:?}");
        }
        Welcome::Refused { code, message } => {
            assert!(enc.len() <= WELCOME_LEN + MAX_REFUSAL_TEXT);
            let (again, n) = Welcome::decode_fixed(&enc[..WELCOME_LEN]).expect("re-decode");
            assert_eq!(n, enc.len() - WELCOME_LEN);
            match again.with_text(&enc[WELCOME_LEN..]) {
                Welcome::Refused {
                    code: code2,
                    message: message2,
                } => {
                    assert_eq!(code2, *code);
                    assert!(message.starts_with(&message2), "text not a prefix");
                    if message.len() <= MAX_REFUSAL_TEXT {
                        assert_eq!(&message2, message);
                    }
                }
                other => panic!("refusal re-decoded as {other:?}"),
            }
        }
    }
});
