//! Unit tests: round trips, wrap-around, fullness, and every corruption case.

use std::cell::RefCell;

use crate::sync::Ordering;
use crate::*;

/// Plain memory for single-threaded tests; asserts bounds like RawMemory.
struct VecMem(RefCell<Vec<u8>>);

impl VecMem {
    fn new(n: usize) -> Self {
        VecMem(RefCell::new(vec![0; n]))
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

fn pop_vec<M: Memory>(c: &mut Consumer<'_, M>) -> Result<Option<Vec<u8>>, RingError> {
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
    for i in 0..100u8 {
        let a = vec![i; (i as usize * 7) % 50];
        let b = vec![i.wrapping_add(1); (i as usize * 3) % 60];
        assert_eq!(
            p.try_push(&[&a, &b]).expect("push"),
            Push::Done { wake: false }
        );
        let got = pop_vec(&mut c).expect("pop").expect("record");
        assert_eq!(got, [a, b].concat());
    }
    assert_eq!(pop_vec(&mut c).expect("pop"), None);
}

#[test]
fn full_ring_reports_full_and_records_fill_exactly() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    // Two records of 24 payload bytes = 2 * 32 = the whole ring.
    assert!(matches!(p.try_push(&[&[1u8; 24]]), Ok(Push::Done { .. })));
    assert!(matches!(p.try_push(&[&[2u8; 24]]), Ok(Push::Done { .. })));
    assert_eq!(p.try_push(&[&[3u8; 1]]).expect("full"), Push::Full);
    assert_eq!(
        p.try_push(&[&[0u8; 25]]),
        Err(RingError::TooLarge { len: 25, max: 24 })
    );
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![1u8; 24]));
    // A pad is needed now: 16 bytes free at the end is not enough for 24+8.
    assert!(matches!(p.try_push(&[&[3u8; 8]]), Ok(Push::Done { .. })));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![2u8; 24]));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![3u8; 8]));
    assert!(matches!(p.try_push(&[&[4u8; 16]]), Ok(Push::Done { .. })));
    assert_eq!(pop_vec(&mut c).expect("pop"), Some(vec![4u8; 16]));
}

#[test]
fn randomized_sizes_across_many_wraps() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(1024);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut expect = std::collections::VecDeque::new();
    for i in 0..20_000u32 {
        if !rng.next().is_multiple_of(3) {
            let len = (rng.next() % (p.max_record() as u64 + 1)) as usize;
            let data: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
            if let Push::Done { .. } = p.try_push(&[&data]).expect("push") {
                expect.push_back(data);
            }
        } else if let Some(v) = pop_vec(&mut c).expect("pop") {
            assert_eq!(Some(v), expect.pop_front());
        }
    }
    while let Some(v) = pop_vec(&mut c).expect("pop") {
        assert_eq!(Some(v), expect.pop_front());
    }
    assert!(expect.is_empty());
}

fn corrupted<F: FnOnce(&RingHeader, &VecMem)>(f: F) -> RingError {
    let hdr = RingHeader::new();
    let mem = VecMem::new(128);
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    {
        let mut p = Producer::new(&hdr, &mem).expect("producer");
        p.try_push(&[b"hello"]).expect("push");
    }
    f(&hdr, &mem);
    pop_vec(&mut c).expect_err("must be refused")
}

