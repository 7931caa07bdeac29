//! Comparing results: which operations got faster or slower, and whether the difference is
//! real, or whether the data cannot tell.
//!
//! Records are matched by (scenario, backend, kind, name, params) — plus scaling mode and
//! thread count for sweep points and thread count for fixed-duration passes, which live in the
//! body rather than `params`. When a key repeats within a file, the n-th occurrence in A is
//! matched with the n-th in B.
//!
//! Every compared quantity is a time (per iteration, per operation, per run), so the ratio
//! `B / A` above 1 means B is slower. Two bases of comparison:
//!
//! - **Within one run** ([`compare`], one results file per side): the Mann-Whitney U test runs
//!   on each record's raw samples. These samples do not see the drift between two runs (a
//!   machine's state changes over minutes), so the test is over-confident across runs.
//! - **Between runs** ([`compare_runs`], several results files per side, as benchstat does with
//!   repeated counts): each record is reduced to one number per run (the median of its
//!   samples, or its single figure), and the test runs on those per-run numbers. Drift between
//!   runs is then part of the noise the test sees.
//!
//! A change is marked only when the test is significant (`p < alpha`) *and* the ratio of
//! medians moves by more than the noise threshold. A test needs enough samples to be able to
//! reject at all: when a side has fewer than [`MIN_SAMPLES`] values, or the smallest p-value
//! the test can reach at these sample sizes ([`min_attainable_p`]) is not below `alpha`, the
//! pair is marked [`Change::NotEnoughSamples`] — never "no change". For such pairs, and for
//! kinds that cannot be tested (a single figure per side within one run), a ratio beyond
//! [`CompareOptions::gross_ratio`] (1.5× by default) still counts as a regression.

use std::collections::HashMap;

use measure::Record;
use measure::record::{Body, Cost};
use measure::stats::{bootstrap_ratio_ci, mann_whitney_u, median};

use crate::doc::params_text;
use crate::table::{Charset, Table};
use crate::units;

/// The heading of the cost summary in a comparison.
const COST_HEADING: &str =
    "What confidentiality costs, A and B (protected median / unprotected median)";

/// The fewest values per side the test is run on; below it a pair is "not enough samples".
pub const MIN_SAMPLES: usize = 3;

/// The default gross-regression ratio (`B / A`): beyond it, a pair that the test cannot
/// decide still counts as a regression.
pub const DEFAULT_GROSS_RATIO: f64 = 1.5;

/// When a difference counts as a change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Significance level of the two-sided Mann-Whitney U test (default 0.05).
    pub alpha: f64,
    /// Smallest relative change of the median marked as a change, as a fraction (default
    /// 0.05, i.e. 5%).
    pub threshold: f64,
    /// The ratio `B / A` beyond which a pair the test cannot decide (not enough samples, or
    /// untestable) still counts as a regression (default [`DEFAULT_GROSS_RATIO`]).
    pub gross_ratio: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            alpha: 0.05,
            threshold: 0.05,
            gross_ratio: DEFAULT_GROSS_RATIO,
        }
    }
}

/// The smallest two-sided p-value the Mann-Whitney U test (as `measure::stats` computes it)
/// can return for samples of sizes `n_a` and `n_b`: the p-value of two completely separated
/// samples without ties. `None` when a side is empty.
///
/// For 2 and 2 values it is 0.25, for 3 and 3 0.081, for 4 and 4 0.030: at `alpha = 0.05` no
/// test with three or fewer values per side can ever mark a change.
pub fn min_attainable_p(n_a: usize, n_b: usize) -> Option<f64> {
    if n_a == 0 || n_b == 0 {
        return None;
    }
    let a: Vec<f64> = (0..n_a).map(|i| i as f64).collect();
    let b: Vec<f64> = (0..n_b).map(|i| (n_a + i) as f64).collect();
    mann_whitney_u(&a, &b).ok().map(|m| m.p_value)
}

/// What a record is, for matching and for display.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKey {
    /// Scenario.
    pub scenario: String,
    /// Backend.
    pub backend: String,
    /// Record kind (`measurement`, `scaling`, ...).
    pub kind: String,
    /// Name of the measured thing, with the scaling mode and thread count where they apply.
    pub name: String,
    /// Parameters as `k=v, k=v`.
    pub params: String,
    /// Parameters with their types, so that `1` and `1.0` and `"1"` stay apart.
    params_exact: String,
}

impl RecordKey {
    /// The key of a record; `None` for the environment record, which is never compared.
    pub fn of(r: &Record) -> Option<RecordKey> {
        let name = match &r.body {
            Body::Env(_) => return None,
            Body::Scaling(p) => format!("{} [{} scaling, {} threads]", p.name, p.mode, p.threads),
            Body::Duration(d) => format!("{} [{} threads]", d.name, d.threads),
            _ => r.name().unwrap_or_default().to_owned(),
        };
        Some(RecordKey {
            scenario: r.scenario.clone(),
            backend: r.backend.clone(),
            kind: r.kind().to_owned(),
            name,
            params: params_text(&r.params),
            params_exact: format!("{:?}", r.params),
        })
    }

