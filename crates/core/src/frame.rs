//! Frames: the unit both the shared-memory rings and the stream sockets carry.
//!
//! ```text
//! offset size field
//!  0     4    len    payload bytes in this frame (u32 LE)
//!  4     1    kind   Kind
//!  5     1    flags  bit 0 MORE: further chunks of the same message follow
//!  6     2    fds    file descriptors sent with the message (u16 LE): 0, or
//!                     1..=MAX_FDS on the first frame of a message when the
//!                     session agreed on descriptor passing (capability bit 4)
//!  8     8    id     call id (u64 LE)
//! 16     8    total  length of the whole message (u64 LE), the same in every chunk
//! ```
//! A message larger than one frame is sent as consecutive chunks; a sender
//! never interleaves two messages, so chunks of one message are contiguous.

use std::os::fd::OwnedFd;

use crate::error::RemoteError;
use crate::le::{u16_at, u32_at, u64_at};

/// Encoded size of a frame header.
pub const HEADER_LEN: usize = 24;

/// Flag: more chunks of this message follow.
pub const FLAG_MORE: u8 = 1;

/// Most file descriptors one message may carry (the `fds` field's bound).
pub const MAX_FDS: usize = 64;
const _: () = assert!(MAX_FDS <= shmlink_sys::fdpass::MAX_FDS);

/// Code of a `Goodbye` without a complaint: the sender is closing normally
/// (an empty `Goodbye` body means the same).
pub const CODE_CLOSED: u32 = 0;
/// Remote error code the server sends when a handler panicked.
pub const CODE_HANDLER_PANICKED: u32 = 0xFFFF_0001;
/// Remote error code the server sends when a response exceeds the client's limit.
pub const CODE_RESPONSE_TOO_LARGE: u32 = 0xFFFF_0002;
/// Remote error code a language binding sends when its handler threw an
/// exception that carried no code of its own (C++ wrapper, PHP extension).
pub const CODE_HANDLER_EXCEPTION: u32 = 0xFFFF_0003;
/// `Goodbye` code: the receiver of this goodbye broke the protocol; the
/// text says how. The sender ends the session after sending it.
pub const CODE_PROTOCOL_ERROR: u32 = 0xFFFF_0004;
/// `Goodbye` code: the server is shutting down; it answered every request it
/// had received.
pub const CODE_SHUTTING_DOWN: u32 = 0xFFFF_0005;
/// Smallest largest-message size a side may announce: an error response or
/// a `Goodbye` with a reason of up to `MIN_MESSAGE_LIMIT - 4` bytes always
/// fits.
pub const MIN_MESSAGE_LIMIT: usize = 1024;

/// What a frame carries. Values are only ever appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A call that expects a response.
    Request = 1,
    /// A successful response.
    Response = 2,
    /// An error response: `code: u32 LE` then a UTF-8 message.
    Error = 3,
    /// A one-way message: no response.
    OneWay = 4,
    /// A request whose body lies in the sender's arena (capability bit 2):
    /// the payload is a body in the [`crate::descriptor`] format (slot,
    /// generation, offset, length).
    Descriptor = 5,
    /// The sender is closing the session cleanly.
    Goodbye = 6,
    /// An arena segment registered (with its memfd) or retired by its owner
    /// (capability bit 2; [`crate::arena_wire`]).
    Segment = 7,
    /// Lent arena buffers given back to their owner (capability bit 2;
    /// [`crate::arena_wire`]).
    Release = 8,
    /// A direct line between a caller and a supervisor's worker asked for,
    /// granted, refused, revoked or given back (capability bit 7;
    /// `crate::line`).
    Line = 9,
    /// The sender waits for its incoming ring through an event loop: the
    /// frame carries one eventfd, which the receiver writes to whenever it
    /// wakes the sender (capability bit 9, `shm:` only; [`crate::handshake::CAP_BELL`]).
    Bell = 10,
}

