//! The C client beside the Rust one: runs `shmlink-c-bench` (bench/c-client,
//! built against the installed C library) on the same server, size and
//! number of calls as the Rust point just measured, and turns its JSON line
//! into a record (`client: "c"`).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde::Deserialize;

use super::stats::{per_call_us, Record};
use crate::child;

/// What `shmlink-c-bench` prints.
#[derive(Debug, Deserialize)]
struct Output {
    size: usize,
    calls: u64,
    p50_ns: f64,
    p99_ns: f64,
    #[serde(default)]
    p999_ns: Option<f64>,
    mean_ns: f64,
    /// CPU time the client process used over the timed calls.
    cpu_ns: f64,
}

/// Measures the C client against `rust`'s server, size and call count.
pub(crate) fn measure(
    program: &Path,
    address: &str,
    rust: &Record,
    server_pid: Option<u32>,
) -> anyhow::Result<Record> {
    let warmup = (rust.calls / 20).min(1000);
    let server_cpu = |pid: Option<u32>| pid.map(child::process_cpu_time).transpose();
    let s0 = server_cpu(server_pid)?;
    // Inherits this thread's CPU pinning, as the Rust client runs pinned.
    let out = Command::new(program)
        .args([
            address.to_string(),
            rust.size.to_string(),
            rust.calls.max(1).to_string(),
            warmup.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run the C client {}", program.display()))?;
    let s1 = server_cpu(server_pid)?;
    if !out.status.success() {
        bail!(
            "the C client {} failed ({}): {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let o: Output = serde_json::from_str(text.trim())
        .with_context(|| format!("unexpected output of the C client: {text:?}"))?;
    if o.size != rust.size || o.calls == 0 {
        bail!(
            "the C client measured {} calls of {} bytes, not {} bytes",
            o.calls,
            o.size,
            rust.size
        );
    }
    Ok(Record {
        client: "c".into(),
        calls: o.calls,
        p50_us: o.p50_ns / 1e3,
        p99_us: o.p99_ns / 1e3,
        p999_us: o.p999_ns.unwrap_or(o.p99_ns) / 1e3,
        calls_per_s: if o.mean_ns > 0.0 {
            1e9 / o.mean_ns
        } else {
            0.0
        },
        pipelined_calls_per_s: None,
        pipeline_depth: None,
        sessions_per_s: None,
        client_cpu_us_per_call: o.cpu_ns / 1e3 / o.calls as f64,
        server_cpu_us_per_call: s0
            .zip(s1)
            .map(|(a, b)| per_call_us(b.saturating_sub(a), o.calls + warmup)),
        idle_server_cpu_pct: None,
        p50_vs_baseline: None,
        p50_spread: None,
        hog_cpu_pct: None,
        ..rust.clone()
    })
}
