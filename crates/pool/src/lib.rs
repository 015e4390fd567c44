//! `shmlink pool`: a supervisor of long-lived worker processes (PHP with
//! `Shmlink\Worker`, or native ones with `shmlink::Worker`) behind shmlink
//! addresses.
//!
//! The pool listens on its addresses as any shmlink server does; each call a
//! client makes is handed to an idle worker over shared memory (the worker's
//! loop runs on its own thread and waits on its ring directly) and the
//! worker's answer goes back as the response. Calls wait for a worker in a
//! bounded queue; a worker that dies or hangs fails only the call it was
//! running, with a clear error, and is replaced (with backoff when starts
//! keep failing); workers are recycled between calls after `max_jobs`
//! calls, past `max_memory`, `ttl` or `idle_ttl`; a reload replaces them all
//! without failing a call. A control socket answers `status` and `reload`.
//!
//! # Examples
//! ```no_run
//! use shmlink_pool::{Pool, PoolOptions};
//! let opts = PoolOptions::new(
//!     vec!["shm:/run/app.sock".into()],
//!     vec!["php".into(), "-d".into(), "opcache.enable_cli=1".into(), "worker.php".into()],
//! );
//! let pool = Pool::start(opts)?;
//! // ... later, from a signal handler's thread:
//! pool.stop();
//! # Ok::<(), shmlink_pool::PoolError>(())
//! ```

mod codes;
mod control;
mod dispatch;
mod error;
mod http;
mod http_workers;
mod log_format;
mod metrics;
mod options;
mod restart;
mod shutdown;
mod spawn;
mod status;
mod supervise;
mod table;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink::{Log, RunningServer, Server, ServerOptions, WorkerPort};

pub use codes::*;
pub use error::PoolError;
pub use log_format::{json_line, LogFormat};
pub use options::{
    default_idle_worker_wait, default_wait, default_worker_wait, HttpMode, PoolOptions,
};
pub use status::{Status, WorkerStatus};

use table::{Phase, Shared};

/// What the pool's threads share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) opts: PoolOptions,
    pub(crate) shared: Shared,
    pub(crate) port_address: String,
    pub(crate) log: Arc<Log>,
    /// Output-copying threads of workers, joined at stop.
    copies: Mutex<Vec<JoinHandle<()>>>,
    /// Places that have had a worker (a later start there is a restart).
    started_places: Mutex<Vec<bool>>,
    pub(crate) calls: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) reloads: AtomicU64,
    /// The stop's `--shutdown-timeout` passed with calls still running.
    pub(crate) shutdown_expired: AtomicBool,
    started: Instant,
    /// (when, calls then, calls per second since the sample before).
    rate: Mutex<(Instant, u64, f64)>,
    /// The HTTP front's counters, when it runs.
    pub(crate) http: OnceLock<shmlink_http::StatsHandle>,
    /// What workers that serve HTTP themselves share, when they do.
    pub(crate) http_workers: Option<http_workers::HttpWorkers>,
    /// What `--metrics` shows.
    pub(crate) metrics: metrics::Metrics,
}

impl Inner {
    /// A line in the pool's log.
    pub(crate) fn say(&self, line: &str) {
        self.log.write(&format!("shmlink pool: {line}"));
    }

    fn keep(&self, copies: Vec<JoinHandle<()>>) {
        let mut all = self.copies.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|h| !h.is_finished());
        all.extend(copies);
    }

    /// Records that `place` has had a worker; whether it had one before.
    fn started_once(&self, place: usize) -> bool {
        let mut places = self
            .started_places
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if places.len() <= place {
            places.resize(place + 1, false);
        }
        std::mem::replace(&mut places[place], true)
    }

    /// Updates the calls-per-second figure about once a second.
    fn sample_rate(&self) {
        let mut r = self.rate.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = r.0.elapsed();
        if elapsed >= Duration::from_secs(1) {
            let calls = self.calls_total();
            *r = (
                Instant::now(),
                calls,
                (calls - r.1) as f64 / elapsed.as_secs_f64(),
            );
        }
    }

    /// Calls answered: through the pool, and on direct lines given back.
    fn calls_total(&self) -> u64 {
        self.calls.load(Ordering::Relaxed) + self.shared.line_calls.load(Ordering::Relaxed)
    }

    fn calls_per_s(&self) -> f64 {
        self.rate.lock().unwrap_or_else(|p| p.into_inner()).2
    }
}