/// Kinds by wire value (a table: every frame header is decoded).
const KINDS: [Option<Kind>; 11] = [
    None,
    Some(Kind::Request),
    Some(Kind::Response),
    Some(Kind::Error),
    Some(Kind::OneWay),
    Some(Kind::Descriptor),
    Some(Kind::Goodbye),
    Some(Kind::Segment),
    Some(Kind::Release),
    Some(Kind::Line),
    Some(Kind::Bell),
];

impl Kind {
    #[inline]
    fn from_u8(v: u8) -> Option<Kind> {
        KINDS.get(usize::from(v)).copied().flatten()
    }
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload bytes in this frame.
    pub len: u32,
    /// What the frame carries.
    pub kind: Kind,
    /// Flag bits.
    pub flags: u8,
    /// File descriptors sent with the message (non-zero only on its first
    /// frame, at most [`MAX_FDS`]).
    pub fds: u16,
    /// Call id.
    pub id: u64,
    /// Length of the whole message.
    pub total: u64,
}

/// Why a frame header or a frame sequence is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FrameError(pub String);

impl FrameHeader {
    /// The header of a message of `len` bytes sent as one frame (`len` at
    /// most a frame's payload, which the caller checked).
    #[inline]
    pub fn whole(kind: Kind, id: u64, len: usize) -> FrameHeader {
        FrameHeader {
            len: len as u32,
            kind,
            flags: 0,
            fds: 0,
            id,
            total: len as u64,
        }
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4] = self.kind as u8;
        b[5] = self.flags;
        b[6..8].copy_from_slice(&self.fds.to_le_bytes());
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..24].copy_from_slice(&self.total.to_le_bytes());
        b
    }

    /// Decodes and validates a header: known kind and flags, zero reserved
    /// bytes, and `len <= total`.
    ///
    /// # Errors
    /// [`FrameError`] naming the bad field and its value.
    #[inline]
    pub fn decode(b: &[u8]) -> Result<FrameHeader, FrameError> {
        let Some(b) = b.get(..HEADER_LEN) else {
            return Err(Self::refusal(b));
        };
        let len = u32_at(b, 0);
        let flags = b[5];
        let fds = u16_at(b, 6);
        let total = u64_at(b, 16);
        // One test on the hot path; the refusal explains which field failed.
        match Kind::from_u8(b[4]) {
            Some(kind)
                if flags & !FLAG_MORE == 0
                    && usize::from(fds) <= MAX_FDS
                    && u64::from(len) <= total =>
            {
                Ok(FrameHeader {
                    len,
                    kind,
                    flags,
                    fds,
                    id: u64_at(b, 8),
                    total,
                })
            }
            _ => Err(Self::refusal(b)),
        }
    }

    /// Why `decode` refused `b`.
    #[cold]
    fn refusal(b: &[u8]) -> FrameError {
        if b.len() < HEADER_LEN {
            return FrameError(format!(
                "frame header truncated: {} of {HEADER_LEN} bytes",
                b.len()
            ));
        }
        let (len, flags, total) = (u32_at(b, 0), b[5], u64_at(b, 16));
        FrameError(if Kind::from_u8(b[4]).is_none() {
            format!("unknown frame kind {}", b[4])
        } else if flags & !FLAG_MORE != 0 {
            format!("unknown frame flags {flags:#04x}")
        } else if usize::from(u16_at(b, 6)) > MAX_FDS {
            format!(
                "frame announces {} file descriptors, more than the limit of {MAX_FDS}",
                u16_at(b, 6)
            )
        } else {
            format!("frame carries {len} bytes of a message of {total} bytes")
        })
    }

    /// Whether more chunks follow.
    pub fn more(&self) -> bool {
        self.flags & FLAG_MORE != 0
    }
}

/// A whole message, reassembled from its chunks.
#[derive(Debug)]
pub struct Message {
    /// What it is.
    pub kind: Kind,
    /// Call id.
    pub id: u64,
    /// The bytes (empty for a request lent from the peer's arena).
    pub body: Vec<u8>,
    /// What few messages carry, boxed so that every other message stays
    /// small to move.
    extra: Option<Box<Extra>>,
}

