//! Unit tests: round trips, wrap-around, fullness and the doorbell words.
//! Corruption cases are in `corruption.rs`, real threads in `threads.rs`.

use std::cell::RefCell;

use crate::layout::decode_record_header;
use crate::sync::Ordering;
use crate::*;

mod corruption;
mod samples;
mod threads;

/// Iterations of a randomized or threaded test: the same cases, fewer of
/// them under Miri, which interprets every instruction (`ci/miri.sh`).
pub(crate) const fn iters(n: u32) -> u32 {
    if cfg!(miri) {
        n / 500
    } else {
        n
    }
}

/// Plain memory for single-threaded tests. Slice indexing panics out of
/// bounds, so a ring that ever reached outside the area fails the test.
#[derive(Debug)]
struct VecMem(RefCell<Vec<u8>>);

impl VecMem {
    fn new(n: usize) -> Self {
        VecMem(RefCell::new(vec![0; n]))
    }

    /// The record header stored at `off`: (len, tag).
    fn header_at(&self, off: usize) -> (u32, u32) {
        let mut b = [0u8; RECORD_HEADER];
        b.copy_from_slice(&self.0.borrow()[off..off + RECORD_HEADER]);
        decode_record_header(&b)
    }

    /// Overwrites bytes at `off` (a hostile peer).
    fn poke(&self, off: usize, bytes: &[u8]) {
        self.0.borrow_mut()[off..off + bytes.len()].copy_from_slice(bytes);
    }
}

impl Memory for &VecMem {
    fn len(&self) -> usize {
        self.0.borrow().len()
    }
    fn write(&self, off: usize, src: &[u8]) {
        self.0.borrow_mut()[off..off + src.len()].copy_from_slice(src);
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.0.borrow()[off..off + dst.len()]);
    }
}

fn pop_vec<M: Memory>(c: &mut Consumer<&RingHeader, M>) -> Result<Option<Vec<u8>>, RingError> {
    Ok(
        match c.try_pop(|r| {
            let mut v = Vec::new();
            r.read_to_vec(&mut v);
            v
        })? {
            Pop::Empty => None,
            Pop::Done { value, .. } => Some(value),
        },
    )
}

fn pushed<M: Memory>(p: &mut Producer<&RingHeader, M>, parts: &[&[u8]]) -> bool {
    matches!(p.try_push(parts).expect("push"), Push::Done { .. })
}

/// Tiny xorshift64 PRNG: deterministic, no dependency.
struct Xorshift(u64);
impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn round_trip_with_gather_and_wrap() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(256);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    assert_eq!(p.max_record(), 120);
    assert_eq!(p.capacity(), 256);
    for i in 0..100u8 {
        let a = vec![i; (i as usize * 7) % 50];
        let b = vec![i.wrapping_add(1); (i as usize * 3) % 60];
        assert_eq!(
            p.try_push(&[&a, &b]).expect("push"),
            Push::Done { wake: false }
        );
        assert!(c.has_data().expect("has_data"));
        let got = pop_vec(&mut c).expect("pop").expect("record");
        assert_eq!(got, [a, b].concat());
    }
    assert_eq!(pop_vec(&mut c).expect("pop"), None);
    assert!(!c.has_data().expect("has_data"));
}

#[test]
fn the_producer_knows_when_all_it_wrote_was_consumed() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(256);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    assert!(p.all_consumed(), "an empty ring");
    assert!(pushed(&mut p, &[b"one"]));
    assert!(pushed(&mut p, &[b"two"]));
    assert!(!p.all_consumed());
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(b"one".to_vec()));
    assert!(!p.all_consumed(), "one record still unread");
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(b"two".to_vec()));
    assert!(p.all_consumed());
}

#[test]
fn empty_parts_and_empty_payloads() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    assert!(pushed(&mut p, &[]));
    assert!(pushed(&mut p, &[b"", b"ab", b""]));
    let Pop::Done { value, .. } = c.try_pop(|r| (r.len(), r.is_empty())).expect("pop") else {
        panic!("record expected")
    };
    assert_eq!(value, (0, true));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(b"ab".to_vec()));
    // An empty record takes 8 bytes of ring.
    assert_eq!(hdr.tail.load(Ordering::Relaxed), 8 + 16);
}

#[test]
fn record_reads_are_bounds_checked() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    assert!(pushed(&mut p, &[b"0123456789"]));
    let Pop::Done { value, .. } = c
        .try_pop(|r| {
            let mut two = [0u8; 2];
            r.read(8, &mut two).expect("in bounds");
            assert_eq!(&two, b"89");
            assert_eq!(
                r.read(9, &mut two),
                Err(RingError::OutOfRange {
                    off: 9,
                    len: 2,
                    record: 10
                }),
                "one byte past the end"
            );
            assert!(r.read(usize::MAX, &mut two).is_err(), "overflowing offset");
            assert!(r.read(11, &mut []).is_err(), "offset past the end");
            assert!(r.read(10, &mut []).is_ok(), "empty read at the end");
            let mut tail = b"-".to_vec();
            r.append_from(7, &mut tail).expect("in bounds");
            assert_eq!(tail, b"-789");
            assert!(
                r.append_from(10, &mut tail).is_ok(),
                "empty append at the end"
            );
            assert_eq!(
                r.append_from(11, &mut tail),
                Err(RingError::OutOfRange {
                    off: 11,
                    len: 0,
                    record: 10
                }),
                "offset past the end"
            );
            assert_eq!(tail, b"-789", "a refused append copies nothing");
            let mut v = b"x".to_vec();
            r.read_to_vec(&mut v);
            v
        })
        .expect("pop")
    else {
        panic!("record expected")
    };
    assert_eq!(value, b"x0123456789");
}

