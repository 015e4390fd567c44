//! `shmlink._shmlink`: the native half of the `shmlink` Python package
//! (PyO3 on the Rust core crate). The pure-Python half (`python/shmlink/`)
//! defines the exception classes, the `asyncio` forms and the stubs.
//!
//! Threading model:
//! - Every blocking wait (connect, call, recv, a worker's accept, a server's
//!   serve) runs with the GIL released (`allow_threads`).
//! - A `Client` is guarded by a `Mutex` that is only ever locked with the
//!   GIL released, so a thread blocked in a call never holds the GIL and a
//!   thread holding the GIL never waits for the mutex: concurrent use from
//!   several Python threads is serialized, never deadlocked.
//! - The asyncio forms (`acall`...) live in Python (`python/shmlink/
//!   _aio.py`) on four primitives here: `fileno()` (the core's readiness
//!   descriptor, watched by the event loop), `try_recv()` (never waits for
//!   an answer to begin), `abandon(id)`, and a wake hook that a blocking
//!   `call`/`recv` runs when it returns, because it may have taken answers
//!   the loop waits for off the session without the descriptor telling.
//! - A `Server` serves on the core's threads (one per session); each request
//!   takes the GIL to run the Python handler. `serve()` waits on its own
//!   thread, waking every 50 ms to run Python signal handlers, so
//!   `signal.signal(SIGTERM, lambda *_: server.stop())` and Ctrl-C work.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, TryLockError};
use std::time::Duration;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use shmlink::{
    ClientOptions, Error, RemoteError, Server, ServerOptions, StopHandle, WaitStrategy,
    CODE_HANDLER_EXCEPTION,
};

// ---------------------------------------------------------------- errors

/// Builds the Python exception for a core error: the class comes from
/// `shmlink._errors`, the message is the core's (which names the object, the
/// cause and the value).
fn py_err(py: Python<'_>, e: Error) -> PyErr {
    let (class, code, remote_message, call_id) = match &e {
        Error::Connect { .. } | Error::Refused { .. } => ("ConnectError", None, None, None),
        Error::Timeout { .. } => ("TimeoutError", None, None, None),
        Error::PeerGone { .. } | Error::Closed { .. } | Error::Io { .. } => {
            ("ClosedError", None, None, None)
        }
        Error::Protocol { .. } => ("ProtocolError", None, None, None),
        Error::Remote(r) => ("RemoteError", Some(r.code), Some(r.message.clone()), None),
        Error::MessageTooLarge { .. } => ("MessageTooLargeError", None, None, None),
        Error::InvalidAddress { .. } | Error::InvalidOption { .. } => {
            ("InvalidArgumentError", None, None, None)
        }
        Error::Bind { .. } => ("BindError", None, None, None),
        _ => ("Error", None, None, None::<u64>),
    };
    make_err(py, class, &e.to_string(), code, remote_message, call_id)
}

/// A remote error reply received by `recv`, with the id of its call.
fn remote_err(py: Python<'_>, r: RemoteError, call_id: u64) -> PyErr {
    let text = r.to_string();
    make_err(
        py,
        "RemoteError",
        &text,
        Some(r.code),
        Some(r.message),
        Some(call_id),
    )
}

fn make_err(
    py: Python<'_>,
    class: &str,
    text: &str,
    code: Option<u32>,
    remote_message: Option<String>,
    call_id: Option<u64>,
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = py.import("shmlink._errors")?;
        let value = module.getattr(class)?.call1((text,))?;
        if let Some(code) = code {
            value.setattr("code", code)?;
        }
        if let Some(m) = remote_message {
            value.setattr("message", m)?;
        }
        if let Some(id) = call_id {
            value.setattr("call_id", id)?;
        }
        Ok(PyErr::from_value(value))
    };
    // Without the Python half (a broken install), still raise something
    // that carries the message.
    build().unwrap_or_else(|e| e)
}

