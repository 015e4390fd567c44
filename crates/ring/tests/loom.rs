//! Model checks of the ring and doorbell protocol with loom.
//!
//! Run (from the workspace root; `ci/loom.sh` does exactly this):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p shmlink-ring --release --test loom -- --test-threads=2
//! ```
//!
//! About 20 s on 2 cores at the default bound of 3 preemptions
//! (`LOOM_MAX_PREEMPTIONS=4`: about 3 minutes). Every interleaving up to the
//! bound is explored, with two threads on a 64-byte ring:
//! - (a)–(c) and the repeated-sleep scenario: message conservation and order,
//!   an exact fill, a wrap with a pad record;
//! - no lost wake-up on either bell: a lost one leaves a thread blocked
//!   forever, which loom reports as a deadlock;
//! - no torn read: ring bytes are loom cells, so a copy racing a write is a
//!   reported causality violation;
//! - (d) a canary with the classic lost-wake-up bug must be caught;
//! - (e) a worker sleeping on its direct line is woken by a message on its
//!   other ring (its supervisor's revoke) and the bell the supervisor rings;
//! - (f) the consumer's CPU hint, written while the producer reads it to
//!   choose how to wait, changes no wake-up.
//!
//! Each of these mutations of the ring was checked to fail this suite: the
//! tail or head published with a plain store instead of a swap, or with
//! Relaxed; either re-check in `prepare_sleep` done with a load instead of
//! `fetch_add(0)`; the head advanced before the record is copied out; in
//! (e), the worker checking its supervisor's ring before it reads the
//! line's bell (loom reports the deadlock, then aborts in cleanup, as
//! described next).
//! A failing scenario may abort the test binary ("panic in a destructor
//! during cleanup") instead of printing a normal failure: loom's deadlock
//! panic unwinds through a thread still holding loom objects. Run one
//! scenario at a time (`-- --exact NAME`) to see which failed.
#![cfg(loom)]
#![allow(unsafe_code)]

mod loom_futex;
use loom_futex::Futex;

use loom::cell::UnsafeCell;
use loom::sync::atomic::Ordering;
use loom::sync::Arc;
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

struct Shared {
    hdr: RingHeader,
    data: Futex,
    space: Futex,
}

/// A model builder bounded to 3 preemptions unless `LOOM_MAX_PREEMPTIONS`
/// says otherwise: enough for every scenario here, and the suite stays fast.
fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    builder().check(f);
}

/// Producer pushing `msgs` with the full protocol (sleeping when full);
/// with `hint`, it reads the consumer's CPU hint first and, if the
/// consumer is "elsewhere" (CPU 4), looks once more before sleeping.
fn produce(sh: &Shared, mem: Mem, msgs: &[&[u8]], hint: bool) {
    let mut p = Producer::new(&sh.hdr, mem).expect("producer");
    for m in msgs {
        loop {
            match p.try_push(&[m]).expect("push") {
                Push::Done { wake } => {
                    if wake {
                        sh.data.wake();
                    }
                    break;
                }
                Push::Full => {
                    if hint {
                        let cpu = p.consumer_cpu();
                        assert!(matches!(cpu, None | Some(3) | Some(4)), "{cpu:?}");
                        if cpu == Some(4) && p.has_space(m.len()).expect("space") {
                            continue;
                        }
                    }
                    if let Some(seen) = p.prepare_sleep(m.len()).expect("prepare") {
                        sh.space.wait(&sh.hdr.space_bell, seen);
                    }
                    p.finish_sleep();
                }
            }
        }
    }
}

/// Consumer receiving `n` messages; `broken` uses the lost-wake-up bug;
/// `hint`: it says a CPU (3, then 4, then 3...) before each sleep.
fn consume(sh: &Shared, mem: Mem, n: usize, broken: bool, hint: bool) -> Vec<Vec<u8>> {
    let mut c = Consumer::new(&sh.hdr, mem).expect("consumer");
    let mut got = Vec::new();
    let mut cpu = 3;
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
                if wake {
                    sh.space.wake();
                }
                got.push(value);
            }
            Pop::Empty => {
                if hint {
                    c.say_cpu(cpu);
                    cpu = 7 - cpu;
                }
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

/// Runs one producer thread and one consumer (the model's main thread) over
/// a ring of `ring` bytes; returns the final tail.
fn run(ring: usize, msgs: &'static [&'static [u8]], broken: bool) -> u64 {
    run_as(ring, msgs, broken, false)
}

/// [`run`], with the CPU hint said and read (`hint`).
fn run_as(ring: usize, msgs: &'static [&'static [u8]], broken: bool, hint: bool) -> u64 {
    let sh = Arc::new(Shared {
        hdr: RingHeader::new(),
        data: Futex::default(),
        space: Futex::default(),
    });
    let mem = Mem::new(ring);
    let (sh2, mem2) = (Arc::clone(&sh), mem.clone());
    let t = thread::spawn(move || produce(&sh2, mem2, msgs, hint));
    let got = consume(&sh, mem, msgs.len(), broken, hint);
    t.join().expect("producer");
    let want: Vec<Vec<u8>> = msgs.iter().map(|m| m.to_vec()).collect();
    assert_eq!(got, want, "messages lost, duplicated or reordered");
    sh.hdr.tail.load(Ordering::Relaxed)
}

