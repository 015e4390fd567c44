//! The owner's side: segments it creates, buffers it loans out and lends to
//! its peer, and the releases that bring them back.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use shmlink_sys::Mapping;

use crate::classes::{class_size, extent_size, small_class, SMALL_CLASSES, SMALL_SEGMENT};
use crate::peer::MAX_SLOTS;
use crate::{ArenaError, Key};

/// A segment created since the owner last reported them: the peer must map
/// it (its descriptor goes with the announcement) before any buffer of it is
/// lent.
#[derive(Debug)]
pub struct NewSegment {
    /// Its slot.
    pub slot: u32,
    /// Its generation.
    pub generation: u64,
    /// Its size in bytes.
    pub len: u64,
    /// The sealed memfd, for the peer.
    pub fd: OwnedFd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Carved into buffers of this small class.
    Small(usize),
    /// One large extent.
    Large,
}

#[derive(Debug)]
struct Seg {
    generation: u64,
    map: Arc<Mapping>,
    len: u64,
    kind: Kind,
}

#[derive(Debug)]
struct State {
    max: u64,
    mapped: u64,
    /// Bytes of buffers loaned (being filled) or lent (with the peer).
    busy: u64,
    next_generation: u64,
    slots: Vec<Option<Seg>>,
    free_slots: Vec<u32>,
    /// Free buffers of each small class: (slot, offset).
    small_free: [Vec<(u32, u64)>; SMALL_CLASSES],
    /// Large extents not in use, kept for reuse.
    large_free: Vec<u32>,
    /// Buffers lent to the peer: (slot, offset) -> (generation, size).
    lent: HashMap<(u32, u64), (u64, u64)>,
    announce: Vec<NewSegment>,
    retired: Vec<(u32, u64)>,
}

/// The sending side's arena: at most `max_bytes` mapped.
#[derive(Debug, Clone)]
pub struct Owner {
    state: Arc<Mutex<State>>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state stays consistent at every unlock: a panic elsewhere while
    // it was held leaves nothing half done.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Owner {
    /// An arena that maps at most `max_bytes` (no segment is made before
    /// the first loan).
    pub fn new(max_bytes: u64) -> Owner {
        Owner {
            state: Arc::new(Mutex::new(State {
                max: max_bytes,
                mapped: 0,
                busy: 0,
                next_generation: 1,
                slots: Vec::new(),
                free_slots: Vec::new(),
                small_free: Default::default(),
                large_free: Vec::new(),
                lent: HashMap::new(),
                announce: Vec::new(),
                retired: Vec::new(),
            })),
        }
    }

    /// A buffer of `len` bytes to fill.
    ///
    /// # Errors
    /// [`ArenaError::Full`] when it does not fit within the limit (after
    /// unmapping kept large extents), [`ArenaError::Segment`] when the
    /// kernel refuses a new segment.
    pub fn loan(&self, len: usize) -> Result<Loan, ArenaError> {
        let mut st = lock(&self.state);
        let (slot, offset, size) = st.take(len as u64)?;
        let Some(seg) = st.slots[slot as usize].as_ref() else {
            return Err(ArenaError::Protocol("arena slot vanished".into()));
        };
        let loan = Loan {
            state: Arc::clone(&self.state),
            map: Arc::clone(&seg.map),
            key: Key {
                slot,
                generation: seg.generation,
                offset,
            },
            size,
            len,
            lent: false,
        };
        st.busy += size;
        Ok(loan)
    }

    /// Hands `loan` to the peer: its buffer stays taken until the peer
    /// releases it ([`Owner::release`]). Returns where it lies.
    pub fn lend(&self, mut loan: Loan) -> Key {
        let mut st = lock(&self.state);
        st.lent.insert(
            (loan.key.slot, loan.key.offset),
            (loan.key.generation, loan.size),
        );
        loan.lent = true;
        loan.key
    }

    /// The peer released the buffer at `key`.
    ///
    /// # Errors
    /// [`ArenaError::Protocol`] when no buffer is lent there in that
    /// generation (never lent, released twice, or another segment's).
    pub fn release(&self, key: Key) -> Result<(), ArenaError> {
        let mut st = lock(&self.state);
        match st.lent.get(&(key.slot, key.offset)) {
            Some(&(generation, size)) if generation == key.generation => {
                st.lent.remove(&(key.slot, key.offset));
                st.put(key.slot, key.offset, size);
                Ok(())
            }
            _ => Err(ArenaError::Protocol(format!(
                "release of slot {} generation {} offset {}: no buffer is lent there (never lent, released twice, or another generation's)",
                key.slot, key.generation, key.offset
            ))),
        }
    }

    /// Segments created since the last call, for the peer to map.
    pub fn take_new_segments(&self) -> Vec<NewSegment> {
        std::mem::take(&mut lock(&self.state).announce)
    }

    /// Segments unmapped since the last call (slot, generation), for the
    /// peer to unmap too.
    pub fn take_retired(&self) -> Vec<(u32, u64)> {
        std::mem::take(&mut lock(&self.state).retired)
    }

