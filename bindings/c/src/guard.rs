//! The wrapper around every entry point: turns failures into status codes
//! with a recorded detail, and keeps panics from crossing into C.

use std::any::Any;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::status::{record, shmlink_status, Failure};

/// Runs `body`; returns `SHMLINK_OK`, or records the failure (or the caught
/// panic) as this thread's last error and returns its code.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> shmlink_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => shmlink_status::SHMLINK_OK,
        Ok(Err(f)) => record(f),
        Err(panic) => record(internal(panic.as_ref())),
    }
}

/// The failure reported for a caught panic.
pub(crate) fn internal(panic: &(dyn Any + Send)) -> Failure {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Failure::new(
        shmlink_status::SHMLINK_E_INTERNAL,
        format!("internal error in shmlink (please report): {what}"),
    )
}

/// Drops a handle the library boxed for C (a loan, a view), never letting a
/// panic escape. NULL is ignored.
///
/// # Safety
/// `p` is NULL or came from `Box::into_raw` and is not used afterwards.
pub(crate) unsafe fn free_box<T>(p: *mut T) {
    if p.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: from `Box::into_raw` and freed once, per this function's
        // contract: ours to drop.
        drop(unsafe { Box::from_raw(p) });
    }));
}

/// A required pointer argument, or the failure naming it.
pub(crate) fn required<T>(p: Option<T>, what: &str) -> Result<T, Failure> {
    p.ok_or_else(|| Failure::null(what))
}

/// The text of a C string argument.
pub(crate) fn text<'a>(s: Option<&'a CStr>, what: &str) -> Result<&'a str, Failure> {
    required(s, what)?.to_str().map_err(|_| {
        Failure::new(
            shmlink_status::SHMLINK_E_INVALID_ARGUMENT,
            format!("{what} is not valid UTF-8"),
        )
    })
}

/// Reads a C string pointer.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a CStr> {
    // SAFETY: non-NULL `p` is a valid C string, per this function's contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}

/// Reads a (pointer, length) pair as a slice: NULL is allowed for length 0.
///
/// # Safety
/// A non-NULL `p` points to `len` readable, initialised values that outlive `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, len: usize, what: &str) -> Result<&'a [T], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::new(
            shmlink_status::SHMLINK_E_INVALID_ARGUMENT,
            format!("{what} is NULL but its length is {len}"),
        ));
    }
    // SAFETY: `p` is non-NULL and valid for `len` values, per the contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}
