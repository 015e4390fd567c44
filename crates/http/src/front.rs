//! The server: a tokio runtime accepting on every address, hyper serving
//! each connection, one backend call per request.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::CONTENT_LENGTH;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::access::AccessLog;
use crate::backend::{Backend, Fault};
use crate::error::HttpError;
use crate::options::FrontOptions;
use crate::respond;
use crate::stats::{Counters, HttpStats, StatsHandle};
use crate::wire;

/// How long a stop waits for requests in flight.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What every connection shares.
struct Shared {
    backend: Arc<dyn Backend>,
    opts: FrontOptions,
    counters: Arc<Counters>,
    access: Option<AccessLog>,
    /// Turns at the backend: [`Backend::concurrency`] of them.
    turns: tokio::sync::Semaphore,
    /// Reasons of faults go here (the pool's log).
    log: Box<dyn Fn(&str) + Send + Sync>,
}

/// A running HTTP front.
pub struct Front {
    runtime: Option<tokio::runtime::Runtime>,
    stop: watch::Sender<bool>,
    done: Option<tokio::task::JoinHandle<()>>,
    addrs: Vec<SocketAddr>,
    shared: Arc<Shared>,
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
            turns,
            backend,
            opts,
            counters: Arc::default(),
            access,
            log,
        });
        let (stop, stopped) = watch::channel(false);
        let s = Arc::clone(&shared);
        let done = runtime.spawn(serve(listeners, s, stopped));
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

/// Accepts on every listener until told to stop, then shuts the
/// connections down gracefully.
async fn serve(listeners: Vec<TcpListener>, shared: Arc<Shared>, stopped: watch::Receiver<bool>) {
    let graceful = Arc::new(GracefulShutdown::new());
    let mut loops = Vec::new();
    for l in listeners {
        let (s, g, mut st) = (Arc::clone(&shared), Arc::clone(&graceful), stopped.clone());
        loops.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = st.changed() => return,
                    accepted = l.accept() => match accepted {
                        Ok((stream, peer)) => connection(&s, &g, stream, peer),
                        // Out of fds, say: wait a little rather than spin.
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
            }
        }));
    }
    for l in loops {
        let _ = l.await;
    }
    if let Ok(g) = Arc::try_unwrap(graceful) {
        let _ = tokio::time::timeout(STOP_GRACE, g.shutdown()).await;
    }
}

/// Serves one accepted connection on its own task.
fn connection(
    shared: &Arc<Shared>,
    graceful: &GracefulShutdown,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let c = &shared.counters;
    c.connections.fetch_add(1, Ordering::Relaxed);
    if c.open.load(Ordering::Relaxed) >= shared.opts.max_connections as u64 {
        c.refused.fetch_add(1, Ordering::Relaxed);
        return; // dropping the stream closes it
    }
    let _ = stream.set_nodelay(true);
    c.open.fetch_add(1, Ordering::Relaxed);
    let remote = peer.to_string();
    let s = Arc::clone(shared);
    let service = service_fn(move |req| {
        let (s, remote) = (Arc::clone(&s), remote.clone());
        async move { Ok::<_, std::convert::Infallible>(request(&s, &remote, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.opts.header_timeout)
        .max_buf_size(shared.opts.max_header_bytes.max(8192))
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    let conn = graceful.watch(conn);
    let s = Arc::clone(shared);
    tokio::spawn(async move {
        // A client that breaks the protocol or goes away ends its own
        // connection only.
        let _ = conn.await;
        s.counters.open.fetch_sub(1, Ordering::Relaxed);
    });
}

/// Answers one request.
async fn request(shared: &Shared, remote: &str, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let line = shared
        .access
        .as_ref()
        .map(|_| format!("{} {} {:?}", req.method(), req.uri(), req.version()));
    let (status, body_in, resp) = answer(shared, remote, req).await;
    let body_out = hyper::body::Body::size_hint(resp.body())
        .exact()
        .unwrap_or(0) as usize;
    shared.counters.answered(status, body_in, body_out);
    if let (Some(log), Some(line)) = (&shared.access, line) {
        log.line(remote, &line, status, body_out, started.elapsed());
    }
    resp
}

/// The status, the request body's size and the response.
async fn answer(
    shared: &Shared,
    remote: &str,
    req: Request<Incoming>,
) -> (u16, usize, Response<Full<Bytes>>) {
    // CONNECT asks a proxy for a tunnel: nothing a worker answers.
    if req.method() == hyper::Method::CONNECT {
        return (405, 0, respond::plain(405, true));
    }
    let max = shared.opts.max_body;
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return (413, 0, respond::plain(413, true));
    }
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return (413, 0, respond::plain(413, true))
        }
        // A broken chunked body, or the client gone mid-body.
        Err(_) => return (400, 0, respond::plain(400, true)),
    };
    let mut encoded = Vec::with_capacity(256 + body.len());
    wire::encode_request(
        &mut encoded,
        parts.method.as_str(),
        parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |pq| pq.as_str()),
        version(parts.version),
        remote,
        parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes())),
        &body,
    );
    // The backend waits inline only briefly and parks every longer wait in
    // block_in_place: this runtime thread's other tasks and its turn at
    // polling the sockets pass to another thread meanwhile. A call made
    // wholly inline froze the whole front while it ran, whatever its
    // threads: the thread that woke for the request was the one polling
    // the sockets, and a parked thread is not woken to take over
    // (tests/http.rs, a_slow_request_holds_up_no_other); one made wholly in
    // block_in_place served fewer requests per second (docs/design.md).
    let wait = shared.backend.queue_timeout();
    let Ok(Ok(_turn)) = tokio::time::timeout(wait, shared.turns.acquire()).await else {
        let why = format!("no worker became free within the queue timeout of {wait:?}");
        return fault(shared, &parts, remote, Fault::new(503, why), body.len());
    };
    let mut answer = Vec::new();
    let called = shared
        .backend
        .call(&encoded, &mut answer, &mut |wait| {
            tokio::task::block_in_place(&mut *wait)
        })
        .map(|()| answer);
    let f = match called {
        Ok(answer) => match respond::from_worker(answer) {
            Ok(resp) => return (resp.status().as_u16(), body.len(), resp),
            Err(why) => Fault::new(502, why),
        },
        Err(f) => f,
    };
    fault(shared, &parts, remote, f, body.len())
}

/// Logs why a request failed and makes its response.
fn fault(
    shared: &Shared,
    parts: &hyper::http::request::Parts,
    remote: &str,
    fault: Fault,
    body_in: usize,
) -> (u16, usize, Response<Full<Bytes>>) {
    (shared.log)(&format!(
        "HTTP {} {} from {remote}: {} ({})",
        parts.method, parts.uri, fault.status, fault.reason
    ));
    (fault.status, body_in, respond::plain(fault.status, false))
}

fn version(v: hyper::Version) -> &'static str {
    match v {
        hyper::Version::HTTP_10 => "HTTP/1.0",
        hyper::Version::HTTP_09 => "HTTP/0.9",
        _ => "HTTP/1.1",
    }
}
