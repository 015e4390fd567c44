//! Ring errors.

/// What went wrong with a ring.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The capacity is not a power of two in range.
    #[error("ring capacity {capacity} is not a power of two between {min} and {max}")]
    BadCapacity {
        /// The capacity given.
        capacity: usize,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A record larger than one ring record may carry.
    #[error("record of {len} bytes exceeds the ring's record limit of {max} bytes")]
    TooLarge {
        /// Size asked for.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A read from a [`Record`](crate::Record) outside its payload: a bug of
    /// the caller, not of the peer.
    #[error("read of {len} bytes at offset {off} is outside the record's {record} bytes")]
    OutOfRange {
        /// Offset asked for.
        off: usize,
        /// Bytes asked for.
        len: usize,
        /// The record's payload length.
        record: usize,
    },
    /// The peer wrote an impossible value into the shared ring.
    #[error("ring corrupted by peer: {what} (value {value}, bound {bound})")]
    Corrupt {
        /// What was wrong.
        what: &'static str,
        /// The offending value.
        value: u64,
        /// The bound it violated.
        bound: u64,
    },
}

#[cold]
pub(crate) fn corrupt(what: &'static str, value: u64, bound: u64) -> RingError {
    RingError::Corrupt { what, value, bound }
}
