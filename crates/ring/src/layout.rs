//! The ring header as it lies in shared memory, and the record format.

use std::ops::Deref;

use crate::sync::{AtomicU32, AtomicU64};

/// Pads and aligns a value to 128 bytes (two cache lines on x86-64, which the
/// adjacent-line prefetcher pulls in pairs), so fields written by different
/// processes never share a line.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct CachePadded<T>(pub T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Sleep-word value of a side that is running (not announced asleep).
pub const AWAKE: u32 = 0;

/// The consumer's line: its sleep epoch (what [`RingHeader::data_sleep`]
/// dereferences to) and, 4 bytes on, a hint: the CPU it last waited on,
/// plus one (0: not said, as in a fresh segment or from a peer that does
/// not say). Only the consumer writes either word; the hint changes no
/// rule of the doorbell, it only tells the producer's side, when that side
/// waits, whether the two share a CPU.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct SleepLine {
    /// The sleep epoch (0: awake).
    pub epoch: AtomicU32,
    /// The consumer's CPU plus one, or 0.
    pub cpu: AtomicU32,
}

impl Deref for SleepLine {
    type Target = AtomicU32;
    fn deref(&self) -> &AtomicU32 {
        &self.epoch
    }
}

/// Control block of one ring, shared by producer and consumer. Every word
/// has exactly one writer, which keeps the protocol's correctness argument
/// to plain release/acquire pairs.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RingHeader {
    /// Bytes ever published (monotonic, multiple of 8). Written by the producer.
    pub tail: CachePadded<AtomicU64>,
    /// Bytes ever consumed (monotonic, multiple of 8). Written by the consumer.
    pub head: CachePadded<AtomicU64>,
    /// Futex word the consumer sleeps on; the producer increments it to wake
    /// the consumer (a "wake counter").
    pub data_bell: CachePadded<AtomicU32>,
    /// Non-zero sleep epoch while the consumer is (about to be) asleep,
    /// and beside it the CPU the consumer last waited on. Written by the
    /// consumer.
    pub data_sleep: SleepLine,
    /// Futex word the producer sleeps on; the consumer increments it.
    pub space_bell: CachePadded<AtomicU32>,
    /// Non-zero sleep epoch while the producer is (about to be) asleep.
    /// Written by the producer.
    pub space_sleep: CachePadded<AtomicU32>,
}

impl RingHeader {
    /// Size of the header in shared memory.
    pub const SIZE: usize = 768;

    /// A header for an empty ring (all zero, as in a fresh memfd).
    pub fn new() -> Self {
        Self::default()
    }
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<RingHeader>() == RingHeader::SIZE);
    assert!(std::mem::offset_of!(RingHeader, tail) == 0);
    assert!(std::mem::offset_of!(RingHeader, head) == 128);
    assert!(std::mem::offset_of!(RingHeader, data_bell) == 256);
    assert!(std::mem::offset_of!(RingHeader, data_sleep) == 384);
    assert!(std::mem::offset_of!(SleepLine, cpu) == 4);
    assert!(std::mem::offset_of!(RingHeader, space_bell) == 512);
    assert!(std::mem::offset_of!(RingHeader, space_sleep) == 640);
};

/// Size of a record header: `len: u32`, `tag: u32`.
pub const RECORD_HEADER: usize = 8;
/// Tag of a record carrying data.
pub const TAG_DATA: u32 = 0x4441_5441;
/// Tag of a padding record filling the rest of the buffer before a wrap.
pub const TAG_PAD: u32 = 0x5041_4444;
/// Largest head or tail a ring may start from. Sessions start at 0; the
/// bound keeps a hostile start value from overflowing the counters (2^62
/// bytes of traffic would take over a century at a terabyte per second).
pub const MAX_START_COUNTER: u64 = 1 << 62;
/// Smallest ring.
pub const MIN_CAPACITY: usize = 64;
/// Largest ring.
pub const MAX_CAPACITY: usize = 1 << 30;

/// Rounds up to a multiple of 8.
pub(crate) const fn align8(n: u64) -> u64 {
    (n + 7) & !7
}

pub(crate) fn encode_record_header(len: u32, tag: u32) -> [u8; RECORD_HEADER] {
    let mut b = [0u8; RECORD_HEADER];
    b[..4].copy_from_slice(&len.to_le_bytes());
    b[4..].copy_from_slice(&tag.to_le_bytes());
    b
}

pub(crate) fn decode_record_header(b: &[u8; RECORD_HEADER]) -> (u32, u32) {
    (
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
    )
}

/// One side's sleep bookkeeping: its own epoch counter, and the last epoch of
/// the peer it already woke (so a burst costs one wake-up per sleep).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Sleeper {
    epoch: u32,
    woke_peer: u32,
}

impl Sleeper {
    /// The next non-zero epoch to announce.
    pub(crate) fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == AWAKE {
            self.epoch = 1;
        }
        self.epoch
    }

    /// The last epoch announced.
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Goes on after `epoch`, announced by a predecessor on this side.
    pub(crate) fn continue_after(&mut self, epoch: u32) {
        self.epoch = epoch;
    }

    /// Given the peer's sleep word, whether it must be woken now.
    pub(crate) fn owes_wake(&mut self, peer_sleep: u32) -> bool {
        if peer_sleep == AWAKE || peer_sleep == self.woke_peer {
            return false;
        }
        self.woke_peer = peer_sleep;
        true
    }
}
