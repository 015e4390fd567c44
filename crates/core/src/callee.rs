//! The answering side of a call, shared by the server's session loop and a
//! worker: what goes back for a handler's result.

use crate::error::RemoteError;
use shmlink_wire::codes::CODE_RESPONSE_TOO_LARGE;
use shmlink_wire::frame::Kind;

/// The frame that answers a call: `Response` with the bytes, or `Error`
/// with the handler's error — or [`CODE_RESPONSE_TOO_LARGE`] when the
/// response exceeds what the caller takes or what this side sends (`limits`) — its text
/// cut to fit. `scratch` holds an error body.
#[inline(always)]
pub(crate) fn reply<'a>(
    result: Result<&'a [u8], RemoteError>,
    limits: Limits<'_>,
    scratch: &'a mut Vec<u8>,
) -> (Kind, &'a [u8]) {
    let limit = limits.peer.min(limits.own);
    match result {
        Ok(body) if body.len() <= limit => (Kind::Response, body),
        Ok(body) => {
            *scratch = error_body(&limits.too_large(body.len()), limit);
            (Kind::Error, scratch)
        }
        Err(e) => {
            *scratch = error_body(&e, limit);
            (Kind::Error, scratch)
        }
    }
}

/// The largest response each side accepts: the peer's, and the answering
/// side's own (it cannot send what it would not accept).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits<'a> {
    pub(crate) peer: usize,
    pub(crate) own: usize,
    /// Who the answering side is, for the message: "this server".
    pub(crate) who: &'a str,
}

impl Limits<'_> {
    #[cold]
    fn too_large(&self, len: usize) -> RemoteError {
        let (whose, max) = if self.own < self.peer {
            (format!("{}'s", self.who), self.own)
        } else {
            ("the client's".to_string(), self.peer)
        };
        RemoteError::new(
            CODE_RESPONSE_TOO_LARGE,
            format!("response of {len} bytes exceeds {whose} maximum message size of {max} bytes"),
        )
    }
}

#[cold]
fn error_body(e: &RemoteError, limit: usize) -> Vec<u8> {
    shmlink_wire::codes::encode_error(e.code, &e.message, limit)
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
