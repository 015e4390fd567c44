//! Frames through the shared-memory rings, with the futex doorbell.

use std::time::{Duration, Instant};

use shmlink_ring::{Pop, Push, Record, RingError};
use shmlink_sys::futex;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::frame::{Assembler, FrameHeader, Message, HEADER_LEN};
use crate::link::Inbox;
use crate::segment::Endpoints;
use crate::watch::{remaining, verdict_error, Spinner, Verdict, Watch};

/// Spin iterations between clock reads.
const SPINS_PER_CHECK: u32 = 64;
/// Busy-waiting checks liveness and deadlines this often.
const BUSY_CHECK_EVERY: Duration = Duration::from_millis(1);
/// While a message streams through the ring in chunks the peer is known to be
/// busy with it, so even the `sleep` strategy spins this long for the next
/// chunk (or for room) before sleeping: a wake-up per chunk would cost more.
const STREAM_SPIN: Duration = Duration::from_micros(20);
/// A spinning side yields the CPU this often, so that on an oversubscribed
/// machine the thread it waits for (or the server's accept thread) can run.
const YIELD_EVERY: Duration = Duration::from_micros(10);

/// One side of a shared-memory session.
#[derive(Debug)]
pub(crate) struct ShmLink {
    ends: EndpointsDebug,
    spinner: Spinner,
    watch: Watch,
    address: String,
}

/// `Endpoints` without a derived Debug (ring ends hold raw memory).
struct EndpointsDebug(Endpoints);

impl std::fmt::Debug for EndpointsDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("layout", self.0.segment.layout())
            .finish()
    }
}

impl ShmLink {
    /// A link over the given ring ends.
    pub(crate) fn new(ends: Endpoints, spinner: Spinner, watch: Watch, address: String) -> Self {
        ShmLink {
            ends: EndpointsDebug(ends),
            spinner,
            watch,
            address,
        }
    }

    /// Largest payload of a chunk of a streamed message: a quarter of the ring,
    /// so the producer fills one chunk while the consumer copies another.
    pub(crate) fn max_chunk(&self) -> usize {
        (self.ends.0.producer.capacity() / 4)
            .saturating_sub(HEADER_LEN + 8)
            .max(1)
    }

    /// Largest message sent as one frame.
    pub(crate) fn max_single(&self) -> usize {
        self.ends.0.producer.max_record() - HEADER_LEN
    }

    /// The segment this link uses (the server's monitor wakes it on stop).
    pub(crate) fn segment(&self) -> &std::sync::Arc<crate::segment::Segment> {
        &self.ends.0.segment
    }

    #[cold]
    fn corrupt(&self, e: RingError) -> Error {
        Error::Protocol {
            peer: self.address.clone(),
            detail: e.to_string(),
        }
    }

    #[cold]
    fn timeout(&self, op: &'static str, started: Instant) -> Error {
        Error::Timeout {
            address: self.address.clone(),
            op,
            after: started.elapsed(),
        }
    }

    /// Whether the peer still looks alive.
    pub(crate) fn peer_alive(&self) -> bool {
        self.watch.check() == Verdict::Alive
    }

    fn check_watch(&self, stop_is_error: bool) -> Result<()> {
        match self.watch.check() {
            Verdict::Stopping if !stop_is_error => Ok(()),
            v => verdict_error(v, &self.address).map_or(Ok(()), Err),
        }
    }

    /// Sends one frame.
    #[inline(always)]
    pub(crate) fn send_frame(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        deadline: &mut Deadline,
        mut inbox: Option<Inbox<'_>>,
    ) -> Result<()> {
        let head = h.encode();
        let need = HEADER_LEN + payload.len();
        let mut started = None;
        loop {
            match self.ends.0.producer.try_push(&[&head, payload]) {
                Ok(Push::Done { wake }) => {
                    if wake {
                        futex::wake(&self.ends.0.producer.header().data_bell, 1);
                    }
                    return Ok(());
                }
                Ok(Push::Full) => {
                    let t0 = *started.get_or_insert_with(Instant::now);
                    let at = deadline.at_from(t0);
                    let streaming = h.total > u64::from(h.len);
                    self.wait_space(need, at, t0, streaming, inbox.as_mut())?;
                }
                Err(e) => return Err(self.corrupt(e)),
            }
        }
    }

