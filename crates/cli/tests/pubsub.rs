//! Publish/subscribe across processes: `shmlink pub` to `shmlink sub`
//! processes over shm: and unix: (every sample in order and intact), and a
//! publisher whose subscribers are SIGKILLed at random points while it
//! publishes at full rate: it never waits, live subscribers see their
//! samples in order or count what they missed, and everything the dead
//! held comes back (pool slots, queue segments, descriptors).

mod support;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use shmlink_pubsub::{Overflow, Publisher, TopicOptions};

use support::{TempDir, BIN};

const DEADLINE: Duration = Duration::from_secs(20);

fn sub(address: &str, extra: &[&str]) -> Child {
    Command::new(BIN)
        .args(["sub", address, "--topic", "feed", "--json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shmlink sub")
}

fn summary(out: Output, what: &str) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what}: {}\nstdout: {text}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{what}: {e}: {text}"))
}

/// Waits until `cond`, up to the deadline.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within {DEADLINE:?}");
        std::thread::yield_now();
    }
}

#[test]
fn pub_to_three_sub_processes_every_sample_in_order_and_intact() {
    for t in ["shm", "unix"] {
        let dir = TempDir::new("pubsub-cli");
        let address = format!("{t}:{}", dir.path().join("feed.sock").display());
        let publisher = Command::new(BIN)
            .args([
                "pub", &address, "--topic", "feed", "--size", "1000", "--count", "20000",
            ])
            .args(["--wait-subscribers", "3", "--block", "10", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shmlink pub");
        let socket = dir.path().join("feed.sock");
        eventually("the publisher's socket", || socket.exists());
        let subs: Vec<Child> = (0..3).map(|_| sub(&address, &[])).collect();
        let p = summary(publisher.wait_with_output().expect("pub"), "pub");
        assert_eq!(
            (p["published"].as_u64(), p["dropped"].as_u64()),
            (Some(20000), Some(0)),
            "{t}: {p}"
        );
        for (i, s) in subs.into_iter().enumerate() {
            let s = summary(s.wait_with_output().expect("sub"), "sub");
            assert_eq!(s["received"].as_u64(), Some(20000), "{t} sub {i}: {s}");
            assert_eq!(
                (s["missed"].as_u64(), s["corrupt"].as_u64()),
                (Some(0), Some(0)),
                "{t}: {s}"
            );
            assert_eq!(s["shared_memory"].as_bool(), Some(t == "shm"), "{t}: {s}");
            assert!(
                s["ended"].as_str().is_some_and(|e| e.contains("closed")),
                "{t}: {s}"
            );
        }
    }
}

#[test]
fn a_sub_of_another_topic_fails_with_both_names() {
    let dir = TempDir::new("pubsub-cli-topic");
    let address = format!("shm:{}", dir.path().join("feed.sock").display());
    // A publisher process: this test process maps no queue segment (the
    // kill test counts them).
    let mut publisher = Command::new(BIN)
        .args([
            "pub",
            &address,
            "--topic",
            "prices",
            "--count",
            "0",
            "--wait-subscribers",
            "1",
        ])
        .args(["--wait-timeout", "20"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shmlink pub");
    let socket = dir.path().join("feed.sock");
    eventually("the publisher's socket", || socket.exists());
    let out = Command::new(BIN)
        .args(["sub", &address, "--topic", "orders"])
        .output()
        .expect("sub");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("serves topic 'prices', not 'orders'"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    publisher.kill().expect("kill pub");
    publisher.wait().expect("reap pub");
}

/// Queue segments the publisher still maps.
fn queue_maps() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .expect("maps")
        .lines()
        .filter(|l| l.contains("shmlink-pubsub-queue"))
        .count()
}

#[test]
fn subscribers_killed_at_random_points_cost_the_publisher_nothing() {
    let dir = TempDir::new("pubsub-kill");
    let address = format!("shm:{}", dir.path().join("feed.sock").display());
    let options = TopicOptions {
        sample_size: 4096,
        depth: 16,
        history: 4,
        max_subscribers: 32,
        overflow: Overflow::DropOldest,
        ..TopicOptions::default()
    };
    let publisher = Publisher::bind(&address, "feed", options).expect("bind");
    // Two subscribers live through it all; one of them slow.
    let live = [sub(&address, &[]), sub(&address, &["--hold-us", "50"])];
    assert!(publisher.wait_subscribers(2, DEADLINE));
    let mut victims: Vec<Child> = Vec::new();
    let mut killed = 0;
    let mut slowest = Duration::ZERO;
    let start = Instant::now();
    let mut next_kill = start;
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(4) {
        let t = Instant::now();
        publisher
            .publish_with(64 + (n as usize % 4000), |b| {
                let head = n.to_le_bytes();
                for (i, x) in b.iter_mut().enumerate() {
                    *x = if i < 8 {
                        head[i]
                    } else {
                        (n as u8).wrapping_add(i as u8)
                    };
                }
            })
            .expect("publish");
        slowest = slowest.max(t.elapsed());
        n += 1;
        if Instant::now() >= next_kill {
            // Kill the oldest victim at a random point of its life (in the
            // middle of attaching, of a take, of a give-back), start another.
            if victims.len() >= 3 {
                let mut v = victims.remove(fastrand::usize(..victims.len()));
                v.kill().expect("SIGKILL");
                v.wait().expect("reap");
                killed += 1;
            }
            let hold = fastrand::u64(0..200).to_string();
            victims.push(sub(&address, &["--hold-us", &hold]));
            next_kill = Instant::now() + Duration::from_micros(fastrand::u64(1_000..30_000));
        }
    }
    for mut v in victims.drain(..) {
        v.kill().expect("SIGKILL");
        v.wait().expect("reap");
        killed += 1;
    }
    assert!(killed >= 20, "only {killed} subscribers killed");
    // The publisher never waited (drop the oldest): a generous deadline,
    // not a figure.
    assert!(
        slowest < Duration::from_secs(1),
        "a publish took {slowest:?}"
    );
    // The dead are found (liveness, at the next publishes or the
    // accepting thread's sweep) and what they held released.
    eventually("the killed subscribers detached", || {
        publisher.publish(&n.to_le_bytes()).expect("publish");
        n += 1;
        publisher.stats().subscribers == 2
    });
    let last = n - 1;
    drop(publisher);
    for (i, s) in live.into_iter().enumerate() {
        let s = summary(s.wait_with_output().expect("sub"), "live sub");
        assert_eq!(s["corrupt"].as_u64(), Some(0), "live {i}: {s}");
        assert_eq!(
            s["last_seq"].as_u64(),
            Some(last),
            "live {i} saw the last sample: {s}"
        );
        let (first, received, missed) = (
            s["first_seq"].as_u64().expect("first"),
            s["received"].as_u64().expect("received"),
            s["missed"].as_u64().expect("missed"),
        );
        assert_eq!(
            first + received + missed,
            last + 1,
            "live {i}: every sample received or counted missed: {s}"
        );
    }
    assert_eq!(
        queue_maps(),
        0,
        "queue segments left mapped after the publisher closed"
    );
    every_slot_and_queue_comes_back_after_sigkill_of_every_subscriber();
}

/// Part of the test above (both count this process's queue mappings).
fn every_slot_and_queue_comes_back_after_sigkill_of_every_subscriber() {
    let dir = TempDir::new("pubsub-kill-all");
    let address = format!("shm:{}", dir.path().join("feed.sock").display());
    let options = TopicOptions {
        depth: 8,
        history: 2,
        ..TopicOptions::default()
    };
    let publisher = Publisher::bind(&address, "feed", options).expect("bind");
    let all = publisher.slots();
    // Slow subscribers: each holds what it took while it is killed.
    let mut subs: Vec<Child> = (0..4)
        .map(|_| sub(&address, &["--hold-us", "100000"]))
        .collect();
    assert!(publisher.wait_subscribers(4, DEADLINE));
    for n in 0..200u64 {
        publisher.publish(&n.to_le_bytes()).expect("publish");
    }
    assert!(publisher.free_slots() < all - 2);
    for s in &mut subs {
        s.kill().expect("SIGKILL");
        s.wait().expect("reap");
    }
    eventually("the killed subscribers detached", || {
        publisher.stats().subscribers == 0
    });
    assert_eq!(
        publisher.free_slots(),
        all - 2,
        "all but the history's 2 slots free"
    );
    assert_eq!(publisher.stats().detached, 4);
    assert_eq!(
        queue_maps(),
        0,
        "queue segments of dead subscribers left mapped"
    );
}
