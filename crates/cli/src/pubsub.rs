//! `shmlink pub` and `shmlink sub`: publish numbered samples to a topic,
//! and receive and check them. Every sample starts with its sequence
//! number and continues with bytes derived from it, so a subscriber
//! catches a sample mixed up with another or torn.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde_json::json;
use shmlink::ClientOptions;
use shmlink_pubsub::{
    Error as PubSubError, Overflow, Publisher, Subscriber, SubscriberOptions, TopicOptions,
};

use crate::parse;

/// Options of `shmlink pub`.
#[derive(Debug, Args)]
pub(crate) struct PubArgs {
    /// Address to serve the topic at: shm:PATH, unix:PATH or tcp:HOST:PORT.
    #[arg(value_name = "ADDRESS")]
    address: String,
    /// The topic's name.
    #[arg(long)]
    topic: String,
    /// Bytes per sample (at least 8: each starts with its sequence number).
    #[arg(long, value_name = "BYTES", value_parser = parse::size, default_value = "64")]
    size: usize,
    /// Samples to publish.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    count: u64,
    /// Samples per second (default: as fast as it can).
    #[arg(long, value_name = "PER_SEC")]
    rate: Option<f64>,
    /// Wait for this many subscribers before publishing.
    #[arg(long, value_name = "K", default_value_t = 0)]
    wait_subscribers: usize,
    /// Seconds to wait for them.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "10")]
    wait_timeout: Duration,
    /// Samples kept for subscribers that join late.
    #[arg(long, value_name = "N", default_value_t = 0)]
    history: u32,
    /// Samples queued per subscriber before the overflow policy applies.
    #[arg(long, value_name = "N", default_value_t = 64)]
    depth: u32,
    /// Most subscribers at once.
    #[arg(long, value_name = "N", default_value_t = 16)]
    max_subscribers: u32,
    /// A full subscriber: wait up to this many seconds for it, then detach
    /// it (default: drop its oldest sample, never wait).
    #[arg(long, value_name = "SECS", value_parser = parse::seconds)]
    block: Option<Duration>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `shmlink sub`.
#[derive(Debug, Args)]
pub(crate) struct SubArgs {
    /// The publisher's address.
    #[arg(value_name = "ADDRESS")]
    address: String,
    /// The topic's name.
    #[arg(long)]
    topic: String,
    /// Stop after this many samples (default: until the publisher closes).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Fail when no sample comes for this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "10")]
    idle_timeout: Duration,
    /// Hold each sample this many microseconds before dropping it (a slow
    /// subscriber).
    #[arg(long, value_name = "MICROS", default_value_t = 0)]
    hold_us: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// The sample numbered `seq`, `size` bytes.
fn fill(buf: &mut [u8], seq: u64) {
    let head = seq.to_le_bytes();
    for (i, b) in buf.iter_mut().enumerate() {
        *b = if i < 8 {
            head[i]
        } else {
            (seq as u8).wrapping_add(i as u8)
        };
    }
}

/// Whether `sample` is what `fill` made for `seq`.
fn intact(sample: &[u8], seq: u64) -> bool {
    sample.len() >= 8
        && sample[..8] == seq.to_le_bytes()
        && sample[8..]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (seq as u8).wrapping_add((i + 8) as u8))
}

/// Publishes.
pub(crate) fn run_pub(args: &PubArgs) -> anyhow::Result<()> {
    if args.size < 8 {
        bail!(
            "--size {} is too small: each sample starts with its 8-byte sequence number",
            args.size
        );
    }
    let options = TopicOptions {
        sample_size: args.size,
        history: args.history,
        depth: args.depth,
        max_subscribers: args.max_subscribers,
        overflow: args.block.map_or(Overflow::DropOldest, Overflow::Block),
        ..TopicOptions::default()
    };
    let publisher = Publisher::bind(&args.address, &args.topic, options)?;
    eprintln!(
        "shmlink pub: topic '{}' at {}",
        args.topic,
        publisher.address()
    );
    if args.wait_subscribers > 0
        && !publisher.wait_subscribers(args.wait_subscribers, args.wait_timeout)
    {
        bail!(
            "{} of {} subscribers came within {:?}",
            publisher.stats().subscribers,
            args.wait_subscribers,
            args.wait_timeout
        );
    }
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    for n in 0..args.count {
        if let Some(rate) = args.rate {
            let due = start + Duration::from_secs_f64(n as f64 / rate);
            while Instant::now() < due {
                std::thread::yield_now();
            }
        }
        let t = Instant::now();
        let seq = publisher.publish_with(args.size, |b| fill(b, n))?;
        slowest = slowest.max(t.elapsed());
        if seq != n {
            bail!("published sample {n} as {seq}");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let s = publisher.stats();
    drop(publisher);
    let summary = json!({
        "topic": args.topic, "published": s.published, "subscribers": s.subscribers,
        "attached": s.attached, "dropped": s.dropped, "detached": s.detached,
        "secs": secs, "slowest_publish_us": slowest.as_secs_f64() * 1e6,
    });
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "published {} samples of {} bytes in {secs:.3} s to {} subscribers; dropped {}, detached {}; slowest publish {:.0} us",
            s.published, args.size, s.attached, s.dropped, s.detached, slowest.as_secs_f64() * 1e6
        );
    }
    Ok(())
}

/// Receives and checks.
pub(crate) fn run_sub(args: &SubArgs) -> anyhow::Result<()> {
    let options = SubscriberOptions {
        client: ClientOptions::default(),
        ..SubscriberOptions::default()
    };
    let mut sub = Subscriber::connect(&args.address, &args.topic, options)
        .with_context(|| format!("subscribing to topic '{}' at {}", args.topic, args.address))?;
    let (mut corrupt, mut first_seq, mut last_seq) = (0u64, None, None);
    let mut ended = String::from("count reached");
    while args.count.is_none_or(|c| sub.received() < c) {
        match sub.receive(args.idle_timeout) {
            Ok(Some(sample)) => {
                if !intact(&sample, sample.seq()) {
                    corrupt += 1;
                }
                first_seq.get_or_insert(sample.seq());
                last_seq = Some(sample.seq());
                if args.hold_us > 0 {
                    let until = Instant::now() + Duration::from_micros(args.hold_us);
                    while Instant::now() < until {
                        std::thread::yield_now();
                    }
                }
            }
            Ok(None) => bail!(
                "no sample for {:?} on topic '{}' after {} received",
                args.idle_timeout,
                args.topic,
                sub.received()
            ),
            Err(PubSubError::Detached(why)) => {
                ended = why;
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let summary = json!({
        "topic": args.topic, "received": sub.received(), "missed": sub.missed(),
        "corrupt": corrupt, "first_seq": first_seq, "last_seq": last_seq,
        "shared_memory": sub.in_shared_memory(), "ended": ended,
    });
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "received {} samples ({} missed, {corrupt} corrupt) {}; {ended}",
            sub.received(),
            sub.missed(),
            if sub.in_shared_memory() {
                "in place"
            } else {
                "copied"
            }
        );
    }
    if corrupt > 0 {
        bail!("{corrupt} samples did not match their sequence number");
    }
    Ok(())
}
