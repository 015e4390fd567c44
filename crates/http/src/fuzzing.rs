//! The engine's decoders of peer bytes, for the fuzz targets
//! (`fuzz/fuzz_targets/http_request.rs`, `http_files.rs`): not an API.

use crate::engine::body::{self, Body, Broken};
use crate::engine::head::{self, Framing};
pub use crate::files::fuzzing::{file_path, file_range};

/// What the engine makes of `bytes` from a client, read in `pieces`
/// (lengths of successive reads; the rest in one): the encoded request
/// (`Ok(Some)`), not complete yet (`Ok(None)`), or the status it refuses
/// with (`Err`: 400, 405 is not here, 413, 431).
pub fn request(
    bytes: &[u8],
    pieces: &[usize],
    max_body: usize,
    max_header: usize,
) -> Result<Option<Vec<u8>>, u16> {
    let mut seen = 0;
    let mut cuts = pieces.iter().copied();
    let mut encoded = Vec::new();
    let mut state: Option<(Body, usize, u64, usize)> = None; // body, consumed, taken, where its length lies
    loop {
        seen = (seen + cuts.next().unwrap_or(bytes.len())).min(bytes.len());
        let buf = &bytes[..seen];
        if state.is_none() {
            match head::parse(buf, "127.0.0.1:1", &mut encoded) {
                Ok(Some(h)) => {
                    let b = match h.framing {
                        Framing::Length(n) if n > max_body as u64 => return Err(413),
                        Framing::None => Body::none(),
                        Framing::Length(n) => Body::length(n),
                        Framing::Chunked => Body::chunked(),
                    };
                    let length_at = crate::wire::begin_body(&mut encoded);
                    state = Some((b, h.len, 0, length_at));
                }
                Ok(None) if buf.len() > max_header => return Err(431),
                Ok(None) if seen == bytes.len() => return Ok(None),
                Ok(None) => continue,
                Err(status) => return Err(status),
            }
        }
        let Some((b, used, taken, length_at)) = state.as_mut() else {
            continue;
        };
        match body::take(
            b,
            &buf[*used..],
            &mut encoded,
            taken,
            max_body as u64,
            max_header,
        ) {
            Ok(n) => *used += n,
            Err(Broken::TooLarge) => return Err(413),
            Err(Broken::Framing) => return Err(400),
        }
        if b.done() {
            crate::wire::set_body_len(&mut encoded, *length_at, *taken);
            return Ok(Some(encoded));
        }
        if seen == bytes.len() {
            return Ok(None);
        }
    }
}
