//! Copying a large buffer into the arena with non-temporal stores: the
//! bytes go to memory without being read into the cache first and without
//! evicting what the caches hold. From [`STREAM_FROM`] on the streamed copy
//! is as fast or faster, even for a peer that then reads every byte; below
//! it a plain copy can win (`bench/copy/run.sh` measures both;
//! docs/design.md "Arena").
#![allow(unsafe_code)]

/// Copies of at least this many bytes are streamed. Measured on the
/// development VM (`bench/copy/run.sh`: the copy, then a read of every
/// byte on the other CPU), whose two vCPUs sometimes share a core and
/// sometimes not: below 8 MiB a plain copy wins in the first placement
/// (up to 2× at 64 KiB) and streaming in the second; from 12 MiB streaming
/// wins or ties in both. A constant rather than a share of the L3 size
/// because the VM reports a 320 MiB L3 through `cpuid` (so glibc's own
/// `memcpy` never streams here) against the 32 MiB it has.
pub const STREAM_FROM: usize = 12 << 20;

/// Copies `src` into `dst` (equal lengths, else panics like
/// `copy_from_slice`), streamed when at least [`STREAM_FROM`] bytes: the
/// copy [`Loan::fill_from`](crate::Loan::fill_from) makes, for memory that
/// is not a loan (a benchmark's control fill, say).
pub fn fill_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy into a loan of another length");
    if dst.len() < STREAM_FROM {
        dst.copy_from_slice(src);
    } else {
        streamed(dst, src);
    }
}

/// The streamed copy: plain copies up to the first 16-byte boundary of
/// `dst` and after the last whole 64-byte block, non-temporal stores of
/// 64 bytes at a time between, then a store fence so the stores are
/// ordered before whatever publishes the buffer (they are weakly ordered,
/// and a `Release` store does not order them).
#[cfg(target_arch = "x86_64")]
fn streamed(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    let head = dst.as_ptr().align_offset(16).min(dst.len());
    dst[..head].copy_from_slice(&src[..head]);
    let blocks = (dst.len() - head) / 64;
    let body_end = head + blocks * 64;
    {
        let d = &mut dst[head..body_end];
        let s = &src[head..body_end];
        for (d, s) in d.chunks_exact_mut(64).zip(s.chunks_exact(64)) {
            let dp = d.as_mut_ptr().cast::<__m128i>();
            let sp = s.as_ptr().cast::<__m128i>();
            // SAFETY: `d` and `s` are 64-byte chunks of live slices, so the
            // four 16-byte loads and stores stay inside them; loads are
            // unaligned ones, and `dp` is 16-byte aligned because `head`
            // brought `dst` to a 16-byte boundary and every chunk starts a
            // multiple of 64 bytes after it. SSE2 is part of x86_64.
            unsafe {
                let a = _mm_loadu_si128(sp);
                let b = _mm_loadu_si128(sp.add(1));
                let c = _mm_loadu_si128(sp.add(2));
                let e = _mm_loadu_si128(sp.add(3));
                _mm_stream_si128(dp, a);
                _mm_stream_si128(dp.add(1), b);
                _mm_stream_si128(dp.add(2), c);
                _mm_stream_si128(dp.add(3), e);
            }
        }
    }
    dst[body_end..].copy_from_slice(&src[body_end..]);
    // SAFETY: a fence has no memory operands; SSE is part of x86_64.
    unsafe { _mm_sfence() };
}

#[cfg(not(target_arch = "x86_64"))]
fn streamed(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn streamed_copy_is_exact_at_every_alignment_and_tail() {
        for dst_off in [0usize, 1, 7, 15, 16, 33] {
            for src_off in [0usize, 3, 16] {
                for len in [0usize, 1, 15, 16, 63, 64, 65, 4095, 4096 + 17] {
                    let src = pattern(len + src_off, 9);
                    let mut dst = vec![0xAAu8; len + dst_off + 8];
                    streamed(&mut dst[dst_off..dst_off + len], &src[src_off..]);
                    assert_eq!(
                        &dst[dst_off..dst_off + len],
                        &src[src_off..],
                        "{dst_off} {src_off} {len}"
                    );
                    assert!(
                        dst[..dst_off].iter().all(|&b| b == 0xAA),
                        "bytes before touched"
                    );
                    assert!(
                        dst[dst_off + len..].iter().all(|&b| b == 0xAA),
                        "bytes after touched"
                    );
                }
            }
        }
    }

    #[test]
    fn copies_above_the_threshold_are_exact() {
        let src = pattern(STREAM_FROM + 100, 3);
        let mut dst = vec![0u8; src.len()];
        fill_copy(&mut dst, &src);
        assert!(dst == src);
    }

    #[test]
    #[should_panic(expected = "another length")]
    fn lengths_must_match() {
        fill_copy(&mut [0u8; 4], &[1u8; 5]);
    }
}
