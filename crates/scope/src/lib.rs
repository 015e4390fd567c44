//! The harness's scope: every benchmark, example runner and test suite of
//! shmlink runs in one, so that it stops what it started on every way out
//! (success, an error, a panic, Ctrl-C, `SIGTERM`, its own `SIGKILL`) and
//! leaves nothing in the temporary directory.
//!
//! `shmlink scope -- COMMAND...` (the guardian) runs COMMAND with
//! - `SHMLINK_SCOPE` holding a token of this scope (appended to the tokens
//!   of the scopes around it), which every process below inherits;
//! - `TMPDIR` set to a directory of the scope's own;
//! - itself as the reaper of orphaned descendants (`PR_SET_CHILD_SUBREAPER`).
//!
//! Beside COMMAND it starts a janitor in a session of its own, which
//! ignores the terminal's signals and waits for the guardian's pipe to
//! close. The pipe closes when COMMAND has ended and the guardian lets go
//! of it, or when the guardian itself dies, `SIGKILL` included. The janitor
//! then stops every process of the scope: those that carry the token, the
//! guardian's children, and every descendant of those (`SIGTERM`, then
//! `SIGKILL` after a grace period). Then it removes the directory. The
//! guardian waits for it and exits with COMMAND's status.
//!
//! A program that must not outlive its own run without a caller's scope
//! (the CLI's benchmarks, the scripts of `ci/` and `bench/`) asks
//! [`is_scoped`] first and, when it is not, replaces itself with a
//! guardian running it again ([`exec_in_scope`]).

mod env;
mod guardian;
mod janitor;
mod procs;

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::time::Duration;

pub use env::is_scoped;

/// How long the processes of a scope have after `SIGTERM` before
/// `SIGKILL`, unless `--grace` says otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Runs `shmlink scope` with `args` (what follows `scope` on the command
/// line): `[--grace SECONDS] [--] COMMAND [ARGS...]`, or the janitor's
/// internal form. `me` is how this program is started again for the
/// janitor (the executable and the arguments before `args`). Returns the
/// exit code: COMMAND's (128 + the signal when one ended it), or 2 with a
/// message on stderr when the arguments are wrong or COMMAND cannot start.
pub fn main(me: &[OsString], args: &[OsString]) -> i32 {
    match parse(args) {
        Ok(Mode::Janitor(j)) => janitor::run(&j),
        Ok(Mode::Guard { grace, command }) => match guardian::run(me, grace, &command) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("shmlink scope: {e}");
                2
            }
        },
        Err(e) => {
            eprintln!(
                "shmlink scope: {e}\nusage: shmlink scope [--grace SECONDS] -- COMMAND [ARGS...]"
            );
            2
        }
    }
}

/// Replaces this process with a guardian (`me` followed by `scope --`)
/// running this same program again, with the same arguments, in a scope
/// of its own. Returns only on failure.
pub fn exec_in_scope(me: &[OsString]) -> io::Error {
    use std::os::unix::process::CommandExt;
    let Some((program, leading)) = me.split_first() else {
        return io::Error::new(io::ErrorKind::InvalidInput, "no program to run a scope");
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return e,
    };
    std::process::Command::new(program)
        .args(leading)
        .args(["scope", "--"])
        .arg(&exe)
        .args(std::env::args_os().skip(1))
        .exec()
}

enum Mode {
    Guard {
        grace: Duration,
        command: Vec<OsString>,
    },
    Janitor(janitor::Args),
}

fn parse(args: &[OsString]) -> Result<Mode, String> {
    let mut grace = DEFAULT_GRACE;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        match a.as_ref() {
            "--" => {
                i += 1;
                break;
            }
            "--grace" => {
                let v = args.get(i + 1).ok_or("--grace needs a number of seconds")?;
                let secs: f64 = v
                    .to_string_lossy()
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= 3600.0)
                    .ok_or_else(|| {
                        format!("--grace {v:?}: not a number of seconds from 0 to 3600")
                    })?;
                grace = Duration::from_secs_f64(secs);
                i += 2;
            }
            janitor::FLAG => return janitor::Args::parse(&args[i + 1..]).map(Mode::Janitor),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => break,
        }
    }
    let command = args[i..].to_vec();
    if command.is_empty() {
        return Err("no command to run".into());
    }
    Ok(Mode::Guard { grace, command })
}

/// Where a scope's directory goes: the temporary directory the outermost
/// scope was given.
fn temp_root() -> std::path::PathBuf {
    std::env::var_os(env::ROOT)
        .or_else(|| std::env::var_os("TMPDIR"))
        .filter(|p| Path::new(p).is_absolute())
        .map_or_else(|| "/tmp".into(), Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_parse() {
        match parse(&os(&["--grace", "1.5", "--", "sh", "-c", "x"])) {
            Ok(Mode::Guard { grace, command }) => {
                assert_eq!(grace, Duration::from_millis(1500));
                assert_eq!(command, os(&["sh", "-c", "x"]));
            }
            _ => panic!("not a guard"),
        }
        match parse(&os(&["true"])) {
            Ok(Mode::Guard { grace, command }) => {
                assert_eq!(grace, DEFAULT_GRACE);
                assert_eq!(command, os(&["true"]));
            }
            _ => panic!("not a guard"),
        }
        for bad in [
            &["--"][..],
            &[],
            &["--grace"],
            &["--grace", "x", "true"],
            &["--grace", "-1", "true"],
            &["--what", "true"],
        ] {
            assert!(parse(&os(bad)).is_err(), "{bad:?}");
        }
    }
}
