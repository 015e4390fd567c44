//! A request taken from a queued server (`shmlink_server_next_request`),
//! answered from the caller's loop.

use std::ffi::c_char;

use shmlink::{QueuedRequest, RemoteError};

use crate::guard::{cstr, free_box, guard, required, slice, text};
use crate::status::shmlink_status;

/// A request taken from a queued server (opaque): answered once with
/// `shmlink_request_answer` or `shmlink_request_fail`, or freed with
/// `shmlink_request_free`, each of which frees it; any thread may do so.
pub struct shmlink_request {
    inner: QueuedRequest,
}

/// Boxes a taken request for C.
pub(crate) fn boxed(r: QueuedRequest) -> *mut shmlink_request {
    Box::into_raw(Box::new(shmlink_request { inner: r }))
}

/// The request's bytes, valid until it is answered or freed; `*len`
/// receives their count. NULL (and 0) for a NULL request.
///
/// # Safety
/// `request` is NULL or a live request; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_request_data(
    request: *const shmlink_request,
    len: *mut usize,
) -> *const u8 {
    // SAFETY: the pointers are NULL or valid, per the contract.
    let (request, len) = unsafe { (request.as_ref(), len.as_mut()) };
    let body = request.map_or(&[][..], |r| r.inner.body());
    if let Some(l) = len {
        *l = body.len();
    }
    if request.is_none() {
        return std::ptr::null();
    }
    body.as_ptr()
}

/// Answers the request with `len` bytes at `data` (copied), and frees it.
///
/// # Safety
/// `request` is NULL or a live request, not used afterwards; `data` is
/// valid for `len` bytes (NULL when `len` is 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_request_answer(
    request: *mut shmlink_request,
    data: *const u8,
    len: usize,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let bytes = unsafe { slice(data, len, "data") }?.to_vec();
        let r = required(take(request), "request")?;
        r.inner.answer(bytes);
        Ok(())
    })
}

/// Answers the request with the error `code` and `message` (UTF-8, NULL
/// for none), and frees it.
///
/// # Safety
/// `request` is NULL or a live request, not used afterwards; `message` is
/// NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shmlink_request_fail(
    request: *mut shmlink_request,
    code: u32,
    message: *const c_char,
) -> shmlink_status {
    guard(|| {
        // SAFETY: `message` is NULL or NUL-terminated, per the contract.
        let message = match unsafe { cstr(message) } {
            None => String::new(),
            some => text(some, "message")?.to_string(),
        };
        let r = required(take(request), "request")?;
        r.inner.fail(RemoteError::new(code, message));
        Ok(())
    })
}

/// Frees a request without answering it: its caller gets an error (code
/// `0xFFFF0003`, "dropped unanswered"). NULL is ignored.
///
/// # Safety
/// `request` is NULL or a live request, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_request_free(request: *mut shmlink_request) {
    // SAFETY: NULL or from `boxed`, freed once, per the contract.
    unsafe { free_box(request) };
}

/// Takes ownership of a request handed to C.
fn take(request: *mut shmlink_request) -> Option<Box<shmlink_request>> {
    // SAFETY: NULL or from `boxed` and not used afterwards, per the
    // contracts of the functions that call this.
    (!request.is_null()).then(|| unsafe { Box::from_raw(request) })
}
