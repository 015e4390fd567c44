//! The parts every measurement point shares: its context, the response
//! checks, and the timed sequential phase (warm-up, latency per call, calls
//! per second, CPU time of both processes).

use std::time::{Duration, Instant};

use anyhow::bail;

use super::interrupt::Interrupt;
use super::progress::Progress;
use super::stats::{per_call_us, rate, Budget, Latency, Record};
use crate::child;
use crate::reply::ReplyShape;

/// What a point needs besides its payloads.
#[derive(Debug)]
pub(crate) struct PointCtx<'a> {
    /// Time and call budget of each phase.
    pub(crate) budget: Budget,
    /// What the responses must be.
    pub(crate) shape: ReplyShape,
    /// Ctrl-C.
    pub(crate) interrupt: &'a Interrupt,
    /// The serving process, when it is our child (for its CPU time).
    pub(crate) server_pid: Option<u32>,
    /// Where to say what is running.
    pub(crate) progress: &'a Progress,
}

/// Counts responses whose length or content is wrong.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    total: u64,
    bad: u64,
    first_bad: Option<String>,
}

impl Checks {
    /// Checks one response.
    pub(crate) fn check(&mut self, shape: ReplyShape, request: &[u8], response: &[u8]) {
        self.total += 1;
        if !shape.matches(request, response) {
            self.bad += 1;
            if self.first_bad.is_none() {
                let want = shape.len_for(request.len());
                self.first_bad = Some(if response.len() == want {
                    format!("{want} bytes with the wrong content")
                } else {
                    format!("{} bytes instead of {want}", response.len())
                });
            }
        }
    }

    /// Fails when any response was wrong.
    pub(crate) fn ensure(&self, point: &str) -> anyhow::Result<()> {
        if self.bad > 0 {
            bail!(
                "{point}: {} of {} responses were wrong (first: {})",
                self.bad,
                self.total,
                self.first_bad.as_deref().unwrap_or("?")
            );
        }
        Ok(())
    }
}

/// Results of the sequential phase.
#[derive(Debug)]
pub(crate) struct Sequential {
    /// Round-trip latencies.
    pub(crate) latency: Latency,
    /// Calls made.
    pub(crate) calls: u64,
    /// From the first call's start to the last call's end.
    pub(crate) elapsed: Duration,
    /// CPU time of this process during the phase.
    pub(crate) client_cpu: Duration,
    /// CPU time of the server process during the phase.
    pub(crate) server_cpu: Option<Duration>,
}

impl Sequential {
    /// The record of a point measured by this phase alone (what other
    /// phases measure is `None`; the caller fills it in).
    pub(crate) fn record(
        &self,
        transport: String,
        wait: String,
        size: usize,
        reply: usize,
    ) -> Record {
        Record {
            transport,
            client: "rust".into(),
            wait,
            load: "quiet".into(),
            size,
            reply_size: reply,
            calls: self.calls,
            p50_us: self.latency.quantile_us(0.5),
            p99_us: self.latency.quantile_us(0.99),
            p999_us: self.latency.quantile_us(0.999),
            calls_per_s: rate(self.calls, self.elapsed),
            pipelined_calls_per_s: None,
            pipeline_depth: None,
            sessions_per_s: None,
            client_cpu_us_per_call: per_call_us(self.client_cpu, self.calls),
            server_cpu_us_per_call: self.server_cpu.map(|c| per_call_us(c, self.calls)),
            idle_server_cpu_pct: None,
            path: "-".into(),
            fill_p50_us: None,
            control_p50_us: None,
            mem_growth_mib: None,
            baseline: None,
            p50_vs_baseline: None,
            p50_spread: None,
            hog_cpu_pct: None,
        }
    }
}

/// Runs `call` until the budget is spent. `call(i)` makes round trip number
/// `i` and returns when it started and ended (checks come after the end).
/// Returns the calls made and the time from the start to the last end.
pub(crate) fn timed_loop(
    budget: Budget,
    interrupt: &Interrupt,
    mut latency: Option<&mut Latency>,
    mut call: impl FnMut(u64) -> anyhow::Result<(Instant, Instant)>,
) -> anyhow::Result<(u64, Duration)> {
    let start = Instant::now();
    let mut now = start;
    let mut n = 0u64;
    while !budget.reached(start, now, n) {
        interrupt.check()?;
        let (t0, t1) = call(n)?;
        if let Some(l) = latency.as_deref_mut() {
            l.record(t1.duration_since(t0));
        }
        now = t1;
        n += 1;
    }
    Ok((n, now.duration_since(start)))
}

/// Warm-up, then the timed sequential phase with CPU accounting.
pub(crate) fn sequential(
    ctx: &PointCtx<'_>,
    mut call: impl FnMut(u64) -> anyhow::Result<(Instant, Instant)>,
) -> anyhow::Result<Sequential> {
    ctx.progress.phase("warm-up");
    timed_loop(ctx.budget.warmup(), ctx.interrupt, None, &mut call)?;
    ctx.progress.phase("sequential");
    let mut latency = Latency::new()?;
    let server_cpu = |pid: Option<u32>| pid.map(child::process_cpu_time).transpose();
    let s0 = server_cpu(ctx.server_pid)?;
    let c0 = shmlink_sys::clock::process_cpu_time();
    let (calls, elapsed) = timed_loop(ctx.budget, ctx.interrupt, Some(&mut latency), &mut call)?;
    let c1 = shmlink_sys::clock::process_cpu_time();
    let s1 = server_cpu(ctx.server_pid)?;
    Ok(Sequential {
        latency,
        calls,
        elapsed,
        client_cpu: c1.saturating_sub(c0),
        server_cpu: s0.zip(s1).map(|(a, b)| b.saturating_sub(a)),
    })
}
