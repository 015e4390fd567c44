//! Publish/subscribe's queue: round trips, dropping the oldest, returns,
//! a subscriber's death, and what a hostile side writes.

use crate::samples::{Entry, QueueConsumer, QueueHeader, QueueProducer, Queued};
use crate::sync::{AtomicU32, Ordering};
use crate::RingError;

struct Shared {
    hdr: QueueHeader,
    entries: Vec<Entry>,
    returns: Vec<AtomicU32>,
}

fn shared(depth: usize, returns: usize) -> Shared {
    Shared {
        hdr: QueueHeader::new(),
        entries: (0..depth).map(|_| Entry::default()).collect(),
        returns: (0..returns).map(|_| AtomicU32::new(0)).collect(),
    }
}

type P<'a> = QueueProducer<&'a QueueHeader, &'a [Entry], &'a [AtomicU32]>;
type C<'a> = QueueConsumer<&'a QueueHeader, &'a [Entry], &'a [AtomicU32]>;

fn ends(sh: &Shared, slots: u32, max_held: u32) -> (P<'_>, C<'_>) {
    let p = QueueProducer::new(&sh.hdr, &sh.entries[..], &sh.returns[..], slots, max_held)
        .expect("producer");
    let c = QueueConsumer::new(&sh.hdr, &sh.entries[..], &sh.returns[..]).expect("consumer");
    (p, c)
}

fn corrupt_what(e: RingError) -> &'static str {
    match e {
        RingError::Corrupt { what, .. } => what,
        other => panic!("not a corruption: {other:?}"),
    }
}

#[test]
fn round_trip_in_order_and_references_come_back() {
    let sh = shared(4, 8);
    let (mut p, mut c) = ends(&sh, 8, 2);
    for seq in 1..=3 {
        assert_eq!(
            p.try_queue(seq, seq as u32, 10 + seq as u32)
                .expect("queue"),
            Queued::Done { wake: false }
        );
    }
    let mut released = Vec::new();
    for seq in 1..=3 {
        let t = c.try_take().expect("take").expect("a sample");
        assert_eq!((t.seq, t.slot, t.len), (seq, seq as u32, 10 + seq as u32));
        assert!(c.give_back(t.slot).expect("give back"));
    }
    assert_eq!(c.try_take().expect("take"), None);
    p.collect(&mut |s| released.push(s)).expect("collect");
    assert_eq!(released, vec![1, 2, 3]);
    assert_eq!((p.len(), p.holding()), (0, 0));
}

#[test]
fn full_queue_drops_the_oldest_and_the_subscriber_sees_the_gap() {
    let sh = shared(2, 4);
    let (mut p, mut c) = ends(&sh, 8, 2);
    p.try_queue(1, 1, 8).expect("queue");
    p.try_queue(2, 2, 8).expect("queue");
    assert_eq!(p.try_queue(3, 3, 8).expect("queue"), Queued::Full);
    assert_eq!(p.drop_oldest().expect("drop"), Some(1));
    assert!(matches!(
        p.try_queue(3, 3, 8).expect("queue"),
        Queued::Done { .. }
    ));
    let seqs: Vec<u64> =
        std::iter::from_fn(|| c.try_take().expect("take").map(|t| t.seq)).collect();
    assert_eq!(seqs, vec![2, 3]);
}

#[test]
fn a_dead_subscriber_releases_what_it_had_queued_and_held() {
    let sh = shared(4, 8);
    let (mut p, mut c) = ends(&sh, 8, 2);
    for seq in 1..=3 {
        p.try_queue(seq, seq as u32, 8).expect("queue");
    }
    let t = c.try_take().expect("take").expect("a sample");
    assert_eq!(t.slot, 1);
    let mut released = Vec::new();
    p.collect(&mut |s| released.push(s)).expect("collect");
    assert_eq!(p.holding(), 1);
    p.release_all(&mut |s| released.push(s));
    released.sort_unstable();
    assert_eq!(released, vec![1, 2, 3]);
}

