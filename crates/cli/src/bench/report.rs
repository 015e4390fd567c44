//! The results as text: an aligned markdown table, the headline ratios with
//! their goals (met, missed or not measured), the machine and settings above
//! them; and as JSON.

use std::fmt::Write as _;

use super::machine::Machine;
use super::run::MAX_DEPTH;
use super::stats::Record;
use crate::goals::{self, Verdict};

/// Fills `p50_vs_baseline` of every row that names a baseline measured at
/// the same size.
pub(crate) fn attach_ratios(records: &mut [Record]) {
    let bases: Vec<(String, usize, f64)> = records
        .iter()
        .filter(|r| r.baseline.is_none())
        .map(|r| (r.transport.clone(), r.size, r.p50_us))
        .collect();
    for r in records.iter_mut() {
        let Some(b) = &r.baseline else { continue };
        r.p50_vs_baseline = bases
            .iter()
            .find(|(t, s, _)| t == b && *s == r.size)
            .and_then(|&(_, _, p50)| (p50 > 0.0).then(|| r.p50_us / p50));
    }
}

/// The whole report: title, machine, settings, table, headline.
pub(crate) fn document(machine: &Machine, settings: &[String], records: &[Record]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# shmlink bench\n");
    let _ = writeln!(s, "- date: {}", machine.date);
    let _ = writeln!(
        s,
        "- machine: {}, {} CPUs, {}",
        machine.cpu, machine.cores, machine.kernel
    );
    for line in settings {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(s, "\n## Results\n");
    s.push_str(&table(records));
    let _ = writeln!(
        s,
        "\nLatency is per call, CPU time per sequential call. pipelined/s keeps {MAX_DEPTH} calls \
         in flight, or N as in (dN) where {MAX_DEPTH} responses would not fit in 48 KiB. \
         p50 ÷ base: shm sleep against baseline-futex, shm spin/busy against baseline-spin, \
         unix and tcp against baseline-unix, at the same size. idle server CPU %: the \
         server process's CPU, in percent of one core, while one session stays open and \
         idle for 0.3 s after a call (one 10 ms clock tick is about 3%)."
    );
    if records.iter().any(lent) {
        let _ = writeln!(s, "\n## Paths\n");
        s.push_str(&paths_table(records));
    }
    let _ = writeln!(s, "\n## Headline\n");
    s.push_str(&headline(records));
    s
}

/// Whether a record's requests were lent from the arena.
fn lent(r: &Record) -> bool {
    matches!(r.path.as_str(), "arena" | "loan")
}

/// Per size and transport, each path's p50 and how it compares with the
/// copy path and with unix; the loan's fill time; memory growth.
fn paths_table(records: &[Record]) -> String {
    let header = [
        "transport",
        "wait",
        "size",
        "path",
        "p50 µs",
        "÷ copy",
        "unix copy ÷ this",
        "fill p50 µs",
        "64 B after an equal fill p50 µs",
        "memory growth MiB",
    ];
    let same = |r: &Record, path: &str, transport: &str, wait: &str| {
        records.iter().find(|o| {
            o.size == r.size
                && o.path == path
                && o.transport == transport
                && o.wait == wait
                && o.client == "rust"
        })
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .filter(|r| r.client == "rust" && r.path != "-" && r.transport != "tcp")
        .map(|r| {
            let copy = same(r, "copy", &r.transport, &r.wait);
            let unix = same(r, "copy", "unix", "-");
            vec![
                r.transport.clone(),
                r.wait.clone(),
                human_size(r.size),
                r.path.clone(),
                us(r.p50_us),
                copy.map_or_else(dash, |c| format!("{:.2}", r.p50_us / c.p50_us)),
                unix.map_or_else(dash, |u| format!("{:.1}", u.p50_us / r.p50_us)),
                r.fill_p50_us.map_or_else(dash, us),
                r.control_p50_us.map_or_else(dash, us),
                r.mem_growth_mib.map_or_else(dash, |m| format!("{m:.1}")),
            ]
        })
        .collect();
    render(&header, &rows, |col| col >= 4)
}

/// The results table.
pub(crate) fn table(records: &[Record]) -> String {
    let header = [
        "transport",
        "wait",
        "size",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "calls/s",
        "pipelined/s",
        "sessions/s",
        "client CPU µs/call",
        "server CPU µs/call",
        "idle server CPU %",
        "p50 ÷ base",
    ];
    let loaded = records.iter().any(|r| r.load != "quiet");
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let mut row = vec![
                match (r.client.as_str(), lent(r)) {
                    ("rust", false) => r.transport.clone(),
                    ("rust", true) => format!("{} ({})", r.transport, r.path),
                    (c, _) => format!("{} ({} client)", r.transport, c.to_uppercase()),
                },
                r.wait.clone(),
                human_size(r.size),
                us(r.p50_us),
                us(r.p99_us),
                us(r.p999_us),
                count(r.calls_per_s),
                pipelined(r),
                r.sessions_per_s.map_or_else(dash, count),
                us(r.client_cpu_us_per_call),
                r.server_cpu_us_per_call.map_or_else(dash, us),
                r.idle_server_cpu_pct
                    .map_or_else(dash, |v| format!("{v:.0}")),
                r.p50_vs_baseline.map_or_else(dash, |v| format!("{v:.2}")),
            ];
            if loaded {
                row.insert(0, r.load.clone());
            }
            row
        })
        .collect();
    let mut header = header.to_vec();
    let first_number = if loaded {
        header.insert(0, "load");
        3
    } else {
        2
    };
    // Text columns left-aligned, numbers right-aligned.
    render(&header, &rows, |col| col >= first_number)
}