fn closed_err(py: Python<'_>, what: &str, address: &str) -> PyErr {
    make_err(
        py,
        "ClosedError",
        &format!("{what} for {address} is closed: close() was called"),
        None,
        None,
        None,
    )
}

// ---------------------------------------------------------------- inputs

/// A request's bytes, read in place when that is sound without `unsafe`:
/// `bytes`, and contiguous memoryviews of `bytes` (both immutable, so
/// reading them with the GIL released cannot race with a writer). Any other
/// buffer (bytearray, a memoryview of one, array, numpy…) is copied once
/// with the GIL held into a buffer owned here, because another Python
/// thread may write to it while the GIL is released.
enum Input<'py> {
    Borrowed(Bound<'py, PyBytes>, std::ops::Range<usize>),
    Owned(Vec<u8>),
}

impl Input<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Input::Borrowed(b, range) => b.as_bytes().get(range.clone()).unwrap_or_default(),
            Input::Owned(v) => v,
        }
    }
}

fn input<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Input<'py>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        let len = b.as_bytes().len();
        return Ok(Input::Borrowed(b.clone(), 0..len));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a bytes-like object (bytes, bytearray, memoryview), not str: \
             encode it first, e.g. text.encode()"
        )));
    }
    let buffer = PyBuffer::<u8>::get(obj).map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a bytes-like object (bytes, bytearray, memoryview), not {}",
            type_name(obj)
        ))
    })?;
    if let Some(borrowed) = view_of_bytes(obj, &buffer) {
        return Ok(borrowed);
    }
    Ok(Input::Owned(buffer.to_vec(obj.py())?))
}

/// A contiguous memoryview whose memory lies inside an immutable `bytes`
/// object: that object and the range, found by comparing addresses (no
/// pointer is dereferenced).
fn view_of_bytes<'py>(obj: &Bound<'py, PyAny>, buffer: &PyBuffer<u8>) -> Option<Input<'py>> {
    if !buffer.is_c_contiguous() {
        return None;
    }
    let owner = obj.getattr("obj").ok()?;
    let bytes = owner.downcast_into::<PyBytes>().ok()?;
    let whole = bytes.as_bytes();
    let start = (buffer.buf_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(buffer.len_bytes())?;
    (end <= whole.len()).then(|| Input::Borrowed(bytes, start..end))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn duration(name: &str, seconds: f64) -> PyResult<Duration> {
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(PyValueError::new_err(format!(
            "{name} must be a positive number of seconds, got {seconds}"
        )));
    }
    Duration::try_from_secs_f64(seconds)
        .map_err(|e| PyValueError::new_err(format!("{name} = {seconds}: {e}")))
}

fn wait_strategy(py: Python<'_>, wait: &str) -> PyResult<WaitStrategy> {
    wait.parse().map_err(|e| py_err(py, e))
}

// ---------------------------------------------------------------- client

/// A session with a shmlink server.
///
/// Client(address, *, timeout=5.0, wait="spin", ring_size=None,
/// max_message_size=None, shm_required=False)
///
/// The address picks the transport: ``shm:PATH``, ``unix:PATH`` or
/// ``tcp:HOST:PORT``. An ``shm:`` session the server cannot give shared
/// memory continues over its socket (``transport`` says ``"unix"``), or,
/// with ``shm_required=True``, is refused (``ConnectError`` saying why). Connecting and every call wait with the GIL released.
/// Several threads may share a client: their calls are serialized.
#[pyclass(module = "shmlink._shmlink", name = "Client", subclass)]
struct PyClient {
    inner: Mutex<Option<shmlink::Client>>,
    /// Whether the session was usable when its last operation returned:
    /// what `is_connected` says while another thread is in a call.
    usable: AtomicBool,
    address: String,
    /// The client's default timeout (for the asyncio layer's own timers).
    timeout: Duration,
    /// Whether a wake hook is set (read without the lock on every
    /// blocking call).
    hooked: AtomicBool,
    /// Called after a blocking `call`/`recv` returns while set: the asyncio
    /// layer's `kick`, which looks for answers such a call filed for it.
    hook: Mutex<Option<Py<PyAny>>>,
}

