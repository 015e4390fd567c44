//! Hot upgrade of a running server (docs/protocol.md, "Hand-over"): real
//! `shmlink echo` processes, a successor taking the listeners and the live
//! `shm:` sessions over while clients call without pause; successors that
//! die or lie during the hand-over leave the server serving.

mod support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions};
use support::{Echo, TempDir, BIN};

const DEADLINE: Duration = Duration::from_secs(20);

/// Calls in a loop on one session until told to stop: every answer
/// checked; the failures, with what they said.
struct Caller {
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    thread: thread::JoinHandle<Vec<String>>,
}

impl Caller {
    fn start(address: &str, pipelined: bool) -> Caller {
        let opts = ClientOptions {
            timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        };
        let mut c = Client::connect(address, opts).expect("connect");
        let (stop, calls) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (s, n) = (Arc::clone(&stop), Arc::clone(&calls));
        let thread = thread::spawn(move || {
            let mut failures = Vec::new();
            let mut i = 0u64;
            while !s.load(Ordering::Relaxed) && failures.len() < 5 {
                i += 1;
                let body = format!("call {i}").repeat(1 + (i % 7) as usize);
                if pipelined {
                    let ids: Vec<_> = (0..4)
                        .map(|k| c.send(format!("{body}/{k}").as_bytes()))
                        .collect();
                    for (k, id) in ids.into_iter().enumerate() {
                        let sent = match id {
                            Ok(id) => id,
                            Err(e) => {
                                failures.push(format!("send: {e}"));
                                continue;
                            }
                        };
                        match c.recv() {
                            Ok(r)
                                if r.id == sent
                                    && r.result.as_deref()
                                        == Ok(format!("{body}/{k}").as_bytes()) => {}
                            Ok(r) => failures.push(format!("answer {r:?} to call {sent:?}")),
                            Err(e) => failures.push(format!("recv: {e}")),
                        }
                    }
                } else {
                    match c.call(body.as_bytes()) {
                        Ok(r) if r == body.as_bytes() => {}
                        Ok(r) => {
                            failures.push(format!("wrong answer {:?}", String::from_utf8_lossy(&r)))
                        }
                        Err(e) => failures.push(format!("call: {e}")),
                    }
                }
                n.fetch_add(1, Ordering::Relaxed);
            }
            failures
        });
        Caller {
            stop,
            calls,
            thread,
        }
    }

    /// Waits until `more` calls were made after now.
    fn wait_calls(&self, more: u64) {
        let target = self.calls.load(Ordering::Relaxed) + more;
        let t0 = Instant::now();
        while self.calls.load(Ordering::Relaxed) < target {
            assert!(
                t0.elapsed() < DEADLINE,
                "calls stalled at {}",
                self.calls.load(Ordering::Relaxed)
            );
            thread::sleep(Duration::from_millis(2));
        }
    }

    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("caller thread")
    }
}

/// A process killed on drop (a failed test leaves none behind).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `shmlink echo --take-over PATH --handover PATH`, ready once its ready
/// file appears.
fn successor(dir: &Path, name: &str, handover: &Path) -> Proc {
    let ready = dir.join(name);
    let mut child = Command::new(BIN)
        .args(["echo", "--reply-ratio", "1", "--take-over"])
        .arg(handover)
        .arg("--handover")
        .arg(handover)
        .arg("--ready-file")
        .arg(&ready)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the successor");
    let t0 = Instant::now();
    while !ready.exists() {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the successor exited: {status}");
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "the successor did not become ready"
        );
        thread::sleep(Duration::from_millis(5));
    }
    Proc(child)
}