/// The ratios the project must meet, each met, missed, or not measured
/// with what is missing and how to get it; then how many of each.
pub(crate) fn headline(records: &[Record]) -> String {
    let p50 = |t: &str, w: &str, size: usize| need(records, t, w, size).map(|r| r.p50_us);
    let shm_spin = |size| p50("shm", "spin", size);
    let spin64 = || need(records, "shm", "spin", 64);
    let checks = [
        (
            "shm sleep 64 B p50 ÷ baseline-futex p50",
            ratio(p50("shm", "sleep", 64), p50("baseline-futex", "-", 64)),
            Goal::AtMost(1.3),
        ),
        (
            "shm busy 64 B p50 ÷ baseline-spin p50",
            ratio(p50("shm", "busy", 64), p50("baseline-spin", "-", 64)),
            Goal::AtMost(2.0),
        ),
        (
            "shm spin 64 B p50 ÷ baseline-spin p50",
            ratio(shm_spin(64), p50("baseline-spin", "-", 64)),
            Goal::AtMost(2.0),
        ),
        (
            "unix p50 ÷ shm spin p50 at 64 B",
            ratio(p50("unix", "-", 64), shm_spin(64)),
            Goal::AtLeast(20.0),
        ),
        (
            "unix p50 ÷ shm spin p50 at 2 KiB",
            ratio(p50("unix", "-", 2048), shm_spin(2048)),
            Goal::AtLeast(20.0),
        ),
        (
            "unix p50 ÷ shm spin p50 at 1 MiB",
            ratio(p50("unix", "-", 1 << 20), shm_spin(1 << 20)),
            Goal::AtLeast(3.0),
        ),
        (
            "shm spin 64 B pipelined calls/s",
            figure(spin64(), "pipelined calls/s", |r| r.pipelined_calls_per_s),
            Goal::AtLeast(3_000_000.0),
        ),
        (
            // Issue 18: connect, one call, close.
            "shm spin 64 B sessions/s",
            figure(spin64(), "sessions/s", |r| r.sessions_per_s),
            Goal::AtLeast(20_000.0),
        ),
        (
            "shm spin 64 B sessions/s ÷ unix 64 B sessions/s",
            ratio(
                figure(spin64(), "sessions/s", |r| r.sessions_per_s),
                figure(need(records, "unix", "-", 64), "sessions/s", |r| {
                    r.sessions_per_s
                }),
            ),
            Goal::AtLeast(1.0),
        ),
        (
            // One clock tick over the window is ~3%: "no CPU" within resolution.
            "idle shm session (spin), server CPU %",
            figure(spin64(), "idle server CPU", |r| r.idle_server_cpu_pct),
            Goal::AtMost(3.5),
        ),
    ];
    let c_checks = [64, 2048].map(|size| {
        (
            format!(
                "C client p50 ÷ Rust client p50, shm spin {}",
                human_size(size)
            ),
            c_over_rust(records, size),
            Goal::AtMost(1.1),
        )
    });
    let checks = checks
        .into_iter()
        .map(|(n, v, g)| (n.to_string(), v, g))
        .chain(c_checks);
    let mut verdicts = Vec::new();
    let rows: Vec<Vec<String>> = checks
        .map(|(name, value, goal)| {
            let verdict = Verdict::of(value.as_ref().ok().map(|&v| goal.met(v)));
            verdicts.push(verdict);
            let shown = value.map_or_else(|missing| missing, |v| goal.show(v));
            vec![name, shown, goal.to_string(), verdict.cell().to_string()]
        })
        .collect();
    let mut s = render(&["check", "value", "goal", "result"], &rows, |col| {
        col == 1 || col == 2
    });
    let _ = writeln!(s, "\n{}", goals::summary(&verdicts));
    s
}

