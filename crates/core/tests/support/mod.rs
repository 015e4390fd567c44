//! Helpers shared by the integration tests: watchdog, temp dirs, transports,
//! a controllable gate for handlers, deterministic PRNG, checksums, condition
//! waits with deadlines, and resource snapshots from /proc.
#![allow(dead_code, unreachable_pub)]

use std::any::Any;
use std::fs;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions, Handler, Log, RunningServer, Server, ServerOptions};

pub mod child;
pub mod raw;

/// Default per-test watchdog.
pub const LIMIT: Duration = Duration::from_secs(60);

/// Runs `f` on its own thread; panics if it does not finish within `limit`
/// (the body thread is left behind: the harness reports the failure).
/// A panic of the body is propagated with its own message.
pub fn watchdog<F: FnOnce() + Send + 'static>(name: &str, limit: Duration, f: F) {
    let (tx, rx) = mpsc::channel::<()>();
    let h = thread::Builder::new()
        .name(format!("body:{name}"))
        .spawn(move || {
            let r: Result<(), Box<dyn Any + Send>> = catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(());
            r
        })
        .expect("spawn test body");
    match rx.recv_timeout(limit) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(p)) | Err(p) => resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("watchdog: test {name} still running after {limit:?} (hang)")
        }
    }
}

/// Runs each named test function once per transport (`shm`, `unix`, `tcp`:
/// a module each), under the [`watchdog`]: `per_transport!(a, b);`. With
/// `serial: PATH;` first, each test holds the guard `PATH()` returns (tests
/// that count the process's descriptors must not overlap).
#[macro_export]
macro_rules! per_transport {
    (serial: $guard:path; $($name:ident),* $(,)?) => {
        $crate::per_transport!(@mods $guard; $($name),*);
    };
    (@mods $guard:path; $($name:ident),*) => {
        mod shm { $crate::per_transport!(@one Shm "shm::" $guard; $($name),*); }
        mod unix { $crate::per_transport!(@one Unix "unix::" $guard; $($name),*); }
        mod tcp { $crate::per_transport!(@one Tcp "tcp::" $guard; $($name),*); }
    };
    (@one $t:ident $prefix:literal $guard:path; $($name:ident),*) => {
        $( #[test] fn $name() {
            let _g = $guard();
            $crate::support::watchdog(
                concat!($prefix, stringify!($name)),
                $crate::support::LIMIT,
                || super::$name($crate::support::T::$t),
            );
        } )*
    };
    ($($name:ident),* $(,)?) => {
        $crate::per_transport!(@mods $crate::support::unserialized; $($name),*);
    };
}

/// Runs each named test function over `shm:` and `unix:` only (the
/// transports that pass descriptors, and with them the arena), as
/// [`per_transport!`] does: `shm_and_unix!(a, b);`.
#[macro_export]
macro_rules! shm_and_unix {
    ($($name:ident),* $(,)?) => {
        mod shm { $crate::per_transport!(@one Shm "shm::" $crate::support::unserialized; $($name),*); }
        mod unix { $crate::per_transport!(@one Unix "unix::" $crate::support::unserialized; $($name),*); }
    };
}

/// The guard of tests that may overlap: none.
pub fn unserialized() {}

static DIR_SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system temp dir, removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = DIR_SEQ.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p =
            std::env::temp_dir().join(format!("shl-{tag}-{}-{n}-{nanos:x}", std::process::id()));
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The three transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum T {
    Shm,
    Unix,
    Tcp,
}

impl T {
    pub const ALL: [T; 3] = [T::Shm, T::Unix, T::Tcp];

    /// An address to bind for this transport (TCP: port 0).
    pub fn bind_addr(self, dir: &TempDir, name: &str) -> String {
        match self {
            T::Shm => format!("shm:{}", dir.join(&format!("{name}.sock")).display()),
            T::Unix => format!("unix:{}", dir.join(&format!("{name}.sock")).display()),
            T::Tcp => "tcp:127.0.0.1:0".to_string(),
        }
    }

