//! The server handle, the handler trampoline and the server entry points.

use std::ffi::{c_char, c_int, c_void, CString};
use std::ops::RangeInclusive;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use shmlink::{
    Answer, Handler, RemoteError, RunningServer, Server, ServerOptions, Stats, StopHandle,
};

use crate::guard::{cstr, guard, required, slice, text};
use crate::options::{read_sized, server_options, shmlink_server_options};
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
        response: *mut shmlink_response<'_, '_>,
    ) -> u32,
>;

/// Serves one request that came with file descriptors (registered with
/// `shmlink_server_set_fd_handler`); otherwise as `shmlink_handler`.
///
/// Ownership: `fds[0..nfds]` are open descriptors of this process, the
/// handler's during the call. To keep one beyond the call, the handler sets
/// its entry to -1 (it then closes it itself, when it likes); the library
/// closes every descriptor whose entry still holds its number when the
/// handler returns, also when it returns an error. Entries must not be set to
/// anything but -1.
pub type shmlink_fd_handler = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        request: *const u8,
        request_len: usize,
        fds: *mut c_int,
        nfds: usize,
        response: *mut shmlink_response<'_, '_>,
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
    /// The handler of requests with descriptors, set while bound; read (and
    /// written) with `state` locked.
    fd_handler: Mutex<Option<CFdHandler>>,
    /// Reservations lent from a session's arena (`shmlink_response_reserve`).
    lendable: RangeInclusive<usize>,
    /// The request queue of a server started with
    /// `shmlink_server_start_queued`; dropped (its waiting requests answered
    /// with an error) when the server is waited for or freed.
    queue: Mutex<Option<shmlink::RequestQueue>>,
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

    /// The bound server and the C handler `f` with `user_data` (and the
    /// descriptor handler, if one was set), for serve/start.
    fn take_bound(
        &self,
        op: &str,
        f: shmlink_handler,
        user_data: *mut c_void,
    ) -> Result<(Server, CHandler), Failure> {
        let f = required(f, "handler")?;
        let s = self.take_bound_server(op)?;
        Ok((
            s,
            CHandler {
                f,
                user_data,
                fds: *self.fd_handler(),
                lendable: self.lendable.clone(),
            },
        ))
    }

    /// The bound server, the state left `Serving` (the caller sets what
    /// follows).
    fn take_bound_server(&self, op: &str) -> Result<Server, Failure> {
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

    fn queue(&self) -> MutexGuard<'_, Option<shmlink::RequestQueue>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fd_handler(&self) -> MutexGuard<'_, Option<CFdHandler>> {
        self.fd_handler.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The sizes of reservations (`shmlink_response_reserve` on an empty
/// response) lent from a session's arena: from the arena threshold up to
/// what the arena and a message can hold. Larger ones could never be lent:
/// they go to the ordinary buffer, where an allocation that fails is
/// reported (`SHMLINK_E_TOO_LARGE`) instead of ending the process.
fn lendable(o: &ServerOptions) -> RangeInclusive<usize> {
    let arena = match o.accept_fds {
        true => usize::try_from(o.max_arena_bytes).unwrap_or(usize::MAX),
        false => 0,
    };
    o.arena_threshold..=arena.min(o.max_message_size)
}

/// A C handler made callable from session threads, with the handler of
/// requests that came with descriptors, if one was set.
struct CHandler {
    f: unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut shmlink_response<'_, '_>) -> u32,
    user_data: *mut c_void,
    fds: Option<CFdHandler>,
    /// Reservations lent from the session's arena.
    lendable: RangeInclusive<usize>,
}

/// What `shmlink_server_set_fd_handler` registered.
#[derive(Debug, Clone, Copy)]
struct CFdHandler {
    f: unsafe extern "C" fn(
        *mut c_void,
        *const u8,
        usize,
        *mut c_int,
        usize,
        *mut shmlink_response<'_, '_>,
    ) -> u32,
    user_data: *mut c_void,
}

// SAFETY: the header requires handlers (and what `user_data` points to) to be
// callable from any thread at once.
unsafe impl Send for CHandler {}
// SAFETY: as above.
unsafe impl Sync for CHandler {}
// SAFETY: as above.
unsafe impl Send for CFdHandler {}

/// Runs a C handler on `r`: its code 0 is success, another the remote
/// error (with the message it set).
fn answer<'a, 'b>(
    mut r: shmlink_response<'a, 'b>,
    run: impl FnOnce(*mut shmlink_response<'a, 'b>) -> u32,
) -> Result<(), RemoteError> {
    match run(&mut r) {
        0 => Ok(()),
        code => Err(RemoteError::new(
            code,
            r.error_message
                .unwrap_or_else(|| format!("handler returned error code {code}")),
        )),
    }
}

impl CHandler {
    /// Runs the plain handler on `request`, writing into `r`.
    fn plain(&self, request: &[u8], r: shmlink_response<'_, '_>) -> Result<(), RemoteError> {
        answer(r, |r| {
            // SAFETY: `f` is the handler function given to serve/start and
            // `user_data` its argument, valid while the server runs, per the
            // contract; `request` and `r` outlive the call.
            unsafe { (self.f)(self.user_data, request.as_ptr(), request.len(), r) }
        })
    }

    /// Runs the descriptor handler `h` on `request` and `fds`, writing into
    /// `r`; closes the descriptors it did not take.
    fn with_fds(
        &self,
        h: CFdHandler,
        request: &[u8],
        fds: Vec<OwnedFd>,
        r: shmlink_response<'_, '_>,
    ) -> Result<(), RemoteError> {
        let mut numbers: Vec<c_int> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        let result = answer(r, |r| {
            // SAFETY: `f` and `user_data` were registered with
            // shmlink_server_set_fd_handler and stay valid while the server
            // runs, per the contract; `request`, `numbers` and `r` outlive
            // the call.
            unsafe {
                (h.f)(
                    h.user_data,
                    request.as_ptr(),
                    request.len(),
                    numbers.as_mut_ptr(),
                    numbers.len(),
                    r,
                )
            }
        });
        for (fd, entry) in fds.into_iter().zip(numbers) {
            if entry == fd.as_raw_fd() {
                drop(fd); // not taken: closed
            } else {
                let _ = fd.into_raw_fd(); // taken: the handler closes it
            }
        }
        result
    }
}

impl Handler for CHandler {
    /// `shmlink_response_reserve` writes large responses in place.
    fn answers_in_place(&self) -> bool {
        true
    }

    /// One-way messages (their response is discarded, never lent).
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        self.plain(request, shmlink_response::bytes(response))
    }

    fn respond(
        &self,
        request: &[u8],
        fds: Vec<OwnedFd>,
        answer: &mut Answer<'_>,
    ) -> Result<(), RemoteError> {
        let r = shmlink_response::answer(answer, self.lendable.clone());
        match self.fds {
            Some(h) if !fds.is_empty() => self.with_fds(h, request, fds, r),
            // No descriptor handler: the plain one answers, the descriptors
            // are closed.
            _ => {
                drop(fds);
                self.plain(request, r)
            }
        }
    }
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
                read_sized(options, "options"),
                out.as_mut(),
            )
        };
        let options = options?;
        let out = required(out, "out")?;
        *out = std::ptr::null_mut();
        let mut texts = Vec::with_capacity(address_count);
        for (i, p) in list?.iter().enumerate() {
            // SAFETY: each entry is NULL or a C string, per the contract.
            texts.push(text(unsafe { cstr(*p) }, &format!("addresses[{i}]"))?);
        }
        // SAFETY: the option arrays are valid for their lengths, per the contract.
        let options = unsafe { server_options(options.as_ref()) }?;
        let lendable = lendable(&options);
        *out = wrap(Server::bind(&texts, options)?, lendable);
        Ok(())
    })
}

