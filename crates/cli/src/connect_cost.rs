//! `shmlink connect-cost`: where a short-lived session's time goes. One
//! client process connects, makes one call and closes, again and again, over
//! a raw length-framed Unix socket (the baseline: `__raw-echo`, one thread,
//! blocking accept) and over shmlink's `unix:` and `shm:`; it times the three
//! phases of each session and reads the server's CPU time per thread from
//! `/proc/PID/task/*/schedstat`. Server and client are pinned to different
//! CPUs when there are two.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use shmlink::{Client, ClientOptions, WaitStrategy};

use crate::child::{wait_ready_file, ChildGuard, TempDir};
use crate::placement::Placement;

/// Options of `shmlink connect-cost`.
#[derive(Debug, Args)]
pub(crate) struct ConnectCostArgs {
    /// Sessions per transport and round.
    #[arg(long, value_name = "N", default_value_t = 5000)]
    sessions: usize,
    /// Rounds (each figure is the median across rounds).
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: usize,
    /// Request size in bytes (the reply is ⌈size / 8⌉ bytes).
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    size: usize,
    /// How the client waits (sleep, spin, spin:MICROS, busy).
    #[arg(long, value_name = "STRATEGY", default_value_t = WaitStrategy::default())]
    wait: WaitStrategy,
    /// The `shmlink` binary whose `echo` serves (default: this one), to
    /// measure another build's server with this client.
    #[arg(long, value_name = "PATH")]
    server_bin: Option<PathBuf>,
    /// Also write the table to this file (markdown).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Options of the hidden `__raw-echo` command.
#[derive(Debug, Args)]
pub(crate) struct RawEchoArgs {
    /// Socket path to listen on.
    #[arg(long, value_name = "PATH")]
    listen: PathBuf,
    /// Pin to this CPU.
    #[arg(long, value_name = "CPU")]
    pin_cpu: Option<usize>,
}

/// The baseline server: accepts one connection at a time, reads one
/// length-prefixed request (4-byte little-endian length), answers its first
/// ⌈len / 8⌉ bytes the same way, and reads until the client closes.
pub(crate) fn run_raw_echo(args: &RawEchoArgs) -> anyhow::Result<()> {
    if let Some(cpu) = args.pin_cpu {
        shmlink_sys::affinity::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin to CPU {cpu}"))?;
    }
    let listener = UnixListener::bind(&args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    for conn in listener.incoming() {
        let Ok(mut s) = conn else { continue };
        while let Ok(len) = read_frame(&mut s, &mut buf) {
            if write_frame(&mut s, &buf[..len.div_ceil(8)]).is_err() {
                break;
            }
        }
    }
    Ok(())
}

fn read_frame(s: &mut UnixStream, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    let body = buf
        .get_mut(..len)
        .ok_or_else(|| std::io::Error::other("frame larger than the buffer"))?;
    s.read_exact(body)?;
    Ok(len)
}

fn write_frame(s: &mut UnixStream, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    s.write_all(&out)
}

/// What one transport's sessions cost in one round.
#[derive(Debug, Default, Clone)]
struct Round {
    per_s: f64,
    connect: f64,
    call: f64,
    close: f64,
    /// Server CPU µs per session, by thread name.
    cpu: BTreeMap<String, f64>,
}

/// Runs the measurement and prints the table.
pub(crate) fn run(args: &ConnectCostArgs) -> anyhow::Result<()> {
    if args.sessions == 0 || args.rounds == 0 {
        bail!("--sessions and --rounds must be at least 1");
    }
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let server_bin = args.server_bin.clone().unwrap_or_else(|| exe.clone());
    // The client on the first allowed CPU (pinned here), the servers on
    // the last (told by `--pin-cpu`).
    let server_cpu = Placement::new(true)?.server_cpu();
    let dir = TempDir::new()?;
    let raw_path = dir.path().join("raw.sock");
    let mut raw_cmd = Command::new(&exe);
    raw_cmd.arg("__raw-echo").arg("--listen").arg(&raw_path);
    let mut echo_cmd = Command::new(&server_bin);
    echo_cmd.arg("echo");
    for a in ["shm", "unix"] {
        echo_cmd.arg("--listen").arg(format!(
            "{a}:{}",
            dir.path().join(format!("{a}.sock")).display()
        ));
    }
    echo_cmd.arg("--ready-file").arg(dir.path().join("ready"));
    if let Some(cpu) = server_cpu {
        raw_cmd.arg("--pin-cpu").arg(cpu.to_string());
        echo_cmd.arg("--pin-cpu").arg(cpu.to_string());
    }
    let mut raw = ChildGuard::spawn(raw_cmd, "raw echo server", dir.path().join("raw.err"))?;
    let mut echo = ChildGuard::spawn(echo_cmd, "shmlink echo", dir.path().join("echo.err"))?;
    let addrs = wait_ready_file(
        &dir.path().join("ready"),
        &mut echo,
        Duration::from_secs(20),
    )?;
    wait_for_socket(&raw_path, &mut raw)?;
    let find = |scheme: &str| {
        addrs
            .iter()
            .find(|a| a.starts_with(scheme))
            .cloned()
            .with_context(|| format!("shmlink echo reported no {scheme} address"))
    };
    let targets = [
        ("raw unix", Target::Raw(raw_path.clone()), raw.pid()),
        ("unix", Target::Shmlink(find("unix:")?), echo.pid()),
        ("shm", Target::Shmlink(find("shm:")?), echo.pid()),
    ];
    let options = ClientOptions {
        wait: args.wait,
        ..ClientOptions::default()
    };
    let request = vec![0x5a_u8; args.size];
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); targets.len()];
    for _ in 0..args.rounds {
        for (i, (_, target, pid)) in targets.iter().enumerate() {
            // A few sessions first: threads started, segments made, caches warm.
            sessions(target, &options, &request, 200)?;
            let before = thread_cpu(*pid)?;
            let mut r = sessions(target, &options, &request, args.sessions)?;
            let after = thread_cpu(*pid)?;
            for (name, ns) in after {
                let spent = ns.saturating_sub(before.get(&name).copied().unwrap_or(0));
                r.cpu
                    .insert(name, spent as f64 / 1e3 / args.sessions as f64);
            }
            rounds[i].push(r);
        }
        raw.check_alive()?;
        echo.check_alive()?;
    }
    let table = report(args, &targets.map(|t| t.0), &rounds, server_cpu);
    print!("{table}");
    if let Some(path) = &args.out {
        std::fs::write(path, &table).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn wait_for_socket(path: &Path, child: &mut ChildGuard) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(path).is_err() {
        child.check_alive()?;
        if Instant::now() >= deadline {
            bail!("the raw echo server did not listen within 20 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

enum Target {
    Raw(PathBuf),
    Shmlink(String),
}

/// `n` sessions of connect, one call, close: sessions/s and the p50 of
/// each phase in µs.
fn sessions(
    target: &Target,
    options: &ClientOptions,
    request: &[u8],
    n: usize,
) -> anyhow::Result<Round> {
    let mut phases = [
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    ];
    let want = request.len().div_ceil(8);
    let start = Instant::now();
    let mut buf = vec![0u8; request.len().max(8)];
    for _ in 0..n {
        let t0 = Instant::now();
        let (t1, t2, got) = match target {
            Target::Raw(path) => {
                let mut s = UnixStream::connect(path).context("raw unix connect")?;
                let t1 = Instant::now();
                write_frame(&mut s, request).context("raw unix write")?;
                let got = read_frame(&mut s, &mut buf).context("raw unix read")?;
                let t2 = Instant::now();
                drop(s);
                (t1, t2, got)
            }
            Target::Shmlink(addr) => {
                let mut c = Client::connect(addr, options.clone())?;
                let t1 = Instant::now();
                let got = c.call(request)?.len();
                let t2 = Instant::now();
                drop(c);
                (t1, t2, got)
            }
        };
        let t3 = Instant::now();
        if got != want {
            bail!("a reply of {got} bytes, expected {want}");
        }
        for (p, (a, b)) in phases.iter_mut().zip([(t0, t1), (t1, t2), (t2, t3)]) {
            p.push(b.duration_since(a).as_secs_f64() * 1e6);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let [connect, call, close] = phases.map(median);
    Ok(Round {
        per_s: n as f64 / elapsed,
        connect,
        call,
        close,
        cpu: BTreeMap::new(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Nanoseconds on CPU so far, summed by thread name, of process `pid`.
fn thread_cpu(pid: u32) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    let dir = format!("/proc/{pid}/task");
    for task in std::fs::read_dir(&dir).with_context(|| format!("cannot read {dir}"))? {
        let path = task.with_context(|| format!("cannot read {dir}"))?.path();
        // A thread may end between the listing and the reads.
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("schedstat")),
        ) else {
            continue;
        };
        let ns: u64 = stat
            .split_whitespace()
            .next()
            .and_then(|f| f.parse().ok())
            .with_context(|| format!("unexpected {}", path.join("schedstat").display()))?;
        *out.entry(name.trim().to_string()).or_insert(0) += ns;
    }
    Ok(out)
}

fn report(
    args: &ConnectCostArgs,
    names: &[&str],
    rounds: &[Vec<Round>],
    server_cpu: Option<usize>,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "connect + one call of {} B + close, {} sessions x {} rounds (medians across rounds); client wait {}{}\n",
        args.size,
        args.sessions,
        args.rounds,
        args.wait,
        server_cpu.map_or(String::new(), |c| format!("; servers on CPU {c}, the client on the first allowed CPU")),
    );
    let _ = writeln!(
        t,
        "| transport | sessions/s | connect p50 µs | call p50 µs | close p50 µs | server CPU µs/session | by thread |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: | ---: | ---: | --- |");
    for (name, rs) in names.iter().zip(rounds) {
        let pick = |f: fn(&Round) -> f64| median(rs.iter().map(f).collect());
        let mut threads: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for r in rs {
            for (k, v) in &r.cpu {
                threads.entry(k.as_str()).or_default().push(*v);
            }
        }
        let by_thread: Vec<(&str, f64)> = threads
            .into_iter()
            .map(|(k, v)| (k, median(v)))
            .filter(|(_, v)| *v >= 0.05)
            .collect();
        let total: f64 = by_thread.iter().map(|(_, v)| v).sum();
        let detail = by_thread
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            t,
            "| {name} | {:.0} | {:.1} | {:.1} | {:.1} | {total:.1} | {detail} |",
            pick(|r| r.per_s),
            pick(|r| r.connect),
            pick(|r| r.call),
            pick(|r| r.close),
        );
    }
    t
}
