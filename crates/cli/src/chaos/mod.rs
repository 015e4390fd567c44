//! `shmlink chaos`: client processes call an echo server over shm, unix and
//! tcp with random sizes while clients and the server are killed with
//! SIGKILL at random moments (the server is restarted at once). Counts calls
//! made, completed and failed with a clear error, and what must stay zero:
//! hangs, wrong replies, leaked kernel objects. Measures how soon a client
//! that held a session calls successfully after each restart.

mod client;
mod leaks;
mod procs;
mod report;
mod wire;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use shmlink::{Client, ClientOptions, PREPARED_SEGMENTS};

use crate::child::TempDir;
use crate::parse;
use procs::{Clients, EchoServer, Lang, PhpCommand};
use report::Summary;

pub(crate) use client::{run_client, ClientArgs};

/// The PHP client, written into the run directory when PHP clients run.
const PHP_CLIENT: &str = include_str!("php_client.php");

/// Options of `shmlink chaos`.
#[derive(Debug, Args)]
pub(crate) struct ChaosArgs {
    /// How long to run (seconds).
    #[arg(long, default_value = "30", value_parser = parse::seconds)]
    duration: Duration,
    /// Client processes at any time, spread over shm, unix and tcp.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=256))]
    clients: u32,
    /// Of the clients, how many are PHP processes calling through the
    /// extension (needs --php-extension).
    #[arg(long, default_value_t = 0, requires = "php_extension")]
    php_clients: u32,
    /// The PHP extension the PHP clients load (bindings/php/modules/shmlink.so).
    #[arg(long, value_name = "PATH")]
    php_extension: Option<PathBuf>,
    /// The PHP interpreter.
    #[arg(long, value_name = "PATH", default_value = "php")]
    php: PathBuf,
    /// Transports the clients use, comma-separated (clients are spread over them).
    #[arg(long, value_delimiter = ',', default_values = ["shm", "unix", "tcp"], value_parser = ["shm", "unix", "tcp"])]
    transports: Vec<String>,
    /// Mean time between two kills, in milliseconds (exponentially distributed).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    kill_every_ms: u64,
    /// Every Nth kill hits the server (which is restarted), the others a client.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    server_every: u32,
    /// Timeout of each call, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
    /// Largest payload of a call, in bytes (KiB/MiB suffixes allowed).
    #[arg(long, default_value = "4MiB", value_parser = parse::size)]
    max_size: usize,
    /// Seed of every random choice (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the summary as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the summary as markdown to FILE.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
}

/// Runs the chaos and prints the summary; fails when a must-be-zero figure is not.
pub(crate) fn run(args: &ChaosArgs) -> anyhow::Result<()> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let dir = TempDir::new()?;
    let shm_before = leaks::dev_shm();
    let summary = chaos(args, seed, dir.path())?;
    let mut summary = summary;
    summary.dev_shm_new = leaks::dev_shm().difference(&shm_before).count();
    let doc = report::markdown(&summary);
    print!("{doc}");
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &args.markdown {
        std::fs::write(p, &doc).with_context(|| format!("cannot write {}", p.display()))?;
    }
    let bad = summary.must_be_zero();
    if !bad.is_empty() {
        bail!("chaos run failed: {}", bad.join(", "));
    }
    Ok(())
}

