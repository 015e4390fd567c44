//! One session's life on the server after its handshake: registered with
//! the accept loop, requests answered until the client leaves or the server
//! stops, then unregistered.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::admit::Established;
use super::handler::{Handler, CODE_HANDLER_PANICKED, CODE_RESPONSE_TOO_LARGE};
use super::registry::{Entry, Wake};
use super::shared::Shared;
use crate::deadline::Deadline;
use crate::error::RemoteError;
use crate::frame::{Kind, Message};
use crate::link::Link;
use crate::session::Session;

/// Serves an established session until it ends, then frees it.
pub(crate) fn serve(shared: &Shared, est: Established, handler: &dyn Handler) {
    let Established {
        mut session,
        id,
        sock,
        flags,
    } = est;
    // An `shm:` session sleeps on its futexes and is watched through its
    // control socket; a stream session blocks on its socket.
    let (wake, ctrl) = match session.link() {
        Link::Shm(l) => (Wake::Shm(Arc::clone(l.segment())), Some(sock)),
        Link::Stream(_) => (Wake::Stream(sock), None),
    };
    let entry = Arc::new(Entry::new(flags, wake));
    shared.registry.add(id, &entry, ctrl.as_deref());
    // After filing: a stop that went through the registry before this
    // session was in it is seen here.
    if shared.stopping() {
        entry.flags.stop.store(true, Ordering::Release);
    }
    shared.stats.sessions_opened.fetch_add(1, Ordering::AcqRel);
    serve_requests(shared, &mut session, handler);
    shared.registry.remove(id, ctrl.as_deref());
    shared.stats.sessions_closed.fetch_add(1, Ordering::AcqRel);
}

fn serve_requests(shared: &Shared, session: &mut Session, handler: &dyn Handler) {
    let mut resp = Vec::new();
    loop {
        let Ok(m) = session.recv(&mut Deadline::Never) else {
            return;
        };
        match m.kind {
            Kind::Request => {
                if answer(shared, session, handler, m, &mut resp).is_err() {
                    return;
                }
            }
            Kind::OneWay => {
                let _ = catch_unwind(AssertUnwindSafe(|| handler.notify(&m.body)));
                session.recycle(m.body);
            }
            Kind::Goodbye => return,
            Kind::Response | Kind::Error | Kind::Descriptor => {
                session.break_with(format!("client sent a {:?} frame", m.kind));
                return;
            }
        }
    }
}

/// Runs the handler on a request and sends its response. `Err`: the session
/// is over.
#[inline(always)]
fn answer(
    shared: &Shared,
    session: &mut Session,
    handler: &dyn Handler,
    m: Message,
    resp: &mut Vec<u8>,
) -> Result<(), ()> {
    resp.clear();
    let result = match catch_unwind(AssertUnwindSafe(|| handler.handle(&m.body, resp))) {
        Ok(r) => r,
        Err(p) => Err(RemoteError::new(
            CODE_HANDLER_PANICKED,
            format!("handler panicked: {}", panic_text(&p)),
        )),
    };
    session.recycle(m.body);
    let error_body;
    let (kind, body) = match result {
        Ok(()) if resp.len() <= session.peer_max() => (Kind::Response, &resp[..]),
        r => {
            let e = r
                .err()
                .unwrap_or_else(|| too_large(resp.len(), session.peer_max()));
            shared.stats.errors.fetch_add(1, Ordering::Relaxed);
            error_body = Message::error_body(&e);
            (Kind::Error, &error_body[..])
        }
    };
    // Counted before the response goes out: a client that saw it may read
    // the statistics at once.
    shared.stats.calls.fetch_add(1, Ordering::Relaxed);
    let mut deadline = Deadline::In(shared.opts.send_timeout);
    session.send(kind, m.id, body, &mut deadline).map_err(drop)
}

#[cold]
fn too_large(len: usize, max: usize) -> RemoteError {
    RemoteError::new(
        CODE_RESPONSE_TOO_LARGE,
        format!("response of {len} bytes exceeds the client's maximum message size of {max} bytes"),
    )
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}
