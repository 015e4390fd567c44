//! The supervisor's side of direct lines, on its session with a worker
//! (from a [`crate::WorkerPort`]): a line made and granted to the worker,
//! revoked, and its return awaited. [`crate::Client`]'s `lend_line`,
//! `revoke_line` and `line_returned` call these with its session.

use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::frames;
use super::line::{self, LineAsk, LineHold, LineOffer};
use crate::address::Address;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::session::Session;
use shmlink_wire::frame::Kind;
use shmlink_wire::handshake::{CAP_LINES, CAP_SERVE};
use shmlink_wire::line::{LineBody, Op};

/// Whether the worker on `session` serves direct lines (it agreed to
/// capability bit 7 on its session with a worker port).
pub(crate) fn serves_lines(session: &Session) -> bool {
    session.agreed(CAP_SERVE) && session.agreed(CAP_LINES)
}

/// Makes a line for the caller that asked, grants the worker on `session`
/// its end, and returns the caller's end and the hold (see
/// [`crate::Client::lend_line`]); `timeout` bounds the grant's sending.
///
/// # Errors
/// As [`crate::Client::lend_line`].
pub(crate) fn lend(
    session: &mut Session,
    worker: &Address,
    timeout: Duration,
    ask: &LineAsk,
    calls_allowed: u32,
    call_timeout: Option<Duration>,
) -> Result<(LineOffer, LineHold)> {
    if !serves_lines(session) {
        return Err(Error::NotAgreed {
            address: worker.to_string(),
            capability: "direct lines (capability bit 7): the worker does not serve them",
        });
    }
    let made = line::make(ask.ring_c2s, ask.ring_s2c)
        .map_err(|e| Error::io("making a direct line's segment and socket pair", e))?;
    let id = line::next_id();
    let grant = |value: usize, limit: u32| LineBody {
        ring_c2s: ask.ring_c2s as u32,
        ring_s2c: ask.ring_s2c as u32,
        value: value as u64,
        limit,
        ..LineBody::of(Op::Grant, id)
    };
    let to_worker = grant(ask.caller_max, calls_allowed);
    let fds = [made.worker_end.as_fd(), made.memfd.as_fd()];
    let mut deadline = Deadline::In(timeout);
    frames::send(session, &to_worker, &fds, &mut deadline)?;
    let ms = call_timeout.map_or(0, |t| {
        u32::try_from(t.as_millis().max(1)).unwrap_or(u32::MAX)
    });
    let out = Arc::new(AtomicBool::new(true));
    let offer = LineOffer {
        grant: grant(session.peer_max(), ms),
        sock: made.caller_end,
        memfd: made.memfd,
        out: Arc::clone(&out),
    };
    let hold = LineHold {
        id,
        segment: made.segment,
        out,
    };
    Ok((offer, hold))
}

/// Tells the worker on `session` to give `hold`'s line back after the call
/// in hand, and wakes it if it sleeps on the line. From then on the client
/// it was lent to may be lent another: the line ends after one call at
/// most (or its worker is killed at the call timeout), and the client,
/// which asks again as soon as it finds the line closed, would otherwise
/// be refused until the supervisor reads the worker's `Returned`.
///
/// # Errors
/// The worker gone, or no room within `timeout`.
pub(crate) fn revoke(session: &mut Session, timeout: Duration, hold: &LineHold) -> Result<()> {
    let mut deadline = Deadline::In(timeout);
    frames::send(
        session,
        &LineBody::of(Op::Revoke, hold.id),
        &[],
        &mut deadline,
    )?;
    hold.release();
    hold.wake();
    Ok(())
}

/// Waits until `deadline` for the worker on `session` to give `hold`'s line
/// back: `Some(calls served on it)`, or `None` when the deadline passed
/// first.
///
/// # Errors
/// The worker gone or broke the protocol (anything but its `Returned` of
/// this line came).
pub(crate) fn returned(
    session: &mut Session,
    hold: &LineHold,
    deadline: &mut Deadline,
) -> Result<Option<u64>> {
    if !session.wait_readable(deadline)? {
        return Ok(None);
    }
    let mut m = session.recv(deadline)?;
    if m.kind != Kind::Line {
        let detail = format!(
            "the worker sent a {:?} frame while it served line {}",
            m.kind, hold.id
        );
        return Err(session.violation(detail));
    }
    let (body, _) = frames::decode(session, &mut m)?;
    if body.op != Op::Returned || body.line != hold.id {
        let detail = format!(
            "the worker sent line {:?} of line {} while it served line {}",
            body.op, body.line, hold.id
        );
        return Err(session.violation(detail));
    }
    Ok(Some(body.value))
}
