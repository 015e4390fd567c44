//! What a measurement point produces: the latency histogram, the time and
//! call budget of a phase, and the record that ends up in the table and the
//! JSON file.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// Round-trip latencies of one point, in nanoseconds.
#[derive(Debug)]
pub(crate) struct Latency(Histogram<u64>);

impl Latency {
    /// An empty histogram from 1 ns to 60 s at 3 significant digits.
    pub(crate) fn new() -> anyhow::Result<Self> {
        Ok(Latency(Histogram::new_with_bounds(1, 60_000_000_000, 3)?))
    }

    /// Records one round trip (clamped to the histogram's range).
    pub(crate) fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.0.saturating_record(ns);
    }

    /// The latency at quantile `q` in microseconds.
    pub(crate) fn quantile_us(&self, q: f64) -> f64 {
        self.0.value_at_quantile(q) as f64 / 1000.0
    }
}

/// How long a phase runs: until its time is up or it made its calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Longest time of a phase.
    pub(crate) time: Duration,
    /// Calls after which a phase stops early, with `--requests`.
    pub(crate) calls: Option<u64>,
}

impl Budget {
    /// Whether a phase that started at `start` and made `n` calls is done.
    pub(crate) fn reached(&self, start: Instant, now: Instant, n: u64) -> bool {
        self.calls.is_some_and(|c| n >= c) || now.duration_since(start) >= self.time
    }

    /// The warm-up before a phase: 5% of it, at most 1000 calls.
    pub(crate) fn warmup(&self) -> Budget {
        Budget {
            time: self.time / 20,
            calls: Some(self.calls.map_or(1000, |c| (c / 20).clamp(1, 1000))),
        }
    }
}

/// Results of one measurement point, one row of the table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Record {
    /// `shm`, `unix`, `tcp`, `baseline-spin`, `baseline-futex` or `baseline-unix`.
    pub(crate) transport: String,
    /// The client that made the calls: `rust` (this program) or `c` (the C
    /// library through `shmlink-c-bench`).
    pub(crate) client: String,
    /// Wait strategy of both sides (`sleep`, `spin`, `busy`), `-` where none applies.
    pub(crate) wait: String,
    /// The machine's load while it ran: `quiet`, or `busy` (a hog process
    /// spinning on the servers' CPU).
    pub(crate) load: String,
    /// Request size in bytes.
    pub(crate) size: usize,
    /// Response size in bytes.
    pub(crate) reply_size: usize,
    /// Calls in the sequential phase.
    pub(crate) calls: u64,
    /// Median round trip, µs.
    pub(crate) p50_us: f64,
    /// 99th percentile round trip, µs.
    pub(crate) p99_us: f64,
    /// 99.9th percentile round trip, µs.
    pub(crate) p999_us: f64,
    /// Sequential calls per second.
    pub(crate) calls_per_s: f64,
    /// Pipelined calls per second (`None` for baselines).
    pub(crate) pipelined_calls_per_s: Option<f64>,
    /// Calls kept in flight in the pipelined phase.
    pub(crate) pipeline_depth: Option<usize>,
    /// Connect + one call + close, per second (`None` for baselines).
    pub(crate) sessions_per_s: Option<f64>,
    /// Client process CPU time per sequential call, µs.
    pub(crate) client_cpu_us_per_call: f64,
    /// Server process CPU time per sequential call, µs (`None` when the
    /// server is not our child).
    pub(crate) server_cpu_us_per_call: Option<f64>,
    /// Server CPU, percent of one core, while a session is open and idle
    /// (`None` for baselines and servers that are not our child).
    pub(crate) idle_server_cpu_pct: Option<f64>,
    /// How the requests travelled: `copy`, `arena` or `loan` (`-` for
    /// baselines).
    pub(crate) path: String,
    /// Loan path: median time to fill a loan with the request, µs (not in
    /// the round trip).
    pub(crate) fill_p50_us: Option<f64>,
    /// Loan path, the control: median round trip of a 64-byte call made
    /// right after the same fill into memory of the client's own, µs: what
    /// the caches and TLBs a fill leaves (and the time it takes) cost the
    /// next call whatever it carries, arena or not.
    pub(crate) control_p50_us: Option<f64>,
    /// `--paths` points: growth of the client's and server's RSS and of the
    /// arena's mapped bytes from after the first calls to the end, MiB.
    pub(crate) mem_growth_mib: Option<f64>,
    /// The baseline this row is compared with.
    pub(crate) baseline: Option<String>,
    /// `p50_us` divided by the baseline's `p50_us` at the same size.
    pub(crate) p50_vs_baseline: Option<f64>,
    /// With several rounds: the largest p50 of a round over the smallest,
    /// how much the same point moved between rounds.
    pub(crate) p50_spread: Option<f64>,
    /// Under the busy load: percent of one CPU the hog got while the point
    /// ran (what the strategy left to other work).
    pub(crate) hog_cpu_pct: Option<f64>,
}

