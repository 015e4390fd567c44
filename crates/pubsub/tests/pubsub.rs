//! Publish/subscribe in one process, over shm:, unix: and tcp: (the
//! subscribers of other processes, and their deaths, are in the CLI's
//! tests/pubsub.rs): delivery in order and intact, history for late
//! joiners, both overflow policies, the bound on held samples, refusals
//! with their reasons, and every slot coming back when subscribers go.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use shmlink_pubsub::{
    Error, Overflow, Publisher, Sample, Subscriber, SubscriberOptions, TopicOptions,
};

const SEC: Duration = Duration::from_secs(1);

/// A directory of its own for socket paths, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "shmlink-pubsub-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        Dir(p)
    }

    /// An address on `transport` ("shm", "unix", "tcp").
    fn address(&self, transport: &str) -> String {
        match transport {
            "tcp" => "tcp:127.0.0.1:0".into(),
            t => format!("{t}:{}", self.0.join("topic.sock").display()),
        }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bind(address: &str, topic: &str, options: TopicOptions) -> Publisher {
    Publisher::bind(address, topic, options).expect("bind")
}

fn subscribe(p: &Publisher, topic: &str) -> Subscriber {
    Subscriber::connect(
        &p.address().to_string(),
        topic,
        SubscriberOptions::default(),
    )
    .expect("subscribe")
}

/// Sample `n`: its number, then bytes derived from it.
fn sample(n: u64, len: usize) -> Vec<u8> {
    let mut b: Vec<u8> = (0..len)
        .map(|i| (n as u8).wrapping_mul(7).wrapping_add(i as u8))
        .collect();
    b[..8].copy_from_slice(&n.to_le_bytes());
    b
}

fn next(s: &mut Subscriber) -> Sample {
    s.receive(5 * SEC)
        .expect("receive")
        .expect("a sample within 5 s")
}

/// Waits for `cond` up to 5 s.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + 5 * SEC;
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within 5 s");
        thread::yield_now();
    }
}

#[test]
fn every_subscriber_gets_every_sample_in_order_and_intact_on_every_transport() {
    for t in ["shm", "unix", "tcp"] {
        let dir = Dir::new();
        let options = TopicOptions {
            sample_size: 256,
            depth: 8,
            overflow: Overflow::Block(5 * SEC),
            ..TopicOptions::default()
        };
        let p = bind(&dir.address(t), "feed", options);
        let mut subs: Vec<Subscriber> = (0..3).map(|_| subscribe(&p, "feed")).collect();
        assert!(p.wait_subscribers(3, 5 * SEC), "{t}: 3 subscribers");
        assert!(
            subs.iter().all(|s| s.in_shared_memory() == (t == "shm")),
            "{t}"
        );
        let readers: Vec<_> = subs
            .drain(..)
            .map(|mut s| {
                thread::spawn(move || {
                    for n in 0..2000u64 {
                        let got = next(&mut s);
                        assert_eq!(got.seq(), n);
                        assert_eq!(&*got, &sample(n, 8 + (n as usize % 200))[..]);
                    }
                    assert_eq!((s.received(), s.missed()), (2000, 0));
                })
            })
            .collect();
        for n in 0..2000u64 {
            assert_eq!(
                p.publish(&sample(n, 8 + (n as usize % 200)))
                    .expect("publish"),
                n
            );
        }
        for r in readers {
            r.join().expect("reader");
        }
        let st = p.stats();
        assert_eq!((st.published, st.dropped, st.detached), (2000, 0, 0), "{t}");
    }
}

#[test]
fn a_sample_is_read_in_place_by_every_subscriber_and_its_slot_comes_back() {
    let dir = Dir::new();
    let p = bind(&dir.address("shm"), "feed", TopicOptions::default());
    let mut a = subscribe(&p, "feed");
    let mut b = subscribe(&p, "feed");
    assert!(p.wait_subscribers(2, 5 * SEC));
    let free = p.free_slots();
    p.publish(b"one sample").expect("publish");
    let (sa, sb) = (next(&mut a), next(&mut b));
    assert_eq!((&*sa, &*sb), (&b"one sample"[..], &b"one sample"[..]));
    assert_eq!(sa.as_ptr() as usize % 64, 0, "slots are cache-line aligned");
    assert!(sa.in_shared_memory());
    assert_eq!(p.free_slots(), free - 1, "one slot, referenced by both");
    drop((sa, sb));
    // Returns travel at each subscriber's next receive; the publisher
    // collects them every few publishes: publishing on, with both
    // subscribers taking and dropping everything, every slot comes back
    // but the one of the last sample.
    eventually("the slots come back", || {
        p.publish(b"more").expect("publish");
        while a.try_receive().expect("a").is_some() {}
        while b.try_receive().expect("b").is_some() {}
        p.free_slots() >= free - 1
    });
}

