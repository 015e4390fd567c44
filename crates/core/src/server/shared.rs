//! State shared by the accept loop and the session threads: options,
//! policy, counters, the registry of sessions, the segment stock, the
//! thread pool, the count of live session slots, and the stop request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use shmlink_sys::eventfd::EventFd;

use super::handing::Handing;
use super::policy::Policy;
use super::prepare::Preparer;
use super::registry::Registry;
use super::reuse::Reusable;
use super::stats::Stats;
use super::sync::lock;
use super::threads::SessionThreads;
use crate::options::ServerOptions;

/// What a listener does with the sessions it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A server: clients call, the server's session threads answer.
    Serve,
    /// A worker port: workers connect and answer; whoever accepts them calls.
    TakeWorkers,
    /// A listener: clients connect, and both sides of each session call
    /// (capability bit 10, when the client offers it); whoever accepts a
    /// session holds its end.
    Peers,
}

/// State shared by the accept loop and the session threads.
#[derive(Debug)]
pub(crate) struct Shared {
    /// A server, or a worker port.
    pub(crate) mode: Mode,
    pub(crate) opts: ServerOptions,
    pub(crate) policy: Policy,
    pub(crate) stats: Arc<Stats>,
    pub(crate) registry: Registry,
    /// Made readable by a stop request or a segment kept; in the
    /// registry's epoll set.
    pub(crate) wake_evt: EventFd,
    stopping: AtomicBool,
    pub(crate) segments: Arc<Preparer>,
    /// Segments kept for the client processes that used them.
    pub(crate) reusable: Reusable<ShmCharge>,
    pub(crate) threads: Arc<SessionThreads>,
    /// Session slots in use: sessions running or being handshaken.
    live: Mutex<usize>,
    all_done: Condvar,
    next_id: AtomicU64,
    /// Bytes of session segments held now (against `max_shm_bytes`).
    shm_bytes: Arc<AtomicU64>,
    /// The soft limit on open descriptors when the server started.
    fd_limit: u64,
    /// When the server started (its inspection's uptime).
    pub(crate) started: std::time::Instant,
    /// Where the monitor and the sessions meet during a hand-over.
    pub(crate) handing: Handing,
    /// Set when a successor took the listeners and sessions.
    pub(crate) handed: std::sync::atomic::AtomicBool,
}

/// Descriptors left for everything but sessions (listeners, epoll, the
/// prepared and kept segments, the host's own) when sessions keep memfds.
const FD_RESERVE: u64 = 64;

/// Bytes of shared memory a session holds, counted against the server's
/// `max_shm_bytes` from [`Shared::charge_shm`] until dropped.
#[derive(Debug)]
pub(crate) struct ShmCharge {
    counter: Arc<AtomicU64>,
    bytes: u64,
}

impl Drop for ShmCharge {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl Shared {
    pub(crate) fn new(
        mode: Mode,
        opts: ServerOptions,
        registry: Registry,
        wake_evt: EventFd,
        segments: Arc<Preparer>,
    ) -> Shared {
        Shared {
            mode,
            policy: Policy::new(&opts),
            opts,
            stats: Arc::new(Stats::default()),
            registry,
            wake_evt,
            stopping: AtomicBool::new(false),
            segments,
            reusable: Reusable::default(),
            threads: Arc::new(SessionThreads::default()),
            live: Mutex::new(0),
            all_done: Condvar::new(),
            next_id: AtomicU64::new(1),
            shm_bytes: Arc::new(AtomicU64::new(0)),
            started: std::time::Instant::now(),
            handing: Handing::default(),
            handed: std::sync::atomic::AtomicBool::new(false),
            fd_limit: shmlink_sys::process::descriptor_limit()
                .0
                .unwrap_or(u64::MAX),
        }
    }

    /// Whether a new session may hold its segment's memfd, to give the
    /// segment back for its process's next session: only while sessions
    /// use less than half the descriptor limit (each holds its socket, and
    /// with the memfd two), so keeping memfds never costs a session.
    pub(crate) fn may_keep_memfd(&self) -> bool {
        let live = *lock(&self.live) as u64;
        live.saturating_mul(2).saturating_add(FD_RESERVE) < self.fd_limit
    }

    /// Bytes of session segments held now.
    pub(crate) fn shm_held(&self) -> u64 {
        self.shm_bytes.load(Ordering::Acquire)
    }

    /// Counts `bytes` of session segments against `max_shm_bytes`; `Err`
    /// with the reason when they would pass it (nothing counted then).
    pub(crate) fn charge_shm(&self, bytes: u64) -> Result<ShmCharge, String> {
        let max = self.opts.max_shm_bytes;
        self.shm_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&total| total <= max)
            })
            .map(|_| ShmCharge {
                counter: Arc::clone(&self.shm_bytes),
                bytes,
            })
            .map_err(|held| {
                format!(
                    "its shared memory limit is reached ({held} of max_shm_bytes {max} held, a session needs {bytes})"
                )
            })
    }

    /// A fresh session id (also its token in the epoll set; never 0).
    pub(crate) fn next_session_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The id the next session will get (a hand-over's successor goes on
    /// from it).
    pub(crate) fn peek_next_session_id(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Makes the next session's id `id` (a successor going on from its
    /// predecessor's).
    pub(crate) fn set_next_session_id(&self, id: u64) {
        self.next_id.store(id, Ordering::Relaxed);
    }

    /// Session slots in use (running or in their handshake).
    pub(crate) fn slots_in_use(&self) -> usize {
        *lock(&self.live)
    }

    /// Whether the server is stopping.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Asks the server to stop: no new sessions; the accept loop wakes up.
    pub(crate) fn request_stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.wake_evt.signal();
    }

    /// Tells the monitor a segment was kept, so that it frees it on time
    /// even if no other event comes (the monitor may never see the
    /// session's hang-up: the session can leave the epoll set first).
    pub(crate) fn segment_kept(&self) {
        self.wake_evt.signal();
    }

    /// Takes a session slot, unless `max_sessions` are in use.
    pub(crate) fn take_slot(self: &Arc<Self>) -> Option<Slot> {
        let mut live = lock(&self.live);
        if *live >= self.opts.max_sessions {
            return None;
        }
        *live += 1;
        Some(Slot(Arc::clone(self)))
    }

    /// Waits until every slot is given back.
    pub(crate) fn wait_slots_free(&self) {
        let mut live = lock(&self.live);
        while *live > 0 {
            live = self.all_done.wait(live).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A session slot, given back when dropped (on whatever thread the session
/// ends).
#[derive(Debug)]
pub(crate) struct Slot(Arc<Shared>);

impl Slot {
    /// The shared state.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut n = lock(&self.0.live);
        *n -= 1;
        if *n == 0 {
            self.0.all_done.notify_all();
        }
    }
}

/// Stops a server from any thread (or from a signal handler: it only stores a
/// flag and writes to an eventfd).
#[derive(Debug, Clone)]
pub struct StopHandle(pub(crate) Arc<Shared>);

impl StopHandle {
    /// Asks the server to stop: no new sessions; queued requests are answered;
    /// then sessions close and `serve` returns.
    pub fn stop(&self) {
        self.0.request_stop();
    }

    /// Whether stop was requested.
    pub fn is_stopping(&self) -> bool {
        self.0.stopping()
    }

    /// Whether a successor took the server's listeners and sessions
    /// ([`ServerOptions::handover`](crate::ServerOptions::handover)): the
    /// server stopped, and its socket files are the successor's.
    pub fn handed_over(&self) -> bool {
        self.0.handed.load(std::sync::atomic::Ordering::Acquire)
    }
}
