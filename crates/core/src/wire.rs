//! The wire formats, for implementations of the protocol in other languages
//! and for tools: the `shmlink-wire` crate (every structure
//! `docs/protocol.md` specifies, as plain values: no sockets, no shared
//! memory) and the ring's record format from `shmlink-ring`.
//!
//! # Examples
//! ```
//! use shmlink::wire::{FrameHeader, Kind, HEADER_LEN};
//! let h = FrameHeader::whole(Kind::Request, 7, 5);
//! let bytes = h.encode();
//! assert_eq!(bytes.len(), HEADER_LEN);
//! assert_eq!(FrameHeader::decode(&bytes), Ok(h));
//! ```

pub use shmlink_ring::{RingHeader, RECORD_HEADER, TAG_DATA, TAG_PAD};
pub use shmlink_wire::*;

const _: () = assert!(std::mem::size_of::<RingHeader>() == RING_HEADER_LEN);
const _: () = assert!(RingHeader::SIZE == RING_HEADER_LEN);
const _: () = assert!(std::mem::align_of::<RingHeader>() == RING_HEADER_ALIGN);
const _: () = assert!(MAX_FDS <= shmlink_sys::fdpass::MAX_FDS);
