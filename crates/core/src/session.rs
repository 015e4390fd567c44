//! Messages over a link: chunking on send, reassembly on receive, size limits
//! checked before anything is sent, and the broken state after a fatal error.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::link::{Inbox, Link};
use crate::message::{Assembler, Message};
use crate::tally::Tally;
use shmlink_wire::codes::{CODE_CLOSED, CODE_PROTOCOL_ERROR};
use shmlink_wire::frame::{FrameHeader, Kind, FLAG_MORE, MAX_FDS};
use shmlink_wire::handshake::{CAP_BELL, CAP_CHUNKED, CAP_FDS, CAP_LINES, CAP_ONE_WAY};

mod lend;

/// One side of an established session.
#[derive(Debug)]
pub(crate) struct Session {
    link: Link,
    asm: Assembler,
    /// Largest message the peer accepts.
    peer_max: usize,
    /// Largest message we accept.
    local_max: usize,
    /// Largest message the link sends as one frame (fixed per link).
    max_single: usize,
    /// Capabilities both sides agreed on.
    caps: u64,
    /// The peer ended the session with a `Goodbye`.
    peer_said_goodbye: bool,
    broken: Option<String>,
    address: String,
    /// Drain incoming messages while waiting to send (clients: a server
    /// blocked writing responses stops reading requests).
    drain_while_sending: bool,
    /// Messages received while sending, handed out by `recv` first.
    drained: VecDeque<Message>,
    /// The arena this side lends from: a client its requests (capability
    /// bit 2), a server its responses (bit 5).
    arena: Option<shmlink_arena::Owner>,
    /// The peer's arena, read in place: a server reads lent requests (bit
    /// 2), a client lent responses (bit 5).
    peer_arena: Option<shmlink_arena::Peer>,
    /// What a descriptor from the peer is: a request (servers) or a
    /// response (clients).
    lent_kind: Kind,
    /// What the session carried (read by a server's inspection).
    tally: Arc<Tally>,
}

/// Whether a kind is a message the tally counts: requests, responses,
/// errors and one-way messages (not the arena's, line or goodbye frames).
#[inline(always)]
fn counted(kind: Kind) -> bool {
    (kind as u8) <= Kind::OneWay as u8
}

impl Session {
    /// A session over an established link, with the capabilities agreed in
    /// the handshake. Without chunked messages, neither side sends or
    /// accepts a message larger than one frame.
    pub(crate) fn new(
        link: Link,
        local_max: usize,
        peer_max: usize,
        caps: u64,
        address: String,
    ) -> Self {
        let max_single = link.max_single();
        let chunked = caps & CAP_CHUNKED != 0;
        let one_frame = |max: usize| if chunked { max } else { max.min(max_single) };
        Session {
            max_single,
            caps,
            peer_said_goodbye: false,
            link,
            asm: Assembler::new(local_max, chunked),
            peer_max: one_frame(peer_max),
            local_max,
            broken: None,
            address,
            drain_while_sending: false,
            drained: VecDeque::new(),
            arena: None,
            peer_arena: None,
            lent_kind: Kind::Request,
            tally: Arc::default(),
        }
    }

    /// What the session carried so far.
    pub(crate) fn tally(&self) -> &Arc<Tally> {
        &self.tally
    }

    /// Makes sends drain incoming messages while they wait for room (the
    /// client side of a session).
    pub(crate) fn drain_while_sending(mut self) -> Self {
        self.drain_while_sending = true;
        self
    }

    /// The peer's address (for messages).
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// Largest message the peer accepts.
    pub(crate) fn peer_max(&self) -> usize {
        self.peer_max
    }

    /// Largest message this side accepts (and sends).
    pub(crate) fn local_max(&self) -> usize {
        self.local_max
    }

    /// The capabilities both sides agreed on.
    pub(crate) fn caps(&self) -> u64 {
        self.caps
    }

    /// Whether both sides agreed on capability `cap`.
    pub(crate) fn agreed(&self, cap: u64) -> bool {
        self.caps & cap != 0
    }

