//! HTTP served by the worker process itself (`shmlink pool --http`, workers
//! mode): the pool hands its listening sockets down to every worker
//! ([`crate::Handed`]); each worker accepts, parses and limits requests
//! here, in Rust, on its own thread ([`crate::engine`]), and hands each
//! request, encoded as the front would encode it, to its loop
//! ([`WorkerHttp::serve`]), whose answer ([`WorkerHttp::respond`]) is
//! written at once. No thread hand-off, no other process on a request's
//! path: the pool only supervises.
//!
//! The loop runs only while the worker is inside `serve`: while the
//! application runs a request, its other connections wait in the kernel,
//! and what they sent is read at the next turn. Requests read in one turn
//! wait their turn in a queue; one that waited longer than the queue
//! timeout is answered 503 without reaching the application.

use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use crate::access::AccessLog;
use crate::backend::Fault;
use crate::counters::{Counters, CountersPage, Field};
use crate::engine::{Engine, Limits, ReqId, Turn};
use crate::error::{HttpError, StreamBroken};
use crate::files::Files;
use crate::handed::{self, Handed, HTTP_ENV};

/// One request in this many has the CPU time of the server's own path
/// measured (from the application's answer to the next request handed to
/// it: writing, reading and parsing, for every request of that stretch),
/// for `status` (`front_cpu_ns`, `front_samples`): two reads of the
/// thread's CPU clock, too dear for every request.
pub const SAMPLE_EVERY: u64 = 16;

/// How long a stopping worker keeps a keep-alive connection that sends no
/// request (one that does gets its answer with `Connection: close`).
pub const DRAIN_IDLE: Duration = Duration::from_secs(1);

/// What [`WorkerHttp::serve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A request ([`WorkerHttp::request`]): answer it with
    /// [`WorkerHttp::respond`] or [`WorkerHttp::fail`].
    Request,
    /// The descriptor given to [`WorkerHttp::watch`] became readable (the
    /// supervisor wrote or hung up): look at it, then call `serve` again.
    Watched,
    /// Stopped ([`WorkerHttp::drain`]) and every connection is closed.
    Done,
}

/// A worker's HTTP server. Not thread-safe by design: it runs on the thread
/// that calls [`WorkerHttp::serve`].
pub struct WorkerHttp {
    engine: Engine,
    /// The request handed out and not answered yet.
    held: Option<ReqId>,
    /// Its response is being streamed ([`WorkerHttp::stream_begin`]).
    streaming: bool,
    request: Vec<u8>,
    queue_timeout: Duration,
    draining: bool,
    /// Requests answered.
    answers: u64,
    /// The thread's CPU time when a sampled answer came ([`SAMPLE_EVERY`]).
    sampled_at: Option<u64>,
}

impl std::fmt::Debug for WorkerHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHttp")
            .field("held", &self.held.is_some())
            .finish_non_exhaustive()
    }
}

