//! The chunk reassembler (`shmlink_wire::Chunks`) fed a hostile frame stream.
//!
//! Input: `max_message: u32 LE` (clamped to 1 MiB; its lowest bit set means
//! chunked messages were not agreed), then repeated
//! (24-byte header, payload of `header.len` bytes, truncated to what is left).
//! Headers go through `FrameHeader::decode` as on the wire; a header that does
//! not decode is skipped, and any assembler error starts a fresh assembler (as
//! a session would drop the peer). Never panics; every message produced has a
//! body of exactly its header's total, equal to the bytes appended for it, and
//! within the limit; without chunking, only single frames are accepted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmlink_fuzz::Input;
use shmlink_wire::{Chunks, FrameHeader, HEADER_LEN};

const MAX_LIMIT: u32 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mut max = [0u8; 4];
    let b = input.bytes(4);
    max[..b.len()].copy_from_slice(b);
    let raw_max = u32::from_le_bytes(max);
    let chunked = raw_max & 1 == 0;
    let max = raw_max.min(MAX_LIMIT) as usize;

    let mut asm = Chunks::new(max, chunked);
    // What we appended for the message in progress: the model of the body.
    let mut model: Vec<u8> = Vec::new();
    let mut first: Option<FrameHeader> = None;

    while !input.is_empty() {
        let raw = input.bytes(HEADER_LEN);
        let Ok(h) = FrameHeader::decode(raw) else {
            continue;
        };
        let payload = input.bytes(h.len as usize);
        let was_in_progress = asm.in_progress();
        assert_eq!(was_in_progress, first.is_some());
        match asm.begin_chunk(&h) {
            Ok(buf) => {
                assert!(h.total <= max as u64, "accepted a message over the limit");
                assert!(
                    chunked || (!h.more() && u64::from(h.len) == h.total),
                    "accepted a chunk without the chunked capability"
                );
                if !was_in_progress {
                    first = Some(h);
                    model.clear();
                }
                assert_eq!(buf.len(), model.len(), "buffer lost or gained bytes");
                buf.extend_from_slice(payload);
                model.extend_from_slice(payload);
            }
            Err(_) => {
                asm = Chunks::new(max, chunked);
                first = None;
                model.clear();
                continue;
            }
        }
        match asm.finish(&h) {
            Ok(None) => {
                assert!(h.more(), "last chunk produced no message");
                assert!(asm.in_progress());
            }
            Ok(Some((head, body))) => {
                let f = first.take().expect("message with no first chunk");
                assert!(!h.more());
                assert!(!asm.in_progress());
                assert_eq!(body.len() as u64, f.total, "body length is not the total");
                assert_eq!(body.len() as u64, h.total);
                assert!(body.len() <= max);
                assert_eq!(body, model, "body is not the appended bytes");
                assert_eq!((head.kind, head.id), (f.kind, f.id));
                model.clear();
            }
            Err(_) => {
                asm = Chunks::new(max, chunked);
                first = None;
                model.clear();
            }
        }
    }
});