    pub fn scheme(self) -> &'static str {
        match self {
            T::Shm => "shm",
            T::Unix => "unix",
            T::Tcp => "tcp",
        }
    }
}

/// Socket path of a `shm:`/`unix:` address string.
pub fn socket_path(addr: &str) -> Option<PathBuf> {
    addr.strip_prefix("shm:")
        .or_else(|| addr.strip_prefix("unix:"))
        .map(PathBuf::from)
}

/// A running server, its real address and its directory.
pub struct Srv {
    pub server: Option<RunningServer>,
    pub addr: String,
    pub dir: TempDir,
}

impl Srv {
    pub fn running(&self) -> &RunningServer {
        self.server.as_ref().expect("server already stopped")
    }

    pub fn stats(&self) -> &shmlink::Stats {
        self.running().stats()
    }

    pub fn take(&mut self) -> RunningServer {
        self.server.take().expect("server already stopped")
    }
}

/// Binds one address of transport `t` in a fresh temp dir and serves `handler`.
pub fn start<H: Handler>(t: T, opts: ServerOptions, handler: H) -> Srv {
    let dir = TempDir::new(t.scheme());
    let bind = t.bind_addr(&dir, "s");
    let server = Server::bind(&[bind.as_str()], opts)
        .unwrap_or_else(|e| panic!("bind {bind}: {e}"))
        .spawn(handler)
        .unwrap_or_else(|e| panic!("spawn {bind}: {e}"));
    let addr = server.addresses()[0].to_string();
    Srv {
        server: Some(server),
        addr,
        dir,
    }
}

pub fn connect(addr: &str, opts: ClientOptions) -> Client {
    Client::connect(addr, opts).unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

pub fn opts_timeout(t: Duration) -> ClientOptions {
    ClientOptions {
        timeout: t,
        ..Default::default()
    }
}

/// The transformation every echo-like handler applies: reversed, XOR 0x5A.
/// Responses thus depend on every byte and its position.
pub fn xform(req: &[u8]) -> Vec<u8> {
    req.iter().rev().map(|b| b ^ 0x5A).collect()
}

pub fn xform_into(req: &[u8], resp: &mut Vec<u8>) {
    resp.extend(req.iter().rev().map(|b| b ^ 0x5A));
}

/// Index of the first differing byte, for readable assertion messages.
pub fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or(if a.len() != b.len() {
            Some(a.len().min(b.len()))
        } else {
            None
        })
}

pub fn assert_bytes(what: &str, got: &[u8], want: &[u8]) {
    if got != want {
        panic!(
            "{what}: got {} bytes, want {} bytes, first difference at {:?}",
            got.len(),
            want.len(),
            first_diff(got, want)
        );
    }
}

/// Deterministic PRNG (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
}

