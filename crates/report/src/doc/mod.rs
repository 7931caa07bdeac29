//! The report as a list of blocks (headings, text, tables, plots), built once from the records
//! and rendered to markdown, HTML or a terminal.
//!
//! Layout: title; the cost summary (what confidentiality costs, one row per headline workload;
//! in files only, a terminal shows it last); failed and warning checks of this run, and
//! findings about published figures; the environment; then one section per scenario (in order
//! of first appearance) with one subsection per backend, each listing its records by kind;
//! scaling plots close each scenario, one set per scaling mode.
//!
//! The model lives here ([`Doc`], [`Block`], [`build`]); [`sections`] and [`tables`] turn each
//! kind of record into blocks; [`markdown`], [`html`] and [`terminal`] render a finished
//! document, one [`Render`] implementation per format (as criterion's `Report` trait has one
//! implementation per output).

use std::collections::HashSet;

use measure::Record;
use measure::record::{Body, CheckSubject, Measurement, Params, Verdict};

use crate::Options;
use crate::plots::Chart;
use crate::table::Table;
use crate::units;

mod html;
mod markdown;
mod sections;
mod tables;
mod terminal;

pub(crate) use html::Html;
pub(crate) use markdown::Markdown;
pub(crate) use terminal::Terminal;

/// A rendering of a finished [`Doc`] into one format.
pub(crate) trait Render {
    /// The whole document in this format.
    fn render(&self, doc: &Doc) -> String;
}

