//! shmlink's byte formats, as pure encode/decode: every structure
//! docs/protocol.md specifies, as plain values, with validating decoders
//! that treat their input as hostile (a bad byte gives an error naming the
//! field, never a panic). No I/O, no threads, no `unsafe`, nothing of the
//! other crates: what implementations in other languages and tools need,
//! and what the fuzz targets exercise.
//!
//! - [`handshake`]: [`Hello`], [`Welcome`], version negotiation, capabilities;
//! - [`layout`]: the segment of `shm:` sessions, [`SegmentHeader`];
//! - [`frame`]: [`FrameHeader`], [`Kind`], and [`Chunks`], which joins the
//!   chunks of a message and checks them;
//! - [`codes`]: the one registry of reserved error and refusal codes, and
//!   [`RemoteError`], the body of `Error` and `Goodbye` frames;
//! - [`descriptor`] and [`arena`]: bodies naming buffers in an arena
//!   ([`Descriptor`], [`SegmentNotice`], release records);
//! - [`fd_record`]: descriptors announced on an `shm:` control socket;
//! - [`line`](mod@line): direct lines between clients and workers ([`LineBody`]);
//! - [`inspect`]: the inspection report ([`Report`]);
//! - [`handover`]: a server handing its listeners and live sessions to a
//!   successor process;
//! - [`pubsub`]: a publisher's offer of a topic to a subscriber, copied
//!   samples, detach notices, and the layout of a subscriber's queue;
//! - [`http`]: the encoding HTTP requests and responses travel in between
//!   the front and PHP workers; [`counters`]: the HTTP counters page a pool
//!   shares with the workers that serve HTTP themselves.
//!
//! The ring's records are the ring crate's (`shmlink-ring`).
//!
//! # Examples
//! ```
//! use shmlink_wire::{FrameHeader, Kind, HEADER_LEN};
//! let h = FrameHeader::whole(Kind::Request, 7, 5);
//! let bytes = h.encode();
//! assert_eq!(bytes.len(), HEADER_LEN);
//! assert_eq!(FrameHeader::decode(&bytes), Ok(h));
//! ```

#![forbid(unsafe_code)]

pub mod arena;
pub mod codes;
pub mod counters;
pub mod descriptor;
pub mod fd_record;
pub mod frame;
pub mod handover;
pub mod handshake;
pub mod http;
pub mod inspect;
pub mod layout;
mod le;
pub mod line;
pub mod pubsub;

pub use arena::{
    decode_release, encode_release, ArenaWireError, SegmentNotice, NOTICE_LEN, NOTICE_RETIRE,
    RELEASE_LEN,
};
pub use codes::*;
pub use descriptor::{
    Descriptor, DescriptorError, SegmentEntry, DESCRIPTOR_LEN, DESCRIPTOR_VERSION,
};
pub use fd_record::{FdRecord, FD_RECORD_LEN, FD_RECORD_MAGIC};
pub use frame::{
    Chunks, FrameError, FrameHeader, Kind, FLAG_MORE, HEADER_LEN, MAX_FDS, MIN_MESSAGE_LIMIT,
};
pub use handshake::{
    negotiate_version, Hello, Welcome, Wire, CAPS, CAP_BELL, CAP_BOTH_WAYS, CAP_CHUNKED,
    CAP_DESCRIPTORS, CAP_FDS, CAP_INSPECT, CAP_LENT_RESPONSES, CAP_LINES, CAP_ONE_WAY, CAP_SERVE,
    CAP_STREAM_FALLBACK, HELLO_LEN, MAX_REFUSAL_TEXT, PROTOCOL_MAX, PROTOCOL_MIN, WELCOME_LEN,
};
pub use inspect::{
    decode_report_header, Report, ReportError, ReportSession, ReportShape, ReportTotals,
    ReportTransport, FLAG_OVER_SOCKET, MAX_REPORT_PART, MAX_REPORT_SESSIONS, REPORT_HEADER_LEN,
    REPORT_MAGIC, REPORT_RECORD_LEN, REPORT_VERSION, UID_UNKNOWN,
};
pub use layout::{
    SegmentHeader, DATA_AT, LAYOUT_VERSION, RING_HEADERS_AT, RING_HEADER_ALIGN, RING_HEADER_LEN,
    SEGMENT_HEADER_LEN, SEGMENT_MAGIC,
};
pub use line::{LineBody, Op as LineOp, GRANT_FDS, LINE_LEN};
