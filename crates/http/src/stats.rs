//! The front's counters, shown by `shmlink pool status`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// What the front has done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HttpStats {
    /// Connections open now.
    pub connections_open: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Connections closed at once because `max_connections` were open.
    pub connections_refused: u64,
    /// Requests answered (by a worker or by the front).
    pub requests: u64,
    /// Responses with a 1xx-3xx status.
    pub ok: u64,
    /// Responses 4xx (413 included).
    pub client_errors: u64,
    /// Responses 5xx (the worker's error, or 502/503/504 from the pool).
    pub server_errors: u64,
    /// Request bodies refused as too large (413).
    pub too_large: u64,
    /// Request body bytes received.
    pub bytes_in: u64,
    /// Response body bytes sent.
    pub bytes_out: u64,
}

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) open: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) ok: AtomicU64,
    pub(crate) client_errors: AtomicU64,
    pub(crate) server_errors: AtomicU64,
    pub(crate) too_large: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
}

impl Counters {
    /// Counts one answered request.
    pub(crate) fn answered(&self, status: u16, body_in: usize, body_out: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let class = match status {
            0..=399 => &self.ok,
            400..=499 => &self.client_errors,
            _ => &self.server_errors,
        };
        class.fetch_add(1, Ordering::Relaxed);
        if status == 413 {
            self.too_large.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_in.fetch_add(body_in as u64, Ordering::Relaxed);
        self.bytes_out.fetch_add(body_out as u64, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HttpStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        HttpStats {
            connections_open: get(&self.open),
            connections: get(&self.connections),
            connections_refused: get(&self.refused),
            requests: get(&self.requests),
            ok: get(&self.ok),
            client_errors: get(&self.client_errors),
            server_errors: get(&self.server_errors),
            too_large: get(&self.too_large),
            bytes_in: get(&self.bytes_in),
            bytes_out: get(&self.bytes_out),
        }
    }
}

/// A handle on a front's counters that outlives nothing it should not: it
/// holds the counters themselves (the pool's status reads it).
#[derive(Debug, Clone)]
pub struct StatsHandle(pub(crate) std::sync::Arc<Counters>);

impl StatsHandle {
    /// The counters now.
    pub fn snapshot(&self) -> HttpStats {
        self.0.snapshot()
    }
}