#[test]
fn full_ring_reports_full_and_records_fill_exactly() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    // Two records of 24 payload bytes = 2 * 32 = the whole ring.
    assert!(pushed(&mut p, &[&[1u8; 24]]));
    assert!(pushed(&mut p, &[&[2u8; 24]]));
    assert!(!p.has_space(0).expect("has_space"));
    assert_eq!(p.try_push(&[&[3u8; 1]]).expect("full"), Push::Full);
    assert_eq!(p.try_push(&[]).expect("full"), Push::Full);
    assert_eq!(hdr.tail.load(Ordering::Relaxed), 64, "Full wrote nothing");
    assert_eq!(
        p.try_push(&[&[0u8; 25]]),
        Err(RingError::TooLarge { len: 25, max: 24 })
    );
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![1u8; 24]));
    // A pad is needed now: 16 bytes free at the end is not enough for 24+8.
    assert!(pushed(&mut p, &[&[3u8; 8]]));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![2u8; 24]));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![3u8; 8]));
    assert!(pushed(&mut p, &[&[4u8; 16]]));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![4u8; 16]));
    assert_eq!(pop_vec(&mut c).expect("pop"), None);
}

#[test]
fn many_small_records_fill_the_ring_exactly() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(128);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    for round in 0..5u8 {
        // 16 bytes a record: eight fill 128 exactly, wherever the ring starts.
        for i in 0..8u8 {
            assert!(pushed(&mut p, &[&[round, i]]), "round {round} record {i}");
        }
        assert_eq!(p.try_push(&[b""]).expect("push"), Push::Full);
        for i in 0..8u8 {
            assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![round, i]));
        }
        assert_eq!(pop_vec(&mut c).expect("pop"), None);
    }
}

#[test]
fn wrap_writes_a_pad_exactly_to_the_end() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(128);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    for _ in 0..3 {
        assert!(pushed(&mut p, &[&[7u8; 24]]));
        pop_vec(&mut c).expect("pop").expect("record");
    }
    // Tail at 96: a record of 8 + 40 does not fit the 32 bytes left.
    assert!(pushed(&mut p, &[&[9u8; 40]]));
    assert_eq!(mem.header_at(96), (24, TAG_PAD), "pad fills 96..128");
    assert_eq!(mem.header_at(0), (40, TAG_DATA), "record at the start");
    assert_eq!(hdr.tail.load(Ordering::Relaxed), 96 + 32 + 48);
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![9u8; 40]));
    assert_eq!(hdr.head.load(Ordering::Relaxed), 176, "pad consumed too");

    // A record ending exactly at the buffer's end needs no pad.
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    assert!(pushed(&mut p, &[&[1u8; 8]]));
    assert!(pushed(&mut p, &[&[2u8; 8]]));
    assert!(pushed(&mut p, &[&[3u8; 24]]), "16 + 16 + 32 = 64");
    assert_eq!(mem.header_at(32), (24, TAG_DATA));
    pop_vec(&mut c).expect("pop");
    assert!(pushed(&mut p, &[&[4u8; 8]]));
    assert_eq!(mem.header_at(0), (8, TAG_DATA), "next record at 0, no pad");
    assert_eq!(hdr.tail.load(Ordering::Relaxed), 80);
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![2u8; 8]));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![3u8; 24]));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![4u8; 8]));
}

#[test]
fn a_max_record_always_fits_after_a_drain() {
    for cap in [64usize, 128, 1024] {
        for start in (0..cap).step_by(8) {
            let hdr = RingHeader::new();
            hdr.head.store(start as u64, Ordering::Relaxed);
            hdr.tail.store(start as u64, Ordering::Relaxed);
            let mem = VecMem::new(cap);
            let mut p = Producer::new(&hdr, &mem).expect("producer");
            let mut c = Consumer::new(&hdr, &mem).expect("consumer");
            let max = vec![5u8; p.max_record()];
            assert!(pushed(&mut p, &[&max]), "cap {cap} start {start}");
            assert_eq!(pop_vec(&mut c).expect("pop"), Some(max));
        }
    }
}

#[test]
fn bad_capacities_are_refused() {
    let hdr = RingHeader::new();
    for cap in [0usize, 8, 32, 63, 65, 96, 1000] {
        let mem = VecMem::new(cap);
        let e = Producer::new(&hdr, &mem).expect_err("bad capacity");
        assert!(matches!(e, RingError::BadCapacity { capacity, .. } if capacity == cap));
        assert!(Consumer::new(&hdr, &mem).is_err());
        assert!(e.to_string().contains("power of two"), "{e}");
    }
}

