//! An async handler on a tokio runtime behind a [`Server`].
//!
//! The server stays the core's: its session threads take requests off the
//! rings (or sockets) and write answers, as for any handler; each request's
//! `async fn` runs as a task on the runtime given (so it may await I/O,
//! timers, other sessions' calls), and its session thread waits for that
//! task's answer. Requests of one session are handled one at a time (its
//! answers keep their order); sessions run concurrently.

use std::future::Future;
use std::sync::{mpsc, Arc};

use ::tokio::runtime::Handle;

use crate::error::RemoteError;
use crate::error::Result;
use crate::server::{Handler, RunningServer, Server};

/// A handler whose work is an `async fn(Vec<u8>) -> Result<Vec<u8>,
/// RemoteError>` run on `runtime`.
pub struct AsyncHandler<F> {
    runtime: Handle,
    handler: Arc<F>,
}

impl<F, Fut> AsyncHandler<F>
where
    F: Fn(Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<Vec<u8>, RemoteError>> + Send + 'static,
{
    /// `handler` run on `runtime` for each request.
    pub fn new(runtime: Handle, handler: F) -> Self {
        AsyncHandler {
            runtime,
            handler: Arc::new(handler),
        }
    }
}

impl<F, Fut> Handler for AsyncHandler<F>
where
    F: Fn(Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<Vec<u8>, RemoteError>> + Send + 'static,
{
    fn handle(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let fut = (self.handler)(request.to_vec());
        self.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        match rx.recv() {
            Ok(Ok(bytes)) => {
                *response = bytes;
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            // The task was dropped unfinished: its runtime is shutting down,
            // or the handler panicked.
            Err(_) => Err(RemoteError::new(
                shmlink_wire::codes::CODE_HANDLER_PANICKED,
                "the async handler's task ended without an answer (it panicked, or its runtime shut down)",
            )),
        }
    }
}

/// Binds `addresses` with default options and serves `handler` (an `async
/// fn(Vec<u8>) -> Result<Vec<u8>, RemoteError>`) on the current tokio
/// runtime until the returned server is stopped or dropped.
///
/// # Errors
/// As [`Server::bind`] and [`Server::spawn`]. Panics outside a runtime.
pub fn serve<F, Fut>(addresses: &[&str], handler: F) -> Result<RunningServer>
where
    F: Fn(Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<Vec<u8>, RemoteError>> + Send + 'static,
{
    Server::bind(addresses, Default::default())?
        .spawn(AsyncHandler::new(Handle::current(), handler))
}
