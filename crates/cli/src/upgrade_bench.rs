//! `shmlink upgrade-bench`: an echo server upgraded N times while clients
//! call it without pause (docs/protocol.md, "Hand-over"). Each upgrade
//! starts a new `shmlink echo --take-over` and ends when the old process
//! has exited. Counts every call in windows of --window-ms and reports the
//! worst window that overlaps an upgrade against the steady rate, the
//! upgrade times, and what each client saw: failed calls and reconnects
//! (`shm:` sessions are handed over; `unix:` ones are closed between calls
//! and reconnect).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use shmlink::{Client, ClientOptions};

use crate::child::{wait_ready_file, ChildGuard, TempDir};
use crate::parse;

/// Options of `shmlink upgrade-bench`.
#[derive(Debug, Args)]
pub(crate) struct UpgradeBenchArgs {
    /// Upgrades to make.
    #[arg(long, default_value_t = 10)]
    upgrades: usize,
    /// Callers over shm: (each one session, handed over).
    #[arg(long, default_value_t = 2)]
    shm_clients: usize,
    /// Callers over unix: (each reconnects when its session is closed).
    #[arg(long, default_value_t = 1)]
    unix_clients: usize,
    /// Request (and response) size in bytes.
    #[arg(long, default_value_t = 2048)]
    size: usize,
    /// Steady running before the first upgrade and between upgrades, in ms.
    #[arg(long, default_value_t = 300)]
    gap_ms: u64,
    /// Width of the windows calls are counted in, in ms.
    #[arg(long, default_value_t = 10)]
    window_ms: u64,
    /// How long a server has to become ready, a bystander to stop, and an
    /// old server to hand over and exit.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "20")]
    ready_timeout: Duration,
    /// The `shmlink` executable whose `echo` is upgraded (default: this
    /// one), e.g. another build.
    #[arg(long, value_name = "PATH")]
    exe: Option<PathBuf>,
    /// Write the figures as JSON there.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the table as Markdown there.
    #[arg(long, value_name = "PATH")]
    markdown: Option<PathBuf>,
}

/// When something ran, from the start of the load.
type Span = (Duration, Duration);

/// Most windows counted (10 ms each: 10 minutes).
const WINDOWS: usize = 60_000;

/// What the callers share.
struct Load {
    t0: Instant,
    window: Duration,
    counts: Vec<AtomicU64>,
    stop: AtomicBool,
}

