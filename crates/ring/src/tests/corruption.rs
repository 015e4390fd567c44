//! A hostile peer: every impossible value is refused with `Corrupt`, naming
//! what was wrong, without a panic, an out-of-bounds access, or advancing.

use super::{pop_vec, pushed, VecMem, Xorshift};
use crate::sync::Ordering;
use crate::*;

/// Asserts `r` is a `Corrupt` error whose message contains `what`.
#[track_caller]
fn assert_corrupt<T: std::fmt::Debug>(r: Result<T, RingError>, what: &str) {
    match r {
        Err(e @ RingError::Corrupt { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with("ring corrupted by peer: "), "{msg}");
            assert!(msg.contains(what), "expected {what:?} in {msg:?}");
        }
        other => panic!("expected Corrupt({what}), got {other:?}"),
    }
}

fn len_tag(len: u32, tag: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&len.to_le_bytes());
    b[4..].copy_from_slice(&tag.to_le_bytes());
    b
}

/// A 128-byte ring starting at `start` holding one record "hello" (16 bytes
/// of ring at `start & 127`); `corrupt` then scribbles on it and the
/// consumer must refuse with `what`, twice, without moving its head.
fn consumer_refuses(start: u64, what: &str, corrupt: impl FnOnce(&RingHeader, &VecMem)) {
    let hdr = RingHeader::new();
    hdr.head.store(start, Ordering::Relaxed);
    hdr.tail.store(start, Ordering::Relaxed);
    let mem = VecMem::new(128);
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    assert!(pushed(&mut p, &[b"hello"]));
    corrupt(&hdr, &mem);
    let mut called = false;
    assert_corrupt(c.try_pop(|_| called = true), what);
    assert!(!called, "no record handed out");
    assert_eq!(hdr.head.load(Ordering::Relaxed), start, "head not advanced");
    assert_corrupt(pop_vec(&mut c), what);
}

#[test]
fn consumer_refuses_a_bad_tail() {
    let tail = |v: u64| move |h: &RingHeader, _: &VecMem| h.tail.store(v, Ordering::Relaxed);
    consumer_refuses(0, "more than the capacity ahead of head", tail(136));
    consumer_refuses(
        0,
        "more than the capacity ahead of head",
        tail(u64::MAX - 7),
    );
    consumer_refuses(0, "tail is not a multiple of 8", tail(12));
    consumer_refuses(0, "tail is not a multiple of 8", tail(124));
    // 8 bytes published: the header, but not the 5-byte payload.
    consumer_refuses(0, "record runs past the tail", tail(8));
    consumer_refuses(64, "tail moved backwards", tail(48));
}

#[test]
fn consumer_refuses_bad_records() {
    let at = |off: usize, b: [u8; 8]| move |_: &RingHeader, m: &VecMem| m.poke(off, &b);
    consumer_refuses(0, "unknown record tag", at(0, len_tag(5, 0xdead_beef)));
    consumer_refuses(0, "unknown record tag", at(0, len_tag(0, 0)));
    consumer_refuses(
        0,
        "over the record limit",
        at(0, len_tag(u32::MAX, TAG_DATA)),
    );
    consumer_refuses(0, "over the record limit", at(0, len_tag(57, TAG_DATA)));
    consumer_refuses(0, "record runs past the tail", at(0, len_tag(9, TAG_DATA)));
    consumer_refuses(0, "record runs past the tail", at(0, len_tag(40, TAG_DATA)));
    // At 112 only 16 bytes remain before the end of the buffer.
    consumer_refuses(
        112,
        "past the end of the buffer",
        at(112, len_tag(9, TAG_DATA)),
    );
    consumer_refuses(
        112 + 128 * 5,
        "past the end of the buffer",
        at(112, len_tag(56, TAG_DATA)),
    );
}

#[test]
fn consumer_refuses_bad_pads() {
    let at = |off: usize, b: [u8; 8]| move |_: &RingHeader, m: &VecMem| m.poke(off, &b);
    consumer_refuses(0, "pad record does not end", at(0, len_tag(5, TAG_PAD)));
    consumer_refuses(
        0,
        "pad record does not end",
        at(0, len_tag(u32::MAX, TAG_PAD)),
    );
    consumer_refuses(
        112,
        "pad record does not end",
        at(112, len_tag(16, TAG_PAD)),
    );
    consumer_refuses(112, "pad record does not end", at(112, len_tag(0, TAG_PAD)));
    // A pad of the right length, but only 8 of its 16 bytes are published.
    consumer_refuses(112, "pad record runs past the tail", |h, m| {
        m.poke(112, &len_tag(8, TAG_PAD));
        h.tail.store(120, Ordering::Relaxed);
    });
    // A correct pad followed by garbage at the start of the buffer.
    consumer_refuses(112, "unknown record tag", |h, m| {
        m.poke(112, &len_tag(8, TAG_PAD));
        m.poke(0, &len_tag(0, 7));
        h.tail.store(136, Ordering::Relaxed);
    });
    // A correct pad, then a second pad at 0 (which cannot end at the end).
    consumer_refuses(112, "pad record does not end", |h, m| {
        m.poke(112, &len_tag(8, TAG_PAD));
        m.poke(0, &len_tag(8, TAG_PAD));
        h.tail.store(136, Ordering::Relaxed);
    });
}

