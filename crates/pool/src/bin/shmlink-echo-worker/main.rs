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

use shmlink::{ClientOptions, RemoteError, Worker};
use shmlink_http::wire::Request;

fn main() {
    match std::env::var("SHMLINK_TEST_WORKER_START").as_deref() {
        Ok("crash") => std::process::exit(3),
        Ok("hang") => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        _ => {}
    }
    // How it waits for calls comes from SHMLINK_WORKER_WAIT, set by the pool.
    let mut worker = match Worker::from_env(ClientOptions::default()) {
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
        } else if let Some(mib) = text
            .strip_prefix("grow:")
            .and_then(|m| m.parse::<usize>().ok())
        {
            kept.push(vec![1u8; mib << 20]);
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
