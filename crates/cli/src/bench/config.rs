//! The options of `shmlink bench` and the run they resolve to.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use shmlink::{Address, Transport, WaitStrategy};

use super::load::Load;
use super::stats::Budget;
use super::target::LendPath;
use crate::parse::{self, Ratio};
use crate::reply::{ReplyShape, DIGEST_LEN};

/// Sizes of a `--plot` run without `--sizes`: 64 B to 16 MiB, ×8 apart.
const PLOT_SIZES: [usize; 8] = [
    64,
    512,
    4 << 10,
    32 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];

/// Sizes of a `--matrix` run without `--sizes`: 64 B to 16 MiB.
const MATRIX_SIZES: [usize; 5] = [64, 2048, 64 << 10, 1 << 20, 16 << 20];
/// Seconds per phase of a `--matrix` run without `--duration`.
const MATRIX_PHASE: Duration = Duration::from_millis(150);
/// Rounds of a `--matrix` run without `--rounds`: the p50 of one point
/// moves by up to 3× between runs on a shared VM (where its two vCPUs land
/// on the host), so a cell's figures are medians of five.
const MATRIX_ROUNDS: u32 = 5;

/// Options of `shmlink bench`.
#[derive(Debug, Args)]
#[command(
    after_help = "Each point runs a warm-up (5%, at most 1000 calls), then sequential \
    calls (latency percentiles, calls/s, CPU time of both processes per call), pipelined calls \
    (32 in flight, fewer where 32 responses would not fit in 48 KiB, 3/4 of the 64 KiB ring), and sessions \
    (connect + one call + close). Every response is checked; any wrong one fails the run. \
    The baselines ping-pong the same payloads between two processes with the bare mechanism: \
    a spin loop or FUTEX_WAIT/FUTEX_WAKE on a shared page, or a Unix socketpair."
)]
pub(crate) struct BenchArgs {
    /// Transports to measure, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "LIST", default_values = ["shm", "unix", "tcp"])]
    transports: Vec<TransportArg>,
    /// Wait strategies to measure over shm (both sides use the same one).
    #[arg(long, value_delimiter = ',', value_name = "LIST", default_values = ["sleep", "spin", "busy"])]
    waits: Vec<WaitStrategy>,
    /// Request sizes in bytes (KiB/MiB suffixes allowed) [default: 64,2048,65536,1048576].
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = parse::size)]
    sizes: Option<Vec<usize>>,
    /// Responses of exactly N bytes instead of ⌈size/8⌉.
    #[arg(long, value_name = "N", value_parser = parse::size)]
    reply_size: Option<usize>,
    /// Seconds per phase of each point [default: 1.0; 60 with --requests].
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds)]
    duration: Option<Duration>,
    /// Calls per phase of each point (still stopped by --duration).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    requests: Option<u64>,
    /// Measure this running `shmlink echo` instead of spawning servers
    /// (repeatable; replaces --transports; shm addresses run with each of --waits
    /// on the client side, the server keeps its own).
    #[arg(long = "connect", value_name = "ADDR")]
    connect: Vec<String>,
    /// Responses of ⌈R × size⌉ bytes (the servers' --reply-ratio) [default: 0.125].
    #[arg(long, value_name = "R", value_parser = parse::ratio, conflicts_with = "reply_size")]
    reply_ratio: Option<Ratio>,
    /// Do not pin the client to one CPU and the servers to another.
    #[arg(long)]
    no_pin: bool,
    /// Skip the raw baselines.
    #[arg(long)]
    no_baselines: bool,
    /// Write the records as a JSON array to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Write the table and headline as markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) markdown: Option<PathBuf>,
    /// Draw latency (p50, whisker to p99) and CPU per call against size into
    /// FILE.png; without --sizes, sizes go from 64 B to 16 MiB.
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// Run every point N times, interleaved (all points, then all again), and
    /// report the median of each figure: slow drift of a shared machine then
    /// weighs on baselines and shmlink alike.
    /// [default: 1; 5 with --matrix]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=15))]
    rounds: Option<u32>,
    /// Also measure the C library: run this `shmlink-c-bench` program
    /// (bench/c-client) beside every shm point with the default wait.
    #[arg(long, value_name = "PROGRAM")]
    c_client: Option<PathBuf>,
    /// How large requests travel over shm and unix, comma-separated: copy
    /// (streamed), arena (call() lending each request, copied in once),
    /// loan (written in place; the fill is timed apart). More than copy
    /// measures sequential calls only, with 64-byte replies that hash the
    /// request's length and its first and last 4 KiB.
    #[arg(long, value_delimiter = ',', value_name = "LIST", default_values = ["copy"])]
    paths: Vec<LendPath>,
    /// Smoke-test preset: sizes 64,2048 and 0.05 s per phase.
    #[arg(long)]
    quick: bool,
    /// How loaded the machine is while every point runs, comma-separated:
    /// quiet, busy (a process the bench starts spins on the servers' CPU,
    /// or on any CPU with --no-pin).
    #[arg(long, value_delimiter = ',', value_name = "LIST", default_values = ["quiet"])]
    loads: Vec<Load>,
    /// The wait matrix: every size from 64 B to 16 MiB (or --sizes) × quiet
    /// and busy × every strategy of --waits, beside a Unix socket, 0.15 s per
    /// phase (or --duration), 5 rounds (or --rounds), no baselines, no tcp; prints per cell the
    /// default strategy's p50 ÷ the best strategy's, and a Unix socket's
    /// p50 ÷ the default's.
    #[arg(long, conflicts_with_all = ["quick", "connect", "paths", "loads"])]
    matrix: bool,
    /// Publish/subscribe instead (see `bench/pubsub.rs`): one-way latency
    /// at 64 B, the publisher's CPU per sample with 1 and 8 subscribers,
    /// 16 MiB samples to 8 subscribers; honours --quick, --json, --markdown.
    #[arg(long, conflicts_with_all = ["matrix", "connect"])]
    pub(crate) pubsub: bool,
    /// With --pubsub: iceoryx2's publish/subscribe measured the same way by
    /// this program (bench/iceoryx2, built by ci/main.sh), as the baseline.
    #[arg(long, value_name = "PROGRAM", requires = "pubsub")]
    pub(crate) iceoryx2: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

