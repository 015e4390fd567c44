//! The worker handle: a process answering the calls of its supervisor
//! (`shmlink pool`) on its own thread.

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard, TryLockError};

use ::shmlink_worker::PoolWorker as Worker;

use crate::guard::{cstr, guard, required, slice, text};
use crate::options::{client_options, read_sized, shmlink_client_options};
use crate::status::{shmlink_status, Failure};

/// A worker's session with its supervisor (opaque). One thread at a time.
#[derive(Debug)]
pub struct shmlink_worker {
    worker: Mutex<Worker>,
}

impl shmlink_worker {
    fn lock(&self) -> Result<MutexGuard<'_, Worker>, Failure> {
        match self.worker.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(Failure::new(
                shmlink_status::SHMLINK_E_INVALID_ARGUMENT,
                "worker is in use by another thread (a worker serves one thread at a time)",
            )),
        }
    }
}

/// Connects a worker to its supervisor at `address`, or, when `address` is
/// NULL, at the address in the environment variable `SHMLINK_WORKER` (which
/// `shmlink pool` sets for the workers it starts). When the pool hands its
/// HTTP listeners down (`SHMLINK_HTTP`), the worker also serves HTTP itself:
/// `shmlink_worker_accept` then returns HTTP requests too, encoded, as it
/// does for requests relayed by a pool's front.
///
/// Ownership: `address` and `options` are read during the call only (options
/// may be NULL: defaults). On success `*out` receives a worker the caller
/// owns and releases with `shmlink_worker_free`; on failure `*out` is NULL.
///
/// # Safety
/// `address` is NULL or a NUL-terminated string; `options` is NULL or valid;
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_connect(
    address: *const c_char,
    options: *const shmlink_client_options,
    out: *mut *mut shmlink_worker,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (address, out) = unsafe { (cstr(address), out.as_mut()) };
        let out = required(out, "out")?;
        *out = std::ptr::null_mut();
        // SAFETY: `options` is NULL or valid for its struct_size, per the contract.
        let options = unsafe { read_sized(options, "options") }?;
        let options = client_options(options.as_ref())?;
        let worker = match address {
            Some(a) => Worker::connect(text(Some(a), "address")?, options)?,
            None => Worker::from_env(options)?,
        };
        *out = Box::into_raw(Box::new(shmlink_worker {
            worker: Mutex::new(worker),
        }));
        Ok(())
    })
}

/// Waits for the next call (or HTTP request, for a worker that serves HTTP
/// itself). On `SHMLINK_OK` either `*stopped` is 0 and `*request`/
/// `*request_len` hold the request, or `*stopped` is 1: the supervisor told
/// this worker to stop (recycling, reload, shutdown), its HTTP connections
/// are closed, and it should exit. A call accepted before and not answered
/// is answered first with remote error `SHMLINK_REMOTE_NOT_ANSWERED` (an
/// HTTP request: a 500).
///
/// Ownership: the request bytes belong to the worker and stay valid until
/// the next `shmlink_worker_*` call on it.
///
/// # Safety
/// `worker` is NULL or a live worker; the out pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_accept(
    worker: *mut shmlink_worker,
    request: *mut *const u8,
    request_len: *mut usize,
    stopped: *mut c_int,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or valid, per the contract.
        let (worker, request, request_len, stopped) = unsafe {
            (
                worker.as_ref(),
                request.as_mut(),
                request_len.as_mut(),
                stopped.as_mut(),
            )
        };
        let (request, request_len, stopped) = (
            required(request, "request")?,
            required(request_len, "request_len")?,
            required(stopped, "stopped")?,
        );
        *request = std::ptr::null();
        *request_len = 0;
        *stopped = 0;
        let mut w = required(worker, "worker")?.lock()?;
        match w.accept()? {
            Some(r) => {
                *request = r.as_ptr();
                *request_len = r.len();
            }
            None => *stopped = 1,
        }
        Ok(())
    })
}

/// Answers the call accepted last with `response`.
///
/// Ownership: `response` is read during the call only.
///
/// # Safety
/// `worker` is NULL or a live worker; `response` is valid for `response_len`
/// bytes (NULL allowed when 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_respond(
    worker: *mut shmlink_worker,
    response: *const u8,
    response_len: usize,
) -> shmlink_status {
    // SAFETY: the caller keeps the contract `with_bytes` asks for.
    unsafe { with_bytes(worker, response, response_len, "response", Worker::respond) }
}

