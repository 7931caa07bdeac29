//! Reports from ccbench results files: tables, plots, HTML and comparisons.
//!
//! Everything here works from the records alone (`measure::Record`, as read by
//! `measure::jsonl::read_records`): `report` never runs a workload and never prints; it returns
//! text or writes files, and the command line decides what to show.
//!
//! - [`write_report`]: `report.md`, `report.html` (self-contained, plots inline as SVG),
//!   `plots/*.svg`, `plots/*.png` and `csv/*.csv` into a folder, each file written atomically.
//! - [`terminal_summary`] / [`terminal_tables`]: the same tables drawn with box characters.
//! - [`render_markdown`], [`render_html`], [`csv_files`]: the pieces, for callers that write
//!   elsewhere.
//! - [`cost_summary`]: what confidentiality costs, from the `cost` records (the report's first
//!   section, and the end of a run's terminal output).
//! - [`verdicts`]: the checks' verdicts, and whether a run fails on them.
//! - [`compare`]: baseline against candidate, with significance and a noise threshold.
//! - [`trend`]: measurements over runs, with their change points: the history's page.
//! - [`units`]: the number formatting used throughout.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use measure::Record;

use doc::Render as _;

pub mod compare;
mod cost;
mod csv;
mod doc;
mod html;
mod plots;
mod table;
pub mod trend;
pub mod units;
pub mod verdicts;

pub use csv::csv_files;
pub use table::Charset;

/// What a report contains.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The report's title (default `ccbench report`).
    pub title: String,
    /// Write PNG copies of the plots beside the SVGs (default true).
    pub png: bool,
    /// Plot the sample distribution of every measurement (default true); folded away in the
    /// HTML report.
    pub sample_histograms: bool,
    /// Write `csv/<kind>.csv` files with the raw numbers (default true).
    pub csv: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            title: "ccbench report".to_owned(),
            png: true,
            sample_histograms: true,
            csv: true,
        }
    }
}

/// The files a report was written to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Written {
    /// `report.md`.
    pub markdown: PathBuf,
    /// `report.html`.
    pub html: PathBuf,
    /// Every plot file, SVG and PNG.
    pub plots: Vec<PathBuf>,
    /// Every CSV file.
    pub csv: Vec<PathBuf>,
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or folder could not be created, written or moved into place.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("{path}: cannot draw the plot: {message}")]
    Plot {
        /// The file the plot was meant for.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The report as GitHub markdown, plots referenced as `plots/<name>.svg`.
pub fn render_markdown(records: &[Record], opts: &Options) -> String {
    doc::Markdown.render(&doc::build(records, opts, doc::Layout::Files))
}

/// The self-contained HTML report (plots inline as SVG, no external resources, all record
/// text escaped).
pub fn render_html(records: &[Record], opts: &Options) -> Result<String, Error> {
    let d = doc::build(records, opts, doc::Layout::Files);
    let svgs = svgs(&d, Path::new("plots"))?;
    Ok(doc::Html { svgs: &svgs }.render(&d))
}

/// The report's tables for a terminal, with unicode box drawing, ending with the cost
/// summary: what `ccbench` prints at the end of a run.
pub fn terminal_summary(records: &[Record]) -> String {
    terminal_tables(records, Charset::Unicode)
}

/// The report's tables for a terminal, drawn with the given characters, ending with the cost
/// summary (see [`cost_summary`]).
pub fn terminal_tables(records: &[Record], charset: Charset) -> String {
    let mut out = doc::Terminal { charset }.render(&doc::build(
        records,
        &Options::default(),
        doc::Layout::Terminal,
    ));
    let costs = cost_summary(records, charset);
    if !costs.is_empty() {
        out.push('\n');
        out.push_str(&costs);
    }
    out
}

/// The cost summary for a terminal: one row per protected figure of each `cost` record
/// (scenario, workload, unprotected median, protected median, the ratio protected /
/// unprotected with its bootstrap 95% confidence interval, the scenario's check verdicts).
/// Empty when the records hold no `cost` record. The same table opens `report.md` and
/// `report.html`.
pub fn cost_summary(records: &[Record], charset: Charset) -> String {
    cost::terminal(records, charset)
}

fn svgs(d: &doc::Doc, plot_dir: &Path) -> Result<Vec<String>, Error> {
    d.plots
        .iter()
        .map(|p| {
            p.chart.to_svg().map_err(|message| Error::Plot {
                path: plot_dir.join(format!("{}.svg", p.name)),
                message,
            })
        })
        .collect()
}

/// Writes `bytes` to `path` through a temporary file in the same folder, renamed into place:
/// readers see the old file or the new one, never half of one. The temporary file is removed
/// on any error.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{file_name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // Temporary files are private (0600) by default; a report is for reading.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o644));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Writes the whole report into `out_dir` (created if missing): `report.md`, `report.html`,
/// `plots/<name>.svg` and (with [`Options::png`]) `plots/<name>.png`, and (with
/// [`Options::csv`]) `csv/<kind>.csv`. Every file goes through a temporary file renamed into
/// place, so an interrupted or failed call leaves no half-written file.
pub fn write_report(records: &[Record], out_dir: &Path, opts: &Options) -> Result<Written, Error> {
    let d = doc::build(records, opts, doc::Layout::Files);
    let csv = if opts.csv {
        csv_files(records)
    } else {
        Vec::new()
    };
    write_doc(&d, out_dir, opts.png, &csv)
}

/// Writes a document into `out_dir` (created if missing): its plots (SVG, and PNG with
/// `png`), then `csv/<stem>.csv` for each of `csv`, then `report.md` and `report.html`, so
/// that a page never references a file that is not there yet. Each file is written
/// atomically.
fn write_doc(
    d: &doc::Doc,
    out_dir: &Path,
    png: bool,
    csv: &[(String, String)],
) -> Result<Written, Error> {
    let mkdir = |p: &Path| {
        std::fs::create_dir_all(p).map_err(|source| Error::Io {
            path: p.to_owned(),
            source,
        })
    };
    let plot_dir = out_dir.join("plots");
    mkdir(out_dir)?;
    let mut written = Written {
        markdown: out_dir.join("report.md"),
        html: out_dir.join("report.html"),
        ..Written::default()
    };

    let svgs = svgs(d, &plot_dir)?;
    if !d.plots.is_empty() {
        mkdir(&plot_dir)?;
    }
    for (p, svg) in d.plots.iter().zip(&svgs) {
        let path = plot_dir.join(format!("{}.svg", p.name));
        write_atomic(&path, svg.as_bytes())?;
        written.plots.push(path);
        if png {
            let path = plot_dir.join(format!("{}.png", p.name));
            let png = p.chart.to_png().map_err(|message| Error::Plot {
                path: path.clone(),
                message,
            })?;
            write_atomic(&path, &png)?;
            written.plots.push(path);
        }
    }

    if !csv.is_empty() {
        let csv_dir = out_dir.join("csv");
        mkdir(&csv_dir)?;
        let mut used = HashSet::new();
        for (stem, text) in csv {
            let name = doc::unique_slug(&mut used, stem);
            let path = csv_dir.join(format!("{name}.csv"));
            write_atomic(&path, text.as_bytes())?;
            written.csv.push(path);
        }
    }

    let md = doc::Markdown.render(d);
    write_atomic(&written.markdown, md.as_bytes())?;
    let html = doc::Html { svgs: &svgs }.render(d);
    write_atomic(&written.html, html.as_bytes())?;
    Ok(written)
}
