//! The receiving side: the owner's segments mapped read-only, descriptors
//! checked against them, views handed out and their releases collected.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use shmlink_sys::ReadOnlyMapping;

use crate::{ArenaError, Key};

/// Most segment slots a peer may register.
pub const MAX_SLOTS: usize = 4096;

#[derive(Debug)]
struct PeerSeg {
    generation: u64,
    map: Arc<ReadOnlyMapping>,
}

/// Buffers held now, and those given back since the session last sent
/// their releases.
#[derive(Debug, Default)]
struct Live {
    /// (slot, offset) -> (end, generation) of each buffer a view holds.
    held: BTreeMap<(u32, u64), (u64, u64)>,
    released: Vec<Key>,
}

/// [`Live`], and whether releases are waiting (read without the lock on
/// every send of the session).
#[derive(Debug, Default)]
struct Shared {
    live: Mutex<Live>,
    pending: AtomicBool,
}

fn lock(s: &Shared) -> MutexGuard<'_, Live> {
    // Every update leaves `Live` consistent.
    s.live.lock().unwrap_or_else(|p| p.into_inner())
}

/// The receiving side's table of its peer's segments (at most `max_bytes`
/// mapped).
#[derive(Debug)]
pub struct Peer {
    max: u64,
    mapped: u64,
    slots: Vec<Option<PeerSeg>>,
    live: Arc<Shared>,
}

/// A buffer released by its reader: a synonym of [`Key`] for readability.
pub type Release = Key;

impl Peer {
    /// An empty table that maps at most `max_bytes` of the peer's segments.
    pub fn new(max_bytes: u64) -> Peer {
        Peer {
            max: max_bytes,
            mapped: 0,
            slots: Vec::new(),
            live: Arc::new(Shared::default()),
        }
    }

    /// Maps the segment the peer announced at `slot` (replacing an older
    /// generation there).
    ///
    /// # Errors
    /// [`ArenaError::Protocol`] for a slot beyond [`MAX_SLOTS`], a generation
    /// not newer than the slot's, a descriptor that is not a memfd sealed as
    /// an arena segment (it could shrink under us, or we could write it), an
    /// empty one, or one that would take the table over its limit.
    pub fn register(&mut self, slot: u32, generation: u64, fd: OwnedFd) -> Result<(), ArenaError> {
        let proto = |why: String| ArenaError::Protocol(format!("arena segment {slot}: {why}"));
        let i = slot as usize;
        if i >= MAX_SLOTS {
            return Err(proto(format!("slot beyond the limit of {MAX_SLOTS}")));
        }
        let old = self.slots.get(i).and_then(|s| s.as_ref());
        if let Some(old) = old {
            if generation <= old.generation {
                return Err(proto(format!(
                    "generation {generation} is not newer than {}",
                    old.generation
                )));
            }
        }
        let facts = shmlink_sys::memfd::inspect(&fd)
            .map_err(|e| proto(format!("not a sealable memfd: {e}")))?;
        if !facts.arena_sealed {
            return Err(proto(
                "not sealed against resizing and writing (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_FUTURE_WRITE)".into(),
            ));
        }
        let old_len = old.map_or(0, |o| o.map.len() as u64);
        let mapped = self.mapped - old_len + facts.len;
        if facts.len == 0 || mapped > self.max {
            return Err(proto(format!(
                "{} bytes would map {mapped} of the peer's segments, over the limit of {}",
                facts.len, self.max
            )));
        }
        let len = usize::try_from(facts.len).map_err(|_| proto("too large".into()))?;
        let map = ReadOnlyMapping::map(&fd, len).map_err(|e| proto(format!("cannot map: {e}")))?;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(PeerSeg {
            generation,
            map: Arc::new(map),
        });
        self.mapped = mapped;
        Ok(())
    }

