//! One session's life on the server after its handshake: registered with
//! the accept loop, requests answered until the client leaves or the server
//! stops, then unregistered.

use std::cell::Cell;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::admit::Established;
use super::answer::Answer;
use super::handing::{Parted, Verdict};
use super::handler::Handler;
use super::registry::{About, Entry, Wake};
use super::reuse::ClientProcess;
use super::shared::{Shared, ShmCharge};
use crate::callee::{panic_text, reply, Limits};
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError};
use crate::link::stream::Stream;
use crate::link::Link;
use crate::message::{Extra, Message};
use crate::session::Session;
use crate::watch::SessionFlags;
use crate::worker::ask::answer_ask;
use crate::worker::LineAsk;
use shmlink_arena::Loan;
use shmlink_wire::codes::CODE_NOT_ANSWERED;
use shmlink_wire::codes::{CODE_HANDLER_PANICKED, CODE_SHUTTING_DOWN};
use shmlink_wire::frame::Kind;
use shmlink_wire::handover::{SessionRecord, SESSION_BELL, SESSION_STREAM};
use shmlink_wire::handshake::{CAP_BELL, CAP_FDS};

/// Serves an established session until it ends, then frees it.
pub(crate) fn serve(shared: &Shared, est: Established, handler: &dyn Handler) {
    let Established {
        mut session,
        id,
        sock,
        flags,
        peer,
        // Counted against `max_shm_bytes` until the session ends (or, kept
        // for reuse, until the kept segment is freed).
        shm,
        reuse,
        pid,
        uid,
        transport,
    } = est;
    // An `shm:` session sleeps on its futexes and is watched through its
    // control socket; a stream session blocks on its socket.
    let (wake, ctrl) = match session.link() {
        Link::Shm(l) => (Wake::Shm(Arc::clone(l.segment())), Some(sock)),
        Link::Stream(l) => (Wake::Stream(sock, l.interrupt()), None),
    };
    let fds = session.agreed(CAP_FDS | CAP_BELL);
    let about = About {
        pid,
        uid,
        transport,
        since: Instant::now(),
        tally: Arc::clone(session.tally()),
    };
    let entry = Arc::new(Entry::new(flags, wake, ctrl.clone(), fds, about));
    shared.registry.add(id, &entry, ctrl.as_deref());
    // After filing: a stop that went through the registry before this
    // session was in it is seen here.
    if shared.stopping() {
        entry.flags.stop.store(true, Ordering::Release);
    }
    // A hand-over under way when this session was filed: it joins.
    if shared.handing.active() {
        entry.flags.hand_over.store(true, Ordering::Release);
    }
    shared.stats.sessions_opened.fetch_add(1, Ordering::AcqRel);
    let end = loop {
        match serve_requests(shared, &mut session, handler, &entry.flags) {
            Some(end) => break end,
            None => {
                let memfd = reuse.as_ref().map(|(_, fd)| fd);
                let part = part(&session, id, ctrl.as_deref(), memfd);
                match shared.handing.file(id, part) {
                    Verdict::Resume => {
                        entry.flags.hand_over.store(false, Ordering::Release);
                        session.resume();
                    }
                    Verdict::Took => {
                        // The successor serves it now, from where this
                        // thread stopped: not a word to the client.
                        shared.registry.remove(id, ctrl.as_deref());
                        shared.stats.sessions_closed.fetch_add(1, Ordering::AcqRel);
                        return;
                    }
                }
            }
        }
    };
    report(shared, &session, id, &peer, &end);
    shared.registry.remove(id, ctrl.as_deref());
    drop(entry);
    give_back(shared, session, ctrl.as_deref(), reuse, shm);
    shared.stats.sessions_closed.fetch_add(1, Ordering::AcqRel);
}

