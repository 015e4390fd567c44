//! A message as the runtime holds it: its bytes, and what came with them
//! (file descriptors, a buffer lent from the peer's arena); and the
//! [`Assembler`] that makes messages from frames, with the byte rules of
//! [`shmlink_wire::Chunks`] and the descriptors beside them.

use std::os::fd::OwnedFd;

use shmlink_wire::frame::{Chunks, FrameError, FrameHeader, Kind};

/// A whole message, reassembled from its chunks.
#[derive(Debug)]
pub(crate) struct Message {
    /// What it is.
    pub(crate) kind: Kind,
    /// Call id.
    pub(crate) id: u64,
    /// The bytes (empty for a request lent from the peer's arena).
    pub(crate) body: Vec<u8>,
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

    /// The file descriptors that came with it.
    #[inline]
    pub(crate) fn fds(&self) -> &[OwnedFd] {
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
}

/// Reassembles chunked messages ([`Chunks`]) and keeps the descriptors that
/// came with the first frame of the message in progress.
#[derive(Debug)]
pub(crate) struct Assembler {
    chunks: Chunks,
    /// The descriptors of the message in progress.
    fds: Vec<OwnedFd>,
}

impl Assembler {
    /// An assembler accepting messages up to `max_message` bytes, in chunks
    /// when `chunked` (the session agreed on chunked messages), else only
    /// as single frames.
    pub(crate) fn new(max_message: usize, chunked: bool) -> Self {
        Assembler {
            chunks: Chunks::new(max_message, chunked),
            fds: Vec::new(),
        }
    }

    /// Whether a message is partly received.
    pub(crate) fn in_progress(&self) -> bool {
        self.chunks.in_progress()
    }

    /// The fast path of a message in one frame ([`Chunks::take_whole`]).
    #[inline]
    pub(crate) fn take_whole(&mut self, h: &FrameHeader) -> Option<Vec<u8>> {
        self.chunks.take_whole(h)
    }

    /// Accepts a chunk header; returns the buffer to append its payload to
    /// ([`Chunks::begin_chunk`]). Call [`Assembler::finish`] after appending.
    ///
    /// # Errors
    /// Inconsistent chunks or a message over the limit.
    #[inline]
    pub(crate) fn begin_chunk(&mut self, h: &FrameHeader) -> Result<&mut Vec<u8>, FrameError> {
        self.chunks.begin_chunk(h)
    }

    /// Files the descriptors that came with the first frame of the message
    /// in progress (after [`Assembler::begin_chunk`]); they go with it.
    pub(crate) fn attach_fds(&mut self, fds: Vec<OwnedFd>) {
        self.fds = fds;
    }

    /// Hands back a message body for reuse ([`Chunks::recycle`]).
    #[inline]
    pub(crate) fn recycle(&mut self, body: Vec<u8>) {
        self.chunks.recycle(body);
    }

    /// Ends the chunk whose header is `h`: returns the whole message, with
    /// its descriptors, when it was the last one.
    ///
    /// # Errors
    /// When the last chunk leaves the message short of its total.
    pub(crate) fn finish(&mut self, h: &FrameHeader) -> Result<Option<Message>, FrameError> {
        let Some((first, body)) = self.chunks.finish(h)? else {
            return Ok(None);
        };
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
