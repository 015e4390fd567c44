//! The server handle, the handler trampoline and the server entry points.

use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use shmlink::{Handler, RemoteError, RunningServer, Server, Stats, StopHandle};

use crate::guard::{cstr, guard, required, slice, text};
use crate::options::{server_options, shmlink_server_options};
use crate::response::shmlink_response;
use crate::status::{shmlink_status, Failure};

/// Serves one request: reads `request[0..request_len]`, fills `response`
/// with `shmlink_response_write`/`shmlink_response_reserve` and returns 0, or
/// returns a non-zero error code (after `shmlink_response_set_error_message`,
/// optionally) that the caller receives as `SHMLINK_E_REMOTE`. Called from
/// many session threads at once: it must be thread-safe, and must not unwind
/// (catch C++ exceptions inside). One-way messages call it too; their
/// response is discarded.
pub type shmlink_handler = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        request: *const u8,
        request_len: usize,
        response: *mut shmlink_response<'_>,
    ) -> u32,
>;

/// Counters of a server.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmlink_server_stats {
    /// Sessions accepted (handshake completed).
    pub sessions_opened: u64,
    /// Sessions ended.
    pub sessions_closed: u64,
    /// Sessions open now.
    pub active_sessions: u64,
    /// Connections refused (policy, limits, bad handshakes).
    pub refused: u64,
    /// Requests answered, successfully or with an error.
    pub calls: u64,
    /// Requests answered with an error.
    pub errors: u64,
}

/// A server (opaque).
#[derive(Debug)]
pub struct shmlink_server {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    stop: StopHandle,
    stats: Arc<Stats>,
    addresses: Vec<CString>,
    state: Mutex<State>,
}

#[derive(Debug)]
enum State {
    Bound(Server),
    Serving,
    Started(RunningServer),
    Stopped,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take_bound(&self, op: &str) -> Result<Server, Failure> {
        let mut g = self.lock();
        match std::mem::replace(&mut *g, State::Serving) {
            State::Bound(s) => Ok(s),
            other => {
                let why = match &other {
                    State::Serving => "the server is already serving",
                    State::Started(_) => "the server was already started",
                    _ => "the server has stopped",
                };
                *g = other;
                Err(Failure::new(
                    shmlink_status::SHMLINK_E_STATE,
                    format!("{op}: {why}"),
                ))
            }
        }
    }
}

/// A C handler made callable from session threads.
struct CHandler {
    f: unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut shmlink_response<'_>) -> u32,
    user_data: *mut c_void,
}

// SAFETY: the header requires handlers (and what `user_data` points to) to be
// callable from any thread at once.
unsafe impl Send for CHandler {}
// SAFETY: as above.
unsafe impl Sync for CHandler {}

impl Handler for CHandler {
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        let mut r = shmlink_response {
            body: response,
            error_message: None,
        };
        // SAFETY: `f` is the handler function given to serve/start and
        // `user_data` its argument, valid while the server runs, per the
        // contract; `request` and `r` outlive the call.
        let code = unsafe { (self.f)(self.user_data, request.as_ptr(), request.len(), &mut r) };
        match code {
            0 => Ok(()),
            code => Err(RemoteError::new(
                code,
                r.error_message
                    .unwrap_or_else(|| format!("handler returned error code {code}")),
            )),
        }
    }
}

fn c_handler(f: shmlink_handler, user_data: *mut c_void) -> Result<CHandler, Failure> {
    Ok(CHandler {
        f: required(f, "handler")?,
        user_data,
    })
}

/// Binds every address (shm:, unix:, tcp: in any mix; `tcp:HOST:0` picks a
/// free port). Stale socket files of dead servers are replaced; live ones
/// are never taken over.
///
/// Ownership: `addresses`, the strings and `options` (with its arrays) are
/// read during the call only. On success `*out` receives a server the caller
/// owns and releases with `shmlink_server_free`; on failure NULL. Thread-safe.
///
/// # Safety
/// `addresses` is NULL or points to `address_count` NUL-terminated strings;
/// `options` is NULL or valid; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_bind(
    addresses: *const *const c_char,
    address_count: usize,
    options: *const shmlink_server_options,
    out: *mut *mut shmlink_server,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (list, options, out) = unsafe {
            (
                slice(addresses, address_count, "addresses"),
                options.as_ref(),
                out.as_mut(),
            )
        };
        let out = required(out, "out")?;
        *out = std::ptr::null_mut();
        let mut texts = Vec::with_capacity(address_count);
        for (i, p) in list?.iter().enumerate() {
            // SAFETY: each entry is NULL or a C string, per the contract.
            texts.push(text(unsafe { cstr(*p) }, &format!("addresses[{i}]"))?);
        }
        // SAFETY: the option arrays are valid for their lengths, per the contract.
        let server = Server::bind(&texts, unsafe { server_options(options) }?)?;
        let addresses = server
            .addresses()
            .iter()
            .map(|a| CString::new(a.to_string()).unwrap_or_default())
            .collect();
        *out = Box::into_raw(Box::new(shmlink_server {
            inner: Arc::new(Inner {
                stop: server.stop_handle(),
                stats: server.stats(),
                addresses,
                state: Mutex::new(State::Bound(server)),
            }),
        }));
        Ok(())
    })
}

