//! The consuming end of a ring: every value from the producer is validated.

use std::ops::Deref;

use crate::error::{corrupt, RingError};
use crate::layout::{
    align8, decode_record_header, RingHeader, Sleeper, AWAKE, MAX_START_COUNTER, RECORD_HEADER,
    TAG_DATA, TAG_PAD,
};
use crate::memory::Memory;
use crate::producer::check_capacity;
use crate::record::Record;
use crate::sync::Ordering;

/// Bytes of a record fetched ahead of parsing it (four cache lines).
const PREFETCH: u64 = 256;

/// Outcome of [`Consumer::try_pop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pop<R> {
    /// No record available.
    Empty,
    /// A record was handed to the closure and consumed.
    Done {
        /// What the closure returned.
        value: R,
        /// The producer had announced sleep waiting for space, so
        /// `space_bell` was incremented: the caller must `FUTEX_WAKE` it.
        wake: bool,
    },
}

/// Reads records from a ring. One consumer per ring.
#[derive(Debug)]
pub struct Consumer<H, M: Memory> {
    /// The shared control block: a reference, or a handle that keeps the
    /// memory it lies in mapped.
    hdr: H,
    mem: M,
    cap: u64,
    /// Our head: the only writer of `hdr.head` is us.
    head: u64,
    /// Last validated tail read from the producer.
    tail: u64,
    sleeper: Sleeper,
}

impl<H: Deref<Target = RingHeader>, M: Memory> Consumer<H, M> {
    /// A consumer over `hdr` and `mem` (whose length is the capacity).
    ///
    /// # Errors
    /// A capacity that is not a power of two in range, or header values the
    /// ring cannot start from.
    pub fn new(hdr: H, mem: M) -> Result<Self, RingError> {
        check_capacity(mem.len())?;
        let cap = mem.len() as u64;
        let head = hdr.head.load(Ordering::Acquire);
        if !head.is_multiple_of(8) {
            return Err(corrupt("initial head is not a multiple of 8", head, 8));
        }
        if head > MAX_START_COUNTER {
            return Err(corrupt(
                "initial head is too large",
                head,
                MAX_START_COUNTER,
            ));
        }
        let mut c = Consumer {
            hdr,
            mem,
            cap,
            head,
            tail: head,
            sleeper: Sleeper::default(),
        };
        c.refresh_tail()?;
        Ok(c)
    }

    /// The last sleep epoch this consumer announced: a process that takes
    /// the ring over from it goes on after it ([`Self::continue_epochs`]).
    pub fn sleep_epoch(&self) -> u32 {
        self.sleeper.epoch()
    }

    /// Goes on after sleep epoch `epoch`, the last one a predecessor
    /// announced on this side of the ring (a server handing its sessions
    /// to a successor): the peer remembers which epoch it woke last, so a
    /// new consumer starting again from 1 could announce that very epoch and
    /// never be woken.
    pub fn continue_epochs(&mut self, epoch: u32) {
        self.sleeper.continue_after(epoch);
    }

    /// The shared header.
    pub fn header(&self) -> &RingHeader {
        &self.hdr
    }

    /// Says which CPU this side waits on ([`crate::SleepLine::cpu`]; a hint for
    /// the producer's side, never part of the doorbell's rules).
    pub fn say_cpu(&self, cpu: u32) {
        let v = cpu.saturating_add(1);
        if self.hdr.data_sleep.cpu.load(Ordering::Relaxed) != v {
            self.hdr.data_sleep.cpu.store(v, Ordering::Relaxed);
        }
    }

    /// Largest payload of a valid record.
    fn max_record(&self) -> u64 {
        self.cap / 2 - RECORD_HEADER as u64
    }

    fn validate_tail(&mut self, t: u64) -> Result<(), RingError> {
        if t < self.tail {
            return Err(corrupt("tail moved backwards", t, self.tail));
        }
        if t - self.head > self.cap {
            return Err(corrupt(
                "tail is more than the capacity ahead of head",
                t - self.head,
                self.cap,
            ));
        }
        if !t.is_multiple_of(8) {
            return Err(corrupt("tail is not a multiple of 8", t, 8));
        }
        self.tail = t;
        Ok(())
    }

    fn refresh_tail(&mut self) -> Result<(), RingError> {
        // Acquire pairs with the producer's `tail.swap` (Release): the record
        // bytes are visible once the tail covering them is.
        let t = self.hdr.tail.load(Ordering::Acquire);
        self.validate_tail(t)
    }

    /// Whether a record is available.
    ///
    /// # Errors
    /// A corrupted tail.
    #[inline]
    pub fn has_data(&mut self) -> Result<bool, RingError> {
        if self.tail != self.head {
            return Ok(true);
        }
        self.refresh_tail()?;
        Ok(self.tail != self.head)
    }

