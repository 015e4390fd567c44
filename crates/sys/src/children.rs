//! Calls of a process that answers for the processes below it (the test
//! and benchmark harness's scope, `shmlink-scope`): becoming the reaper of
//! orphaned descendants, a signal when the parent dies, a session of its
//! own, and waiting for any child.

use std::io;

use rustix::process::WaitOptions;

use crate::process::Sig;

/// `prctl(PR_SET_CHILD_SUBREAPER)`: descendants orphaned from now on are
/// re-parented to this process instead of to init, so that it sees (and
/// must reap) them.
///
/// # Errors
/// `EINVAL` on a kernel without subreapers (before 3.4).
pub fn become_subreaper() -> io::Result<()> {
    Ok(rustix::process::set_child_subreaper(Some(
        rustix::process::getpid(),
    ))?)
}

/// `prctl(PR_SET_PDEATHSIG)`: `sig` is sent to this process when the thread
/// that created it exits (the parent process, for a single-threaded parent).
/// Not inherited by children; kept across `exec`.
///
/// # Errors
/// `EINVAL` (never for these signals).
pub fn signal_on_parent_death(sig: Sig) -> io::Result<()> {
    Ok(rustix::process::set_parent_process_death_signal(Some(
        sig.raw(),
    ))?)
}

/// `getppid(2)`: the parent's pid (0 when there is none, e.g. for init).
pub fn parent_pid() -> u32 {
    rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32)
}

/// `setsid(2)`: this process leads a new session and process group, out of
/// reach of the terminal's signals (Ctrl-C) and of a kill of its former
/// group.
///
/// # Errors
/// `EPERM` when it already leads a process group.
pub fn new_session() -> io::Result<()> {
    rustix::process::setsid()?;
    Ok(())
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal (this number) ended it.
    Signaled(i32),
}

impl Ended {
    /// The shell's way of saying it: the code, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Ended::Exited(c) => c,
            Ended::Signaled(s) => 128 + s,
        }
    }
}

/// `waitpid(-1)`: waits until any child ends and reaps it; `None` when
/// this process has no children left. Retries on `EINTR`.
///
/// # Errors
/// Any other `waitpid` error.
pub fn wait_any_child() -> io::Result<Option<(u32, Ended)>> {
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) => {
                let pid = pid.as_raw_nonzero().get() as u32;
                let ended = match (status.exit_status(), status.terminating_signal()) {
                    (Some(c), _) => Ended::Exited(c),
                    (None, Some(s)) => Ended::Signaled(s),
                    // Stopped or continued: not reported without WUNTRACED.
                    (None, None) => continue,
                };
                return Ok(Some((pid, ended)));
            }
            Ok(None) => continue,
            Err(rustix::io::Errno::CHILD) => return Ok(None),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_waited_for_with_its_code() {
        // Only this test's child may be reaped here: run in a child process
        // of its own, the test binary's other tests being threads.
        let me = std::env::current_exe().expect("exe");
        if std::env::var_os("SHMLINK_SYS_WAIT_CHILD").is_some() {
            // Reaped by wait_any_child, not by Child::wait.
            #[allow(clippy::zombie_processes)]
            let child = std::process::Command::new("sh")
                .args(["-c", "exit 7"])
                .spawn()
                .expect("sh");
            let got = wait_any_child().expect("wait");
            assert_eq!(got, Some((child.id(), Ended::Exited(7))));
            assert_eq!(wait_any_child().expect("wait"), None);
            assert!(parent_pid() > 0);
            return;
        }
        let status = std::process::Command::new(me)
            .args([
                "--exact",
                "children::tests::a_child_is_waited_for_with_its_code",
                "--nocapture",
            ])
            .env("SHMLINK_SYS_WAIT_CHILD", "1")
            .status()
            .expect("test child");
        assert!(status.success());
        assert_eq!(Ended::Signaled(9).code(), 137);
    }
}
