//! Frames through the shared-memory rings, with the futex doorbell. Waits
//! (for data, for room) go through the one wait loop in [`super::wait`].

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_ring::{Pop, Push, Record, RingError};
use shmlink_sys::eventfd::EventFd;
use shmlink_sys::futex;

use super::bell::Readiness;
use super::fds;
use super::inbox::Inbox;
use super::stream::Stream;
use super::wait::{self, spin_briefly, Terms, Waited, Waiter};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::kept;
use crate::message::{Assembler, Message};
use crate::segment::{Endpoints, RingConsumer, RingProducer, Segment};
use crate::watch::{verdict_error, Spinner, Verdict, Watch, LIVENESS_SLICE};
use shmlink_wire::frame::{FrameHeader, HEADER_LEN};

/// One side of a shared-memory session.
#[derive(Debug)]
pub(crate) struct ShmLink {
    // Fields drop in this order: a client's control socket (watch, and the
    // descriptor channel, which shares it) closes before its ring ends let
    // go of the segment (unmapped, or kept: `Drop` below), right after the
    // `Goodbye`: the server keeps the segment for this process's next
    // session only when it sees the socket close.
    watch: Watch,
    /// The control socket, when the session agreed on file descriptors:
    /// they travel there, each message's in a record (see [`super::fds`]).
    fd_channel: Option<Arc<Stream>>,
    ends: Endpoints,
    spinner: Spinner,
    address: String,
    /// Our `Goodbye` is on the ring: the mapping is kept for a later session
    /// (see [`crate::kept`]) when the link drops.
    keep_mapping: bool,
    /// Whether the segment may come back in a later session at all (not a
    /// direct line's: each line has a segment of its own, used once).
    keepable: bool,
    /// The peer's bell (a `Bell` frame): rung whenever the peer is woken.
    peer_bell: Option<EventFd>,
    /// Our readiness descriptor, once a loop asked for it.
    readiness: Option<Readiness>,
    /// Whether our sleep is announced for the loop (until data is taken).
    armed: bool,
}

impl Drop for ShmLink {
    fn drop(&mut self) {
        if self.keep_mapping {
            kept::keep(Arc::clone(&self.ends.segment));
        }
    }
}

impl ShmLink {
    /// A link over the given ring ends.
    pub(crate) fn new(ends: Endpoints, spinner: Spinner, watch: Watch, address: String) -> Self {
        ShmLink {
            ends,
            spinner,
            watch,
            address,
            fd_channel: None,
            keep_mapping: false,
            keepable: true,
            peer_bell: None,
            readiness: None,
            armed: false,
        }
    }

    /// The same link over a segment used by this link only (a direct
    /// line's): its mapping is never kept after a goodbye.
    pub(crate) fn used_once(mut self) -> Self {
        self.keepable = false;
        self
    }

    /// The same link, passing file descriptors on `channel` (the control
    /// socket) when the session agreed on them.
    pub(crate) fn with_fds(mut self, channel: Option<Arc<Stream>>) -> Self {
        self.fd_channel = channel;
        self
    }

    /// Largest payload of a chunk of a streamed message: a quarter of the ring,
    /// so the producer fills one chunk while the consumer copies another.
    pub(crate) fn max_chunk(&self) -> usize {
        (self.ends.producer.capacity() / 4)
            .saturating_sub(HEADER_LEN + 8)
            .max(1)
    }

    /// Largest message sent as one frame.
    pub(crate) fn max_single(&self) -> usize {
        self.ends.producer.max_record() - HEADER_LEN
    }

    /// The segment this link uses (the server's monitor wakes it on stop).
    pub(crate) fn segment(&self) -> &std::sync::Arc<Segment> {
        &self.ends.segment
    }

    /// Whether the peer has released every record we wrote (its word).
    pub(crate) fn peer_read_all(&self) -> bool {
        self.ends.producer.all_consumed()
    }

