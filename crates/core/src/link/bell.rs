//! Loop wake-ups (capability bit 9, docs/protocol.md "Loop wake-ups"): the
//! descriptor an event loop watches for one session.
//!
//! The readiness descriptor is an epoll set of its own, which nests in any
//! loop (epoll, tokio's reactor, asyncio's selector, Go's poller,
//! `stream_select`). On an `shm:` session it holds an eventfd that the peer
//! rings whenever it would wake this side's futex (this side sent it in a
//! `Bell` frame), and the control socket, whose hang-up ends the session;
//! on a stream session it holds the socket, readable when bytes come.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use shmlink_sys::epoll::{Epoll, Interest};
use shmlink_sys::eventfd::EventFd;

use crate::error::{Error, Result};

/// One session's readiness descriptor.
#[derive(Debug)]
pub(crate) struct Readiness {
    set: Epoll,
    /// The eventfd the peer rings (`shm:` only).
    bell: Option<EventFd>,
    /// Room for harvesting the set's edge-triggered events.
    tokens: Vec<u64>,
}

impl Readiness {
    /// For an `shm:` session: a fresh eventfd, and the control socket
    /// watched for its hang-up.
    pub(crate) fn with_bell(control: Option<BorrowedFd<'_>>, peer: &str) -> Result<Readiness> {
        let set = Epoll::new().map_err(|e| io(peer, "epoll_create1", e))?;
        let bell = EventFd::new().map_err(|e| io(peer, "eventfd", e))?;
        set.add(&bell, 0, Interest::Readable)
            .map_err(|e| io(peer, "epoll_ctl", e))?;
        if let Some(sock) = control {
            set.add(sock, 1, Interest::HangUp)
                .map_err(|e| io(peer, "epoll_ctl", e))?;
        }
        Ok(Readiness {
            set,
            bell: Some(bell),
            tokens: Vec::with_capacity(2),
        })
    }

    /// For a stream session: its socket, readable when bytes (or the end)
    /// come.
    pub(crate) fn on_socket(sock: BorrowedFd<'_>, peer: &str) -> Result<Readiness> {
        let set = Epoll::new().map_err(|e| io(peer, "epoll_create1", e))?;
        set.add(sock, 0, Interest::Readable)
            .map_err(|e| io(peer, "epoll_ctl", e))?;
        Ok(Readiness {
            set,
            bell: None,
            tokens: Vec::with_capacity(1),
        })
    }

    /// A duplicate of the eventfd, for the `Bell` frame that hands it to
    /// the peer.
    pub(crate) fn bell_to_send(&self, peer: &str) -> Result<Option<OwnedFd>> {
        self.bell
            .as_ref()
            .map(|b| b.as_fd().try_clone_to_owned())
            .transpose()
            .map_err(|e| io(peer, "dup", e))
    }

    /// Makes the descriptor not ready until the next ring or hang-up: the
    /// eventfd's count reset, the set's edge-triggered events taken. Done
    /// before the side re-checks its ring and tells the loop to wait.
    pub(crate) fn quiet(&mut self) {
        if let Some(b) = &self.bell {
            b.clear();
        }
        let _ = self.set.wait(&mut self.tokens, true);
    }

    /// Makes the descriptor readable now (data is already there).
    pub(crate) fn ring(&self) {
        if let Some(b) = &self.bell {
            b.signal();
        }
    }

    /// The descriptor a loop watches.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.set.as_fd()
    }
}

fn io(peer: &str, call: &str, e: std::io::Error) -> Error {
    Error::io(
        format!("{call} for the readiness descriptor of session {peer}"),
        e,
    )
}
