//! Real threads over a `RawMemory` ring: spinning, and sleeping through the
//! doorbell protocol with an emulated futex.
#![allow(unsafe_code)]

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::sync::{AtomicU32, Ordering};
use crate::*;

/// Header and data area shared by the two threads, as a mapping would be.
struct Shared {
    hdr: RingHeader,
    /// The data area, only ever reached through `RawMemory` copies.
    buf: *mut u8,
    len: usize,
    data: Futex,
    space: Futex,
}

// SAFETY: `buf` is owned by `Shared` (freed in Drop) and accessed only by
// RawMemory copies that the ring protocol orders.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    fn new(len: usize) -> Arc<Self> {
        let buf = Box::into_raw(vec![0u8; len].into_boxed_slice()) as *mut u8;
        Arc::new(Shared {
            hdr: RingHeader::new(),
            buf,
            len,
            data: Futex::default(),
            space: Futex::default(),
        })
    }

    fn mem(&self) -> RawMemory {
        // SAFETY: `buf` is valid for `len` bytes while `self` lives, and the
        // callers keep `self` alive (an Arc) for as long as the ring end.
        // Nothing forms references into it.
        unsafe { RawMemory::new(self.buf, self.len) }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.buf, self.len);
        // SAFETY: `buf` came from `Box::into_raw` of a slice of `len` bytes,
        // and no ring end outlives `self`.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// FUTEX_WAIT/FUTEX_WAKE emulated as the kernel does it: the value check and
/// the sleep are atomic with respect to a wake (the mutex).
#[derive(Default)]
struct Futex {
    m: Mutex<()>,
    cv: Condvar,
}

impl Futex {
    /// Sleeps while `word == expected`. A wake-up lost by the protocol would
    /// leave it asleep: after 20 s with the word unchanged, it panics.
    fn wait(&self, word: &AtomicU32, expected: u32) {
        let g = self.m.lock().expect("futex lock");
        if word.load(Ordering::SeqCst) != expected {
            return;
        }
        let (_g, res) = self
            .cv
            .wait_timeout(g, Duration::from_secs(20))
            .expect("futex wait");
        assert!(
            !(res.timed_out() && word.load(Ordering::SeqCst) == expected),
            "lost wake-up: asleep 20 s on an unchanged bell"
        );
    }

    fn wake(&self) {
        let _g = self.m.lock().expect("futex lock");
        self.cv.notify_all();
    }
}

/// Payload of record `i`: its sequence number, then bytes derived from it.
fn payload(i: u64, buf: &mut [u8; 256]) -> usize {
    let len = 8 + (i.wrapping_mul(0x9e37_79b9) % 200) as usize;
    buf[..8].copy_from_slice(&i.to_le_bytes());
    for (j, b) in buf[8..len].iter_mut().enumerate() {
        *b = (i as u8).wrapping_add(j as u8);
    }
    len
}

/// One spin of a side that does not sleep; every [`SPINS_PER_YIELD`]th
/// yields, so that on a loaded machine (tests in parallel on 2 CPUs) a
/// peer sharing this thread's CPU runs within a yield, not a scheduler
/// slice per ring-full (1,000,000 records took minutes that way).
fn spin_or_yield(spins: u32) -> u32 {
    if spins >= SPINS_PER_YIELD {
        std::thread::yield_now();
        return 0;
    }
    std::hint::spin_loop();
    spins + 1
}

/// Spins between two yields of a side that does not sleep.
const SPINS_PER_YIELD: u32 = 256;

/// Pops `n` records and checks order and content of each; `sleep` uses the
/// doorbell when the ring is empty. Returns how often it slept.
fn consume(sh: &Shared, n: u64, sleep: bool) -> u64 {
    let mut c = Consumer::new(&sh.hdr, sh.mem()).expect("consumer");
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut next, mut sleeps, mut spins) = (0u64, 0u64, 0u32);
    let mut got = Vec::with_capacity(256);
    let mut want = [0u8; 256];
    while next < n {
        match c.try_pop(|r| {
            got.clear();
            r.read_to_vec(&mut got);
        }) {
            Ok(Pop::Done { wake, .. }) => {
                let len = payload(next, &mut want);
                assert_eq!(got, want[..len], "record {next}");
                next += 1;
                if wake {
                    sh.space.wake();
                }
            }
            Ok(Pop::Empty) if sleep => {
                if let Some(seen) = c.prepare_sleep().expect("prepare_sleep") {
                    sleeps += 1;
                    sh.data.wait(&sh.hdr.data_bell, seen);
                }
                c.finish_sleep();
            }
            Ok(Pop::Empty) => {
                assert!(Instant::now() < deadline, "watchdog: stuck at {next}");
                spins = spin_or_yield(spins);
            }
            Err(e) => panic!("{e}"),
        }
    }
    sleeps
}