    /// The link (the server's monitor needs the segment).
    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    /// Whether the peer ended the session with a `Goodbye` (rather than by
    /// dying or breaking a rule).
    pub(crate) fn ended_by_goodbye(&self) -> bool {
        self.peer_said_goodbye
    }

    /// Whether the session can still be used.
    pub(crate) fn is_usable(&self) -> bool {
        self.broken.is_none() && self.link.peer_alive()
    }

    /// Whether a message sent on this session provably lies unread.
    pub(crate) fn sent_unread(&self) -> bool {
        self.link.sent_unread()
    }

    /// Marks the session unusable.
    pub(crate) fn break_with(&mut self, reason: impl Into<String>) {
        if self.broken.is_none() {
            self.broken = Some(reason.into());
        }
    }

    /// Whether it stands between messages, nothing of the next one taken
    /// in (where a hand-over may stop it).
    pub(crate) fn at_boundary(&self) -> bool {
        !self.asm.in_progress() && self.drained.is_empty()
    }

    /// Serves on after a wait that a hand-over ended, between messages,
    /// when the hand-over did not happen: the link is intact, only the
    /// session's note that it was closed goes.
    pub(crate) fn resume(&mut self) {
        self.broken = None;
    }

    #[inline(always)]
    fn check_usable(&self) -> Result<()> {
        match &self.broken {
            None => Ok(()),
            Some(reason) => Err(self.closed(reason)),
        }
    }

    #[cold]
    fn closed(&self, reason: &str) -> Error {
        Error::Closed {
            address: self.address.clone(),
            reason: reason.to_string(),
        }
    }

    /// Checks a message against the peer's limit without sending anything.
    ///
    /// # Errors
    /// [`Error::MessageTooLarge`].
    pub(crate) fn check_size(&self, len: usize) -> Result<()> {
        if len > self.local_max {
            return Err(Error::MessageTooLarge {
                size: len,
                max: self.local_max,
                side: "this side's max_message_size",
            });
        }
        if len > self.peer_max {
            return Err(Error::MessageTooLarge {
                size: len,
                max: self.peer_max,
                side: "the peer's limit",
            });
        }
        Ok(())
    }

    /// Sends a whole message: as one frame when it fits one, else as chunks.
    ///
    /// # Errors
    /// Too large (nothing sent, session usable); timeout before the first
    /// frame went out (nothing sent, usable); timeout or failure after it
    /// (session broken: the message was cut off).
    #[inline(always)]
    pub(crate) fn send(
        &mut self,
        kind: Kind,
        id: u64,
        body: &[u8],
        deadline: &mut Deadline,
    ) -> Result<()> {
        self.send_with_fds(kind, id, body, &[], deadline)
    }

    /// [`Session::send`] with file descriptors that go with the message's
    /// first frame.
    ///
    /// # Errors
    /// As [`Session::send`]; also, with nothing sent and the session usable:
    /// [`Error::Unsupported`] (`tcp:`), [`Error::NotAgreed`] (the peer does
    /// not accept descriptors), [`Error::BadFds`] (too many, or not open).
    #[inline(always)]
    pub(crate) fn send_with_fds(
        &mut self,
        kind: Kind,
        id: u64,
        body: &[u8],
        fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
    ) -> Result<()> {
        self.check_usable()?;
        self.check_size(body.len())?;
        if !fds.is_empty() {
            self.check_fds(kind, fds.len())?;
        }
        if self
            .peer_arena
            .as_ref()
            .is_some_and(shmlink_arena::Peer::releases_due)
        {
            self.send_releases(deadline)?;
        }
        if kind == Kind::OneWay && self.caps & CAP_ONE_WAY == 0 {
            return Err(Error::NotAgreed {
                address: self.address.clone(),
                capability: "one-way messages (capability bit 1)",
            });
        }
        // Counted before it goes out: a peer that has it may ask at once
        // (an inspection); a send that fails breaks the session anyway.
        if counted(kind) {
            self.tally.sent(body.len());
        }
        if body.len() <= self.max_single {
            let mut h = FrameHeader::whole(kind, id, body.len());
            h.fds = fds.len() as u16;
            let ib = inbox(&mut self.asm, &mut self.drained, self.drain_while_sending);
            return match self.link.send_frame(&h, body, fds, deadline, ib) {
                Ok(()) => Ok(()),
                Err(e) => Err(self.send_failed(e, false)),
            };
        }
        self.send_chunks(kind, id, body, fds, deadline)
    }

