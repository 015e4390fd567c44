//! Model checks of publish/subscribe's shared state (`shmlink_ring::samples`)
//! with loom: a publisher and one subscriber on a queue of depth 1 or 2.
//!
//! Run (`ci/loom.sh` does):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p shmlink-ring --release --test loom_samples -- --test-threads=2
//! ```
//!
//! Every interleaving up to 3 preemptions:
//! - drop the oldest: each sample is taken by the subscriber or dropped by
//!   the publisher, never both, never neither; what is taken is in order
//!   and read whole (the slot matches the sequence number: no entry read
//!   torn or stale); every reference comes back exactly once;
//! - the subscriber sleeping on its bell never misses a sample (a lost
//!   wake-up is a deadlock, which loom reports);
//! - back-pressure: the publisher sleeping for room is woken by a take;
//! - a canary: a subscriber that moves `head` with a plain store instead
//!   of a compare-exchange must be caught taking a sample the publisher
//!   dropped.
#![cfg(loom)]

mod loom_futex;
use loom_futex::Futex;

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

use shmlink_ring::samples::{Entry, QueueConsumer, QueueHeader, QueueProducer, Queued};

struct Shared {
    hdr: QueueHeader,
    entries: Vec<Entry>,
    returns: Vec<AtomicU32>,
    data: Futex,
    space: Futex,
    done: AtomicBool,
}

const SLOTS: u32 = 4;
const MAX_HELD: u32 = 1;

fn shared(depth: usize) -> Arc<Shared> {
    Arc::new(Shared {
        hdr: QueueHeader::new(),
        entries: (0..depth).map(|_| Entry::default()).collect(),
        returns: (0..depth + MAX_HELD as usize)
            .map(|_| AtomicU32::new(0))
            .collect(),
        data: Futex::default(),
        space: Futex::default(),
        done: AtomicBool::new(false),
    })
}

fn slot_of(seq: u64) -> u32 {
    (seq % u64::from(SLOTS)) as u32
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

type Producer<'a> = QueueProducer<&'a QueueHeader, &'a [Entry], &'a [AtomicU32]>;
type Consumer<'a> = QueueConsumer<&'a QueueHeader, &'a [Entry], &'a [AtomicU32]>;

fn producer(sh: &Shared) -> Producer<'_> {
    QueueProducer::new(&sh.hdr, &sh.entries[..], &sh.returns[..], SLOTS, MAX_HELD)
        .expect("producer")
}

fn consumer(sh: &Shared) -> Consumer<'_> {
    QueueConsumer::new(&sh.hdr, &sh.entries[..], &sh.returns[..]).expect("consumer")
}

/// The subscriber: takes until the publisher is done and nothing is
/// left, giving each slot back at once; sleeps on its bell when `sleep`,
/// else yields. `broken`: moves `head` with a plain store (the canary).
fn subscribe(sh: &Shared, sleep: bool, broken: bool) -> Vec<u64> {
    let mut c = consumer(sh);
    let mut got = Vec::new();
    // Slots to give back; kept while the returns are full (the publisher
    // collects them when it next queues).
    let mut pending: Vec<u32> = Vec::new();
    loop {
        while let Some(&slot) = pending.first() {
            if !c.give_back(slot).expect("give back") {
                break;
            }
            pending.remove(0);
        }
        let taken = if broken {
            let head = sh.hdr.head.load(Ordering::Acquire);
            let tail = sh.hdr.tail.load(Ordering::Acquire);
            if head >= tail {
                None
            } else {
                let e = &sh.entries[(head % sh.entries.len() as u64) as usize];
                let seq = e.seq.load(Ordering::Relaxed);
                sh.hdr.head.store(head + 1, Ordering::Release); // BUG on purpose
                Some((seq, slot_of(seq)))
            }
        } else {
            c.try_take().expect("take").map(|t| {
                if t.wake {
                    sh.space.wake();
                }
                (t.seq, t.slot)
            })
        };
        match taken {
            Some((seq, slot)) => {
                assert_eq!(slot, slot_of(seq), "entry of seq {seq} read torn or stale");
                if let Some(&last) = got.last() {
                    assert!(seq > last, "seq {seq} after {last}");
                }
                got.push(seq);
                if !broken {
                    pending.push(slot);
                }
            }
            None if sh.done.load(Ordering::Acquire) && !c.has_data() && pending.is_empty() => {
                return got
            }
            None if sleep => {
                if let Some(seen) = c.prepare_sleep() {
                    // Done is set before the last wake: see `publish`.
                    if !sh.done.load(Ordering::Acquire) {
                        sh.data.wait(&sh.hdr.data_bell, seen);
                    }
                }
                c.finish_sleep();
            }
            None => thread::yield_now(),
        }
    }
}

