//! The pool's handler: each call a client makes goes to an idle worker; its
//! answer (or its own error) goes back; a worker that dies or hangs fails
//! only this call, with a code the caller can tell apart. A worker that
//! died before reading the call (still in its ring) never ran it: the call
//! goes to another worker instead of failing.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use shmlink::{Error, Handler, RemoteError};

use crate::codes::{CODE_WORKER_DIED, CODE_WORKER_TIMEOUT};
use crate::table::Lease;
use crate::Inner;

/// The handler of the pool's server.
#[derive(Debug)]
pub(crate) struct Dispatch {
    inner: Arc<Inner>,
}

impl Dispatch {
    pub(crate) fn new(inner: Arc<Inner>) -> Dispatch {
        Dispatch { inner }
    }
}

impl Handler for Dispatch {
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        let result = self.call(request, response);
        self.inner.calls.fetch_add(1, Ordering::Relaxed);
        if result.is_err() {
            self.inner.errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

impl Dispatch {
    fn call(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        let opts = &self.inner.opts;
        let shared = &self.inner.shared;
        let mut attempts = 1;
        loop {
            let mut lease = shared.acquire(opts.queue_timeout, opts.queue_size)?;
            match lease.client.call_timeout(request, opts.call_timeout) {
                Err(e @ Error::PeerGone { .. })
                    if attempts < MAX_ATTEMPTS && lease.client.request_unread() =>
                {
                    // It died before reading the call (an idle worker
                    // killed, say): the call never ran, so another worker
                    // takes it.
                    self.inner.say(&format!(
                        "worker {} died before reading a call ({e}); the call goes to another worker",
                        lease.pid
                    ));
                    shared.discard(lease, "died", true);
                    attempts += 1;
                }
                result => return self.settle(lease, result, response),
            }
        }
    }

    /// Hands the worker back (or discards it) after its answer, and makes
    /// the caller's result of it.
    fn settle(
        &self,
        mut lease: Lease,
        result: shmlink::Result<Vec<u8>>,
        response: &mut Vec<u8>,
    ) -> Result<(), RemoteError> {
        let opts = &self.inner.opts;
        let shared = &self.inner.shared;
        match result {
            Ok(body) => {
                // The worker's buffer becomes the response; the session's old
                // one goes to the worker's session for its next answer: no
                // copy, no allocation once both have grown.
                let old = std::mem::replace(response, body);
                lease.client.recycle(old);
                shared.release(lease, opts.max_jobs);
                Ok(())
            }
            Err(Error::Remote(r)) => {
                shared.release(lease, opts.max_jobs);
                Err(r)
            }
            Err(Error::MessageTooLarge { size, max, side }) => {
                shared.release(lease, opts.max_jobs);
                Err(RemoteError::new(
                    shmlink::CODE_RESPONSE_TOO_LARGE,
                    format!("request of {size} bytes exceeds {side} of {max} bytes"),
                ))
            }
            Err(e @ Error::Timeout { .. }) => {
                let pid = lease.pid;
                let why = format!(
                    "worker {pid} did not answer within the call timeout of {:?} ({e}); it was killed",
                    opts.call_timeout
                );
                self.inner.say(&why);
                shared.discard(lease, "killed: call timeout", true);
                Err(RemoteError::new(CODE_WORKER_TIMEOUT, why))
            }
            Err(e) => {
                let pid = lease.pid;
                let why = format!("worker {pid} died during the call: {e}");
                self.inner.say(&why);
                shared.discard(lease, "died during a call", true);
                Err(RemoteError::new(CODE_WORKER_DIED, why))
            }
        }
    }
}

/// Workers a call may be given to when each dies before reading it.
const MAX_ATTEMPTS: u32 = 3;