/// Takes over the server listening for successors at `handover` (its
/// `shmlink_server_options.handover`): its listening sockets and its live
/// `shm:` sessions come to the new server `*out`, bound as if by
/// `shmlink_server_bind` (`shmlink_server_address_count` lists the same
/// addresses), and go on from where the old server stopped once it serves
/// (`shmlink_server_start` or `shmlink_server_serve`); their clients
/// notice nothing. The old server answers the calls it had begun, then
/// stops. With `options->handover` set, this server listens there
/// for a successor of its own. `*out` is NULL on failure
/// (`SHMLINK_E_BIND`, the reason in `shmlink_last_error`: nobody listens
/// there, the old server refused, a session this server cannot take; the
/// old server then serves on).
///
/// # Safety
/// `handover` is NULL or a C string; `options` is NULL or valid; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_take_over(
    handover: *const c_char,
    options: *const shmlink_server_options,
    out: *mut *mut shmlink_server,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (path, options, out) =
            unsafe { (cstr(handover), read_sized(options, "options"), out.as_mut()) };
        let options = options?;
        let out = required(out, "out")?;
        *out = std::ptr::null_mut();
        let path = text(path, "handover")?;
        // SAFETY: the option arrays are valid for their lengths, per the contract.
        let options = unsafe { server_options(options.as_ref()) }?;
        let lendable = lendable(&options);
        *out = wrap(Server::take_over(path, options)?, lendable);
        Ok(())
    })
}