#[test]
fn consumer_refuses_bad_start_values() {
    let mem = VecMem::new(64);
    let hdr = RingHeader::new();
    hdr.head.store(16, Ordering::Relaxed);
    hdr.tail.store(8, Ordering::Relaxed);
    assert_corrupt(Consumer::new(&hdr, &mem), "tail moved backwards");
    hdr.head.store(4, Ordering::Relaxed);
    assert_corrupt(
        Consumer::new(&hdr, &mem),
        "initial head is not a multiple of 8",
    );
    hdr.head.store(0, Ordering::Relaxed);
    hdr.tail.store(72, Ordering::Relaxed);
    assert_corrupt(Consumer::new(&hdr, &mem), "more than the capacity ahead");
}

/// A full 64-byte ring (four 16-byte records, tail 64, head 0) with a
/// producer whose cached head is stale, so its next push re-reads the head.
fn full_producer<'a>(hdr: &'a RingHeader, mem: &'a VecMem) -> Producer<&'a RingHeader, &'a VecMem> {
    let mut p = Producer::new(hdr, mem).expect("producer");
    for _ in 0..4 {
        assert!(pushed(&mut p, &[b"12345678"]));
    }
    p
}

#[test]
fn producer_refuses_a_bad_head() {
    type Op = fn(&mut Producer<&RingHeader, &VecMem>) -> Result<(), RingError>;
    let ops: [Op; 3] = [
        |p| p.try_push(&[b"x"]).map(drop),
        |p| p.has_space(1).map(drop),
        |p| p.prepare_sleep(1).map(drop),
    ];
    for op in ops {
        for (head, what) in [
            (72, "head is ahead of tail"),
            (u64::MAX - 7, "head is ahead of tail"),
            (4, "head is not a multiple of 8"),
            (u64::MAX, "head is ahead of tail"),
        ] {
            let hdr = RingHeader::new();
            let mem = VecMem::new(64);
            let mut p = full_producer(&hdr, &mem);
            hdr.head.store(head, Ordering::Relaxed);
            assert_corrupt(op(&mut p), what);
            assert_eq!(hdr.tail.load(Ordering::Relaxed), 64, "nothing published");
        }
        // Head moving backwards: the producer saw 16, then 8.
        let hdr = RingHeader::new();
        let mem = VecMem::new(64);
        let mut p = full_producer(&hdr, &mem);
        hdr.head.store(16, Ordering::Relaxed);
        assert!(pushed(&mut p, &[b"12345678"]), "16 bytes freed");
        hdr.head.store(8, Ordering::Relaxed);
        assert_corrupt(op(&mut p), "head moved backwards");
        assert_eq!(hdr.tail.load(Ordering::Relaxed), 80, "nothing published");
    }
}

#[test]
fn producer_refuses_bad_start_values() {
    let mem = VecMem::new(64);
    let hdr = RingHeader::new();
    for (head, tail) in [(8, 0), (0, 72), (0, 4), (4, 8), (u64::MAX, u64::MAX)] {
        hdr.head.store(head, Ordering::Relaxed);
        hdr.tail.store(tail, Ordering::Relaxed);
        assert!(
            matches!(Producer::new(&hdr, &mem), Err(RingError::Corrupt { .. })),
            "head {head} tail {tail}"
        );
    }
}

#[test]
fn hostile_start_counters_are_refused() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    hdr.tail.store(u64::MAX - 7, Ordering::Relaxed);
    hdr.head.store(u64::MAX - 7, Ordering::Relaxed);
    assert_corrupt(Producer::new(&hdr, &mem), "initial tail is too large");
    assert_corrupt(Consumer::new(&hdr, &mem), "initial head is too large");
    // The largest allowed start still works, across a wrap.
    hdr.tail.store(MAX_START_COUNTER, Ordering::Relaxed);
    hdr.head.store(MAX_START_COUNTER, Ordering::Relaxed);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    for i in 0..20u8 {
        assert!(pushed(&mut p, &[&[i; 20]]));
        assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![i; 20]));
    }
}