    /// Whether `count` descriptors may go with a message on this session.
    #[cold]
    fn check_fds(&self, kind: Kind, count: usize) -> Result<()> {
        if !self.link.carries_fds() {
            return Err(Error::Unsupported {
                address: self.address.clone(),
                what: "file descriptors",
                why: "they pass only over Unix sockets: use shm: or unix:",
            });
        }
        let line_grant = kind == Kind::Line && self.caps & CAP_LINES != 0;
        let bell = kind == Kind::Bell && self.caps & CAP_BELL != 0;
        if self.caps & CAP_FDS == 0 && !line_grant && !bell {
            return Err(Error::NotAgreed {
                address: self.address.clone(),
                capability: "file descriptors (capability bit 4): the server does not accept them",
            });
        }
        if count > MAX_FDS {
            return Err(Error::BadFds {
                address: self.address.clone(),
                reason: format!("{count} given, a message carries at most {MAX_FDS}"),
            });
        }
        Ok(())
    }

    /// Sends a message larger than one frame as chunks of
    /// [`Link::max_chunk`] bytes.
    #[inline(never)]
    fn send_chunks(
        &mut self,
        kind: Kind,
        id: u64,
        body: &[u8],
        fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
    ) -> Result<()> {
        let total = body.len() as u64;
        let mut sent = 0;
        for part in body.chunks(self.link.max_chunk()) {
            let last = sent + part.len() == body.len();
            let with = if sent == 0 { fds } else { &[] };
            let h = FrameHeader {
                len: part.len() as u32,
                kind,
                flags: if last { 0 } else { FLAG_MORE },
                fds: with.len() as u16,
                id,
                total,
            };
            let ib = inbox(&mut self.asm, &mut self.drained, self.drain_while_sending);
            if let Err(e) = self.link.send_frame(&h, part, with, deadline, ib) {
                return Err(self.send_failed(e, sent > 0));
            }
            sent += part.len();
        }
        Ok(())
    }

    /// Marks the session broken when a failed send leaves it unusable. A
    /// peer that is gone may have said why first: its `Goodbye` is the error
    /// then.
    #[cold]
    fn send_failed(&mut self, e: Error, cut_off: bool) -> Error {
        if matches!(e, Error::PeerGone { .. }) {
            if let Some(bye) = self.goodbye_waiting() {
                return bye;
            }
        }
        if cut_off {
            self.break_with(format!("a message was cut off after its first chunk: {e}"));
        } else {
            self.note_fatal(&e);
        }
        e
    }

    /// Tells the peer that we are closing, if that needs no waiting (closing
    /// never waits): an `shm:` peer's session thread, which may be spinning
    /// on the ring, ends at once instead of when the hang-up of the control
    /// socket reaches it.
    /// Once it is on an `shm:` ring the mapping is kept for a later session
    /// of this process (see [`crate::kept`]).
    pub(crate) fn say_goodbye(&mut self) {
        if self.broken.is_none() && self.send_goodbye(CODE_CLOSED, "") {
            self.link.keep_mapping();
        }
    }

    /// Ends the session with a `Goodbye` carrying `code` and `reason`, if
    /// that needs no waiting.
    pub(crate) fn goodbye(&mut self, code: u32, reason: &str) {
        self.send_goodbye(code, reason);
        self.break_with(reason.to_string());
    }

    /// Sends a `Goodbye` with a code and a reason (cut to fit the peer's
    /// limit), if that needs no waiting.
    fn send_goodbye(&mut self, code: u32, reason: &str) -> bool {
        let body = if code == CODE_CLOSED && reason.is_empty() {
            Vec::new()
        } else {
            shmlink_wire::codes::encode_error(code, reason, self.peer_max)
        };
        let h = FrameHeader::whole(Kind::Goodbye, 0, body.len());
        self.link.try_send_now(&h, &body)
    }