fn chaos(args: &ChaosArgs, seed: u64, dir: &Path) -> anyhow::Result<Summary> {
    let exe = std::env::current_exe().context("cannot find the shmlink executable")?;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut server = EchoServer::start(&exe, dir)?;
    if args.php_clients > args.clients {
        bail!(
            "--php-clients {} is more than --clients {}",
            args.php_clients,
            args.clients
        );
    }
    let php = match &args.php_extension {
        Some(ext) if args.php_clients > 0 => {
            let extension = std::fs::canonicalize(ext)
                .with_context(|| format!("cannot find the PHP extension {}", ext.display()))?;
            let script = dir.join("chaos-client.php");
            std::fs::write(&script, PHP_CLIENT)
                .with_context(|| format!("cannot write {}", script.display()))?;
            Some(PhpCommand {
                php: args.php.clone(),
                extension,
                script,
            })
        }
        _ => None,
    };
    let mut clients = Clients::new(&exe, dir, args.timeout_ms, args.max_size, php);
    let targets: Vec<String> = server
        .addresses()
        .iter()
        .filter(|a| {
            args.transports
                .iter()
                .any(|t| a.starts_with(&format!("{t}:")))
        })
        .cloned()
        .collect();
    for i in 0..args.clients as usize {
        // PHP clients take the first transports in turn too.
        let lang = if (i as u32) < args.php_clients {
            Lang::Php
        } else {
            Lang::Rust
        };
        clients.spawn(lang, &targets[i % targets.len()], rng.u64(..))?;
    }
    let probe_addr = server.addresses()[0].clone();
    let mut probe = Some(Client::connect(&probe_addr, ClientOptions::default())?);
    let mut s = Summary {
        seed,
        clients: args.clients,
        php_clients: args.php_clients,
        ..Summary::default()
    };
    let start = Instant::now();
    let end = start + args.duration;
    let mean = args.kill_every_ms as f64 / 1000.0;
    let mut kills = 0u64;
    loop {
        // Exponential gaps: kills land at every phase of a call.
        let gap = Duration::from_secs_f64(-mean * (1.0 - rng.f64()).ln());
        let at = (Instant::now() + gap).min(end);
        // The chaos schedule itself, not a wait for a condition.
        while Instant::now() < at {
            clients.check_stalled(Duration::from_millis(args.timeout_ms) + Duration::from_secs(3));
            std::thread::sleep((at - Instant::now()).min(Duration::from_millis(50)));
        }
        if at >= end {
            break;
        }
        kills += 1;
        if kills.is_multiple_of(u64::from(args.server_every)) {
            server.kill()?;
            let ready = server.restart()?;
            s.server_restarts += 1;
            s.recoveries_ms
                .push(recover(&mut probe, &probe_addr, ready)?.as_secs_f64() * 1e3);
        } else {
            let i = rng.usize(..clients.live());
            let (lang, address) = clients.kill(i)?;
            s.client_kills += 1;
            if lang == Lang::Php {
                s.php_client_kills += 1;
            }
            clients.spawn(lang, &address, rng.u64(..))?;
        }
    }
    s.seconds = start.elapsed().as_secs_f64();
    drop(probe);
    clients.kill_all()?;
    s.add_clients(&clients);
    s.hung += clients.stalled();
    // The server must let go of every session of the clients just killed.
    let pid = server.pid();
    let deadline = Instant::now() + Duration::from_secs(5);
    let held = || {
        let open = leaks::open_segments(pid);
        let mapped = leaks::mapped_segments(pid);
        open.max(mapped).saturating_sub(PREPARED_SEGMENTS)
    };
    while held() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    s.leaked_segments = held();
    server.stop()?;
    s.socket_files_left = leaks::socket_files(dir).len();
    s.own_segments = leaks::open_segments(std::process::id());
    Ok(s)
}

/// Calls through `probe` (reconnecting once its old session is found dead)
/// until a call succeeds: the time from the new server's readiness.
fn recover(probe: &mut Option<Client>, address: &str, ready: Instant) -> anyhow::Result<Duration> {
    let deadline = ready + Duration::from_secs(10);
    loop {
        match probe {
            Some(c) => match c.call(b"probe") {
                Ok(_) => return Ok(ready.elapsed()),
                Err(_) => *probe = None,
            },
            None => {
                if let Ok(c) = Client::connect(address, ClientOptions::default()) {
                    *probe = Some(c);
                    continue;
                }
                if Instant::now() >= deadline {
                    bail!("no call succeeded within 10 s of the server's restart");
                }
                std::thread::yield_now();
            }
        }
    }
}
