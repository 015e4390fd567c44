//! What `shmlink pool status` shows.

use serde::Serialize;

/// One worker.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerStatus {
    /// Process id.
    pub pid: u32,
    /// `starting`, `idle`, `busy` (running a call, or an HTTP request it
    /// accepted itself), `direct` (lent to a client on a direct line),
    /// `http` (serving HTTP itself, between requests) or `stopping`.
    pub state: String,
    /// Calls served (HTTP requests handed to its application, for a worker
    /// that serves HTTP itself).
    pub calls: u64,
    /// Resident memory in bytes (read every 20 ms).
    pub rss_bytes: u64,
    /// Seconds since it started.
    pub uptime_s: f64,
    /// Workers started in its place before it (after crashes, recycling or reloads).
    pub restarts: u64,
    /// The reload generation it belongs to.
    pub generation: u64,
    /// Whether it stops after its current call (recycling, reload).
    pub retiring: bool,
}

impl WorkerStatus {
    /// Whether it serves calls: idle, busy, or on a direct line.
    pub fn serves(&self) -> bool {
        matches!(self.state.as_str(), "idle" | "busy" | "direct" | "http")
    }
}

/// The pool.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The pool's process id (a successor's after a hot upgrade).
    pub pid: u32,
    /// How the last hot upgrade went, if any: `under way: ...`,
    /// `done: ...` or `failed: ...` with why.
    pub upgrade: Option<String>,
    /// Workers the pool keeps running.
    pub target: usize,
    /// Every worker process, in start order.
    pub workers: Vec<WorkerStatus>,
    /// Calls answered (by a worker or with a pool error).
    pub calls: u64,
    /// Calls answered with an error (the worker's or the pool's).
    pub errors: u64,
    /// Calls waiting for a worker now.
    pub queue_depth: usize,
    /// Calls per second over the last second.
    pub calls_per_s: f64,
    /// Workers started after the first ones.
    pub restarts: u64,
    /// Starts that failed in a row.
    pub failed_starts: u32,
    /// Milliseconds until the next start may happen, when backing off.
    pub backoff_ms: Option<u64>,
    /// Why the last start failed.
    pub last_failure: Option<String>,
    /// Reloads so far; also the current generation.
    pub reloads: u64,
    /// Seconds since the pool started.
    pub uptime_s: f64,
    /// HTTP counters (the front's, or every worker's summed), when the
    /// pool serves HTTP.
    pub http: Option<shmlink_http::HttpStats>,
}

impl Status {
    /// The status as a few lines of text.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "workers {} of {}, calls {}, errors {}, queue {}, {:.0} calls/s, restarts {}, reloads {}, up {:.0} s\n",
            self.workers.iter().filter(|w| w.serves()).count(),
            self.target,
            self.calls,
            self.errors,
            self.queue_depth,
            self.calls_per_s,
            self.restarts,
            self.reloads,
            self.uptime_s
        );
        if let Some(u) = &self.upgrade {
            out.push_str(&format!("pid {}; last upgrade: {u}\n", self.pid));
        }
        if self.failed_starts > 0 {
            out.push_str(&format!(
                "starts failing: {} in a row, next in {} ms; last: {}\n",
                self.failed_starts,
                self.backoff_ms.unwrap_or(0),
                self.last_failure.as_deref().unwrap_or("?")
            ));
        }
        if let Some(h) = &self.http {
            let own = h.front_cpu_us().map_or(String::new(), |us| {
                format!(", {us:.1} µs of CPU per request in the workers' own HTTP path")
            });
            out.push_str(&format!(
                "http: {} requests ({} ok, {} 4xx, {} 5xx, {} too large), connections {} open of {} ({} refused), {} bytes in, {} out{own}\n",
                h.requests,
                h.ok,
                h.client_errors,
                h.server_errors,
                h.too_large,
                h.connections_open,
                h.connections,
                h.connections_refused,
                h.bytes_in,
                h.bytes_out
            ));
        }
        out.push_str("    pid  state      calls      rss MiB   uptime s  restarts\n");
        for w in &self.workers {
            out.push_str(&format!(
                "{:>7}  {:<9} {:>7} {:>12.1} {:>10.1} {:>9}{}\n",
                w.pid,
                w.state,
                w.calls,
                w.rss_bytes as f64 / (1 << 20) as f64,
                w.uptime_s,
                w.restarts,
                if w.retiring { "  (retiring)" } else { "" }
            ));
        }
        out
    }
}