/// Pushes `n` records, each as two parts; `sleep` uses the doorbell when the
/// ring is full. Returns how often it slept.
fn produce(sh: &Shared, n: u64, sleep: bool) -> u64 {
    let mut p = Producer::new(&sh.hdr, sh.mem()).expect("producer");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut buf = [0u8; 256];
    let (mut i, mut sleeps, mut spins) = (0u64, 0u64, 0u32);
    while i < n {
        let len = payload(i, &mut buf);
        match p.try_push(&[&buf[..8], &buf[8..len]]).expect("push") {
            Push::Done { wake } => {
                i += 1;
                if wake {
                    sh.data.wake();
                }
            }
            Push::Full if sleep => {
                if let Some(seen) = p.prepare_sleep(len).expect("prepare_sleep") {
                    sleeps += 1;
                    sh.space.wait(&sh.hdr.space_bell, seen);
                }
                p.finish_sleep();
            }
            Push::Full => {
                assert!(Instant::now() < deadline, "watchdog: stuck at {i}");
                spins = spin_or_yield(spins);
            }
        }
    }
    sleeps
}

fn exchange(ring: usize, n: u64, sleep: bool) -> (u64, u64) {
    let sh = Shared::new(ring);
    let sh2 = Arc::clone(&sh);
    let t = std::thread::spawn(move || produce(&sh2, n, sleep));
    let consumer_sleeps = consume(&sh, n, sleep);
    let producer_sleeps = t.join().expect("producer thread");
    assert_eq!(
        sh.hdr.head.load(Ordering::Relaxed),
        sh.hdr.tail.load(Ordering::Relaxed)
    );
    (producer_sleeps, consumer_sleeps)
}

#[test]
fn threads_exchange_a_million_records_spinning() {
    exchange(4096, super::iters(1_000_000).into(), false);
}

/// Both sides sleep on the doorbell whenever they cannot proceed: a lost
/// wake-up would hang one side (and trip the 20 s assertion).
#[test]
fn threads_exchange_records_sleeping_on_the_doorbell() {
    let (p, c) = exchange(512, super::iters(200_000).into(), true);
    eprintln!("sleeps: producer {p}, consumer {c}");
    assert!(p + c > 0, "the sleep path was exercised");
}

/// `RawMemory` appends into a Vec's spare capacity (no zero-fill): the bytes
/// land after the existing ones, also when the Vec must grow, and a record's
/// `append_from` copies exactly the payload's tail.
#[test]
fn raw_memory_appends_into_spare_capacity() {
    let shared = Shared::new(64);
    let mem = shared.mem();
    mem.write(8, b"abcdefgh");
    let mut out = Vec::with_capacity(2);
    out.push(b'>');
    mem.append(8, 8, &mut out);
    assert_eq!(out, b">abcdefgh");
    mem.append(12, 0, &mut out);
    assert_eq!(out, b">abcdefgh");
    let hdr = &shared.hdr;
    let mut p = Producer::new(hdr, shared.mem()).expect("producer");
    let mut c = Consumer::new(hdr, shared.mem()).expect("consumer");
    assert_eq!(
        p.try_push(&[b"head", b"payload"]).expect("push"),
        Push::Done { wake: false }
    );
    let Pop::Done { value, .. } = c
        .try_pop(|r| {
            let mut v = Vec::new();
            r.append_from(4, &mut v).map(|()| v)
        })
        .expect("pop")
    else {
        panic!("record expected")
    };
    assert_eq!(value.expect("in bounds"), b"payload");
}
