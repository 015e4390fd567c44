//! `shmlink bench`: spawns its own servers (or uses `--connect`), measures
//! every transport × wait strategy × size next to raw baselines, and prints
//! a table with the headline ratios.

mod baseline;
mod c_client;

mod config;
mod control;
mod framing;
mod interrupt;
mod lend;
mod load;
mod machine;
mod matrix;
mod measure;
mod payload;
mod peer;
mod plan;
mod plot;
mod progress;
mod pubsub;
mod report;
mod run;
mod shared;
mod stats;
mod target;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use shmlink::{Transport, WaitStrategy};

use crate::child::{self, ChildGuard, TempDir};
use config::Config;
use interrupt::Interrupt;
use measure::PointCtx;
use payload::Payloads;
use plan::{Group, Point, Selection, Serving};
use progress::Progress;
use stats::Record;

pub(crate) use config::BenchArgs;
pub(crate) use load::{run_hog, HogArgs};
pub(crate) use peer::{run_peer, PeerArgs};
pub(crate) use pubsub::{run_sub as run_pubsub_sub, SubArgs as PubSubSubArgs};

/// Runs the benchmark and prints the report.
pub(crate) fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.pubsub {
        return pubsub::run(args);
    }
    let cfg = Config::new(args)?;
    let interrupt = Interrupt::install()?;
    let machine = machine::describe();
    let mut records = match execute(&cfg, &interrupt) {
        Ok(r) => r,
        Err(_) if interrupt.is_set() => {
            anyhow::bail!("interrupted; the benchmark servers were stopped")
        }
        Err(e) => return Err(e),
    };
    report::attach_ratios(&mut records);
    let mut doc = report::document(&machine, &cfg.describe(), &records);
    if cfg.matrix {
        doc.push_str(&matrix::section(&records));
    }
    print!("{doc}");
    if let Some(path) = &args.json {
        write_file(path, &report::json(&records)?)?;
    }
    if let Some(path) = &args.markdown {
        write_file(path, &doc)?;
    }
    if let Some(path) = &args.plot {
        let title = format!(
            "shmlink bench — {} ({} CPUs), {}",
            machine.cpu, machine.cores, machine.date
        );
        plot::write(path, &title, &records)?;
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Measures every point; the temp dir and every child are cleaned up on
/// every way out of here.
fn execute(cfg: &Config, interrupt: &Interrupt) -> anyhow::Result<Vec<Record>> {
    if let Some((cpu, _)) = cfg.pins {
        shmlink_sys::affinity::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin the bench to CPU {cpu}"))?;
    }
    let server_cpu = cfg.pins.map(|(_, s)| s);
    let dir = TempDir::new()?;
    let exe = std::env::current_exe().context("cannot find the shmlink executable")?;
    let payloads: BTreeMap<usize, Payloads> =
        cfg.sizes.iter().map(|&s| (s, Payloads::new(s))).collect();
    let sel = Selection {
        transports: &cfg.transports,
        waits: &cfg.waits,
        sizes: &cfg.sizes,
        connect: &cfg.connect,
        baselines: cfg.baselines,
        paths: &cfg.paths,
    };
    let groups = plan::groups(&sel, dir.path());
    let total: usize = groups.iter().map(|g| g.points.len()).sum::<usize>() * cfg.loads.len();
    let progress = Progress::new(total * cfg.rounds, cfg.quiet);
    let mut env = Env {
        cfg,
        interrupt,
        progress: &progress,
        payloads: &payloads,
        exe: &exe,
        dir: dir.path(),
        server_cpu,
        hog: None,
    };
    let mut rounds = Vec::with_capacity(cfg.rounds);
    for _ in 0..cfg.rounds {
        let mut records = Vec::with_capacity(total);
        for &load in &cfg.loads {
            let first = records.len();
            let hog = load.start(&exe, server_cpu, dir.path())?;
            env.hog = hog.as_ref().map(ChildGuard::pid);
            for (i, group) in groups.iter().enumerate() {
                run_group(&env, i, group, &mut records)?;
            }
            env.hog = None;
            drop(hog);
            for r in &mut records[first..] {
                r.load = load.name().into();
            }
        }
        rounds.push(records);
    }
    Ok(stats::median_of_rounds(rounds))
}

/// What every group needs.
struct Env<'a> {
    cfg: &'a Config,
    interrupt: &'a Interrupt,
    progress: &'a Progress,
    payloads: &'a BTreeMap<usize, Payloads>,
    exe: &'a Path,
    dir: &'a Path,
    server_cpu: Option<usize>,
    /// The CPU hog's pid, while the busy load runs.
    hog: Option<u32>,
}

impl Env<'_> {
    fn ctx(&self, server_pid: Option<u32>) -> PointCtx<'_> {
        PointCtx {
            budget: self.cfg.budget,
            shape: self.cfg.shape,
            interrupt: self.interrupt,
            server_pid,
            progress: self.progress,
        }
    }

    fn payloads(&self, size: usize) -> anyhow::Result<&Payloads> {
        self.payloads
            .get(&size)
            .with_context(|| format!("no payloads of {size} bytes"))
    }
}

