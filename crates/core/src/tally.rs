//! What one session has carried, counted by its own thread and read by
//! others (a server's inspection): whole messages and their bodies' bytes
//! each way, and the arena bytes it maps.

use std::sync::atomic::{AtomicU64, Ordering};

/// A session's counters. Only the thread holding the session writes them
/// (a load and a store, no locked instruction on the data path); any
/// thread may read them.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    messages_in: AtomicU64,
    messages_out: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    arena_own: AtomicU64,
    arena_peer: AtomicU64,
}

/// A copy of a [`Tally`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) messages_in: u64,
    pub(crate) messages_out: u64,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) arena_own: u64,
    pub(crate) arena_peer: u64,
}

/// Adds `n` to a counter only one thread writes.
#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Tally {
    /// A whole message of `len` body bytes received.
    #[inline(always)]
    pub(crate) fn received(&self, len: usize) {
        bump(&self.messages_in, 1);
        bump(&self.bytes_in, len as u64);
    }

    /// A whole message of `len` body bytes sent.
    #[inline(always)]
    pub(crate) fn sent(&self, len: usize) {
        bump(&self.messages_out, 1);
        bump(&self.bytes_out, len as u64);
    }

    /// The arena bytes the session maps now: its own and its peer's.
    pub(crate) fn arena(&self, (own, peer): (u64, u64)) {
        self.arena_own.store(own, Ordering::Relaxed);
        self.arena_peer.store(peer, Ordering::Relaxed);
    }

    /// The counters now.
    pub(crate) fn counts(&self) -> Counts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counts {
            messages_in: get(&self.messages_in),
            messages_out: get(&self.messages_out),
            bytes_in: get(&self.bytes_in),
            bytes_out: get(&self.bytes_out),
            arena_own: get(&self.arena_own),
            arena_peer: get(&self.arena_peer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_went_each_way() {
        let t = Tally::default();
        t.received(10);
        t.received(5);
        t.sent(7);
        t.arena((4096, 8192));
        let c = t.counts();
        assert_eq!((c.messages_in, c.bytes_in), (2, 15));
        assert_eq!((c.messages_out, c.bytes_out), (1, 7));
        assert_eq!((c.arena_own, c.arena_peer), (4096, 8192));
    }
}
