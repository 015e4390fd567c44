//! Ctrl-C during a bench: a flag set by SIGINT/SIGTERM, checked by every
//! measurement loop, so that the run unwinds through the guards that stop
//! the child processes and remove the temp dir. A second Ctrl-C exits at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};

/// The interrupt flag.
#[derive(Debug, Clone)]
pub(crate) struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// Installs the handlers.
    pub(crate) fn install() -> anyhow::Result<Self> {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // Registered first, so it sees the flag as it was before this
            // signal: a second signal terminates with exit status 1.
            signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&flag))
                .context("cannot install the SIGINT handler")?;
            signal_hook::flag::register(sig, Arc::clone(&flag))
                .context("cannot install the SIGINT handler")?;
        }
        Ok(Interrupt(flag))
    }

    /// Whether a signal arrived.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Fails when a signal arrived.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.is_set() {
            anyhow::bail!("interrupted; the benchmark servers were stopped");
        }
        Ok(())
    }
}
