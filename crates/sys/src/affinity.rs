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

/// CPU time (user + system) consumed so far by the whole calling process.
pub fn process_cpu_time() -> std::time::Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    std::time::Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}
