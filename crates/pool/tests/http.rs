//! The pool's HTTP with real clients (raw bytes over `TcpStream`, responses
//! parsed by hand) against real worker processes (the native echo worker,
//! `shmlink-echo-worker`), in both modes: the workers serving HTTP
//! themselves (`HttpMode::Workers`, the default) and the pool's front
//! (`HttpMode::Front`); each test below runs in both (`in_both_modes!`)
//! unless it names one. Round trips, keep-alive, chunked and pipelined
//! requests, the body and head limits, malformed requests, worker faults,
//! slow-loris clients, clients that go away, no leak of descriptors or
//! threads, the counters and the access log; for workers that serve HTTP,
//! recycling and reloads under load and a worker killed. Every wait is on a
//! condition with a deadline.

#[macro_use]
mod support;

use std::io::Write;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread;
use std::time::{Duration, Instant};

use shmlink_http::{FrontOptions, HttpStats};
use shmlink_pool::{HttpMode, Pool, PoolOptions};

use support::http_client::{find, get, Conn, Resp, DEADLINE};
use support::{open_fds, wait_until, Dir, Lines};

const WORKER: &str = env!("CARGO_BIN_EXE_shmlink-echo-worker");

// ---------- helpers ----------

/// Tests share the process; the leak check counts the process's descriptors
/// and threads, so it runs alone (a write lock) and the others together
/// (read locks).
static SERIAL: RwLock<()> = RwLock::new(());

#[allow(dead_code)] // held, never read
enum Serial {
    Shared(RwLockReadGuard<'static, ()>),
    Alone(RwLockWriteGuard<'static, ()>),
}

/// A pool of echo workers serving HTTP on a free port of 127.0.0.1.
struct Front {
    pool: Pool,
    addr: SocketAddr,
    lines: Lines,
    // Dropped last: after the pool.
    _serial: Serial,
}

impl Front {
    /// Starts `workers` workers serving HTTP in `mode`; `tweak` sets options
    /// (the header timeout is 5 s unless it says otherwise).
    fn start(
        mode: HttpMode,
        workers: usize,
        tweak: impl FnOnce(&mut PoolOptions, &mut FrontOptions),
    ) -> Front {
        let serial = Serial::Shared(SERIAL.read().unwrap_or_else(|p| p.into_inner()));
        Front::start_as(serial, mode, workers, tweak)
    }

    /// As [`Front::start`], the only test running.
    fn start_alone(
        mode: HttpMode,
        workers: usize,
        tweak: impl FnOnce(&mut PoolOptions, &mut FrontOptions),
    ) -> Front {
        let serial = Serial::Alone(SERIAL.write().unwrap_or_else(|p| p.into_inner()));
        Front::start_as(serial, mode, workers, tweak)
    }

    fn start_as(
        serial: Serial,
        mode: HttpMode,
        workers: usize,
        tweak: impl FnOnce(&mut PoolOptions, &mut FrontOptions),
    ) -> Front {
        let mut o = PoolOptions::new(Vec::new(), vec![WORKER.to_string()]);
        o.workers = workers;
        o.http_mode = mode;
        let mut h = FrontOptions::new(vec!["127.0.0.1:0".into()]);
        h.header_timeout = Duration::from_secs(5);
        tweak(&mut o, &mut h);
        o.http = Some(h);
        let lines = Lines::default();
        let pool = Pool::start_with_log(o, lines.log()).expect("the pool starts");
        let addrs = pool.http_addresses();
        assert_eq!(addrs.len(), 1, "{addrs:?}");
        let f = Front {
            addr: addrs[0],
            pool,
            lines,
            _serial: serial,
        };
        f.all_running(workers);
        f
    }

    /// Waits until `n` workers run, waiting for requests.
    fn all_running(&self, n: usize) {
        wait_until(&format!("{n} workers running"), DEADLINE, || {
            let s = self.pool.status();
            s.workers
                .iter()
                .filter(|w| w.state == "idle" || w.state == "http")
                .count()
                == n
        });
    }

    fn conn(&self) -> Conn {
        Conn::open(self.addr)
    }

    /// One request on a connection of its own.
    fn once(&self, request: impl AsRef<[u8]>) -> Resp {
        let mut c = self.conn();
        c.send(request);
        c.response()
    }

    fn stats(&self) -> HttpStats {
        self.pool.status().http.expect("the pool has an HTTP front")
    }

    /// Waits until the front has no connection open.
    fn all_closed(&self) {
        wait_until("no connection open", DEADLINE, || {
            self.stats().connections_open == 0
        });
    }

    /// Each worker's pid and open descriptors.
    fn worker_fds(&self) -> Vec<(u32, usize)> {
        self.pool
            .status()
            .workers
            .iter()
            .map(|w| {
                let fds = std::fs::read_dir(format!("/proc/{}/fd", w.pid)).map_or(0, |d| d.count());
                (w.pid, fds)
            })
            .collect()
    }

    fn pid(&self, c: &mut Conn) -> u32 {
        c.send(get("/pid"));
        let r = c.response();
        assert_eq!(r.status, 200, "{r:?}");
        r.text().parse().expect("a pid")
    }
}

fn post(target: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {target} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// What the echo worker answers for a request from `remote` with these
/// headers (as received: lower-case names) and body.
fn echo(first_line: &str, remote: SocketAddr, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{first_line}\n{remote}\n").into_bytes();
    for (n, v) in headers {
        out.extend_from_slice(format!("{n}: {v}\n").as_bytes());
    }
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

/// Threads of this process: those of the front's runtime (named
/// `shmlink-http`: its workers and its blocking pool, where calls wait for
/// their worker) and the others.
fn threads() -> (usize, usize) {
    let mut counts = (0, 0);
    for t in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let comm = std::fs::read_to_string(t.expect("a task").path().join("comm"));
        // A thread gone meanwhile counts as none.
        match comm.as_deref().map(str::trim) {
            Ok("shmlink-http") => counts.0 += 1,
            Ok(_) => counts.1 += 1,
            Err(_) => {}
        }
    }
    counts
}

in_both_modes!(
    get_and_post_round_trip,
    keep_alive_and_http_1_0,
    a_chunked_request_body_arrives_joined,
    pipelined_requests_are_answered_in_order,
    a_body_over_max_body_is_413,
    malformed_and_oversized_heads,
    worker_faults_become_statuses_and_the_connection_stays,
    a_slow_request_holds_up_no_other,
    a_queue_timeout_is_503,
    slow_loris_connections_are_closed_after_header_timeout,
    clients_that_go_away_leave_the_front_serving,
    max_connections_closes_the_extra_ones,
    stop_closes_idle_connections_at_once,
    a_stop_lets_requests_finish_within_the_shutdown_timeout,
    no_descriptor_or_thread_leaks_after_2000_requests,
    counters_match_the_requests,
    the_access_log_has_a_line_per_request,
    bodies_over_the_spool_size_arrive_as_a_file,
);

// ---------- requests and responses ----------

fn get_and_post_round_trip(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, _| {});
    let mut c = f.conn();
    let me = c.local();
    assert_eq!(me.ip().to_string(), "127.0.0.1");
    c.send(
        "GET /hello/world?x=1&y=two%20words HTTP/1.1\r\nHost: test\r\n\
         X-Custom-Header: Some Value\r\nAccept: */*\r\n\r\n",
    );
    let r = c.response();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.version, "HTTP/1.1");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(
        r.text(),
        String::from_utf8(echo(
            "GET /hello/world?x=1&y=two%20words HTTP/1.1",
            me,
            &[
                ("host", "test"),
                ("x-custom-header", "Some Value"),
                ("accept", "*/*")
            ],
            b""
        ))
        .expect("utf8"),
        "method, target with its query, protocol, remote, lower-case headers"
    );

    // A POST with every byte value in its body, on the same connection.
    let body: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    c.send(post("/submit?id=7", &body));
    let r = c.response();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body,
        echo(
            "POST /submit?id=7 HTTP/1.1",
            me,
            &[("host", "test"), ("content-length", "3000")],
            &body
        )
    );
    // Other methods pass as they are.
    c.send("DELETE /thing/1 HTTP/1.1\r\nHost: test\r\n\r\n");
    let r = c.response();
    assert!(r.text().starts_with("DELETE /thing/1 HTTP/1.1\n"), "{r:?}");
    // HEAD: the head of the answer without its body, then the next one.
    c.send(format!(
        "HEAD /h HTTP/1.1\r\nHost: test\r\n\r\n{}",
        get("/g")
    ));
    let r = c.head_response();
    assert_eq!(r.status, 200, "{r:?}");
    let len = "HEAD /h HTTP/1.1\n".len() + format!("{me}\nhost: test\n\n").len();
    assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
    assert!(c.response().text().starts_with("GET /g HTTP/1.1\n"));
    // Expect: 100-continue: hyper sends 100 once the front reads the body.
    c.send("POST /e HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 100, "{r:?}");
    c.send("hello");
    let r = c.response();
    assert_eq!(
        r.body,
        echo(
            "POST /e HTTP/1.1",
            me,
            &[
                ("host", "test"),
                ("expect", "100-continue"),
                ("content-length", "5")
            ],
            b"hello"
        )
    );
}

fn keep_alive_and_http_1_0(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, _| {});
    // Several requests on one connection: the same remote port each time.
    let mut c = f.conn();
    let me = c.local();
    for i in 0..10 {
        c.send(get(&format!("/k/{i}")));
        let r = c.response();
        assert_eq!(r.status, 200, "{r:?}");
        assert!(
            r.text()
                .starts_with(&format!("GET /k/{i} HTTP/1.1\n{me}\n")),
            "{r:?}"
        );
    }
    drop(c);