#[test]
fn randomized_sizes_across_many_wraps() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(1024);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut expect = std::collections::VecDeque::new();
    let mut popped = 0u32;
    for i in 0..iters(50_000) {
        if !rng.next().is_multiple_of(3) {
            let len = (rng.next() % (p.max_record() as u64 + 1)) as usize;
            let data: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
            let split = (rng.next() as usize) % (len + 1);
            if pushed(&mut p, &[&data[..split], &data[split..]]) {
                expect.push_back(data);
            }
        } else if let Some(v) = pop_vec(&mut c).expect("pop") {
            assert_eq!(Some(v), expect.pop_front());
            popped += 1;
        }
    }
    while let Some(v) = pop_vec(&mut c).expect("pop") {
        assert_eq!(Some(v), expect.pop_front());
        popped += 1;
    }
    assert!(expect.is_empty());
    assert!(
        hdr.tail.load(Ordering::Relaxed) > u64::from(iters(50_000)) * 2,
        "many wraps"
    );
    assert!(popped > iters(50_000) / 5);
}

#[test]
fn bells_announce_sleep_and_owe_one_wake_per_sleep() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    let seen = c.prepare_sleep().expect("sleep").expect("empty: sleep");
    assert_ne!(hdr.data_sleep.load(Ordering::Relaxed), AWAKE, "announced");
    assert_eq!(
        p.try_push(&[b"x"]).expect("push"),
        Push::Done { wake: true }
    );
    assert_ne!(
        hdr.data_bell.load(Ordering::Relaxed),
        seen,
        "the wake-up changed the bell"
    );
    assert_eq!(
        p.try_push(&[b"y"]).expect("push"),
        Push::Done { wake: false },
        "one wake per sleep"
    );
    c.finish_sleep();
    assert_eq!(hdr.data_sleep.load(Ordering::Relaxed), AWAKE);
    assert_eq!(
        c.prepare_sleep().expect("sleep"),
        None,
        "data present: no sleep"
    );
    c.finish_sleep();
}

#[test]
fn a_consumer_taking_over_goes_on_after_its_predecessors_epochs() {
    // The first consumer sleeps once (epoch 1) and is woken: the producer
    // remembers epoch 1 as woken.
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut first = Consumer::new(&hdr, &mem).expect("consumer");
    first.prepare_sleep().expect("sleep").expect("empty: sleep");
    assert_eq!(
        p.try_push(&[b"x"]).expect("push"),
        Push::Done { wake: true }
    );
    first.finish_sleep();
    assert_eq!(pop_vec(&mut first).expect("pop"), Some(b"x".to_vec()));
    let last = first.sleep_epoch();
    // A successor starting again from epoch 1 would never be woken.
    let mut naive = Consumer::new(&hdr, &mem).expect("consumer");
    naive.prepare_sleep().expect("sleep").expect("empty: sleep");
    assert_eq!(
        p.try_push(&[b"y"]).expect("push"),
        Push::Done { wake: false },
        "the lost wake-up continue_epochs prevents"
    );
    naive.finish_sleep();
    assert_eq!(pop_vec(&mut naive).expect("pop"), Some(b"y".to_vec()));
    // One that goes on after the last epoch is.
    let mut next = Consumer::new(&hdr, &mem).expect("consumer");
    next.continue_epochs(last);
    next.prepare_sleep().expect("sleep").expect("empty: sleep");
    assert_eq!(
        p.try_push(&[b"z"]).expect("push"),
        Push::Done { wake: true }
    );
    next.finish_sleep();
}

#[test]
fn producer_sleep_is_owed_one_wake() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    for _ in 0..4 {
        assert!(pushed(&mut p, &[&[0u8; 8]]));
    }
    assert!(p.prepare_sleep(0).expect("sleep").is_some(), "full: sleep");
    p.finish_sleep();
    let seen = p.prepare_sleep(24).expect("sleep").expect("full: sleep");
    let pop_wake = |c: &mut Consumer<&RingHeader, &VecMem>| match c.try_pop(|_| ()).expect("pop") {
        Pop::Done { wake, .. } => wake,
        Pop::Empty => panic!("record expected"),
    };
    assert!(pop_wake(&mut c), "producer announced sleep");
    assert_ne!(hdr.space_bell.load(Ordering::Relaxed), seen);
    assert!(!pop_wake(&mut c), "one wake per sleep");
    p.finish_sleep();
    assert_eq!(hdr.space_sleep.load(Ordering::Relaxed), AWAKE);
    // 32 bytes free at position 0..32 (head 32, tail 64): room for 24.
    assert_eq!(p.prepare_sleep(24).expect("sleep"), None, "room: no sleep");
    p.finish_sleep();
    // 40 would need 48 bytes: sleep again, and the next pop owes a wake.
    assert!(p.prepare_sleep(40).expect("sleep").is_some());
    assert!(pop_wake(&mut c), "a new sleep is owed a new wake");
    p.finish_sleep();
}
