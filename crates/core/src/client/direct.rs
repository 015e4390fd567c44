//! The client's doors into the worker wing (`crate::worker`): its own
//! direct line to a worker (asked for, taken, used for calls made one at a
//! time), and, on a supervisor's session with a worker, the lines it lends.

use std::time::Duration;

use super::Client;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::message::Message;
use crate::worker::caller::DirectLine;
use crate::worker::grant;
use crate::worker::{LineAsk, LineHold, LineOffer};
use shmlink_wire::frame::Kind;

impl Client {
    /// A call made over the line (asked for first when due), its answer in
    /// `self.answer`; `None` when it goes through the server instead.
    #[inline(never)]
    pub(super) fn exchange_on_line(
        &mut self,
        request: &[u8],
        timeout: Duration,
    ) -> Option<Result<()>> {
        if !self.direct.is_open() {
            if !self.direct.ask_due() {
                return None;
            }
            self.ask_for_line(timeout);
        }
        self.direct
            .call(request, timeout, &mut self.next_id, &mut self.answer)
    }

    /// Asks the server for a line and waits for the answer (filing
    /// responses of earlier calls on the way). Errors are left for the
    /// call that follows to meet.
    fn ask_for_line(&mut self, timeout: Duration) {
        let mut deadline = Deadline::In(timeout);
        if DirectLine::ask(&mut self.session, &mut deadline).is_err() {
            return;
        }
        while !self.direct.is_open() {
            let m = match self.session.recv(&mut deadline) {
                Ok(m) => m,
                Err(_) => return,
            };
            if m.kind == Kind::Line {
                if !matches!(self.take_line_frame(m), Ok(Some(()))) {
                    return;
                }
                continue;
            }
            match self.accept(m) {
                Ok(Some(reply)) => self.ready.push_back(reply),
                Ok(None) => {}
                Err(_) => return,
            }
        }
    }

    /// A line frame from the server: a grant or a refusal
    /// ([`DirectLine::take_frame`]).
    ///
    /// # Errors
    /// A protocol error for a malformed frame or grant, or another op.
    pub(super) fn take_line_frame(&mut self, m: Message) -> Result<Option<()>> {
        let wait = self.options.wait;
        self.direct
            .take_frame(&mut self.session, &self.address, wait, m)
    }

    /// Whether this worker serves direct lines (it agreed to capability bit
    /// 7 on its session with a [`crate::WorkerPort`]).
    pub fn serves_lines(&self) -> bool {
        grant::serves_lines(&self.session)
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
    /// [`crate::Error::NotAgreed`] when the worker does not serve lines;
    /// the kernel refusing the segment or socket pair; the worker gone.
    pub fn lend_line(
        &mut self,
        ask: &LineAsk,
        calls_allowed: u32,
        call_timeout: Option<Duration>,
    ) -> Result<(LineOffer, LineHold)> {
        let timeout = self.options.timeout;
        let (session, worker) = (&mut self.session, &self.address);
        grant::lend(session, worker, timeout, ask, calls_allowed, call_timeout)
    }

    /// Tells the worker to give `hold`'s line back after the call in hand,
    /// and wakes it if it sleeps on the line. The client it was lent to may
    /// be lent another line from now on (its session no longer refuses it).
    ///
    /// # Errors
    /// The worker gone, or no room within the timeout.
    pub fn revoke_line(&mut self, hold: &LineHold) -> Result<()> {
        grant::revoke(&mut self.session, self.options.timeout, hold)
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
        grant::returned(&mut self.session, hold, deadline)
    }
}
