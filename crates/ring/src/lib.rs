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
//! Consumer, about to sleep ([`Consumer::prepare_sleep`]): `seen =
//! data_bell.load(Acquire)`; `data_sleep.store(epoch, Release)`; `t =
//! tail.fetch_add(0, AcqRel)` (a read-modify-write); if `t == head` the caller
//! does `FUTEX_WAIT(data_bell, seen)`; then [`Consumer::finish_sleep`] stores
//! 0 into `data_sleep`.
//! Producer, after writing a record ([`Producer::try_push`]):
//! `tail.swap(new, AcqRel)` (a read-modify-write, not a store); `e =
//! data_sleep.load(Acquire)`; if `e` is an epoch it has not woken yet,
//! `data_bell.fetch_add(1, AcqRel)` and the caller does `FUTEX_WAKE`. So a
//! burst of records costs one wake-up per sleep.
//!
//! Proof sketch (happens-before only). Both operations on `tail` are
//! read-modify-writes, so whichever is later in `tail`'s modification order
//! reads from the earlier:
//! - The consumer's `fetch_add` is later: it reads the new tail and does not
//!   sleep.
//! - The producer's `swap` is later: it reads from the consumer's
//!   `fetch_add` (release), so it synchronizes with it (acquire), and the
//!   epoch store, sequenced before the `fetch_add`, happens before the
//!   producer's load of `data_sleep`. By coherence that load sees the epoch
//!   (or a later value: only the consumer's own 0 after it woke), so the
//!   producer increments the bell. The consumer's read of `seen` happened
//!   before that increment, so it read an older value, and
//!   `FUTEX_WAIT(data_bell, seen)` returns at once if it had not yet slept,
//!   or is woken by the `FUTEX_WAKE` after the increment if it had.
//!
//! The producer waiting for space is symmetric (`head`, `space_bell`,
//! `space_sleep`). Data visibility is the usual pair: the producer's `swap`
//! of `tail` (release) and the consumer's load of `tail` (acquire) order
//! the record bytes; the consumer's `swap` of `head` (release) and the
//! producer's load of `head` (acquire) order the copies out before the
//! space is reused.
//!
//! The argument needs no SeqCst (loom models SeqCst as AcqRel) and no word
//! with two racing plain writers. *Why not one SLEEPING/AWAKE flag per side,
//! written by both (sleeper stores SLEEPING, waker swaps AWAKE)?* That is
//! also correct under the C++ model, but loom cannot check it: it tracks
//! only a partial modification order for a word with two writers, and
//! reports a lost wake-up in an execution the C++ model forbids (the
//! waker's acquire load returns an AWAKE stored before a SLEEPING that
//! happens-before the load). A protocol that cannot be model-checked is
//! not worth its one word; single-writer words pass loom and a canary with
//! the classic bug is still caught.
//!
//! Limit: epochs are `u32` and skip 0. The waker skips an epoch equal to the
//! last one it woke, so if the sleeper announced 2^32 - 1 further sleeps,
//! none of them seen by the waker, and then slept on the same epoch
//! again, that one wake-up would be missed. A caller that sleeps with a
//! timeout (as the core does on the client side) recovers when the
//! timeout ends.

mod consumer;
mod error;
mod layout;
mod memory;
mod producer;
mod raw;
mod record;
pub mod samples;
mod sync;

pub use consumer::{Consumer, Pop};
pub use error::RingError;
pub use layout::{
    CachePadded, RingHeader, SleepLine, AWAKE, MAX_CAPACITY, MAX_START_COUNTER, MIN_CAPACITY,
    RECORD_HEADER, TAG_DATA, TAG_PAD,
};
pub use memory::Memory;
pub use producer::{Producer, Push};
pub use raw::RawMemory;
pub use record::Record;
pub use sync::{AtomicU32, AtomicU64};

#[cfg(test)]
mod tests;
