//! The machine and date printed above the results.

use std::time::{SystemTime, UNIX_EPOCH};

/// What the results were measured on.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    /// CPU model from `/proc/cpuinfo`.
    pub(crate) cpu: String,
    /// CPUs this process may run on.
    pub(crate) cores: usize,
    /// Kernel name and release.
    pub(crate) kernel: String,
    /// When, in UTC.
    pub(crate) date: String,
}

/// Describes this machine, now.
pub(crate) fn describe() -> Machine {
    Machine {
        cpu: cpu_model().unwrap_or_else(|| "unknown CPU".to_string()),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: shmlink_sys::process::kernel(),
        date: utc_now(),
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    ["model name", "Hardware", "cpu model", "Processor"]
        .iter()
        .find_map(|key| {
            info.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
}

/// `YYYY-MM-DD HH:MM:SS UTC`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn describes_something() {
        let m = describe();
        assert!(m.cores >= 1);
        assert!(!m.kernel.trim().is_empty());
    }
}
