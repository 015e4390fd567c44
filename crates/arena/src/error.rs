//! The arena's errors.

/// What went wrong in an arena.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArenaError {
    /// No buffer of the size asked fits within the arena's limit now.
    #[error("arena full: a buffer of {len} bytes does not fit ({mapped} of {max} bytes mapped, {lent} bytes lent)")]
    Full {
        /// Bytes asked for.
        len: u64,
        /// Bytes mapped now.
        mapped: u64,
        /// Bytes of buffers lent or loaned now.
        lent: u64,
        /// The limit (`max_arena_bytes`).
        max: u64,
    },
    /// Creating or mapping a segment failed.
    #[error("arena segment of {len} bytes: {source}")]
    Segment {
        /// Its size.
        len: u64,
        /// Why.
        source: std::io::Error,
    },
    /// The peer broke the arena's rules (a lying descriptor, a bad release,
    /// a segment that is not sealed): the session must end.
    #[error("{0}")]
    Protocol(String),
}
