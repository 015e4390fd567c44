//! A client's direct line to a worker: asked for after a run of calls made
//! one at a time, used for such calls, and given up when the worker or the
//! supervisor ends it. A call the worker provably never read goes through
//! the server instead; one it read and never answered fails as it would
//! through the supervisor. `crate::client` makes its one-at-a-time calls
//! through [`DirectLine::call`] first.

use std::time::Duration;

use super::frames;
use super::line::{self, End};
use crate::address::Address;
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError, Result};
use crate::message::Message;
use crate::options::WaitStrategy;
use crate::session::Session;
use shmlink_wire::codes::{CODE_WORKER_DIED, CODE_WORKER_TIMEOUT};
use shmlink_wire::frame::Kind;
use shmlink_wire::line::{LineBody, Op};

/// Calls made through the server before the first ask.
const FIRST_ASK: u32 = 16;
/// The longest run of calls between asks after refusals.
const MOST_CALLS_BETWEEN_ASKS: u32 = 1 << 12;

/// The caller's end of a line.
#[derive(Debug)]
struct CallerLine {
    id: u64,
    session: Session,
    /// The supervisor's call timeout, when it has one.
    call_timeout: Option<Duration>,
}

/// When the next ask is due: after `every` calls through the server,
/// doubled by each refusal or lost line, back to [`FIRST_ASK`] on a grant.
#[derive(Debug)]
struct Asking {
    calls: u32,
    every: u32,
}

impl Default for Asking {
    fn default() -> Self {
        Asking {
            calls: 0,
            every: FIRST_ASK,
        }
    }
}

impl Asking {
    fn due(&mut self) -> bool {
        self.calls += 1;
        if self.calls < self.every {
            return false;
        }
        self.calls = 0;
        true
    }

    /// The next call asks (a line ended because its worker left, not
    /// because lines fail here); refusals then back off from there.
    fn ask_next(&mut self) {
        self.calls = 0;
        self.every = 1;
    }

    fn back_off(&mut self) {
        self.every = (self.every * 2).min(MOST_CALLS_BETWEEN_ASKS);
    }
}

/// A client's direct line: the line it was granted, while it stands, and
/// when it asks next.
#[derive(Debug, Default)]
pub(crate) struct DirectLine {
    line: Option<CallerLine>,
    asking: Asking,
}

impl DirectLine {
    /// Whether a line is open now.
    pub(crate) fn is_open(&self) -> bool {
        self.line.is_some()
    }

    /// Counts a call made through the server: whether an ask is due.
    pub(crate) fn ask_due(&mut self) -> bool {
        self.asking.due()
    }

    /// Asks the server for a line on `session`; the grant or refusal comes
    /// back as a line frame for [`DirectLine::take_frame`].
    ///
    /// # Errors
    /// As [`frames::send`].
    pub(crate) fn ask(session: &mut Session, deadline: &mut Deadline) -> Result<()> {
        frames::send(session, &LineBody::of(Op::Ask, 0), &[], deadline)
    }

    /// A call made over the line, if one is open, its answer in `answer`
    /// and its id taken from `next_id`; `None` when it goes through the
    /// server instead.
    #[inline]
    pub(crate) fn call(
        &mut self,
        request: &[u8],
        timeout: Duration,
        next_id: &mut u64,
        answer: &mut Message,
    ) -> Option<Result<()>> {
        let line = self.line.as_mut()?;
        // A request of one frame only: pushed whole or not at all, so a
        // failed send left nothing of it with the worker. Larger ones go
        // through the server (and its arena).
        if request.len() > line.session.link().max_single() {
            return None;
        }
        let id = *next_id;
        *next_id += 1;
        let (limit, pools) = match line.call_timeout {
            Some(t) if t < timeout => (t, true),
            _ => (timeout, false),
        };
        let mut deadline = Deadline::In(limit);
        if let Err(e) = line.session.send(Kind::Request, id, request, &mut deadline) {
            if e.is_fatal() {
                // The worker left the line (revoked for a reload, recycled)
                // before this call: another worker may be ready at once.
                self.close();
                self.asking.ask_next();
            }
            return None;
        }
        let outcome = line.session.recv_into(&mut deadline, answer);
        let answered = matches!(answer.kind, Kind::Response | Kind::Error);
        match outcome {
            Ok(()) if answer.id == id && answered => Some(Ok(())),
            Ok(()) => {
                let detail = format!(
                    "line {}: the worker sent a {:?} frame for call {} while call {id} was made",
                    line.id, answer.kind, answer.id
                );
                let e = line.session.violation(detail);
                self.lose();
                Some(Err(e))
            }
            Err(e) => {
                let (unread, line_id) = (line.session.sent_unread(), line.id);
                if unread {
                    // The worker left first (revoked, recycled) or died idle:
                    // ask for another line at the next call.
                    self.close();
                    self.asking.ask_next();
                } else {
                    self.lose();
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
    fn lose(&mut self) {
        self.close();
        self.asking.back_off();
    }

    /// A line frame from the server on `session` (with `server`): a grant
    /// opens the line (unless one is open: its descriptors close, which the
    /// worker takes as the caller gone), a refusal backs off. `Some(())`
    /// for a grant taken.
    ///
    /// # Errors
    /// A protocol error for a malformed frame or grant, or another op.
    pub(crate) fn take_frame(
        &mut self,
        session: &mut Session,
        server: &Address,
        wait: WaitStrategy,
        mut m: Message,
    ) -> Result<Option<()>> {
        let (body, fds) = frames::decode(session, &mut m)?;
        match body.op {
            Op::Grant if self.line.is_none() => {
                let name = format!("line {} of {server}", body.line);
                let own_max = session.local_max();
                let line_session = line::attach(&body, fds, End::Caller, own_max, wait, name)
                    .map_err(|e| session.violation(e.to_string()))?;
                self.line = Some(CallerLine {
                    id: body.line,
                    session: line_session,
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
            op => Err(session.violation(format!(
                "the server sent a line {op:?}; a caller receives grants and refusals"
            ))),
        }
    }

    /// Says goodbye on the line, if one is open (the client is closing).
    pub(crate) fn close(&mut self) {
        if let Some(mut l) = self.line.take() {
            l.session.say_goodbye();
        }
    }
}
