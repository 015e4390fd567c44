//! The pool's error type.

/// What can go wrong starting or running a pool.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// An option is out of range.
    #[error("invalid pool options: {0}")]
    Options(String),
    /// The library failed (binding an address, the worker port).
    #[error(transparent)]
    Shmlink(#[from] shmlink::Error),
    /// The HTTP front could not start.
    #[error(transparent)]
    Http(#[from] shmlink_http::HttpError),
    /// An operating-system error with context.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}
