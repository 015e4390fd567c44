//! `shmlink bench --pubsub`: publish/subscribe measured against its goals
//! (issue 51), each subscriber a process of its own (`shmlink
//! __pubsub-sub`):
//! - one-way latency at 64 B to one subscriber that polls (the publisher
//!   stamps each sample with `CLOCK_MONOTONIC`, the subscriber reads the
//!   stamp on arrival), beside iceoryx2's publish/subscribe measured the
//!   same way by `bench/iceoryx2` when `--iceoryx2 PROGRAM` is given;
//! - the publisher's CPU per 64-byte sample with 1 and with 8 polling
//!   subscribers, at full rate;
//! - 16 MiB samples written in place to 1 and to 8 subscribers: the
//!   publisher's CPU per sample against writing 16 MiB once (the cost of
//!   one copy of the sample), in the same run.

use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use shmlink_pubsub::{
    Error as PubSubError, Overflow, Publisher, Subscriber, SubscriberOptions, TopicOptions,
};
use shmlink_sys::clock::{monotonic_ns, thread_cpu_ns};

use super::config::BenchArgs;
use crate::child::TempDir;
use crate::goals::{summary, Verdict};

/// Options of the hidden subscriber process.
#[derive(Debug, Args)]
pub(crate) struct SubArgs {
    address: String,
    /// Samples to take before reporting.
    #[arg(long)]
    count: u64,
    /// Record the one-way latency of each sample (its first 8 bytes are
    /// the publisher's stamp).
    #[arg(long)]
    latency: bool,
}

const TOPIC: &str = "bench";
const MIB16: usize = 16 << 20;

/// The subscriber process: polls (never sleeps), reads each sample in
/// place, prints `{received, missed, p50_ns, p99_ns}`.
pub(crate) fn run_sub(args: &SubArgs) -> anyhow::Result<()> {
    let options = SubscriberOptions {
        spin: Duration::from_secs(3600),
        ..SubscriberOptions::default()
    };
    let mut sub = Subscriber::connect(&args.address, TOPIC, options)?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut touched = 0u8;
    while sub.received() < args.count {
        match sub.try_receive() {
            Ok(Some(s)) => {
                let now = monotonic_ns();
                if args.latency && s.len() >= 8 {
                    let mut stamp = [0u8; 8];
                    stamp.copy_from_slice(&s[..8]);
                    let stamp = u64::from_le_bytes(stamp);
                    if stamp != 0 {
                        // 0: a warm-up sample
                        hist.saturating_record(now.saturating_sub(stamp).max(1));
                    }
                }
                touched ^= s.last().copied().unwrap_or(0);
            }
            Ok(None) => std::hint::spin_loop(),
            Err(PubSubError::Detached(_)) => break,
            Err(e) => return Err(e.into()),
        }
    }
    std::hint::black_box(touched);
    println!(
        "{}",
        json!({"received": sub.received(), "missed": sub.missed(),
               "p50_ns": hist.value_at_quantile(0.5), "p99_ns": hist.value_at_quantile(0.99)})
    );
    Ok(())
}

fn spawn_sub(address: &str, count: u64, latency: bool) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("finding the shmlink executable")?;
    let mut c = Command::new(exe);
    c.args(["__pubsub-sub", address, "--count", &count.to_string()]);
    if latency {
        c.arg("--latency");
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting a subscriber process")
}

