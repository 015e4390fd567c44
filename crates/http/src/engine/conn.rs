//! One client connection of the engine: what it has read and not parsed,
//! what it must still write, and where its current request is.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Instant;

use super::body::{self, Body, Broken};
use super::head::Head;
use crate::wire;

/// Where a connection's current request is.
#[derive(Debug)]
pub(super) enum Phase {
    /// Reading a head (the header timeout runs).
    Head,
    /// Reading the body of `head` into `encoded` (`taken` bytes so far).
    Body {
        head: Head,
        body: Body,
        encoded: Vec<u8>,
        taken: u64,
        /// Where the body's length goes in `encoded`.
        length_at: usize,
    },
    /// Handed to the application (or waiting for it): `head` says how to
    /// answer.
    App { head: Head, body_in: usize },
    /// Answered with an error that ends it: the response is written, the
    /// writing side shut; what the client still sends is read and dropped
    /// until it closes, or the deadline (so the error response is not lost
    /// to a reset, as a close with unread bytes would send).
    Lingering,
}

/// A connection.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) sock: TcpStream,
    pub(super) remote: String,
    /// Unique for the engine's life: an answer for an older connection in
    /// the same slot is told apart.
    pub(super) serial: u64,
    /// Room for bytes read (zeroed once, as it grows); `rbuf[rpos..rend]`
    /// is read and not parsed yet.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// Bytes to write; `wbuf[wpos..]` is not written yet.
    pub(super) wbuf: Vec<u8>,
    pub(super) wpos: usize,
    /// A file's bytes to send after `wbuf` (a response made from a file).
    pub(super) file: Option<Outgoing>,
    /// The request in hand's body, spooled to an unnamed file (kept open
    /// until the request is answered: the application reads it by path).
    pub(super) spool: Option<File>,
    /// The response to the request in hand is being streamed: how its body
    /// travels, and the body bytes so far.
    pub(super) streaming: Option<(super::reply::Streamed, usize, u16)>,
    pub(super) phase: Phase,
    /// The client shut its side (or the socket failed): nothing more comes.
    pub(super) eof: bool,
    /// Close once everything is written.
    pub(super) closing: bool,
    /// When the current wait for the client ends (coarse ms; 0: none).
    pub(super) deadline: u64,
    /// While output is pending: when the client last took some of it, or
    /// when it became pending (coarse ms; `sending.rs`).
    pub(super) taken_at: u64,
    /// A send timer of this connection is queued.
    pub(super) send_armed: bool,
    /// When the request in hand started (its duration: the counters'
    /// histogram, the access log).
    pub(super) started: Option<Instant>,
    /// Reading stopped at the buffer's cap: more may wait in the socket
    /// (an edge-triggered socket will not say so again).
    pub(super) more: bool,
    /// Asked to move to another worker: the next response with nothing
    /// read behind it closes the connection.
    pub(super) leave: bool,
}

/// A file's bytes on their way out: `offset..end` is not sent yet.
#[derive(Debug)]
pub(super) struct Outgoing {
    pub(super) file: File,
    pub(super) offset: u64,
    pub(super) end: u64,
}

/// The most `sendfile(2)` is asked for at once: a fast client's socket
/// takes it without a stop, and the loop turns to its other connections
/// in between.
const SEND_STEP: usize = 1 << 20;

/// Where bodies over a size go: an unnamed file in a directory.
#[derive(Debug, Clone)]
pub(crate) struct Spool {
    /// Bodies larger than this many bytes are spooled.
    pub(crate) over: usize,
    pub(crate) dir: PathBuf,
}

/// What taking the body from the buffer came to.
#[derive(Debug)]
pub(super) enum BodyStep {
    /// More to come (`progressed`: some of it arrived).
    More { progressed: bool },
    /// The whole body: the request, encoded, and the body's length.
    Done {
        head: Head,
        encoded: Vec<u8>,
        taken: u64,
    },
    /// Over the limit or broken: the head, to answer it.
    Broken(Head, Broken),
    /// The spool file could not be made or written: the head and why.
    Unspooled(Head, io::Error),
}

/// The first room for reading (a request head of a few hundred bytes).
const FIRST_ROOM: usize = 4096;
/// The least room a read is given.
const MIN_READ: usize = 1024;

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Read_ {
    /// Everything there is, for now.
    Drained,
    /// Reading stopped with `rbuf` at its cap: more may be waiting.
    Full,
}

impl Conn {
    /// Nothing read and not parsed, and nothing known to wait in the
    /// socket beyond it.
    pub(super) fn nothing_unread(&self) -> bool {
        self.rpos == self.rend && !self.more
    }

    pub(super) fn new(sock: TcpStream, remote: String, serial: u64) -> Conn {
        Conn {
            sock,
            remote,
            serial,
            rbuf: vec![0; FIRST_ROOM],
            rpos: 0,
            rend: 0,
            wbuf: Vec::new(),
            wpos: 0,
            file: None,
            spool: None,
            streaming: None,
            phase: Phase::Head,
            eof: false,
            closing: false,
            deadline: 0,
            taken_at: 0,
            send_armed: false,
            started: None,
            more: false,
            leave: false,
        }
    }

