//! `shmlink __chaos-client`: one client process of a chaos run. It connects,
//! makes a random number of calls (single, pipelined bursts, one-way) with
//! random sizes, checks every reply, reconnects, and so on until killed.
//! Single calls travel every way a call can: copied, written in place into
//! a loan, with a file descriptor, or with the response read where it lies
//! in the server's arena.
//! Its counters go to stdout as one JSON line every 100 ms (and at once when
//! a reply is wrong), so a SIGKILL loses at most the last 100 ms.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::ops::Deref;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};
use shmlink::{Client, ClientOptions, Error, Response, WaitStrategy};

use super::wire::{self, Verdict};

/// Options of `__chaos-client`.
#[derive(Debug, Args)]
pub(crate) struct ClientArgs {
    /// Server address.
    #[arg(long)]
    address: String,
    /// This client's number (goes into every request).
    #[arg(long)]
    id: u32,
    /// Seed of the random choices.
    #[arg(long)]
    seed: u64,
    /// Timeout of each call, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Largest payload, in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_size: usize,
}

/// What a client counted so far.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct Counters {
    /// Calls started (requests with a reply expected).
    pub(crate) made: u64,
    /// Calls that returned the right reply.
    pub(crate) completed: u64,
    /// Calls that failed with an error (by kind).
    pub(crate) failed: BTreeMap<String, u64>,
    /// Calls that took longer than their timeout plus a second.
    pub(crate) hung: u64,
    /// Replies that answered another call or came back damaged.
    pub(crate) wrong: u64,
    /// One-way messages sent.
    pub(crate) one_way: u64,
    /// Sessions opened, and connects that failed.
    pub(crate) sessions: u64,
    /// Connects that failed (server down or restarting).
    pub(crate) connect_failures: u64,
    /// The first wrong reply, described.
    pub(crate) first_wrong: Option<String>,
}

/// The short name of an error's kind.
pub(crate) fn kind(e: &Error) -> &'static str {
    match e {
        Error::Timeout { .. } => "timeout",
        Error::PeerGone { .. } => "peer gone",
        Error::Closed { .. } => "closed",
        Error::Connect { .. } => "connect",
        Error::Refused { .. } => "refused",
        Error::Protocol { .. } => "protocol",
        Error::Remote(_) => "remote",
        Error::MessageTooLarge { .. } => "too large",
        _ => "other",
    }
}

struct Run {
    args: ClientArgs,
    rng: fastrand::Rng,
    c: Counters,
    seq: u64,
    timeout: Duration,
    last_report: Instant,
}

/// Runs the client until it is killed (or stdout closes).
pub(crate) fn run_client(args: ClientArgs) -> anyhow::Result<()> {
    let mut run = Run {
        rng: fastrand::Rng::with_seed(args.seed),
        timeout: Duration::from_millis(args.timeout_ms),
        args,
        c: Counters::default(),
        seq: 0,
        last_report: Instant::now(),
    };
    loop {
        run.session()?;
        run.report(false)?;
    }
}

impl Run {
    fn options(&mut self) -> ClientOptions {
        ClientOptions {
            timeout: self.timeout,
            wait: match self.rng.u8(0..3) {
                0 => WaitStrategy::Sleep,
                1 => WaitStrategy::default(),
                _ => WaitStrategy::Busy,
            },
            // Small rings too, so big messages stream through in chunks.
            ring_size: [16 << 10, 64 << 10, 1 << 20][self.rng.usize(0..3)],
            // Requests lent through the arena from the default 64 KiB, from
            // 4 KiB, or never (all streamed).
            arena_threshold: [64 << 10, 4 << 10, usize::MAX][self.rng.usize(0..3)],
            ..ClientOptions::default()
        }
    }

    /// A payload size: mostly small, log-uniform, sometimes megabytes.
    fn size(&mut self) -> usize {
        if self.rng.u8(0..100) < 2 {
            return self.rng.usize(1 << 20..=self.args.max_size.max(1 << 20));
        }
        let bits = self.rng.u32(0..=17);
        self.rng.usize(0..=(1usize << bits))
    }

    fn next_request(&mut self) -> Vec<u8> {
        self.seq += 1;
        let len = self.size();
        wire::request(self.args.id, self.seq, len, &mut self.rng)
    }

    fn session(&mut self) -> anyhow::Result<()> {
        let options = self.options();
        let mut client = match Client::connect(&self.args.address, options) {
            Ok(c) => c,
            Err(_) => {
                self.c.connect_failures += 1;
                // Pacing while the server restarts, not a wait for a condition.
                std::thread::sleep(Duration::from_millis(5));
                return Ok(());
            }
        };
        self.c.sessions += 1;
        for _ in 0..self.rng.u32(1..300) {
            let alive = match self.rng.u8(0..100) {
                0..80 => self.single(&mut client)?,
                80..95 => self.burst(&mut client)?,
                _ => self.one_way(&mut client),
            };
            self.report(false)?;
            if !alive {
                break;
            }
        }
        Ok(())
    }

