//! The publisher's account of one subscriber: over `shm:` its queue of
//! references into the pool; over a socket a bounded queue of copies that
//! a thread of its own sends.

use std::collections::VecDeque;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink::Client;
use shmlink_ring::samples::{Entry, QueueHeader, QueueProducer, Queued};
use shmlink_sys::futex;
use shmlink_wire::pubsub::{encode_detach, encode_sample_head};

use crate::options::Overflow;
use crate::pool::{Pool, Stored};
use crate::shared::Part;

type Producer = QueueProducer<Part<QueueHeader>, Part<[Entry]>, Part<[AtomicU32]>>;

/// Longest a publisher sleeps at once while it waits for room (then it
/// looks at the subscriber's liveness).
const ROOM_SLICE: Duration = Duration::from_millis(50);

/// What offering a sample to a subscriber came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Queued (`dropped`: samples of it dropped on the way, oldest first).
    Queued { dropped: u64 },
    /// The subscriber must go, for this reason.
    Detach(String),
}

pub(crate) struct SharedFeed {
    pub(crate) client: Client,
    pub(crate) producer: Producer,
    pub(crate) depth: u32,
}

pub(crate) struct CopyFeed {
    queue: Arc<CopyQueue>,
    thread: Option<JoinHandle<()>>,
}

pub(crate) enum Via {
    Shared(Box<SharedFeed>),
    Copied(CopyFeed),
}

/// One subscriber.
pub(crate) struct Feed {
    /// "subscriber pid 1234 of topic 'a'", for messages.
    pub(crate) who: String,
    pub(crate) via: Via,
}

impl Feed {
    /// Collects what the subscriber gave back; `Err(reason)` when it broke
    /// the protocol or its sender stopped.
    pub(crate) fn collect(&mut self, pool: &mut Pool) -> Result<(), String> {
        match &mut self.via {
            Via::Shared(f) => f
                .producer
                .collect(&mut |slot| pool.release(slot))
                .map_err(|e| format!("{} broke the protocol: {e}", self.who)),
            Via::Copied(f) => match &lock(&f.queue).closed {
                Some(why) => Err(why.clone()),
                None => Ok(()),
            },
        }
    }

    /// Whether the subscriber still lives (a non-blocking look).
    pub(crate) fn alive(&self) -> bool {
        match &self.via {
            Via::Shared(f) => f.client.is_connected(),
            Via::Copied(f) => lock(&f.queue).closed.is_none(),
        }
    }

    /// Offers sample `s` (its bytes in `copy` for a subscriber over a
    /// socket), applying `overflow` when the subscriber's queue is full.
    pub(crate) fn offer(
        &mut self,
        pool: &mut Pool,
        s: Stored,
        copy: Option<&Arc<[u8]>>,
        overflow: Overflow,
    ) -> Offered {
        match &mut self.via {
            Via::Shared(f) => f.offer(pool, s, overflow, &self.who),
            Via::Copied(f) => match copy {
                Some(bytes) => f.offer(s.seq, bytes, overflow, &self.who),
                None => Offered::Queued { dropped: 0 },
            },
        }
    }

    /// Ends the subscription: tells the subscriber why (when `why` is
    /// given and it still listens), and releases every reference it had.
    /// `drain`: a subscriber over a socket gets what is queued for it
    /// first, sent by its thread, which is returned to be joined.
    pub(crate) fn close(
        mut self,
        pool: &mut Pool,
        why: Option<&str>,
        drain: bool,
    ) -> Option<JoinHandle<()>> {
        match &mut self.via {
            Via::Shared(f) => {
                if let Some(why) = why {
                    if f.client.is_connected() {
                        let _ = f.client.notify(&encode_detach(why));
                    }
                }
                f.producer.release_all(&mut |slot| pool.release(slot));
                None
            }
            Via::Copied(f) => f.stop(why, drain),
        }
    }
}

impl SharedFeed {
    fn offer(&mut self, pool: &mut Pool, s: Stored, overflow: Overflow, who: &str) -> Offered {
        let mut dropped = 0;
        let mut deadline = None;
        let depth = self.depth;
        loop {
            match self.producer.try_queue(s.seq, s.slot, s.len) {
                Ok(Queued::Done { wake }) => {
                    pool.add_ref(s.slot);
                    if wake {
                        futex::wake(&self.producer.header().data_bell, 1);
                    }
                    return Offered::Queued { dropped };
                }
                Ok(Queued::Full) => {}
                Err(e) => return Offered::Detach(format!("{who} broke the protocol: {e}")),
            }
            match overflow {
                Overflow::DropOldest => match self.producer.drop_oldest() {
                    Ok(Some(old)) => {
                        pool.release(old);
                        dropped += 1;
                    }
                    Ok(None) => {} // taken meanwhile: there is room
                    Err(e) => return Offered::Detach(format!("{who} broke the protocol: {e}")),
                },
                Overflow::Block(bound) => {
                    let end = *deadline.get_or_insert_with(|| Instant::now() + bound);
                    if let Err(why) = self.wait_for_room(end, who) {
                        return Offered::Detach(why.unwrap_or_else(|| format!(
                            "detached: {who} took no sample for {bound:?} with its queue of {depth} full (overflow: block {bound:?})"
                        )));
                    }
                }
            }
        }
    }

