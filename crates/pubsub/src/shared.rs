//! Typed views of the shared memory of a topic: a subscriber's queue
//! segment (its control block, entries and returns, all atomics) and the
//! pool's slots. The only module of the crate with `unsafe`.
#![allow(unsafe_code)]

use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use shmlink_ring::samples::{Entry, QueueHeader};
use shmlink_sys::{Mapping, ReadOnlyMapping};
use shmlink_wire::pubsub::{queue_len, queue_returns_at, QUEUE_ENTRIES_AT};

/// A part of a queue segment, kept mapped as long as the part lives.
#[derive(Debug)]
pub(crate) struct Part<T: ?Sized> {
    _map: Arc<Mapping>,
    ptr: NonNull<T>,
}

// SAFETY: the pointee is atomics only (`QueueHeader`, `[Entry]`,
// `[AtomicU32]`, all `Sync`) inside a mapping this value keeps alive;
// moving or sharing the handle across threads is what atomics allow.
unsafe impl<T: ?Sized + Sync> Send for Part<T> {}
// SAFETY: as for Send: shared access hands out `&T`, and `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for Part<T> {}

impl<T: ?Sized> Deref for Part<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `ptr` points inside `_map` (checked in `QueueParts::new`),
        // aligned for `T`, and the mapping lives as long as `self`. `T`
        // consists of atomics only, so the other process writing it at any
        // time is a data race no more than two threads sharing an atomic;
        // every bit pattern is a valid value of each.
        unsafe { self.ptr.as_ref() }
    }
}

/// A queue segment cut into its three parts.
pub(crate) struct QueueParts {
    pub(crate) header: Part<QueueHeader>,
    pub(crate) entries: Part<[Entry]>,
    pub(crate) returns: Part<[AtomicU32]>,
}

impl QueueParts {
    /// The parts of `map`, a queue segment of `depth` entries and
    /// `returns` returns; `None` when the mapping is shorter than that.
    pub(crate) fn new(map: Mapping, depth: u32, returns: u32) -> Option<QueueParts> {
        let need = usize::try_from(queue_len(depth, returns)).ok()?;
        if map.len() < need || depth == 0 || returns == 0 {
            return None;
        }
        let map = Arc::new(map);
        let base = map.as_ptr();
        let entries_at = QUEUE_ENTRIES_AT as usize;
        let returns_at = usize::try_from(queue_returns_at(depth)).ok()?;
        // Each offset plus its length lies within the first `need` bytes
        // of the mapping (`queue_len` sums them); the mapping starts
        // page-aligned and the offsets keep each type's alignment (0 for
        // the 128-aligned header, 1024 for 8-byte entries, 1024 + 16 x
        // depth for 4-byte returns): what `Part::deref` relies on.
        let header = NonNull::new(base.cast::<QueueHeader>())?;
        let entries = NonNull::slice_from_raw_parts(
            NonNull::new(base.wrapping_add(entries_at).cast::<Entry>())?,
            depth as usize,
        );
        let returns_part = NonNull::slice_from_raw_parts(
            NonNull::new(base.wrapping_add(returns_at).cast::<AtomicU32>())?,
            returns as usize,
        );
        Some(QueueParts {
            header: Part {
                _map: Arc::clone(&map),
                ptr: header,
            },
            entries: Part {
                _map: Arc::clone(&map),
                ptr: entries,
            },
            returns: Part {
                _map: map,
                ptr: returns_part,
            },
        })
    }
}

/// `len` bytes at `off` of the publisher's own pool, to write a sample
/// into. `None` when the range is outside the pool.
pub(crate) fn slot_mut(pool: &mut Mapping, off: usize, len: usize) -> Option<&mut [u8]> {
    if off.checked_add(len)? > pool.len() {
        return None;
    }
    // SAFETY: the range is inside the mapping (checked) and `&mut Mapping`
    // makes this the only borrow of it in this process. No other process
    // can write the pool: it is sealed against new writable mappings
    // before any subscriber gets it (`memfd::create_arena`).
    Some(unsafe { std::slice::from_raw_parts_mut(pool.as_ptr().add(off), len) })
}

/// `len` bytes at `off` of a publisher's pool mapped read-only here.
/// `None` when the range is outside the mapping.
///
/// The bytes are volatile: a publisher breaking the protocol may write a
/// slot a subscriber still reads; the contents then change under the
/// reader, but every access stays inside memory mapped for reading, and
/// no length or offset is taken from it.
pub(crate) fn slot(pool: &ReadOnlyMapping, off: usize, len: usize) -> Option<&[u8]> {
    if off.checked_add(len)? > pool.len() {
        return None;
    }
    // SAFETY: the range is inside the mapping (checked), mapped readable,
    // and the mapping outlives the borrow (tied to `pool`). See above for
    // what another process writing it means.
    Some(unsafe { std::slice::from_raw_parts(pool.as_ptr().add(off), len) })
}
