//! The queue's words as they lie in shared memory.

use crate::layout::CachePadded;
use crate::sync::{AtomicU32, AtomicU64};

/// Control block of one subscriber's queue and returns. Every word but
/// `head` has one writer; `head` moves only by compare-exchange, by
/// either side, and only forward.
#[repr(C)]
#[derive(Debug, Default)]
pub struct QueueHeader {
    /// Entries ever queued (monotonic). Written by the publisher.
    pub tail: CachePadded<AtomicU64>,
    /// Entries ever taken by the subscriber or dropped by the publisher
    /// (monotonic). Moved by either side with compare-exchange.
    pub head: CachePadded<AtomicU64>,
    /// Futex word the subscriber sleeps on; the publisher increments it.
    pub data_bell: CachePadded<AtomicU32>,
    /// Non-zero sleep epoch while the subscriber is (about to be) asleep.
    /// Written by the subscriber.
    pub data_sleep: CachePadded<AtomicU32>,
    /// Futex word the publisher sleeps on while it waits for room; the
    /// subscriber increments it.
    pub space_bell: CachePadded<AtomicU32>,
    /// Non-zero sleep epoch while the publisher waits for room. Written by
    /// the publisher.
    pub space_sleep: CachePadded<AtomicU32>,
    /// Slots ever returned (monotonic). Written by the subscriber.
    pub returned: CachePadded<AtomicU64>,
    /// Returned slots ever collected (monotonic). Written by the publisher.
    pub collected: CachePadded<AtomicU64>,
}

impl QueueHeader {
    /// Size of the header in shared memory.
    pub const SIZE: usize = 1024;

    /// A header for an empty queue (all zero, as in a fresh memfd).
    pub fn new() -> Self {
        Self::default()
    }
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<QueueHeader>() == QueueHeader::SIZE);
    assert!(std::mem::offset_of!(QueueHeader, tail) == 0);
    assert!(std::mem::offset_of!(QueueHeader, head) == 128);
    assert!(std::mem::offset_of!(QueueHeader, data_bell) == 256);
    assert!(std::mem::offset_of!(QueueHeader, data_sleep) == 384);
    assert!(std::mem::offset_of!(QueueHeader, space_bell) == 512);
    assert!(std::mem::offset_of!(QueueHeader, space_sleep) == 640);
    assert!(std::mem::offset_of!(QueueHeader, returned) == 768);
    assert!(std::mem::offset_of!(QueueHeader, collected) == 896);
    assert!(std::mem::size_of::<Entry>() == 16);
};

/// One queued reference: the sample's sequence number, then its slot in
/// the pool and its length (`slot << 32 | len`).
#[repr(C)]
#[derive(Debug, Default)]
pub struct Entry {
    /// The publisher's sequence number of the sample.
    pub seq: AtomicU64,
    /// `slot << 32 | len`.
    pub sample: AtomicU64,
}

/// A slot number no pool has: what a fresh return entry holds.
pub const NO_SLOT: u32 = u32::MAX;
