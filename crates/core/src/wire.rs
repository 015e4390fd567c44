//! The wire formats, for implementations of the protocol in other languages
//! and for tools: encoders and validating decoders of every fixed structure
//! `docs/protocol.md` specifies, as plain values (no sockets, no shared
//! memory).
//!
//! - the handshake: [`Hello`], [`Welcome`], version negotiation, capabilities;
//! - the segment layout of `shm:` sessions: [`SegmentHeader`];
//! - ring records: [`RECORD_HEADER`], [`TAG_DATA`], [`TAG_PAD`], [`RingHeader`]
//!   offsets ([`RingHeader::SIZE`]);
//! - frames: [`FrameHeader`], [`Kind`], the error-response body, and the
//!   [`Assembler`] that checks chunked messages;
//! - arena bodies: [`Descriptor`], [`SegmentNotice`], release records
//!   ([`encode_release`], [`decode_release`]);
//! - the inspection report (capability bit 8): [`Report`].
//!
//! # Examples
//! ```
//! use shmlink::wire::{FrameHeader, Kind, HEADER_LEN};
//! let h = FrameHeader::whole(Kind::Request, 7, 5);
//! let bytes = h.encode();
//! assert_eq!(bytes.len(), HEADER_LEN);
//! assert_eq!(FrameHeader::decode(&bytes), Ok(h));
//! ```

pub use crate::arena_wire::{
    decode_release, encode_release, ArenaWireError, SegmentNotice, NOTICE_LEN, NOTICE_RETIRE,
    RELEASE_LEN,
};
pub use crate::descriptor::{
    Descriptor, DescriptorError, SegmentEntry, DESCRIPTOR_LEN, DESCRIPTOR_VERSION,
};
pub use crate::frame::{
    Assembler, FrameError, FrameHeader, Kind, Message, CODE_CLOSED, CODE_HANDLER_EXCEPTION,
    CODE_HANDLER_PANICKED, CODE_PROTOCOL_ERROR, CODE_RESPONSE_TOO_LARGE, CODE_SHUTTING_DOWN,
    FLAG_MORE, HEADER_LEN, MIN_MESSAGE_LIMIT,
};
pub use crate::handshake::{
    negotiate_version, Hello, Welcome, Wire, CAPS, CAP_BELL, CAP_CHUNKED, CAP_DESCRIPTORS, CAP_FDS,
    CAP_INSPECT, CAP_LENT_RESPONSES, CAP_LINES, CAP_ONE_WAY, CAP_SERVE, CAP_STREAM_FALLBACK,
    HELLO_LEN, MAX_REFUSAL_TEXT, PROTOCOL_MAX, PROTOCOL_MIN, WELCOME_LEN,
};
pub use crate::inspect_wire::{
    decode_report_header, Report, ReportError, ReportSession, ReportShape, ReportTotals,
    ReportTransport, FLAG_OVER_SOCKET, MAX_REPORT_PART, MAX_REPORT_SESSIONS, REPORT_HEADER_LEN,
    REPORT_MAGIC, REPORT_RECORD_LEN, REPORT_VERSION, UID_UNKNOWN,
};
pub use crate::layout::{
    SegmentHeader, DATA_AT, LAYOUT_VERSION, RING_HEADERS_AT, SEGMENT_HEADER_LEN, SEGMENT_MAGIC,
};
pub use crate::line_wire::{LineBody, Op as LineOp, GRANT_FDS, LINE_LEN};
pub use shmlink_ring::{RingHeader, RECORD_HEADER, TAG_DATA, TAG_PAD};
