//! The accept loop, which is also the monitor: it waits on the registry's
//! epoll set (listeners, the stop event, the control socket of every `shm:`
//! session). When a client's control socket hangs up, it flags the session
//! and wakes its thread, so idle sessions sleep without timeouts and cost no
//! CPU, yet a dead client is noticed at once.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shmlink_sys::epoll::Interest;
use shmlink_sys::eventfd::EventFd;
use shmlink_sys::fs::{is_out_of_descriptors, reserve_descriptor};

use super::admit;
use super::conn::{Conn, HelloBuf};
use super::handler::Handler;
use super::handover;
use super::listener::Listener;
use super::prepare::Preparer;
use super::registry::Registry;
use super::serving;
use super::shared::{Mode, Shared, Slot, StopHandle};
use super::stats::Stats;
use super::sync::lock;
use super::takeover;
use crate::address::{Address, Transport};
use crate::error::{Error, RefusalCode, Result};
use crate::link::stream::Stream;
use crate::options::{ServerOptions, WaitStrategy, DEFAULT_RING_SIZE};

/// Epoll token of the wake event: a stop request, or a segment kept
/// (session ids count up from 1).
const WAKE_TOKEN: u64 = u64::MAX;
/// Past a kept segment's expiry, so that one wake-up finds it expired
/// (epoll's timeout is in milliseconds, rounded up).
const EXPIRY_SLACK: Duration = Duration::from_millis(2);
/// Epoll token of the first listener; the others follow.
const LISTENER_TOKEN: u64 = 1 << 62;
/// Epoll token of the hand-over socket.
const HANDOVER_TOKEN: u64 = LISTENER_TOKEN - 1;

/// The bound listeners and everything the sessions share.
#[derive(Debug)]
pub(crate) struct Monitor {
    listeners: Vec<Listener>,
    shared: Arc<Shared>,
    /// A descriptor held in reserve: when accept fails for lack of
    /// descriptors, it is released so the waiting client can be accepted and
    /// told why it is refused, instead of waiting for its handshake timeout
    /// while the level-triggered listener keeps the loop spinning.
    spare: Mutex<Option<OwnedFd>>,
    /// Where a successor may take this server over
    /// ([`ServerOptions::handover`]).
    handover: Mutex<Option<Listener>>,
    /// Sessions handed over by a predecessor, started when serving begins.
    adopted: Mutex<Vec<(Slot, admit::Established)>>,
    /// The connection to that predecessor, until it closes.
    predecessor: Mutex<Option<std::os::unix::net::UnixStream>>,
}

impl Monitor {
    /// Binds every address and sets up the epoll set.
    ///
    /// # Errors
    /// An address that cannot be bound; the kernel refusing epoll or eventfd.
    pub(crate) fn new(addrs: &[Address], opts: ServerOptions) -> Result<Monitor> {
        let listeners = addrs
            .iter()
            .map(|a| Listener::bind(a, &opts))
            .collect::<Result<Vec<_>>>()?;
        let monitor = Monitor::with_listeners(listeners, opts)?;
        monitor.listen_for_successors()?;
        Ok(monitor)
    }

    /// Takes over the server listening for successors at `path`: its
    /// listeners and live sessions, which go on here from where it
    /// stopped (docs/protocol.md, "Hand-over"); then listens for a
    /// successor of its own when `opts` say where.
    ///
    /// # Errors
    /// [`Error::Bind`] naming the socket and why (nobody there, the
    /// server's refusal, a malformed offer, a session this server cannot
    /// take: it is told why and serves on).
    pub(crate) fn take_over(path: &std::path::Path, opts: ServerOptions) -> Result<Monitor> {
        let mut offered = takeover::receive(path)?;
        let fail = |why: String| Error::Bind {
            address: format!("hand-over socket {}", path.display()),
            reason: format!("cannot take the server over: {why}"),
        };
        let listeners = std::mem::take(&mut offered.listeners);
        let monitor = match Monitor::with_listeners(listeners, opts) {
            Ok(m) => m,
            Err(e) => {
                offered.refuse(&e.to_string());
                return Err(e);
            }
        };
        let sh = &monitor.shared;
        sh.set_next_session_id(offered.next_session);
        let mut adopted = Vec::with_capacity(offered.sessions.len());
        for (record, address, fds, read_ahead) in std::mem::take(&mut offered.sessions) {
            let established = sh.take_slot().ok_or_else(|| {
                format!(
                    "more sessions than this server's max_sessions ({})",
                    sh.opts.max_sessions
                )
            });
            let established = established.and_then(|slot| {
                takeover::establish(sh, &record, &address, fds, &read_ahead).map(|est| (slot, est))
            });
            match established {
                Ok(pair) => adopted.push(pair),
                Err(why) => {
                    offered.refuse(&why);
                    return Err(fail(why));
                }
            }
        }
        *lock(&monitor.adopted) = adopted;
        // The sessions start serving first (in `run`); the hand-over socket
        // is bound once the predecessor has let go of the path.
        *lock(&monitor.predecessor) = Some(offered.took());
        Ok(monitor)
    }