/// Starts the group's server, measures its points, stops the server.
fn run_group(
    env: &Env<'_>,
    index: usize,
    group: &Group,
    out: &mut Vec<Record>,
) -> anyhow::Result<()> {
    match &group.serving {
        Serving::Peer => {
            let mut peer = baseline::Peer::spawn(env.exe, env.server_cpu, env.dir)?;
            let ctx = env.ctx(Some(peer.pid()));
            for point in &group.points {
                if let Point::Baseline { kind, size } = point {
                    let label = start(env, point);
                    out.push(peer.measure(*kind, env.payloads(*size)?, &ctx, &label)?);
                    env.progress.done();
                }
            }
        }
        Serving::External => {
            let ctx = env.ctx(None);
            for point in &group.points {
                if let Point::Link {
                    transport,
                    wait,
                    size,
                    address: Some(address),
                    path,
                    sequential_only,
                } = point
                {
                    let target = target::Target {
                        address: address.clone(),
                        transport: *transport,
                        wait: *wait,
                        path: *path,
                        sequential_only: *sequential_only,
                    };
                    let label = start(env, point);
                    out.push(measure_link(&target, env.payloads(*size)?, &ctx, &label)?);
                    env.progress.done();
                }
            }
        }
        Serving::Echo { listen, wait } => {
            let (mut server, addresses) = spawn_echo(env, index, listen, *wait)?;
            let ctx = env.ctx(Some(server.pid()));
            for point in &group.points {
                if let Point::Link {
                    transport,
                    wait,
                    size,
                    path,
                    sequential_only,
                    ..
                } = point
                {
                    let address = addresses
                        .iter()
                        .find(|a| a.starts_with(&format!("{}:", transport.scheme())))
                        .with_context(|| {
                            format!("the echo server reported no {} address", transport.scheme())
                        })?;
                    let target = target::Target {
                        address: address.clone(),
                        transport: *transport,
                        wait: *wait,
                        path: *path,
                        sequential_only: *sequential_only,
                    };
                    let label = start(env, point);
                    let hog = HogShare::start(env.hog);
                    let record =
                        measure_link(&target, env.payloads(*size)?, &ctx, &label).map(|mut r| {
                            r.hog_cpu_pct = hog.end();
                            r
                        });
                    // A dead server explains a failed point better than the client's error.
                    let record = record.map_err(|e| match server.check_alive() {
                        Err(dead) => dead.context(e.to_string()),
                        Ok(()) => e,
                    })?;
                    let c_program = env.cfg.c_client.as_deref().filter(|_| {
                        *transport == Transport::Shm
                            && *wait == Some(WaitStrategy::default())
                            && !*sequential_only
                    });
                    let c_record = c_program
                        .map(|p| {
                            env.progress.phase("C client");
                            c_client::measure(p, address, &record, Some(server.pid()))
                        })
                        .transpose()
                        .with_context(|| format!("{label}: C client"))?;
                    out.push(record);
                    out.extend(c_record);
                    env.progress.done();
                }
            }
            server.stop();
        }
    }
    Ok(())
}

/// Measures a point over shmlink: all phases, or sequential calls only in a
/// `--paths` run.
fn measure_link(
    target: &target::Target,
    payloads: &Payloads,
    ctx: &PointCtx<'_>,
    label: &str,
) -> anyhow::Result<Record> {
    if target.sequential_only {
        lend::measure(target, payloads, ctx, label)
    } else {
        run::measure(target, payloads, ctx, label)
    }
}

fn start(env: &Env<'_>, point: &Point) -> String {
    let label = point.label();
    env.progress.start(&label);
    label
}

/// Starts `shmlink echo` and waits for its ready file.
fn spawn_echo(
    env: &Env<'_>,
    index: usize,
    listen: &[String],
    wait: WaitStrategy,
) -> anyhow::Result<(ChildGuard, Vec<String>)> {
    let ready = env.dir.join(format!("ready-{index}"));
    let mut cmd = Command::new(env.exe);
    cmd.arg("echo");
    for a in listen {
        cmd.arg("--listen").arg(a);
    }
    cmd.arg("--wait").arg(wait.to_string());
    cmd.args(env.cfg.shape.to_args());
    if let Some(&largest) = env.cfg.sizes.iter().max() {
        let default = shmlink::ServerOptions::default().max_message_size;
        cmd.arg("--max-message")
            .arg(largest.max(default).to_string());
    }
    cmd.arg("--ready-file").arg(&ready);
    if let Some(cpu) = env.server_cpu {
        cmd.arg("--pin-cpu").arg(cpu.to_string());
    }
    let mut child = ChildGuard::spawn(
        cmd,
        format!("echo server ({wait})"),
        env.dir.join(format!("echo-{index}.stderr")),
    )?;
    let addresses = child::wait_ready_file(&ready, &mut child, Duration::from_secs(10))?;
    Ok((child, addresses))
}

/// How much of one CPU the hog got while a point ran: what a strategy left
/// to the other work on its machine.
struct HogShare(Option<(u32, std::time::Instant, Duration)>);

impl HogShare {
    fn start(hog: Option<u32>) -> HogShare {
        HogShare(hog.and_then(|pid| {
            let cpu = child::process_cpu_time(pid).ok()?;
            Some((pid, std::time::Instant::now(), cpu))
        }))
    }

    /// Percent of one CPU since `start` (`None` without a hog).
    fn end(self) -> Option<f64> {
        let (pid, t0, cpu0) = self.0?;
        let used = child::process_cpu_time(pid).ok()?.saturating_sub(cpu0);
        let wall = t0.elapsed().as_secs_f64();
        (wall > 0.0).then(|| 100.0 * used.as_secs_f64() / wall)
    }
}
