//! Sessions both of whose sides call (capability bit 10): which end of a
//! session a [`Client`](crate::Client) is, and its account of what its
//! peer sends on its own initiative (calls and one-way messages). The
//! client's methods that use it are in `client/incoming.rs`.

use std::collections::{HashSet, VecDeque};
use std::os::fd::OwnedFd;

use crate::error::RemoteError;
use crate::message::Message;
use shmlink_wire::frame::Kind;

/// Most calls and messages from the peer a client holds before it takes
/// them ([`Client::next_incoming`](crate::Client::next_incoming)): received
/// while this side waited for its own answers, or not yet taken. A peer
/// that sends more ends the session (see docs/protocol.md, capability bit 10).
pub const MAX_QUEUED_INCOMING: usize = 65_536;

/// A call or a one-way message from the peer.
#[derive(Debug)]
pub struct Incoming {
    /// The call's id, to answer it with
    /// [`Client::answer`](crate::Client::answer); `None` for a one-way
    /// message, which gets no answer.
    pub id: Option<u64>,
    /// Its bytes.
    pub body: Vec<u8>,
    /// File descriptors that came with it (capability bit 4); they are
    /// the receiver's.
    pub fds: Vec<OwnedFd>,
}

/// Which end of a session a client is: what its peer may send on its own
/// and what it may send itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The connecting side: it calls; with capability bit 10 its peer
    /// calls it too.
    Caller,
    /// A worker port's end of a worker's session: it calls the worker.
    Supervisor,
    /// A listener's end: the peer calls it; with bit 10 it calls the peer.
    Listening,
}

/// A handler of calls from the peer: request bytes to response bytes, or
/// the error the peer receives.
pub(crate) type CallHandler =
    dyn FnMut(&[u8], &mut Vec<u8>) -> std::result::Result<(), RemoteError> + Send + 'static;

/// A client's account of what its peer sends on its own.
pub(crate) struct Incomings {
    /// Whether the peer may call and send one-way messages.
    pub(crate) peer_calls: bool,
    /// Whether this side may call (a listener's end: only with bit 10).
    pub(crate) may_call: bool,
    pub(crate) queue: VecDeque<Incoming>,
    /// Calls handed out and not yet answered.
    pub(crate) owed: HashSet<u64>,
    pub(crate) handler: Option<Box<CallHandler>>,
}

impl std::fmt::Debug for Incomings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incomings")
            .field("peer_calls", &self.peer_calls)
            .field("may_call", &self.may_call)
            .field("queued", &self.queue.len())
            .field("owed", &self.owed.len())
            .field("handler", &self.handler.is_some())
            .finish()
    }
}

impl Incomings {
    /// The account of an end on `side` of a session that agreed (or not)
    /// on capability bit 10.
    pub(crate) fn new(side: Side, both_ways: bool) -> Incomings {
        let (peer_calls, may_call) = match side {
            Side::Caller => (both_ways, true),
            Side::Supervisor => (false, true),
            Side::Listening => (true, both_ways),
        };
        Incomings {
            peer_calls,
            may_call,
            queue: VecDeque::new(),
            owed: HashSet::new(),
            handler: None,
        }
    }

    /// Whether a received message is the peer's own call or message.
    #[inline(always)]
    pub(crate) fn takes(&self, m: &Message) -> bool {
        self.peer_calls && matches!(m.kind, Kind::Request | Kind::OneWay)
    }
}
