//! Hot upgrade of `shmlink pool` (`shmlink pool upgrade`, SIGUSR2): real
//! pool processes serving the native echo worker on `shm:`, `unix:`, HTTP
//! (front mode) and metrics. Upgrades under load lose no `shm:` call (the
//! sessions are handed over), nor any `unix:` one (stream sessions are
//! handed over too: no reconnect), and HTTP keep-alive connections are closed
//! between requests, never under one; each old pool and its workers exit.
//! A successor that cannot start, that is killed during the upgrade, or
//! whose take-over of the control socket is refused leaves the clients
//! served; an old pool killed right after the hand-over leaves them to
//! the new one. Calls to the control socket while it changes hands (monitoring
//! asking for the status) must not make an upgrade fail.
//!
//! The pool processes outlive their parents at each upgrade (a successor is
//! a child of the pool it replaces), so processes are watched through
//! `/proc`, and a guard SIGKILLs every pool a test started, whatever way
//! the test ends. Needs the echo worker next to the `shmlink` binary
//! (`cargo build --release -p shmlink-pool`).

mod support;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions, Transport};
use support::{TempDir, BIN};

/// How long anything expected to happen soon may take on a busy machine:
/// a deadline, never an expected time.
const DEADLINE: Duration = Duration::from_secs(20);

/// The native echo worker, built next to `shmlink`.
fn echo_worker() -> PathBuf {
    let p = Path::new(BIN).with_file_name("shmlink-echo-worker");
    assert!(
        p.exists(),
        "no echo worker at {}: build it: cargo build --release -p shmlink-pool",
        p.display()
    );
    p
}

