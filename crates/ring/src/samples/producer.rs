//! The publisher's end of one subscriber's queue.

use std::collections::VecDeque;
use std::ops::Deref;

use crate::error::{corrupt, RingError};
use crate::layout::{Sleeper, AWAKE};
use crate::samples::layout::{Entry, QueueHeader};
use crate::sync::{AtomicU32, Ordering};

/// The outcome of [`QueueProducer::try_queue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    /// Queued. `wake`: the subscriber sleeps; its data bell was rung and
    /// the caller must `FUTEX_WAKE` it.
    Done {
        /// Whether the caller must wake the subscriber.
        wake: bool,
    },
    /// The queue holds `depth` entries: drop the oldest
    /// ([`QueueProducer::drop_oldest`]) or wait for room, as the caller's
    /// policy says.
    Full,
}

/// The publisher's end: queues references, drops the oldest when told,
/// collects returns, and keeps the reference counts of what it queued
/// (see the module's docs).
#[derive(Debug)]
pub struct QueueProducer<H, E, R> {
    hdr: H,
    entries: E,
    returns: R,
    /// Entries queued (this side's copy of `tail`).
    tail: u64,
    /// `head` as last seen: positions below it left the queue.
    head: u64,
    /// Returns collected (this side's copy of `collected`).
    collected: u64,
    /// The slots of positions `head..tail`.
    queued: VecDeque<u32>,
    /// Per pool slot: references the subscriber took and has not returned.
    held: Vec<u32>,
    /// The sum of `held`.
    holding: u64,
    max_held: u64,
    sleeper: Sleeper,
}

