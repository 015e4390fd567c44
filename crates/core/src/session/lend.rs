//! The session's side of the arenas (capability bits 2 and 5): lending a
//! message from this side's arena (segments announced first), reading the
//! peer's lent messages in place, and the releases both ways. A client
//! lends requests and reads lent responses; a server the reverse.

use std::os::fd::AsFd;

use shmlink_arena::{ArenaError, Key, Loan, Owner, Peer};

use super::Session;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::message::Message;
use shmlink_wire::arena::{decode_release, encode_release, SegmentNotice, RELEASE_LEN};
use shmlink_wire::descriptor::Descriptor;
use shmlink_wire::frame::Kind;

/// Most entries of one release frame.
const RELEASES_PER_FRAME: usize = 256;

impl Session {
    /// The same session, lending requests from `owner`.
    pub(crate) fn with_arena(mut self, owner: Owner) -> Self {
        self.arena = Some(owner);
        self
    }

    /// The same session, reading the messages of kind `lent` (requests on a
    /// server, responses on a client) its peer lends, mapped by `peer`.
    pub(crate) fn with_peer_arena(mut self, peer: Peer, lent: Kind) -> Self {
        self.peer_arena = Some(peer);
        self.lent_kind = lent;
        self
    }

    /// Whether this side may lend (capability bit 2 on a client, 5 on a
    /// server).
    #[inline]
    pub(crate) fn lends(&self) -> bool {
        self.arena.is_some()
    }

    /// Bytes of arena this side maps (its own, and its peer's).
    pub(crate) fn arena_bytes(&self) -> (u64, u64) {
        (
            self.arena.as_ref().map_or(0, Owner::mapped_bytes),
            self.peer_arena.as_ref().map_or(0, Peer::mapped_bytes),
        )
    }

    /// The arena this side lends from, when it lends.
    pub(crate) fn lender(&self) -> Option<&Owner> {
        self.arena.as_ref()
    }

    /// A buffer of `len` bytes of this side's arena, to fill.
    ///
    /// # Errors
    /// [`Error::NotAgreed`] (or [`Error::Unsupported`] over `tcp:`) without
    /// an arena; [`Error::ArenaFull`] when none can be had.
    pub(crate) fn loan(&mut self, len: usize) -> Result<Loan> {
        self.check_usable()?;
        let Some(owner) = &self.arena else {
            return Err(self.no_arena());
        };
        owner.loan(len).map_err(|e| Error::ArenaFull {
            address: self.address.clone(),
            detail: e.to_string(),
        })
    }

    #[cold]
    fn no_arena(&self) -> Error {
        if !self.link.carries_fds() {
            return Error::Unsupported {
                address: self.address.clone(),
                what: "arena loans",
                why: "the arena's segments pass only over Unix sockets: use shm: or unix:",
            };
        }
        Error::NotAgreed {
            address: self.address.clone(),
            capability: "arena loans (capability bit 2): the server reads no lent requests, or this client's max_arena_bytes is 0",
        }
    }

    /// Sends message `id` (a request from a client, a response from a
    /// server) whose body is `loan`: the segments the arena made since it
    /// last announced any, then a descriptor naming the buffer, which stays
    /// taken until the peer releases it.
    ///
    /// # Errors
    /// As [`Session::send`]; a failure after a segment was announced breaks
    /// the session (the peer's table would no longer match ours).
    pub(crate) fn send_loan(&mut self, id: u64, loan: Loan, deadline: &mut Deadline) -> Result<()> {
        self.check_usable()?;
        let Some(owner) = self.arena.clone() else {
            return Err(self.no_arena());
        };
        self.check_size(loan.len())?;
        if let Err(e) = self.announce(&owner, deadline) {
            self.break_with(format!("announcing an arena segment failed: {e}"));
            return Err(e);
        }
        let length = loan.len() as u64;
        let key = owner.lend(loan);
        let body = Descriptor {
            slot: key.slot,
            generation: key.generation,
            offset: key.offset,
            length,
        }
        .encode();
        self.tally.sent(length as usize);
        self.send_with_fds(Kind::Descriptor, id, &body, &[], deadline)
    }

    /// Sends `body` as message `id` copied once into this side's arena (the
    /// transparent path of large messages); `None` when the arena has no
    /// room for it now, and nothing was sent.
    ///
    /// # Errors
    /// As [`Session::send_loan`].
    #[cold]
    #[inline(never)]
    pub(crate) fn send_copy_lent(
        &mut self,
        id: u64,
        body: &[u8],
        deadline: &mut Deadline,
    ) -> Option<Result<()>> {
        let mut loan = self.loan(body.len()).ok()?;
        loan.fill_from(body);
        Some(self.send_loan(id, loan, deadline))
    }

