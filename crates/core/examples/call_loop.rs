//! Sequential calls in a tight loop against a running server, for
//! measuring the call path itself (`bench/ab.sh`, `bench/callgrind.sh`):
//! no histogram, no checks beyond the response length, response buffers
//! recycled as a demanding caller would.
//!
//! ```text
//! cargo run --release -p shmlink --example call_loop -- ADDRESS [CALLS] [SIZE] [WAIT]
//! ```
//! Prints the mean round trip over all calls, in nanoseconds.

use std::error::Error;
use std::time::Instant;

use shmlink::{Client, ClientOptions};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let address = args
        .next()
        .ok_or("usage: call_loop ADDRESS [CALLS] [SIZE] [WAIT]")?;
    let calls: u64 = args.next().map_or(Ok(300_000), |s| s.parse())?;
    let size: usize = args.next().map_or(Ok(64), |s| s.parse())?;
    let wait = args.next().unwrap_or_else(|| "busy".into()).parse()?;
    let mut client = Client::connect(
        &address,
        ClientOptions {
            wait,
            ..ClientOptions::default()
        },
    )?;
    let request = vec![7u8; size];
    let start = Instant::now();
    for _ in 0..calls {
        let response = client.call(&request)?;
        if response.len() > size {
            return Err(format!("response of {} bytes to {size}", response.len()).into());
        }
        client.recycle(response);
    }
    let mean = start.elapsed().as_nanos() as f64 / calls.max(1) as f64;
    println!("mean {mean:.1} ns over {calls} calls of {size} B");
    Ok(())
}
