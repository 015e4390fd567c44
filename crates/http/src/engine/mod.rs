//! The HTTP/1.1 server loop the workers and the front both run: one thread,
//! one epoll set, edge-triggered connections; request heads parsed by
//! httparse in each connection's buffer and encoded at once as the request
//! the application receives ([`crate::wire`]); answers written straight
//! into the connection (`send(2)` as soon as the application answers).
//!
//! A turn ([`Engine::turn`]) waits once for what is ready, accepts, reads
//! and parses everything it can, and queues the complete requests; the
//! caller takes them one after another ([`Engine::pop_ready`]) and answers
//! each ([`Engine::answer`]), with no further wait in between: one
//! `epoll_wait` per batch, one `recv` and one `send` per request, as an
//! event-driven server in C spends.
//!
//! What it enforces: the body limit (413, from `Content-Length` before the
//! body is read, or while a chunked body arrives), the head limit and at
//! most 100 headers (431), HTTP/1.1's framing rules (400 for a malformed
//! head, conflicting or unknown framing, a broken chunked body; the
//! connection closes), `CONNECT` (405), the header timeout (a head not
//! complete in time, a body that stops arriving for that long, an idle
//! keep-alive connection: closed without a word), the send timeout (a
//! client that takes nothing of a response being written: `sending.rs`),
//! the connection limit (closed as accepted). Keep-alive, HTTP/1.0,
//! `Expect: 100-continue`, `HEAD` and pipelined requests (answered in
//! order) as HTTP/1.1 says.

mod balance;
pub(crate) mod body;
mod conn;
pub(crate) mod head;
mod reply;
mod sending;
mod stream;

pub(crate) use conn::Spool;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_sys::epoll::{Epoll, Event, Events, Interest};
use shmlink_sys::eventfd::EventFd;

use crate::access::AccessLog;
use crate::backend::Fault;
use crate::counters::{Counters, Field};
use crate::files::{FileReply, Files, Handoff, Lookup};
use crate::wire::ResponseView;
use body::{Body, Broken};
use conn::{BodyStep, Conn, Outgoing, Phase, Read_};
use head::Framing;
use reply::Terms;

/// Token of the watched descriptor.
const WATCH: u64 = u64::MAX;
/// Token of the waker.
const WAKE: u64 = u64::MAX - 1;
/// Tokens of listeners: this plus their index.
const LISTENERS: u64 = 1 << 62;
/// How long an error response's connection is read and dropped before it
/// closes (see [`Phase::Lingering`]).
const LINGER_MS: u64 = 2000;
/// Bytes read ahead of the request in hand (pipelined requests).
const AHEAD: usize = 64 << 10;
/// Bytes of a body read per pass (moved into the encoded request as they
/// come).
const BODY_STEP: usize = 256 << 10;
/// How long a worker that defers ([`balance`]: it sheds load, or a worker
/// of a lower slot takes new connections) leaves a new connection to the
/// others before it takes it itself.
const SHARE_WAIT: Duration = Duration::from_millis(2);
/// How long requests in flight may take once a stop closes everything else.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(5);

/// The limits the engine enforces.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) max_body: usize,
    pub(crate) max_header_bytes: usize,
    pub(crate) header_timeout: Duration,
    /// How long a client may take nothing of a response being written
    /// (`sending.rs`).
    pub(crate) send_timeout: Duration,
    /// Connections open at once, counted as [`Counters::open_everywhere`].
    pub(crate) max_connections: usize,
    /// Where large bodies go (`None`: all stay in memory).
    pub(crate) spool: Option<conn::Spool>,
}

/// A request the application must answer: which, and its encoding.
#[derive(Debug)]
pub(crate) struct Ready {
    pub(crate) id: ReqId,
    pub(crate) request: Vec<u8>,
    /// When it was read (coarse ms).
    pub(crate) queued: u64,
}

/// Which request an answer is for: its connection's slot and serial (a
/// connection closed meanwhile, or another in its slot, drops the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReqId {
    slot: usize,
    serial: u64,
}

