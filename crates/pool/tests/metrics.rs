//! `--metrics`: what a Prometheus server scrapes from a pool of real echo
//! workers. Calls, failed calls by code, a crash and a reload show in the
//! counters and the histograms; the text passes `promtool check metrics`
//! (Debian's `prometheus` package, installed by ci/setup.sh); the endpoint
//! answers other paths and methods with 404 and 405, garbage with 400, and
//! a silent client does not hold it. Every wait is on a condition with a
//! deadline.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions};
use shmlink_http::FrontOptions;
use shmlink_pool::{HttpMode, Pool, PoolError, PoolOptions, CODE_WORKER_DIED};

use support::{remote_code, wait_until, Dir, Lines};

const WORKER: &str = env!("CARGO_BIN_EXE_shmlink-echo-worker");
const LIMIT: Duration = Duration::from_secs(20);

fn opts(dir: &Dir) -> PoolOptions {
    let mut o = PoolOptions::new(
        vec![format!("shm:{}", dir.path("p.sock").display())],
        vec![WORKER.to_string()],
    );
    o.workers = 2;
    // Every call through the pool (none on a direct line), so that each is
    // timed there.
    o.lines = false;
    o.metrics = Some("127.0.0.1:0".into());
    o
}

/// One HTTP exchange with the endpoint: status and body.
fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(LIMIT)).expect("read timeout");
    s.write_all(request).expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, body.to_string())
}

fn scrape(addr: SocketAddr) -> String {
    let (status, body) = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, 200, "{body}");
    body
}

/// `name{labels}` → value, from the text format.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("a sample line");
            (k.to_string(), v.parse().expect("a number"))
        })
        .collect()
}

fn value(text: &str, key: &str) -> f64 {
    samples(text)
        .get(key)
        .copied()
        .unwrap_or_else(|| panic!("no sample {key} in:\n{text}"))
}

