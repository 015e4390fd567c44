//! A running pool: started (the worker port, the workers' supervisor, the
//! listeners, the HTTP front or the workers' own HTTP, the control socket,
//! the metrics endpoint) and stopped.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink::{Log, PortInterrupter, RunningServer, Server, ServerOptions, WorkerPort};

use crate::error::PoolError;
use crate::heritage::{self, Inheritance};
use crate::inner::{reload, Inner};
use crate::options::{HttpMode, PoolOptions};
use crate::status::Status;
use crate::table::{Phase, Shared};
use crate::{
    control, dispatch, http, http_workers, metrics, shutdown, succession, supervise, upgrade,
};

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
    /// Ends the worker port's accept wait at the stop.
    port_interrupter: PortInterrupter,
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
        Self::launch(opts, log, None)
    }

    /// Starts as the successor of a running pool at a hot upgrade (this
    /// process was started by its [`Pool::upgrade`], and `inheritance` is
    /// [`Inheritance::from_env`]): starts the workers and waits until they
    /// serve, takes over the old pool's client and control servers (their
    /// listeners and live sessions) and serves on its HTTP and
    /// metrics listening sockets; then tells the old pool, which stops.
    /// Returns once it serves.
    ///
    /// # Errors
    /// As [`Pool::start`]; workers that do not serve within the start
    /// timeout; a hand-over refused (the old pool then serves on).
    pub fn take_over(
        opts: PoolOptions,
        log: Log,
        inheritance: Inheritance,
    ) -> Result<Pool, PoolError> {
        Self::launch(opts, log, Some(inheritance))
    }

    fn launch(
        opts: PoolOptions,
        log: Log,
        mut inherit: Option<Inheritance>,
    ) -> Result<Pool, PoolError> {
        opts.validate()?;
        let workdir = private_dir()?;
        let port_address = format!("shm:{}", workdir.join("workers.sock").display());
        let log = Arc::new(log);
        let mut handed_http = inherit
            .as_mut()
            .map(|i| std::mem::take(&mut i.http))
            .unwrap_or_default();
        let handed_metrics = inherit.as_mut().and_then(|i| i.metrics.take());
        let http_workers = match &opts.http {
            Some(h) if opts.http_mode == HttpMode::Workers => {
                Some(http_workers::HttpWorkers::bind(
                    h,
                    opts.workers,
                    opts.queue_timeout,
                    std::mem::take(&mut handed_http),
                )?)
            }
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
            upgrades: succession::Upgrades::new(workdir.clone()),
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
        let port_interrupter = port.interrupter();
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
        let dir = opts.successor.as_ref().map(|_| workdir.clone());
        let handover = move |name: &str| dir.as_ref().map(|d| d.join(name));
        let server_opts = ServerOptions {
            wait: opts.wait,
            accept_fds: false,
            lines: opts.lines,
            log: (*log).clone(),
            handover: handover(heritage::CLIENTS_SOCKET),
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
            port_interrupter,
        };
        if let Some(i) = &inherit {
            // Calls keep being answered by the old pool's workers until
            // these serve: none waits for a worker to boot.
            let within = opts.start_timeout;
            if !inner
                .shared
                .wait_serving(opts.workers, Instant::now() + within)
            {
                return Err(PoolError::Options(format!(
                    "taking over from the pool in {}: {} workers did not serve within the start \
                     timeout of {within:?}{}",
                    i.dir.display(),
                    opts.workers,
                    inner
                        .shared
                        .lock()
                        .last_failure
                        .as_deref()
                        .map_or_else(String::new, |f| format!(" (last failure: {f})"))
                )));
            }
        }
        if !opts.listen.is_empty() {
            let server = match predecessor(&inherit, heritage::CLIENTS_SOCKET) {
                Some(path) => Server::take_over(path, server_opts)?,
                None => Server::bind(&opts.listen, server_opts)?,
            };
            pool.server = Some(server.spawn(dispatch::Dispatch::new(Arc::clone(&inner)))?);
        }
        if let Some(http) = opts
            .http
            .as_ref()
            .filter(|_| opts.http_mode == HttpMode::Front)
        {
            let log = Arc::clone(&inner.log);
            let backend = Arc::new(http::PoolBackend::new(Arc::clone(&inner)));
            let log = Box::new(move |line: &str| log.write(&format!("shmlink pool: {line}")));
            let front = if handed_http.is_empty() {
                shmlink_http::Front::start(http.clone(), backend, log)?
            } else {
                shmlink_http::Front::start_on(
                    std::mem::take(&mut handed_http),
                    http.clone(),
                    backend,
                    log,
                )?
            };
            let _ = inner.http.set(front.stats_handle());
            pool.front = Some(front);
        }
        if let Some(addr) = &opts.metrics {
            let i = Arc::clone(&inner);
            let render: metrics::endpoint::Render = Box::new(move || i.metrics.encode(&i.status()));
            pool.metrics = Some(match handed_metrics {
                Some(l) => metrics::endpoint::Endpoint::start_on(l, render)?,
                None => metrics::endpoint::Endpoint::start(addr, render)?,
            });
        }
        let control = control_path(&opts);
        let copts = ServerOptions {
            handover: handover(heritage::CONTROL_SOCKET),
            ..ServerOptions::default()
        };
        let mut control_later = None;
        if let Some(path) = &control {
            let addr = format!("unix:{}", path.display());
            let server = match predecessor(&inherit, heritage::CONTROL_SOCKET) {
                // The clients are this pool's already: a control socket
                // that cannot be taken (a session the old one cannot hand)
                // must not undo that. It is bound again once the old pool
                // has stopped and removed it.
                Some(h) => Server::take_over(h, copts.clone())
                    .map_err(|e| {
                        inner.say(&format!(
                            "taking the control socket over failed ({e}); binding {} again once the \
                             old pool has stopped",
                            path.display()
                        ));
                        control_later = Some(addr.clone());
                    })
                    .ok(),
                None => Some(Server::bind(&[addr.as_str()], copts.clone())?),
            };
            if let Some(server) = server {
                pool.control = Some(server.spawn(control::Control::new(Arc::clone(&inner)))?);
            }
        }
        pool.keep_for_successor()?;
        if let Some(i) = inherit {
            i.serving()?;
        }
        if let Some(addr) = control_later {
            pool.control = Some(
                bind_when_free(&addr, copts, opts.shutdown_timeout + opts.stop_timeout)?
                    .spawn(control::Control::new(Arc::clone(&inner)))?,
            );
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

    /// Starts a hot upgrade: runs [`PoolOptions::successor`], which takes
    /// everything over ([`Pool::take_over`]); once it serves,
    /// [`Upgraded::wait`] returns and the owner stops this pool. Returns
    /// the successor's pid; how it went shows in [`Status::upgrade`] and
    /// the log.
    ///
    /// # Errors
    /// No successor command, an upgrade under way, the pool stopping, a
    /// command that cannot be started.
    pub fn upgrade(&self) -> Result<u32, PoolError> {
        upgrade::begin(&self.inner).map_err(PoolError::Options)
    }

    /// A handle whose [`Upgraded::wait`] returns once a successor serves.
    pub fn upgraded(&self) -> Upgraded {
        Upgraded(Arc::clone(&self.inner))
    }

    /// What the pool is doing.
    pub fn status(&self) -> Status {
        self.inner.status()
    }

    /// Stops gracefully: stops accepting calls and answers those received,
    /// tells every worker to stop (killing those that do not exit within
    /// the stop timeout), removes the socket files.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let expiry = shutdown::Expiry::start(&self.inner);
        let t0 = Instant::now();
        let mut phases = Vec::new();
        let mut mark =
            |what: &str| phases.push(format!("{what} {:.1} ms", t0.elapsed().as_secs_f64() * 1e3));
        self.inner.upgrades.forget();
        // The front first: its requests in flight still have workers. After
        // an upgrade the successor serves the same listening sockets: the
        // connections close between requests, never under a client.
        if let Some(f) = self.front.take() {
            if self.inner.upgrades.upgraded() {
                f.stop_draining(
                    self.inner
                        .opts
                        .http
                        .as_ref()
                        .map_or(Duration::ZERO, |h| h.header_timeout.min(UPGRADE_IDLE_GRACE)),
                );
            } else {
                f.stop();
            }
            mark("HTTP done");
        }
        if let Some(s) = self.server.take() {
            let _ = s.stop();
        }
        if let Some(c) = self.control.take() {
            let _ = c.stop();
        }
        drop(self.metrics.take());
        mark("servers stopped");
        shutdown::revoke_lines(&self.inner, expiry.deadline);
        mark("lines back");
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
        self.port_interrupter.interrupt();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        mark("threads joined");
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
        mark("workers exited");
        let copies =
            std::mem::take(&mut *self.inner.copies.lock().unwrap_or_else(|p| p.into_inner()));
        for c in copies {
            let _ = c.join();
        }
        expiry.finish();
        let _ = std::fs::remove_dir_all(&self.workdir);
        mark("output copied");
        self.inner.say(&format!("stopped ({})", phases.join(", ")));
    }
}

impl Pool {
    /// Files copies of the HTTP front's and metrics endpoint's listening
    /// sockets for a successor (the workers' HTTP sockets are the pool's
    /// own already).
    fn keep_for_successor(&self) -> Result<(), PoolError> {
        if self.inner.opts.successor.is_none() {
            return Ok(());
        }
        let copy = |l: &std::net::TcpListener| {
            l.as_fd().try_clone_to_owned().map_err(|e| PoolError::Io {
                context: "keeping a listening socket for a successor".into(),
                source: e,
            })
        };
        let http = self
            .front
            .as_ref()
            .map(|f| {
                f.listeners()
                    .iter()
                    .map(copy)
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        let metrics = self
            .metrics
            .as_ref()
            .map(|m| copy(m.listener()))
            .transpose()?;
        self.inner.upgrades.keep(http, metrics);
        Ok(())
    }
}

/// Waits for a hot upgrade's successor to serve.
#[derive(Debug, Clone)]
pub struct Upgraded(Arc<Inner>);

impl Upgraded {
    /// Returns once a successor serves (the pool should then be stopped:
    /// it drains).
    pub fn wait(&self) {
        self.0.upgrades.wait();
    }
}

/// Binds `addr` once the server listening there has gone (a predecessor
/// stopping after an upgrade), trying every 20 ms for up to `within`.
fn bind_when_free(addr: &str, opts: ServerOptions, within: Duration) -> Result<Server, PoolError> {
    let deadline = Instant::now() + within + Duration::from_secs(5);
    loop {
        match Server::bind(&[addr], opts.clone()) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => return Err(e.into()),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The hand-over socket `name` of the pool this one takes over, when it
/// has one.
fn predecessor(inherit: &Option<Inheritance>, name: &str) -> Option<PathBuf> {
    let path = inherit.as_ref()?.dir.join(name);
    path.exists().then_some(path)
}

/// How long an HTTP connection idle in keep-alive stays open after an
/// upgrade (for its client's next request, answered with
/// `Connection: close`), at most the header timeout.
const UPGRADE_IDLE_GRACE: Duration = Duration::from_secs(2);

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
