//! `shmlink pool bench`: the cost of the pool's dispatch. One worker
//! process is called directly (this process binds the worker port and calls
//! it, as the pool does), through a pool of one such worker (a client
//! calling the pool: after its first calls it gets the worker on a direct
//! line), and through a pool that relays every call (`--no-lines`), in
//! alternating rounds; every response of one way is checked against the
//! other ways' responses to the same request.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use shmlink::{
    Client, ClientOptions, Log, ServerOptions, WaitStrategy, WorkerPort, WORKER_ENV,
    WORKER_WAIT_ENV,
};
use shmlink_pool::{Pool, PoolOptions};

use crate::child::TempDir;
use crate::parse;
use crate::placement::Placement;
use crate::pool_churn::{self, Churn};

/// Options of `shmlink pool bench`.
#[derive(Debug, Args)]
pub(crate) struct DispatchArgs {
    /// Calls per round and way.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub(crate) calls: usize,
    /// Request size in bytes.
    #[arg(long, value_name = "BYTES", value_parser = parse::size, default_value = "2048")]
    pub(crate) size: usize,
    /// Rounds (each measures every way; the medians are reported).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(crate) rounds: usize,
    /// Write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// How the client waits for answers (both ways): sleep, spin, spin:MICROS or busy.
    #[arg(long, value_name = "HOW", default_value_t = WaitStrategy::default())]
    pub(crate) client_wait: WaitStrategy,
    /// The pool's --wait [default: as the pool's].
    #[arg(long, value_name = "HOW")]
    pub(crate) wait: Option<WaitStrategy>,
    /// The pool's --worker-wait [default: as the pool's].
    #[arg(long, value_name = "HOW")]
    pub(crate) worker_wait: Option<WaitStrategy>,
    /// The pool's --idle-worker-wait [default: as the pool's]. A worker
    /// called directly waits as its own options say.
    #[arg(long, value_name = "HOW")]
    pub(crate) idle_worker_wait: Option<WaitStrategy>,
    /// Let the scheduler place the parties (by default the client runs on
    /// the first allowed CPU, the pool and its workers on the last).
    #[arg(long)]
    pub(crate) no_pin: bool,
    /// Seconds of each churn case (recycling, reload, kill -9) after the
    /// rounds; 0 leaves them out.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    pub(crate) churn_seconds: f64,
    /// The worker command and its arguments.
    #[arg(last = true, value_name = "COMMAND", required = true)]
    pub(crate) command_line: Vec<String>,
}

/// p50 and p99 of one way, in µs, and calls per second.
struct Figures {
    p50: f64,
    p99: f64,
    calls_per_s: f64,
}

