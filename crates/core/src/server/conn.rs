//! Accepted connections before they become sessions: the check that a
//! client's hello is already queued, and the welcome or refusal sent back.

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use shmlink_sys::fdpass;

use crate::error::RefusalCode;
use crate::handshake::{Welcome, HELLO_LEN};
use crate::link::stream::Stream;

/// An accepted connection.
#[derive(Debug)]
pub(crate) enum Conn {
    /// On an `shm:` or `unix:` listener.
    Unix(UnixStream),
    /// On a `tcp:` listener.
    Tcp(TcpStream),
}

impl Conn {
    /// The stream the session will use.
    pub(crate) fn into_stream(self) -> Stream {
        match self {
            Conn::Unix(s) => Stream::Unix(s),
            Conn::Tcp(s) => {
                // Frames are written whole (one writev); never wait for more.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }
        }
    }

    /// Whether the client's whole hello is already queued on the socket, so
    /// the handshake can run without blocking (on the accept thread).
    pub(crate) fn hello_queued(&self) -> bool {
        let mut peek = [0u8; HELLO_LEN];
        let fd = match self {
            Conn::Unix(s) => s.as_fd(),
            Conn::Tcp(s) => s.as_fd(),
        };
        matches!(shmlink_sys::net::peek(fd, &mut peek), Ok(n) if n == HELLO_LEN)
    }

    /// Refuses the connection at once, on the accept thread: a refusal is
    /// small enough never to block on a fresh socket.
    pub(crate) fn refuse_now(self, code: RefusalCode, message: String) {
        let s = self.into_stream();
        let _ = s.set_nonblocking(true);
        let _ = send_welcome(&s, &Welcome::Refused { code, message }, None);
    }
}

/// Sends a welcome (with the segment's descriptor for `shm:`).
///
/// # Errors
/// Socket errors.
pub(crate) fn send_welcome(
    conn: &Stream,
    w: &Welcome,
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let bytes = w.encode();
    match (conn, fd) {
        (Stream::Unix(s), Some(fd)) => {
            let n = fdpass::send_with_fds(s, &bytes, &[fd])?;
            conn.write_all(&bytes[n..])
        }
        _ => conn.write_all(&bytes),
    }
}
