//! What serves requests.

use crate::error::RemoteError;

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
