//! The response a handler writes: in its ordinary buffer, or in place in
//! the session's arena (capability bit 5), where the client reads it
//! without a copy.

use shmlink_arena::{Loan, Owner};

/// The response a handler is writing, given to
/// [`Handler::respond`](crate::Handler::respond).
///
/// Its bytes are the ordinary buffer ([`Answer::bytes`], what
/// [`Handler::handle`](crate::Handler::handle) writes) or, after
/// [`Answer::loan`], a buffer of the session's arena written in place and
/// lent to the client as it is: no copy on either side.
#[derive(Debug)]
pub struct Answer<'a> {
    bytes: &'a mut Vec<u8>,
    arena: Option<&'a Owner>,
    threshold: usize,
    loan: &'a mut Option<Loan>,
}

impl<'a> Answer<'a> {
    /// An answer into `bytes` (empty), lending from `arena` (when the
    /// client reads lent responses) buffers of at least `threshold` bytes
    /// into `loan`.
    pub(crate) fn new(
        bytes: &'a mut Vec<u8>,
        arena: Option<&'a Owner>,
        threshold: usize,
        loan: &'a mut Option<Loan>,
    ) -> Self {
        Answer {
            bytes,
            arena,
            threshold,
            loan,
        }
    }

    /// The response in its ordinary buffer, to write or append to. After
    /// [`Answer::loan`], the lent bytes move into it first (one copy), and
    /// the response is no longer lent.
    #[inline]
    pub fn bytes(&mut self) -> &mut Vec<u8> {
        if let Some(loan) = self.loan.take() {
            self.bytes.clear();
            self.bytes.extend_from_slice(&loan);
        }
        self.bytes
    }

    /// Makes the response exactly `len` bytes, to be written in place
    /// through the slice returned (what was written before is dropped; the
    /// bytes start unspecified). When the client reads lent responses, `len`
    /// is at least the server's
    /// [`arena_threshold`](crate::ServerOptions::arena_threshold) and the
    /// session's arena has room, they lie in the arena and the client reads
    /// them where they lie; otherwise in the ordinary buffer.
    pub fn loan(&mut self, len: usize) -> &mut [u8] {
        *self.loan = None;
        if self.lend(len) {
            if let Some(loan) = self.loan.as_mut() {
                return &mut loan[..];
            }
        }
        self.bytes.clear();
        self.bytes.resize(len, 0);
        &mut self.bytes[..]
    }

    /// Makes the response exactly `len` bytes in the session's arena, to be
    /// written in place; `None` (and the response unchanged) when it cannot
    /// lie there: the client reads no lent responses, `len` is below the
    /// threshold, or the arena has no room. Never allocates elsewhere.
    pub fn try_loan(&mut self, len: usize) -> Option<&mut [u8]> {
        if !self.lend(len) {
            return None;
        }
        self.loan.as_mut().map(|loan| &mut loan[..])
    }

    /// Takes `len` bytes of the arena as the response when it can.
    fn lend(&mut self, len: usize) -> bool {
        if len < self.threshold {
            return false;
        }
        match self.arena.and_then(|a| a.loan(len).ok()) {
            Some(loan) => {
                self.bytes.clear();
                *self.loan = Some(loan);
                true
            }
            None => false,
        }
    }

    /// Whether the response lies in the arena (written through
    /// [`Answer::loan`] and lent as it is).
    #[inline]
    pub fn is_lent(&self) -> bool {
        self.loan.is_some()
    }

    /// The response's length so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.loan.as_ref().map_or(self.bytes.len(), |l| l.len())
    }

    /// Whether the response is empty so far.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