#[test]
fn wakes_a_sleeping_subscriber_once_per_sleep() {
    let sh = shared(4, 8);
    let (mut p, mut c) = ends(&sh, 8, 2);
    assert!(c.prepare_sleep().is_some(), "empty: sleep");
    assert_eq!(
        p.try_queue(1, 1, 8).expect("queue"),
        Queued::Done { wake: true }
    );
    assert_eq!(
        p.try_queue(2, 2, 8).expect("queue"),
        Queued::Done { wake: false }
    );
    c.finish_sleep();
    assert_eq!(sh.hdr.data_bell.load(Ordering::Acquire), 1);
    assert!(c.prepare_sleep().is_none(), "data queued: no sleep");
    c.finish_sleep();
}

#[test]
fn returned_slot_not_held_is_refused() {
    let sh = shared(2, 4);
    let (mut p, mut c) = ends(&sh, 8, 2);
    p.try_queue(1, 5, 8).expect("queue");
    assert!(c.give_back(6).expect("give back"), "a slot never taken");
    let e = p.collect(&mut |_| {}).expect_err("forged return");
    assert_eq!(corrupt_what(e), "returned a slot it does not hold");
}

#[test]
fn returned_slot_out_of_the_pool_is_refused() {
    let sh = shared(2, 4);
    let (mut p, mut c) = ends(&sh, 8, 2);
    assert!(c.give_back(u32::MAX).expect("give back"));
    assert!(p.collect(&mut |_| {}).is_err());
}

#[test]
fn head_moved_back_or_past_the_tail_is_refused() {
    let sh = shared(2, 4);
    let (mut p, mut c) = ends(&sh, 8, 2);
    p.try_queue(1, 1, 8).expect("queue");
    c.try_take().expect("take").expect("a sample");
    p.collect(&mut |_| {}).expect("collect");
    sh.hdr.head.store(0, Ordering::Release);
    assert_eq!(
        corrupt_what(p.collect(&mut |_| {}).expect_err("back")),
        "queue head moved back or past the tail"
    );
    let sh = shared(2, 4);
    let (mut p, _c) = ends(&sh, 8, 2);
    sh.hdr.head.store(7, Ordering::Release);
    assert!(p.try_queue(1, 1, 8).is_ok(), "room without looking");
    assert!(p.collect(&mut |_| {}).is_err(), "past the tail");
}

#[test]
fn returns_counter_past_what_fits_is_refused() {
    let sh = shared(2, 4);
    let (mut p, _c) = ends(&sh, 8, 2);
    sh.hdr.returned.store(1000, Ordering::Release);
    assert_eq!(
        corrupt_what(p.collect(&mut |_| {}).expect_err("returns")),
        "returns counter"
    );
}

#[test]
fn a_subscriber_that_never_returns_is_caught_at_its_bound() {
    let sh = shared(2, 4);
    let (mut p, mut c) = ends(&sh, 16, 1);
    let mut seq = 0;
    let err = loop {
        seq += 1;
        assert!(seq < 100, "never caught");
        if let Err(e) = p.collect(&mut |_| {}) {
            break e;
        }
        p.try_queue(seq, (seq % 16) as u32, 8).expect("queue");
        c.try_take().expect("take");
    };
    assert_eq!(corrupt_what(err), "samples held by the subscriber");
}

#[test]
fn a_publisher_writing_an_impossible_tail_is_refused() {
    let sh = shared(2, 4);
    let (_p, mut c) = ends(&sh, 8, 2);
    sh.hdr.tail.store(50, Ordering::Release);
    assert!(c.try_take().is_err());
    let sh = shared(2, 4);
    let (_p, mut c) = ends(&sh, 8, 2);
    sh.hdr.collected.store(9, Ordering::Release);
    assert_eq!(
        corrupt_what(c.give_back(1).expect_err("collected")),
        "returns collected"
    );
}

#[test]
fn arrays_too_small_are_refused() {
    let sh = shared(4, 4);
    assert!(QueueProducer::new(&sh.hdr, &sh.entries[..], &sh.returns[..], 8, 1).is_err());
    let sh = shared(0, 4);
    assert!(QueueConsumer::new(&sh.hdr, &sh.entries[..], &sh.returns[..]).is_err());
}