/// The file descriptors that came with a message, and the arena buffer a
/// lent request lies in.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    pub(crate) fds: Vec<OwnedFd>,
    pub(crate) lent: Option<shmlink_arena::View>,
}

impl Message {
    /// A message with nothing attached.
    #[inline]
    pub(crate) fn new(kind: Kind, id: u64, body: Vec<u8>) -> Message {
        Message {
            kind,
            id,
            body,
            extra: None,
        }
    }

    /// A placeholder for a receive to fill (see [`Message::set`]).
    #[inline]
    pub(crate) fn blank() -> Message {
        Message::new(Kind::Response, 0, Vec::new())
    }

    /// Makes this a message with nothing attached, in place.
    #[inline(always)]
    pub(crate) fn set(&mut self, kind: Kind, id: u64, body: Vec<u8>) {
        self.kind = kind;
        self.id = id;
        self.body = body;
        self.extra = None;
    }

    /// A message (request or response) lent from the peer's arena, read
    /// where it lies.
    pub(crate) fn lent(kind: Kind, id: u64, body: Vec<u8>, view: shmlink_arena::View) -> Message {
        Message {
            kind,
            id,
            body,
            extra: Some(Box::new(Extra {
                fds: Vec::new(),
                lent: Some(view),
            })),
        }
    }

    /// The message's bytes: the lent buffer, or the body.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        match self.extra.as_ref().and_then(|x| x.lent.as_ref()) {
            Some(v) => v,
            None => &self.body,
        }
    }

    /// The file descriptors that came with it.
    #[inline]
    pub fn fds(&self) -> &[OwnedFd] {
        self.extra.as_ref().map_or(&[], |x| &x.fds)
    }

    /// Whether anything is attached (descriptors, a lent buffer).
    #[inline]
    pub(crate) fn has_extra(&self) -> bool {
        self.extra.is_some()
    }

    /// Takes what is attached.
    pub(crate) fn take_extra(&mut self) -> Extra {
        self.extra.take().map(|b| *b).unwrap_or_default()
    }

    /// Encodes the body of an error response or a `Goodbye`: the code, then
    /// the message as UTF-8.
    pub fn error_body(e: &RemoteError) -> Vec<u8> {
        Self::error_body_within(e.code, &e.message, usize::MAX)
    }

    /// The same, with the message cut (at a character boundary) so that the
    /// whole body is at most `max` bytes (at least the 4-byte code).
    pub fn error_body_within(code: u32, message: &str, max: usize) -> Vec<u8> {
        let mut cut = message.len().min(max.saturating_sub(4));
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut v = Vec::with_capacity(4 + cut);
        v.extend_from_slice(&code.to_le_bytes());
        v.extend_from_slice(&message.as_bytes()[..cut]);
        v
    }

    /// Decodes the body of an error response or a non-empty `Goodbye`.
    ///
    /// # Errors
    /// When the body is shorter than the 4-byte code.
    pub fn decode_error(body: &[u8]) -> Result<RemoteError, FrameError> {
        let code = body
            .get(..4)
            .and_then(|c| c.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| {
                FrameError(format!(
                    "error response of {} bytes has no code",
                    body.len()
                ))
            })?;
        Ok(RemoteError {
            code,
            message: String::from_utf8_lossy(&body[4..]).into_owned(),
        })
    }
}

/// Reassembles chunked messages, checking that chunks are consistent and the
/// total stays within the limit before any byte is copied.
#[derive(Debug)]
pub struct Assembler {
    max_message: u64,
    /// Whether messages may come in several chunks (capability bit 0).
    chunked: bool,
    current: Option<(FrameHeader, Vec<u8>)>,
    /// The descriptors of the message in progress.
    fds: Vec<OwnedFd>,
    /// A buffer handed back with [`Assembler::recycle`], reused for the next message.
    spare: Vec<u8>,
}

/// Most bytes preallocated for a message before its chunks arrive, so a peer
/// announcing a huge total cannot make us allocate it up front.
const PREALLOC_LIMIT: u64 = 1 << 20;

