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
//! Consumer, about to sleep: `data_bell.store(SLEEPING)`; then
//! `t = tail.fetch_add(0)` (a read-modify-write); sleep only if `t == head`.
//! Producer, after writing a record: `tail.swap(new)` (a read-modify-write);
//! then wake only if `data_bell` reads `SLEEPING`.
//!
//! Both operations on `tail` are read-modify-writes, so they are totally
//! ordered in `tail`'s modification order and the later one reads from the
//! earlier. If the producer's swap is later, it reads from the consumer's
//! `fetch_add` (AcqRel), which synchronizes-with it, so the consumer's earlier
//! SLEEPING store happens-before the producer's load of `data_bell`: the
//! producer sees SLEEPING and wakes. If the consumer's `fetch_add` is later,
//! it reads the new tail and does not sleep. The argument needs no SeqCst,
//! which matters because loom models SeqCst only as AcqRel. The producer
//! waiting for space is symmetric (`head`, `space_bell`).

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
    CachePadded, RingHeader, AWAKE, MAX_CAPACITY, MIN_CAPACITY, RECORD_HEADER, SLEEPING, TAG_DATA,
    TAG_PAD,
};
pub use memory::Memory;
pub use producer::{Producer, Push};
pub use raw::RawMemory;
pub use sync::{AtomicU32, AtomicU64};

#[cfg(test)]
mod tests;
