//! Status codes and the per-thread error detail.

use std::cell::RefCell;
use std::ffi::CString;

use shmlink::Error;

/// Result of every fallible function: `SHMLINK_OK`, then error codes. Codes
/// are only ever appended, never renumbered.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum shmlink_status {
    /// Success.
    SHMLINK_OK = 0,
    /// A NULL pointer, text that is not UTF-8, an option out of range, a
    /// client used from two threads at once, a call the session did not agree
    /// on, or file descriptors that cannot be sent (more than
    /// `SHMLINK_MAX_FDS`, or one not open); nothing was sent.
    SHMLINK_E_INVALID_ARGUMENT = 1,
    /// Not `shm:PATH`, `unix:PATH` or `tcp:HOST:PORT`.
    SHMLINK_E_INVALID_ADDRESS = 2,
    /// Cannot connect: no server there, or no permission on the socket file.
    SHMLINK_E_CONNECT = 3,
    /// The server refused the session (policy, session limit, version).
    SHMLINK_E_REFUSED = 4,
    /// The operation timed out.
    SHMLINK_E_TIMEOUT = 5,
    /// The peer died or closed the session.
    SHMLINK_E_PEER_GONE = 6,
    /// The session is closed (`shmlink_client_close`, or an earlier fatal error).
    SHMLINK_E_CLOSED = 7,
    /// The handler answered with an error: `shmlink_last_remote_code()` has its code.
    SHMLINK_E_REMOTE = 8,
    /// A message larger than the maximum message size; nothing was sent.
    SHMLINK_E_TOO_LARGE = 9,
    /// The peer broke the protocol; the session is closed.
    SHMLINK_E_PROTOCOL = 10,
    /// The server cannot listen on an address.
    SHMLINK_E_BIND = 11,
    /// Another operating-system error.
    SHMLINK_E_IO = 12,
    /// `shmlink_client_recv` with no call in flight.
    SHMLINK_E_NOTHING_IN_FLIGHT = 13,
    /// A bug inside the library (a caught panic); please report it.
    SHMLINK_E_INTERNAL = 14,
    /// The server is in the wrong state for this call (already serving, not started).
    SHMLINK_E_STATE = 15,
    /// The session's transport cannot do this (file descriptors or arena
    /// loans over `tcp:`); nothing was sent and the session goes on.
    SHMLINK_E_UNSUPPORTED = 16,
    /// No arena buffer can be had now (`shmlink_client_loan`: the arena is at
    /// its `max_arena_bytes` with buffers lent, or the kernel refused a
    /// segment); the message has the sizes. Nothing was sent and the session
    /// goes on: send or free loans, or call with `shmlink_client_call` (it
    /// streams).
    SHMLINK_E_ARENA_FULL = 17,
    /// `shmlink_client_try_receive`: no answer has arrived yet. Not a
    /// failure: wait until the descriptor of `shmlink_client_fd` is
    /// readable, then try again.
    SHMLINK_E_WOULD_BLOCK = 18,
}

use shmlink_status::*;

