//! The pool's front (`--http-mode front`): the engine's loop on threads of
//! its own ([`crate::engine`]: accepting, parsing, limits, responses), and
//! calls to the [`Backend`] (the pool's dispatch to its workers) on as many
//! threads as the backend answers at once. A loop never waits for a
//! worker: it hands each request to the callers' queue and goes on; a
//! caller that is done puts the answer on its loop's list and wakes it.
//! A request that waits in the queue longer than the backend's queue
//! timeout is answered 503.

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink_sys::eventfd::EventFd;

use crate::access::AccessLog;
use crate::backend::{Backend, Fault};
use crate::counters::{Counters, StatsHandle};
use crate::engine::{Engine, Limits, ReqId, Turn};
use crate::error::HttpError;
use crate::files::Files;
use crate::options::FrontOptions;
use crate::stats::HttpStats;

/// An answer on its way back to its loop.
type Done = (ReqId, Result<Vec<u8>, Fault>);

/// A request on its way to a caller.
struct Job {
    id: ReqId,
    request: Vec<u8>,
    queued: Instant,
    /// Its loop's index.
    home: usize,
}

/// One loop's mailbox: answers, and its waker.
struct Mailbox {
    done: Mutex<Vec<Done>>,
    waker: Arc<EventFd>,
}

/// What the loops and the callers share.
struct Shared {
    backend: Arc<dyn Backend>,
    jobs: Mutex<VecDeque<Job>>,
    more: Condvar,
    mailboxes: Vec<Mailbox>,
    stop: AtomicBool,
    /// Set once every loop ended: no job will come, the callers end. (Not
    /// `stop`: a connection still open while the loops drain may send a
    /// request, which needs a caller.)
    loops_done: AtomicBool,
    /// How long idle connections stay open once stopping.
    idle_grace: Mutex<Duration>,
    queue_timeout: Duration,
}

impl Shared {
    fn jobs(&self) -> MutexGuard<'_, VecDeque<Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn deliver(&self, home: usize, done: Done) {
        let m = &self.mailboxes[home];
        m.done.lock().unwrap_or_else(|p| p.into_inner()).push(done);
        m.waker.signal();
    }

    /// Answers 503 to the jobs that waited past the queue timeout; when
    /// the next one will.
    fn expire(&self) -> Option<Instant> {
        let mut jobs = self.jobs();
        while let Some(j) = jobs.front() {
            let due = j.queued + self.queue_timeout;
            if Instant::now() < due {
                return Some(due);
            }
            let Some(j) = jobs.pop_front() else { break };
            let why = format!(
                "no worker became free within the queue timeout of {:?}",
                self.queue_timeout
            );
            self.deliver(j.home, (j.id, Err(Fault::new(503, why))));
        }
        None
    }
}

