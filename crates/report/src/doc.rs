//! The report as a list of blocks (headings, text, tables, plots), built once from the records
//! and rendered to markdown, HTML or a terminal.
//!
//! Layout: title, failed and warning checks, the environment, then one section per scenario
//! (in order of first appearance) with one subsection per backend, each listing its records by
//! kind; scaling plots close each scenario, one set per scaling mode.

use std::collections::HashSet;

use measure::Record;
use measure::record::{
    Body, Calibration, Check, DurationPass, Histogram, Measurement, Params, ScalingMode,
    ScalingPoint, StageBreakdown, Table as TableRecord, Value, Verdict,
};

use crate::Options;
use crate::html::escape;
use crate::plots::{BarChart, Chart, Fmt, HistChart, LineChart, Point, Reference, Series};
use crate::table::{Charset, Table, markdown_cell, to_ascii};
use crate::units;

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

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "PASS",
        Verdict::Warn => "WARN",
        Verdict::Fail => "FAIL",
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
        let base = slug(stem);
        let mut name = base.clone();
        let mut i = 2;
        while !self.names.insert(name.clone()) {
            name = format!("{base}-{i}");
            i += 1;
        }
        self.plots.push(Plot { name, chart });
        Block::Plot(self.plots.len() - 1)
    }
}