impl PyClient {
    /// Runs the wake hook, if set (after a blocking receive). An exception
    /// it raises is reported as unraisable: the blocking call succeeded.
    fn run_hook(&self, py: Python<'_>) {
        if !self.hooked.load(Ordering::Relaxed) {
            return;
        }
        let hook = match self.hook.try_lock() {
            Ok(guard) => guard.as_ref().map(|h| h.clone_ref(py)),
            Err(TryLockError::Poisoned(p)) => p.into_inner().as_ref().map(|h| h.clone_ref(py)),
            // Only ever held with the GIL, briefly, by the setter: with the
            // GIL held here, nobody holds it.
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(hook) = hook {
            if let Err(e) = hook.call0(py) {
                e.write_unraisable(py, Some(hook.bind(py)));
            }
        }
    }

    /// Runs `f` on the client with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut shmlink::Client) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let r = py.allow_threads(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            guard.as_mut().map(|c| {
                let r = f(c);
                self.usable.store(c.is_connected(), Ordering::Relaxed);
                r
            })
        });
        match r {
            None => Err(closed_err(py, "client", &self.address)),
            Some(r) => r.map_err(|e| py_err(py, e)),
        }
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (address, *, timeout = 5.0, wait = "spin", ring_size = None, max_message_size = None,
        shm_required = false))]
    fn new(
        py: Python<'_>,
        address: &str,
        timeout: f64,
        wait: &str,
        ring_size: Option<usize>,
        max_message_size: Option<usize>,
        shm_required: bool,
    ) -> PyResult<Self> {
        let defaults = ClientOptions::default();
        let options = ClientOptions {
            timeout: duration("timeout", timeout)?,
            wait: wait_strategy(py, wait)?,
            ring_size: ring_size.unwrap_or(defaults.ring_size),
            max_message_size: max_message_size.unwrap_or(defaults.max_message_size),
            shm_required,
            // Large requests lent through the arena, as the core defaults.
            ..defaults
        };
        let timeout = options.timeout;
        let client = py
            .allow_threads(|| shmlink::Client::connect(address, options))
            .map_err(|e| py_err(py, e))?;
        Ok(PyClient {
            inner: Mutex::new(Some(client)),
            usable: AtomicBool::new(true),
            address: address.to_string(),
            timeout,
            hooked: AtomicBool::new(false),
            hook: Mutex::new(None),
        })
    }

    /// Calls the server with ``data`` (any bytes-like object) and returns its
    /// response. ``timeout`` (seconds) overrides the client's for this call.
    ///
    /// Raises RemoteError (the handler failed: ``.code``, ``.message``),
    /// TimeoutError (the session stays usable), ClosedError (the server is
    /// gone), MessageTooLargeError, ProtocolError.
    #[pyo3(signature = (data, timeout = None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let input = input(data, "data")?;
        let request = input.bytes();
        let timeout = timeout.map(|t| duration("timeout", t)).transpose()?;
        let response = self.with(py, |c| match timeout {
            Some(t) => c.call_timeout(request, t),
            None => c.call(request),
        });
        self.run_hook(py);
        let response = response?;
        let out = PyBytes::new(py, &response);
        // Give the buffer back for the next response if nobody else is
        // using the client now (try_lock never waits, so holding the GIL here
        // is fine).
        if let Ok(mut guard) = self.inner.try_lock() {
            if let Some(c) = guard.as_mut() {
                c.recycle(response);
            }
        }
        Ok(out)
    }

    /// Sends a request without waiting for its response and returns its call
    /// id (pipelining); get responses with ``recv()``.
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let input = input(data, "data")?;
        let request = input.bytes();
        self.with(py, |c| c.send(request))
    }

    /// Returns ``(call_id, response)`` for the next response, in arrival
    /// order. An error reply raises RemoteError whose ``.call_id`` names the
    /// call. ``timeout`` defaults to the client's.
    #[pyo3(signature = (timeout = None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<(u64, Bound<'py, PyBytes>)> {
        let timeout = timeout.map(|t| duration("timeout", t)).transpose()?;
        let reply = self.with(py, |c| match timeout {
            Some(t) => c.recv_timeout(t),
            None => c.recv(),
        });
        self.run_hook(py);
        let reply = reply?;
        match reply.result {
            Ok(body) => Ok((reply.id, PyBytes::new(py, &body))),
            Err(r) => Err(remote_err(py, r, reply.id)),
        }
    }

    /// Sends a one-way message: no response, no call id.
    fn notify(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let input = input(data, "data")?;
        let message = input.bytes();
        self.with(py, |c| c.notify(message))
    }

    /// The descriptor an event loop watches for this client (what
    /// ``acall`` registers with ``loop.add_reader``): readable when an
    /// answer has begun to arrive after ``try_recv()`` returned None, or
    /// when the session ends. Made on first use (over ``shm:`` the server
    /// is handed an eventfd to ring). It stays the client's: watch it
    /// (``select``, ``selectors``, ``os.dup`` it for a loop), never read or
    /// close it; it is closed with the client.
    ///
    /// Raises Error over ``shm:`` with a server of an older build (no loop
    /// wake-ups: use the blocking calls), ClosedError.
    fn fileno(&self, py: Python<'_>) -> PyResult<i32> {
        self.with(py, |c| c.poll_fd().map(|fd| fd.as_raw_fd()))
    }

    /// The next answer of a call made with ``send()``, if one has arrived:
    /// ``(call_id, response)``, where a failed handler's answer is a
    /// RemoteError instance (returned, not raised; its ``.call_id`` names
    /// the call). Never waits for an answer to begin: None when none has
    /// (the ``fileno()`` descriptor then becomes readable when one does)
    /// or when no call is in flight. An answer whose first bytes are there
    /// is received whole (its other chunks within the client's timeout).
    /// Answers of abandoned calls are dropped on the way.
    ///
    /// Raises ClosedError when the session ended (server gone),
    /// ProtocolError.
    fn try_recv(&self, py: Python<'_>) -> PyResult<Option<(u64, Py<PyAny>)>> {
        let reply = self.with(py, |c| match c.try_recv() {
            Err(Error::NothingInFlight { .. }) => Ok(None),
            r => r,
        })?;
        Ok(reply.map(|r| {
            let value = match r.result {
                Ok(body) => PyBytes::new(py, &body).into_any().unbind(),
                Err(e) => remote_err(py, e, r.id).into_value(py).into_any(),
            };
            (r.id, value)
        }))
    }

    /// Gives up on a call made with ``send()``: its answer is dropped when
    /// it comes (or now, if it came and was not received). False when the
    /// call is not in flight (received already, abandoned, never sent).
    fn abandon(&self, py: Python<'_>, call_id: u64) -> PyResult<bool> {
        self.with(py, |c| Ok(c.abandon(call_id)))
    }

    /// The client's timeout in seconds (the ``timeout`` given to the
    /// constructor): the default of ``call``, ``recv``, ``acall``, ``arecv``.
    #[getter]
    fn timeout(&self) -> f64 {
        self.timeout.as_secs_f64()
    }

    /// Sets (or with None clears) a callable run with no arguments after
    /// each blocking ``call``/``recv`` returns, on the thread that made it:
    /// the asyncio layer's hook, since such a call may take answers off the
    /// session that the loop waits for. Internal to ``shmlink``.
    #[pyo3(signature = (hook))]
    fn _set_wake_hook(&self, py: Python<'_>, hook: Option<Py<PyAny>>) -> PyResult<()> {
        if let Some(h) = &hook {
            if !h.bind(py).is_callable() {
                return Err(PyTypeError::new_err(
                    "the wake hook must be callable or None",
                ));
            }
        }
        let mut guard = self.hook.lock().unwrap_or_else(|p| p.into_inner());
        self.hooked.store(hook.is_some(), Ordering::Relaxed);
        let old = std::mem::replace(&mut *guard, hook);
        drop(guard);
        // The old hook is released after the lock (its release may run
        // Python code).
        drop(old);
        Ok(())
    }

    /// Number of calls sent and not yet received with ``recv()``.
    #[getter]
    fn in_flight(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |c| Ok(c.in_flight()))
    }

    /// Largest request the server accepts, in bytes.
    #[getter]
    fn max_request(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |c| Ok(c.max_request()))
    }

    /// The transport the session really uses: ``"shm"``, ``"unix"`` (also an
    /// ``shm:`` session the server could give no shared memory, which
    /// continues over its socket) or ``"tcp"``.
    #[getter]
    fn transport(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |c| Ok(c.transport().scheme()))
    }

    /// Whether the session can still be used (not closed, peer alive as far
    /// as this side knows). Never waits: while another thread is in a call,
    /// it says whether the session was usable when its last call returned.
    #[getter]
    fn is_connected(&self) -> bool {
        match self.inner.try_lock() {
            Ok(guard) => guard.as_ref().is_some_and(|c| c.is_connected()),
            Err(TryLockError::Poisoned(p)) => {
                p.into_inner().as_ref().is_some_and(|c| c.is_connected())
            }
            Err(TryLockError::WouldBlock) => self.usable.load(Ordering::Relaxed),
        }
    }

    /// The address given to the constructor.
    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    /// Closes the session (sends a goodbye if it can without waiting).
    /// Idempotent; later calls raise ClosedError.
    fn close(&self, py: Python<'_>) {
        py.allow_threads(|| {
            let client = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
            drop(client);
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.is_connected() {
            "connected"
        } else {
            "closed"
        };
        format!("<shmlink.Client {:?} {state}>", self.address)
    }
}

// ---------------------------------------------------------------- server

/// The Python handler, called from the core's session threads with the GIL.
struct PyHandler {
    callable: Py<PyAny>,
}

impl shmlink::Handler for PyHandler {
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        Python::with_gil(|py| {
            let arg = PyBytes::new(py, request);
            match self.callable.call1(py, (arg,)) {
                Ok(ret) => write_response(ret.bind(py), response),
                Err(e) => Err(exception_reply(py, &e)),
            }
        })
    }
}

