//! The machine's load during a point: quiet, or the other CPU kept busy by
//! a hog process the bench starts itself (`--loads quiet,busy`), so that
//! waits are measured where users run them: beside other work.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};

use crate::child::ChildGuard;

/// How loaded the machine is while points run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Load {
    /// Nothing else runs.
    Quiet,
    /// A process spins on the servers' CPU (on any CPU without pinning).
    Busy,
}

impl Load {
    /// `quiet` or `busy`, as in the table and the JSON records.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Load::Quiet => "quiet",
            Load::Busy => "busy",
        }
    }

    /// Starts what makes the machine this loaded: nothing, or the hog,
    /// pinned to `cpu` when given. The hog stops when the guard drops.
    pub(crate) fn start(
        self,
        exe: &Path,
        cpu: Option<usize>,
        dir: &Path,
    ) -> anyhow::Result<Option<ChildGuard>> {
        if self == Load::Quiet {
            return Ok(None);
        }
        let mut cmd = Command::new(exe);
        cmd.arg("__hog");
        if let Some(cpu) = cpu {
            cmd.arg("--cpu").arg(cpu.to_string());
        }
        let hog = ChildGuard::spawn(cmd, "CPU hog", dir.join("hog.stderr"))
            .context("cannot start the CPU hog of the busy load")?;
        Ok(Some(hog))
    }
}

/// Options of the hidden `__hog` command.
#[derive(Debug, Args)]
pub(crate) struct HogArgs {
    /// Pin to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
}

/// How often the hog looks whether the bench that started it still runs.
const PARENT_CHECK: Duration = Duration::from_millis(10);

/// Spins until the bench that started it is gone (a killed bench leaves no
/// hog behind: the hog finds itself re-parented).
pub(crate) fn run_hog(args: &HogArgs) -> anyhow::Result<()> {
    if let Some(cpu) = args.cpu {
        shmlink_sys::affinity::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin the hog to CPU {cpu}"))?;
    }
    let parent = std::os::unix::process::parent_id();
    let mut spins: u64 = 0;
    loop {
        let until = Instant::now() + PARENT_CHECK;
        while Instant::now() < until {
            spins = std::hint::black_box(spins.wrapping_add(1));
        }
        if std::os::unix::process::parent_id() != parent {
            return Ok(());
        }
    }
}