/// Starts streaming the answer to the HTTP request accepted last:
/// `response` is an encoded HTTP response whose status and headers are sent
/// at once (chunked, or to the connection's end for HTTP/1.0) and whose body
/// is the first piece; `shmlink_worker_stream_write` sends more and
/// `shmlink_worker_stream_end` ends it. Each piece is written before the
/// call returns. A request relayed by the pool's front cannot stream: its
/// pieces are gathered and answered whole at the end.
///
/// `SHMLINK_E_IO` when the HTTP client is gone or read nothing for the
/// header timeout: the request is over (its connection is closed), and the
/// next `shmlink_worker_accept` takes the next one.
///
/// Ownership: `response` is read during the call only.
///
/// # Safety
/// `worker` is NULL or a live worker; `response` is valid for `response_len`
/// bytes (NULL allowed when 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_stream_begin(
    worker: *mut shmlink_worker,
    response: *const u8,
    response_len: usize,
) -> shmlink_status {
    // SAFETY: the caller keeps the contract `with_bytes` asks for.
    unsafe {
        with_bytes(
            worker,
            response,
            response_len,
            "response",
            Worker::stream_begin,
        )
    }
}

/// Writes `len` bytes of `data` as the next piece of the answer being
/// streamed (see `shmlink_worker_stream_begin`).
///
/// # Safety
/// `worker` is NULL or a live worker; `data` is valid for `len` bytes (NULL
/// allowed when 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_stream_write(
    worker: *mut shmlink_worker,
    data: *const u8,
    len: usize,
) -> shmlink_status {
    // SAFETY: the caller keeps the contract `with_bytes` asks for.
    unsafe { with_bytes(worker, data, len, "data", Worker::stream_write) }
}

/// Ends the answer being streamed (see `shmlink_worker_stream_begin`).
///
/// # Safety
/// `worker` is NULL or a live worker.
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_stream_end(worker: *mut shmlink_worker) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or valid, per the contract.
        let worker = unsafe { worker.as_ref() };
        Ok(required(worker, "worker")?.lock()?.stream_end()?)
    })
}

/// Whether an answer is being streamed: 1 or 0 (0 for NULL).
///
/// # Safety
/// `worker` is NULL or a live worker.
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_is_streaming(worker: *mut shmlink_worker) -> c_int {
    // SAFETY: NULL or valid, per the contract.
    let worker = unsafe { worker.as_ref() };
    worker
        .and_then(|w| w.lock().ok())
        .is_some_and(|w| w.is_streaming())
        .into()
}

/// Answers the call accepted last with an error: the caller receives a
/// remote error with `code` and `message` (UTF-8; NULL for none); an HTTP
/// client gets a 500, the message goes to the worker's standard error.
///
/// # Safety
/// `worker` is NULL or a live worker; `message` is NULL or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_fail(
    worker: *mut shmlink_worker,
    code: u32,
    message: *const c_char,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or valid, per the contract.
        let (worker, message) = unsafe { (worker.as_ref(), cstr(message)) };
        let message = match message {
            Some(m) => text(Some(m), "message")?,
            None => "",
        };
        Ok(required(worker, "worker")?.lock()?.fail(code, message)?)
    })
}

/// Ends the worker's session (saying goodbye) and frees the handle. NULL is
/// fine.
///
/// # Safety
/// `worker` is NULL or a live worker not in use by another thread; it must
/// not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_worker_free(worker: *mut shmlink_worker) {
    if worker.is_null() {
        return;
    }
    // SAFETY: `worker` came from `Box::into_raw` in `shmlink_worker_connect`
    // and is freed once, per the contract.
    let worker = unsafe { Box::from_raw(worker) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(worker)));
}

/// Runs `f` on the worker with the `len` bytes at `data` (`what` names them
/// in an error).
///
/// # Safety
/// `worker` is NULL or a live worker; `data` is valid for `len` bytes (NULL
/// allowed when 0).
unsafe fn with_bytes(
    worker: *mut shmlink_worker,
    data: *const u8,
    len: usize,
    what: &'static str,
    f: fn(&mut Worker, &[u8]) -> shmlink::Result<()>,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or valid, per the caller's contract.
        let (worker, data) = unsafe { (worker.as_ref(), slice(data, len, what)?) };
        let mut w = required(worker, "worker")?.lock()?;
        Ok(f(&mut w, data)?)
    })
}