    // HTTP/1.0 without keep-alive: one response, then the server closes.
    let mut c = f.conn();
    c.send("GET /old HTTP/1.0\r\nHost: test\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.version, "HTTP/1.0", "{r:?}");
    assert!(r.text().starts_with("GET /old HTTP/1.0\n"), "{r:?}");
    c.wait_closed();
    assert!(c.buf.is_empty(), "nothing after the response");

    // HTTP/1.0 asking for keep-alive keeps the connection.
    let mut c = f.conn();
    for i in 0..3 {
        c.send(format!(
            "GET /old-ka/{i} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
        ));
        let r = c.response();
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.header("connection")
                .map(str::to_ascii_lowercase)
                .as_deref(),
            Some("keep-alive"),
            "{r:?}"
        );
    }
    drop(c);

    // HTTP/1.1 with Connection: close: closed after the response.
    let mut c = f.conn();
    c.send("GET /bye HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "{r:?}");
    c.wait_closed();
    f.all_closed();
}

fn a_chunked_request_body_arrives_joined(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, _| {});
    let mut c = f.conn();
    let me = c.local();
    // Sent in several writes, with a chunk extension.
    c.send("POST /chunked HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.send("5\r\nhello\r\n");
    c.send("1;ext=yes\r\n \r\n");
    c.send("5\r\nworld\r\n0\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body,
        echo(
            "POST /chunked HTTP/1.1",
            me,
            &[("host", "test"), ("transfer-encoding", "chunked")],
            b"hello world"
        )
    );
    // A larger binary body in one write, on the same connection.
    let body: Vec<u8> = (0..=255u8).rev().cycle().take(5000).collect();
    let mut req = b"POST /c2 HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for part in body.chunks(1234) {
        req.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        req.extend_from_slice(part);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    c.send(&req);
    let r = c.response();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.ends_with(&body), "the body joined");
}

