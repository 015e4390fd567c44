//! Conditional and range requests on a file (RFC 9110, sections 13 and
//! 14): its validators (a strong `ETag` from its modification time and
//! size, as nginx makes it, and `Last-Modified`), `If-None-Match` and
//! `If-Modified-Since` (304), `Range` with `If-Range` (206, or 416 for a
//! range past the end). One range per response: a request for several
//! gets the whole file, which HTTP allows.

use std::time::{SystemTime, UNIX_EPOCH};

/// The request headers that make a request conditional or partial (the
/// head keeps them only when one is there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Conditions {
    pub(crate) if_none_match: Option<String>,
    pub(crate) if_modified_since: Option<String>,
    pub(crate) range: Option<String>,
    pub(crate) if_range: Option<String>,
}

impl Conditions {
    /// Takes `name: value` if it is one of the four (`true`).
    pub(crate) fn take(this: &mut Option<Box<Conditions>>, name: &str, value: &[u8]) -> bool {
        // Most headers start with neither letter: one comparison each.
        if !matches!(name.as_bytes().first(), Some(b'i' | b'I' | b'r' | b'R')) {
            return false;
        }
        let slot: fn(&mut Conditions) -> &mut Option<String> =
            if name.eq_ignore_ascii_case("if-none-match") {
                |c| &mut c.if_none_match
            } else if name.eq_ignore_ascii_case("if-modified-since") {
                |c| &mut c.if_modified_since
            } else if name.eq_ignore_ascii_case("range") {
                |c| &mut c.range
            } else if name.eq_ignore_ascii_case("if-range") {
                |c| &mut c.if_range
            } else {
                return false;
            };
        let c = this.get_or_insert_with(Box::default);
        *slot(c) = Some(String::from_utf8_lossy(value).into_owned());
        true
    }
}

/// A file's validators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Validators {
    /// `"MTIME-SIZE"` in hexadecimal, quoted.
    pub(crate) etag: String,
    /// The modification time in whole seconds, as `Last-Modified` says it.
    pub(crate) modified: SystemTime,
}

impl Validators {
    pub(crate) fn of(size: u64, modified: SystemTime) -> Validators {
        let secs = modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Validators {
            etag: format!("\"{secs:x}-{size:x}\""),
            modified: UNIX_EPOCH + std::time::Duration::from_secs(secs),
        }
    }

    /// `Last-Modified`'s value.
    pub(crate) fn last_modified(&self) -> String {
        httpdate::fmt_http_date(self.modified)
    }
}

/// What to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// 200, the whole file.
    Full,
    /// 304: the client's copy is current.
    NotModified,
    /// 206: `len` bytes from `start`.
    Partial { start: u64, len: u64 },
    /// 416: the range starts past the end.
    Unsatisfiable,
}

/// The answer to `c` for a file of `size` bytes with validators `v`.
pub(crate) fn plan(c: Option<&Conditions>, v: &Validators, size: u64) -> Plan {
    let Some(c) = c else { return Plan::Full };
    if let Some(inm) = &c.if_none_match {
        // Weak comparison: W/"x" matches "x".
        let current = v.etag.as_str();
        let hit = inm
            .split(',')
            .map(str::trim)
            .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == current);
        if hit {
            return Plan::NotModified;
        }
    } else if let Some(ims) = &c.if_modified_since {
        if httpdate::parse_http_date(ims).is_ok_and(|since| v.modified <= since) {
            return Plan::NotModified;
        }
    }
    let Some(range) = &c.range else {
        return Plan::Full;
    };
    if let Some(ir) = &c.if_range {
        // Strong comparison for an entity tag; a date must be the exact
        // modification time.
        let current = if ir.starts_with('"') {
            *ir == v.etag
        } else {
            httpdate::parse_http_date(ir).is_ok_and(|d| d == v.modified)
        };
        if !current {
            return Plan::Full;
        }
    }
    byte_range(range, size)
}

