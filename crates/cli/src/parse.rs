//! Parsers for command-line values: sizes, durations, octal modes, ratios.

use std::time::Duration;

/// A byte count: `2048`, `2k`, `2KiB`, `1M`, `1MiB` (binary multiples).
pub(crate) fn size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: usize = num
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count (e.g. 64, 2KiB, 1MiB)"))?;
    let mult: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        other => return Err(format!("unknown unit {other:?} in {s:?} (use B, KiB, MiB)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A positive number of seconds, possibly fractional: `0.05`, `2`.
pub(crate) fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("{s:?} must be greater than zero"));
    }
    Duration::try_from_secs_f64(v).map_err(|e| format!("{s:?}: {e}"))
}

/// A file mode in octal: `0660`, `660`, `0o660`.
pub(crate) fn octal_mode(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let digits = t.strip_prefix("0o").unwrap_or(t);
    let m = u32::from_str_radix(digits, 8)
        .map_err(|_| format!("{s:?} is not an octal mode such as 0660"))?;
    if m > 0o777 {
        return Err(format!("{s:?} has bits outside 0777"));
    }
    Ok(m)
}

/// An exact decimal ratio between 0 and 1, kept as a fraction so that
/// ⌈R × len⌉ has no rounding error (0.1 × 30 is exactly 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ratio {
    num: u64,
    den: u64,
}

impl Ratio {
    /// The default reply ratio of the echo server: one eighth.
    pub(crate) const EIGHTH: Ratio = Ratio { num: 1, den: 8 };

    /// ⌈self × len⌉, never more than `len`.
    #[inline]
    pub(crate) fn ceil_of(self, len: usize) -> usize {
        // The echo server computes this for every request: 64-bit arithmetic
        // unless the product overflows (a 128-bit division is a library call).
        let n = match (len as u64).checked_mul(self.num) {
            Some(p) => u128::from(p.div_ceil(self.den)),
            None => (len as u128 * u128::from(self.num)).div_ceil(u128::from(self.den)),
        };
        usize::try_from(n).unwrap_or(len).min(len)
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.num as f64 / self.den as f64)
    }
}

/// Parses a ratio: a decimal from 0 to 1 with at most 9 fractional digits.
pub(crate) fn ratio(s: &str) -> Result<Ratio, String> {
    let bad = || format!("{s:?} is not a decimal ratio from 0 to 1 (e.g. 0.125)");
    let t = s.trim();
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(bad());
    }
    if frac.len() > 9 {
        return Err(format!("{s:?} has more than 9 decimal places"));
    }
    let den = 10u64.pow(frac.len() as u32);
    let int: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let frac: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| bad())?
    };
    let num = int
        .checked_mul(den)
        .and_then(|v| v.checked_add(frac))
        .ok_or_else(bad)?;
    if num > den {
        return Err(format!("{s:?} is greater than 1"));
    }
    // In lowest terms (0.125 is 1/8): equal ratios compare equal, and
    // `ceil_of` stays on its 64-bit path for longer lengths.
    let g = gcd(num, den);
    Ok(Ratio {
        num: num / g,
        den: den / g,
    })
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_units() {
        assert_eq!(size("64"), Ok(64));
        assert_eq!(size("2KiB"), Ok(2048));
        assert_eq!(size("1m"), Ok(1 << 20));
        assert!(size("12 parsecs").is_err());
        assert!(size("").is_err());
    }

    #[test]
    fn ratios_are_exact() {
        let r = ratio("0.1").expect("0.1");
        assert_eq!(r.ceil_of(30), 3);
        assert_eq!(r.ceil_of(31), 4);
        assert_eq!(ratio("0.125").expect("eighth"), Ratio::EIGHTH);
        assert_eq!(ratio("0.50").expect("half"), Ratio { num: 1, den: 2 });
        assert_eq!(Ratio::EIGHTH.ceil_of(64), 8);
        assert_eq!(Ratio::EIGHTH.ceil_of(1), 1);
        assert_eq!(Ratio::EIGHTH.ceil_of(0), 0);
        let r = ratio("0.3").expect("0.3");
        assert_eq!(r.ceil_of(10), 3);
        assert_eq!(r.ceil_of(11), 4);
        // len × num overflows 64 bits: the 128-bit path, still exact.
        let big = usize::MAX;
        let exact = (big as u128 * 3).div_ceil(10) as usize;
        assert_eq!(r.ceil_of(big), exact);
        assert_eq!(Ratio::EIGHTH.ceil_of(65), 9);
        assert_eq!(ratio("1").expect("one").ceil_of(7), 7);
        assert_eq!(ratio("0").expect("zero").ceil_of(7), 0);
        assert!(ratio("1.5").is_err());
        assert!(ratio("-0.5").is_err());
        assert!(ratio(".").is_err());
    }

    #[test]
    fn modes_and_seconds() {
        assert_eq!(octal_mode("0660"), Ok(0o660));
        assert!(octal_mode("0999").is_err());
        assert!(octal_mode("01777").is_err());
        assert_eq!(seconds("0.05"), Ok(Duration::from_millis(50)));
        assert!(seconds("0").is_err());
        assert!(seconds("nan").is_err());
    }
}
