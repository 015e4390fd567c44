//! The processes of a chaos run: the echo server (killed and restarted on
//! the same addresses) and the client processes with their counters.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::client::Counters;
use crate::child::{self, ChildGuard};

/// The echo server: replies with the whole request.
pub(crate) struct EchoServer {
    exe: PathBuf,
    dir: PathBuf,
    listen: Vec<String>,
    guard: ChildGuard,
    generation: u32,
}

impl EchoServer {
    /// Starts it on shm, unix and tcp (a port free now, kept across restarts).
    pub(crate) fn start(exe: &Path, dir: &Path) -> anyhow::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("cannot find a free TCP port")?
            .port();
        let listen = vec![
            format!("shm:{}", dir.join("chaos-shm.sock").display()),
            format!("unix:{}", dir.join("chaos-unix.sock").display()),
            format!("tcp:127.0.0.1:{port}"),
        ];
        let guard = Self::spawn(exe, dir, &listen, 0)?;
        Ok(EchoServer {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            listen,
            guard,
            generation: 0,
        })
    }

    fn spawn(
        exe: &Path,
        dir: &Path,
        listen: &[String],
        generation: u32,
    ) -> anyhow::Result<ChildGuard> {
        let ready = dir.join(format!("ready-{generation}"));
        let mut cmd = Command::new(exe);
        cmd.arg("echo");
        for a in listen {
            cmd.arg("--listen").arg(a);
        }
        cmd.args(["--reply-ratio", "1", "--ready-file"]).arg(&ready);
        let mut guard = ChildGuard::spawn(
            cmd,
            format!("echo server #{generation}"),
            dir.join(format!("echo-{generation}.stderr")),
        )?;
        child::wait_ready_file(&ready, &mut guard, Duration::from_secs(10))?;
        Ok(guard)
    }

    /// shm, unix and tcp addresses, in that order.
    pub(crate) fn addresses(&self) -> &[String] {
        &self.listen
    }

    /// The server's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// SIGKILL.
    pub(crate) fn kill(&mut self) -> anyhow::Result<()> {
        self.guard.kill_now()
    }

    /// Starts a new server on the same addresses; returns when it was ready.
    pub(crate) fn restart(&mut self) -> anyhow::Result<Instant> {
        self.generation += 1;
        self.guard = Self::spawn(&self.exe, &self.dir, &self.listen, self.generation)?;
        Ok(Instant::now())
    }

    /// Graceful stop: SIGTERM must end it with status 0 within 5 s.
    pub(crate) fn stop(&mut self) -> anyhow::Result<()> {
        let status = self.guard.terminate(Duration::from_secs(5))?;
        if !status.success() {
            bail!(
                "the echo server exited with {status} on SIGTERM; {}",
                self.guard.log_note()
            );
        }
        Ok(())
    }
}

/// Which program a client process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    /// `shmlink __chaos-client`.
    Rust,
    /// The PHP twin (`php_client.php`) through the extension.
    Php,
}

/// How to start PHP clients: the php binary, the extension, the script.
#[derive(Debug, Clone)]
pub(crate) struct PhpCommand {
    pub(crate) php: PathBuf,
    pub(crate) extension: PathBuf,
    pub(crate) script: PathBuf,
}

/// A client's latest counters and when they came.
pub(crate) struct Slot {
    pub(crate) counters: Counters,
    updated: Instant,
}

struct Proc {
    guard: ChildGuard,
    lang: Lang,
    address: String,
    slot: Arc<Mutex<Slot>>,
    reader: Option<JoinHandle<()>>,
    stalled: bool,
}