/// What a goal needs when the C client did not run, and how to get it.
pub(crate) const C_CLIENT_MISSING: &str = "the C client was not run: pass --c-client \
    target/examples/bench-c-client/shmlink-c-bench (built by make examples \
    PREFIX=$PWD/target/stage)";

/// `a ÷ b`, or what is missing for either.
fn ratio(a: Result<f64, String>, b: Result<f64, String>) -> Result<f64, String> {
    match (a, b) {
        (Ok(a), Ok(b)) if b > 0.0 => Ok(a / b),
        (Ok(_), Ok(_)) => Err("the divisor measured 0: run again".to_string()),
        (Err(a), Err(b)) if a != b => {
            // `unix 1 MiB and shm spin 1 MiB not measured: add 1MiB to --sizes`
            const SEP: &str = " not measured: ";
            Err(match (a.split_once(SEP), b.split_once(SEP)) {
                (Some((x, how)), Some((y, same))) if how == same => {
                    format!("{x} and {y}{SEP}{how}")
                }
                _ => format!("{a}; {b}"),
            })
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

/// A figure of a point's record, or what is missing and how to get it.
fn figure(
    record: Result<&Record, String>,
    name: &str,
    get: impl Fn(&Record) -> Option<f64>,
) -> Result<f64, String> {
    let r = record?;
    get(r).ok_or_else(|| {
        let how = if r.pipelined_calls_per_s.is_none() {
            "a run with more --paths than copy measures sequential calls only: run with \
             --paths copy"
        } else if r.server_cpu_us_per_call.is_none() {
            "the server of --connect is not the bench's child: let shmlink bench spawn \
             its servers (no --connect)"
        } else {
            "not in this run"
        };
        format!(
            "{} {name} not measured: {how}",
            point_name(&r.transport, &r.wait, r.size)
        )
    })
}

/// The quiet machine's record of a point, or what is missing from the run
/// and how to get it.
fn need<'a>(
    records: &'a [Record],
    transport: &str,
    wait: &str,
    size: usize,
) -> Result<&'a Record, String> {
    if let Some(r) = find(records, transport, wait, size) {
        return Ok(r);
    }
    let baseline = transport.starts_with("baseline-");
    let how = if baseline && !records.iter().any(|r| r.transport.starts_with("baseline-")) {
        "the baselines were not run: run without --no-baselines (--connect and --matrix \
         leave them out)"
            .to_string()
    } else if !baseline && !records.iter().any(|r| r.transport == transport) {
        format!("add {transport} to --transports")
    } else if wait != "-"
        && !records
            .iter()
            .any(|r| r.transport == transport && r.wait == wait)
    {
        format!("add {wait} to --waits")
    } else if !records.iter().any(|r| r.load == "quiet") {
        "add quiet to --loads".to_string()
    } else if !records.iter().any(|r| r.size == size) {
        format!("add {} to --sizes", size_arg(size))
    } else if !baseline && !records.iter().any(|r| r.transport == transport && !lent(r)) {
        "add copy to --paths".to_string()
    } else {
        "this run has no such point".to_string()
    };
    Err(format!(
        "{} not measured: {how}",
        point_name(transport, wait, size)
    ))
}

/// `shm spin 64 B`, `unix 2 KiB`.
fn point_name(transport: &str, wait: &str, size: usize) -> String {
    match wait {
        "-" => format!("{transport} {}", human_size(size)),
        w => format!("{transport} {w} {}", human_size(size)),
    }
}

/// A size as `--sizes` takes it: `64B`, `2KiB`, `1MiB`.
fn size_arg(n: usize) -> String {
    human_size(n).replace(' ', "")
}

/// A figure's goal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Goal {
    AtMost(f64),
    AtLeast(f64),
}

impl Goal {
    pub(crate) fn met(self, v: f64) -> bool {
        match self {
            Goal::AtMost(g) => v <= g,
            Goal::AtLeast(g) => v >= g,
        }
    }

