//! The consumer of a ring whose producer is hostile: it controls the initial
//! head and tail, every later tail, the data area and its own sleep word.
//!
//! Input: `head: u64 LE`, `word: u64 LE`, `mode: u8` (tail = `word` when bit 0
//! is set, else `head + (word & 0x1ff)`), 256 bytes of data area, then
//! operations (one byte each, then their operands):
//!   0 pop (`off: u8`, `n: u8`: a `Record::read` of that range as well)
//!   1 publish: tail += 8 * `b: u8`
//!   2 tail = `u64 LE`
//!   3 tail += `d: i8` (not necessarily a multiple of 8, maybe backwards)
//!   4 scribble `n: u8 % 64` bytes at `off: u8` of the data area
//!   5 prepare_sleep + finish_sleep
//!   6 space_sleep = `b: u8` (the producer's sleep epoch; 0 = awake)
//! After the input runs out it pops until empty or error; 64 operations at
//! most. Never panics, never touches memory out of bounds (the `VecMem`
//! asserts), and every record handed out lies within published bytes.
#![no_main]

use std::sync::atomic::Ordering::Relaxed;

use libfuzzer_sys::fuzz_target;
use shmlink_fuzz::{Input, VecMem};
use shmlink_ring::{Consumer, Pop, RingHeader, AWAKE, RECORD_HEADER};

const CAP: usize = 256;
const MAX_OPS: usize = 64;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let head = input.u64();
    let word = input.u64();
    let mode = input.u8().unwrap_or(0);
    let tail = if mode & 1 == 0 {
        head.wrapping_add(word & 0x1ff)
    } else {
        word
    };
    let hdr = RingHeader::new();
    hdr.head.store(head, Relaxed);
    hdr.tail.store(tail, Relaxed);
    let mem = VecMem::new(CAP);
    mem.scribble(0, input.bytes(CAP));

    let Ok(mut c) = Consumer::new(&hdr, &mem) else {
        return;
    };
    // Every tail value the producer ever published is at most this.
    let mut max_tail = tail;
    let mut last_head = head;

    for _ in 0..MAX_OPS {
        let op = input.u8();
        match op.map(|o| o % 7) {
            None | Some(0) => {
                let off = usize::from(input.u8().unwrap_or(0));
                let n = usize::from(input.u8().unwrap_or(0));
                let sleep = hdr.space_sleep.load(Relaxed);
                let bell = hdr.space_bell.load(Relaxed);
                let r = c.try_pop(|rec| {
                    let mut v = Vec::new();
                    rec.read_to_vec(&mut v);
                    let mut part = vec![0u8; n];
                    let res = rec.read(off, &mut part);
                    assert_eq!(res.is_ok(), off + n <= rec.len(), "Record::read bounds");
                    if res.is_ok() {
                        assert_eq!(part[..], v[off..off + n]);
                    }
                    (v.len() == rec.len(), rec.len())
                });
                match r {
                    Ok(Pop::Done {
                        value: (ok, len),
                        wake,
                    }) => {
                        assert!(ok, "read_to_vec length differs from Record::len");
                        assert!(len <= CAP / 2 - RECORD_HEADER, "record of {len} bytes");
                        let h = hdr.head.load(Relaxed);
                        assert!(h > last_head, "head did not advance");
                        assert_eq!(h % 8, 0, "head not a multiple of 8");
                        assert!(h - last_head <= CAP as u64, "consumed more than the ring");
                        assert!(h <= max_tail, "consumed beyond anything published");
                        last_head = h;
                        assert!(!wake || sleep != AWAKE, "wake without a sleeper");
                        let rung = bell.wrapping_add(u32::from(wake));
                        assert_eq!(hdr.space_bell.load(Relaxed), rung, "bell vs wake");
                    }
                    Ok(Pop::Empty) | Err(_) => {
                        assert_eq!(hdr.head.load(Relaxed), last_head, "head moved on no pop");
                        if op.is_none() {
                            break;
                        }
                    }
                }
            }
            Some(1) => {
                let b = u64::from(input.u8().unwrap_or(0));
                let t = hdr.tail.load(Relaxed).wrapping_add(8 * b);
                hdr.tail.store(t, Relaxed);
                max_tail = max_tail.max(t);
            }
            Some(2) => {
                let t = input.u64();
                hdr.tail.store(t, Relaxed);
                max_tail = max_tail.max(t);
            }
            Some(3) => {
                let d = input.u8().unwrap_or(0) as i8;
                let t = hdr.tail.load(Relaxed).wrapping_add(d as i64 as u64);
                hdr.tail.store(t, Relaxed);
                max_tail = max_tail.max(t);
            }
            Some(4) => {
                let off = usize::from(input.u8().unwrap_or(0));
                let n = usize::from(input.u8().unwrap_or(0) % 64);
                mem.scribble(off, input.bytes(n));
            }
            Some(5) => {
                let _ = c.prepare_sleep();
                c.finish_sleep();
            }
            _ => {
                let b = u32::from(input.u8().unwrap_or(0));
                hdr.space_sleep.store(b, Relaxed);
            }
        }
    }
});