/// What the successor needs of a session stopped at a message boundary:
/// its terms and duplicates of its descriptors; `Err` says why it cannot
/// be handed (the whole hand-over is then refused and the server serves
/// on).
fn part(
    session: &Session,
    id: u64,
    ctrl: Option<&Stream>,
    memfd: Option<&OwnedFd>,
) -> Result<Parted, String> {
    let (own, peer) = session.arena_bytes();
    if own != 0 || peer != 0 {
        return Err(format!(
            "session {id} has arena segments mapped ({own} bytes lent from, {peer} bytes lent to it); handing an arena over is not built yet"
        ));
    }
    let dup = |fd: BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .map_err(|e| format!("duplicating a descriptor of session {id}: {e}"))
    };
    let link = match session.link() {
        Link::Shm(link) => link,
        Link::Stream(link) => {
            let read_ahead = link
                .parting()
                .map_err(|why| format!("session {id}: {why}"))?
                .to_vec();
            return Ok(Parted {
                record: SessionRecord {
                    id,
                    caps: session.caps(),
                    peer_max: session.peer_max() as u64,
                    ring_c2s: 0,
                    ring_s2c: 0,
                    flags: SESSION_STREAM,
                    listener: 0,
                    epochs: (0, 0),
                    read_ahead: read_ahead.len() as u32,
                },
                address: session.address().to_string(),
                fds: vec![dup(link.socket().as_fd())?],
                read_ahead,
            });
        }
    };
    let (Some(ctrl), Some(memfd)) = (ctrl, memfd) else {
        return Err(format!(
            "session {id} does not hold its segment's memfd (sessions near the descriptor limit do not)"
        ));
    };
    let mut fds = vec![dup(ctrl.as_fd())?, dup(memfd.as_fd())?];
    let mut flags = 0;
    if let Some(bell) = link.peer_bell() {
        fds.push(dup(bell.as_fd())?);
        flags |= SESSION_BELL;
    }
    let layout = link.segment().layout();
    let ring = |n: u64| u32::try_from(n).map_err(|_| format!("session {id}: ring of {n} bytes"));
    Ok(Parted {
        record: SessionRecord {
            id,
            caps: session.caps(),
            peer_max: session.peer_max() as u64,
            ring_c2s: ring(layout.c2s_len)?,
            ring_s2c: ring(layout.s2c_len)?,
            flags,
            listener: 0,
            epochs: link.sleep_epochs(),
            read_ahead: 0,
        },
        address: session.address().to_string(),
        fds,
        read_ahead: Vec::new(),
    })
}

/// How long a session thread looks for the client's control socket to
/// close after its `Goodbye` (a client closes it right after: see
/// `ShmLink`'s field order), yielding between looks.
const CLOSE_LOOK: Duration = Duration::from_micros(200);

/// How long it then waits for that close, asleep: a client descheduled
/// between its `Goodbye` and its close (a loaded machine, a sanitizer
/// build) still gets its segment back; a socket another process holds
/// open (the fork case) costs the session thread this long, not its CPU.
const CLOSE_WAIT: Duration = Duration::from_millis(20);

/// Keeps the segment of a session its client ended with a `Goodbye` for
/// the client's process (see `reuse`); any other end frees it. The client
/// must also have closed its control socket, seen within [`CLOSE_LOOK`]
/// and [`CLOSE_WAIT`]: a socket still open has another holder, a forked
/// child that said goodbye for the parent, which may still write into the
/// rings.
fn give_back(
    shared: &Shared,
    session: Session,
    ctrl: Option<&Stream>,
    reuse: Option<(ClientProcess, OwnedFd)>,
    charge: Option<ShmCharge>,
) {
    let (Some((process, fd)), Some(charge), Some(ctrl), Link::Shm(l)) =
        (reuse, charge, ctrl, session.link())
    else {
        return;
    };
    if !session.ended_by_goodbye() || shared.stopping() {
        return;
    }
    if !closes_soon(ctrl) {
        return;
    }
    let mut segment = Arc::clone(l.segment());
    drop(session);
    // The last reference soon: the session's ring ends and its registry
    // entry are gone, but the monitor may be handling this very hang-up
    // with a clone of the entry (which holds the segment to ring its
    // bells) for a moment. Anything holding it longer keeps it from reuse.
    let since = Instant::now();
    loop {
        match Arc::try_unwrap(segment) {
            Ok(segment) => {
                shared.reusable.give_back(process, segment, fd, charge);
                shared.segment_kept();
                return;
            }
            Err(held) if since.elapsed() < CLOSE_WAIT => {
                segment = held;
                std::thread::yield_now();
            }
            Err(_) => return,
        }
    }
}

/// Whether the client's end of `ctrl` closes: looked for (yielding) up to
/// [`CLOSE_LOOK`], then waited for, asleep, up to [`CLOSE_WAIT`].
fn closes_soon(ctrl: &Stream) -> bool {
    let since = Instant::now();
    while since.elapsed() < CLOSE_LOOK {
        if shmlink_sys::poll::peer_gone(ctrl) {
            return true;
        }
        std::thread::yield_now();
    }
    shmlink_sys::poll::hangs_up_within(ctrl, CLOSE_WAIT)
}

/// Tells the client why the session ends where it should know, and logs
/// the ends an operator should see: the client broke the protocol (it was
/// told why, in a `Goodbye`) or stopped reading its responses.
fn report(shared: &Shared, session: &Session, id: u64, peer: &str, end: &Error) {
    let why = match end {
        Error::Protocol { detail, .. } => format!("protocol error: {detail}"),
        Error::Timeout { .. } => format!("the client stopped reading: {end}"),
        _ => return,
    };
    shared.opts.log.write(&format!(
        "shmlink: server at {}: session {id} with {peer} ended: {why}",
        session.address()
    ));
}