impl BenchArgs {
    /// Whether the smoke-test preset was asked for.
    pub(crate) fn quick_preset(&self) -> bool {
        self.quick
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    Shm,
    Unix,
    Tcp,
}

impl From<TransportArg> for Transport {
    fn from(t: TransportArg) -> Transport {
        match t {
            TransportArg::Shm => Transport::Shm,
            TransportArg::Unix => Transport::Unix,
            TransportArg::Tcp => Transport::Tcp,
        }
    }
}

/// The run as resolved from the options.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) transports: Vec<Transport>,
    pub(crate) waits: Vec<WaitStrategy>,
    pub(crate) sizes: Vec<usize>,
    pub(crate) shape: ReplyShape,
    pub(crate) budget: Budget,
    pub(crate) connect: Vec<Address>,
    /// (client CPU, server CPU).
    pub(crate) pins: Option<(usize, usize)>,
    pub(crate) baselines: bool,
    /// The C client program, when the C library is measured too.
    pub(crate) c_client: Option<PathBuf>,
    pub(crate) quiet: bool,
    /// Rounds over all points; figures are medians across them.
    pub(crate) rounds: usize,
    /// How requests travel (`--paths`).
    pub(crate) paths: Vec<LendPath>,
    /// Loads every point runs under, in order.
    pub(crate) loads: Vec<Load>,
    /// Whether the matrix table is printed (`--matrix`).
    pub(crate) matrix: bool,
}