    /// The monitor over bound listeners.
    fn with_listeners(listeners: Vec<Listener>, opts: ServerOptions) -> Result<Monitor> {
        let io_err = |what: &str, e: io::Error| Error::io(format!("creating server {what}"), e);
        let registry = Registry::new().map_err(|e| io_err("epoll", e))?;
        let wake_evt = EventFd::new().map_err(|e| io_err("eventfd", e))?;
        let epoll = registry.epoll();
        epoll
            .add(&wake_evt, WAKE_TOKEN, Interest::Readable)
            .map_err(|e| io_err("epoll set", e))?;
        for (i, l) in listeners.iter().enumerate() {
            epoll
                .add(l, LISTENER_TOKEN + i as u64, Interest::Readable)
                .map_err(|e| io_err("epoll set", e))?;
        }
        // Servers without an `shm:` address never need a segment: no
        // preparer thread, no idle segments.
        let segments = if listeners.iter().any(|l| l.transport() == Transport::Shm) {
            Preparer::start((DEFAULT_RING_SIZE, DEFAULT_RING_SIZE))
        } else {
            Preparer::idle()
        };
        Ok(Monitor {
            listeners,
            shared: Arc::new(Shared::new(Mode::Serve, opts, registry, wake_evt, segments)),
            spare: Mutex::new(reserve_descriptor().ok()),
            handover: Mutex::new(None),
            adopted: Mutex::new(Vec::new()),
            predecessor: Mutex::new(None),
        })
    }