    /// Sends an empty frame if the ring has room now; never waits.
    pub(crate) fn try_send_now(&mut self, h: &FrameHeader) {
        if let Ok(Push::Done { wake: true }) = self.ends.0.producer.try_push(&[&h.encode()]) {
            futex::wake(&self.ends.0.producer.header().data_bell, 1);
        }
    }

    #[cold]
    fn wait_space(
        &mut self,
        need: usize,
        deadline: Option<Instant>,
        t0: Instant,
        streaming: bool,
        mut inbox: Option<&mut Inbox<'_>>,
    ) -> Result<()> {
        // Spin first (the consumer is usually copying out right now).
        let spin = match self.spinner.budget() {
            Some(b) if streaming => b.max(STREAM_SPIN),
            Some(b) => b,
            None => Duration::MAX,
        };
        let mut n = 0u32;
        let mut next_yield = t0 + YIELD_EVERY;
        let mut next_check = t0 + BUSY_CHECK_EVERY;
        loop {
            if self
                .ends
                .0
                .producer
                .has_space(need)
                .map_err(|e| self.corrupt(e))?
            {
                return Ok(());
            }
            std::hint::spin_loop();
            n = n.wrapping_add(1);
            if !n.is_multiple_of(SPINS_PER_CHECK) {
                continue;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(self.timeout("waiting for ring space", t0));
            }
            if now - t0 >= spin {
                break;
            }
            if now >= next_check {
                next_check = now + BUSY_CHECK_EVERY;
                self.check_watch(false)?;
            }
            if now >= next_yield {
                next_yield = now + YIELD_EVERY;
                std::thread::yield_now();
            }
            if let Some(inbox) = inbox.as_deref_mut() {
                self.drain(inbox)?;
            }
        }
        loop {
            // The peer may be blocked writing to us: make room on our side
            // before sleeping, or neither side ever moves.
            if let Some(inbox) = inbox.as_deref_mut() {
                if self.drain(inbox)? {
                    if self
                        .ends
                        .0
                        .producer
                        .has_space(need)
                        .map_err(|e| self.corrupt(e))?
                    {
                        return Ok(());
                    }
                    continue;
                }
            }
            let prod = &mut self.ends.0.producer;
            let Some(seen) = prod.prepare_sleep(need).map_err(|e| Error::Protocol {
                peer: self.address.clone(),
                detail: e.to_string(),
            })?
            else {
                prod.finish_sleep();
                return Ok(());
            };
            // Checked after reading the bell: a monitor that flags us and
            // rings after that read makes the wait below return at once.
            if let Err(e) = self.check_watch(false) {
                self.ends.0.producer.finish_sleep();
                return Err(e);
            }
            // Draining sides sleep in short slices: the peer may fill our
            // incoming ring while we sleep on the outgoing one.
            let drain_slice = inbox.is_some().then_some(crate::watch::LIVENESS_SLICE);
            let slice = min_opt(
                min_opt(remaining(deadline), self.watch.slice()),
                drain_slice,
            );
            let prod = &self.ends.0.producer;
            if slice == Some(Duration::ZERO) {
                prod.finish_sleep();
                return Err(self.timeout("waiting for ring space", t0));
            }
            futex::wait(&prod.header().space_bell, seen, slice);
            prod.finish_sleep();
        }
    }