    /// Sleeps until the subscriber takes a sample or `end`. `Err(None)`:
    /// `end` came first; `Err(Some(why))`: the subscriber went away or broke
    /// the protocol meanwhile.
    fn wait_for_room(&mut self, end: Instant, who: &str) -> Result<(), Option<String>> {
        loop {
            let seen = match self.producer.prepare_sleep() {
                Ok(Some(seen)) => seen,
                Ok(None) => {
                    self.producer.finish_sleep();
                    return Ok(());
                }
                Err(e) => {
                    self.producer.finish_sleep();
                    return Err(Some(format!("{who} broke the protocol: {e}")));
                }
            };
            let now = Instant::now();
            if now >= end {
                self.producer.finish_sleep();
                return Err(None);
            }
            futex::wait(
                &self.producer.header().space_bell,
                seen,
                Some((end - now).min(ROOM_SLICE)),
            );
            self.producer.finish_sleep();
            if !self.client.is_connected() {
                return Err(Some(format!("{who} went away")));
            }
        }
    }
}

/// Copies waiting to be sent to a subscriber over a socket.
struct CopyQueue {
    state: Mutex<CopyState>,
    ready: Condvar,
    room: Condvar,
}

struct CopyState {
    samples: VecDeque<(u64, Arc<[u8]>)>,
    depth: usize,
    /// Why the sender stopped (the subscriber went, or was detached).
    closed: Option<String>,
    /// A notice to send before stopping.
    farewell: Option<String>,
}

fn lock(q: &CopyQueue) -> MutexGuard<'_, CopyState> {
    q.state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl CopyFeed {
    /// A feed whose thread sends to `client`.
    pub(crate) fn start(client: Client, depth: u32, who: String) -> std::io::Result<CopyFeed> {
        let queue = Arc::new(CopyQueue {
            state: Mutex::new(CopyState {
                samples: VecDeque::new(),
                depth: depth as usize,
                closed: None,
                farewell: None,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
        });
        let q = Arc::clone(&queue);
        let thread = std::thread::Builder::new()
            .name("shmlink-pub-copy".into())
            .spawn(move || send_loop(client, &q, &who))?;
        Ok(CopyFeed {
            queue,
            thread: Some(thread),
        })
    }

    fn offer(&mut self, seq: u64, bytes: &Arc<[u8]>, overflow: Overflow, who: &str) -> Offered {
        let mut st = lock(&self.queue);
        let mut dropped = 0;
        let end = match overflow {
            Overflow::Block(bound) => Some((Instant::now() + bound, bound)),
            Overflow::DropOldest => None,
        };
        while st.samples.len() >= st.depth && st.closed.is_none() {
            match end {
                None => {
                    st.samples.pop_front();
                    dropped += 1;
                }
                Some((end, bound)) => {
                    let now = Instant::now();
                    if now >= end {
                        return Offered::Detach(format!(
                            "{who} took no sample for {bound:?} with its queue of {} full (overflow: block {bound:?})",
                            st.depth
                        ));
                    }
                    st = self
                        .queue
                        .room
                        .wait_timeout(st, end - now)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
            }
        }
        if let Some(why) = &st.closed {
            return Offered::Detach(why.clone());
        }
        st.samples.push_back((seq, Arc::clone(bytes)));
        self.queue.ready.notify_one();
        Offered::Queued { dropped }
    }

    fn stop(&mut self, why: Option<&str>, drain: bool) -> Option<JoinHandle<()>> {
        {
            let mut st = lock(&self.queue);
            if !drain {
                st.samples.clear();
            }
            if st.closed.is_none() {
                st.farewell = why.map(str::to_owned);
                st.closed = Some(why.unwrap_or("publisher closed").to_owned());
            }
        }
        self.queue.ready.notify_all();
        // The thread ends after its last send (each bounded by the
        // session's send timeout); the caller joins it, or not, outside
        // the topic's lock.
        self.thread.take()
    }
}

/// The sender: takes copies off the queue and sends each as a one-way
/// message, until the feed stops or the subscriber goes.
fn send_loop(mut client: Client, q: &CopyQueue, who: &str) {
    let mut message = Vec::new();
    loop {
        let next = {
            let mut st = lock(q);
            loop {
                if let Some(s) = st.samples.pop_front() {
                    q.room.notify_all();
                    break Some(s);
                }
                if st.closed.is_some() {
                    break None; // after what was queued: a draining stop
                }
                let (g, timeout) = q
                    .ready
                    .wait_timeout(st, Duration::from_millis(250))
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                st = g;
                if timeout.timed_out() && !client.is_connected() {
                    st.closed = Some(format!("{who} went away"));
                    q.room.notify_all();
                }
            }
        };
        let Some((seq, bytes)) = next else { break };
        message.clear();
        message.extend_from_slice(&encode_sample_head(seq));
        message.extend_from_slice(&bytes);
        if let Err(e) = client.notify(&message) {
            let mut st = lock(q);
            st.closed.get_or_insert_with(|| format!("{who}: {e}"));
            st.samples.clear();
            st.farewell = None;
            drop(st);
            q.room.notify_all();
            return;
        }
    }
    let farewell = lock(q).farewell.take();
    if let Some(why) = farewell {
        let _ = client.notify(&encode_detach(&why));
    }
}