impl shmlink_status {
    /// Static description of the code.
    pub(crate) fn describe(self) -> &'static std::ffi::CStr {
        match self {
            SHMLINK_OK => c"ok",
            SHMLINK_E_INVALID_ARGUMENT => c"invalid argument",
            SHMLINK_E_INVALID_ADDRESS => c"invalid address",
            SHMLINK_E_CONNECT => c"cannot connect",
            SHMLINK_E_REFUSED => c"refused by the server",
            SHMLINK_E_TIMEOUT => c"timed out",
            SHMLINK_E_PEER_GONE => c"peer gone",
            SHMLINK_E_CLOSED => c"session closed",
            SHMLINK_E_REMOTE => c"remote error",
            SHMLINK_E_TOO_LARGE => c"message too large",
            SHMLINK_E_PROTOCOL => c"protocol error",
            SHMLINK_E_BIND => c"cannot listen",
            SHMLINK_E_IO => c"i/o error",
            SHMLINK_E_NOTHING_IN_FLIGHT => c"no call in flight",
            SHMLINK_E_INTERNAL => c"internal error",
            SHMLINK_E_STATE => c"wrong state",
            SHMLINK_E_UNSUPPORTED => c"not supported by the transport",
            SHMLINK_E_ARENA_FULL => c"arena full",
            SHMLINK_E_WOULD_BLOCK => c"nothing has arrived yet",
        }
    }

    /// The code of a core error.
    pub(crate) fn of(e: &Error) -> Self {
        match e {
            Error::InvalidAddress { .. } => SHMLINK_E_INVALID_ADDRESS,
            Error::NothingInFlight { .. } => SHMLINK_E_NOTHING_IN_FLIGHT,
            Error::InvalidOption { .. } => SHMLINK_E_INVALID_ARGUMENT,
            Error::Connect { .. } => SHMLINK_E_CONNECT,
            Error::Refused { .. } => SHMLINK_E_REFUSED,
            Error::Protocol { .. } => SHMLINK_E_PROTOCOL,
            Error::Timeout { .. } => SHMLINK_E_TIMEOUT,
            Error::PeerGone { .. } => SHMLINK_E_PEER_GONE,
            Error::Closed { .. } => SHMLINK_E_CLOSED,
            Error::MessageTooLarge { .. } => SHMLINK_E_TOO_LARGE,
            Error::Remote(_) => SHMLINK_E_REMOTE,
            Error::Bind { .. } => SHMLINK_E_BIND,
            // The call cannot be made on this session: nothing was sent.
            Error::NotAgreed { .. } => SHMLINK_E_INVALID_ARGUMENT,
            // Too many descriptors, or one not open: nothing was sent.
            Error::BadFds { .. } => SHMLINK_E_INVALID_ARGUMENT,
            Error::Unsupported { .. } => SHMLINK_E_UNSUPPORTED,
            Error::ArenaFull { .. } => SHMLINK_E_ARENA_FULL,
            // An answer to a call of the peer that waits for none.
            Error::NotOwed { .. } => SHMLINK_E_STATE,
            _ => SHMLINK_E_IO,
        }
    }
}

/// A failure on its way to C: the code and the detail for `shmlink_last_error`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: shmlink_status,
    pub(crate) detail: String,
    pub(crate) remote_code: u32,
}

impl Failure {
    pub(crate) fn new(status: shmlink_status, detail: impl Into<String>) -> Self {
        Failure {
            status,
            detail: detail.into(),
            remote_code: 0,
        }
    }

    /// A NULL where a pointer is required.
    pub(crate) fn null(what: &str) -> Self {
        Self::new(SHMLINK_E_INVALID_ARGUMENT, format!("{what} is NULL"))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let remote_code = match &e {
            Error::Remote(r) => r.code,
            _ => 0,
        };
        Failure {
            status: shmlink_status::of(&e),
            detail: e.to_string(),
            remote_code,
        }
    }
}

struct LastError {
    message: CString,
    remote_code: u32,
}

thread_local! {
    static LAST: RefCell<LastError> = RefCell::new(LastError {
        message: CString::default(),
        remote_code: 0,
    });
}

/// Records `f` as this thread's last error and returns its code.
pub(crate) fn record(f: Failure) -> shmlink_status {
    // Interior NULs cannot be represented in a C string: show them escaped.
    let message = CString::new(f.detail.replace('\0', "\\0")).unwrap_or_default();
    LAST.with(|l| {
        let mut l = l.borrow_mut();
        l.message = message;
        l.remote_code = f.remote_code;
    });
    f.status
}

/// This thread's last error message; valid until the thread records another.
pub(crate) fn last_message() -> *const std::ffi::c_char {
    LAST.with(|l| l.borrow().message.as_ptr())
}

/// This thread's last remote error code.
pub(crate) fn last_remote_code() -> u32 {
    LAST.with(|l| l.borrow().remote_code)
}

// The reserved codes, one constant each for the header (cbindgen writes
// literals only); each is checked against the registry
// (`shmlink::wire::codes`) here, and the header against it by
// crates/wire/tests/codes.rs.

