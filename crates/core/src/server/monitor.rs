//! The accept loop, which is also the monitor: one epoll set holds the
//! listeners, the stop eventfd and the control socket of every `shm:`
//! session. When a client's control socket hangs up, the monitor flags the
//! session and wakes its thread, so idle sessions sleep without timeouts and
//! cost no CPU, yet a dead client is noticed at once.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use shmlink_sys::epoll::{Epoll, Interest};
use shmlink_sys::eventfd::EventFd;
use shmlink_sys::fs::{is_out_of_descriptors, reserve_descriptor};

use super::listener::Listener;
use super::policy::Policy;
use super::pool::Pool;
use super::prepare::Preparer;
use super::session::{self, Conn, Entry};
use super::{Handler, Stats};
use crate::address::{Address, Transport};
use crate::error::{Error, Result};
use crate::options::{ServerOptions, DEFAULT_RING_SIZE};

const STOP_TOKEN: u64 = u64::MAX;
const LISTENER_TOKEN: u64 = 1 << 62;

/// State shared by the monitor and the session threads.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) opts: ServerOptions,
    pub(crate) policy: Policy,
    pub(crate) stats: Arc<Stats>,
    pub(crate) epoll: Epoll,
    stop_evt: EventFd,
    pub(crate) stopping: AtomicBool,
    pub(crate) segments: Arc<Preparer>,
    pool: Arc<Pool>,
    sessions: Mutex<HashMap<u64, Arc<Entry>>>,
    live: Mutex<usize>,
    all_done: Condvar,
    next_id: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock_sessions(&self) -> MutexGuard<'_, HashMap<u64, Arc<Entry>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_live(&self) -> MutexGuard<'_, usize> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn next_session_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers an established session so the monitor can wake it; returns
    /// false (and registers nothing) when the server is already stopping.
    pub(crate) fn register(&self, id: u64, entry: Arc<Entry>, ctrl: Option<&impl AsFd>) -> bool {
        self.lock_sessions().insert(id, Arc::clone(&entry));
        if let Some(fd) = ctrl {
            if self.epoll.add(fd, id, Interest::HangUp).is_err() {
                // Without a watch the session could not notice its client's
                // death: treat as gone.
                entry.flags.gone.store(true, Ordering::Release);
            }
        }
        if self.stopping.load(Ordering::Acquire) {
            entry.flags.stop.store(true, Ordering::Release);
        }
        true
    }

    pub(crate) fn unregister(&self, id: u64, ctrl: Option<&impl AsFd>) {
        if let Some(fd) = ctrl {
            let _ = self.epoll.delete(fd);
        }
        self.lock_sessions().remove(&id);
    }

    /// Counts a session thread out (used by its guard).
    pub(crate) fn thread_done(&self) {
        let mut n = self.lock_live();
        *n -= 1;
        if *n == 0 {
            self.all_done.notify_all();
        }
    }

    fn request_stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stop_evt.signal();
    }
}

/// Stops a server from any thread (or from a signal handler: it only stores a
/// flag and writes to an eventfd).
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<Shared>);

impl StopHandle {
    /// Asks the server to stop: no new sessions; queued requests are answered;
    /// then sessions close and `serve` returns.
    pub fn stop(&self) {
        self.0.request_stop();
    }

    /// Whether stop was requested.
    pub fn is_stopping(&self) -> bool {
        self.0.stopping.load(Ordering::Acquire)
    }
}

#[derive(Debug)]
pub(crate) struct Monitor {
    listeners: Vec<Listener>,
    shared: Arc<Shared>,
    /// A descriptor held in reserve: when accept fails for lack of
    /// descriptors, it is released so the waiting client can be accepted and
    /// told why it is refused, instead of waiting for its handshake timeout
    /// while the level-triggered listener keeps the loop spinning.
    spare: Mutex<Option<OwnedFd>>,
}

/// Opens the reserve descriptor.
fn open_spare() -> Option<OwnedFd> {
    reserve_descriptor().ok()
}

impl Monitor {
    pub(crate) fn new(addrs: &[Address], opts: ServerOptions) -> Result<Monitor> {
        let listeners = addrs
            .iter()
            .map(|a| Listener::bind(a, &opts))
            .collect::<Result<Vec<_>>>()?;
        let io_err = |what: &str, e: io::Error| Error::io(format!("creating server {what}"), e);
        let epoll = Epoll::new().map_err(|e| io_err("epoll", e))?;
        let stop_evt = EventFd::new().map_err(|e| io_err("eventfd", e))?;
        epoll
            .add(&stop_evt, STOP_TOKEN, Interest::Readable)
            .map_err(|e| io_err("epoll set", e))?;
        for (i, l) in listeners.iter().enumerate() {
            let fd = match l {
                Listener::Unix { sock, .. } => sock.as_fd(),
                Listener::Tcp { sock, .. } => sock.as_fd(),
            };
            epoll
                .add(fd, LISTENER_TOKEN + i as u64, Interest::Readable)
                .map_err(|e| io_err("epoll set", e))?;
        }
        let shared = Arc::new(Shared {
            policy: Policy::new(&opts),
            opts,
            stats: Arc::new(Stats::default()),
            epoll,
            stop_evt,
            stopping: AtomicBool::new(false),
            // Servers without an `shm:` address never need a segment: no
            // preparer thread, no idle segments.
            segments: if listeners.iter().any(|l| l.transport() == Transport::Shm) {
                Preparer::start((DEFAULT_RING_SIZE, DEFAULT_RING_SIZE))
            } else {
                Preparer::idle()
            },
            pool: Arc::new(Pool::default()),
            sessions: Mutex::new(HashMap::new()),
            live: Mutex::new(0),
            all_done: Condvar::new(),
            next_id: std::sync::atomic::AtomicU64::new(1),
        });
        Ok(Monitor {
            listeners,
            shared,
            spare: Mutex::new(open_spare()),
        })
    }

