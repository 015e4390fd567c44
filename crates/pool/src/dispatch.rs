//! The pool's handler: each call a client makes goes to an idle worker; its
//! answer (or its own error) goes back; a worker that dies or hangs fails
//! only this call, with a code the caller can tell apart. A worker that
//! died before reading the call (still in its ring) never ran it: the call
//! goes to another worker instead of failing. Callers block for the call
//! (a session thread, or one of the HTTP front's callers).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink::{BatchAnswer, Client, Error, Handler, LineAsk, LineOffer, RemoteError};

use crate::codes::{CODE_POOL_STOPPING, CODE_WORKER_DIED, CODE_WORKER_TIMEOUT};
use crate::inner::Inner;
use crate::shutdown;
use crate::table::{Lease, Terms};

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
        self.dispatch(request, response)
    }

    /// Calls a client pipelined may run on as many workers at once.
    fn batch_limit(&self) -> usize {
        self.workers()
    }

    /// Pipelined calls: each sent to an idle worker of its own while there
    /// are idle workers (the first waits in the queue as any call does),
    /// then the answers collected in order; the calls that found no idle
    /// worker go after those, one after another, as ordinary calls.
    fn handle_batch(&self, requests: &[&[u8]], answer: &mut BatchAnswer<'_>) {
        let arrived = Instant::now();
        let shared = &self.inner.shared;
        // The first call waits in the queue as any call does; if it finds
        // no worker, it fails as any call does.
        let first = match shared.acquire(self.terms()) {
            Ok(lease) => lease,
            Err(e) => {
                let failed = Err(e);
                self.count(arrived, &failed);
                answer(failed.map(|()| &[][..]));
                return self.one_by_one(&requests[1..], answer);
            }
        };
        let mut flights = Vec::with_capacity(requests.len());
        let mut lease = Some(first);
        for request in requests {
            let Some(mut l) = lease.take().or_else(|| shared.try_acquire()) else {
                break;
            };
            let started = Instant::now();
            let sent = l.client.send(request).map(|_| ());
            flights.push((l, started, sent));
        }
        let mut response = Vec::new();
        let taken = flights.len();
        for ((lease, started, sent), request) in flights.into_iter().zip(requests) {
            let result = self.land(lease, started, sent, request, &mut response);
            self.count(arrived, &result);
            answer(result.map(|()| response.as_slice()));
        }
        self.one_by_one(&requests[taken..], answer);
    }

    /// A client asks for a direct line: an idle worker is lent to it while
    /// no call waits for one (see `table::Shared::try_lend`).
    fn line(&self, ask: &LineAsk) -> Option<LineOffer> {
        let opts = &self.inner.opts;
        if !opts.lines {
            return None;
        }
        let shared = &self.inner.shared;
        let (mut lease, allowed) = shared.try_lend(opts.max_jobs)?;
        match lease
            .client
            .lend_line(ask, allowed, Some(opts.call_timeout))
        {
            Ok((offer, hold)) => shared.lined(lease, hold).then_some(offer),
            Err(e) if e.is_fatal() => {
                let why = format!("worker {} could not take a direct line: {e}", lease.pid);
                self.inner.say(&why);
                shared.discard(lease, "died taking a direct line", true);
                None
            }
            Err(e) => {
                self.inner.say(&format!("no direct line made: {e}"));
                shared.put_back(lease);
                None
            }
        }
    }
}

impl Dispatch {
    /// Calls of a batch that found no idle worker: ordinary calls, one
    /// after another.
    fn one_by_one(&self, requests: &[&[u8]], answer: &mut BatchAnswer<'_>) {
        let mut response = Vec::new();
        for request in requests {
            let result = self.dispatch(request, &mut response);
            answer(result.map(|()| response.as_slice()));
        }
    }

    /// Workers the pool keeps running.
    pub(crate) fn workers(&self) -> usize {
        self.inner.opts.workers
    }

    /// What calls wait under.
    fn terms(&self) -> Terms {
        let opts = &self.inner.opts;
        Terms {
            queue_timeout: opts.queue_timeout,
            queue_size: opts.queue_size,
            max_jobs: opts.max_jobs,
            call_timeout: opts.call_timeout,
        }
    }

