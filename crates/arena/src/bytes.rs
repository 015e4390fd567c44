//! The arena's `unsafe` besides `nt_copy.rs`: the bytes of a loan (the owner's
//! mapping, to fill) and of a view (the peer's segment, read-only).
#![allow(unsafe_code)]

use std::ops::{Deref, DerefMut};

use crate::owner::Loan;
use crate::peer::View;

/// Panics unless `off..off + len` lies within `map_len`.
fn check(off: u64, len: usize, map_len: usize, what: &str) -> usize {
    let off = usize::try_from(off).unwrap_or(usize::MAX);
    assert!(
        off.checked_add(len).is_some_and(|end| end <= map_len),
        "{what} outside its segment"
    );
    off
}

impl Deref for Loan {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let off = check(self.key.offset, self.len, self.map.len(), "loan");
        // SAFETY: the range is inside the mapping (checked), which the loan
        // keeps alive (`Arc`) as long as the borrow; the allocator gives each
        // range to one loan at a time, and the peer maps the segment
        // read-only (sealed `F_SEAL_FUTURE_WRITE`), so only this loan's
        // `&mut` borrows could write it, and they exclude this one.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), self.len) }
    }
}

impl DerefMut for Loan {
    fn deref_mut(&mut self) -> &mut [u8] {
        let off = check(self.key.offset, self.len, self.map.len(), "loan");
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow of
        // the range in this process, and no other process can write it.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr().add(off), self.len) }
    }
}

impl Deref for View {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let off = check(self.key.offset, self.len, self.map.len(), "view");
        // SAFETY: the range is inside the mapping (checked), which the view
        // keeps alive (`Arc`) as long as the borrow, mapped readable. The
        // owner (another process) may still write these bytes in breach of
        // the protocol: the contents may then change while read (documented
        // on `View`), every access stays inside readable memory, and no
        // length or offset is ever taken from it.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), self.len) }
    }
}
