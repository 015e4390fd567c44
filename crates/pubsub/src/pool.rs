//! The publisher's pool: fixed slots in a memfd its subscribers map
//! read-only, each with a reference count kept here (never in shared
//! memory), and the history of the last samples for late joiners.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;

use shmlink_sys::memfd;
use shmlink_sys::Mapping;

use crate::error::{io, Error, Result};
use crate::shared;

/// A sample as it lies in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) seq: u64,
    pub(crate) slot: u32,
    pub(crate) len: u32,
}

#[derive(Debug)]
pub(crate) struct Pool {
    map: Mapping,
    stride: usize,
    /// References per slot: queued to or held by subscribers, or kept in
    /// the history.
    refs: Vec<u32>,
    free: Vec<u32>,
    history: VecDeque<Stored>,
    keep: usize,
}

impl Pool {
    /// A pool of `slots` slots of `stride` bytes keeping the last `keep`
    /// samples, and its descriptor (sealed: subscribers map it read-only).
    pub(crate) fn new(
        topic: &str,
        slots: u32,
        stride: usize,
        keep: u32,
    ) -> Result<(Pool, OwnedFd)> {
        let len = u64::from(slots) * stride as u64;
        let (fd, map) = memfd::create_arena("shmlink-pubsub-pool", len).map_err(io(format!(
            "topic '{topic}': a pool of {slots} slots of {stride} bytes ({len} bytes of shared memory)"
        )))?;
        let pool = Pool {
            map,
            stride,
            refs: vec![0; slots as usize],
            free: (0..slots).rev().collect(),
            history: VecDeque::with_capacity(keep as usize),
            keep: keep as usize,
        };
        Ok((pool, fd))
    }

    /// A free slot to write the next sample into, its bytes.
    pub(crate) fn alloc(&mut self, len: usize) -> Result<(u32, &mut [u8])> {
        let slot = self.free.pop().ok_or_else(|| {
            Error::Protocol(format!(
                "the pool's {} slots are all referenced: a subscriber holds more than it may (this is a bug of shmlink)",
                self.refs.len()
            ))
        })?;
        let off = slot as usize * self.stride;
        let bytes = shared::slot_mut(&mut self.map, off, len)
            .ok_or_else(|| Error::Protocol(format!("pool slot {slot} outside the pool")))?;
        Ok((slot, bytes))
    }

    /// The bytes of a sample (to copy for a subscriber over a socket).
    pub(crate) fn bytes(&mut self, s: Stored) -> &[u8] {
        let off = s.slot as usize * self.stride;
        shared::slot_mut(&mut self.map, off, s.len as usize).map_or(&[], |b| &*b)
    }

    /// One more reference to `slot`.
    pub(crate) fn add_ref(&mut self, slot: u32) {
        if let Some(n) = self.refs.get_mut(slot as usize) {
            *n += 1;
        }
    }

    /// One reference fewer; the slot is free when none is left.
    pub(crate) fn release(&mut self, slot: u32) {
        if let Some(n) = self.refs.get_mut(slot as usize) {
            if *n > 0 {
                *n -= 1;
                if *n == 0 {
                    self.free.push(slot);
                }
            }
        }
    }

    /// Frees a slot just written if nothing referenced it.
    pub(crate) fn settle(&mut self, slot: u32) {
        if self.refs.get(slot as usize) == Some(&0) {
            self.free.push(slot);
        }
    }

    /// Keeps `s` in the history (one reference), forgetting the oldest
    /// past its length.
    pub(crate) fn remember(&mut self, s: Stored) {
        if self.keep == 0 {
            return;
        }
        self.add_ref(s.slot);
        self.history.push_back(s);
        if self.history.len() > self.keep {
            if let Some(old) = self.history.pop_front() {
                self.release(old.slot);
            }
        }
    }

    /// The history, oldest first.
    pub(crate) fn history(&self) -> Vec<Stored> {
        self.history.iter().copied().collect()
    }

    /// Slots free now (for tests and stats).
    pub(crate) fn free_slots(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_come_back_when_their_last_reference_goes() {
        let (mut p, _fd) = Pool::new("t", 3, 64, 1).expect("pool");
        let (a, bytes) = p.alloc(5).expect("slot");
        bytes.copy_from_slice(b"hello");
        p.add_ref(a);
        p.add_ref(a);
        p.remember(Stored {
            seq: 0,
            slot: a,
            len: 5,
        });
        p.settle(a);
        assert_eq!(p.free_slots(), 2);
        p.release(a);
        p.release(a);
        assert_eq!(p.free_slots(), 2, "the history still keeps it");
        assert_eq!(
            p.bytes(Stored {
                seq: 0,
                slot: a,
                len: 5
            }),
            b"hello"
        );
        let (b, _) = p.alloc(1).expect("slot");
        p.remember(Stored {
            seq: 1,
            slot: b,
            len: 1,
        });
        assert_eq!(p.free_slots(), 2, "the history forgot the first");
        assert_eq!(
            p.history(),
            vec![Stored {
                seq: 1,
                slot: b,
                len: 1
            }]
        );
    }

    #[test]
    fn an_exhausted_pool_says_so_and_extra_releases_change_nothing() {
        let (mut p, _fd) = Pool::new("t", 1, 64, 0).expect("pool");
        let (a, _) = p.alloc(1).expect("slot");
        p.add_ref(a);
        assert!(p.alloc(1).is_err());
        p.release(a);
        p.release(a);
        p.release(99);
        assert_eq!(p.free_slots(), 1);
    }
}
