//! What can go wrong, each with the words a user acts on.

/// A publish/subscribe error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The session under it failed (connect, timeout, peer gone, policy).
    #[error(transparent)]
    Link(#[from] shmlink::Error),
    /// The other side refused the subscription (another topic, an offer
    /// this build cannot take).
    #[error("{0}")]
    Refused(String),
    /// The publisher ended this subscription, and said why.
    #[error("{0}")]
    Detached(String),
    /// The peer broke the protocol; this subscription (or this
    /// subscriber, on the publisher's side) is over.
    #[error("{0}")]
    Protocol(String),
    /// The publisher is gone.
    #[error("{0}")]
    Closed(String),
    /// A call this side may not make now (invalid options, a sample
    /// larger than the topic's, too many samples held).
    #[error("{0}")]
    Usage(String),
    /// The kernel refused memory or descriptors.
    #[error("{0}")]
    Io(String),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::Io(format!("{what}: {e}"))
}