/// A running pool.
#[derive(Debug)]
pub struct Pool {
    inner: Arc<Inner>,
    server: Option<RunningServer>,
    front: Option<shmlink_http::Front>,
    control: Option<RunningServer>,
    metrics: Option<metrics::endpoint::Endpoint>,
    threads: Vec<JoinHandle<()>>,
    /// The private directory of the worker port's socket.
    workdir: PathBuf,
}

impl Pool {
    /// Binds the addresses, starts the workers and serves; returns once the
    /// pool listens (workers may still be starting: calls wait for them).
    /// Lines about workers and their output go to standard error.
    ///
    /// # Errors
    /// Invalid options, an address or the control socket that cannot be bound.
    pub fn start(opts: PoolOptions) -> Result<Pool, PoolError> {
        Self::start_with_log(opts, Log::stderr())
    }

    /// As [`Pool::start`], with the pool's log lines (its own and its
    /// workers' output) going to `log`.
    ///
    /// # Errors
    /// As [`Pool::start`].
    pub fn start_with_log(opts: PoolOptions, log: Log) -> Result<Pool, PoolError> {
        opts.validate()?;
        let workdir = private_dir()?;
        let port_address = format!("shm:{}", workdir.join("workers.sock").display());
        let log = Arc::new(log);
        let http_workers = match &opts.http {
            Some(h) if opts.http_mode == HttpMode::Workers => Some(
                http_workers::HttpWorkers::bind(h, opts.workers, opts.queue_timeout)?,
            ),
            _ => None,
        };
        let port = WorkerPort::bind(
            &port_address,
            ServerOptions {
                send_timeout: opts.call_timeout,
                wait: opts.worker_wait,
                log: (*log).clone(),
                ..ServerOptions::default()
            },
        )?;
        let inner = Arc::new(Inner {
            opts: opts.clone(),
            shared: Shared::default(),
            port_address: port_address.clone(),
            log: Arc::clone(&log),
            copies: Mutex::new(Vec::new()),
            started_places: Mutex::new(Vec::new()),
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            reloads: AtomicU64::new(0),
            shutdown_expired: AtomicBool::new(false),
            started: Instant::now(),
            rate: Mutex::new((Instant::now(), 0, 0.0)),
            http: OnceLock::new(),
            http_workers,
            metrics: metrics::Metrics::new()
                .map_err(|e| PoolError::Options(format!("cannot make the pool's metrics: {e}")))?,
        });
        inner.shared.lock().target = opts.workers;
        let mut threads = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| PoolError::Io {
                    context: format!("starting the pool's {name} thread"),
                    source: e,
                })
        };
        let i = Arc::clone(&inner);
        threads.push(spawn(
            "shmlink-pool-accept",
            Box::new(move || accept_workers(&i, &port)),
        )?);
        let i = Arc::clone(&inner);
        threads.push(spawn(
            "shmlink-pool-supervise",
            Box::new(move || supervise::run(&i)),
        )?);
        // Descriptors are not relayed to workers: a client's call with
        // descriptors gets `NotAgreed` before anything is sent.
        let server_opts = ServerOptions {
            wait: opts.wait,
            accept_fds: false,
            lines: opts.lines,
            log: (*log).clone(),
            ..ServerOptions::default()
        };
        let mut pool = Pool {
            inner: Arc::clone(&inner),
            server: None,
            front: None,
            control: None,
            metrics: None,
            threads,
            workdir,
        };
        if !opts.listen.is_empty() {
            let server = Server::bind(&opts.listen, server_opts)?
                .spawn(dispatch::Dispatch::new(Arc::clone(&inner)))?;
            pool.server = Some(server);
        }
        if let Some(http) = opts
            .http
            .as_ref()
            .filter(|_| opts.http_mode == HttpMode::Front)
        {
            let log = Arc::clone(&inner.log);
            let front = shmlink_http::Front::start(
                http.clone(),
                Arc::new(http::PoolBackend::new(Arc::clone(&inner))),
                Box::new(move |line| log.write(&format!("shmlink pool: {line}"))),
            )?;
            let _ = inner.http.set(front.stats_handle());
            pool.front = Some(front);
        }
        if let Some(addr) = &opts.metrics {
            let i = Arc::clone(&inner);
            let render: metrics::endpoint::Render =
                Box::new(move || i.metrics.encode(&status::of(&i)));
            pool.metrics = Some(metrics::endpoint::Endpoint::start(addr, render)?);
        }
        let control = control_path(&opts);
        if let Some(path) = control {
            let addr = format!("unix:{}", path.display());
            let control = Server::bind(&[addr.as_str()], ServerOptions::default())?
                .spawn(control::Control::new(Arc::clone(&inner)))?;
            pool.control = Some(control);
        }
        inner.say(&format!(
            "listening on {}; {} workers of {:?}",
            pool.addresses().join(", "),
            opts.workers,
            opts.command
        ));
        Ok(pool)
    }

    /// The addresses clients call, then the HTTP front's (`http://IP:PORT`).
    pub fn addresses(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .server
            .as_ref()
            .map(|s| s.addresses().iter().map(|a| a.to_string()).collect())
            .unwrap_or_default();
        all.extend(self.http_addresses().iter().map(|a| format!("http://{a}")));
        all
    }

    /// The HTTP addresses (with the ports chosen for port 0).
    pub fn http_addresses(&self) -> Vec<std::net::SocketAddr> {
        match (&self.front, &self.inner.http_workers) {
            (Some(f), _) => f.local_addrs().to_vec(),
            (None, Some(h)) => h.addrs().to_vec(),
            (None, None) => Vec::new(),
        }
    }

    /// The address `GET /metrics` answers on (with the port chosen for
    /// port 0), when `--metrics` was given.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(|m| m.addr())
    }

    /// The control socket, if any.
    pub fn control_path(&self) -> Option<PathBuf> {
        control_path(&self.inner.opts)
    }

    /// Replaces every worker: fresh ones start, and the old ones stop after
    /// their current call, once a fresh one runs. No call fails.
    pub fn reload(&self) {
        reload(&self.inner);
    }

    /// What the pool is doing.
    pub fn status(&self) -> Status {
        status::of(&self.inner)
    }

    /// Stops gracefully: stops accepting calls and answers those received,
    /// tells every worker to stop (killing those that do not exit within
    /// the stop timeout), removes the socket files.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let expiry = shutdown::Expiry::start(&self.inner);
        // The front first: its requests in flight still have workers.
        if let Some(f) = self.front.take() {
            f.stop();
        }
        if let Some(s) = self.server.take() {
            let _ = s.stop();
        }
        if let Some(c) = self.control.take() {
            let _ = c.stop();
        }
        drop(self.metrics.take());
        // Workers running something when told to stop (an HTTP request
        // they serve themselves, a line) have until the shutdown deadline
        // to exit; the others, the stop timeout.
        let running: Vec<u64> = {
            let mut t = self.inner.shared.lock();
            t.stopping = true;
            let running = t
                .slots
                .iter()
                .filter(|s| shutdown::running(&self.inner, s))
                .map(|s| s.id)
                .collect();
            for s in &mut t.slots {
                s.stop("the pool is stopping");
            }
            running
        };
        self.inner.shared.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let deadline = Instant::now() + self.inner.opts.stop_timeout;
        let mut t = self.inner.shared.lock();
        // (The table stays locked: the expiry's own kills wait, and these
        // are its kills for the workers still running something.)
        for s in &mut t.slots {
            let busy = running.contains(&s.id);
            let until = if busy { expiry.deadline } else { deadline };
            let left = until.saturating_duration_since(Instant::now());
            if !wait_exit(&mut s.child, left) {
                self.inner.say(&if busy {
                    shutdown::killed(&self.inner, s.pid)
                } else {
                    format!("worker {} did not exit after the stop: killed", s.pid)
                });
                let _ = s.child.kill();
                let _ = s.child.wait();
            }
        }
        t.slots.clear();
        drop(t);
        let copies =
            std::mem::take(&mut *self.inner.copies.lock().unwrap_or_else(|p| p.into_inner()));
        for c in copies {
            let _ = c.join();
        }
        expiry.finish();
        let _ = std::fs::remove_dir_all(&self.workdir);
        self.inner.say("stopped");
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if self.server.is_some() || self.front.is_some() || !self.threads.is_empty() {
            self.shutdown();
        }
    }
}