/// Number of bound addresses (0 for NULL).
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_address_count(server: *const shmlink_server) -> usize {
    // SAFETY: NULL or a live server, per the contract.
    unsafe { server.as_ref() }.map_or(0, |s| s.inner.addresses.len())
}

/// The bound address at `index`, with the real port for `tcp:HOST:0`. Owned
/// by the server, valid until `shmlink_server_free`; NULL when out of range.
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_address(
    server: *const shmlink_server,
    index: usize,
) -> *const c_char {
    // SAFETY: NULL or a live server, per the contract.
    unsafe { server.as_ref() }
        .and_then(|s| s.inner.addresses.get(index))
        .map_or(std::ptr::null(), |a| a.as_ptr())
}

/// Serves on the calling thread until `shmlink_server_stop`: requests already
/// received are answered, sessions closed, socket files removed, then it
/// returns. Callable once per server.
///
/// # Safety
/// `server` is NULL or a live server; `handler` is NULL or a function that
/// follows `shmlink_handler`'s rules, and with `user_data` stays valid until
/// this returns.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_serve(
    server: *mut shmlink_server,
    handler: shmlink_handler,
    user_data: *mut c_void,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or a live server, per the contract.
        let server = required(unsafe { server.as_ref() }, "server")?;
        let h = c_handler(handler, user_data)?;
        // Hold the state alive even if the handle is freed meanwhile.
        let inner = Arc::clone(&server.inner);
        let s = inner.take_bound("shmlink_server_serve")?;
        let result = s.serve(h);
        *inner.lock() = State::Stopped;
        Ok(result?)
    })
}

/// Serves on background threads and returns at once. End it with
/// `shmlink_server_stop` then `shmlink_server_wait`, or `shmlink_server_free`.
///
/// # Safety
/// As `shmlink_server_serve`; `handler` and `user_data` stay valid until the
/// server has stopped (`shmlink_server_wait` or `shmlink_server_free` returned).
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_start(
    server: *mut shmlink_server,
    handler: shmlink_handler,
    user_data: *mut c_void,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or a live server, per the contract.
        let server = required(unsafe { server.as_ref() }, "server")?;
        let h = c_handler(handler, user_data)?;
        let s = server.inner.take_bound("shmlink_server_start")?;
        match s.spawn(h) {
            Ok(running) => {
                *server.inner.lock() = State::Started(running);
                Ok(())
            }
            Err(e) => {
                *server.inner.lock() = State::Stopped;
                Err(e.into())
            }
        }
    })
}

/// Asks the server to stop; returns at once. Thread-safe and async-signal-safe
/// (it stores a flag and writes to an eventfd), so a SIGTERM handler may call
/// it. Stopping a server that is not serving yet makes serve/start return at
/// once. NULL is ignored.
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_stop(server: *const shmlink_server) {
    // SAFETY: NULL or a live server, per the contract.
    if let Some(s) = unsafe { server.as_ref() } {
        s.inner.stop.stop();
    }
}

/// Waits until a server started with `shmlink_server_start` has stopped
/// (after `shmlink_server_stop` from any thread or a signal handler).
/// Returns at once for a server that already stopped.
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_wait(server: *mut shmlink_server) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or a live server, per the contract.
        let server = required(unsafe { server.as_ref() }, "server")?;
        let running = {
            let mut g = server.inner.lock();
            match std::mem::replace(&mut *g, State::Stopped) {
                State::Started(r) => r,
                State::Stopped => return Ok(()),
                other => {
                    let why = match other {
                        State::Serving => "shmlink_server_serve runs on another thread",
                        _ => "the server was not started",
                    };
                    *g = other;
                    return Err(Failure::new(
                        shmlink_status::SHMLINK_E_STATE,
                        format!("shmlink_server_wait: {why}"),
                    ));
                }
            }
        };
        Ok(running.wait()?)
    })
}

/// Reads the server's counters into `*out`.
///
/// # Safety
/// `server` is NULL or a live server; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_stats_get(
    server: *const shmlink_server,
    out: *mut shmlink_server_stats,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (server, out) = unsafe { (server.as_ref(), out.as_mut()) };
        let (server, out) = (required(server, "server")?, required(out, "out")?);
        let s = &server.inner.stats;
        *out = shmlink_server_stats {
            sessions_opened: s.sessions_opened.load(Ordering::Acquire),
            sessions_closed: s.sessions_closed.load(Ordering::Acquire),
            active_sessions: s.active_sessions(),
            refused: s.refused.load(Ordering::Acquire),
            calls: s.calls.load(Ordering::Acquire),
            errors: s.errors.load(Ordering::Acquire),
        };
        Ok(())
    })
}

/// Stops the server, waits for a started one to finish, and frees the
/// handle. NULL is fine. After waiting, none of the server's threads
/// (session, preparer) runs library code any more. A `shmlink_server_serve` running on another thread
/// is asked to stop and finishes on its own.
///
/// # Safety
/// `server` is NULL or a live server; it must not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_free(server: *mut shmlink_server) {
    if server.is_null() {
        return;
    }
    // SAFETY: `server` came from `Box::into_raw` in `shmlink_server_bind` and
    // is freed once, per the contract.
    let server = unsafe { Box::from_raw(server) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        server.inner.stop.stop();
        let state = std::mem::replace(&mut *server.inner.lock(), State::Stopped);
        drop(state); // a running server is joined here
    }));
}
