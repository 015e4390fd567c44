//! One session's life on the server after its handshake: registered with
//! the accept loop, requests answered until the client leaves or the server
//! stops, then unregistered.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::admit::Established;
use super::answer::Answer;
use super::handler::Handler;
use super::registry::{Entry, Wake};
use super::shared::Shared;
use crate::callee::{panic_text, reply, Limits};
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError};
use crate::frame::{Extra, Kind, Message, CODE_HANDLER_PANICKED, CODE_SHUTTING_DOWN};
use crate::handshake::CAP_FDS;
use crate::link::Link;
use crate::session::Session;

/// Serves an established session until it ends, then frees it.
pub(crate) fn serve(shared: &Shared, est: Established, handler: &dyn Handler) {
    let Established {
        mut session,
        id,
        sock,
        flags,
        peer,
        ..
    } = est;
    // An `shm:` session sleeps on its futexes and is watched through its
    // control socket; a stream session blocks on its socket.
    let (wake, ctrl) = match session.link() {
        Link::Shm(l) => (Wake::Shm(Arc::clone(l.segment())), Some(sock)),
        Link::Stream(_) => (Wake::Stream(sock), None),
    };
    let fds = session.agreed(CAP_FDS);
    let entry = Arc::new(Entry::new(flags, wake, ctrl.clone(), fds));
    shared.registry.add(id, &entry, ctrl.as_deref());
    // After filing: a stop that went through the registry before this
    // session was in it is seen here.
    if shared.stopping() {
        entry.flags.stop.store(true, Ordering::Release);
    }
    shared.stats.sessions_opened.fetch_add(1, Ordering::AcqRel);
    let end = serve_requests(shared, &mut session, handler);
    report(shared, &session, id, &peer, &end);
    shared.registry.remove(id, ctrl.as_deref());
    shared.stats.sessions_closed.fetch_add(1, Ordering::AcqRel);
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

/// Answers requests until the session ends; returns why it ended.
fn serve_requests(shared: &Shared, session: &mut Session, handler: &dyn Handler) -> Error {
    let mut resp = Vec::new();
    loop {
        let m = match session.recv(&mut Deadline::Never) {
            Ok(m) => m,
            Err(e) => {
                if shared.stopping() && matches!(e, Error::Closed { .. }) {
                    let reason = format!("server at {} is shutting down", session.address());
                    session.goodbye(CODE_SHUTTING_DOWN, &reason);
                }
                return e;
            }
        };
        match m.kind {
            Kind::Request => {
                if let Err(e) = answer(shared, session, handler, m, &mut resp) {
                    return e;
                }
            }
            Kind::OneWay => {
                let _ = catch_unwind(AssertUnwindSafe(|| handler.notify(&m.body)));
                session.recycle(m.body);
            }
            k => {
                let detail = format!("client sent a {k:?} frame; only requests, one-way messages and goodbyes are expected");
                return session.violation(detail);
            }
        }
    }
}

/// Runs the handler on a request that came with descriptors or lies in the
/// client's arena. The lent buffer goes back as the handler returns (its
/// release precedes the response).
#[cold]
fn with_extra(
    handler: &dyn Handler,
    body: &[u8],
    x: Extra,
    answer: &mut Answer<'_>,
) -> Result<(), RemoteError> {
    let payload = x.lent.as_deref().unwrap_or(body);
    handler.respond(payload, x.fds, answer)
}

/// Runs the handler on a request and sends its response (an error body cut
/// to fit the client's limit; lent from the session's arena when the
/// handler wrote it there, or when it is large and the arena has room).
/// `Err`: the session is over.
#[inline(always)]
fn answer(
    shared: &Shared,
    session: &mut Session,
    handler: &dyn Handler,
    mut m: Message,
    resp: &mut Vec<u8>,
) -> Result<(), Error> {
    resp.clear();
    let extra = m.has_extra().then(|| m.take_extra());
    let mut loan = None;
    let result = {
        let threshold = shared.opts.arena_threshold;
        let mut answer = Answer::new(resp, session.lender(), threshold, &mut loan);
        let call = || match extra {
            None => handler.respond(&m.body, Vec::new(), &mut answer),
            Some(x) => with_extra(handler, &m.body, x, &mut answer),
        };
        match catch_unwind(AssertUnwindSafe(call)) {
            Ok(r) => r,
            Err(p) => Err(RemoteError::new(
                CODE_HANDLER_PANICKED,
                format!("handler panicked: {}", panic_text(&*p)),
            )),
        }
    };
    session.recycle(m.body);
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
            return session.send_loan(m.id, loan, &mut deadline);
        }
    }
    if kind == Kind::Response && body.len() >= shared.opts.arena_threshold && session.lends() {
        if let Some(sent) = session.send_copy_lent(m.id, body, &mut deadline) {
            return sent;
        }
    }
    session.send(kind, m.id, body, &mut deadline)
}
