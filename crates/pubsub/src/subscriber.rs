//! The subscriber: attaches to a publisher's topic and receives its
//! samples, in place over `shm:`, as copies over a socket.

use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink::{Client, Incoming, RemoteError};
use shmlink_ring::samples::{Entry, QueueConsumer, QueueHeader};
use shmlink_sys::{futex, memfd, Mapping, ReadOnlyMapping};
use shmlink_wire::pubsub::{
    decode_detach, decode_sample, is_detach, Attach, Mode, SAMPLE_HEAD_LEN,
};

use crate::error::{Error, Result};
use crate::options::SubscriberOptions;
use crate::sample::{Returns, Sample};
use crate::shared::{Part, QueueParts};

type Consumer = QueueConsumer<Part<QueueHeader>, Part<[Entry]>, Part<[AtomicU32]>>;

/// Longest a subscriber sleeps at once on an empty queue before it looks
/// whether its publisher still lives (an idle subscriber wakes this
/// often: no measurable CPU).
const LOOK_SLICE: Duration = Duration::from_millis(200);

/// The code of the error a subscriber answers an offer it refuses with.
const CODE_REFUSED: u32 = 1;

struct SharedInlet {
    consumer: Consumer,
    pool: Arc<ReadOnlyMapping>,
    stride: u64,
    slots: u32,
    sample_size: u32,
    returns: Arc<Returns>,
    /// Slots to give back that did not fit in the returns ring yet.
    pending: Vec<u32>,
    /// Samples taken and not given back (pending included).
    held: u32,
}

enum Inlet {
    Shared(Box<SharedInlet>),
    Copied,
}

