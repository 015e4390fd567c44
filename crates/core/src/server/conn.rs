//! Accepted connections before they become sessions: the client's hello as
//! it arrives, and the welcome or refusal sent back.

use std::io::{self, IoSlice};
use std::net::TcpStream;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use shmlink_sys::fdpass;

use crate::error::RefusalCode;
use crate::link::stream::{Patience, Stream};
use shmlink_wire::handshake::{Welcome, HELLO_LEN};

/// An accepted connection (non-blocking).
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

    /// Refuses the connection at once, on the accept thread: a refusal is
    /// small enough never to wait for room on a fresh socket.
    pub(crate) fn refuse_now(self, code: RefusalCode, message: String) {
        let s = self.into_stream();
        let now = Patience::new(Instant::now(), Duration::ZERO);
        let _ = send_welcome(&s, &Welcome::Refused { code, message }, None, &now);
    }
}

/// The client's hello, read as it arrives.
#[derive(Debug)]
pub(crate) struct HelloBuf {
    pub(crate) bytes: [u8; HELLO_LEN],
    have: usize,
}

impl HelloBuf {
    pub(crate) fn new() -> HelloBuf {
        HelloBuf {
            bytes: [0; HELLO_LEN],
            have: 0,
        }
    }

    /// Reads what is queued of the hello without waiting (clients send it
    /// right after connecting); true when it is complete. The accept thread
    /// runs a handshake whose hello is complete; it cannot block.
    pub(crate) fn read_queued(&mut self, conn: &Stream) -> bool {
        while self.have < HELLO_LEN {
            match conn.read_some(&mut self.bytes[self.have..]) {
                Ok(n) if n > 0 => self.have += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // End of stream or an error: the handshake reports it.
                _ => return false,
            }
        }
        true
    }

    /// Reads the rest of the hello, waiting as `patience` says.
    ///
    /// # Errors
    /// As [`Stream::read_exact_by`].
    pub(crate) fn read_rest(&mut self, conn: &Stream, patience: &Patience) -> io::Result<()> {
        conn.read_exact_by(&mut self.bytes[self.have..], patience)?;
        self.have = HELLO_LEN;
        Ok(())
    }
}

/// Sends a welcome (with the segment's descriptor for `shm:`), waiting for
/// room as `patience` says.
///
/// # Errors
/// Socket errors, `TimedOut`.
pub(crate) fn send_welcome(
    conn: &Stream,
    w: &Welcome,
    fd: Option<BorrowedFd<'_>>,
    patience: &Patience,
) -> io::Result<()> {
    let bytes = w.encode();
    let mut sent = 0;
    if let (Stream::Unix(s), Some(fd)) = (conn, fd) {
        // The descriptor goes with the first byte sent.
        loop {
            match fdpass::send_vectored_with_fds(s, &[IoSlice::new(&bytes)], &[fd], true) {
                Ok(n) => {
                    sent = n;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => patience.wait(s, true)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    conn.write_all_by(&bytes[sent..], patience)
}
