//! Starting a worker process: the command with `SHMLINK_WORKER` set to the
//! pool's worker port and `SHMLINK_WORKER_WAIT` to how it waits for calls
//! (and, for workers that serve HTTP, its descriptors handed down with
//! `SHMLINK_HTTP` naming them),
//! stdin closed, stdout and stderr captured line by line into the pool's
//! log with the worker's pid in front (so a worker printing to stdout
//! cannot corrupt anything: its output is not the protocol).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;

use shmlink::{Log, WaitStrategy, WORKER_ENV, WORKER_WAIT_ENV};
use shmlink_http::HTTP_ENV;

use crate::http_workers::HttpWorkers;

/// Starts `command` as a worker of the port at `port`, told to wait for
/// its calls as `wait` says, serving HTTP in slot `http.1` when `http` is
/// given; returns the child and the threads copying its output into `log`.
///
/// # Errors
/// When the command cannot be started (not found, not executable).
pub(crate) fn start(
    command: &[String],
    port: &str,
    wait: WaitStrategy,
    http: Option<(&HttpWorkers, usize)>,
    log: &Arc<Log>,
) -> std::io::Result<(Child, Vec<JoinHandle<()>>)> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| std::io::Error::other("no worker command"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env(WORKER_ENV, port)
        .env(WORKER_WAIT_ENV, wait.to_string())
        .env_remove(crate::heritage::DIR_ENV)
        .env_remove(crate::heritage::HANDED_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut handed = Vec::new();
    if let Some((h, slot)) = http {
        let (fds, env) = h.hand(slot);
        let numbers = shmlink_sys::inherit::hand_down(&mut cmd, &fds)?;
        cmd.env(HTTP_ENV, env(&numbers));
        handed = fds;
    } else {
        cmd.env_remove(HTTP_ENV);
    }
    let mut child = cmd.spawn()?;
    drop(handed);
    let pid = child.id();
    let mut copies = Vec::new();
    if let Some(out) = child.stdout.take() {
        copies.push(copy_lines(out, pid, "stdout", Arc::clone(log))?);
    }
    if let Some(err) = child.stderr.take() {
        copies.push(copy_lines(err, pid, "stderr", Arc::clone(log))?);
    }
    Ok((child, copies))
}

fn copy_lines(
    from: impl Read + Send + 'static,
    pid: u32,
    stream: &'static str,
    log: Arc<Log>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("shmlink-pool-log".into())
        .spawn(move || {
            let mut lines = BufReader::new(from);
            let mut line = Vec::new();
            loop {
                line.clear();
                match lines.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&line);
                        let text = text.trim_end_matches(['\n', '\r']);
                        log.write(&format!("[worker {pid} {stream}] {text}"));
                    }
                }
            }
        })
}

/// Resident memory of `pid` in bytes (the second field of
/// `/proc/PID/statm`, in pages), 0 when it cannot be read (the process is
/// gone).
pub(crate) fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * shmlink_sys::process::page_size())
}
