//! A topic's options (the publisher's) and a subscriber's.

use std::time::Duration;

use shmlink::{ClientOptions, ServerOptions};
use shmlink_wire::pubsub::{MAX_DEPTH, MAX_HELD, MAX_POOL, MAX_SAMPLE, MAX_SLOTS};

use crate::error::{Error, Result};

/// What the publisher does when a subscriber's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Drop that subscriber's oldest queued sample; the subscriber counts
    /// it as missed (a gap in the sequence numbers). The publisher never
    /// waits.
    DropOldest,
    /// Wait up to this long for the subscriber to take one; a subscriber
    /// still full then is detached (told why, its session closed), so one
    /// stuck subscriber costs the publisher at most this bound once.
    Block(Duration),
}

/// A topic, as its publisher serves it.
#[derive(Debug, Clone)]
pub struct TopicOptions {
    /// Largest sample, in bytes (default 4096).
    pub sample_size: usize,
    /// Samples kept for subscribers that join late, queued to them first
    /// (default 0; at most `depth`).
    pub history: u32,
    /// Samples queued per subscriber and not yet taken, past which
    /// `overflow` applies (default 64).
    pub depth: u32,
    /// Most subscribers at once (default 16); more are told the topic is
    /// full.
    pub max_subscribers: u32,
    /// Most samples a subscriber may hold (taken and not dropped) at once
    /// (default 8).
    pub max_held: u32,
    /// What to do with a full subscriber (default: drop its oldest).
    pub overflow: Overflow,
    /// The listening side's options: who may subscribe (by default only
    /// this process's uid), socket mode, handshake timeout; `send_timeout`
    /// bounds the attach of a new subscriber.
    pub server: ServerOptions,
}

impl Default for TopicOptions {
    fn default() -> Self {
        TopicOptions {
            sample_size: 4096,
            history: 0,
            depth: 64,
            max_subscribers: 16,
            max_held: 8,
            overflow: Overflow::DropOldest,
            server: ServerOptions::default(),
        }
    }
}

impl TopicOptions {
    /// Pool slots over `shm:`: the history, every subscriber's queue and
    /// what it may hold (twice the queue: it may take a whole queue between
    /// two looks of the publisher), and the sample being written.
    pub(crate) fn slots(&self) -> u64 {
        u64::from(self.history)
            + u64::from(self.max_subscribers)
                * (2 * u64::from(self.depth) + u64::from(self.max_held))
            + 1
    }

    pub(crate) fn check(&self, topic: &str) -> Result<()> {
        let bad = |what: String| Err(Error::Usage(format!("topic '{topic}': {what}")));
        if topic.is_empty() || topic.len() > shmlink_wire::pubsub::MAX_TOPIC {
            return Err(Error::Usage(format!(
                "a topic name has 1 to {} bytes, not {}",
                shmlink_wire::pubsub::MAX_TOPIC,
                topic.len()
            )));
        }
        if self.sample_size == 0 || self.sample_size > MAX_SAMPLE as usize {
            return bad(format!(
                "sample_size {} (1 to {MAX_SAMPLE})",
                self.sample_size
            ));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return bad(format!("depth {} (1 to {MAX_DEPTH})", self.depth));
        }
        if self.max_held == 0 || self.max_held > MAX_HELD {
            return bad(format!("max_held {} (1 to {MAX_HELD})", self.max_held));
        }
        if self.history > self.depth {
            return bad(format!(
                "history {} is deeper than the queue (depth {})",
                self.history, self.depth
            ));
        }
        if self.max_subscribers == 0 {
            return bad("max_subscribers 0".into());
        }
        let stride = shmlink_wire::pubsub::slot_stride(self.sample_size as u32);
        if self.slots() > u64::from(MAX_SLOTS) || self.slots() * stride > MAX_POOL {
            return bad(format!(
                "a pool of {} slots of {stride} bytes (history + max_subscribers x (2 x depth + max_held) + 1) is larger than {MAX_SLOTS} slots or {MAX_POOL} bytes",
                self.slots()
            ));
        }
        Ok(())
    }
}

/// A subscriber's options.
#[derive(Debug, Clone)]
pub struct SubscriberOptions {
    /// The session's options (timeouts, `shm_required`).
    pub client: ClientOptions,
    /// How long to wait for the publisher's offer after connecting
    /// (default 5 s).
    pub attach_timeout: Duration,
    /// How long a receive spins on an empty queue before it sleeps on the
    /// queue's doorbell (default 50 µs; zero sleeps at once).
    pub spin: Duration,
}

impl Default for SubscriberOptions {
    fn default() -> Self {
        SubscriberOptions {
            client: ClientOptions::default(),
            attach_timeout: Duration::from_secs(5),
            spin: Duration::from_micros(50),
        }
    }
}
