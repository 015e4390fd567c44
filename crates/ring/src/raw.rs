//! [`Memory`] over a raw mapped region.
#![allow(unsafe_code)]

use crate::memory::Memory;

/// A data area at a raw pointer (a shared mapping).
#[derive(Debug)]
pub struct RawMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the region is shared memory accessed only by copying; which thread
// copies does not matter, and the ring protocol orders the copies.
unsafe impl Send for RawMemory {}
// SAFETY: as for Send; `&RawMemory` only allows the same copies.
unsafe impl Sync for RawMemory {}

impl RawMemory {
    /// Wraps `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as
    /// this value (and any ring built on it) lives, and must not be accessed
    /// through Rust references while it is (only other raw copies or the peer
    /// process may touch it).
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Self {
        debug_assert!(!ptr.is_null());
        RawMemory { ptr, len }
    }
}

impl Memory for RawMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn write(&self, off: usize, src: &[u8]) {
        assert!(
            off <= self.len && src.len() <= self.len - off,
            "ring write out of bounds"
        );
        // SAFETY: the range is inside the region (asserted above), which the
        // constructor's contract keeps valid; `src` is ordinary memory and
        // cannot overlap the shared region.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) }
    }

    fn prefetch(&self, off: usize, len: usize) {
        let end = off.saturating_add(len).min(self.len);
        let mut at = off;
        while at < end {
            // SAFETY: `at < end <= len`, so the byte is inside the region; a
            // volatile one-byte read of shared memory yields a plain byte we
            // discard. Independent loads, so the CPU fetches the lines at once.
            let _ = unsafe { std::ptr::read_volatile(self.ptr.add(at)) };
            at += 64;
        }
    }

    fn append(&self, off: usize, len: usize, out: &mut Vec<u8>) {
        assert!(
            off <= self.len && len <= self.len - off,
            "ring read out of bounds"
        );
        out.reserve(len);
        let start = out.len();
        // SAFETY: the source range is inside the region (asserted above);
        // `reserve` made room for `len` bytes after `start`, which the copy
        // initialises before `set_len` covers them. The region never overlaps
        // a Vec's heap allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr().add(start), len);
            out.set_len(start + len);
        }
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(
            off <= self.len && dst.len() <= self.len - off,
            "ring read out of bounds"
        );
        // SAFETY: as in `write`; the bytes are copied out, never referenced,
        // so a racing peer can at worst make us copy garbage, which the
        // caller validates.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), dst.as_mut_ptr(), dst.len()) }
    }
}
