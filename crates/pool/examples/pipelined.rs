//! What spreading a client's pipelined calls over the pool's workers buys:
//! calls of 1 ms of work each (`sleep:1`) through a pool of two
//! `shmlink-echo-worker`s, one at a time and with 32 in flight.
//!
//! ```text
//! cargo build --release -p shmlink-pool
//! cargo run --release -p shmlink-pool --example pipelined -- target/release/shmlink-echo-worker
//! ```

use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions, Log};
use shmlink_pool::{Pool, PoolOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let worker = std::env::args()
        .nth(1)
        .ok_or("usage: pipelined PATH-TO-shmlink-echo-worker")?;
    let dir = std::env::temp_dir().join(format!("shmlink-pipelined-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut opts = PoolOptions::new(
        vec![format!("shm:{}", dir.join("p.sock").display())],
        vec![worker],
    );
    opts.workers = 2;
    opts.control = Some(dir.join("p.ctl"));
    let pool = Pool::start_with_log(opts, Log::off())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool
        .status()
        .workers
        .iter()
        .filter(|w| w.state == "idle")
        .count()
        < 2
    {
        if Instant::now() > deadline {
            return Err("the workers did not start within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut client = Client::connect(&pool.addresses()[0], ClientOptions::default())?;
    println!("| calls in flight | calls/s (1 ms of work each, 2 workers) |\n|---:|---:|");
    for depth in [1, 32] {
        let calls = 1000;
        let started = Instant::now();
        let (mut sent, mut answered) = (0, 0);
        while answered < calls {
            while sent < calls && sent - answered < depth {
                client.send(b"sleep:1")?;
                sent += 1;
            }
            let reply = client.recv()?;
            if reply.result? != b"slept" {
                return Err("a wrong answer".into());
            }
            answered += 1;
        }
        let rate = calls as f64 / started.elapsed().as_secs_f64();
        println!("| {depth} | {rate:.0} |");
    }
    drop(client);
    pool.stop();
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
