//! Files the pool's HTTP server sends itself, against real worker processes
//! (the native echo worker) in both HTTP modes: static files under
//! `--http-root` (types, validators, 304, ranges, `HEAD`, pipelining behind
//! a file, a slow reader of a large file holding up no one), paths that try
//! to leave the root (404, the file never sent), paths that go to the
//! application (PHP scripts, hidden files, directories, no file), and
//! files a worker names in `X-Sendfile` / `X-Accel-Redirect` under
//! `--http-sendfile`; and the send timeout: a client that takes nothing of
//! a file or a large answer is closed, one that keeps taking slowly gets it
//! whole.

#[macro_use]
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use shmlink_http::FrontOptions;
use shmlink_pool::{HttpMode, Pool, PoolOptions};

use support::http_client::{get, Conn, Resp, DEADLINE};
use support::{wait_until, Dir, Lines};

const WORKER: &str = env!("CARGO_BIN_EXE_shmlink-echo-worker");

in_both_modes!(
    static_files_are_sent_with_their_type_and_validators,
    conditional_and_range_requests,
    paths_leaving_the_root_are_404_and_nothing_leaks,
    pipelined_requests_wait_behind_a_file,
    a_slow_reader_of_a_large_file_holds_up_no_one,
    workers_name_files_in_x_sendfile_and_x_accel_redirect,
    a_client_that_takes_nothing_is_closed_after_the_send_timeout,
    a_slow_steady_reader_gets_a_large_answer_whole,
);

/// A root with files, a private directory beside it, and a pool of echo
/// workers serving both.
struct Site {
    dir: Dir,
    pool: Pool,
    addr: SocketAddr,
    _lines: Lines,
}

/// The 100 KiB file's bytes.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

impl Site {
    fn start(mode: HttpMode, root_served: bool, sendfile: bool) -> Site {
        Site::start_with(mode, root_served, sendfile, |_| {})
    }

    /// [`Site::start`] with the HTTP options changed by `tweak`.
    fn start_with(
        mode: HttpMode,
        root_served: bool,
        sendfile: bool,
        tweak: impl FnOnce(&mut FrontOptions),
    ) -> Site {
        let dir = Dir::new("files");
        let root = dir.path("root");
        let private = dir.path("private");
        for d in [
            root.join("css"),
            root.join("sub dir"),
            root.join(".git"),
            private.clone(),
        ] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(root.join("css/site.css"), "body { color: red }\n").expect("write");
        std::fs::write(root.join("big.bin"), pattern(100 << 10)).expect("write");
        std::fs::write(root.join("huge.bin"), pattern(8 << 20)).expect("write");
        std::fs::write(root.join("sub dir/a b.txt"), "spaced").expect("write");
        std::fs::write(root.join("index.php"), "<?php source").expect("write");
        std::fs::write(root.join(".env"), "SECRET=1").expect("write");
        std::fs::write(root.join(".git/config"), "SECRET=2").expect("write");
        std::fs::write(private.join("secret.txt"), "SECRET=3").expect("write");
        std::os::unix::fs::symlink("../private/secret.txt", root.join("leak.txt"))
            .expect("symlink");
        std::os::unix::fs::symlink("css/site.css", root.join("alias.css")).expect("symlink");
        let mut o = PoolOptions::new(Vec::new(), vec![WORKER.to_string()]);
        o.workers = 2;
        o.http_mode = mode;
        let mut h = FrontOptions::new(vec!["127.0.0.1:0".into()]);
        h.root = root_served.then_some(root);
        if sendfile {
            h.sendfile = vec![private];
        }
        tweak(&mut h);
        o.http = Some(h);
        let lines = Lines::default();
        let pool = Pool::start_with_log(o, lines.log()).expect("the pool starts");
        let addr = pool.http_addresses()[0];
        wait_until("2 workers running", DEADLINE, || {
            pool.status()
                .workers
                .iter()
                .filter(|w| w.state == "idle" || w.state == "http")
                .count()
                == 2
        });
        Site {
            dir,
            pool,
            addr,
            _lines: lines,
        }
    }

    /// HTTP connections open now.
    fn open(&self) -> u64 {
        self.pool.status().http.map_or(0, |h| h.connections_open)
    }