impl Assembler {
    /// An assembler accepting messages up to `max_message` bytes, in chunks
    /// when `chunked` (the session agreed on chunked messages), else only
    /// as single frames.
    pub fn new(max_message: usize, chunked: bool) -> Self {
        Assembler {
            max_message: max_message as u64,
            chunked,
            current: None,
            fds: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Whether a message is partly received.
    pub fn in_progress(&self) -> bool {
        self.current.is_some()
    }

    /// The fast path of a message that fits in one frame: when no message is
    /// in progress and `h` is a whole message within the limit, returns an
    /// empty buffer (the recycled one) for its payload, which then is the
    /// message. `None`: go through [`Assembler::begin_chunk`], which also
    /// reports what is wrong with the frame, if anything.
    #[inline]
    pub fn take_whole(&mut self, h: &FrameHeader) -> Option<Vec<u8>> {
        let whole = !h.more() && u64::from(h.len) == h.total;
        if self.current.is_some() || !whole || h.total > self.max_message {
            return None;
        }
        let mut buf = std::mem::take(&mut self.spare);
        buf.clear();
        Some(buf)
    }

    /// Accepts a chunk header; returns the buffer to append its payload to.
    /// Call [`Assembler::finish`] after appending.
    ///
    /// # Errors
    /// Inconsistent chunks or a message over the limit.
    pub fn begin_chunk(&mut self, h: &FrameHeader) -> Result<&mut Vec<u8>, FrameError> {
        if h.total > self.max_message {
            return Err(FrameError(format!(
                "incoming message of {} bytes exceeds the maximum message size of {} bytes",
                h.total, self.max_message
            )));
        }
        if !self.chunked && (h.more() || u64::from(h.len) != h.total) {
            return Err(FrameError(format!(
                "chunk of {} bytes of a message of {} bytes, but chunked messages (capability bit 0) were not agreed",
                h.len, h.total
            )));
        }
        if let Some((first, _)) = &self.current {
            if first.kind != h.kind || first.id != h.id || first.total != h.total {
                return Err(FrameError(format!(
                    "chunk of {:?} #{} (total {}) interleaved into {:?} #{} (total {})",
                    h.kind, h.id, h.total, first.kind, first.id, first.total
                )));
            }
            if h.fds != 0 {
                return Err(FrameError(format!(
                    "a later chunk of {:?} #{} announces {} file descriptors; only a message's first frame may",
                    h.kind, h.id, h.fds
                )));
            }
        }
        if self.current.is_none() {
            let mut buf = std::mem::take(&mut self.spare);
            buf.clear();
            buf.reserve(h.total.min(PREALLOC_LIMIT) as usize);
            self.current = Some((*h, buf));
        }
        let Some((_, buf)) = self.current.as_mut() else {
            return Err(FrameError("no message in progress".into()));
        };
        let have = buf.len() as u64;
        if have + u64::from(h.len) > h.total {
            return Err(FrameError(format!(
                "chunks of message #{} add up to more than its total of {} bytes",
                h.id, h.total
            )));
        }
        Ok(buf)
    }

    /// Files the descriptors that came with the first frame of the message
    /// in progress (after [`Assembler::begin_chunk`]); they go with it.
    pub fn attach_fds(&mut self, fds: Vec<OwnedFd>) {
        self.fds = fds;
    }

    /// Hands back a message body for reuse (bodies up to 1 MiB are kept), so a
    /// server does not allocate for every request.
    pub fn recycle(&mut self, body: Vec<u8>) {
        if body.capacity() as u64 <= PREALLOC_LIMIT && body.capacity() > self.spare.capacity() {
            self.spare = body;
        }
    }

    /// Ends the chunk whose header is `h`: returns the whole message when it
    /// was the last one.
    ///
    /// # Errors
    /// When the last chunk leaves the message short of its total.
    pub fn finish(&mut self, h: &FrameHeader) -> Result<Option<Message>, FrameError> {
        if h.more() {
            return Ok(None);
        }
        let Some((first, body)) = self.current.take() else {
            return Err(FrameError(
                "chunk finished with no message in progress".into(),
            ));
        };
        if body.len() as u64 != first.total {
            return Err(FrameError(format!(
                "message #{} ended after {} of its {} bytes",
                first.id,
                body.len(),
                first.total
            )));
        }
        Ok(Some(Message {
            kind: first.kind,
            id: first.id,
            body,
            extra: (!self.fds.is_empty()).then(|| {
                Box::new(Extra {
                    fds: std::mem::take(&mut self.fds),
                    lent: None,
                })
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(len: u32, flags: u8, id: u64, total: u64) -> FrameHeader {
        FrameHeader {
            len,
            kind: Kind::Request,
            flags,
            fds: 0,
            id,
            total,
        }
    }

    #[test]
    fn header_round_trips() {
        let h = hdr(10, FLAG_MORE, u64::MAX, 1 << 40);
        assert_eq!(FrameHeader::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn bad_headers_are_refused() {
        let mut b = hdr(1, 0, 1, 1).encode();
        b[4] = 99;
        assert!(FrameHeader::decode(&b).is_err());
        let mut b = hdr(1, 0, 1, 1).encode();
        b[5] = 0x80;
        assert!(FrameHeader::decode(&b).is_err());
        assert!(FrameHeader::decode(&hdr(5, 0, 1, 4).encode()).is_err());
        assert!(FrameHeader::decode(&[0u8; 10]).is_err());
    }

    #[test]
    fn assembles_chunks_and_checks_them() {
        let mut a = Assembler::new(100, true);
        let h1 = hdr(3, FLAG_MORE, 7, 5);
        a.begin_chunk(&h1).expect("c1").extend_from_slice(b"abc");
        assert!(matches!(a.finish(&h1), Ok(None)));
        let h2 = hdr(2, 0, 7, 5);
        a.begin_chunk(&h2).expect("c2").extend_from_slice(b"de");
        let m = a.finish(&h2).expect("finish").expect("message");
        assert_eq!(m.body, b"abcde");

        let mut a = Assembler::new(100, true);
        assert!(a.begin_chunk(&hdr(1, 0, 1, 101)).is_err(), "over the limit");
        a.begin_chunk(&hdr(3, FLAG_MORE, 1, 5))
            .expect("c1")
            .extend_from_slice(b"abc");
        assert!(a.begin_chunk(&hdr(1, 0, 2, 5)).is_err(), "interleaved id");
        assert!(a.begin_chunk(&hdr(3, 0, 1, 5)).is_err(), "overflow");
    }

    #[test]
    fn descriptors_only_on_a_first_frame_and_within_the_limit() {
        let with_fds = |fds: u16, h: FrameHeader| FrameHeader { fds, ..h };
        let h = with_fds(64, hdr(1, 0, 1, 1));
        assert_eq!(FrameHeader::decode(&h.encode()), Ok(h));
        let over = with_fds(65, hdr(1, 0, 1, 1)).encode();
        let e = FrameHeader::decode(&over).expect_err("65 descriptors");
        assert!(e.0.contains("more than the limit of 64"), "{e}");
        let mut a = Assembler::new(100, true);
        a.begin_chunk(&with_fds(2, hdr(3, FLAG_MORE, 7, 5)))
            .expect("first chunk may announce descriptors");
        let e = a
            .begin_chunk(&with_fds(1, hdr(2, 0, 7, 5)))
            .expect_err("a later chunk may not");
        assert!(e.0.contains("only a message's first frame"), "{e}");
    }

    #[test]
    fn error_bodies_round_trip() {
        let e = RemoteError::new(42, "no such key");
        assert_eq!(Message::decode_error(&Message::error_body(&e)), Ok(e));
        assert!(Message::decode_error(b"ab").is_err());
    }

    #[test]
    fn error_bodies_are_cut_to_fit_at_a_character_boundary() {
        let b = Message::error_body_within(7, "ééé", 9);
        assert_eq!(b.len(), 8, "4 + two 2-byte characters");
        assert_eq!(
            Message::decode_error(&b).expect("decodes").message,
            "éé".to_string()
        );
        assert_eq!(Message::error_body_within(7, "abc", 2).len(), 4);
    }
}
