//! Child processes of `bench` and `chaos` (echo servers, peers, clients) and
//! temp dir: guards that stop and reap every child and remove the dir on
//! every exit path, and the CPU time of a child read from `/proc`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use shmlink_sys::process::{kill, Sig};

/// A fresh directory `bPID-N` in the system temp dir, removed with
/// everything in it on drop. The name is short, and the temp dir's checked,
/// because the benches' sockets live in it and a socket path has at most
/// 107 bytes (a run nested in scopes has a deep TMPDIR).
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// Creates the directory.
    pub(crate) fn new() -> anyhow::Result<Self> {
        let base = std::env::temp_dir();
        let name = |n: usize| format!("b{}-{n}", std::process::id());
        let longest = base.join(name(0)).as_os_str().len() + 1 + SOCKET_NAME_ROOM;
        if longest > MAX_SOCKET_PATH {
            bail!(
                "the temp dir {} is too deep for the benchmark's sockets ({longest} bytes \
                 with a socket's name, the limit is {MAX_SOCKET_PATH}): set TMPDIR to a \
                 shorter directory",
                base.display()
            );
        }
        for n in 0..1000 {
            let p = base.join(name(n));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot create {}", p.display())),
            }
        }
        bail!(
            "cannot create a fresh benchmark directory in {}",
            base.display()
        )
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Longest Unix socket path (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Room kept for the longest socket file name a benchmark uses in its dir
/// ("bystander-12.sock", "pool-churn3.ctl").
const SOCKET_NAME_ROOM: usize = 20;

/// Lines of a failed child's log quoted in the error.
const TAIL_LINES: usize = 5;

/// A child process that is stopped (SIGTERM, then SIGKILL after 2 s) and
/// reaped when dropped. Its stderr goes to a file, quoted when it fails.
#[derive(Debug)]
pub(crate) struct ChildGuard {
    child: Child,
    what: String,
    stderr: PathBuf,
    reaped: bool,
}

impl ChildGuard {
    /// Starts `cmd` with its stderr in `stderr_file`; stdout is discarded,
    /// stdin is whatever `cmd` set (null by default here).
    pub(crate) fn spawn(
        mut cmd: Command,
        what: impl Into<String>,
        stderr_file: PathBuf,
    ) -> anyhow::Result<Self> {
        cmd.stdout(Stdio::null());
        Self::spawn_with(cmd, what.into(), stderr_file)
    }

    /// As [`ChildGuard::spawn`], with the child's stdout piped to us.
    pub(crate) fn spawn_piped(
        mut cmd: Command,
        what: impl Into<String>,
        stderr_file: PathBuf,
    ) -> anyhow::Result<(Self, ChildStdout)> {
        cmd.stdout(Stdio::piped());
        let mut guard = Self::spawn_with(cmd, what.into(), stderr_file)?;
        let out = guard
            .child
            .stdout
            .take()
            .with_context(|| format!("no stdout pipe from the {}", guard.what))?;
        Ok((guard, out))
    }

    fn spawn_with(mut cmd: Command, what: String, stderr_file: PathBuf) -> anyhow::Result<Self> {
        let err = File::create(&stderr_file)
            .with_context(|| format!("cannot create {}", stderr_file.display()))?;
        cmd.stderr(err);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start the {what}"))?;
        Ok(ChildGuard {
            child,
            what,
            stderr: stderr_file,
            reaped: false,
        })
    }

    /// The child's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails, quoting the child's stderr, when it has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.reaped = true;
                bail!("the {} exited ({status}); {}", self.what, self.log_note())
            }
            Err(e) => Err(e).with_context(|| format!("cannot check on the {}", self.what)),
        }
    }

    /// `"its log PATH ends: LINE / LINE"`: where the child's stderr went,
    /// and its last lines (quoted, since a run's temporary directory goes
    /// with the run), or `"its log PATH is empty"`.
    pub(crate) fn log_note(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let path = self.stderr.display();
        if lines.is_empty() {
            return format!("its log {path} is empty");
        }
        let tail = &lines[lines.len().saturating_sub(TAIL_LINES)..];
        format!("its log {path} ends: {}", tail.join(" / "))
    }

    /// Waits up to `timeout` for the child to exit by itself (it is not
    /// signalled); fails when it exits unsuccessfully or not in time (it is
    /// then killed).
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.reaped = true;
                if !status.success() {
                    bail!(
                        "the {} exited with {status}; {}",
                        self.what,
                        self.log_note()
                    );
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill_now()?;
                bail!(
                    "the {} did not exit within {timeout:?}; {}",
                    self.what,
                    self.log_note()
                );
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Kills the child with SIGKILL and reaps it.
    pub(crate) fn kill_now(&mut self) -> anyhow::Result<()> {
        if self.reaped {
            return Ok(());
        }
        self.child
            .kill()
            .with_context(|| format!("cannot kill the {}", self.what))?;
        self.child
            .wait()
            .with_context(|| format!("cannot reap the {}", self.what))?;
        self.reaped = true;
        Ok(())
    }

    /// Sends SIGTERM and waits up to `timeout` for the child to exit; its
    /// exit status, or an error when it had to be killed.
    pub(crate) fn terminate(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let _ = kill(self.child.id(), Sig::Term);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.reaped = true;
                return Ok(status);
            }
            if Instant::now() >= deadline {
                self.kill_now()?;
                bail!(
                    "the {} did not exit within {timeout:?} of SIGTERM",
                    self.what
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Stops and reaps the child.
    pub(crate) fn stop(&mut self) {
        if self.reaped {
            return;
        }
        let _ = kill(self.child.id(), Sig::Term);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => {
                    self.reaped = true;
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped = true;
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits for `shmlink echo --ready-file` to write its addresses.
pub(crate) fn wait_ready_file(
    path: &Path,
    child: &mut ChildGuard,
    timeout: Duration,
) -> anyhow::Result<Vec<String>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let addrs: Vec<String> = text.lines().map(str::to_owned).collect();
            if !addrs.is_empty() {
                return Ok(addrs);
            }
        }
        child.check_alive()?;
        if Instant::now() >= deadline {
            // Stopped here, so that its log is complete when quoted.
            child.stop();
            bail!(
                "the {} (pid {}) did not become ready (no {}) within {timeout:?}; {}",
                child.what,
                child.pid(),
                path.display(),
                child.log_note()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// CPU time (user + system, all threads) of process `pid`, from
/// `/proc/PID/stat` in clock ticks.
pub(crate) fn process_cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // The command name (field 2) may contain spaces: fields restart after ')'.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("unexpected format of {path}"))?;
    let field = |i: usize| -> anyhow::Result<u64> {
        rest.split_whitespace()
            .nth(i)
            .and_then(|f| f.parse().ok())
            .with_context(|| format!("unexpected format of {path}"))
    };
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    let ticks = field(11)? + field(12)?;
    let hz = shmlink_sys::process::clock_ticks_per_second().max(1);
    Ok(Duration::from_secs_f64(ticks as f64 / hz as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_cpu_time() {
        let t = process_cpu_time(std::process::id()).expect("own stat");
        assert!(t < Duration::from_secs(3600));
    }

    #[test]
    fn temp_dir_is_removed() {
        let d = TempDir::new().expect("temp dir");
        let p = d.path().to_path_buf();
        std::fs::write(p.join("x"), b"x").expect("write");
        drop(d);
        assert!(!p.exists());
    }
}
