//! The ring's data area, accessed only by copying.

/// A ring's data area. The ring never forms references into it: the peer may
/// write it at any time, so bytes are only ever copied in and out.
pub trait Memory {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the area is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `src` to `[off, off + src.len())`. The ring guarantees the range is in bounds.
    fn write(&self, off: usize, src: &[u8]);
    /// Copies `[off, off + dst.len())` into `dst`. The ring guarantees the range is in bounds.
    fn read(&self, off: usize, dst: &mut [u8]);
    /// Appends the `len` bytes at `off` to `out`. The ring guarantees the
    /// range is in bounds. The default zero-fills the new bytes, then copies;
    /// a memory that can copy into uninitialised capacity should.
    fn append(&self, off: usize, len: usize, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + len, 0);
        self.read(off, &mut out[start..]);
    }
    /// Starts bringing `[off, off + len)` into this CPU's cache, so that the
    /// reads that follow do not wait for one cache line after another. The
    /// ring guarantees the range is in bounds. A hint: the default does nothing.
    fn prefetch(&self, off: usize, len: usize) {
        let _ = (off, len);
    }
}
