//! Shared mappings of a segment.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsFd;
use std::ptr::NonNull;

use rustix::mm::{self, MapFlags, ProtFlags};

/// A `MAP_SHARED`, read-write mapping of a whole segment, unmapped on drop.
///
/// The mapped bytes may be written concurrently by the peer process at any
/// time, so this type never hands out references to them: callers get a raw
/// pointer and must only copy through it (or use atomics placed there).
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to another
// thread does not invalidate it, and all accesses go through raw pointers or
// atomics whose synchronisation is the callers' protocol.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` only exposes the pointer and length; see `Send` above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared and read-write. With `populate`, page
    /// tables are filled at once (`MAP_POPULATE`) so the first accesses do not
    /// fault one page at a time.
    ///
    /// # Errors
    /// Fails when `len` is zero or the kernel refuses the mapping.
    pub fn map_shared(fd: impl AsFd, len: usize, populate: bool) -> io::Result<Mapping> {
        let mut flags = MapFlags::SHARED;
        if populate {
            flags |= MapFlags::POPULATE;
        }
        let ptr = mmap_shared(fd, len, ProtFlags::READ | ProtFlags::WRITE, flags)?;
        Ok(Mapping { ptr, len })
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty mappings cannot be created.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The 32-bit atomic word at byte offset `off`, for words both processes
    /// only ever access atomically (sequence numbers, futex words).
    ///
    /// # Panics
    /// When `off` is not 4-aligned or the word is outside the mapping.
    pub fn atomic_u32(&self, off: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(off.is_multiple_of(4) && off.checked_add(4).is_some_and(|end| end <= self.len));
        // SAFETY: the word is 4-aligned (the mapping is page aligned) and
        // inside the mapping (asserted), which lives as long as the borrow of
        // `self`. `AtomicU32` has the size and alignment of `u32` and every bit
        // pattern is valid; concurrent atomic access by the peer is defined.
        unsafe {
            &*self
                .ptr
                .as_ptr()
                .add(off)
                .cast::<std::sync::atomic::AtomicU32>()
        }
    }

    /// The 64-bit atomic word at byte offset `off`, for words every process
    /// only ever accesses atomically (counters).
    ///
    /// # Panics
    /// When `off` is not 8-aligned or the word is outside the mapping.
    pub fn atomic_u64(&self, off: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(off.is_multiple_of(8) && off.checked_add(8).is_some_and(|end| end <= self.len));
        // SAFETY: as in `atomic_u32`: 8-aligned (the mapping is page
        // aligned), inside the mapping (asserted) for the borrow of `self`;
        // `AtomicU64` has the size and alignment of `u64` on the 64-bit
        // targets this crate builds for, and every bit pattern is valid.
        unsafe {
            &*self
                .ptr
                .as_ptr()
                .add(off)
                .cast::<std::sync::atomic::AtomicU64>()
        }
    }

    /// Copies `src` into the mapping at `off`.
    ///
    /// # Panics
    /// When the range is outside the mapping.
    pub fn write_at(&self, off: usize, src: &[u8]) {
        assert!(
            off.checked_add(src.len())
                .is_some_and(|end| end <= self.len),
            "write outside the mapping"
        );
        // SAFETY: the range is inside the mapping (asserted); `src` is ordinary
        // memory and cannot overlap it; bytes are copied, never referenced.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len())
        }
    }

    /// Copies bytes of the mapping at `off` into `dst`. The peer may be
    /// writing them; the copy may then be torn, never undefined behaviour
    /// for the caller, who gets plain bytes to validate.
    ///
    /// # Panics
    /// When the range is outside the mapping.
    pub fn read_at(&self, off: usize, dst: &mut [u8]) {
        assert!(
            off.checked_add(dst.len())
                .is_some_and(|end| end <= self.len),
            "read outside the mapping"
        );
        // SAFETY: as in `write_at`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }

    /// Touches every page so that later accesses do not take first-touch
    /// faults (used for segments prepared off the critical path).
    pub fn prefault(&self) {
        let page = 4096;
        let mut off = 0;
        while off < self.len {
            // SAFETY: `off < len`, so the byte is inside the mapping; a volatile
            // read of one byte cannot race in a way that is UB for `u8` reads of
            // shared memory we only observe.
            unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off)) };
            off += page;
        }
    }
}

/// `mmap(2)` of `len` bytes of `fd`, shared, at an address the kernel picks.
fn mmap_shared(
    fd: impl AsFd,
    len: usize,
    prot: ProtFlags,
    flags: MapFlags,
) -> io::Result<NonNull<u8>> {
    if len == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot map an empty segment",
        ));
    }
    // A fresh mapping at an address chosen by the kernel (null hint).
    // SAFETY: it aliases no Rust object; the result is checked before use.
    let raw = unsafe { mm::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) }
        .map_err(crate::failed("mmap"))?;
    NonNull::new(raw.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned a null mapping"))
}

/// A `MAP_SHARED`, read-only mapping of a peer's arena segment, unmapped on
/// drop. Its owner may write the bytes at any time (see [`Mapping`]).
#[derive(Debug)]
pub struct ReadOnlyMapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: as for `Mapping`: plain memory owned by this value, only read.
unsafe impl Send for ReadOnlyMapping {}
// SAFETY: `&ReadOnlyMapping` exposes only the pointer and length.
unsafe impl Sync for ReadOnlyMapping {}

impl ReadOnlyMapping {
    /// Maps `len` bytes of `fd` shared and read-only.
    ///
    /// # Errors
    /// Fails when `len` is zero or the kernel refuses the mapping.
    pub fn map(fd: impl AsFd, len: usize) -> io::Result<ReadOnlyMapping> {
        let ptr = mmap_shared(fd, len, ProtFlags::READ, MapFlags::SHARED)?;
        Ok(ReadOnlyMapping { ptr, len })
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty mappings cannot be created.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for ReadOnlyMapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe exactly the mapping created in `map`,
        // unmapped only here, once.
        let _ = unsafe { mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe exactly the mapping created in `map_shared`,
        // unmapped only here, once.
        let _ = unsafe { mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_mappings_see_the_same_bytes() {
        let fd = crate::memfd::create_sealed("map-test", 4096).expect("memfd");
        let a = Mapping::map_shared(&fd, 4096, false).expect("map a");
        let b = Mapping::map_shared(&fd, 4096, true).expect("map b");
        // SAFETY: both pointers are valid for 4096 bytes; single-threaded test.
        unsafe {
            a.as_ptr().add(100).write_volatile(42);
            assert_eq!(b.as_ptr().add(100).read_volatile(), 42);
        }
        b.prefault();
    }

    #[test]
    fn a_read_only_mapping_sees_the_owners_writes() {
        let (fd, owner) = crate::memfd::create_arena("map-ro-test", 8192).expect("arena");
        let ro = ReadOnlyMapping::map(&fd, 8192).expect("read-only");
        owner.write_at(4000, b"lent");
        // SAFETY: 4000..4004 is inside the 8192-byte mapping; single-threaded.
        let got = unsafe { std::slice::from_raw_parts(ro.as_ptr().add(4000), 4) };
        assert_eq!(got, b"lent");
    }
}
