//! The lock-free single-producer/single-consumer byte ring of shmlink and its
//! futex-doorbell protocol, as a pure algorithm: no syscalls, so that `loom`
//! can model-check it. The caller (the core crate) places a [`RingHeader`]
//! and a data area in shared memory and performs the futex wait and wake the
//! protocol asks for.
//!
//! # Records
//! An 8-byte header (`len: u32`, `tag: u32`) then the payload, padded to 8
//! bytes. A record never wraps: a pad record fills the rest of the buffer.
//! `head` and `tail` are monotonic byte counters; positions are
//! `counter & (capacity - 1)`.
//!
//! # Hostile peers
//! The other end is another process and may write anything. Every head, tail,
//! length and tag read from shared memory is validated before use; a bad
//! value is [`RingError::Corrupt`], never a panic or an out-of-bounds access.
//!
//! # The doorbell, and why no wake-up is lost
//! Each direction has two words per waiting side, each with one writer: a
//! futex word ("bell", a wake counter incremented by the waker) and a sleep
//! word (a non-zero epoch stored by the sleeper while it is asleep).
//!
//! Consumer, about to sleep: `seen = data_bell.load()`; store a new epoch
//! into `data_sleep`; `t = tail.fetch_add(0)` (a read-modify-write); if
//! `t == head`, `FUTEX_WAIT(data_bell, seen)`; then store 0 into `data_sleep`.
//! Producer, after writing a record: `tail.swap(new)` (a read-modify-write);
//! if `data_sleep` holds an epoch it has not woken yet, increment `data_bell`
//! and `FUTEX_WAKE` it. So a burst costs one wake-up per sleep.
//!
//! Both operations on `tail` are read-modify-writes, so the later one reads
//! from the earlier. If the producer's swap is later, the consumer's
//! `fetch_add` (release) synchronizes with it, so the epoch store before it
//! is visible to the producer's load of `data_sleep`, and the producer wakes.
//! If the consumer's `fetch_add` is later, it sees the new tail and does not
//! sleep. A wake (increment) after the consumer read `seen` makes the futex
//! wait return at once. The argument uses release/acquire only — no SeqCst,
//! which loom models as AcqRel — and no word has two writers, whose
//! modification order loom tracks only partially. The producer waiting for
//! space is symmetric (`head`, `space_bell`, `space_sleep`).

mod consumer;
mod error;
mod layout;
mod memory;
mod producer;
mod raw;
mod record;
mod sync;

pub use consumer::{Consumer, Pop};
pub use error::RingError;
pub use layout::{
    CachePadded, RingHeader, AWAKE, MAX_CAPACITY, MAX_START_COUNTER, MIN_CAPACITY, RECORD_HEADER,
    TAG_DATA, TAG_PAD,
};
pub use memory::Memory;
pub use producer::{Producer, Push};
pub use raw::RawMemory;
pub use sync::{AtomicU32, AtomicU64};

#[cfg(test)]
mod tests;
