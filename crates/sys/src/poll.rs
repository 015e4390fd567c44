//! Waiting for descriptor readiness with a deadline.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::time::Timespec;

/// What a poll on one descriptor found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// The requested readiness.
    Yes,
    /// The deadline passed first.
    TimedOut,
    /// The peer hung up or the descriptor is in error.
    HungUp,
}

fn to_timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

fn poll_one(fd: BorrowedFd<'_>, want: PollFlags, deadline: Option<Instant>) -> io::Result<Ready> {
    loop {
        let timeout = deadline.map(|d| to_timespec(d.saturating_duration_since(Instant::now())));
        let mut fds = [PollFd::from_borrowed_fd(fd, want)];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) => return Ok(Ready::TimedOut),
            Ok(_) => {
                let got = fds[0].revents();
                if got.intersects(want) {
                    return Ok(Ready::Yes);
                }
                return Ok(Ready::HungUp);
            }
            Err(Errno::INTR) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(Ready::TimedOut);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits until either descriptor is readable (or hung up), up to
/// `deadline`: which (0 or 1; the first when both are), or `None` when the
/// deadline passed first. One of them is meant to be an eventfd rung to
/// end the wait early.
///
/// # Errors
/// Fails when `poll` itself fails.
pub fn either_readable(
    a: impl AsFd,
    b: impl AsFd,
    deadline: Option<Instant>,
) -> io::Result<Option<usize>> {
    loop {
        let timeout = deadline.map(|d| to_timespec(d.saturating_duration_since(Instant::now())));
        let mut fds = [
            PollFd::from_borrowed_fd(a.as_fd(), PollFlags::IN),
            PollFd::from_borrowed_fd(b.as_fd(), PollFlags::IN),
        ];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) => return Ok(None),
            Ok(_) => {
                if !fds[0].revents().is_empty() {
                    return Ok(Some(0));
                }
                if !fds[1].revents().is_empty() {
                    return Ok(Some(1));
                }
            }
            Err(Errno::INTR) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(None);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits until `fd` is readable (or at end of stream), up to `deadline`.
///
/// # Errors
/// Fails when `poll` itself fails.
pub fn readable(fd: impl AsFd, deadline: Option<Instant>) -> io::Result<Ready> {
    poll_one(fd.as_fd(), PollFlags::IN, deadline)
}

/// Waits until `fd` is writable, up to `deadline`.
///
/// # Errors
/// Fails when `poll` itself fails.
pub fn writable(fd: impl AsFd, deadline: Option<Instant>) -> io::Result<Ready> {
    poll_one(fd.as_fd(), PollFlags::OUT, deadline)
}

/// Waits until `fd` is readable or writable, up to `deadline`.
///
/// # Errors
/// Fails when `poll` itself fails.
pub fn readable_or_writable(fd: impl AsFd, deadline: Option<Instant>) -> io::Result<Ready> {
    poll_one(fd.as_fd(), PollFlags::IN | PollFlags::OUT, deadline)
}

/// Whether the peer of a socket has hung up (closed or shut down its writing
/// side) or the socket is in error, checked without blocking. Unread data does
/// not count.
pub fn peer_gone(fd: impl AsFd) -> bool {
    hangs_up_within(fd, Duration::ZERO)
}

/// Whether the peer of a socket hangs up (as [`peer_gone`] says) within
/// `timeout`: `poll(2)` for `POLLRDHUP`, sleeping until then. An interrupted
/// wait (`EINTR`) says no.
pub fn hangs_up_within(fd: impl AsFd, timeout: Duration) -> bool {
    let mut fds = [PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::RDHUP)];
    match poll(&mut fds, Some(&to_timespec(timeout))) {
        Ok(0) => false,
        Ok(_) => fds[0]
            .revents()
            .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        Err(Errno::INTR) => false,
        Err(_) => true,
    }
}

/// What a control socket (one that carries nothing once set up) shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlState {
    /// Nothing happened.
    Quiet,
    /// The peer closed or shut down its side, or the socket is in error.
    HungUp,
    /// The peer wrote bytes (still queued, not consumed).
    Bytes,
}

/// `poll(2)` with a zero timeout for `POLLIN | POLLRDHUP`, then a
/// `MSG_PEEK` of one byte: whether the peer of a control socket wrote to it,
/// hung up, or neither. Bytes count before a hang-up behind them.
pub fn control_state(fd: impl AsFd) -> ControlState {
    let fd = fd.as_fd();
    let mut fds = [PollFd::from_borrowed_fd(
        fd,
        PollFlags::IN | PollFlags::RDHUP,
    )];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(0) | Err(Errno::INTR) => ControlState::Quiet,
        Ok(_) => {
            let mut byte = [0u8; 1];
            if matches!(crate::net::peek(fd, &mut byte), Ok(1)) {
                ControlState::Bytes
            } else {
                ControlState::HungUp
            }
        }
        Err(_) => ControlState::HungUp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn sees_data_and_hangup() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let soon = Some(Instant::now() + Duration::from_millis(5));
        assert_eq!(readable(&b, soon).expect("poll"), Ready::TimedOut);
        assert!(!peer_gone(&b));
        a.write_all(b"x").expect("write");
        assert_eq!(readable(&b, None).expect("poll"), Ready::Yes);
        drop(a);
        assert!(peer_gone(&b));
    }

    #[test]
    fn a_hang_up_is_awaited_up_to_the_timeout() {
        let (a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let t = Instant::now();
        assert!(!hangs_up_within(&b, Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20), "it waited");
        let closer = std::thread::spawn(move || drop(a));
        assert!(hangs_up_within(&b, Duration::from_secs(10)));
        closer.join().expect("closer");
    }

    #[test]
    fn control_state_tells_bytes_from_hang_up() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
        assert_eq!(control_state(&b), ControlState::Quiet);
        a.write_all(b"x").expect("write");
        assert_eq!(control_state(&b), ControlState::Bytes);
        assert_eq!(control_state(&b), ControlState::Bytes, "nothing consumed");
        drop(a);
        assert_eq!(
            control_state(&b),
            ControlState::Bytes,
            "bytes before the hang-up"
        );
        let (c, d) = std::os::unix::net::UnixStream::pair().expect("pair");
        drop(c);
        assert_eq!(control_state(&d), ControlState::HungUp);
    }
}