impl WorkerHttp {
    /// The server the pool asked for in [`HTTP_ENV`], serving: `None` when
    /// the variable is not set (the pool serves HTTP itself, or none).
    /// Fault reasons (why a 5xx was sent) go to `log`.
    ///
    /// # Errors
    /// A value of the variable that does not decode, descriptors that are
    /// not what it says (a listener that is not a TCP socket, a counters
    /// page that is not one), descriptors taken already in this process.
    pub fn from_env(log: Box<dyn Fn(&str) + Send + Sync>) -> Result<Option<WorkerHttp>, HttpError> {
        match std::env::var(HTTP_ENV) {
            Ok(value) => Self::start(&Handed::decode(&value)?, log).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Takes the descriptors `handed` names and serves on its listeners.
    ///
    /// # Errors
    /// As [`WorkerHttp::from_env`].
    pub fn start(
        handed: &Handed,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<WorkerHttp, HttpError> {
        let mut numbers = handed.listeners.clone();
        numbers.extend(handed.counters.map(|(fd, _)| fd));
        numbers.extend(handed.access_log);
        let mut fds = handed::take(&numbers)?.into_iter();
        let mut next = || {
            fds.next()
                .ok_or_else(|| HttpError::Options("descriptor count".into()))
        };
        let mut listeners = Vec::new();
        for &n in &handed.listeners {
            let l = std::net::TcpListener::from(next()?);
            l.local_addr().map_err(|source| HttpError::Io {
                context: format!(
                    "descriptor {n} named as an HTTP listener in {HTTP_ENV} is not a TCP socket"
                ),
                source,
            })?;
            listeners.push(l);
        }
        let counters = match handed.counters {
            Some((n, slot)) => CountersPage::open_slot(&next()?, slot).map_err(|e| {
                HttpError::Options(format!("descriptor {n} named in {HTTP_ENV}: {e}"))
            })?,
            None => Counters::default(),
        };
        let access = match handed.access_log {
            Some(_) => Some(Arc::new(AccessLog::from_fd(next()?))),
            None => None,
        };
        let limits = Limits {
            max_body: handed.max_body,
            max_header_bytes: handed.max_header_bytes,
            header_timeout: handed.header_timeout,
            send_timeout: handed.send_timeout,
            max_connections: handed.max_connections,
            spool: handed.front_options().spool(),
        };
        let files = Files::open(handed.root.as_deref(), &handed.sendfile)?;
        let mut engine =
            Engine::new(listeners, limits, Arc::new(counters), access, log).map_err(|source| {
                HttpError::Io {
                    context: "serving the HTTP listeners".into(),
                    source,
                }
            })?;
        if let Some(files) = files {
            engine.serve_files(Arc::new(files));
        }
        Ok(WorkerHttp {
            engine,
            held: None,
            streaming: false,
            request: Vec::new(),
            queue_timeout: handed.queue_timeout,
            draining: false,
            answers: 0,
            sampled_at: None,
        })
    }

    /// Makes `serve` return [`Event::Watched`] when `fd` becomes readable
    /// (it replaces any descriptor watched before).
    ///
    /// # Errors
    /// It cannot be watched (not pollable).
    pub fn watch(&mut self, fd: OwnedFd) -> Result<(), HttpError> {
        self.engine.watch(fd).map_err(|source| HttpError::Io {
            context: "watching the supervisor's socket".into(),
            source,
        })
    }

    /// Serves until there is something for the caller: the next request,
    /// the watched descriptor readable, or the end after
    /// [`WorkerHttp::drain`]. A request handed out before and not answered
    /// is answered 500 first.
    pub fn serve(&mut self) -> Event {
        if self.streaming {
            // A stream left open: what was sent is the response.
            let _ = self.stream_end();
        }
        if self.held.is_some() {
            self.fail("the worker took its next request without answering this one");
        }
        loop {
            if let Some(r) = self.engine.pop_ready() {
                let waited = shmlink_sys::clock::coarse_ms().saturating_sub(r.queued);
                if u128::from(waited) > self.queue_timeout.as_millis() {
                    let why = format!(
                        "the request waited in the worker {waited} ms, longer than the queue timeout of {:?}",
                        self.queue_timeout
                    );
                    self.engine.answer(r.id, Err(Fault::new(503, why)));
                    self.engine.recycle(r.request);
                    continue;
                }
                let counters = self.engine.counters();
                counters.add(Field::Handed, 1);
                if let Some(t0) = self.sampled_at.take() {
                    let spent = shmlink_sys::clock::thread_cpu_ns().saturating_sub(t0);
                    counters.add(Field::FrontNanos, spent);
                    counters.add(Field::FrontSamples, 1);
                }
                let old = std::mem::replace(&mut self.request, r.request);
                self.engine.recycle(old);
                self.held = Some(r.id);
                return Event::Request;
            }
            match self.engine.turn(None) {
                Turn::Ready | Turn::Woken | Turn::Timer => {}
                Turn::Watched => return Event::Watched,
                Turn::Done => return Event::Done,
            }
        }
    }

    /// The request handed out by `serve` and not answered yet, encoded
    /// ([`crate::wire::Request`]).
    pub fn request(&self) -> Option<&[u8]> {
        self.held.map(|_| self.request.as_slice())
    }

    /// Answers the request handed out last with an encoded response
    /// ([`crate::wire::Response`]), written at once; one that does not
    /// decode is a 502.
    ///
    /// # Errors
    /// [`HttpError::Options`] when no request is waiting for an answer.
    pub fn respond(&mut self, response: &[u8]) -> Result<(), HttpError> {
        if self.streaming {
            return Err(HttpError::Options(
                "the response is being streamed: write to it and end it".into(),
            ));
        }
        let id = self.take_held()?;
        self.engine.answer(id, Ok(response));
        Ok(())
    }

    /// Answers the request handed out last with a 500 (the application
    /// failed); `reason` goes to the log, not to the client. A response
    /// being streamed cannot change its status: it ends as it is, and the
    /// reason is logged.
    pub fn fail(&mut self, reason: &str) {
        if self.streaming {
            self.engine
                .log_line(&format!("a streamed HTTP response ends early: {reason}"));
            let _ = self.stream_end();
            return;
        }
        if let Ok(id) = self.take_held() {
            self.engine.answer(id, Err(Fault::new(500, reason)));
        }
    }

    /// Starts streaming the answer to the request handed out last: the
    /// encoded response's status and headers are sent now (with
    /// `transfer-encoding: chunked`, or to the connection's end in
    /// HTTP/1.0), its body as the first piece; more follows with
    /// [`WorkerHttp::stream_write`], and [`WorkerHttp::stream_end`] ends it.
    /// Each piece is written before the call returns.
    ///
    /// # Errors
    /// No request waiting; the client is gone, or read nothing for the
    /// header timeout (the connection is closed, the request is over); an
    /// answer HTTP cannot carry (answered 502).
    pub fn stream_begin(&mut self, response: &[u8]) -> Result<(), HttpError> {
        let id = self.held.ok_or_else(nothing_held)?;
        if self.streaming {
            return Err(HttpError::Options(
                "the response is being streamed already".into(),
            ));
        }
        self.streaming = true;
        let r = self.engine.stream_begin(id, response);
        self.after_piece(r)
    }

    /// Writes the next piece of the response being streamed.
    ///
    /// # Errors
    /// As [`WorkerHttp::stream_begin`].
    pub fn stream_write(&mut self, data: &[u8]) -> Result<(), HttpError> {
        let id = self
            .held
            .filter(|_| self.streaming)
            .ok_or_else(not_streaming)?;
        let r = self.engine.stream_write(id, data);
        self.after_piece(r)
    }

    /// Ends the response being streamed.
    ///
    /// # Errors
    /// As [`WorkerHttp::stream_begin`].
    pub fn stream_end(&mut self) -> Result<(), HttpError> {
        let id = self
            .held
            .filter(|_| self.streaming)
            .ok_or_else(not_streaming)?;
        let r = self.engine.stream_end(id);
        self.streaming = false;
        let _ = self.take_held();
        r.map_err(|b| HttpError::ClientGone(b.0))
    }

    /// Whether a response is being streamed.
    pub fn is_streaming(&self) -> bool {
        self.streaming
    }

    /// After a piece: a broken stream is over (the request is done).
    fn after_piece(&mut self, r: Result<(), StreamBroken>) -> Result<(), HttpError> {
        r.map_err(|b| {
            self.streaming = false;
            let _ = self.take_held();
            HttpError::ClientGone(b.0)
        })
    }

    fn take_held(&mut self) -> Result<ReqId, HttpError> {
        let id = self.held.take().ok_or_else(nothing_held)?;
        self.engine.counters().add(Field::Returned, 1);
        self.answers += 1;
        if self.answers.is_multiple_of(SAMPLE_EVERY) {
            self.sampled_at = Some(shmlink_sys::clock::thread_cpu_ns());
        }
        Ok(id)
    }

    /// The socket of the request handed out and not answered yet.
    pub fn held_socket(&self) -> Option<RawFd> {
        self.held.and_then(|id| self.engine.socket_of(id))
    }

    /// Stops accepting; from now on every response closes its connection,
    /// idle connections close after [`DRAIN_IDLE`]; `serve` returns
    /// [`Event::Done`] once all are closed. Keep calling `serve` until then.
    pub fn drain(&mut self) {
        self.draining = true;
        self.engine.unwatch();
        self.engine.stop(DRAIN_IDLE);
    }

    /// Whether [`WorkerHttp::drain`] was called.
    pub fn draining(&self) -> bool {
        self.draining
    }
}

fn nothing_held() -> HttpError {
    HttpError::Options("no HTTP request is waiting for an answer".into())
}

fn not_streaming() -> HttpError {
    HttpError::Options("no HTTP response is being streamed".into())
}
