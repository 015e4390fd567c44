//! The client's side of sessions both of whose sides call (capability bit
//! 10): calls the peer makes are answered by the handler registered with
//! [`Client::on_call`] as soon as they are received (also while this side
//! waits for its own answers, so a peer may call back in the middle of a
//! call), or handed out by [`Client::next_incoming`] to be answered with
//! [`Client::answer`]; one-way messages are handed out by `next_incoming`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use super::{CallId, Client};
use crate::both_ways::{Incoming, MAX_QUEUED_INCOMING};
use crate::callee::{panic_text, reply, Limits};
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError, Result};
use crate::message::Message;
use shmlink_wire::codes::CODE_HANDLER_PANICKED;
use shmlink_wire::frame::Kind;

impl Client {
    /// Registers the handler of calls from the peer (a listener's end
    /// calling this client, or this client's caller on a listener's end):
    /// each call is answered with what it writes to its buffer (empty on
    /// entry), or the [`RemoteError`] it returns, as soon as the call is
    /// received — while this side waits for its own answers too, so the
    /// peer may call back in the middle of a call. It runs on the thread
    /// using this client. A handler that panics answers
    /// [`crate::CODE_HANDLER_PANICKED`]. Replaces an earlier handler.
    ///
    /// # Errors
    /// [`Error::NotAgreed`] when the peer cannot call this side: a
    /// [`Server`](crate::Server) (handler threads), a worker port or a
    /// peer of an older build (capability bit 10).
    pub fn on_call<F>(&mut self, handler: F) -> Result<()>
    where
        F: FnMut(&[u8], &mut Vec<u8>) -> std::result::Result<(), RemoteError> + Send + 'static,
    {
        self.check_peer_calls()?;
        self.incoming.handler = Some(Box::new(handler));
        Ok(())
    }

    /// Waits up to `timeout` for the next call or one-way message of the
    /// peer, in arrival order. Calls are served by the handler of
    /// [`Client::on_call`] when one is set (and not returned); otherwise
    /// returned, to be answered with [`Client::answer`] (within the
    /// peer's timeout). Answers to this side's pipelined calls received on
    /// the way are kept for [`Client::recv`].
    ///
    /// # Errors
    /// [`Error::Timeout`] when nothing came (the session stays usable);
    /// [`Error::NotAgreed`] when the peer cannot call this side (see
    /// [`Client::on_call`]); peer gone, protocol errors.
    pub fn next_incoming(&mut self, timeout: Duration) -> Result<Incoming> {
        self.check_peer_calls()?;
        let mut deadline = Deadline::In(timeout);
        loop {
            if let Some(i) = self.incoming.queue.pop_front() {
                return Ok(i);
            }
            let m = match self.session.recv(&mut deadline) {
                Ok(m) => m,
                Err(Error::Timeout { address, after, .. }) => {
                    return Err(Error::Timeout {
                        address,
                        op: "waiting for a call or message from the peer",
                        after,
                    })
                }
                Err(e) => return Err(e),
            };
            if let Some(reply) = self.accept(m)? {
                self.ready.push_back(reply);
            }
        }
    }

    /// [`Client::next_incoming`] without waiting for anything to begin to
    /// arrive: `Ok(None)` when nothing has (the descriptor of
    /// [`Client::poll_fd`] then becomes readable when something does).
    ///
    /// # Errors
    /// As [`Client::next_incoming`], but never a timeout.
    pub fn try_incoming(&mut self) -> Result<Option<Incoming>> {
        self.check_peer_calls()?;
        let mut deadline = Deadline::In(self.options.timeout);
        loop {
            if let Some(i) = self.incoming.queue.pop_front() {
                return Ok(Some(i));
            }
            let mut m = Message::blank();
            if !self.session.try_recv_into(&mut deadline, &mut m)? {
                return Ok(None);
            }
            if let Some(reply) = self.accept(m)? {
                self.ready.push_back(reply);
            }
        }
    }

    /// Answers call `id` of the peer, handed out by
    /// [`Client::next_incoming`]: the response's bytes, or the error the
    /// peer receives. A response larger than the peer accepts goes as
    /// [`crate::CODE_RESPONSE_TOO_LARGE`].
    ///
    /// # Errors
    /// [`Error::NotOwed`] when no call `id` of the peer waits for an answer
    /// (answered already, or never received; nothing sent); timeout
    /// waiting for room, peer gone.
    pub fn answer(
        &mut self,
        id: CallId,
        result: std::result::Result<&[u8], RemoteError>,
    ) -> Result<()> {
        if !self.incoming.owed.remove(&id) {
            return Err(Error::NotOwed {
                address: self.address.to_string(),
                id,
            });
        }
        self.send_answer(id, result)
    }

    /// Takes a call or one-way message of the peer received on the way
    /// (see `Incomings::takes`): a call is served now by the handler,
    /// or filed with the messages.
    pub(super) fn take_incoming(&mut self, mut m: Message) -> Result<()> {
        let fds = m.take_extra().fds;
        if m.kind == Kind::Request {
            if let Some(handler) = self.incoming.handler.as_mut() {
                drop(fds);
                let mut response = Vec::new();
                let result = catch_unwind(AssertUnwindSafe(|| handler(&m.body, &mut response)))
                    .unwrap_or_else(|p| {
                        Err(RemoteError::new(
                            CODE_HANDLER_PANICKED,
                            format!(
                                "the handler of calls from the peer panicked: {}",
                                panic_text(&*p)
                            ),
                        ))
                    });
                return self.send_answer(m.id, result.map(|()| response.as_slice()));
            }
            if !self.incoming.owed.insert(m.id) {
                let detail = format!(
                    "the peer called with id {} while its call {0} waits for an answer",
                    m.id
                );
                return Err(self.session.violation(detail));
            }
        }
        if self.incoming.queue.len() >= MAX_QUEUED_INCOMING {
            let detail = format!(
                "the peer sent {MAX_QUEUED_INCOMING} calls and messages this side has not taken yet; \
                 the limit ends the session"
            );
            return Err(self.session.violation(detail));
        }
        let id = (m.kind == Kind::Request).then_some(m.id);
        self.incoming.queue.push_back(Incoming {
            id,
            body: m.body,
            fds,
        });
        Ok(())
    }

    /// Sends the answer to the peer's call `id`.
    fn send_answer(
        &mut self,
        id: CallId,
        result: std::result::Result<&[u8], RemoteError>,
    ) -> Result<()> {
        let limits = Limits {
            peer: self.session.peer_max(),
            own: self.session.local_max(),
            who: "this side",
        };
        let mut scratch = Vec::new();
        let (kind, body) = reply(result, limits, &mut scratch);
        let mut deadline = Deadline::In(self.options.timeout);
        self.session.send(kind, id, body, &mut deadline)
    }

    /// Fails when this side may not call its peer: a listener's end of a
    /// session whose client did not agree on capability bit 10.
    #[inline(always)]
    pub(super) fn check_may_call(&self) -> Result<()> {
        if self.incoming.may_call {
            return Ok(());
        }
        Err(Error::NotAgreed {
            address: self.address.to_string(),
            capability: "calls from the listener's side (capability bit 10; the client is of an older build)",
        })
    }

    fn check_peer_calls(&self) -> Result<()> {
        if self.incoming.peer_calls {
            return Ok(());
        }
        Err(Error::NotAgreed {
            address: self.address.to_string(),
            capability: "calls and messages from the peer (capability bit 10: a Listener's sessions have it, a Server's or a worker port's do not)",
        })
    }
}
