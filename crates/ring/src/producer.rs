//! The producing end of a ring.

use std::ops::Deref;

use crate::error::{corrupt, RingError};
use crate::layout::{
    align8, encode_record_header, RingHeader, Sleeper, AWAKE, MAX_CAPACITY, MAX_START_COUNTER,
    MIN_CAPACITY, RECORD_HEADER, TAG_DATA, TAG_PAD,
};
use crate::memory::Memory;
use crate::sync::Ordering;

/// Outcome of [`Producer::try_push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Not enough free space right now; nothing was written.
    Full,
    /// Published. `wake`: the consumer had announced sleep, so `data_bell`
    /// was incremented; the caller must `FUTEX_WAKE` it.
    Done {
        /// Whether a wake-up is owed.
        wake: bool,
    },
}

pub(crate) fn check_capacity(cap: usize) -> Result<(), RingError> {
    if !cap.is_power_of_two() || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&cap) {
        return Err(RingError::BadCapacity {
            capacity: cap,
            min: MIN_CAPACITY,
            max: MAX_CAPACITY,
        });
    }
    Ok(())
}

/// Writes records into a ring. One producer per ring.
#[derive(Debug)]
pub struct Producer<H, M: Memory> {
    /// The shared control block: a reference, or a handle that keeps the
    /// memory it lies in mapped.
    hdr: H,
    mem: M,
    cap: u64,
    /// Our tail: the only writer of `hdr.tail` is us.
    tail: u64,
    /// Last validated head read from the consumer.
    head: u64,
    sleeper: Sleeper,
}

impl<H: Deref<Target = RingHeader>, M: Memory> Producer<H, M> {
    /// A producer over `hdr` and `mem` (whose length is the capacity).
    ///
    /// # Errors
    /// A capacity that is not a power of two in range, or header values the
    /// ring cannot start from.
    pub fn new(hdr: H, mem: M) -> Result<Self, RingError> {
        check_capacity(mem.len())?;
        let cap = mem.len() as u64;
        let tail = hdr.tail.load(Ordering::Acquire);
        let head = hdr.head.load(Ordering::Acquire);
        if tail > MAX_START_COUNTER {
            return Err(corrupt(
                "initial tail is too large",
                tail,
                MAX_START_COUNTER,
            ));
        }
        if !tail.is_multiple_of(8) || !head.is_multiple_of(8) || head > tail || tail - head > cap {
            return Err(corrupt("initial head/tail", head, tail));
        }
        Ok(Producer {
            hdr,
            mem,
            cap,
            tail,
            head,
            sleeper: Sleeper::default(),
        })
    }