    /// How long a call may wait for a worker.
    pub(crate) fn queue_timeout(&self) -> Duration {
        self.inner.opts.queue_timeout
    }

    /// Dispatches one call, counting it.
    pub(crate) fn dispatch(
        &self,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> Result<(), RemoteError> {
        let started = Instant::now();
        let result = self.call(request, response);
        self.count(started, &result);
        result
    }

    /// Counts a call that arrived at `started`, and whether it failed.
    fn count(&self, started: Instant, result: &Result<(), RemoteError>) {
        self.inner.calls.fetch_add(1, Ordering::Relaxed);
        if result.is_err() {
            self.inner.errors.fetch_add(1, Ordering::Relaxed);
        }
        let code = result.as_ref().err().map(|e| e.code);
        self.inner.metrics.call(started.elapsed(), code);
    }

    /// The answer to a call of a batch, sent (`sent`) to the leased worker
    /// at `started`; a worker that died before reading it hands it to
    /// [`Dispatch::call`], as a call that found it dead would be.
    fn land(
        &self,
        mut lease: Lease,
        started: Instant,
        sent: shmlink::Result<()>,
        request: &[u8],
        response: &mut Vec<u8>,
    ) -> Result<(), RemoteError> {
        let timeout = self.inner.opts.call_timeout;
        let result = sent.and_then(|()| answer_of(&mut lease.client, started, timeout));
        match result {
            Err(e) if never_ran(&e, &lease) => {
                self.pass_on(lease, &e);
                self.call(request, response)
            }
            result => self.settle(lease, result, response),
        }
    }

    fn call(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        let opts = &self.inner.opts;
        let shared = &self.inner.shared;
        let mut attempts = 1;
        loop {
            let mut lease = match shared.try_acquire() {
                Some(lease) => lease,
                None => shared.acquire(self.terms())?,
            };
            match exchange(&mut lease.client, request, opts.call_timeout) {
                Err(e) if attempts < MAX_ATTEMPTS && never_ran(&e, &lease) => {
                    self.pass_on(lease, &e);
                    attempts += 1;
                }
                result => return self.settle(lease, result, response),
            }
        }
    }

    /// Discards a worker that never ran the call it was given (see
    /// [`never_ran`]): the call goes to another worker.
    fn pass_on(&self, lease: Lease, e: &Error) {
        self.inner.say(&format!(
            "worker {} died before reading a call ({e}); the call goes to another worker",
            lease.pid
        ));
        self.inner.shared.discard(lease, "died", true);
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
            Err(_) if self.inner.shutdown_expired.load(Ordering::Acquire) => {
                let why = shutdown::cut_off(&self.inner, lease.pid);
                shared.discard(lease, "killed: shutdown timeout", true);
                Err(RemoteError::new(CODE_POOL_STOPPING, why))
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

/// Whether the worker of `lease` died, or ended its session, before reading
/// the call it was given (an idle worker killed, a worker whose script
/// called exit() after its last answer): the call never ran.
fn never_ran(e: &Error, lease: &Lease) -> bool {
    matches!(e, Error::PeerGone { .. } | Error::Closed { .. }) && lease.client.request_unread()
}

/// Workers a call may be given to when each dies before reading it.
const MAX_ATTEMPTS: u32 = 3;

/// One call to a leased worker: the request sent, the answer awaited; the
/// whole call within `timeout`.
fn exchange(client: &mut Client, request: &[u8], timeout: Duration) -> shmlink::Result<Vec<u8>> {
    let started = Instant::now();
    client.send(request)?;
    answer_of(client, started, timeout)
}

/// The answer to the call sent to `client` at `started`, the whole call
/// within `timeout`.
fn answer_of(client: &mut Client, started: Instant, timeout: Duration) -> shmlink::Result<Vec<u8>> {
    let reply = client.recv_timeout(timeout.saturating_sub(started.elapsed()))?;
    reply.result.map_err(Error::Remote)
}
