//! An async client on tokio (feature `tokio`): many calls at once on one
//! session, pipelined underneath and matched by id, no thread per call.
//!
//! The session's readiness descriptor ([`Client::poll_fd`]) sits in tokio's
//! reactor ([`AsyncFd`]). One waiting call at a time is registered there:
//! when the descriptor becomes readable, that call takes every answer that
//! arrived ([`Client::try_recv`]) and wakes the call each one belongs to;
//! a call that finishes while others wait hands the registration on (it
//! wakes one of them), so nobody waits on a descriptor no one watches.
//!
//! Cancel-safe: dropping a call's future abandons the call
//! ([`Client::abandon`]); its answer is dropped when it comes, and the
//! session stays usable.
//!
//! The server side: [`serve`] (or [`AsyncHandler`] given to a
//! [`crate::Server`]) answers each request with an `async fn` run on the
//! runtime.
//!
//! Sends do not wait for an answer, but one that finds the outgoing ring
//! (or socket) full waits for room on the calling thread, within the
//! client's timeout, as [`Client::send`] does: the server empties it
//! meanwhile.
//!
//! ```no_run
//! # async fn f() -> shmlink::Result<()> {
//! let client = shmlink::tokio::AsyncClient::connect("shm:/run/app.sock", Default::default()).await?;
//! let (a, b) = tokio::join!(client.call(b"one"), client.call(b"two"));
//! # let _ = (a?, b?);
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;

use crate::client::{CallId, Client, Reply};
use crate::error::{Error, RemoteError, Result};
use crate::options::ClientOptions;

mod fd;
mod serve;

pub use serve::{serve, AsyncHandler};

/// Where a call's answer waits for it.
enum Slot {
    /// Not yet come; the waker of the task that waits.
    Waiting(Option<Waker>),
    /// Come.
    Done(std::result::Result<Vec<u8>, RemoteError>),
}

struct State {
    client: Client,
    /// Calls made with [`AsyncClient::call`], by id.
    calls: HashMap<CallId, Slot>,
    /// Answers to [`AsyncClient::send`], in arrival order, for
    /// [`AsyncClient::recv`].
    replies: VecDeque<Reply>,
    /// Calls sent with [`AsyncClient::send`] and not yet received.
    sent: usize,
    /// A task waiting in [`AsyncClient::recv`].
    receiver: Option<Waker>,
    /// Why the session ended, once it did.
    ended: Option<String>,
}

struct Inner {
    /// A duplicate of the client's readiness descriptor, in the reactor.
    fd: AsyncFd<OwnedFd>,
    state: Mutex<State>,
    address: String,
}

/// An async client. Cheap to clone (clones share the session); every
/// method takes `&self`, so calls run concurrently from many tasks.
#[derive(Clone)]
pub struct AsyncClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AsyncClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncClient")
            .field("address", &self.inner.address)
            .finish()
    }
}

/// Abandons the call when its future is dropped before the answer came.
struct Pending<'a> {
    client: &'a AsyncClient,
    id: CallId,
    done: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.client.abandon(self.id);
        }
    }
}

impl AsyncClient {
    /// Connects (the handshake runs on tokio's blocking pool) and registers
    /// the session with the reactor.
    ///
    /// # Errors
    /// As [`Client::connect`]; [`Error::NotAgreed`] over `shm:` with a
    /// server of an older build (no loop wake-ups).
    pub async fn connect(address: &str, options: ClientOptions) -> Result<AsyncClient> {
        let address = address.to_string();
        let joined =
            ::tokio::task::spawn_blocking(move || Client::connect(&address, options)).await;
        match joined {
            Ok(client) => AsyncClient::new(client?),
            Err(e) => Err(Error::io("connecting on tokio's blocking pool", e.into())),
        }
    }

    /// Wraps a connected client. Must be called within a tokio runtime.
    ///
    /// # Errors
    /// As [`Client::poll_fd`]; no reactor (outside a runtime).
    pub fn new(mut client: Client) -> Result<AsyncClient> {
        let address = client.address().to_string();
        let fd = fd::register(client.poll_fd()?)
            .map_err(|e| Error::io(format!("registering session {address} with tokio"), e))?;
        let state = State {
            client,
            calls: HashMap::new(),
            replies: VecDeque::new(),
            sent: 0,
            receiver: None,
            ended: None,
        };
        Ok(AsyncClient {
            inner: Arc::new(Inner {
                fd,
                state: Mutex::new(state),
                address,
            }),
        })
    }