    /// Ratios with two decimals, rates as whole numbers.
    pub(crate) fn show(self, v: f64) -> String {
        let (Goal::AtMost(g) | Goal::AtLeast(g)) = self;
        if g >= 1000.0 {
            count(v)
        } else {
            format!("{v:.2}")
        }
    }
}

impl std::fmt::Display for Goal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Goal::AtMost(g) => write!(f, "≤ {}", self.show(g)),
            Goal::AtLeast(g) => write!(f, "≥ {}", self.show(g)),
        }
    }
}

/// The quiet machine's record of a point (the headline's figures).
fn find<'a>(records: &'a [Record], transport: &str, wait: &str, size: usize) -> Option<&'a Record> {
    records.iter().find(|r| {
        r.load == "quiet"
            && r.transport == transport
            && r.wait == wait
            && r.size == size
            && r.client == "rust"
            && !lent(r)
    })
}

/// The C client's p50 over the Rust client's, both shm with the default
/// wait; or what is missing and how to get it.
fn c_over_rust(records: &[Record], size: usize) -> Result<f64, String> {
    let rust = need(records, "shm", "spin", size)?;
    if !records.iter().any(|r| r.client == "c") {
        return Err(C_CLIENT_MISSING.to_string());
    }
    let c = records
        .iter()
        .find(|r| r.client == "c" && r.transport == "shm" && r.wait == "spin" && r.size == size)
        .ok_or_else(|| {
            format!(
                "C client shm spin {} not measured: this run has no such point",
                human_size(size)
            )
        })?;
    ratio(Ok(c.p50_us), Ok(rust.p50_us))
}