    /// Pops one frame if one is there: `None` when the ring is empty,
    /// `Some(None)` for a chunk of a message still incomplete.
    #[inline(always)]
    fn try_pop_frame(&mut self, asm: &mut Assembler) -> Result<Option<Option<Message>>> {
        let addr = &self.address;
        let popped = self
            .ends
            .0
            .consumer
            .try_pop(|rec| take_record(&rec, asm, addr));
        match popped {
            Ok(Pop::Done { value, wake }) => {
                if wake {
                    futex::wake(&self.ends.0.consumer.header().space_bell, 1);
                }
                Ok(Some(value?))
            }
            Ok(Pop::Empty) => Ok(None),
            Err(e) => Err(self.corrupt(e)),
        }
    }

    /// Sends `h` and `payload` as one frame if the ring has room now, then
    /// receives the next whole message: a call, or a response followed by
    /// the next request, in one pass. `None` when the ring is full: nothing
    /// was sent, and the caller sends the general way (which waits for room).
    /// `deadline` applies to the receive only.
    #[inline(always)]
    pub(crate) fn exchange(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        asm: &mut Assembler,
        deadline: &mut Deadline,
    ) -> Option<Result<Message>> {
        match self.ends.0.producer.try_push(&[&h.encode(), payload]) {
            Ok(Push::Done { wake }) => {
                if wake {
                    futex::wake(&self.ends.0.producer.header().data_bell, 1);
                }
                Some(self.recv_message(asm, deadline))
            }
            Ok(Push::Full) => None,
            Err(e) => Some(Err(self.corrupt(e))),
        }
    }

    /// Receives until a whole message is assembled.
    #[inline(always)]
    pub(crate) fn recv_message(
        &mut self,
        asm: &mut Assembler,
        deadline: &mut Deadline,
    ) -> Result<Message> {
        loop {
            // Wait before popping: an empty pop costs more than the check.
            if !self.spin_for_data(asm.in_progress())? {
                self.wait_data(deadline, asm.in_progress())?;
            }
            if let Some(Some(m)) = self.try_pop_frame(asm)? {
                return Ok(m);
            }
        }
    }

    /// Moves every frame already in the incoming ring into `inbox` (whole
    /// messages into `inbox.out`); returns whether anything was consumed.
    fn drain(&mut self, inbox: &mut Inbox<'_>) -> Result<bool> {
        let mut any = false;
        while let Some(frame) = self.try_pop_frame(inbox.asm)? {
            any = true;
            if let Some(m) = frame {
                inbox.out.push_back(m);
            }
        }
        Ok(any)
    }

