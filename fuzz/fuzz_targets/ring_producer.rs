//! The producer of a ring whose consumer is hostile: it controls the initial
//! tail and head (the server lays out the segment the client attaches to),
//! every later head, and its sleep word.
//!
//! Input: `tail: u64 LE`, `word: u64 LE`, `mode: u8` (head = `word` when bit 0
//! is set, else `tail - (word & 0x1ff)`), then operations (one byte each, then
//! their operands):
//!   0 push (`n: u8`, `split: u8`, then `n` payload bytes, truncated to the
//!     input; pushed as two parts split at `split`)
//!   1 head = `u64 LE`
//!   2 head += 8 * `b: u8` (the consumer frees space)
//!   3 head += `d: i8` (not necessarily a multiple of 8, maybe backwards)
//!   4 has_space(`n: u8`); when it says yes, a push of `n` bytes must succeed
//!   5 prepare_sleep(`n: u8`) + finish_sleep
//!   6 data_sleep = `b: u8` (the consumer's sleep epoch; 0 = awake)
//! After the input runs out it pushes 16-byte records until full or error; 64
//! operations at most. `try_push` returns Full, Done or an error, never panics,
//! never writes out of bounds (the `VecMem` asserts), never publishes more than
//! the capacity past any head the consumer showed, and writes exactly the
//! record (and pad) it published.
#![no_main]

use std::sync::atomic::Ordering::Relaxed;

use libfuzzer_sys::fuzz_target;
use shmlink_fuzz::{Input, VecMem};
use shmlink_ring::{
    Producer, Push, RingError, RingHeader, AWAKE, RECORD_HEADER, TAG_DATA, TAG_PAD,
};

const CAP: usize = 256;
const MAX_OPS: usize = 64;

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

fn rec_header(b: &[u8]) -> (u32, u32) {
    (
        u32::from_le_bytes(b[0..4].try_into().unwrap()),
        u32::from_le_bytes(b[4..8].try_into().unwrap()),
    )
}

struct State<'a> {
    hdr: &'a RingHeader,
    mem: &'a VecMem,
    /// Every head value the consumer ever showed is at most this.
    max_head: u64,
}

impl State<'_> {
    /// Pushes `payload` in two parts; checks the outcome. Returns whether it
    /// was published.
    fn push(
        &mut self,
        p: &mut Producer<&RingHeader, &VecMem>,
        payload: &[u8],
        split: usize,
    ) -> bool {
        let split = split.min(payload.len());
        let parts = [&payload[..split], &payload[split..]];
        let len = payload.len();
        let before = self.hdr.tail.load(Relaxed);
        let sleep = self.hdr.data_sleep.load(Relaxed);
        let bell = self.hdr.data_bell.load(Relaxed);
        match p.try_push(&parts) {
            Ok(Push::Full) => {
                assert_eq!(self.hdr.tail.load(Relaxed), before, "Full but tail moved");
                false
            }
            Ok(Push::Done { wake }) => {
                assert!(!wake || sleep != AWAKE, "wake without a sleeper");
                let rung = bell.wrapping_add(u32::from(wake));
                assert_eq!(self.hdr.data_bell.load(Relaxed), rung, "bell vs wake");
                let after = self.hdr.tail.load(Relaxed);
                assert!(after > before, "tail did not advance: {before} -> {after}");
                let used = (after - before) as usize;
                let rec = RECORD_HEADER + align8(len);
                let pos = before as usize % CAP;
                let pad = used
                    .checked_sub(rec)
                    .expect("published less than the record");
                assert!(pad == 0 || pad == CAP - pos, "pad of {pad} at {pos}");
                assert!(
                    pad == 0 || rec > CAP - pos,
                    "padded although the record fit"
                );
                assert!(
                    after <= self.max_head.saturating_add(CAP as u64),
                    "published {after}, more than the capacity past head {}",
                    self.max_head
                );
                if pad > 0 {
                    let ph = self.mem.snapshot(pos, RECORD_HEADER);
                    assert_eq!(rec_header(&ph), ((pad - RECORD_HEADER) as u32, TAG_PAD));
                }
                let at = (pos + pad) % CAP;
                let r = self.mem.snapshot(at, RECORD_HEADER + len);
                assert_eq!(rec_header(&r), (len as u32, TAG_DATA));
                assert_eq!(&r[RECORD_HEADER..], payload, "payload not written");
                true
            }
            Err(RingError::TooLarge { .. }) => {
                assert!(len > p.max_record(), "TooLarge for {len} bytes");
                false
            }
            Err(_) => {
                assert!(len <= p.max_record());
                assert_eq!(self.hdr.tail.load(Relaxed), before, "error but tail moved");
                false
            }
        }
    }

    fn set_head(&mut self, h: u64) {
        self.hdr.head.store(h, Relaxed);
        self.max_head = self.max_head.max(h);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let tail = input.u64();
    let word = input.u64();
    let mode = input.u8().unwrap_or(0);
    let head = if mode & 1 == 0 {
        tail.wrapping_sub(word & 0x1ff)
    } else {
        word
    };
    let hdr = RingHeader::new();
    hdr.tail.store(tail, Relaxed);
    hdr.head.store(head, Relaxed);
    let mem = VecMem::new(CAP);
    let Ok(mut p) = Producer::new(&hdr, &mem) else {
        return;
    };
    assert_eq!(p.capacity(), CAP);
    assert_eq!(p.max_record(), CAP / 2 - RECORD_HEADER);
    let mut s = State {
        hdr: &hdr,
        mem: &mem,
        max_head: head,
    };
    const FILL: [u8; 16] = *b"0123456789abcdef";

    for _ in 0..MAX_OPS {
        let op = input.u8();
        match op.map(|o| o % 7) {
            None => {
                if !s.push(&mut p, &FILL, 5) {
                    break;
                }
            }
            Some(0) => {
                let n = usize::from(input.u8().unwrap_or(0));
                let split = usize::from(input.u8().unwrap_or(0));
                let payload = input.bytes(n);
                s.push(&mut p, payload, split);
            }
            Some(1) => {
                let h = input.u64();
                s.set_head(h);
            }
            Some(2) => {
                let b = u64::from(input.u8().unwrap_or(0));
                let h = hdr.head.load(Relaxed).wrapping_add(8 * b);
                s.set_head(h);
            }
            Some(3) => {
                let d = input.u8().unwrap_or(0) as i8;
                let h = hdr.head.load(Relaxed).wrapping_add(d as i64 as u64);
                s.set_head(h);
            }
            Some(4) => {
                let n = usize::from(input.u8().unwrap_or(0));
                if let Ok(true) = p.has_space(n) {
                    if n <= p.max_record() {
                        let payload = vec![0x5a; n];
                        assert!(s.push(&mut p, &payload, n / 2), "has_space but not pushed");
                    }
                }
            }
            Some(5) => {
                let n = usize::from(input.u8().unwrap_or(0));
                let _ = p.prepare_sleep(n);
                p.finish_sleep();
            }
            _ => {
                let b = u32::from(input.u8().unwrap_or(0));
                hdr.data_sleep.store(b, Relaxed);
            }
        }
    }
});
