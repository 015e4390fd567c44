//! `shmlink echo`: an echo server on one or more addresses, until SIGINT or
//! SIGTERM.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use shmlink::{Server, ServerOptions, WaitStrategy};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::parse::{self, Ratio};
use crate::reply::ReplyShape;

/// Options of `shmlink echo`.
#[derive(Debug, Args)]
#[command(after_help = "When listening, prints one line to stderr: \
    `shmlink echo: ready, listening on ADDR...` with the real TCP port when 0 was given. \
    With --reply-size, an empty request gets N zero bytes.")]
pub(crate) struct EchoArgs {
    /// Address to listen on (repeatable): shm:PATH, unix:PATH or tcp:HOST:PORT.
    #[arg(
        long = "listen",
        value_name = "ADDR",
        required_unless_present = "take_over"
    )]
    listen: Vec<String>,
    /// Listen on this Unix socket for a successor: a new `shmlink echo
    /// --take-over PATH` takes this server's listeners and sessions
    /// over, and this one exits (docs/protocol.md, "Hand-over").
    #[arg(long, value_name = "PATH")]
    handover: Option<PathBuf>,
    /// Take over the server listening for successors at PATH instead of
    /// binding --listen addresses: its listeners and live sessions go
    /// on here, their clients notice nothing.
    #[arg(long, value_name = "PATH", conflicts_with = "listen")]
    take_over: Option<PathBuf>,
    /// Reply with the first ⌈R × len⌉ bytes of each request (0 to 1).
    #[arg(long, value_name = "R", value_parser = parse::ratio, conflicts_with = "reply_size")]
    reply_ratio: Option<Ratio>,
    /// Reply with exactly N bytes: the request repeated or truncated (zeros
    /// for an empty request).
    #[arg(long, value_name = "N", value_parser = parse::size)]
    reply_size: Option<usize>,
    /// Reply with 64 bytes: the request's length and hashes of its first and
    /// last 4 KiB (what `shmlink bench --paths` measures with).
    #[arg(long, conflicts_with_all = ["reply_size", "reply_ratio"])]
    reply_digest: bool,
    /// How session threads wait for requests on shm: sleep, spin, spin:MICROS or busy.
    #[arg(long, value_name = "STRATEGY", default_value_t = WaitStrategy::default())]
    wait: WaitStrategy,
    /// Most sessions at once; more are refused.
    #[arg(long, value_name = "N", default_value_t = ServerOptions::default().max_sessions)]
    max_sessions: usize,
    /// Also allow this uid (repeatable; the server's own uid is always allowed).
    #[arg(long = "allow-uid", value_name = "UID")]
    allow_uid: Vec<u32>,
    /// Allow peers whose primary gid is this (repeatable).
    #[arg(long = "allow-gid", value_name = "GID")]
    allow_gid: Vec<u32>,
    /// Permission bits of the socket files, in octal [default: 0600, 0660 with --socket-group].
    #[arg(long, value_name = "MODE", value_parser = parse::octal_mode)]
    socket_mode: Option<u32>,
    /// Group owning the socket files.
    #[arg(long, value_name = "GID")]
    socket_group: Option<u32>,
    /// Write the bound addresses there, one per line, once listening (removed on exit).
    #[arg(long, value_name = "PATH")]
    ready_file: Option<PathBuf>,
    /// Pin the server's threads to this CPU.
    #[arg(long, value_name = "CPU")]
    pin_cpu: Option<usize>,
    /// Largest request accepted (KiB/MiB/GiB suffixes allowed).
    #[arg(long, value_name = "BYTES", value_parser = parse::size,
          default_value_t = ServerOptions::default().max_message_size)]
    max_message: usize,
    /// Most bytes of shm: session segments held at once (KiB/MiB/GiB
    /// suffixes allowed; a session with 64 KiB rings holds 132 KiB); past
    /// it, shm: sessions continue over their socket, or are refused when
    /// the client requires shared memory. Default: no limit.
    #[arg(long, value_name = "BYTES", value_parser = parse::size)]
    max_shm_bytes: Option<usize>,
}

/// Runs the echo server until SIGINT or SIGTERM.
pub(crate) fn run(args: &EchoArgs) -> anyhow::Result<()> {
    if let Some(cpu) = args.pin_cpu {
        // Threads started from here on (the server's) inherit the affinity.
        shmlink_sys::affinity::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin the echo server to CPU {cpu}"))?;
    }
    let shape = ReplyShape::from_options(args.reply_ratio, args.reply_size, args.reply_digest);
    let options = ServerOptions {
        allowed_uids: args.allow_uid.clone(),
        allowed_gids: args.allow_gid.clone(),
        socket_mode: args.socket_mode,
        socket_group: args.socket_group,
        max_sessions: args.max_sessions,
        wait: args.wait,
        max_message_size: args.max_message,
        max_shm_bytes: args
            .max_shm_bytes
            .map_or(ServerOptions::default().max_shm_bytes, |n| n as u64),
        handover: args.handover.clone(),
        ..ServerOptions::default()
    };
    // Signals are registered before binding, so that a signal arriving as
    // soon as "ready" is printed still stops the server cleanly.
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).context("cannot install the SIGINT/SIGTERM handlers")?;
    let server = match &args.take_over {
        Some(path) => Server::take_over(path, options)?,
        None => Server::bind(&args.listen, options)?,
    };
    let addresses: Vec<String> = server.addresses().iter().map(|a| a.to_string()).collect();
    let stop = server.stop_handle();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                stop.stop();
            }
        })
        .context("cannot start the signal thread")?;
    // Serving first: sessions taken over from a predecessor wait for no
    // file to be written.
    let running = server.spawn(move |req: &[u8], resp: &mut Vec<u8>| {
        shape.fill(req, resp);
        Ok(())
    })?;
    if let Some(path) = &args.ready_file {
        write_ready_file(path, &addresses)?;
    }
    // A closed stderr must not stop the server: the line is best effort.
    let _ = writeln!(
        std::io::stderr(),
        "shmlink echo: ready, listening on {}",
        addresses.join(" ")
    );
    let served = running.wait();
    if let Some(path) = &args.ready_file {
        let _ = std::fs::remove_file(path);
    }
    served?;
    Ok(())
}

/// Writes the addresses to a temporary file renamed into place, so that a
/// reader never sees a partial list. Not synced to disk: the file is a
/// rendezvous between processes of one host, which see it through the page
/// cache, and it is removed at exit. An `fsync` here made a server's start
/// wait for the disk to write out whatever else was dirty (on ext4, the
/// journal commit it forces flushes other files' data): 0.2-1.2 s behind a
/// copy of a build tree on the dev VM, past 20 s on a slower disk right
/// after a build (issue 49).
fn write_ready_file(path: &Path, addresses: &[String]) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        for a in addresses {
            writeln!(f, "{a}")?;
        }
        std::fs::rename(&tmp, path)
    };
    write().with_context(|| format!("cannot write the ready file {}", path.display()))
}
