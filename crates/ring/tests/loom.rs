//! Model checks of the ring and doorbell protocol with loom.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shmlink-ring --release --test loom`
//! (`ci/loom.sh`). Every interleaving (up to the preemption bound) is explored:
//! - message conservation and order, across a wrap with a pad record;
//! - no lost wake-up on either bell: a lost one leaves a thread blocked
//!   forever, which loom reports as a deadlock;
//! - no torn read: ring bytes are loom cells, so a read racing a write is a
//!   reported causality violation;
//! - a canary with the classic lost-wake-up bug must be caught.
#![cfg(loom)]
#![allow(unsafe_code)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use shmlink_ring::{Consumer, Memory, Pop, Producer, Push, RingHeader};

/// Ring bytes as loom cells.
struct Cells(Vec<UnsafeCell<u8>>);

#[derive(Clone)]
struct Mem(Arc<Cells>);

impl Mem {
    fn new(n: usize) -> Self {
        Mem(Arc::new(Cells(
            (0..n).map(|_| UnsafeCell::new(0)).collect(),
        )))
    }
}

impl Memory for Mem {
    fn len(&self) -> usize {
        self.0 .0.len()
    }
    fn write(&self, off: usize, src: &[u8]) {
        for (i, b) in src.iter().enumerate() {
            // SAFETY: loom checks that no other access to this cell is concurrent.
            self.0 .0[off + i].with_mut(|p| unsafe { *p = *b });
        }
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: as above.
            *d = self.0 .0[off + i].with(|p| unsafe { *p });
        }
    }
}

/// A futex for loom: wait sleeps only while the word holds `expected`;
/// checking and sleeping are atomic with respect to `wake` (the mutex), as
/// the kernel makes them for FUTEX_WAIT/FUTEX_WAKE.
#[derive(Default)]
struct Futex {
    m: Mutex<()>,
    cv: Condvar,
}

impl Futex {
    fn wait(&self, word: &AtomicU32, expected: u32) {
        let g = self.m.lock().expect("futex lock");
        let v = word.load(Ordering::SeqCst);
        eprintln!("futex sees {v}");
        if v != expected {
            return;
        }
        drop(self.cv.wait(g).expect("futex wait"));
    }
    fn wake(&self) {
        let _g = self.m.lock().expect("futex lock");
        self.cv.notify_all();
    }
}

struct Shared {
    hdr: RingHeader,
    data: Futex,
    space: Futex,
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// Producer pushing `msgs` with the full protocol (sleeping when full).
fn produce(sh: &Shared, mem: Mem, msgs: &[&[u8]]) {
    let mut p = Producer::new(&sh.hdr, mem).expect("producer");
    for m in msgs {
        loop {
            match p.try_push(&[m]).expect("push") {
                Push::Done { wake } => {
                    eprintln!("P pushed {} wake={wake}", m.len());
                    if wake {
                        sh.data.wake();
                    }
                    break;
                }
                Push::Full => {
                    if let Some(seen) = p.prepare_sleep(m.len()).expect("prepare") {
                        sh.space.wait(&sh.hdr.space_bell, seen);
                    }
                    p.finish_sleep();
                }
            }
        }
    }
}

/// Consumer receiving `n` messages; `broken` uses the lost-wake-up bug.
fn consume(sh: &Shared, mem: Mem, n: usize, broken: bool) -> Vec<Vec<u8>> {
    let mut c = Consumer::new(&sh.hdr, mem).expect("consumer");
    let mut got = Vec::new();
    while got.len() < n {
        match c
            .try_pop(|r| {
                let mut v = Vec::new();
                r.read_to_vec(&mut v);
                v
            })
            .expect("pop")
        {
            Pop::Done { value, wake } => {
                eprintln!("C popped {} wake={wake}", value.len());
                if wake {
                    sh.space.wake();
                }
                got.push(value);
            }
            Pop::Empty => {
                let sleep = if broken {
                    // BUG on purpose: check, then announce. A record published
                    // in between sees no sleeper and owes no wake-up.
                    if c.has_data().expect("check") {
                        None
                    } else {
                        let seen = sh.hdr.data_bell.load(Ordering::Acquire);
                        sh.hdr.data_sleep.store(1, Ordering::Release);
                        Some(seen)
                    }
                } else {
                    c.prepare_sleep().expect("prepare")
                };
                if let Some(seen) = sleep {
                    sh.data.wait(&sh.hdr.data_bell, seen);
                }
                c.finish_sleep();
            }
        }
    }
    got
}

fn run(ring: usize, msgs: &'static [&'static [u8]], broken: bool) {
    let sh = Arc::new(Shared {
        hdr: RingHeader::new(),
        data: Futex::default(),
        space: Futex::default(),
    });
    let mem = Mem::new(ring);
    let (sh2, mem2) = (Arc::clone(&sh), mem.clone());
    eprintln!("---- execution");
    let t = thread::spawn(move || produce(&sh2, mem2, msgs));
    let got = consume(&sh, mem, msgs.len(), broken);
    t.join().expect("producer");
    let want: Vec<Vec<u8>> = msgs.iter().map(|m| m.to_vec()).collect();
    assert_eq!(got, want, "messages lost, duplicated or reordered");
}

/// Two records into an empty ring: conservation, order, consumer sleep.
#[test]
fn consumer_sleeps_and_is_always_woken() {
    model(|| run(64, &[b"abcdefgh", b"ijklmnop"], false));
}

/// Records that fill a 64-byte ring: the producer must sleep for space and
/// the third record wraps after a pad.
#[test]
fn producer_sleeps_for_space_and_wraps() {
    model(|| run(64, &[&[1; 20], &[2; 20], &[3; 16]], false));
}

/// Canary: the broken sleep order must be caught (a deadlock), proving loom
/// really explores the interleavings that matter.
#[test]
#[should_panic]
fn canary_lost_wakeup_is_detected() {
    model(|| run(64, &[b"abcdefgh"], true));
}
