//! Measurements over runs: one plot per measurement (each run's median with its 95%
//! interval, the change points, each segment's median) and the history page that gathers
//! them (`ccbench history report`, `ccbench history trend --plot`).
//!
//! The caller (the cli, from the `history` crate's series) fills [`Trend`]s; nothing here
//! reads a database or detects change points.

use std::path::Path;

use crate::doc::{self, Block, Doc, Plot};
use crate::plots::{Chart, TrendChart};
use crate::table::Table;
use crate::{Error, Written, units};

/// One run's figure of a measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    /// The run's number in its history.
    pub run: i64,
    /// When it started (RFC 3339 UTC).
    pub started: String,
    /// The build's commit.
    pub commit: String,
    /// Median, ns.
    pub median_ns: f64,
    /// The bootstrap 95% interval of the median, ns.
    pub ci_ns: (f64, f64),
}

/// A step in a measurement's medians.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendStep {
    /// Index (into [`Trend::points`]) of the first run after the step.
    pub index: usize,
    /// The permutation test's p-value.
    pub p_value: f64,
    /// Median of the segment before, ns.
    pub before_ns: f64,
    /// Median of the segment after (up to the next step), ns.
    pub after_ns: f64,
}

/// One measurement over runs, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    /// The measurement, as `history trend` selects it (`scenario/name@backend k=v ...`).
    pub measurement: String,
    /// One point per run that has it.
    pub points: Vec<TrendPoint>,
    /// Its change points, in order.
    pub steps: Vec<TrendStep>,
}

impl Trend {
    fn chart(&self) -> Chart {
        let mut levels: Vec<f64> = self.steps.iter().map(|s| s.before_ns).collect();
        levels.push(match self.steps.last() {
            Some(s) => s.after_ns,
            None => {
                let finite: Vec<f64> = self
                    .points
                    .iter()
                    .map(|p| p.median_ns)
                    .filter(|m| m.is_finite())
                    .collect();
                measure::stats::median(&finite).unwrap_or(f64::NAN)
            }
        });
        Chart::Trend(TrendChart {
            title: self.measurement.clone(),
            runs: self.points.iter().map(|p| p.run).collect(),
            points: self
                .points
                .iter()
                .map(|p| (p.ci_ns.0, p.median_ns, p.ci_ns.1))
                .collect(),
            steps: self.steps.iter().map(|s| s.index).collect(),
            levels,
        })
    }

    /// The trend plot as an SVG document.
    pub fn to_svg(&self) -> Result<String, Error> {
        self.chart().to_svg().map_err(|message| Error::Plot {
            path: Path::new(&self.measurement).to_owned(),
            message,
        })
    }

    /// The trend plot as PNG bytes.
    pub fn to_png(&self) -> Result<Vec<u8>, Error> {
        self.chart().to_png().map_err(|message| Error::Plot {
            path: Path::new(&self.measurement).to_owned(),
            message,
        })
    }
}

/// What a history page says about where its trends came from.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// The page's title.
    pub title: String,
    /// Where the runs came from, and which (a sentence, shown under the title).
    pub source: String,
    /// The change-point detector's significance level.
    pub alpha: f64,
    /// Plot every measurement with at least two runs, not only those with a change point.
    pub plot_all: bool,
    /// Write PNG copies of the plots beside the SVGs.
    pub png: bool,
}

/// Writes the history page into `out_dir` (created if missing): `report.md` and
/// `report.html` (plots inline), `plots/<name>.svg` and `.png`. First the change points
/// (a table, then a plot per measurement that has one), then every measurement in a table
/// (runs, first and latest median, their ratio, change points), then, folded away with
/// [`HistoryPage::plot_all`], the plots of the others. Files are written atomically.
pub fn write_history(
    trends: &[Trend],
    out_dir: &Path,
    page: &HistoryPage,
) -> Result<Written, Error> {
    crate::write_doc(&history_doc(trends, page), out_dir, page.png, &[])
}

