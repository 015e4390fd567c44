//! The zero-copy arena of a shmlink session: memory one side (the *owner*)
//! allocates from, fills in place and lends to its peer, which reads it where
//! it lies and gives it back.
//!
//! - [`Owner`]: the sending side. Its allocator's bookkeeping lives in this
//!   process only, so a peer cannot corrupt it; segments are sealed memfds
//!   ([`shmlink_sys::memfd::create_arena`]) that the peer can map read-only
//!   only. Buffers come in power-of-two classes from 4 KiB to 1 MiB, carved
//!   from 4 MiB segments, and as large extents (a segment of their own,
//!   rounded up to 2 MiB and kept for reuse); allocation and release are O(1)
//!   but for the short scan of kept large extents.
//! - [`Peer`]: the receiving side. It maps the owner's segments read-only,
//!   checks every descriptor against them (slot, generation, bounds, and no
//!   overlap with a buffer it still holds) and hands out [`View`]s; a view
//!   dropped files its buffer for release.
//!
//! The wire side (frames announcing segments, descriptors, release records)
//! is the core crate's; this crate only manages memory.

mod bytes;
mod classes;
mod error;
mod nt_copy;
mod owner;
mod peer;

pub use classes::{LARGE_ROUND, MIN_CLASS, SMALL_MAX, SMALL_SEGMENT};
pub use error::ArenaError;
pub use nt_copy::{fill_copy, STREAM_FROM};
pub use owner::{Loan, NewSegment, Owner};
pub use peer::{Peer, Release, View, MAX_SLOTS};

/// Where a lent buffer lies: what a descriptor names and a release returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The segment's slot in the owner's table.
    pub slot: u32,
    /// The slot's generation when the segment was registered.
    pub generation: u64,
    /// Byte offset of the buffer in the segment.
    pub offset: u64,
}
