//! What the pool's threads share: the options, the table of workers, the
//! log, the counters, the HTTP and metrics state; and a reload, which marks
//! every worker of an older generation for retirement.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink::Log;

use crate::options::PoolOptions;
use crate::status::{Status, WorkerStatus};
use crate::table::{Phase, Shared};
use crate::{http_workers, metrics, restart, succession};

/// What the pool's threads share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) opts: PoolOptions,
    pub(crate) shared: Shared,
    pub(crate) port_address: String,
    pub(crate) log: Arc<Log>,
    /// Output-copying threads of workers, joined at stop.
    pub(crate) copies: Mutex<Vec<JoinHandle<()>>>,
    /// Places that have had a worker (a later start there is a restart).
    pub(crate) started_places: Mutex<Vec<bool>>,
    pub(crate) calls: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) reloads: AtomicU64,
    /// The stop's `--shutdown-timeout` passed with calls still running.
    pub(crate) shutdown_expired: AtomicBool,
    pub(crate) started: Instant,
    /// (when, calls then, calls per second since the sample before).
    pub(crate) rate: Mutex<(Instant, u64, f64)>,
    /// The HTTP front's counters, when it runs.
    pub(crate) http: OnceLock<shmlink_http::StatsHandle>,
    /// What workers that serve HTTP themselves share, when they do.
    pub(crate) http_workers: Option<http_workers::HttpWorkers>,
    /// What `--metrics` shows.
    pub(crate) metrics: metrics::Metrics,
    /// Hot upgrades to a successor process.
    pub(crate) upgrades: succession::Upgrades,
}

impl Inner {
    /// A line in the pool's log.
    pub(crate) fn say(&self, line: &str) {
        self.log.write(&format!("shmlink pool: {line}"));
    }

    pub(crate) fn keep(&self, copies: Vec<JoinHandle<()>>) {
        let mut all = self.copies.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|h| !h.is_finished());
        all.extend(copies);
    }

    /// Records that `place` has had a worker; whether it had one before.
    pub(crate) fn started_once(&self, place: usize) -> bool {
        let mut places = self
            .started_places
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if places.len() <= place {
            places.resize(place + 1, false);
        }
        std::mem::replace(&mut places[place], true)
    }

    /// Updates the calls-per-second figure about once a second.
    pub(crate) fn sample_rate(&self) {
        let mut r = self.rate.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = r.0.elapsed();
        if elapsed >= Duration::from_secs(1) {
            let calls = self.calls_total();
            *r = (
                Instant::now(),
                calls,
                (calls - r.1) as f64 / elapsed.as_secs_f64(),
            );
        }
    }

    /// Calls answered: through the pool, and on direct lines given back.
    pub(crate) fn calls_total(&self) -> u64 {
        self.calls.load(Ordering::Relaxed) + self.shared.line_calls.load(Ordering::Relaxed)
    }

    pub(crate) fn calls_per_s(&self) -> f64 {
        self.rate.lock().unwrap_or_else(|p| p.into_inner()).2
    }

    /// The pool's status now.
    pub(crate) fn status(&self) -> Status {
        let inner = self;
        // Read before the table's lock is taken, which is held while no
        // other lock is waited for (an upgrade holds its own lock and then
        // takes the table's).
        let upgrade = inner.upgrades.outcome();
        let calls_per_s = inner.calls_per_s();
        let t = inner.shared.lock();
        let mut slots: Vec<_> = t.slots.iter().collect();
        slots.sort_by_key(|s| s.id);
        let workers = slots
            .iter()
            .map(|s| WorkerStatus {
                pid: s.pid,
                state: match (s.phase, s.http, &inner.http_workers) {
                    // Serving HTTP itself: busy while its application runs a request.
                    (Phase::Idle, Some(slot), Some(h)) => {
                        if h.runs_request(slot) { "busy" } else { "http" }.to_string()
                    }
                    (phase, _, _) => phase.name().to_string(),
                },
                calls: s.calls,
                rss_bytes: s.rss,
                uptime_s: s.started.elapsed().as_secs_f64(),
                restarts: t.restarts.get(s.place).copied().unwrap_or(0),
                generation: s.generation,
                retiring: s.retire || s.phase == Phase::Stopping,
            })
            .collect();
        Status {
            pid: std::process::id(),
            upgrade,
            target: inner.opts.workers,
            workers,
            calls: inner.calls_total(),
            errors: inner.errors.load(Ordering::Relaxed),
            queue_depth: t.waiting,
            calls_per_s,
            restarts: t.restarts.iter().sum(),
            failed_starts: t.failures,
            backoff_ms: t
                .backoff_until
                .and_then(|b| b.checked_duration_since(Instant::now()))
                .map(|d| d.as_millis() as u64),
            last_failure: t.last_failure.clone(),
            reloads: inner.reloads.load(Ordering::Relaxed),
            uptime_s: inner.started.elapsed().as_secs_f64(),
            http: match (&inner.http_workers, inner.http.get()) {
                (Some(h), _) => Some(h.stats(t.slots.iter().filter_map(|s| s.http))),
                (None, Some(front)) => Some(front.snapshot()),
                (None, None) => None,
            },
        }
    }
}

/// Starts a new generation: every worker of an older one is retired
/// between calls and replaced.
pub(crate) fn reload(inner: &Inner) {
    let mut t = inner.shared.lock();
    t.generation += 1;
    let generation = t.generation;
    for s in &mut t.slots {
        if s.generation < generation {
            s.retire = true;
            s.retire_why = Some(restart::Restart::Reload);
        }
    }
    inner.reloads.fetch_add(1, Ordering::Relaxed);
    inner.say(&format!("reload: starting generation {generation}"));
    drop(t);
    inner.shared.notify_all();
}