fn pipelined_requests_are_answered_in_order(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, _| {});
    let mut c = f.conn();
    let me = c.local();
    let mut all = get("/one").into_bytes();
    all.extend_from_slice(&post("/two", b"second body"));
    all.extend_from_slice(get("/three?q=3").as_bytes());
    c.send(&all);
    let r = c.response();
    assert_eq!(
        r.body,
        echo("GET /one HTTP/1.1", me, &[("host", "test")], b"")
    );
    let r = c.response();
    assert_eq!(
        r.body,
        echo(
            "POST /two HTTP/1.1",
            me,
            &[("host", "test"), ("content-length", "11")],
            b"second body"
        )
    );
    let r = c.response();
    assert_eq!(
        r.body,
        echo("GET /three?q=3 HTTP/1.1", me, &[("host", "test")], b"")
    );
    // A slow first request does not let the second overtake it.
    c.send(format!("{}{}", get("/sleep/100"), get("/after")));
    assert_eq!(c.response().text(), "slept");
    assert!(c.response().text().starts_with("GET /after HTTP/1.1\n"));
}

fn bodies_over_the_spool_size_arrive_as_a_file(mode: HttpMode) {
    let f = Front::start(mode, 1, |_, h| h.spool_over = 64 << 10);
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut req = post("/big", &body);
    // A client cannot name a file itself: its header of that name is dropped.
    req.splice(
        find(&req, b"Content-Length").expect("a length")
            ..find(&req, b"Content-Length").expect("a length"),
        b"X-Shmlink-Body-File: /etc/passwd\r\n".iter().copied(),
    );
    let r = f.once(&req);
    assert_eq!(r.status, 200, "{r:?}");
    let text = r.text();
    let named: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("x-shmlink-body-file: "))
        .collect();
    assert_eq!(named.len(), 1, "{text}");
    let path = named[0].trim_start_matches("x-shmlink-body-file: ");
    assert!(
        path.starts_with("/proc/") && path.contains("/fd/"),
        "{path}"
    );
    assert!(
        text.ends_with("\n\n"),
        "the request's own body is empty: {text:?}"
    );
    // Small bodies stay in the request.
    let r = f.once(post("/small", b"tiny"));
    assert!(r.text().ends_with("\n\ntiny") && !r.text().contains("x-shmlink-body-file"));
}

// ---------- limits and malformed requests ----------

fn a_body_over_max_body_is_413(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, h| h.max_body = 1000);
    // Exactly the limit passes.
    let r = f.once(post("/exact", &[b'x'; 1000]));
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.ends_with(&[b'x'; 1000]));

    // Declared too large: refused from the head alone, connection closed.
    let mut c = f.conn();
    c.send("POST /big HTTP/1.1\r\nHost: test\r\nContent-Length: 5000\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.text(), "413 Payload Too Large\n");
    c.wait_closed();

    // Expecting 100-continue: the 413 instead, the body never sent.
    let mut c = f.conn();
    c.send(
        "POST /big HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n",
    );
    let r = c.response();
    assert_eq!(r.status, 413, "{r:?}");
    c.wait_closed();

    // The same with the body sent along.
    let r = f.once(post("/big", &[b'y'; 5000]));
    assert_eq!(r.status, 413, "{r:?}");

    // Chunked, over the limit once joined.
    let mut c = f.conn();
    let mut req =
        b"POST /big-chunked HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..2 {
        req.extend_from_slice(b"258\r\n"); // 600
        req.extend_from_slice(&[b'z'; 600]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    c.send(&req);
    let r = c.response();
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.header("connection"), Some("close"));
    c.wait_closed();

    // The front goes on serving.
    let r = f.once(get("/after"));
    assert_eq!(r.status, 200, "{r:?}");
    let s = f.stats();
    assert_eq!(s.too_large, 4, "{s:?}");
    f.all_closed();
}

/// What hyper does with a head it cannot parse: it answers the status of
/// the parse error (400; 431 for a head over `max_header_bytes` or more
/// than 100 headers) with an empty body and closes the connection; the
/// request never reaches the front's service (nor its counters).
fn malformed_and_oversized_heads(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, h| h.max_header_bytes = 8192);
    let big = "a".repeat(20 << 10);
    let many: String = (0..150).map(|i| format!("X-H-{i}: v\r\n")).collect();
    let cases: Vec<(&str, Vec<u8>, u16)> =
        vec![
        ("a request line without a target", b"GARBAGE\r\n\r\n".to_vec(), 400),
        (
            "binary bytes (a TLS hello)",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
            400,
        ),
        (
            "a header line without a colon",
            b"GET / HTTP/1.1\r\nHost: test\r\nthis is not a header\r\n\r\n".to_vec(),
            400,
        ),
        (
            "an unknown protocol version",
            b"GET / HTTP/9.9\r\nHost: test\r\n\r\n".to_vec(),
            400,
        ),
        (
            "a space in the target",
            b"GET /a b HTTP/1.1\r\nHost: test\r\n\r\n".to_vec(),
            400,
        ),
        (
            "two different content lengths",
            b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello"
                .to_vec(),
            400,
        ),
        (
            "a 20 KB header over max_header_bytes",
            format!("GET / HTTP/1.1\r\nHost: test\r\nX-Big: {big}\r\n\r\n").into_bytes(),
            431,
        ),
        (
            "150 headers",
            format!("GET / HTTP/1.1\r\nHost: test\r\n{many}\r\n").into_bytes(),
            431,
        ),
    ];
    let before = f.stats();
    for (what, bytes, status) in &cases {
        let mut c = f.conn();
        c.send(bytes);
        let r = c
            .try_response()
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .unwrap_or_else(|| panic!("{what}: closed without a response"));
        assert_eq!(r.status, *status, "{what}: {r:?}");
        assert!(r.body.is_empty(), "{what}: {r:?}");
        let took = c.wait_closed();
        assert!(took < DEADLINE, "{what}: closed after the response");
        // The next client is served.
        let r = f.once(get("/next"));
        assert_eq!(r.status, 200, "after {what}: {r:?}");
    }
    let after = f.stats();
    assert_eq!(
        after.requests - before.requests,
        cases.len() as u64,
        "only the good requests reach the service: {after:?}"
    );

    // A chunked body that breaks its framing is the front's 400.
    let mut c = f.conn();
    c.send("POST /broken HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    match c.try_response().expect("a response or a close") {
        Some(r) => assert_eq!(r.status, 400, "{r:?}"),
        None => panic!("closed without a 400"),
    }
    c.wait_closed();
    assert_eq!(f.once(get("/next")).status, 200);

    // CONNECT (a proxy's tunnel) is the front's 405, and the connection closes.
    let mut c = f.conn();
    c.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    match c.try_response().expect("a response or a close") {
        Some(r) => assert_eq!(r.status, 405, "{r:?}"),
        None => panic!("closed without a 405"),
    }
    c.wait_closed();
    assert_eq!(f.once(get("/next")).status, 200);
    f.all_closed();
}

