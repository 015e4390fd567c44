//! Every benchmark stops what it started, on every way out (issue 49): the
//! harness's scope (`shmlink scope`, crates/scope) and the benchmarks that
//! run in one. Real processes: a child that never becomes ready, a bench
//! killed with SIGKILL at a random point, a command that leaves daemons
//! behind or ignores SIGTERM. Afterwards no process of the run is alive,
//! and nothing of it is left in its temporary directory.

mod support;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{TempDir, BIN};

/// Longer than any of these runs can take: past it a run hangs.
const DEADLINE: Duration = Duration::from_secs(60);

/// The processes whose command line or environment names `dir` (every
/// process of a run whose TMPDIR is under it), as `PID COMMAND`.
fn processes_of(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        let read = |what: &str| {
            let raw = std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
            String::from_utf8_lossy(&raw).replace('\0', " ")
        };
        let (cmdline, environ) = (read("cmdline"), read("environ"));
        if cmdline.contains(&needle) || environ.contains(&needle) {
            found.push(format!("{pid} {cmdline}"));
        }
    }
    found
}

/// Waits until no process of `dir` runs and `dir` is empty.
fn assert_nothing_left(dir: &Path) {
    let t = Instant::now();
    loop {
        let procs = processes_of(dir);
        let files: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path().display().to_string())
                    .collect()
            })
            .unwrap_or_default();
        if procs.is_empty() && files.is_empty() {
            return;
        }
        assert!(
            t.elapsed() < DEADLINE,
            "left behind: processes {procs:?}, files {files:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` to exit (killing it past the deadline).
fn wait_output(mut child: Child) -> Output {
    let t = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if t.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("{} did not exit within {DEADLINE:?}", BIN);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a process of `dir` whose command line starts with `start`
/// runs.
fn wait_for_process(dir: &Path, start: &str) {
    let t = Instant::now();
    let found = || {
        processes_of(dir)
            .iter()
            .any(|p| p.split_once(' ').is_some_and(|(_, c)| c.starts_with(start)))
    };
    while !found() {
        assert!(t.elapsed() < DEADLINE, "no process {start:?} started");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn kill(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// `shmlink ARGS` with TMPDIR under `tmp`, its output piped.
fn shmlink(tmp: &Path, args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .env("TMPDIR", tmp)
        .env_remove("SHMLINK_SCOPE_PARENT")
        .env_remove("SHMLINK_SCOPE_TMP")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start shmlink")
}

/// A directory for the run's TMPDIR, inside the test's own.
fn run_tmp(dir: &TempDir) -> std::path::PathBuf {
    let tmp = dir.path().join("t");
    std::fs::create_dir_all(&tmp).expect("tmp");
    tmp
}

#[test]
fn a_bench_whose_server_never_becomes_ready_fails_in_time_naming_it_and_leaves_nothing() {
    let dir = TempDir::new("never");
    let tmp = run_tmp(&dir);
    // A "server" that never writes its ready file.
    let never = dir.path().join("never-ready.sh");
    std::fs::write(&never, "#!/bin/sh\necho starting >&2\nexec sleep 1000\n").expect("script");
    Command::new("chmod")
        .args(["+x", &never.to_string_lossy()])
        .status()
        .expect("chmod");
    let out = wait_output(shmlink(
        &tmp,
        &[
            "upgrade-bench",
            "--upgrades",
            "2",
            "--ready-timeout",
            "1",
            "--exe",
            &never.to_string_lossy(),
        ],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("shmlink echo (echo-0)")
            && err.contains("did not become ready")
            && err.contains("within 1s"),
        "{err}"
    );
    assert!(
        err.contains("its log ") && err.contains("echo-0.log ends: starting"),
        "{err}"
    );
    assert_nothing_left(&tmp);
}

#[test]
fn a_bench_killed_at_a_random_point_leaves_nothing() {
    for round in 0..3 {
        let dir = TempDir::new(&format!("kill{round}"));
        let tmp = run_tmp(&dir);
        let bench = shmlink(
            &tmp,
            &["upgrade-bench", "--upgrades", "100", "--gap-ms", "20"],
        );
        // Its first server serves: the run is under way.
        wait_for_process(&tmp, &format!("{BIN} echo --reply-ratio"));
        std::thread::sleep(Duration::from_millis(fastrand::u64(0..600)));
        // Round 0 kills the process started (the scope's guardian), the
        // others the benchmark itself, below it.
        let victim = if round == 0 {
            bench.id()
        } else {
            let procs = processes_of(&tmp);
            let inner = procs
                .iter()
                .find(|p| p.contains(" upgrade-bench ") && !p.contains(" scope "))
                .and_then(|p| p.split(' ').next())
                .and_then(|p| p.parse().ok());
            match inner {
                Some(pid) => pid,
                None => {
                    let out = wait_output(bench);
                    panic!("no benchmark below its scope in {procs:?}: {out:?}")
                }
            }
        };
        kill(victim, "-KILL");
        let out = wait_output(bench);
        assert!(!out.status.success());
        assert_nothing_left(&tmp);
    }
}

#[test]
fn the_scope_passes_the_status_on_and_stops_daemons_a_command_left() {
    let dir = TempDir::new("daemons");
    let tmp = run_tmp(&dir);
    // A grandchild in a session of its own, and one that cleared its
    // environment (as nginx's and PHP-FPM's workers do).
    let script = "setsid sleep 1001 & (env -i sleep 1002 &) ; echo \"tmp=$TMPDIR\"; exit 3";
    let out = wait_output(shmlink(&tmp, &["scope", "--", "sh", "-c", script]));
    assert_eq!(out.status.code(), Some(3));
    let said = String::from_utf8_lossy(&out.stdout);
    let scope_tmp = said.trim().strip_prefix("tmp=").expect("TMPDIR printed");
    assert!(
        scope_tmp.starts_with(&*tmp.to_string_lossy()) && scope_tmp.contains("shmlink-scope-"),
        "{said}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stopped 2 processes left running"), "{err}");
    assert_nothing_left(&tmp);
}

#[test]
fn a_scope_told_to_stop_passes_it_on_and_kills_what_ignores_it() {
    let dir = TempDir::new("sigterm");
    let tmp = run_tmp(&dir);
    let child = shmlink(
        &tmp,
        &[
            "scope",
            "--grace",
            "0.5",
            "--",
            "sh",
            "-c",
            "trap '' TERM; sleep 1003",
        ],
    );
    wait_for_process(&tmp, "sleep 1003");
    kill(child.id(), "-TERM");
    let out = wait_output(child);
    // The command ignored SIGTERM: killed after the grace.
    assert_eq!(out.status.code(), Some(137), "{:?}", out);
    assert_nothing_left(&tmp);
}

#[test]
fn a_command_that_cannot_start_is_reported_and_leaves_nothing() {
    let dir = TempDir::new("nocmd");
    let tmp = run_tmp(&dir);
    let out = wait_output(shmlink(&tmp, &["scope", "--", "/nonexistent/command"]));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot start /nonexistent/command"), "{err}");
    let out = wait_output(shmlink(&tmp, &["scope", "--grace", "soon", "--", "true"]));
    assert_eq!(out.status.code(), Some(2));
    assert_nothing_left(&tmp);
}
