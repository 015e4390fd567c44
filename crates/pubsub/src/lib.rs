//! Publish/subscribe over shmlink: a publisher serves a topic at an
//! address (`shm:`, `unix:`, `tcp:`); subscribers attach and detach at
//! any time.
//!
//! Over `shm:` a sample is written once into the publisher's pool (a memfd
//! its subscribers map read-only) and every subscriber reads it in place:
//! what the publisher queues per subscriber is a 16-byte reference. Over a
//! socket the same API copies per subscriber.
//!
//! - [`Publisher`]: `bind`, `publish` (or `publish_with`, to write the
//!   sample in place), `wait_subscribers`, `stats`;
//! - [`Subscriber`]: `connect`, `receive`/`try_receive` → [`Sample`]
//!   (derefs to its bytes; dropping it gives the slot back), `missed`;
//! - [`TopicOptions`]: sample size, history for late joiners, queue depth,
//!   how many samples a subscriber may hold, and the [`Overflow`] policy
//!   for a slow subscriber (drop its oldest, or wait a bounded time, then
//!   detach it).
//!
//! The shared state (queues of references, returns, doorbells) is
//! `shmlink_ring::samples`, model-checked with loom; the messages are
//! `shmlink_wire::pubsub`; docs/protocol.md, "Publish/subscribe", specifies
//! both. Reference counts are the publisher's own, so a subscriber can
//! neither free what others read nor keep more than its bound, and one that
//! dies has everything it held released.
//!
//! # Examples
//! ```no_run
//! use std::time::Duration;
//! use shmlink_pubsub::{Publisher, Subscriber, SubscriberOptions, TopicOptions};
//! let publisher = Publisher::bind("shm:/tmp/feed.sock", "feed", TopicOptions::default())?;
//! let mut sub = Subscriber::connect("shm:/tmp/feed.sock", "feed", SubscriberOptions::default())?;
//! publisher.wait_subscribers(1, Duration::from_secs(5));
//! publisher.publish(b"hello")?;
//! let sample = sub.receive(Duration::from_secs(5))?.expect("a sample");
//! assert_eq!(&*sample, b"hello");
//! # Ok::<(), shmlink_pubsub::Error>(())
//! ```

mod error;
mod feed;
mod options;
mod pool;
mod publisher;
mod sample;
mod shared;
mod subscriber;

pub use error::{Error, Result};
pub use options::{Overflow, SubscriberOptions, TopicOptions};
pub use publisher::{Publisher, PublisherStats};
pub use sample::Sample;
pub use subscriber::Subscriber;