#[test]
fn a_late_joiner_gets_the_history_first_then_what_follows() {
    let dir = Dir::new();
    let options = TopicOptions {
        history: 3,
        ..TopicOptions::default()
    };
    let p = bind(&dir.address("shm"), "feed", options);
    for n in 0..5u64 {
        p.publish(&sample(n, 16)).expect("publish");
    }
    let mut s = subscribe(&p, "feed");
    assert!(p.wait_subscribers(1, 5 * SEC));
    p.publish(&sample(5, 16)).expect("publish");
    let seqs: Vec<u64> = (0..4).map(|_| next(&mut s).seq()).collect();
    assert_eq!(seqs, vec![2, 3, 4, 5]);
    assert_eq!(s.missed(), 0);
}

#[test]
fn a_full_subscriber_loses_its_oldest_and_counts_them_the_publisher_never_waits() {
    for t in ["shm", "unix"] {
        let dir = Dir::new();
        let options = TopicOptions {
            depth: 4,
            max_held: 2,
            ..TopicOptions::default()
        };
        let p = bind(&dir.address(t), "feed", options);
        let mut s = subscribe(&p, "feed");
        assert!(p.wait_subscribers(1, 5 * SEC));
        p.publish(&sample(0, 8)).expect("publish");
        assert_eq!(next(&mut s).seq(), 0);
        for n in 1..=20u64 {
            p.publish(&sample(n, 8)).expect("publish");
        }
        if t == "shm" {
            // The queue holds the last 4; the 16 before were dropped.
            let seqs: Vec<u64> = (0..4).map(|_| next(&mut s).seq()).collect();
            assert_eq!(seqs, vec![17, 18, 19, 20]);
            assert_eq!(s.missed(), 16);
            assert_eq!(p.stats().dropped, 16);
        } else {
            // Over a socket the sender thread takes samples off the queue
            // as the socket takes them: some may be dropped, order stays.
            let mut last = 0;
            while last < 20 {
                let got = next(&mut s);
                assert!(got.seq() > last);
                last = got.seq();
            }
            assert_eq!(s.received() + s.missed(), 21, "{t}");
            assert_eq!(p.stats().dropped, s.missed(), "{t}");
        }
    }
}

#[test]
fn a_subscriber_stuck_past_the_block_bound_is_detached_and_told_why() {
    for t in ["shm", "unix"] {
        let dir = Dir::new();
        let options = TopicOptions {
            depth: 2,
            overflow: Overflow::Block(Duration::from_millis(100)),
            ..TopicOptions::default()
        };
        let p = bind(&dir.address(t), "feed", options);
        let mut stuck = subscribe(&p, "feed");
        assert!(p.wait_subscribers(1, 5 * SEC));
        let start = Instant::now();
        // Over a socket the sender thread and the socket buffer hold some:
        // publish until the bound is hit.
        while p.stats().detached == 0 {
            p.publish(&[0u8; 4000]).expect("publish");
            assert!(start.elapsed() < 10 * SEC, "{t}: never detached");
        }
        assert!(start.elapsed() >= Duration::from_millis(100), "{t}");
        assert_eq!(p.stats().subscribers, 0);
        p.publish(b"after").expect("the publisher goes on");
        let e = loop {
            match stuck.receive(5 * SEC) {
                Ok(Some(_)) => {}
                Ok(None) => panic!("{t}: no detach notice"),
                Err(e) => break e,
            }
        };
        assert!(
            matches!(&e, Error::Detached(why) if why.contains("took no sample for 100ms")),
            "{t}: {e}"
        );
    }
}

#[test]
fn a_subscriber_holds_at_most_max_held_samples() {
    let dir = Dir::new();
    let options = TopicOptions {
        max_held: 2,
        ..TopicOptions::default()
    };
    let p = bind(&dir.address("shm"), "feed", options);
    let mut s = subscribe(&p, "feed");
    assert!(p.wait_subscribers(1, 5 * SEC));
    for n in 0..3u64 {
        p.publish(&sample(n, 8)).expect("publish");
    }
    let first = next(&mut s);
    let _second = next(&mut s);
    let e = s.receive(SEC).expect_err("a third while holding two");
    assert!(
        e.to_string().contains("holds 2 samples, its max_held"),
        "{e}"
    );
    drop(first);
    assert_eq!(next(&mut s).seq(), 2);
}

#[test]
fn every_slot_comes_back_when_subscribers_go_holding_samples() {
    let dir = Dir::new();
    let options = TopicOptions {
        depth: 8,
        max_held: 4,
        ..TopicOptions::default()
    };
    let p = bind(&dir.address("shm"), "feed", options);
    let all = p.slots();
    let mut subs: Vec<Subscriber> = (0..3).map(|_| subscribe(&p, "feed")).collect();
    assert!(p.wait_subscribers(3, 5 * SEC));
    for n in 0..20u64 {
        p.publish(&sample(n, 8)).expect("publish");
    }
    let held: Vec<Sample> = subs.iter_mut().flat_map(|s| [next(s), next(s)]).collect();
    assert!(p.free_slots() < all);
    drop(subs); // holding 2 each, 6 queued each
    eventually("the publisher sees the subscribers go", || {
        p.stats().subscribers == 0
    });
    assert_eq!(p.free_slots(), all, "every reference released");
    // What was received stays readable: the mapping lives with the sample
    // (the queue of 8 kept the last 8 of 20: 12 onwards).
    assert_eq!(held[0].seq(), 12);
    assert_eq!(&held[0][..], &sample(12, 8)[..]);
    assert_eq!(p.stats().detached, 3);
}