/// Answers requests until the session ends; returns why it ended, or
/// `None` at the message boundary where a hand-over stopped it (what the
/// client sent since stays queued in the ring).
fn serve_requests(
    shared: &Shared,
    session: &mut Session,
    handler: &dyn Handler,
    flags: &SessionFlags,
) -> Option<Error> {
    let mut resp = Vec::new();
    let in_place = session.lends() && handler.answers_in_place();
    let batch_limit = handler.batch_limit();
    let mut batch = Batch::default();
    // Each request is received here, in place (see `Session::recv_into`).
    let mut m = Message::blank();
    // The direct line this session's client was last lent (bit 7).
    let mut lent = None;
    loop {
        let received = match batch.next.take() {
            Some(next) => next.map(|next| m = next),
            None if flags.hand_over.load(Ordering::Relaxed) && session.at_boundary() => {
                return None
            }
            None => session.recv_into(&mut Deadline::Never, &mut m),
        };
        match received {
            Ok(()) => {}
            Err(Error::Closed { .. })
                if flags.hand_over.load(Ordering::Acquire) && !session.ended_by_goodbye() =>
            {
                return None
            }
            Err(e) => {
                if shared.stopping() && matches!(e, Error::Closed { .. }) {
                    let reason = format!("server at {} is shutting down", session.address());
                    session.goodbye(CODE_SHUTTING_DOWN, &reason);
                }
                return Some(e);
            }
        };
        match m.kind {
            Kind::Request if batch_limit > 1 && batches(&m) && session.ready_now() => {
                let first = std::mem::replace(&mut m, Message::blank());
                batch.gather(session, first, batch_limit);
                if let Err(e) = batch.answer(shared, session, handler) {
                    return Some(e);
                }
            }
            Kind::Request => {
                if let Err(e) = answer(shared, session, handler, in_place, &mut m, &mut resp) {
                    return Some(e);
                }
            }
            Kind::OneWay => {
                let _ = catch_unwind(AssertUnwindSafe(|| handler.notify(&m.body)));
                session.recycle(std::mem::take(&mut m.body));
            }
            Kind::Line => {
                let lend = |ask: &LineAsk| handler.line(ask);
                let timeout = shared.opts.send_timeout;
                if let Err(e) = answer_ask(session, lend, timeout, &mut m, &mut lent) {
                    return Some(e);
                }
            }
            k => {
                let detail = format!("client sent a {k:?} frame; only requests, one-way messages and goodbyes are expected");
                return Some(session.violation(detail));
            }
        }
    }
}

/// Whether a request may go in a batch: one without descriptors or lent
/// bytes (those go through [`Handler::respond`], one at a time).
fn batches(m: &Message) -> bool {
    m.kind == Kind::Request && !m.has_extra()
}

/// Requests a client pipelined, taken together for a handler that works on
/// several at once ([`Handler::batch_limit`] above 1).
#[derive(Default)]
struct Batch {
    requests: Vec<Message>,
    /// What receiving gave while gathering that does not go in the batch (a
    /// message of another kind, or why the session ended): the loop's next.
    next: Option<Result<Message, Error>>,
}

impl Batch {
    /// Takes `first` and the requests that can be received at once after
    /// it, up to `limit`.
    fn gather(&mut self, session: &mut Session, first: Message, limit: usize) {
        self.requests.push(first);
        while self.requests.len() < limit && session.ready_now() {
            match session.recv(&mut Deadline::Never) {
                Ok(m) if batches(&m) => self.requests.push(m),
                other => {
                    self.next = Some(other);
                    break;
                }
            }
        }
    }

    /// Hands the batch to the handler, sending each answer as it comes;
    /// a request it left unanswered (or a panic cut short) gets an error.
    fn answer(
        &mut self,
        shared: &Shared,
        session: &mut Session,
        handler: &dyn Handler,
    ) -> Result<(), Error> {
        let bodies: Vec<&[u8]> = self.requests.iter().map(|m| m.body.as_slice()).collect();
        let given = Cell::new(0);
        let mut failed = None;
        let mut send = |result: Result<&[u8], RemoteError>| {
            let Some(m) = self.requests.get(given.get()) else {
                return;
            };
            given.set(given.get() + 1);
            if failed.is_none() {
                let (result, body) = match result {
                    Ok(body) => (Ok(()), body),
                    Err(e) => (Err(e), &[][..]),
                };
                if let Err(e) = send_answer(shared, session, m.id, result, body, None) {
                    failed = Some(e);
                }
            }
        };
        let ran = catch_unwind(AssertUnwindSafe(|| {
            handler.handle_batch(&bodies, &mut send)
        }));
        if given.get() < bodies.len() {
            let why = match ran {
                Ok(()) => RemoteError::new(
                    CODE_NOT_ANSWERED,
                    "the handler returned without answering this call",
                ),
                Err(p) => RemoteError::new(
                    CODE_HANDLER_PANICKED,
                    format!("handler panicked: {}", panic_text(&*p)),
                ),
            };
            while given.get() < bodies.len() {
                send(Err(why.clone()));
            }
        }
        drop(bodies);
        for m in self.requests.drain(..) {
            session.recycle(m.body);
        }
        failed.map_or(Ok(()), Err)
    }
}