/// A subscription to a topic.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use shmlink_pubsub::{Subscriber, SubscriberOptions};
/// let mut sub = Subscriber::connect("shm:/run/prices.sock", "prices", SubscriberOptions::default())?;
/// while let Some(sample) = sub.receive(Duration::from_secs(1))? {
///     println!("#{}: {} bytes, {} missed so far", sample.seq(), sample.len(), sub.missed());
/// }
/// # Ok::<(), shmlink_pubsub::Error>(())
/// ```
pub struct Subscriber {
    client: Client,
    topic: String,
    address: String,
    spin: Duration,
    max_held: u32,
    inlet: Inlet,
    last_seq: Option<u64>,
    missed: u64,
    received: u64,
    /// When an empty poll last looked at the publisher (coarse ms).
    looked_ms: u64,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("address", &self.address)
            .field("topic", &self.topic)
            .field("received", &self.received)
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl Subscriber {
    /// Connects to the publisher at `address` and attaches to `topic`.
    ///
    /// # Errors
    /// The connection's errors; [`Error::Refused`] when the publisher
    /// serves another topic or has its subscribers; [`Error::Protocol`]
    /// for an offer this build cannot take.
    pub fn connect(address: &str, topic: &str, options: SubscriberOptions) -> Result<Subscriber> {
        let mut client = Client::connect(address, options.client.clone())?;
        let first = match client.next_incoming(options.attach_timeout) {
            Ok(i) => i,
            Err(shmlink::Error::Timeout { .. }) => {
                return Err(Error::Refused(format!(
                    "{address} offered no topic within {:?}: is it a publisher's address (Publisher::bind, shmlink pub)?",
                    options.attach_timeout
                )))
            }
            Err(e) => return Err(e.into()),
        };
        let Incoming { id, body, fds } = first;
        if is_detach(&body) {
            let why =
                decode_detach(&body).map_err(|e| Error::Protocol(format!("{address}: {e}")))?;
            return Err(Error::Refused(why));
        }
        let Some(id) = id else {
            return Err(Error::Protocol(format!(
                "{address}: the first message is not a topic offer"
            )));
        };
        let taken = Attach::decode(&body)
            .map_err(|e| Error::Protocol(format!("{address}: {e}")))
            .and_then(|offer| {
                if offer.topic != topic {
                    return Err(Error::Refused(format!(
                        "publisher at {address} serves topic '{}', not '{topic}'",
                        offer.topic
                    )));
                }
                let inlet = match offer.mode {
                    Mode::Shared => Inlet::Shared(Box::new(open_shared(&offer, fds, address)?)),
                    Mode::Copy => Inlet::Copied,
                };
                Ok((offer, inlet))
            });
        let (offer, inlet) = match taken {
            Ok(t) => t,
            Err(e) => {
                let _ = client.answer(id, Err(RemoteError::new(CODE_REFUSED, e.to_string())));
                return Err(e);
            }
        };
        client.answer(id, Ok(&[]))?;
        Ok(Subscriber {
            client,
            topic: topic.to_owned(),
            address: address.to_owned(),
            spin: options.spin,
            max_held: offer.max_held,
            inlet,
            last_seq: None,
            missed: 0,
            received: 0,
            looked_ms: 0,
        })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Whether samples are read in place in shared memory (`shm:`), or
    /// copied (a socket).
    pub fn in_shared_memory(&self) -> bool {
        matches!(self.inlet, Inlet::Shared(_))
    }

    /// Samples received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Samples missed: gaps in the sequence numbers since the first one
    /// received (the publisher dropped them from this subscriber's full
    /// queue).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Waits up to `timeout` for the next sample; `None` when none came.
    ///
    /// # Errors
    /// [`Error::Usage`] when this subscriber holds the topic's `max_held`
    /// samples (drop one first); [`Error::Detached`] when the publisher
    /// ended the subscription; [`Error::Closed`] when it is gone;
    /// [`Error::Protocol`] when it broke the protocol.
    pub fn receive(&mut self, timeout: Duration) -> Result<Option<Sample>> {
        self.next(Instant::now() + timeout, true)
    }

    /// The next sample if one is there, without waiting.
    ///
    /// # Errors
    /// As [`Subscriber::receive`].
    pub fn try_receive(&mut self) -> Result<Option<Sample>> {
        self.next(Instant::now(), false)
    }

    fn next(&mut self, end: Instant, wait: bool) -> Result<Option<Sample>> {
        if matches!(self.inlet, Inlet::Copied) {
            return self.next_copied(end, wait);
        }
        self.give_back()?;
        if let Some(s) = self.take()? {
            return Ok(Some(s));
        }
        if !wait {
            // A poll that finds nothing looks at the publisher at most once
            // a millisecond (a liveness check costs a system call).
            let now = shmlink_sys::clock::coarse_ms();
            if now != self.looked_ms {
                self.looked_ms = now;
                self.look()?;
            }
            return Ok(None);
        }
        let spin_end = Instant::now() + self.spin;
        loop {
            if let Inlet::Shared(i) = &self.inlet {
                if i.consumer.has_data() {
                    break;
                }
            }
            let now = Instant::now();
            if now >= spin_end || now >= end {
                break;
            }
            std::hint::spin_loop();
        }
        loop {
            if let Some(s) = self.take()? {
                return Ok(Some(s));
            }
            let now = Instant::now();
            if now >= end {
                self.look()?;
                return Ok(None);
            }
            if let Inlet::Shared(i) = &mut self.inlet {
                if let Some(seen) = i.consumer.prepare_sleep() {
                    futex::wait(
                        &i.consumer.header().data_bell,
                        seen,
                        Some((end - now).min(LOOK_SLICE)),
                    );
                }
                i.consumer.finish_sleep();
            }
            if let Some(s) = self.take()? {
                return Ok(Some(s));
            }
            self.look()?;
        }
    }

    /// Gives back the slots of samples dropped since the last look.
    fn give_back(&mut self) -> Result<()> {
        let Inlet::Shared(i) = &mut self.inlet else {
            return Ok(());
        };
        let dropped = std::mem::take(
            &mut *i
                .returns
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        i.pending.extend(dropped);
        let mut given = 0;
        for &slot in &i.pending {
            let ok = i
                .consumer
                .give_back(slot)
                .map_err(|e| self_protocol(&self.address, &self.topic, &e))?;
            if !ok {
                break;
            }
            given += 1;
        }
        i.pending.drain(..given);
        i.held -= given as u32;
        Ok(())
    }

    /// Takes the next queued reference, if any.
    fn take(&mut self) -> Result<Option<Sample>> {
        let Inlet::Shared(i) = &mut self.inlet else {
            return Ok(None);
        };
        // Samples the program still holds (dropped ones wait in `pending`
        // for room in the returns ring, which the publisher empties).
        let live = i.held - i.pending.len() as u32;
        if live >= self.max_held {
            return Err(Error::Usage(format!(
                "topic '{}': this subscriber holds {live} samples, its max_held: drop one before receiving more",
                self.topic
            )));
        }
        let Some(t) = i
            .consumer
            .try_take()
            .map_err(|e| self_protocol(&self.address, &self.topic, &e))?
        else {
            return Ok(None);
        };
        if t.wake {
            futex::wake(&i.consumer.header().space_bell, 1);
        }
        if t.slot >= i.slots || t.len > i.sample_size {
            return Err(Error::Protocol(format!(
                "the publisher of topic '{}' at {} queued slot {} of {} bytes (a pool of {} slots of at most {} bytes)",
                self.topic, self.address, t.slot, t.len, i.slots, i.sample_size
            )));
        }
        i.held += 1;
        let off = (u64::from(t.slot) * i.stride) as usize;
        let sample = Sample::in_place(
            t.seq,
            Arc::clone(&i.pool),
            off,
            t.len as usize,
            t.slot,
            Arc::clone(&i.returns),
        );
        self.count(t.seq)?;
        Ok(Some(sample))
    }

    fn next_copied(&mut self, end: Instant, wait: bool) -> Result<Option<Sample>> {
        let incoming = if wait {
            match self
                .client
                .next_incoming(end.saturating_duration_since(Instant::now()))
            {
                Ok(i) => i,
                Err(shmlink::Error::Timeout { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        } else {
            match self.client.try_incoming()? {
                Some(i) => i,
                None => return Ok(None),
            }
        };
        let body = self.message(incoming)?;
        let (seq, _) = decode_sample(&body).map_err(|e| {
            Error::Protocol(format!(
                "the publisher of topic '{}' at {}: {e}",
                self.topic, self.address
            ))
        })?;
        self.count(seq)?;
        Ok(Some(Sample::copied(seq, body, SAMPLE_HEAD_LEN)))
    }

    /// A message of the publisher outside the queue: a detach notice ends
    /// the subscription; anything else breaks the protocol.
    fn message(&mut self, i: Incoming) -> Result<Vec<u8>> {
        if is_detach(&i.body) {
            let why = decode_detach(&i.body).map_err(|e| Error::Protocol(e.to_string()))?;
            return Err(Error::Detached(why));
        }
        if i.id.is_some() || matches!(self.inlet, Inlet::Shared(_)) {
            if let Some(id) = i.id {
                let _ = self.client.answer(
                    id,
                    Err(RemoteError::new(
                        CODE_REFUSED,
                        "a subscriber takes no calls",
                    )),
                );
            }
            return Err(Error::Protocol(format!(
                "the publisher of topic '{}' at {} sent a message outside the protocol",
                self.topic, self.address
            )));
        }
        Ok(i.body)
    }

    /// Whether the publisher still lives and has said nothing.
    fn look(&mut self) -> Result<()> {
        if let Some(i) = self.client.try_incoming()? {
            self.message(i)?;
        }
        if !self.client.is_connected() {
            return Err(Error::Closed(format!(
                "the publisher of topic '{}' at {} is gone",
                self.topic, self.address
            )));
        }
        Ok(())
    }

    fn count(&mut self, seq: u64) -> Result<()> {
        if let Some(last) = self.last_seq {
            if seq <= last {
                return Err(Error::Protocol(format!(
                    "the publisher of topic '{}' at {} sent sample {seq} after {last}",
                    self.topic, self.address
                )));
            }
            self.missed += seq - last - 1;
        }
        self.last_seq = Some(seq);
        self.received += 1;
        Ok(())
    }
}

fn self_protocol(address: &str, topic: &str, e: &shmlink_ring::RingError) -> Error {
    Error::Protocol(format!(
        "the publisher of topic '{topic}' at {address} broke the queue's protocol: {e}"
    ))
}

/// Maps what a shared-mode offer carries, after checking it.
fn open_shared(offer: &Attach, fds: Vec<OwnedFd>, address: &str) -> Result<SharedInlet> {
    let bad = |what: String| Error::Protocol(format!("the publisher at {address}: {what}"));
    let [pool_fd, queue_fd]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|f: Vec<OwnedFd>| bad(format!("an offer with {} descriptors, not 2", f.len())))?;
    let pool =
        memfd::inspect(&pool_fd).map_err(|e| bad(format!("its pool is not a memfd: {e}")))?;
    if !pool.arena_sealed || pool.len != offer.pool_len() {
        return Err(bad(format!(
            "a pool of {} bytes (sealed against writes: {}), not {} sealed",
            pool.len,
            pool.arena_sealed,
            offer.pool_len()
        )));
    }
    let queue =
        memfd::inspect(&queue_fd).map_err(|e| bad(format!("its queue is not a memfd: {e}")))?;
    if !queue.sealed || queue.len != offer.queue_len {
        return Err(bad(format!(
            "a queue of {} bytes (sealed: {}), not {} sealed",
            queue.len, queue.sealed, offer.queue_len
        )));
    }
    let pool_map = ReadOnlyMapping::map(&pool_fd, offer.pool_len() as usize)
        .map_err(|e| Error::Io(format!("mapping the pool of {address}: {e}")))?;
    let queue_map = Mapping::map_shared(&queue_fd, offer.queue_len as usize, false)
        .map_err(|e| Error::Io(format!("mapping the queue of {address}: {e}")))?;
    let parts = QueueParts::new(queue_map, offer.depth, offer.returns)
        .ok_or_else(|| bad("a queue segment shorter than its offer".into()))?;
    let consumer = QueueConsumer::new(parts.header, parts.entries, parts.returns)
        .map_err(|e| bad(e.to_string()))?;
    Ok(SharedInlet {
        consumer,
        pool: Arc::new(pool_map),
        stride: offer.slot_stride,
        slots: offer.slots,
        sample_size: offer.sample_size,
        returns: Arc::default(),
        pending: Vec::new(),
        held: 0,
    })
}
