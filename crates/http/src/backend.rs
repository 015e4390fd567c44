//! What the front calls for each request.

/// Where requests go: the pool's dispatch, or anything that answers an
/// encoded request ([`wire::Request`](crate::wire::Request)) with an
/// encoded response ([`wire::Response`](crate::wire::Response)).
///
/// `call` blocks (the front runs it where blocking is allowed); it is
/// called from several threads at once.
pub trait Backend: Send + Sync + 'static {
    /// Answers one encoded request into `response` (empty on entry).
    ///
    /// # Errors
    /// A [`Fault`]: the status the client gets and why (for the log).
    fn call(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), Fault>;
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