// ---------- worker faults ----------

fn worker_faults_become_statuses_and_the_connection_stays(mode: HttpMode) {
    let f = Front::start(mode, 1, |o, _| o.call_timeout = Duration::from_secs(1));
    let mut c = f.conn();
    let first = f.pid(&mut c);
    for (path, status, reason) in [
        ("/fail", 500, "500 Internal Server Error\n"),
        ("/garbage", 502, "502 Bad Gateway\n"),
        ("/bad-header", 502, "502 Bad Gateway\n"),
        ("/status/404", 404, ""),
        ("/status/503", 503, ""),
        // Not a final status: the worker's answer is unusable.
        ("/status/100", 502, "502 Bad Gateway\n"),
        ("/status/101", 502, "502 Bad Gateway\n"),
        // Past the statuses HTTP names, still a status.
        ("/status/599", 599, ""),
    ] {
        c.send(get(path));
        let r = c.response();
        assert_eq!(r.status, status, "{path}: {r:?}");
        assert_eq!(r.text(), reason, "{path}");
    }
    assert_eq!(f.pid(&mut c), first, "the worker survived its answers");
    // A worker's lines reach the pool's log through a thread of the pool.
    for logged in [
        "HTTP GET /garbage from 127.0.0.1:",
        "the worker answered status 101",
        "asked to fail",
    ] {
        wait_until(&format!("{logged:?} logged"), DEADLINE, || {
            f.lines.any(logged)
        });
    }

    match mode {
        HttpMode::Front => {
            // A crash: 502, the worker replaced, the next request served.
            c.send(get("/crash"));
            let r = c.response();
            assert_eq!(r.status, 502, "{r:?}");
            let second = f.pid(&mut c);
            assert_ne!(second, first, "a new worker");

            // A hang: 504 after the call timeout, the worker killed and replaced.
            let t0 = Instant::now();
            c.send(get("/hang"));
            let r = c.response();
            let took = t0.elapsed();
            assert_eq!(r.status, 504, "{r:?}");
            assert_eq!(r.text(), "504 Gateway Timeout\n");
            assert!(
                took >= Duration::from_millis(900) && took < DEADLINE,
                "504 after {took:?}"
            );
            let third = f.pid(&mut c);
            assert_ne!(third, second, "a new worker");
        }
        HttpMode::Workers => {
            // A crash ends the connections of that worker (it held them);
            // its replacement takes the next ones.
            c.send(get("/crash"));
            assert!(
                c.try_response().map_or(true, |r| r.is_none()),
                "no answer from a crashed worker"
            );
            f.all_running(1);
            let mut c = f.conn();
            let second = f.pid(&mut c);
            assert_ne!(second, first, "a new worker");

            // A hang: the worker killed after the call timeout, its
            // connection closed, a new worker serving.
            let t0 = Instant::now();
            c.send(get("/hang"));
            let took = c.wait_closed();
            assert!(c.buf.is_empty(), "no answer from a killed worker");
            assert!(
                t0.elapsed() >= Duration::from_millis(900) && took < DEADLINE,
                "closed after {took:?}"
            );
            assert!(f
                .lines
                .any("did not answer an HTTP request within the call timeout"));
            f.all_running(1);
            let third = f.pid(&mut f.conn());
            assert_ne!(third, second, "a new worker");
        }
    }
    assert!(f.pool.status().restarts >= 2);
}

fn a_slow_request_holds_up_no_other(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, _| {});
    let addr = f.addr;
    let slow = thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(get("/sleep/3000"));
        c.response()
    });
    wait_until("a worker busy", DEADLINE, || {
        f.pool.status().workers.iter().any(|w| w.state == "busy")
    });
    // The other worker answers these while the first one sleeps.
    for i in 0..5 {
        let r = f.once(get(&format!("/meanwhile/{i}")));
        assert_eq!(r.status, 200, "{r:?}");
    }
    assert!(
        !slow.is_finished(),
        "the other requests were answered before the slow one"
    );
    assert_eq!(slow.join().expect("the slow client").text(), "slept");
}