/// What a turn found for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Requests to take ([`Engine::pop_ready`]).
    Ready,
    /// The watched descriptor became readable.
    Watched,
    /// The waker was signalled.
    Woken,
    /// The caller's deadline passed.
    Timer,
    /// Stopped, and every connection is closed.
    Done,
}

/// Where a stop is.
#[derive(Debug, Clone, Copy)]
struct Stopping {
    /// When idle keep-alive connections close (coarse ms).
    idle_close: u64,
    /// When everything still open closes.
    force_close: u64,
}

/// The server loop.
pub(crate) struct Engine {
    ep: Epoll,
    events: Events,
    listeners: Vec<TcpListener>,
    /// When accepting is tried again, whatever the share: after it
    /// stopped short (out of descriptors), or left connections to the
    /// other workers of a page (shedding, [`balance`]) that may not take
    /// them (an edge-triggered listener says nothing more).
    accept_again: Option<Instant>,
    /// This worker's load, window after window, and what it decided.
    balance: balance::Balance,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    ready: VecDeque<Ready>,
    /// Deadlines armed: (ms, slot, serial), in the order they fall within
    /// each queue (all of a queue have the same length: the header timeout,
    /// or [`LINGER_MS`]).
    timers: VecDeque<(u64, usize, u64)>,
    lingers: VecDeque<(u64, usize, u64)>,
    /// Send timers (`sending.rs`): (ms, slot, serial), earliest first.
    sends: BinaryHeap<Reverse<(u64, usize, u64)>>,
    limits: Limits,
    counters: Arc<Counters>,
    access: Option<Arc<AccessLog>>,
    log: Box<dyn Fn(&str) + Send + Sync>,
    stopping: Option<Stopping>,
    watched: Option<OwnedFd>,
    watched_pending: bool,
    waker: Option<Arc<EventFd>>,
    woken_pending: bool,
    date: reply::DateCache,
    next_serial: u64,
    /// The coarse clock at the last turn (ms).
    now: u64,
    /// Buffers of requests answered, for the next ones.
    spare: Vec<Vec<u8>>,
    /// Files it sends itself (`--http-root`, `--http-sendfile`).
    files: Option<Arc<Files>>,
}

/// How a request is answered.
enum Reply<'a> {
    /// With the application's encoded response, or a fault.
    App(Result<&'a [u8], Fault>),
    /// With a file of the root.
    File(FileReply),
    /// With a status of the server's own (a text body).
    Status(u16),
}