/// `promtool check metrics` on the text: no error, no lint.
fn promtool_accepts(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; ci/setup.sh installs it)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool ran");
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn client(addr: &str) -> Client {
    Client::connect(
        addr,
        ClientOptions {
            timeout: LIMIT,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

#[test]
fn calls_errors_crashes_and_reloads_show() {
    let dir = Dir::new("metrics");
    let lines = Lines::default();
    let pool = Pool::start_with_log(opts(&dir), lines.log()).expect("pool starts");
    let at = pool.metrics_address().expect("a metrics address");
    wait_until("2 idle workers", LIMIT, || {
        value(&scrape(at), "shmlink_pool_workers{state=\"idle\"}") == 2.0
    });
    let text = scrape(at);
    promtool_accepts(&text);
    for reason in [
        "crash",
        "max_jobs",
        "max_memory",
        "ttl",
        "idle_ttl",
        "reload",
        "timeout",
    ] {
        let key = format!("shmlink_pool_worker_restarts_total{{reason=\"{reason}\"}}");
        assert_eq!(value(&text, &key), 0.0, "{key}");
    }
    assert_eq!(value(&text, "shmlink_pool_queue_depth"), 0.0);

    let mut c = client(&pool.addresses()[0]);
    for i in 0..10 {
        let req = format!("call {i}");
        assert_eq!(
            c.call(req.as_bytes()).expect("call"),
            format!("echo:{req}").as_bytes()
        );
    }
    assert_eq!(remote_code(c.call(b"fail")), 42);
    assert_eq!(remote_code(c.call(b"crash")), CODE_WORKER_DIED);
    wait_until("the crash counted", LIMIT, || {
        value(
            &scrape(at),
            "shmlink_pool_worker_restarts_total{reason=\"crash\"}",
        ) == 1.0
    });
    let text = scrape(at);
    promtool_accepts(&text);
    assert_eq!(value(&text, "shmlink_pool_calls_total"), 12.0);
    assert_eq!(
        value(&text, "shmlink_pool_call_duration_seconds_count"),
        12.0
    );
    assert!(value(&text, "shmlink_pool_call_duration_seconds_sum") > 0.0);
    assert_eq!(
        value(
            &text,
            "shmlink_pool_call_duration_seconds_bucket{le=\"+Inf\"}"
        ),
        12.0
    );
    assert_eq!(
        value(&text, "shmlink_pool_call_errors_total{code=\"0x0000002a\"}"),
        1.0
    );
    let died = format!("shmlink_pool_call_errors_total{{code=\"{CODE_WORKER_DIED:#010x}\"}}");
    assert_eq!(value(&text, &died), 1.0);
    // Every live worker's memory, by pid.
    for w in pool.status().workers.iter().filter(|w| w.serves()) {
        let key = format!("shmlink_pool_worker_memory_bytes{{pid=\"{}\"}}", w.pid);
        wait_until(&format!("{key} read"), LIMIT, || {
            value(&scrape(at), &key) > 0.0
        });
    }

    pool.reload();
    wait_until("both workers replaced by the reload", LIMIT, || {
        value(
            &scrape(at),
            "shmlink_pool_worker_restarts_total{reason=\"reload\"}",
        ) == 2.0
    });
    let text = scrape(at);
    assert_eq!(value(&text, "shmlink_pool_reloads_total"), 1.0);
    assert_eq!(
        value(
            &text,
            "shmlink_pool_worker_restarts_total{reason=\"crash\"}"
        ),
        1.0
    );
    promtool_accepts(&text);
    drop(c);
    pool.stop();
}

#[test]
fn the_endpoint_answers_only_get_metrics() {
    let dir = Dir::new("metrics-endpoint");
    let pool = Pool::start_with_log(opts(&dir), Lines::default().log()).expect("pool starts");
    let at = pool.metrics_address().expect("a metrics address");
    assert_eq!(exchange(at, b"GET /nope HTTP/1.1\r\n\r\n").0, 404);
    assert_eq!(exchange(at, b"POST /metrics HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(exchange(at, b"\x00\x01garbage\r\n\r\n").0, 400);
    assert_eq!(
        exchange(at, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n").0,
        200,
        "a query string is ignored"
    );
    // A client that connects and says nothing holds the endpoint at most
    // its read deadline (2 s): a scrape beside it is answered.
    let silent = TcpStream::connect(at).expect("silent client");
    let t0 = Instant::now();
    let text = scrape(at);
    assert!(text.contains("shmlink_pool_calls_total"));
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    drop(silent);
    pool.stop();
    // Stopped: nothing listens there any more.
    assert!(
        TcpStream::connect(at).is_err(),
        "the endpoint closed with the pool"
    );
}

#[test]
fn a_bad_metrics_address_is_refused_by_name() {
    let dir = Dir::new("metrics-bad");
    let mut o = opts(&dir);
    o.metrics = Some("no-port-here".into());
    match Pool::start(o) {
        Err(PoolError::Options(m)) => {
            assert!(m.contains("--metrics") && m.contains("HOST:PORT"), "{m}")
        }
        other => panic!("expected an options error, got {other:?}"),
    }
}

/// HTTP requests are counted by status class and timed (a histogram the
/// HTTP servers count themselves: the pool's front, or each worker serving
/// HTTP itself), in both modes; the connections open are shown.
#[test]
fn http_requests_show_in_both_modes() {
    for mode in [HttpMode::Front, HttpMode::Workers] {
        let dir = Dir::new("metrics-http");
        let mut o = PoolOptions::new(Vec::new(), vec![WORKER.to_string()]);
        o.workers = 1;
        o.metrics = Some("127.0.0.1:0".into());
        o.http = Some(FrontOptions::new(vec!["127.0.0.1:0".into()]));
        o.http_mode = mode;
        o.control = Some(dir.path("p.ctl"));
        let pool = Pool::start_with_log(o, Lines::default().log()).expect("pool starts");
        let at = pool.metrics_address().expect("a metrics address");
        let http = pool.http_addresses()[0];
        for (path, want) in [
            ("/a", 200),
            ("/b", 200),
            ("/status/503", 503),
            ("/status/418", 418),
        ] {
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let (status, _) = exchange(http, req.as_bytes());
            assert_eq!(status, want, "{mode:?} {path}");
        }
        let text = scrape(at);
        promtool_accepts(&text);
        let v = |name: &str| value(&text, name);
        // The common statuses one by one; another under its class.
        for (code, n) in [("200", 2.0), ("503", 1.0), ("4xx", 1.0)] {
            assert_eq!(
                v(&format!("shmlink_http_requests_total{{code=\"{code}\"}}")),
                n,
                "{mode:?} {code}"
            );
        }
        for absent in ["2xx", "5xx", "418"] {
            assert!(
                !text.contains(&format!("shmlink_http_requests_total{{code=\"{absent}\"}}")),
                "{mode:?}: {absent}"
            );
        }
        assert_eq!(
            v("shmlink_http_request_duration_seconds_count"),
            4.0,
            "{mode:?}"
        );
        assert_eq!(
            v("shmlink_http_request_duration_seconds_bucket{le=\"+Inf\"}"),
            4.0,
            "{mode:?}"
        );
        assert_eq!(
            v("shmlink_http_request_duration_seconds_bucket{le=\"2.5\"}"),
            4.0,
            "{mode:?}: none took 2.5 s"
        );
        assert!(
            v("shmlink_http_request_duration_seconds_sum") > 0.0,
            "{mode:?}"
        );
        wait_until("no HTTP connection open", LIMIT, || {
            value(&scrape(at), "shmlink_http_connections") == 0.0
        });
        pool.stop();
    }
}
