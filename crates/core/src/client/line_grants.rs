//! The supervisor's side of direct lines (`crate::line`), on its session
//! with a worker (from a [`crate::WorkerPort`]): a line made and granted to
//! the worker, revoked, and its return awaited.

use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::Client;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::line::{self, LineAsk, LineHold, LineOffer};
use shmlink_wire::frame::Kind;
use shmlink_wire::handshake::{CAP_LINES, CAP_SERVE};
use shmlink_wire::line::{LineBody, Op};

impl Client {
    /// Whether this worker serves direct lines (it agreed to capability bit
    /// 7 on its session with a [`crate::WorkerPort`]).
    pub fn serves_lines(&self) -> bool {
        self.session.agreed(CAP_SERVE) && self.session.agreed(CAP_LINES)
    }

    /// Makes a direct line for the caller that asked (`ask`), and grants
    /// this worker its end: the worker serves the line's calls until the
    /// caller leaves, `calls_allowed` calls are served (0: no limit) or the
    /// line is revoked, then gives it back ([`Client::line_returned`]).
    /// Returns the caller's end, for [`crate::Handler::line`], and the hold
    /// to revoke it with. The caller learns `call_timeout` (it fails a call
    /// on the line not answered within it with
    /// [`crate::CODE_WORKER_TIMEOUT`]).
    ///
    /// # Errors
    /// [`Error::NotAgreed`] when the worker does not serve lines; the kernel
    /// refusing the segment or socket pair; the worker gone.
    pub fn lend_line(
        &mut self,
        ask: &LineAsk,
        calls_allowed: u32,
        call_timeout: Option<Duration>,
    ) -> Result<(LineOffer, LineHold)> {
        if !self.serves_lines() {
            return Err(Error::NotAgreed {
                address: self.address.to_string(),
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
        let mut deadline = Deadline::In(self.options.timeout);
        self.session.send_line(&to_worker, &fds, &mut deadline)?;
        let ms = call_timeout.map_or(0, |t| {
            u32::try_from(t.as_millis().max(1)).unwrap_or(u32::MAX)
        });
        let out = Arc::new(AtomicBool::new(true));
        let offer = LineOffer {
            grant: grant(self.session.peer_max(), ms),
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

    /// Tells the worker to give `hold`'s line back after the call in hand,
    /// and wakes it if it sleeps on the line.
    ///
    /// # Errors
    /// The worker gone, or no room within the timeout.
    pub fn revoke_line(&mut self, hold: &LineHold) -> Result<()> {
        let mut deadline = Deadline::In(self.options.timeout);
        self.session
            .send_line(&LineBody::of(Op::Revoke, hold.id), &[], &mut deadline)?;
        hold.wake();
        Ok(())
    }

    /// Waits until `deadline` for the worker to give `hold`'s line back:
    /// `Some(calls served on it)`, or `None` when the deadline passed first.
    ///
    /// # Errors
    /// The worker gone or broke the protocol (anything but its `Returned`
    /// of this line came).
    pub fn line_returned(
        &mut self,
        hold: &LineHold,
        deadline: &mut Deadline,
    ) -> Result<Option<u64>> {
        if !self.session.wait_readable(deadline)? {
            return Ok(None);
        }
        let mut m = self.session.recv(deadline)?;
        if m.kind != Kind::Line {
            let detail = format!(
                "the worker sent a {:?} frame while it served line {}",
                m.kind, hold.id
            );
            return Err(self.session.violation(detail));
        }
        let (body, _) = self.session.line_body(&mut m)?;
        if body.op != Op::Returned || body.line != hold.id {
            let detail = format!(
                "the worker sent line {:?} of line {} while it served line {}",
                body.op, body.line, hold.id
            );
            return Err(self.session.violation(detail));
        }
        Ok(Some(body.value))
    }
}
