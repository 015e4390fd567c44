//! `shmlink pool` with real worker processes (the native echo worker,
//! `shmlink-echo-worker`): calls over every transport, pipelining, workers
//! killed mid-call, hanging, crashing at start, recycled by calls and by
//! memory, a reload under load, a full queue, the control socket (and
//! another uid kept out of it), a clean stop. Every wait is on a condition with a deadline.

mod support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions, Error};
use shmlink_pool::{
    Pool, PoolOptions, Status, CODE_NO_WORKER, CODE_NO_WORKERS_START, CODE_POOL_STOPPING,
    CODE_QUEUE_FULL, CODE_WORKER_DIED, CODE_WORKER_TIMEOUT,
};
use shmlink_sys::process::{kill, Sig};

use support::{alive, open_fds, pid_of, remote_code, wait_until, Dir, Lines};

const WORKER: &str = env!("CARGO_BIN_EXE_shmlink-echo-worker");

fn opts(dir: &Dir, workers: usize) -> PoolOptions {
    let mut o = PoolOptions::new(
        vec![format!("shm:{}", dir.path("p.sock").display())],
        vec![WORKER.to_string()],
    );
    o.workers = workers;
    o
}

fn start(o: PoolOptions) -> (Pool, Lines) {
    let lines = Lines::default();
    let pool = Pool::start_with_log(o, lines.log()).expect("pool starts");
    (pool, lines)
}

fn ready(pool: &Pool, n: usize) -> Duration {
    wait_until(
        &format!("{n} workers ready"),
        Duration::from_secs(10),
        || running(&pool.status()) == n,
    )
}

fn running(s: &Status) -> usize {
    s.workers
        .iter()
        .filter(|w| w.serves() && !w.retiring)
        .count()
}

