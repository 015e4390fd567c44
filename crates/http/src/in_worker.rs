//! HTTP served by the worker process itself (`shmlink pool --http` with
//! workers that serve HTTP): the pool hands its listening sockets down to
//! every worker ([`crate::Handed`]); each worker accepts, parses and limits
//! requests here, in Rust, on a single-thread runtime that runs on the
//! worker's own thread, and hands each request, encoded as the front would
//! encode it, to the worker's loop ([`WorkerHttp::serve`]), whose answer
//! ([`WorkerHttp::respond`]) goes back the same way. No thread hand-off, no
//! other process on a request's path: the pool only supervises.
//!
//! The runtime runs only while the worker's loop is inside `serve`: while
//! the application runs a request, its other connections wait in the
//! kernel, and what they sent is read at the next `serve`. Requests read
//! meanwhile wait their turn in a queue; one that waited longer than the
//! queue timeout is answered 503 without reaching the application.

use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::access::AccessLog;
use crate::backend::Fault;
use crate::conn;
use crate::counters::{Counters, CountersPage, Field};
use crate::error::HttpError;
use crate::handed::{self, Handed, HTTP_ENV};
use crate::request::{Answer, Conn, Route, Shared};
use crate::respond;

/// One request in this many has the CPU time of the server's own path
/// measured (from the application's answer to the next request handed to
/// it: parsing, encoding, reading and writing the sockets), for
/// `status` (`front_cpu_ns`, `front_samples`): two reads of the thread's
/// CPU clock, too dear for every request.
pub const SAMPLE_EVERY: u64 = 16;

/// How long a stopping worker keeps a keep-alive connection that sends no
/// request (one that does gets its answer with `Connection: close`).
pub const DRAIN_IDLE: Duration = Duration::from_secs(1);

/// A request on its way from a connection to the worker's loop.
struct Job {
    request: Vec<u8>,
    reply: oneshot::Sender<Answer>,
    /// When it was queued, on the coarse clock (ms).
    queued: u64,
    fd: RawFd,
}

/// The route of a worker's connections: the worker's own queue.
pub(crate) struct QueueRoute {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Route for QueueRoute {
    async fn call(&self, request: Vec<u8>, conn: &Conn) -> Answer {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            request,
            reply,
            queued: shmlink_sys::clock::coarse_ms(),
            fd: conn.fd,
        };
        if self.jobs.send(job).is_err() {
            return Err(Fault::new(503, "the worker is stopping"));
        }
        answer.await.unwrap_or_else(|_| {
            Err(Fault::new(
                502,
                "the worker dropped the request without answering",
            ))
        })
    }
}

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

/// The request handed out by `serve` and not answered yet.
struct Held {
    reply: oneshot::Sender<Answer>,
    fd: RawFd,
}