impl Load {
    fn count(&self) {
        let i = (self.t0.elapsed().as_nanos() / self.window.as_nanos()) as usize;
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What one caller saw.
#[derive(Debug, Default)]
struct Seen {
    calls: u64,
    failed: u64,
    reconnects: u64,
    first_failure: Option<String>,
}

fn caller(load: &Load, address: &str, size: usize) -> anyhow::Result<Seen> {
    let opts = ClientOptions {
        timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    };
    let mut c = Client::connect(address, opts.clone())
        .with_context(|| format!("connecting to {address}"))?;
    let body = vec![7u8; size];
    let mut seen = Seen::default();
    while !load.stop.load(Ordering::Relaxed) {
        match c.call(&body) {
            Ok(r) if r == body => {
                seen.calls += 1;
                load.count();
            }
            other => {
                seen.failed += 1;
                seen.first_failure.get_or_insert_with(|| match other {
                    Ok(r) => format!("a wrong answer of {} bytes", r.len()),
                    Err(e) => e.to_string(),
                });
                // The session is over (a stream session closed by the old
                // server): connect again, to the successor.
                let t = Instant::now();
                loop {
                    match Client::connect(address, opts.clone()) {
                        Ok(n) => {
                            c = n;
                            seen.reconnects += 1;
                            break;
                        }
                        Err(e) if t.elapsed() > Duration::from_secs(10) => {
                            bail!("reconnecting to {address}: {e}")
                        }
                        Err(_) => std::thread::yield_now(),
                    }
                }
            }
        }
    }
    Ok(seen)
}

/// Starts a `shmlink echo` that writes its addresses to `dir/NAME` and its
/// log to `dir/NAME.log`: the first server (listening on `a.sock` and
/// `u.sock`), a successor taking the current one over, or a bystander on
/// an address of its own. Stopped (and reaped) when dropped.
fn echo(exe: &Path, dir: &Path, name: &str, role: Role) -> anyhow::Result<ChildGuard> {
    let handover = dir.join("h.sock");
    let mut cmd = Command::new(exe);
    cmd.args(["echo", "--reply-ratio", "1", "--ready-file"])
        .arg(dir.join(name))
        .stdin(Stdio::null());
    match role {
        Role::First => {
            cmd.arg("--handover")
                .arg(&handover)
                .arg("--listen")
                .arg(format!("shm:{}", dir.join("a.sock").display()))
                .arg("--listen")
                .arg(format!("unix:{}", dir.join("u.sock").display()));
        }
        Role::Successor => {
            cmd.arg("--handover")
                .arg(&handover)
                .arg("--take-over")
                .arg(&handover);
        }
        Role::Bystander => {
            cmd.arg("--listen").arg(format!(
                "shm:{}",
                dir.join(format!("{name}.sock")).display()
            ));
        }
    }
    // Its log also says how long its sessions stopped at a hand-over.
    ChildGuard::spawn(
        cmd,
        format!("shmlink echo ({name})"),
        dir.join(format!("{name}.log")),
    )
}

/// What an echo server started by [`echo`] is to the run.
#[derive(Debug, Clone, Copy)]
enum Role {
    First,
    Successor,
    Bystander,
}

/// Runs the benchmark.
pub(crate) fn run(args: &UpgradeBenchArgs) -> anyhow::Result<()> {
    if args.upgrades == 0 || args.shm_clients == 0 || args.window_ms == 0 {
        bail!("--upgrades, --shm-clients and --window-ms must be at least 1");
    }
    let exe = match &args.exe {
        Some(e) => e.clone(),
        None => std::env::current_exe().context("cannot find the shmlink executable")?,
    };
    let dir = TempDir::new()?;
    measure(args, &exe, dir.path())
}

fn measure(args: &UpgradeBenchArgs, exe: &Path, dir: &Path) -> anyhow::Result<()> {
    let ready = args.ready_timeout;
    let mut server = echo(exe, dir, "echo-0", Role::First)?;
    wait_ready_file(&dir.join("echo-0"), &mut server, ready)?;
    let load = Arc::new(Load {
        t0: Instant::now(),
        window: Duration::from_millis(args.window_ms),
        counts: (0..WINDOWS).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
    });
    let mut callers = Vec::new();
    let addresses = [
        (
            format!("shm:{}", dir.join("a.sock").display()),
            args.shm_clients,
        ),
        (
            format!("unix:{}", dir.join("u.sock").display()),
            args.unix_clients,
        ),
    ];
    for (address, n) in &addresses {
        for _ in 0..*n {
            let (load, address, size) = (Arc::clone(&load), address.clone(), args.size);
            callers.push((
                address.clone(),
                std::thread::spawn(move || caller(&load, &address, size)),
            ));
        }
    }
    let upgraded = upgrade_n_times(args, exe, dir, &load, &mut server);
    load.stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for (address, h) in callers {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a caller panicked"))??;
        seen.push((address, s));
    }
    drop(server);
    let (spans, bound_spans, times) = upgraded?;
    let stopped = stopped_times(dir, times.len());
    report(args, &load, (&spans, &bound_spans), &times, &stopped, &seen)
}

/// The upgrades, each after a bystander started and stopped beside the
/// load: their spans and times, and the bystanders' spans. `server` is
/// the serving process at every step, even when a step fails.
fn upgrade_n_times(
    args: &UpgradeBenchArgs,
    exe: &Path,
    dir: &Path,
    load: &Load,
    server: &mut ChildGuard,
) -> anyhow::Result<(Vec<Span>, Vec<Span>, Vec<Duration>)> {
    let gap = Duration::from_millis(args.gap_ms);
    std::thread::sleep(gap);
    let (mut spans, mut times, mut bound_spans) = (Vec::new(), Vec::new(), Vec::new());
    for n in 1..=args.upgrades {
        // The bound beside: another server process started and stopped
        // next to the load, touching none of its sessions.
        let start = load.t0.elapsed();
        let name = format!("bystander-{n}");
        let mut other = echo(exe, dir, &name, Role::Bystander)?;
        wait_ready_file(&dir.join(&name), &mut other, args.ready_timeout)?;
        other.terminate(args.ready_timeout)?;
        bound_spans.push((start, load.t0.elapsed()));
        std::thread::sleep(gap);
        let start = load.t0.elapsed();
        let next = echo(exe, dir, &format!("echo-{n}"), Role::Successor)?;
        // The old server exits once the new one took everything over; the
        // new one then serves (whatever happens to the old one).
        let old = std::mem::replace(server, next);
        let mut old = old;
        old.wait_exit(args.ready_timeout)
            .context("the old server did not hand over")?;
        let end = load.t0.elapsed();
        times.push(end - start);
        spans.push((start, end));
        std::thread::sleep(gap);
    }
    Ok((spans, bound_spans, times))
}

/// How long each handing server's sessions stopped, from its log line
/// ("... its sessions stopped for the last X ms of it").
fn stopped_times(dir: &Path, upgrades: usize) -> Vec<f64> {
    (0..upgrades)
        .filter_map(|n| {
            let log = std::fs::read_to_string(dir.join(format!("echo-{n}.log"))).ok()?;
            let at = log.find("stopped for the last ")? + "stopped for the last ".len();
            log[at..].split(' ').next()?.parse().ok()
        })
        .collect()
}

fn report(
    args: &UpgradeBenchArgs,
    load: &Load,
    (spans, bound_spans): (&[Span], &[Span]),
    times: &[Duration],
    stopped: &[f64],
    seen: &[(String, Seen)],
) -> anyhow::Result<()> {
    let w = load.window;
    let last = (spans.last().map_or(Duration::ZERO, |s| s.1) + w * 2).as_nanos() / w.as_nanos();
    let first = (Duration::from_millis(args.gap_ms / 2).as_nanos() / w.as_nanos()) as usize;
    let counts: Vec<u64> = load.counts[..(last as usize).min(WINDOWS)]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let overlaps = |i: usize, spans: &[Span]| {
        let (a, b) = (w * i as u32, w * (i as u32 + 1));
        spans.iter().any(|&(s, e)| a < e + w && b > s)
    };
    let during = |i: usize| overlaps(i, spans) || overlaps(i, bound_spans);
    let mut steady: Vec<u64> = (first..counts.len())
        .filter(|&i| !during(i))
        .map(|i| counts[i])
        .collect();
    steady.sort_unstable();
    let steady_rate = steady.get(steady.len() / 2).copied().unwrap_or(0);
    let worst_in = |spans: &[Span]| {
        (first..counts.len())
            .filter(|&i| overlaps(i, spans))
            .map(|i| counts[i])
            .min()
            .unwrap_or(0)
    };
    let worst = worst_in(spans);
    let bound = worst_in(bound_spans);
    let bound_ratio = if steady_rate == 0 {
        0.0
    } else {
        bound as f64 / steady_rate as f64
    };
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let max = sorted.last().copied().unwrap_or_default();
    let mut stops = stopped.to_vec();
    stops.sort_by(f64::total_cmp);
    let stop_p50 = stops.get(stops.len() / 2).copied().unwrap_or(f64::NAN);
    let stop_max = stops.last().copied().unwrap_or(f64::NAN);
    let ratio = if steady_rate == 0 {
        0.0
    } else {
        worst as f64 / steady_rate as f64
    };
    let (shm, unix): (Vec<_>, Vec<_>) = seen.iter().partition(|(a, _)| a.starts_with("shm:"));
    let sum = |v: &[&(String, Seen)], f: fn(&Seen) -> u64| v.iter().map(|(_, s)| f(s)).sum::<u64>();
    let mut md = String::new();
    writeln!(md, "## Hot upgrade under load")?;
    writeln!(md)?;
    writeln!(
        md,
        "`shmlink upgrade-bench --upgrades {} --shm-clients {} --unix-clients {} --size {}`: an echo server upgraded {} times (a new `shmlink echo --take-over` each time) while every client calls without pause; calls counted in {} ms windows.",
        args.upgrades, args.shm_clients, args.unix_clients, args.size, times.len(), args.window_ms
    )?;
    writeln!(md)?;
    writeln!(md, "| figure | value |")?;
    writeln!(md, "|---|---|")?;
    writeln!(md, "| upgrades | {} |", times.len())?;
    writeln!(md, "| upgrade time, start of the new process to the old one's exit: p50 / max | {:.1} / {:.1} ms |", p50.as_secs_f64() * 1e3, max.as_secs_f64() * 1e3)?;
    writeln!(
        md,
        "| sessions stopped, from the old server's signal to stop to the successor's answer: p50 / max | {stop_p50:.2} / {stop_max:.2} ms |"
    )?;
    writeln!(
        md,
        "| calls per {} ms window, steady (median) | {steady_rate} |",
        args.window_ms
    )?;
    writeln!(
        md,
        "| worst window during an upgrade | {worst} ({ratio:.2}x steady) |"
    )?;
    writeln!(
        md,
        "| the bound: worst window while another server process starts and stops beside (no hand-over) | {bound} ({bound_ratio:.2}x steady) |"
    )?;
    writeln!(
        md,
        "| shm: calls / failed / reconnects | {} / {} / {} |",
        sum(&shm, |s| s.calls),
        sum(&shm, |s| s.failed),
        sum(&shm, |s| s.reconnects)
    )?;
    writeln!(
        md,
        "| unix: calls / failed / reconnects | {} / {} / {} |",
        sum(&unix, |s| s.calls),
        sum(&unix, |s| s.failed),
        sum(&unix, |s| s.reconnects)
    )?;
    if let Some(f) = seen
        .iter()
        .find_map(|(a, s)| s.first_failure.as_ref().map(|f| (a, f)))
    {
        writeln!(md)?;
        writeln!(md, "First failure, on {}: {}", f.0, f.1)?;
    }
    print!("{md}");
    if let Some(p) = &args.markdown {
        std::fs::write(p, &md).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.json {
        let doc = serde_json::json!({
            "upgrades": times.len(),
            "upgrade_ms": times.iter().map(|t| t.as_secs_f64() * 1e3).collect::<Vec<_>>(),
            "window_ms": args.window_ms,
            "steady_calls_per_window": steady_rate,
            "worst_window_during_upgrade": worst,
            "worst_ratio": ratio,
            "bound_worst_window": bound,
            "bound_ratio": bound_ratio,
            "sessions_stopped_ms": stopped,
            "shm": {"calls": sum(&shm, |s| s.calls), "failed": sum(&shm, |s| s.failed), "reconnects": sum(&shm, |s| s.reconnects)},
            "unix": {"calls": sum(&unix, |s| s.calls), "failed": sum(&unix, |s| s.failed), "reconnects": sum(&unix, |s| s.reconnects)},
        });
        std::fs::write(p, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