/// FNV-1a, 64 bit.
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// Polls `cond` until it holds; panics naming `what` after `timeout`.
/// Returns how long it took.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    loop {
        if cond() {
            return t0.elapsed();
        }
        if t0.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Like [`wait_until`] but returns false instead of panicking.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if t0.elapsed() > timeout {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// A gate handlers pass through: blocked while closed; counts arrivals.
#[derive(Debug, Default)]
pub struct Gate {
    st: Mutex<(bool, usize)>,
    cv: Condvar,
}

impl Gate {
    pub fn closed() -> Gate {
        Gate::default()
    }

    /// Counts the arrival, then waits until open.
    pub fn pass(&self) {
        let mut g = self.st.lock().unwrap_or_else(|p| p.into_inner());
        g.1 += 1;
        self.cv.notify_all();
        while !g.0 {
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn open(&self) {
        let mut g = self.st.lock().unwrap_or_else(|p| p.into_inner());
        g.0 = true;
        self.cv.notify_all();
    }

    pub fn close(&self) {
        self.st.lock().unwrap_or_else(|p| p.into_inner()).0 = false;
    }

    pub fn entered(&self) -> usize {
        self.st.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// Waits until at least `n` arrivals; false on timeout.
    pub fn wait_entered(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.st.lock().unwrap_or_else(|p| p.into_inner());
        while g.1 < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self
                .cv
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

/// Opens a gate when dropped, so a failing test never leaves a handler
/// blocked (which would hang the server's graceful stop in the unwinding).
pub struct OpenOnDrop(pub std::sync::Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// What a process holds that a session could leak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    /// Entries of /proc/self/fd.
    pub fds: usize,
    /// Of those, memfds.
    pub memfd_fds: usize,
    /// Lines of /proc/self/maps mapping a shmlink memfd.
    pub memfd_maps: usize,
    /// Threads named shmlink-* (server, session pool, segment preparer).
    pub shmlink_threads: usize,
}

/// What this process holds now. Mappings a client keeps from its closed
/// sessions for later ones (bounded, see `release_kept_mappings`) are
/// released first: they are not leaked, and a count taken while they exist
/// would depend on how many sessions happened to end with a goodbye.
pub fn snapshot() -> Resources {
    shmlink::release_kept_mappings();
    let mut fds = 0;
    let mut memfd_fds = 0;
    if let Ok(rd) = fs::read_dir("/proc/self/fd") {
        for e in rd.flatten() {
            fds += 1;
            if fs::read_link(e.path())
                .map(|l| l.to_string_lossy().starts_with("/memfd:"))
                .unwrap_or(false)
            {
                memfd_fds += 1;
            }
        }
    }
    let memfd_maps = fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().filter(|l| l.contains("memfd:shmlink")).count())
        .unwrap_or(0);
    let mut shmlink_threads = 0;
    if let Ok(rd) = fs::read_dir("/proc/self/task") {
        for e in rd.flatten() {
            if fs::read_to_string(e.path().join("comm"))
                .map(|c| c.starts_with("shmlink-"))
                .unwrap_or(false)
            {
                shmlink_threads += 1;
            }
        }
    }
    Resources {
        fds,
        memfd_fds,
        memfd_maps,
        shmlink_threads,
    }
}

/// Waits until every count is back to (at most) `base`; panics with both
/// snapshots otherwise. Returns the time it took.
pub fn wait_resources_back(what: &str, base: Resources, timeout: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let now = snapshot();
        if now.fds <= base.fds
            && now.memfd_fds <= base.memfd_fds
            && now.memfd_maps <= base.memfd_maps
            && now.shmlink_threads <= base.shmlink_threads
        {
            return t0.elapsed();
        }
        if t0.elapsed() > timeout {
            let fds: Vec<String> = fs::read_dir("/proc/self/fd")
                .map(|rd| {
                    rd.flatten()
                        .map(|e| {
                            format!(
                                "{} -> {}",
                                e.file_name().to_string_lossy(),
                                fs::read_link(e.path())
                                    .map(|l| l.display().to_string())
                                    .unwrap_or_default()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            panic!(
                "{what}: resources not back to baseline after {timeout:?}: baseline {base:?}, now {now:?}\nfds: {fds:#?}"
            );
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Whether a shmlink error is one of the "the session is over" kinds.
pub fn is_gone_or_closed(e: &shmlink::Error) -> bool {
    matches!(
        e,
        shmlink::Error::PeerGone { .. } | shmlink::Error::Closed { .. }
    )
}

/// Server log lines, collected.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    pub fn log(&self) -> Log {
        let me = self.clone();
        Log::to(move |l| me.0.lock().expect("lines").push(l.to_string()))
    }
    pub fn wait_for(&self, needle: &str) -> String {
        let mut found = String::new();
        wait_until(
            &format!("a log line with {needle:?}"),
            Duration::from_secs(5),
            || match self
                .0
                .lock()
                .expect("lines")
                .iter()
                .find(|l| l.contains(needle))
            {
                Some(l) => {
                    found = l.clone();
                    true
                }
                None => false,
            },
        );
        found
    }
}