/// The publisher: queues `n` samples (seq 1..=n), dropping the oldest when
/// full or, with `wait`, sleeping for room. Returns the slots it dropped
/// and those the subscriber gave back.
fn publish(sh: &Shared, n: u64, wait: bool) -> (Vec<u32>, Vec<u32>) {
    let mut p = producer(sh);
    let mut dropped_slots = Vec::new();
    let mut released = Vec::new();
    for seq in 1..=n {
        loop {
            p.collect(&mut |s| released.push(s)).expect("collect");
            match p.try_queue(seq, slot_of(seq), 8).expect("queue") {
                Queued::Done { wake } => {
                    if wake {
                        sh.data.wake();
                    }
                    break;
                }
                Queued::Full if wait => {
                    if let Some(seen) = p.prepare_sleep().expect("prepare") {
                        sh.space.wait(&sh.hdr.space_bell, seen);
                    }
                    p.finish_sleep();
                }
                Queued::Full => {
                    if let Some(slot) = p.drop_oldest().expect("drop") {
                        dropped_slots.push(slot);
                    }
                }
            }
        }
    }
    // Done, and the bell rung so that a subscriber about to sleep does not.
    sh.done.store(true, Ordering::Release);
    sh.hdr.data_bell.fetch_add(1, Ordering::AcqRel);
    sh.data.wake();
    // The subscriber gives back what it took; wait for all of it.
    loop {
        p.collect(&mut |s| released.push(s)).expect("collect");
        if p.is_empty() && p.holding() == 0 {
            break;
        }
        thread::yield_now();
    }
    (dropped_slots, released)
}

fn check(sh: Arc<Shared>, n: u64, depth_wait: bool, sleep: bool) {
    let sub = {
        let sh = Arc::clone(&sh);
        thread::spawn(move || subscribe(&sh, sleep, false))
    };
    let (dropped, released) = publish(&sh, n, depth_wait);
    let got = sub.join().expect("subscriber");
    // Each seq taken or dropped, never both, never neither.
    assert_eq!(
        got.len() + dropped.len(),
        n as usize,
        "taken {got:?}, dropped slots {dropped:?}"
    );
    if depth_wait {
        assert_eq!(
            got,
            (1..=n).collect::<Vec<_>>(),
            "back-pressure loses nothing"
        );
    }
    // Every taken reference came back exactly once.
    let mut want: Vec<u32> = got.iter().map(|&s| slot_of(s)).collect();
    let mut back = released;
    want.sort_unstable();
    back.sort_unstable();
    assert_eq!(want, back);
}

#[test]
fn drop_oldest_takes_or_drops_each_sample_once() {
    model(|| check(shared(1), 3, false, false));
}

#[test]
fn drop_oldest_depth_two() {
    model(|| check(shared(2), 3, false, false));
}

#[test]
fn sleeping_subscriber_misses_no_wake_up() {
    model(|| check(shared(2), 2, false, true));
}

#[test]
fn back_pressure_wakes_the_publisher() {
    model(|| check(shared(1), 2, true, true));
}

#[test]
#[should_panic]
fn canary_plain_store_of_head_is_caught() {
    model(|| {
        let sh = shared(1);
        let sub = {
            let sh = Arc::clone(&sh);
            thread::spawn(move || subscribe(&sh, false, true))
        };
        let (dropped, _) = publish_no_wait_for_returns(&sh, 3);
        let got = sub.join().expect("subscriber");
        assert_eq!(got.len() + dropped, 3, "a sample both taken and dropped");
    });
}

/// The canary's publisher: drops the oldest, does not wait for returns
/// (the broken subscriber returns nothing).
fn publish_no_wait_for_returns(sh: &Shared, n: u64) -> (usize, ()) {
    let mut p = producer(sh);
    let mut dropped = 0;
    for seq in 1..=n {
        loop {
            match p.try_queue(seq, slot_of(seq), 8) {
                Ok(Queued::Done { .. }) => break,
                Ok(Queued::Full) => {
                    if let Ok(Some(_)) = p.drop_oldest() {
                        dropped += 1;
                    }
                }
                Err(_) => return (dropped, ()),
            }
        }
    }
    sh.done.store(true, Ordering::Release);
    (dropped, ())
}
