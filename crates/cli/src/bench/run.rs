//! One measurement point over shmlink itself: sequential calls (latency,
//! calls/s, CPU per call), pipelined calls, and sessions per second.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use shmlink::{CallId, Client, ClientOptions};

use super::measure::{self, Checks, PointCtx};
use super::payload::Payloads;
use super::stats::{rate, Budget, Record};
use super::target::Target;

/// Calls kept in flight in the pipelined phase...
pub(crate) const MAX_DEPTH: usize = 32;
/// ...as long as their responses fit in this many bytes: 3/4 of the default
/// 64 KiB ring, so the figure measures the rings themselves. (Deeper
/// pipelines work too: a client waiting to send drains responses.)
const IN_FLIGHT_BYTES: usize = 48 << 10;
/// Frame header and padding per response, rounded up.
const FRAME_OVERHEAD: usize = 64;

/// The pipeline depth for responses of `reply` bytes.
pub(crate) fn pipeline_depth(reply: usize) -> usize {
    (IN_FLIGHT_BYTES / (reply + FRAME_OVERHEAD)).clamp(1, MAX_DEPTH)
}

/// Measures one point.
pub(crate) fn measure(
    target: &Target,
    payloads: &Payloads,
    ctx: &PointCtx<'_>,
    label: &str,
) -> anyhow::Result<Record> {
    let size = payloads.size();
    let reply = ctx.shape.len_for(size);
    let options = target.options(size);
    let mut checks = Checks::default();
    let mut client = Client::connect(&target.address, options.clone())
        .with_context(|| format!("{label}: connecting"))?;

    let seq = measure::sequential(ctx, |i| {
        let req = payloads.get(i);
        let t0 = Instant::now();
        let resp = client.call(req)?;
        let t1 = Instant::now();
        checks.check(ctx.shape, req, &resp);
        // As a demanding caller would: the next response reuses this buffer.
        client.recycle(resp);
        Ok((t0, t1))
    })
    .with_context(|| format!("{label}: sequential calls"))?;

    ctx.progress.phase("pipelined");
    let depth = pipeline_depth(reply);
    let (p_calls, p_elapsed) = pipelined(&mut client, payloads, depth, ctx, &mut checks)
        .with_context(|| format!("{label}: pipelined calls"))?;
    ctx.progress.phase("idle");
    let idle = idle_server_cpu(&mut client, payloads, ctx, &mut checks)
        .with_context(|| format!("{label}: idle session"))?;
    drop(client);

    ctx.progress.phase("sessions");
    let (s_count, s_elapsed) = sessions(&target.address, &options, payloads, ctx, &mut checks)
        .with_context(|| format!("{label}: sessions"))?;
    checks.ensure(label)?;

    let wait = target
        .wait
        .map_or_else(|| "-".to_string(), |w| w.to_string());
    Ok(Record {
        pipelined_calls_per_s: Some(rate(p_calls, p_elapsed)),
        pipeline_depth: Some(depth),
        sessions_per_s: Some(rate(s_count, s_elapsed)),
        idle_server_cpu_pct: idle,
        path: target.path.name().into(),
        baseline: Some(target.baseline().to_string()),
        ..seq.record(target.transport.scheme().to_string(), wait, size, reply)
    })
}

/// How long an open session is left idle to measure what it costs the server.
const IDLE_WINDOW: Duration = Duration::from_millis(300);

/// Server CPU (percent of one core) while an open session is idle: one call
/// (so a spinning server is at its full spin), then nothing for
/// [`IDLE_WINDOW`]. `None` when the server is not our child. Resolution: one
/// clock tick (10 ms) over the window, about 3%.
fn idle_server_cpu(
    client: &mut Client,
    payloads: &Payloads,
    ctx: &PointCtx<'_>,
    checks: &mut Checks,
) -> anyhow::Result<Option<f64>> {
    let Some(pid) = ctx.server_pid else {
        return Ok(None);
    };
    let req = payloads.get(0);
    let resp = client.call(req)?;
    checks.check(ctx.shape, req, &resp);
    let before = crate::child::process_cpu_time(pid)?;
    // A measurement window, not a wait for a condition.
    std::thread::sleep(IDLE_WINDOW);
    let used = crate::child::process_cpu_time(pid)?.saturating_sub(before);
    Ok(Some(100.0 * used.as_secs_f64() / IDLE_WINDOW.as_secs_f64()))
}

/// Keeps `depth` calls in flight until the budget is spent, then drains.
/// Returns the calls completed and the time until the last one.
fn pipelined(
    client: &mut Client,
    payloads: &Payloads,
    depth: usize,
    ctx: &PointCtx<'_>,
    checks: &mut Checks,
) -> anyhow::Result<(u64, Duration)> {
    let budget = ctx.budget;
    let mut in_flight: VecDeque<(CallId, u64)> = VecDeque::with_capacity(depth);
    let start = Instant::now();
    let (mut sent, mut done) = (0u64, 0u64);
    let mut sending = true;
    let may_send = |sent: u64, budget: Budget| budget.calls.is_none_or(|c| sent < c);
    while in_flight.len() < depth && may_send(sent, budget) {
        in_flight.push_back((client.send(payloads.get(sent))?, sent));
        sent += 1;
    }
    while !in_flight.is_empty() {
        let reply = client.recv()?;
        let pos = in_flight
            .iter()
            .position(|&(id, _)| id == reply.id)
            .ok_or_else(|| anyhow!("response to call {} which was not sent", reply.id))?;
        let Some((_, i)) = in_flight.remove(pos) else {
            continue;
        };
        let body = reply.result.map_err(shmlink::Error::Remote)?;
        checks.check(ctx.shape, payloads.get(i), &body);
        done += 1;
        if sending && done.is_multiple_of(16) {
            ctx.interrupt.check()?;
            sending = !budget.reached(start, Instant::now(), sent);
        }
        if sending && may_send(sent, budget) {
            in_flight.push_back((client.send(payloads.get(sent))?, sent));
            sent += 1;
        }
    }
    Ok((done, start.elapsed()))
}

/// Connect, one call, close — repeated until the budget is spent.
fn sessions(
    address: &str,
    options: &ClientOptions,
    payloads: &Payloads,
    ctx: &PointCtx<'_>,
    checks: &mut Checks,
) -> anyhow::Result<(u64, Duration)> {
    measure::timed_loop(ctx.budget, ctx.interrupt, None, |i| {
        let req = payloads.get(i);
        let t0 = Instant::now();
        let mut client = Client::connect(address, options.clone())?;
        let resp = client.call(req)?;
        drop(client);
        let t1 = Instant::now();
        checks.check(ctx.shape, req, &resp);
        Ok((t0, t1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_shrinks_for_large_responses() {
        assert_eq!(pipeline_depth(8), MAX_DEPTH);
        assert_eq!(pipeline_depth(256), MAX_DEPTH);
        assert_eq!(pipeline_depth(8192), 5);
        assert_eq!(pipeline_depth(128 << 10), 1);
    }
}
