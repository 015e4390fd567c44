//! What serves requests.

use std::os::fd::OwnedFd;

use super::answer::Answer;
use crate::error::RemoteError;
use crate::worker::{LineAsk, LineOffer};

/// Where [`Handler::handle_batch`] gives each answer, in the requests'
/// order: the response's bytes, or the error the caller receives.
pub type BatchAnswer<'a> = dyn FnMut(std::result::Result<&[u8], RemoteError>) + 'a;

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

    /// Handles a request that came with file descriptors (see
    /// [`crate::Client::call_with_fds`]); they are the handler's: those it
    /// does not keep are closed when `fds` is dropped. The default closes
    /// them all and calls [`Handler::handle`]. Called instead of
    /// [`Handler::handle`] for each request that came with descriptors.
    ///
    /// # Errors
    /// As [`Handler::handle`].
    fn handle_with_fds(
        &self,
        request: &[u8],
        fds: Vec<OwnedFd>,
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError> {
        drop(fds);
        self.handle(request, response)
    }

    /// Handles a request, writing the response through `answer`, which can
    /// also lend it from the session's arena ([`Answer::loan`]); `fds` are
    /// the descriptors that came with it (empty for most). The server calls
    /// it for requests that came with descriptors or lie in the client's
    /// arena, and for every request of a session that lends responses when
    /// [`Handler::answers_in_place`] says so; otherwise [`Handler::handle`]
    /// (the cheaper call). The default passes the request on to
    /// [`Handler::handle`] (or [`Handler::handle_with_fds`] when descriptors
    /// came) with the answer's ordinary buffer.
    ///
    /// # Errors
    /// As [`Handler::handle`].
    fn respond(
        &self,
        request: &[u8],
        fds: Vec<OwnedFd>,
        answer: &mut Answer<'_>,
    ) -> std::result::Result<(), RemoteError> {
        if fds.is_empty() {
            self.handle(request, answer.bytes())
        } else {
            self.handle_with_fds(request, fds, answer.bytes())
        }
    }

    /// Whether this handler writes responses through [`Handler::respond`]
    /// (so the server calls it for every request); a handler that overrides
    /// `respond` to write in place says `true`. Asked once per session.
    /// Default `false`.
    fn answers_in_place(&self) -> bool {
        false
    }

    /// How many requests a session hands this handler at once through
    /// [`Handler::handle_batch`] when its client sent them without waiting
    /// for answers (pipelined) and they are all there already. Asked once
    /// per session. Default 1: every request through [`Handler::handle`]
    /// (or [`Handler::respond`]) on its own, one after another.
    fn batch_limit(&self) -> usize {
        1
    }

    /// Handles requests that were waiting together (2 to
    /// [`Handler::batch_limit`] of them, none with descriptors or lent
    /// bytes), so that a handler able to work on several at once (the pool,
    /// which gives each to a worker of its own) can. It must call `answer`
    /// once per request, in their order, with the response or the error;
    /// each answer goes to the client as it is given. A request left
    /// unanswered when it returns (or panics) gets an error. The default
    /// answers each through [`Handler::handle`].
    fn handle_batch(&self, requests: &[&[u8]], answer: &mut BatchAnswer<'_>) {
        let mut response = Vec::new();
        for request in requests {
            response.clear();
            let result = self.handle(request, &mut response);
            answer(result.map(|()| response.as_slice()));
        }
    }

    /// Handles a one-way message (default: `handle`, response discarded).
    fn notify(&self, message: &[u8]) {
        let mut sink = Vec::new();
        let _ = self.handle(message, &mut sink);
    }

    /// A client asks for a direct line to a worker (a server with
    /// [`crate::ServerOptions::lines`], capability bit 7): the caller's end
    /// of a line made with [`crate::Client::lend_line`], or `None` to
    /// refuse (the client asks again later). Default `None`.
    fn line(&self, ask: &LineAsk) -> Option<LineOffer> {
        let _ = ask;
        None
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

/// A handler from a function that also takes the request's file
/// descriptors: `Server::bind(addr, opts, WithFds(|req, fds, resp| ...))`.
pub struct WithFds<F>(pub F);

impl<F> Handler for WithFds<F>
where
    F: Fn(&[u8], Vec<OwnedFd>, &mut Vec<u8>) -> std::result::Result<(), RemoteError>
        + Send
        + Sync
        + 'static,
{
    fn handle(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError> {
        (self.0)(request, Vec::new(), response)
    }

    fn handle_with_fds(
        &self,
        request: &[u8],
        fds: Vec<OwnedFd>,
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError> {
        (self.0)(request, fds, response)
    }
}

/// A handler from a function that writes its response through an
/// [`Answer`] (and so may write a large one in place in the session's
/// arena): `Server::bind(addr, opts, InPlace(|req, fds, answer| ...))`.
pub struct InPlace<F>(pub F);

impl<F> Handler for InPlace<F>
where
    F: Fn(&[u8], Vec<OwnedFd>, &mut Answer<'_>) -> std::result::Result<(), RemoteError>
        + Send
        + Sync
        + 'static,
{
    fn handle(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError> {
        let mut none = None;
        (self.0)(
            request,
            Vec::new(),
            &mut Answer::new(response, None, usize::MAX, &mut none),
        )
    }

    fn respond(
        &self,
        request: &[u8],
        fds: Vec<OwnedFd>,
        answer: &mut Answer<'_>,
    ) -> std::result::Result<(), RemoteError> {
        (self.0)(request, fds, answer)
    }

    fn answers_in_place(&self) -> bool {
        true
    }
}