/// Polls `f` until it gives a value; past the deadline, panics with what
/// it said last.
fn wait_for<T>(mut f: impl FnMut() -> Result<T, String>) -> T {
    let t0 = Instant::now();
    loop {
        match f() {
            Ok(v) => return v,
            Err(why) => assert!(t0.elapsed() < DEADLINE, "after {DEADLINE:?}: {why}"),
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Whether process `pid` runs. A zombie has exited: the pools here are
/// reaped by whoever inherits them, not always at once.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Waits until process `pid` has exited.
fn wait_gone(pid: u32, what: &str) {
    wait_for(|| match alive(pid) {
        true => Err(format!("{what} (pid {pid}) still runs")),
        false => Ok(()),
    });
}

/// Sends `signal` (a name: TERM, KILL, USR2) with kill(1).
fn signal(pid: u32, signal: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Writes an executable shell script, replacing any file at `path` at once
/// (a pool starting a worker never reads half a script).
fn write_script(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).expect("write the script");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&tmp, path).expect("put the script in place");
}

/// A client of `addr` whose calls may wait 10 s (an upgrade under way on a
/// busy machine), its first call checked.
fn connect(addr: &str, what: &str) -> Client {
    let opts = ClientOptions {
        timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    };
    let mut c = Client::connect(addr, opts).unwrap_or_else(|e| panic!("connect on {what}: {e}"));
    assert_eq!(c.call(b"before").expect("call before"), b"echo:before");
    c
}

/// Runs a `shmlink` command to its end.
fn shmlink(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run shmlink")
}

/// `shmlink pool ...` started by a test, and every successor it gets: all
/// SIGKILLed on drop if still running.
struct Pool {
    /// The first pool process (the only one that is our child).
    first: Child,
    log: PathBuf,
    ctl: String,
    shm: String,
    unix: String,
    http: SocketAddr,
    metrics: SocketAddr,
}

impl Pool {
    /// `shmlink pool` on `shm:`, `unix:`, HTTP (front) and metrics, with 2
    /// workers of `worker`; `extra` goes before the worker command.
    fn start(dir: &Path, worker: &Path, extra: &[&str]) -> Pool {
        let log = dir.join("pool.log");
        let err = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("create the log");
        let shm = format!("shm:{}/a.sock", dir.display());
        let unix = format!("unix:{}/u.sock", dir.display());
        let first = Command::new(BIN)
            .args(["pool", "--listen", &shm, "--listen", &unix])
            .args(["--http", "127.0.0.1:0", "--http-mode", "front"])
            .args(["--metrics", "127.0.0.1:0", "--workers", "2"])
            .args(extra)
            .arg("--")
            .arg(worker)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("start shmlink pool");
        let mut pool = Pool {
            first,
            ctl: format!("{}/a.sock.ctl", dir.display()),
            log,
            shm,
            unix,
            http: "0.0.0.0:0".parse().expect("an address"),
            metrics: "0.0.0.0:0".parse().expect("an address"),
        };
        pool.wait_ready();
        // `shmlink pool: ready, listening on shm:... unix:...
        // http://127.0.0.1:PORT; control socket ...; metrics at
        // http://127.0.0.1:PORT/metrics`
        let line = pool.ready_lines().remove(0);
        let address_after = |marker: &str| -> SocketAddr {
            let at = line
                .find(marker)
                .unwrap_or_else(|| panic!("no {marker:?} in {line:?}"));
            let rest = &line[at + marker.len()..];
            let a = &rest[..rest.find([';', '/']).unwrap_or(rest.len())];
            a.parse()
                .unwrap_or_else(|e| panic!("{a:?} in {line:?}: {e}"))
        };
        pool.http = address_after(" http://");
        pool.metrics = address_after("metrics at http://");
        pool
    }

    fn log_text(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // Whole lines only: a process may be writing the last one.
        match text.rfind('\n') {
            Some(i) => text[..=i].to_string(),
            None => String::new(),
        }
    }

    /// `shmlink pool: ready, ...` lines so far (one per pool process).
    fn ready_lines(&self) -> Vec<String> {
        self.log_text()
            .lines()
            .filter(|l| l.starts_with("shmlink pool: ready, listening on "))
            .map(str::to_owned)
            .collect()
    }

    /// Waits for the first pool's ready line.
    fn wait_ready(&mut self) {
        let t0 = Instant::now();
        while self.ready_lines().is_empty() {
            if let Some(status) = self.first.try_wait().expect("try_wait") {
                panic!(
                    "the pool exited ({status}) before it was ready:\n{}",
                    self.log_text()
                );
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "the pool did not become ready:\n{}",
                self.log_text()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// The pids of every successor started (`upgrade: started the
    /// successor, pid N`), in order.
    fn successors(&self) -> Vec<u32> {
        self.log_text()
            .lines()
            .filter_map(|l| l.split("upgrade: started the successor, pid ").nth(1))
            .filter_map(|rest| rest.split(' ').next()?.parse().ok())
            .collect()
    }

    /// `shmlink pool status --json`, or `None` if it did not answer.
    fn status(&self) -> Option<serde_json::Value> {
        let out = shmlink(&["pool", "status", &self.ctl, "--json"]);
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The status, waiting for an answer (the control socket changes hands
    /// at an upgrade).
    fn status_now(&self) -> serde_json::Value {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.status() {
                return s;
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "no status from {}:\n{}",
                self.ctl,
                self.log_text()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The pid of the pool serving the control socket.
    fn pid(&self) -> u32 {
        let s = self.status_now();
        s["pid"].as_u64().unwrap_or_else(|| panic!("no pid in {s}")) as u32
    }

    fn worker_pids(&self) -> Vec<u32> {
        let s = self.status_now();
        let pids: Vec<u32> = s["workers"]
            .as_array()
            .unwrap_or_else(|| panic!("no workers in {s}"))
            .iter()
            .filter_map(|w| w["pid"].as_u64())
            .map(|p| p as u32)
            .collect();
        assert!(!pids.is_empty(), "no worker pids in {s}");
        pids
    }

    /// `shmlink pool upgrade`.
    fn upgrade(&self) -> Output {
        shmlink(&["pool", "upgrade", &self.ctl, "--timeout", "20"])
    }

    /// `upgraded: pool pid OLD replaced by pid NEW (N ms)` from `shmlink
    /// pool upgrade`: NEW.
    fn upgraded_to(&self, out: &Output, old: u32) -> u32 {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "shmlink pool upgrade: {}; stdout {stdout:?}, stderr {:?}; the pool's log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log_text()
        );
        let prefix = format!("upgraded: pool pid {old} replaced by pid ");
        let rest = stdout
            .trim()
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{stdout:?} does not start with {prefix:?}"));
        rest.split(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {stdout:?}"))
    }

    /// GET /metrics answers 200 with the pool's metrics.
    fn check_metrics(&self) {
        let mut c = Http::open(self.metrics).expect("connect to the metrics endpoint");
        let r = c
            .get("/metrics", true)
            .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
        assert_eq!(r.status, 200, "GET /metrics: {}", r.text());
        assert!(r.text().contains("shmlink"), "metrics: {}", r.text());
    }

    /// SIGTERM to the serving pool, which (and whose workers) must exit.
    fn stop(self) {
        let pid = self.pid();
        let workers = self.worker_pids();
        assert!(signal(pid, "TERM"), "kill -TERM {pid}");
        wait_gone(pid, "the pool after SIGTERM");
        for w in workers {
            wait_gone(w, "a worker of the stopped pool");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let mut pids = vec![self.first.id()];
        pids.extend(self.successors());
        for pid in pids {
            let ours = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "shmlink");
            if ours && alive(pid) {
                signal(pid, "KILL");
            }
        }
        let _ = self.first.kill();
        let _ = self.first.wait();
    }
}

/// What a calling thread counts.
#[derive(Default)]
struct Tally {
    /// Calls answered right.
    ok: AtomicU64,
    /// Sessions or connections ended by the server, and opened again.
    reconnects: AtomicU64,
    /// Wrong answers and failed calls, with what happened.
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failures.lock().expect("failures").push(what);
    }

    fn failed(&self) -> usize {
        self.failures.lock().expect("failures").len()
    }

    /// Counts `answer` to the call `what` with `body`: right when it is
    /// the echo worker's `echo:` and the body.
    fn check(&self, what: &str, body: &str, answer: &[u8]) {
        if answer == [b"echo:", body.as_bytes()].concat() {
            self.ok.fetch_add(1, Ordering::Relaxed);
        } else {
            self.fail(format!(
                "{what}: wrong answer {:?}",
                String::from_utf8_lossy(answer)
            ));
        }
    }
}

/// A thread calling in a loop until told to stop (or 5 failures).
struct Caller {
    name: &'static str,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    thread: thread::JoinHandle<()>,
}

impl Caller {
    fn spawn(name: &'static str, f: impl FnOnce(&AtomicBool, &Tally) + Send + 'static) -> Caller {
        let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
        let (s, t) = (Arc::clone(&stop), Arc::clone(&tally));
        let thread = thread::Builder::new()
            .name(name.into())
            .spawn(move || f(&s, &t))
            .expect("start a caller");
        Caller {
            name,
            stop,
            tally,
            thread,
        }
    }

    /// Calls `addr` on one `shm:` session, never reconnecting: any error
    /// is a failure.
    fn shm(addr: &str) -> Caller {
        let opts = ClientOptions {
            timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        };
        let mut c = Client::connect(addr, opts).expect("connect on shm:");
        assert_eq!(c.transport(), Transport::Shm);
        Caller::spawn("shm", move |stop, t| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && t.failed() < 5 {
                i += 1;
                let body = format!("shm call {i};").repeat(1 + (i % 5) as usize);
                match c.call(body.as_bytes()) {
                    Ok(r) => t.check(&format!("shm call {i}"), &body, &r),
                    Err(e) => t.fail(format!("shm call {i}: {e}")),
                }
            }
        })
    }

    /// Calls `addr` over `unix:`, connecting again whenever a call fails
    /// (the sessions end at an upgrade); only a wrong answer, or no new
    /// session within the deadline, is a failure.
    fn unix(addr: &str) -> Caller {
        let addr = addr.to_string();
        let connect = move |t: &Tally| -> Option<Client> {
            let t0 = Instant::now();
            loop {
                match Client::connect(&addr, ClientOptions::default()) {
                    Ok(c) => return Some(c),
                    Err(e) if t0.elapsed() > DEADLINE => {
                        t.fail(format!("no new unix: session: {e}"));
                        return None;
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        };
        let first = connect(&Tally::default()).expect("connect on unix:");
        Caller::spawn("unix", move |stop, t| {
            let mut c = Some(first);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && t.failed() < 5 {
                let Some(client) = c.as_mut() else {
                    c = connect(t);
                    continue;
                };
                i += 1;
                let body = format!("unix call {i}");
                match client.call(body.as_bytes()) {
                    Ok(r) => t.check(&format!("unix call {i}"), &body, &r),
                    Err(_) => {
                        t.reconnects.fetch_add(1, Ordering::Relaxed);
                        c = None;
                    }
                }
            }
        })
    }

    /// GET requests in a loop on a keep-alive connection, opened again
    /// after a response that said `Connection: close` (a reconnect); a
    /// reset, a close with a request outstanding or a status other than
    /// 200 is a failure.
    fn http(addr: SocketAddr) -> Caller {
        Caller::spawn("http", move |stop, t| {
            let mut conn: Option<Http> = None;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && t.failed() < 5 {
                let c = match conn.as_mut() {
                    Some(c) => c,
                    None => match Http::open(addr) {
                        Ok(c) => conn.insert(c),
                        Err(e) => {
                            t.fail(format!("connecting to {addr}: {e}"));
                            continue;
                        }
                    },
                };
                i += 1;
                let target = format!("/call/{i}");
                match c.get(&target, false) {
                    Ok(r) => {
                        let expected = format!("GET {target} HTTP/1.1\n");
                        if r.status != 200 {
                            t.fail(format!("GET {target}: status {}: {}", r.status, r.text()));
                        } else if !r.text().starts_with(&expected) {
                            t.fail(format!("GET {target}: wrong answer {:?}", r.text()));
                        } else {
                            t.ok.fetch_add(1, Ordering::Relaxed);
                        }
                        if r.close {
                            t.reconnects.fetch_add(1, Ordering::Relaxed);
                            conn = None;
                        }
                    }
                    Err(e) => {
                        t.fail(format!("GET {target}: {e}"));
                        conn = None;
                    }
                }
            }
        })
    }

    fn ok(&self) -> u64 {
        self.tally.ok.load(Ordering::Relaxed)
    }

    /// Waits until `more` calls were answered right after now.
    fn wait_more(&self, more: u64) {
        let target = self.ok() + more;
        wait_for(|| match self.ok() >= target {
            true => Ok(()),
            false => Err(format!(
                "{} calls stalled at {} (failures: {:?})",
                self.name,
                self.ok(),
                self.tally.failures.lock().expect("failures")
            )),
        });
    }

    /// Stops the thread: right answers, reconnects, failures.
    fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("caller thread");
        let t = &self.tally;
        (
            t.ok.load(Ordering::Relaxed),
            t.reconnects.load(Ordering::Relaxed),
            std::mem::take(&mut *t.failures.lock().expect("failures")),
        )
    }
}

/// A response as read off the wire.
struct Resp {
    status: u16,
    /// It said `Connection: close`.
    close: bool,
    body: Vec<u8>,
}

impl Resp {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A small HTTP/1.1 client connection: every read and write with a
/// deadline, every error returned (never a panic: callers count them).
struct Http {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Http {
    fn open(addr: SocketAddr) -> io::Result<Http> {
        let s = TcpStream::connect_timeout(&addr, DEADLINE)?;
        s.set_read_timeout(Some(DEADLINE))?;
        s.set_write_timeout(Some(DEADLINE))?;
        s.set_nodelay(true)?;
        Ok(Http { s, buf: Vec::new() })
    }

    /// Reads more; an error at EOF (a request is always outstanding).
    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 << 10];
        let n = self.s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the server closed the connection with a request outstanding ({} bytes of \
                     the response read)",
                    self.buf.len()
                ),
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Reads until `pat`; what came before it, taken off the buffer with it.
    fn until(&mut self, pat: &[u8]) -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = self.buf.windows(pat.len()).position(|w| w == pat) {
                let before = self.buf[..i].to_vec();
                self.buf.drain(..i + pat.len());
                return Ok(before);
            }
            self.fill()?;
        }
    }

    fn take(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            self.fill()?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// `GET target`, and its response.
    fn get(&mut self, target: &str, close: bool) -> io::Result<Resp> {
        let connection = if close { "close" } else { "keep-alive" };
        self.s.write_all(
            format!("GET {target} HTTP/1.1\r\nHost: test\r\nConnection: {connection}\r\n\r\n")
                .as_bytes(),
        )?;
        let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        let head = String::from_utf8(self.until(b"\r\n\r\n")?)
            .map_err(|e| bad(format!("a head that is not UTF-8: {e}")))?;
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or("");
        let status = first
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("status line {first:?}")))?;
        let (mut length, mut chunked, mut close) = (None, false, false);
        for l in lines {
            let (name, value) = l
                .split_once(':')
                .ok_or_else(|| bad(format!("header line {l:?}")))?;
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => {
                    length = Some(
                        value
                            .parse()
                            .map_err(|_| bad(format!("length {value:?}")))?,
                    )
                }
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        let body = if chunked {
            let mut body = Vec::new();
            loop {
                let line = String::from_utf8_lossy(&self.until(b"\r\n")?).into_owned();
                let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                    .map_err(|_| bad(format!("chunk size {line:?}")))?;
                if size == 0 {
                    // Trailers up to the blank line.
                    while !self.until(b"\r\n")?.is_empty() {}
                    break body;
                }
                body.extend(self.take(size)?);
                self.take(2)?;
            }
        } else {
            self.take(length.unwrap_or(0))?
        };
        Ok(Resp {
            status,
            close,
            body,
        })
    }
}

#[test]
fn upgrades_under_load_lose_nothing() {
    let dir = TempDir::new("pool-upgrade-load");
    let pool = Pool::start(dir.path(), &echo_worker(), &[]);
    let callers = [
        Caller::shm(&pool.shm),
        Caller::unix(&pool.unix),
        Caller::http(pool.http),
    ];
    for c in &callers {
        c.wait_more(50);
    }
    let mut pid = pool.pid();
    assert_eq!(pid, pool.first.id());
    for round in 1..=3 {
        let workers = pool.worker_pids();
        let t0 = Instant::now();
        let out = pool.upgrade();
        let new = pool.upgraded_to(&out, pid);
        eprintln!(
            "round {round}: {} (the command took {:?})",
            String::from_utf8_lossy(&out.stdout).trim(),
            t0.elapsed()
        );
        assert_ne!(new, pid, "round {round}");
        assert_eq!(pool.pid(), new, "round {round}: the status pid");
        for c in &callers {
            c.wait_more(50);
        }
        wait_gone(pid, "the old pool");
        for w in workers {
            wait_gone(w, "a worker of the old pool");
        }
        pool.check_metrics();
        pid = new;
    }
    // The last pool alone serves now, and the calls go on.
    for c in &callers {
        c.wait_more(100);
    }
    let mut wrong = Vec::new();
    for c in callers {
        let name = c.name;
        let (ok, reconnects, failures) = c.finish();
        eprintln!("{name}: {ok} calls right, {reconnects} reconnects, failures: {failures:?}");
        match name {
            // shm: and unix: sessions are handed over: none ends.
            "shm" | "unix" => assert_eq!(reconnects, 0, "{name}: reconnects"),
            // Each old pool closed its HTTP connection, after a response
            // saying so.
            "http" => assert!(reconnects >= 3, "{name}: {reconnects} reconnects"),
            _ => {}
        }
        wrong.extend(failures.into_iter().map(|f| format!("{name}: {f}")));
    }
    assert!(
        wrong.is_empty(),
        "failed calls and wrong answers: {wrong:#?}"
    );
    assert_eq!(pool.successors().len(), 3);
    pool.stop();
}

#[test]
fn sigusr2_upgrades() {
    let dir = TempDir::new("pool-upgrade-usr2");
    let pool = Pool::start(dir.path(), &echo_worker(), &[]);
    let mut c = connect(&pool.shm, "shm:");
    let old = pool.pid();
    assert!(signal(old, "USR2"), "kill -USR2 {old}");
    // The old pool's word that it is over, read in its log: the control
    // socket is left alone while it changes hands (status calls then are
    // the next test's subject).
    let outcome = wait_for(|| {
        let log = pool.log_text();
        log.lines()
            .find(|l| l.contains("upgrade: successor pid ") || l.contains("upgrade failed"))
            .map(str::to_owned)
            .ok_or_else(|| format!("no end of the upgrade in the log:\n{log}"))
    });
    let new = pool.pid();
    assert_ne!(new, old, "the status pid after SIGUSR2 ({outcome})");
    assert_eq!(pool.successors(), [new]);
    assert!(
        outcome.contains(&format!("successor pid {new} serves")),
        "{outcome}"
    );
    for i in 0..100 {
        let body = format!("after {i}");
        assert_eq!(
            c.call(body.as_bytes()).expect("call after the upgrade"),
            format!("echo:{body}").as_bytes()
        );
    }
    wait_gone(old, "the old pool");
    assert_eq!(c.call(b"last").expect("call"), b"echo:last");
    pool.stop();
}

#[test]
fn the_old_pool_killed_after_the_hand_over_leaves_the_new_one_serving() {
    let dir = TempDir::new("pool-upgrade-old-killed");
    let pool = Pool::start(dir.path(), &echo_worker(), &[]);
    let mut shm = connect(&pool.shm, "shm:");
    let mut unix = connect(&pool.unix, "unix:");
    let old = pool.pid();
    assert!(signal(old, "USR2"), "kill -USR2 {old}");
    // The moment the successor serves, the old pool dies without draining:
    // its workers (and a direct line to one) go with it.
    wait_for(|| {
        let log = pool.log_text();
        log.contains("upgrade: successor pid ")
            .then_some(())
            .ok_or_else(|| format!("the successor never served:\n{log}"))
    });
    assert!(signal(old, "KILL"), "kill -KILL {old}");
    wait_gone(old, "the old pool");
    let new = pool.pid();
    assert_ne!(new, old);
    // Both sessions are the new pool's: every call is answered.
    for i in 0..200 {
        for (name, c) in [("shm", &mut shm), ("unix", &mut unix)] {
            let body = format!("{name} after {i}");
            assert_eq!(
                c.call(body.as_bytes())
                    .unwrap_or_else(|e| panic!("{name} call {i} after the old pool died: {e}")),
                format!("echo:{body}").as_bytes()
            );
        }
    }
    pool.stop();
}

#[test]
fn a_successor_that_cannot_start_leaves_the_old_pool_serving() {
    let dir = TempDir::new("pool-upgrade-cannot-start");
    let script = dir.path().join("worker.sh");
    let echo = echo_worker();
    write_script(
        &script,
        &format!("#!/bin/sh\nexec '{}' \"$@\"\n", echo.display()),
    );
    let pool = Pool::start(dir.path(), &script, &["--start-timeout", "2"]);
    let mut c = connect(&pool.shm, "shm:");
    let old = pool.pid();
    // The successor runs the same worker command: its workers now fail.
    write_script(&script, "#!/bin/sh\nexit 1\n");
    let t0 = Instant::now();
    let out = pool.upgrade();
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("upgrade (took {took:?}): {}; {stderr}", out.status);
    assert!(!out.status.success(), "the upgrade succeeded: {stderr}");
    assert!(stderr.contains("failed"), "{stderr}");
    let successor: u32 = stderr
        .split("successor pid ")
        .nth(1)
        .and_then(|r| {
            r.split(|ch: char| !ch.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no successor pid in {stderr:?}"));
    assert_eq!(pool.successors(), [successor]);
    let status = pool.status_now();
    assert_eq!(status["pid"].as_u64(), Some(u64::from(old)), "{status}");
    let upgrade = status["upgrade"].as_str().unwrap_or_default();
    assert!(
        upgrade.starts_with(&format!("failed: successor pid {successor}")),
        "{status}"
    );
    wait_gone(successor, "the failed successor");
    // The old pool serves on: the session, and new ones.
    assert_eq!(c.call(b"after").expect("call after"), b"echo:after");
    let mut fresh = Client::connect(&pool.shm, ClientOptions::default()).expect("connect after");
    assert_eq!(fresh.call(b"fresh").expect("call"), b"echo:fresh");
    let mut h = Http::open(pool.http).expect("connect over HTTP");
    let r = h.get("/after", true).expect("GET /after");
    assert_eq!(r.status, 200, "{}", r.text());
    pool.stop();
}

#[test]
fn a_successor_killed_during_the_upgrade_leaves_the_old_pool_serving() {
    let dir = TempDir::new("pool-upgrade-killed");
    let script = dir.path().join("worker.sh");
    let go = dir.path().join("go");
    let echo = echo_worker();
    // Workers start once `go` exists (bounded: a forgotten one ends).
    write_script(
        &script,
        &format!(
            "#!/bin/sh\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 400 ]; do sleep 0.05; \
             i=$((i+1)); done\nexec '{}' \"$@\"\n",
            go.display(),
            echo.display()
        ),
    );
    File::create(&go).expect("create go");
    let pool = Pool::start(dir.path(), &script, &[]);
    let caller = Caller::shm(&pool.shm);
    caller.wait_more(50);
    let old = pool.pid();
    // The successor's workers wait: it is killed before it could serve.
    std::fs::remove_file(&go).expect("remove go");
    assert!(signal(old, "USR2"), "kill -USR2 {old}");
    let successor = wait_for(|| {
        pool.successors()
            .first()
            .copied()
            .ok_or_else(|| format!("no successor started after SIGUSR2:\n{}", pool.log_text()))
    });
    assert!(signal(successor, "KILL"), "kill -KILL {successor}");
    let status = wait_for(|| {
        let s = pool.status_now();
        match s["upgrade"].as_str() {
            Some(u) if u.starts_with("failed: ") => Ok(s),
            _ => Err(format!("the upgrade did not fail: {s}")),
        }
    });
    assert_eq!(status["pid"].as_u64(), Some(u64::from(old)), "{status}");
    eprintln!("after SIGKILL: last upgrade: {}", status["upgrade"]);
    wait_gone(successor, "the killed successor");
    caller.wait_more(100);
    // A later upgrade succeeds.
    File::create(&go).expect("create go");
    let new = pool.upgraded_to(&pool.upgrade(), old);
    assert_eq!(pool.pid(), new);
    caller.wait_more(100);
    wait_gone(old, "the old pool");
    caller.wait_more(100);
    let (ok, reconnects, failures) = caller.finish();
    eprintln!("shm: {ok} calls right, failures: {failures:?}");
    assert_eq!(reconnects, 0);
    assert!(failures.is_empty(), "failed shm calls: {failures:?}");
    pool.stop();
}

#[test]
fn status_calls_during_upgrades_do_not_break_them() {
    // Monitoring (and `shmlink pool upgrade` itself) calls the control
    // socket while an upgrade runs: a session opened during the hand-over
    // must not make it fail, let alone leave nothing serving.
    let dir = TempDir::new("pool-upgrade-status");
    let pool = Pool::start(dir.path(), &echo_worker(), &[]);
    let caller = Caller::shm(&pool.shm);
    caller.wait_more(50);
    let stop = Arc::new(AtomicBool::new(false));
    let (s, ctl) = (Arc::clone(&stop), format!("unix:{}", pool.ctl));
    let asking = thread::spawn(move || {
        let mut answered = 0u64;
        while !s.load(Ordering::Relaxed) {
            // Between the two pools a call may be refused: not counted.
            if let Ok(mut c) = Client::connect(&ctl, ClientOptions::default()) {
                if c.call(b"status-json").is_ok() {
                    answered += 1;
                }
            }
        }
        answered
    });
    let mut pid = pool.pid();
    let mut outcomes = Vec::new();
    for _ in 0..5 {
        let out = pool.upgrade();
        if !out.status.success() {
            outcomes.push(String::from_utf8_lossy(&out.stderr).trim().to_string());
            break;
        }
        pid = pool.upgraded_to(&out, pid);
        caller.wait_more(50);
    }
    stop.store(true, Ordering::Relaxed);
    let answered = asking.join().expect("status thread");
    eprintln!("{answered} status calls answered during the upgrades");
    // Whatever happened, the pool must still serve, old sessions and new:
    // the caller's next calls either go on or fail (within 5 s).
    let (target, t0) = (caller.ok() + 50, Instant::now());
    while caller.ok() < target && caller.tally.failed() == 0 && t0.elapsed() < DEADLINE / 4 {
        thread::sleep(Duration::from_millis(5));
    }
    let mut fresh = Client::connect(&pool.shm, ClientOptions::default());
    let served = fresh.as_mut().map(|c| c.call(b"fresh"));
    let (ok, _, failures) = caller.finish();
    assert!(
        outcomes.is_empty()
            && failures.is_empty()
            && matches!(&served, Ok(Ok(r)) if r == b"echo:fresh"),
        "with status calls under way: upgrades failed: {outcomes:?}; the shm: caller, \
         {ok} calls right, then failed: {failures:?}; a new shm: call afterwards: \
         {served:?}\n{}",
        pool.log_text()
    );
    pool.stop();
}

#[test]
fn a_control_hand_over_refused_leaves_the_clients_served() {
    // The successor takes the client server over first, then the control
    // server. A control session that cannot be handed (one with an arena
    // segment mapped: a call of more than 64 KiB lends one) makes that
    // second step refused: whatever the upgrade's outcome, shm: and unix:
    // must still be served, by the old pool or the new one.
    let dir = TempDir::new("pool-upgrade-control-refused");
    let pool = Pool::start(dir.path(), &echo_worker(), &[]);
    let old = pool.pid();
    let mut held = Client::connect(&format!("unix:{}", pool.ctl), ClientOptions::default())
        .expect("connect to the control socket");
    // An unknown command, answered with an error: only the arena matters.
    let big = held.call(&vec![b'x'; 200 << 10]).map(|r| r.len());
    assert!(big.is_err(), "a 200 KiB command was answered: {big:?}");
    let out = pool.upgrade();
    let said = format!(
        "{}; {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("upgrade with a control session holding an arena: {said}");
    let serving = pool.pid();
    if !out.status.success() {
        assert_eq!(
            serving, old,
            "the upgrade failed ({said}), yet the pid changed"
        );
    }
    drop(held);
    let mut answers = Vec::new();
    for address in [&pool.shm, &pool.unix] {
        let r = Client::connect(address, ClientOptions::default())
            .and_then(|mut c| c.call(b"still"))
            .map(|r| String::from_utf8_lossy(&r).into_owned());
        answers.push(format!("{address}: {r:?}"));
    }
    assert!(
        answers.iter().all(|a| a.ends_with("Ok(\"echo:still\")")),
        "after the upgrade ({said}; pool pid {serving} answers status): {answers:#?}\n{}",
        pool.log_text()
    );
    pool.stop();
}
