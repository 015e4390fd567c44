//! The pool's front: a tokio runtime accepting on every address, hyper
//! serving each connection ([`crate::conn`]), one backend call per request
//! ([`crate::request`]).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::access::AccessLog;
use crate::backend::{Backend, Fault};
use crate::conn;
use crate::counters::{Counters, StatsHandle};
use crate::error::HttpError;
use crate::options::FrontOptions;
use crate::request::{Answer, Conn, Route, Shared};
use crate::respond;
use crate::stats::HttpStats;

/// The front's route: a turn at the backend, then its blocking call.
pub(crate) struct BackendRoute {
    backend: Arc<dyn Backend>,
    /// Turns at the backend: [`Backend::concurrency`] of them.
    turns: tokio::sync::Semaphore,
}

impl Route for BackendRoute {
    async fn call(&self, request: Vec<u8>, _conn: &Conn) -> Answer {
        // The backend waits inline only briefly and parks every longer wait
        // in block_in_place: this runtime thread's other tasks and its turn
        // at polling the sockets pass to another thread meanwhile. A call
        // made wholly inline froze the whole front while it ran, whatever
        // its threads: the thread that woke for the request was the one
        // polling the sockets, and a parked thread is not woken to take over
        // (tests/http.rs, a_slow_request_holds_up_no_other); one made wholly
        // in block_in_place served fewer requests per second
        // (docs/design.md).
        let wait = self.backend.queue_timeout();
        let Ok(Ok(_turn)) = tokio::time::timeout(wait, self.turns.acquire()).await else {
            let why = format!("no worker became free within the queue timeout of {wait:?}");
            return Err(Fault::new(503, why));
        };
        let mut answer = Vec::new();
        self.backend.call(&request, &mut answer, &mut |wait| {
            tokio::task::block_in_place(&mut *wait)
        })?;
        respond::from_worker(&answer).map_err(|why| Fault::new(502, why))
    }
}

/// A running HTTP front.
pub struct Front {
    runtime: Option<tokio::runtime::Runtime>,
    stop: watch::Sender<bool>,
    done: Option<tokio::task::JoinHandle<()>>,
    addrs: Vec<SocketAddr>,
    shared: Arc<Shared<BackendRoute>>,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front").field("addrs", &self.addrs).finish()
    }
}

impl Front {
    /// Binds every address and serves requests with `backend`; returns once
    /// it listens. `log` receives a line for each fault (why a 5xx was sent).
    ///
    /// # Errors
    /// Invalid options, an address that cannot be bound, the access log
    /// that cannot be opened.
    pub fn start(
        opts: FrontOptions,
        backend: Arc<dyn Backend>,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Front, HttpError> {
        opts.validate()?;
        let access = opts
            .access_log
            .as_deref()
            .map(AccessLog::open)
            .transpose()?;
        let threads = match opts.threads {
            // At least two (a call waiting for its worker holds a thread of
            // the runtime's blocking pool, not one of these).
            0 => std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
            n => n,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("shmlink-http")
            .enable_all()
            .build()
            .map_err(|e| HttpError::Io {
                context: "starting the HTTP front's runtime".into(),
                source: e,
            })?;
        let mut listeners = Vec::new();
        for a in &opts.listen {
            let l = runtime
                .block_on(TcpListener::bind(a.as_str()))
                .map_err(|e| HttpError::Io {
                    context: format!("binding the HTTP address {a}"),
                    source: e,
                })?;
            listeners.push(l);
        }
        let addrs = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| HttpError::Io {
                context: "reading a bound HTTP address".into(),
                source: e,
            })?;
        let turns = tokio::sync::Semaphore::new(
            backend
                .concurrency()
                .clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
        );
        let shared = Arc::new(Shared {
            route: BackendRoute { backend, turns },
            opts,
            counters: Arc::new(Counters::default()),
            access,
            log,
            draining: AtomicBool::new(false),
        });
        let (stop, stopped) = watch::channel(false);
        let s = Arc::clone(&shared);
        // Stopped, the front closes idle connections at once (the pool is
        // going away; nobody else will answer them).
        let done = runtime.spawn(conn::serve(listeners, s, stopped, Duration::ZERO));
        Ok(Front {
            runtime: Some(runtime),
            stop,
            done: Some(done),
            addrs,
            shared,
        })
    }

    /// The addresses it listens on (with the ports chosen for port 0).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Its counters.
    pub fn stats(&self) -> HttpStats {
        self.shared.counters.snapshot()
    }

    /// A handle that reads its counters from elsewhere.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(Arc::clone(&self.shared.counters))
    }

    /// Stops accepting, lets requests in flight finish (up to 5 s), closes
    /// every connection and ends the runtime's threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let (Some(rt), Some(done)) = (self.runtime.as_ref(), self.done.take()) {
            let _ = rt.block_on(done);
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        if self.runtime.is_some() {
            self.shutdown();
        }
    }
}