/// Copies a handler's return value (any bytes-like object) into `response`.
fn write_response(ret: &Bound<'_, PyAny>, response: &mut Vec<u8>) -> Result<(), RemoteError> {
    if let Ok(b) = ret.downcast::<PyBytes>() {
        response.extend_from_slice(b.as_bytes());
        return Ok(());
    }
    let type_error = || {
        RemoteError::new(
            CODE_HANDLER_EXCEPTION,
            format!(
                "TypeError: the handler returned {}, expected a bytes-like object",
                type_name(ret)
            ),
        )
    };
    if ret.is_instance_of::<PyString>() {
        return Err(type_error());
    }
    let buffer = PyBuffer::<u8>::get(ret).map_err(|_| type_error())?;
    let v = buffer.to_vec(ret.py()).map_err(|_| type_error())?;
    response.extend_from_slice(&v);
    Ok(())
}

/// The remote error for a handler's exception: "Type: message", the code
/// from an int `code` attribute in 1..=0xFFFFFFFF, else
/// CODE_HANDLER_EXCEPTION.
fn exception_reply(py: Python<'_>, e: &PyErr) -> RemoteError {
    let value = e.value(py);
    let code = value
        .getattr("code")
        .ok()
        .filter(|c| !c.is_instance_of::<pyo3::types::PyBool>())
        .and_then(|c| c.extract::<u32>().ok())
        .filter(|c| *c != 0)
        .unwrap_or(CODE_HANDLER_EXCEPTION);
    let kind = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let text = value
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| String::new());
    let message = if text.is_empty() {
        kind
    } else {
        format!("{kind}: {text}")
    };
    RemoteError::new(code, message)
}

