//! What the front calls for each request.

use std::time::Duration;

/// Where requests go: the pool's dispatch, or anything that answers an
/// encoded request ([`wire::Request`](crate::wire::Request)) with an
/// encoded response ([`wire::Response`](crate::wire::Response)).
///
/// `call` runs on a thread of the front's callers, which may block for as
/// long as the call takes (the front's loops never wait for it); it is
/// called from several threads at once.
pub trait Backend: Send + Sync + 'static {
    /// Answers one encoded request into `response` (empty on entry).
    ///
    /// # Errors
    /// A [`Fault`]: the status the client gets and why (for the log).
    fn call(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), Fault>;

    /// How many calls it answers at once (the pool: its workers): the
    /// front makes its calls on that many threads; the other requests wait
    /// their turn in its queue.
    fn concurrency(&self) -> usize;

    /// How long a request may wait for its turn; past it the front answers
    /// 503.
    fn queue_timeout(&self) -> Duration;
}

/// A request the backend could not answer: the HTTP status the client gets
/// (502 a worker died, 503 no worker in time, 504 a worker too slow, 500
/// the worker's own error) and the reason, logged (not sent: it may name
/// processes and paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The status sent.
    pub status: u16,
    /// Why, for the pool's log.
    pub reason: String,
}

impl Fault {
    /// A fault with a status and a reason.
    pub fn new(status: u16, reason: impl Into<String>) -> Fault {
        Fault {
            status,
            reason: reason.into(),
        }
    }
}
