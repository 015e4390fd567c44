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
    /// Readable, edge-triggered (`EPOLLIN | EPOLLET`): reported once for
    /// each time the descriptor is signalled (an eventfd written to), even
    /// when it was readable already, so it never needs to be read.
    Signalled,
    /// The peer hung up, edge-triggered (`EPOLLRDHUP | EPOLLIN | EPOLLET`):
    /// reported once when the other end of a socket closes (or sends bytes,
    /// which a control socket never should after the handshake).
    HangUp,
    /// Readable, writable or hung up, edge-triggered (`EPOLLIN | EPOLLOUT |
    /// EPOLLRDHUP | EPOLLET`): an event loop's connection, registered once;
    /// the loop reads and writes until `EAGAIN`, and learns of each change
    /// once.
    Edge,
}

impl Interest {
    fn flags(self) -> EventFlags {
        match self {
            Interest::Readable => EventFlags::IN,
            Interest::Signalled => EventFlags::IN | EventFlags::ET,
            Interest::HangUp => EventFlags::RDHUP | EventFlags::IN | EventFlags::ET,
            Interest::Edge => EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET,
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
        self.wait_for(tokens, now.then_some(std::time::Duration::ZERO))
    }

    /// As [`Epoll::wait`], for up to `timeout` (`None`: until something is
    /// ready); a wait that times out returns with `tokens` empty.
    ///
    /// # Errors
    /// `EBADF`/`EINVAL` on a broken set (never in normal operation).
    pub fn wait_for(
        &self,
        tokens: &mut Vec<u64>,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<()> {
        tokens.clear();
        let mut events = Vec::with_capacity(tokens.capacity().max(1));
        let ts = timeout.map(|d| rustix::time::Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        match epoll::wait(
            &self.0,
            rustix::buffer::spare_capacity(&mut events),
            ts.as_ref(),
        ) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        tokens.extend(events.iter().map(|ev| ev.data.u64()));
        Ok(())
    }
}

impl AsFd for Epoll {
    /// The set's own descriptor: readable while a watched descriptor is
    /// ready, so one set nests in another loop (epoll, poll, a runtime's
    /// reactor).
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// What [`Epoll::wait_events`] reports of one descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The token it was added with.
    pub token: u64,
    /// Readable (or at end of stream, or in error).
    pub readable: bool,
    /// Writable (or in error).
    pub writable: bool,
    /// The peer hung up or the socket is in error (`EPOLLRDHUP`,
    /// `EPOLLHUP`, `EPOLLERR`).
    pub hang_up: bool,
}

/// Room for the events of one [`Epoll::wait_events`], kept between waits
/// (no allocation per wait).
pub struct Events {
    raw: Vec<epoll::Event>,
    /// What the last wait reported.
    pub ready: Vec<Event>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("ready", &self.ready)
            .finish()
    }
}

impl Events {
    /// Room for up to `n` events per wait.
    pub fn with_capacity(n: usize) -> Events {
        Events {
            raw: Vec::with_capacity(n.max(1)),
            ready: Vec::with_capacity(n.max(1)),
        }
    }
}

impl Epoll {
    /// `epoll_wait` for up to `timeout` (`None`: until something is ready;
    /// zero: a look): `events.ready` gets what is ready, with its kind. A
    /// signal interrupting the wait returns with nothing ready.
    ///
    /// # Errors
    /// `EBADF`/`EINVAL` on a broken set (never in normal operation).
    pub fn wait_events(
        &self,
        events: &mut Events,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<()> {
        events.raw.clear();
        events.ready.clear();
        let ts = timeout.map(|d| rustix::time::Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        match epoll::wait(
            &self.0,
            rustix::buffer::spare_capacity(&mut events.raw),
            ts.as_ref(),
        ) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let bad = EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR;
        events.ready.extend(events.raw.iter().map(|ev| {
            // Copied out of the packed kernel struct before use.
            let (flags, data) = (ev.flags, ev.data);
            Event {
                token: data.u64(),
                readable: flags.intersects(EventFlags::IN | bad),
                writable: flags.intersects(EventFlags::OUT | EventFlags::ERR),
                hang_up: flags.intersects(bad),
            }
        }));
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

    #[test]
    fn edge_events_say_what_changed_once() {
        let ep = Epoll::new().expect("epoll");
        let (mut a, b) = UnixStream::pair().expect("pair");
        ep.add(&b, 3, Interest::Edge).expect("add");
        let mut ev = Events::with_capacity(4);
        // Writable from the start: reported once.
        ep.wait_events(&mut ev, Some(std::time::Duration::ZERO))
            .expect("look");
        assert_eq!(ev.ready.len(), 1);
        assert!(ev.ready[0].writable && !ev.ready[0].readable && !ev.ready[0].hang_up);
        ep.wait_events(&mut ev, Some(std::time::Duration::ZERO))
            .expect("look");
        assert!(ev.ready.is_empty(), "an edge is reported once");
        a.write_all(b"x").expect("write");
        ep.wait_events(&mut ev, Some(std::time::Duration::from_secs(5)))
            .expect("wait");
        assert_eq!((ev.ready[0].token, ev.ready[0].readable), (3, true));
        drop(a);
        ep.wait_events(&mut ev, Some(std::time::Duration::from_secs(5)))
            .expect("wait");
        assert!(ev.ready[0].hang_up && ev.ready[0].readable);
    }
}
