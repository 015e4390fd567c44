//! `shmlink call`: one call, response bytes raw to stdout.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shmlink::{Client, ClientOptions, WaitStrategy};

use crate::parse;

/// Options of `shmlink call`.
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// Server address: shm:PATH, unix:PATH or tcp:HOST:PORT.
    #[arg(value_name = "ADDR")]
    address: String,
    /// Request bytes; all of stdin when omitted.
    #[arg(value_name = "DATA")]
    data: Option<OsString>,
    /// Seconds to wait for the connection and for the response.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "5")]
    timeout: Duration,
    /// How to wait for the response on shm: sleep, spin, spin:MICROS or busy.
    #[arg(long, value_name = "STRATEGY", default_value_t = WaitStrategy::default())]
    wait: WaitStrategy,
}

/// Makes the call.
pub(crate) fn run(args: &CallArgs) -> anyhow::Result<()> {
    let request = match &args.data {
        Some(d) => d.as_bytes().to_vec(),
        None => {
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut buf)
                .context("cannot read the request from stdin")?;
            buf
        }
    };
    let options = ClientOptions {
        timeout: args.timeout,
        wait: args.wait,
        ..ClientOptions::default()
    };
    let mut client = Client::connect(&args.address, options)?;
    let response = client.call(&request)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&response)
        .and_then(|()| out.flush())
        .context("cannot write the response to stdout")?;
    Ok(())
}
