//! A worker: a process that connects to its supervisor (a
//! [`WorkerPort`](crate::WorkerPort), e.g. `shmlink pool`) and answers the
//! calls the supervisor hands it, on the calling thread, waiting on its ring
//! directly: one call costs what a client's call costs, with no thread
//! hand-off.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use super::frames;
use super::line::{self, End};
use crate::address::Address;
use crate::callee::{panic_text, reply, Limits};
use crate::connect::{self, Role};
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError, Result};
use crate::link::Link;
use crate::message::Message;
use crate::options::{ClientOptions, WaitStrategy};
use crate::session::Session;
use shmlink_wire::codes::{CODE_HANDLER_PANICKED, CODE_NOT_ANSWERED};
use shmlink_wire::frame::Kind;
use shmlink_wire::line::{LineBody, Op};

/// The environment variable a supervisor sets to the address its workers
/// connect to.
pub const WORKER_ENV: &str = "SHMLINK_WORKER";

/// The environment variable a supervisor sets to how its workers wait for
/// their next call (`sleep`, `spin`, `spin:MICROS` or `busy`, as
/// [`WaitStrategy`](crate::WaitStrategy) parses it). When set, it is the
/// worker's wait strategy whatever its options say: the supervisor knows
/// which CPUs its workers share with it (on two CPUs, a worker spinning
/// while idle holds the CPU its supervisor needs to hand it the next call).
pub const WORKER_WAIT_ENV: &str = "SHMLINK_WORKER_WAIT";

/// What [`Worker::try_accept`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled<'a> {
    /// A call's request: answer it with [`Worker::respond`] or
    /// [`Worker::fail`].
    Call(&'a [u8]),
    /// The supervisor told this worker to stop.
    Stop,
    /// Nothing yet.
    Nothing,
}

/// The answering end of a session with a supervisor. Not thread-safe by
/// design (`&mut self`), like [`Client`](crate::Client).
///
/// # Examples
/// ```no_run
/// let mut w = shmlink::Worker::from_env(Default::default())?;
/// w.run(|request: &[u8], response: &mut Vec<u8>| {
///     response.extend_from_slice(request);
///     Ok(())
/// })?;
/// // `run` returned: the supervisor told this worker to stop.
/// # Ok::<(), shmlink::Error>(())
/// ```
#[derive(Debug)]
pub struct Worker {
    session: Session,
    address: Address,
    /// The direct line this worker serves, when its supervisor lent it to a
    /// caller (`super::line`).
    line: Option<Line>,
    /// How a line waits for its caller's next call: the options' strategy
    /// (a line's caller has the worker to itself; the supervisor's CPU
    /// advice in `SHMLINK_WORKER_WAIT` is for calls it relays).
    line_wait: WaitStrategy,
    /// The call accepted and not answered yet, and whether it came on the
    /// line.
    pending: Option<(u64, bool)>,
    /// The body of the call accepted last (recycled between calls).
    request: Vec<u8>,
    /// Room for an error body.
    scratch: Vec<u8>,
    /// How long an answer may wait for room in the ring.
    send_timeout: Duration,
}

impl Worker {
    /// Connects to the supervisor at `address`;
    /// [`WORKER_WAIT_ENV`], when set, replaces `options.wait`.
    ///
    /// # Errors
    /// Invalid address, options or `SHMLINK_WORKER_WAIT`, connection failures, refusals, an
    /// address that does not take workers.
    pub fn connect(address: &str, mut options: ClientOptions) -> Result<Worker> {
        let address: Address = address.parse()?;
        let line_wait = options.wait;
        if let Ok(wait) = std::env::var(WORKER_WAIT_ENV) {
            // The strategy's own parse error, named for the variable.
            options.wait = wait.parse().map_err(|e| match e {
                Error::InvalidOption { reason, .. } => Error::InvalidOption {
                    name: "SHMLINK_WORKER_WAIT",
                    reason,
                },
                other => other,
            })?;
        }
        options.validate()?;
        let session = connect::connect(&address, &options, Role::Worker)?;
        Ok(Worker {
            session,
            address,
            line: None,
            line_wait,
            pending: None,
            request: Vec::new(),
            scratch: Vec::new(),
            send_timeout: options.timeout,
        })
    }

    /// Connects to the supervisor whose address is in `SHMLINK_WORKER`.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] when the variable is not set; as
    /// [`Worker::connect`].
    pub fn from_env(options: ClientOptions) -> Result<Worker> {
        let address = std::env::var(WORKER_ENV).map_err(|_| Error::InvalidOption {
            name: "SHMLINK_WORKER",
            reason: "not set: a worker is started by its supervisor (shmlink pool), \
                     or given an address"
                .into(),
        })?;
        Self::connect(&address, options)
    }

