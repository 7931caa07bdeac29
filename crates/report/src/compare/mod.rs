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
//!
//! Between runs, a claim must also hold **run for run**, because a record's own runs can
//! spread more than the change its medians show (a switchless call that hits in one run and
//! misses in the next spreads 3–6× on one machine). Each side's [`spread`] is the ratio of its
//! slowest run to its fastest (per-run numbers; from 10 runs on, the fastest and slowest tenth
//! of the runs are left out, so that the spread does not grow with the number of runs). A
//! pair marked slower or faster by the test is kept only when every run of the slower side is
//! slower than every run of the other by more than the noise threshold, and a gross
//! regression only when every run is slower by more than the gross ratio ([`separation`]).
//! Otherwise the change is within the record's own spread and the pair is marked
//! [`Change::Unstable`]; so is a pair with no claim whose runs spread more than the gross
//! ratio on either side, where no verdict at that ratio, or below it, can be trusted. An
//! unstable pair never counts as a regression.

use std::collections::HashMap;

use measure::Record;
use measure::record::{Body, Cost};
use measure::stats::{bootstrap_ratio_ci, mann_whitney_u, median};

use crate::doc::params_text;
use crate::units;

mod render;
#[cfg(test)]
mod tests;

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
    /// Between runs: the change the medians show is within the record's own spread (the runs
    /// of the two sides overlap the bar the change would have to clear), or a side's runs
    /// spread more than the gross ratio. Never a regression.
    Unstable,
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
            Change::Unstable => "unstable",
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
    /// Between runs, how A's runs spread ([`spread`]); `None` within one run, or with fewer
    /// than two runs on the side.
    pub spread_a: Option<f64>,
    /// How B's runs spread.
    pub spread_b: Option<f64>,
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

    /// The larger of the two sides' spreads, when either is known.
    pub fn spread(&self) -> Option<f64> {
        match (self.spread_a, self.spread_b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    fn change_text(&self, opts: &CompareOptions) -> String {
        if self.change == Change::Unstable {
            return "unstable: within its runs' spread".to_owned();
        }
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
    /// Unstable: the change is within the record's own spread between runs.
    pub unstable: usize,
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
        // A point that repeated its pass has one rate per pass: samples to test.
        Body::Duration(d) if !d.pass_ops_per_s.is_empty() => Numbers::Samples(
            "time per op",
            d.pass_ops_per_s
                .iter()
                .filter(|r| **r > 0.0)
                .map(|r| 1e9 / r)
                .collect(),
        ),
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
        spread_a: None,
        spread_b: None,
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
        spread_a: None,
        spread_b: None,
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
    let mut row = tested_row(key, metric, &va, &vb, opts)?;
    row.spread_a = spread(&va);
    row.spread_b = spread(&vb);
    if unstable(&row, &va, &vb, opts) {
        row.change = Change::Unstable;
    }
    Some(row)
}

/// The fastest and the slowest of one side's per-run values, with the fastest and slowest
/// tenth of the runs (rounded down: none below 10 runs) left out. `None` when `values` is
/// empty or holds a value that is not finite.
fn run_range(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let k = sorted.len() / 10;
    Some((sorted[k], sorted[sorted.len() - 1 - k]))
}

/// How one side's runs spread: its slowest run over its fastest, leaving out the fastest and
/// slowest tenth of the runs from 10 runs on (so that more runs do not widen it by their
/// extremes alone). 1 means every run gave the same number. `None` with fewer than two runs
/// or a value that is not finite; infinite when the fastest run is 0 and another is not.
pub fn spread(runs: &[f64]) -> Option<f64> {
    if runs.len() < 2 {
        return None;
    }
    let (fastest, slowest) = run_range(runs)?;
    if slowest <= fastest {
        Some(1.0)
    } else if fastest > 0.0 {
        Some(slowest / fastest)
    } else {
        Some(f64::INFINITY)
    }
}

/// How far apart the runs of the two sides are in the direction of `ratio` (`B / A`): for a
/// slowdown the fastest run of B over the slowest run of A, for a speed-up the fastest run of
/// A over the slowest of B (each with the tenth left out as in [`spread`]). Above 1 the runs
/// do not overlap; above a bar, every run of the slower side is slower than every run of the
/// other by more than that bar. `None` when a side is empty or not finite.
pub fn separation(a_runs: &[f64], b_runs: &[f64], ratio: f64) -> Option<f64> {
    let (a_fast, a_slow) = run_range(a_runs)?;
    let (b_fast, b_slow) = run_range(b_runs)?;
    let (slower_fastest, faster_slowest) = if ratio >= 1.0 {
        (b_fast, a_slow)
    } else {
        (a_fast, b_slow)
    };
    (faster_slowest > 0.0).then(|| slower_fastest / faster_slowest)
}

/// Whether a row tested between runs is unstable: the claim it would make (a marked change,
/// or a gross regression) does not hold run for run beyond its bar (the noise threshold, or
/// the gross ratio), or it makes no claim and a side's runs spread more than the gross ratio.
fn unstable(row: &Row, a_runs: &[f64], b_runs: &[f64], opts: &CompareOptions) -> bool {
    let bar = match row.change {
        Change::Slower | Change::Faster => Some(1.0 + opts.threshold),
        _ if row.gross_regression(opts) => Some(opts.gross_ratio),
        _ => None,
    };
    match bar {
        Some(bar) => separation(a_runs, b_runs, row.ratio).is_none_or(|s| s <= bar),
        None => row.spread().is_some_and(|s| s > opts.gross_ratio),
    }
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
    /// gross-regression ratio. Unstable records never count.
    pub fn has_regression(&self) -> bool {
        self.rows.iter().any(|r| r.is_regression(&self.options))
    }

    /// The rows marked unstable: the records whose runs on this machine spread more than the
    /// change they show, or more than the gross ratio.
    pub fn unstable(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.change == Change::Unstable)
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
                Change::Unstable => c.unstable += 1,
            }
            if r.gross_regression(&self.options) {
                c.gross += 1;
            }
        }
        c
    }
}
