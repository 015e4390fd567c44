//! The one error type of the core layer.

use std::io;
use std::time::Duration;

pub use shmlink_wire::codes::{RefusalCode, RemoteError};

/// Everything that can go wrong in the core layer. Messages name the object,
/// the cause and the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The address string cannot be parsed.
    #[error(
        "invalid address {address:?}: {reason} (expected shm:PATH, unix:PATH or tcp:HOST:PORT)"
    )]
    InvalidAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An option is out of range.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option's name.
        name: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
    /// The connection itself failed (no server, no permission on the socket file…).
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// Server address.
        address: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The server refused the session; `message` carries its evidence.
    #[error("server at {address} refused the session ({code}): {message}")]
    Refused {
        /// Server address.
        address: String,
        /// Why, as a number.
        code: RefusalCode,
        /// The server's explanation.
        message: String,
    },
    /// The peer broke the protocol (malformed frame, corrupted ring, bad handshake).
    #[error("protocol error on session with {peer}: {detail}")]
    Protocol {
        /// Who the peer is (address or session description).
        peer: String,
        /// What was wrong.
        detail: String,
    },
    /// An operation did not complete in time.
    #[error("{op} on {address} timed out after {after:?}")]
    Timeout {
        /// Session address.
        address: String,
        /// What was being done.
        op: &'static str,
        /// The timeout that elapsed.
        after: Duration,
    },
    /// The peer process died or closed the session.
    #[error("peer of session {address} is gone: {detail}")]
    PeerGone {
        /// Session address.
        address: String,
        /// How it was noticed.
        detail: String,
    },
    /// The session was closed locally (or broken by an earlier error) and cannot be used.
    #[error("session with {address} is closed: {reason}")]
    Closed {
        /// Session address.
        address: String,
        /// Why it is closed.
        reason: String,
    },
    /// A message is larger than the maximum message size; nothing was sent.
    #[error("message of {size} bytes exceeds the maximum message size of {max} bytes ({side})")]
    MessageTooLarge {
        /// Size of the message.
        size: usize,
        /// The limit.
        max: usize,
        /// Whose limit it is.
        side: &'static str,
    },
    /// The session did not agree on what a call needs (a capability the peer
    /// did not offer); nothing was sent, the session stays usable.
    #[error("the session with {address} did not agree on {capability}; nothing was sent")]
    NotAgreed {
        /// Session address.
        address: String,
        /// What is missing, with its capability bit.
        capability: &'static str,
    },
    /// The session's transport cannot do what was asked (file descriptors
    /// over `tcp:`); nothing was sent, the session stays usable.
    #[error("{what} cannot travel on the session with {address} ({why}); nothing was sent")]
    Unsupported {
        /// Session address.
        address: String,
        /// What was asked.
        what: &'static str,
        /// Why the transport cannot.
        why: &'static str,
    },
    /// No arena buffer can be had (the arena is at its `max_arena_bytes`
    /// with buffers lent, or the kernel refused a segment); the session
    /// stays usable.
    #[error("arena of the session with {address}: {detail}")]
    ArenaFull {
        /// Session address.
        address: String,
        /// Sizes: asked, mapped, lent, the limit.
        detail: String,
    },
    /// The file descriptors given with a message cannot be sent (more than
    /// [`crate::MAX_FDS`], or one is not open); nothing was sent, the
    /// session stays usable.
    #[error("cannot send file descriptors to {address}: {reason}; nothing was sent")]
    BadFds {
        /// Session address.
        address: String,
        /// What is wrong with them.
        reason: String,
    },
    /// The handler on the other side returned an error.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// [`crate::Client::answer`] named a call of the peer that waits for no
    /// answer (answered already, or never received); nothing was sent.
    #[error("no call {id} of the peer of session {address} waits for an answer (answered already, or never received); nothing was sent")]
    NotOwed {
        /// Session address.
        address: String,
        /// The id given.
        id: u64,
    },
    /// `recv` was called with no call in flight: nothing can arrive.
    #[error("recv on the session with {address}: no call is in flight")]
    NothingInFlight {
        /// The server's address.
        address: String,
    },
    /// A server could not listen on an address.
    #[error("cannot listen on {address}: {reason}")]
    Bind {
        /// The address.
        address: String,
        /// What went wrong, with the evidence.
        reason: String,
    },
    /// An I/O error with context.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether the session that produced this error can no longer be used.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Protocol { .. }
                | Error::PeerGone { .. }
                | Error::Closed { .. }
                | Error::Io { .. }
        )
    }
}

/// Result alias of the core layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
