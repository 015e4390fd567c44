//! What an HTTP server has done, as `shmlink pool status` shows it.

use serde::Serialize;

/// What an HTTP server (the front, or the workers that serve HTTP
/// themselves, summed) has done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HttpStats {
    /// Connections open now.
    pub connections_open: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Connections closed at once because `max_connections` were open.
    pub connections_refused: u64,
    /// Requests answered (by a worker or by the server itself).
    pub requests: u64,
    /// Responses with a 1xx-3xx status.
    pub ok: u64,
    /// Responses 4xx (413 included).
    pub client_errors: u64,
    /// Responses 5xx (the worker's error, or 502/503/504).
    pub server_errors: u64,
    /// Request bodies refused as too large (413).
    pub too_large: u64,
    /// Request body bytes received.
    pub bytes_in: u64,
    /// Response body bytes sent.
    pub bytes_out: u64,
    /// CPU time the workers spent in the HTTP server's own path (parsing,
    /// encoding, writing: everything but the application), in nanoseconds,
    /// over `front_samples` sampled requests (0 for the front, whose
    /// process is measured whole).
    pub front_cpu_ns: u64,
    /// Requests sampled for `front_cpu_ns`.
    pub front_samples: u64,
    /// How long requests took, from their head to their answer.
    pub durations: Durations,
    /// Responses per status of [`crate::STATUS_CODES`], in its order.
    pub codes: [u64; 28],
}

/// Request durations as a histogram: counts per bucket of
/// [`crate::DURATION_BOUNDS_US`] (not cumulative; a request slower than the
/// last bound is in none), their sum and their count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Durations {
    /// Requests per bucket.
    pub buckets: [u64; 12],
    /// Sum of the durations, in µs.
    pub sum_us: u64,
    /// Requests timed.
    pub count: u64,
}

impl Durations {
    fn add(&mut self, o: &Durations) {
        for (b, x) in self.buckets.iter_mut().zip(o.buckets) {
            *b = b.wrapping_add(x);
        }
        self.sum_us = self.sum_us.wrapping_add(o.sum_us);
        self.count = self.count.wrapping_add(o.count);
    }
}

impl HttpStats {
    /// Adds another server's counters to these (the pool sums its
    /// workers'); `connections_open` adds too.
    pub fn add(&mut self, o: &HttpStats) {
        self.connections_open = self.connections_open.wrapping_add(o.connections_open);
        self.connections = self.connections.wrapping_add(o.connections);
        self.connections_refused = self.connections_refused.wrapping_add(o.connections_refused);
        self.requests = self.requests.wrapping_add(o.requests);
        self.ok = self.ok.wrapping_add(o.ok);
        self.client_errors = self.client_errors.wrapping_add(o.client_errors);
        self.server_errors = self.server_errors.wrapping_add(o.server_errors);
        self.too_large = self.too_large.wrapping_add(o.too_large);
        self.bytes_in = self.bytes_in.wrapping_add(o.bytes_in);
        self.bytes_out = self.bytes_out.wrapping_add(o.bytes_out);
        self.front_cpu_ns = self.front_cpu_ns.wrapping_add(o.front_cpu_ns);
        self.front_samples = self.front_samples.wrapping_add(o.front_samples);
        self.durations.add(&o.durations);
        for (c, x) in self.codes.iter_mut().zip(o.codes) {
            *c = c.wrapping_add(x);
        }
    }

    /// Responses by status: each status of [`crate::STATUS_CODES`] that
    /// was answered, then what its class counted beyond those (labelled
    /// `2xx`, covering 1xx to 3xx, `4xx`, `5xx`), where that is not 0.
    pub fn by_status(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut known = [0u64; 3];
        for (&code, &n) in crate::STATUS_CODES.iter().zip(&self.codes) {
            let class = match code {
                0..=399 => 0,
                400..=499 => 1,
                _ => 2,
            };
            known[class] = known[class].wrapping_add(n);
            if n > 0 {
                out.push((code.to_string(), n));
            }
        }
        let totals = [self.ok, self.client_errors, self.server_errors];
        for ((label, total), known) in ["2xx", "4xx", "5xx"].into_iter().zip(totals).zip(known) {
            let other = total.saturating_sub(known);
            if other > 0 {
                out.push((label.to_string(), other));
            }
        }
        out
    }

    /// Mean CPU time of the server's own path per request, in µs, from the
    /// samples (`None` without samples).
    pub fn front_cpu_us(&self) -> Option<f64> {
        (self.front_samples > 0).then(|| self.front_cpu_ns as f64 / self.front_samples as f64 / 1e3)
    }
}
