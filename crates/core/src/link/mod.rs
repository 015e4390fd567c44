//! Links: one side's end of a session's data path, frame by frame.
//!
//! [`ShmLink`](shm::ShmLink) moves frames through the shared-memory rings;
//! [`StreamLink`](stream::StreamLink) moves the same frames over a Unix or TCP
//! stream. The session layer above chunks messages into frames.

mod bell;
mod fds;
mod inbox;
pub(crate) mod shm;
pub(crate) mod stream;
mod wait;

pub(crate) use inbox::Inbox;

use std::os::fd::{BorrowedFd, OwnedFd};

use crate::address::Transport;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::message::{Assembler, Message};
use shmlink_wire::frame::FrameHeader;

/// A session's data path.
#[derive(Debug)]
pub(crate) enum Link {
    /// Shared-memory rings.
    Shm(shm::ShmLink),
    /// A Unix or TCP stream.
    Stream(stream::StreamLink),
}

impl Link {
    /// Largest payload of one frame.
    pub(crate) fn max_chunk(&self) -> usize {
        match self {
            Link::Shm(l) => l.max_chunk(),
            Link::Stream(_) => stream::MAX_CHUNK,
        }
    }

    /// Largest message sent as a single frame.
    pub(crate) fn max_single(&self) -> usize {
        match self {
            Link::Shm(l) => l.max_single(),
            Link::Stream(_) => stream::MAX_CHUNK,
        }
    }

    /// The transport the link really uses.
    pub(crate) fn transport(&self) -> Transport {
        match self {
            Link::Shm(_) => Transport::Shm,
            Link::Stream(l) if l.is_unix() => Transport::Unix,
            Link::Stream(_) => Transport::Tcp,
        }
    }

    /// Whether the link can pass file descriptors (a Unix socket under it).
    pub(crate) fn carries_fds(&self) -> bool {
        match self {
            Link::Shm(_) => true,
            Link::Stream(l) => l.is_unix(),
        }
    }

    /// Sends one frame, with `fds` (as many as `h.fds` says; the session
    /// agreed on descriptors), waiting for room until `deadline`.
    ///
    /// # Errors
    /// Timeout, peer gone, corrupted ring, socket errors; [`Error::BadFds`]
    /// (nothing sent) when a descriptor is not open.
    ///
    /// [`Error::BadFds`]: crate::Error::BadFds
    #[inline(always)]
    pub(crate) fn send_frame(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
        inbox: Option<Inbox<'_>>,
    ) -> Result<()> {
        match self {
            Link::Shm(l) => l.send_frame(h, payload, fds, deadline, inbox),
            Link::Stream(l) => l.send_frame(h, payload, fds, deadline, inbox),
        }
    }

    /// Receives frames into `asm` until a whole message is there (put in
    /// `out`) or `deadline`.
    ///
    /// # Errors
    /// Timeout, peer gone, server stopping, protocol errors.
    #[inline(always)]
    pub(crate) fn recv_message(
        &mut self,
        asm: &mut Assembler,
        deadline: &mut Deadline,
        out: &mut Message,
    ) -> Result<()> {
        match self {
            Link::Shm(l) => l.recv_message(asm, deadline, out),
            Link::Stream(l) => {
                *out = l.recv_message(asm, deadline)?;
                Ok(())
            }
        }
    }

    /// Waits until a frame can be received, without receiving it: `false`
    /// when `deadline` passed first.
    ///
    /// # Errors
    /// Peer gone, server stopping, corrupted ring, socket errors.
    pub(crate) fn wait_readable(&mut self, deadline: &mut Deadline) -> Result<bool> {
        match self {
            Link::Shm(l) => l.wait_readable(deadline),
            Link::Stream(l) => l.readable(deadline),
        }
    }

    /// Whether a frame can be received at once: in the ring, or already in
    /// the socket's read buffer (never waits).
    pub(crate) fn ready_now(&mut self) -> bool {
        match self {
            Link::Shm(l) => l.ready_now(),
            Link::Stream(l) => l.ready_now(),
        }
    }

