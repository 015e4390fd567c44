//! What a handler fills: the response bytes or an error message.

use std::ffi::c_char;

use crate::guard::{cstr, guard, required, slice, text};
use crate::status::{record, shmlink_status, Failure};

/// The response a handler is filling (opaque). Valid only during the handler
/// call it was passed to, and only on that thread.
#[derive(Debug)]
pub struct shmlink_response<'a> {
    pub(crate) body: &'a mut Vec<u8>,
    pub(crate) error_message: Option<String>,
}

/// Appends `len` bytes to the response.
///
/// # Safety
/// `response` is NULL or the handler's response; `data` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmlink_response_write(
    response: *mut shmlink_response<'_>,
    data: *const u8,
    len: usize,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (response, data) = unsafe { (response.as_mut(), slice(data, len, "data")) };
        let (response, data) = (required(response, "response")?, data?);
        response.body.extend_from_slice(data);
        Ok(())
    })
}

/// Appends `len` zero bytes to the response and returns where they start, for
/// the handler to write in place. NULL when `response` is NULL or the memory
/// cannot be had (see `shmlink_last_error`). The pointer is valid until the
/// next write or reserve on this response, or the handler's return.
///
/// # Safety
/// `response` is NULL or the handler's response.
#[no_mangle]
pub unsafe extern "C" fn shmlink_response_reserve(
    response: *mut shmlink_response<'_>,
    len: usize,
) -> *mut u8 {
    let mut at = std::ptr::null_mut();
    guard(|| {
        // SAFETY: NULL or the handler's response, per the contract.
        let response = required(unsafe { response.as_mut() }, "response")?;
        let body = &mut *response.body;
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

/// Sets the message sent with the error code the handler returns (copied;
/// ignored when the handler returns 0).
///
/// # Safety
/// `response` is NULL or the handler's response; `message` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shmlink_response_set_error_message(
    response: *mut shmlink_response<'_>,
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