/// The client processes, live and finished.
pub(crate) struct Clients {
    exe: PathBuf,
    dir: PathBuf,
    timeout_ms: u64,
    max_size: usize,
    php: Option<PhpCommand>,
    next_id: u32,
    live: Vec<Proc>,
    finished: Vec<(Lang, Arc<Mutex<Slot>>)>,
    stalled: u64,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl Clients {
    /// No clients yet.
    pub(crate) fn new(
        exe: &Path,
        dir: &Path,
        timeout_ms: u64,
        max_size: usize,
        php: Option<PhpCommand>,
    ) -> Self {
        Clients {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            timeout_ms,
            max_size,
            php,
            next_id: 0,
            live: Vec::new(),
            finished: Vec::new(),
            stalled: 0,
        }
    }

    /// The command of a client process.
    fn command(&self, lang: Lang, address: &str, id: u32, seed: u64) -> anyhow::Result<Command> {
        let (timeout, max) = (self.timeout_ms.to_string(), self.max_size.to_string());
        Ok(match lang {
            Lang::Rust => {
                let mut cmd = Command::new(&self.exe);
                cmd.args(["__chaos-client", "--address", address])
                    .args(["--id", &id.to_string(), "--seed", &seed.to_string()])
                    .args(["--timeout-ms", &timeout, "--max-size", &max]);
                cmd
            }
            Lang::Php => {
                let Some(php) = &self.php else {
                    bail!("a PHP client without --php-extension");
                };
                let mut cmd = Command::new(&php.php);
                // -n: no php.ini; the extension and nothing else.
                cmd.arg("-n")
                    .arg("-d")
                    .arg(format!("extension={}", php.extension.display()))
                    .args(["-d", "memory_limit=-1"])
                    .arg(&php.script)
                    .args([address, &id.to_string(), &seed.to_string(), &timeout, &max]);
                cmd
            }
        })
    }

    /// Starts a client of `lang` calling `address`.
    pub(crate) fn spawn(&mut self, lang: Lang, address: &str, seed: u64) -> anyhow::Result<()> {
        self.next_id += 1;
        let id = self.next_id;
        let cmd = self.command(lang, address, id, seed)?;
        let stderr = self.dir.join(format!("client-{id}.stderr"));
        let what = format!("chaos client #{id} ({lang:?})");
        let (guard, out) = ChildGuard::spawn_piped(cmd, what, stderr)?;
        let slot = Arc::new(Mutex::new(Slot {
            counters: Counters::default(),
            updated: Instant::now(),
        }));
        let s = Arc::clone(&slot);
        let reader = std::thread::Builder::new()
            .name(format!("chaos-client-{id}"))
            .spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    // A line cut by SIGKILL does not parse: the previous one stands.
                    if let Ok(c) = serde_json::from_str::<Counters>(&line) {
                        let mut g = lock(&s);
                        g.counters = c;
                        g.updated = Instant::now();
                    }
                }
            })
            .context("cannot start a reader thread")?;
        self.live.push(Proc {
            guard,
            lang,
            address: address.to_string(),
            slot,
            reader: Some(reader),
            stalled: false,
        });
        Ok(())
    }

    /// Live clients.
    pub(crate) fn live(&self) -> usize {
        self.live.len()
    }

    /// SIGKILLs live client `i`; returns its program and the address it was
    /// calling.
    pub(crate) fn kill(&mut self, i: usize) -> anyhow::Result<(Lang, String)> {
        let mut p = self.live.swap_remove(i);
        p.guard.kill_now()?;
        if let Some(r) = p.reader.take() {
            let _ = r.join();
        }
        self.finished.push((p.lang, p.slot));
        Ok((p.lang, p.address))
    }

    /// SIGKILLs every live client.
    pub(crate) fn kill_all(&mut self) -> anyhow::Result<()> {
        while !self.live.is_empty() {
            self.kill(0)?;
        }
        Ok(())
    }

    /// Marks clients that reported nothing for `limit` (a call stuck far past
    /// its timeout) as stalled.
    pub(crate) fn check_stalled(&mut self, limit: Duration) {
        for p in &mut self.live {
            if !p.stalled && lock(&p.slot).updated.elapsed() > limit {
                p.stalled = true;
                self.stalled += 1;
            }
        }
    }

    /// Clients found stalled.
    pub(crate) fn stalled(&self) -> u64 {
        self.stalled
    }

    /// The counters of every client, finished or live, with its program.
    pub(crate) fn counters(&self) -> Vec<(Lang, Counters)> {
        self.finished
            .iter()
            .map(|(l, s)| (*l, s))
            .chain(self.live.iter().map(|p| (p.lang, &p.slot)))
            .map(|(l, s)| (l, lock(s).counters.clone()))
            .collect()
    }
}