    pub(crate) fn addresses(&self) -> Vec<Address> {
        self.listeners.iter().map(|l| l.address().clone()).collect()
    }

    pub(crate) fn stop_handle(&self) -> StopHandle {
        StopHandle(Arc::clone(&self.shared))
    }

    pub(crate) fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.shared.stats)
    }

    pub(crate) fn run(self, handler: Arc<dyn Handler>) -> Result<()> {
        let result = self.event_loop(&handler);
        // Stop accepting: close the listeners (removing socket files) first.
        drop(self.listeners);
        let sh = &self.shared;
        sh.stopping.store(true, Ordering::Release);
        for entry in sh.lock_sessions().values() {
            entry.stop();
        }
        let mut live = sh.lock_live();
        while *live > 0 {
            live = sh.all_done.wait(live).unwrap_or_else(|p| p.into_inner());
        }
        drop(live);
        sh.pool.close();
        sh.segments.close();
        result
    }

    fn event_loop(&self, handler: &Arc<dyn Handler>) -> Result<()> {
        let sh = &self.shared;
        let mut tokens = Vec::with_capacity(64);
        loop {
            sh.epoll
                .wait(&mut tokens)
                .map_err(|e| Error::io("waiting for server events", e))?;
            for &token in &tokens {
                if token == STOP_TOKEN {
                    return Ok(());
                } else if token >= LISTENER_TOKEN {
                    let i = (token - LISTENER_TOKEN) as usize;
                    if let Some(l) = self.listeners.get(i) {
                        self.accept_all(l, handler);
                    }
                } else if let Some(entry) = sh.lock_sessions().get(&token) {
                    entry.peer_gone();
                }
            }
            if sh.stopping.load(Ordering::Acquire) {
                return Ok(());
            }
        }
    }

    fn accept_all(&self, l: &Listener, handler: &Arc<dyn Handler>) {
        loop {
            let conn = match l {
                Listener::Unix { sock, .. } => sock.accept().map(|(s, _)| Conn::Unix(s)),
                Listener::Tcp { sock, .. } => sock.accept().map(|(s, _)| Conn::Tcp(s)),
            };
            match conn {
                Ok(c) => self.start_session(c, l, handler),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_out_of_descriptors(&e) => {
                    if !self.refuse_one_for_lack_of_descriptors(l, &e) {
                        return;
                    }
                }
                // Out of memory: leave the rest queued; the level-triggered
                // listener fires again.
                Err(_) => return,
            }
        }
    }

    /// Frees a descriptor (the reserve, else a prepared segment's) to accept
    /// one waiting client and refuse it with the reason. Another thread may
    /// take the freed slot first, so it tries a few times; false when
    /// nothing could be freed or accepted (the listener fires again).
    fn refuse_one_for_lack_of_descriptors(&self, l: &Listener, e: &io::Error) -> bool {
        let mut reserve = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        let mut refused = false;
        for _ in 0..4 {
            let freed = match reserve.take() {
                Some(spare) => {
                    drop(spare);
                    // Stop the preparer from taking the slot meanwhile.
                    self.shared.segments.shed();
                    true
                }
                None => self.shared.segments.shed(),
            };
            if !freed {
                break;
            }
            let conn = match l {
                Listener::Unix { sock, .. } => sock.accept().map(|(s, _)| Conn::Unix(s)),
                Listener::Tcp { sock, .. } => sock.accept().map(|(s, _)| Conn::Tcp(s)),
            };
            match conn {
                Ok(c) => {
                    self.shared.stats.refused.fetch_add(1, Ordering::Relaxed);
                    session::refuse_exhausted(c, &l.address().to_string(), e);
                    refused = true;
                    break;
                }
                Err(again) if is_out_of_descriptors(&again) => continue,
                Err(_) => break,
            }
        }
        *reserve = open_spare();
        refused
    }

    fn start_session(&self, conn: Conn, l: &Listener, handler: &Arc<dyn Handler>) {
        let sh = &self.shared;
        let address = l.address().to_string();
        {
            let mut live = sh.lock_live();
            if *live >= sh.opts.max_sessions {
                drop(live);
                sh.stats.refused.fetch_add(1, Ordering::Relaxed);
                session::refuse_busy(conn, &address, sh.opts.max_sessions);
                return;
            }
            *live += 1;
        }
        let shared = Arc::clone(sh);
        let transport = l.transport();
        let handler = Arc::clone(handler);
        // Fast path: the hello is already there (clients send it right after
        // connecting), so the handshake cannot block: do it here and hand
        // only the established session to a thread. Slow clients go to a
        // thread that waits for their hello with the handshake timeout.
        let job: Box<dyn FnOnce() + Send> = if session::hello_queued(&conn) {
            let Some(est) = session::handshake(sh, conn, transport, &address) else {
                sh.thread_done();
                return;
            };
            Box::new(move || {
                let _guard = session::LiveGuard(&shared);
                session::serve(&shared, est, &*handler);
            })
        } else {
            Box::new(move || {
                let _guard = session::LiveGuard(&shared);
                session::run(&shared, conn, transport, address, &*handler);
            })
        };
        let submitted = sh.pool.submit(job);
        if submitted.is_err() {
            sh.thread_done();
        }
    }
}