fn a_queue_timeout_is_503(mode: HttpMode) {
    let f = Front::start(mode, 1, |o, _| o.queue_timeout = Duration::from_millis(200));
    let addr = f.addr;
    // Connected (and accepted) before the worker gets busy.
    let mut waiting: Vec<Conn> = (0..2).map(|_| f.conn()).collect();
    wait_until("2 connections open", DEADLINE, || {
        f.stats().connections_open == 2
    });
    let busy = thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(get("/sleep/2000"));
        c.response()
    });
    wait_until("the worker busy", DEADLINE, || {
        f.pool.status().workers.iter().any(|w| w.state == "busy")
    });
    match mode {
        HttpMode::Front => {
            let t0 = Instant::now();
            let r = f.once(get("/queued"));
            let took = t0.elapsed();
            assert_eq!(r.status, 503, "{r:?}");
            assert_eq!(r.text(), "503 Service Unavailable\n");
            assert!(
                took >= Duration::from_millis(150) && took < Duration::from_millis(1900),
                "503 after {took:?}, before the busy worker was free"
            );
        }
        HttpMode::Workers => {
            // Two requests that arrive while the worker is busy are read in
            // the same turn, once it is free: the one that runs second
            // waited the first one's 600 ms, past the queue timeout, and
            // is answered 503 without running.
            for c in &mut waiting {
                c.send(get("/sleep/600"));
            }
            let mut got: Vec<(u16, String)> = waiting
                .iter_mut()
                .map(|c| c.response())
                .map(|r| (r.status, r.text()))
                .collect();
            got.sort();
            assert_eq!(
                got,
                [
                    (200, "slept".to_string()),
                    (503, "503 Service Unavailable\n".to_string())
                ]
            );
            // Logged by the worker, copied into the pool's log by a thread
            // of the pool: maybe after the client has its answer.
            wait_until("the 503 logged", DEADLINE, || {
                f.lines.any("longer than the queue timeout")
            });
        }
    }
    let r = busy.join().expect("the busy client");
    assert_eq!((r.status, r.text().as_str()), (200, "slept"));
    assert_eq!(f.once(get("/x")).status, 200);
}

// ---------- slow and vanishing clients ----------

fn slow_loris_connections_are_closed_after_header_timeout(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, h| h.header_timeout = Duration::from_secs(1));
    let t0 = Instant::now();
    let mut slow: Vec<Conn> = (0..50)
        .map(|_| {
            let mut c = f.conn();
            c.send("GET / HTTP/1.1\r\nHost: x\r\n");
            c
        })
        .collect();
    // Connections that send nothing at all (idle from the start).
    slow.extend((0..5).map(|_| f.conn()));
    // One that trickles a byte every 50 ms and never ends its head.
    let trickler = f.conn();
    let stop = Arc::new(AtomicBool::new(false));
    let trickle = {
        let (mut w, stop) = (trickler.s.try_clone().expect("clone"), Arc::clone(&stop));
        thread::spawn(move || {
            let mut head = b"GET /trickle HTTP/1.1\r\nX-Slow: ".to_vec();
            head.resize(400, b'a');
            for b in head {
                if stop.load(Ordering::Relaxed) || w.write_all(&[b]).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
        })
    };
    slow.push(trickler);
    wait_until("every slow connection accepted", DEADLINE, || {
        f.stats().connections_open >= 56
    });

    // Meanwhile a normal client is served, before the slow ones time out.
    let t1 = Instant::now();
    let r = f.once(get("/normal"));
    let took = t1.elapsed();
    assert_eq!(r.status, 200, "{r:?}");
    let open = f.stats().connections_open;
    assert!(
        open >= 56,
        "served in {took:?}, with the slow connections still open ({open})"
    );

    for (i, c) in slow.iter_mut().enumerate() {
        c.wait_closed();
        assert!(c.buf.is_empty(), "connection {i}: no response, just closed");
    }
    let closed = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    trickle.join().expect("the trickler");
    assert!(
        closed >= Duration::from_millis(900),
        "closed after {closed:?}: not before the header timeout"
    );
    eprintln!("57 slow connections closed {closed:?} after they opened");
    f.all_closed();
    assert_eq!(f.stats().requests, 1);
}

fn clients_that_go_away_leave_the_front_serving(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, _| {});
    // Gone right after sending, while its worker runs.
    let mut a = f.conn();
    a.send(get("/sleep/300"));
    drop(a);
    // Gone in the middle of a body.
    let mut b = f.conn();
    b.send("POST /partial HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n0123456789");
    drop(b);
    // Gone in the middle of a head.
    let mut c = f.conn();
    c.send("GET /half HTTP/1.1\r\nHo");
    drop(c);
    // Half-closed after sending: hyper (half_close off) takes the end of
    // stream for the client gone if it reads it before the answer is out,
    // so it either answers or closes without a word.
    let mut d = f.conn();
    d.send(get("/half-closed"));
    d.s.shutdown(Shutdown::Write).expect("shutdown write");
    if let Some(r) = d.try_response().expect("an answer or a close") {
        assert_eq!(r.status, 200, "{r:?}");
    }
    drop(d);
    // Gone in the middle of a large response (a 2 MiB echo).
    let mut e = f.conn();
    e.send(post("/large", &vec![b'L'; 2 << 20]));
    e.need(100).expect("the start of the response");
    drop(e);
    // Others are served meanwhile and after.
    for i in 0..5 {
        let r = f.once(get(&format!("/other/{i}")));
        assert_eq!(r.status, 200, "{r:?}");
    }
    let r = f.once(get("/sleep/10"));
    assert_eq!(r.text(), "slept");
    f.all_closed();
    assert_eq!(
        f.pool.status().restarts,
        0,
        "no worker suffered from a client gone"
    );
}

fn max_connections_closes_the_extra_ones(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, h| h.max_connections = 3);
    let mut held: Vec<Conn> = (0..3)
        .map(|i| {
            let mut c = f.conn();
            c.send(get(&format!("/held/{i}")));
            assert_eq!(c.response().status, 200);
            c
        })
        .collect();
    wait_until("3 open", DEADLINE, || f.stats().connections_open == 3);
    let mut extra = f.conn();
    extra.wait_closed();
    assert!(extra.buf.is_empty());
    let s = f.stats();
    assert_eq!((s.connections_refused, s.connections_open), (1, 3), "{s:?}");
    held.pop();
    wait_until("2 open", DEADLINE, || f.stats().connections_open == 2);
    assert_eq!(f.once(get("/now")).status, 200);
}

fn stop_closes_idle_connections_at_once(mode: HttpMode) {
    let f = Front::start(mode, 2, |_, h| h.header_timeout = Duration::from_secs(30));
    let mut idle = f.conn();
    idle.send(get("/first"));
    assert_eq!(idle.response().status, 200);
    let Front { pool, .. } = f;
    let t0 = Instant::now();
    pool.stop();
    let took = t0.elapsed();
    idle.wait_closed();
    assert!(took < Duration::from_secs(4), "stopped in {took:?}");
}

