//! A native worker for `shmlink pool`, to try a pool without PHP and to
//! test the pool: it echoes each request behind `echo:`, and obeys a few
//! requests that make it misbehave on purpose:
//!
//! - `pid`: answers its process id;
//! - `fail`: answers a remote error (code 42);
//! - `crash`: exits at once, without answering (as a crashed worker);
//! - `hang`: never answers;
//! - `sleep:MS`: answers after MS milliseconds;
//! - `grow:MIB`: keeps MIB more mebibytes of memory, then answers its pid;
//! - `env:NAME`: answers the value of its environment variable NAME;
//! - `meet:DIR:N`: leaves a file named by its pid in DIR, waits (up to
//!   10 s) until DIR holds N files, then answers its pid, or `alone` if
//!   the others never came (calls that must run at once);
//! - anything else: answers `echo:` and the request.
//!
//! A call from the HTTP front (an encoded HTTP request) is answered by
//! path instead: see `http.rs`.
//!
//!
//! `SHMLINK_TEST_WORKER_START=crash` makes it exit before connecting,
//! `=hang` makes it never connect (a worker that fails at start).
//!
//! ```text
//! shmlink pool --listen shm:/tmp/p.sock --workers 2 -- shmlink-echo-worker
//! ```

mod http;

use std::time::Duration;

use shmlink::{ClientOptions, RemoteError};
use shmlink_http::wire::Request;
use shmlink_worker::PoolWorker;

fn main() {
    match std::env::var("SHMLINK_TEST_WORKER_START").as_deref() {
        Ok("crash") => std::process::exit(3),
        Ok("hang") => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        _ => {}
    }
    // How it waits for calls comes from SHMLINK_WORKER_WAIT, set by the pool.
    let mut worker = match PoolWorker::from_env(ClientOptions::default()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("shmlink-echo-worker: {e}");
            std::process::exit(2);
        }
    };
    println!("echo worker {} ready", std::process::id());
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let ran = worker.run(|req: &[u8], resp: &mut Vec<u8>| {
        if Request::is_encoded(req) {
            return http::answer(req, resp, &mut kept);
        }
        let text = std::str::from_utf8(req).unwrap_or("");
        if text == "pid" {
            resp.extend_from_slice(std::process::id().to_string().as_bytes());
        } else if let Some(name) = text.strip_prefix("env:") {
            resp.extend_from_slice(std::env::var(name).unwrap_or_default().as_bytes());
        } else if let Some(rest) = text.strip_prefix("meet:") {
            resp.extend_from_slice(meet(rest).as_bytes());
        } else if text == "fail" {
            return Err(RemoteError::new(42, "asked to fail"));
        } else if text == "crash" {
            std::process::exit(1);
        } else if text == "hang" {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        } else if let Some(ms) = text.strip_prefix("sleep:").and_then(|m| m.parse().ok()) {
            std::thread::sleep(Duration::from_millis(ms));
            resp.extend_from_slice(b"slept");
        } else if let Some((mib, ms)) = text.strip_prefix("grow:").and_then(|m| {
            let (mib, ms) = m.split_once(':').unwrap_or((m, "0"));
            Some((mib.parse::<usize>().ok()?, ms.parse::<u64>().ok()?))
        }) {
            // `grow:MIB[:MS]`: keeps MIB more resident, then sleeps MS.
            kept.push(vec![1u8; mib << 20]);
            std::thread::sleep(Duration::from_millis(ms));
            resp.extend_from_slice(std::process::id().to_string().as_bytes());
        } else {
            resp.extend_from_slice(b"echo:");
            resp.extend_from_slice(req);
        }
        Ok(())
    });
    if let Err(e) = ran {
        eprintln!("shmlink-echo-worker: {e}");
        std::process::exit(1);
    }
}

/// `meet:DIR:N`: this worker's pid once DIR holds N files (this worker's
/// among them), or `alone` after 10 s.
fn meet(arg: &str) -> String {
    let Some((dir, n)) = arg.rsplit_once(':') else {
        return "bad meet".into();
    };
    let Ok(n) = n.parse::<usize>() else {
        return "bad meet".into();
    };
    let pid = std::process::id().to_string();
    if std::fs::write(std::path::Path::new(dir).join(&pid), b"").is_err() {
        return "bad meet".into();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let here = std::fs::read_dir(dir).map_or(0, |d| d.count());
        if here >= n {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    "alone".into()
}
