//! The subscriber's end of its queue.

use std::ops::Deref;

use crate::error::{corrupt, RingError};
use crate::layout::{Sleeper, AWAKE};
use crate::samples::layout::{Entry, QueueHeader};
use crate::sync::{AtomicU32, Ordering};

/// A reference taken from the queue: the subscriber holds `slot` until it
/// gives it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The publisher's sequence number of the sample.
    pub seq: u64,
    /// Its slot in the pool (checked by the caller against the pool).
    pub slot: u32,
    /// Its length in bytes (checked by the caller against the slot size).
    pub len: u32,
    /// The publisher waits for room: the caller must `FUTEX_WAKE` its
    /// space bell (rung already).
    pub wake: bool,
}

/// Most times a take retries because the head moved under it (the
/// publisher dropping entries) before the queue counts as corrupt. A
/// retry follows a lost race of a few nanoseconds against one drop, and
/// each drop needs a sample published: 4,096 lost in a row do not happen
/// with an honest publisher, and a hostile one costs a take ~10 µs at most.
const MAX_RETRIES: u32 = 1 << 12;

/// The subscriber's end: takes references, gives slots back, sleeps.
#[derive(Debug)]
pub struct QueueConsumer<H, E, R> {
    hdr: H,
    entries: E,
    returns: R,
    /// Slots given back (this side's copy of `returned`).
    returned: u64,
    sleeper: Sleeper,
}

impl<H, E, R> QueueConsumer<H, E, R>
where
    H: Deref<Target = QueueHeader>,
    E: Deref<Target = [Entry]>,
    R: Deref<Target = [AtomicU32]>,
{
    /// The subscriber's end of a fresh queue.
    ///
    /// # Errors
    /// [`RingError::BadCapacity`] when either array is empty.
    pub fn new(hdr: H, entries: E, returns: R) -> Result<Self, RingError> {
        if entries.is_empty() || returns.is_empty() {
            return Err(RingError::BadCapacity {
                capacity: 0,
                min: 1,
                max: usize::MAX,
            });
        }
        Ok(QueueConsumer {
            hdr,
            entries,
            returns,
            returned: 0,
            sleeper: Sleeper::default(),
        })
    }

    /// Takes the oldest queued reference, if any.
    ///
    /// # Errors
    /// [`RingError::Corrupt`] when the publisher broke the protocol.
    pub fn try_take(&mut self) -> Result<Option<Taken>, RingError> {
        let depth = self.entries.len() as u64;
        for _ in 0..MAX_RETRIES {
            // `head` first: `tail` read after it is never behind it (the
            // move to `head` followed a tail at least as far).
            let head = self.hdr.head.load(Ordering::Acquire);
            let tail = self.hdr.tail.load(Ordering::Acquire);
            if head == tail {
                return Ok(None);
            }
            if head > tail || tail - head > depth {
                // A head gone stale meanwhile (the publisher dropped and
                // queued since): look again. A publisher writing such
                // values for good runs out the retries.
                continue;
            }
            let entry = &self.entries[(head % depth) as usize];
            let seq = entry.seq.load(Ordering::Relaxed);
            let sample = entry.sample.load(Ordering::Relaxed);
            if self
                .hdr
                .head
                .compare_exchange(head, head + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue; // dropped by the publisher meanwhile: what was read may be torn
            }
            let sleep = self.hdr.space_sleep.load(Ordering::Acquire);
            let wake = self.sleeper.owes_wake(sleep);
            if wake {
                self.hdr.space_bell.fetch_add(1, Ordering::AcqRel);
            }
            return Ok(Some(Taken {
                seq,
                slot: (sample >> 32) as u32,
                len: sample as u32,
                wake,
            }));
        }
        Err(corrupt(
            "queue head and tail kept moving or out of bounds",
            u64::from(MAX_RETRIES),
            0,
        ))
    }

    /// Gives `slot` back; `false` when the returns are full (the publisher
    /// has not collected them yet: try again later).
    ///
    /// # Errors
    /// [`RingError::Corrupt`] when the publisher broke the protocol.
    pub fn give_back(&mut self, slot: u32) -> Result<bool, RingError> {
        let cap = self.returns.len() as u64;
        let collected = self.hdr.collected.load(Ordering::Acquire);
        if collected > self.returned {
            return Err(corrupt("returns collected", collected, self.returned));
        }
        if self.returned - collected >= cap {
            return Ok(false);
        }
        self.returns[(self.returned % cap) as usize].store(slot, Ordering::Relaxed);
        self.returned += 1;
        self.hdr.returned.swap(self.returned, Ordering::AcqRel);
        Ok(true)
    }

    /// Whether something is queued.
    pub fn has_data(&self) -> bool {
        let head = self.hdr.head.load(Ordering::Acquire);
        self.hdr.tail.load(Ordering::Acquire) != head
    }

    /// About to sleep: announces it, then looks once more. `Some(seen)`:
    /// still empty, `FUTEX_WAIT(data_bell, seen)`; `None`: something
    /// arrived. Either way, call [`finish_sleep`](Self::finish_sleep) after.
    pub fn prepare_sleep(&mut self) -> Option<u32> {
        let seen = self.hdr.data_bell.load(Ordering::Acquire);
        let epoch = self.sleeper.next_epoch();
        self.hdr.data_sleep.store(epoch, Ordering::Release);
        let tail = self.hdr.tail.fetch_add(0, Ordering::AcqRel);
        let head = self.hdr.head.load(Ordering::Acquire);
        (tail == head).then_some(seen)
    }

    /// Awake again.
    pub fn finish_sleep(&self) {
        self.hdr.data_sleep.store(AWAKE, Ordering::Release);
    }

    /// The header (for the caller's futex calls).
    pub fn header(&self) -> &QueueHeader {
        &self.hdr
    }
}
