//! One progress bar on stderr over all measurement points, its message the
//! current point and phase. Hidden with `--quiet` or when stderr is not a
//! terminal.

use std::cell::RefCell;
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bench's progress bar.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
    point: RefCell<String>,
}

impl Progress {
    /// A bar over `total` points.
    pub(crate) fn new(total: usize, quiet: bool) -> Self {
        let bar = if quiet || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{bar:30.cyan/blue} {pos:>2}/{len} [{elapsed}] {msg}")
            {
                bar.set_style(style);
            }
            bar
        };
        Progress {
            bar,
            point: RefCell::new(String::new()),
        }
    }

    /// A point starts.
    pub(crate) fn start(&self, point: &str) {
        point.clone_into(&mut self.point.borrow_mut());
        self.bar.set_message(point.to_string());
    }

    /// The current point enters a phase.
    pub(crate) fn phase(&self, phase: &str) {
        self.bar
            .set_message(format!("{}: {phase}", self.point.borrow()));
    }

    /// The current point is done.
    pub(crate) fn done(&self) {
        self.bar.inc(1);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
