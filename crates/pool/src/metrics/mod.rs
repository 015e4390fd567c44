//! What the pool shows a Prometheus server (`--metrics HOST:PORT`): the
//! live instruments the dispatch and the supervisor record into (call
//! durations, errors by code, worker restarts by reason), and the rest read
//! from the pool's status at each scrape (HTTP request durations included:
//! the HTTP servers count them, [`durations`]). The text is the `prometheus` crate's encoding (the
//! Prometheus text format, 0.0.4, which `promtool check metrics` lints),
//! never written by hand; [`endpoint`] serves it.

mod durations;
pub(crate) mod endpoint;

use std::time::Duration;

use prometheus::{
    exponential_buckets, Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::restart::Restart;
use crate::status::Status;

/// Worker states always shown (0 when none is in them).
const STATES: [&str; 4] = ["idle", "busy", "direct", "starting"];

/// Duration buckets: 10 µs to about 42 s, ×2 apart.
fn buckets() -> Vec<f64> {
    exponential_buckets(1e-5, 2.0, 23).unwrap_or_default()
}

/// The live instruments (cheap to record into: atomics).
#[derive(Debug)]
pub(crate) struct Metrics {
    call_seconds: Histogram,
    call_errors: IntCounterVec,
    restarts: IntCounterVec,
}

impl Metrics {
    /// The instruments, empty.
    ///
    /// # Errors
    /// A name or bucket list the format refuses (fixed here: never).
    pub(crate) fn new() -> prometheus::Result<Metrics> {
        let restarts = IntCounterVec::new(
            Opts::new(
                "shmlink_pool_worker_restarts_total",
                "Workers replaced, by reason",
            ),
            &["reason"],
        )?;
        for r in Restart::ALL {
            // Every reason shown from the start, at 0.
            restarts.with_label_values(&[r.label()]);
        }
        Ok(Metrics {
            call_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "shmlink_pool_call_duration_seconds",
                    "Time of a call through the pool, from its arrival to its answer \
                     (calls on direct lines do not pass the pool)",
                )
                .buckets(buckets()),
            )?,
            call_errors: IntCounterVec::new(
                Opts::new(
                    "shmlink_pool_call_errors_total",
                    "Calls through the pool answered with an error, by remote error code",
                ),
                &["code"],
            )?,
            restarts,
        })
    }

    /// A call through the pool ended after `took`, with this error code if
    /// it failed.
    pub(crate) fn call(&self, took: Duration, error: Option<u32>) {
        self.call_seconds.observe(took.as_secs_f64());
        if let Some(code) = error {
            self.call_errors
                .with_label_values(&[format!("{code:#010x}").as_str()])
                .inc();
        }
    }

    /// A worker stopped and is replaced, for this reason.
    pub(crate) fn restart(&self, why: Restart) {
        self.restarts.with_label_values(&[why.label()]).inc();
    }

    /// Everything, as the text a scrape gets (the Prometheus text format):
    /// the instruments and the figures of `status`.
    ///
    /// # Errors
    /// The encoder failing (never with these metrics).
    pub(crate) fn encode(&self, status: &Status) -> prometheus::Result<String> {
        let r = Registry::new();
        let workers = IntGaugeVec::new(
            Opts::new("shmlink_pool_workers", "Worker processes by state"),
            &["state"],
        )?;
        for s in STATES {
            workers.with_label_values(&[s]);
        }
        let memory = IntGaugeVec::new(
            Opts::new(
                "shmlink_pool_worker_memory_bytes",
                "Resident memory of each worker process",
            ),
            &["pid"],
        )?;
        for w in &status.workers {
            workers.with_label_values(&[w.state.as_str()]).inc();
            memory
                .with_label_values(&[w.pid.to_string().as_str()])
                .set(i64::try_from(w.rss_bytes).unwrap_or(i64::MAX));
        }
        r.register(Box::new(workers))?;
        r.register(Box::new(memory))?;
        r.register(Box::new(gauge(
            "shmlink_pool_queue_depth",
            "Calls (HTTP requests at the front included) waiting for a worker",
            status.queue_depth as u64,
        )?))?;
        r.register(Box::new(counter(
            "shmlink_pool_calls_total",
            "Calls answered, through the pool and on direct lines",
            status.calls,
        )?))?;
        r.register(Box::new(counter(
            "shmlink_pool_reloads_total",
            "Reloads",
            status.reloads,
        )?))?;
        r.register(Box::new(self.call_errors.clone()))?;
        r.register(Box::new(self.restarts.clone()))?;
        r.register(Box::new(self.call_seconds.clone()))?;
        if let Some(h) = &status.http {
            let by_code = IntCounterVec::new(
                Opts::new(
                    "shmlink_http_requests_total",
                    "HTTP requests answered, by status (the common ones one by one; \
                     any other under its class: 2xx for 1xx to 3xx, 4xx, 5xx)",
                ),
                &["code"],
            )?;
            for (code, n) in h.by_status() {
                by_code.with_label_values(&[code.as_str()]).inc_by(n);
            }
            r.register(Box::new(by_code))?;
            r.register(Box::new(gauge(
                "shmlink_http_connections",
                "HTTP connections open",
                h.connections_open,
            )?))?;
        }
        let mut families = r.gather();
        if let Some(h) = &status.http {
            families.push(durations::family(&h.durations));
        }
        let mut out = Vec::new();
        TextEncoder::new().encode(&families, &mut out)?;
        String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }
}

/// A gauge at `n`.
fn gauge(name: &str, help: &str, n: u64) -> prometheus::Result<IntGauge> {
    let g = IntGauge::new(name, help)?;
    g.set(i64::try_from(n).unwrap_or(i64::MAX));
    Ok(g)
}

/// A counter at `n`.
fn counter(name: &str, help: &str, n: u64) -> prometheus::Result<IntCounter> {
    let c = IntCounter::new(name, help)?;
    c.inc_by(n);
    Ok(c)
}
