//! Requests handed to a thread that runs its own event loop: a server
//! whose handler is [`QueueHandler`] puts each request in a [`RequestQueue`]
//! and waits for its answer; the loop watches [`RequestQueue::fd`]
//! (readable while requests wait), takes them with
//! [`RequestQueue::try_next`] and answers each ([`QueuedRequest::answer`],
//! [`QueuedRequest::fail`]) whenever it likes, in any order.
//!
//! The sessions stay the server's threads: each waits for the answer to
//! its request, so requests of one session are answered one at a time, in
//! order, and sessions run concurrently (docs/design.md, "Event loops").
//!
//! ```no_run
//! let (queue, handler) = shmlink::RequestQueue::new()?;
//! let server = shmlink::Server::bind(&["shm:/tmp/q.sock"], Default::default())?.spawn(handler)?;
//! // In the loop, when queue.fd() is readable:
//! while let Some(request) = queue.try_next() {
//!     let answer = request.body().to_vec();
//!     request.answer(answer);
//! }
//! # Ok::<(), shmlink::Error>(())
//! ```

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};

use shmlink_sys::eventfd::EventFd;

use crate::error::{Error, RemoteError, Result};
use crate::server::Handler;
use shmlink_wire::codes::CODE_HANDLER_EXCEPTION;

type Answer = std::result::Result<Vec<u8>, RemoteError>;

struct Shared {
    /// Readable exactly while requests wait (signalled and cleared with
    /// `pending` locked).
    bell: EventFd,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    requests: VecDeque<QueuedRequest>,
    /// The queue was dropped: requests are answered with an error at once.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The loop's end: requests waiting for an answer.
pub struct RequestQueue {
    shared: Arc<Shared>,
}

/// The server's end: a [`Handler`] that queues each request and waits for
/// the loop's answer.
pub struct QueueHandler {
    shared: Arc<Shared>,
}

/// A request taken from the queue. Answer it once; dropping it unanswered
/// answers the caller with an error (code `0xFFFF0003`, a handler
/// exception).
pub struct QueuedRequest {
    body: Vec<u8>,
    reply: Option<SyncSender<Answer>>,
}

impl std::fmt::Debug for RequestQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestQueue")
            .field("waiting", &self.shared.lock().requests.len())
            .finish()
    }
}

impl std::fmt::Debug for QueueHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueHandler").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for QueuedRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedRequest")
            .field("len", &self.body.len())
            .finish()
    }
}

impl RequestQueue {
    /// A queue, and the handler to give the server.
    ///
    /// # Errors
    /// Out of descriptors (the eventfd).
    pub fn new() -> Result<(RequestQueue, QueueHandler)> {
        let bell = EventFd::new().map_err(|e| Error::io("eventfd for a request queue", e))?;
        let shared = Arc::new(Shared {
            bell,
            pending: Mutex::new(Pending::default()),
        });
        Ok((
            RequestQueue {
                shared: Arc::clone(&shared),
            },
            QueueHandler { shared },
        ))
    }

    /// The descriptor a loop watches: readable while requests wait. The
    /// queue's own: watch it, never read or close it.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.shared.bell.as_fd()
    }

    /// The next waiting request, never waiting for one.
    pub fn try_next(&self) -> Option<QueuedRequest> {
        let mut p = self.shared.lock();
        let next = p.requests.pop_front();
        if p.requests.is_empty() {
            self.shared.bell.clear();
        }
        next
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.shared.lock().requests.len()
    }
}

impl Drop for RequestQueue {
    /// Requests waiting, and those that come later, are answered with an
    /// error: no loop will answer them.
    fn drop(&mut self) {
        let waiting = {
            let mut p = self.shared.lock();
            p.closed = true;
            std::mem::take(&mut p.requests)
        };
        drop(waiting);
    }
}

impl QueuedRequest {
    /// The request's bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Takes the request's bytes (the request can still be answered).
    pub fn take_body(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.body)
    }

    /// Answers the call with `response`.
    pub fn answer(mut self, response: Vec<u8>) {
        self.send(Ok(response));
    }

    /// Answers the call with a remote error.
    pub fn fail(mut self, error: RemoteError) {
        self.send(Err(error));
    }

    fn send(&mut self, a: Answer) {
        if let Some(reply) = self.reply.take() {
            // The session may be gone (its client left): nobody to tell.
            let _ = reply.send(a);
        }
    }
}

impl Drop for QueuedRequest {
    fn drop(&mut self) {
        self.send(Err(RemoteError::new(
            CODE_HANDLER_EXCEPTION,
            "the request was dropped unanswered by the server's loop",
        )));
    }
}

impl Handler for QueueHandler {
    fn handle(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> std::result::Result<(), RemoteError> {
        let (tx, rx): (SyncSender<Answer>, Receiver<Answer>) = sync_channel(1);
        {
            let mut p = self.shared.lock();
            if p.closed {
                return Err(RemoteError::new(
                    CODE_HANDLER_EXCEPTION,
                    "the server's request queue is gone (its loop ended)",
                ));
            }
            p.requests.push_back(QueuedRequest {
                body: request.to_vec(),
                reply: Some(tx),
            });
            self.shared.bell.signal();
        }
        match rx.recv() {
            Ok(Ok(bytes)) => {
                *response = bytes;
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RemoteError::new(
                CODE_HANDLER_EXCEPTION,
                "the request was dropped unanswered by the server's loop",
            )),
        }
    }
}
