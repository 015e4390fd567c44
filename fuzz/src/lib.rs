//! Helpers shared by the fuzz targets: a cursor over the fuzzer's input and a
//! bounds-asserting `Vec`-backed ring data area.

use std::cell::RefCell;

use shmlink_ring::Memory;

/// Reads fixed-size values off the front of the fuzzer's input; reads past
/// the end yield zeros / `None`, so every input is accepted.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Up to `n` bytes (fewer when the input runs out).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }

    pub fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }

    /// A little-endian u64; missing bytes are zero.
    pub fn u64(&mut self) -> u64 {
        let mut a = [0u8; 8];
        let b = self.bytes(8);
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a)
    }
}

/// A ring data area in a `Vec`. The ring accesses it through `&VecMem` (so the
/// fuzz target can keep playing the hostile peer and scribble on it between
/// calls). Every access asserts it is in bounds: an out-of-bounds access by the
/// ring is a panic, which the fuzzer reports as a crash.
pub struct VecMem(pub RefCell<Vec<u8>>);

impl VecMem {
    pub fn new(len: usize) -> Self {
        VecMem(RefCell::new(vec![0; len]))
    }

    /// The peer writes `src` at `off` (clipped to the area).
    pub fn scribble(&self, off: usize, src: &[u8]) {
        let mut v = self.0.borrow_mut();
        let off = off.min(v.len());
        let n = src.len().min(v.len() - off);
        v[off..off + n].copy_from_slice(&src[..n]);
    }

    pub fn snapshot(&self, off: usize, n: usize) -> Vec<u8> {
        self.0.borrow()[off..off + n].to_vec()
    }
}

impl Memory for &VecMem {
    fn len(&self) -> usize {
        self.0.borrow().len()
    }

    fn write(&self, off: usize, src: &[u8]) {
        let mut v = self.0.borrow_mut();
        let end = off.checked_add(src.len());
        assert!(
            matches!(end, Some(e) if e <= v.len()),
            "ring wrote out of bounds: [{off}, +{}) of {}",
            src.len(),
            v.len()
        );
        v[off..off + src.len()].copy_from_slice(src);
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        let v = self.0.borrow();
        let end = off.checked_add(dst.len());
        assert!(
            matches!(end, Some(e) if e <= v.len()),
            "ring read out of bounds: [{off}, +{}) of {}",
            dst.len(),
            v.len()
        );
        dst.copy_from_slice(&v[off..off + dst.len()]);
    }
}