impl Config {
    pub(crate) fn new(args: &BenchArgs) -> anyhow::Result<Self> {
        let sizes = match (&args.sizes, args.quick, &args.plot) {
            (Some(s), _, _) => s.clone(),
            (None, _, _) if args.matrix => MATRIX_SIZES.to_vec(),
            (None, true, _) => vec![64, 2048],
            (None, false, Some(_)) => PLOT_SIZES.to_vec(),
            (None, false, None) => vec![64, 2048, 64 << 10, 1 << 20],
        };
        let time = match (args.duration, args.quick, args.requests) {
            (Some(d), _, _) => d,
            (None, _, _) if args.matrix => MATRIX_PHASE,
            (None, true, _) => Duration::from_millis(50),
            (None, false, Some(_)) => Duration::from_secs(60),
            (None, false, None) => Duration::from_secs(1),
        };
        let connect = args
            .connect
            .iter()
            .map(|a| a.parse::<Address>())
            .collect::<Result<Vec<_>, _>>()?;
        let mut transports: Vec<Transport> = dedup(args.transports.iter().map(|&t| t.into()));
        if args.matrix {
            transports.retain(|&t| t != Transport::Tcp);
        }
        Ok(Config {
            transports,
            waits: dedup(args.waits.iter().copied()),
            sizes: dedup(sizes.into_iter()),
            shape: ReplyShape::from_options(
                args.reply_ratio,
                args.reply_size,
                args.paths != [LendPath::Copy],
            ),
            budget: Budget {
                time,
                calls: args.requests,
            },
            connect,
            pins: if args.no_pin { None } else { two_cpus() },
            baselines: !args.no_baselines && !args.matrix,
            c_client: args.c_client.clone(),
            quiet: args.quiet,
            rounds: args
                .rounds
                .unwrap_or(if args.matrix { MATRIX_ROUNDS } else { 1 })
                as usize,
            paths: dedup(args.paths.iter().copied()),
            loads: if args.matrix {
                vec![Load::Quiet, Load::Busy]
            } else {
                dedup(args.loads.iter().copied())
            },
            matrix: args.matrix,
        })
    }

    /// Lines describing the settings, printed above the table.
    pub(crate) fn describe(&self) -> Vec<String> {
        let mut phase = format!("{:.2} s", self.budget.time.as_secs_f64());
        if let Some(n) = self.budget.calls {
            phase = format!("{n} calls (at most {phase})");
        }
        let reply = match self.shape {
            ReplyShape::Ratio(r) => format!("⌈{r} × size⌉ bytes"),
            ReplyShape::Fixed(n) => format!("{n} bytes"),
            ReplyShape::Digest => format!(
                "{DIGEST_LEN} bytes hashing the request's length and its first and last 4 KiB"
            ),
        };
        let servers = if self.connect.is_empty() {
            "spawned `shmlink echo` children, one at a time".to_string()
        } else {
            let list: Vec<String> = self.connect.iter().map(ToString::to_string).collect();
            format!("--connect {} (server CPU not measured)", list.join(" "))
        };
        let pins = match self.pins {
            Some((c, s)) => {
                format!("client pinned to CPU {c}, servers and baseline peer to CPU {s}")
            }
            None => "not pinned".to_string(),
        };
        let paths: Vec<&str> = self.paths.iter().map(|p| p.name()).collect();
        vec![
            format!("each phase: {phase}, after a warm-up of 5% (at most 1000 calls)"),
            format!(
                "paths: {} (copy: streamed through the ring or socket{})",
                paths.join(", "),
                if self.paths == [LendPath::Copy] {
                    ""
                } else {
                    "; sequential calls only"
                }
            ),
            format!("responses: {reply}; every response checked"),
            format!("servers: {servers}"),
            format!("pinning: {pins}"),
            format!(
                "rounds: {} (each figure is the median across rounds)",
                self.rounds
            ),
            format!("loads: {}", loads_text(&self.loads, self.pins)),
        ]
    }
}

fn loads_text(loads: &[Load], pins: Option<(usize, usize)>) -> String {
    let names: Vec<&str> = loads.iter().map(|l| l.name()).collect();
    let mut text = names.join(", ");
    if loads.contains(&Load::Busy) {
        text += &match pins {
            Some((_, s)) => {
                format!(" (busy: a process of the bench spins on CPU {s}, the servers')")
            }
            None => " (busy: a process of the bench spins, unpinned)".to_string(),
        };
    }
    text
}

fn dedup<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The first two CPUs this process may run on, if there are two.
fn two_cpus() -> Option<(usize, usize)> {
    let cpus = shmlink_sys::process::allowed_cpus().ok()?;
    Some((*cpus.first()?, *cpus.get(1)?))
}