    /// The control socket (a client's), which hangs up when the peer goes.
    pub(crate) fn control_socket(&self) -> Option<BorrowedFd<'_>> {
        self.watch.socket()
    }

    /// Whether the peer still looks alive.
    pub(crate) fn peer_alive(&self) -> bool {
        matches!(self.watch.check(), Verdict::Alive | Verdict::Elsewhere)
    }

    /// Sends one frame (with `fds`: see [`ShmLink::send_frame_with_fds`]),
    /// waiting for room until `deadline`; a sender with an inbox drains its
    /// incoming ring while it waits.
    #[inline(always)]
    pub(crate) fn send_frame(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
        mut inbox: Option<Inbox<'_>>,
    ) -> Result<()> {
        if !fds.is_empty() {
            return self.send_frame_with_fds(h, payload, fds, deadline, inbox);
        }
        let head = h.encode();
        loop {
            match self.ends.producer.try_push(&[&head, payload]) {
                Ok(Push::Done { wake }) => {
                    if wake {
                        self.wake_peer();
                    }
                    return Ok(());
                }
                Ok(Push::Full) => {
                    let streaming = h.total > u64::from(h.len);
                    self.wait_space(HEADER_LEN + payload.len(), deadline, streaming, &mut inbox)?;
                }
                Err(e) => return Err(corrupt(&self.address, &e)),
            }
        }
    }

    /// Sends a frame whose descriptors go first, in a record on the control
    /// socket: once the ring has room for the frame (so that the push
    /// cannot fail after the record went out), the record, then the frame.
    #[cold]
    fn send_frame_with_fds(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
        mut inbox: Option<Inbox<'_>>,
    ) -> Result<()> {
        let Some(channel) = self.fd_channel.clone() else {
            return Err(fds::not_agreed(h, &self.address));
        };
        let need = HEADER_LEN + payload.len();
        loop {
            if self
                .ends
                .producer
                .has_space(need)
                .map_err(|e| corrupt(&self.address, &e))?
            {
                let at = deadline.at_from(Instant::now());
                fds::send_record(&channel, h, fds, at, &self.address)?;
                return self.send_frame(h, payload, &[], deadline, inbox);
            }
            let streaming = h.total > u64::from(h.len);
            self.wait_space(need, deadline, streaming, &mut inbox)?;
        }
    }

    #[cold]
    fn wait_space(
        &mut self,
        need: usize,
        deadline: &mut Deadline,
        streaming: bool,
        inbox: &mut Option<Inbox<'_>>,
    ) -> Result<()> {
        let started = Instant::now();
        let peer = self.peer_elsewhere();
        self.spinner.refresh(started, peer);
        let spin = self.spinner.budget_for(streaming, started);
        let terms = Terms {
            spin,
            spin_if_free: self.spinner.free_spin(streaming, started),
            deadline: deadline.at_from(started),
            started,
            yield_ends_it: self.spinner.probes(started),
            yield_every: self.spinner.yield_every(),
            // A stopping server still sends the responses it owes.
            stop_ends_it: false,
            op: "waiting for ring space",
            watch: &self.watch,
            address: &self.address,
        };
        let mut w = Outgoing {
            prod: &mut self.ends.producer,
            cons: &mut self.ends.consumer,
            need,
            inbox: inbox.as_mut(),
            fds: self.fd_channel.as_deref(),
            address: &self.address,
        };
        let waited = wait::wait(&mut w, &terms)?;
        if waited == Waited::Contended {
            self.spinner.contended(Instant::now());
        }
        Ok(())
    }

    /// Says which CPU this side waits on (in the line it writes of the
    /// ring it consumes) and whether the peer said another one (in the
    /// line the peer writes): docs/protocol.md, "CPU hints".
    fn peer_elsewhere(&self) -> bool {
        let Some(here) = shmlink_sys::cpu::current_cpu() else {
            return false;
        };
        self.ends.consumer.say_cpu(here);
        self.ends.producer.consumer_cpu().is_some_and(|p| p != here)
    }

    /// Sends one frame if the ring has room now; never waits.
    pub(crate) fn try_send_now(&mut self, h: &FrameHeader, payload: &[u8]) -> bool {
        match self.ends.producer.try_push(&[&h.encode(), payload]) {
            Ok(Push::Done { wake }) => {
                if wake {
                    self.wake_peer();
                }
                true
            }
            _ => false,
        }
    }

    /// Wakes the consumer of our outgoing ring: its futex, and its bell
    /// when it gave one (docs/protocol.md, "Loop wake-ups").
    #[inline(always)]
    fn wake_peer(&self) {
        futex::wake(&self.ends.producer.header().data_bell, 1);
        if let Some(bell) = &self.peer_bell {
            bell.signal();
        }
    }

    /// The last sleep epochs this side announced, as the consumer of its
    /// incoming ring and the producer of its outgoing one (a hand-over's
    /// successor goes on after them).
    pub(crate) fn sleep_epochs(&self) -> (u32, u32) {
        (
            self.ends.consumer.sleep_epoch(),
            self.ends.producer.sleep_epoch(),
        )
    }

    /// Goes on after the sleep epochs a predecessor announced
    /// ([`ShmLink::sleep_epochs`]).
    pub(crate) fn continue_epochs(&mut self, (incoming, outgoing): (u32, u32)) {
        self.ends.consumer.continue_epochs(incoming);
        self.ends.producer.continue_epochs(outgoing);
    }

    /// The peer's bell, when it gave one.
    pub(crate) fn peer_bell(&self) -> Option<&EventFd> {
        self.peer_bell.as_ref()
    }

    /// Takes the peer's bell (a later one replaces it), ringing it once: a
    /// wake-up owed before it came went to the futex only.
    pub(crate) fn take_peer_bell(&mut self, bell: EventFd) {
        bell.signal();
        self.peer_bell = Some(bell);
    }

    /// Makes our readiness descriptor on first use: `Some(eventfd)` then,
    /// for the `Bell` frame that hands it to the peer.
    ///
    /// # Errors
    /// Out of descriptors.
    pub(crate) fn open_readiness(&mut self) -> Result<Option<OwnedFd>> {
        if self.readiness.is_some() {
            return Ok(None);
        }
        let r = Readiness::with_bell(self.watch.socket(), &self.address)?;
        let bell = r.bell_to_send(&self.address)?;
        self.readiness = Some(r);
        Ok(bell)
    }

    /// The readiness descriptor, once opened.
    pub(crate) fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        self.readiness.as_ref().map(Readiness::fd)
    }

    /// Before a loop waits on the readiness descriptor: quiets it, then
    /// announces sleep on the incoming ring (the peer then rings the bell)
    /// and re-checks. `true`: wait; `false`: a frame is there now.
    ///
    /// # Errors
    /// Peer gone, corrupted ring.
    pub(crate) fn arm(&mut self) -> Result<bool> {
        let Some(r) = self.readiness.as_mut() else {
            return Ok(!self.ready_now());
        };
        r.quiet();
        let stirred = r.take_stirred();
        let cons = &mut self.ends.consumer;
        // A new epoch each time: the peer owes one ring per announcement.
        match cons.prepare_sleep() {
            Ok(Some(_)) => self.armed = true,
            Ok(None) => {
                cons.finish_sleep();
                self.armed = false;
                return Ok(false);
            }
            Err(e) => return Err(corrupt(&self.address, &e)),
        }
        // The control socket stirred since the last look (a hang-up from
        // now on makes the set ready again).
        if !stirred {
            return Ok(true);
        }
        match verdict_error(self.watch.check(), &self.address) {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }

    /// After a call was sent, with a loop watching: makes sure its answer
    /// will make the descriptor readable, whether or not the loop asks
    /// [`ShmLink::arm`] first. Announces sleep unless announced already (an
    /// atomic store and a read-modify-write, no syscall); when data is
    /// already there, rings our own eventfd instead.
    pub(crate) fn expect_answer(&mut self) {
        if self.armed {
            return;
        }
        let Some(r) = self.readiness.as_mut() else {
            return;
        };
        let cons = &mut self.ends.consumer;
        match cons.prepare_sleep() {
            Ok(Some(_)) => self.armed = true,
            Ok(None) => {
                cons.finish_sleep();
                r.ring();
            }
            // A corrupted ring: the next receive reports it.
            Err(_) => r.ring(),
        }
    }

    /// Quiets the readiness descriptor without announcing a sleep.
    pub(crate) fn quiet(&mut self) {
        if let Some(r) = self.readiness.as_mut() {
            r.quiet();
        }
    }

    /// Withdraws the loop's sleep announcement (data was found).
    pub(crate) fn disarm(&mut self) {
        if self.armed {
            self.ends.consumer.finish_sleep();
            self.armed = false;
        }
    }

    /// Keeps the mapping for a later session when the link drops (our
    /// `Goodbye` is on the ring: nothing touches the segment any more).
    pub(crate) fn keep_mapping(&mut self) {
        self.keep_mapping = self.keepable;
    }

    /// Files every frame already in the incoming ring, without waiting (a
    /// frame that fails its checks ends the draining: the next receive
    /// reports it).
    pub(crate) fn drain_now(&mut self, inbox: &mut Inbox<'_>) {
        let chan = self.fd_channel.as_deref();
        let _ = drain(&mut self.ends.consumer, inbox, chan, &self.address);
    }

    /// Receives until a whole message is assembled, into `out`.
    #[inline(always)]
    pub(crate) fn recv_message(
        &mut self,
        asm: &mut Assembler,
        deadline: &mut Deadline,
        out: &mut Message,
    ) -> Result<()> {
        loop {
            // Wait before popping: an empty pop costs more than the check.
            self.wait_frame(deadline, asm.in_progress())?;
            let chan = self.fd_channel.as_deref();
            if let Popped::Whole =
                pop_frame(&mut self.ends.consumer, asm, chan, &self.address, out)?
            {
                return Ok(());
            }
        }
    }

    /// Whether a frame is in the incoming ring now (never waits; a ring
    /// that fails its checks says yes, for the receive to report it).
    pub(crate) fn ready_now(&mut self) -> bool {
        self.ends.consumer.has_data().unwrap_or(true)
    }

    /// Waits until a frame is in the incoming ring, without taking it:
    /// `false` when `deadline` passed first.
    ///
    /// # Errors
    /// Peer gone, server stopping, corrupted ring.
    pub(crate) fn wait_readable(&mut self, deadline: &mut Deadline) -> Result<bool> {
        match self.wait_frame(deadline, false) {
            Ok(()) => Ok(true),
            Err(Error::Timeout { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until a frame is in the incoming ring: spins first (always in
    /// the middle of a message), then the wait loop.
    #[inline(always)]
    fn wait_frame(&mut self, deadline: &mut Deadline, mid_message: bool) -> Result<()> {
        let mut w = Incoming {
            cons: &mut self.ends.consumer,
            address: &self.address,
        };
        if !w.ready()? {
            let spins = mid_message || self.spinner.spins();
            if !spins || !spin_briefly(&mut w)? {
                self.wait_data(deadline, mid_message)?;
            } else {
                self.spinner.caught_spinning();
            }
        }
        Ok(())
    }

    /// Waits for data after the first spins found none, and adapts the spin
    /// bound to how long it took.
    #[cold]
    fn wait_data(&mut self, deadline: &mut Deadline, mid_message: bool) -> Result<()> {
        let started = Instant::now();
        let peer = self.peer_elsewhere();
        self.spinner.refresh(started, peer);
        let spin = self.spinner.budget_for(mid_message, started);
        let terms = Terms {
            spin,
            spin_if_free: self.spinner.free_spin(mid_message, started),
            deadline: deadline.at_from(started),
            started,
            yield_ends_it: self.spinner.probes(started),
            yield_every: self.spinner.yield_every(),
            stop_ends_it: !mid_message,
            op: "waiting for a response",
            watch: &self.watch,
            address: &self.address,
        };
        let mut w = Incoming {
            cons: &mut self.ends.consumer,
            address: &self.address,
        };
        let waited = wait::wait(&mut w, &terms);
        // A blocking wait that slept withdrew its announcement, and with it
        // the loop's: announce again for the loop.
        if self.armed {
            self.armed = false;
            self.expect_answer();
        }
        if waited? == Waited::Contended {
            self.spinner.contended(Instant::now());
        }
        self.spinner.record(started.elapsed());
        Ok(())
    }
}

/// A wait for data in the incoming ring.
struct Incoming<'a> {
    cons: &'a mut RingConsumer,
    address: &'a str,
}

impl Waiter for Incoming<'_> {
    #[inline(always)]
    fn ready(&mut self) -> Result<bool> {
        self.cons.has_data().map_err(|e| corrupt(self.address, &e))
    }
    fn prepare_sleep(&mut self) -> Result<Option<u32>> {
        self.cons
            .prepare_sleep()
            .map_err(|e| corrupt(self.address, &e))
    }
    fn finish_sleep(&self) {
        self.cons.finish_sleep();
    }
    fn bell(&self) -> &AtomicU32 {
        &self.cons.header().data_bell
    }
}

/// A wait for room in the outgoing ring, draining the incoming one meanwhile
/// when there is an inbox.
struct Outgoing<'a, 'i> {
    prod: &'a mut RingProducer,
    cons: &'a mut RingConsumer,
    need: usize,
    inbox: Option<&'a mut Inbox<'i>>,
    fds: Option<&'a Stream>,
    address: &'a str,
}

impl Waiter for Outgoing<'_, '_> {
    fn ready(&mut self) -> Result<bool> {
        self.prod
            .has_space(self.need)
            .map_err(|e| corrupt(self.address, &e))
    }
    fn prepare_sleep(&mut self) -> Result<Option<u32>> {
        self.prod
            .prepare_sleep(self.need)
            .map_err(|e| corrupt(self.address, &e))
    }
    fn finish_sleep(&self) {
        self.prod.finish_sleep();
    }
    fn bell(&self) -> &AtomicU32 {
        &self.prod.header().space_bell
    }
    /// Moves every frame already in the incoming ring into the inbox (whole
    /// messages into `inbox.out`): the peer may be blocked writing to us, and
    /// neither side would ever move otherwise.
    fn meanwhile(&mut self) -> Result<bool> {
        let Some(inbox) = self.inbox.as_deref_mut() else {
            return Ok(false);
        };
        drain(self.cons, inbox, self.fds, self.address)
    }
    fn sleep_slice(&self) -> Option<Duration> {
        self.inbox.is_some().then_some(LIVENESS_SLICE)
    }
}

/// Moves every frame already in the incoming ring into `inbox` (whole
/// messages into `inbox.out`), without waiting; whether there was any.
fn drain(
    cons: &mut RingConsumer,
    inbox: &mut Inbox<'_>,
    fd_channel: Option<&Stream>,
    addr: &str,
) -> Result<bool> {
    let mut any = false;
    let mut m = Message::blank();
    loop {
        match pop_frame(cons, inbox.asm, fd_channel, addr, &mut m)? {
            Popped::Whole => inbox
                .out
                .push_back(std::mem::replace(&mut m, Message::blank())),
            Popped::Chunk => {}
            Popped::Empty => return Ok(any),
        }
        any = true;
    }
}

/// What one pop found.
enum Popped {
    /// The ring is empty.
    Empty,
    /// A chunk of a message still incomplete.
    Chunk,
    /// A whole message, now in the caller's `out`.
    Whole,
}

/// Pops one frame if one is there; a whole message goes into `out`, built
/// where the caller keeps it rather than passed up through every layer.
#[inline(always)]
fn pop_frame(
    cons: &mut RingConsumer,
    asm: &mut Assembler,
    fd_channel: Option<&Stream>,
    addr: &str,
    out: &mut Message,
) -> Result<Popped> {
    match cons.try_pop(
        #[inline(always)]
        |rec| take_record(&rec, asm, fd_channel, addr, out),
    ) {
        Ok(Pop::Done { value, wake }) => {
            if wake {
                futex::wake(&cons.header().space_bell, 1);
            }
            value
        }
        Ok(Pop::Empty) => Ok(Popped::Empty),
        Err(e) => Err(corrupt(addr, &e)),
    }
}

/// Takes one popped record: a whole message into `out`, or a chunk into
/// `asm`; the descriptors a first frame announces come from `fd_channel`.
#[inline(always)]
fn take_record<M: shmlink_ring::Memory>(
    rec: &Record<'_, M>,
    asm: &mut Assembler,
    fd_channel: Option<&Stream>,
    addr: &str,
    out: &mut Message,
) -> Result<Popped> {
    let mut hb = [0u8; HEADER_LEN];
    rec.read(0, &mut hb).map_err(|e| corrupt(addr, &e))?;
    let h = FrameHeader::decode(&hb).map_err(|e| protocol(addr, e.0))?;
    if rec.len() != HEADER_LEN + h.len as usize {
        return Err(record_mismatch(addr, rec.len(), h.len));
    }
    if h.fds == 0 {
        if let Some(mut body) = asm.take_whole(&h) {
            rec.append_from(HEADER_LEN, &mut body)
                .map_err(|e| corrupt(addr, &e))?;
            out.set(h.kind, h.id, body);
            return Ok(Popped::Whole);
        }
    }
    let buf = asm.begin_chunk(&h).map_err(|e| protocol(addr, e.0))?;
    rec.append_from(HEADER_LEN, buf)
        .map_err(|e| corrupt(addr, &e))?;
    if h.fds != 0 {
        let channel = fd_channel.ok_or_else(|| fds::not_agreed(&h, addr))?;
        asm.attach_fds(fds::recv_record(channel, &h, addr)?);
    }
    match asm.finish(&h).map_err(|e| protocol(addr, e.0))? {
        Some(m) => {
            *out = m;
            Ok(Popped::Whole)
        }
        None => Ok(Popped::Chunk),
    }
}

#[cold]
fn protocol(peer: &str, detail: String) -> Error {
    Error::Protocol {
        peer: peer.to_string(),
        detail,
    }
}

#[cold]
fn corrupt(peer: &str, e: &RingError) -> Error {
    protocol(peer, e.to_string())
}

#[cold]
fn record_mismatch(peer: &str, record: usize, claimed: u32) -> Error {
    protocol(
        peer,
        format!("ring record of {record} bytes holds a frame claiming {claimed} payload bytes"),
    )
}
