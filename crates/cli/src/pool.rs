//! `shmlink pool`: a supervisor of long-lived worker processes behind
//! shmlink addresses (shmlink-pool), and its `status` and `reload` commands
//! on the control socket.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use shmlink::{Client, ClientOptions, WaitStrategy};
use shmlink_http::FrontOptions;
use shmlink_pool::{HttpMode, Inheritance, LogFormat, Pool, PoolOptions};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook::iterator::Signals;

use crate::parse;

/// Options of `shmlink pool`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
#[command(
    after_help = "Example: shmlink pool --listen shm:/run/app.sock --workers 4 \
    --max-jobs 10000 -- php -d opcache.enable_cli=1 worker.php\n\n\
    Each worker finds the pool's worker port in $SHMLINK_WORKER (Shmlink\\Worker and \
    shmlink::Worker read it). SIGHUP reloads (fresh workers replace the old ones after their \
    current call); SIGUSR2 upgrades (see `shmlink pool upgrade`); SIGTERM or SIGINT stop \
    gracefully. Worker output goes to stderr with the \
    worker's pid in front."
)]
pub(crate) struct PoolArgs {
    #[command(subcommand)]
    command: Option<PoolCommand>,
    /// Address clients call (repeatable): shm:PATH, unix:PATH or tcp:HOST:PORT.
    #[arg(long = "listen", value_name = "ADDR", required_unless_present = "http")]
    listen: Vec<String>,
    /// Serve HTTP/1.1 on HOST:PORT (repeatable): each request is a call to a worker
    /// (Shmlink\HttpRequest in PHP).
    #[arg(long = "http", value_name = "HOST:PORT")]
    http: Vec<String>,
    /// Who parses HTTP: `workers` (each worker accepts and parses on the listening sockets
    /// the pool hands down; the pool only supervises) or `front` (the pool parses and hands
    /// each request to an idle worker as a call; needed with --listen).
    #[arg(long, value_name = "MODE", default_value = "workers")]
    http_mode: HttpMode,
    /// Largest HTTP request body (K/M/G suffixes); larger ones get 413.
    #[arg(long, value_name = "BYTES", value_parser = parse::size, default_value = "8M")]
    http_max_body: usize,
    /// Largest HTTP request head (request line and headers); larger ones get 431.
    #[arg(long, value_name = "BYTES", value_parser = parse::size, default_value = "64K")]
    http_max_header: usize,
    /// Time a client has to send a request's head (and an idle keep-alive connection
    /// stays open); past it the connection is closed.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "10")]
    http_header_timeout: Duration,
    /// How long a client may take nothing of a response being written (a body, a
    /// file, a streamed answer) before its connection is closed; the time starts
    /// again whenever it takes some.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "60")]
    http_send_timeout: Duration,
    /// Most HTTP connections open at once; more are closed when accepted.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    http_max_connections: usize,
    /// Threads of the HTTP front (--http-mode front) [default: one per CPU].
    #[arg(long, value_name = "N", default_value_t = 0)]
    http_threads: usize,
    /// Write one line per HTTP request to PATH (-: standard error).
    #[arg(long, value_name = "PATH")]
    http_access_log: Option<PathBuf>,
    /// Serve the files under DIR to GET and HEAD requests without a worker (sendfile,
    /// ETag and Last-Modified with 304, Range with 206); PHP scripts, hidden files,
    /// directories and paths with no file go to the workers; paths leaving DIR get 404.
    #[arg(long, value_name = "DIR")]
    http_root: Option<PathBuf>,
    /// A directory under which a worker's response may name a file for the server to send
    /// (repeatable): `X-Sendfile: /absolute/path` under any of them, `X-Accel-Redirect:
    /// /path` beneath the first. Without it those headers reach the client unchanged.
    #[arg(long, value_name = "DIR")]
    http_sendfile: Vec<PathBuf>,
    /// Request bodies over BYTES (K/M/G suffixes) are written to an unnamed file as they
    /// arrive, never held in memory, and handed to the worker as a file (php://input,
    /// $_FILES, PSR-7 and Symfony bodies read from it); it is gone when the request ends.
    #[arg(long, value_name = "BYTES", value_parser = parse::size, default_value = "1M")]
    http_spool_over: usize,
    /// Where spooled request bodies go [default: $TMPDIR or /tmp]. Its file system must
    /// support unnamed files (O_TMPFILE: ext4, xfs, btrfs, tmpfs).
    #[arg(long, value_name = "DIR")]
    http_spool_dir: Option<PathBuf>,
    /// Workers kept running.
    #[arg(long, value_name = "N", default_value_t = 2)]
    workers: usize,
    /// Recycle a worker after N calls (0: never).
    #[arg(long, value_name = "N", default_value_t = 0)]
    max_jobs: u64,
    /// Recycle a worker whose resident memory exceeds BYTES (K/M/G suffixes; 0: never).
    #[arg(long, value_name = "BYTES", value_parser = parse::size, default_value = "0")]
    max_memory: usize,
    /// Kill a worker at once when its resident memory exceeds BYTES (K/M/G suffixes; 0:
    /// never): its call fails (died; 502 over HTTP). --max-memory is the soft limit: the
    /// worker finishes its call first.
    #[arg(long, value_name = "BYTES", value_parser = parse::size, default_value = "0")]
    max_memory_hard: usize,
    /// Recycle a worker older than SECONDS.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds)]
    ttl: Option<Duration>,
    /// Recycle a worker idle for SECONDS.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds)]
    idle_ttl: Option<Duration>,
    /// How long a call waits for a free worker before failing.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "10")]
    queue_timeout: Duration,
    /// Most calls waiting for a worker at once; more fail at once.
    #[arg(long = "queue", value_name = "N", default_value_t = 256)]
    queue_size: usize,
    /// How long a worker may take over one call before it is killed.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "30")]
    call_timeout: Duration,
    /// How long a started worker may take to connect before it is killed.
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "10")]
    start_timeout: Duration,
    /// On SIGTERM or SIGINT: how long the calls and HTTP requests in flight
    /// may still run (new ones are refused at once, with "shutting down");
    /// past it, the workers still running one are killed and their callers
    /// get the pool-stopping error (HTTP 503).
    #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "30")]
    shutdown_timeout: Duration,
    /// The control socket [default: the first shm:/unix: listen path with .ctl appended].
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// How the pool waits for its clients' calls on shm: sleep, spin, spin:MICROS or busy
    /// [default: spin].
    #[arg(long, value_name = "HOW")]
    wait: Option<WaitStrategy>,
    /// How the pool waits for a worker's answer: sleep, spin, spin:MICROS or busy
    /// [default: spin, the adaptive default].
    #[arg(long, value_name = "HOW")]
    worker_wait: Option<WaitStrategy>,
    /// How workers wait for their next call (set in their SHMLINK_WORKER_WAIT): sleep, spin,
    /// spin:MICROS or busy [default: spin, the adaptive default].
    #[arg(long, value_name = "HOW")]
    idle_worker_wait: Option<WaitStrategy>,
    /// Never lend a worker to an `shm:` client on a direct line: every call goes through
    /// the pool (by default a client calling one at a time gets an idle worker of its own
    /// while no call waits, and its calls skip the pool).
    #[arg(long)]
    no_lines: bool,
    /// Serve the pool's metrics for Prometheus at http://HOST:PORT/metrics (workers by
    /// state, queue depth, calls, errors by code, restarts by reason, worker memory, call
    /// and HTTP request durations, HTTP requests and connections).
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<String>,
    /// How the pool writes its log to standard error: text, or json (one object per line:
    /// time, level, event, worker_pid, reason, message).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    log_format: LogFormat,
    /// The worker command and its arguments.
    #[arg(last = true, value_name = "COMMAND", required = true)]
    command_line: Vec<String>,
}

