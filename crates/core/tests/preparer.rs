//! The segment preparer thread exists only for servers with an `shm:`
//! address. A test binary of its own: other tests' servers would add threads.

mod support;

use std::time::{Duration, Instant};

use shmlink::{Server, ServerOptions};
use support::TempDir;

/// Threads of this process named `shmlink-prepare`.
fn preparer_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "shmlink-prepare")
        .count()
}

/// Waits until `want` preparer threads run, or the deadline passes.
fn wait_for_threads(want: usize, limit: Duration) -> usize {
    let end = Instant::now() + limit;
    loop {
        let n = preparer_threads();
        if n == want || Instant::now() >= end {
            return n;
        }
        std::thread::yield_now();
    }
}

fn echo(req: &[u8], resp: &mut Vec<u8>) -> Result<(), shmlink::RemoteError> {
    resp.extend_from_slice(req);
    Ok(())
}

#[test]
fn only_servers_with_an_shm_address_prepare_segments() {
    let dir = TempDir::new("preparer");
    let unix = format!("unix:{}", dir.join("u.sock").display());
    let stream_only = Server::bind(
        &[unix.as_str(), "tcp:127.0.0.1:0"],
        ServerOptions::default(),
    )
    .and_then(|s| s.spawn(echo))
    .expect("unix + tcp server");
    // Its sessions still work, of course.
    let mut c = shmlink::Client::connect(&unix, Default::default()).expect("connect");
    assert_eq!(c.call(b"ping").expect("call"), b"ping");
    drop(c);
    assert_eq!(
        preparer_threads(),
        0,
        "a unix/tcp-only server runs no preparer"
    );
    stream_only.stop().expect("stop");

    let shm = format!("shm:{}", dir.join("s.sock").display());
    let with_shm = Server::bind(&[shm.as_str()], ServerOptions::default())
        .and_then(|s| s.spawn(echo))
        .expect("shm server");
    assert_eq!(
        wait_for_threads(1, Duration::from_secs(10)),
        1,
        "an shm server keeps segments ready"
    );
    let mut c = shmlink::Client::connect(&shm, Default::default()).expect("connect");
    assert_eq!(c.call(b"pong").expect("call"), b"pong");
    drop(c);
    with_shm.stop().expect("stop");
    assert_eq!(
        wait_for_threads(0, Duration::from_secs(10)),
        0,
        "the preparer ends with its server"
    );
}
