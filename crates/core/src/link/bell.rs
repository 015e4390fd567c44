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

/// Token of the eventfd in the set.
const BELL: u64 = 0;
/// Token of the control socket in the set.
const CONTROL: u64 = 1;

/// One session's readiness descriptor. Both members are edge-triggered:
/// each ring of the eventfd and each stir of the control socket puts an
/// event in the set, which makes the set readable until the event is
/// taken ([`Readiness::quiet`], one `epoll_wait` that does not wait); the
/// eventfd's count is never read.
#[derive(Debug)]
pub(crate) struct Readiness {
    set: Epoll,
    /// The eventfd the peer rings (`shm:` only).
    bell: Option<EventFd>,
    /// Room for taking the set's events.
    tokens: Vec<u64>,
    /// The control socket stirred (bytes, or a hang-up) since the session
    /// last looked at its peer's liveness.
    stirred: bool,
    /// This side rang its own eventfd since the set's events were last
    /// taken: its event still waits in the set, which stays readable, so
    /// another ring would add nothing (pipelined sends found answers there
    /// and rang once each: a `write(2)` per call).
    rung: bool,
}

impl Readiness {
    /// For an `shm:` session: a fresh eventfd, and the control socket
    /// watched for its hang-up.
    pub(crate) fn with_bell(control: Option<BorrowedFd<'_>>, peer: &str) -> Result<Readiness> {
        let set = Epoll::new().map_err(|e| io(peer, "epoll_create1", e))?;
        let bell = EventFd::new().map_err(|e| io(peer, "eventfd", e))?;
        set.add(&bell, BELL, Interest::Signalled)
            .map_err(|e| io(peer, "epoll_ctl", e))?;
        if let Some(sock) = control {
            set.add(sock, CONTROL, Interest::HangUp)
                .map_err(|e| io(peer, "epoll_ctl", e))?;
        }
        Ok(Readiness {
            set,
            bell: Some(bell),
            tokens: Vec::with_capacity(2),
            stirred: true,
            rung: false,
        })
    }

    /// For a stream session: its socket, readable when bytes (or the end)
    /// come.
    pub(crate) fn on_socket(sock: BorrowedFd<'_>, peer: &str) -> Result<Readiness> {
        let set = Epoll::new().map_err(|e| io(peer, "epoll_create1", e))?;
        set.add(sock, BELL, Interest::Readable)
            .map_err(|e| io(peer, "epoll_ctl", e))?;
        Ok(Readiness {
            set,
            bell: None,
            tokens: Vec::with_capacity(1),
            stirred: false,
            rung: false,
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

    /// Makes the descriptor not ready until the next ring or stir: the
    /// set's events taken (one `epoll_wait` that does not wait). Done
    /// before the side re-checks its ring and tells the loop to wait.
    pub(crate) fn quiet(&mut self) {
        // A failure here leaves the set readable: the loop looks again.
        let _ = self.set.wait(&mut self.tokens, true);
        // Cleared whatever the wait did: at worst the next ring is one
        // more write, never one missing.
        self.rung = false;
        if self.tokens.contains(&CONTROL) {
            self.stirred = true;
        }
    }

    /// Whether the control socket stirred since the last call: the peer's
    /// liveness needs a look.
    pub(crate) fn take_stirred(&mut self) -> bool {
        std::mem::take(&mut self.stirred)
    }

    /// Makes the descriptor readable now (data is already there): rings
    /// the eventfd, unless this side's last ring is still in the set.
    pub(crate) fn ring(&mut self) {
        if self.rung {
            return;
        }
        if let Some(b) = &self.bell {
            b.signal();
            self.rung = true;
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use shmlink_sys::poll::{readable, Ready};

    use super::Readiness;

    fn ready_now(r: &Readiness) -> bool {
        matches!(readable(r.fd(), Some(Instant::now())), Ok(Ready::Yes))
    }

    #[test]
    fn a_ring_makes_the_set_readable_until_it_is_quieted_and_rings_again_after() {
        let mut r = Readiness::with_bell(None, "test").expect("readiness");
        r.quiet();
        assert!(!ready_now(&r), "quiet at first");
        r.ring();
        assert!(ready_now(&r), "rung");
        // A second ring before the set is quieted adds nothing to wait for.
        r.ring();
        assert!(ready_now(&r), "still readable");
        r.quiet();
        assert!(!ready_now(&r), "quieted: both rings taken");
        // After a quiet a ring is never skipped.
        r.ring();
        assert!(ready_now(&r), "rung again");
    }
}
