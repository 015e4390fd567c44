//! Stopping a server waits for every thread it started: after `stop`
//! returns, no session or preparer thread still runs library code (a C or
//! PHP host may unload the library then). A test binary of its own: other
//! tests' servers would add threads.

mod support;

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use shmlink::{Client, Server, ServerOptions};
use support::TempDir;

/// A gate threads wait on until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().expect("gate");
        while !*open {
            open = self.cv.wait(open).expect("gate");
        }
    }

    fn open(&self) {
        *self.open.lock().expect("gate") = true;
        self.cv.notify_all();
    }
}

/// Set on a session thread by the handler: its destructor runs when that
/// thread exits, reports it, and holds the exit until the gate opens.
struct HoldExit {
    gate: Arc<Gate>,
    exiting: mpsc::Sender<()>,
}

impl Drop for HoldExit {
    fn drop(&mut self) {
        let _ = self.exiting.send(());
        self.gate.wait();
    }
}

thread_local! {
    static HOLD: std::cell::RefCell<Option<HoldExit>> = const { std::cell::RefCell::new(None) };
}

/// Threads of this process whose name starts with `shmlink-` (the server's
/// own thread is named `shmlink-server`; it is joined by `stop` anyway).
fn library_threads() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .filter(|name| name.starts_with("shmlink-"))
        .collect()
}

#[test]
fn stop_returns_only_after_session_and_preparer_threads_ended() {
    let dir = TempDir::new("stop-joins");
    let addr = format!("shm:{}", dir.join("s.sock").display());
    let gate = Arc::new(Gate::default());
    let (exiting_tx, exiting) = mpsc::channel();
    let handler = {
        let gate = Arc::clone(&gate);
        let exiting_tx = Mutex::new(exiting_tx);
        move |req: &[u8], resp: &mut Vec<u8>| {
            HOLD.with(|h| {
                h.borrow_mut().get_or_insert_with(|| HoldExit {
                    gate: Arc::clone(&gate),
                    exiting: exiting_tx.lock().expect("sender").clone(),
                });
            });
            resp.extend_from_slice(req);
            Ok(())
        }
    };
    let server = Server::bind(&[addr.as_str()], ServerOptions::default())
        .and_then(|s| s.spawn(handler))
        .expect("server");
    let mut c = Client::connect(&addr, Default::default()).expect("connect");
    assert_eq!(c.call(b"ping").expect("call"), b"ping");
    drop(c);

    let (stopped_tx, stopped) = mpsc::channel();
    let stopper = std::thread::spawn(move || {
        let r = server.stop();
        let _ = stopped_tx.send(());
        r
    });
    // The idle session thread exits once the server stops...
    exiting
        .recv_timeout(Duration::from_secs(10))
        .expect("the session thread exits when the server stops");
    // ...and `stop` must wait for it to finish exiting.
    assert_eq!(
        stopped.recv_timeout(Duration::from_millis(300)),
        Err(mpsc::RecvTimeoutError::Timeout),
        "stop returned while a session thread was still running"
    );
    gate.open();
    stopped
        .recv_timeout(Duration::from_secs(10))
        .expect("stop returns once the session thread has ended");
    stopper.join().expect("stopper").expect("stop");
    // Joined threads leave the task list as the kernel releases them.
    let end = Instant::now() + Duration::from_secs(5);
    let mut left = library_threads();
    while !left.is_empty() && Instant::now() < end {
        std::thread::yield_now();
        left = library_threads();
    }
    assert!(left.is_empty(), "threads left after stop: {left:?}");
}