/// Runs the handler on a request and sends its response (an error body cut
/// to fit the client's limit). `Err`: the session is over. A request that
/// came with descriptors or lies in the client's arena takes the
/// [`answer_through`] path; a handler that writes in place where the
/// session lends gets its [`Answer`] here; every other request calls
/// [`Handler::handle`].
#[inline(always)]
fn answer(
    shared: &Shared,
    session: &mut Session,
    handler: &dyn Handler,
    in_place: bool,
    m: &mut Message,
    resp: &mut Vec<u8>,
) -> Result<(), Error> {
    if m.has_extra() {
        let m = std::mem::replace(m, Message::blank());
        return answer_through(shared, session, handler, m, resp);
    }
    resp.clear();
    if in_place {
        // No descriptors, no lent bytes: only the answer to build.
        let mut loan = None;
        let result = {
            let threshold = shared.opts.arena_threshold;
            let mut answer = Answer::new(resp, session.lender(), threshold, &mut loan);
            guarded(|| handler.respond(&m.body, Vec::new(), &mut answer))
        };
        session.recycle(std::mem::take(&mut m.body));
        return send_answer(shared, session, m.id, result, resp, loan);
    }
    let result = guarded(|| handler.handle(&m.body, resp));
    session.recycle(std::mem::take(&mut m.body));
    send_answer(shared, session, m.id, result, resp, None)
}

/// [`answer`] through [`Handler::respond`] and an [`Answer`]: the request's
/// descriptors and lent bytes handed over (the lent buffer goes back as the
/// handler returns: its release precedes the response), and a response the
/// handler wrote in place in the session's arena lent as it is.
#[cold]
#[inline(never)]
fn answer_through(
    shared: &Shared,
    session: &mut Session,
    handler: &dyn Handler,
    mut m: Message,
    resp: &mut Vec<u8>,
) -> Result<(), Error> {
    resp.clear();
    let Extra { fds, lent } = m.take_extra();
    let mut loan = None;
    let result = {
        let threshold = shared.opts.arena_threshold;
        let mut answer = Answer::new(resp, session.lender(), threshold, &mut loan);
        let request = lent.as_deref().unwrap_or(&m.body);
        guarded(|| handler.respond(request, fds, &mut answer))
    };
    // The lent request goes back now: its release precedes the response.
    drop(lent);
    session.recycle(m.body);
    send_answer(shared, session, m.id, result, resp, loan)
}

/// Runs `f`, turning a panic into the error the caller receives.
#[inline(always)]
fn guarded(f: impl FnOnce() -> Result<(), RemoteError>) -> Result<(), RemoteError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(RemoteError::new(
            CODE_HANDLER_PANICKED,
            format!("handler panicked: {}", panic_text(&*p)),
        )),
    }
}

/// Sends the answer to call `id`: the response written in `resp` or in
/// `loan` (lent as it is), or the handler's error; an error body is cut to
/// fit the client's limit, and a large response in `resp` is lent from the
/// session's arena (copied once) when it has room.
#[inline(always)]
fn send_answer(
    shared: &Shared,
    session: &mut Session,
    id: u64,
    result: Result<(), RemoteError>,
    resp: &[u8],
    loan: Option<Loan>,
) -> Result<(), Error> {
    let mut scratch = Vec::new();
    let limits = Limits {
        peer: session.peer_max(),
        own: session.local_max(),
        who: "this server",
    };
    let written = loan.as_deref().unwrap_or(resp);
    let (kind, body) = reply(result.map(|()| written), limits, &mut scratch);
    if kind == Kind::Error {
        shared.stats.errors.fetch_add(1, Ordering::Relaxed);
    }
    // Counted before the response goes out: a client that saw it may read
    // the statistics at once.
    shared.stats.calls.fetch_add(1, Ordering::Relaxed);
    let mut deadline = Deadline::In(shared.opts.send_timeout);
    if kind == Kind::Response {
        if let Some(loan) = loan {
            return session.send_loan(id, loan, &mut deadline);
        }
    }
    if kind == Kind::Response && body.len() >= shared.opts.arena_threshold && session.lends() {
        if let Some(sent) = session.send_copy_lent(id, body, &mut deadline) {
            return sent;
        }
    }
    session.send(kind, id, body, &mut deadline)
}