/// A `Range` value of one byte range: `bytes=A-B`, `bytes=A-`, `bytes=-N`.
/// Anything else (another unit, several ranges, a malformed value) is
/// ignored: the whole file.
fn byte_range(value: &str, size: u64) -> Plan {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Plan::Full;
    };
    if spec.contains(',') {
        return Plan::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Plan::Full;
    };
    let num = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    match (num(a), b.is_empty(), num(b)) {
        // The last N bytes.
        (None, false, Some(n)) if a.is_empty() => {
            if n == 0 || size == 0 {
                Plan::Unsatisfiable
            } else {
                let len = n.min(size);
                Plan::Partial {
                    start: size - len,
                    len,
                }
            }
        }
        (Some(start), true, _) if start < size => Plan::Partial {
            start,
            len: size - start,
        },
        (Some(start), false, Some(end)) if start <= end => {
            if start >= size {
                Plan::Unsatisfiable
            } else {
                Plan::Partial {
                    start,
                    len: end.min(size - 1) - start + 1,
                }
            }
        }
        (Some(_), true, _) => Plan::Unsatisfiable,
        _ => Plan::Full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn v() -> Validators {
        Validators::of(1000, UNIX_EPOCH + Duration::from_millis(1_700_000_000_900))
    }

    fn with(f: impl FnOnce(&mut Conditions)) -> Conditions {
        let mut c = Conditions::default();
        f(&mut c);
        c
    }

    #[test]
    fn validators_are_nginx_shaped() {
        assert_eq!(v().etag, "\"6553f100-3e8\"");
        assert_eq!(v().last_modified(), "Tue, 14 Nov 2023 22:13:20 GMT");
    }

    #[test]
    fn conditional_requests() {
        let p = |c: Conditions| plan(Some(&c), &v(), 1000);
        assert_eq!(plan(None, &v(), 1000), Plan::Full);
        let etag = v().etag;
        assert_eq!(
            p(with(|c| c.if_none_match = Some(format!("\"x\", W/{etag}")))),
            Plan::NotModified
        );
        assert_eq!(
            p(with(|c| c.if_none_match = Some("*".into()))),
            Plan::NotModified
        );
        assert_eq!(
            p(with(|c| c.if_none_match = Some("\"x\"".into()))),
            Plan::Full
        );
        let lm = v().last_modified();
        assert_eq!(
            p(with(|c| c.if_modified_since = Some(lm.clone()))),
            Plan::NotModified
        );
        assert_eq!(
            p(with(
                |c| c.if_modified_since = Some("Mon, 13 Nov 2023 00:00:00 GMT".into())
            )),
            Plan::Full
        );
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(
            p(with(|c| {
                c.if_none_match = Some("\"x\"".into());
                c.if_modified_since = Some(lm.clone());
            })),
            Plan::Full
        );
    }

    #[test]
    fn ranges() {
        let r = |s: &str| plan(Some(&with(|c| c.range = Some(s.into()))), &v(), 1000);
        assert_eq!(r("bytes=0-99"), Plan::Partial { start: 0, len: 100 });
        assert_eq!(
            r("bytes=900-"),
            Plan::Partial {
                start: 900,
                len: 100
            }
        );
        assert_eq!(
            r("bytes=-10"),
            Plan::Partial {
                start: 990,
                len: 10
            }
        );
        assert_eq!(
            r("bytes=-5000"),
            Plan::Partial {
                start: 0,
                len: 1000
            }
        );
        assert_eq!(
            r("bytes=990-5000"),
            Plan::Partial {
                start: 990,
                len: 10
            }
        );
        assert_eq!(r("bytes=1000-"), Plan::Unsatisfiable);
        assert_eq!(r("bytes=1000-1001"), Plan::Unsatisfiable);
        assert_eq!(r("bytes=-0"), Plan::Unsatisfiable);
        for ignored in [
            "bytes=0-1,5-6",
            "lines=1-2",
            "bytes=5-1",
            "bytes=a-b",
            "bytes=-",
        ] {
            assert_eq!(r(ignored), Plan::Full, "{ignored}");
        }
        let etag = v().etag;
        let lm = v().last_modified();
        let ranged = |ir: String| {
            plan(
                Some(&with(|c| {
                    c.range = Some("bytes=0-0".into());
                    c.if_range = Some(ir);
                })),
                &v(),
                1000,
            )
        };
        assert_eq!(ranged(etag), Plan::Partial { start: 0, len: 1 });
        assert_eq!(ranged(lm), Plan::Partial { start: 0, len: 1 });
        assert_eq!(ranged("\"old\"".into()), Plan::Full);
        assert_eq!(ranged("Mon, 13 Nov 2023 00:00:00 GMT".into()), Plan::Full);
    }
}