/// Builds the report. Without `plots`, no chart is prepared (for terminal output).
pub(crate) fn build(records: &[Record], opts: &Options, plots: bool) -> Doc {
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

    // Failed checks first, where nobody can miss them.
    for r in records {
        if let Body::Check(c) = &r.body {
            let what = label(&r.scenario, &r.backend, &c.name, &r.params);
            match c.verdict {
                Verdict::Fail => b
                    .blocks
                    .push(Block::Error(format!("check failed: {what}: {}", c.message))),
                Verdict::Warn => b.blocks.push(Block::Warning(format!(
                    "check warning: {what}: {}",
                    c.message
                ))),
                Verdict::Pass => {}
            }
        }
    }

    for r in records {
        if let Body::Env(env) = &r.body {
            env_section(&mut b, env);
        }
    }

    for scenario in scenarios {
        b.blocks.push(Block::Heading(2, scenario.to_owned()));
        let in_scenario: Vec<&Record> = records
            .iter()
            .filter(|r| r.scenario == scenario && !matches!(r.body, Body::Env(_)))
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
            backend_section(&mut b, scenario, backend, &recs);
        }
        if b.plots_wanted {
            scaling_plots(&mut b, scenario, &in_scenario);
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

fn backend_section(b: &mut Builder<'_>, scenario: &str, backend: &str, recs: &[&Record]) {
    macro_rules! of_kind {
        ($variant:ident) => {
            recs.iter()
                .filter_map(|r| match &r.body {
                    Body::$variant(x) => Some((*r, x)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
    }
    let checks = of_kind!(Check);
    let measurements = of_kind!(Measurement);
    let scaling = of_kind!(Scaling);
    let durations = of_kind!(Duration);
    let calibrations = of_kind!(Calibration);
    let stages = of_kind!(Stages);
    let histograms = of_kind!(Histogram);
    let tables = of_kind!(Table);

    if !checks.is_empty() {
        b.blocks.push(Block::Heading(4, "Checks".to_owned()));
        b.blocks.push(Block::Table(check_table(&checks)));
    }
    if !measurements.is_empty() {
        b.blocks.push(Block::Heading(4, "Measurements".to_owned()));
        b.blocks.push(Block::Text(
            "Per-iteration time: median with its bootstrap 95% confidence interval, \
             95th percentile, median absolute deviation and Tukey outliers over the samples; \
             throughput at the median; the harness's own per-iteration overhead."
                .to_owned(),
        ));
        b.blocks
            .push(Block::Table(measurement_table(&measurements)));
    }
    if !scaling.is_empty() {
        b.blocks
            .push(Block::Heading(4, "Thread scaling".to_owned()));
        b.blocks.push(Block::Text(
            "Throughput is total operations over wall time; speed-up and efficiency are \
             relative to the sweep's smallest thread count (efficiency 100% is perfect scaling)."
                .to_owned(),
        ));
        b.blocks.push(Block::Table(scaling_table(&scaling)));
    }
    if !durations.is_empty() {
        b.blocks
            .push(Block::Heading(4, "Fixed-duration passes".to_owned()));
        b.blocks.push(Block::Table(duration_table(&durations)));
    }
    if !calibrations.is_empty() {
        b.blocks.push(Block::Heading(4, "Calibration".to_owned()));
        b.blocks
            .push(Block::Table(calibration_table(&calibrations)));
    }
    for (r, s) in &stages {
        stage_section(b, scenario, backend, r, s);
    }
    if !histograms.is_empty() {
        b.blocks
            .push(Block::Heading(4, "Latency histograms".to_owned()));
        b.blocks.push(Block::Table(histogram_table(&histograms)));
        if b.plots_wanted {
            for (r, h) in &histograms {
                if let Some(chart) = histogram_chart(scenario, backend, r, h) {
                    let block = b.plot(
                        &format!(
                            "{scenario}-{backend}-{}-{}-hist",
                            h.name,
                            params_text(&r.params)
                        ),
                        chart,
                    );
                    b.blocks.push(block);
                }
            }
        }
    }
    for (_, t) in &tables {
        table_record_section(b, t);
    }
    if b.plots_wanted && b.opts.sample_histograms && !measurements.is_empty() {
        let mut inner = vec![Block::Text(
            "Each sample is the mean per-iteration time of a batch, so these show the spread \
             between batches rather than single-operation latencies."
                .to_owned(),
        )];
        for (r, m) in &measurements {
            if m.samples_ns.is_empty() {
                continue;
            }
            let p = params_text(&r.params);
            let title = if p.is_empty() {
                format!("{} · {backend}: {}", scenario, m.name)
            } else {
                format!("{} · {backend}: {} ({p})", scenario, m.name)
            };
            let bins = crate::plots::bin_samples(&m.samples_ns, 40);
            let chart = Chart::Hist(HistChart {
                title,
                x_label: format!(
                    "time per iteration ({} samples of {} iterations)",
                    m.samples_ns.len(),
                    units::count(m.iters_per_sample)
                ),
                bins,
                log_x: false,
                markers: vec![
                    ("median".to_owned(), m.summary.median_ns),
                    ("p95".to_owned(), m.summary.p95_ns),
                ],
            });
            let block = b.plot(
                &format!("{scenario}-{backend}-{}-{p}-samples", m.name),
                chart,
            );
            inner.push(block);
        }
        b.blocks.push(Block::Details(
            format!(
                "Sample distributions ({} plots)",
                inner.len().saturating_sub(1)
            ),
            inner,
        ));
    }
}

fn check_table(checks: &[(&Record, &Check)]) -> Table {
    let keys = param_keys(checks.iter().map(|(r, _)| &r.params));
    let mut header = vec!["check".to_owned()];
    header.extend(keys.iter().cloned());
    header.extend(["verdict".to_owned(), "message".to_owned()]);
    let mut t = Table::new(header);
    for (r, c) in checks {
        let mut row = vec![c.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(verdict_text(c.verdict).to_owned());
        row.push(c.message.clone());
        t.push(row);
    }
    t
}

/// The measurements table (public to the crate for tests and the terminal summary).
pub(crate) fn measurement_table(ms: &[(&Record, &Measurement)]) -> Table {
    let keys = param_keys(ms.iter().map(|(r, _)| &r.params));
    let with_bytes = ms.iter().any(|(_, m)| m.bytes_per_s.is_some());
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(
        ["median", "95% CI", "p95", "MAD", "outliers", "ops/s"]
            .iter()
            .map(|s| s.to_string()),
    );
    if with_bytes {
        header.push("bytes/s".to_owned());
    }
    header.push("overhead".to_owned());
    let n = header.len();
    let mut t = Table::new(header).right(first_num..n);
    for (r, m) in ms {
        let s = &m.summary;
        let mut row = vec![m.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(units::duration_ns(s.median_ns));
        row.push(ci_text(s.median_ci_low_ns, s.median_ci_high_ns));
        row.push(units::duration_ns(s.p95_ns));
        row.push(units::duration_ns(s.mad_ns));
        row.push(outliers_text(m));
        row.push(units::rate(m.ops_per_s));
        if with_bytes {
            row.push(m.bytes_per_s.map(units::bytes_rate).unwrap_or_default());
        }
        row.push(
            m.overhead_ns
                .map_or_else(|| "—".to_owned(), units::duration_ns),
        );
        t.push(row);
    }
    t
}

fn scaling_table(ps: &[(&Record, &ScalingPoint)]) -> Table {
    let keys = param_keys(ps.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    header.push("mode".to_owned());
    let first_num = header.len();
    header.extend(
        ["threads", "wall", "ops/s", "speed-up", "efficiency"]
            .iter()
            .map(|s| s.to_string()),
    );
    let last_num = header.len();
    header.push("note".to_owned());
    let mut t = Table::new(header).right(first_num..last_num);
    for (r, p) in ps {
        let mut row = vec![p.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(p.mode.to_string());
        row.push(p.threads.to_string());
        row.push(units::duration_ns(p.wall_ns));
        row.push(units::rate(p.ops_per_s));
        row.push(units::ratio(p.speedup));
        row.push(units::percent(p.efficiency * 100.0));
        row.push(oversub_note(p.threads, p.cores, p.oversubscribed));
        t.push(row);
    }
    t
}

fn duration_table(ds: &[(&Record, &DurationPass)]) -> Table {
    let keys = param_keys(ds.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(
        [
            "threads",
            "total time",
            "count",
            "ops/s",
            "ops/s per thread",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let last_num = header.len();
    header.push("note".to_owned());
    let mut t = Table::new(header).right(first_num..last_num);
    for (r, d) in ds {
        let mut row = vec![d.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(d.threads.to_string());
        row.push(units::duration_ns(d.wall_ns));
        row.push(units::count(d.ops_total));
        row.push(units::rate(d.ops_per_s));
        row.push(units::rate(d.ops_per_s_per_thread));
        row.push(oversub_note(d.threads, d.cores, d.oversubscribed));
        t.push(row);
    }
    t
}

fn calibration_table(cs: &[(&Record, &Calibration)]) -> Table {
    let keys = param_keys(cs.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(
        ["target", "attempts", "size", "time", "overshoot"]
            .iter()
            .map(|s| s.to_string()),
    );
    let last_num = header.len();
    header.push("warning".to_owned());
    let mut t = Table::new(header).right(first_num..last_num);
    for (r, c) in cs {
        let mut row = vec![c.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(units::duration_ns(c.target_ns));
        let attempts = match (c.attempts.first(), c.attempts.last()) {
            (Some(f), Some(l)) if c.attempts.len() > 1 => {
                format!("{} ({} → {})", c.attempts.len(), f.size, l.size)
            }
            _ => c.attempts.len().to_string(),
        };
        row.push(attempts);
        row.push(units::count(c.size));
        row.push(units::duration_ns(c.time_ns));
        row.push(units::ratio(c.overshoot));
        let warning = match (&c.warning, c.reached) {
            (Some(w), _) => w.clone(),
            (None, false) => "target not reached".to_owned(),
            (None, true) => String::new(),
        };
        row.push(warning);
        t.push(row);
    }
    t
}

fn stage_section(
    b: &mut Builder<'_>,
    scenario: &str,
    backend: &str,
    r: &Record,
    s: &StageBreakdown,
) {
    let p = params_text(&r.params);
    let heading = if p.is_empty() {
        format!("Stages: {}", s.name)
    } else {
        format!("Stages: {} ({p})", s.name)
    };
    b.blocks.push(Block::Heading(4, heading.clone()));
    let runs = s.runs.max(1) as f64;
    b.blocks.push(Block::Text(format!(
        "{} run(s); time is the total over all runs, per run is time / runs.",
        s.runs
    )));
    let mut t =
        Table::new(["stage", "time", "per run", "share", "bytes in", "bytes out"]).right(1..6);
    for st in &s.stages {
        t.push(vec![
            st.name.clone(),
            units::duration_ns(st.time_ns),
            units::duration_ns(st.time_ns / runs),
            units::percent(st.percent),
            units::bytes(st.bytes_in as f64),
            units::bytes(st.bytes_out as f64),
        ]);
    }
    let (bin, bout) = s.stages.iter().fold((0u64, 0u64), |(i, o), st| {
        (i + st.bytes_in, o + st.bytes_out)
    });
    t.push(vec![
        "measured total".to_owned(),
        units::duration_ns(s.total_ns),
        units::duration_ns(s.total_ns / runs),
        units::percent(100.0),
        units::bytes(bin as f64),
        units::bytes(bout as f64),
    ]);
    let share = |v: f64| {
        if s.total_ns > 0.0 {
            units::percent(v / s.total_ns * 100.0)
        } else {
            String::new()
        }
    };
    if let Some(min) = s.theoretical_min_ns {
        t.push(vec![
            "theoretical minimum".to_owned(),
            units::duration_ns(min),
            units::duration_ns(min / runs),
            share(min),
            String::new(),
            String::new(),
        ]);
    }
    if let Some(o) = s.overhead_ns {
        t.push(vec![
            "overhead (measured − minimum)".to_owned(),
            units::duration_ns(o),
            units::duration_ns(o / runs),
            share(o),
            String::new(),
            String::new(),
        ]);
    }
    b.blocks.push(Block::Table(t));
    if b.plots_wanted && !s.stages.is_empty() {
        let mut labels: Vec<String> = s.stages.iter().map(|st| st.name.clone()).collect();
        let mut values: Vec<f64> = s.stages.iter().map(|st| st.time_ns / runs).collect();
        labels.push("measured total".to_owned());
        values.push(s.total_ns / runs);
        let mut summary = 1;
        if let Some(min) = s.theoretical_min_ns {
            labels.push("theoretical minimum".to_owned());
            values.push(min / runs);
            summary += 1;
        }
        let chart = Chart::Bars(BarChart {
            title: format!("{scenario} · {backend}: {}", heading),
            x_label: "time per run".to_owned(),
            fmt: Fmt::Duration,
            labels,
            values,
            summary,
        });
        let block = b.plot(
            &format!("{scenario}-{backend}-{}-{p}-stages", s.name),
            chart,
        );
        b.blocks.push(block);
    }
}

fn histogram_table(hs: &[(&Record, &Histogram)]) -> Table {
    let keys = param_keys(hs.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(["count", "p50", "p99", "max"].iter().map(|s| s.to_string()));
    let n = header.len();
    let mut t = Table::new(header).right(first_num..n);
    for (r, h) in hs {
        let mut row = vec![h.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(units::count(h.count));
        row.push(units::duration_ns(h.p50_ns));
        row.push(units::duration_ns(h.p99_ns));
        row.push(units::duration_ns(h.max_ns));
        t.push(row);
    }
    t
}

fn histogram_chart(scenario: &str, backend: &str, r: &Record, h: &Histogram) -> Option<Chart> {
    let first = h.buckets.iter().position(|b| b.count > 0)?;
    let last = h.buckets.iter().rposition(|b| b.count > 0)?;
    let mut bins = Vec::new();
    for i in first..=last {
        let hi = h.buckets[i].le_ns;
        let lo = if i > 0 {
            h.buckets[i - 1].le_ns
        } else if hi > 0.0 {
            hi / 2.0
        } else {
            hi - 1.0
        };
        bins.push((lo, hi, h.buckets[i].count));
    }
    let lo = bins.first().map(|b| b.0).unwrap_or(0.0);
    let hi = bins.last().map(|b| b.1).unwrap_or(1.0);
    let p = params_text(&r.params);
    Some(Chart::Hist(HistChart {
        title: if p.is_empty() {
            format!("{scenario} · {backend}: {}", h.name)
        } else {
            format!("{scenario} · {backend}: {} ({p})", h.name)
        },
        x_label: format!("latency ({} values)", units::count(h.count)),
        bins,
        log_x: lo > 0.0 && hi / lo > 50.0,
        markers: vec![("p50".to_owned(), h.p50_ns), ("p99".to_owned(), h.p99_ns)],
    }))
}

/// A table cell: floats to four significant digits (tables are read, not parsed; the raw
/// value stays in the results file).
fn value_cell(v: &Value) -> String {
    match v {
        Value::Float(x) if x.is_finite() && *x != 0.0 => {
            let decimals = (3 - x.abs().log10().floor() as i64).clamp(0, 6) as usize;
            let s = format!("{x:.decimals$}");
            if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_owned()
            } else {
                s
            }
        }
        other => other.to_string(),
    }
}

fn table_record_section(b: &mut Builder<'_>, t: &TableRecord) {
    b.blocks.push(Block::Heading(4, t.title.clone()));
    if let Some(src) = &t.source {
        b.blocks.push(Block::Text(format!(
            "Figures marked as published were not measured by ccbench. Source: {src}"
        )));
    }
    let numeric: Vec<usize> = (0..t.columns.len())
        .filter(|&c| {
            let mut any = false;
            let all = t.rows.iter().all(|row| match row.get(c) {
                Some(v) if v.as_f64().is_some() => {
                    any = true;
                    true
                }
                Some(Value::Str(s)) => s.is_empty(),
                _ => true,
            });
            all && any
        })
        .collect();
    let mut table = Table::new(t.columns.iter().cloned()).right(numeric);
    for row in &t.rows {
        table.push(row.iter().map(value_cell).collect());
    }
    b.blocks.push(Block::Table(table));
    for note in &t.notes {
        b.blocks.push(Block::Text(format!("Note: {note}")));
    }
}

/// Scaling plots of one scenario: per mode, throughput, speed-up and efficiency against
/// threads, one line per (backend, name, params except `threads`).
fn scaling_plots(b: &mut Builder<'_>, scenario: &str, recs: &[&Record]) {
    for mode in [ScalingMode::Weak, ScalingMode::Strong] {
        let points: Vec<(&Record, &ScalingPoint)> = recs
            .iter()
            .filter_map(|r| match &r.body {
                Body::Scaling(p) if p.mode == mode => Some((*r, p)),
                _ => None,
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        // Group in order of first appearance.
        let mut groups: Vec<(String, Vec<&ScalingPoint>)> = Vec::new();
        for (r, p) in &points {
            let mut params = r.params.clone();
            params.remove("threads");
            let ps = params_text(&params);
            let key = if ps.is_empty() {
                format!("{} {}", r.backend, p.name)
            } else {
                format!("{} {} ({ps})", r.backend, p.name)
            };
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => g.1.push(p),
                None => groups.push((key, vec![p])),
            }
        }
        for g in &mut groups {
            g.1.sort_by_key(|p| p.threads);
        }
        let series = |y: &dyn Fn(&ScalingPoint) -> f64| -> Vec<Series> {
            groups
                .iter()
                .map(|(label, ps)| Series {
                    label: label.clone(),
                    points: ps
                        .iter()
                        .map(|p| Point {
                            x: p.threads as f64,
                            y: y(p),
                            hollow: p.oversubscribed,
                        })
                        .collect(),
                })
                .collect()
        };
        let any_oversub = points.iter().any(|(_, p)| p.oversubscribed);
        let base = points
            .iter()
            .map(|(_, p)| p.threads)
            .min()
            .unwrap_or(1)
            .max(1) as f64;
        let rates: Vec<f64> = points
            .iter()
            .map(|(_, p)| p.ops_per_s)
            .filter(|v| *v > 0.0 && v.is_finite())
            .collect();
        let spread = match (
            rates.iter().copied().reduce(f64::min),
            rates.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) => hi / lo,
            _ => 1.0,
        };
        b.blocks.push(Block::Heading(
            3,
            format!("{scenario} · {mode} scaling plots"),
        ));
        let what = match mode {
            ScalingMode::Weak => "work per thread fixed",
            ScalingMode::Strong => "total work fixed",
        };
        b.blocks.push(Block::Text(format!(
            "{mode} scaling ({what}).{}",
            if any_oversub {
                " Hollow markers: more threads than cores (oversubscribed)."
            } else {
                ""
            }
        )));
        let charts = [
            (
                "throughput",
                Chart::Lines(LineChart {
                    title: format!("{scenario}: throughput, {mode} scaling"),
                    x_label: "threads".to_owned(),
                    y_label: "operations per second".to_owned(),
                    y_fmt: Fmt::Rate,
                    log_y: spread > 20.0,
                    legend_low: false,
                    series: series(&|p| p.ops_per_s),
                    reference: None,
                }),
            ),
            (
                "speedup",
                Chart::Lines(LineChart {
                    title: format!("{scenario}: speed-up, {mode} scaling"),
                    x_label: "threads".to_owned(),
                    y_label: "speed-up".to_owned(),
                    y_fmt: Fmt::Ratio,
                    log_y: false,
                    legend_low: false,
                    series: series(&|p| p.speedup),
                    reference: Some(Reference::Ideal { base }),
                }),
            ),
            (
                "efficiency",
                Chart::Lines(LineChart {
                    title: format!("{scenario}: efficiency, {mode} scaling"),
                    x_label: "threads".to_owned(),
                    y_label: "efficiency".to_owned(),
                    y_fmt: Fmt::Fraction,
                    log_y: false,
                    legend_low: true,
                    series: series(&|p| p.efficiency),
                    reference: Some(Reference::Level(1.0)),
                }),
            ),
        ];
        for (what, chart) in charts {
            let block = b.plot(&format!("{scenario}-{mode}-{what}"), chart);
            b.blocks.push(block);
        }
    }
}

/// Markdown text outside tables: one line, `<` escaped so no markup slips through.
fn md_text(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
}

fn markdown_blocks(doc: &Doc, blocks: &[Block], out: &mut String) {
    for block in blocks {
        match block {
            Block::Heading(level, text) => {
                out.push_str(&"#".repeat(usize::from(*level).clamp(1, 6)));
                out.push(' ');
                out.push_str(&md_text(text));
                out.push_str("\n\n");
            }
            Block::Text(text) => {
                out.push_str(&md_text(text));
                out.push_str("\n\n");
            }
            Block::Error(text) => {
                out.push_str(&format!("> **ERROR:** {}\n\n", md_text(text)));
            }
            Block::Warning(text) => {
                out.push_str(&format!("> **Warning:** {}\n\n", md_text(text)));
            }
            Block::Table(t) => {
                out.push_str(&t.to_markdown());
                out.push('\n');
            }
            Block::Plot(i) => {
                if let Some(p) = doc.plots.get(*i) {
                    out.push_str(&format!(
                        "![{}](plots/{}.svg)\n\n",
                        markdown_cell(&md_text(p.chart.title())).replace(['[', ']'], ""),
                        p.name
                    ));
                }
            }
            Block::Details(summary, inner) => {
                out.push_str(&format!(
                    "<details><summary>{}</summary>\n\n",
                    escape(summary)
                ));
                markdown_blocks(doc, inner, out);
                out.push_str("</details>\n\n");
            }
        }
    }
}

/// The report as GitHub markdown, ending with one newline; plots are referenced as
/// `plots/<name>.svg`.
pub(crate) fn to_markdown(doc: &Doc) -> String {
    let mut out = String::new();
    markdown_blocks(doc, &doc.blocks, &mut out);
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// The report for a terminal: box tables, no plots.
pub(crate) fn to_terminal(doc: &Doc, charset: Charset) -> String {
    let text = |s: &str| match charset {
        Charset::Unicode => s.to_owned(),
        Charset::Ascii => to_ascii(s),
    };
    let mut out = String::new();
    for block in &doc.blocks {
        match block {
            Block::Heading(level, t) => {
                let t = text(t);
                let n = t.chars().count();
                match level {
                    1 => out.push_str(&format!("{t}\n{}\n", "=".repeat(n))),
                    2 => out.push_str(&format!("\n{t}\n{}\n", "-".repeat(n))),
                    _ => out.push_str(&format!("\n{t}\n")),
                }
            }
            Block::Text(t) => {
                out.push_str(&text(t));
                out.push('\n');
            }
            Block::Error(t) => out.push_str(&format!("ERROR: {}\n", text(t))),
            Block::Warning(t) => out.push_str(&format!("warning: {}\n", text(t))),
            Block::Table(t) => out.push_str(&t.to_terminal(charset)),
            Block::Plot(_) | Block::Details(..) => {}
        }
    }
    out
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;\
max-width:1200px;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}\
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
tr:nth-child(even) td{background:#fafafa}\
.error{background:#fde2e1;border-left:6px solid #c62828;padding:0.6em 1em;margin:0.5em 0;font-weight:bold}\
.warning{background:#fff4d6;border-left:6px solid #e0a000;padding:0.6em 1em;margin:0.5em 0}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}\
h2{border-bottom:2px solid #ddd;padding-bottom:0.2em;margin-top:2em}\
details{margin:1em 0}summary{cursor:pointer;font-weight:bold}";

fn html_blocks(doc: &Doc, svgs: &[String], blocks: &[Block], out: &mut String) {
    for block in blocks {
        match block {
            Block::Heading(level, text) => {
                let l = (*level).clamp(1, 6);
                out.push_str(&format!("<h{l}>{}</h{l}>\n", escape(text)));
            }
            Block::Text(text) => out.push_str(&format!("<p>{}</p>\n", escape(text))),
            Block::Error(text) => out.push_str(&format!(
                "<div class=\"error\">ERROR: {}</div>\n",
                escape(text)
            )),
            Block::Warning(text) => out.push_str(&format!(
                "<div class=\"warning\">Warning: {}</div>\n",
                escape(text)
            )),
            Block::Table(t) => out.push_str(&t.to_html()),
            Block::Plot(i) => {
                if let (Some(p), Some(svg)) = (doc.plots.get(*i), svgs.get(*i)) {
                    out.push_str(&format!(
                        "<figure id=\"plot-{}\">\n{}\n</figure>\n",
                        escape(&p.name),
                        strip_xml_prolog(svg)
                    ));
                }
            }
            Block::Details(summary, inner) => {
                out.push_str(&format!(
                    "<details><summary>{}</summary>\n",
                    escape(summary)
                ));
                html_blocks(doc, svgs, inner, out);
                out.push_str("</details>\n");
            }
        }
    }
}

/// An SVG document without its `<?xml ...?>` line, for inlining.
fn strip_xml_prolog(svg: &str) -> &str {
    let s = svg.trim_start();
    if s.starts_with("<?xml") {
        match s.find("?>") {
            Some(end) => s[end + 2..].trim_start(),
            None => s,
        }
    } else {
        s
    }
}

/// The self-contained HTML page; `svgs[i]` is the SVG text of `doc.plots[i]`.
pub(crate) fn to_html(doc: &Doc, svgs: &[String]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        escape(&doc.title)
    );
    html_blocks(doc, svgs, &doc.blocks, &mut out);
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_cells_show_four_significant_digits() {
        let f = |x: f64| value_cell(&Value::Float(x));
        assert_eq!(f(679.2272894150814), "679.2");
        assert_eq!(f(1526.1037), "1526");
        assert_eq!(f(0.398), "0.398");
        assert_eq!(f(0.02700001), "0.027");
        assert_eq!(f(2.5), "2.5");
        assert_eq!(f(-12.3456), "-12.35");
        assert_eq!(f(0.0), "0");
        assert_eq!(value_cell(&Value::Int(1_000_000)), "1000000");
        assert_eq!(value_cell(&Value::from("2-5")), "2-5");
    }

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
