//! A test binary re-run as a child process in a role: the parent drives it
//! through its stdin and reads `@@KEY...@@` markers from its output.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A child process driven through its stdin, whose output lines arrive on a
/// channel; killed on drop.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Peer {
    /// Re-runs this test binary's `role_child` test with `role` in the
    /// environment variable `role_var`.
    pub fn spawn(role_var: &str, role: &str) -> Peer {
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .args(["--exact", "role_child", "--nocapture", "--test-threads=1"])
            .env(role_var, role)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let stdin = child.stdin.take().expect("stdin");
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx2, log1, log2) = (tx.clone(), Arc::clone(&log), Arc::clone(&log));
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                log1.lock().expect("log").push(line.clone());
                let _ = tx.send(line);
            }
        });
        thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                log2.lock().expect("log").push(format!("stderr: {line}"));
                let _ = tx2.send(String::new());
            }
        });
        Peer {
            child,
            stdin,
            lines: rx,
            log,
        }
    }

    /// Everything the child wrote so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    /// Writes one command line to the child's stdin.
    pub fn send(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("command {cmd:?} to the child: {e}\n{}", self.log()));
    }

    /// Waits for `@@KEY...@@`; returns the text after KEY. Panics on a BAD
    /// marker, on the child's exit, or after `timeout`.
    pub fn expect(&mut self, key: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.check_bad(&line);
                    if let Some(v) = marker(&line, key) {
                        return v.trim().to_string();
                    }
                }
                Err(e) => panic!(
                    "no @@{key}@@ from the child ({e:?}, exit status {:?})\nchild log:\n{}",
                    self.child.try_wait(),
                    self.log()
                ),
            }
        }
    }

    /// Lets the child's next line go by, waiting up to `timeout` for it.
    pub fn skip_line(&mut self, timeout: Duration) {
        let _ = self.lines.recv_timeout(timeout);
    }

    /// Markers seen so far that have not been consumed, checked for BAD.
    pub fn drain_check(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.check_bad(&line);
        }
    }

    fn check_bad(&self, line: &str) {
        if let Some(bad) = marker(line, "BAD") {
            panic!("child reported BAD{bad}\nchild log:\n{}", self.log());
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, then reap; returns when the signal was sent.
    pub fn kill(&mut self) -> Instant {
        let t = Instant::now();
        self.child.kill().expect("SIGKILL child");
        let _ = self.child.wait();
        t
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text between `@@KEY` and the next `@@` in `line`.
fn marker(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!("@@{key}"))? + 2 + key.len();
    let rest = &line[start..];
    Some(rest[..rest.find("@@")?].to_string())
}

/// The child side: an echo server (each request answered with its `xform`)
/// bound to `bind`, its address announced as `@@READY address@@`.
#[allow(dead_code)] // not every test binary runs a server child
pub fn echo_server(bind: &str, opts: shmlink::ServerOptions) -> shmlink::RunningServer {
    let server = shmlink::Server::bind(&[bind], opts)
        .expect("child bind")
        .spawn(|req: &[u8], resp: &mut Vec<u8>| {
            super::xform_into(req, resp);
            Ok(())
        })
        .expect("child spawn");
    println!("@@READY {}@@", server.addresses()[0]);
    server
}

/// The child side: a server bound to `bind` that answers each request with
/// its `xform`, except `block`, which it never answers (`@@ENTERED@@` once
/// it holds it), and `slow`, answered after 100 ms (the handler's own
/// pace: a caller that gave up before must not see it); serves until killed.
#[allow(dead_code)] // not every test binary runs a server child
pub fn blocking_server(bind: &str) {
    let server =
        shmlink::Server::bind(&[bind], shmlink::ServerOptions::default()).expect("child bind");
    println!("@@READY {}@@", server.addresses()[0]);
    server
        .serve(|req: &[u8], resp: &mut Vec<u8>| {
            if req == b"block" {
                println!("@@ENTERED@@");
                loop {
                    std::thread::park();
                }
            }
            if req == b"slow" {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            super::xform_into(req, resp);
            Ok(())
        })
        .expect("serve");
}