/// Waits up to `left` for `child` to exit (polling every 10 ms: `Child` has
/// no wait with a timeout).
fn wait_exit(child: &mut std::process::Child, left: Duration) -> bool {
    let deadline = Instant::now() + left;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

pub(crate) fn reload(inner: &Inner) {
    let mut t = inner.shared.lock();
    t.generation += 1;
    let generation = t.generation;
    for s in &mut t.slots {
        if s.generation < generation {
            s.retire = true;
            s.retire_why = Some(restart::Restart::Reload);
        }
    }
    inner.reloads.fetch_add(1, Ordering::Relaxed);
    inner.say(&format!("reload: starting generation {generation}"));
    drop(t);
    inner.shared.notify_all();
}

/// The control socket: `--control`, or the first `shm:`/`unix:` listen
/// path with `.ctl` appended.
fn control_path(opts: &PoolOptions) -> Option<PathBuf> {
    opts.control.clone().or_else(|| {
        opts.listen.iter().find_map(|a| {
            a.strip_prefix("shm:")
                .or_else(|| a.strip_prefix("unix:"))
                .map(|p| PathBuf::from(format!("{p}.ctl")))
        })
    })
}

/// A fresh directory only this user can enter, for the worker port.
fn private_dir() -> Result<PathBuf, PoolError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    for n in 0..1000 {
        let dir = base.join(format!("shmlink-pool-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(PoolError::Io {
                    context: format!("creating {}", dir.display()),
                    source: e,
                })
            }
        }
    }
    Err(PoolError::Io {
        context: format!("creating a directory in {}", base.display()),
        source: std::io::ErrorKind::AlreadyExists.into(),
    })
}

/// Accepts workers on the port and files each with the process it is.
fn accept_workers(inner: &Inner, port: &WorkerPort) {
    loop {
        if inner.shared.lock().stopping {
            return;
        }
        let accepted = match port.accept(Duration::from_millis(100)) {
            Ok(Some(a)) => a,
            Ok(None) => continue,
            Err(e) => {
                inner.say(&format!("accepting workers failed: {e}"));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let mut t = inner.shared.lock();
        let slot = t.slots.iter_mut().find(|s| {
            Some(s.pid) == accepted.pid && s.phase == Phase::Starting && s.client.is_none()
        });
        match slot {
            Some(s) => {
                s.client = Some(accepted.client);
                let took = s.started.elapsed();
                s.set(Phase::Idle);
                let pid = s.pid;
                t.start_took = took;
                inner.say(&format!("worker {pid} ready"));
                drop(t);
                inner.shared.notify_all();
            }
            None => inner.say(&format!(
                "refused a worker connection from pid {:?}: not a worker this pool started",
                accepted.pid
            )),
        }
    }
}
