//! iceoryx2's publish/subscribe measured as `shmlink bench --pubsub`
//! measures shmlink's: one-way latency at 64 B to one subscriber process
//! that polls, the publisher stamping each sample with `CLOCK_MONOTONIC`
//! and publishing one every `--gap-ns`.
//!
//!   iceoryx2-pubsub latency --count N --size 64 --gap-ns 5000
//!
//! prints `{"version", "received", "p50_ns", "p99_ns"}`. The subscriber is
//! this program again (`sub SERVICE N`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::prelude::*;

type Payload = [u8; 64];

fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec the call only writes.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    set_log_level(LogLevel::Error);
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("latency") => latency(&args),
        Some("sub") => sub(&args[2], args[3].parse()?),
        _ => Err("usage: iceoryx2-pubsub latency --count N --size 64 --gap-ns NS".into()),
    }
}

fn latency(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let count = arg(args, "--count", 10_000);
    let gap = Duration::from_nanos(arg(args, "--gap-ns", 5_000));
    if arg(args, "--size", 64) != 64 {
        return Err("this baseline measures 64-byte samples only".into());
    }
    let name = format!("shmlink-bench/pubsub/{}", std::process::id());
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let service = node
        .service_builder(&name.as_str().try_into()?)
        .publish_subscribe::<Payload>()
        .subscriber_max_buffer_size(256)
        .open_or_create()?;
    let publisher = service.publisher_builder().create()?;
    let child = Command::new(std::env::current_exe()?)
        .args(["sub", &name, &count.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while service.dynamic_config().number_of_subscribers() < 1 {
        if Instant::now() > deadline {
            return Err("the subscriber did not come within 20 s".into());
        }
        std::thread::yield_now();
    }
    // Let the publisher see the subscriber's connection.
    publisher.update_connections()?;
    for _ in 0..count {
        let mut p = [0u8; 64];
        p[..8].copy_from_slice(&monotonic_ns().to_le_bytes());
        let sample = publisher.loan_uninit()?;
        sample.write_payload(p).send()?;
        let until = Instant::now() + gap;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    // The subscriber stops when every sample came or the publisher is gone.
    drop(publisher);
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!("the subscriber failed: {}", out.status).into());
    }
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

fn sub(name: &str, count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let service = node
        .service_builder(&name.try_into()?)
        .publish_subscribe::<Payload>()
        .subscriber_max_buffer_size(256)
        .open_or_create()?;
    let subscriber = service.subscriber_builder().create()?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut received = 0u64;
    let mut idle = 0u32;
    while received < count {
        match subscriber.receive()? {
            Some(sample) => {
                let now = monotonic_ns();
                let mut stamp = [0u8; 8];
                stamp.copy_from_slice(&sample.payload()[..8]);
                hist.saturating_record(now.saturating_sub(u64::from_le_bytes(stamp)).max(1));
                received += 1;
            }
            None => {
                idle += 1;
                // The publisher gone: what it sent has been read.
                if idle % 4096 == 0 && service.dynamic_config().number_of_publishers() == 0 {
                    break;
                }
                std::hint::spin_loop();
            }
        }
    }
    println!(
        "{}",
        serde_json::json!({"version": "0.10.0", "received": received,
                           "p50_ns": hist.value_at_quantile(0.5), "p99_ns": hist.value_at_quantile(0.99)})
    );
    Ok(())
}
