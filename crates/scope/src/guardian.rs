//! The guardian: runs the command in the scope, forwards the signals it
//! gets, reaps orphans, and hands the cleanup to its janitor.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shmlink_sys::children::{self, Ended};
use shmlink_sys::process::{kill, Sig};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::env;
use crate::janitor;
use crate::procs;

/// Runs `command` in a new scope (see the crate's documentation); its exit
/// code, or 128 + the signal that ended it.
///
/// # Errors
/// The scope cannot be set up, or `command` cannot be started (nothing is
/// left behind in either case).
pub(crate) fn run(me: &[OsString], grace: Duration, command: &[OsString]) -> io::Result<i32> {
    let pid = std::process::id();
    let token = format!("{pid}.{}", procs::start_time(pid).unwrap_or(0));
    let root = crate::temp_root();
    let dir = root.join(format!("shmlink-scope-{pid}"));
    // A directory of the same name was left by a dead process of this pid.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    let parent = children::parent_pid();
    // The caller gone (killed), this scope ends as at SIGTERM.
    let _ = children::signal_on_parent_death(Sig::Term);
    children::become_subreaper()?;
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    let tokens = env::with_token(std::env::var(env::TOKENS).ok().as_deref(), &token);
    let (reader, writer) = io::pipe()?;
    let jargs = janitor::Args {
        token,
        guardian: pid,
        dir: dir.clone(),
        grace,
    };
    let (program, leading) = me
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no program for the janitor"))?;
    let janitor = Command::new(program)
        .args(leading)
        .args(jargs.to_args())
        .stdin(Stdio::from(reader))
        .stdout(Stdio::null())
        .env(env::TOKENS, &tokens)
        .env(env::JANITOR, "1")
        .env_remove(env::PARENT)
        .spawn();
    let janitor = match janitor {
        Ok(j) => j.id(),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(io::Error::new(
                e.kind(),
                format!("cannot start the janitor: {e}"),
            ));
        }
    };
    let child = Command::new(&command[0])
        .args(&command[1..])
        .env(env::TOKENS, &tokens)
        .env(env::PARENT, pid.to_string())
        .env(env::ROOT, &root)
        .env("TMPDIR", &dir)
        .env_remove(env::JANITOR)
        .spawn();
    let outcome = match child {
        Ok(c) => Ok(wait_for(c.id(), janitor, signals, grace, parent)),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot start {}: {e}", Path::new(&command[0]).display()),
        )),
    };
    // The janitor cleans up now; orphans it stops are reaped here meanwhile.
    drop(writer);
    loop {
        match children::wait_any_child() {
            Ok(Some((p, _))) if p == janitor => break,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    outcome
}

/// Waits for the command (`child`), reaping orphans meanwhile and passing
/// it the signals this process gets; what ended it, as an exit code.
fn wait_for(child: u32, janitor: u32, signals: Signals, grace: Duration, parent: u32) -> i32 {
    let ended = Arc::new(AtomicBool::new(false));
    let handle = signals.handle();
    let forwarder = {
        let ended = Arc::clone(&ended);
        let mut signals = signals;
        std::thread::Builder::new()
            .name("scope-signals".into())
            .spawn(move || {
                for s in signals.forever() {
                    let sig = match s {
                        SIGINT => Sig::Int,
                        SIGHUP => Sig::Hup,
                        _ => Sig::Term,
                    };
                    pass_on(child, sig, grace, &ended);
                }
            })
    };
    // The caller died before the death signal was armed.
    if children::parent_pid() != parent {
        let _ = kill(child, Sig::Term);
    }
    let code = loop {
        match children::wait_any_child() {
            Ok(Some((p, e))) if p == child => break e.code(),
            // The janitor died early (killed): the cleanup is the
            // guardian's job alone now, done when the command ends.
            Ok(Some((p, _))) if p == janitor => {}
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break Ended::Exited(1).code(),
        }
    };
    ended.store(true, Ordering::Release); // pairs with the Acquire in pass_on
    handle.close();
    if let Ok(t) = forwarder {
        let _ = t.join();
    }
    code
}

/// Passes `sig` to the command, and kills it if it has not ended `grace`
/// later (checked by a thread of its own, so that more signals still pass).
fn pass_on(child: u32, sig: Sig, grace: Duration, ended: &Arc<AtomicBool>) {
    if ended.load(Ordering::Acquire) {
        return;
    }
    let _ = kill(child, sig);
    let ended = Arc::clone(ended);
    let _ = std::thread::Builder::new()
        .name("scope-grace".into())
        .spawn(move || {
            std::thread::sleep(grace);
            // Pairs with the Release once the command was reaped: until
            // then its pid cannot name another process.
            if !ended.load(Ordering::Acquire) {
                let _ = kill(child, Sig::Kill);
            }
        });
}