    /// The supervisor's address.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Waits for the next call and returns its request; `None` when the
    /// supervisor told this worker to stop (recycling, reload, shutdown).
    /// A call accepted earlier and not answered is answered first with
    /// error [`CODE_NOT_ANSWERED`].
    ///
    /// # Errors
    /// The supervisor died ([`Error::PeerGone`]) or broke the protocol.
    pub fn accept(&mut self) -> Result<Option<&[u8]>> {
        if self.pending.is_some() {
            self.fail(
                CODE_NOT_ANSWERED,
                "the worker took its next call without answering this one",
            )?;
        }
        let Some((m, on_line)) = self.next_call()? else {
            return Ok(None);
        };
        let recycled = std::mem::replace(&mut self.request, m.body);
        match &mut self.line {
            Some(l) if on_line => l.session.recycle(recycled),
            _ => self.session.recycle(recycled),
        }
        self.pending = Some((m.id, on_line));
        Ok(Some(&self.request))
    }

    /// The request of the call accepted last and not answered yet.
    pub fn request(&self) -> Option<&[u8]> {
        self.pending.map(|_| self.request.as_slice())
    }

    /// Takes the next call if one is there, without waiting: for a worker
    /// whose loop waits elsewhere (on its HTTP connections) and looks here
    /// when [`Worker::supervisor_socket`] becomes readable. A call accepted
    /// earlier and not answered is answered first, as by [`Worker::accept`].
    ///
    /// # Errors
    /// As [`Worker::accept`]: the supervisor died or broke the protocol.
    pub fn try_accept(&mut self) -> Result<Polled<'_>> {
        if self.line.is_none() && !self.session.ready_now() && self.session.is_usable() {
            return Ok(Polled::Nothing);
        }
        Ok(match self.accept()? {
            Some(request) => Polled::Call(request),
            None => Polled::Stop,
        })
    }

    /// A duplicate of the socket of this worker's session: it becomes
    /// readable when the supervisor hangs up (after its goodbye, or dying),
    /// and on a `unix:`/`tcp:` session also when a call comes. For a loop
    /// that waits on other descriptors too ([`Worker::try_accept`]).
    ///
    /// # Errors
    /// The descriptor cannot be duplicated (the process is out of them).
    pub fn supervisor_socket(&self) -> Result<std::os::fd::OwnedFd> {
        let sock = self
            .session
            .link()
            .control_socket()
            .ok_or_else(|| Error::InvalidOption {
                name: "worker",
                reason: "this session has no socket of its own".into(),
            })?;
        sock.try_clone_to_owned().map_err(|e| Error::Io {
            context: format!(
                "duplicating the socket of the session with {}",
                self.address
            ),
            source: e,
        })
    }

    /// The next call, from the supervisor or the line (the supervisor's
    /// messages first); `None` when the supervisor said goodbye.
    fn next_call(&mut self) -> Result<Option<(Message, bool)>> {
        loop {
            if self.line.is_some() && !self.session.ready_now() {
                if let Some(m) = self.line_call()? {
                    return Ok(Some((m, true)));
                }
                continue;
            }
            let mut m = match self.session.recv(&mut Deadline::Never) {
                Ok(m) => m,
                Err(_) if self.session.ended_by_goodbye() => {
                    // Stopped (recycling, reload, shutdown): the line ends
                    // too; a call its caller sent meanwhile was not read.
                    if let Some(mut l) = self.line.take() {
                        l.session.say_goodbye();
                    }
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            match m.kind {
                Kind::Request => return Ok(Some((m, false))),
                Kind::Line => self.supervisor_line_frame(&mut m)?,
                k => {
                    let detail = format!(
                        "the supervisor sent a {k:?} frame; a worker receives only requests and line frames"
                    );
                    return Err(self.session.violation(detail));
                }
            }
        }
    }

    /// Waits on the line for its caller's next call; `None` when the
    /// supervisor wrote meanwhile, or the line ended (returned then).
    fn line_call(&mut self) -> Result<Option<Message>> {
        let Some(l) = self.line.as_mut() else {
            return Ok(None);
        };
        let outcome = match l.session.wait_readable(&mut Deadline::Never) {
            Ok(_) if self.session.ready_now() => return Ok(None),
            Ok(_) if !l.session.ready_now() => return Ok(None),
            Ok(_) => l.session.recv(&mut Deadline::Never),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(m) if m.kind == Kind::Request => {
                l.served += 1;
                Ok(Some(m))
            }
            Ok(m) => {
                let detail = format!(
                    "the caller sent a {:?} frame on a line; a line carries calls only",
                    m.kind
                );
                let _ = l.session.violation(detail);
                self.end_line()?;
                Ok(None)
            }
            // The caller left, died or broke the protocol: the line is over.
            Err(_) => {
                self.end_line()?;
                Ok(None)
            }
        }
    }

    /// A line frame from the supervisor: a grant to serve, or a revoke.
    fn supervisor_line_frame(&mut self, m: &mut Message) -> Result<()> {
        let (body, fds) = frames::decode(&mut self.session, m)?;
        match body.op {
            Op::Grant if self.line.is_none() => {
                let supervisor = match self.session.link() {
                    Link::Shm(l) => std::sync::Arc::clone(l.segment()),
                    Link::Stream(_) => {
                        return Err(self
                            .session
                            .violation("a line granted on a session without shared memory".into()))
                    }
                };
                let name = format!("line {} of {}", body.line, self.address);
                let own_max = self.session.local_max();
                match line::attach(
                    &body,
                    fds,
                    End::Worker(supervisor),
                    own_max,
                    self.line_wait,
                    name,
                ) {
                    Ok(session) => {
                        self.line = Some(Line {
                            id: body.line,
                            session,
                            served: 0,
                            allowed: u64::from(body.limit),
                        });
                        Ok(())
                    }
                    Err(e) => Err(self.session.violation(e.to_string())),
                }
            }
            Op::Grant => Err(self.session.violation(format!(
                "line {} granted while line {} is served",
                body.line,
                self.line.as_ref().map_or(0, |l| l.id)
            ))),
            // A revoke of a line already returned crossed our `Returned`.
            Op::Revoke if self.line.as_ref().is_some_and(|l| l.id == body.line) => self.end_line(),
            Op::Revoke => Ok(()),
            op => Err(self.session.violation(format!(
                "the supervisor sent a line {op:?}; a worker receives grants and revokes"
            ))),
        }
    }

    /// Closes the line (a goodbye on it, if it still stands) and tells the
    /// supervisor, with the calls it served.
    fn end_line(&mut self) -> Result<()> {
        let Some(mut l) = self.line.take() else {
            return Ok(());
        };
        l.session.say_goodbye();
        let returned = LineBody {
            value: l.served,
            ..LineBody::of(Op::Returned, l.id)
        };
        drop(l);
        let mut deadline = Deadline::In(self.send_timeout);
        frames::send(&mut self.session, &returned, &[], &mut deadline)
    }

    /// Answers the call accepted last with `response`.
    ///
    /// # Errors
    /// [`Error::NothingInFlight`] when no call is waiting for an answer;
    /// the supervisor gone; no room for the answer within the timeout.
    pub fn respond(&mut self, response: &[u8]) -> Result<()> {
        self.answer(Ok(response))
    }

    /// Answers the call accepted last with an error: the caller receives a
    /// remote error with `code` and `message`.
    ///
    /// # Errors
    /// As [`Worker::respond`].
    pub fn fail(&mut self, code: u32, message: &str) -> Result<()> {
        self.answer(Err(RemoteError::new(code, message)))
    }

    fn answer(&mut self, result: std::result::Result<&[u8], RemoteError>) -> Result<()> {
        let (id, on_line) = self.pending.take().ok_or_else(|| Error::NothingInFlight {
            address: self.address.to_string(),
        })?;
        let mut deadline = Deadline::In(self.send_timeout);
        let line = self.line.as_mut().filter(|_| on_line);
        let Some(l) = line else {
            let (kind, body) = reply(result, limits(&self.session), &mut self.scratch);
            return self.session.send(kind, id, body, &mut deadline);
        };
        let (kind, body) = reply(result, limits(&l.session), &mut self.scratch);
        // A caller gone meanwhile ends the line, not the worker.
        let sent = l.session.send(kind, id, body, &mut deadline);
        if sent.is_err() || (l.allowed > 0 && l.served >= l.allowed) {
            self.end_line()?;
        }
        Ok(())
    }

    /// Answers calls with `handler` until the supervisor tells this worker
    /// to stop; a handler's error reaches the caller as a remote error, a
    /// panic as [`CODE_HANDLER_PANICKED`], and the loop goes on.
    ///
    /// # Errors
    /// As [`Worker::accept`] and [`Worker::respond`].
    pub fn run<F>(&mut self, mut handler: F) -> Result<()>
    where
        F: FnMut(&[u8], &mut Vec<u8>) -> std::result::Result<(), RemoteError>,
    {
        let mut response = Vec::new();
        loop {
            let Some(request) = self.accept()? else {
                return Ok(());
            };
            response.clear();
            let result = catch_unwind(AssertUnwindSafe(|| handler(request, &mut response)))
                .unwrap_or_else(|p| {
                    Err(RemoteError::new(
                        CODE_HANDLER_PANICKED,
                        format!("handler panicked: {}", panic_text(&*p)),
                    ))
                });
            self.answer(result.map(|()| &response[..]))?;
        }
    }
}

fn limits(session: &Session) -> Limits<'static> {
    Limits {
        peer: session.peer_max(),
        own: session.local_max(),
        who: "this worker",
    }
}

/// A direct line this worker serves.
#[derive(Debug)]
struct Line {
    id: u64,
    session: Session,
    /// Calls taken on it.
    served: u64,
    /// Calls it may serve before it is returned (0: no limit).
    allowed: u64,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(l) = self.line.as_mut() {
            l.session.say_goodbye();
        }
        self.session.say_goodbye();
    }
}
