//! A server session's ask for a direct line (capability bit 7): the
//! server's handler lends one or refuses, and the session sends its answer.

use std::os::fd::AsFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::frames;
use super::line::{LineAsk, LineOffer};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::link::Link;
use crate::message::Message;
use crate::session::Session;
use shmlink_wire::line::{LineBody, Op};

/// Answers a client's line frame: a grant with its descriptors, or a
/// refusal; `lend` is the handler's choice (one that panics refuses), and
/// `send_timeout` bounds the answer's sending. `lent` is the line this session
/// was last granted: while it is out, another ask is refused without asking
/// the handler (a client holds one line at a time; one that asks again
/// does not get a second worker).
///
/// # Errors
/// A malformed frame or another op than an ask (protocol error); the
/// client gone.
pub(crate) fn answer_ask(
    session: &mut Session,
    lend: impl FnOnce(&LineAsk) -> Option<LineOffer>,
    send_timeout: Duration,
    m: &mut Message,
    lent: &mut Option<Arc<AtomicBool>>,
) -> Result<(), Error> {
    let (body, _) = frames::decode(session, m)?;
    if body.op != Op::Ask {
        let detail = format!("client sent a line {:?}; a client only asks", body.op);
        return Err(session.violation(detail));
    }
    let Link::Shm(l) = session.link() else {
        return Err(session.violation("line asked for on a session without shared memory".into()));
    };
    let layout = l.segment().layout();
    let ask = LineAsk {
        ring_c2s: layout.c2s_len as usize,
        ring_s2c: layout.s2c_len as usize,
        caller_max: session.peer_max(),
    };
    let out = lent.as_ref().is_some_and(|o| o.load(Ordering::Acquire));
    let offer = if out {
        None
    } else {
        catch_unwind(AssertUnwindSafe(|| lend(&ask))).unwrap_or(None)
    };
    let mut deadline = Deadline::In(send_timeout);
    match offer {
        Some(o) => {
            *lent = Some(Arc::clone(&o.out));
            let fds = [o.sock.as_fd(), o.memfd.as_fd()];
            frames::send(session, &o.grant, &fds, &mut deadline)
        }
        None => frames::send(session, &LineBody::of(Op::Deny, 0), &[], &mut deadline),
    }
}