/// Commands to a running pool, over its control socket.
#[derive(Debug, Subcommand)]
enum PoolCommand {
    /// Show every worker (pid, state, calls, memory, uptime, restarts) and the totals.
    Status {
        /// The pool's control socket.
        path: PathBuf,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replace every worker without failing a call.
    Reload {
        /// The pool's control socket.
        path: PathBuf,
    },
    /// Hot upgrade: the pool starts its binary again (the file at the same path, possibly a
    /// newer build) with the same arguments; the new process starts its workers, takes over
    /// the listeners (HTTP included) and the live client sessions, and the old one stops
    /// (HTTP keep-alive connections close between requests). Waits until the new pool
    /// answers on the control socket, or the upgrade failed (the old pool then serves on).
    Upgrade {
        /// The pool's control socket.
        path: PathBuf,
        /// How long to wait for the new pool.
        #[arg(long, value_name = "SECONDS", value_parser = parse::seconds, default_value = "60")]
        timeout: Duration,
    },
    /// Measure what the pool's dispatch costs: calls to one worker made
    /// directly (this process holds its worker port) against the same calls
    /// through a pool of one such worker, in alternating rounds.
    Bench(crate::pool_bench::DispatchArgs),
}

impl PoolArgs {
    /// Whether this is `pool bench` (a benchmark, run in a scope).
    pub(crate) fn is_bench(&self) -> bool {
        matches!(self.command, Some(PoolCommand::Bench(_)))
    }
}

pub(crate) fn run(args: &PoolArgs) -> anyhow::Result<()> {
    match &args.command {
        Some(PoolCommand::Status { path, json }) => {
            let command: &[u8] = if *json { b"status-json" } else { b"status" };
            print!("{}", control(path, command)?);
            Ok(())
        }
        Some(PoolCommand::Reload { path }) => {
            print!("{}", control(path, b"reload")?);
            Ok(())
        }
        Some(PoolCommand::Upgrade { path, timeout }) => upgrade(path, *timeout),
        Some(PoolCommand::Bench(args)) => crate::pool_bench::run(args),
        None => supervise(args),
    }
}

fn control(path: &std::path::Path, command: &[u8]) -> anyhow::Result<String> {
    let addr = format!("unix:{}", path.display());
    let mut c = Client::connect(&addr, ClientOptions::default())
        .with_context(|| format!("cannot reach the pool's control socket {}", path.display()))?;
    let answer = c.call(command)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// `shmlink pool upgrade`: asks for the upgrade, then watches the control
/// socket until the successor answers there or the old pool says it failed.
fn upgrade(path: &std::path::Path, timeout: Duration) -> anyhow::Result<()> {
    let status = |path: &std::path::Path| -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::from_str(&control(path, b"status-json")?)?)
    };
    let old = status(path)?["pid"].as_u64().unwrap_or(0);
    let t0 = std::time::Instant::now();
    let answer = control(path, b"upgrade")?;
    let pid: u64 = answer
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("the pool answered {answer:?} to upgrade"))?;
    let failed = format!("failed: successor pid {pid}");
    let deadline = t0 + timeout;
    while std::time::Instant::now() < deadline {
        // Between the two pools the socket may refuse or close a call.
        if let Ok(s) = status(path) {
            if s["pid"].as_u64() == Some(pid) {
                println!(
                    "upgraded: pool pid {old} replaced by pid {pid} ({:.0} ms)",
                    t0.elapsed().as_secs_f64() * 1e3
                );
                return Ok(());
            }
            if let Some(u) = s["upgrade"].as_str().filter(|u| u.starts_with(&failed)) {
                anyhow::bail!("upgrade of pool pid {old} {u}; the pool serves on");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    anyhow::bail!(
        "pool pid {old} started successor pid {pid}, which did not answer on {} within {timeout:?}",
        path.display()
    )
}

fn supervise(args: &PoolArgs) -> anyhow::Result<()> {
    let mut opts = PoolOptions::new(args.listen.clone(), args.command_line.clone());
    opts.workers = args.workers;
    opts.max_jobs = args.max_jobs;
    opts.max_memory = args.max_memory as u64;
    opts.max_memory_hard = args.max_memory_hard as u64;
    opts.ttl = args.ttl;
    opts.idle_ttl = args.idle_ttl;
    opts.queue_timeout = args.queue_timeout;
    opts.queue_size = args.queue_size;
    opts.call_timeout = args.call_timeout;
    opts.start_timeout = args.start_timeout;
    opts.shutdown_timeout = args.shutdown_timeout;
    opts.control = args.control.clone();
    if let Some(w) = args.wait {
        opts.wait = w;
    }
    if let Some(w) = args.worker_wait {
        opts.worker_wait = w;
    }
    if let Some(w) = args.idle_worker_wait {
        opts.idle_worker_wait = w;
    }
    opts.lines = !args.no_lines;
    opts.metrics = args.metrics.clone();
    // A hot upgrade starts this binary again with the same arguments.
    let exe = std::env::current_exe().context("finding this program's path")?;
    opts.successor = Some(
        std::iter::once(exe.into_os_string())
            .chain(std::env::args_os().skip(1))
            .collect(),
    );
    if !args.http.is_empty() {
        let mut h = FrontOptions::new(args.http.clone());
        h.max_body = args.http_max_body;
        h.max_header_bytes = args.http_max_header;
        h.header_timeout = args.http_header_timeout;
        h.send_timeout = args.http_send_timeout;
        h.max_connections = args.http_max_connections;
        h.threads = args.http_threads;
        h.access_log = args.http_access_log.clone();
        h.root = args.http_root.clone();
        h.sendfile = args.http_sendfile.clone();
        h.spool_over = args.http_spool_over;
        h.spool_dir = args.http_spool_dir.clone();
        opts.http = Some(h);
        opts.http_mode = args.http_mode;
    }
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR2]).context("installing signal handlers")?;
    let log = args.log_format.stderr();
    let pool = match Inheritance::from_env()? {
        Some(i) => Pool::take_over(opts, log.clone(), i)?,
        None => Pool::start_with_log(opts, log.clone())?,
    };
    // Once a successor serves, the signal loop ends and this pool stops.
    let (upgraded, handle) = (pool.upgraded(), signals.handle());
    std::thread::Builder::new()
        .name("shmlink-pool-upgraded".into())
        .spawn(move || {
            upgraded.wait();
            handle.close();
        })
        .context("starting the upgrade's watch")?;
    let metrics = pool
        .metrics_address()
        .map(|a| format!("; metrics at http://{a}/metrics"))
        .unwrap_or_default();
    log.write(&format!(
        "shmlink pool: ready, listening on {}; control socket {}{metrics}",
        pool.addresses().join(" "),
        pool.control_path()
            .map_or_else(|| "none".into(), |p| p.display().to_string())
    ));
    for signal in signals.forever() {
        if signal == SIGHUP {
            pool.reload();
        } else if signal == SIGUSR2 {
            if let Err(e) = pool.upgrade() {
                log.write(&format!("shmlink pool: upgrade refused: {e}"));
            }
        } else {
            break;
        }
    }
    pool.stop();
    Ok(())
}
