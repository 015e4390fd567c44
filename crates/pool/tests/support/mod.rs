//! What the pool's test files share: a temp dir, collected log lines, and
//! a wait on a condition with a deadline.

#![allow(dead_code)] // each test file uses part of it

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use shmlink::Log;

pub(crate) mod http_client;

/// Runs each named test (a `fn(HttpMode)`) once per HTTP mode:
/// `NAME::workers` and `NAME::front`.
#[allow(unused_macros)] // the HTTP test files use it
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn workers() {
                super::$name(shmlink_pool::HttpMode::Workers)
            }
            #[test]
            fn front() {
                super::$name(shmlink_pool::HttpMode::Front)
            }
        }
    )*};
}

/// A temp dir removed on drop.
pub(crate) struct Dir(pub(crate) PathBuf);

impl Dir {
    pub(crate) fn new(name: &str) -> Dir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "shmlink-pool-test-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("mkdir the test dir");
        Dir(p)
    }
    pub(crate) fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Log lines, collected.
#[derive(Clone, Default)]
pub(crate) struct Lines(pub(crate) Arc<Mutex<Vec<String>>>);

impl Lines {
    pub(crate) fn log(&self) -> Log {
        let me = self.clone();
        Log::to(move |l| me.0.lock().expect("lines").push(l.to_string()))
    }
    pub(crate) fn any(&self, needle: &str) -> bool {
        self.0
            .lock()
            .expect("lines")
            .iter()
            .any(|l| l.contains(needle))
    }
}

/// Waits until `cond` holds, failing after `limit`; how long it took.
pub(crate) fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        thread::sleep(Duration::from_millis(5));
    }
    t0.elapsed()
}

/// The code of a call's remote error (panics on anything else).
#[allow(dead_code)] // not every test binary uses every helper
pub(crate) fn remote_code(r: shmlink::Result<Vec<u8>>) -> u32 {
    match r {
        Err(shmlink::Error::Remote(e)) => e.code,
        other => panic!("expected a remote error, got {other:?}"),
    }
}

/// The pid of the worker answering `c` (the echo worker answers "pid").
#[allow(dead_code)]
pub(crate) fn pid_of(c: &mut shmlink::Client) -> u32 {
    String::from_utf8(c.call(b"pid").expect("pid"))
        .expect("utf8")
        .parse()
        .expect("a pid")
}

/// Whether process `pid` runs (exists and is no zombie).
#[allow(dead_code)]
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit(") ").next().unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

/// Descriptors this process has open.
#[allow(dead_code)]
pub(crate) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}