impl Engine {
    /// An engine serving `listeners` (made non-blocking here).
    pub(crate) fn new(
        listeners: Vec<TcpListener>,
        limits: Limits,
        counters: Arc<Counters>,
        access: Option<Arc<AccessLog>>,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> std::io::Result<Engine> {
        let ep = Epoll::new()?;
        for (i, l) in listeners.iter().enumerate() {
            l.set_nonblocking(true)?;
            ep.add(l, LISTENERS + i as u64, Interest::Edge)?;
        }
        counters.set_accepting(!listeners.is_empty());
        let now = shmlink_sys::clock::coarse_ms();
        Ok(Engine {
            ep,
            events: Events::with_capacity(256),
            listeners,
            accept_again: None,
            balance: balance::Balance::new(now),
            conns: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            timers: VecDeque::new(),
            lingers: VecDeque::new(),
            sends: BinaryHeap::new(),
            limits,
            counters,
            access,
            log,
            stopping: None,
            watched: None,
            watched_pending: false,
            waker: None,
            woken_pending: false,
            date: reply::DateCache::new(),
            next_serial: 1,
            now,
            spare: Vec::new(),
            files: None,
        })
    }

    /// Sends files itself: static files of the root, files applications
    /// name (see [`Files`]).
    pub(crate) fn serve_files(&mut self, files: Arc<Files>) {
        self.files = Some(files);
    }

    /// Reports [`Turn::Watched`] each time `fd` becomes readable.
    pub(crate) fn watch(&mut self, fd: OwnedFd) -> std::io::Result<()> {
        if let Some(old) = self.watched.take() {
            let _ = self.ep.delete(&old);
        }
        self.ep.add(&fd, WATCH, Interest::Edge)?;
        self.watched = Some(fd);
        Ok(())
    }

    /// Stops reporting the watched descriptor.
    pub(crate) fn unwatch(&mut self) {
        if let Some(old) = self.watched.take() {
            let _ = self.ep.delete(&old);
        }
        self.watched_pending = false;
    }

    /// Ends a turn with [`Turn::Woken`] whenever `waker` is signalled (from
    /// any thread).
    pub(crate) fn wake_on(&mut self, waker: Arc<EventFd>) -> std::io::Result<()> {
        self.ep.add(waker.as_fd(), WAKE, Interest::Readable)?;
        self.waker = Some(waker);
        Ok(())
    }

    /// Writes `line` to the server's log.
    pub(crate) fn log_line(&self, line: &str) {
        (self.log)(line);
    }

    /// The coarse clock at the last turn (ms).
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// The counters it keeps.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Serves until there is something for the caller: requests to take,
    /// the watched descriptor readable, the waker signalled, `until` (coarse
    /// ms) reached, or, once stopped, every connection closed.
    pub(crate) fn turn(&mut self, until: Option<u64>) -> Turn {
        loop {
            if std::mem::take(&mut self.watched_pending) {
                return Turn::Watched;
            }
            if std::mem::take(&mut self.woken_pending) {
                return Turn::Woken;
            }
            if !self.ready.is_empty() {
                return Turn::Ready;
            }
            if self.stopping.is_some() && self.conns.iter().all(Option::is_none) {
                return Turn::Done;
            }
            if until.is_some_and(|u| self.now >= u) {
                return Turn::Timer;
            }
            let timeout = self.timeout(until);
            if let Err(e) = self.ep.wait_events(&mut self.events, timeout) {
                (self.log)(&format!("waiting for HTTP connections failed: {e}"));
            }
            self.now = shmlink_sys::clock::coarse_ms();
            // Before the events: a listener's may be the first in a while.
            let moving = self.balance.tick(self.now, &self.counters);
            if moving > 0 {
                self.nudge(moving);
            }
            for i in 0..self.events.ready.len() {
                let ev = self.events.ready[i];
                match ev.token {
                    WATCH => self.watched_pending = true,
                    WAKE => {
                        if let Some(w) = &self.waker {
                            w.clear();
                        }
                        self.woken_pending = true;
                    }
                    t if t >= LISTENERS => self.accept((t - LISTENERS) as usize, false),
                    t => self.on_event(t as usize, ev),
                }
            }
            if self.accept_again.is_some_and(|at| Instant::now() >= at) {
                self.accept_again = None;
                for i in 0..self.listeners.len() {
                    self.accept(i, true);
                }
            }
            self.expire();
        }
    }

    /// How long the next wait may last: until the first deadline (a
    /// connection's, the stop's, the caller's).
    fn timeout(&self, until: Option<u64>) -> Option<Duration> {
        if let Some(at) = self.accept_again {
            let left = at.saturating_duration_since(Instant::now());
            return Some(left.max(Duration::from_millis(1)));
        }
        let mut next = until;
        let mut earliest = |at: u64| next = Some(next.map_or(at, |n| n.min(at)));
        for q in [&self.timers, &self.lingers] {
            if let Some(&(at, _, _)) = q.front() {
                earliest(at);
            }
        }
        if let Some(at) = self.next_send_due() {
            earliest(at);
        }
        if let Some(s) = self.stopping {
            if s.idle_close > self.now {
                earliest(s.idle_close);
            }
            earliest(s.force_close);
        }
        // The coarse clock lags the fine one by up to a tick: a wait ends
        // a few ms after its deadline rather than before.
        next.map(|at| Duration::from_millis(at.saturating_sub(self.now) + 5))
    }

    /// The next request read, if any (the connection of a request whose
    /// client left meanwhile is gone: such a request is skipped).
    pub(crate) fn pop_ready(&mut self) -> Option<Ready> {
        while let Some(r) = self.ready.pop_front() {
            if self.conn(r.id).is_some() {
                return Some(r);
            }
            self.recycle(r.request);
        }
        None
    }

    /// Gives a request's buffer back for the next requests.
    pub(crate) fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < 64 && buf.capacity() <= 64 << 10 {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// The socket of a request's connection (for a last word on it).
    pub(crate) fn socket_of(&self, id: ReqId) -> Option<RawFd> {
        self.conn(id).map(|c| c.sock.as_raw_fd())
    }

    fn conn(&self, id: ReqId) -> Option<&Conn> {
        self.conns
            .get(id.slot)?
            .as_ref()
            .filter(|c| c.serial == id.serial)
    }

    /// Stops: no more connections are accepted; every response closes its
    /// connection; connections idle in keep-alive close after `idle_grace`;
    /// whatever is still open after [`STOP_GRACE`] closes.
    pub(crate) fn stop(&mut self, idle_grace: Duration) {
        if self.stopping.is_some() {
            return;
        }
        for l in self.listeners.drain(..) {
            let _ = self.ep.delete(&l);
        }
        self.counters.set_accepting(false);
        self.accept_again = None;
        self.stopping = Some(Stopping {
            idle_close: self.now + idle_grace.as_millis() as u64,
            force_close: self.now + STOP_GRACE.as_millis() as u64,
        });
        self.expire();
    }

    /// Answers a request: with the application's encoded response, or a
    /// fault (its status sent, its reason logged). The response is written
    /// at once; the connection's next request (pipelined) is parsed.
    pub(crate) fn answer(&mut self, id: ReqId, answer: Result<&[u8], Fault>) {
        if self.conn(id).is_none() {
            return; // its client left
        }
        let Some(c) = self.conns[id.slot].as_mut() else {
            return;
        };
        let Phase::App { head, body_in } = std::mem::replace(&mut c.phase, Phase::Head) else {
            return;
        };
        self.respond(id.slot, head, body_in, Reply::App(answer));
    }

    /// Writes the response to the request of `head` on the connection in
    /// `slot` (its phase back at `Head`), counts and logs it, and goes on
    /// with the connection's next request.
    fn respond(&mut self, slot: usize, head: head::Head, body_in: usize, reply: Reply<'_>) {
        let draining = self.stopping.is_some();
        let date = self.date.at(self.now);
        let Some(c) = self.conns[slot].as_mut() else {
            return;
        };
        let close = !head.keep_alive || draining || c.eof || (c.leave && c.nothing_unread());
        let terms = Terms {
            version: head.version,
            head_only: head.head_only,
            close,
        };
        let written = match reply {
            Reply::App(Ok(bytes)) => {
                let handed = self.files.as_deref().filter(|f| f.takes_handoffs());
                match handed.and_then(|f| handoff(f, bytes, &head)) {
                    Some(Ok((view, file))) => {
                        let w = reply::file_head(&mut c.wbuf, &file, Some(&view), terms, date);
                        w.map(|w| (w, Some(file)))
                            .map_err(|why| Fault::new(502, why))
                    }
                    Some(Err(f)) => Err(f),
                    None => reply::answer(&mut c.wbuf, bytes, terms, date)
                        .map(|w| (w, None))
                        .map_err(|why| Fault::new(502, why)),
                }
            }
            Reply::App(Err(f)) => Err(f),
            Reply::File(file) => reply::file_head(&mut c.wbuf, &file, None, terms, date)
                .map(|w| (w, Some(file)))
                .map_err(|why| Fault::new(500, why)),
            Reply::Status(status) => {
                Ok((reply::plain(&mut c.wbuf, status, true, terms, date), None))
            }
        };
        let written = written.unwrap_or_else(|f| {
            (self.log)(&format!(
                "HTTP {} from {}: {} ({})",
                head.line, c.remote, f.status, f.reason
            ));
            (reply::plain(&mut c.wbuf, f.status, true, terms, date), None)
        });
        let (written, file) = written;
        if let Some(FileReply {
            file: Some(file),
            start,
            len,
            ..
        }) = file
        {
            if !head.head_only && len > 0 {
                c.file = Some(Outgoing {
                    file,
                    offset: start,
                    end: start + len,
                });
            }
        }
        self.answered(slot, &head, body_in, written, close);
    }

    /// Counts and logs the response to `head`, written (its last bytes
    /// possibly still going out), and goes on with the connection: closes
    /// it once written (`close`), or arms the next head's timer and parses
    /// what came behind it.
    fn answered(
        &mut self,
        slot: usize,
        head: &head::Head,
        body_in: usize,
        written: reply::Written,
        close: bool,
    ) {
        let Some(c) = self.conns[slot].as_mut() else {
            return;
        };
        c.spool = None; // the request is over: its spooled body goes
        let took = c.started.take().map_or(Duration::ZERO, |t| t.elapsed());
        self.counters
            .answered(written.status, body_in, written.body, took);
        if let Some(log) = &self.access {
            log.line(
                &c.remote,
                &head.line,
                head.version,
                written.status,
                written.body,
                took,
            );
        }
        if close {
            c.closing = true;
        } else {
            // The next request's head: its timeout runs from now.
            let deadline = self.now + self.limits.header_timeout.as_millis() as u64;
            c.deadline = deadline;
            self.timers.push_back((deadline, slot, c.serial));
        }
        let more = std::mem::take(&mut c.more);
        self.after_write(slot);
        if self.conns[slot].as_ref().is_some_and(|c| !c.closing) {
            // A pipelined request already read, and what the socket holds
            // beyond what was read ahead.
            self.advance(slot);
            if more {
                self.read(slot, false);
            }
        }
    }

    // ---- connections ----------------------------------------------------

    /// Accepts what listener `i` holds; while another worker should take
    /// it ([`balance`]), it is left to them and tried again after
    /// [`SHARE_WAIT`]. If `forced`, everything queued is taken (it waited
    /// that long already).
    fn accept(&mut self, i: usize, forced: bool) {
        loop {
            let Some(l) = self.listeners.get(i) else {
                return;
            };
            if !forced && self.balance.defers() {
                self.retry_accept(SHARE_WAIT);
                return;
            }
            let (fd, peer) = match shmlink_sys::net::accept_tcp(l) {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                Err(_) => {
                    // Out of descriptors, say: try again shortly.
                    self.retry_accept(Duration::from_millis(10));
                    return;
                }
            };
            self.counters.add(Field::Connections, 1);
            if self.counters.open_everywhere() >= self.limits.max_connections as u64 {
                self.counters.add(Field::Refused, 1);
                continue; // dropping `fd` closes it
            }
            let sock = std::net::TcpStream::from(fd);
            let _ = sock.set_nodelay(true);
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            if self.ep.add(&sock, slot as u64, Interest::Edge).is_err() {
                self.free.push(slot);
                continue;
            }
            let serial = self.next_serial;
            self.next_serial += 1;
            let mut c = Conn::new(sock, peer.to_string(), serial);
            let deadline = self.now + self.limits.header_timeout.as_millis() as u64;
            c.deadline = deadline;
            self.timers.push_back((deadline, slot, serial));
            self.conns[slot] = Some(c);
            self.counters.add(Field::Open, 1);
        }
    }

    /// Asks `n` connections to move to the other workers: their next
    /// response closes them (`Connection: close`), once nothing of theirs
    /// is read ahead.
    fn nudge(&mut self, mut n: usize) {
        for c in self.conns.iter_mut().flatten() {
            if n == 0 {
                return;
            }
            if !c.leave && !c.closing && !matches!(c.phase, Phase::Lingering) {
                c.leave = true;
                n -= 1;
            }
        }
    }

    /// Accepting is tried again, whatever the share, within `after`.
    fn retry_accept(&mut self, after: Duration) {
        let at = Instant::now() + after;
        self.accept_again = Some(self.accept_again.map_or(at, |a| a.min(at)));
    }

    fn on_event(&mut self, slot: usize, ev: Event) {
        if self.conns.get(slot).is_none_or(Option::is_none) {
            return;
        }
        if ev.writable {
            let (pending, file) = self.conns[slot]
                .as_ref()
                .map_or((false, false), |c| (!c.flushed(), c.file.is_some()));
            self.after_write(slot);
            let sent = self.conns[slot]
                .as_ref()
                .is_some_and(|c| c.flushed() && !c.closing);
            if pending && sent {
                // The output is all out: the next request's head has its
                // full time from now, and what waited behind a file is
                // parsed.
                if let Some(c) = self.conns[slot].as_mut() {
                    let deadline = self.now + self.limits.header_timeout.as_millis() as u64;
                    c.deadline = deadline;
                    self.timers.push_back((deadline, slot, c.serial));
                }
                if file {
                    self.read(slot, false);
                }
            }
        }
        if ev.readable || ev.hang_up {
            self.read(slot, ev.hang_up);
        }
    }

    /// Reads what the connection has and parses it, as far as its phase
    /// allows (`to_end`: up to its end of stream, the peer hung up).
    fn read(&mut self, slot: usize, to_end: bool) {
        loop {
            let (cap, parse) = {
                let Some(c) = self.conns[slot].as_ref() else {
                    return;
                };
                match &c.phase {
                    Phase::Head => (self.limits.max_header_bytes + 1, true),
                    Phase::Body { .. } => (BODY_STEP, true),
                    Phase::App { .. } => (AHEAD, false),
                    Phase::Lingering => (AHEAD, false),
                }
            };
            let Some(c) = self.conns[slot].as_mut() else {
                return;
            };
            if c.eof {
                break;
            }
            let got = c.read(cap, to_end);
            if matches!(c.phase, Phase::Lingering) {
                let n = c.unread().len();
                c.consume(n);
                if c.eof {
                    self.close(slot);
                    return;
                }
                if got == Read_::Full {
                    continue;
                }
                return;
            }
            if !parse {
                // Read ahead; parsed after the answer.
                c.more = got == Read_::Full;
                return;
            }
            let before = c.unread().len();
            self.advance(slot);
            let progressed = self.conns[slot]
                .as_ref()
                .is_some_and(|c| c.unread().len() != before || !matches!(c.phase, Phase::Head));
            if got != Read_::Full || !progressed {
                break;
            }
        }
        // The client shut its side with nothing more to parse: a
        // connection waiting for a head (or a body) has nothing coming.
        if let Some(c) = self.conns[slot].as_ref() {
            if c.eof && matches!(c.phase, Phase::Head | Phase::Body { .. }) && c.flushed() {
                self.close(slot);
            }
        }
    }

    /// Parses the connection's unread bytes: a head, then its body; queues
    /// the request once it is whole.
    fn advance(&mut self, slot: usize) {
        loop {
            let Some(c) = self.conns[slot].as_mut() else {
                return;
            };
            match &mut c.phase {
                Phase::App { .. } | Phase::Lingering => return,
                Phase::Head => {
                    if c.unread().is_empty() || c.file.is_some() {
                        // Nothing, or a file still going out ahead of the
                        // next response: parsed once it is out.
                        return;
                    }
                    let mut encoded = self.spare.pop().unwrap_or_default();
                    let parsed = head::parse(c.unread(), &c.remote, &mut encoded);
                    let h = match parsed {
                        Ok(Some(h)) => h,
                        Ok(None) => {
                            self.spare.push(encoded);
                            if c.unread().len() > self.limits.max_header_bytes {
                                self.refuse(slot, 431, false, None);
                            }
                            return;
                        }
                        Err(status) => {
                            self.spare.push(encoded);
                            self.refuse(slot, status, false, None);
                            return;
                        }
                    };
                    c.consume(h.len);
                    c.started = Some(Instant::now());
                    if h.connect {
                        self.refuse(slot, 405, true, Some(h));
                        return;
                    }
                    if h.fetch && h.framing == Framing::None {
                        let files = self.files.as_deref().filter(|f| f.serves_root());
                        match files.map(|f| f.lookup(h.target(), h.conditions.as_deref())) {
                            None | Some(Lookup::Application) => {}
                            Some(Lookup::File(file)) => {
                                self.spare.push(encoded);
                                self.respond(slot, h, 0, Reply::File(file));
                                return;
                            }
                            Some(Lookup::Refused) => {
                                self.spare.push(encoded);
                                self.respond(slot, h, 0, Reply::Status(404));
                                return;
                            }
                        }
                    }
                    let body = match h.framing {
                        Framing::Length(n) if n > self.limits.max_body as u64 => {
                            self.refuse(slot, 413, true, Some(h));
                            return;
                        }
                        Framing::None => Body::none(),
                        Framing::Length(n) => Body::length(n),
                        Framing::Chunked => Body::chunked(),
                    };
                    if h.expects_continue && !c.unread().is_empty() {
                        // The body is coming already: no 100 needed.
                    } else if h.expects_continue {
                        c.wbuf.extend_from_slice(reply::CONTINUE);
                    }
                    let length_at = crate::wire::begin_body(&mut encoded);
                    c.phase = Phase::Body {
                        head: h,
                        body,
                        encoded,
                        taken: 0,
                        length_at,
                    };
                    if !c.wbuf.is_empty() {
                        self.after_write(slot);
                    }
                }
                Phase::Body { .. } => {
                    let spool = self.limits.spool.as_ref();
                    match c.take_body(
                        self.limits.max_body as u64,
                        self.limits.max_header_bytes,
                        spool,
                    ) {
                        BodyStep::More { progressed } => {
                            if progressed {
                                // A body that keeps coming keeps its connection.
                                let deadline =
                                    self.now + self.limits.header_timeout.as_millis() as u64;
                                c.deadline = deadline;
                                self.timers.push_back((deadline, slot, c.serial));
                            }
                            return;
                        }
                        BodyStep::Broken(head, Broken::TooLarge) => {
                            self.refuse(slot, 413, true, Some(head));
                            return;
                        }
                        BodyStep::Broken(head, Broken::Framing) => {
                            self.refuse(slot, 400, true, Some(head));
                            return;
                        }
                        BodyStep::Unspooled(head, e) => {
                            (self.log)(&format!(
                                "HTTP {} from {}: 500 (spooling the body to {}: {e})",
                                head.line,
                                c.remote,
                                spool.map_or_else(String::new, |s| s.dir.display().to_string())
                            ));
                            self.refuse(slot, 500, true, Some(head));
                            return;
                        }
                        BodyStep::Done {
                            head,
                            encoded,
                            taken,
                        } => {
                            c.phase = Phase::App {
                                head,
                                body_in: taken as usize,
                            };
                            c.deadline = 0;
                            self.ready.push_back(Ready {
                                id: ReqId {
                                    slot,
                                    serial: c.serial,
                                },
                                request: encoded,
                                queued: self.now,
                            });
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Answers a request the server refuses on its own and ends the
    /// connection: 413/405/400 with a text body (counted as requests),
    /// or, for a head it could not parse (`head` `None`), 400/431 with an
    /// empty body, as hyper answers those (not counted as requests).
    fn refuse(&mut self, slot: usize, status: u16, text: bool, head: Option<head::Head>) {
        let date = self.date.at(self.now);
        let Some(c) = self.conns[slot].as_mut() else {
            return;
        };
        let terms = Terms {
            version: head.as_ref().map_or(1, |h| h.version),
            head_only: false,
            close: true,
        };
        let w = reply::plain(&mut c.wbuf, status, text, terms, date);
        if let Some(h) = &head {
            let took = c.started.take().map_or(Duration::ZERO, |t| t.elapsed());
            self.counters.answered(w.status, 0, w.body, took);
            if let Some(log) = &self.access {
                log.line(&c.remote, &h.line, h.version, w.status, w.body, took);
            }
        }
        c.closing = true;
        c.phase = Phase::Head;
        c.spool = None;
        self.after_write(slot);
    }

    /// Writes what is pending; a connection that is done closes (lingering
    /// when the client may still be sending).
    fn after_write(&mut self, slot: usize) {
        let Some(c) = self.conns[slot].as_mut() else {
            return;
        };
        let before = c.unsent();
        if !c.flush() {
            self.close(slot);
            return;
        }
        let progressed = c.unsent() < before;
        self.note_sending(slot, progressed);
        let Some(c) = self.conns[slot].as_mut() else {
            return;
        };
        if c.closing && c.flushed() && !matches!(c.phase, Phase::Lingering) {
            if c.eof || (c.unread().is_empty() && !matches!(c.phase, Phase::Body { .. })) {
                self.close(slot);
            } else {
                let _ = c.sock.shutdown(std::net::Shutdown::Write);
                c.phase = Phase::Lingering;
                let deadline = self.now + LINGER_MS;
                c.deadline = deadline;
                self.lingers.push_back((deadline, slot, c.serial));
                let n = c.unread().len();
                c.consume(n);
            }
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(c) = self.conns.get_mut(slot).and_then(Option::take) {
            // Closing the socket takes it out of the epoll set.
            drop(c);
            self.counters.sub(Field::Open);
            self.free.push(slot);
        }
    }

    /// Closes connections past their deadline (a head, a body or a linger
    /// that took too long) and, when stopping, idle ones after the grace
    /// and all after the stop's.
    fn expire(&mut self) {
        self.expire_sends();
        for lingering in [false, true] {
            loop {
                let q = if lingering {
                    &mut self.lingers
                } else {
                    &mut self.timers
                };
                let Some(&(at, slot, serial)) = q.front() else {
                    break;
                };
                if at > self.now {
                    break;
                }
                q.pop_front();
                let due = self
                    .conns
                    .get(slot)
                    .and_then(Option::as_ref)
                    .is_some_and(|c| {
                        c.serial == serial
                            && c.deadline == at
                            && c.flushed()
                            && matches!(
                                c.phase,
                                Phase::Head | Phase::Body { .. } | Phase::Lingering
                            )
                    });
                if due {
                    self.close(slot);
                }
            }
        }
        let Some(s) = self.stopping else { return };
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_ref() else {
                continue;
            };
            let idle = matches!(c.phase, Phase::Head) && c.unread().is_empty() && c.flushed();
            if self.now >= s.force_close || (idle && self.now >= s.idle_close) {
                self.close(slot);
            }
        }
        if self.now >= s.force_close {
            self.ready.clear();
        }
    }
}

/// The file an application's answer names in `X-Sendfile` or
/// `X-Accel-Redirect`, if it names one: the answer and the file's
/// response, or the fault to answer instead (logged with why).
fn handoff<'a>(
    files: &Files,
    bytes: &'a [u8],
    head: &head::Head,
) -> Option<Result<(ResponseView<'a>, FileReply), Fault>> {
    let view = ResponseView::parse(bytes).ok()?;
    let (how, value) = view
        .headers()
        .find_map(|(n, v)| Handoff::of(n).map(|h| (h, v)))?;
    // Conditions and ranges apply to a 200 only.
    let conditions = (view.status == 200)
        .then_some(head.conditions.as_deref())
        .flatten();
    Some(
        files
            .handoff(how, value, conditions)
            .map(|file| (view, file))
            .map_err(|(status, why)| Fault::new(status, why)),
    )
}