/// An aligned markdown table; `numeric(col)` columns are right-aligned.
pub(crate) fn render(
    header: &[&str],
    rows: &[Vec<String>],
    numeric: impl Fn(usize) -> bool,
) -> String {
    let width = |col: usize| {
        rows.iter()
            .map(|r| r[col].chars().count())
            .chain([header[col].chars().count(), 3])
            .max()
            .unwrap_or(3)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: Vec<String>| {
        let mut s = String::from("|");
        for (col, cell) in cells.iter().enumerate() {
            let pad = widths[col].saturating_sub(cell.chars().count());
            if numeric(col) {
                let _ = write!(s, " {}{cell} |", " ".repeat(pad));
            } else {
                let _ = write!(s, " {cell}{} |", " ".repeat(pad));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    let rule = widths
        .iter()
        .enumerate()
        .map(|(col, &w)| {
            if numeric(col) {
                format!("{}:", "-".repeat(w - 1))
            } else {
                "-".repeat(w)
            }
        })
        .collect();
    out.push_str(&line(rule));
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

fn pipelined(r: &Record) -> String {
    match (r.pipelined_calls_per_s, r.pipeline_depth) {
        (Some(v), Some(d)) if d != MAX_DEPTH => format!("{} (d{d})", count(v)),
        (Some(v), _) => count(v),
        (None, _) => dash(),
    }
}

pub(crate) fn dash() -> String {
    "-".to_string()
}

/// Microseconds with 2 significant decimals for small values.
pub(crate) fn us(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A whole number with thousands separators.
fn count(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `64 B`, `2 KiB`, `1 MiB`, or the byte count when not a whole multiple.
pub(crate) fn human_size(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// The records as pretty JSON.
pub(crate) fn json(records: &[Record]) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(records)?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn rec(transport: &str, wait: &str, size: usize, p50: f64) -> Record {
        Record {
            path: "copy".into(),
            fill_p50_us: None,
            control_p50_us: None,
            mem_growth_mib: None,
            transport: transport.into(),
            client: "rust".into(),
            load: "quiet".into(),
            wait: wait.into(),
            size,
            reply_size: size / 8,
            calls: 10,
            p50_us: p50,
            p99_us: p50,
            p999_us: p50,
            calls_per_s: 1e6 / p50,
            pipelined_calls_per_s: None,
            pipeline_depth: None,
            sessions_per_s: None,
            client_cpu_us_per_call: 1.0,
            server_cpu_us_per_call: None,
            idle_server_cpu_pct: None,
            baseline: None,
            p50_vs_baseline: None,
            p50_spread: None,
            hog_cpu_pct: None,
        }
    }

    #[test]
    fn ratios_and_headline() {
        let mut shm = rec("shm", "spin", 64, 0.6);
        shm.baseline = Some("baseline-spin".into());
        shm.pipelined_calls_per_s = Some(4e6);
        shm.pipeline_depth = Some(MAX_DEPTH);
        let mut records = vec![
            rec("baseline-spin", "-", 64, 0.4),
            shm,
            rec("unix", "-", 64, 15.0),
        ];
        attach_ratios(&mut records);
        assert_eq!(records[1].p50_vs_baseline, Some(0.6 / 0.4));
        let h = headline(&records);
        let row = h
            .lines()
            .find(|l| l.contains("shm spin 64 B p50"))
            .expect("spin row");
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[2..5], ["1.50", "≤ 2.00", "met"], "{h}");
        assert!(h.contains("| unix p50 ÷ shm spin p50 at 64 B "), "{h}");
        assert!(h.contains("25.00"), "{h}");
        assert!(h.contains("4,000,000"), "{h}");
        assert!(h.contains("not measured"), "{h}");
        assert!(!h.contains("**missed**"), "{h}");
        assert!(
            h.ends_with("\nGoals: 3 met, 0 missed, 9 not measured.\n"),
            "{h}"
        );
        let t = table(&records);
        assert_eq!(t.lines().count(), 5);
        assert!(t
            .lines()
            .all(|l| l.chars().count() == t.lines().next().map_or(0, |f| f.chars().count())));
    }

    /// A goal whose point did not run reads "not measured" with what is
    /// missing and how to get it, and counts as such, never as missed.
    #[test]
    fn goals_not_measured_say_what_is_missing() {
        let mut slow = rec("shm", "spin", 64, 1.0);
        slow.idle_server_cpu_pct = Some(50.0);
        let records = vec![rec("baseline-spin", "-", 64, 0.4), slow];
        let h = headline(&records);
        let cells = |name: &str| -> Vec<String> {
            h.lines()
                .find(|l| l.starts_with(&format!("| {name} ")))
                .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
                .unwrap_or_else(|| panic!("no row {name}: {h}"))
        };
        let spin = cells("shm spin 64 B p50 ÷ baseline-spin p50");
        assert_eq!(spin[2..5], ["2.50", "≤ 2.00", "**missed**"], "{h}");
        let idle = cells("idle shm session (spin), server CPU %");
        assert_eq!(idle[4], "**missed**", "{h}");
        let futex = cells("shm sleep 64 B p50 ÷ baseline-futex p50");
        assert_eq!(
            futex[2],
            "shm sleep 64 B not measured: add sleep to --waits; \
             baseline-futex 64 B not measured: this run has no such point"
        );
        assert_eq!(futex[4], "not measured", "{h}");
        let unix = cells("unix p50 ÷ shm spin p50 at 2 KiB");
        assert_eq!(
            unix[2],
            "unix 2 KiB not measured: add unix to --transports; \
             shm spin 2 KiB not measured: add 2KiB to --sizes"
        );
        let both = ratio(
            need(&records, "shm", "spin", 1 << 20).map(|r| r.p50_us),
            need(&records, "baseline-spin", "-", 1 << 20).map(|r| r.p50_us),
        );
        assert_eq!(
            both.unwrap_err(),
            "shm spin 1 MiB and baseline-spin 1 MiB not measured: add 1MiB to --sizes"
        );
        let c = cells("C client p50 ÷ Rust client p50, shm spin 64 B");
        assert_eq!(c[2..5], [C_CLIENT_MISSING, "≤ 1.10", "not measured"], "{h}");
        let pipelined = cells("shm spin 64 B pipelined calls/s");
        assert!(pipelined[2].starts_with("shm spin 64 B pipelined calls/s not measured: "));
        assert!(
            h.ends_with("\nGoals: 0 met, 2 missed, 10 not measured.\n"),
            "{h}"
        );
        // No baselines at all: the flag that left them out.
        let h = headline(&[rec("shm", "sleep", 64, 1.0)]);
        assert!(
            h.contains("baseline-futex 64 B not measured: the baselines were not run: run without --no-baselines"),
            "{h}"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(count(1_234_567.4), "1,234,567");
        assert_eq!(count(999.0), "999");
        assert_eq!(human_size(2048), "2 KiB");
        assert_eq!(human_size(1 << 20), "1 MiB");
        assert_eq!(human_size(1000), "1000 B");
        assert_eq!(us(0.456), "0.46");
        assert_eq!(us(123.4), "123");
    }
}
