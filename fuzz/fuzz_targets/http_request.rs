//! What the HTTP engine makes of a client's bytes (a request head parsed by
//! httparse and checked against HTTP/1.1's framing rules, then its body,
//! `Content-Length` or chunked), read in pieces. Input:
//!
//! ```text
//! 1 byte   pieces: byte % 8 reads before the rest comes in one
//! n bytes  each piece's length (byte, as is)
//! rest     the bytes the client sent
//! ```
//!
//! Never panics; a request it accepts decodes (`wire::Request::decode`) to
//! the method it was sent with and a body within the limit;
//! a refusal is one of 400, 413, 431; the same bytes read in one piece give
//! the same outcome.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_http::fuzzing::request;
use shmlink_wire::http::Request;

const MAX_BODY: usize = 4096;
const MAX_HEADER: usize = 8192;

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 8).min(rest.len());
    let (cuts, bytes) = rest.split_at(n);
    let pieces: Vec<usize> = cuts.iter().map(|&c| usize::from(c)).collect();
    let got = request(bytes, &pieces, MAX_BODY, MAX_HEADER);
    match &got {
        Ok(Some(encoded)) => {
            let r = Request::decode(encoded).expect("an accepted request decodes");
            assert!(
                r.body.len() <= MAX_BODY,
                "a body over the limit: {}",
                r.body.len()
            );
            // Empty lines before a request line are allowed (RFC 9112 2.2).
            let start = bytes
                .iter()
                .position(|&b| b != b'\r' && b != b'\n')
                .unwrap_or(0);
            assert!(bytes[start..].starts_with(r.method.as_bytes()), "{r:?}");
            assert!(r.protocol == "HTTP/1.1" || r.protocol == "HTTP/1.0");
        }
        Ok(None) => {}
        Err(status) => assert!([400, 413, 431].contains(status), "refused with {status}"),
    }
    // Read in one piece: the same outcome (a head too large may only be
    // seen as such once its bytes are there).
    let whole = request(bytes, &[], MAX_BODY, MAX_HEADER);
    match (&got, &whole) {
        (Ok(None), _) | (_, Err(431)) | (Err(431), _) => {}
        _ => assert_eq!(got, whole, "pieces {pieces:?}"),
    }
});