/// A server bound to one or more addresses.
///
/// Server(addresses, *, allowed_uids=None, allowed_gids=None,
/// max_sessions=None, wait=None, max_message_size=None, socket_mode=None,
/// socket_group=None, handshake_timeout=None, send_timeout=None,
/// max_shm_bytes=None)
///
/// ``max_shm_bytes``: most bytes of ``shm:`` session segments held at once
/// (64 KiB rings: 132 KiB a session); past it sessions continue over their
/// socket, or are refused when the client requires shared memory.
///
/// Binding happens in the constructor (``addresses`` then holds the real
/// TCP port when ``tcp:HOST:0`` was asked for); ``serve(handler)`` serves.
#[pyclass(module = "shmlink._shmlink", name = "Server", subclass)]
struct PyServer {
    server: Mutex<Option<Server>>,
    stop: StopHandle,
    addresses: Vec<String>,
}

fn one_or_many(addresses: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = addresses.extract::<String>() {
        return Ok(vec![s]);
    }
    addresses.extract::<Vec<String>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "addresses must be a str or a list of str, not {}",
            type_name(addresses)
        ))
    })
}

#[pymethods]
impl PyServer {
    #[new]
    #[pyo3(signature = (addresses, *, allowed_uids = None, allowed_gids = None, max_sessions = None,
        wait = None, max_message_size = None, socket_mode = None, socket_group = None,
        handshake_timeout = None, send_timeout = None, max_shm_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        addresses: &Bound<'_, PyAny>,
        allowed_uids: Option<Vec<u32>>,
        allowed_gids: Option<Vec<u32>>,
        max_sessions: Option<usize>,
        wait: Option<&str>,
        max_message_size: Option<usize>,
        socket_mode: Option<u32>,
        socket_group: Option<u32>,
        handshake_timeout: Option<f64>,
        send_timeout: Option<f64>,
        max_shm_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let addresses = one_or_many(addresses)?;
        let d = ServerOptions::default();
        let options = ServerOptions {
            allowed_uids: allowed_uids.unwrap_or_default(),
            allowed_gids: allowed_gids.unwrap_or_default(),
            socket_mode,
            socket_group,
            max_sessions: max_sessions.unwrap_or(d.max_sessions),
            wait: match wait {
                Some(w) => wait_strategy(py, w)?,
                None => d.wait,
            },
            max_message_size: max_message_size.unwrap_or(d.max_message_size),
            handshake_timeout: match handshake_timeout {
                Some(t) => duration("handshake_timeout", t)?,
                None => d.handshake_timeout,
            },
            send_timeout: match send_timeout {
                Some(t) => duration("send_timeout", t)?,
                None => d.send_timeout,
            },
            max_shm_bytes: max_shm_bytes.unwrap_or(d.max_shm_bytes),
            log: d.log,
            // Descriptors and lent requests accepted, as the core defaults.
            ..d
        };
        let server = py
            .allow_threads(|| Server::bind(&addresses, options))
            .map_err(|e| py_err(py, e))?;
        let bound = server.addresses().iter().map(|a| a.to_string()).collect();
        Ok(PyServer {
            stop: server.stop_handle(),
            server: Mutex::new(Some(server)),
            addresses: bound,
        })
    }

    /// The bound addresses (the real port of ``tcp:HOST:0``).
    #[getter]
    fn addresses(&self) -> Vec<String> {
        self.addresses.clone()
    }

    /// Serves until ``stop()``: each request calls ``handler(request: bytes)``
    /// with the GIL held, from one thread per session; it returns a
    /// bytes-like response. An exception becomes a remote error
    /// "Type: message" with the exception's int ``code`` attribute, else
    /// 0xFFFF0003. Waiting happens with the GIL released; Python signal
    /// handlers run meanwhile (an exception they raise stops the server and
    /// is raised from here once it has stopped). Can be called once.
    fn serve(&self, py: Python<'_>, handler: Py<PyAny>) -> PyResult<()> {
        if !handler.bind(py).is_callable() {
            return Err(PyTypeError::new_err("handler must be callable"));
        }
        let server = self
            .server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                make_err(
                    py,
                    "Error",
                    "serve() was already called on this server (a server serves once; bind a new one)",
                    None,
                    None,
                    None,
                )
            })?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("shmlink-py-serve".into())
            .spawn(move || {
                let r = server.serve(PyHandler { callable: handler });
                let _ = tx.send(r);
            })
            .map_err(|e| {
                py_err(
                    py,
                    Error::Io {
                        context: "starting the server thread".into(),
                        source: e,
                    },
                )
            })?;
        // The receiver is !Sync: it moves into each wait and back out.
        let mut rx = rx;
        loop {
            let (r, back) =
                py.allow_threads(move || (rx.recv_timeout(Duration::from_millis(50)), rx));
            rx = back;
            match r {
                Ok(r) => {
                    let _ = py.allow_threads(|| thread.join());
                    return r.map_err(|e| py_err(py, e));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        self.stop.stop();
                        py.allow_threads(move || {
                            let _ = rx.recv();
                            let _ = thread.join();
                        });
                        return Err(e);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = py.allow_threads(|| thread.join());
                    return Err(make_err(
                        py,
                        "Error",
                        "the server thread ended without a result (it panicked)",
                        None,
                        None,
                        None,
                    ));
                }
            }
        }
    }

    /// Asks the server to stop: no new sessions, requests already received
    /// are answered, then ``serve()`` returns. Callable from any thread and
    /// from a signal handler; idempotent. A server stopped before
    /// ``serve()`` serves nothing and returns at once.
    fn stop(&self) {
        self.stop.stop();
    }

    /// Whether ``stop()`` was called.
    #[getter]
    fn is_stopping(&self) -> bool {
        self.stop.is_stopping()
    }

    fn __repr__(&self) -> String {
        format!("<shmlink.Server {:?}>", self.addresses)
    }
}