    /// Binds the hand-over socket, when the options name one (mode 0600:
    /// only this uid, or root, may connect).
    fn listen_for_successors(&self) -> Result<()> {
        let Some(path) = self.shared.opts.handover.clone() else {
            return Ok(());
        };
        let opts = ServerOptions {
            socket_mode: Some(0o600),
            socket_group: None,
            ..self.shared.opts.clone()
        };
        let l = Listener::bind(&Address::Unix(path), &opts)?;
        self.shared
            .registry
            .epoll()
            .add(&l, HANDOVER_TOKEN, Interest::Readable)
            .map_err(|e| Error::io("creating server epoll set", e))?;
        *lock(&self.handover) = Some(l);
        Ok(())
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

    /// Serves until stopped; then stops every session, waits for them, and
    /// joins every thread the server started.
    pub(crate) fn run(mut self, handler: Arc<dyn Handler>) -> Result<()> {
        for (slot, est) in std::mem::take(&mut *lock(&self.adopted)) {
            self.start_adopted(slot, est, &handler);
        }
        let predecessor = lock(&self.predecessor).take();
        if let Some(conn) = predecessor {
            takeover::wait_closed(conn);
            if let Err(e) = self.listen_for_successors() {
                self.shared
                    .opts
                    .log
                    .write(&format!("shmlink: server taking over: {e}"));
            }
        }
        let result = self.event_loop(&handler);
        if matches!(result, Ok(true)) {
            // Handed over: the successor listens on these sockets now.
            for l in &mut self.listeners {
                l.keep_file();
            }
        }
        // Stop accepting: close the listeners (removing socket files) first.
        drop(self.listeners);
        drop(lock(&self.handover).take());
        let sh = &self.shared;
        sh.request_stop();
        sh.registry.stop_all();
        sh.wait_slots_free();
        sh.threads.close();
        sh.segments.close();
        sh.reusable.clear();
        result.map(|_| ())
    }

    /// Serves a session a predecessor handed over.
    fn start_adopted(&self, slot: Slot, est: admit::Established, handler: &Arc<dyn Handler>) {
        let handler = Arc::clone(handler);
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            serving::serve(slot.shared(), est, &*handler);
            drop(slot);
        });
        let _ = self.shared.threads.submit(job);
    }

    /// A successor connected to the hand-over socket: true when it took
    /// everything. Its connection closes after the hand-over socket does,
    /// so that it can bind the same path for a successor of its own.
    fn hand_over(&self) -> bool {
        let conn = {
            let guard = lock(&self.handover);
            let Some(l) = guard.as_ref() else {
                return false;
            };
            match l.accept() {
                Ok(c) => c.into_stream(),
                Err(_) => return false,
            }
        };
        let Stream::Unix(conn) = conn else {
            return false;
        };
        if conn.set_nonblocking(false).is_err() {
            return false;
        }
        let took = handover::give(&self.shared, &self.listeners, &conn);
        if took {
            self.shared
                .handed
                .store(true, std::sync::atomic::Ordering::Release);
            drop(lock(&self.handover).take());
        }
        drop(conn);
        took
    }

    /// Waits for events; after accepting a connection it keeps looking
    /// without sleeping for the wait strategy's spin bound (yielding the
    /// CPU between looks), as session threads do for requests: clients
    /// that reconnect for every call then find it awake, where waking an
    /// idle CPU costs tens of µs on a VM. An idle server sleeps.
    fn event_loop(&self, handler: &Arc<dyn Handler>) -> Result<bool> {
        let sh = &self.shared;
        let spin = accept_spin(sh.opts.wait);
        let mut awake_until: Option<Instant> = None;
        let mut tokens = Vec::with_capacity(64);
        loop {
            let now = Instant::now();
            let look = awake_until.is_some_and(|t| now < t);
            // Kept segments expire on time, traffic or not: a session
            // thread that keeps one rings the wake event, so this deadline
            // is never older than the newest kept segment.
            let expiry = sh.reusable.next_expiry().map(|t| t + EXPIRY_SLACK);
            let timeout = if look {
                Some(Duration::ZERO)
            } else {
                expiry.map(|t| t.saturating_duration_since(now))
            };
            sh.registry
                .epoll()
                .wait_for(&mut tokens, timeout)
                .map_err(|e| Error::io("waiting for server events", e))?;
            if !look && timeout.is_some() {
                let now = Instant::now();
                sh.reusable.expire(now);
            }
            if look && tokens.is_empty() {
                std::thread::yield_now();
                continue;
            }
            for &token in &tokens {
                if token == HANDOVER_TOKEN {
                    if self.hand_over() {
                        return Ok(true);
                    }
                } else if token == WAKE_TOKEN {
                    if sh.stopping() {
                        return Ok(false);
                    }
                    // A segment was kept: the next look computes its expiry.
                    sh.wake_evt.clear();
                } else if token >= LISTENER_TOKEN {
                    let i = (token - LISTENER_TOKEN) as usize;
                    if let Some(l) = self.listeners.get(i) {
                        self.accept_all(l, handler);
                        awake_until = (!spin.is_zero()).then(|| Instant::now() + spin);
                    }
                } else {
                    sh.registry.control_event(token);
                }
            }
            if sh.stopping() {
                return Ok(false);
            }
        }
    }

    fn accept_all(&self, l: &Listener, handler: &Arc<dyn Handler>) {
        loop {
            match l.accept() {
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
        let mut reserve = lock(&self.spare);
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
            match l.accept() {
                Ok(c) => {
                    self.shared.stats.refused.fetch_add(1, Ordering::Relaxed);
                    let msg = format!("server at {} cannot take a session now: {e}", l.address());
                    c.refuse_now(RefusalCode::ServerFailure, msg);
                    refused = true;
                    break;
                }
                Err(again) if is_out_of_descriptors(&again) => continue,
                Err(_) => break,
            }
        }
        *reserve = reserve_descriptor().ok();
        refused
    }

    /// Takes a session slot for `conn` (or refuses it over the limit) and
    /// hands the session to a pooled thread. When the client's whole hello
    /// is already queued (clients send it right after connecting), the
    /// handshake cannot block and runs here, so the thread gets an
    /// established session; slow clients' handshakes run on the thread,
    /// under the handshake timeout.
    fn start_session(&self, conn: Conn, l: &Listener, handler: &Arc<dyn Handler>) {
        let sh = &self.shared;
        let address = l.address().to_string();
        let Some(slot) = sh.take_slot() else {
            sh.stats.refused.fetch_add(1, Ordering::Relaxed);
            let max = sh.opts.max_sessions;
            let msg = format!("server at {address} has reached its maximum of {max} sessions");
            conn.refuse_now(RefusalCode::TooManySessions, msg);
            return;
        };
        let transport = l.transport();
        let handler = Arc::clone(handler);
        let deadline = Instant::now() + sh.opts.handshake_timeout;
        let stream = conn.into_stream();
        let mut hello = HelloBuf::new();
        let job: Box<dyn FnOnce() + Send> = if hello.read_queued(&stream) {
            let Some(est) = admit::establish(sh, stream, hello, transport, &address, deadline)
            else {
                return;
            };
            Box::new(move || {
                serving::serve(slot.shared(), est, &*handler);
                drop(slot);
            })
        } else {
            Box::new(move || {
                let sh = slot.shared();
                if let Some(est) =
                    admit::establish(sh, stream, hello, transport, &address, deadline)
                {
                    serving::serve(sh, est, &*handler);
                }
                drop(slot);
            })
        };
        // A job that cannot get a thread is dropped, and its slot with it.
        let _ = sh.threads.submit(job);
        sh.segments.refill();
    }
}

/// How long the accept loop stays awake after a connection: the spin bound
/// of the server's wait strategy (`busy` servers use the default bound: an
/// idle server must sleep), none for `sleep`.
fn accept_spin(wait: WaitStrategy) -> Duration {
    match wait {
        WaitStrategy::Sleep => Duration::ZERO,
        WaitStrategy::Spin(d) => d,
        WaitStrategy::Busy => WaitStrategy::DEFAULT_SPIN,
    }
}