/// One piece of a report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    /// A heading of level 1..=4.
    Heading(u8, String),
    /// A paragraph.
    Text(String),
    /// Something that went wrong, shown prominently.
    Error(String),
    /// Something to look at.
    Warning(String),
    /// A finding about published figures (not a failure of this run).
    Finding(String),
    /// A table.
    Table(Table),
    /// A plot, by index into [`Doc::plots`].
    Plot(usize),
    /// Blocks folded away by default (long lists of plots); left out of terminal output.
    Details(String, Vec<Block>),
}
/// A plot with its unique file stem.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plot {
    pub name: String,
    pub chart: Chart,
}
/// A whole report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Doc {
    pub title: String,
    pub blocks: Vec<Block>,
    pub plots: Vec<Plot>,
}
/// `k=v, k=v` (empty for no parameters).
pub(crate) fn params_text(p: &Params) -> String {
    p.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
/// The union of the parameter names, in order of first appearance.
fn param_keys<'a>(params: impl IntoIterator<Item = &'a Params>) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for p in params {
        for k in p.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys
}
fn param_cells(keys: &[String], p: &Params) -> Vec<String> {
    keys.iter()
        .map(|k| p.get(k).map(ToString::to_string).unwrap_or_default())
        .collect()
}
/// A lower-case file stem of ASCII letters, digits and dashes.
pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out.truncate(80);
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str("plot");
    }
    out
}
/// [`slug`] of `stem`, made unique among `used` by a `-2`, `-3`, ... suffix, and added to
/// it: the file stem of a plot or a CSV file.
pub(crate) fn unique_slug(used: &mut HashSet<String>, stem: &str) -> String {
    let base = slug(stem);
    let mut name = base.clone();
    let mut i = 2;
    while !used.insert(name.clone()) {
        name = format!("{base}-{i}");
        i += 1;
    }
    name
}
/// `980 ns–1.02 µs`, or `1.20–1.25 µs` when both ends share a unit.
fn ci_text(lo: f64, hi: f64) -> String {
    let (a, b) = (units::duration_ns(lo), units::duration_ns(hi));
    match (a.rsplit_once(' '), b.rsplit_once(' ')) {
        (Some((na, ua)), Some((nb, ub))) if ua == ub => format!("{na}–{nb} {ub}"),
        _ => format!("{a}–{b}"),
    }
}
fn outliers_text(m: &Measurement) -> String {
    let o = &m.summary.outliers;
    let mild = o.low_mild + o.high_mild;
    let severe = o.low_severe + o.high_severe;
    match (mild, severe) {
        (0, 0) => "0".to_owned(),
        (m, 0) => format!("{m} mild"),
        (0, s) => format!("{s} severe"),
        (m, s) => format!("{m} mild, {s} severe"),
    }
}
fn oversub_note(threads: u64, cores: u64, oversubscribed: bool) -> String {
    if oversubscribed {
        format!("oversubscribed: {threads} threads > {cores} cores")
    } else {
        String::new()
    }
}
fn label(scenario: &str, backend: &str, name: &str, params: &Params) -> String {
    let p = params_text(params);
    if p.is_empty() {
        format!("{scenario}/{backend}: {name}")
    } else {
        format!("{scenario}/{backend}: {name} ({p})")
    }
}
struct Builder<'o> {
    opts: &'o Options,
    plots_wanted: bool,
    blocks: Vec<Block>,
    plots: Vec<Plot>,
    names: HashSet<String>,
}
impl Builder<'_> {
    /// Adds a plot under a unique name and returns the block that shows it.
    fn plot(&mut self, stem: &str, chart: Chart) -> Block {
        let name = unique_slug(&mut self.names, stem);
        self.plots.push(Plot { name, chart });
        Block::Plot(self.plots.len() - 1)
    }
}
/// Where a report goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Markdown and HTML files: plots, and the cost summary first.
    Files,
    /// A terminal: no plots, and no cost summary (the caller prints it last, where a reader
    /// of a scrolling terminal looks).
    Terminal,
}
/// Builds the report.
pub(crate) fn build(records: &[Record], opts: &Options, layout: Layout) -> Doc {
    let plots = layout == Layout::Files;
    let mut b = Builder {
        opts,
        plots_wanted: plots,
        blocks: Vec::new(),
        plots: Vec::new(),
        names: HashSet::new(),
    };
    b.blocks.push(Block::Heading(1, opts.title.clone()));

    let mut scenarios: Vec<&str> = Vec::new();
    for r in records {
        if !matches!(r.body, Body::Env(_)) && !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
    }
    let n_env = records
        .iter()
        .filter(|r| matches!(r.body, Body::Env(_)))
        .count();
    b.blocks.push(Block::Text(format!(
        "{} records ({} measured, {} environment) from {} scenario(s): {}.",
        records.len(),
        records.len() - n_env,
        n_env,
        scenarios.len(),
        if scenarios.is_empty() {
            "none".to_owned()
        } else {
            scenarios.join(", ")
        }
    )));

    // The answer first: what confidentiality costs.
    if layout == Layout::Files
        && let Some(t) = crate::cost::summary_table(records, true)
    {
        b.blocks
            .push(Block::Heading(2, crate::cost::HEADING.to_owned()));
        b.blocks.push(Block::Table(t));
        b.blocks
            .push(Block::Text(crate::cost::EXPLANATION.to_owned()));
    }

    // Failed checks next, where nobody can miss them; then warnings; then findings about
    // published figures, which are not failures of this run.
    let (mut errors, mut warnings, mut findings) = (Vec::new(), Vec::new(), Vec::new());
    for r in records {
        if let Body::Check(c) = &r.body {
            let what = label(&r.scenario, &r.backend, &c.name, &r.params);
            match (c.subject, c.verdict) {
                (_, Verdict::Pass) => {}
                (CheckSubject::Run, Verdict::Fail) => {
                    errors.push(Block::Error(format!("check failed: {what}: {}", c.message)))
                }
                (CheckSubject::Run, Verdict::Warn) => warnings.push(Block::Warning(format!(
                    "check warning: {what}: {}",
                    c.message
                ))),
                (CheckSubject::Machine, _) => warnings.push(Block::Warning(format!(
                    "measured under: {what}: {}",
                    c.message
                ))),
                (CheckSubject::Published, v) => findings.push(Block::Finding(format!(
                    "{} {what}: {}",
                    crate::verdicts::verdict_text(v),
                    c.message
                ))),
            }
        }
    }
    b.blocks.extend(errors);
    b.blocks.extend(warnings);
    b.blocks.extend(findings);

    for r in records {
        if let Body::Env(env) = &r.body {
            env_section(&mut b, env);
        }
    }

    for scenario in scenarios {
        b.blocks.push(Block::Heading(2, scenario.to_owned()));
        let in_scenario: Vec<&Record> = records
            .iter()
            // Cost records are shown in the summary that opens the report.
            .filter(|r| r.scenario == scenario && !matches!(r.body, Body::Env(_) | Body::Cost(_)))
            .collect();
        let mut backends: Vec<&str> = Vec::new();
        for r in &in_scenario {
            if !backends.contains(&r.backend.as_str()) {
                backends.push(&r.backend);
            }
        }
        for backend in backends {
            let recs: Vec<&Record> = in_scenario
                .iter()
                .copied()
                .filter(|r| r.backend == backend)
                .collect();
            b.blocks
                .push(Block::Heading(3, format!("{scenario} · {backend}")));
            sections::backend_section(&mut b, scenario, backend, &recs);
        }
        if b.plots_wanted {
            sections::scaling_plots(&mut b, scenario, &in_scenario);
            sections::size_plots(&mut b, scenario, &in_scenario);
        }
    }

    Doc {
        title: opts.title.clone(),
        blocks: b.blocks,
        plots: b.plots,
    }
}
fn env_section(b: &mut Builder<'_>, env: &measure::env::Env) {
    b.blocks.push(Block::Heading(2, "Environment".to_owned()));
    let mut t = Table::new(["", "value"]);
    let none = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    let mut row = |k: &str, v: String| t.push(vec![k.to_owned(), v]);
    row("CPU", env.cpu_model.clone());
    row("cores", env.cores.to_string());
    if env.memory_bytes > 0 {
        row("memory", units::bytes(env.memory_bytes as f64));
    }
    row("CPU flags", none(&env.cpu_flags));
    row("trusted hardware", none(&env.trusted_hardware));
    row("kernel", env.kernel.clone());
    row("OS", env.os.clone());
    row(
        "ccbench",
        format!(
            "{} (commit {}, {} build)",
            env.build.version, env.build.git_commit, env.build.profile
        ),
    );
    row("compiler", env.build.rustc.clone());
    row("time (UTC)", env.time_utc.clone());
    if let Some(o) = env.harness_overhead_ns {
        row(
            "harness overhead",
            format!("{} per iteration", units::duration_ns(o)),
        );
    }
    if let Some(l) = env.load_avg_1m {
        row("load average", format!("{l:.2} (1 minute, at start)"));
    }
    b.blocks.push(Block::Table(t));
    if env.busy() {
        b.blocks.push(Block::Warning(format!(
            "The machine was busy when the run started (load average {:.2} on {} cores): \
             timings are inflated, and spinning switchless workers may be starved.",
            env.load_avg_1m.unwrap_or_default(),
            env.cores
        )));
    }
}
/// How a finding about published figures is introduced, in every format.
const FINDING: &str = "Finding about the published figures (not a failure of this run)";
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(
            slug("crypto-native-AES 128/gcm-size=256"),
            "crypto-native-aes-128-gcm-size-256"
        );
        assert_eq!(slug("<<>>"), "plot");
        assert_eq!(slug(&"x".repeat(200)).len(), 80);
    }

    #[test]
    fn ci_shares_unit() {
        assert_eq!(ci_text(1200.0, 1250.0), "1.20–1.25 µs");
        assert_eq!(ci_text(980.0, 1020.0), "980 ns–1.02 µs");
    }
}
