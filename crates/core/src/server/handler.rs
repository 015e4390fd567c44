//! What serves requests, and the error codes the server itself sends.

use crate::error::RemoteError;

/// Remote error code the server sends when a handler panicked.
pub const CODE_HANDLER_PANICKED: u32 = 0xFFFF_0001;
/// Remote error code the server sends when a response exceeds the client's limit.
pub const CODE_RESPONSE_TOO_LARGE: u32 = 0xFFFF_0002;

/// What serves requests: a function from request bytes to response bytes (or
/// an error the caller receives as [`Error::Remote`](crate::Error::Remote)).
/// Called from one thread per session, so it must be `Sync`.
pub trait Handler: Send + Sync + 'static {
    /// Handles a request by writing the response into `response` (empty on entry).
    ///
    /// # Errors
    /// A [`RemoteError`] is sent to the caller instead of a response.
    fn handle(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError>;

    /// Handles a one-way message (default: `handle`, response discarded).
    fn notify(&self, message: &[u8]) {
        let mut sink = Vec::new();
        let _ = self.handle(message, &mut sink);
    }
}

impl<F> Handler for F
where
    F: Fn(&[u8], &mut Vec<u8>) -> std::result::Result<(), RemoteError> + Send + Sync + 'static,
{
    fn handle(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError> {
        self(request, response)
    }
}