    fn display(&self) -> String {
        if self.params.is_empty() {
            format!(
                "{}/{} {}: {}",
                self.scenario, self.backend, self.kind, self.name
            )
        } else {
            format!(
                "{}/{} {}: {} ({})",
                self.scenario, self.backend, self.kind, self.name, self.params
            )
        }
    }
}

/// The verdict on one matched pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Significantly faster, beyond the threshold.
    Faster,
    /// Significantly slower, beyond the threshold: a regression.
    Slower,
    /// Enough samples to tell, and not significant or within the noise threshold.
    Unchanged,
    /// Too few values on a side for the test ever to reach `p < alpha`: the data cannot tell.
    NotEnoughSamples,
    /// No raw samples on one side: the ratio is shown, but significance cannot be tested.
    Untested,
}

impl Change {
    /// The text shown in the `change` column.
    pub fn text(self) -> &'static str {
        match self {
            Change::Faster => "faster",
            Change::Slower => "SLOWER",
            Change::Unchanged => "no change",
            Change::NotEnoughSamples => "not enough samples",
            Change::Untested => "not tested",
        }
    }
}

/// What the test ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// One run per side: the raw samples within each run.
    WithinRun,
    /// Several runs on at least one side: one number per record per run.
    BetweenRuns {
        /// Runs on side A.
        runs_a: usize,
        /// Runs on side B.
        runs_b: usize,
    },
}

/// One matched pair of records.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The matched key.
    pub key: RecordKey,
    /// What the numbers are (`time per iteration`, `wall time per op`, ...).
    pub metric: &'static str,
    /// A's median, in ns.
    pub a_ns: f64,
    /// B's median, in ns.
    pub b_ns: f64,
    /// `b_ns / a_ns`: above 1 is slower.
    pub ratio: f64,
    /// Bootstrap 95% confidence interval of the ratio, when both sides have samples.
    pub ratio_ci: Option<(f64, f64)>,
    /// Mann-Whitney U two-sided p-value, when both sides have samples.
    pub p_value: Option<f64>,
    /// Values tested on side A (samples within a run, or runs).
    pub n_a: usize,
    /// Values tested on side B.
    pub n_b: usize,
    /// The verdict.
    pub change: Change,
}

impl Row {
    /// True when the test could not decide (not enough samples, or untestable) and the ratio
    /// is beyond the gross-regression ratio.
    pub fn gross_regression(&self, opts: &CompareOptions) -> bool {
        matches!(self.change, Change::NotEnoughSamples | Change::Untested)
            && self.ratio.is_finite()
            && self.ratio > opts.gross_ratio
    }

    /// True when the pair fails `--fail-on-regression`: a marked slowdown, or a gross one.
    pub fn is_regression(&self, opts: &CompareOptions) -> bool {
        self.change == Change::Slower || self.gross_regression(opts)
    }

    fn change_text(&self, opts: &CompareOptions) -> String {
        if self.gross_regression(opts) {
            format!(
                "{}; SLOWER beyond {}",
                self.change.text(),
                units::ratio(opts.gross_ratio)
            )
        } else {
            self.change.text().to_owned()
        }
    }
}

/// How many rows got each verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Significantly faster.
    pub faster: usize,
    /// Significantly slower.
    pub slower: usize,
    /// Tested and unchanged.
    pub unchanged: usize,
    /// Too few samples to tell.
    pub not_enough_samples: usize,
    /// Not testable.
    pub untested: usize,
    /// Rows beyond the gross-regression ratio that the test could not decide.
    pub gross: usize,
}

/// How the cost of one protected configuration moved between the two sides.
#[derive(Debug, Clone, PartialEq)]
pub struct CostRow {
    /// The scenario.
    pub scenario: String,
    /// The workload (the Cost record's name).
    pub workload: String,
    /// The protected configuration's label.
    pub protected: String,
    /// Protected median over unprotected median in A (the median over A's runs).
    pub a_cost: f64,
    /// The same in B.
    pub b_cost: f64,
}

impl CostRow {
    /// `b_cost / a_cost`: above 1, protection costs more in B.
    pub fn ratio(&self) -> f64 {
        self.b_cost / self.a_cost
    }
}

/// The comparison of two sets of runs (A: baseline, B: candidate).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The options used.
    pub options: CompareOptions,
    /// What the test ran on.
    pub basis: Basis,
    /// Matched pairs, in A's order.
    pub rows: Vec<Row>,
    /// Records only in A (kinds that carry numbers, and checks/tables too).
    pub only_in_a: Vec<RecordKey>,
    /// Records only in B.
    pub only_in_b: Vec<RecordKey>,
    /// The cost summary on both sides: one row per protected figure of each Cost record
    /// found on both sides.
    pub costs: Vec<CostRow>,
}

