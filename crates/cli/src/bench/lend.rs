//! A point of a `--paths` run: sequential calls only, each request
//! travelling by its path (streamed, lent by `call()`, or written in place
//! into a loan), the loan's fill timed apart from the round trip, a control
//! call after an equal fill elsewhere, and the memory both processes and the
//! arena hold from after the first call to the end. Loans are filled by
//! `Loan::fill_from`, the copy `call()` makes into the arena, so the fill's
//! time is what the arena path spends copying; the control's fill into the
//! client's own memory is the same copy (`shmlink::fill_copy`).

use std::time::Instant;

use anyhow::Context;
use shmlink::Client;

use super::measure::{self, Checks, PointCtx};
use super::payload::Payloads;
use super::stats::{Latency, Record};
use super::target::{LendPath, Target};

const MIB: f64 = (1 << 20) as f64;

/// Measures one point of a `--paths` run over `client`.
pub(crate) fn measure(
    target: &Target,
    payloads: &Payloads,
    ctx: &PointCtx<'_>,
    label: &str,
) -> anyhow::Result<Record> {
    let mut client = Client::connect(&target.address, target.options(payloads.size()))
        .with_context(|| format!("{label}: connecting"))?;
    let client = &mut client;
    let mut checks = Checks::default();
    let mut fill = Latency::new()?;
    let mut control = Latency::new()?;
    let mut scratch: Option<Vec<u8>> = None;
    let small = [7u8; 64];
    let mut after_first = None;
    let seq = measure::sequential(ctx, |i| {
        let req = payloads.get(i);
        let (t0, resp) = if target.path == LendPath::Loan {
            let f0 = Instant::now();
            let mut loan = client.loan(req.len())?;
            loan.fill_from(req);
            let t0 = Instant::now();
            fill.record(t0.duration_since(f0));
            (t0, client.call_loan(loan)?)
        } else {
            let t0 = Instant::now();
            (t0, client.call(req)?)
        };
        let t1 = Instant::now();
        checks.check(ctx.shape, req, &resp);
        client.recycle(resp);
        if target.path == LendPath::Loan {
            // The control: the same fill again, into memory of the client's
            // own, then a small call, timed apart. It meets the caches and
            // TLBs the loan call met, without the arena.
            let own = scratch.get_or_insert_with(|| vec![0; req.len()]);
            shmlink::fill_copy(own, req);
            let p0 = Instant::now();
            let r = client.call(&small)?;
            control.record(p0.elapsed());
            checks.check(ctx.shape, &small, &r);
            client.recycle(r);
        }
        if after_first.is_none() {
            after_first = Some(memory(client, ctx.server_pid));
        }
        Ok((t0, t1))
    })
    .with_context(|| format!("{label}: sequential calls"))?;
    let growth = memory(client, ctx.server_pid) as f64 - after_first.unwrap_or(0) as f64;
    checks.ensure(label)?;
    let wait = target
        .wait
        .map_or_else(|| "-".to_string(), |w| w.to_string());
    let size = payloads.size();
    let transport = target.transport.scheme().to_string();
    Ok(Record {
        path: target.path.name().into(),
        fill_p50_us: (target.path == LendPath::Loan).then(|| fill.quantile_us(0.5)),
        control_p50_us: (target.path == LendPath::Loan).then(|| control.quantile_us(0.5)),
        mem_growth_mib: Some(growth / MIB),
        baseline: Some(target.baseline().to_string()),
        ..seq.record(transport, wait, size, ctx.shape.len_for(size))
    })
}

/// Bytes held: this process's RSS, the server's (when it is our child),
/// and the client's arena mapping.
fn memory(client: &Client, server: Option<u32>) -> u64 {
    rss("self") + server.map_or(0, |p| rss(&p.to_string())) + client.arena_bytes()
}

/// Resident bytes of process `pid` (`/proc/PID/statm`, pages of 4 KiB).
fn rss(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}