/// A stop with a request in flight: one that ends within
/// `--shutdown-timeout` gets its response, and the stop takes no longer
/// than it; one that would outlive it is cut off at the deadline, its
/// worker killed (a 503 from the front; a worker serving HTTP itself takes
/// the connection with it). One worker each time: in workers mode a
/// worker's engine accepts connections while its application runs, so a
/// second request could queue behind the first.
fn a_stop_lets_requests_finish_within_the_shutdown_timeout(mode: HttpMode) {
    let timeout = Duration::from_millis(1500);
    for (path, cut) in [("/sleep/700", false), ("/sleep/60000", true)] {
        let f = Front::start(mode, 1, |o, _| o.shutdown_timeout = timeout);
        let mut c = f.conn();
        c.send(get(path));
        wait_until("the worker busy", DEADLINE, || {
            f.pool.status().workers.iter().any(|w| w.state == "busy")
        });
        let Front { pool, lines, .. } = f;
        let t0 = Instant::now();
        let stopper = thread::spawn(move || pool.stop());
        let got = c.try_response();
        let took = t0.elapsed();
        stopper.join().expect("stop");
        if !cut {
            assert_eq!(
                got.expect("read").expect("a response").status,
                200,
                "{path}"
            );
            assert!(took < timeout, "{path}: answered in {took:?}");
            continue;
        }
        match (mode, got) {
            (HttpMode::Front, Ok(Some(r))) => assert_eq!(r.status, 503),
            (HttpMode::Workers, Ok(None) | Err(_)) => {}
            (m, other) => panic!("{m:?}: {path}: {other:?}"),
        }
        assert!(
            took >= timeout - Duration::from_millis(100) && took < Duration::from_secs(10),
            "cut off at the deadline: {took:?}"
        );
        assert!(
            lines.any("--shutdown-timeout): killed"),
            "the log names the killed worker: {:?}",
            lines.0.lock().map(|l| l.clone())
        );
    }
}

// ---------- leaks, counters, access log ----------

