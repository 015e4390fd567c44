//! The encodings an HTTP request and response travel in between the server
//! and the application (docs/protocol.md, "HTTP calls"), and what a pool
//! hands down in `SHMLINK_HTTP`, on arbitrary bytes. Input: 1 byte choosing
//! the decoder (byte % 3: request, response, handed-down value), then the
//! bytes.
//!
//! Never panics; what is accepted encodes back to exactly its bytes (the
//! handed-down value: to a value that decodes to the same).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_http::Handed;
use shmlink_wire::http::{Request, Response, ResponseView};

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(r) = Request::decode(bytes) {
                assert_eq!(r.encode(), bytes, "request round trip");
            }
        }
        1 => {
            let view = ResponseView::parse(bytes);
            let full = Response::decode(bytes);
            assert_eq!(view.is_ok(), full.is_ok(), "the view and the decoder agree");
            if let Ok(r) = full {
                let mut out = Vec::new();
                r.encode_into(&mut out);
                assert_eq!(out, bytes, "response round trip");
                assert_eq!(view.map(|v| v.body.len()).ok(), Some(r.body.len()));
            }
        }
        _ => {
            let Ok(text) = std::str::from_utf8(bytes) else {
                return;
            };
            if let Ok(h) = Handed::decode(text) {
                assert_eq!(
                    Handed::decode(&h.encode()).ok(),
                    Some(h),
                    "handed-down round trip"
                );
            }
        }
    }
});