    /// The ring's capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.cap as usize
    }

    /// Largest payload one record may carry: half the ring less the record
    /// header, so a record always fits once the ring drains, even after a pad.
    pub fn max_record(&self) -> usize {
        (self.cap / 2) as usize - RECORD_HEADER
    }

    /// The last sleep epoch this producer announced: a process that takes
    /// the ring over from it goes on after it ([`Self::continue_epochs`]).
    pub fn sleep_epoch(&self) -> u32 {
        self.sleeper.epoch()
    }

    /// Goes on after sleep epoch `epoch`, the last one a predecessor
    /// announced on this side of the ring (a server handing its sessions
    /// to a successor): the peer remembers which epoch it woke last, so a
    /// new producer starting again from 1 could announce that very epoch and
    /// never be woken.
    pub fn continue_epochs(&mut self, epoch: u32) {
        self.sleeper.continue_after(epoch);
    }

    /// The shared header.
    pub fn header(&self) -> &RingHeader {
        &self.hdr
    }

    /// The CPU the consumer last said it waits on ([`crate::Consumer::say_cpu`]),
    /// if it said one: a hint a hostile consumer may fake, good only for
    /// choosing how this side waits.
    pub fn consumer_cpu(&self) -> Option<u32> {
        self.hdr
            .data_sleep
            .cpu
            .load(Ordering::Relaxed)
            .checked_sub(1)
    }

    /// Whether the consumer has released every record published so far, as
    /// its shared head says (a hostile consumer can say anything here; use
    /// it only where a lie harms nobody but the liar).
    pub fn all_consumed(&self) -> bool {
        self.hdr.head.load(Ordering::Acquire) == self.tail
    }

    /// Bytes of ring needed for a payload of `len` at the current tail:
    /// (padding to the end of the buffer, the record itself).
    fn need(&self, len: usize) -> (u64, u64) {
        let rec = RECORD_HEADER as u64 + align8(len as u64);
        let pos = self.tail & (self.cap - 1);
        let to_end = self.cap - pos;
        if rec <= to_end {
            (0, rec)
        } else {
            (to_end, rec)
        }
    }

    fn free(&self) -> u64 {
        self.cap - (self.tail - self.head)
    }

    fn validate_head(&mut self, h: u64) -> Result<(), RingError> {
        if h < self.head {
            return Err(corrupt("head moved backwards", h, self.head));
        }
        if h > self.tail {
            return Err(corrupt("head is ahead of tail", h, self.tail));
        }
        if !h.is_multiple_of(8) {
            return Err(corrupt("head is not a multiple of 8", h, 8));
        }
        self.head = h;
        Ok(())
    }

    fn refresh_head(&mut self) -> Result<(), RingError> {
        // Acquire pairs with the consumer's `head.swap` (Release) after it
        // copied the record out: the space is really free once we see it.
        let h = self.hdr.head.load(Ordering::Acquire);
        self.validate_head(h)
    }

    /// Whether a record of `len` payload bytes fits now.
    ///
    /// # Errors
    /// A corrupted head.
    pub fn has_space(&mut self, len: usize) -> Result<bool, RingError> {
        let (pad, rec) = self.need(len);
        if self.free() >= pad + rec {
            return Ok(true);
        }
        self.refresh_head()?;
        Ok(self.free() >= pad + rec)
    }

    /// Appends one record whose payload is the concatenation of `parts`.
    ///
    /// # Errors
    /// [`RingError::TooLarge`] over [`Producer::max_record`]; a corrupted head.
    #[inline(always)]
    pub fn try_push(&mut self, parts: &[&[u8]]) -> Result<Push, RingError> {
        // Saturating: many parts (even the same slice repeated) cannot wrap
        // the sum into a small length.
        let len = parts.iter().fold(0usize, |n, p| n.saturating_add(p.len()));
        if len > self.max_record() {
            return Err(RingError::TooLarge {
                len,
                max: self.max_record(),
            });
        }
        let (pad, rec) = self.need(len);
        if self.free() < pad + rec {
            self.refresh_head()?;
            if self.free() < pad + rec {
                return Ok(Push::Full);
            }
        }
        let mask = self.cap - 1;
        let mut pos = (self.tail & mask) as usize;
        if pad > 0 {
            self.mem.write(
                pos,
                &encode_record_header((pad - RECORD_HEADER as u64) as u32, TAG_PAD),
            );
            pos = 0;
        }
        self.mem
            .write(pos, &encode_record_header(len as u32, TAG_DATA));
        let mut at = pos + RECORD_HEADER;
        for p in parts {
            self.mem.write(at, p);
            at += p.len();
        }
        self.tail += pad + rec;
        // Release pairs with the consumer's Acquire load of `tail`: the bytes
        // written above are visible before the new tail. An RMW (not a store)
        // so that, if the consumer's `fetch_add(0)` in `prepare_sleep` came
        // first, this reads from it and the consumer's sleep announcement
        // (sequenced before it) is visible to the load below.
        self.hdr.tail.swap(self.tail, Ordering::AcqRel);
        // Acquire pairs with the consumer's Release store of its epoch.
        let wake = self
            .sleeper
            .owes_wake(self.hdr.data_sleep.load(Ordering::Acquire));
        if wake {
            // Release pairs with the Acquire load of the bell in the
            // consumer's `prepare_sleep`: a wake-up it did not sleep through
            // makes its futex wait return at once.
            self.hdr.data_bell.fetch_add(1, Ordering::AcqRel);
        }
        Ok(Push::Done { wake })
    }

    /// Announces that the producer is about to sleep waiting for room for
    /// `len` payload bytes, then re-checks. `Ok(Some(seen))`: sleep with
    /// `FUTEX_WAIT(space_bell, seen)`; `Ok(None)`: room appeared, do not sleep.
    /// Either way call [`Producer::finish_sleep`] afterwards.
    ///
    /// # Errors
    /// A corrupted head.
    pub fn prepare_sleep(&mut self, len: usize) -> Result<Option<u32>, RingError> {
        // Read the bell before announcing: a wake-up after this read changes
        // the bell, so the futex wait on `seen` cannot sleep through it.
        let seen = self.hdr.space_bell.load(Ordering::Acquire);
        let epoch = self.sleeper.next_epoch();
        // Release pairs with the consumer's Acquire load of `space_sleep`.
        self.hdr.space_sleep.store(epoch, Ordering::Release);
        // RMW: whichever of this and the consumer's head swap comes second
        // reads from the first (see the crate docs).
        let h = self.hdr.head.fetch_add(0, Ordering::AcqRel);
        self.validate_head(h)?;
        let (pad, rec) = self.need(len);
        if self.free() >= pad + rec {
            return Ok(None);
        }
        Ok(Some(seen))
    }

    /// Marks the producer awake after a futex wait.
    pub fn finish_sleep(&self) {
        self.hdr.space_sleep.store(AWAKE, Ordering::Release);
    }
}