impl<H, E, R> QueueProducer<H, E, R>
where
    H: Deref<Target = QueueHeader>,
    E: Deref<Target = [Entry]>,
    R: Deref<Target = [AtomicU32]>,
{
    /// The publisher's end of a fresh queue (all words zero) of
    /// `entries.len()` entries and `returns.len()` returns, over a pool of
    /// `slots` slots, whose subscriber may hold up to `max_held` samples.
    ///
    /// # Errors
    /// [`RingError::BadCapacity`] when either array is empty or the
    /// returns cannot hold what the subscriber may give back at once
    /// (`depth + max_held`).
    pub fn new(
        hdr: H,
        entries: E,
        returns: R,
        slots: u32,
        max_held: u32,
    ) -> Result<Self, RingError> {
        let need = entries.len() + max_held as usize;
        if entries.is_empty() || returns.len() < need || max_held == 0 {
            return Err(RingError::BadCapacity {
                capacity: returns.len(),
                min: need.max(1),
                max: usize::MAX,
            });
        }
        Ok(QueueProducer {
            hdr,
            entries,
            returns,
            tail: 0,
            head: 0,
            collected: 0,
            queued: VecDeque::new(),
            held: vec![0; slots as usize],
            holding: 0,
            max_held: u64::from(max_held),
            sleeper: Sleeper::default(),
        })
    }

    fn depth(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Entries queued and not yet taken (as last seen).
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    /// Whether nothing is queued (as last seen).
    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Samples the subscriber took and has not returned (as last seen).
    pub fn holding(&self) -> u64 {
        self.holding
    }

    /// Positions the subscriber took since the last look become held.
    fn see_head(&mut self, head: u64) -> Result<(), RingError> {
        if head < self.head || head > self.tail {
            return Err(corrupt(
                "queue head moved back or past the tail",
                head,
                self.tail,
            ));
        }
        while self.head < head {
            let slot = self
                .queued
                .pop_front()
                .ok_or_else(|| corrupt("queue head", head, self.tail))?;
            self.held[slot as usize] += 1;
            self.holding += 1;
            self.head += 1;
        }
        Ok(())
    }

    /// Catches up with the subscriber: what it took since the last look
    /// becomes held, and each slot it returned goes to `release` (the
    /// caller's reference count drops by one).
    ///
    /// # Errors
    /// [`RingError::Corrupt`] when the subscriber broke the protocol.
    pub fn collect(&mut self, release: &mut impl FnMut(u32)) -> Result<(), RingError> {
        // `returned` before `head`: every return's take is then visible.
        let returned = self.hdr.returned.load(Ordering::Acquire);
        let head = self.hdr.head.load(Ordering::Acquire);
        self.see_head(head)?;
        let cap = self.returns.len() as u64;
        if returned < self.collected || returned - self.collected > cap {
            return Err(corrupt("returns counter", returned, self.collected + cap));
        }
        if returned == self.collected {
            return self.check_holding();
        }
        while self.collected < returned {
            let slot = self.returns[(self.collected % cap) as usize].load(Ordering::Relaxed);
            match self.held.get_mut(slot as usize) {
                Some(n) if *n > 0 => *n -= 1,
                _ => {
                    return Err(corrupt(
                        "returned a slot it does not hold",
                        u64::from(slot),
                        self.held.len() as u64,
                    ))
                }
            }
            self.holding -= 1;
            self.collected += 1;
            release(slot);
        }
        self.hdr.collected.store(self.collected, Ordering::Release);
        self.check_holding()
    }

    /// A subscriber keeps at most `max_held` taken and not returned. Seen
    /// from here, `returned` was read before `head`, and between the two
    /// it may have taken and returned at most what was queued (`depth`):
    /// more than `max_held + depth` is a breach.
    fn check_holding(&self) -> Result<(), RingError> {
        let bound = self.max_held + self.depth();
        if self.holding > bound {
            return Err(corrupt(
                "samples held by the subscriber",
                self.holding,
                bound,
            ));
        }
        Ok(())
    }

    /// Queues sample `seq`, lying in `slot` with `len` bytes; on success
    /// the queue holds one reference to `slot` for the subscriber.
    ///
    /// # Errors
    /// [`RingError::Corrupt`] when the subscriber broke the protocol.
    pub fn try_queue(&mut self, seq: u64, slot: u32, len: u32) -> Result<Queued, RingError> {
        let depth = self.depth();
        if self.tail - self.head >= depth {
            let head = self.hdr.head.load(Ordering::Acquire);
            self.see_head(head)?;
            if self.tail - self.head >= depth {
                return Ok(Queued::Full);
            }
        }
        let entry = &self.entries[(self.tail % depth) as usize];
        entry.seq.store(seq, Ordering::Relaxed);
        entry
            .sample
            .store(u64::from(slot) << 32 | u64::from(len), Ordering::Relaxed);
        self.tail += 1;
        // A read-modify-write, for the doorbell (see the crate's docs).
        self.hdr.tail.swap(self.tail, Ordering::AcqRel);
        self.queued.push_back(slot);
        let sleep = self.hdr.data_sleep.load(Ordering::Acquire);
        let wake = self.sleeper.owes_wake(sleep);
        if wake {
            self.hdr.data_bell.fetch_add(1, Ordering::AcqRel);
        }
        Ok(Queued::Done { wake })
    }

    /// Drops the oldest queued entry: `Some(slot)`, whose reference is the
    /// caller's again (the subscriber will see the gap in `seq`), or `None`
    /// when the subscriber took it first or nothing is queued (there is
    /// room now).
    ///
    /// # Errors
    /// [`RingError::Corrupt`] when the subscriber broke the protocol.
    pub fn drop_oldest(&mut self) -> Result<Option<u32>, RingError> {
        let head = self.hdr.head.load(Ordering::Acquire);
        self.see_head(head)?;
        if self.head == self.tail {
            return Ok(None);
        }
        match self.hdr.head.compare_exchange(
            self.head,
            self.head + 1,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let slot = self
                    .queued
                    .pop_front()
                    .ok_or_else(|| corrupt("queue head", self.head, self.tail))?;
                self.head += 1;
                Ok(Some(slot))
            }
            Err(now) => {
                self.see_head(now)?;
                Ok(None)
            }
        }
    }

    /// About to wait for room: announces the sleep, then looks once more.
    /// `Some(seen)`: still full, `FUTEX_WAIT(space_bell, seen)`; `None`:
    /// there is room. Either way, call [`finish_sleep`](Self::finish_sleep)
    /// after.
    ///
    /// # Errors
    /// [`RingError::Corrupt`] when the subscriber broke the protocol.
    pub fn prepare_sleep(&mut self) -> Result<Option<u32>, RingError> {
        let seen = self.hdr.space_bell.load(Ordering::Acquire);
        let epoch = self.sleeper.next_epoch();
        self.hdr.space_sleep.store(epoch, Ordering::Release);
        let head = self.hdr.head.fetch_add(0, Ordering::AcqRel);
        self.see_head(head)?;
        Ok((self.tail - self.head >= self.depth()).then_some(seen))
    }

    /// Awake again.
    pub fn finish_sleep(&self) {
        self.hdr.space_sleep.store(AWAKE, Ordering::Release);
    }

    /// The header (for the caller's futex calls).
    pub fn header(&self) -> &QueueHeader {
        &self.hdr
    }

    /// The subscriber is gone: every reference it had queued or held goes
    /// to `release`, once each.
    pub fn release_all(&mut self, release: &mut impl FnMut(u32)) {
        for slot in self.queued.drain(..) {
            release(slot);
        }
        for (slot, n) in self.held.iter_mut().enumerate() {
            for _ in 0..*n {
                release(slot as u32);
            }
            *n = 0;
        }
        self.holding = 0;
        self.head = self.tail;
    }
}
