//! A server's counters.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of a server, readable while it runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Sessions accepted (handshake completed).
    pub sessions_opened: AtomicU64,
    /// Sessions ended.
    pub sessions_closed: AtomicU64,
    /// Connections refused (policy, limits, bad handshakes).
    pub refused: AtomicU64,
    /// Requests answered (successfully or with an error).
    pub calls: AtomicU64,
    /// Requests answered with an error.
    pub errors: AtomicU64,
}

impl Stats {
    /// Sessions open right now.
    pub fn active_sessions(&self) -> u64 {
        self.sessions_opened
            .load(Ordering::Acquire)
            .saturating_sub(self.sessions_closed.load(Ordering::Acquire))
    }
}
