//! What a pool runs and how it supervises.

use std::path::PathBuf;
use std::time::Duration;

use shmlink::WaitStrategy;

use crate::error::PoolError;

/// Options of a [`Pool`](crate::Pool).
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Addresses clients call (`shm:`, `unix:`, `tcp:`).
    pub listen: Vec<String>,
    /// The worker command and its arguments.
    pub command: Vec<String>,
    /// Workers kept running.
    pub workers: usize,
    /// Recycle a worker after this many calls (0: never).
    pub max_jobs: u64,
    /// Recycle a worker whose resident memory exceeds this many bytes (0:
    /// never): a soft limit; it finishes its call and serves on until its
    /// replacement serves.
    pub max_memory: u64,
    /// Kill a worker whose resident memory exceeds this many bytes at once
    /// (0: never): its call fails with `CODE_WORKER_DIED` (HTTP 502).
    pub max_memory_hard: u64,
    /// Recycle a worker older than this.
    pub ttl: Option<Duration>,
    /// Recycle a worker idle longer than this.
    pub idle_ttl: Option<Duration>,
    /// How long a call waits for a free worker.
    pub queue_timeout: Duration,
    /// Most calls waiting for a worker at once; more are refused at once.
    pub queue_size: usize,
    /// How long a worker may take to answer one call before it is killed.
    pub call_timeout: Duration,
    /// How long a started worker may take to connect.
    pub start_timeout: Duration,
    /// How long a worker told to stop may take to exit before it is killed.
    pub stop_timeout: Duration,
    /// When the pool stops: how long the calls and HTTP requests in flight
    /// may still run (new ones are refused at once); past it, the workers
    /// still running one are killed and their callers told why.
    pub shutdown_timeout: Duration,
    /// The control socket (status, reload), mode 0600.
    pub control: Option<PathBuf>,
    /// How the pool's session threads wait for their clients' calls.
    /// Default: [`default_wait`].
    pub wait: WaitStrategy,
    /// How the pool waits for a worker's answer. Default:
    /// [`default_worker_wait`].
    pub worker_wait: WaitStrategy,
    /// How the workers wait for their next call (passed to each in
    /// `SHMLINK_WORKER_WAIT`, which replaces the wait strategy of its
    /// options). Default: [`default_idle_worker_wait`].
    pub idle_worker_wait: WaitStrategy,
    /// HTTP served, if any: its addresses and limits.
    pub http: Option<shmlink_http::FrontOptions>,
    /// Who parses HTTP: the workers themselves (the default), or the
    /// pool's front, which turns each request into a call to a worker.
    pub http_mode: HttpMode,
    /// Whether `shm:` clients calling one at a time may get a worker of
    /// their own on a direct line while workers are idle (their calls then
    /// skip the pool). Default true.
    pub lines: bool,
    /// `HOST:PORT` where `GET /metrics` answers in the Prometheus
    /// (OpenMetrics) text format, if any.
    pub metrics: Option<String>,
    /// The command line that starts this pool again (the program, then
    /// its arguments), run at a hot upgrade ([`crate::Pool::upgrade`]):
    /// the process it starts takes everything over ([`crate::Pool::take_over`]).
    /// `shmlink pool` sets its own path and arguments. None: no upgrade.
    pub successor: Option<Vec<std::ffi::OsString>>,
}

/// Who parses HTTP for a pool with `--http`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpMode {
    /// Every worker accepts and parses HTTP itself, on the listening
    /// sockets the pool hands down; the pool only supervises. The fastest:
    /// no other process is on a request's path.
    #[default]
    Workers,
    /// The pool's front accepts and parses; each request becomes a call to
    /// an idle worker (for workers that cannot serve HTTP themselves, and
    /// pools that also take calls on `--listen`).
    Front,
}

impl std::str::FromStr for HttpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "workers" => Ok(HttpMode::Workers),
            "front" => Ok(HttpMode::Front),
            other => Err(format!("{other:?} is not an HTTP mode (workers or front)")),
        }
    }
}

