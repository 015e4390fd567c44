//! End-to-end tests of the `shmlink` binary: echo + call over every
//! transport, errors, and the bench's JSON output (structure only, never
//! timing values).

use std::io::Write;

use std::process::{Command, Output, Stdio};

mod support;

use support::{Echo, TempDir, BIN};

fn call(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(BIN)
        .arg("call")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start call");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(data) = stdin {
        input.write_all(data).expect("write stdin");
    }
    drop(input);
    child.wait_with_output().expect("call output")
}

#[test]
fn echo_and_call_over_every_transport() {
    let dir = TempDir::new("echo");
    let echo = Echo::start(dir.path(), &[]);
    assert_eq!(echo.addresses.len(), 3, "{:?}", echo.addresses);
    let tcp = echo.address("tcp:");
    assert!(!tcp.ends_with(":0"), "real port expected: {tcp}");
    // 17 bytes: the reply is the first ⌈17/8⌉ = 3.
    for scheme in ["shm:", "unix:", "tcp:"] {
        let out = call(&[echo.address(scheme), "abcdefghijklmnopq"], None);
        assert!(out.status.success(), "{scheme}: {out:?}");
        assert_eq!(out.stdout, b"abc", "{scheme}");
    }
    // DATA from stdin, binary.
    let data: Vec<u8> = (0..=255u8).collect();
    let out = call(&[echo.address("shm:"), "--timeout", "2"], Some(&data));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, &data[..32]);
    let status = echo.terminate();
    assert!(status.success(), "echo exit status {status}");
    assert!(
        !dir.path().join("a.sock").exists(),
        "socket file left behind"
    );
}

#[test]
fn echo_reply_size_repeats_the_request() {
    let dir = TempDir::new("reply-size");
    let echo = Echo::start(dir.path(), &["--reply-size", "5", "--wait", "sleep"]);
    let out = call(&[echo.address("unix:"), "ab"], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"ababa");
    let out = call(&[echo.address("shm:"), "--wait", "busy"], Some(b""));
    assert_eq!(out.stdout, [0u8; 5]);
}

#[test]
fn call_to_a_missing_server_fails_with_one_clear_line() {
    let dir = TempDir::new("missing");
    let addr = format!("shm:{}/nobody.sock", dir.path().display());
    let out = call(&[&addr, "x", "--timeout", "1"], None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot connect") && err.contains("nobody.sock"),
        "{err}"
    );
}

#[test]
fn bad_arguments_are_rejected() {
    let out = call(&["nowhere", "x"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid address"));
    let out = Command::new(BIN)
        .args(["echo", "--listen", "unix:/tmp/x.sock", "--reply-ratio", "2"])
        .output()
        .expect("run echo");
    assert!(!out.status.success());
}

#[test]
fn bench_quick_writes_json_with_baselines() {
    let dir = TempDir::new("bench");
    let json = dir.path().join("bench.json");
    let md = dir.path().join("bench.md");
    let out = Command::new(BIN)
        .args(["bench", "--quick", "--quiet", "--json"])
        .arg(&json)
        .arg("--markdown")
        .arg(&md)
        .stdin(Stdio::null())
        .output()
        .expect("run bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json).expect("json file");
    let records: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let records = records.as_array().expect("an array");
    for field in [
        "transport",
        "wait",
        "size",
        "reply_size",
        "p50_us",
        "p99_us",
        "p999_us",
        "calls_per_s",
        "pipelined_calls_per_s",
        "sessions_per_s",
        "client_cpu_us_per_call",
        "server_cpu_us_per_call",
    ] {
        assert!(
            records.iter().all(|r| r.get(field).is_some()),
            "field {field} missing"
        );
    }
    let has = |transport: &str, wait: &str, size: u64| {
        records.iter().any(|r| {
            r["transport"] == transport && r["wait"] == wait && r["size"].as_u64() == Some(size)
        })
    };
    for size in [64, 2048] {
        for b in ["baseline-spin", "baseline-futex", "baseline-unix"] {
            assert!(has(b, "-", size), "{b} {size} missing");
        }
        for w in ["sleep", "spin", "busy"] {
            assert!(has("shm", w, size), "shm {w} {size} missing");
        }
        assert!(has("unix", "-", size) && has("tcp", "-", size));
    }
    assert_eq!(records.len(), 6 + 6 + 4);
    let baseline = records
        .iter()
        .find(|r| r["transport"] == "baseline-spin")
        .expect("baseline");
    assert!(baseline["pipelined_calls_per_s"].is_null());
    assert!(baseline["sessions_per_s"].is_null());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("## Headline") && stdout.contains("baseline-futex"));
    // Without --c-client its goals are not measured (never missed), saying
    // how to get them; the goals table ends with their count.
    assert!(
        stdout.contains(" the C client was not run: pass --c-client "),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Goals: ") && l.ends_with(" not measured.")),
        "{stdout}"
    );
    let markdown = std::fs::read_to_string(&md).expect("markdown file");
    assert_eq!(markdown, stdout);
}

/// Width and height of a PNG, from its IHDR chunk.
fn png_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let sig = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 24 || &bytes[..8] != sig || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let be =
        |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    Some((be(16), be(20)))
}

#[test]
fn bench_plot_writes_a_png_of_the_expected_size() {
    let dir = TempDir::new("plot");
    let png = dir.path().join("bench.png");
    let out = Command::new(BIN)
        .args([
            "bench",
            "--quiet",
            "--transports",
            "shm,unix",
            "--waits",
            "spin",
            "--sizes",
            "64,64K,1M",
            "--duration",
            "0.02",
            "--plot",
        ])
        .arg(&png)
        .stdin(Stdio::null())
        .output()
        .expect("run bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).expect("the plot file");
    assert!(bytes.len() > 10_000, "plot of {} bytes only", bytes.len());
    assert_eq!(png_dimensions(&bytes), Some((1600, 700)));
}

#[test]
fn chaos_short_run_has_no_wrong_replies_hangs_or_leaks() {
    let dir = TempDir::new("chaos");
    let json = dir.path().join("chaos.json");
    let out = Command::new(BIN)
        .args([
            "chaos",
            "--duration",
            "4",
            "--clients",
            "3",
            "--kill-every-ms",
            "100",
            "--server-every",
            "5",
            "--max-size",
            "1MiB",
            "--json",
        ])
        .arg(&json)
        .stdin(Stdio::null())
        .output()
        .expect("run chaos");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid JSON");
    for zero in [
        "hung",
        "wrong_replies",
        "leaked_segments",
        "socket_files_left",
        "dev_shm_new",
        "own_segments",
    ] {
        assert_eq!(s[zero], 0, "{zero}");
    }
    assert!(s["calls_completed"].as_u64() > Some(100), "{s}");
    assert!(s["client_kills"].as_u64() >= Some(5), "{s}");
    assert!(s["server_restarts"].as_u64() >= Some(1), "{s}");
    assert!(
        s["recoveries_ms"].as_array().is_some_and(|r| !r.is_empty()),
        "{s}"
    );
}