// ---------------------------------------------------------------- worker

/// A worker of ``shmlink pool``: answers the calls its supervisor hands it.
///
/// Worker(address=None, *, timeout=5.0, wait="spin") connects to
/// ``address``, or to the address in the ``SHMLINK_WORKER`` environment
/// variable the pool sets. Use it from one thread.
#[pyclass(module = "shmlink._shmlink", name = "Worker", subclass, unsendable)]
struct PyWorker {
    inner: Option<shmlink::Worker>,
    address: String,
}

impl PyWorker {
    fn worker(&mut self, py: Python<'_>) -> PyResult<&mut shmlink::Worker> {
        let address = &self.address;
        self.inner
            .as_mut()
            .ok_or_else(|| closed_err(py, "worker", address))
    }
}

#[pymethods]
impl PyWorker {
    #[new]
    #[pyo3(signature = (address = None, *, timeout = 5.0, wait = "spin"))]
    fn new(py: Python<'_>, address: Option<String>, timeout: f64, wait: &str) -> PyResult<Self> {
        let options = ClientOptions {
            timeout: duration("timeout", timeout)?,
            wait: wait_strategy(py, wait)?,
            ..ClientOptions::default()
        };
        let address = match address {
            Some(a) => a,
            None => std::env::var(shmlink::WORKER_ENV).map_err(|_| {
                make_err(
                    py,
                    "InvalidArgumentError",
                    "no address given and SHMLINK_WORKER is not set: a worker is started by \
                     its supervisor (shmlink pool), or given an address",
                    None,
                    None,
                    None,
                )
            })?,
        };
        let worker = py
            .allow_threads(|| shmlink::Worker::connect(&address, options))
            .map_err(|e| py_err(py, e))?;
        Ok(PyWorker {
            inner: Some(worker),
            address,
        })
    }