    /// Tells the peer of every segment made or retired since last time.
    fn announce(&mut self, owner: &Owner, deadline: &mut Deadline) -> Result<()> {
        for s in owner.take_new_segments() {
            let body = SegmentNotice {
                slot: s.slot,
                retire: false,
                generation: s.generation,
            }
            .encode();
            self.send_with_fds(Kind::Segment, 0, &body, &[s.fd.as_fd()], deadline)?;
        }
        for (slot, generation) in owner.take_retired() {
            let body = SegmentNotice {
                slot,
                retire: true,
                generation,
            }
            .encode();
            self.send_with_fds(Kind::Segment, 0, &body, &[], deadline)?;
        }
        self.tally.arena(self.arena_bytes());
        Ok(())
    }

    /// Sends the releases of the peer's buffers this side is done with.
    #[cold]
    pub(super) fn send_releases(&mut self, deadline: &mut Deadline) -> Result<()> {
        let keys = self
            .peer_arena
            .as_ref()
            .map(Peer::take_releases)
            .unwrap_or_default();
        let per_frame = (self.max_single / RELEASE_LEN).clamp(1, RELEASES_PER_FRAME);
        for part in keys.chunks(per_frame) {
            let entries: Vec<_> = part
                .iter()
                .map(|k| (k.slot, k.generation, k.offset))
                .collect();
            self.send_with_fds(Kind::Release, 0, &encode_release(&entries), &[], deadline)?;
        }
        Ok(())
    }

    /// A `Descriptor`, `Segment` or `Release` frame: a lent message to read
    /// in place (`Some`), or a change to the arena tables (`None`).
    ///
    /// # Errors
    /// A protocol error (the session ends) for a frame the capabilities or
    /// the roles do not allow, a malformed body, or a lie the arena catches.
    pub(super) fn arena_frame(&mut self, m: Message) -> Result<Option<Message>> {
        let outcome = match (m.kind, m.id) {
            (Kind::Descriptor, id) if id != 0 => match &self.peer_arena {
                Some(peer) => self.lent_message(peer, m).map(Some),
                None => Err(not_expected("descriptor")),
            },
            (Kind::Segment, 0) => match self.peer_arena.as_mut() {
                Some(peer) => {
                    let noted = notice(peer, m).map(|()| None);
                    self.tally.arena(self.arena_bytes());
                    noted
                }
                None => Err(not_expected("segment notice")),
            },
            (Kind::Release, 0) => match &self.arena {
                Some(owner) => release(owner, &m.body).map(|()| None),
                None => Err(not_expected("release")),
            },
            (k, id) => Err(format!(
                "{k:?} frame with call id {id}: descriptors carry a non-zero id, segment notices and releases id 0"
            )),
        };
        outcome.map_err(|detail| self.violation(detail))
    }

    /// The message a descriptor lends: checked against the peer's table and
    /// this side's largest message.
    fn lent_message(&self, peer: &Peer, mut m: Message) -> std::result::Result<Message, String> {
        let d = Descriptor::decode(&m.body).map_err(|e| e.0)?;
        if d.length > self.local_max as u64 {
            return Err(format!(
                "lent {} of {} bytes exceeds the maximum message size of {} bytes",
                if self.lent_kind == Kind::Request {
                    "request"
                } else {
                    "response"
                },
                d.length,
                self.local_max
            ));
        }
        let key = Key {
            slot: d.slot,
            generation: d.generation,
            offset: d.offset,
        };
        let view = peer.view(key, d.length).map_err(|e| e.to_string())?;
        m.body.clear();
        Ok(Message::lent(self.lent_kind, m.id, m.body, view))
    }
}

/// The error for an arena frame this side does not take.
fn not_expected(what: &str) -> String {
    format!(
        "{what} frame, but this side reads no lent buffers of that kind (capability bit 2 not agreed, or the wrong direction)"
    )
}

/// Registers or retires a segment the peer announced.
fn notice(peer: &mut Peer, mut m: Message) -> std::result::Result<(), String> {
    let n = SegmentNotice::decode(&m.body).map_err(|e| e.0)?;
    let arena = |e: ArenaError| e.to_string();
    let mut fds = m.take_extra().fds;
    match (n.retire, fds.len()) {
        (true, 0) => peer.retire(n.slot, n.generation).map_err(arena),
        (false, 1) => match fds.pop() {
            Some(fd) => peer.register(n.slot, n.generation, fd).map_err(arena),
            None => Err("segment notice without its descriptor".into()),
        },
        (retire, k) => Err(format!(
            "segment notice ({}) with {k} file descriptors: a registration carries 1, a retirement 0",
            if retire { "retire" } else { "register" }
        )),
    }
}

/// Gives back every buffer a release names.
fn release(owner: &Owner, body: &[u8]) -> std::result::Result<(), String> {
    for (slot, generation, offset) in decode_release(body).map_err(|e| e.0)? {
        owner
            .release(Key {
                slot,
                generation,
                offset,
            })
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
