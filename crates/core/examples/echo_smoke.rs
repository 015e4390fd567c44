//! Smallest end-to-end use: a server on all three transports and a client
//! calling each. `cargo run -p shmlink --example echo_smoke`
use std::time::Instant;

fn main() -> Result<(), shmlink::Error> {
    let dir = std::env::temp_dir().join(format!("shmlink-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| shmlink::Error::Io {
        context: "temp dir".into(),
        source: e,
    })?;
    let shm = format!("shm:{}/a.sock", dir.display());
    let unix = format!("unix:{}/b.sock", dir.display());
    let server = shmlink::Server::bind(
        &[shm.as_str(), unix.as_str(), "tcp:127.0.0.1:0"],
        Default::default(),
    )?
    .spawn(|req: &[u8], resp: &mut Vec<u8>| {
        resp.extend_from_slice(&req[..req.len().div_ceil(8)]);
        Ok(())
    })?;
    let addrs: Vec<String> = server.addresses().iter().map(|a| a.to_string()).collect();
    for a in &addrs {
        let mut opts = shmlink::ClientOptions::default();
        if let Ok(r) = std::env::var("RING") {
            opts.ring_size = r.parse().unwrap_or(opts.ring_size);
        }
        if let Ok(w) = std::env::var("WAIT") {
            opts.wait = w.parse()?;
        }
        let mut c = shmlink::Client::connect(a, opts)?;
        for size in [64usize, 2048, 65536, 1 << 20] {
            let req = vec![7u8; size];
            let n = 2000.min(200_000_000 / size.max(1));
            let t = Instant::now();
            for _ in 0..n {
                let r = c.call(&req)?;
                assert_eq!(r.len(), size.div_ceil(8));
            }
            println!(
                "{a:32} {size:8} B: {:8.2} us/call",
                t.elapsed().as_secs_f64() * 1e6 / n as f64
            );
        }
    }
    for a in &addrs {
        let n = 2000;
        let t = Instant::now();
        let (mut tc, mut tcall, mut tdrop) = (0f64, 0f64, 0f64);
        for _ in 0..n {
            let t0 = Instant::now();
            let mut c = shmlink::Client::connect(a, Default::default())?;
            let t1 = Instant::now();
            c.call(b"ping")?;
            let t2 = Instant::now();
            drop(c);
            tc += (t1 - t0).as_secs_f64();
            tcall += (t2 - t1).as_secs_f64();
            tdrop += t2.elapsed().as_secs_f64();
        }
        println!(
            "  connect {:.1} us, first call {:.1} us, drop {:.1} us",
            tc * 1e6 / n as f64,
            tcall * 1e6 / n as f64,
            tdrop * 1e6 / n as f64
        );
        println!(
            "{a:32} sessions/s: {:10.0}",
            n as f64 / t.elapsed().as_secs_f64()
        );
    }
    server.stop()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