    /// The peer broke the protocol: tells it why (a `Goodbye` with
    /// [`CODE_PROTOCOL_ERROR`] and `detail`, if that needs no waiting),
    /// breaks the session, and returns the error for the caller.
    #[cold]
    pub(crate) fn violation(&mut self, detail: String) -> Error {
        if self.broken.is_none() {
            self.send_goodbye(CODE_PROTOCOL_ERROR, &detail);
        }
        let e = Error::Protocol {
            peer: self.address.clone(),
            detail,
        };
        self.break_with(e.to_string());
        e
    }

    /// Hands a received body back for reuse by the next message.
    pub(crate) fn recycle(&mut self, body: Vec<u8>) {
        self.asm.recycle(body);
    }

    /// Whether the first frame of a message can be received at once (never
    /// waits): one filed while sending, in the ring, or in the read buffer.
    pub(crate) fn ready_now(&mut self) -> bool {
        !self.drained.is_empty() || self.link.ready_now()
    }

    /// Waits until a message can be received without waiting for its first
    /// frame, without receiving it: `false` when `deadline` passed first.
    ///
    /// # Errors
    /// As [`Session::recv`].
    pub(crate) fn wait_readable(&mut self, deadline: &mut Deadline) -> Result<bool> {
        self.check_usable()?;
        if !self.drained.is_empty() {
            return Ok(true);
        }
        self.link
            .wait_readable(deadline)
            .map_err(|e| self.recv_failed(e))
    }

    /// Receives the next whole message (the arena's own frames are taken
    /// on the way).
    ///
    /// # Errors
    /// As [`Session::recv_into`].
    pub(crate) fn recv(&mut self, deadline: &mut Deadline) -> Result<Message> {
        let mut m = Message::blank();
        self.recv_into(deadline, &mut m)?;
        Ok(m)
    }

    /// Receives the next whole message into `m`, built where the caller
    /// keeps it: a message passed up by value through every layer costs a
    /// copy at each (the arena's own frames are taken on the way).
    ///
    /// # Errors
    /// Timeout (session stays usable unless a message was partly received),
    /// peer gone, protocol errors (session broken).
    #[inline(always)]
    pub(crate) fn recv_into(&mut self, deadline: &mut Deadline, m: &mut Message) -> Result<()> {
        loop {
            self.take_next(deadline, m)?;
            if self.pass(m)? {
                return Ok(());
            }
        }
    }

    /// [`Session::recv_into`] without waiting for a message to begin: `false`
    /// when none has, the readiness descriptor ([`Session::poll_fd`]) then
    /// armed to become ready when one does. A message whose first frame is
    /// there is received whole (its other chunks waited for until
    /// `deadline`).
    ///
    /// # Errors
    /// As [`Session::recv_into`].
    pub(crate) fn try_recv_into(
        &mut self,
        deadline: &mut Deadline,
        m: &mut Message,
    ) -> Result<bool> {
        loop {
            self.check_usable()?;
            if self.drained.is_empty() && !self.link.ready_now() {
                match self.link.arm(deadline) {
                    Ok(true) => return Ok(false),
                    Ok(false) => {}
                    Err(e) => return Err(self.recv_failed(e)),
                }
            }
            self.link.disarm();
            self.take_next(deadline, m)?;
            if self.pass(m)? {
                return Ok(true);
            }
        }
    }

    /// The next message into `m`: one filed while sending, or the link's.
    #[inline(always)]
    fn take_next(&mut self, deadline: &mut Deadline, m: &mut Message) -> Result<()> {
        self.check_usable()?;
        match self.drained.pop_front() {
            Some(d) => *m = d,
            None => {
                if let Err(e) = self.link.recv_message(&mut self.asm, deadline, m) {
                    return Err(self.recv_failed(e));
                }
            }
        }
        Ok(())
    }