    fn once(&self, request: impl AsRef<[u8]>) -> Resp {
        let mut c = Conn::open(self.addr);
        c.send(request);
        c.response()
    }

    fn get_with(&self, target: &str, headers: &[&str]) -> Resp {
        let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
        self.once(format!("GET {target} HTTP/1.1\r\nHost: t\r\n{extra}\r\n"))
    }
}

/// Whether the echo worker answered (the request went to the application).
fn from_app(r: &Resp, line: &str) -> bool {
    r.status == 200 && r.text().starts_with(line)
}

fn static_files_are_sent_with_their_type_and_validators(mode: HttpMode) {
    let s = Site::start(mode, true, false);
    let r = s.once(get("/css/site.css?v=3"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "body { color: red }\n");
    assert_eq!(r.header("content-type"), Some("text/css"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert!(
        r.header("etag").is_some_and(|e| e.starts_with('"')),
        "{r:?}"
    );
    let modified = std::fs::metadata(s.dir.path("root/css/site.css"))
        .and_then(|m| m.modified())
        .expect("mtime");
    let lm = r.header("last-modified").expect("last-modified");
    let lm = httpdate::parse_http_date(lm).expect("a date");
    assert!(modified
        .duration_since(lm)
        .is_ok_and(|d| d < Duration::from_secs(1)));

    let r = s.once(get("/big.bin"));
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.body, pattern(100 << 10));
    assert_eq!(s.once(get("/sub%20dir/a%20b.txt")).text(), "spaced");
    assert_eq!(
        s.once(get("/alias.css")).text(),
        "body { color: red }\n",
        "a link inside the root"
    );

    let mut c = Conn::open(s.addr);
    c.send("HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.head_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("102400"));
    // The connection goes on with nothing of the body in between.
    c.send(get("/css/site.css"));
    assert_eq!(c.response().text(), "body { color: red }\n");

    // What is not a file of the root goes to the application.
    for target in [
        "/index.php",
        "/.env",
        "/.git/config",
        "/",
        "/css/",
        "/css",
        "/nothing.txt",
    ] {
        let r = s.once(get(target));
        assert!(
            from_app(&r, &format!("GET {target} HTTP/1.1")),
            "{target}: {r:?}"
        );
    }
    let r = s.once("POST /css/site.css HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx");
    assert!(
        from_app(&r, "POST /css/site.css"),
        "a POST is the application's: {r:?}"
    );
    let st = s.pool.status().http.expect("http");
    assert!(st.requests >= 14, "files are counted as requests: {st:?}");
}

fn conditional_and_range_requests(mode: HttpMode) {
    let s = Site::start(mode, true, false);
    let full = s.once(get("/big.bin"));
    let etag = full.header("etag").expect("etag").to_string();
    let lm = full
        .header("last-modified")
        .expect("last-modified")
        .to_string();

    for cond in [
        format!("If-None-Match: {etag}"),
        format!("If-None-Match: \"x\", W/{etag}"),
        format!("If-Modified-Since: {lm}"),
    ] {
        let r = s.get_with("/big.bin", &[&cond]);
        assert_eq!(r.status, 304, "{cond}: {r:?}");
        assert!(
            r.body.is_empty() && r.header("content-length").is_none(),
            "{r:?}"
        );
        assert_eq!(r.header("etag"), Some(etag.as_str()));
    }
    let r = s.get_with("/big.bin", &["If-None-Match: \"other\""]);
    assert_eq!((r.status, r.body.len()), (200, 100 << 10));

    let data = pattern(100 << 10);
    let r = s.get_with("/big.bin", &["Range: bytes=1000-1999"]);
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes 1000-1999/102400"));
    assert_eq!(r.body, &data[1000..2000]);
    let r = s.get_with("/big.bin", &["Range: bytes=-100"]);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (206, &data[data.len() - 100..])
    );
    let r = s.get_with("/big.bin", &["Range: bytes=102400-"]);
    assert_eq!(r.status, 416, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes */102400"));
    assert!(r.body.is_empty());
    // A stale If-Range: the whole file.
    let r = s.get_with("/big.bin", &["Range: bytes=0-9", "If-Range: \"stale\""]);
    assert_eq!((r.status, r.body.len()), (200, 100 << 10));
    let r = s.get_with(
        "/big.bin",
        &["Range: bytes=0-9", &format!("If-Range: {etag}")],
    );
    assert_eq!((r.status, r.body.as_slice()), (206, &data[..10]));
    // Several ranges: the whole file, which HTTP allows.
    let r = s.get_with("/big.bin", &["Range: bytes=0-1,5-6"]);
    assert_eq!((r.status, r.body.len()), (200, 100 << 10));
}

fn paths_leaving_the_root_are_404_and_nothing_leaks(mode: HttpMode) {
    let s = Site::start(mode, true, false);
    for target in [
        "/../private/secret.txt",
        "/css/../../private/secret.txt",
        "/%2e%2e/private/secret.txt",
        "/css/%2E%2E%2f%2e%2e%2fprivate%2fsecret.txt",
        "/css%2f..%2f..%2fprivate/secret.txt",
        "/a%00b",
        "/leak.txt",
    ] {
        let r = s.once(get(target));
        assert_eq!(r.status, 404, "{target}: {r:?}");
        assert!(!r.text().contains("SECRET"), "{target}: {r:?}");
    }
    // A link inside the root is followed.
    assert_eq!(s.once(get("/alias.css")).status, 200);
}

fn pipelined_requests_wait_behind_a_file(mode: HttpMode) {
    let s = Site::start(mode, true, false);
    let mut c = Conn::open(s.addr);
    let mut burst = String::new();
    for t in [
        "/big.bin",
        "/echo-1",
        "/css/site.css",
        "/big.bin",
        "/echo-2",
    ] {
        burst.push_str(&get(t));
    }
    c.send(burst);
    let data = pattern(100 << 10);
    assert_eq!(c.response().body, data);
    assert!(from_app(&c.response(), "GET /echo-1 "));
    assert_eq!(c.response().text(), "body { color: red }\n");
    assert_eq!(c.response().body, data);
    assert!(from_app(&c.response(), "GET /echo-2 "));
}

fn a_slow_reader_of_a_large_file_holds_up_no_one(mode: HttpMode) {
    let s = Site::start(mode, true, false);
    let mut slow = Conn::open(s.addr);
    slow.send(get("/huge.bin"));
    // It reads nothing for now: its socket fills, the file waits.
    for i in 0..20 {
        let r = s.once(get(&format!("/css/site.css?{i}")));
        assert_eq!(r.status, 200);
        assert!(from_app(
            &s.once(get(&format!("/other-{i}"))),
            "GET /other-"
        ));
    }
    let r = slow.response();
    assert_eq!(r.body.len(), 8 << 20);
    assert!(r.body == pattern(8 << 20), "the large file arrives whole");
    slow.send(get("/css/site.css"));
    assert_eq!(
        slow.response().status,
        200,
        "the connection goes on after it"
    );
}

fn workers_name_files_in_x_sendfile_and_x_accel_redirect(mode: HttpMode) {
    // No root: the targets below reach the worker as they are.
    let s = Site::start(mode, false, true);
    let private = s.dir.path("private");
    let secret = private.join("secret.txt");
    let r = s.once(get(&format!("/sendfile{}", secret.display())));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "SECRET=3");
    assert_eq!(r.header("x-app"), Some("1"), "the worker's headers stay");
    assert_eq!(
        r.header("x-sendfile"),
        None,
        "the path is not shown to the client"
    );
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let r = s.once(get("/accel/secret.txt"));
    assert_eq!((r.status, r.text().as_str()), (200, "SECRET=3"));
    assert_eq!(r.header("x-accel-redirect"), None);
    // A range of a named file.
    let r = s.get_with(
        &format!("/sendfile{}", secret.display()),
        &["Range: bytes=0-5"],
    );
    assert_eq!((r.status, r.text().as_str()), (206, "SECRET"));

    // Outside the allowed directories, or missing: an error, no file.
    let outside = s.dir.path("root/.env");
    let r = s.once(get(&format!("/sendfile{}", outside.display())));
    assert_eq!(r.status, 500, "{r:?}");
    let r = s.once(get(&format!("/sendfile{}/../root/.env", private.display())));
    assert_eq!(r.status, 500, "{r:?}");
    let r = s.once(get("/accel/../root/.env"));
    assert_eq!(r.status, 500, "{r:?}");
    let r = s.once(get(&format!(
        "/sendfile{}",
        private.join("missing").display()
    )));
    assert_eq!(r.status, 404, "{r:?}");
    assert!(!r.text().contains("SECRET"));

    // Without --http-sendfile the header is the worker's like any other.
    let plain = Site::start(mode, false, false);
    let r = plain.once(get(&format!("/sendfile{}", secret.display())));
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("x-sendfile"),
        Some(secret.to_str().expect("utf-8"))
    );
    assert!(r.body.is_empty());
}

#[test]
fn directories_that_are_not_there_are_refused_at_start() {
    for (root, sendfile) in [
        (Some("/nonexistent/root"), None),
        (None, Some("/nonexistent/send")),
    ] {
        let mut o = PoolOptions::new(Vec::new(), vec![WORKER.to_string()]);
        let mut h = FrontOptions::new(vec!["127.0.0.1:0".into()]);
        h.root = root.map(Into::into);
        h.sendfile = sendfile.into_iter().map(Into::into).collect();
        o.http = Some(h);
        let e = Pool::start(o).expect_err("refused").to_string();
        let want = root.map_or("--http-sendfile /nonexistent/send", |_| {
            "--http-root /nonexistent/root"
        });
        assert!(e.contains(want) && e.contains("not a directory"), "{e}");
    }
}

fn a_client_that_takes_nothing_is_closed_after_the_send_timeout(mode: HttpMode) {
    let s = Site::start_with(mode, true, false, |h| {
        h.send_timeout = Duration::from_secs(1);
    });
    // A file the server sends, and a large answer of the application's:
    // more than the sockets' buffers hold, so output stays pending.
    for (target, len) in [("/huge.bin", 8 << 20), ("/bytes/16384", 16 << 20)] {
        let mut stalled = Conn::open(s.addr);
        stalled.send(get(target));
        wait_until("the request in hand", DEADLINE, || s.open() == 1);
        wait_until(
            "the connection of a client that takes nothing closed",
            DEADLINE,
            || s.open() == 0,
        );
        // Read at last: the start of the answer, then the end of stream.
        stalled.wait_closed();
        assert!(
            stalled.buf.len() < len,
            "{target}: {} bytes came, the answer is cut",
            stalled.buf.len()
        );
        assert!(stalled.buf.starts_with(b"HTTP/1.1 200"), "{target}");
    }
}

fn a_slow_steady_reader_gets_a_large_answer_whole(mode: HttpMode) {
    // Both timeouts shorter than the whole transfer: a client that keeps
    // taking is neither an idle keep-alive connection nor a stalled one.
    let s = Site::start_with(mode, true, false, |h| {
        h.send_timeout = Duration::from_secs(1);
        h.header_timeout = Duration::from_secs(1);
    });
    for (target, len) in [("/huge.bin", 8 << 20), ("/bytes/16384", 16 << 20)] {
        let mut c = Conn::open(s.addr);
        c.send(get(target));
        let t0 = std::time::Instant::now();
        let mut chunk = vec![0u8; 32 << 10];
        // Pacing, not waiting: a client on a slow link, 32 KiB every 5 ms.
        while c.buf.len() < len {
            let n = std::io::Read::read(&mut c.s, &mut chunk).expect("read");
            assert!(n > 0, "{target}: closed after {} bytes", c.buf.len());
            c.buf.extend_from_slice(&chunk[..n]);
            std::thread::sleep(Duration::from_millis(5));
        }
        let r = c.response();
        assert_eq!(r.status, 200, "{target}");
        assert!(r.body == pattern(len), "{target}: the answer whole");
        assert!(
            t0.elapsed() > Duration::from_secs(1),
            "{target}: the transfer outlasted both timeouts ({:?})",
            t0.elapsed()
        );
        c.send(get("/css/site.css"));
        assert_eq!(c.response().status, 200, "{target}: the connection goes on");
    }
}
