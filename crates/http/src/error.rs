//! The HTTP crate's error types.

/// Why a streamed response could not go on: its connection is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamBroken(pub(crate) String);

/// What can go wrong starting the front.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// An option is out of range or an address does not parse.
    #[error("invalid HTTP front options: {0}")]
    Options(String),
    /// The HTTP client of a streamed response is gone, or read nothing
    /// for the header timeout: the response is over.
    #[error("{0}")]
    ClientGone(String),
    /// An operating-system error with context.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}