/// CPU time in µs per call, 0 when no call was made.
pub(crate) fn per_call_us(cpu: Duration, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        cpu.as_secs_f64() * 1e6 / calls as f64
    }
}

/// Calls per second, 0 when no time elapsed.
pub(crate) fn rate(calls: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        calls as f64 / s
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_in_microseconds() {
        let mut l = Latency::new().expect("histogram");
        for us in 1..=100 {
            l.record(Duration::from_micros(us));
        }
        let p50 = l.quantile_us(0.5);
        assert!((49.0..=51.0).contains(&p50), "{p50}");
        assert!(l.quantile_us(0.999) >= 99.0);
    }

    #[test]
    fn budget_stops_on_calls_or_time() {
        let b = Budget {
            time: Duration::from_secs(10),
            calls: Some(5),
        };
        let t = Instant::now();
        assert!(!b.reached(t, t, 4));
        assert!(b.reached(t, t, 5));
        assert!(b.reached(t, t + Duration::from_secs(10), 0));
        assert_eq!(b.warmup().calls, Some(1));
    }
}

/// Median of a figure across rounds.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The largest over the smallest (`None` when the smallest is 0).
fn spread(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (lo, hi) = v.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    (lo > 0.0 && lo.is_finite()).then(|| hi / lo)
}

fn median_opt(v: Vec<Option<f64>>) -> Option<f64> {
    let some: Vec<f64> = v.into_iter().flatten().collect();
    (!some.is_empty()).then(|| median(some))
}

/// Folds rounds of the same plan (same points, same order) into one record
/// per point, each figure the median across rounds.
pub(crate) fn median_of_rounds(mut rounds: Vec<Vec<Record>>) -> Vec<Record> {
    if rounds.len() <= 1 {
        return rounds.pop().unwrap_or_default();
    }
    let first = rounds[0].clone();
    first
        .into_iter()
        .enumerate()
        .map(|(i, mut rec)| {
            let all: Vec<&Record> = rounds.iter().filter_map(|r| r.get(i)).collect();
            let f = |get: fn(&Record) -> f64| median(all.iter().map(|r| get(r)).collect());
            let fo =
                |get: fn(&Record) -> Option<f64>| median_opt(all.iter().map(|r| get(r)).collect());
            rec.calls = all.iter().map(|r| r.calls).sum();
            rec.p50_us = f(|r| r.p50_us);
            rec.p50_spread = spread(all.iter().map(|r| r.p50_us));
            rec.hog_cpu_pct = fo(|r| r.hog_cpu_pct);
            rec.p99_us = f(|r| r.p99_us);
            rec.p999_us = f(|r| r.p999_us);
            rec.calls_per_s = f(|r| r.calls_per_s);
            rec.pipelined_calls_per_s = fo(|r| r.pipelined_calls_per_s);
            rec.sessions_per_s = fo(|r| r.sessions_per_s);
            rec.client_cpu_us_per_call = f(|r| r.client_cpu_us_per_call);
            rec.server_cpu_us_per_call = fo(|r| r.server_cpu_us_per_call);
            rec.idle_server_cpu_pct = fo(|r| r.idle_server_cpu_pct);
            rec.fill_p50_us = fo(|r| r.fill_p50_us);
            rec.control_p50_us = fo(|r| r.control_p50_us);
            rec.mem_growth_mib = fo(|r| r.mem_growth_mib);
            rec
        })
        .collect()
}

#[cfg(test)]
mod median_tests {
    use super::*;

    #[test]
    fn medians_ignore_one_disturbed_round() {
        assert_eq!(median(vec![0.3, 9.0, 0.28]), 0.3);
        assert_eq!(median(vec![1.0, 3.0]), 2.0);
        assert_eq!(median_opt(vec![None, Some(2.0), Some(4.0)]), Some(3.0));
    }
}