fn client(addr: &str) -> Client {
    Client::connect(
        addr,
        ClientOptions {
            timeout: Duration::from_secs(20),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

#[test]
fn calls_over_every_transport_and_pipelined() {
    let dir = Dir::new("transports");
    let mut o = opts(&dir, 2);
    o.listen
        .push(format!("unix:{}", dir.path("p-unix.sock").display()));
    o.listen.push("tcp:127.0.0.1:0".into());
    let (pool, lines) = start(o);
    ready(&pool, 2);
    for addr in pool.addresses() {
        let mut c = client(&addr);
        for i in 0..200 {
            let req = format!("call {i} via {addr}");
            assert_eq!(
                c.call(req.as_bytes()).expect("call"),
                format!("echo:{req}").as_bytes()
            );
        }
        let big = vec![7u8; 3 << 20];
        assert_eq!(c.call(&big).expect("3 MiB").len(), big.len() + 5);
        assert_eq!(
            remote_code(c.call(b"fail")),
            42,
            "the worker's own error passes"
        );
        let ids: Vec<u64> = (0..40)
            .map(|i| c.send(format!("p{i}").as_bytes()).expect("send"))
            .collect();
        let mut seen = HashSet::new();
        for _ in 0..40 {
            let r = c.recv().expect("recv");
            let body = r.result.expect("pipelined response");
            let i = ids.iter().position(|&id| id == r.id).expect("a known id");
            assert_eq!(
                body,
                format!("echo:p{i}").as_bytes(),
                "response matches its call"
            );
            assert!(seen.insert(r.id));
        }
    }
    let s = pool.status();
    assert_eq!(s.target, 2);
    assert!(s.calls >= 3 * 242, "{s:?}");
    assert!(
        lines.any("echo worker") && lines.any("[worker "),
        "worker stdout is in the log"
    );
    pool.stop();
}

/// Calls a client pipelined run on several workers at once: sent while a
/// first call waits at a gate the test then opens, two calls that each
/// wait for the other to be running (`meet:`) are both answered, by two
/// workers, over every transport. Run one after another, the first would
/// wait alone.
#[test]
fn pipelined_calls_run_on_several_workers_at_once() {
    let dir = Dir::new("spread");
    let mut o = opts(&dir, 2);
    o.listen
        .push(format!("unix:{}", dir.path("p-unix.sock").display()));
    o.listen.push("tcp:127.0.0.1:0".into());
    let (pool, _lines) = start(o);
    ready(&pool, 2);
    for (n, addr) in pool.addresses().iter().enumerate() {
        let mut c = client(addr);
        let meeting = dir.path(&format!("meeting-{n}"));
        std::fs::create_dir(&meeting).expect("meeting dir");
        // The two calls are sent once the first runs, so they wait together
        // behind it.
        let (first, gate) = held_at_gate(&mut c, &dir.path(&format!("gate-{n}")));
        let req = format!("meet:{}:2", meeting.display());
        let ids = [
            c.send(req.as_bytes()).expect("send"),
            c.send(req.as_bytes()).expect("send"),
        ];
        std::fs::write(gate.join("opener"), b"").expect("open the gate");
        let mut pids = HashSet::new();
        for _ in 0..3 {
            let r = c.recv().expect("recv");
            let body = String::from_utf8(r.result.expect("answered")).expect("utf8");
            assert_ne!(
                body, "alone",
                "over {addr}: the calls ran one after another"
            );
            if r.id != first {
                assert!(ids.contains(&r.id), "a known id");
                pids.insert(body);
            }
        }
        assert_eq!(pids.len(), 2, "over {addr}: two workers answered: {pids:?}");
        // A worker dying in the middle of a batch fails its call alone.
        let (held, gate) = held_at_gate(&mut c, &dir.path(&format!("gate-{n}-again")));
        let crash = c.send(b"crash").expect("send");
        let echo = c.send(b"after a crash").expect("send");
        std::fs::write(gate.join("opener"), b"").expect("open the gate");
        for _ in 0..3 {
            let r = c.recv().expect("recv");
            match r.id {
                id if id == crash => assert_eq!(
                    remote_code(r.result.map_err(Error::Remote)),
                    CODE_WORKER_DIED
                ),
                id if id == echo => assert_eq!(r.result.expect("echo"), b"echo:after a crash"),
                id => assert_eq!(id, held, "a known id"),
            }
        }
        // Sequential calls still work after a batch.
        assert_eq!(c.call(b"x").expect("call"), b"echo:x");
        ready(&pool, 2);
    }
    pool.stop();
}

/// Sends a call that holds its worker (and the session) until a file of
/// the test's joins the worker's in the fresh directory `gate`, and waits
/// until it runs; returns its id and the gate (open it by writing a file).
fn held_at_gate(c: &mut Client, gate: &Path) -> (u64, std::path::PathBuf) {
    std::fs::create_dir(gate).expect("gate dir");
    let id = c
        .send(format!("meet:{}:2", gate.display()).as_bytes())
        .expect("send");
    wait_until("a call at its gate", Duration::from_secs(10), || {
        std::fs::read_dir(gate).map_or(0, |d| d.count()) == 1
    });
    (id, gate.to_path_buf())
}

/// The pool tells its workers how to wait for calls (`SHMLINK_WORKER_WAIT`):
/// what `idle_worker_wait` says, the adaptive default unless told.
#[test]
fn workers_wait_for_calls_as_the_pool_says() {
    let dir = Dir::new("idle-wait");
    let mut o = opts(&dir, 1);
    assert_eq!(o.idle_worker_wait, shmlink_pool::default_idle_worker_wait());
    assert_eq!(o.idle_worker_wait, shmlink::WaitStrategy::default());
    o.idle_worker_wait = shmlink::WaitStrategy::Spin(Duration::from_micros(123));
    let (pool, _lines) = start(o);
    ready(&pool, 1);
    let mut c = client(&pool.addresses()[0]);
    assert_eq!(
        c.call(b"env:SHMLINK_WORKER_WAIT").expect("call"),
        b"spin:123"
    );
    pool.stop();
}

/// A worker given a wait it cannot parse says so and does not start.
#[test]
fn a_worker_with_a_bad_wait_in_its_environment_says_why() {
    let dir = Dir::new("bad-wait");
    let out = std::process::Command::new(WORKER)
        .env(
            shmlink::WORKER_ENV,
            format!("shm:{}", dir.path("none.sock").display()),
        )
        .env(shmlink::WORKER_WAIT_ENV, "fast")
        .output()
        .expect("run the worker");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("SHMLINK_WORKER_WAIT") && err.contains("\"fast\""),
        "{err}"
    );
}

#[test]
fn a_worker_killed_mid_call_fails_that_call_only_and_is_replaced() {
    let dir = Dir::new("kill");
    let (pool, _lines) = start(opts(&dir, 2));
    ready(&pool, 2);
    let addr = pool.addresses()[0].clone();
    let fds_before = open_fds();
    let slow = {
        let addr = addr.clone();
        thread::spawn(move || {
            let mut c = client(&addr);
            let t0 = Instant::now();
            let r = c.call(b"sleep:10000");
            (r, t0)
        })
    };
    let busy = wait_pid(&pool, "busy");
    let mut other = client(&addr);
    let killed_at = Instant::now();
    kill(busy, Sig::Kill).expect("kill -9 the busy worker");
    let (r, _) = slow.join().expect("slow caller");
    let took = killed_at.elapsed();
    eprintln!("the caller learned of the kill in {took:?}");
    assert_eq!(remote_code(r), CODE_WORKER_DIED);
    assert!(
        took < Duration::from_millis(100),
        "the caller learned in {took:?} (issue 15: within 100 ms)"
    );
    assert_eq!(
        other.call(b"still").expect("others unaffected"),
        b"echo:still"
    );
    let back = ready(&pool, 2);
    assert!(
        back < Duration::from_secs(1),
        "back to 2 workers in {back:?}"
    );
    assert!(pool.status().restarts >= 1);
    // Nothing leaked in the supervisor: descriptors back where they were.
    wait_until("descriptors back", Duration::from_secs(5), || {
        open_fds() <= fds_before + 2
    });
    pool.stop();
}

#[test]
fn a_worker_that_dies_before_reading_a_call_fails_no_call() {
    let dir = Dir::new("unread");
    let (pool, lines) = start(opts(&dir, 1));
    ready(&pool, 1);
    let addr = pool.addresses()[0].clone();
    let mut c = client(&addr);
    let pid = pid_of(&mut c);
    // Frozen, the worker cannot read the next call; then it is killed.
    kill(pid, Sig::Stop).expect("SIGSTOP the worker");
    let call = thread::spawn(move || c.call(b"unread"));
    wait_pid(&pool, "busy");
    kill(pid, Sig::Kill).expect("kill -9 the frozen worker");
    let got = call.join().expect("caller");
    assert_eq!(
        got.expect("the call goes to the replacement"),
        b"echo:unread"
    );
    assert!(lines.any("died before reading a call"), "logged");
    assert!(pool.status().restarts >= 1);
    pool.stop();
}

#[test]
fn crash_and_hang_fail_their_call_with_a_clear_code() {
    let dir = Dir::new("crash");
    let mut o = opts(&dir, 1);
    o.call_timeout = Duration::from_millis(300);
    let (pool, _lines) = start(o);
    ready(&pool, 1);
    let mut c = client(&pool.addresses()[0]);
    let first = pid_of(&mut c);
    assert_eq!(remote_code(c.call(b"crash")), CODE_WORKER_DIED);
    let t0 = Instant::now();
    assert_eq!(remote_code(c.call(b"hang")), CODE_WORKER_TIMEOUT);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(5),
        "{took:?}"
    );
    ready(&pool, 1);
    let now = pid_of(&mut c);
    assert_ne!(now, first);
    assert!(!alive(first));
    pool.stop();
}

#[test]
fn workers_that_fail_at_start_back_off_and_calls_fail_fast() {
    for (how, reason) in [
        ("crash", "exited before connecting"),
        ("hang", "did not connect"),
    ] {
        let dir = Dir::new(how);
        let mut o = opts(&dir, 2);
        o.command = vec![
            "env".into(),
            format!("SHMLINK_TEST_WORKER_START={how}"),
            WORKER.into(),
        ];
        o.start_timeout = Duration::from_millis(200);
        let (pool, lines) = start(o);
        wait_until("starts failing", Duration::from_secs(10), || {
            pool.status().failed_starts >= 2
        });
        let s = pool.status();
        assert!(
            s.last_failure.as_deref().unwrap_or("").contains(reason),
            "{how}: {s:?}"
        );
        let mut c = client(&pool.addresses()[0]);
        let t0 = Instant::now();
        assert_eq!(remote_code(c.call(b"x")), CODE_NO_WORKERS_START, "{how}");
        assert!(t0.elapsed() < Duration::from_secs(1), "{how}: failed fast");
        // Backoff: far fewer starts than without it in the same time.
        let started = lines
            .0
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| l.contains("started"))
            .count();
        assert!(started < 20, "{how}: {started} starts: no backoff");
        assert!(
            lines.any("failed start(s) in a row"),
            "{how}: the log says so"
        );
        pool.stop();
    }
}