    /// Whether data is there now or within a few spins. Most hand-offs
    /// complete within them: they are caught without reading the clock (a
    /// clock read costs as much as the hand-off) or calling out of line.
    #[inline(always)]
    fn spin_for_data(&mut self, mid_message: bool) -> Result<bool> {
        let cons = &mut self.ends.0.consumer;
        match cons.has_data() {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) => return Err(self.corrupt(e)),
        }
        if mid_message || self.spinner.budget() != Some(Duration::ZERO) {
            for _ in 0..SPINS_PER_CHECK {
                std::hint::spin_loop();
                match self.ends.0.consumer.has_data() {
                    Ok(true) => {
                        self.spinner.caught_spinning();
                        return Ok(true);
                    }
                    Ok(false) => {}
                    Err(e) => return Err(self.corrupt(e)),
                }
            }
        }
        Ok(false)
    }

    /// Waits for data after [`ShmLink::spin_for_data`] found none: spins
    /// within the strategy's budget, then sleeps on the doorbell.
    #[cold]
    fn wait_data(&mut self, deadline: &mut Deadline, mid_message: bool) -> Result<()> {
        let t0 = Instant::now();
        let deadline = deadline.at_from(t0);
        let result = self.wait_data_inner(deadline, mid_message, t0);
        self.spinner.record(t0.elapsed());
        result
    }

    fn wait_data_inner(
        &mut self,
        deadline: Option<Instant>,
        mid_message: bool,
        t0: Instant,
    ) -> Result<()> {
        let has_data = |l: &mut ShmLink| l.ends.0.consumer.has_data().map_err(|e| l.corrupt(e));
        let budget = match self.spinner.budget() {
            Some(b) if mid_message => Some(b.max(STREAM_SPIN)),
            b => b,
        };
        let cheap_watch = self.watch.is_cheap();
        let mut n = 0u32;
        let mut next_check = t0 + BUSY_CHECK_EVERY;
        let mut next_yield = t0 + YIELD_EVERY;
        if budget != Some(Duration::ZERO) {
            loop {
                if has_data(self)? {
                    return Ok(());
                }
                std::hint::spin_loop();
                n = n.wrapping_add(1);
                if !n.is_multiple_of(SPINS_PER_CHECK) {
                    continue;
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return Err(self.timeout("waiting for a response", t0));
                }
                if cheap_watch || now >= next_check {
                    next_check = now + BUSY_CHECK_EVERY;
                    self.check_watch(!mid_message)?;
                }
                if now >= next_yield {
                    next_yield = now + YIELD_EVERY;
                    std::thread::yield_now();
                }
                if budget.is_some_and(|b| now - t0 >= b) {
                    break;
                }
            }
        }
        loop {
            let cons = &mut self.ends.0.consumer;
            let Some(seen) = cons.prepare_sleep().map_err(|e| Error::Protocol {
                peer: self.address.clone(),
                detail: e.to_string(),
            })?
            else {
                cons.finish_sleep();
                return Ok(());
            };
            // Checked after reading the bell: see wait_space.
            if let Err(e) = self.check_watch(!mid_message) {
                self.ends.0.consumer.finish_sleep();
                return Err(e);
            }
            let slice = min_opt(remaining(deadline), self.watch.slice());
            let cons = &self.ends.0.consumer;
            if slice == Some(Duration::ZERO) {
                cons.finish_sleep();
                return Err(self.timeout("waiting for a response", t0));
            }
            futex::wait(&cons.header().data_bell, seen, slice);
            cons.finish_sleep();
            if has_data(self)? {
                return Ok(());
            }
        }
    }
}

/// Takes one popped record: a whole message, or a chunk into `asm`.
#[inline(always)]
fn take_record<M: shmlink_ring::Memory>(
    rec: &Record<'_, M>,
    asm: &mut Assembler,
    addr: &str,
) -> Result<Option<Message>> {
    let mut hb = [0u8; HEADER_LEN];
    rec.read(0, &mut hb).map_err(|e| ring_protocol(addr, &e))?;
    let h = FrameHeader::decode(&hb).map_err(|e| protocol(addr, e.0))?;
    if rec.len() != HEADER_LEN + h.len as usize {
        return Err(record_mismatch(addr, rec.len(), h.len));
    }
    if let Some(mut body) = asm.take_whole(&h) {
        rec.append_from(HEADER_LEN, &mut body)
            .map_err(|e| ring_protocol(addr, &e))?;
        return Ok(Some(Message {
            kind: h.kind,
            id: h.id,
            body,
        }));
    }
    let buf = asm.begin_chunk(&h).map_err(|e| protocol(addr, e.0))?;
    rec.append_from(HEADER_LEN, buf)
        .map_err(|e| ring_protocol(addr, &e))?;
    asm.finish(&h).map_err(|e| protocol(addr, e.0))
}

#[cold]
fn protocol(peer: &str, detail: String) -> Error {
    Error::Protocol {
        peer: peer.to_string(),
        detail,
    }
}

#[cold]
fn ring_protocol(peer: &str, e: &RingError) -> Error {
    protocol(peer, e.to_string())
}

#[cold]
fn record_mismatch(peer: &str, record: usize, claimed: u32) -> Error {
    protocol(
        peer,
        format!("ring record of {record} bytes holds a frame claiming {claimed} payload bytes"),
    )
}

fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
