//! The publisher: a topic served at an address. A thread of its own
//! accepts subscribers and offers them the topic; `publish` writes a
//! sample once into the pool and queues a reference to every subscriber.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink::{Accepted, Address, Listener, PortInterrupter, Transport};
use shmlink_wire::pubsub::{encode_detach, queue_len, slot_stride, Attach, Mode, PUBSUB_VERSION};

use crate::error::{io, Error, Result};
use crate::feed::{CopyFeed, Feed, Offered, SharedFeed, Via};
use crate::options::{Overflow, TopicOptions};
use crate::pool::{Pool, Stored};
use crate::shared::QueueParts;

/// How often the accepting thread looks for subscribers that died while
/// the publisher was idle (and releases what they held).
const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// Publishes between two looks at every subscriber's liveness.
const LOOK_EVERY: u32 = 256;
/// Publishes between two collections of what subscribers gave back (also
/// when the pool has no free slot): reading each subscriber's `head` and
/// `returned` costs a cache miss per subscriber, so not at every publish.
const COLLECT_EVERY: u32 = 8;

/// What a publisher did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublisherStats {
    /// Samples published.
    pub published: u64,
    /// Subscribers attached now.
    pub subscribers: usize,
    /// Subscribers ever attached.
    pub attached: u64,
    /// Samples dropped from full queues (policy `DropOldest`), summed over
    /// subscribers.
    pub dropped: u64,
    /// Subscribers that went away or were detached.
    pub detached: u64,
    /// Connections that did not become subscribers (another topic, the
    /// topic full, the attach failed).
    pub refused: u64,
}

struct State {
    pool: Pool,
    feeds: Vec<Feed>,
    next_seq: u64,
    stats: PublisherStats,
    since_look: u32,
}

struct Inner {
    topic: String,
    address: String,
    options: TopicOptions,
    slots: u32,
    stride: u64,
    pool_fd: OwnedFd,
    state: Mutex<State>,
    joined: Condvar,
    stop: AtomicBool,
}

/// A topic served at an address.
///
/// # Examples
/// ```no_run
/// use shmlink_pubsub::{Publisher, TopicOptions};
/// let publisher = Publisher::bind("shm:/run/prices.sock", "prices", TopicOptions::default())?;
/// publisher.publish(b"EURUSD 1.0871")?;
/// # Ok::<(), shmlink_pubsub::Error>(())
/// ```
pub struct Publisher {
    inner: Arc<Inner>,
    address: Address,
    interrupter: PortInterrupter,
    accepter: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("address", &self.inner.address)
            .field("topic", &self.inner.topic)
            .finish_non_exhaustive()
    }
}