#[test]
fn a_subscriber_of_another_topic_is_refused_with_both_names() {
    let dir = Dir::new();
    let p = bind(&dir.address("shm"), "prices", TopicOptions::default());
    let e = Subscriber::connect(
        &p.address().to_string(),
        "orders",
        SubscriberOptions::default(),
    )
    .expect_err("another topic");
    let text = e.to_string();
    assert!(matches!(e, Error::Refused(_)), "{text}");
    assert!(
        text.contains("serves topic 'prices', not 'orders'"),
        "{text}"
    );
    eventually("the refusal counted", || p.stats().refused == 1);
    assert_eq!(p.stats().subscribers, 0);
}

#[test]
fn a_full_topic_refuses_with_its_bound() {
    let dir = Dir::new();
    let options = TopicOptions {
        max_subscribers: 1,
        ..TopicOptions::default()
    };
    let p = bind(&dir.address("unix"), "feed", options);
    let _one = subscribe(&p, "feed");
    assert!(p.wait_subscribers(1, 5 * SEC));
    let e = Subscriber::connect(
        &p.address().to_string(),
        "feed",
        SubscriberOptions::default(),
    )
    .expect_err("a second");
    assert!(
        e.to_string()
            .contains("has its 1 subscribers (max_subscribers)"),
        "{e}"
    );
}

#[test]
fn a_closed_publisher_is_seen_after_what_was_queued() {
    for t in ["shm", "tcp"] {
        let dir = Dir::new();
        let p = bind(&dir.address(t), "feed", TopicOptions::default());
        let mut s = subscribe(&p, "feed");
        assert!(p.wait_subscribers(1, 5 * SEC));
        for n in 0..5u64 {
            p.publish(&sample(n, 8)).expect("publish");
        }
        drop(p);
        for n in 0..5u64 {
            assert_eq!(next(&mut s).seq(), n, "{t}");
        }
        let e = s.receive(5 * SEC).expect_err("closed");
        assert!(
            matches!(&e, Error::Detached(why) if why.contains("topic 'feed'") && why.contains("closed")),
            "{t}: {e}"
        );
    }
}

#[test]
fn bad_options_and_oversized_samples_are_refused_before_anything_runs() {
    let dir = Dir::new();
    let a = dir.address("shm");
    let cases = [
        (
            TopicOptions {
                depth: 0,
                ..TopicOptions::default()
            },
            "depth 0",
        ),
        (
            TopicOptions {
                history: 9,
                depth: 8,
                ..TopicOptions::default()
            },
            "history 9 is deeper",
        ),
        (
            TopicOptions {
                sample_size: 0,
                ..TopicOptions::default()
            },
            "sample_size 0",
        ),
        (
            TopicOptions {
                sample_size: 1 << 30,
                max_subscribers: 1000,
                ..TopicOptions::default()
            },
            "is larger than",
        ),
    ];
    for (o, want) in cases {
        let e = Publisher::bind(&a, "feed", o).expect_err(want);
        assert!(e.to_string().contains(want), "{e}");
    }
    let e = Publisher::bind(&a, "", TopicOptions::default()).expect_err("empty topic");
    assert!(e.to_string().contains("1 to 255 bytes"), "{e}");
    let p = bind(
        &a,
        "feed",
        TopicOptions {
            sample_size: 16,
            ..TopicOptions::default()
        },
    );
    let e = p.publish(&[0u8; 17]).expect_err("too large");
    assert!(
        e.to_string()
            .contains("17 bytes is larger than its sample_size of 16"),
        "{e}"
    );
}

#[test]
fn an_address_that_offers_no_topic_is_named_in_the_error() {
    let dir = Dir::new();
    let a = dir.address("unix");
    // A listener that accepts and says nothing: not a publisher.
    let listener = shmlink::Listener::bind(&a, shmlink::ServerOptions::default()).expect("bind");
    let holding = thread::spawn(move || listener.accept(5 * SEC).expect("accept"));
    let options = SubscriberOptions {
        attach_timeout: Duration::from_millis(200),
        ..SubscriberOptions::default()
    };
    let e = Subscriber::connect(&a, "feed", options).expect_err("not a publisher");
    assert!(
        e.to_string().contains("offered no topic within 200ms"),
        "{e}"
    );
    drop(holding.join().expect("listener"));
}
