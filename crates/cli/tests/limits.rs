//! Resource limits: a thousand idle sessions on one server (with the memory
//! each costs), the session limit, and exhausted file-descriptor limits on
//! either side: always a clear error, never a crash.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions, Error, RefusalCode};
use shmlink_sys::process::{descriptor_limit, set_descriptor_limit};
use support::{Echo, TempDir, BIN};

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Raises this process's open-file limit to its hard limit.
fn raise_nofile() -> u64 {
    let (_, hard) = descriptor_limit();
    set_descriptor_limit(hard).expect("raise RLIMIT_NOFILE");
    descriptor_limit().0.unwrap_or(u64::MAX)
}

#[test]
fn a_thousand_idle_sessions_and_their_memory() {
    const SESSIONS: usize = 1000;
    let limit = raise_nofile();
    assert!(
        limit >= 4 * SESSIONS as u64,
        "open-file limit {limit} too low for the test"
    );
    let dir = TempDir::new("thousand");
    // The server needs ~3 descriptors per shm session: raise its limit too.
    let echo = Echo::start_limited(dir.path(), &["--wait", "sleep"], Some(8192));
    let addr = echo.address("shm:").to_string();
    let pid = echo.child.id();
    // One session first, so the server's one-time costs are not counted.
    let mut first = Client::connect(&addr, ClientOptions::default()).expect("first session");
    first.call(b"warm").expect("first call");
    let before = rss_kib(pid);
    let mut clients = Vec::with_capacity(SESSIONS);
    let t0 = Instant::now();
    for i in 0..SESSIONS {
        let mut c = Client::connect(&addr, ClientOptions::default())
            .unwrap_or_else(|e| panic!("session {i}: {e}"));
        c.call(b"hello")
            .unwrap_or_else(|e| panic!("session {i}: call: {e}"));
        clients.push(c);
    }
    let opened = t0.elapsed();
    let after = rss_kib(pid);
    // All still usable, in any order.
    for (i, c) in clients.iter_mut().enumerate().rev().step_by(97) {
        c.call(b"again")
            .unwrap_or_else(|e| panic!("session {i} after all opened: {e}"));
    }
    let per = (after.saturating_sub(before)) as f64 / SESSIONS as f64;
    eprintln!(
        "{SESSIONS} idle shm sessions opened in {opened:?}; server RSS {before} -> {after} KiB: \
         {per:.1} KiB per idle session (64 KiB rings each way, touched pages only)"
    );
    assert!(per < 512.0, "{per} KiB per idle session");
    drop(clients);
    drop(first);
    assert!(echo.terminate().success());
}

#[test]
fn the_session_limit_refuses_with_a_clear_error() {
    let dir = TempDir::new("max-sessions");
    let echo = Echo::start(dir.path(), &["--max-sessions", "3"]);
    let addr = echo.address("shm:").to_string();
    let held: Vec<Client> = (0..3)
        .map(|_| Client::connect(&addr, ClientOptions::default()).expect("within the limit"))
        .collect();
    match Client::connect(&addr, ClientOptions::default()) {
        Err(
            e @ Error::Refused {
                code: RefusalCode::TooManySessions,
                ..
            },
        ) => {
            let msg = e.to_string();
            assert!(msg.contains("3"), "the message names the limit: {msg}");
        }
        other => panic!("fourth session: expected a TooManySessions refusal, got {other:?}"),
    }
    drop(held);
    // Room again once sessions end (the server notices within its liveness slice).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Client::connect(&addr, ClientOptions::default()) {
            Ok(mut c) => {
                c.call(b"room again").expect("call");
                break;
            }
            Err(e) if Instant::now() < deadline => {
                assert!(matches!(e, Error::Refused { .. }), "{e}");
                std::thread::yield_now();
            }
            Err(e) => panic!("no room after the sessions ended: {e}"),
        }
    }
}

#[test]
fn a_server_out_of_descriptors_refuses_sessions_and_recovers() {
    let dir = TempDir::new("server-nofile");
    // Few descriptors: stdio, listeners, epoll, eventfd, prepared segments...
    let echo = Echo::start_limited(dir.path(), &[], Some(40));
    let addr = echo.address("shm:").to_string();
    let mut held = Vec::new();
    let mut refused = None;
    for _ in 0..100 {
        match Client::connect(&addr, ClientOptions::default()) {
            Ok(mut c) => {
                c.call(b"x").expect("a session that opened works");
                held.push(c);
            }
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("40 descriptors cannot hold 100 sessions");
    let msg = e.to_string();
    // Refused at once with the reason, not left to time out.
    assert!(
        matches!(
            e,
            Error::Refused {
                code: RefusalCode::ServerFailure,
                ..
            }
        ),
        "expected a refusal naming the lack of descriptors, got {e:?}"
    );
    assert!(msg.contains("open files"), "{msg}");
    eprintln!("after {} sessions: {msg}", held.len());
    let mut echo = echo;
    assert!(
        echo.child.try_wait().expect("try_wait").is_none(),
        "the server must survive running out of descriptors"
    );
    for c in held.iter_mut() {
        c.call(b"still here")
            .expect("sessions opened before keep working");
    }
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Client::connect(&addr, ClientOptions::default()) {
            Ok(mut c) => {
                c.call(b"recovered").expect("call");
                break;
            }
            Err(_) if Instant::now() < deadline => std::thread::yield_now(),
            Err(e) => panic!("the server did not recover its descriptors: {e}"),
        }
    }
    assert!(echo.terminate().success());
}

#[test]
fn a_client_out_of_descriptors_fails_with_one_clear_line() {
    let dir = TempDir::new("client-nofile");
    let echo = Echo::start(dir.path(), &[]);
    for addr in [
        echo.address("shm:"),
        echo.address("unix:"),
        echo.address("tcp:"),
    ] {
        for n in 3..=12 {
            let out = Command::new("sh")
                .args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), BIN])
                .args(["call", addr, "hello"])
                .stdin(Stdio::null())
                .output()
                .expect("run shmlink call");
            let stderr = String::from_utf8_lossy(&out.stderr);
            match out.status.code() {
                Some(0) => {}
                // Too few descriptors for the dynamic loader: our code never ran.
                Some(127) if stderr.contains("error while loading shared libraries") => {}
                Some(1) => assert_eq!(
                    stderr.lines().count(),
                    1,
                    "ulimit -n {n}, {addr}: one line: {stderr}"
                ),
                other => panic!("ulimit -n {n}, {addr}: crashed ({other:?}): {stderr}"),
            }
        }
    }
}