/// The numbers compared for a record: its metric name and raw samples (ns), or a single value.
enum Numbers {
    Samples(&'static str, Vec<f64>),
    Single(&'static str, f64),
    None,
}

impl Numbers {
    fn metric(&self) -> Option<&'static str> {
        match self {
            Numbers::Samples(m, _) | Numbers::Single(m, _) => Some(m),
            Numbers::None => None,
        }
    }

    /// One number for the record: the median of its samples, or its single figure.
    fn central(&self) -> Option<f64> {
        match self {
            Numbers::Samples(_, s) => median(s).ok(),
            Numbers::Single(_, v) => Some(*v).filter(|v| v.is_finite()),
            Numbers::None => None,
        }
    }
}

fn numbers(r: &Record) -> Numbers {
    match &r.body {
        Body::Measurement(m) => Numbers::Samples("time per iteration", m.samples_ns.clone()),
        Body::Scaling(p) => {
            // Per operation, so that a sweep with a different operation count still compares.
            let ops = p.ops_total.max(1) as f64;
            Numbers::Samples(
                "wall time per op",
                p.wall_samples_ns.iter().map(|w| w / ops).collect(),
            )
        }
        Body::Duration(d) if d.ops_per_s > 0.0 => Numbers::Single("time per op", 1e9 / d.ops_per_s),
        Body::Stages(s) => Numbers::Single("time per run", s.total_ns / s.runs.max(1) as f64),
        Body::Histogram(h) => Numbers::Single("p50 latency", h.p50_ns),
        _ => Numbers::None,
    }
}

/// The verdict for a tested pair of sample sets.
fn verdict(p: Option<f64>, ratio: f64, n_a: usize, n_b: usize, opts: &CompareOptions) -> Change {
    let Some(p) = p else {
        return Change::Untested;
    };
    if !ratio.is_finite() {
        return Change::Untested;
    }
    let attainable = min_attainable_p(n_a, n_b).unwrap_or(1.0);
    if n_a < MIN_SAMPLES || n_b < MIN_SAMPLES || attainable >= opts.alpha {
        return Change::NotEnoughSamples;
    }
    if p < opts.alpha && (ratio - 1.0).abs() > opts.threshold {
        if ratio > 1.0 {
            Change::Slower
        } else {
            Change::Faster
        }
    } else {
        Change::Unchanged
    }
}

/// A row from two sample sets (raw samples within a run, or per-run numbers).
fn tested_row(
    key: RecordKey,
    metric: &'static str,
    sa: &[f64],
    sb: &[f64],
    opts: &CompareOptions,
) -> Option<Row> {
    let (a_ns, b_ns) = (median(sa).ok()?, median(sb).ok()?);
    let ratio = b_ns / a_ns;
    let ci = if sa.len() > 1 || sb.len() > 1 {
        bootstrap_ratio_ci(sa, sb).ok()
    } else {
        None
    };
    let p = mann_whitney_u(sa, sb).ok().map(|m| m.p_value);
    Some(Row {
        key,
        metric,
        a_ns,
        b_ns,
        ratio,
        ratio_ci: ci,
        p_value: p,
        n_a: sa.len(),
        n_b: sb.len(),
        change: verdict(p, ratio, sa.len(), sb.len(), opts),
    })
}

/// One run per side: the raw samples within each run.
fn compare_within(key: RecordKey, a: &Record, b: &Record, opts: &CompareOptions) -> Option<Row> {
    let (metric, a_ns, b_ns) = match (numbers(a), numbers(b)) {
        (Numbers::Samples(metric, sa), Numbers::Samples(_, sb)) => {
            return tested_row(key, metric, &sa, &sb, opts);
        }
        (Numbers::Samples(metric, sa), Numbers::Single(_, vb)) => (metric, median(&sa).ok()?, vb),
        (Numbers::Single(metric, va), Numbers::Samples(_, sb)) => (metric, va, median(&sb).ok()?),
        (Numbers::Single(metric, va), Numbers::Single(_, vb)) => (metric, va, vb),
        _ => return None,
    };
    let ratio = b_ns / a_ns;
    Some(Row {
        key,
        metric,
        a_ns,
        b_ns,
        ratio,
        ratio_ci: None,
        p_value: None,
        n_a: 1,
        n_b: 1,
        change: Change::Untested,
    })
}

/// Several runs: one number per record per run, tested across runs.
fn compare_between(
    key: RecordKey,
    a: &[&Record],
    b: &[&Record],
    opts: &CompareOptions,
) -> Option<Row> {
    let na: Vec<Numbers> = a.iter().map(|r| numbers(r)).collect();
    let nb: Vec<Numbers> = b.iter().map(|r| numbers(r)).collect();
    let metric = na.iter().chain(&nb).find_map(Numbers::metric)?;
    let va: Vec<f64> = na.iter().filter_map(Numbers::central).collect();
    let vb: Vec<f64> = nb.iter().filter_map(Numbers::central).collect();
    if va.is_empty() || vb.is_empty() {
        return None;
    }
    tested_row(key, metric, &va, &vb, opts)
}

/// The records of one side, by (key, occurrence within its run), in order of first appearance.
struct Side<'r> {
    order: Vec<(RecordKey, usize)>,
    runs: HashMap<(RecordKey, usize), Vec<&'r Record>>,
}