    /// Whether a received message goes to the caller: calls, responses and
    /// errors as they are; other kinds screened (`false`: taken on the way,
    /// by the arena or as a bell).
    #[inline(always)]
    fn pass(&mut self, m: &mut Message) -> Result<bool> {
        match m.kind {
            Kind::Request if m.id != 0 => {}
            Kind::Response | Kind::Error if m.id != 0 && !m.has_extra() => {}
            _ => return self.pass_other(m),
        }
        self.tally.received(m.body.len());
        Ok(true)
    }

    /// The rest of [`Session::pass`] for a message of another kind.
    #[cold]
    #[inline(never)]
    fn pass_other(&mut self, m: &mut Message) -> Result<bool> {
        let taken = std::mem::replace(m, Message::blank());
        match self.screen(taken)? {
            Some(screened) => {
                if counted(screened.kind) {
                    self.tally.received(screened.body.len());
                }
                *m = screened;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// After a call was sent: see [`Link::expect_answer`].
    #[inline(always)]
    pub(crate) fn expect_answer(&mut self) {
        self.link.expect_answer();
    }

    /// Makes the readiness descriptor not ready until something arrives or
    /// the session ends (nothing is expected: no sleep is announced).
    pub(crate) fn quiet(&mut self) {
        self.link.quiet();
    }

    /// The descriptor an event loop watches for this session, made on first
    /// use: readable when a message has begun to arrive (after
    /// [`Session::try_recv_into`] found none) or the session ends. Over
    /// `shm:` the peer is handed a bell then (a `Bell` frame, capability
    /// bit 9); a session whose bell could not be sent is broken.
    ///
    /// # Errors
    /// [`Error::NotAgreed`] over `shm:` with a peer that does not ring
    /// bells; out of descriptors; the errors of a send.
    pub(crate) fn poll_fd(&mut self, deadline: &mut Deadline) -> Result<BorrowedFd<'_>> {
        self.check_usable()?;
        if matches!(self.link, Link::Shm(_)) && self.caps & CAP_BELL == 0 {
            return Err(Error::NotAgreed {
                address: self.address.clone(),
                capability: "loop wake-ups (capability bit 9): the server is of an older build, so wait for its answers with blocking calls",
            });
        }
        if self.link.poll_fd().is_none() {
            if let Some(bell) = self.link.open_readiness()? {
                let sent = self.send_with_fds(Kind::Bell, 0, &[], &[bell.as_fd()], deadline);
                if let Err(e) = sent {
                    self.break_with(format!("the session's bell could not be sent: {e}"));
                    return Err(e);
                }
            }
        }
        match self.link.poll_fd() {
            Some(fd) => Ok(fd),
            None => Err(self.closed("the readiness descriptor is gone")),
        }
    }

    /// A `Bell` frame: the peer's eventfd, rung from now on whenever the
    /// peer is woken (docs/protocol.md, "Loop wake-ups").
    #[cold]
    fn take_bell(&mut self, mut m: Message) -> Result<Option<Message>> {
        if m.fds().len() != 1 || !m.body.is_empty() {
            return Err(self.violation(format!(
                "bell frame with {} descriptors and {} payload bytes; it carries one eventfd and no payload",
                m.fds().len(),
                m.body.len()
            )));
        }
        let Some(fd) = m.take_extra().fds.pop() else {
            return Ok(None);
        };
        let bell = match shmlink_sys::eventfd::EventFd::adopt(fd) {
            Ok(b) => b,
            Err(e) => return Err(self.violation(format!("bell frame's descriptor refused: {e}"))),
        };
        if !self.link.take_peer_bell(bell) {
            return Err(self.violation(
                "bell frame on a stream session; bells travel on shm: sessions only".into(),
            ));
        }
        Ok(None)
    }

    /// The rules for the other kinds and ids: a one-way message needs its
    /// capability and id 0; a `Goodbye` (id 0) ends the session with the
    /// peer's reason; the arena's frames need capability bit 2 and go to
    /// the arena (`None`: nothing for the caller); calls, responses and
    /// errors need a non-zero id.
    #[cold]
    fn screen(&mut self, m: Message) -> Result<Option<Message>> {
        let fds_allowed = match m.kind {
            Kind::Request => self.caps & CAP_FDS != 0,
            Kind::Segment | Kind::Line | Kind::Bell => true,
            _ => false,
        };
        if !m.fds().is_empty() && !fds_allowed {
            return Err(self.violation(format!(
                "{:?} frame with {} file descriptors; only requests (capability bit 4), segment notices, line grants and bells carry descriptors",
                m.kind,
                m.fds().len()
            )));
        }
        if matches!(m.kind, Kind::Descriptor | Kind::Segment | Kind::Release) {
            return self.arena_frame(m);
        }
        match m.kind {
            Kind::OneWay if m.id == 0 && self.caps & CAP_ONE_WAY != 0 => Ok(Some(m)),
            Kind::OneWay if m.id == 0 => Err(self.violation(
                "one-way message, but one-way messages (capability bit 1) were not agreed".into(),
            )),
            Kind::Goodbye if m.id == 0 => Err(self.peer_said_goodbye(&m.body)),
            Kind::Line if m.id == 0 && self.caps & CAP_LINES != 0 => Ok(Some(m)),
            Kind::Line if m.id == 0 => Err(self.violation(
                "line frame, but direct lines (capability bit 7) were not agreed".into(),
            )),
            Kind::Bell if m.id == 0 && self.caps & CAP_BELL != 0 => self.take_bell(m),
            Kind::Bell if m.id == 0 => Err(self.violation(
                "bell frame, but loop wake-ups (capability bit 9) were not agreed".into(),
            )),
            k => Err(self.violation(format!(
                "{k:?} frame with call id {}: {}",
                m.id,
                if m.id == 0 {
                    "requests, responses and errors need a non-zero id"
                } else {
                    "one-way, goodbye, line and bell frames carry id 0"
                }
            ))),
        }
    }

    /// A `Goodbye` that already arrived (filed with whatever came before it),
    /// as the error it means.
    fn goodbye_waiting(&mut self) -> Option<Error> {
        let mut ib = Inbox {
            asm: &mut self.asm,
            out: &mut self.drained,
        };
        self.link.drain_now(&mut ib);
        let at = self.drained.iter().position(|m| m.kind == Kind::Goodbye)?;
        let bye = self.drained.remove(at)?;
        Some(self.peer_said_goodbye(&bye.body))
    }

    /// The peer closed the session with a `Goodbye`: the session is over;
    /// the error carries the peer's reason.
    fn peer_said_goodbye(&mut self, body: &[u8]) -> Error {
        self.peer_said_goodbye = true;
        let reason = if body.is_empty() {
            "the peer closed the session".to_string()
        } else {
            match shmlink_wire::codes::RemoteError::decode(body) {
                Ok(r) if r.code == CODE_CLOSED => "the peer closed the session".to_string(),
                Ok(r) => format!(
                    "the peer ended the session (code {:#x}): {}",
                    r.code, r.message
                ),
                Err(e) => return self.violation(format!("malformed goodbye: {}", e.0)),
            }
        };
        self.break_with(reason.clone());
        Error::Closed {
            address: self.address.clone(),
            reason,
        }
    }

    /// Marks the session broken when a failed receive leaves it unusable; a
    /// protocol error is reported to the peer first.
    #[cold]
    fn recv_failed(&mut self, e: Error) -> Error {
        match e {
            Error::Protocol { detail, .. } => self.violation(detail),
            Error::Timeout { .. } if self.asm.in_progress() => {
                self.break_with(format!("a message was cut off by a timeout: {e}"));
                e
            }
            e => {
                self.note_fatal(&e);
                e
            }
        }
    }

    fn note_fatal(&mut self, e: &Error) {
        if e.is_fatal() {
            self.break_with(e.to_string());
        }
    }
}

fn inbox<'a>(
    asm: &'a mut Assembler,
    out: &'a mut VecDeque<Message>,
    on: bool,
) -> Option<Inbox<'a>> {
    on.then_some(Inbox { asm, out })
}