    /// Sends one frame if that needs no waiting; never waits, and ignores
    /// failures (used for `Goodbye`, when the session is ending anyway).
    pub(crate) fn try_send_now(&mut self, h: &FrameHeader, payload: &[u8]) -> bool {
        match self {
            Link::Shm(l) => l.try_send_now(h, payload),
            Link::Stream(l) => l.try_send_now(h, payload),
        }
    }

    /// After our closing `Goodbye` went out: an `shm:` link keeps its
    /// mapping for a later session of this process (see [`crate::kept`]).
    pub(crate) fn keep_mapping(&mut self) {
        if let Link::Shm(l) = self {
            l.keep_mapping();
        }
    }

    /// Files every whole message that already arrived, without waiting.
    pub(crate) fn drain_now(&mut self, inbox: &mut Inbox<'_>) {
        match self {
            Link::Shm(l) => l.drain_now(inbox),
            Link::Stream(l) => l.drain_now(inbox),
        }
    }

    /// Whether a message we sent provably lies unread: still in the ring
    /// (`shm:`). Over a stream nothing can be known (the bytes may sit in
    /// the peer's socket buffer, read or not): `false`.
    pub(crate) fn sent_unread(&self) -> bool {
        match self {
            Link::Shm(l) => !l.peer_read_all(),
            Link::Stream(_) => false,
        }
    }

    /// The socket that becomes readable when the peer hangs up (and, on
    /// a stream link, when a frame comes).
    pub(crate) fn control_socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            Link::Shm(l) => l.control_socket(),
            Link::Stream(l) => l.control_socket(),
        }
    }

    /// Makes the readiness descriptor a loop watches, on first use; over
    /// `shm:` returns the eventfd the peer must be handed (a `Bell` frame).
    ///
    /// # Errors
    /// Out of descriptors.
    pub(crate) fn open_readiness(&mut self) -> Result<Option<OwnedFd>> {
        match self {
            Link::Shm(l) => l.open_readiness(),
            Link::Stream(l) => l.open_readiness().map(|()| None),
        }
    }

    /// The readiness descriptor, once opened.
    pub(crate) fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Link::Shm(l) => l.poll_fd(),
            Link::Stream(l) => l.poll_fd(),
        }
    }

    /// Before a loop waits on the readiness descriptor: `true` to wait,
    /// `false` when a frame (or bytes of one) can be taken now.
    ///
    /// # Errors
    /// Peer gone, corrupted ring, socket errors.
    pub(crate) fn arm(&mut self, deadline: &mut Deadline) -> Result<bool> {
        match self {
            Link::Shm(l) => l.arm(),
            Link::Stream(l) => l.arm(deadline),
        }
    }

    /// After a call was sent: with a loop watching, its answer will make the
    /// readiness descriptor readable (a stream's socket does by itself).
    #[inline(always)]
    pub(crate) fn expect_answer(&mut self) {
        if let Link::Shm(l) = self {
            l.expect_answer();
        }
    }

    /// Makes the readiness descriptor not ready (without announcing a
    /// sleep: the eventfd rings again only after the next [`Link::arm`]).
    pub(crate) fn quiet(&mut self) {
        if let Link::Shm(l) = self {
            l.quiet();
        }
    }

    /// Withdraws what [`Link::arm`] announced (a frame was found).
    pub(crate) fn disarm(&mut self) {
        if let Link::Shm(l) = self {
            l.disarm();
        }
    }

    /// Takes the peer's bell: `false` when this link has no use for one (a
    /// stream, where the socket itself tells a loop of data).
    pub(crate) fn take_peer_bell(&mut self, bell: shmlink_sys::eventfd::EventFd) -> bool {
        match self {
            Link::Shm(l) => {
                l.take_peer_bell(bell);
                true
            }
            Link::Stream(_) => false,
        }
    }

    /// Whether the peer still looks alive (non-blocking check).
    pub(crate) fn peer_alive(&self) -> bool {
        match self {
            Link::Shm(l) => l.peer_alive(),
            Link::Stream(l) => l.peer_alive(),
        }
    }
}