    /// Hands the next data record to `f`, then frees its space.
    ///
    /// # Errors
    /// Any invalid value written by the producer; nothing is consumed then.
    #[inline(always)]
    pub fn try_pop<R>(&mut self, f: impl FnOnce(Record<'_, M>) -> R) -> Result<Pop<R>, RingError> {
        if !self.has_data()? {
            return Ok(Pop::Empty);
        }
        let mask = self.cap - 1;
        let mut head = self.head;
        // Fetch the record's first lines together, before its length is
        // known: otherwise each line is a cache miss waiting on the last.
        let pos = head & mask;
        let ahead = (self.tail - head).min(self.cap - pos).min(PREFETCH);
        self.mem.prefetch(pos as usize, ahead as usize);
        // At most one pad precedes a data record.
        for _ in 0..2 {
            let avail = self.tail - head;
            if avail < RECORD_HEADER as u64 {
                return Err(corrupt(
                    "record header beyond the published bytes",
                    avail,
                    RECORD_HEADER as u64,
                ));
            }
            let pos = head & mask;
            let to_end = self.cap - pos;
            let mut hb = [0u8; RECORD_HEADER];
            self.mem.read(pos as usize, &mut hb);
            let (len, tag) = decode_record_header(&hb);
            let len = u64::from(len);
            match tag {
                TAG_PAD => {
                    if len + RECORD_HEADER as u64 != to_end {
                        return Err(corrupt(
                            "pad record does not end at the buffer's end",
                            len,
                            to_end,
                        ));
                    }
                    if to_end > avail {
                        return Err(corrupt("pad record runs past the tail", to_end, avail));
                    }
                    head += to_end;
                }
                TAG_DATA => {
                    if len > self.max_record() {
                        return Err(corrupt(
                            "record length over the record limit",
                            len,
                            self.max_record(),
                        ));
                    }
                    let rec = RECORD_HEADER as u64 + align8(len);
                    if rec > to_end {
                        return Err(corrupt(
                            "record runs past the end of the buffer",
                            rec,
                            to_end,
                        ));
                    }
                    if rec > avail {
                        return Err(corrupt("record runs past the tail", rec, avail));
                    }
                    let value = f(Record::new(
                        &self.mem,
                        pos as usize + RECORD_HEADER,
                        len as usize,
                    ));
                    self.head = head + rec;
                    // Release pairs with the producer's Acquire load of `head`:
                    // our copies out are done before the space is reused. An
                    // RMW for the same reason as the producer's tail swap.
                    self.hdr.head.swap(self.head, Ordering::AcqRel);
                    // Acquire pairs with the producer's Release store of its epoch.
                    let wake = self
                        .sleeper
                        .owes_wake(self.hdr.space_sleep.load(Ordering::Acquire));
                    if wake {
                        // Release pairs with the bell load in the producer's `prepare_sleep`.
                        self.hdr.space_bell.fetch_add(1, Ordering::AcqRel);
                    }
                    return Ok(Pop::Done { value, wake });
                }
                other => return Err(corrupt("unknown record tag", u64::from(other), 0)),
            }
        }
        Err(corrupt("two pad records in a row", head, self.tail))
    }

    /// Announces that the consumer is about to sleep waiting for data, then
    /// re-checks. `Ok(Some(seen))`: sleep with `FUTEX_WAIT(data_bell, seen)`;
    /// `Ok(None)`: data arrived, do not sleep. Either way call
    /// [`Consumer::finish_sleep`] afterwards.
    ///
    /// # Errors
    /// A corrupted tail.
    pub fn prepare_sleep(&mut self) -> Result<Option<u32>, RingError> {
        // Read the bell before announcing: a wake-up after this read changes
        // the bell, so the futex wait on `seen` cannot sleep through it.
        let seen = self.hdr.data_bell.load(Ordering::Acquire);
        let epoch = self.sleeper.next_epoch();
        // Release pairs with the producer's Acquire load of `data_sleep`.
        self.hdr.data_sleep.store(epoch, Ordering::Release);
        // RMW: whichever of this and the producer's tail swap comes second
        // reads from the first (see the crate docs).
        let t = self.hdr.tail.fetch_add(0, Ordering::AcqRel);
        self.validate_tail(t)?;
        if self.tail != self.head {
            return Ok(None);
        }
        Ok(Some(seen))
    }

    /// Marks the consumer awake after a futex wait.
    pub fn finish_sleep(&self) {
        self.hdr.data_sleep.store(AWAKE, Ordering::Release);
    }
}
