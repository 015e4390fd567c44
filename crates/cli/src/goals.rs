//! The one convention of every goals table: each goal is met, **missed**
//! (measured, and short of its target) or not measured (what it needs was
//! not at hand in this run: its value cell then says what is missing and
//! how to get it; it never counts as missed), and each table ends with one
//! line counting the three.

/// A goal's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Met,
    Missed,
    NotMeasured,
}

impl Verdict {
    /// Met or missed as measured; not measured without a figure.
    pub(crate) fn of(met: Option<bool>) -> Verdict {
        match met {
            Some(true) => Verdict::Met,
            Some(false) => Verdict::Missed,
            None => Verdict::NotMeasured,
        }
    }

    /// The table's result cell.
    pub(crate) fn cell(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "**missed**",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// The line under a goals table: `Goals: 3 met, 1 missed, 2 not measured.`
pub(crate) fn summary(verdicts: &[Verdict]) -> String {
    let n = |v: Verdict| verdicts.iter().filter(|&&x| x == v).count();
    format!(
        "Goals: {} met, {} missed, {} not measured.",
        n(Verdict::Met),
        n(Verdict::Missed),
        n(Verdict::NotMeasured)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_and_summary() {
        let v = [Some(true), Some(false), None, Some(true)].map(Verdict::of);
        assert_eq!(
            v.map(Verdict::cell),
            ["met", "**missed**", "not measured", "met"]
        );
        assert_eq!(summary(&v), "Goals: 2 met, 1 missed, 1 not measured.");
        assert_eq!(summary(&[]), "Goals: 0 met, 0 missed, 0 not measured.");
    }
}
