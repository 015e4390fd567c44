//! Misuses that compiled before the public API was closed, kept as
//! `compile_fail` doc tests (run by `cargo test --doc`): each must keep
//! failing to compile, for the reason its error code names (E0603: a private
//! module or item; E0616: a private field).
//!
//! Moving a ring end out of a session and dropping the rest unmapped the
//! memory under it (a use after unmap, from safe code):
//! ```compile_fail,E0603
//! let (seg, _fd) = shmlink::segment::Segment::create(4096, 4096).unwrap();
//! let ends = shmlink::segment::Endpoints::new(std::sync::Arc::new(seg), true).unwrap();
//! let mut producer = ends.producer;
//! drop(ends.consumer);
//! producer.try_push(&[b"into unmapped memory"]).unwrap();
//! ```
//!
//! The same through the `Endpoints` type alone:
//! ```compile_fail,E0603
//! fn take(e: shmlink::segment::Endpoints) {}
//! ```
//!
//! A link could be built over any ring ends and driven outside a session:
//! ```compile_fail,E0603
//! use shmlink::link::shm::ShmLink;
//! ```
//!
//! A session could be driven into states the library never expects
//! (sending after `break_with`, receiving frames meant for the client):
//! ```compile_fail,E0603
//! use shmlink::session::Session;
//! ```
//!
//! The server's liveness flags could be set from outside:
//! ```compile_fail,E0603
//! let flags = shmlink::watch::SessionFlags::default();
//! ```
//!
//! A supervisor's hold on a direct line keeps the line's mapping alive
//! for its bell; the mapping itself is not reachable (E0616: a private
//! field):
//! ```compile_fail,E0616
//! fn peek(hold: &shmlink::LineHold) {
//!     let _ = &hold.segment;
//! }
//! ```
//!
//! What stays public compiles (the same paths through [`crate::wire`]):
//! ```
//! let h = shmlink::wire::SegmentHeader::for_rings(4096, 4096);
//! assert_eq!(shmlink::wire::SegmentHeader::decode(&h.encode()), Some(h));
//! ```
