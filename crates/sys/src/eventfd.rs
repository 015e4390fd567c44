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

impl EventFd {
    /// Takes a descriptor a peer sent as its bell, after checking that it
    /// is an eventfd (its `/proc/self/fd` link reads `anon_inode:[eventfd]`)
    /// and making it non-blocking (`fcntl(F_SETFL, O_NONBLOCK)`: a signal
    /// must never block, whatever the sender set), so that writing to it can
    /// neither block this process nor reach a file or a pipe.
    ///
    /// # Errors
    /// `InvalidInput` naming what the descriptor is when it is not an
    /// eventfd; the errors of `readlink(2)` and `fcntl(2)`.
    pub fn adopt(fd: OwnedFd) -> io::Result<EventFd> {
        use std::os::fd::AsRawFd;
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        if link.as_os_str() != "anon_inode:[eventfd]" {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not an eventfd but {}", link.display()),
            ));
        }
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
        Ok(EventFd(fd))
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

    #[test]
    fn adopts_eventfds_only() {
        let e = EventFd::new().expect("eventfd");
        let dup = e.as_fd().try_clone_to_owned().expect("dup");
        let adopted = EventFd::adopt(dup).expect("an eventfd is adopted");
        adopted.signal();
        assert_eq!(readable(&e, None).expect("poll"), Ready::Yes);
        let file = std::fs::File::open("/dev/null").expect("open");
        let err = EventFd::adopt(file.into()).expect_err("a file is refused");
        assert!(err.to_string().contains("/dev/null"), "{err}");
    }
}