/// Goodbye code: closing normally (an empty goodbye means the same).
pub const SHMLINK_REMOTE_CLOSED: u32 = 0x0000_0000;
/// Remote error code: the server's handler panicked (a Rust handler) and the
/// session survived it.
pub const SHMLINK_REMOTE_HANDLER_PANICKED: u32 = 0xFFFF_0001;
/// Remote error code: the response was larger than the client accepts.
pub const SHMLINK_REMOTE_RESPONSE_TOO_LARGE: u32 = 0xFFFF_0002;
/// Remote error code: a handler of a language binding threw an exception
/// that carried no code of its own (C++ wrapper, PHP extension).
pub const SHMLINK_REMOTE_HANDLER_EXCEPTION: u32 = 0xFFFF_0003;
/// Goodbye code: the peer broke the protocol (a session's end, not a call's).
pub const SHMLINK_REMOTE_PROTOCOL_ERROR: u32 = 0xFFFF_0004;
/// Goodbye code: the server is shutting down.
pub const SHMLINK_REMOTE_SHUTTING_DOWN: u32 = 0xFFFF_0005;
/// Remote error code: a worker took its next call without answering this one.
pub const SHMLINK_REMOTE_NOT_ANSWERED: u32 = 0xFFFF_0006;
/// Remote error code (`shmlink pool`): no worker became free within the queue
/// timeout.
pub const SHMLINK_REMOTE_NO_WORKER: u32 = 0xFFFF_0010;
/// Remote error code (`shmlink pool`): the queue of calls waiting for a worker
/// is full.
pub const SHMLINK_REMOTE_QUEUE_FULL: u32 = 0xFFFF_0011;
/// Remote error code (`shmlink pool`, direct lines): the worker running the
/// call died before answering.
pub const SHMLINK_REMOTE_WORKER_DIED: u32 = 0xFFFF_0012;
/// Remote error code (`shmlink pool`, direct lines): the worker did not
/// answer within the call timeout (it was killed).
pub const SHMLINK_REMOTE_WORKER_TIMEOUT: u32 = 0xFFFF_0013;
/// Remote error code (`shmlink pool`): the pool is stopping.
pub const SHMLINK_REMOTE_POOL_STOPPING: u32 = 0xFFFF_0014;
/// Remote error code (`shmlink pool`): no worker can start (every recent
/// start failed; the message says how).
pub const SHMLINK_REMOTE_NO_WORKERS_START: u32 = 0xFFFF_0015;
/// Remote error code (`shmlink pool`'s control socket): unknown command.
pub const SHMLINK_REMOTE_UNKNOWN_COMMAND: u32 = 0xFFFF_0020;

const _: () = assert!(SHMLINK_REMOTE_CLOSED == shmlink::wire::codes::CODE_CLOSED);
const _: () =
    assert!(SHMLINK_REMOTE_HANDLER_PANICKED == shmlink::wire::codes::CODE_HANDLER_PANICKED);
const _: () =
    assert!(SHMLINK_REMOTE_RESPONSE_TOO_LARGE == shmlink::wire::codes::CODE_RESPONSE_TOO_LARGE);
const _: () =
    assert!(SHMLINK_REMOTE_HANDLER_EXCEPTION == shmlink::wire::codes::CODE_HANDLER_EXCEPTION);
const _: () = assert!(SHMLINK_REMOTE_PROTOCOL_ERROR == shmlink::wire::codes::CODE_PROTOCOL_ERROR);
const _: () = assert!(SHMLINK_REMOTE_SHUTTING_DOWN == shmlink::wire::codes::CODE_SHUTTING_DOWN);
const _: () = assert!(SHMLINK_REMOTE_NOT_ANSWERED == shmlink::wire::codes::CODE_NOT_ANSWERED);
const _: () = assert!(SHMLINK_REMOTE_NO_WORKER == shmlink::wire::codes::CODE_NO_WORKER);
const _: () = assert!(SHMLINK_REMOTE_QUEUE_FULL == shmlink::wire::codes::CODE_QUEUE_FULL);
const _: () = assert!(SHMLINK_REMOTE_WORKER_DIED == shmlink::wire::codes::CODE_WORKER_DIED);
const _: () = assert!(SHMLINK_REMOTE_WORKER_TIMEOUT == shmlink::wire::codes::CODE_WORKER_TIMEOUT);
const _: () = assert!(SHMLINK_REMOTE_POOL_STOPPING == shmlink::wire::codes::CODE_POOL_STOPPING);
const _: () =
    assert!(SHMLINK_REMOTE_NO_WORKERS_START == shmlink::wire::codes::CODE_NO_WORKERS_START);
const _: () = assert!(SHMLINK_REMOTE_UNKNOWN_COMMAND == shmlink::wire::codes::CODE_UNKNOWN_COMMAND);
