//! What a handler fills: the response bytes or an error message.

use std::ffi::c_char;
use std::ops::RangeInclusive;

use shmlink::Answer;

use crate::guard::{cstr, guard, required, slice, text};
use crate::status::{record, shmlink_status, Failure};

/// The response a handler is filling (opaque). Valid only during the handler
/// call it was passed to, and only on that thread.
#[derive(Debug)]
pub struct shmlink_response<'a, 'b> {
    body: Body<'a, 'b>,
    pub(crate) error_message: Option<String>,
}

/// Where the bytes go: the server's answer, which can lend them from the
/// session's arena (a reservation of an empty response with a length in
/// `lendable`), or a plain buffer (one-way messages).
#[derive(Debug)]
enum Body<'a, 'b> {
    Answer {
        answer: &'a mut Answer<'b>,
        lendable: RangeInclusive<usize>,
    },
    Bytes(&'a mut Vec<u8>),
}

impl<'a, 'b> shmlink_response<'a, 'b> {
    /// A response written through `answer`, lent from the arena when a
    /// reservation of an empty response has a length in `lendable`.
    pub(crate) fn answer(answer: &'a mut Answer<'b>, lendable: RangeInclusive<usize>) -> Self {
        shmlink_response {
            body: Body::Answer { answer, lendable },
            error_message: None,
        }
    }

    /// A response written into `bytes`, never lent.
    pub(crate) fn bytes(bytes: &'a mut Vec<u8>) -> Self {
        shmlink_response {
            body: Body::Bytes(bytes),
            error_message: None,
        }
    }

    /// The ordinary buffer, to append to (lent bytes move into it first).
    fn buffer(&mut self) -> &mut Vec<u8> {
        match &mut self.body {
            Body::Answer { answer, .. } => answer.bytes(),
            Body::Bytes(b) => b,
        }
    }

    fn is_lent(&self) -> bool {
        matches!(&self.body, Body::Answer { answer, .. } if answer.is_lent())
    }

    /// `len` zero bytes lent from the session's arena, when the response is
    /// still empty and `len` is a size to lend; `None` otherwise (or when
    /// the arena has no room: then the response is `len` zero bytes in the
    /// ordinary buffer).
    fn lend(&mut self, len: usize) -> Option<*mut u8> {
        let Body::Answer {
            answer: a,
            lendable,
        } = &mut self.body
        else {
            return None;
        };
        if !a.is_empty() || !lendable.contains(&len) {
            return None;
        }
        let at = a.loan(len).as_mut_ptr();
        if a.is_lent() {
            // A reused buffer of the arena holds earlier responses' bytes;
            // a reservation starts zeroed, as in the ordinary buffer.
            // SAFETY: `at` starts the `len` bytes of the loan just made,
            // which the answer still holds.
            unsafe { std::ptr::write_bytes(at, 0, len) };
        }
        Some(at)
    }
}

/// Appends `len` bytes to the response.
///
/// # Safety
/// `response` is NULL or the handler's response; `data` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmlink_response_write(
    response: *mut shmlink_response<'_, '_>,
    data: *const u8,
    len: usize,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (response, data) = unsafe { (response.as_mut(), slice(data, len, "data")) };
        let (response, data) = (required(response, "response")?, data?);
        response.buffer().extend_from_slice(data);
        Ok(())
    })
}

/// Appends `len` zero bytes to the response and returns where they start, for
/// the handler to write in place. NULL when `response` is NULL or the memory
/// cannot be had (see `shmlink_last_error`). The pointer is valid until the
/// next write or reserve on this response, or the handler's return.
///
/// A reservation that makes the whole response (the response is still
/// empty) of at least the server's arena threshold (64 KiB) lies in the
/// session's arena when the client reads lent responses and the arena has
/// room: the client reads it where the handler wrote it, no copy on either
/// side (`shmlink_response_is_lent` tells). A later write or reserve on such
/// a response first moves its bytes into the ordinary buffer (one copy),
/// then appends as usual.
///
/// # Safety
/// `response` is NULL or the handler's response.
#[no_mangle]
pub unsafe extern "C" fn shmlink_response_reserve(
    response: *mut shmlink_response<'_, '_>,
    len: usize,
) -> *mut u8 {
    let mut at = std::ptr::null_mut();
    guard(|| {
        // SAFETY: NULL or the handler's response, per the contract.
        let response = required(unsafe { response.as_mut() }, "response")?;
        if let Some(lent) = response.lend(len) {
            at = lent;
            return Ok(());
        }
        let body = response.buffer();
        let start = body.len();
        body.try_reserve(len).map_err(|e| {
            Failure::new(
                shmlink_status::SHMLINK_E_TOO_LARGE,
                format!("cannot reserve {len} more response bytes: {e}"),
            )
        })?;
        body.resize(start + len, 0);
        at = body[start..].as_mut_ptr();
        Ok(())
    });
    at
}

/// 1 when the response lies in the session's arena (a reservation lent as
/// `shmlink_response_reserve` says), else 0 (also for NULL).
///
/// # Safety
/// `response` is NULL or the handler's response.
#[no_mangle]
pub unsafe extern "C" fn shmlink_response_is_lent(
    response: *const shmlink_response<'_, '_>,
) -> i32 {
    // SAFETY: NULL or the handler's response, per the contract.
    unsafe { response.as_ref() }.map_or(0, |r| i32::from(r.is_lent()))
}

/// Sets the message sent with the error code the handler returns (copied;
/// ignored when the handler returns 0).
///
/// # Safety
/// `response` is NULL or the handler's response; `message` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shmlink_response_set_error_message(
    response: *mut shmlink_response<'_, '_>,
    message: *const c_char,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (response, message) = unsafe { (response.as_mut(), cstr(message)) };
        let response = required(response, "response")?;
        let message = match text(message, "message") {
            Ok(m) => m.to_string(),
            // Not UTF-8: keep what can be read rather than lose the message.
            Err(f) if message.is_some() => {
                let _ = record(f);
                message
                    .map(|m| m.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }
            Err(f) => return Err(f),
        };
        response.error_message = Some(message);
        Ok(())
    })
}