impl<'r> Side<'r> {
    fn index<R: AsRef<[Record]>>(runs: &'r [R]) -> Side<'r> {
        let mut side = Side {
            order: Vec::new(),
            runs: HashMap::new(),
        };
        for run in runs {
            let mut nth: HashMap<RecordKey, usize> = HashMap::new();
            for r in run.as_ref() {
                let Some(key) = RecordKey::of(r) else {
                    continue;
                };
                let n = nth.entry(key.clone()).or_insert(0);
                let full = (key, *n);
                *n += 1;
                match side.runs.get_mut(&full) {
                    Some(v) => v.push(r),
                    None => {
                        side.order.push(full.clone());
                        side.runs.insert(full, vec![r]);
                    }
                }
            }
        }
        side
    }
}

/// Compares candidate `b` against baseline `a`, one run each: the test runs on the raw
/// samples within the two runs.
pub fn compare(a: &[Record], b: &[Record], opts: &CompareOptions) -> Comparison {
    compare_runs(&[a], &[b], opts)
}

/// Compares the runs of candidate `b` against the runs of baseline `a`. With one run on each
/// side the test runs within the runs (as [`compare`]); with several on either side, each
/// record's per-run numbers are tested across runs. A record present in only some runs of a
/// side is tested on the runs that have it.
pub fn compare_runs<R: AsRef<[Record]>>(a: &[R], b: &[R], opts: &CompareOptions) -> Comparison {
    let basis = if a.len() <= 1 && b.len() <= 1 {
        Basis::WithinRun
    } else {
        Basis::BetweenRuns {
            runs_a: a.len(),
            runs_b: b.len(),
        }
    };
    let side_a = Side::index(a);
    let side_b = Side::index(b);
    let mut rows = Vec::new();
    let mut only_in_a = Vec::new();
    for full in &side_a.order {
        let ra = &side_a.runs[full];
        let Some(rb) = side_b.runs.get(full) else {
            only_in_a.push(full.0.clone());
            continue;
        };
        let row = match basis {
            Basis::WithinRun => compare_within(full.0.clone(), ra[0], rb[0], opts),
            Basis::BetweenRuns { .. } => compare_between(full.0.clone(), ra, rb, opts),
        };
        rows.extend(row);
    }
    let mut costs = Vec::new();
    for full in &side_a.order {
        if let (Some(ra), Some(rb)) = (side_a.runs.get(full), side_b.runs.get(full)) {
            costs.extend(cost_rows(ra, rb));
        }
    }
    let only_in_b = side_b
        .order
        .iter()
        .filter(|full| !side_a.runs.contains_key(*full))
        .map(|full| full.0.clone())
        .collect();
    Comparison {
        options: *opts,
        basis,
        rows,
        only_in_a,
        only_in_b,
        costs,
    }
}

/// Per protected label (in A's first record's order), the median over each side's runs of the
/// cost ratio protected / unprotected.
fn cost_rows(a: &[&Record], b: &[&Record]) -> Vec<CostRow> {
    let cost = |r: &&Record| match &r.body {
        Body::Cost(c) => Some(c.clone()),
        _ => None,
    };
    let ca: Vec<Cost> = a.iter().filter_map(cost).collect();
    let cb: Vec<Cost> = b.iter().filter_map(cost).collect();
    let Some(first) = ca.first() else {
        return Vec::new();
    };
    let per_run = |cs: &[Cost], label: &str| -> Option<f64> {
        let ratios: Vec<f64> = cs
            .iter()
            .filter_map(|c| {
                let p = c.protected.iter().find(|p| p.label == label)?;
                Some(crate::cost::ratio(&c.baseline, p)).filter(|r| r.is_finite())
            })
            .collect();
        median(&ratios).ok()
    };
    first
        .protected
        .iter()
        .filter_map(|p| {
            Some(CostRow {
                scenario: a[0].scenario.clone(),
                workload: first.name.clone(),
                protected: p.label.clone(),
                a_cost: per_run(&ca, &p.label)?,
                b_cost: per_run(&cb, &p.label)?,
            })
        })
        .collect()
}

impl Comparison {
    /// True when at least one matched record fails `--fail-on-regression`: significantly
    /// slower beyond the threshold, or, where the test cannot decide, slower beyond the
    /// gross-regression ratio.
    pub fn has_regression(&self) -> bool {
        self.rows.iter().any(|r| r.is_regression(&self.options))
    }

