//! A worker: a process that connects to its supervisor (a
//! [`WorkerPort`](crate::WorkerPort), e.g. `shmlink pool`) and answers the
//! calls the supervisor hands it, on the calling thread, waiting on its ring
//! directly: one call costs what a client's call costs, with no thread
//! hand-off.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::address::Address;
use crate::callee::{panic_text, reply, Limits};
use crate::connect::{self, Role};
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError, Result};
use crate::frame::{Kind, CODE_HANDLER_PANICKED};
use crate::options::ClientOptions;
use crate::session::Session;

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

/// Remote error code a caller receives when a worker took its next call
/// without answering this one, or when a server's handler given several
/// pipelined calls at once ([`crate::Handler::handle_batch`]) returned
/// without answering this one.
pub const CODE_NOT_ANSWERED: u32 = 0xFFFF_0006;

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
    /// The call accepted and not answered yet.
    pending: Option<u64>,
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
        let m = match self.session.recv(&mut Deadline::Never) {
            Ok(m) => m,
            Err(_) if self.session.ended_by_goodbye() => return Ok(None),
            Err(e) => return Err(e),
        };
        if m.kind != Kind::Request {
            let detail = format!(
                "the supervisor sent a {:?} frame; a worker receives only requests",
                m.kind
            );
            return Err(self.session.violation(detail));
        }
        self.session
            .recycle(std::mem::replace(&mut self.request, m.body));
        self.pending = Some(m.id);
        Ok(Some(&self.request))
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
        let id = self.pending.take().ok_or_else(|| Error::NothingInFlight {
            address: self.address.to_string(),
        })?;
        let limits = Limits {
            peer: self.session.peer_max(),
            own: self.session.local_max(),
            who: "this worker",
        };
        let (kind, body) = reply(result, limits, &mut self.scratch);
        let mut deadline = Deadline::In(self.send_timeout);
        self.session.send(kind, id, body, &mut deadline)
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

impl Drop for Worker {
    fn drop(&mut self) {
        self.session.say_goodbye();
    }
}