fn no_descriptor_or_thread_leaks_after_2000_requests(mode: HttpMode) {
    let f = Front::start_alone(mode, 2, |_, h| {
        h.max_body = 1000;
        h.threads = 2;
    });
    let addr = f.addr;
    // Warm up with as many calls at once as the load below makes: the
    // runtime's blocking pool (a thread per call waiting for its worker)
    // grows to its size.
    let mut warm: Vec<Conn> = (0..20).map(|_| Conn::open(addr)).collect();
    for c in &mut warm {
        c.send(get("/warm"));
    }
    for c in &mut warm {
        assert_eq!(c.response().status, 200);
    }
    drop(warm);
    f.all_closed();
    let (fds, (runtime, others), before) = (open_fds(), threads(), f.stats());
    let workers_before = f.worker_fds();

    let t0 = Instant::now();
    let clients: Vec<_> = (0..20)
        .map(|t| {
            thread::spawn(move || {
                let mut c = Conn::open(addr);
                for i in 0..100 {
                    match i % 10 {
                        7 => {
                            c.send(get(&format!("/status/404?t={t}")));
                            assert_eq!(c.response().status, 404);
                        }
                        8 => {
                            let mut o = Conn::open(addr);
                            o.send(post("/too-large", &[0; 2000]));
                            assert_eq!(o.response().status, 413);
                        }
                        9 => {
                            let mut o = Conn::open(addr);
                            o.send("NOT HTTP AT ALL\r\n\r\n");
                            assert_eq!(o.response().status, 400);
                        }
                        _ => {
                            let body = format!("client {t} request {i}");
                            c.send(post(&format!("/good/{t}/{i}"), body.as_bytes()));
                            let r = c.response();
                            assert_eq!(r.status, 200);
                            assert!(r.body.ends_with(body.as_bytes()));
                        }
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a client");
    }
    let took = t0.elapsed();
    f.all_closed();
    let s = f.stats();
    assert_eq!(s.requests - before.requests, 1800, "{s:?}");
    assert_eq!(s.ok - before.ok, 1400, "{s:?}");
    assert_eq!(s.client_errors - before.client_errors, 400, "{s:?}");
    assert_eq!(s.too_large - before.too_large, 200, "{s:?}");
    assert_eq!(s.connections - before.connections, 420, "{s:?}");
    wait_until(&format!("descriptors back to {fds} (+4)"), DEADLINE, || {
        open_fds() <= fds + 4
    });
    wait_until(
        &format!("threads other than the runtime's back to {others} (+2)"),
        DEADLINE,
        || threads().1 <= others + 2,
    );
    // The workers (which hold the connections when they serve HTTP
    // themselves) are back to what they held, and are the same ones.
    wait_until("the workers' descriptors back (+2)", DEADLINE, || {
        let now = f.worker_fds();
        now.len() == workers_before.len()
            && now
                .iter()
                .zip(&workers_before)
                .all(|((p, n), (q, m))| p == q && *n <= m + 2)
    });
    // The runtime's blocking pool keeps idle threads 10 s (tokio's
    // default): its 2 threads and at most 2 per call at once (the one
    // waiting, the one finishing its task), not growing with requests.
    let now = threads();
    assert!(
        now.0 <= 2 + 2 * 20,
        "runtime threads {runtime} -> {}",
        now.0
    );
    eprintln!(
        "2000 requests in {took:?}; fds {fds} -> {}, runtime threads {runtime} -> {}, others {others} -> {}",
        open_fds(),
        now.0,
        now.1
    );
}

fn counters_match_the_requests(mode: HttpMode) {
    let f = Front::start(mode, 1, |_, h| h.max_body = 100);
    let mut c = f.conn();
    let mut bytes_out = 0;
    let mut expect = |c: &mut Conn, req: Vec<u8>, status: u16| {
        c.send(req);
        let r = c.response();
        assert_eq!(r.status, status, "{r:?}");
        bytes_out += r.body.len() as u64;
    };
    expect(&mut c, get("/a").into_bytes(), 200);
    expect(&mut c, post("/b", b"0123456789"), 200);
    expect(&mut c, get("/status/204").into_bytes(), 204);
    expect(&mut c, get("/status/302").into_bytes(), 302);
    expect(&mut c, get("/status/404").into_bytes(), 404);
    expect(&mut c, get("/status/418").into_bytes(), 418);
    expect(&mut c, get("/fail").into_bytes(), 500);
    expect(&mut c, get("/garbage").into_bytes(), 502);
    let mut big = f.conn();
    expect(&mut big, post("/big", &[1; 500]), 413);
    drop((c, big));
    // Answered by hyper itself: counted as a connection, not a request.
    let mut bad = f.conn();
    bad.send("BAD\r\n\r\n");
    assert_eq!(bad.response().status, 400);
    drop(bad);
    f.all_closed();
    let s = f.stats();
    assert_eq!(
        s,
        HttpStats {
            // Sampled CPU time: checked elsewhere; durations below.
            front_cpu_ns: s.front_cpu_ns,
            front_samples: s.front_samples,
            durations: s.durations,
            codes: s.codes,
            connections_open: 0,
            connections: 3,
            connections_refused: 0,
            requests: 9,
            ok: 4,
            client_errors: 3,
            server_errors: 2,
            too_large: 1,
            bytes_in: 10,
            bytes_out,
        }
    );
    // By status: the common ones one by one, 418 in its class only.
    let by: Vec<(String, u64)> = s.by_status();
    let want: Vec<(String, u64)> = [
        ("200", 2),
        ("204", 1),
        ("302", 1),
        ("404", 1),
        ("413", 1),
        ("500", 1),
        ("502", 1),
        ("4xx", 1),
    ]
    .iter()
    .map(|(c, n)| (c.to_string(), *n))
    .collect();
    assert_eq!(by, want);
    // Every request answered was timed, each in a bucket (none took 2.5 s).
    let d = s.durations;
    assert_eq!(d.count, s.requests, "{d:?}");
    assert_eq!(d.buckets.iter().sum::<u64>(), s.requests, "{d:?}");
    assert!(d.sum_us > 0 && d.sum_us < s.requests * 2_500_000, "{d:?}");
}

fn the_access_log_has_a_line_per_request(mode: HttpMode) {
    let dir = Dir::new("access");
    let log = dir.path("access.log");
    let f = Front::start(mode, 2, |_, h| h.access_log = Some(log.clone()));
    let mut c = f.conn();
    let me = c.local();
    let mut lengths = Vec::new();
    for req in [
        get("/x").into_bytes(),
        get("/status/404").into_bytes(),
        post("/y?z=1", b"abc"),
    ] {
        c.send(req);
        lengths.push(c.response().body.len());
    }
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until("3 lines in the access log", DEADLINE, || {
        read().lines().count() >= 3
    });
    let text = read();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, (req, len)) in lines.iter().zip(
        [
            "\"GET /x HTTP/1.1\" 200",
            "\"GET /status/404 HTTP/1.1\" 404",
            "\"POST /y?z=1 HTTP/1.1\" 200",
        ]
        .iter()
        .zip(&lengths),
    ) {
        let start = format!("{me} {req} {len} ");
        assert!(line.starts_with(&start), "{line:?} starts with {start:?}");
        assert!(line.ends_with("us"), "{line:?}");
    }
}

// ---------- workers that serve HTTP themselves ----------

/// Clients that keep requesting `/pid` on keep-alive connections until
/// `stop`, opening a new connection when a response says `Connection:
/// close`; each returns its failures (a status other than 200, a
/// connection closed or reset with a request unanswered) and the pids
/// that answered.
fn load(
    addr: SocketAddr,
    clients: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<(Vec<String>, Vec<u32>)>> {
    (0..clients)
        .map(|_| {
            let stop = Arc::clone(stop);
            thread::spawn(move || {
                let (mut failures, mut pids) = (Vec::new(), Vec::new());
                let mut c = Conn::open(addr);
                while !stop.load(Ordering::Relaxed) {
                    c.send(get("/pid"));
                    match c.try_response() {
                        Ok(Some(r)) if r.status == 200 => {
                            let pid = r.text().parse().expect("a pid");
                            if !pids.contains(&pid) {
                                pids.push(pid);
                            }
                            if r.header("connection") == Some("close") {
                                c = Conn::open(addr);
                            }
                        }
                        other => {
                            failures.push(format!("{other:?}"));
                            c = Conn::open(addr);
                        }
                    }
                }
                (failures, pids)
            })
        })
        .collect()
}

#[test]
fn recycling_and_reloads_under_load_lose_no_request() {
    let f = Front::start(HttpMode::Workers, 2, |o, _| o.max_jobs = 300);
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(f.addr, 4, &stop);
    wait_until("workers recycled by --max-jobs", DEADLINE * 3, || {
        f.pool.status().restarts >= 4
    });
    f.pool.reload();
    // Done: the old workers gone (they serve until both new ones do), and
    // each new one has answered requests.
    wait_until("the reload done", DEADLINE * 3, || {
        let s = f.pool.status();
        s.workers.iter().all(|w| w.generation == 1)
            && s.workers
                .iter()
                .filter(|w| w.serves() && w.calls > 0)
                .count()
                == 2
    });
    stop.store(true, Ordering::Relaxed);
    let mut pids = Vec::new();
    for c in clients {
        let (failures, seen) = c.join().expect("a client");
        assert!(failures.is_empty(), "failed requests: {failures:?}");
        pids.extend(seen);
    }
    pids.sort_unstable();
    pids.dedup();
    assert!(
        pids.len() >= 6,
        "answered by {} workers: {pids:?}",
        pids.len()
    );
    assert!(f.lines.any("recycled after"), "recycled by --max-jobs");
    assert!(f.lines.any("reload: starting generation 1"));
    let s = f.stats();
    assert_eq!(s.server_errors + s.client_errors, 0, "{s:?}");
}

#[test]
fn a_killed_worker_costs_only_its_own_connections() {
    use shmlink_sys::process::{kill, Sig};
    let f = Front::start(HttpMode::Workers, 2, |_, _| {});
    // Connections are packed on one worker: each worker is given some by
    // freezing the other while they open.
    let workers: Vec<u32> = f.pool.status().workers.iter().map(|w| w.pid).collect();
    let mut held: Vec<(Conn, u32)> = Vec::new();
    for (i, &w) in workers.iter().enumerate() {
        let other = workers[1 - i];
        kill(other, Sig::Stop).expect("SIGSTOP");
        for _ in 0..3 {
            let mut c = f.conn();
            let pid = f.pid(&mut c);
            held.push((c, pid));
        }
        kill(other, Sig::Cont).expect("SIGCONT");
        assert!(
            held.iter().rev().take(3).all(|(_, p)| *p == w),
            "{workers:?}"
        );
    }
    let victim = held[0].1;
    shmlink_sys::process::kill(victim, shmlink_sys::process::Sig::Kill).expect("kill -9");
    for (c, pid) in &mut held {
        c.send(get("/pid"));
        match c.try_response() {
            Ok(Some(r)) => {
                assert_ne!(*pid, victim, "a killed worker answered");
                assert_eq!(r.text(), pid.to_string(), "the same worker goes on");
            }
            // The killed worker's connections: closed or reset.
            _ => assert_eq!(*pid, victim, "a connection of the other worker lost"),
        }
    }
    f.all_running(2);
    // New connections are served, by the survivor or the replacement.
    for _ in 0..10 {
        let mut c = f.conn();
        assert_ne!(f.pid(&mut c), victim);
    }
    wait_until("the killed worker replaced", DEADLINE, || {
        f.pool.status().restarts >= 1 && f.lines.any(&format!("worker {victim} exited"))
    });
    f.all_running(2);
}

#[test]
fn a_saturated_worker_moves_connections_to_one_with_room() {
    // wrk's way: 16 keep-alive connections opened at once, then used for
    // every request, here to CPU-bound requests (1 ms of work each). All
    // land on one worker (the other is frozen while they open). A worker
    // saturated while the other has room and the machine a CPU to spare
    // asks some of its connections to move (`Connection: close` on their
    // next response); the clients reconnect, and the other worker takes
    // them. No request fails on the way.
    use shmlink_sys::process::{kill, Sig};
    let f = Front::start_alone(HttpMode::Workers, 2, |_, _| {});
    let workers: Vec<u32> = f.pool.status().workers.iter().map(|w| w.pid).collect();
    kill(workers[1], Sig::Stop).expect("SIGSTOP");
    let mut opened: Vec<Conn> = (0..16).map(|_| f.conn()).collect();
    let first: Vec<u32> = opened.iter_mut().map(|c| f.pid(c)).collect();
    kill(workers[1], Sig::Cont).expect("SIGCONT");
    assert!(
        first.iter().all(|&p| p == workers[0]),
        "{first:?} {workers:?}"
    );
    let opened = std::sync::Mutex::new(opened);
    let stop = Arc::new(AtomicBool::new(false));
    let holders: Arc<Vec<AtomicU32>> = Arc::new((0..16).map(|_| AtomicU32::new(0)).collect());
    let clients: Vec<_> = (0..16)
        .map(|i| {
            let (stop, holders, addr) = (Arc::clone(&stop), Arc::clone(&holders), f.addr);
            let mut c = opened
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop()
                .expect("a connection");
            thread::spawn(move || {
                let (mut failures, mut moved) = (Vec::new(), 0usize);
                while !stop.load(Ordering::Relaxed) {
                    c.send(get("/burn/1000"));
                    match c.try_response() {
                        Ok(Some(r)) if r.status == 200 => {
                            holders[i].store(r.text().parse().expect("a pid"), Ordering::Relaxed);
                            if r.header("connection") == Some("close") {
                                moved += 1;
                                c = Conn::open(addr);
                            }
                        }
                        other => {
                            failures.push(format!("{other:?}"));
                            c = Conn::open(addr);
                        }
                    }
                }
                (failures, moved)
            })
        })
        .collect();
    let held = || -> Vec<usize> {
        workers
            .iter()
            .map(|&p| {
                holders
                    .iter()
                    .filter(|h| h.load(Ordering::Relaxed) == p)
                    .count()
            })
            .collect()
    };
    wait_until(
        "each worker serving at least 4 of the 16 connections",
        DEADLINE,
        || held().iter().all(|&n| n >= 4),
    );
    stop.store(true, Ordering::Relaxed);
    let (mut failures, mut moved) = (Vec::new(), 0);
    for c in clients {
        let (f, m) = c.join().expect("a client thread");
        failures.extend(f);
        moved += m;
    }
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    assert!(moved >= 4, "{moved} connections moved");
    eprintln!(
        "connections by worker at the end: {:?}; {moved} moved",
        held()
    );
}

#[test]
fn listen_cannot_be_combined_with_workers_serving_http() {
    let mut o = PoolOptions::new(
        vec!["unix:/tmp/never.sock".into()],
        vec![WORKER.to_string()],
    );
    o.http = Some(FrontOptions::new(vec!["127.0.0.1:0".into()]));
    let e = Pool::start(o.clone()).expect_err("--listen with --http-mode workers");
    assert!(
        e.to_string()
            .contains("use --http-mode front to serve both"),
        "{e}"
    );
    o.http_mode = HttpMode::Front;
    o.listen = Vec::new();
    Pool::start(o).expect("the front mode alone").stop();
}
