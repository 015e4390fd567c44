//! The wait matrix of `shmlink bench --matrix`: per load and size, every
//! strategy's p50 over shm beside a Unix socket's, the default strategy's
//! p50 ÷ the best one's, and a Unix socket's p50 ÷ the default's, with the
//! goals of both.

use std::fmt::Write as _;

use shmlink::WaitStrategy;

use super::report::{dash, human_size, render, us, Goal, C_CLIENT_MISSING};
use super::stats::Record;
use crate::goals::{self, Verdict};

/// The default strategy's p50 may be at most this many times the best's.
const DEFAULT_OVER_BEST: Goal = Goal::AtMost(1.2);
/// A Unix socket's p50 must be at least this many times the default's.
const UNIX_OVER_DEFAULT: Goal = Goal::AtLeast(1.5);

/// One cell of the matrix: a load and a size.
struct Cell<'a> {
    load: &'a str,
    size: usize,
    /// p50 of each strategy over shm (Rust client), in `waits` order.
    shm: Vec<Option<f64>>,
    /// How far each strategy's p50 moved between rounds (max ÷ min).
    spread: Vec<Option<f64>>,
    /// Busy load: the hog's share of one CPU under each strategy.
    hog: Vec<Option<f64>>,
    unix: Option<f64>,
    /// The C client's p50 with the default strategy.
    c: Option<f64>,
}