    /// How many rows got each verdict.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.rows {
            match r.change {
                Change::Faster => c.faster += 1,
                Change::Slower => c.slower += 1,
                Change::Unchanged => c.unchanged += 1,
                Change::NotEnoughSamples => c.not_enough_samples += 1,
                Change::Untested => c.untested += 1,
            }
            if r.gross_regression(&self.options) {
                c.gross += 1;
            }
        }
        c
    }

    fn table(&self) -> Table {
        let n_header = match self.basis {
            Basis::WithinRun => "n (samples)",
            Basis::BetweenRuns { .. } => "n (runs)",
        };
        let mut t = Table::new([
            "scenario", "backend", "kind", "name", "params", "metric", "A", "B", "B/A", "95% CI",
            "p", n_header, "change",
        ])
        .right(6..12);
        for r in &self.rows {
            t.push(vec![
                r.key.scenario.clone(),
                r.key.backend.clone(),
                r.key.kind.clone(),
                r.key.name.clone(),
                r.key.params.clone(),
                r.metric.to_owned(),
                units::duration_ns(r.a_ns),
                units::duration_ns(r.b_ns),
                units::ratio(r.ratio),
                r.ratio_ci
                    .map(|(lo, hi)| format!("{:.3}–{:.3}", lo, hi))
                    .unwrap_or_default(),
                r.p_value.map(units::p_value).unwrap_or_default(),
                format!("{}/{}", r.n_a, r.n_b),
                r.change_text(&self.options),
            ]);
        }
        t
    }

    fn cost_table(&self) -> Option<Table> {
        if self.costs.is_empty() {
            return None;
        }
        let mut t = Table::new([
            "scenario",
            "workload",
            "protected",
            "cost in A",
            "cost in B",
            "B/A",
        ])
        .right(3..6);
        for c in &self.costs {
            t.push(vec![
                c.scenario.clone(),
                c.workload.clone(),
                c.protected.clone(),
                units::ratio(c.a_cost),
                units::ratio(c.b_cost),
                units::ratio(c.ratio()),
            ]);
        }
        Some(t)
    }

    fn basis_line(&self) -> String {
        match self.basis {
            Basis::WithinRun => "Tested on the samples within one run per side: they do not see \
                                 drift between runs, so give several runs per side \
                                 (`A1 A2 ... -- B1 B2 ...`) before trusting a small change."
                .to_owned(),
            Basis::BetweenRuns { runs_a, runs_b } => format!(
                "Tested between runs: {runs_a} run(s) of A, {runs_b} of B; each record's \
                 per-run median (or single figure) is one value."
            ),
        }
    }

    fn summary_line(&self) -> String {
        let c = self.counts();
        format!(
            "{} matched: {} slower, {} faster, {} unchanged, {} not enough samples, {} not \
             tested (a change needs p < {} and a shift of more than {:.1}%; at least {} values \
             per side, and sample sizes at which p < {} is attainable); {} beyond the gross \
             ratio {}; {} only in A, {} only in B.",
            self.rows.len(),
            c.slower,
            c.faster,
            c.unchanged,
            c.not_enough_samples,
            c.untested,
            self.options.alpha,
            self.options.threshold * 100.0,
            MIN_SAMPLES,
            self.options.alpha,
            c.gross,
            units::ratio(self.options.gross_ratio),
            self.only_in_a.len(),
            self.only_in_b.len()
        )
    }

    fn unmatched(&self) -> Vec<(&'static str, Vec<String>)> {
        [
            ("Only in A (baseline)", &self.only_in_a),
            ("Only in B (candidate)", &self.only_in_b),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(title, v)| (title, v.iter().map(RecordKey::display).collect()))
        .collect()
    }

    /// The comparison as box tables for a terminal.
    pub fn render_terminal(&self) -> String {
        self.render_terminal_with(Charset::Unicode)
    }

    /// The comparison for a terminal, drawn with the given characters.
    pub fn render_terminal_with(&self, charset: Charset) -> String {
        let mut out = String::new();
        if self.has_regression() {
            out.push_str(
                "REGRESSION: at least one record is significantly slower, or slower beyond \
                 the gross ratio where the test cannot tell.\n",
            );
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out.push_str(&self.basis_line());
        out.push('\n');
        if let Some(t) = self.cost_table() {
            out.push_str(&format!("\n{COST_HEADING}\n"));
            out.push_str(&t.to_terminal(charset));
            out.push('\n');
        }
        if !self.rows.is_empty() {
            out.push_str(&self.table().to_terminal(charset));
        }
        for (title, items) in self.unmatched() {
            out.push_str(&format!("\n{title}:\n"));
            for item in items {
                out.push_str(&format!("  - {item}\n"));
            }
        }
        if charset == Charset::Ascii {
            out = crate::table::to_ascii(&out);
        }
        out
    }

    /// The comparison as GitHub markdown.
    pub fn render_markdown(&self) -> String {
        let mut out = String::from("## Comparison (B / A)\n\n");
        if self.has_regression() {
            out.push_str(
                "> **REGRESSION:** at least one record is significantly slower, or slower \
                 beyond the gross ratio where the test cannot tell.\n\n",
            );
        }
        out.push_str(&self.summary_line());
        out.push_str("\n\n");
        out.push_str(&self.basis_line());
        out.push_str("\n\n");
        if let Some(t) = self.cost_table() {
            out.push_str(&format!("### {COST_HEADING}\n\n"));
            out.push_str(&t.to_markdown());
            out.push('\n');
        }
        if !self.rows.is_empty() {
            out.push_str(&self.table().to_markdown());
            out.push('\n');
        }
        for (title, items) in self.unmatched() {
            out.push_str(&format!("### {title}\n\n"));
            for item in items {
                out.push_str(&format!(
                    "- {}\n",
                    crate::table::markdown_cell(&item).replace('<', "&lt;")
                ));
            }
            out.push('\n');
        }
        while out.ends_with("\n\n") {
            out.pop();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use measure::params;
    use measure::record::{Measurement, ScalingMode, ScalingPoint};
    use measure::stats::Summary;

    /// Deterministic noisy samples around `center` (±2% uniform-ish jitter).
    fn samples(center: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                center * (1.0 + 0.04 * (u - 0.5))
            })
            .collect()
    }

    fn meas(name: &str, size: i64, s: Vec<f64>) -> Record {
        let summary = Summary::from_samples(&s).unwrap();
        let ops = 1e9 / summary.median_ns;
        Record::new(
            "crypto",
            "native",
            params! { "size_bytes" => size },
            Body::Measurement(Measurement {
                name: name.into(),
                iters_per_sample: 100,
                samples_ns: s,
                summary,
                overhead_ns: Some(0.5),
                ops_per_s: ops,
                bytes_per_op: None,
                bytes_per_s: None,
            }),
        )
    }

    fn scaling(threads: u64, walls: Vec<f64>) -> Record {
        let wall = median(&walls).unwrap();
        Record::new(
            "crypto",
            "native",
            params! {},
            Body::Scaling(ScalingPoint {
                name: "seal".into(),
                mode: ScalingMode::Weak,
                threads,
                cores: 2,
                oversubscribed: threads > 2,
                ops_total: 1000 * threads,
                wall_samples_ns: walls,
                wall_ns: wall,
                ops_per_s: 1000.0 * threads as f64 / wall * 1e9,
                speedup: 1.0,
                efficiency: 1.0,
            }),
        )
    }

    #[test]
    fn detects_a_20_percent_slowdown_and_speedup() {
        let a = vec![
            meas("seal", 256, samples(1000.0, 50, 1)),
            meas("open", 256, samples(1000.0, 50, 2)),
        ];
        let b = vec![
            meas("seal", 256, samples(1200.0, 50, 3)),
            meas("open", 256, samples(800.0, 50, 4)),
        ];
        let c = compare(&a, &b, &CompareOptions::default());
        assert_eq!(c.rows.len(), 2);
        let seal = &c.rows[0];
        assert_eq!(seal.key.name, "seal");
        assert_eq!(seal.change, Change::Slower);
        assert!((seal.ratio - 1.2).abs() < 0.03, "ratio {}", seal.ratio);
        let (lo, hi) = seal.ratio_ci.unwrap();
        assert!(lo < seal.ratio && seal.ratio < hi && lo > 1.1);
        assert!(seal.p_value.unwrap() < 0.001);
        let open = &c.rows[1];
        assert_eq!(open.change, Change::Faster);
        assert!((open.ratio - 0.8).abs() < 0.03);
        assert!(c.has_regression());
        assert!(c.only_in_a.is_empty() && c.only_in_b.is_empty());
        let md = c.render_markdown();
        assert!(md.contains("SLOWER") && md.contains("faster") && md.contains("REGRESSION"));
        assert!(c.render_terminal().contains("SLOWER"));
    }

    #[test]
    fn no_shift_is_not_flagged() {
        let a = vec![meas("seal", 256, samples(1000.0, 50, 1))];
        let b = vec![meas("seal", 256, samples(1000.0, 50, 7))];
        let c = compare(&a, &b, &CompareOptions::default());
        assert_eq!(c.rows[0].change, Change::Unchanged);
        assert!(!c.has_regression());
        assert!((c.rows[0].ratio - 1.0).abs() < 0.02);
    }

    #[test]
    fn small_significant_shift_is_below_the_threshold() {
        // A 3% shift with ±2% jitter over 200 samples is clearly significant, but below 5%.
        let a = vec![meas("seal", 256, samples(1000.0, 200, 1))];
        let b = vec![meas("seal", 256, samples(1030.0, 200, 9))];
        let c = compare(&a, &b, &CompareOptions::default());
        let row = &c.rows[0];
        assert!(row.p_value.unwrap() < 0.05, "p {:?}", row.p_value);
        assert_eq!(row.change, Change::Unchanged);
        assert!(!c.has_regression());
        // With a 1% threshold the same shift counts.
        let c = compare(
            &a,
            &b,
            &CompareOptions {
                threshold: 0.01,
                ..CompareOptions::default()
            },
        );
        assert_eq!(c.rows[0].change, Change::Slower);
    }

    #[test]
    fn unmatched_records_are_listed() {
        let a = vec![
            meas("seal", 256, samples(1000.0, 20, 1)),
            meas("seal", 1024, samples(1000.0, 20, 2)),
        ];
        let b = vec![
            meas("seal", 256, samples(1000.0, 20, 3)),
            meas("open", 256, samples(1000.0, 20, 4)),
        ];
        let c = compare(&a, &b, &CompareOptions::default());
        assert_eq!(c.rows.len(), 1);
        assert_eq!(c.only_in_a.len(), 1);
        assert_eq!(c.only_in_a[0].params, "size_bytes=1024");
        assert_eq!(c.only_in_b.len(), 1);
        assert_eq!(c.only_in_b[0].name, "open");
        let md = c.render_markdown();
        assert!(md.contains("Only in A"), "{md}");
        assert!(md.contains("crypto/native measurement: open (size_bytes=256)"));
    }

    #[test]
    fn scaling_points_use_wall_samples_per_op() {
        let a = vec![
            scaling(1, samples(1e6, 20, 1)),
            scaling(2, samples(1e6, 20, 2)),
        ];
        let b = vec![
            scaling(1, samples(1e6, 20, 3)),
            scaling(2, samples(1.5e6, 20, 4)),
        ];
        let c = compare(&a, &b, &CompareOptions::default());
        assert_eq!(c.rows.len(), 2);
        assert_eq!(c.rows[0].change, Change::Unchanged);
        assert_eq!(c.rows[1].change, Change::Slower);
        assert_eq!(c.rows[1].key.name, "seal [weak scaling, 2 threads]");
        // Per op: 1.5 ms over 2000 ops.
        assert!((c.rows[1].b_ns - 750.0).abs() < 20.0);
    }

    #[test]
    fn int_and_float_params_do_not_match() {
        let mut b = meas("seal", 256, samples(1000.0, 20, 3));
        b.params = params! { "size_bytes" => 256.0 };
        let c = compare(
            &[meas("seal", 256, samples(1000.0, 20, 1))],
            &[b],
            &CompareOptions::default(),
        );
        assert!(c.rows.is_empty());
        assert_eq!((c.only_in_a.len(), c.only_in_b.len()), (1, 1));
    }

    #[test]
    fn attainable_p_values() {
        // Complete separation under the normal approximation with continuity correction.
        let p = |a, b| min_attainable_p(a, b).unwrap();
        assert!((p(2, 2) - 0.245).abs() < 0.005, "{}", p(2, 2));
        assert!((p(3, 3) - 0.081).abs() < 0.005, "{}", p(3, 3));
        assert!((p(4, 4) - 0.030).abs() < 0.005, "{}", p(4, 4));
        assert!(p(5, 5) < 0.02);
        assert!(p(2, 2) > p(3, 3) && p(3, 3) > p(4, 4));
        assert_eq!(min_attainable_p(0, 5), None);
    }

    #[test]
    fn a_10x_slowdown_with_two_samples_is_not_enough_samples_and_a_gross_regression() {
        let a = vec![meas("seal", 256, vec![1000.0, 1010.0])];
        let b = vec![meas("seal", 256, vec![10_000.0, 10_100.0])];
        let c = compare(&a, &b, &CompareOptions::default());
        let row = &c.rows[0];
        assert_eq!(row.change, Change::NotEnoughSamples);
        assert!((row.ratio - 10.0).abs() < 0.01);
        assert!(row.gross_regression(&c.options));
        assert!(c.has_regression());
        let text = c.render_terminal();
        assert!(text.contains("not enough samples"), "{text}");
        assert!(!text.contains("no change"), "{text}");
        assert_eq!(c.counts().not_enough_samples, 1);
        assert_eq!(c.counts().unchanged, 0);
        // Below the gross ratio, the same undecidable pair does not fail.
        let b = vec![meas("seal", 256, vec![1200.0, 1210.0])];
        let c = compare(&a, &b, &CompareOptions::default());
        assert_eq!(c.rows[0].change, Change::NotEnoughSamples);
        assert!(!c.has_regression());
        // A gross ratio can be raised.
        let b = vec![meas("seal", 256, vec![10_000.0, 10_100.0])];
        let opts = CompareOptions {
            gross_ratio: 20.0,
            ..CompareOptions::default()
        };
        assert!(!compare(&a, &b, &opts).has_regression());
    }

    #[test]
    fn untestable_single_figures_fail_only_beyond_the_gross_ratio() {
        let dur = |ops_per_s: f64| {
            Record::new(
                "x509",
                "native",
                params! {},
                Body::Duration(measure::record::DurationPass {
                    name: "verify".into(),
                    threads: 1,
                    cores: 2,
                    oversubscribed: false,
                    target_ns: 1e9,
                    wall_ns: 1e9,
                    ops_total: ops_per_s as u64,
                    ops_per_thread: vec![ops_per_s as u64],
                    ops_per_s,
                    ops_per_s_per_thread: ops_per_s,
                }),
            )
        };
        let c = compare(&[dur(1000.0)], &[dur(900.0)], &CompareOptions::default());
        assert_eq!(c.rows[0].change, Change::Untested);
        assert!(!c.has_regression());
        let c = compare(&[dur(1000.0)], &[dur(100.0)], &CompareOptions::default());
        assert_eq!(c.rows[0].change, Change::Untested);
        assert!(c.has_regression());
    }

    /// `runs` runs, each with one measurement whose samples sit around `center * drift_i`,
    /// where each run drifts by up to ±`drift` (deterministic).
    fn runs(center: f64, n_runs: usize, drift: f64, seed: u64) -> Vec<Vec<Record>> {
        (0..n_runs)
            .map(|i| {
                let d = samples(1.0, n_runs, seed)[i];
                let shift = 1.0 + drift * (d - 1.0) / 0.02;
                vec![meas(
                    "evaluate AND",
                    0,
                    samples(center * shift, 30, seed * 100 + i as u64),
                )]
            })
            .collect()
    }

    #[test]
    fn within_run_samples_cry_wolf_on_drift_that_between_run_testing_absorbs() {
        // Same distribution of runs on both sides, but each run drifts by up to ±10%: the
        // within-run test on one run per side sees tight samples 10% apart and marks a change;
        // the between-run test on five runs per side sees the drift as noise.
        let a = runs(1000.0, 5, 0.10, 1);
        let b = runs(1000.0, 5, 0.10, 2);
        let c = compare_runs(&a, &b, &CompareOptions::default());
        assert!(matches!(
            c.basis,
            Basis::BetweenRuns {
                runs_a: 5,
                runs_b: 5
            }
        ));
        assert_eq!(c.rows.len(), 1);
        assert_eq!(c.rows[0].change, Change::Unchanged, "{:?}", c.rows[0]);
        assert_eq!((c.rows[0].n_a, c.rows[0].n_b), (5, 5));
        assert!(!c.has_regression());
        // Some single pair of those runs does differ within-run (the wolf).
        let cried = (0..5).any(|i| {
            let c = compare(&a[i], &b[(i + 1) % 5], &CompareOptions::default());
            c.rows[0].change != Change::Unchanged
        });
        assert!(cried);
    }

    #[test]
    fn a_a_identical_runs_are_unchanged() {
        let a = runs(1000.0, 5, 0.02, 3);
        let c = compare_runs(&a, &a, &CompareOptions::default());
        assert_eq!(c.rows[0].change, Change::Unchanged);
        assert_eq!(c.rows[0].p_value, Some(1.0));
        assert!((c.rows[0].ratio - 1.0).abs() < 1e-12);
        assert!(!c.has_regression());
    }

    #[test]
    fn a_20_percent_shift_between_enough_runs_is_marked() {
        let a = runs(1000.0, 5, 0.03, 4);
        let b = runs(1200.0, 5, 0.03, 5);
        let c = compare_runs(&a, &b, &CompareOptions::default());
        let row = &c.rows[0];
        assert_eq!(row.change, Change::Slower, "{row:?}");
        assert!((row.ratio - 1.2).abs() < 0.05);
        assert!(c.has_regression());
        let text = c.render_markdown();
        assert!(
            text.contains("Tested between runs: 5 run(s) of A, 5 of B"),
            "{text}"
        );
        // With two runs per side the same shift cannot be decided.
        let c = compare_runs(&a[..2], &b[..2], &CompareOptions::default());
        assert_eq!(c.rows[0].change, Change::NotEnoughSamples);
        assert!(!c.has_regression(), "1.2x is below the gross ratio");
    }

    #[test]
    fn records_missing_from_some_runs_are_tested_on_the_runs_that_have_them() {
        let mut a = runs(1000.0, 4, 0.02, 6);
        a[0].push(meas("open", 1, samples(10.0, 10, 1)));
        let b = runs(1000.0, 4, 0.02, 7);
        let c = compare_runs(&a, &b, &CompareOptions::default());
        assert_eq!(c.rows.len(), 1);
        assert_eq!(c.only_in_a.len(), 1);
        assert_eq!(c.only_in_a[0].name, "open");
    }

    #[test]
    fn the_cost_summary_compares_each_cost() {
        use measure::record::CostFigure;
        let cost = |native: f64, sandbox: f64| {
            let fig = |label: &str, c: f64| CostFigure {
                label: label.into(),
                backend: label.into(),
                samples_ns: vec![c, c, c],
                median_ns: c,
            };
            Record::new(
                "sealing",
                "all",
                params! {},
                Body::Cost(Cost {
                    name: "seal 1 KiB".into(),
                    unit: "record".into(),
                    baseline: fig("native", native),
                    protected: vec![fig("sandbox", sandbox)],
                }),
            )
        };
        let c = compare(
            &[cost(100.0, 300.0)],
            &[cost(100.0, 450.0)],
            &CompareOptions::default(),
        );
        assert_eq!(c.costs.len(), 1);
        assert_eq!((c.costs[0].a_cost, c.costs[0].b_cost), (3.0, 4.5));
        assert!((c.costs[0].ratio() - 1.5).abs() < 1e-12);
        let text = c.render_terminal();
        assert!(
            text.contains("What confidentiality costs, A and B"),
            "{text}"
        );
        assert!(text.contains("3.00×") && text.contains("4.50×") && text.contains("1.50×"));
        assert!(
            c.render_markdown()
                .contains("### What confidentiality costs")
        );
        // Between runs: the median of the per-run costs.
        let a = vec![
            vec![cost(100.0, 300.0)],
            vec![cost(100.0, 200.0)],
            vec![cost(100.0, 250.0)],
        ];
        let c = compare_runs(&a, &a, &CompareOptions::default());
        assert_eq!(c.costs[0].a_cost, 2.5);
    }
}
