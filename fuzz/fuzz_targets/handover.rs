//! The hand-over's decoders (docs/protocol.md, "Hand-over") on arbitrary
//! bytes, as a successor or a server reads them from a peer. Input: 1 byte
//! choosing the decoder (byte % 5: ask, offer, listener record, session
//! record within an offer of 2 listeners and next session 9, refusal),
//! then the bytes.
//!
//! Never panics; what is accepted encodes back to exactly its bytes (a
//! refusal: its announced text length is within the limit).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_wire::handover::{
    decode_refusal, Ask, ListenerRecord, Offer, SessionRecord, LISTENER_LEN, MAX_HANDOVER_TEXT,
    MAX_READ_AHEAD, REFUSAL_LEN, SESSION_STREAM,
};

fuzz_target!(|data: &[u8]| {
    let Some((&which, b)) = data.split_first() else {
        return;
    };
    match which % 5 {
        0 => {
            if let Ok(a) = Ask::decode(b) {
                assert_eq!(&a.encode()[..], b);
            }
        }
        1 => {
            if let Ok(o) = Offer::decode(b) {
                assert_eq!(&o.encode()[..], b);
                assert!(o.listeners > 0 && o.next_session > 0);
            }
        }
        2 => {
            if b.len() >= LISTENER_LEN {
                if let Ok(r) = ListenerRecord::decode(&b[..LISTENER_LEN], &b[LISTENER_LEN..]) {
                    assert_eq!(r.encode(), b);
                }
            }
        }
        3 => {
            if let Ok(r) = SessionRecord::decode(b, 2, 9) {
                assert_eq!(&r.encode()[..], b);
                assert!(r.id > 0 && r.id < 9 && r.listener < 2);
                // A stream session carries its socket alone, no rings, and
                // at most MAX_READ_AHEAD bytes after it; another none.
                if r.flags & SESSION_STREAM != 0 {
                    assert!(r.fds() == 1 && r.ring_c2s == 0 && r.read_ahead <= MAX_READ_AHEAD);
                } else {
                    assert_eq!(r.read_ahead, 0);
                }
            }
        }
        _ => {
            if b.len() >= REFUSAL_LEN {
                if let Ok(len) = decode_refusal(&b[..REFUSAL_LEN]) {
                    assert!(len <= MAX_HANDOVER_TEXT);
                }
            }
        }
    }
});