    /// Counts a failed call; returns whether the session is still usable.
    fn failed(&mut self, client: &Client, e: &Error, took: Duration) -> bool {
        *self.c.failed.entry(kind(e).to_string()).or_default() += 1;
        if took > self.timeout + Duration::from_secs(1) {
            self.c.hung += 1;
        }
        client.is_connected()
    }

    fn judge(&mut self, request: &[u8], reply: &[u8]) -> anyhow::Result<()> {
        match wire::verify(request, reply) {
            Verdict::Good => self.c.completed += 1,
            v => {
                self.c.wrong += 1;
                self.c.first_wrong.get_or_insert_with(|| format!("{v:?}"));
                self.report(true)?;
            }
        }
        Ok(())
    }

    fn single(&mut self, client: &mut Client) -> anyhow::Result<bool> {
        let req = self.next_request();
        self.c.made += 1;
        let t0 = Instant::now();
        let got = match self.rng.u8(0..100) {
            0..10 => call_lent(client, &req).map(Got::Owned),
            10..15 => call_with_fd(client, &req).map(Got::Owned),
            15..30 => client.call_response(&req).map(Got::InPlace),
            _ => client.call(&req).map(Got::Owned),
        };
        match got {
            Ok(reply) => {
                self.judge(&req, &reply)?;
                if let Got::Owned(v) = reply {
                    client.recycle(v);
                }
                Ok(true)
            }
            Err(e) => Ok(self.failed(client, &e, t0.elapsed())),
        }
    }

    fn burst(&mut self, client: &mut Client) -> anyhow::Result<bool> {
        let mut sent = HashMap::new();
        for _ in 0..self.rng.usize(2..=16) {
            let req = self.next_request();
            self.c.made += 1;
            let t0 = Instant::now();
            match client.send(&req) {
                Ok(id) => {
                    sent.insert(id, req);
                }
                Err(e) => {
                    // This call and those sent before it fail with the session.
                    let took = t0.elapsed();
                    for _ in 0..=sent.len() {
                        self.failed(client, &e, took);
                    }
                    return Ok(false);
                }
            }
        }
        while !sent.is_empty() {
            let t0 = Instant::now();
            match client.recv() {
                Ok(reply) => match (sent.remove(&reply.id), reply.result) {
                    (Some(req), Ok(body)) => self.judge(&req, &body)?,
                    (Some(_), Err(e)) => {
                        self.failed(client, &Error::Remote(e), t0.elapsed());
                    }
                    (None, _) => {
                        self.c.wrong += 1;
                        self.c.first_wrong.get_or_insert_with(|| {
                            format!("a reply for call {} which was not sent", reply.id)
                        });
                        self.report(true)?;
                    }
                },
                Err(e) => {
                    // Every call still in flight failed with this error.
                    for _ in 0..sent.len() {
                        self.failed(client, &e, t0.elapsed());
                    }
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn one_way(&mut self, client: &mut Client) -> bool {
        let msg = self.next_request();
        match client.notify(&msg) {
            Ok(()) => {
                self.c.one_way += 1;
                true
            }
            Err(_) => client.is_connected(),
        }
    }

    /// Writes the counters when 100 ms passed (or `now`).
    fn report(&mut self, now: bool) -> anyhow::Result<()> {
        if !now && self.last_report.elapsed() < Duration::from_millis(100) {
            return Ok(());
        }
        self.last_report = Instant::now();
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &self.c)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(())
    }
}

/// A reply in a buffer of its own, or as it arrived (maybe in the server's
/// arena).
enum Got {
    Owned(Vec<u8>),
    InPlace(Response),
}

impl Deref for Got {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Got::Owned(v) => v,
            Got::InPlace(r) => r,
        }
    }
}

/// A call whose request is written in place into a loan (a plain call where
/// the session lends nothing, or the arena is full).
fn call_lent(client: &mut Client, req: &[u8]) -> shmlink::Result<Vec<u8>> {
    match client.loan(req.len()) {
        Ok(mut loan) => {
            loan.copy_from_slice(req);
            client.call_loan(loan)
        }
        Err(Error::ArenaFull { .. } | Error::NotAgreed { .. } | Error::Unsupported { .. }) => {
            client.call(req)
        }
        Err(e) => Err(e),
    }
}

/// A call with a fresh memfd attached (named so that the leak checks count
/// it if the server kept it); a plain call over `tcp:`.
fn call_with_fd(client: &mut Client, req: &[u8]) -> shmlink::Result<Vec<u8>> {
    let Ok(fd) = shmlink_sys::memfd::create_sealed(PASSED_FD_NAME, 4096) else {
        return client.call(req);
    };
    match client.call_with_fds(req, &[fd.as_fd()]) {
        Err(Error::Unsupported { .. } | Error::NotAgreed { .. }) => client.call(req),
        r => r,
    }
}

/// The name of the memfds chaos clients pass with their calls.
const PASSED_FD_NAME: &str = "shmlink-chaos-fd";