/// Fresh rings over random bytes, random tails and heads.
#[test]
fn random_garbage_never_panics() {
    let mut rng = Xorshift(42);
    for _ in 0..super::iters(100_000) {
        let hdr = RingHeader::new();
        let mem = VecMem::new(64);
        for b in mem.0.borrow_mut().iter_mut() {
            *b = rng.next() as u8;
        }
        let r = rng.next();
        hdr.tail.store(
            if r.is_multiple_of(2) { r % 80 } else { r },
            Ordering::Relaxed,
        );
        if let Ok(mut c) = Consumer::new(&hdr, &mem) {
            for _ in 0..4 {
                if pop_vec(&mut c).is_err() {
                    break;
                }
            }
        }
        hdr.head.store(rng.next() % 128, Ordering::Relaxed);
        if let Ok(mut p) = Producer::new(&hdr, &mem) {
            let _ = p.try_push(&[&[1u8; 9]]);
        }
    }
}

/// A live ring on which a hostile peer scribbles over the header words and
/// the data between operations: every call returns `Ok` or a `Corrupt`
/// error (or `TooLarge` for an oversized push), never panics, never reads
/// or writes outside the area (`VecMem` would panic), and never hands out a
/// record longer than the limit.
#[test]
fn scribbling_peer_never_causes_a_panic() {
    let mut rng = Xorshift(0x5eed_1234_abcd_0001);
    let hdr = RingHeader::new();
    let mem = VecMem::new(128);
    let mut prod = Producer::new(&hdr, &mem).ok();
    let mut cons = Consumer::new(&hdr, &mem).ok();
    let (mut oks, mut errs) = (0u32, 0u32);
    let mut tally = |r: Result<(), RingError>| match r {
        Ok(()) => oks += 1,
        Err(RingError::Corrupt { .. }) => errs += 1,
        Err(e) => panic!("unexpected error {e}"),
    };
    let wild = |rng: &mut Xorshift| match rng.next() % 4 {
        0 => rng.next(),
        1 => rng.next() % 512,
        2 => (rng.next() % 512) & !7,
        _ => u64::MAX - rng.next() % 16,
    };
    for _ in 0..super::iters(100_000) {
        match rng.next() % 10 {
            0 | 1 => {
                if let Some(p) = prod.as_mut() {
                    let len = (rng.next() % 64) as usize;
                    let data = [0xa5u8; 64];
                    let split = (rng.next() as usize) % (len + 1);
                    tally(match p.try_push(&[&data[..split], &data[split..len]]) {
                        Err(RingError::TooLarge { len: l, max }) => {
                            assert!(l > max);
                            Ok(())
                        }
                        r => r.map(drop),
                    });
                }
            }
            2 | 3 => {
                if let Some(c) = cons.as_mut() {
                    tally(
                        c.try_pop(|r| {
                            assert!(r.len() <= 56, "record over the limit handed out");
                            let mut v = Vec::new();
                            r.read_to_vec(&mut v);
                            assert_eq!(v.len(), r.len());
                            r.read(0, &mut v).expect("whole payload in bounds");
                        })
                        .map(drop),
                    );
                }
            }
            4 => {
                if let Some(c) = cons.as_mut() {
                    tally(c.has_data().map(drop));
                    tally(c.prepare_sleep().map(drop));
                    c.finish_sleep();
                }
                if let Some(p) = prod.as_mut() {
                    tally(p.has_space((rng.next() % 64) as usize).map(drop));
                    tally(p.prepare_sleep((rng.next() % 64) as usize).map(drop));
                    p.finish_sleep();
                }
            }
            5 => match rng.next() % 6 {
                0 => hdr.tail.store(wild(&mut rng), Ordering::Relaxed),
                1 => hdr.head.store(wild(&mut rng), Ordering::Relaxed),
                2 => hdr.data_bell.store(rng.next() as u32, Ordering::Relaxed),
                3 => hdr.data_sleep.store(rng.next() as u32, Ordering::Relaxed),
                4 => hdr.space_bell.store(rng.next() as u32, Ordering::Relaxed),
                _ => hdr.space_sleep.store(rng.next() as u32, Ordering::Relaxed),
            },
            6 | 7 => {
                let off = (rng.next() % 128) as usize;
                let n = ((rng.next() % 16) as usize).min(128 - off);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                mem.poke(off, &bytes);
            }
            8 => {
                // Forge a plausible record header at the consumer's position.
                let off = (rng.next() % 16 * 8) as usize;
                let tag = [TAG_DATA, TAG_PAD][(rng.next() % 2) as usize];
                mem.poke(off, &len_tag(wild(&mut rng) as u32, tag));
            }
            _ => {
                // Reconnect, sometimes after repairing the header.
                if rng.next().is_multiple_of(2) {
                    let at = (rng.next() % 4096) & !7;
                    hdr.head.store(at, Ordering::Relaxed);
                    hdr.tail.store(at, Ordering::Relaxed);
                }
                prod = Producer::new(&hdr, &mem).ok();
                cons = Consumer::new(&hdr, &mem).ok();
            }
        }
    }
    assert!(
        oks > super::iters(100_000) / 100 && errs > super::iters(100_000) / 100,
        "both paths exercised: {oks} ok, {errs} errors"
    );
}