    /// Waits (GIL released) for the next call and returns its request, or
    /// None when the supervisor told this worker to stop. A call accepted
    /// earlier and not answered is failed first (code 0xFFFF0006).
    fn accept<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let w = self.worker(py)?;
        let r = py.allow_threads(|| w.accept());
        match r {
            Ok(Some(req)) => Ok(Some(PyBytes::new(py, req))),
            Ok(None) => Ok(None),
            Err(e) => Err(py_err(py, e)),
        }
    }

    /// Answers the call accepted last with ``data`` (bytes-like).
    fn respond(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let input = input(data, "data")?;
        let response = input.bytes();
        let w = self.worker(py)?;
        py.allow_threads(|| w.respond(response))
            .map_err(|e| py_err(py, e))
    }

    /// Answers the call accepted last with a remote error.
    fn fail(&mut self, py: Python<'_>, code: u32, message: &str) -> PyResult<()> {
        let w = self.worker(py)?;
        py.allow_threads(|| w.fail(code, message))
            .map_err(|e| py_err(py, e))
    }

    /// Answers calls with ``handler(request: bytes) -> bytes-like`` until the
    /// supervisor tells this worker to stop. An ``Exception`` becomes a
    /// remote error as in ``Server.serve``; a ``BaseException`` that is not an
    /// ``Exception`` (KeyboardInterrupt, SystemExit) fails the call and is
    /// raised.
    fn run(&mut self, py: Python<'_>, handler: &Bound<'_, PyAny>) -> PyResult<()> {
        if !handler.is_callable() {
            return Err(PyTypeError::new_err("handler must be callable"));
        }
        let mut response = Vec::new();
        loop {
            let w = self.worker(py)?;
            let request = match py.allow_threads(|| w.accept()) {
                Ok(Some(req)) => PyBytes::new(py, req),
                Ok(None) => return Ok(()),
                Err(e) => return Err(py_err(py, e)),
            };
            response.clear();
            let outcome = match handler.call1((request,)) {
                Ok(ret) => write_response(&ret, &mut response).map_err(|r| (r, None)),
                Err(e) => {
                    let fatal = !e.is_instance_of::<pyo3::exceptions::PyException>(py);
                    Err((exception_reply(py, &e), fatal.then_some(e)))
                }
            };
            let w = self.worker(py)?;
            match outcome {
                Ok(()) => py.allow_threads(|| w.respond(&response)),
                Err((r, raise)) => {
                    let sent = py.allow_threads(|| w.fail(r.code, &r.message));
                    if let Some(e) = raise {
                        return Err(e);
                    }
                    sent
                }
            }
            .map_err(|e| py_err(py, e))?;
        }
    }

    /// Closes the session with the supervisor. Idempotent.
    fn close(&mut self) {
        self.inner = None;
    }

    /// The supervisor's address.
    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&mut self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}

// ---------------------------------------------------------------- module

/// Unmaps the shared-memory segments this process keeps mapped for later
/// sessions: a client that closed an ``shm:`` session keeps its segment
/// mapped (up to 8 segments of at most 4 MiB, for 2 s) in case the server
/// gives the same one to its next session. For a process done with its
/// sessions that wants the memory back at once; sessions in use are not
/// affected.
#[pyfunction]
fn release_kept_mappings(py: Python<'_>) {
    py.allow_threads(shmlink::release_kept_mappings);
}

/// Native half of the shmlink package; import ``shmlink`` instead.
#[pymodule]
fn _shmlink(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyClient>()?;
    m.add_class::<PyServer>()?;
    m.add_class::<PyWorker>()?;
    m.add_function(wrap_pyfunction!(release_kept_mappings, m)?)?;
    // Every reserved code, from the one registry (shmlink::wire::CODES).
    for code in shmlink::wire::CODES {
        m.add(code.name, code.value)?;
    }
    m.add("DEFAULT_MAX_MESSAGE", shmlink::DEFAULT_MAX_MESSAGE)?;
    m.add("DEFAULT_RING_SIZE", shmlink::DEFAULT_RING_SIZE)?;
    Ok(())
}
