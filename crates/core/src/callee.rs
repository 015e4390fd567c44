//! The answering side of a call, shared by the server's session loop and a
//! worker: what goes back for a handler's result.

use crate::error::RemoteError;
use crate::frame::{Kind, Message, CODE_RESPONSE_TOO_LARGE};

/// The frame that answers a call: `Response` with the bytes, or `Error`
/// with the handler's error — or [`CODE_RESPONSE_TOO_LARGE`] when the
/// response exceeds `limit`, the largest message the caller takes — its text
/// cut to fit. `scratch` holds an error body.
#[inline(always)]
pub(crate) fn reply<'a>(
    result: Result<&'a [u8], RemoteError>,
    limit: usize,
    scratch: &'a mut Vec<u8>,
) -> (Kind, &'a [u8]) {
    match result {
        Ok(body) if body.len() <= limit => (Kind::Response, body),
        Ok(body) => {
            *scratch = error_body(&too_large(body.len(), limit), limit);
            (Kind::Error, scratch)
        }
        Err(e) => {
            *scratch = error_body(&e, limit);
            (Kind::Error, scratch)
        }
    }
}

#[cold]
fn error_body(e: &RemoteError, limit: usize) -> Vec<u8> {
    Message::error_body_within(e.code, &e.message, limit)
}

#[cold]
fn too_large(len: usize, max: usize) -> RemoteError {
    RemoteError::new(
        CODE_RESPONSE_TOO_LARGE,
        format!("response of {len} bytes exceeds the client's maximum message size of {max} bytes"),
    )
}

/// The text of a caught panic.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}
