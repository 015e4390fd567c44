//! `shmlink pool bench`, second part: the pool under churn. A client calls
//! a pool of two workers without pause while workers are recycled
//! (`--max-jobs 1000`), while the pool reloads, and after a worker is
//! killed; every response is checked. Reported: failed calls, calls/s
//! in steady state and in the worst 100 ms window (the dip), workers
//! replaced, and how long the pool took to be back to two workers after
//! the `kill -9`.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use shmlink::{Client, ClientOptions, Log};
use shmlink_pool::{Pool, PoolOptions, Status};
use shmlink_sys::process::{kill, Sig};

use crate::child::TempDir;

/// Width of the windows the dip is measured over.
const WINDOW: Duration = Duration::from_millis(100);
/// Workers of the churned pool.
const WORKERS: usize = 2;

/// What one churn case measured.
pub(crate) struct Churn {
    pub(crate) case: &'static str,
    pub(crate) calls: u64,
    pub(crate) failed: u64,
    /// Median calls/s over the windows.
    pub(crate) steady: f64,
    /// Calls/s of the worst window.
    pub(crate) worst: f64,
    pub(crate) replaced: u64,
    /// For the kill case: time until the pool ran two idle workers again.
    pub(crate) back_in: Option<Duration>,
}

/// How the churned pools run and are called.
pub(crate) struct Setup<'a> {
    /// The worker command, the pool's waits (listen addresses are set here).
    pub(crate) pool: PoolOptions,
    pub(crate) client: ClientOptions,
    pub(crate) size: usize,
    pub(crate) length: Duration,
    pub(crate) dir: &'a TempDir,
}

const CASES: [&str; 3] = [
    "recycling (--max-jobs 1000)",
    "reload",
    "kill -9 of a worker",
];

/// The three cases, one pool each.
pub(crate) fn run(setup: &Setup<'_>) -> anyhow::Result<Vec<Churn>> {
    (0..CASES.len()).map(|n| one(setup, n)).collect()
}

fn one(setup: &Setup<'_>, n: usize) -> anyhow::Result<Churn> {
    let case = CASES[n];
    let length = setup.length;
    let dir = setup.dir;
    let addr = format!(
        "shm:{}",
        dir.path().join(format!("churn{n}.sock")).display()
    );
    let mut opts = setup.pool.clone();
    opts.listen = vec![addr.clone()];
    opts.workers = WORKERS;
    opts.control = Some(dir.path().join(format!("churn{n}.ctl")));
    if n == 0 {
        opts.max_jobs = 1000;
    }
    let pool = Pool::start_with_log(opts, Log::off())?;
    let ready = |pool: &Pool| running_idle(&pool.status()) == WORKERS;
    wait_for(&pool, Duration::from_secs(20), ready).context("the pool's workers did not start")?;
    let mut c = Client::connect(&addr, setup.client.clone())?;
    let request: Vec<u8> = (0..setup.size).map(|i| (i * 13 + 1) as u8).collect();
    let expected = c.call(&request).context("the first call")?;
    let before = pool.status().restarts;
    let (mut calls, mut failed) = (0u64, 0u64);
    let mut windows = Vec::new();
    let mut in_window = 0u64;
    let start = Instant::now();
    let mut window_end = start + WINDOW;
    let mut event_done = false;
    let mut killed_at = None;
    let mut back_in = None;
    while start.elapsed() < length {
        if !event_done && start.elapsed() >= length / 3 {
            event_done = true;
            match n {
                1 => pool.reload(),
                2 => {
                    let pid = pool.status().workers[0].pid;
                    kill(pid, Sig::Kill).with_context(|| format!("kill -9 {pid}"))?;
                    killed_at = Some((Instant::now(), pid));
                }
                _ => {}
            }
        }
        match c.call(&request) {
            Ok(r) if r == expected => {}
            Ok(r) => bail!("{case}: a response of {} bytes is not the echo", r.len()),
            Err(_) => failed += 1,
        }
        calls += 1;
        in_window += 1;
        let now = Instant::now();
        if now >= window_end {
            windows.push(in_window as f64 / WINDOW.as_secs_f64());
            in_window = 0;
            window_end = now + WINDOW;
        }
        if let (Some((at, pid)), None) = (killed_at, back_in) {
            if calls % 64 == 0 {
                let s = pool.status();
                if running_idle(&s) == WORKERS && s.workers.iter().all(|w| w.pid != pid) {
                    back_in = Some(at.elapsed());
                }
            }
        }
    }
    if let Some((at, pid)) = killed_at.filter(|_| back_in.is_none()) {
        wait_for(&pool, Duration::from_secs(10), |p| {
            let s = p.status();
            running_idle(&s) == WORKERS && s.workers.iter().all(|w| w.pid != pid)
        })
        .context("the pool did not get back to two workers after the kill")?;
        back_in = Some(at.elapsed());
    }
    let replaced = pool.status().restarts - before;
    drop(c);
    pool.stop();
    if windows.is_empty() {
        bail!("{case}: --churn-seconds is shorter than one window of {WINDOW:?}");
    }
    let worst = windows.iter().copied().fold(f64::INFINITY, f64::min);
    windows.sort_by(f64::total_cmp);
    Ok(Churn {
        case,
        calls,
        failed,
        steady: windows[windows.len() / 2],
        worst,
        replaced,
        back_in,
    })
}

/// Workers that run and are not stopping (idle or busy).
fn running_idle(s: &Status) -> usize {
    s.workers
        .iter()
        .filter(|w| (w.state == "idle" || w.state == "busy") && !w.retiring)
        .count()
}

fn wait_for(pool: &Pool, limit: Duration, cond: impl Fn(&Pool) -> bool) -> anyhow::Result<()> {
    let t0 = Instant::now();
    while !cond(pool) {
        if t0.elapsed() > limit {
            bail!("not within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The churn table, in markdown.
pub(crate) fn table(rows: &[Churn], size: usize, seconds: f64) -> String {
    let mut t = String::from(
        "| under churn (2 workers) | calls | failed | calls/s steady | worst 100 ms | dip | workers replaced | back to 2 workers after kill -9 |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let dip = if r.steady > 0.0 {
            100.0 * (1.0 - r.worst / r.steady)
        } else {
            0.0
        };
        let back = r.back_in.map_or("—".to_string(), |d| {
            format!("{:.0} ms", d.as_secs_f64() * 1e3)
        });
        t += &format!(
            "| {} | {} | {} | {:.0} | {:.0} | {dip:.0} % | {} | {back} |\n",
            r.case, r.calls, r.failed, r.steady, r.worst, r.replaced
        );
    }
    t += &format!(
        "\nOne client calling without pause for {seconds} s per case ({size} B requests, every \
         response checked); the reload and the kill happen a third of the way in.\n"
    );
    t
}
