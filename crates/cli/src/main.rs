//! `shmlink`: an echo server, one-shot calls and the benchmark of the shmlink
//! IPC library.
//!
//! Every error reaches the user as one line on stderr and exit status 1
//! (2 for command-line usage errors, as reported by clap).

mod bench;
mod call;
mod chaos;
mod child;
mod connect_cost;
mod echo;
mod goals;
mod inspect;
mod parse;
mod placement;
mod pool;
mod pool_bench;
mod pool_churn;
mod pubsub;
mod reply;
mod upgrade_bench;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Request/response IPC between processes on one host: shared memory
/// (`shm:PATH`), Unix sockets (`unix:PATH`) and TCP (`tcp:HOST:PORT`).
#[derive(Debug, Parser)]
#[command(name = "shmlink", version, propagate_version = true)]
#[command(
    after_help = "Addresses: shm:/run/app.sock (shared-memory rings, handshake over \
    that Unix socket), unix:/run/app.sock, tcp:127.0.0.1:7000 (port 0 picks a free port)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve an echo handler until SIGINT or SIGTERM.
    ///
    /// Each response is the first ⌈R × len⌉ bytes of the request (R =
    /// --reply-ratio, default 0.125), or exactly --reply-size bytes.
    Echo(echo::EchoArgs),
    /// Make one call and write the raw response to stdout.
    ///
    /// The request is DATA, or all of stdin when DATA is omitted. Exit status
    /// 0 on success, 1 on any error (a remote error prints its code and message).
    Call(call::CallArgs),
    /// Measure latency, throughput, session setup and CPU cost per call over
    /// every transport and wait strategy, next to raw baselines.
    Bench(Box<bench::BenchArgs>),
    /// Time where a short-lived session goes: connect, one call, close,
    /// over a raw Unix socket, unix: and shm:, with the server's CPU time
    /// per session by thread.
    #[command(name = "connect-cost")]
    ConnectCost(connect_cost::ConnectCostArgs),
    /// Kill clients and the server at random while they make checked calls
    /// over shm, unix and tcp; count wrong replies, hangs and leaks (all
    /// must be 0) and the recovery time after each server restart.
    Chaos(chaos::ChaosArgs),
    /// Supervise long-lived worker processes (PHP with Shmlink\Worker, or
    /// native ones) behind shmlink addresses: dispatch calls, restart
    /// crashed workers, recycle, reload; `pool status PATH` and `pool reload
    /// PATH` talk to a running pool.
    Pool(Box<pool::PoolArgs>),
    /// Serve a topic and publish N numbered samples to its subscribers
    /// (over shm: written once, read in place by every subscriber).
    Pub(pubsub::PubArgs),
    /// Subscribe to a topic, check every sample against its sequence
    /// number, and count what was received and missed.
    Sub(pubsub::SubArgs),
    /// Show the sessions of a running server built on shmlink (the CLI's,
    /// a pool, a C/C++ daemon, a PHP Shmlink\Server): peer pid and uid,
    /// transport, age, messages and bytes each way, ring fill, arena bytes,
    /// and the server's totals. Only the server's uid or root may ask.
    Inspect(inspect::InspectArgs),
    /// Upgrade an echo server N times (a new process taking its listeners
    /// and live sessions over) while clients call it without pause:
    /// the worst window against the steady rate, upgrade times, failed
    /// calls and reconnects.
    #[command(name = "upgrade-bench")]
    UpgradeBench(upgrade_bench::UpgradeBenchArgs),
    /// One client process of `chaos`.
    #[command(name = "__chaos-client", hide = true)]
    ChaosClient(chaos::ClientArgs),
    /// The raw Unix-socket server of `connect-cost`.
    #[command(name = "__raw-echo", hide = true)]
    RawEcho(connect_cost::RawEchoArgs),
    /// The peer process of the raw baselines (used by `bench`).
    #[command(name = "__baseline-peer", hide = true)]
    BaselinePeer(bench::PeerArgs),
    /// A subscriber process of `bench --pubsub`.
    #[command(name = "__pubsub-sub", hide = true)]
    PubSubSub(bench::PubSubSubArgs),
    /// The CPU hog of `bench --loads busy`.
    #[command(name = "__hog", hide = true)]
    Hog(bench::HogArgs),
}

fn main() -> ExitCode {
    // `shmlink scope [--grace S] -- COMMAND...`: the harness's scope
    // (crates/scope), its arguments passed through untouched.
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == SCOPE) {
        let me = [scope_exe(), SCOPE.into()];
        let code = shmlink_scope::main(&me, &args[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = Cli::parse();
    if cli.command.runs_a_harness() && !shmlink_scope::is_scoped() {
        // Re-run in a scope of its own: whatever this run starts is
        // stopped, and its temporary files removed, on every way out.
        let e = shmlink_scope::exec_in_scope(&[scope_exe()]);
        let _ = writeln!(std::io::stderr(), "shmlink: cannot run in a scope: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Echo(args) => echo::run(&args),
        Command::Call(args) => call::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::BaselinePeer(args) => bench::run_peer(&args),
        Command::Hog(args) => bench::run_hog(&args),
        Command::PubSubSub(args) => bench::run_pubsub_sub(&args),
        Command::Chaos(args) => chaos::run(&args),
        Command::ConnectCost(args) => connect_cost::run(&args),
        Command::RawEcho(args) => connect_cost::run_raw_echo(&args),
        Command::Pool(args) => pool::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Pub(args) => pubsub::run_pub(&args),
        Command::Sub(args) => pubsub::run_sub(&args),
        Command::UpgradeBench(args) => upgrade_bench::run(&args),
        Command::ChaosClient(args) => chaos::run_client(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "shmlink: {}", one_line(&message(&e)));
            ExitCode::FAILURE
        }
    }
}

/// The hidden command of the harness's scope.
const SCOPE: &str = "scope";

/// This executable, to start it again as a scope's guardian or janitor.
fn scope_exe() -> OsString {
    std::env::current_exe().map_or_else(|_| "shmlink".into(), Into::into)
}

impl Command {
    /// Whether the command starts processes of its own to measure (a
    /// benchmark, chaos): it runs in a scope.
    fn runs_a_harness(&self) -> bool {
        match self {
            Command::Bench(_)
            | Command::ConnectCost(_)
            | Command::Chaos(_)
            | Command::UpgradeBench(_) => true,
            Command::Pool(p) => p.is_bench(),
            _ => false,
        }
    }
}

/// The error and its causes, "outer: inner", leaving out a cause whose text
/// the message already carries (shmlink's errors embed their source).
fn message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

/// Folds a message onto one line, so that every error is exactly one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
