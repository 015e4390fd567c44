//! Frames over a Unix or TCP stream socket: the frame header is the length
//! prefix; reads are buffered and always complete frames; writes gather the
//! header and payload into one `writev`.

use std::io::{self, IoSlice, Read};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_sys::eventfd::EventFd;
use shmlink_sys::poll::{self, Ready};

use super::bell::Readiness;
use super::fds;
use super::inbox::Inbox;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::message::{Assembler, Message};
use crate::watch::{verdict_error, Verdict, Watch};
use shmlink_wire::frame::{FrameHeader, HEADER_LEN, MAX_FDS};

/// Largest payload of one frame on a stream.
pub(crate) const MAX_CHUNK: usize = 1 << 20;
/// Read buffer size.
const READ_BUF: usize = 64 * 1024;

/// A connected Unix or TCP stream.
#[derive(Debug)]
pub(crate) enum Stream {
    /// Unix stream socket.
    Unix(UnixStream),
    /// TCP socket (with `TCP_NODELAY`).
    Tcp(TcpStream),
}

impl Stream {
    /// Switches blocking mode.
    ///
    /// # Errors
    /// Socket errors.
    pub(crate) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(on),
            Stream::Tcp(s) => s.set_nonblocking(on),
        }
    }

    /// Shuts down the reading side (used by the server to stop a session).
    pub(crate) fn shutdown_read(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Read),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Read),
        };
    }

    /// Reads some bytes.
    ///
    /// # Errors
    /// Socket errors.
    pub(crate) fn read_some(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => (&*s).read(buf),
            Stream::Tcp(s) => (&*s).read(buf),
        }
    }

    /// Writes some bytes from the slices.
    ///
    /// # Errors
    /// Socket errors.
    /// Uses `sendmsg` with `MSG_NOSIGNAL`: a dead peer is an error, never a
    /// SIGPIPE that would kill a host process keeping the default handler
    /// (C programs, PHP).
    pub(crate) fn write_some(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        shmlink_sys::net::send_nosignal(self, bufs)
    }

    /// Reads exactly `buf.len()` bytes (handshake only; the socket is
    /// non-blocking), waiting as `patience` says: a peer sending a byte at
    /// a time cannot stretch its deadline.
    ///
    /// # Errors
    /// `TimedOut` at the deadline, `UnexpectedEof`, socket errors.
    pub(crate) fn read_exact_by(&self, buf: &mut [u8], patience: &Patience) -> io::Result<()> {
        let mut have = 0;
        while have < buf.len() {
            match self.read_some(&mut buf[have..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => have += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => patience.wait(self, false)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes all of `buf` (handshake only; the socket is non-blocking),
    /// waiting for room as `patience` says.
    ///
    /// # Errors
    /// `TimedOut` at the deadline, socket errors.
    pub(crate) fn write_all_by(&self, mut buf: &[u8], patience: &Patience) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_some(&[IoSlice::new(buf)]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => patience.wait(self, true)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// How a handshake step waits for its non-blocking socket: until
/// `deadline` in all, trying the socket again without sleeping until
/// `spin_until` (a client waiting for its welcome: on a VM, waking a CPU
/// that went idle costs tens of µs), then sleeping in `poll(2)`. Deadlines
/// by `poll` cost no `setsockopt` calls, where socket timeouts cost two to
/// set and more to change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Patience {
    deadline: Instant,
    spin_until: Instant,
}

impl Patience {
    /// Waits until `deadline`, spinning for the first `spin` of it.
    pub(crate) fn new(deadline: Instant, spin: Duration) -> Patience {
        Patience {
            deadline,
            spin_until: (Instant::now() + spin).min(deadline),
        }
    }

    /// Returns when the socket may be ready (readable, or writable when
    /// `write`), or at once while spinning: the caller tries again.
    ///
    /// # Errors
    /// `TimedOut` at the deadline; `poll` failing.
    pub(crate) fn wait(&self, sock: impl AsFd, write: bool) -> io::Result<()> {
        if Instant::now() < self.spin_until {
            std::hint::spin_loop();
            return Ok(());
        }
        let ready = if write {
            poll::writable(sock, Some(self.deadline))?
        } else {
            poll::readable(sock, Some(self.deadline))?
        };
        match ready {
            // A hang-up shows in the next read or write.
            Ready::Yes | Ready::HungUp => Ok(()),
            Ready::TimedOut => Err(io::ErrorKind::TimedOut.into()),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

/// One side of a stream session.
#[derive(Debug)]
pub(crate) struct StreamLink {
    sock: Arc<Stream>,
    rbuf: Box<[u8]>,
    rpos: usize,
    rend: usize,
    flags: Option<Watch>,
    address: String,
    /// The unsent end of a frame a send timeout cut off. The frame is
    /// committed (its first bytes are on the wire): this goes out before
    /// anything else, during later sends and while waiting to receive.
    pending: Vec<u8>,
    /// Descriptors received (`SCM_RIGHTS`) and not yet claimed by a frame,
    /// in order; `Some` when the session agreed on descriptors.
    fd_queue: Option<Vec<OwnedFd>>,
    /// Our readiness descriptor, once a loop asked for it.
    readiness: Option<Readiness>,
    /// A server's session of a server that may hand over: rung to end a
    /// wait between messages without touching the socket (a `shutdown`
    /// would reach the successor's copy too).
    interrupt: Option<Arc<EventFd>>,
}

/// Reads some bytes, collecting the descriptors that come with them when
/// `fd_queue` is `Some`.
///
/// # Errors
/// Socket errors; `InvalidData` when descriptors pile up with no frame
/// claiming them.
fn read_from(
    sock: &Stream,
    fd_queue: &mut Option<Vec<OwnedFd>>,
    buf: &mut [u8],
) -> io::Result<usize> {
    let Some(queue) = fd_queue else {
        return sock.read_some(buf);
    };
    let n = shmlink_sys::fdpass::recv_fds_into(sock, buf, queue, false)?;
    if queue.len() > 2 * MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} file descriptors arrived that no frame announced",
                queue.len()
            ),
        ));
    }
    Ok(n)
}

/// Hands the descriptors frame `h` announces (received with its first
/// bytes) to `asm`, for the message it begins.
#[inline(always)]
fn claim_fds(
    fd_queue: &mut Option<Vec<OwnedFd>>,
    addr: &str,
    h: &FrameHeader,
    asm: &mut Assembler,
) -> Result<()> {
    if h.fds == 0 {
        return Ok(());
    }
    let Some(queue) = fd_queue.as_mut() else {
        return Err(fds::not_agreed(h, addr));
    };
    asm.attach_fds(fds::take(queue, h, addr)?);
    Ok(())
}

impl StreamLink {
    /// A link over a connected socket (switched to non-blocking). `flags` is
    /// the server's stop/gone watch, `None` on clients.
    ///
    /// # Errors
    /// When the socket cannot be made non-blocking.
    pub(crate) fn new(sock: Arc<Stream>, flags: Option<Watch>, address: String) -> Result<Self> {
        sock.set_nonblocking(true)
            .map_err(|e| Error::io(format!("configuring socket of {address}"), e))?;
        Ok(StreamLink {
            sock,
            rbuf: vec![0u8; READ_BUF].into_boxed_slice(),
            rpos: 0,
            rend: 0,
            flags,
            address,
            pending: Vec::new(),
            fd_queue: None,
            readiness: None,
            interrupt: None,
        })
    }

    /// The same link, its waits between messages also ended by `interrupt`
    /// (then, when its watch says the server stops or hands over, the wait
    /// fails with `Closed`; otherwise it goes on).
    pub(crate) fn with_interrupt(mut self, interrupt: Arc<EventFd>) -> Self {
        self.interrupt = Some(interrupt);
        self
    }

    /// Starts with `bytes` read from the socket already (by a server this
    /// one took the session over from).
    pub(crate) fn with_read_ahead(mut self, bytes: &[u8]) -> Self {
        if self.rbuf.len() < bytes.len() {
            self.rbuf = vec![0u8; bytes.len()].into_boxed_slice();
        }
        self.rbuf[..bytes.len()].copy_from_slice(bytes);
        self.rpos = 0;
        self.rend = bytes.len();
        self
    }

    /// What a successor needs to go on where this link stopped: the bytes
    /// read from the socket and not yet parsed. `Err` says why it cannot go
    /// on elsewhere: the end of a frame still unsent, or descriptors
    /// received that no frame claimed yet.
    pub(crate) fn parting(&self) -> std::result::Result<&[u8], String> {
        if !self.pending.is_empty() {
            return Err(format!(
                "{} bytes of a frame to {} are still unsent",
                self.pending.len(),
                self.address
            ));
        }
        if self.fd_queue.as_ref().is_some_and(|q| !q.is_empty()) {
            return Err(format!(
                "descriptors from {} arrived for a frame not read yet",
                self.address
            ));
        }
        Ok(&self.rbuf[self.rpos..self.rend])
    }

    /// The socket (to hand over).
    pub(crate) fn socket(&self) -> &Stream {
        &self.sock
    }

    /// The interrupt of its waits between messages, if it has one.
    pub(crate) fn interrupt(&self) -> Option<Arc<EventFd>> {
        self.interrupt.clone()
    }

    /// The same link, receiving file descriptors with frames when `on` (the
    /// session agreed on them; Unix sockets only).
    pub(crate) fn with_fds(mut self, on: bool) -> Self {
        if on && self.is_unix() {
            self.fd_queue = Some(Vec::new());
        }
        self
    }

    /// Whether the socket is a Unix one (which can pass descriptors).
    pub(crate) fn is_unix(&self) -> bool {
        matches!(*self.sock, Stream::Unix(_))
    }

    /// The socket: readable when a frame comes or the peer hangs up.
    pub(crate) fn control_socket(&self) -> Option<BorrowedFd<'_>> {
        Some(self.sock.as_fd())
    }

    /// Whether the peer still looks alive.
    pub(crate) fn peer_alive(&self) -> bool {
        !poll::peer_gone(&*self.sock)
    }

    fn gone(&self, detail: impl Into<String>) -> Error {
        Error::PeerGone {
            address: self.address.clone(),
            detail: detail.into(),
        }
    }

    fn io_error(&self, e: io::Error) -> Error {
        match e.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted => self.gone(e.to_string()),
            _ => Error::io(format!("socket of session {}", self.address), e),
        }
    }

    /// Writes as much of `pending` as the socket takes without blocking;
    /// true once it is all written.
    fn try_flush(&mut self) -> Result<bool> {
        while !self.pending.is_empty() {
            match self.sock.write_some(&[IoSlice::new(&self.pending)]) {
                Ok(0) => return Err(self.gone("socket accepted no bytes")),
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
        Ok(true)
    }

    /// Writes one frame if the socket takes all of it now, after whatever
    /// is pending; never waits (a frame cut short there is left cut: this is
    /// for the `Goodbye` of a session that is ending).
    pub(crate) fn try_send_now(&mut self, h: &FrameHeader, payload: &[u8]) -> bool {
        if !matches!(self.try_flush(), Ok(true)) {
            return false;
        }
        let head = h.encode();
        let all = HEADER_LEN + payload.len();
        matches!(
            self.sock
                .write_some(&[IoSlice::new(&head), IoSlice::new(payload)]),
            Ok(n) if n == all
        )
    }

    /// Sends one frame; `fds` go with its first byte.
    pub(crate) fn send_frame(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        mut fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
        mut inbox: Option<Inbox<'_>>,
    ) -> Result<()> {
        let head = h.encode();
        let mut bufs = [IoSlice::new(&head), IoSlice::new(payload)];
        let mut slices: &mut [IoSlice<'_>] = &mut bufs;
        let t0 = Instant::now();
        let deadline = deadline.at_from(t0);
        // First the rest of an earlier frame; timing out here leaves this
        // frame unsent, so the caller may retry it.
        while !self.try_flush()? {
            match self.wait_writable(deadline, inbox.as_mut())? {
                Ready::Yes => {}
                Ready::TimedOut => {
                    return Err(Error::Timeout {
                        address: self.address.clone(),
                        op: "sending on the socket",
                        after: t0.elapsed(),
                    })
                }
                Ready::HungUp => return Err(self.gone("socket hung up")),
            }
        }
        let mut written = 0usize;
        while !slices.is_empty() {
            let wrote = if fds.is_empty() {
                self.sock.write_some(slices)
            } else {
                shmlink_sys::fdpass::send_vectored_with_fds(&*self.sock, slices, fds, true)
            };
            match wrote {
                Ok(0) => return Err(self.gone("socket accepted no bytes")),
                Ok(n) => {
                    fds = &[];
                    written += n;
                    IoSlice::advance_slices(&mut slices, n)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match self.wait_writable(deadline, inbox.as_mut())? {
                        Ready::Yes => {}
                        Ready::TimedOut if written > 0 && self.flags.is_none() => {
                            // A client: part of the frame is on the wire, so
                            // it is sent as far as the caller is concerned;
                            // the rest follows before anything else. (A
                            // server gives up instead, as on `shm:`: a client
                            // that stops reading loses its session after
                            // `send_timeout`, and holds no thread.)
                            for s in slices.iter() {
                                self.pending.extend_from_slice(s);
                            }
                            return Ok(());
                        }
                        Ready::TimedOut => {
                            return Err(Error::Timeout {
                                address: self.address.clone(),
                                op: "sending on the socket",
                                after: t0.elapsed(),
                            })
                        }
                        Ready::HungUp => return Err(self.gone("socket hung up")),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if !fds.is_empty() && shmlink_sys::fdpass::fd_refusal(&e).is_some() => {
                    return Err(fds::send_error(&self.address, e))
                }
                Err(e) => return Err(self.io_error(e)),
            }
        }
        Ok(())
    }

    /// Waits until the socket takes more bytes. A sender with an inbox also
    /// wakes up for incoming data and files it: the peer may be blocked
    /// writing to us, and would never read what we send otherwise.
    fn wait_writable(
        &mut self,
        deadline: Option<Instant>,
        inbox: Option<&mut Inbox<'_>>,
    ) -> Result<Ready> {
        let Some(inbox) = inbox else {
            return poll::writable(&*self.sock, deadline).map_err(|e| self.io_error(e));
        };
        let ready =
            poll::readable_or_writable(&*self.sock, deadline).map_err(|e| self.io_error(e))?;
        if ready == Ready::Yes {
            // Readable, writable or both: file what arrived; the caller then
            // tries writing again.
            self.drain(inbox)?;
        }
        Ok(ready)
    }

    /// Reads what the socket has without blocking and files every complete
    /// frame (whole messages into `inbox.out`).
    fn drain(&mut self, inbox: &mut Inbox<'_>) -> Result<()> {
        loop {
            while let Some(frame) = self.take_buffered_frame(inbox.asm)? {
                if let Some(m) = frame {
                    inbox.out.push_back(m);
                }
            }
            if self.rpos > 0 {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend -= self.rpos;
                self.rpos = 0;
            }
            if self.rend == self.rbuf.len() {
                return Ok(());
            }
            match read_from(&self.sock, &mut self.fd_queue, &mut self.rbuf[self.rend..]) {
                Ok(0) => return Err(self.gone("connection closed by peer")),
                Ok(n) => self.rend += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
    }

    /// Files every whole frame the socket already holds, without waiting
    /// (whatever error ends the reading is the caller's to find later).
    pub(crate) fn drain_now(&mut self, inbox: &mut Inbox<'_>) {
        let _ = self.drain(inbox);
    }

    /// Takes one frame out of the read buffer if it is there whole: `None`
    /// when it is not (the buffer grows to hold a frame larger than it),
    /// `Some(None)` for a chunk of a message still incomplete.
    fn take_buffered_frame(&mut self, asm: &mut Assembler) -> Result<Option<Option<Message>>> {
        if self.rend - self.rpos < HEADER_LEN {
            return Ok(None);
        }
        let proto = |detail: String| Error::Protocol {
            peer: self.address.clone(),
            detail,
        };
        let h = FrameHeader::decode(&self.rbuf[self.rpos..self.rpos + HEADER_LEN])
            .map_err(|e| proto(e.0))?;
        let len = h.len as usize;
        if len > MAX_CHUNK {
            return Err(proto(format!(
                "frame of {len} bytes exceeds the stream chunk limit of {MAX_CHUNK}"
            )));
        }
        if self.rend - self.rpos < HEADER_LEN + len {
            if self.rbuf.len() < HEADER_LEN + len {
                let mut bigger = vec![0u8; HEADER_LEN + len].into_boxed_slice();
                bigger[..self.rend - self.rpos].copy_from_slice(&self.rbuf[self.rpos..self.rend]);
                self.rend -= self.rpos;
                self.rpos = 0;
                self.rbuf = bigger;
            }
            return Ok(None);
        }
        let body = self.rpos + HEADER_LEN;
        claim_fds(&mut self.fd_queue, &self.address, &h, asm)?;
        let buf = asm.begin_chunk(&h).map_err(|e| proto(e.0))?;
        buf.extend_from_slice(&self.rbuf[body..body + len]);
        self.rpos = body + len;
        asm.finish(&h).map_err(|e| proto(e.0)).map(Some)
    }

    /// Makes at least one more byte available in the read buffer.
    fn fill(&mut self, deadline: Option<Instant>, mid_message: bool, t0: Instant) -> Result<()> {
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
        } else if self.rend == self.rbuf.len() {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
        }
        loop {
            match read_from(&self.sock, &mut self.fd_queue, &mut self.rbuf[self.rend..]) {
                Ok(0) => return Err(self.eof(mid_message)),
                Ok(n) => {
                    self.rend += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if mid_message {
                        self.wait_readable(deadline, t0)?;
                    } else {
                        self.wait_between(deadline, t0)?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
    }

    /// [`StreamLink::wait_readable`] between messages: with an interrupt,
    /// it also ends when the server stops or hands over (`Closed`).
    fn wait_between(&mut self, deadline: Option<Instant>, t0: Instant) -> Result<()> {
        let Some(evt) = self.interrupt.clone() else {
            return self.wait_readable(deadline, t0);
        };
        if !self.try_flush()? {
            // The rest of a frame a send timeout cut off goes first (the
            // peer may need it); such a session cannot be handed anyway.
            return self.wait_readable(deadline, t0);
        }
        loop {
            // Cleared before the look, so that a ring after it is seen.
            evt.clear();
            if let Some(w) = &self.flags {
                if w.check() == Verdict::Stopping {
                    return Err(verdict_error(Verdict::Stopping, &self.address)
                        .unwrap_or_else(|| self.gone("closed")));
                }
            }
            match poll::either_readable(&*self.sock, &*evt, deadline)
                .map_err(|e| self.io_error(e))?
            {
                Some(0) => return Ok(()),
                Some(_) => {}
                None => {
                    return Err(Error::Timeout {
                        address: self.address.clone(),
                        op: "waiting for a response",
                        after: t0.elapsed(),
                    })
                }
            }
        }
    }

    fn eof(&self, mid_message: bool) -> Error {
        if let Some(w) = &self.flags {
            if !mid_message && w.check() == Verdict::Stopping {
                return verdict_error(Verdict::Stopping, &self.address)
                    .unwrap_or_else(|| self.gone("closed"));
            }
        }
        self.gone("connection closed by peer")
    }

    /// Whether bytes of a frame are already read into the buffer (never
    /// waits, makes no syscall).
    pub(crate) fn ready_now(&self) -> bool {
        self.rend > self.rpos
    }

    /// Waits until bytes of a frame can be read, without reading them:
    /// `false` when `deadline` passed first.
    ///
    /// # Errors
    /// Socket errors.
    pub(crate) fn readable(&mut self, deadline: &mut Deadline) -> Result<bool> {
        if self.rend > self.rpos {
            return Ok(true);
        }
        let t0 = Instant::now();
        match self.wait_readable(deadline.at_from(t0), t0) {
            Ok(()) => Ok(true),
            Err(Error::Timeout { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn wait_readable(&mut self, deadline: Option<Instant>, t0: Instant) -> Result<()> {
        // The peer may need the rest of our last frame before it answers.
        while !self.try_flush()? {
            match poll::readable_or_writable(&*self.sock, deadline).map_err(|e| self.io_error(e))? {
                Ready::Yes => {
                    if poll::readable(&*self.sock, Some(Instant::now()))
                        .map_err(|e| self.io_error(e))?
                        != Ready::TimedOut
                    {
                        return Ok(());
                    }
                }
                Ready::HungUp => return Ok(()),
                Ready::TimedOut => {
                    return Err(Error::Timeout {
                        address: self.address.clone(),
                        op: "waiting for a response",
                        after: t0.elapsed(),
                    })
                }
            }
        }
        match poll::readable(&*self.sock, deadline).map_err(|e| self.io_error(e))? {
            Ready::Yes | Ready::HungUp => Ok(()),
            Ready::TimedOut => Err(Error::Timeout {
                address: self.address.clone(),
                op: "waiting for a response",
                after: t0.elapsed(),
            }),
        }
    }

    /// Makes our readiness descriptor (the socket in a set of its own) on
    /// first use.
    ///
    /// # Errors
    /// Out of descriptors.
    pub(crate) fn open_readiness(&mut self) -> Result<()> {
        if self.readiness.is_none() {
            self.readiness = Some(Readiness::on_socket(self.sock.as_fd(), &self.address)?);
        }
        Ok(())
    }

    /// The readiness descriptor, once opened.
    pub(crate) fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        self.readiness.as_ref().map(Readiness::fd)
    }

    /// Before a loop waits on the readiness descriptor: the rest of a frame
    /// a send timeout cut off goes out first (the peer may need it to
    /// answer; waiting for room up to `deadline`). `true`: wait; `false`:
    /// bytes are there now.
    ///
    /// # Errors
    /// Timeout flushing, socket errors.
    pub(crate) fn arm(&mut self, deadline: &mut Deadline) -> Result<bool> {
        let t0 = Instant::now();
        let at = deadline.at_from(t0);
        while !self.try_flush()? {
            match poll::writable(&*self.sock, at).map_err(|e| self.io_error(e))? {
                Ready::Yes => {}
                Ready::HungUp => return Ok(false),
                Ready::TimedOut => {
                    return Err(Error::Timeout {
                        address: self.address.clone(),
                        op: "sending on the socket",
                        after: t0.elapsed(),
                    })
                }
            }
        }
        if self.rend > self.rpos {
            return Ok(false);
        }
        let now =
            poll::readable(&*self.sock, Some(Instant::now())).map_err(|e| self.io_error(e))?;
        Ok(now == Ready::TimedOut)
    }

    /// Receives until a whole message is assembled.
    pub(crate) fn recv_message(
        &mut self,
        asm: &mut Assembler,
        deadline: &mut Deadline,
    ) -> Result<Message> {
        let t0 = Instant::now();
        let deadline = deadline.at_from(t0);
        loop {
            while self.rend - self.rpos < HEADER_LEN {
                self.fill(deadline, asm.in_progress() || self.rend > self.rpos, t0)?;
            }
            let proto = |detail: String| Error::Protocol {
                peer: self.address.clone(),
                detail,
            };
            let h = FrameHeader::decode(&self.rbuf[self.rpos..self.rpos + HEADER_LEN])
                .map_err(|e| proto(e.0))?;
            if h.len as usize > MAX_CHUNK {
                return Err(proto(format!(
                    "frame of {} bytes exceeds the stream chunk limit of {MAX_CHUNK}",
                    h.len
                )));
            }
            self.rpos += HEADER_LEN;
            claim_fds(&mut self.fd_queue, &self.address, &h, asm)?;
            let buf = asm.begin_chunk(&h).map_err(|e| proto(e.0))?;
            let mut want = h.len as usize;
            let start = buf.len();
            buf.resize(start + want, 0);
            let mut at = start;
            // Take what is buffered, then read the rest straight into the message.
            let have = (self.rend - self.rpos).min(want);
            buf[at..at + have].copy_from_slice(&self.rbuf[self.rpos..self.rpos + have]);
            self.rpos += have;
            at += have;
            want -= have;
            while want > 0 {
                match read_from(&self.sock, &mut self.fd_queue, &mut buf[at..at + want]) {
                    Ok(0) => return Err(self.gone("connection closed in the middle of a frame")),
                    Ok(n) => {
                        at += n;
                        want -= n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.wait_readable(deadline, t0)?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(self.io_error(e)),
                }
            }
            if let Some(m) = asm.finish(&h).map_err(|e| Error::Protocol {
                peer: self.address.clone(),
                detail: e.0,
            })? {
                return Ok(m);
            }
        }
    }
}