fn exits_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(
            t0.elapsed() < limit,
            "the old server did not exit after the hand-over"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn successors_take_live_sessions_over_and_no_call_fails() {
    let dir = TempDir::new("handover");
    let handover = dir.path().join("h.sock");
    let h = handover.to_str().expect("utf-8 path");
    let mut old = Echo::start(dir.path(), &["--reply-ratio", "1", "--handover", h]);
    let shm = old.address("shm:").to_string();
    let unix = old.address("unix:").to_string();
    let tcp = old.address("tcp:").to_string();
    // Every kind of session is handed: shm: ones and stream ones (unix:,
    // tcp:, pipelined too), none reconnects, no call fails.
    let callers = [
        Caller::start(&shm, false),
        Caller::start(&shm, true),
        Caller::start(&unix, false),
        Caller::start(&unix, true),
        Caller::start(&tcp, false),
    ];
    for c in &callers {
        c.wait_calls(200);
    }
    // Upgrades in a row: the old server, then each successor, hands over.
    let mut current = successor(dir.path(), "ready-1", &handover);
    assert!(exits_within(&mut old.child, DEADLINE).success());
    for c in &callers {
        c.wait_calls(200);
    }
    for n in 2..=5 {
        let next = successor(dir.path(), &format!("ready-{n}"), &handover);
        assert!(exits_within(&mut current.0, DEADLINE).success());
        for c in &callers {
            c.wait_calls(200);
        }
        current = next;
    }
    for c in callers {
        let failures = c.finish();
        assert!(
            failures.is_empty(),
            "failed calls across the hand-overs: {failures:?}"
        );
    }
    // New sessions come to the last successor on every handed listener.
    for address in [&shm, &unix, &tcp] {
        let mut c = Client::connect(address, ClientOptions::default()).expect("connect after");
        assert_eq!(c.call(b"after").expect("call after"), b"after");
    }
    drop(current);
}

#[test]
fn a_successor_that_dies_or_lies_mid_hand_over_leaves_the_server_serving() {
    let dir = TempDir::new("handover-refused");
    let handover = dir.path().join("h.sock");
    let h = handover.to_str().expect("utf-8 path");
    let old = Echo::start(dir.path(), &["--reply-ratio", "1", "--handover", h]);
    let shm = old.address("shm:").to_string();
    let caller = Caller::start(&shm, true);
    caller.wait_calls(100);
    let ask = shmlink::wire::handover::Ask::ours().encode();
    eprintln!("step 1");
    // 1. Garbage instead of an ask: refused, with the reason.
    let mut s = UnixStream::connect(&handover).expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\n").expect("garbage");
    let mut said = Vec::new();
    let _ = s.read_to_end(&mut said);
    assert!(
        String::from_utf8_lossy(&said).contains("hand-over ask starts"),
        "{:?}",
        String::from_utf8_lossy(&said)
    );
    caller.wait_calls(100);
    eprintln!("step 2");
    // 2. A successor that reads part of the offer and dies (its socket closes).
    let mut s = UnixStream::connect(&handover).expect("connect");
    s.write_all(&ask).expect("ask");
    let mut head = [0u8; 32];
    s.read_exact(&mut head).expect("the offer's head");
    assert!(shmlink::wire::handover::Offer::decode(&head).is_ok());
    drop(s);
    caller.wait_calls(100);
    eprintln!("step 3");
    // 3. One that takes the whole offer, then refuses it.
    let mut s = UnixStream::connect(&handover).expect("connect");
    s.write_all(&ask).expect("ask");
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut sink = [0u8; 4096];
    while let Ok(n) = s.read(&mut sink) {
        if n == 0 || sink[..n].ends_with(&shmlink::wire::handover::END) {
            break;
        }
    }
    s.write_all(&shmlink::wire::handover::encode_refusal("not today"))
        .expect("refusal");
    drop(s);
    caller.wait_calls(100);
    eprintln!("step 4");
    // 4. A real successor killed before it could answer: SIGKILL the moment it starts.
    let mut doomed = Command::new(BIN)
        .args(["echo", "--take-over", h])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a successor");
    let _ = doomed.kill();
    let _ = doomed.wait();
    caller.wait_calls(100);
    eprintln!("step 5");
    // 5. A successor of a newer version only (3 to 4): refused, naming
    // both sides' versions.
    let mut s = UnixStream::connect(&handover).expect("connect");
    let newer = shmlink::wire::handover::Ask {
        version_min: 3,
        version_max: 4,
    };
    s.write_all(&newer.encode()).expect("ask");
    let mut said = Vec::new();
    let _ = s.read_to_end(&mut said);
    let said = String::from_utf8_lossy(&said).into_owned();
    assert!(
        said.contains("versions 1 to 2") && said.contains("asked for 3 to 4"),
        "{said:?}"
    );
    caller.wait_calls(100);
    eprintln!("step 6");
    // 6. An older successor (version 1 only) with a unix: session open:
    // it is offered the listeners and the shm: sessions alone, at version
    // 1 (it would refuse a stream session); it refuses, and both sessions
    // serve on.
    let mut unix_client =
        Client::connect(old.address("unix:"), ClientOptions::default()).expect("unix:");
    assert_eq!(unix_client.call(b"before").expect("unix call"), b"before");
    let mut s = UnixStream::connect(&handover).expect("connect");
    let older = shmlink::wire::handover::Ask {
        version_min: 1,
        version_max: 1,
    };
    s.write_all(&older.encode()).expect("ask");
    let mut head = [0u8; 32];
    s.read_exact(&mut head).expect("the offer's head");
    let offer = shmlink::wire::handover::Offer::decode(&head).expect("an offer");
    assert_eq!(offer.version, 1);
    // The pipelined caller's session; the unix: one is not offered.
    assert_eq!(offer.sessions, 1, "{offer:?}");
    s.write_all(&shmlink::wire::handover::encode_refusal("an old build"))
        .expect("refusal");
    drop(s);
    caller.wait_calls(100);
    assert_eq!(unix_client.call(b"after").expect("unix call"), b"after");
    let failures = caller.finish();
    assert!(failures.is_empty(), "failed calls: {failures:?}");
    // Still the same server, still serving new sessions.
    let mut c = Client::connect(&shm, ClientOptions::default()).expect("connect after");
    assert_eq!(c.call(b"still here").expect("call"), b"still here");
    drop(old);
}

/// Starts `shmlink echo --take-over`, without waiting for it.
fn spawn_successor(handover: &Path) -> Proc {
    let h = handover.to_str().expect("utf-8 path");
    Proc(
        Command::new(BIN)
            .args([
                "echo",
                "--reply-ratio",
                "1",
                "--take-over",
                h,
                "--handover",
                h,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a successor"),
    )
}

#[test]
fn successors_killed_at_random_points_never_hang_or_mix_answers() {
    // SIGKILL the successor at a random point of its start and hand-over.
    // Killed before it answered, the old server serves on: no call fails.
    // Killed after (it owned the sessions), the caller's session ends with
    // a clear error, never a hang and never a wrong answer; a new server
    // then starts for the next round. The old server killed right after a
    // hand-over: the successor serves, no call fails.
    let dir = TempDir::new("handover-kill");
    let handover = dir.path().join("h.sock");
    let h = handover.to_str().expect("utf-8 path").to_string();
    let mut rng = fastrand::Rng::with_seed(
        std::env::var("SHMLINK_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(38),
    );
    let mut old = Echo::start(dir.path(), &["--reply-ratio", "1", "--handover", &h]);
    let shm = old.address("shm:").to_string();
    let (mut kept, mut lost) = (0, 0);
    for round in 0..12 {
        let caller = Caller::start(&shm, round % 2 == 1);
        caller.wait_calls(50);
        let mut next = spawn_successor(&handover);
        thread::sleep(Duration::from_micros(rng.u64(0..15_000)));
        let _ = next.0.kill();
        let _ = next.0.wait();
        // Which way it went: the caller goes on (the old server kept its
        // sessions), or the old server exits (the dead successor had them).
        let from = caller.calls.load(Ordering::Relaxed);
        let t = Instant::now();
        let kept_it = loop {
            if caller.calls.load(Ordering::Relaxed) >= from + 50 {
                break true;
            }
            if old.child.try_wait().expect("try_wait").is_some() {
                break false;
            }
            assert!(
                t.elapsed() < DEADLINE,
                "round {round}: neither served nor stopped"
            );
            thread::sleep(Duration::from_millis(1));
        };
        if kept_it {
            caller.wait_calls(50);
            let failures = caller.finish();
            assert!(
                failures.is_empty(),
                "round {round}: the old server kept serving, yet: {failures:?}"
            );
            kept += 1;
        } else {
            // The successor had taken everything when it died.
            let t = Instant::now();
            while !caller.thread.is_finished() {
                assert!(t.elapsed() < DEADLINE, "round {round}: the caller hangs");
                thread::sleep(Duration::from_millis(2));
            }
            let failures = caller.finish();
            assert!(!failures.is_empty(), "round {round}");
            assert!(
                failures
                    .iter()
                    .all(|f| !f.contains("answer") && !f.contains("wrong")),
                "round {round}: mixed answers: {failures:?}"
            );
            lost += 1;
            let _ = std::fs::remove_file(dir.path().join("ready"));
            old = Echo::start(dir.path(), &["--reply-ratio", "1", "--handover", &h]);
        }
    }
    eprintln!("{kept} rounds kept by the old server, {lost} lost with the killed successor");
    // The old server killed right after a hand-over: the successor serves.
    let caller = Caller::start(&shm, true);
    caller.wait_calls(100);
    let successor = successor(dir.path(), "ready-last", &handover);
    let _ = old.child.kill();
    caller.wait_calls(200);
    let failures = caller.finish();
    assert!(failures.is_empty(), "{failures:?}");
    drop(successor);
}