pub(crate) fn run(args: &DispatchArgs) -> anyhow::Result<()> {
    let pool_wait = args.wait.unwrap_or_else(shmlink_pool::default_wait);
    let worker_wait = args
        .worker_wait
        .unwrap_or_else(shmlink_pool::default_worker_wait);
    let idle_worker_wait = args
        .idle_worker_wait
        .unwrap_or_else(shmlink_pool::default_idle_worker_wait);
    let placement = Placement::new(!args.no_pin)?;
    let dir = TempDir::new()?;
    let request: Vec<u8> = (0..args.size).map(|i| (i * 7 + 3) as u8).collect();
    let mut direct = Vec::new();
    let mut pooled = Vec::new();
    let mut relayed = Vec::new();
    let mut expected: Option<Vec<u8>> = None;
    for round in 0..args.rounds.max(1) {
        let d = measure_direct(args, &placement, &dir, round, &request, &mut expected)?;
        let p = measure_pool(args, &placement, &dir, round, true, &request, &mut expected)?;
        let r = measure_pool(
            args,
            &placement,
            &dir,
            round,
            false,
            &request,
            &mut expected,
        )?;
        eprintln!(
            "shmlink pool bench: round {}: direct p50 {:.2} µs, through the pool p50 {:.2} µs, relayed (--no-lines) p50 {:.2} µs",
            round + 1,
            d.p50,
            p.p50,
            r.p50
        );
        direct.push(d);
        pooled.push(p);
        relayed.push(r);
    }
    let med = |v: &[Figures], f: fn(&Figures) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    let (dp50, pp50) = (med(&direct, |f| f.p50), med(&pooled, |f| f.p50));
    let (dp99, pp99) = (med(&direct, |f| f.p99), med(&pooled, |f| f.p99));
    let (dcps, pcps) = (
        med(&direct, |f| f.calls_per_s),
        med(&pooled, |f| f.calls_per_s),
    );
    let (rp50, rp99, rcps) = (
        med(&relayed, |f| f.p50),
        med(&relayed, |f| f.p99),
        med(&relayed, |f| f.calls_per_s),
    );
    println!(
        "| way | p50 µs | p99 µs | calls/s |\n|---|---:|---:|---:|\n\
         | a worker called directly | {dp50:.2} | {dp99:.2} | {dcps:.0} |\n\
         | the same worker through `shmlink pool` (the client gets it on a direct line) | {pp50:.2} | {pp99:.2} | {pcps:.0} |\n\
         | the same worker through `shmlink pool --no-lines` (every call relayed) | {rp50:.2} | {rp99:.2} | {rcps:.0} |\n\n\
         The pool's dispatch adds {:.2} µs to p50, {:.2} µs when every call is relayed ({} B requests, {} calls a round, median of {} rounds; \
         client waits {}, pool --wait {}, --worker-wait {}, --idle-worker-wait {}; {}).",
        pp50 - dp50,
        rp50 - dp50,
        args.size,
        args.calls,
        args.rounds,
        args.client_wait,
        pool_wait,
        worker_wait,
        idle_worker_wait,
        placement.describe()
    );
    let churn = if args.churn_seconds > 0.0 {
        let setup = pool_churn::Setup {
            pool: pool_options(args),
            client: client_options(args),
            size: args.size,
            length: Duration::from_secs_f64(args.churn_seconds),
            dir: &dir,
            placement,
        };
        let rows = pool_churn::run(&setup)?;
        println!(
            "\n{}",
            pool_churn::table(&rows, args.size, args.churn_seconds)
        );
        rows
    } else {
        // The churn goals, not measured: with what is missing.
        println!("{}", pool_churn::goals(&[], 0.0));
        Vec::new()
    };
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "size": args.size, "calls": args.calls, "rounds": args.rounds,
            "command": args.command_line,
            "client_wait": args.client_wait.to_string(), "wait": pool_wait.to_string(),
            "worker_wait": worker_wait.to_string(), "placement": placement.describe(),
            "idle_worker_wait": idle_worker_wait.to_string(),
            "direct": {"p50_us": dp50, "p99_us": dp99, "calls_per_s": dcps},
            "pool": {"p50_us": pp50, "p99_us": pp99, "calls_per_s": pcps},
            "relayed": {"p50_us": rp50, "p99_us": rp99, "calls_per_s": rcps},
            "dispatch_p50_us": pp50 - dp50,
            "relayed_dispatch_p50_us": rp50 - dp50,
            "churn_seconds": args.churn_seconds,
            "churn": churn.iter().map(churn_json).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Calls `c` `calls` times with `request`; checks each response against
/// the first one seen (by either way).
fn calls(
    c: &mut Client,
    calls: usize,
    request: &[u8],
    expected: &mut Option<Vec<u8>>,
) -> anyhow::Result<Figures> {
    for _ in 0..calls.min(1000) {
        let r = c.call(request)?;
        check(&r, expected)?;
        c.recycle(r);
    }
    let mut lat = Vec::with_capacity(calls);
    let start = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        let r = c.call(request)?;
        lat.push(t.elapsed());
        check(&r, expected)?;
        c.recycle(r);
    }
    let elapsed = start.elapsed();
    lat.sort();
    let at = |q: f64| lat[((q * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1];
    Ok(Figures {
        p50: at(0.5).as_secs_f64() * 1e6,
        p99: at(0.99).as_secs_f64() * 1e6,
        calls_per_s: calls as f64 / elapsed.as_secs_f64(),
    })
}

fn check(r: &[u8], expected: &mut Option<Vec<u8>>) -> anyhow::Result<()> {
    match expected {
        Some(e) if e.as_slice() != r => bail!(
            "a response of {} bytes differs from the {} bytes the other way answered",
            r.len(),
            e.len()
        ),
        Some(_) => Ok(()),
        None => {
            *expected = Some(r.to_vec());
            Ok(())
        }
    }
}

fn measure_direct(
    args: &DispatchArgs,
    placement: &Placement,
    dir: &TempDir,
    round: usize,
    request: &[u8],
    expected: &mut Option<Vec<u8>>,
) -> anyhow::Result<Figures> {
    let addr = format!(
        "shm:{}",
        dir.path().join(format!("direct{round}.sock")).display()
    );
    // This process plays the client: it waits on the worker as a client does.
    let port = WorkerPort::bind(
        &addr,
        ServerOptions {
            wait: args.client_wait,
            ..ServerOptions::default()
        },
    )?;
    let mut child = placement.start_servers(|| spawn(&args.command_line, &addr))?;
    let accepted = port.accept(Duration::from_secs(20))?;
    let Some(mut worker) = accepted else {
        let _ = child.kill();
        bail!("the worker did not connect within 20 s");
    };
    let figures = calls(&mut worker.client, args.calls, request, expected);
    drop(worker);
    let _ = child.wait();
    figures
}

fn measure_pool(
    args: &DispatchArgs,
    placement: &Placement,
    dir: &TempDir,
    round: usize,
    lines: bool,
    request: &[u8],
    expected: &mut Option<Vec<u8>>,
) -> anyhow::Result<Figures> {
    let name = if lines { "pool" } else { "relay" };
    let addr = format!(
        "shm:{}",
        dir.path().join(format!("{name}{round}.sock")).display()
    );
    let mut opts = pool_options(args);
    opts.listen = vec![addr.clone()];
    opts.workers = 1;
    opts.lines = lines;
    opts.control = Some(dir.path().join(format!("{name}{round}.ctl")));
    let pool = placement.start_servers(|| Ok(Pool::start_with_log(opts, Log::off())?))?;
    pool_churn::wait_for(&pool, Duration::from_secs(20), |p| {
        p.status().workers.iter().any(|w| w.state == "idle")
    })
    .context("the pool's worker was not ready")?;
    let mut c = Client::connect(&addr, client_options(args))?;
    let figures = calls(&mut c, args.calls, request, expected);
    drop(c);
    pool.stop();
    figures
}

/// A pool of the bench's worker command with its waits (listen addresses
/// set by the caller).
fn pool_options(args: &DispatchArgs) -> PoolOptions {
    let mut opts = PoolOptions::new(Vec::new(), args.command_line.clone());
    if let Some(w) = args.wait {
        opts.wait = w;
    }
    if let Some(w) = args.worker_wait {
        opts.worker_wait = w;
    }
    if let Some(w) = args.idle_worker_wait {
        opts.idle_worker_wait = w;
    }
    opts
}

fn client_options(args: &DispatchArgs) -> ClientOptions {
    ClientOptions {
        wait: args.client_wait,
        ..ClientOptions::default()
    }
}

fn churn_json(c: &Churn) -> serde_json::Value {
    serde_json::json!({
        "case": c.case, "calls": c.calls, "failed": c.failed, "calls_per_s": c.overall,
        "calls_per_s_steady": c.steady, "calls_per_s_worst_window": c.worst,
        "workers_replaced": c.replaced,
        "back_after_kill_ms": c.back_in.map(|d| d.as_secs_f64() * 1e3),
    })
}

fn spawn(command: &[String], port: &str) -> anyhow::Result<Child> {
    let (program, rest) = command.split_first().context("no worker command")?;
    Command::new(program)
        .args(rest)
        .env(WORKER_ENV, port)
        .env_remove(WORKER_WAIT_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {program}"))
}
