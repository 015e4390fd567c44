//! A client's direct line to a worker (capability bit 7, `crate::line`):
//! asked for after a run of calls made one at a time, used for such calls,
//! and given up when the worker or the supervisor ends it. A call the
//! worker provably never read goes through the server instead; one it read
//! and never answered fails as it would through the supervisor.

use std::time::Duration;

use super::Client;
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError, Result};
use crate::line::caller::{Asking, CallerLine};
use crate::line::{self, End};
use crate::message::Message;
use shmlink_wire::codes::{CODE_WORKER_DIED, CODE_WORKER_TIMEOUT};
use shmlink_wire::frame::Kind;
use shmlink_wire::line::{LineBody, Op};

impl Client {
    /// A call made over the line (asked for first when due), its answer in
    /// `self.answer`; `None` when it goes through the server instead.
    #[inline(never)]
    pub(super) fn exchange_on_line(
        &mut self,
        request: &[u8],
        timeout: Duration,
    ) -> Option<Result<()>> {
        if self.line.is_none() {
            if !self.asking.due() {
                return None;
            }
            self.ask_for_line(timeout);
        }
        let line = self.line.as_mut()?;
        // A request of one frame only: pushed whole or not at all, so a
        // failed send left nothing of it with the worker. Larger ones go
        // through the server (and its arena).
        if request.len() > line.session.link().max_single() {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        let (limit, pools) = match line.call_timeout {
            Some(t) if t < timeout => (t, true),
            _ => (timeout, false),
        };
        let mut deadline = Deadline::In(limit);
        if let Err(e) = line.session.send(Kind::Request, id, request, &mut deadline) {
            if e.is_fatal() {
                // The worker left the line (revoked for a reload, recycled)
                // before this call: another worker may be ready at once.
                self.close_line();
                self.asking.ask_next();
            }
            return None;
        }
        let outcome = line.session.recv_into(&mut deadline, &mut self.answer);
        let answered = matches!(self.answer.kind, Kind::Response | Kind::Error);
        match outcome {
            Ok(()) if self.answer.id == id && answered => Some(Ok(())),
            Ok(()) => {
                let detail = format!(
                    "line {}: the worker sent a {:?} frame for call {} while call {id} was made",
                    line.id, self.answer.kind, self.answer.id
                );
                let e = line.session.violation(detail);
                self.lose_line();
                Some(Err(e))
            }
            Err(e) => {
                let (unread, line_id) = (line.session.sent_unread(), line.id);
                if unread {
                    // The worker left first (revoked, recycled) or died idle:
                    // ask for another line at the next call.
                    self.close_line();
                    self.asking.ask_next();
                } else {
                    self.lose_line();
                }
                match e {
                    Error::Timeout { .. } if pools => Some(Err(Error::Remote(RemoteError::new(
                        CODE_WORKER_TIMEOUT,
                        format!(
                            "the worker did not answer within the pool's call timeout of {limit:?} (line {line_id})"
                        ),
                    )))),
                    Error::Timeout { .. } => Some(Err(e)),
                    // Never read: the worker left the line first (revoked,
                    // recycled) or died idle. Through the server, then.
                    _ if unread => None,
                    _ => Some(Err(Error::Remote(RemoteError::new(
                        CODE_WORKER_DIED,
                        format!("the worker on direct line {line_id} died during the call: {e}"),
                    )))),
                }
            }
        }
    }

    /// Drops the line (its socket closes: the worker returns it) and asks
    /// again later than before.
    fn lose_line(&mut self) {
        self.close_line();
        self.asking.back_off();
    }

    /// Asks the server for a line and waits for the answer (filing
    /// responses of earlier calls on the way). Errors are left for the
    /// call that follows to meet.
    fn ask_for_line(&mut self, timeout: Duration) {
        let mut deadline = Deadline::In(timeout);
        let ask = LineBody::of(Op::Ask, 0);
        if self.session.send_line(&ask, &[], &mut deadline).is_err() {
            return;
        }
        while self.line.is_none() {
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

    /// A line frame from the server: a grant opens the line (unless one is
    /// open: its descriptors close, which the worker takes as the caller
    /// gone), a refusal backs off. `Some(())` for a grant taken.
    ///
    /// # Errors
    /// A protocol error for a malformed frame or grant, or another op.
    pub(super) fn take_line_frame(&mut self, mut m: Message) -> Result<Option<()>> {
        let (body, fds) = self.session.line_body(&mut m)?;
        match body.op {
            Op::Grant if self.line.is_none() => {
                let name = format!("line {} of {}", body.line, self.address);
                let own_max = self.session.local_max();
                let session =
                    line::attach(&body, fds, End::Caller, own_max, self.options.wait, name)
                        .map_err(|e| self.session.violation(e.to_string()))?;
                self.line = Some(CallerLine {
                    id: body.line,
                    session,
                    call_timeout: (body.limit > 0)
                        .then(|| Duration::from_millis(u64::from(body.limit))),
                });
                self.asking = Asking::default();
                Ok(Some(()))
            }
            Op::Grant => Ok(None),
            Op::Deny => {
                self.asking.back_off();
                Ok(None)
            }
            op => Err(self.session.violation(format!(
                "the server sent a line {op:?}; a caller receives grants and refusals"
            ))),
        }
    }

    /// Says goodbye on the line, if one is open (the client is closing).
    pub(super) fn close_line(&mut self) {
        if let Some(mut l) = self.line.take() {
            l.session.say_goodbye();
        }
    }
}