#[test]
fn every_corruption_is_refused() {
    type Corruption = Box<dyn Fn(&RingHeader, &VecMem)>;
    let cases: Vec<Corruption> = vec![
        Box::new(|h, _| h.tail.store(1000, Ordering::Relaxed)),
        Box::new(|h, _| h.tail.store(12, Ordering::Relaxed)),
        Box::new(|_, m| m.0.borrow_mut()[4..8].copy_from_slice(&0xdead_beefu32.to_le_bytes())),
        Box::new(|_, m| m.0.borrow_mut()[0..4].copy_from_slice(&u32::MAX.to_le_bytes())),
        Box::new(|_, m| m.0.borrow_mut()[0..4].copy_from_slice(&40u32.to_le_bytes())),
        Box::new(|_, m| {
            m.0.borrow_mut()[4..8].copy_from_slice(&TAG_PAD.to_le_bytes());
        }),
    ];
    for case in cases {
        let e = corrupted(case);
        assert!(matches!(e, RingError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("corrupted by peer"));
    }
}

#[test]
fn tail_moving_backwards_and_head_beyond_tail_are_refused() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(128);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    p.try_push(&[b"a"]).expect("push");
    assert!(c.has_data().expect("data"));
    pop_vec(&mut c).expect("pop");
    hdr.tail.store(0, Ordering::Relaxed);
    assert!(c.has_data().is_err(), "tail went backwards");
    hdr.head.store(4096, Ordering::Relaxed);
    assert!(p.has_space(120).is_err(), "head beyond tail");
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = Xorshift(42);
    for _ in 0..100_000 {
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

#[test]
fn bells_announce_sleep_and_owe_one_wake_per_sleep() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    let seen = c.prepare_sleep().expect("sleep").expect("empty: sleep");
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
    assert_eq!(
        c.prepare_sleep().expect("sleep"),
        None,
        "data present: no sleep"
    );
    c.finish_sleep();
    // Producer waiting for space: the ring holds x, y (16 bytes each) and two more.
    p.try_push(&[&[0u8; 8]]).expect("push");
    p.try_push(&[&[0u8; 8]]).expect("push");
    assert!(p.prepare_sleep(24).expect("sleep").is_some());
    let Pop::Done { wake, .. } = c.try_pop(|_| ()).expect("pop") else {
        panic!("record expected")
    };
    assert!(wake);
    p.finish_sleep();
}

#[test]
fn threads_exchange_a_million_records() {
    use std::sync::Arc;
    struct Shared {
        hdr: RingHeader,
        buf: Box<[u8]>,
    }
    let mut shared = Arc::new(Shared {
        hdr: RingHeader::new(),
        buf: vec![0u8; 4096].into_boxed_slice(),
    });
    let ptr = Arc::get_mut(&mut shared).expect("unique").buf.as_mut_ptr() as usize;
    let s2 = Arc::clone(&shared);
    #[allow(unsafe_code)]
    let producer = std::thread::spawn(move || {
        // SAFETY: the buffer lives in `s2` for the whole thread and is only
        // accessed through RawMemory copies ordered by the ring protocol.
        let mem = unsafe { RawMemory::new(ptr as *mut u8, 4096) };
        let mut p = Producer::new(&s2.hdr, mem).expect("producer");
        let mut i = 0u64;
        while i < 1_000_000 {
            let len = (i % 200) as usize;
            let mut data = [0u8; 208];
            data[..8].copy_from_slice(&i.to_le_bytes());
            if let Push::Done { .. } = p.try_push(&[&data[..8 + len]]).expect("push") {
                i += 1;
            } else {
                std::hint::spin_loop();
            }
        }
    });
    #[allow(unsafe_code)]
    // SAFETY: as above, for the consumer side.
    let mem = unsafe { RawMemory::new(ptr as *mut u8, 4096) };
    let mut c = Consumer::new(&shared.hdr, mem).expect("consumer");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut next = 0u64;
    while next < 1_000_000 {
        assert!(std::time::Instant::now() < deadline, "watchdog");
        match c.try_pop(|r| {
            let mut b = [0u8; 8];
            r.read(0, &mut b).expect("id");
            (u64::from_le_bytes(b), r.len())
        }) {
            Ok(Pop::Done {
                value: (id, len), ..
            }) => {
                assert_eq!(id, next);
                assert_eq!(len, 8 + (id % 200) as usize);
                next += 1;
            }
            Ok(Pop::Empty) => std::hint::spin_loop(),
            Err(e) => panic!("{e}"),
        }
    }
    producer.join().expect("producer thread");
}

#[test]
fn hostile_start_counters_are_refused() {
    let hdr = RingHeader::new();
    let mem = VecMem::new(64);
    hdr.tail.store(u64::MAX - 7, Ordering::Relaxed);
    hdr.head.store(u64::MAX - 7, Ordering::Relaxed);
    assert!(
        Producer::new(&hdr, &mem).is_err(),
        "a tail near u64::MAX would overflow"
    );
    assert!(
        Consumer::new(&hdr, &mem).is_err(),
        "a head near u64::MAX would overflow"
    );
}