impl Cell<'_> {
    /// The best strategy's p50 and its name.
    /// The best strategy: its p50, name and index.
    fn best<'w>(&self, waits: &'w [String]) -> Option<(f64, &'w str, usize)> {
        self.shm
            .iter()
            .zip(waits)
            .enumerate()
            .filter_map(|(i, (p, w))| p.map(|p| (p, w.as_str(), i)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// The matrix section: the table and the goals.
pub(crate) fn section(records: &[Record]) -> String {
    let default = WaitStrategy::default().to_string();
    let waits = strategies(records);
    let cells = cells(records, &waits);
    let Some(d) = waits.iter().position(|w| *w == default) else {
        let mut s =
            format!("\n## Wait matrix\n\nThe default strategy ({default}) was not measured.\n\n");
        s.push_str(&goals_table(records, &default, [None, None, None]));
        return s;
    };
    let mut header: Vec<String> = waits.iter().map(|w| format!("shm {w} p50 µs")).collect();
    header.splice(0..0, ["load".to_string(), "size".to_string()]);
    header.extend(
        [
            "unix p50 µs",
            "C client (default) p50 µs",
            "best",
            "default ÷ best",
            "C ÷ best",
            "unix ÷ default",
            "rounds max ÷ min: default / best",
            "hog CPU %: default / best",
        ]
        .map(String::from),
    );
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut worst_default: Option<(f64, String)> = None;
    let mut worst_c: Option<(f64, String)> = None;
    let mut worst_unix: Option<(f64, String)> = None;
    let mut beyond_noise = 0usize;
    let mut rows = Vec::new();
    for cell in &cells {
        let best = cell.best(&waits);
        let name = format!("{} {}", cell.load, human_size(cell.size));
        let over_best = ratio(cell.shm[d], best.map(|b| b.0));
        let c_over_best = ratio(cell.c, best.map(|b| b.0));
        let unix_over = ratio(cell.unix, cell.shm[d]);
        keep(&mut worst_default, over_best, &name, |a, b| a > b);
        keep(&mut worst_c, c_over_best, &name, |a, b| a > b);
        keep(&mut worst_unix, unix_over, &name, |a, b| a < b);
        let mut row = vec![cell.load.to_string(), human_size(cell.size)];
        row.extend(cell.shm.iter().map(|p| p.map_or_else(dash, us)));
        row.push(cell.unix.map_or_else(dash, us));
        row.push(cell.c.map_or_else(dash, us));
        row.push(best.map_or_else(dash, |b| b.1.to_string()));
        for v in [over_best, c_over_best, unix_over] {
            row.push(v.map_or_else(dash, |v| format!("{v:.2}")));
        }
        let best_spread = best.and_then(|b| cell.spread[b.2]);
        let show = |s: Option<f64>| s.map_or_else(dash, |s| format!("{s:.2}"));
        row.push(format!("{} / {}", show(cell.spread[d]), show(best_spread)));
        let pct = |s: Option<f64>| s.map_or_else(dash, |s| format!("{s:.0}"));
        row.push(match best {
            Some(b) if cell.hog[d].is_some() => {
                format!("{} / {}", pct(cell.hog[d]), pct(cell.hog[b.2]))
            }
            _ => dash(),
        });
        // A miss larger than how far the default's own p50 moved between
        // rounds is not noise.
        if over_best.is_some_and(|v| !DEFAULT_OVER_BEST.met(v) && v > cell.spread[d].unwrap_or(1.0))
        {
            beyond_noise += 1;
        }
        rows.push(row);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut s = String::from("\n## Wait matrix\n\n");
    s.push_str(&render(&header, &rows, |col| col >= 2));
    let _ = writeln!(
        s,
        "\np50 of sequential calls, the median across rounds. default: `{default}` on both \
         sides. best: the strategy with the lowest p50 in the same cell. busy: a process \
         started by the bench spins on the servers' CPU while the cell runs. rounds max ÷ \
         min: how far the same point's p50 moved between rounds, the noise a ratio of two \
         points in the cell has to be read against. hog CPU %: how much of one CPU the hog \
         got while the point ran, what the strategy left to the other work on the machine.\n"
    );
    s.push_str(&goals_table(
        records,
        &default,
        [worst_default, worst_c, worst_unix],
    ));
    let _ = writeln!(
        s,
        "\nCells where the default misses its goal by more than its own p50 moved between \
         rounds: {beyond_noise} of {}.",
        cells.len()
    );
    s
}

/// The matrix's goals, from the worst cell of each (default ÷ best, C ÷
/// best, unix ÷ default): met, missed, or not measured with what is missing
/// and how to get it; then how many of each.
fn goals_table(records: &[Record], default: &str, worst: [Option<(f64, String)>; 3]) -> String {
    let no_default = format!("shm {default} not measured: add {default} to --waits");
    let has = |f: &dyn Fn(&Record) -> bool| records.iter().any(f);
    let default_run = has(&|r| r.transport == "shm" && r.wait == default);
    let missing = [
        no_default.clone(),
        if !has(&|r| r.client == "c") {
            C_CLIENT_MISSING.to_string()
        } else if !default_run {
            no_default.clone()
        } else {
            "no cell has both the C client and a strategy's p50".to_string()
        },
        if !has(&|r| r.transport == "unix") {
            "unix not measured: add unix to --transports".to_string()
        } else if !default_run {
            no_default.clone()
        } else {
            format!("no cell has both unix and shm {default}")
        },
    ];
    let names = [
        format!("shm {default} p50 ÷ best strategy's p50, every cell (worst)"),
        "C client p50 ÷ best strategy's p50, every cell (worst)".to_string(),
        format!("unix p50 ÷ shm {default} p50, every cell (worst)"),
    ];
    let goals = [DEFAULT_OVER_BEST, DEFAULT_OVER_BEST, UNIX_OVER_DEFAULT];
    let mut verdicts = Vec::new();
    let rows: Vec<Vec<String>> = worst
        .into_iter()
        .zip(missing)
        .zip(names.into_iter().zip(goals))
        .map(|((worst, missing), (check, goal))| {
            let verdict = Verdict::of(worst.as_ref().map(|(v, _)| goal.met(*v)));
            verdicts.push(verdict);
            let (value, at) = match worst {
                Some((v, at)) => (goal.show(v), at),
                None => (missing, dash()),
            };
            vec![check, value, at, goal.to_string(), verdict.cell().into()]
        })
        .collect();
    let mut s = render(&["check", "value", "at", "goal", "result"], &rows, |col| {
        col == 1 || col == 3
    });
    let _ = writeln!(s, "\n{}", goals::summary(&verdicts));
    s
}

/// Keeps the worst value seen (by `worse`) and where.
fn keep(
    worst: &mut Option<(f64, String)>,
    v: Option<f64>,
    at: &str,
    worse: impl Fn(f64, f64) -> bool,
) {
    if let Some(v) = v {
        if worst.as_ref().is_none_or(|(w, _)| worse(v, *w)) {
            *worst = Some((v, at.to_string()));
        }
    }
}

/// The strategies measured over shm, in the order they ran.
fn strategies(records: &[Record]) -> Vec<String> {
    let mut waits: Vec<String> = Vec::new();
    for r in records.iter().filter(|r| r.transport == "shm") {
        if !waits.contains(&r.wait) {
            waits.push(r.wait.clone());
        }
    }
    waits
}

/// The cells, by load (in the order they ran) and size.
fn cells<'a>(records: &'a [Record], waits: &[String]) -> Vec<Cell<'a>> {
    let mut keys: Vec<(&str, usize)> = Vec::new();
    for r in records.iter().filter(|r| r.path == "copy") {
        if !keys.contains(&(r.load.as_str(), r.size)) {
            keys.push((r.load.as_str(), r.size));
        }
    }
    let find = |load: &str, size: usize, transport: &str, client: &str, wait: Option<&str>| {
        records.iter().find(|r| {
            r.load == load
                && r.size == size
                && r.transport == transport
                && r.client == client
                && r.path == "copy"
                && wait.is_none_or(|w| r.wait == w)
        })
    };
    let p50 = |load, size, transport, client, wait| {
        find(load, size, transport, client, wait).map(|r| r.p50_us)
    };
    keys.into_iter()
        .map(|(load, size)| Cell {
            load,
            size,
            shm: waits
                .iter()
                .map(|w| p50(load, size, "shm", "rust", Some(w)))
                .collect(),
            spread: waits
                .iter()
                .map(|w| find(load, size, "shm", "rust", Some(w)).and_then(|r| r.p50_spread))
                .collect(),
            hog: waits
                .iter()
                .map(|w| find(load, size, "shm", "rust", Some(w)).and_then(|r| r.hog_cpu_pct))
                .collect(),
            unix: p50(load, size, "unix", "rust", None),
            c: p50(load, size, "shm", "c", None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::rec;
    use super::*;

    fn loaded(mut r: Record, load: &str) -> Record {
        r.load = load.into();
        r
    }

    /// Per cell: the best strategy, the default's p50 over it, a Unix
    /// socket's over the default's; the goals name the worst cell.
    #[test]
    fn cells_ratios_and_worst() {
        let records = vec![
            rec("shm", "sleep", 64, 30.0),
            rec("shm", "spin", 64, 0.3),
            rec("shm", "busy", 64, 0.25),
            rec("unix", "-", 64, 40.0),
            loaded(rec("shm", "sleep", 64, 20.0), "busy"),
            loaded(rec("shm", "spin", 64, 10.0), "busy"),
            loaded(rec("shm", "busy", 64, 12.0), "busy"),
            loaded(rec("unix", "-", 64, 12.0), "busy"),
        ];
        let s = section(&records);
        let row = |load: &str| {
            s.lines()
                .find(|l| l.starts_with(&format!("| {load} ")))
                .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
                .expect("row")
        };
        let quiet = row("quiet");
        assert_eq!(quiet[8..10], ["busy", "1.20"], "{s}");
        assert_eq!(quiet[11], "133.33", "{s}");
        let busy = row("busy");
        assert_eq!(busy[8..10], ["spin", "1.00"], "{s}");
        assert_eq!(busy[11], "1.20", "{s}");
        let check = |name: &str| {
            s.lines()
                .find(|l| l.contains(name))
                .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
                .expect("check")
        };
        assert_eq!(
            check("÷ best strategy's p50, every cell")[2..6],
            ["1.20", "quiet 64 B", "≤ 1.20", "met"]
        );
        assert_eq!(
            check("unix p50 ÷ shm spin p50")[2..6],
            ["1.20", "busy 64 B", "≥ 1.50", "**missed**"]
        );
        // No C client in this run: not measured, saying how to get it.
        assert_eq!(
            check("C client p50 ÷ best")[2..6],
            [C_CLIENT_MISSING, "-", "≤ 1.20", "not measured"]
        );
        assert!(
            s.contains("\nGoals: 1 met, 1 missed, 1 not measured.\n\nCells where"),
            "{s}"
        );
        // Without the default strategy: every goal not measured, and why.
        let s = section(&[rec("shm", "busy", 64, 1.0)]);
        assert!(
            s.contains(" shm spin not measured: add spin to --waits |"),
            "{s}"
        );
        assert!(
            s.contains("\nGoals: 0 met, 0 missed, 3 not measured.\n"),
            "{s}"
        );
    }
}
