//! Socket calls std does not offer: accepting a connection already
//! non-blocking, sending without `SIGPIPE` and peeking at queued bytes
//! without consuming them.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, OwnedFd};

use rustix::net::{
    accept_with, acceptfrom_with, recv, sendmsg, RecvFlags, SendAncillaryBuffer, SendFlags,
    SocketFlags,
};

/// `accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC`: the accepted socket is
/// non-blocking from the start, without a second call to make it so.
///
/// # Errors
/// `EAGAIN` when no connection waits (on a non-blocking listener),
/// `EMFILE`/`ENFILE` (out of descriptors), `ENOBUFS`/`ENOMEM`, `EINTR`,
/// `ECONNABORTED`.
pub fn accept_nonblocking(listener: impl AsFd) -> io::Result<OwnedFd> {
    Ok(accept_with(
        listener,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
    )?)
}

/// `accept4(2)` on a TCP listener with `SOCK_NONBLOCK | SOCK_CLOEXEC`,
/// and the peer's address from the same call (no `getpeername`).
///
/// # Errors
/// As [`accept_nonblocking`]; `InvalidData` for a peer address that is not
/// IPv4 or IPv6 (a listener that is not TCP).
pub fn accept_tcp(listener: impl AsFd) -> io::Result<(OwnedFd, std::net::SocketAddr)> {
    let (fd, addr) = acceptfrom_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)?;
    let addr = addr
        .and_then(|a| std::net::SocketAddr::try_from(a).ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer of an accepted connection is not an IP address",
            )
        })?;
    Ok((fd, addr))
}

/// `sendmsg(2)` of the gathered `bufs` with `MSG_NOSIGNAL`: a peer that is
/// gone is an `EPIPE` error, never a `SIGPIPE` that would kill a host process
/// keeping the default handler (C programs, PHP). Returns the bytes sent
/// (possibly fewer than offered on a non-blocking socket).
///
/// # Errors
/// `EAGAIN` (non-blocking and full), `EPIPE`/`ECONNRESET` (peer gone), `EINTR`.
pub fn send_nosignal(sock: impl AsFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let mut no_control = SendAncillaryBuffer::default();
    Ok(sendmsg(sock, bufs, &mut no_control, SendFlags::NOSIGNAL)?)
}

/// `send(2)` of `buf` with `MSG_MORE | MSG_NOSIGNAL`: more follows at once
/// (a file by `sendfile(2)`), so the kernel holds a short head back to go
/// out in one segment with what follows rather than alone.
///
/// # Errors
/// As [`send_nosignal`].
pub fn send_more(sock: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::net::send(
        sock,
        buf,
        SendFlags::NOSIGNAL | SendFlags::MORE,
    )?)
}

/// `recv(2)` with `MSG_PEEK | MSG_DONTWAIT`: copies what is queued (up to
/// `buf.len()` bytes) without consuming it and without blocking. `Ok(0)` at
/// end of stream.
///
/// # Errors
/// `EAGAIN` when nothing is queued, socket errors.
pub fn peek(sock: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(recv(sock, buf, RecvFlags::PEEK | RecvFlags::DONTWAIT)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    #[test]
    fn accepts_a_non_blocking_socket() {
        use std::os::unix::net::UnixListener;
        let dir = std::env::temp_dir().join(format!("shmlink-sys-accept-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let l = UnixListener::bind(&dir).expect("bind");
        l.set_nonblocking(true).expect("nonblocking listener");
        assert_eq!(
            accept_nonblocking(&l).expect_err("nobody waits").kind(),
            io::ErrorKind::WouldBlock
        );
        let _c = UnixStream::connect(&dir).expect("connect");
        let s = UnixStream::from(accept_nonblocking(&l).expect("accept"));
        let mut buf = [0u8; 1];
        // Nothing sent yet: a blocking socket would wait here forever.
        assert_eq!(
            (&s).read(&mut buf).expect_err("non-blocking").kind(),
            io::ErrorKind::WouldBlock
        );
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn peeks_without_consuming_and_sends_without_sigpipe() {
        let (a, mut b) = UnixStream::pair().expect("pair");
        let mut buf = [0u8; 8];
        assert_eq!(
            peek(&b, &mut buf).expect_err("empty").kind(),
            io::ErrorKind::WouldBlock
        );
        let n = send_nosignal(&a, &[IoSlice::new(b"he"), IoSlice::new(b"llo")]).expect("send");
        assert_eq!(n, 5);
        assert_eq!(peek(&b, &mut buf).expect("peek"), 5);
        assert_eq!(peek(&b, &mut buf[..2]).expect("peek again"), 2);
        let mut got = [0u8; 5];
        b.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"hello");
        drop(b);
        // Without MSG_NOSIGNAL this would kill the test process.
        let e = send_nosignal(&a, &[IoSlice::new(b"x")]).expect_err("peer gone");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}

/// What kind of connected stream socket a descriptor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// A Unix stream socket.
    Unix,
    /// A TCP socket (IPv4 or IPv6).
    Tcp,
}

/// The kind of connected stream socket `fd` is, or `None` when it is
/// anything else: not a socket, not a stream, listening, or not connected.
/// `getsockopt(2)` (`SO_TYPE`, `SO_DOMAIN`, `SO_ACCEPTCONN`) and
/// `getpeername(2)`; every error reads as "not one".
pub fn connected_stream_kind(fd: impl AsFd) -> Option<StreamKind> {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let fd = fd.as_fd();
    if sockopt::socket_type(fd).ok()? != SocketType::STREAM
        || sockopt::socket_acceptconn(fd).ok()?
    {
        return None;
    }
    let kind = match sockopt::socket_domain(fd).ok()? {
        AddressFamily::UNIX => StreamKind::Unix,
        AddressFamily::INET | AddressFamily::INET6 => StreamKind::Tcp,
        _ => return None,
    };
    rustix::net::getpeername(fd).ok()?;
    Some(kind)
}
