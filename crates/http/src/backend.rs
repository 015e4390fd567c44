//! What the front calls for each request.

use std::time::Duration;

/// Where requests go: the pool's dispatch, or anything that answers an
/// encoded request ([`wire::Request`](crate::wire::Request)) with an
/// encoded response ([`wire::Response`](crate::wire::Response)).
///
/// `call` runs on a runtime thread, which must not block for long (while it
/// does, no connection of the front is read: docs/design.md, "HTTP
/// front"): it may wait inline for a few hundred microseconds, and runs any
/// longer wait through `park` (`park(&mut || wait())`), which moves it off
/// the runtime thread. It is called from several threads at once.
pub trait Backend: Send + Sync + 'static {
    /// Answers one encoded request into `response` (empty on entry).
    ///
    /// # Errors
    /// A [`Fault`]: the status the client gets and why (for the log).
    fn call(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
        park: &mut dyn FnMut(&mut dyn FnMut()),
    ) -> Result<(), Fault>;

    /// How many calls it answers at once (the pool: its workers). The front
    /// lets no more than that many run at once: the others wait their turn
    /// without holding a thread, and a call that gets its turn finds the
    /// backend ready, without parking.
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
