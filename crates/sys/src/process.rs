//! Process-level calls of the tools (`shmlink bench`/`chaos` and the test
//! suites): signals, resource limits, the machine's description.

use std::io;

use rustix::process::{Pid, Resource, Signal};

/// A signal the tools send to their children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    /// `SIGTERM`: stop gracefully.
    Term,
    /// `SIGKILL`: stop now.
    Kill,
    /// `SIGSTOP`: pause (tests freeze a peer with it).
    Stop,
    /// `SIGCONT`: go on after `SIGSTOP`.
    Cont,
    /// `SIGINT`: interrupted (Ctrl-C).
    Int,
    /// `SIGHUP`: the terminal or the parent went away.
    Hup,
}

impl Sig {
    pub(crate) fn raw(self) -> Signal {
        match self {
            Sig::Term => Signal::TERM,
            Sig::Kill => Signal::KILL,
            Sig::Stop => Signal::STOP,
            Sig::Cont => Signal::CONT,
            Sig::Int => Signal::INT,
            Sig::Hup => Signal::HUP,
        }
    }
}

/// `kill(2)`: sends `sig` to process `pid`.
///
/// # Errors
/// `ESRCH` (no such process), `EPERM` (not ours), `InvalidInput` for a pid
/// that is not positive.
pub fn kill(pid: u32, sig: Sig) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad pid {pid}")))?;
    Ok(rustix::process::kill_process(pid, sig.raw())?)
}

/// `sysconf(_SC_CLK_TCK)`: the unit of the CPU times in `/proc/PID/stat`.
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// The size of a memory page in bytes (`AT_PAGESZ`), the unit of
/// `/proc/PID/statm`.
pub fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// `uname(2)`: the kernel's name and release, e.g. `"Linux 6.1.0"`.
pub fn kernel() -> String {
    let u = rustix::system::uname();
    format!(
        "{} {}",
        u.sysname().to_string_lossy(),
        u.release().to_string_lossy()
    )
}

/// `sched_getaffinity(2)`: the CPUs this process may run on, in order.
///
/// # Errors
/// `EINVAL`/`EFAULT` (never in normal operation).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None)?;
    Ok((0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect())
}

/// `getrlimit(RLIMIT_NOFILE)`: the soft and hard limits on open descriptors
/// (`None`: unlimited).
pub fn descriptor_limit() -> (Option<u64>, Option<u64>) {
    let l = rustix::process::getrlimit(Resource::Nofile);
    (l.current, l.maximum)
}

/// `setrlimit(RLIMIT_NOFILE)` of the soft limit, the hard one unchanged.
///
/// # Errors
/// `EINVAL` (soft above hard), `EPERM` (raising the hard limit).
pub fn set_descriptor_limit(soft: Option<u64>) -> io::Result<()> {
    let mut l = rustix::process::getrlimit(Resource::Nofile);
    l.current = soft;
    Ok(rustix::process::setrlimit(Resource::Nofile, l)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_this_process() {
        assert!(clock_ticks_per_second() > 0);
        assert!(kernel().starts_with("Linux "), "{}", kernel());
        assert!(!allowed_cpus().expect("affinity").is_empty());
        let (soft, hard) = descriptor_limit();
        assert!(soft <= hard || hard.is_none());
        set_descriptor_limit(soft).expect("same soft limit");
        assert_eq!(descriptor_limit(), (soft, hard));
    }

    #[test]
    fn kill_checks_its_pid() {
        assert_eq!(
            kill(0, Sig::Term).expect_err("pid 0").kind(),
            io::ErrorKind::InvalidInput
        );
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        kill(child.id(), Sig::Kill).expect("kill");
        let status = child.wait().expect("wait");
        assert!(!status.success());
    }
}

/// The machine's CPU time so far, from the first line of `/proc/stat`:
/// (idle ticks, all ticks, CPUs). Idle counts `idle` and `iowait`; all
/// counts the eight fields from `user` to `steal` (guest time is already
/// inside `user`). Two readings give how much of the machine sat idle
/// between them.
///
/// # Errors
/// `/proc` not mounted or unreadable; `InvalidData` for a line that does
/// not parse.
pub fn machine_cpu_ticks() -> io::Result<(u64, u64, usize)> {
    let text = std::fs::read_to_string("/proc/stat")?;
    parse_stat(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "/proc/stat has no \"cpu\" line of eight numbers",
        )
    })
}

/// The calling thread's time on a CPU and time spent runnable but waiting
/// for one, in ns so far (`/proc/thread-self/schedstat`). Their sum over a
/// window is how much CPU the thread wanted.
///
/// # Errors
/// `/proc` not mounted, or a kernel without schedstats (`InvalidData`).
pub fn thread_run_and_wait_ns() -> io::Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")?;
    let mut f = text.split_ascii_whitespace().map(str::parse::<u64>);
    match (f.next(), f.next()) {
        (Some(Ok(run)), Some(Ok(wait))) => Ok((run, wait)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/thread-self/schedstat reads {text:?}"),
        )),
    }
}

fn parse_stat(text: &str) -> Option<(u64, u64, usize)> {
    let mut lines = text.lines();
    let mut fields = lines.next()?.strip_prefix("cpu ")?.split_ascii_whitespace();
    let mut t = [0u64; 8];
    for v in &mut t {
        *v = fields.next()?.parse().ok()?;
    }
    let cpus = lines.take_while(|l| l.starts_with("cpu")).count().max(1);
    Some((t[3] + t[4], t.iter().sum(), cpus))
}

#[cfg(test)]
mod stat_tests {
    use super::*;

    #[test]
    fn the_machine_line_parses() {
        let text = "cpu  10 1 5 100 4 0 2 3 0 0\ncpu0 5 0 2 50 2 0 1 1 0 0\ncpu1 5 1 3 50 2 0 1 2 0 0\nintr 1\n";
        assert_eq!(parse_stat(text), Some((104, 125, 2)));
        assert_eq!(parse_stat("cpu  1 2 3\n"), None);
        assert_eq!(parse_stat("intr 1\n"), None);
        let (idle, all, cpus) = machine_cpu_ticks().expect("/proc/stat");
        assert!(idle <= all && cpus >= 1);
        // Updated at the thread's ticks and switches: readable, and never
        // going back.
        let (run, wait) = thread_run_and_wait_ns().expect("schedstat");
        std::thread::yield_now();
        let (run2, wait2) = thread_run_and_wait_ns().expect("schedstat");
        assert!(run2 >= run && wait2 >= wait);
    }
}
