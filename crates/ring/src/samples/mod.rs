//! Publish/subscribe's shared state between a publisher and one of its
//! subscribers, as a pure algorithm (no syscalls, model-checked with loom
//! in `tests/loom_samples.rs`).
//!
//! The samples themselves lie in the publisher's pool (fixed slots in a
//! memfd the subscriber maps read-only); this state carries **references**
//! to them:
//! - the **queue** ([`QueueProducer`] → [`QueueConsumer`]): entries
//!   `(seq, slot, len)` the publisher queued for this subscriber. The
//!   subscriber takes the oldest with a compare-exchange on `head`; the
//!   publisher may drop the oldest the same way when the queue is full
//!   (the subscriber then sees a gap in `seq`, which it counts as missed).
//!   Exactly one of the two wins each entry.
//! - the **returns**: a single-producer ring of slot numbers the
//!   subscriber gives back when it has read a sample it took.
//!
//! Reference counts are the publisher's own, never in shared memory: it
//! knows which slot each queued position holds, sees positions leave the
//! queue (taken: now held by the subscriber; dropped: its own reference
//! again), and accepts a returned slot only if that subscriber holds it.
//! So a subscriber can neither free a sample someone else reads nor keep
//! more than its bound, and when it dies the publisher releases every
//! reference it had queued or held, without reading anything it wrote.
//!
//! # Memory order
//! - Entries are written (relaxed) before the publisher's `tail.swap`
//!   (release); the subscriber loads `tail` (acquire) before it reads them.
//! - The subscriber reads an entry, then moves `head` past it with a
//!   compare-exchange (acquire-release). If that succeeds, no one dropped
//!   the position first, so the publisher had not reused the entry (it
//!   writes position `p` only after it saw `head > p - depth`, by an
//!   acquire load that reads from the move past `p - depth`): the entry
//!   read is the one queued. If it fails, the subscriber discards what it
//!   read, which may be torn, and tries the new head.
//! - A return is pushed (`returned.swap`, release) after the take it
//!   returns; the publisher loads `returned` (acquire) **before** `head`,
//!   so every returned slot's take is already visible when it is checked.
//!
//! # Doorbells
//! The subscriber sleeps on `data_bell` and the publisher, when it waits
//! for room under back-pressure, on `space_bell`, with the same
//! epoch protocol as the byte ring (see the crate's docs): a sleeper
//! stores its epoch, then does a read-modify-write on the counter the
//! other side moves (`tail`, `head`), and sleeps only if nothing changed;
//! the other side moves that counter with a read-modify-write, then loads
//! the sleep word.
//!
//! # Hostile peers
//! Each side validates what the other wrote: the subscriber checks
//! `tail - head <= depth`, that `slot < slots` and `len <= sample_size`
//! (the caller's bounds) and that `seq` grows; the publisher checks that
//! `head` never goes back or past `tail`, that `returned` never passes
//! what was taken, and that each returned slot is held. A violation is
//! [`RingError::Corrupt`](crate::RingError::Corrupt): the caller ends that
//! subscriber (or that publisher's topic) and nothing else.

mod consumer;
mod layout;
mod producer;

pub use consumer::{QueueConsumer, Taken};
pub use layout::{Entry, QueueHeader, NO_SLOT};
pub use producer::{QueueProducer, Queued};