fn lock(inner: &Inner) -> MutexGuard<'_, State> {
    inner
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Publisher {
    /// Serves `topic` at `address` (`shm:`, `unix:` or `tcp:`).
    ///
    /// # Errors
    /// Invalid options, an address that cannot be bound, shared memory the
    /// kernel refuses.
    pub fn bind(address: &str, topic: &str, options: TopicOptions) -> Result<Publisher> {
        options.check(topic)?;
        let slots = options.slots() as u32; // checked against MAX_SLOTS
        let stride = slot_stride(options.sample_size as u32);
        let (pool, pool_fd) = Pool::new(topic, slots, stride as usize, options.history)?;
        let listener = Listener::bind(address, options.server.clone())?;
        let address = listener.address().clone();
        let inner = Arc::new(Inner {
            topic: topic.to_owned(),
            address: address.to_string(),
            options,
            slots,
            stride,
            pool_fd,
            state: Mutex::new(State {
                pool,
                feeds: Vec::new(),
                next_seq: 0,
                stats: PublisherStats::default(),
                since_look: 0,
            }),
            joined: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let interrupter = listener.interrupter();
        let for_thread = Arc::clone(&inner);
        let accepter = std::thread::Builder::new()
            .name("shmlink-pub-accept".into())
            .spawn(move || accept_loop(&listener, &for_thread))
            .map_err(io(format!(
                "topic '{topic}': starting its accepting thread"
            )))?;
        Ok(Publisher {
            inner,
            address,
            interrupter,
            accepter: Some(accepter),
        })
    }

    /// The bound address.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// Publishes `sample`: written once, queued to every subscriber.
    /// Returns its sequence number (0 for the first).
    ///
    /// # Errors
    /// A sample larger than the topic's `sample_size`.
    pub fn publish(&self, sample: &[u8]) -> Result<u64> {
        self.publish_with(sample.len(), |b| b.copy_from_slice(sample))
    }

    /// Publishes a sample of `len` bytes written in place by `fill` (into
    /// the pool, where subscribers over `shm:` read it): no copy at all.
    ///
    /// # Errors
    /// A length larger than the topic's `sample_size`.
    pub fn publish_with(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<u64> {
        let inner = &*self.inner;
        if len > inner.options.sample_size {
            return Err(Error::Usage(format!(
                "topic '{}': a sample of {len} bytes is larger than its sample_size of {}",
                inner.topic, inner.options.sample_size
            )));
        }
        let mut guard = lock(inner);
        let st = &mut *guard;
        if st.since_look.is_multiple_of(COLLECT_EVERY) || st.pool.free_slots() == 0 {
            st.collect_all();
        }
        let (slot, bytes) = st.pool.alloc(len)?;
        fill(bytes);
        let s = Stored {
            seq: st.next_seq,
            slot,
            len: len as u32,
        };
        st.next_seq += 1;
        let copy = st
            .feeds
            .iter()
            .any(|f| matches!(f.via, Via::Copied(_)))
            .then(|| Arc::<[u8]>::from(st.pool.bytes(s)));
        let overflow = inner.options.overflow;
        let mut gone = Vec::new();
        for (i, feed) in st.feeds.iter_mut().enumerate() {
            match feed.offer(&mut st.pool, s, copy.as_ref(), overflow) {
                Offered::Queued { dropped } => st.stats.dropped += dropped,
                Offered::Detach(why) => gone.push((i, why)),
            }
        }
        st.pool.remember(s);
        st.pool.settle(slot);
        st.stats.published += 1;
        st.close_all(gone);
        st.since_look += 1;
        if st.since_look >= LOOK_EVERY {
            st.sweep();
        }
        Ok(s.seq)
    }

    /// Waits until at least `n` subscribers are attached, up to `timeout`;
    /// whether they are.
    pub fn wait_subscribers(&self, n: usize, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut st = lock(&self.inner);
        loop {
            if st.feeds.len() >= n {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            st = self
                .inner
                .joined
                .wait_timeout(st, end - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Counts so far.
    pub fn stats(&self) -> PublisherStats {
        let st = lock(&self.inner);
        PublisherStats {
            subscribers: st.feeds.len(),
            ..st.stats.clone()
        }
    }

    /// Pool slots free now (every slot is free again once no subscriber
    /// and no history references it).
    pub fn free_slots(&self) -> usize {
        lock(&self.inner).pool.free_slots()
    }

    /// Pool slots in all.
    pub fn slots(&self) -> usize {
        self.inner.slots as usize
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Release);
        self.interrupter.interrupt();
        if let Some(t) = self.accepter.take() {
            let _ = t.join();
        }
        let why = format!(
            "the publisher of topic '{}' at {} closed",
            self.inner.topic, self.inner.address
        );
        let senders: Vec<JoinHandle<()>> = {
            let mut st = lock(&self.inner);
            let st = &mut *st;
            st.feeds
                .drain(..)
                .filter_map(|f| f.close(&mut st.pool, Some(&why), true))
                .collect()
        };
        // Subscribers over a socket get what was queued for them first.
        for t in senders {
            let _ = t.join();
        }
    }
}

impl State {
    fn collect_all(&mut self) {
        let mut gone = Vec::new();
        for (i, feed) in self.feeds.iter_mut().enumerate() {
            if let Err(why) = feed.collect(&mut self.pool) {
                gone.push((i, why));
            }
        }
        self.close_all(gone);
    }

    /// Looks at every subscriber's liveness; releases what the dead held.
    fn sweep(&mut self) {
        self.since_look = 0;
        let gone: Vec<(usize, String)> = self
            .feeds
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.alive())
            .map(|(i, f)| (i, format!("{} went away", f.who)))
            .collect();
        self.close_all(gone);
    }

    /// Ends the subscriptions at these indexes (ascending).
    fn close_all(&mut self, gone: Vec<(usize, String)>) {
        for (i, why) in gone.into_iter().rev() {
            let feed = self.feeds.swap_remove(i);
            drop(feed.close(&mut self.pool, Some(&why), false));
            self.stats.detached += 1;
        }
    }
}

fn accept_loop(listener: &Listener, inner: &Arc<Inner>) {
    while !inner.stop.load(Ordering::Acquire) {
        match listener.accept(SWEEP_EVERY) {
            Ok(Some(a)) => {
                if let Err(why) = attach(inner, a) {
                    lock(inner).stats.refused += 1;
                    let _ = why; // told to the subscriber where it could be
                }
            }
            Ok(None) => {}
            Err(_) => std::thread::sleep(SWEEP_EVERY), // an accept that fails for good
        }
        if inner.stop.load(Ordering::Acquire) {
            break;
        }
        lock(inner).sweep();
    }
}

/// Offers the topic to a new session and adopts it as a subscriber.
fn attach(inner: &Inner, accepted: Accepted) -> std::result::Result<(), String> {
    let Accepted { mut peer, pid, .. } = accepted;
    let who = match pid {
        Some(pid) => format!("subscriber pid {pid} of topic '{}'", inner.topic),
        None => format!("a subscriber over tcp of topic '{}'", inner.topic),
    };
    let o = &inner.options;
    let (subscribers, next_seq) = {
        let st = lock(inner);
        (st.feeds.len(), st.next_seq)
    };
    if subscribers >= o.max_subscribers as usize {
        let why = format!(
            "topic '{}' at {} has its {} subscribers (max_subscribers)",
            inner.topic, inner.address, o.max_subscribers
        );
        let _ = peer.notify(&encode_detach(&why));
        return Err(why);
    }
    let shared = peer.transport() == Transport::Shm;
    let returns = o.depth + o.max_held;
    let mut offer = Attach {
        version: PUBSUB_VERSION,
        mode: Mode::Copy,
        topic: inner.topic.clone(),
        sample_size: o.sample_size as u32,
        slots: 0,
        depth: o.depth,
        returns: 0,
        max_held: o.max_held,
        history: o.history,
        slot_stride: 0,
        next_seq,
        queue_len: 0,
    };
    let via = if shared {
        offer.mode = Mode::Shared;
        offer.slots = inner.slots;
        offer.returns = returns;
        offer.slot_stride = inner.stride;
        offer.queue_len = queue_len(o.depth, returns);
        let (fd, map) = queue_segment(offer.queue_len).map_err(|e| format!("{who}: {e}"))?;
        let parts = QueueParts::new(map, o.depth, returns)
            .ok_or_else(|| format!("{who}: queue segment too short"))?;
        let producer = shmlink_ring::samples::QueueProducer::new(
            parts.header,
            parts.entries,
            parts.returns,
            inner.slots,
            o.max_held,
        )
        .map_err(|e| format!("{who}: {e}"))?;
        peer.call_with_fds(&offer.encode(), &[inner.pool_fd.as_fd(), fd.as_fd()])
            .map_err(|e| format!("{who}: attach: {e}"))?;
        Via::Shared(Box::new(SharedFeed {
            client: peer,
            producer,
            depth: o.depth,
        }))
    } else {
        peer.call(&offer.encode())
            .map_err(|e| format!("{who}: attach: {e}"))?;
        Via::Copied(CopyFeed::start(peer, o.depth, who.clone()).map_err(|e| e.to_string())?)
    };
    let mut feed = Feed { who, via };
    let mut st = lock(inner);
    let st = &mut *st;
    for s in st.pool.history() {
        let copy = matches!(feed.via, Via::Copied(_)).then(|| Arc::<[u8]>::from(st.pool.bytes(s)));
        if let Offered::Detach(why) =
            feed.offer(&mut st.pool, s, copy.as_ref(), Overflow::DropOldest)
        {
            drop(feed.close(&mut st.pool, Some(&why), false));
            return Err(why);
        }
    }
    st.feeds.push(feed);
    st.stats.attached += 1;
    inner.joined.notify_all();
    Ok(())
}

/// A subscriber's queue segment: sealed against resizing, mapped here.
fn queue_segment(len: u64) -> std::io::Result<(OwnedFd, shmlink_sys::Mapping)> {
    let fd = shmlink_sys::memfd::create_sealed("shmlink-pubsub-queue", len)?;
    let size =
        usize::try_from(len).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let map = shmlink_sys::Mapping::map_shared(&fd, size, false)?;
    Ok((fd, map))
}
