//! A running pool: started (the worker port, the workers' supervisor, the
//! listeners, the HTTP front or the workers' own HTTP, the control socket,
//! the metrics endpoint) and stopped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink::{Log, RunningServer, Server, ServerOptions, WorkerPort};

use crate::error::PoolError;
use crate::inner::{reload, Inner};
use crate::options::{HttpMode, PoolOptions};
use crate::status::Status;
use crate::table::{Phase, Shared};
use crate::{control, dispatch, http, http_workers, metrics, shutdown, supervise};

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
            let render: metrics::endpoint::Render = Box::new(move || i.metrics.encode(&i.status()));
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