/// A bound server as the C ABI's handle.
fn wrap(server: Server, lendable: RangeInclusive<usize>) -> *mut shmlink_server {
    let addresses = server
        .addresses()
        .iter()
        .map(|a| CString::new(a.to_string()).unwrap_or_default())
        .collect();
    Box::into_raw(Box::new(shmlink_server {
        inner: Arc::new(Inner {
            stop: server.stop_handle(),
            stats: server.stats(),
            addresses,
            state: Mutex::new(State::Bound(server)),
            fd_handler: Mutex::new(None),
            lendable,
            queue: Mutex::new(None),
        }),
    }))
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
        // Hold the state alive even if the handle is freed meanwhile.
        let inner = Arc::clone(&server.inner);
        let (s, h) = inner.take_bound("shmlink_server_serve", handler, user_data)?;
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
        let (s, h) = server
            .inner
            .take_bound("shmlink_server_start", handler, user_data)?;
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

/// Starts serving on the library's threads with the requests handed to a
/// loop of the caller's (epoll, poll, libuv) instead of a handler:
/// `*out_fd` becomes readable while requests wait; take them with
/// `shmlink_server_next_request` and answer each with
/// `shmlink_request_answer` or `shmlink_request_fail`, in any order, from
/// any thread. Each session waits for its request's answer (requests of
/// one session are answered one at a time, sessions run concurrently).
/// The descriptor stays the server's: watch it, never read or close it.
/// Requests still queued when the server is waited for or freed are
/// answered with an error; answer or free the ones taken before
/// `shmlink_server_wait`, which waits for them.
///
/// # Safety
/// `server` is NULL or a live server; `out_fd` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_start_queued(
    server: *mut shmlink_server,
    out_fd: *mut c_int,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (server, out_fd) = unsafe { (server.as_ref(), out_fd.as_mut()) };
        let server = required(server, "server")?;
        let out_fd = required(out_fd, "out_fd")?;
        let (queue, handler) = shmlink::RequestQueue::new()?;
        let s = server
            .inner
            .take_bound_server("shmlink_server_start_queued")?;
        match s.spawn(handler) {
            Ok(running) => {
                *out_fd = queue.fd().as_raw_fd();
                *server.inner.queue() = Some(queue);
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

/// The next request of a server started with `shmlink_server_start_queued`,
/// never waiting for one: `*out` receives it, to be answered with
/// `shmlink_request_answer` or `shmlink_request_fail` (or freed with
/// `shmlink_request_free`, which answers with an error);
/// `SHMLINK_E_WOULD_BLOCK` when none waits (the descriptor then becomes
/// readable when one does); `SHMLINK_E_STATE` for a server not started
/// that way, or waited for.
///
/// # Safety
/// `server` is NULL or a live server; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_next_request(
    server: *mut shmlink_server,
    out: *mut *mut crate::request::shmlink_request,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (server, out) = unsafe { (server.as_ref(), out.as_mut()) };
        let server = required(server, "server")?;
        let out = required(out, "out")?;
        *out = std::ptr::null_mut();
        let q = server.inner.queue();
        let Some(queue) = q.as_ref() else {
            return Err(Failure::new(
                shmlink_status::SHMLINK_E_STATE,
                "shmlink_server_next_request: the server was not started with shmlink_server_start_queued, or was waited for",
            ));
        };
        match queue.try_next() {
            Some(r) => {
                *out = crate::request::boxed(r);
                Ok(())
            }
            None => Err(Failure::new(
                shmlink_status::SHMLINK_E_WOULD_BLOCK,
                "no request waits: wait until the descriptor of shmlink_server_start_queued is readable",
            )),
        }
    })
}

/// Sets the handler of requests that come with file descriptors
/// (`shmlink_client_call_fds`), before `shmlink_server_serve` or
/// `shmlink_server_start`; requests without descriptors keep going to the
/// handler given there. Without one (or after setting NULL), a request with
/// descriptors goes to the plain handler and its descriptors are closed.
/// `SHMLINK_E_STATE` once the server is serving or stopped. To refuse
/// descriptors altogether (the caller gets `SHMLINK_E_INVALID_ARGUMENT`,
/// nothing sent), bind with `refuse_fds` set in the options.
///
/// # Safety
/// `server` is NULL or a live server; `handler` is NULL or a function that
/// follows `shmlink_fd_handler`'s rules, and with `user_data` stays valid
/// until the server has stopped (as the handler of serve/start).
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_set_fd_handler(
    server: *mut shmlink_server,
    handler: shmlink_fd_handler,
    user_data: *mut c_void,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or a live server, per the contract.
        let server = required(unsafe { server.as_ref() }, "server")?;
        let g = server.inner.lock();
        if !matches!(*g, State::Bound(_)) {
            return Err(Failure::new(
                shmlink_status::SHMLINK_E_STATE,
                "shmlink_server_set_fd_handler: the server is already serving or has stopped",
            ));
        }
        *server.inner.fd_handler() = handler.map(|f| CFdHandler { f, user_data });
        drop(g);
        Ok(())
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
        // Queued requests no loop will take are answered with an error.
        drop(server.inner.queue().take());
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
        drop(server.inner.queue().take());
        let state = std::mem::replace(&mut *server.inner.lock(), State::Stopped);
        drop(state); // a running server is joined here
    }));
}
