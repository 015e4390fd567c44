//! The CPU the calling thread runs on (`sched_getcpu(3)`), read per wait
//! by the adaptive wait strategy (its CPU hint).
//!
//! Through libc, as `clock.rs` is, not through rustix: rustix finds the
//! vDSO itself, and under valgrind (the PHP extension's memcheck tests)
//! that lookup reads past the mapping it finds and crashes the process.
#![allow(unsafe_code)]

/// The CPU the calling thread runs on now (a vDSO read, tens of
/// nanoseconds; it may have moved by the time the caller looks). `None`
/// when the kernel cannot say.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: `sched_getcpu` takes no arguments and touches no memory of
    // the caller's.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpu_is_one_of_the_machine() {
        let cpu = super::current_cpu().expect("sched_getcpu");
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Affinity may hide CPUs from available_parallelism: a bound only.
        assert!((cpu as usize) < 4096, "{cpu} of {n}");
    }
}
