//! The async client against the blocking one, at 64 bytes, one server:
//!
//!   cargo run --release -p shmlink --features tokio --example async_bench -- ADDRESS [CALLS]
//!
//! Prints one JSON line: the p50 of one call at a time through
//! `shmlink::tokio::AsyncClient` beside the blocking call with the sleep
//! wait (each with its CPU per call), pipelined async calls from one task
//! (256 in flight), and the CPU 1,000 idle async sessions take in a second.
//! The server must echo (`shmlink echo --reply-ratio 1`).

use std::time::{Duration, Instant};

use shmlink::tokio::AsyncClient;
use shmlink::{Client, ClientOptions, WaitStrategy};

fn cpu_now() -> Duration {
    // This thread's time on a CPU, in ns (/proc/thread-self/schedstat's
    // first field): the blocking client and the current-thread runtime
    // both run here.
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

fn p50(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() -> shmlink::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(address) = args.get(1) else {
        eprintln!("usage: async_bench ADDRESS [CALLS]");
        std::process::exit(2);
    };
    let calls: usize = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(20_000);
    // 1,000 sessions take a few thousand descriptors: the soft limit up to
    // the hard one (Debian's soft default is 1,024).
    let (_, hard) = shmlink_sys::process::descriptor_limit();
    let _ = shmlink_sys::process::set_descriptor_limit(hard);
    let req = [7u8; 64];

    // Blocking, sleep wait.
    let mut blocking = Client::connect(
        address,
        ClientOptions {
            wait: WaitStrategy::Sleep,
            ..Default::default()
        },
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| shmlink::Error::Io {
            context: "tokio runtime".into(),
            source: e,
        })?;
    let address = address.clone();
    let (blocking_p50, blocking_cpu, async_p50, async_cpu, per_s, pipe_cpu, idle_cpu_pct) = rt
        .block_on(async move {
            let c = AsyncClient::connect(&address, Default::default()).await?;
            for _ in 0..calls / 20 {
                blocking.call(&req)?;
                c.call(&req).await?;
            }
            // The two ways alternate in rounds of 500 calls (this VM moves its
            // vCPUs every few seconds: ways measured apart do not compare).
            let (mut lat_b, mut lat_a) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
            let (mut cpu_b, mut cpu_a) = (Duration::ZERO, Duration::ZERO);
            while lat_b.len() < calls {
                let n = (calls - lat_b.len()).min(500);
                let c0 = cpu_now();
                for _ in 0..n {
                    let t = Instant::now();
                    let r = blocking.call(&req)?;
                    lat_b.push(t.elapsed().as_nanos() as u64);
                    blocking.recycle(r);
                }
                let c1 = cpu_now();
                for _ in 0..n {
                    let t = Instant::now();
                    c.call(&req).await?;
                    lat_a.push(t.elapsed().as_nanos() as u64);
                }
                cpu_b += c1 - c0;
                cpu_a += cpu_now() - c1;
            }
            let per_call = |d: Duration| d.as_nanos() as u64 / calls as u64;
            let (blocking_p50, blocking_cpu) = (p50(lat_b), per_call(cpu_b));
            let (async_p50, async_cpu) = (p50(lat_a), per_call(cpu_a));

            // Pipelined from one task: 256 in flight.
            let total = calls * 20;
            let (mut sent, mut got) = (0usize, 0usize);
            let t = Instant::now();
            let c0 = cpu_now();
            while got < total {
                while sent < total && sent - got < 256 {
                    c.send(&req)?;
                    sent += 1;
                }
                c.recv().await?;
                got += 1;
            }
            let per_s = total as f64 / t.elapsed().as_secs_f64();
            let pipe_cpu = (cpu_now() - c0).as_nanos() as u64 / total as u64;

            // 1,000 idle async sessions for a second.
            let mut idle = Vec::new();
            for _ in 0..1000 {
                idle.push(AsyncClient::connect(&address, Default::default()).await?);
            }
            let c0 = cpu_now();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let idle_pct = (cpu_now() - c0).as_secs_f64() * 100.0;
            drop(idle);
            Ok::<_, shmlink::Error>((
                blocking_p50,
                blocking_cpu,
                async_p50,
                async_cpu,
                per_s,
                pipe_cpu,
                idle_pct,
            ))
        })?;
    println!(
        "{{\"size\":64,\"calls\":{calls},\"blocking_sleep_p50_ns\":{blocking_p50},\"blocking_sleep_cpu_ns\":{blocking_cpu},\"async_p50_ns\":{async_p50},\"async_cpu_ns\":{async_cpu},\"pipelined_calls_per_s\":{per_s:.0},\"pipelined_cpu_ns\":{pipe_cpu},\"idle_1000_sessions_cpu_pct\":{idle_cpu_pct:.2}}}"
    );
    Ok(())
}