/// A running HTTP front.
pub struct Front {
    addrs: Vec<SocketAddr>,
    counters: Arc<Counters>,
    shared: Arc<Shared>,
    loops: Vec<JoinHandle<()>>,
    callers: Vec<JoinHandle<()>>,
    /// Copies of the listening sockets, to hand down at an upgrade.
    listeners: Vec<TcpListener>,
    /// How long idle keep-alive connections stay open at the stop.
    idle_grace: Duration,
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
    /// that cannot be opened, threads that cannot start.
    pub fn start(
        opts: FrontOptions,
        backend: Arc<dyn Backend>,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Front, HttpError> {
        opts.validate()?;
        let mut listeners = Vec::new();
        for a in &opts.listen {
            listeners.push(
                TcpListener::bind(a.as_str()).map_err(|source| HttpError::Io {
                    context: format!("binding the HTTP address {a}"),
                    source,
                })?,
            );
        }
        Self::start_on(listeners, opts, backend, log)
    }

    /// As [`Front::start`], on listening sockets already bound (a
    /// predecessor's, handed down at a hot upgrade) instead of
    /// `opts.listen`.
    ///
    /// # Errors
    /// As [`Front::start`].
    pub fn start_on(
        listeners: Vec<TcpListener>,
        opts: FrontOptions,
        backend: Arc<dyn Backend>,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Front, HttpError> {
        opts.validate()?;
        let io = |context: String| move |source| HttpError::Io { context, source };
        let addrs = listeners
            .iter()
            .map(TcpListener::local_addr)
            .collect::<Result<Vec<_>, _>>()
            .map_err(io("reading a bound HTTP address".into()))?;
        let access = opts
            .access_log
            .as_deref()
            .map(AccessLog::open)
            .transpose()?;
        let access = access.map(Arc::new);
        let files = Files::open(opts.root.as_deref(), &opts.sendfile)?.map(Arc::new);
        let log: Arc<dyn Fn(&str) + Send + Sync> = Arc::from(log);
        let counters = Arc::new(Counters::default());
        let limits = Limits {
            max_body: opts.max_body,
            max_header_bytes: opts.max_header_bytes,
            header_timeout: opts.header_timeout,
            send_timeout: opts.send_timeout,
            max_connections: opts.max_connections,
            spool: opts.spool(),
        };
        let loops_n = opts.threads.max(1);
        let mut mailboxes = Vec::new();
        for _ in 0..loops_n {
            let waker = EventFd::new().map_err(io("making the front's waker".into()))?;
            mailboxes.push(Mailbox {
                done: Mutex::new(Vec::new()),
                waker: Arc::new(waker),
            });
        }
        let shared = Arc::new(Shared {
            queue_timeout: backend.queue_timeout(),
            backend,
            jobs: Mutex::new(VecDeque::new()),
            more: Condvar::new(),
            mailboxes,
            stop: AtomicBool::new(false),
            loops_done: AtomicBool::new(false),
            idle_grace: Mutex::new(Duration::ZERO),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(io(format!("starting the front's {name} thread")))
        };
        let mut front = Front {
            addrs,
            counters: Arc::clone(&counters),
            shared: Arc::clone(&shared),
            loops: Vec::new(),
            callers: Vec::new(),
            listeners: Vec::new(),
            idle_grace: Duration::ZERO,
        };
        for _ in 0..shared.backend.concurrency().max(1) {
            let s = Arc::clone(&shared);
            front
                .callers
                .push(spawn("shmlink-http-call", Box::new(move || caller(&s)))?);
        }
        // Each loop makes its engine on its own thread (an epoll set's
        // event buffer stays where it was made) and says whether it could.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for home in 0..loops_n {
            let mine = listeners
                .iter()
                .map(TcpListener::try_clone)
                .collect::<Result<Vec<_>, _>>()
                .map_err(io("sharing the HTTP listeners between threads".into()))?;
            let (s, l, c, a, lim, tx, f) = (
                Arc::clone(&shared),
                Arc::clone(&log),
                Arc::clone(&counters),
                access.clone(),
                limits.clone(),
                ready_tx.clone(),
                files.clone(),
            );
            front.loops.push(spawn(
                "shmlink-http",
                Box::new(move || {
                    let made = Engine::new(mine, lim, c, a, Box::new(move |line| l(line)))
                        .and_then(|mut e| {
                            if let Some(f) = f {
                                e.serve_files(f);
                            }
                            e.wake_on(Arc::clone(&s.mailboxes[home].waker)).map(|()| e)
                        });
                    match made {
                        Ok(engine) => {
                            let _ = tx.send(Ok(()));
                            run_loop(engine, home, &s);
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                }),
            )?);
        }
        front.listeners = listeners;
        for _ in 0..loops_n {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(io("serving the HTTP listeners".into())(e)),
                Err(_) => {
                    return Err(HttpError::Options(
                        "a front thread ended at its start".into(),
                    ))
                }
            }
        }
        Ok(front)
    }

    /// The addresses it listens on (with the ports chosen for port 0).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Its counters.
    pub fn stats(&self) -> HttpStats {
        self.counters.snapshot()
    }

    /// A handle that reads its counters from elsewhere.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(Arc::clone(&self.counters))
    }

    /// Its listening sockets (to hand down to a successor at an upgrade).
    pub fn listeners(&self) -> &[TcpListener] {
        &self.listeners
    }

    /// Stops accepting, closes idle connections at once, lets requests in
    /// flight finish (up to 5 s), and ends its threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Stops as another process goes on serving the same listening sockets
    /// (a hot upgrade): stops accepting; every response from now on says
    /// `Connection: close` and closes its connection; a connection idle in
    /// keep-alive closes only after `idle_grace` (a client that sends its
    /// next request meanwhile gets its answer, then the close), so that no
    /// client sees its connection reset between requests.
    pub fn stop_draining(mut self, idle_grace: Duration) {
        self.idle_grace = idle_grace;
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.listeners.clear();
        *self
            .shared
            .idle_grace
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = self.idle_grace;
        self.shared.stop.store(true, Ordering::Release);
        for m in &self.shared.mailboxes {
            m.waker.signal();
        }
        for l in self.loops.drain(..) {
            let _ = l.join();
        }
        self.shared.loops_done.store(true, Ordering::Release);
        drop(self.shared.jobs());
        self.shared.more.notify_all();
        for c in self.callers.drain(..) {
            let _ = c.join();
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        if !self.loops.is_empty() {
            self.shutdown();
        }
    }
}

/// One loop: serves its connections, queues each request for a caller,
/// writes the answers its callers deliver.
fn run_loop(mut engine: Engine, home: usize, s: &Shared) {
    let mut stopped = false;
    loop {
        if !stopped && s.stop.load(Ordering::Acquire) {
            stopped = true;
            // The pool is going away: nobody else will answer an idle
            // connection, so it closes at once (after the grace, when a
            // successor answers on the same listeners).
            engine.stop(*s.idle_grace.lock().unwrap_or_else(|p| p.into_inner()));
        }
        let until = s.expire().map(|at| {
            let left = at.saturating_duration_since(Instant::now());
            engine.now() + left.as_millis() as u64 + 1
        });
        match engine.turn(until) {
            Turn::Ready => {
                let mut jobs = Vec::new();
                while let Some(r) = engine.pop_ready() {
                    jobs.push(Job {
                        id: r.id,
                        request: r.request,
                        queued: Instant::now(),
                        home,
                    });
                }
                let n = jobs.len();
                s.jobs().extend(jobs);
                for _ in 0..n {
                    s.more.notify_one();
                }
            }
            Turn::Woken => {
                let done = std::mem::take(
                    &mut *s.mailboxes[home]
                        .done
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()),
                );
                for (id, answer) in done {
                    match answer {
                        Ok(bytes) => {
                            engine.answer(id, Ok(&bytes));
                            engine.recycle(bytes);
                        }
                        Err(f) => engine.answer(id, Err(f)),
                    }
                }
            }
            Turn::Timer | Turn::Watched => {}
            Turn::Done => return,
        }
    }
}

/// One caller: takes the next request and makes the backend's call.
fn caller(s: &Shared) {
    loop {
        let job = {
            let mut jobs = s.jobs();
            loop {
                if let Some(j) = jobs.pop_front() {
                    break j;
                }
                if s.loops_done.load(Ordering::Acquire) {
                    return;
                }
                jobs = s.more.wait(jobs).unwrap_or_else(|p| p.into_inner());
            }
        };
        if job.queued.elapsed() > s.queue_timeout {
            let why = format!(
                "no worker became free within the queue timeout of {:?}",
                s.queue_timeout
            );
            s.deliver(job.home, (job.id, Err(Fault::new(503, why))));
            continue;
        }
        let mut answer = Vec::new();
        let result = s.backend.call(&job.request, &mut answer).map(|()| answer);
        s.deliver(job.home, (job.id, result));
    }
}
