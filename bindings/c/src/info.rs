//! Version, code descriptions and the per-thread error detail.

use std::ffi::{c_char, CStr};

use crate::status::{last_message, last_remote_code, shmlink_status};

const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };

/// The library version, e.g. "0.1.0" (a static string).
#[no_mangle]
pub extern "C" fn shmlink_version() -> *const c_char {
    VERSION.as_ptr()
}

/// A short static description of a status code; "unknown status code" for
/// values this library does not define. Never NULL. Thread-safe.
#[no_mangle]
pub extern "C" fn shmlink_error_string(code: i32) -> *const c_char {
    use shmlink_status::*;
    const ALL: [shmlink_status; 19] = [
        SHMLINK_OK,
        SHMLINK_E_INVALID_ARGUMENT,
        SHMLINK_E_INVALID_ADDRESS,
        SHMLINK_E_CONNECT,
        SHMLINK_E_REFUSED,
        SHMLINK_E_TIMEOUT,
        SHMLINK_E_PEER_GONE,
        SHMLINK_E_CLOSED,
        SHMLINK_E_REMOTE,
        SHMLINK_E_TOO_LARGE,
        SHMLINK_E_PROTOCOL,
        SHMLINK_E_BIND,
        SHMLINK_E_IO,
        SHMLINK_E_NOTHING_IN_FLIGHT,
        SHMLINK_E_INTERNAL,
        SHMLINK_E_STATE,
        SHMLINK_E_UNSUPPORTED,
        SHMLINK_E_ARENA_FULL,
        SHMLINK_E_WOULD_BLOCK,
    ];
    ALL.iter()
        .find(|s| **s as i32 == code)
        .map_or(c"unknown status code", |s| s.describe())
        .as_ptr()
}

/// The detail of the last call that failed on this thread, with the evidence
/// (e.g. "server at shm:/run/a.sock refused the session (not allowed): uid
/// 1001 is not in allowed uids"); "" when none failed yet. Owned by the
/// library; valid until the next failure on this thread.
#[no_mangle]
pub extern "C" fn shmlink_last_error() -> *const c_char {
    last_message()
}

/// The handler's error code of the last `SHMLINK_E_REMOTE` on this thread
/// (0 when the last failure was not a remote error).
#[no_mangle]
pub extern "C" fn shmlink_last_remote_code() -> u32 {
    last_remote_code()
}
