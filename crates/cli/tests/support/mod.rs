//! What the CLI's integration tests share: temp dirs and a spawned echo server.

#![allow(dead_code, unreachable_pub)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `shmlink` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_shmlink");

/// A fresh directory per test, removed at the end.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("shmlink-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An echo server killed on drop.
pub struct Echo {
    pub child: Child,
    pub addresses: Vec<String>,
}

impl Echo {
    pub fn start(dir: &Path, extra: &[&str]) -> Echo {
        Self::start_limited(dir, extra, None)
    }

    /// Starts the server with its open-file limit lowered to `nofile`.
    pub fn start_limited(dir: &Path, extra: &[&str], nofile: Option<u32>) -> Echo {
        let ready = dir.join("ready");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("sh");
                c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), BIN]);
                c
            }
            None => Command::new(BIN),
        };
        let mut child = cmd
            .arg("echo")
            .arg("--listen")
            .arg(format!("shm:{}/a.sock", dir.display()))
            .arg("--listen")
            .arg(format!("unix:{}/b.sock", dir.display()))
            .args(["--listen", "tcp:127.0.0.1:0", "--ready-file"])
            .arg(&ready)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start echo");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                let addresses: Vec<String> = text.lines().map(str::to_owned).collect();
                if !addresses.is_empty() {
                    return Echo { child, addresses };
                }
            }
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!("echo exited early: {status}");
            }
            assert!(Instant::now() < deadline, "echo did not become ready");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn address(&self, scheme: &str) -> &str {
        self.addresses
            .iter()
            .find(|a| a.starts_with(scheme))
            .unwrap_or_else(|| panic!("no {scheme} address in {:?}", self.addresses))
    }

    /// SIGTERM, then the exit status within a deadline.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "echo did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