/// A worker's HTTP server. Not thread-safe by design: its runtime runs on
/// the thread that calls [`WorkerHttp::serve`].
pub struct WorkerHttp {
    runtime: tokio::runtime::Runtime,
    jobs: mpsc::UnboundedReceiver<Job>,
    shared: Arc<Shared<QueueRoute>>,
    stop: watch::Sender<bool>,
    served: Option<JoinHandle<()>>,
    watched: Option<AsyncFd<OwnedFd>>,
    held: Option<Held>,
    /// An answer given outside the runtime, sent from inside it at the
    /// next `serve` (a task woken from outside a current-thread runtime is
    /// woken through an eventfd: a `write` and an extra `epoll_wait` per
    /// request).
    answered: Option<(Held, Answer)>,
    request: Vec<u8>,
    queue_timeout: Duration,
    /// Requests still to take from the queue before the connections run
    /// again (see `serve`).
    batch: usize,
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
        let mut listeners = Vec::new();
        for &n in &handed.listeners {
            let fd = fds
                .next()
                .ok_or_else(|| HttpError::Options("descriptor count".into()))?;
            let l = std::net::TcpListener::from(fd);
            let io = |what: &str| {
                let context =
                    format!("descriptor {n} named as an HTTP listener in {HTTP_ENV} {what}");
                move |source| HttpError::Io { context, source }
            };
            l.local_addr().map_err(io("is not a TCP socket"))?;
            l.set_nonblocking(true)
                .map_err(io("cannot be made non-blocking"))?;
            listeners.push(l);
        }
        let counters = match handed.counters {
            Some((n, slot)) => {
                let fd = fds
                    .next()
                    .ok_or_else(|| HttpError::Options("descriptor count".into()))?;
                CountersPage::open_slot(&fd, slot).map_err(|e| {
                    HttpError::Options(format!("descriptor {n} named in {HTTP_ENV}: {e}"))
                })?
            }
            None => Counters::default(),
        };
        let access = handed
            .access_log
            .and_then(|_| fds.next())
            .map(AccessLog::from_fd);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HttpError::Io {
                context: "starting a worker's HTTP runtime".into(),
                source: e,
            })?;
        let listeners = {
            let _in = runtime.enter();
            listeners
                .into_iter()
                .map(tokio::net::TcpListener::from_std)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| HttpError::Io {
                    context: "registering the HTTP listeners".into(),
                    source: e,
                })?
        };
        let (jobs_in, jobs) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            route: QueueRoute { jobs: jobs_in },
            opts: handed.front_options(),
            counters: Arc::new(counters),
            access,
            log,
            draining: AtomicBool::new(false),
        });
        let (stop, stopped) = watch::channel(false);
        let served = runtime.spawn(conn::serve(
            listeners,
            Arc::clone(&shared),
            stopped,
            DRAIN_IDLE,
        ));
        Ok(WorkerHttp {
            runtime,
            jobs,
            shared,
            stop,
            served: Some(served),
            watched: None,
            held: None,
            answered: None,
            request: Vec::new(),
            queue_timeout: handed.queue_timeout,
            batch: 0,
            answers: 0,
            sampled_at: None,
        })
    }

    /// Makes `serve` return [`Event::Watched`] when `fd` becomes readable
    /// (it replaces any descriptor watched before).
    ///
    /// # Errors
    /// The runtime cannot watch it (not pollable).
    pub fn watch(&mut self, fd: OwnedFd) -> Result<(), HttpError> {
        let _in = self.runtime.enter();
        let watched = crate::watched::register(fd).map_err(|e| HttpError::Io {
            context: "watching the supervisor's socket".into(),
            source: e,
        })?;
        self.watched = Some(watched);
        Ok(())
    }

    /// Serves until there is something for the caller: the next request,
    /// the watched descriptor readable, or the end after [`WorkerHttp::drain`].
    /// A request handed out before and not answered is answered 500 first.
    ///
    /// Requests are taken in batches, as an event loop takes the events of
    /// one wait: the connections run (writing the responses answered since,
    /// reading what came), the kernel is asked once for what is ready, and
    /// the requests queued by then are taken one after another without
    /// running the connections in between; then the next turn. A turn
    /// costs one `epoll_wait` for the whole batch where a turn per request
    /// cost one per request.
    pub fn serve(&mut self) -> Event {
        if self.held.is_some() {
            self.fail("the worker took its next request without answering this one");
        }
        loop {
            let WorkerHttp {
                runtime,
                jobs,
                served,
                watched,
                answered,
                batch,
                ..
            } = self;
            let found = runtime.block_on(async {
                // Sent from inside the runtime: the connection is woken on
                // this thread's queue, not through the driver's eventfd.
                if let Some((held, answer)) = answered.take() {
                    let _ = held.reply.send(answer);
                }
                if *batch > 0 {
                    *batch -= 1;
                    if let Ok(job) = jobs.try_recv() {
                        return Found::Job(Some(job));
                    }
                }
                // The turn: the connections answered since write their
                // responses and read what came meanwhile.
                tokio::task::yield_now().await;
                let found = tokio::select! {
                    biased;
                    job = jobs.recv() => Found::Job(job),
                    ready = async { watched.as_ref()?.readable().await.ok() }, if watched.is_some() => {
                        if let Some(mut r) = ready {
                            r.clear_ready();
                        }
                        Found::Watched
                    }
                    _ = async { served.as_mut()?.await.ok() }, if served.is_some() => Found::Served,
                };
                *batch = jobs.len();
                found
            });
            match found {
                Found::Job(Some(job)) => {
                    if job.reply.is_closed() {
                        continue; // its client left: nobody reads the answer
                    }
                    let waited = shmlink_sys::clock::coarse_ms().saturating_sub(job.queued);
                    if u128::from(waited) > self.queue_timeout.as_millis() {
                        let why = format!(
                            "the request waited in the worker {waited} ms, longer than the queue timeout of {:?}",
                            self.queue_timeout
                        );
                        self.answered = Some((
                            Held {
                                reply: job.reply,
                                fd: job.fd,
                            },
                            Err(Fault::new(503, why)),
                        ));
                        continue;
                    }
                    let counters = &self.shared.counters;
                    counters.add(Field::Handed, 1);
                    if let Some(t0) = self.sampled_at.take() {
                        let spent = shmlink_sys::clock::thread_cpu_ns().saturating_sub(t0);
                        counters.add(Field::FrontNanos, spent);
                        counters.add(Field::FrontSamples, 1);
                    }
                    self.request = job.request;
                    self.held = Some(Held {
                        reply: job.reply,
                        fd: job.fd,
                    });
                    return Event::Request;
                }
                Found::Job(None) => return Event::Done,
                Found::Watched => return Event::Watched,
                Found::Served => {
                    self.served = None;
                    if self.jobs.is_empty() {
                        return Event::Done;
                    }
                }
            }
        }
    }

    /// Answers the request handed out last with an encoded response
    /// ([`crate::wire::Response`]); one that does not decode is a 502.
    ///
    /// # Errors
    /// [`HttpError::Options`] when no request is waiting for an answer.
    pub fn respond(&mut self, response: &[u8]) -> Result<(), HttpError> {
        let held = self.take_held()?;
        let answer = respond::from_worker(response).map_err(|why| Fault::new(502, why));
        self.answered = Some((held, answer));
        Ok(())
    }

    /// Answers the request handed out last with a 500 (the application
    /// failed); `reason` goes to the log, not to the client.
    pub fn fail(&mut self, reason: &str) {
        if let Ok(held) = self.take_held() {
            self.answered = Some((held, Err(Fault::new(500, reason))));
        }
    }

    fn take_held(&mut self) -> Result<Held, HttpError> {
        let held = self
            .held
            .take()
            .ok_or_else(|| HttpError::Options("no HTTP request is waiting for an answer".into()))?;
        self.shared.counters.add(Field::Returned, 1);
        self.answers += 1;
        if self.answers.is_multiple_of(SAMPLE_EVERY) {
            self.sampled_at = Some(shmlink_sys::clock::thread_cpu_ns());
        }
        Ok(held)
    }

    /// The request handed out by `serve` and not answered yet, encoded
    /// ([`crate::wire::Request`]).
    pub fn request(&self) -> Option<&[u8]> {
        self.held.as_ref().map(|_| self.request.as_slice())
    }

    /// The socket of the request handed out and not answered yet.
    pub fn held_socket(&self) -> Option<RawFd> {
        self.held.as_ref().map(|h| h.fd)
    }

    /// Stops accepting; from now on every response closes its connection,
    /// idle connections close after [`DRAIN_IDLE`]; `serve` returns
    /// [`Event::Done`] once all are closed. Keep calling `serve` until then.
    pub fn drain(&mut self) {
        let _ = self.stop.send(true);
        self.watched = None;
    }

    /// Whether [`WorkerHttp::drain`] was called.
    pub fn draining(&self) -> bool {
        *self.stop.borrow()
    }
}

enum Found {
    Job(Option<Job>),
    Watched,
    Served,
}

impl Drop for WorkerHttp {
    fn drop(&mut self) {
        // Closes every connection at once (a worker dropping its server
        // without draining is exiting).
        self.watched = None;
        if let Some(s) = self.served.take() {
            s.abort();
        }
    }
}
