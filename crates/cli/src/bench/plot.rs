//! `--plot FILE.png`: latency (p50 with a whisker up to p99) against request
//! size on log axes, one line per transport and wait strategy, and beside it
//! the CPU time per call (both processes), drawn with plotters.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::stats::Record;

/// Width and height of the image, in pixels.
pub(crate) const SIZE: (u32, u32) = (1600, 700);

/// Fonts tried in order (Debian's fonts-dejavu-core is installed by ci/setup.sh);
/// `SHMLINK_PLOT_FONT` overrides.
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// One line of the plot: the points of a transport × wait (× client).
struct Series<'a> {
    name: String,
    points: Vec<&'a Record>,
}

fn series(records: &[Record]) -> Vec<Series<'_>> {
    let mut by: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records {
        let mut name = r.transport.clone();
        if r.wait != "-" {
            name = format!("{name} {}", r.wait);
        }
        if r.client != "rust" {
            name = format!("{name} ({} client)", r.client.to_uppercase());
        }
        if matches!(r.path.as_str(), "arena" | "loan") {
            name = format!("{name} {}", r.path);
        }
        by.entry(name).or_default().push(r);
    }
    by.into_iter()
        .map(|(name, mut points)| {
            points.sort_by_key(|r| r.size);
            Series { name, points }
        })
        .collect()
}

fn load_font() -> anyhow::Result<()> {
    let mut tried = Vec::new();
    let env = std::env::var("SHMLINK_PLOT_FONT").ok();
    for path in env.iter().map(String::as_str).chain(FONTS.iter().copied()) {
        match std::fs::read(path) {
            Ok(bytes) => {
                // plotters keeps fonts for the whole process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                    .map_err(|_| anyhow!("{path} is not a TrueType font"))?;
                return Ok(());
            }
            Err(e) => tried.push(format!("{path}: {e}")),
        }
    }
    bail!(
        "no TrueType font for the plot (install fonts-dejavu-core, or set SHMLINK_PLOT_FONT): {}",
        tried.join("; ")
    )
}

/// The (min, max) of `values`, widened by a factor on a log scale.
fn log_range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (lo <= hi).then(|| (lo / 1.6, hi * 1.6))
}

/// A size label for the axis: whole units where the tick allows.
fn axis_size(x: f64) -> String {
    let (v, unit) = match x {
        x if x >= 1048576.0 => (x / 1048576.0, "MiB"),
        x if x >= 1024.0 => (x / 1024.0, "KiB"),
        x => (x, "B"),
    };
    if (v - v.round()).abs() < 0.05 {
        format!("{} {unit}", v.round())
    } else {
        format!("{v:.1} {unit}")
    }
}

/// Total CPU µs per call, client and server.
fn cpu(r: &Record) -> f64 {
    r.client_cpu_us_per_call + r.server_cpu_us_per_call.unwrap_or(0.0)
}

/// Draws the two panels into `path`.
pub(crate) fn write(path: &Path, title: &str, records: &[Record]) -> anyhow::Result<()> {
    if records.is_empty() {
        bail!("nothing to plot: no points were measured");
    }
    load_font()?;
    let all = series(records);
    let sizes = log_range(records.iter().map(|r| r.size as f64)).context("no sizes to plot")?;
    let lat = log_range(records.iter().flat_map(|r| [r.p50_us, r.p99_us]))
        .context("no latencies to plot")?;
    let cpus = log_range(records.iter().map(cpu)).unwrap_or((0.01, 10.0));
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let root = root.titled(title, ("sans-serif", 26)).map_err(draw_err)?;
    let (left, right) = root.split_horizontally(SIZE.0 / 2);
    panel(
        &left,
        "round trip, µs (p50; whisker to p99)",
        &all,
        sizes,
        lat,
        |r| (r.p50_us, Some(r.p99_us)),
    )?;
    panel(
        &right,
        "CPU time per call, µs (client + server)",
        &all,
        sizes,
        cpus,
        |r| (cpu(r), None),
    )?;
    root.present()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn draw_err<E: std::error::Error + Send + Sync + 'static>(
    e: DrawingAreaErrorKind<E>,
) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    all: &[Series<'_>],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    value: impl Fn(&Record) -> (f64, Option<f64>),
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale().base(4.0), (y0..y1).log_scale())
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("request size")
        .x_label_formatter(&|x| axis_size(*x))
        .y_label_formatter(&|y| format!("{y}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(draw_err)?;
    for (i, s) in all.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|r| (r.size as f64, value(r).0))
            .filter(|(_, y)| *y > 0.0)
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(draw_err)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(draw_err)?;
        let whiskers = s.points.iter().filter_map(|r| {
            let (y, top) = value(r);
            let x = r.size as f64;
            top.filter(|t| *t > y && y > 0.0)
                .map(|t| PathElement::new(vec![(x, y), (x, t)], color.stroke_width(1)))
        });
        chart.draw_series(whiskers).map_err(draw_err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(draw_err)?;
    Ok(())
}
