//! Clocks the HTTP servers read per request, cheaper than `Instant::now`:
//! a coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`, read from the vDSO
//! without reading the TSC; a few milliseconds of resolution, enough for
//! timeouts in seconds) and this thread's CPU time (`clock_gettime(2)`).
//!
//! Through libc, as `std::time::Instant` does, not through rustix: rustix
//! finds the vDSO itself, and under valgrind (the PHP extension's memcheck
//! tests) that lookup reads past the mapping it finds and crashes.
#![allow(unsafe_code)]

/// Reads `clock`; `None` when the kernel refuses it.
fn read(clock: libc::clockid_t) -> Option<libc::timespec> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec for the duration of the
    // call, which only writes it.
    let rc = unsafe { libc::clock_gettime(clock, &mut t) };
    (rc == 0).then_some(t)
}

fn nanos(t: libc::timespec) -> u64 {
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// Milliseconds of the coarse monotonic clock (the same time base as
/// `CLOCK_MONOTONIC` and `Instant`, comparable across the processes of the
/// machine).
pub fn coarse_ms() -> u64 {
    read(libc::CLOCK_MONOTONIC_COARSE)
        .or_else(|| read(libc::CLOCK_MONOTONIC))
        .map_or(0, |t| nanos(t) / 1_000_000)
}

/// Nanoseconds of `CLOCK_MONOTONIC`: one time base for every process of
/// the machine (a benchmark stamps a sample in one and reads the stamp in
/// another).
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC).map_or(0, nanos)
}

/// CPU time (user + system) the whole calling process has used so far.
pub fn process_cpu_time() -> std::time::Duration {
    std::time::Duration::from_nanos(read(libc::CLOCK_PROCESS_CPUTIME_ID).map_or(0, nanos))
}

/// CPU time this thread has used, in nanoseconds (0 when unknown).
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID).map_or(0, nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_move_forward() {
        let (a, c) = (coarse_ms(), thread_cpu_ns());
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(a > 0);
        assert!(coarse_ms() >= a);
        assert!(thread_cpu_ns() > c);
    }
}