#[test]
fn recycling_by_calls_fails_no_call() {
    let dir = Dir::new("recycle");
    let mut o = opts(&dir, 2);
    o.max_jobs = 10;
    let (pool, lines) = start(o);
    ready(&pool, 2);
    let mut c = client(&pool.addresses()[0]);
    let mut pids = HashSet::new();
    for _ in 0..100 {
        pids.insert(pid_of(&mut c));
    }
    assert!(
        pids.len() >= 10,
        "100 calls, 10 per worker: {} workers",
        pids.len()
    );
    assert!(lines.any("recycled after 10 calls"));
    pool.stop();
}

#[test]
fn recycling_by_memory_fails_no_call() {
    let dir = Dir::new("memory");
    let mut o = opts(&dir, 2);
    o.max_memory = 40 << 20;
    let (pool, lines) = start(o);
    ready(&pool, 2);
    let mut c = client(&pool.addresses()[0]);
    // A worker grows past 40 MiB and is replaced after its call.
    let grown: u32 = String::from_utf8(c.call(b"grow:64").expect("grow"))
        .expect("utf8")
        .parse()
        .expect("pid");
    let mut calls = 0;
    wait_until("the grown worker recycled", Duration::from_secs(5), || {
        c.call(b"meanwhile").expect("no call fails while recycling");
        calls += 1;
        !alive(grown)
    });
    assert!(lines.any("--max-memory"));
    ready(&pool, 2);
    for _ in 0..20 {
        c.call(b"after").expect("no call fails after recycling");
    }
    pool.stop();
}

