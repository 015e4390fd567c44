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

use crate::le::{u16_at, u32_at, u64_at};

/// Encoded size of a frame header.
pub const HEADER_LEN: usize = 24;

/// Flag: more chunks of this message follow.
pub const FLAG_MORE: u8 = 1;

/// Most file descriptors one message may carry (the `fds` field's bound).
pub const MAX_FDS: usize = 64;

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
    /// (capability bit 2; [`crate::arena`]).
    Segment = 7,
    /// Lent arena buffers given back to their owner (capability bit 2;
    /// [`crate::arena`]).
    Release = 8,
    /// A direct line between a caller and a supervisor's worker asked for,
    /// granted, refused, revoked or given back (capability bit 7;
    /// [`crate::line`](mod@crate::line)).
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);
crate::le::text_error!(FrameError);

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

/// Joins the chunks of messages into whole bodies, checking that chunks are
/// consistent and the total stays within the limit before any byte is
/// copied. Pure bytes: what came with a message besides its bytes
/// (descriptors) is the receiver's to keep.
#[derive(Debug)]
pub struct Chunks {
    max_message: u64,
    /// Whether messages may come in several chunks (capability bit 0).
    chunked: bool,
    current: Option<(FrameHeader, Vec<u8>)>,
    /// A buffer handed back with [`Chunks::recycle`], reused for the next message.
    spare: Vec<u8>,
}

/// Most bytes preallocated for a message before its chunks arrive, so a peer
/// announcing a huge total cannot make us allocate it up front.
const PREALLOC_LIMIT: u64 = 1 << 20;

impl Chunks {
    /// An assembler accepting messages up to `max_message` bytes, in chunks
    /// when `chunked` (the session agreed on chunked messages), else only
    /// as single frames.
    pub fn new(max_message: usize, chunked: bool) -> Self {
        Chunks {
            max_message: max_message as u64,
            chunked,
            current: None,
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
    /// message. `None`: go through [`Chunks::begin_chunk`], which also
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
    /// Call [`Chunks::finish`] after appending.
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

    /// Hands back a message body for reuse (bodies up to 1 MiB are kept), so a
    /// server does not allocate for every request.
    pub fn recycle(&mut self, body: Vec<u8>) {
        if body.capacity() as u64 <= PREALLOC_LIMIT && body.capacity() > self.spare.capacity() {
            self.spare = body;
        }
    }

    /// Ends the chunk whose header is `h`: returns the whole message (its
    /// first frame's header and its body) when it was the last chunk.
    ///
    /// # Errors
    /// When the last chunk leaves the message short of its total.
    pub fn finish(
        &mut self,
        h: &FrameHeader,
    ) -> Result<Option<(FrameHeader, Vec<u8>)>, FrameError> {
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
        Ok(Some((first, body)))
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
        let mut a = Chunks::new(100, true);
        let h1 = hdr(3, FLAG_MORE, 7, 5);
        a.begin_chunk(&h1).expect("c1").extend_from_slice(b"abc");
        assert!(matches!(a.finish(&h1), Ok(None)));
        let h2 = hdr(2, 0, 7, 5);
        a.begin_chunk(&h2).expect("c2").extend_from_slice(b"de");
        let (first, body) = a.finish(&h2).expect("finish").expect("message");
        assert_eq!((first, body.as_slice()), (h1, &b"abcde"[..]));

        let mut a = Chunks::new(100, true);
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
        let mut a = Chunks::new(100, true);
        a.begin_chunk(&with_fds(2, hdr(3, FLAG_MORE, 7, 5)))
            .expect("first chunk may announce descriptors");
        let e = a
            .begin_chunk(&with_fds(1, hdr(2, 0, 7, 5)))
            .expect_err("a later chunk may not");
        assert!(e.0.contains("only a message's first frame"), "{e}");
    }
}
