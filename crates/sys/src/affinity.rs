//! Pinning threads to CPUs (used by benchmarks to measure like for like).

use std::io;

use rustix::thread::{sched_setaffinity, CpuSet};

/// Pins the calling thread to `cpu`.
///
/// # Errors
/// Fails when the CPU does not exist or is not allowed for this process.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= CpuSet::MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    Ok(sched_setaffinity(None, &set)?)
}