    /// Takes what the buffer holds of the body of the request in phase
    /// `Body` (at most `max` bytes in all).
    pub(super) fn take_body(
        &mut self,
        max: u64,
        max_trailers: usize,
        spool: Option<&Spool>,
    ) -> BodyStep {
        let unread = &self.rbuf[self.rpos..self.rend];
        let Phase::Body {
            body,
            encoded,
            taken,
            ..
        } = &mut self.phase
        else {
            return BodyStep::More { progressed: false };
        };
        let before = *taken;
        let step = body::take(body, unread, encoded, taken, max, max_trailers);
        let (done, progressed) = (body.done(), *taken != before);
        let used = match step {
            Ok(n) => n,
            Err(b) => {
                let Phase::Body { head, .. } = std::mem::replace(&mut self.phase, Phase::Head)
                else {
                    unreachable!("in phase Body");
                };
                return BodyStep::Broken(head, b);
            }
        };
        self.consume(used);
        if let Some(s) = spool {
            if let Err(e) = self.spill(s) {
                let Phase::Body { head, .. } = std::mem::replace(&mut self.phase, Phase::Head)
                else {
                    unreachable!("in phase Body");
                };
                self.spool = None;
                return BodyStep::Unspooled(head, e);
            }
        }
        if !done {
            return BodyStep::More { progressed };
        }
        let Phase::Body {
            head,
            mut encoded,
            taken,
            length_at,
            ..
        } = std::mem::replace(&mut self.phase, Phase::Head)
        else {
            unreachable!("in phase Body");
        };
        wire::set_body_len(&mut encoded, length_at, taken);
        if let Some(f) = &self.spool {
            // The body is in the file: the request names it, its own body
            // is empty.
            let path = format!("/proc/{}/fd/{}", std::process::id(), f.as_raw_fd());
            wire::name_body_file(&mut encoded, length_at, path.as_bytes());
        }
        BodyStep::Done {
            head,
            encoded,
            taken,
        }
    }

    /// Moves the body read so far out of the encoded request into the
    /// spool file, once it is over the spool's size (or one is open).
    fn spill(&mut self, s: &Spool) -> io::Result<()> {
        let Phase::Body {
            encoded, length_at, ..
        } = &mut self.phase
        else {
            return Ok(());
        };
        let start = *length_at + 4;
        let held = encoded.len() - start;
        if self.spool.is_none() && held <= s.over {
            return Ok(());
        }
        let file = match self.spool.as_mut() {
            Some(f) => f,
            None => self.spool.insert(shmlink_sys::files::unnamed_file(&s.dir)?),
        };
        file.write_all(&encoded[start..])?;
        encoded.truncate(start);
        Ok(())
    }

    /// The unparsed bytes.
    pub(super) fn unread(&self) -> &[u8] {
        &self.rbuf[self.rpos..self.rend]
    }

    /// Marks `n` unparsed bytes parsed.
    pub(super) fn consume(&mut self, n: usize) {
        self.rpos += n;
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
        }
    }

    /// Reads what the socket has, until it would block, it ends (`eof`),
    /// or the unparsed bytes reach `cap`. A short read ends it too (the
    /// socket is empty: one `recv` saved), unless `to_end`: the peer hung up
    /// (`EPOLLRDHUP`), and its end of stream, which arrived with the last
    /// bytes and raises no further event, must be read.
    pub(super) fn read(&mut self, cap: usize, to_end: bool) -> Read_ {
        loop {
            let unread = self.rend - self.rpos;
            if unread >= cap {
                return Read_::Full;
            }
            if self.rbuf.len() - self.rend < MIN_READ {
                // Parsed bytes first make room; then the buffer grows.
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend = unread;
                self.rpos = 0;
                if self.rbuf.len() - self.rend < MIN_READ {
                    let grown = (self.rbuf.len() * 2).min(cap.max(FIRST_ROOM) + MIN_READ);
                    self.rbuf.resize(grown.max(self.rend + MIN_READ), 0);
                }
            }
            let end = self.rbuf.len().min(self.rend + (cap - unread));
            let want = end - self.rend;
            match self.sock.read(&mut self.rbuf[self.rend..end]) {
                Ok(0) => {
                    self.eof = true;
                    return Read_::Drained;
                }
                Ok(n) => {
                    self.rend += n;
                    if n < want && !to_end {
                        return Read_::Drained;
                    }
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return Read_::Drained,
                    io::ErrorKind::Interrupted => {}
                    _ => {
                        self.eof = true;
                        self.closing = true;
                        return Read_::Drained;
                    }
                },
            }
        }
    }

    /// Writes what is pending until done or the socket is full: `false`
    /// when the connection failed (the client is gone).
    pub(super) fn flush(&mut self) -> bool {
        while self.wpos < self.wbuf.len() {
            let rest = &self.wbuf[self.wpos..];
            let sent = if self.file.is_some() {
                shmlink_sys::net::send_more(&self.sock, rest)
            } else {
                self.sock.write(rest)
            };
            match sent {
                Ok(0) => return false,
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.wbuf.clear();
        self.wpos = 0;
        let Some(out) = self.file.as_mut() else {
            return true;
        };
        while out.offset < out.end {
            let step = (out.end - out.offset).min(SEND_STEP as u64) as usize;
            match shmlink_sys::files::sendfile(&self.sock, &out.file, &mut out.offset, step) {
                // The file shrank under us: the promised length cannot be
                // kept, and the connection must end.
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.file = None;
        true
    }

    /// Bytes of output not yet taken by the socket.
    pub(super) fn unsent(&self) -> u64 {
        let file = self.file.as_ref().map_or(0, |f| f.end - f.offset);
        (self.wbuf.len() - self.wpos) as u64 + file
    }

    /// Whether everything is written.
    pub(super) fn flushed(&self) -> bool {
        self.wpos == self.wbuf.len() && self.file.is_none()
    }
}