    /// Bytes mapped now.
    pub fn mapped_bytes(&self) -> u64 {
        lock(&self.state).mapped
    }

    /// Buffers lent to the peer now.
    pub fn lent_count(&self) -> usize {
        lock(&self.state).lent.len()
    }
}

impl State {
    /// Takes a free buffer of at least `len` bytes: (slot, offset, size).
    fn take(&mut self, len: u64) -> Result<(u32, u64, u64), ArenaError> {
        if let Some(c) = small_class(len) {
            if let Some((slot, off)) = self.small_free[c].pop() {
                return Ok((slot, off, class_size(c)));
            }
            let slot = self.make(SMALL_SEGMENT, Kind::Small(c), len)?;
            let size = class_size(c);
            let n = SMALL_SEGMENT / size;
            self.small_free[c].extend((1..n).rev().map(|i| (slot, i * size)));
            return Ok((slot, 0, size));
        }
        let want = extent_size(len);
        let fits = |s: &Seg| s.len >= want && s.len <= 2 * want;
        if let Some(i) = self
            .large_free
            .iter()
            .position(|&slot| self.slots[slot as usize].as_ref().is_some_and(fits))
        {
            let slot = self.large_free.swap_remove(i);
            let size = self.slots[slot as usize].as_ref().map_or(want, |s| s.len);
            return Ok((slot, 0, size));
        }
        let slot = self.make(want, Kind::Large, len)?;
        Ok((slot, 0, want))
    }

    /// Maps a new segment of `seg_len` bytes, unmapping kept large extents
    /// first if the limit asks for it.
    fn make(&mut self, seg_len: u64, kind: Kind, asked: u64) -> Result<u32, ArenaError> {
        while self.mapped + seg_len > self.max {
            let Some(slot) = self.large_free.pop() else {
                return Err(ArenaError::Full {
                    len: asked,
                    mapped: self.mapped,
                    lent: self.busy,
                    max: self.max,
                });
            };
            self.unmap(slot);
        }
        if self.free_slots.is_empty() && self.slots.len() >= MAX_SLOTS {
            return Err(ArenaError::Full {
                len: asked,
                mapped: self.mapped,
                lent: self.busy,
                max: self.max,
            });
        }
        let (fd, map) =
            shmlink_sys::memfd::create_arena("shmlink-arena", seg_len).map_err(|source| {
                ArenaError::Segment {
                    len: seg_len,
                    source,
                }
            })?;
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.slots.push(None);
            (self.slots.len() - 1) as u32
        });
        let generation = self.next_generation;
        self.next_generation += 1;
        self.slots[slot as usize] = Some(Seg {
            generation,
            map: Arc::new(map),
            len: seg_len,
            kind,
        });
        self.mapped += seg_len;
        self.announce.push(NewSegment {
            slot,
            generation,
            len: seg_len,
            fd,
        });
        Ok(slot)
    }

    fn unmap(&mut self, slot: u32) {
        if let Some(seg) = self.slots[slot as usize].take() {
            self.mapped -= seg.len;
            self.retired.push((slot, seg.generation));
            self.free_slots.push(slot);
        }
    }

    /// Returns a buffer to the free lists.
    fn put(&mut self, slot: u32, offset: u64, size: u64) {
        self.busy = self.busy.saturating_sub(size);
        match self.slots[slot as usize].as_ref().map(|s| s.kind) {
            Some(Kind::Small(c)) => self.small_free[c].push((slot, offset)),
            Some(Kind::Large) => self.large_free.push(slot),
            None => {}
        }
    }
}

/// A buffer of the owner's arena, to fill in place: it derefs to its bytes.
/// Sent with [`Owner::lend`] (by the session); dropped unsent, it goes back
/// to the arena.
#[derive(Debug)]
pub struct Loan {
    state: Arc<Mutex<State>>,
    pub(crate) map: Arc<Mapping>,
    pub(crate) key: Key,
    size: u64,
    pub(crate) len: usize,
    lent: bool,
}

impl Loan {
    /// Where it lies.
    pub fn key(&self) -> Key {
        self.key
    }

    /// Its length in bytes (as asked).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Shortens it to `len` bytes (no-op when longer): what is sent.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Copies `src` into it (the lengths must be equal, as for
    /// `copy_from_slice`). From [`STREAM_FROM`](crate::STREAM_FROM) bytes
    /// the copy bypasses the caches (non-temporal stores): faster for large
    /// buffers, and it leaves the caller's caches as they were. The
    /// transparent path of `call()` fills its loans this way.
    ///
    /// # Panics
    /// When `src.len()` differs from the loan's length.
    pub fn fill_from(&mut self, src: &[u8]) {
        crate::nt_copy::fill_copy(self, src);
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        if !self.lent {
            lock(&self.state).put(self.key.slot, self.key.offset, self.size);
        }
    }
}
