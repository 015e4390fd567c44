//! A session's ask for a direct line (capability bit 7, `crate::line`):
//! the handler lends one or refuses, and the session sends its answer.

use std::os::fd::AsFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::handler::Handler;
use super::shared::Shared;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::line::LineAsk;
use crate::link::Link;
use crate::message::Message;
use crate::session::Session;
use shmlink_wire::line::{LineBody, Op};

/// Answers a client's line frame: a grant with its descriptors, or a
/// refusal (a panicking handler refuses). `lent` is the line this session
/// was last granted: while it is out, another ask is refused without asking
/// the handler (a client holds one line at a time; one that asks again
/// does not get a second worker).
///
/// # Errors
/// A malformed frame or another op than an ask (protocol error); the
/// client gone.
pub(super) fn answer_ask(
    shared: &Shared,
    session: &mut Session,
    handler: &dyn Handler,
    m: &mut Message,
    lent: &mut Option<Arc<AtomicBool>>,
) -> Result<(), Error> {
    let (body, _) = session.line_body(m)?;
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
        catch_unwind(AssertUnwindSafe(|| handler.line(&ask))).unwrap_or(None)
    };
    let mut deadline = Deadline::In(shared.opts.send_timeout);
    match offer {
        Some(o) => {
            *lent = Some(Arc::clone(&o.out));
            let fds = [o.sock.as_fd(), o.memfd.as_fd()];
            session.send_line(&o.grant, &fds, &mut deadline)
        }
        None => session.send_line(&LineBody::of(Op::Deny, 0), &[], &mut deadline),
    }
}