// A call through the pool has three parties: the client, the pool's session
// thread and the worker; on a small machine two of them share a CPU. Every
// party waits with the default strategy, which finds that out itself: a
// spin whose yield takes long hands its CPU over and sleeps for a while
// (docs/design.md, "Doorbell and wait strategies"). An earlier fixed rule
// (sleep on fewer than 4 CPUs) won only where the bench pinned the pool and
// its worker to one CPU; unpinned, as pools run, the adaptive default made
// relayed calls 1.5-3x faster on 2 CPUs (design.md, "How the pool waits").

/// How the pool's session threads wait for their clients' next call when
/// nothing says otherwise: the default strategy.
pub fn default_wait() -> WaitStrategy {
    WaitStrategy::default()
}

/// How the pool waits for a worker's answer when nothing says otherwise:
/// the default strategy.
pub fn default_worker_wait() -> WaitStrategy {
    WaitStrategy::default()
}

/// How workers wait for their next call when nothing says otherwise: the
/// default strategy.
pub fn default_idle_worker_wait() -> WaitStrategy {
    WaitStrategy::default()
}

impl PoolOptions {
    /// Options for `command` behind `listen`, with the defaults: 2 workers,
    /// no recycling, 10 s queue timeout, 256 queued calls, 30 s per call,
    /// 10 s to start, 5 s to stop, [`default_wait`] for clients,
    /// [`default_worker_wait`] for workers' answers and
    /// [`default_idle_worker_wait`] for idle workers.
    pub fn new(listen: Vec<String>, command: Vec<String>) -> PoolOptions {
        PoolOptions {
            listen,
            command,
            workers: 2,
            max_jobs: 0,
            max_memory: 0,
            max_memory_hard: 0,
            ttl: None,
            idle_ttl: None,
            queue_timeout: Duration::from_secs(10),
            queue_size: 256,
            call_timeout: Duration::from_secs(30),
            start_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(30),
            control: None,
            wait: default_wait(),
            worker_wait: default_worker_wait(),
            idle_worker_wait: default_idle_worker_wait(),
            http: None,
            http_mode: HttpMode::Workers,
            lines: true,
            metrics: None,
            successor: None,
        }
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`PoolError::Options`] naming the field.
    pub fn validate(&self) -> Result<(), PoolError> {
        let bad = |what: &str| Err(PoolError::Options(what.to_string()));
        if self.listen.is_empty() && self.http.is_none() {
            return bad("at least one --listen or --http address is needed");
        }
        if let Some(h) = &self.http {
            h.validate()?;
            if self.http_mode == HttpMode::Workers && !self.listen.is_empty() {
                return bad(
                    "--listen cannot be combined with --http when the workers serve HTTP themselves \
                     (--http-mode workers, the default): they wait on their HTTP connections, not \
                     for calls; use --http-mode front to serve both",
                );
            }
        }
        if self.command.is_empty() {
            return bad("no worker command (after --)");
        }
        if let Some(m) = &self.metrics {
            use std::net::ToSocketAddrs;
            if m.to_socket_addrs().map_or(true, |mut a| a.next().is_none()) {
                return Err(PoolError::Options(format!(
                    "--metrics {m:?} is not HOST:PORT (e.g. 127.0.0.1:9464)"
                )));
            }
        }
        if self.workers == 0 {
            return bad("--workers must be at least 1");
        }
        if self.queue_size == 0 {
            return bad("--queue must be at least 1");
        }
        for (name, d) in [
            ("--queue-timeout", self.queue_timeout),
            ("--call-timeout", self.call_timeout),
            ("--start-timeout", self.start_timeout),
            ("--stop-timeout", self.stop_timeout),
            ("--shutdown-timeout", self.shutdown_timeout),
        ] {
            if d.is_zero() {
                return Err(PoolError::Options(format!(
                    "{name} must be greater than zero"
                )));
            }
        }
        Ok(())
    }
}