    /// The server's address.
    pub fn address(&self) -> &str {
        &self.inner.address
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain bookkeeping behind,
        // still consistent at every step: carry on.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Calls and waits for the answer without blocking the thread; many
    /// calls may wait at once. Dropping the future abandons the call.
    ///
    /// # Errors
    /// As [`Client::call`]; [`Error::Remote`] when the handler failed.
    pub async fn call(&self, request: &[u8]) -> Result<Vec<u8>> {
        let id = {
            let mut st = self.lock();
            let id = st.client.send(request)?;
            st.calls.insert(id, Slot::Waiting(None));
            id
        };
        let mut pending = Pending {
            client: self,
            id,
            done: false,
        };
        let r = poll_fn(|cx| self.poll_call(id, cx)).await;
        pending.done = true;
        r
    }

    /// [`AsyncClient::call`] that gives up after `timeout` (the call is
    /// abandoned; the session stays usable).
    ///
    /// # Errors
    /// As [`AsyncClient::call`]; [`Error::Timeout`].
    pub async fn call_timeout(&self, request: &[u8], timeout: Duration) -> Result<Vec<u8>> {
        match ::tokio::time::timeout(timeout, self.call(request)).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                address: self.inner.address.clone(),
                op: "waiting for a response",
                after: timeout,
            }),
        }
    }

    /// Sends a request without waiting for its answer (pipelining); the
    /// answer comes from [`AsyncClient::recv`], in arrival order.
    ///
    /// # Errors
    /// As [`Client::send`].
    pub fn send(&self, request: &[u8]) -> Result<CallId> {
        let mut st = self.lock();
        let id = st.client.send(request)?;
        st.sent += 1;
        Ok(id)
    }

    /// Sends a one-way message.
    ///
    /// # Errors
    /// As [`Client::notify`].
    pub fn notify(&self, message: &[u8]) -> Result<()> {
        self.lock().client.notify(message)
    }

    /// The next answer to a request of [`AsyncClient::send`].
    ///
    /// # Errors
    /// [`Error::NothingInFlight`] when none is in flight; peer gone.
    pub async fn recv(&self) -> Result<Reply> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Gives up on a call: its answer is dropped when it comes. `false`
    /// when it was not in flight.
    pub fn abandon(&self, id: CallId) -> bool {
        let mut st = self.lock();
        let was = st.calls.remove(&id).is_some();
        let r = st.client.abandon(id);
        pass_the_watch(&mut st);
        was || r
    }

    /// Calls in flight (of [`AsyncClient::call`] and [`AsyncClient::send`]).
    pub fn in_flight(&self) -> usize {
        self.lock().client.in_flight()
    }

    fn poll_call(&self, id: CallId, cx: &mut Context<'_>) -> Poll<Result<Vec<u8>>> {
        let mut st = self.lock();
        loop {
            match st.calls.get_mut(&id) {
                Some(Slot::Done(_)) => {
                    let Some(Slot::Done(r)) = st.calls.remove(&id) else {
                        unreachable!("checked above")
                    };
                    pass_the_watch(&mut st);
                    return Poll::Ready(r.map_err(Error::Remote));
                }
                Some(Slot::Waiting(w)) => {
                    if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        *w = Some(cx.waker().clone());
                    }
                }
                None => return Poll::Ready(Err(self.ended(&st))),
            }
            match self.drive(&mut st, cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Result<Reply>> {
        let mut st = self.lock();
        loop {
            if let Some(r) = st.replies.pop_front() {
                st.sent -= 1;
                pass_the_watch(&mut st);
                return Poll::Ready(Ok(r));
            }
            if st.sent == 0 {
                return Poll::Ready(Err(Error::NothingInFlight {
                    address: self.inner.address.clone(),
                }));
            }
            if st.ended.is_some() {
                return Poll::Ready(Err(self.ended(&st)));
            }
            st.receiver = Some(cx.waker().clone());
            match self.drive(&mut st, cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Takes every answer that arrived and files it; `Ready(Ok)` when it
    /// took any (the caller looks again), `Pending` once the descriptor is
    /// armed and this task registered on it.
    fn drive(&self, st: &mut State, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if st.ended.is_some() {
            return Poll::Ready(Err(self.ended(st)));
        }
        let mut took = false;
        loop {
            match st.client.try_recv() {
                Ok(Some(reply)) => {
                    took = true;
                    file(st, reply);
                }
                Ok(None) => break,
                Err(Error::NothingInFlight { .. }) => break,
                Err(e) => {
                    st.ended = Some(e.to_string());
                    wake_all(st);
                    return Poll::Ready(Err(e));
                }
            }
        }
        if took {
            return Poll::Ready(Ok(()));
        }
        match self.inner.fd.poll_read_ready(cx) {
            Poll::Ready(Ok(mut guard)) => {
                guard.clear_ready();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                let e = Error::io(
                    format!("tokio's reactor, session {}", self.inner.address),
                    e,
                );
                st.ended = Some(e.to_string());
                wake_all(st);
                Poll::Ready(Err(e))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn ended(&self, st: &State) -> Error {
        Error::Closed {
            address: self.inner.address.clone(),
            reason: st
                .ended
                .clone()
                .unwrap_or_else(|| "the call was abandoned".into()),
        }
    }
}

/// Files an answer with its call (waking it), or for `recv`.
fn file(st: &mut State, reply: Reply) {
    match st.calls.get_mut(&reply.id) {
        Some(slot) => {
            if let Slot::Waiting(Some(w)) = std::mem::replace(slot, Slot::Done(reply.result)) {
                w.wake();
            }
        }
        None => {
            st.replies.push_back(reply);
            if let Some(w) = st.receiver.take() {
                w.wake();
            }
        }
    }
}

/// A call leaving while others wait may have been the one registered on
/// the descriptor: wake one that waits, which registers itself.
fn pass_the_watch(st: &mut State) {
    if let Some(w) = st.receiver.take() {
        w.wake();
        return;
    }
    for slot in st.calls.values_mut() {
        if let Slot::Waiting(w @ Some(_)) = slot {
            if let Some(w) = w.take() {
                w.wake();
            }
            return;
        }
    }
}

fn wake_all(st: &mut State) {
    for slot in st.calls.values_mut() {
        if let Slot::Waiting(w) = slot {
            if let Some(w) = w.take() {
                w.wake();
            }
        }
    }
    if let Some(w) = st.receiver.take() {
        w.wake();
    }
}