/// `--max-memory-hard`: a worker that grows past it during a call is
/// killed at once, and that call fails as a died worker's does (the soft
/// `--max-memory` lets the call finish: `recycling_by_memory_fails_no_call`);
/// the next call is answered by another worker.
#[test]
fn a_worker_past_the_hard_memory_limit_is_killed_at_once() {
    let dir = Dir::new("memory-hard");
    let mut o = opts(&dir, 2);
    o.max_memory_hard = 40 << 20;
    let (pool, lines) = start(o);
    ready(&pool, 2);
    let mut c = client(&pool.addresses()[0]);
    let t0 = Instant::now();
    // Grows to 64 MiB, then would sleep 20 s before answering.
    assert_eq!(remote_code(c.call(b"grow:64:20000")), CODE_WORKER_DIED);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(lines.any("--max-memory-hard"), "the log says why");
    assert_eq!(c.call(b"after").expect("the next call"), b"echo:after");
    ready(&pool, 2);
    pool.stop();
}

/// `--log-format json`: every line of the pool's log (its own, and a
/// worker's output) is one JSON object with a time, a level and an event;
/// a crash shows as a `worker_exited` warning naming the pid and why.
#[test]
fn json_log_lines_name_their_events() {
    let dir = Dir::new("json-log");
    let lines = Lines::default();
    let json = lines.clone();
    let log = shmlink::Log::to(move |l| {
        let line = shmlink_pool::json_line(l, std::time::SystemTime::now());
        json.0.lock().expect("lines").push(line);
    });
    let pool = Pool::start_with_log(opts(&dir, 1), log).expect("pool starts");
    ready(&pool, 1);
    let mut c = client(&pool.addresses()[0]);
    let pid = pid_of(&mut c);
    assert_eq!(remote_code(c.call(b"crash")), CODE_WORKER_DIED);
    wait_until("the crash logged", Duration::from_secs(10), || {
        lines.any("worker_exited")
    });
    ready(&pool, 1);
    pool.stop();
    let all = lines.0.lock().expect("lines").clone();
    let events: Vec<serde_json::Value> = all
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for e in &events {
        assert!(e["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
        assert!(e["level"].is_string() && e["event"].is_string(), "{e}");
    }
    let exited = events
        .iter()
        .find(|e| e["event"] == "worker_exited" && e["worker_pid"] == pid)
        .expect("the crashed worker's exit");
    assert_eq!(exited["level"], "warn", "{exited}");
    assert!(exited["reason"].is_string(), "{exited}");
    assert!(events.iter().any(|e| e["event"] == "worker_started"));
    assert!(events.iter().any(|e| e["event"] == "worker_ready"));
}

/// Calls without pause from `clients` threads until `stop`: (calls
/// answered, failures).
fn steady_load(
    addr: &str,
    clients: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<(u64, Vec<String>)>> {
    (0..clients)
        .map(|n| {
            let (addr, stop) = (addr.to_string(), Arc::clone(stop));
            thread::spawn(move || {
                let mut c = client(&addr);
                let (mut done, mut failed) = (0u64, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let req = format!("load {n} {done}");
                    match c.call(req.as_bytes()) {
                        Ok(r) if r == format!("echo:{req}").as_bytes() => done += 1,
                        other => failed.push(format!("{other:?}")),
                    }
                }
                (done, failed)
            })
        })
        .collect()
}

fn stop_load(stop: &Arc<AtomicBool>, load: Vec<thread::JoinHandle<(u64, Vec<String>)>>) -> u64 {
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for l in load {
        let (done, failed) = l.join().expect("a client");
        assert!(failed.is_empty(), "failed calls: {failed:?}");
        total += done;
    }
    total
}

/// `--ttl`: every worker older than it is replaced, under load, with no
/// failed call; the replacements serve.
#[test]
fn workers_past_their_ttl_are_replaced_under_load() {
    let dir = Dir::new("ttl");
    let mut o = opts(&dir, 2);
    o.ttl = Some(Duration::from_millis(300));
    let (pool, lines) = start(o);
    ready(&pool, 2);
    let first: HashSet<u32> = pool.status().workers.iter().map(|w| w.pid).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let load = steady_load(&pool.addresses()[0], 2, &stop);
    wait_until("both first workers gone", Duration::from_secs(10), || {
        first.iter().all(|&p| !alive(p))
    });
    let done = stop_load(&stop, load);
    assert!(done > 0);
    assert!(lines.any("older than --ttl"), "the log says why");
    wait_until("only replacements left", Duration::from_secs(10), || {
        let s = pool.status();
        running(&s) == 2 && s.workers.iter().all(|w| !first.contains(&w.pid))
    });
    pool.stop();
}

/// `--idle-ttl`: a worker idle that long is replaced; one kept busy is
/// not; no call fails.
#[test]
fn idle_workers_are_replaced_after_their_idle_ttl() {
    let dir = Dir::new("idle-ttl");
    let mut o = opts(&dir, 1);
    o.idle_ttl = Some(Duration::from_millis(200));
    o.lines = false;
    let (pool, lines) = start(o);
    ready(&pool, 1);
    let mut c = client(&pool.addresses()[0]);
    let busy = pid_of(&mut c);
    // Called every 20 ms for 0.6 s: never idle 200 ms, never replaced.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(600) {
        assert_eq!(pid_of(&mut c), busy, "replaced while busy");
        thread::sleep(Duration::from_millis(20));
    }
    // Left idle: replaced, and the next call answered by the new one.
    wait_until("the idle worker replaced", Duration::from_secs(10), || {
        !alive(busy)
    });
    assert!(lines.any("--idle-ttl"), "the log says why");
    ready(&pool, 1);
    assert_ne!(pid_of(&mut c), busy);
    assert_eq!(pool.status().errors, 0);
    pool.stop();
}

#[test]
fn a_reload_under_load_fails_no_call_and_replaces_every_worker() {
    let dir = Dir::new("reload");
    let (pool, _lines) = start(opts(&dir, 2));
    ready(&pool, 2);
    let addr = pool.addresses()[0].clone();
    let before: HashSet<u32> = pool.status().workers.iter().map(|w| w.pid).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (addr, stop, failed, done) =
                (addr.clone(), stop.clone(), failed.clone(), done.clone());
            thread::spawn(move || {
                let mut c = client(&addr);
                while !stop.load(Ordering::Relaxed) {
                    match c.call(b"load") {
                        Ok(r) if r == b"echo:load" => done.fetch_add(1, Ordering::Relaxed),
                        other => {
                            eprintln!("failed during reload: {other:?}");
                            failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
        })
        .collect();
    wait_until("load running", Duration::from_secs(5), || {
        done.load(Ordering::Relaxed) > 1000
    });
    pool.reload();
    wait_until("every worker replaced", Duration::from_secs(10), || {
        let s = pool.status();
        running(&s) == 2 && s.workers.iter().all(|w| !before.contains(&w.pid))
    });
    let after_reload = done.load(Ordering::Relaxed);
    wait_until("load goes on", Duration::from_secs(5), || {
        done.load(Ordering::Relaxed) > after_reload + 1000
    });
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().expect("load thread");
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "no call failed during the reload"
    );
    assert_eq!(pool.status().reloads, 1);
    pool.stop();
}

#[test]
fn a_full_queue_and_a_queue_timeout_answer_at_once() {
    let dir = Dir::new("queue");
    let mut o = opts(&dir, 1);
    o.queue_size = 1;
    o.queue_timeout = Duration::from_millis(300);
    let (pool, _lines) = start(o);
    ready(&pool, 1);
    let addr = pool.addresses()[0].clone();
    let busy = {
        let addr = addr.clone();
        thread::spawn(move || client(&addr).call(b"sleep:1500"))
    };
    wait_pid(&pool, "busy");
    let queued = {
        let addr = addr.clone();
        thread::spawn(move || {
            let t0 = Instant::now();
            (client(&addr).call(b"queued"), t0.elapsed())
        })
    };
    wait_until("one call queued", Duration::from_secs(5), || {
        pool.status().queue_depth == 1
    });
    let t0 = Instant::now();
    let full = client(&addr).call(b"third");
    assert_eq!(remote_code(full), CODE_QUEUE_FULL);
    assert!(t0.elapsed() < Duration::from_millis(200), "refused at once");
    let (r, took) = queued.join().expect("queued");
    assert_eq!(remote_code(r), CODE_NO_WORKER);
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(1),
        "{took:?}"
    );
    assert_eq!(busy.join().expect("busy").expect("the slow call"), b"slept");
    pool.stop();
}

/// A stop with calls in flight: one that ends within `--shutdown-timeout`
/// is answered; one that would outlive it is cut off at the deadline with
/// the pool-stopping code saying why (its worker killed); a new call on an
/// open session is refused as shutting down; new sessions find no socket.
#[test]
fn a_stop_lets_calls_finish_within_the_shutdown_timeout() {
    let dir = Dir::new("shutdown");
    let mut o = opts(&dir, 2);
    o.shutdown_timeout = Duration::from_millis(1500);
    let (pool, lines) = start(o);
    ready(&pool, 2);
    let addr = pool.addresses()[0].clone();
    let mut idle = client(&addr);
    assert_eq!(idle.call(b"x").expect("a first call"), b"echo:x");
    let call = |body: &'static [u8]| {
        let addr = addr.clone();
        thread::spawn(move || client(&addr).call(body))
    };
    let short = call(b"sleep:700");
    let long = call(b"sleep:60000");
    wait_until("both workers busy", Duration::from_secs(5), || {
        pool.status()
            .workers
            .iter()
            .filter(|w| w.state == "busy")
            .count()
            == 2
    });
    let pids: Vec<u32> = pool.status().workers.iter().map(|w| w.pid).collect();
    let t0 = Instant::now();
    let stopper = thread::spawn(move || pool.stop());
    // New work is refused from the first moment.
    wait_until("the socket file removed", Duration::from_secs(5), || {
        !dir.path("p.sock").exists()
    });
    match idle.call(b"late") {
        Err(Error::Closed { reason, .. }) => assert!(reason.contains("shutting down"), "{reason}"),
        other => panic!("a call after the stop: {other:?}"),
    }
    assert_eq!(
        short.join().expect("short").expect("the short call"),
        b"slept"
    );
    let cut = long.join().expect("long");
    let took = t0.elapsed();
    match cut {
        Err(Error::Remote(r)) => {
            assert_eq!(r.code, CODE_POOL_STOPPING, "{r}");
            assert!(r.message.contains("--shutdown-timeout"), "{}", r.message);
        }
        other => panic!("the long call: {other:?}"),
    }
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(10),
        "cut off at the deadline: {took:?}"
    );
    stopper.join().expect("stop");
    for pid in pids {
        assert!(!alive(pid), "worker {pid} left running");
    }
    assert!(
        lines.any("--shutdown-timeout): killed"),
        "the log says which worker was killed"
    );
}

#[test]
fn the_control_socket_reports_and_reloads_and_stop_cleans_up() {
    let dir = Dir::new("control");
    let (pool, _lines) = start(opts(&dir, 2));
    ready(&pool, 2);
    let ctl = pool.control_path().expect("a control socket");
    assert_eq!(ctl, dir.path("p.sock.ctl"));
    assert_eq!(mode(&ctl), 0o600);
    let mut c = client(&format!("unix:{}", ctl.display()));
    let text = String::from_utf8(c.call(b"status").expect("status")).expect("utf8");
    assert!(
        text.contains("workers 2 of 2") && text.contains("idle"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&c.call(b"status-json").expect("json")).expect("valid json");
    assert_eq!(json["target"], 2);
    assert_eq!(json["workers"].as_array().expect("workers").len(), 2);
    assert_eq!(c.call(b"reload").expect("reload"), b"reloading\n");
    wait_until("reloaded", Duration::from_secs(10), || {
        let s = pool.status();
        s.reloads == 1 && running(&s) == 2 && s.workers.iter().all(|w| w.generation == 1)
    });
    assert!(matches!(c.call(b"nope"), Err(Error::Remote(_))));
    let pids: Vec<u32> = pool.status().workers.iter().map(|w| w.pid).collect();
    drop(c);
    pool.stop();
    for pid in pids {
        assert!(!alive(pid), "worker {pid} stopped with the pool");
    }
    assert!(
        !dir.path("p.sock").exists() && !ctl.exists(),
        "socket files removed"
    );
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

/// The pid of a worker in `state`, once there is one.
fn wait_pid(pool: &Pool, state: &str) -> u32 {
    let mut pid = 0;
    wait_until(
        &format!("a {state} worker"),
        Duration::from_secs(5),
        || match pool.status().workers.iter().find(|w| w.state == state) {
            Some(w) => {
                pid = w.pid;
                true
            }
            None => false,
        },
    );
    pid
}

// ---------- the control socket and other uids ----------

const ROLE: &str = "SHMLINK_POOL_TEST_ROLE";

/// Entry point of the child run as another uid (does nothing in a normal run).
#[test]
fn role_child() {
    let Ok(addr) = std::env::var(ROLE) else {
        return;
    };
    let opts = ClientOptions {
        timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let r = Client::connect(&addr, opts).and_then(|mut c| c.call(b"status"));
    println!("@@RESULT {r:?}@@");
}

/// Calls `addr` from a copy of this test binary run as uid/gid 65534;
/// what it got, or `None` when this process cannot run one (not root, or
/// no setpriv).
fn call_as_nobody(dir: &Dir, addr: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    if shmlink_sys::cred::current_uid() != 0 {
        return None;
    }
    let copy = dir.path("as-nobody");
    std::fs::copy(std::env::current_exe().expect("current exe"), &copy).expect("copy");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Another test's child forked while the copy was open for writing holds
    // that descriptor until it execs: exec fails with ETXTBSY meanwhile.
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = std::process::Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&copy)
            .args(["--exact", "role_child", "--nocapture", "--test-threads=1"])
            .env(ROLE, addr)
            .output()
            .expect("run the child");
        let busy = String::from_utf8_lossy(&out.stderr).contains("Text file busy");
        if !busy || Instant::now() >= deadline {
            break out;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(start) = stdout.find("@@RESULT ") else {
        panic!(
            "the child printed no result ({:?}): {stdout} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let rest = &stdout[start + 9..];
    Some(rest[..rest.find("@@").expect("end marker")].to_string())
}

#[test]
fn the_control_socket_refuses_other_uids() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Dir::new("uids");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    let (pool, _lines) = start(opts(&dir, 1));
    let ctl = pool.control_path().expect("a control socket");
    let addr = format!("unix:{}", ctl.display());
    assert_eq!(mode(&ctl), 0o600);
    let Some(got) = call_as_nobody(&dir, &addr) else {
        eprintln!(
            "NOTE the_control_socket_refuses_other_uids: not root or no setpriv; \
             only the socket's mode 0600 was checked"
        );
        pool.stop();
        return;
    };
    // The file's mode keeps another uid out...
    assert!(
        got.starts_with("Err(Connect") && got.contains("ermission denied"),
        "uid 65534 at a 0600 control socket: {got}"
    );
    // ...and so does the socket's policy when the mode is opened up.
    std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let got = call_as_nobody(&dir, &addr).expect("as before");
    assert!(
        got.starts_with("Err(Refused") && got.contains("NotAllowed") && got.contains("65534"),
        "uid 65534 at an opened control socket: {got}"
    );
    // This uid still gets its status.
    let mut c = client(&addr);
    assert!(c.call(b"status").is_ok());
    drop(c);
    pool.stop();
}
