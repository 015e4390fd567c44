//! Publish/subscribe's decoders and shared state on arbitrary input, as a
//! subscriber or a publisher reads them from a hostile peer. Input: 1 byte
//! choosing the case (byte % 4), then the bytes:
//! - 0: an attach offer (`pubsub::Attach::decode`): what is accepted
//!   re-encodes byte-exactly and keeps every bound of docs/protocol.md;
//! - 1: a copied sample and a detach notice (`decode_sample`,
//!   `decode_detach`);
//! - 2: a subscriber's queue written by a publisher: the words of the
//!   header and of 4 entries from the input, then takes until none is
//!   left; every take is within `depth` of the last and bounded in number;
//! - 3: a publisher's queue written by a subscriber: `head`, `returned`
//!   and 6 returns from the input, then collect, queue and drop; never a
//!   panic, a slot released only if it was queued.
#![no_main]

use std::sync::atomic::{AtomicU32, Ordering};

use libfuzzer_sys::fuzz_target;
use shmlink_ring::samples::{Entry, QueueConsumer, QueueHeader, QueueProducer, Queued};
use shmlink_wire::pubsub::{
    decode_detach, decode_sample, Attach, Mode, MAX_DEPTH, MAX_DETACH_TEXT, MAX_POOL,
};

fn u64s(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks(8).map(|c| {
        let mut a = [0u8; 8];
        a[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(a)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, b)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(a) = Attach::decode(b) {
                assert_eq!(a.encode(), b);
                assert!(a.depth >= 1 && a.depth <= MAX_DEPTH && a.history <= a.depth);
                if a.mode == Mode::Shared {
                    assert!(a.pool_len() <= MAX_POOL && a.slot_stride >= u64::from(a.sample_size));
                    assert!(a.returns >= a.depth + a.max_held);
                }
            }
        }
        1 => {
            if let Ok((_, rest)) = decode_sample(b) {
                assert_eq!(rest.len() + 16, b.len());
            }
            if let Ok(text) = decode_detach(b) {
                assert!(text.len() <= MAX_DETACH_TEXT);
            }
        }
        2 => {
            let mut w = u64s(b);
            let hdr = QueueHeader::new();
            hdr.tail.store(w.next().unwrap_or(0), Ordering::Relaxed);
            hdr.head.store(w.next().unwrap_or(0), Ordering::Relaxed);
            hdr.collected
                .store(w.next().unwrap_or(0), Ordering::Relaxed);
            let entries: Vec<Entry> = (0..4).map(|_| Entry::default()).collect();
            for e in &entries {
                e.seq.store(w.next().unwrap_or(0), Ordering::Relaxed);
                e.sample.store(w.next().unwrap_or(0), Ordering::Relaxed);
            }
            let returns: Vec<AtomicU32> = (0..6).map(|_| AtomicU32::new(0)).collect();
            let Ok(mut c) = QueueConsumer::new(&hdr, &entries[..], &returns[..]) else {
                return;
            };
            let mut takes = 0;
            while let Ok(Some(t)) = c.try_take() {
                takes += 1;
                assert!(
                    takes <= 4,
                    "more takes than entries from a queue nobody fills"
                );
                let _ = c.give_back(t.slot);
            }
        }
        _ => {
            let mut w = u64s(b);
            let hdr = QueueHeader::new();
            let entries: Vec<Entry> = (0..4).map(|_| Entry::default()).collect();
            let returns: Vec<AtomicU32> = (0..6).map(|_| AtomicU32::new(0)).collect();
            let Ok(mut p) = QueueProducer::new(&hdr, &entries[..], &returns[..], 8, 2) else {
                return;
            };
            let mut queued = [0u32; 8];
            for seq in 0..3u64 {
                if let Ok(Queued::Done { .. }) = p.try_queue(seq, seq as u32, 1) {
                    queued[seq as usize] += 1;
                }
            }
            hdr.head.store(w.next().unwrap_or(0), Ordering::Relaxed);
            hdr.returned.store(w.next().unwrap_or(0), Ordering::Relaxed);
            for r in &returns {
                r.store(w.next().unwrap_or(0) as u32, Ordering::Relaxed);
            }
            let mut released = [0u32; 8];
            let mut release = |slot: u32| released[slot as usize] += 1;
            if p.collect(&mut release).is_ok() {
                let _ = p.drop_oldest().map(|s| s.map(&mut release));
            }
            p.release_all(&mut release);
            assert_eq!(
                released, queued,
                "every queued reference released exactly once"
            );
        }
    }
});
