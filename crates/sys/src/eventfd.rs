//! A one-shot wake-up for an epoll loop (`eventfd(2)`): signalled from any
//! thread, or from a signal handler (one `write(2)`, async-signal-safe).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::{eventfd, EventfdFlags};
use rustix::io::Errno;

/// A non-blocking, close-on-exec eventfd starting at 0.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
    ///
    /// # Errors
    /// `EMFILE`/`ENFILE` (out of descriptors), `ENOMEM`.
    pub fn new() -> io::Result<EventFd> {
        Ok(EventFd(eventfd(
            0,
            EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
        )?))
    }

    /// Adds 1 to the counter, making the descriptor readable. Never blocks:
    /// a counter already at its maximum (`EAGAIN`) is readable anyway.
    pub fn signal(&self) {
        loop {
            match rustix::io::write(&self.0, &1u64.to_ne_bytes()) {
                Err(Errno::INTR) => continue,
                // Ok, EAGAIN (already signalled to the maximum), or a
                // descriptor being closed: nothing to retry.
                _ => return,
            }
        }
    }
}

impl EventFd {
    /// Resets the counter to 0 (a `read(2)`), so that the descriptor is no
    /// longer readable until the next [`EventFd::signal`]. Never blocks.
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        loop {
            match rustix::io::read(&self.0, &mut buf) {
                Err(Errno::INTR) => continue,
                // Ok, or EAGAIN (already 0).
                _ => return,
            }
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poll::{readable, Ready};
    use std::time::{Duration, Instant};

    #[test]
    fn becomes_readable_when_signalled() {
        let e = EventFd::new().expect("eventfd");
        let soon = Some(Instant::now() + Duration::from_millis(5));
        assert_eq!(readable(&e, soon).expect("poll"), Ready::TimedOut);
        e.signal();
        e.signal();
        assert_eq!(readable(&e, None).expect("poll"), Ready::Yes);
        e.clear();
        assert_eq!(readable(&e, soon).expect("poll"), Ready::TimedOut);
    }
}