fn history_doc(trends: &[Trend], page: &HistoryPage) -> Doc {
    let mut d = Doc {
        title: page.title.clone(),
        blocks: vec![Block::Heading(1, page.title.clone())],
        plots: Vec::new(),
    };
    let runs: std::collections::BTreeSet<i64> = trends
        .iter()
        .flat_map(|t| t.points.iter().map(|p| p.run))
        .collect();
    d.blocks.push(Block::Text(format!(
        "{} {} run(s), {} measurement(s). Each point is a run's median with its bootstrap 95% \
         interval; a change point is a step in the medians found by binary segmentation with a \
         permutation test at α = {}, and a line on the plot between the runs it separates.",
        page.source,
        runs.len(),
        trends.len(),
        page.alpha
    )));

    let mut names = std::collections::HashSet::new();
    let mut plot = |d: &mut Doc, t: &Trend| {
        d.plots.push(Plot {
            name: doc::unique_slug(&mut names, &t.measurement),
            chart: t.chart(),
        });
        Block::Plot(d.plots.len() - 1)
    };

    d.blocks.push(Block::Heading(2, "Change points".to_owned()));
    let changed: Vec<&Trend> = trends.iter().filter(|t| !t.steps.is_empty()).collect();
    if changed.is_empty() {
        d.blocks.push(Block::Text(format!(
            "No measurement changed at α = {}.",
            page.alpha
        )));
    } else {
        let mut t = Table::new([
            "measurement",
            "last run before",
            "first run after",
            "before",
            "after",
            "after / before",
            "p",
        ])
        .right([3, 4, 5, 6]);
        for tr in &changed {
            for s in &tr.steps {
                let (a, b) = (&tr.points[s.index - 1], &tr.points[s.index]);
                t.push(vec![
                    tr.measurement.clone(),
                    format!("{} ({}, {})", a.run, a.started, a.commit),
                    format!("{} ({}, {})", b.run, b.started, b.commit),
                    units::duration_ns(s.before_ns),
                    units::duration_ns(s.after_ns),
                    units::ratio(s.after_ns / s.before_ns),
                    units::p_value(s.p_value),
                ]);
            }
        }
        d.blocks.push(Block::Table(t));
        for tr in &changed {
            let b = plot(&mut d, tr);
            d.blocks.push(b);
        }
    }

    d.blocks
        .push(Block::Heading(2, "Every measurement".to_owned()));
    let mut t = Table::new([
        "measurement",
        "runs",
        "first",
        "latest",
        "latest / first",
        "change points",
    ])
    .right([1, 2, 3, 4, 5]);
    for tr in trends {
        let (Some(first), Some(last)) = (tr.points.first(), tr.points.last()) else {
            continue;
        };
        t.push(vec![
            tr.measurement.clone(),
            tr.points.len().to_string(),
            units::duration_ns(first.median_ns),
            units::duration_ns(last.median_ns),
            units::ratio(last.median_ns / first.median_ns),
            tr.steps.len().to_string(),
        ]);
    }
    d.blocks.push(Block::Table(t));
    if page.plot_all {
        let rest: Vec<&Trend> = trends
            .iter()
            .filter(|t| t.steps.is_empty() && t.points.len() >= 2)
            .collect();
        if !rest.is_empty() {
            let blocks = rest.iter().map(|t| plot(&mut d, t)).collect();
            d.blocks.push(Block::Details(
                format!("Trends without a change point ({})", rest.len()),
                blocks,
            ));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trend(name: &str, medians: &[f64], steps: Vec<TrendStep>) -> Trend {
        Trend {
            measurement: name.to_owned(),
            points: medians
                .iter()
                .enumerate()
                .map(|(i, &m)| TrendPoint {
                    run: 10 + i as i64,
                    started: format!("2026-11-{:02}T00:00:00Z", i + 1),
                    commit: format!("c{i}"),
                    median_ns: m,
                    ci_ns: (m * 0.97, m * 1.03),
                })
                .collect(),
            steps,
        }
    }

    fn page(plot_all: bool) -> HistoryPage {
        HistoryPage {
            title: "ccbench history".into(),
            source: "From test.sqlite:".into(),
            alpha: 0.01,
            plot_all,
            png: true,
        }
    }

    fn stepped() -> Trend {
        let mut m = vec![1000.0; 6];
        m.extend([1300.0; 6]);
        trend(
            "sealing/seal@native size_bytes=4096",
            &m,
            vec![TrendStep {
                index: 6,
                p_value: 0.002,
                before_ns: 1000.0,
                after_ns: 1300.0,
            }],
        )
    }

    /// The page names the step with the runs on either side and its ratio, plots only the
    /// changed measurement by default, and every measurement with `plot_all`; each plot is
    /// an SVG and a PNG file, and the HTML has them inline.
    #[test]
    fn the_history_page_shows_the_steps_and_plots_what_it_says() {
        let flat = trend(
            "sealing/seal@sandbox size_bytes=4096",
            &[3000.0; 12],
            vec![],
        );
        let one = trend("transitions/ecall@sandbox", &[500.0], vec![]);
        let trends = [stepped(), flat, one];
        let dir = tempfile::tempdir().unwrap();
        let w = write_history(&trends, dir.path(), &page(false)).unwrap();
        let md = std::fs::read_to_string(&w.markdown).unwrap();
        assert!(md.contains("| sealing/seal@native size_bytes=4096 | 15 (2026-11-06T00:00:00Z, c5) | 16 (2026-11-07T00:00:00Z, c6) |"), "{md}");
        assert!(md.contains("1.30×"), "{md}");
        assert!(md.contains("12 run(s), 3 measurement(s)"), "{md}");
        assert_eq!(w.plots.len(), 2, "{:?}", w.plots);
        assert!(w.plots.iter().all(|p| p.exists()));
        let html = std::fs::read_to_string(&w.html).unwrap();
        assert_eq!(html.matches("<svg").count(), 1);
        assert!(html.contains("change point"), "the legend names it");

        let dir = tempfile::tempdir().unwrap();
        let w = write_history(&trends, dir.path(), &page(true)).unwrap();
        // The flat one too, folded away; a measurement of one run has nothing to plot.
        assert_eq!(w.plots.len(), 4, "{:?}", w.plots);
        let html = std::fs::read_to_string(&w.html).unwrap();
        assert_eq!(html.matches("<svg").count(), 2);
        assert!(html.contains("Trends without a change point (1)"));
    }

    #[test]
    fn no_change_point_is_said_and_degenerate_trends_still_draw() {
        let dir = tempfile::tempdir().unwrap();
        let trends = [
            trend("a/b@native", &[5.0, 5.0, 5.0], vec![]),
            trend("a/c@native", &[f64::NAN, 1e308, -1.0], vec![]),
            trend("a/d@native", &[], vec![]),
        ];
        let w = write_history(&trends, dir.path(), &page(true)).unwrap();
        let md = std::fs::read_to_string(&w.markdown).unwrap();
        assert!(md.contains("No measurement changed at α = 0.01."), "{md}");
        for t in &trends {
            t.to_svg().unwrap();
        }
        stepped().to_png().unwrap();
    }
}