fn report(child: Child) -> anyhow::Result<Value> {
    let out = child
        .wait_with_output()
        .context("waiting for a subscriber")?;
    if !out.status.success() {
        bail!("a subscriber process failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).context("a subscriber's report")
}

/// One case: `subs` subscriber processes, `count` samples of `size` bytes.
/// `gap`: time between publishes (latency), or none (full rate). Returns
/// the publisher's CPU per sample (ns) and the subscribers' reports.
fn case(
    dir: &std::path::Path,
    subs: usize,
    size: usize,
    count: u64,
    gap: Option<Duration>,
) -> anyhow::Result<(f64, Vec<Value>)> {
    let address = format!(
        "shm:{}",
        dir.join(format!("ps-{subs}-{size}.sock")).display()
    );
    let small = size <= 4096;
    let options = TopicOptions {
        sample_size: size,
        depth: if small { 256 } else { 4 },
        max_held: if small { 8 } else { 2 },
        max_subscribers: subs as u32,
        overflow: Overflow::DropOldest,
        ..TopicOptions::default()
    };
    let publisher = Publisher::bind(&address, TOPIC, options)?;
    // A subscriber counts what it received and what it missed; it stops
    // at the publisher's close if it missed some.
    let warm = (count / 2).clamp(1, 64);
    let children = (0..subs)
        .map(|_| spawn_sub(&address, count + warm, gap.is_some()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !publisher.wait_subscribers(subs, Duration::from_secs(20)) {
        bail!(
            "{} of {subs} subscribers attached within 20 s",
            publisher.stats().subscribers
        );
    }
    // Warm up: the pool's slots in circulation faulted in (a fresh memfd
    // page costs a fault and its zeroing once), the subscribers' caches.
    for _ in 0..warm {
        publisher.publish_with(size, |b| b.fill(0))?;
    }
    let cpu0 = thread_cpu_ns();
    for n in 0..count {
        publisher.publish_with(size, |b| {
            if small {
                b[..8].copy_from_slice(&monotonic_ns().to_le_bytes());
            } else {
                b.fill(n as u8);
            }
        })?;
        if let Some(gap) = gap {
            let until = Instant::now() + gap;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
    let cpu = (thread_cpu_ns() - cpu0) as f64 / count as f64;
    drop(publisher);
    let reports = children
        .into_iter()
        .map(report)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((cpu, reports))
}

/// CPU of writing `MIB16` bytes once, per write (the cost of one copy).
fn write_once_ns(rounds: u32) -> f64 {
    let mut buf = vec![0u8; MIB16];
    buf.fill(1); // faulted in, as the publisher's slots are after its warm-up
    let cpu0 = thread_cpu_ns();
    for r in 0..rounds {
        buf.fill(r as u8);
        std::hint::black_box(&buf);
    }
    (thread_cpu_ns() - cpu0) as f64 / f64::from(rounds)
}

/// The iceoryx2 peer's latency run: `{p50_ns, p99_ns, ...}`.
fn iceoryx2(program: &std::path::Path, count: u64, gap: Duration) -> anyhow::Result<Value> {
    let out = Command::new(program)
        .args(["latency", "--count", &count.to_string(), "--size", "64"])
        .args(["--gap-ns", &gap.as_nanos().to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", program.display()))?;
    if !out.status.success() {
        bail!("{} failed ({})", program.display(), out.status);
    }
    serde_json::from_slice(&out.stdout).context("iceoryx2's report")
}

fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1000.0)
}

/// Runs every case and reports.
pub(crate) fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let quick = args.quick_preset();
    let tmp = TempDir::new()?;
    let dir = tmp.path();
    let (lat_n, fan_n, big_n) = if quick {
        (2_000, 20_000, 4)
    } else {
        (50_000, 400_000, 40)
    };
    let gap = Duration::from_micros(5);
    let (_, lat) = case(dir, 1, 64, lat_n, Some(gap))?;
    let ours = (&lat[0]["p50_ns"], &lat[0]["p99_ns"]);
    let ice = match &args.iceoryx2 {
        Some(p) => Some(iceoryx2(p, lat_n, gap)?),
        None => None,
    };
    let (cpu1, _) = case(dir, 1, 64, fan_n, None)?;
    let (cpu8, _) = case(dir, 8, 64, fan_n, None)?;
    let (big1, _) = case(dir, 1, MIB16, big_n, None)?;
    let (big8, _) = case(dir, 8, MIB16, big_n, None)?;
    let once = write_once_ns(big_n as u32);

    let p50 = ours.0.as_f64().unwrap_or(f64::NAN);
    let ice_p50 = ice.as_ref().and_then(|v| v["p50_ns"].as_f64());
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Publish/subscribe over shm: (`shmlink bench --pubsub`)\n"
    );
    let _ = writeln!(
        md,
        "| case | p50 one-way µs | p99 µs | publisher CPU per sample µs |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|");
    let _ = writeln!(
        md,
        "| shmlink, 64 B, 1 subscriber polling, a sample every 5 µs | {} | {} | |",
        us(p50),
        us(ours.1.as_f64().unwrap_or(f64::NAN))
    );
    match &ice {
        Some(v) => {
            let _ = writeln!(
                md,
                "| iceoryx2 {}, 64 B, 1 subscriber polling, a sample every 5 µs (baseline) | {} | {} | |",
                v["version"].as_str().unwrap_or("?"),
                us(v["p50_ns"].as_f64().unwrap_or(f64::NAN)),
                us(v["p99_ns"].as_f64().unwrap_or(f64::NAN))
            );
        }
        None => {
            let _ = writeln!(md, "| iceoryx2 (baseline) | not measured: pass `--iceoryx2 target/iceoryx2/release/iceoryx2-pubsub` (ci/main.sh --full builds it) | | |");
        }
    }
    for (case, ns) in [
        ("shmlink, 64 B, 1 subscriber, full rate", cpu1),
        ("shmlink, 64 B, 8 subscribers, full rate", cpu8),
        ("shmlink, 16 MiB written in place, 1 subscriber", big1),
        ("shmlink, 16 MiB written in place, 8 subscribers", big8),
        ("writing 16 MiB once (bound: one copy of the sample)", once),
    ] {
        let _ = writeln!(md, "| {case} | | | {} |", us(ns));
    }
    let g1 = ice_p50.map(|i| p50 <= i);
    let g2 = cpu8 / cpu1;
    let g3 = big8 / once;
    let verdicts = [
        Verdict::of(g1),
        Verdict::of(Some(g2 <= 2.0)),
        Verdict::of(Some(g3 <= 1.1)),
    ];
    let _ = writeln!(
        md,
        "\n| goal | target | this run | result |\n|---|---|---|---|"
    );
    let _ = writeln!(
        md,
        "| 64 B one-way p50, 1 subscriber | ≤ iceoryx2's | {} | {} |",
        ice_p50.map_or("iceoryx2 not run".into(), |i| format!(
            "{} vs {} µs",
            us(p50),
            us(i)
        )),
        verdicts[0].cell()
    );
    let _ = writeln!(
        md,
        "| publisher CPU per sample, 8 subscribers ÷ 1 | ≤ 2× | {g2:.2}× | {} |",
        verdicts[1].cell()
    );
    let _ = writeln!(md, "| 16 MiB to 8 subscribers: publisher CPU ÷ writing the sample once | ≤ 1.1× | {g3:.2}× | {} |", verdicts[2].cell());
    let _ = writeln!(md, "\n{}", summary(&verdicts));
    print!("{md}");
    let doc = json!({"latency": {"shmlink": lat[0], "iceoryx2": ice},
                     "publisher_cpu_ns": {"64B_1": cpu1, "64B_8": cpu8, "16MiB_1": big1, "16MiB_8": big8,
                                          "write_16MiB_once": once}});
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.markdown {
        std::fs::write(p, &md).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