    /// Unmaps the segment at `slot` (views still held keep their mapping).
    ///
    /// # Errors
    /// [`ArenaError::Protocol`] when no segment of that generation is there.
    pub fn retire(&mut self, slot: u32, generation: u64) -> Result<(), ArenaError> {
        match self.slots.get_mut(slot as usize) {
            Some(s) if s.as_ref().is_some_and(|p| p.generation == generation) => {
                if let Some(p) = s.take() {
                    self.mapped -= p.map.len() as u64;
                }
                Ok(())
            }
            _ => Err(ArenaError::Protocol(format!(
                "retiring arena segment {slot} generation {generation}: no such segment"
            ))),
        }
    }

    /// The `len` bytes at `key`, checked: a registered segment of that
    /// generation, inside it, and overlapping no buffer a view still holds.
    ///
    /// # Errors
    /// [`ArenaError::Protocol`] naming what is wrong.
    pub fn view(&self, key: Key, len: u64) -> Result<View, ArenaError> {
        let proto = |why: String| {
            ArenaError::Protocol(format!(
                "descriptor of slot {} generation {} offset {} length {len}: {why}",
                key.slot, key.generation, key.offset
            ))
        };
        let seg = match self.slots.get(key.slot as usize).and_then(|s| s.as_ref()) {
            Some(s) if s.generation == key.generation => s,
            Some(s) => return Err(proto(format!("the slot holds generation {}", s.generation))),
            None => return Err(proto("no segment registered there".into())),
        };
        let end = key.offset.checked_add(len);
        if len == 0 || end.is_none_or(|e| e > seg.map.len() as u64) {
            return Err(proto(format!(
                "not inside the segment of {} bytes",
                seg.map.len()
            )));
        }
        let end = end.unwrap_or(u64::MAX);
        let mut live = lock(&self.live);
        let before = live
            .held
            .range(..=(key.slot, key.offset))
            .next_back()
            .filter(|((s, _), (e, _))| *s == key.slot && *e > key.offset);
        let after = live
            .held
            .range((key.slot, key.offset)..)
            .next()
            .filter(|((s, o), _)| *s == key.slot && *o < end);
        if let Some(((_, o), (e, _))) = before.or(after) {
            return Err(proto(format!("overlaps the buffer at {o}..{e} still held")));
        }
        live.held
            .insert((key.slot, key.offset), (end, key.generation));
        Ok(View {
            map: Arc::clone(&seg.map),
            key,
            len: len as usize,
            live: Arc::clone(&self.live),
        })
    }

    /// Buffers whose views were dropped since the last call: their releases
    /// are due to the owner.
    pub fn take_releases(&self) -> Vec<Release> {
        if !self.live.pending.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut lock(&self.live).released)
    }

    /// Whether views were dropped since releases were last taken (one
    /// atomic load).
    #[inline]
    pub fn releases_due(&self) -> bool {
        self.live.pending.load(Ordering::Acquire)
    }

    /// Bytes of the peer's segments mapped now.
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped
    }

    /// Buffers views hold now.
    pub fn held(&self) -> usize {
        lock(&self.live).held.len()
    }
}

/// A buffer lent by the peer, read where it lies: it derefs to its bytes.
///
/// **The bytes are volatile.** The peer that lent them is another process
/// and may (in breach of the protocol) write them while they are read: the
/// contents may then change between two reads, but every access stays
/// inside memory mapped for reading and no offset or length is ever taken
/// from it. Use [`View::to_vec`] for a stable snapshot. Dropping the view
/// files its release for the owner.
#[derive(Debug)]
pub struct View {
    pub(crate) map: Arc<ReadOnlyMapping>,
    pub(crate) key: Key,
    pub(crate) len: usize,
    live: Arc<Shared>,
}

impl View {
    /// Where it lies.
    pub fn key(&self) -> Key {
        self.key
    }

    /// A copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.deref().to_vec()
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let mut live = lock(&self.live);
        live.held.remove(&(self.key.slot, self.key.offset));
        live.released.push(self.key);
        self.live.pending.store(true, Ordering::Release);
    }
}