/// (a) Two records into an empty ring: conservation, order, and the
/// consumer sleeping on `data_bell` whenever the ring is empty is always woken.
#[test]
fn consumer_sleeps_and_is_always_woken() {
    model(|| {
        run(64, &[b"abcdefgh", b"ijklmnop"], false);
    });
}

/// (b) Two records fill the 64-byte ring exactly (32 + 32): the producer
/// sleeps on `space_bell` for the third, which starts again at offset 0.
#[test]
fn producer_sleeps_for_space_and_is_always_woken() {
    model(|| {
        let tail = run(64, &[&[1; 24], &[2; 24], &[3; 16]], false);
        assert_eq!(tail, 64 + 24, "no pad: the ring was filled exactly");
    });
}

/// (c) Wrap with a pad: after 16 + 32 bytes, a 24-byte record does not fit
/// the 16 left before the end, so the producer waits for the whole ring to
/// drain, writes a 16-byte pad and the record at offset 0.
#[test]
fn wrap_with_a_pad_record() {
    model(|| {
        let tail = run(64, &[&[1; 8], &[2; 24], &[3; 16]], false);
        assert_eq!(tail, 16 + 32 + 16 + 24, "a 16-byte pad was written");
    });
}

/// Four records of 32 bytes through a 64-byte ring: each side may sleep
/// more than once, so a new sleep must be owed a new wake-up (sleep epochs).
#[test]
fn repeated_sleeps_on_both_bells() {
    model(|| {
        run(64, &[&[1; 24], &[2; 24], &[3; 24], &[4; 24]], false);
    });
}

/// (d) Canary: the broken sleep order (check, then announce) must be caught
/// as a deadlock, proving loom really explores the interleavings that matter.
#[test]
#[should_panic(expected = "deadlock")]
fn canary_lost_wakeup_is_detected() {
    model(|| {
        run(64, &[b"abcdefgh"], true);
    });
}

/// A worker waiting between calls on its direct line (docs/protocol.md,
/// "Direct lines"): its supervisor publishes a message (a revoke) in the
/// ring of the worker's own session, then increments the line's data bell
/// and wakes it (`Segment::ring_server_bell`); the worker announces sleep on
/// the line (`prepare_sleep`, which reads the bell), then checks the
/// session's ring (`Watch::Line`: tail against head), then sleeps on the
/// line's bell. Returns once the worker has seen the message.
fn worker_on_a_line() {
    let new = || {
        Arc::new(Shared {
            hdr: RingHeader::new(),
            data: Futex::default(),
            space: Futex::default(),
        })
    };
    let (line, session) = (new(), new());
    let (line_mem, session_mem) = (Mem::new(64), Mem::new(64));
    let (l2, s2, sm2) = (Arc::clone(&line), Arc::clone(&session), session_mem.clone());
    let supervisor = thread::spawn(move || {
        produce(&s2, sm2, &[b"revoke"], false);
        l2.hdr.data_bell.fetch_add(1, Ordering::AcqRel);
        l2.data.wake();
    });
    let mut on_line = Consumer::new(&line.hdr, line_mem).expect("line consumer");
    let elsewhere =
        || session.hdr.tail.load(Ordering::Acquire) != session.hdr.head.load(Ordering::Acquire);
    loop {
        let seen = on_line.prepare_sleep().expect("prepare");
        if elsewhere() {
            on_line.finish_sleep();
            break;
        }
        if let Some(seen) = seen {
            line.data.wait(&line.hdr.data_bell, seen);
        }
        on_line.finish_sleep();
    }
    supervisor.join().expect("supervisor");
    let mut from = Consumer::new(&session.hdr, session_mem).expect("session consumer");
    let got = from.try_pop(|r| r.len()).expect("pop");
    assert!(
        matches!(got, Pop::Done { value: 6, .. }),
        "the revoke is there"
    );
}

/// (e) A worker sleeping on its line is always woken by its supervisor's
/// message on the other ring.
#[test]
fn a_worker_on_a_line_is_woken_by_its_supervisor() {
    model(worker_on_a_line);
}

/// (f) The CPU hint beside the consumer's sleep epoch (docs/protocol.md,
/// "CPU hints"): the consumer says a CPU before each sleep (moving between
/// two) while the producer, short of space, reads the hint to choose
/// between one more look and sleeping at once. The hint changes no rule of
/// the doorbell: whatever value either side sees, nothing is lost and
/// nobody sleeps forever, and the producer only ever reads a value the
/// consumer wrote (or 0: not said).
#[test]
fn the_cpu_hint_changes_no_wake_up() {
    model(|| {
        run_as(64, &[&[1; 24], &[2; 24], &[3; 24]], false, true);
    });
}
