//! The janitor: waits, out of reach of the terminal's signals, until the
//! guardian's pipe closes (the command ended, or the guardian died), then
//! stops every process of the scope and removes the scope's directory.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_sys::process::{kill, Sig};

use crate::procs::{self, Proc};

/// The janitor's mode on the command line:
/// `--janitor TOKEN GUARDIAN_PID DIR GRACE_MS`.
pub(crate) const FLAG: &str = "--janitor";

/// How long after `SIGKILL` the janitor waits for the last processes.
const AFTER_KILL: Duration = Duration::from_secs(5);
/// How long a janitor of a scope inside this one has to finish its own
/// cleanup after this one's grace, before it is killed too.
const INNER_JANITORS: Duration = Duration::from_secs(10);
/// Between two looks at `/proc` while processes are still stopping.
const LOOK: Duration = Duration::from_millis(10);

/// What the guardian tells its janitor.
#[derive(Debug)]
pub(crate) struct Args {
    pub(crate) token: String,
    pub(crate) guardian: u32,
    pub(crate) dir: PathBuf,
    pub(crate) grace: Duration,
}

impl Args {
    pub(crate) fn parse(a: &[OsString]) -> Result<Args, String> {
        let [token, guardian, dir, grace] = a else {
            return Err(format!("{FLAG} takes TOKEN GUARDIAN_PID DIR GRACE_MS"));
        };
        let num = |v: &OsString, what: &str| {
            v.to_string_lossy()
                .parse::<u64>()
                .map_err(|_| format!("{FLAG}: {what} {v:?} is not a number"))
        };
        Ok(Args {
            token: token.to_string_lossy().into_owned(),
            guardian: u32::try_from(num(guardian, "GUARDIAN_PID")?)
                .map_err(|_| format!("{FLAG}: pid {guardian:?} out of range"))?,
            dir: dir.into(),
            grace: Duration::from_millis(num(grace, "GRACE_MS")?),
        })
    }

    /// The janitor's arguments on a command line.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        vec![
            FLAG.into(),
            self.token.clone().into(),
            self.guardian.to_string().into(),
            self.dir.clone().into(),
            self.grace.as_millis().to_string().into(),
        ]
    }
}

/// Runs the janitor; its exit code is 1 when processes survived.
pub(crate) fn run(args: &Args) -> i32 {
    // Out of the terminal's process group, and deaf to the signals a
    // Ctrl-C or a kill of the whole group sends: it must outlive them.
    let _ = shmlink_sys::children::new_session();
    let deaf = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
    ] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&deaf));
    }
    // Nothing is ever written: the read ends when the guardian's end closes.
    let mut byte = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut byte), Ok(n) if n > 0) {}
    // The guardian still alive means the command ended and it waits for
    // this cleanup; gone, it was killed, and its children are orphans now.
    let guardian = procs::start_time(args.guardian).map(|_| args.guardian);
    let (stopped, survivors) = clean(&args.token, guardian, args.grace);
    let _ = std::fs::remove_dir_all(&args.dir);
    if !stopped.is_empty() {
        eprintln!(
            "shmlink scope: stopped {} process{} left running: {}",
            stopped.len(),
            if stopped.len() == 1 { "" } else { "es" },
            stopped.join(", ")
        );
    }
    if survivors.is_empty() {
        return 0;
    }
    eprintln!(
        "shmlink scope: {} process{} of the scope still running after SIGKILL: {}",
        survivors.len(),
        if survivors.len() == 1 { "" } else { "es" },
        survivors.join(", ")
    );
    1
}

/// Stops every process of the scope: `SIGTERM` (and `SIGCONT`, for a
/// stopped one) at first sight, `SIGKILL` after `grace`; janitors of
/// scopes inside this one are left to finish until [`INNER_JANITORS`]
/// later. Returns what it signalled and what still ran at the end, each
/// as `PID (COMMAND)`.
pub(crate) fn clean(
    token: &str,
    guardian: Option<u32>,
    grace: Duration,
) -> (Vec<String>, Vec<String>) {
    let me = std::process::id();
    let t0 = Instant::now();
    let mut termed: HashSet<u32> = HashSet::new();
    let mut known: HashSet<(u32, u64)> = HashSet::new();
    let mut named: Vec<String> = Vec::new();
    loop {
        let ours = procs::of_scope(&procs::snapshot(token), guardian, me, &known);
        known.extend(ours.iter().map(|p| (p.pid, p.start)));
        if ours.is_empty() {
            return (named, Vec::new());
        }
        let elapsed = t0.elapsed();
        if elapsed > grace + INNER_JANITORS + AFTER_KILL {
            return (named, ours.iter().map(describe).collect());
        }
        for p in &ours {
            let kill_now = if p.janitor {
                elapsed >= grace + INNER_JANITORS
            } else {
                elapsed >= grace
            };
            if kill_now {
                let _ = kill(p.pid, Sig::Kill);
            } else if !p.janitor && termed.insert(p.pid) {
                named.push(describe(p));
                let _ = kill(p.pid, Sig::Term);
                let _ = kill(p.pid, Sig::Cont);
            }
        }
        std::thread::sleep(LOOK);
    }
}

fn describe(p: &Proc) -> String {
    format!("{} ({})", p.pid, procs::command_line(p.pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip() {
        let a = Args {
            token: "12.34".into(),
            guardian: 12,
            dir: "/tmp/x".into(),
            grace: Duration::from_millis(1500),
        };
        let back = Args::parse(&a.to_args()[1..]).expect("parses");
        assert_eq!(
            (back.token, back.guardian, back.dir, back.grace),
            (a.token, a.guardian, a.dir, a.grace)
        );
        assert!(Args::parse(&["1".into(), "x".into(), "/d".into(), "5".into()]).is_err());
        assert!(Args::parse(&["1".into()]).is_err());
    }
}
