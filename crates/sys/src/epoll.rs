//! An epoll set (`epoll_create1(2)`, `epoll_ctl(2)`, `epoll_wait(2)`): the
//! server's accept loop waits on its listeners, its stop event and the
//! control socket of every `shm:` session at once.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
use rustix::io::Errno;

/// What a descriptor in the set is watched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Readable, level-triggered (`EPOLLIN`): listeners and event fds.
    Readable,
    /// The peer hung up, edge-triggered (`EPOLLRDHUP | EPOLLIN | EPOLLET`):
    /// reported once when the other end of a socket closes (or sends bytes,
    /// which a control socket never should after the handshake).
    HangUp,
}

impl Interest {
    fn flags(self) -> EventFlags {
        match self {
            Interest::Readable => EventFlags::IN,
            Interest::HangUp => EventFlags::RDHUP | EventFlags::IN | EventFlags::ET,
        }
    }
}

/// An epoll instance (close-on-exec). Each watched descriptor carries a
/// caller-chosen `u64` token that [`Epoll::wait`] reports.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    ///
    /// # Errors
    /// `EMFILE`/`ENFILE` (out of descriptors), `ENOMEM`.
    pub fn new() -> io::Result<Epoll> {
        Ok(Epoll(epoll::create(CreateFlags::CLOEXEC)?))
    }

    /// `epoll_ctl(EPOLL_CTL_ADD)`: watches `fd` for `interest`, reported as `token`.
    ///
    /// # Errors
    /// `EEXIST` when `fd` is already in the set, `ENOMEM`/`ENOSPC` (the
    /// per-user watch limit), `EBADF`.
    pub fn add(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        Ok(epoll::add(
            &self.0,
            fd,
            EventData::new_u64(token),
            interest.flags(),
        )?)
    }

    /// `epoll_ctl(EPOLL_CTL_DEL)`: stops watching `fd`.
    ///
    /// # Errors
    /// `ENOENT` when `fd` is not in the set, `EBADF`.
    pub fn delete(&self, fd: impl AsFd) -> io::Result<()> {
        Ok(epoll::delete(&self.0, fd)?)
    }

    /// `epoll_wait`, until a descriptor is ready (`now == false`) or not
    /// waiting at all (`now`, a timeout of 0): replaces `tokens` with the
    /// tokens of the descriptors that are ready (at most `tokens`' capacity).
    /// A signal interrupting the wait returns with `tokens` empty, as does a
    /// look (`now`) that finds nothing ready.
    ///
    /// # Errors
    /// `EBADF`/`EINVAL` on a broken set (never in normal operation).
    pub fn wait(&self, tokens: &mut Vec<u64>, now: bool) -> io::Result<()> {
        tokens.clear();
        let mut events = Vec::with_capacity(tokens.capacity().max(1));
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let timeout = now.then_some(&zero);
        match epoll::wait(
            &self.0,
            rustix::buffer::spare_capacity(&mut events),
            timeout,
        ) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        tokens.extend(events.iter().map(|ev| ev.data.u64()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn reports_readable_and_hang_up_by_token() {
        let ep = Epoll::new().expect("epoll");
        let (mut a, b) = UnixStream::pair().expect("pair");
        let (c, d) = UnixStream::pair().expect("pair");
        ep.add(&b, 7, Interest::Readable).expect("add b");
        ep.add(&d, 9, Interest::HangUp).expect("add d");
        assert!(ep.add(&d, 9, Interest::HangUp).is_err(), "EEXIST");
        a.write_all(b"x").expect("write");
        let mut tokens = Vec::with_capacity(8);
        ep.wait(&mut tokens, false).expect("wait");
        assert_eq!(tokens, vec![7]);
        ep.delete(&b).expect("delete");
        assert!(ep.delete(&b).is_err(), "ENOENT");
        ep.wait(&mut tokens, true).expect("look");
        assert!(tokens.is_empty(), "nothing ready: {tokens:?}");
        drop(c);
        ep.wait(&mut tokens, true).expect("look");
        assert_eq!(tokens, vec![9]);
    }
}
