//! A record being consumed: bounds-checked copies out of the ring.

use crate::error::RingError;
use crate::memory::Memory;

/// The payload of the record being consumed. Only copies are handed out.
#[derive(Debug)]
pub struct Record<'r, M: Memory> {
    mem: &'r M,
    off: usize,
    len: usize,
}

impl<'r, M: Memory> Record<'r, M> {
    pub(crate) fn new(mem: &'r M, off: usize, len: usize) -> Self {
        Record { mem, off, len }
    }

    /// Payload length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `dst.len()` payload bytes starting at `off` into `dst`.
    ///
    /// # Errors
    /// [`RingError::OutOfRange`] when the range is outside the payload
    /// (nothing is copied).
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), RingError> {
        match off.checked_add(dst.len()) {
            Some(end) if end <= self.len => {
                self.mem.read(self.off + off, dst);
                Ok(())
            }
            _ => Err(RingError::OutOfRange {
                off,
                len: dst.len(),
                record: self.len,
            }),
        }
    }

    /// Appends the whole payload to `out`.
    pub fn read_to_vec(&self, out: &mut Vec<u8>) {
        self.mem.append(self.off, self.len, out);
    }

    /// Appends the payload from `off` to its end to `out`.
    ///
    /// # Errors
    /// [`RingError::OutOfRange`] when `off` is past the payload (nothing is
    /// copied).
    #[inline]
    pub fn append_from(&self, off: usize, out: &mut Vec<u8>) -> Result<(), RingError> {
        match self.len.checked_sub(off) {
            Some(n) => {
                self.mem.append(self.off + off, n, out);
                Ok(())
            }
            None => Err(RingError::OutOfRange {
                off,
                len: 0,
                record: self.len,
            }),
        }
    }
}
