//! Comparing two results files: which operations got faster or slower, and whether the
//! difference is real.
//!
//! Records are matched by (scenario, backend, kind, name, params) — plus scaling mode and
//! thread count for sweep points and thread count for fixed-duration passes, which live in the
//! body rather than `params`. When a key repeats within a file, the n-th occurrence in A is
//! matched with the n-th in B.
//!
//! Every compared quantity is a time (per iteration, per operation, per run), so the ratio
//! `B / A` above 1 means B is slower. A change is marked only when the Mann-Whitney U test on
//! the raw samples is significant (`p < alpha`) *and* the ratio of medians moves by more than the
//! noise threshold; kinds without raw samples (duration passes, stage totals, histogram
//! medians) show their ratio but are never marked.

use std::collections::HashMap;

use measure::Record;
use measure::record::Body;
use measure::stats::{bootstrap_ratio_ci, mann_whitney_u, median};

use crate::doc::params_text;
use crate::table::{Charset, Table};
use crate::units;

/// When a difference counts as a change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Significance level of the two-sided Mann-Whitney U test (default 0.05).
    pub alpha: f64,
    /// Smallest relative change of the median marked as a change, as a fraction (default
    /// 0.05, i.e. 5%).
    pub threshold: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            alpha: 0.05,
            threshold: 0.05,
        }
    }
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
    /// Not significant, or within the noise threshold.
    Unchanged,
    /// No raw samples on one side: the ratio is shown, but significance cannot be tested.
    Untested,
}

impl Change {
    fn text(self) -> &'static str {
        match self {
            Change::Faster => "faster",
            Change::Slower => "SLOWER",
            Change::Unchanged => "no change",
            Change::Untested => "not tested",
        }
    }
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
    /// The verdict.
    pub change: Change,
}

/// The comparison of two results files (A: baseline, B: candidate).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The options used.
    pub options: CompareOptions,
    /// Matched pairs, in A's order.
    pub rows: Vec<Row>,
    /// Records only in A (kinds that carry numbers, and checks/tables too).
    pub only_in_a: Vec<RecordKey>,
    /// Records only in B.
    pub only_in_b: Vec<RecordKey>,
}

/// The numbers compared for a record: its metric name and raw samples (ns), or a single value.
enum Numbers {
    Samples(&'static str, Vec<f64>),
    Single(&'static str, f64),
    None,
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

fn compare_pair(key: RecordKey, a: &Record, b: &Record, opts: &CompareOptions) -> Option<Row> {
    let (metric, a_ns, b_ns, ci, p) = match (numbers(a), numbers(b)) {
        (Numbers::Samples(metric, sa), Numbers::Samples(_, sb)) => {
            match (median(&sa), median(&sb)) {
                (Ok(ma), Ok(mb)) => {
                    let ci = bootstrap_ratio_ci(&sa, &sb).ok();
                    let p = mann_whitney_u(&sa, &sb).ok().map(|m| m.p_value);
                    (metric, ma, mb, ci, p)
                }
                _ => return None,
            }
        }
        (Numbers::Samples(metric, sa), Numbers::Single(_, vb)) => {
            (metric, median(&sa).ok()?, vb, None, None)
        }
        (Numbers::Single(metric, va), Numbers::Samples(_, sb)) => {
            (metric, va, median(&sb).ok()?, None, None)
        }
        (Numbers::Single(metric, va), Numbers::Single(_, vb)) => (metric, va, vb, None, None),
        _ => return None,
    };
    let ratio = b_ns / a_ns;
    let change = match p {
        None => Change::Untested,
        Some(_) if !ratio.is_finite() => Change::Untested,
        Some(p) if p < opts.alpha && (ratio - 1.0).abs() > opts.threshold => {
            if ratio > 1.0 {
                Change::Slower
            } else {
                Change::Faster
            }
        }
        Some(_) => Change::Unchanged,
    };
    Some(Row {
        key,
        metric,
        a_ns,
        b_ns,
        ratio,
        ratio_ci: ci,
        p_value: p,
        change,
    })
}

/// Compares candidate `b` against baseline `a`.
pub fn compare(a: &[Record], b: &[Record], opts: &CompareOptions) -> Comparison {
    // Index B by key, keeping occurrences in order.
    let mut b_index: HashMap<RecordKey, Vec<usize>> = HashMap::new();
    let mut b_keys: Vec<Option<RecordKey>> = Vec::with_capacity(b.len());
    for (i, r) in b.iter().enumerate() {
        let k = RecordKey::of(r);
        if let Some(k) = &k {
            b_index.entry(k.clone()).or_default().push(i);
        }
        b_keys.push(k);
    }
    let mut b_used = vec![false; b.len()];
    let mut next: HashMap<RecordKey, usize> = HashMap::new();
    let mut rows = Vec::new();
    let mut only_in_a = Vec::new();
    for ra in a {
        let Some(key) = RecordKey::of(ra) else {
            continue;
        };
        let nth = next.entry(key.clone()).or_insert(0);
        let matched = b_index.get(&key).and_then(|v| v.get(*nth)).copied();
        *nth += 1;
        match matched {
            Some(j) => {
                b_used[j] = true;
                if let Some(row) = compare_pair(key, ra, &b[j], opts) {
                    rows.push(row);
                }
            }
            None => only_in_a.push(key),
        }
    }
    let only_in_b = b_keys
        .into_iter()
        .zip(b_used)
        .filter_map(|(k, used)| if used { None } else { k })
        .collect();
    Comparison {
        options: *opts,
        rows,
        only_in_a,
        only_in_b,
    }
}

impl Comparison {
    /// True when at least one matched record is significantly slower beyond the threshold.
    pub fn has_regression(&self) -> bool {
        self.rows.iter().any(|r| r.change == Change::Slower)
    }

    /// Counts of (faster, slower, unchanged, untested) rows.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let n = |c| self.rows.iter().filter(|r| r.change == c).count();
        (
            n(Change::Faster),
            n(Change::Slower),
            n(Change::Unchanged),
            n(Change::Untested),
        )
    }

    fn table(&self) -> Table {
        let mut t = Table::new([
            "scenario", "backend", "kind", "name", "params", "metric", "A", "B", "B/A", "95% CI",
            "p", "change",
        ])
        .right(6..11);
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
                r.change.text().to_owned(),
            ]);
        }
        t
    }

    fn summary_line(&self) -> String {
        let (faster, slower, same, untested) = self.counts();
        format!(
            "{} matched: {slower} slower, {faster} faster, {same} unchanged, {untested} not \
             tested (a change needs p < {} and a shift of more than {:.1}%); {} only in A, {} \
             only in B.",
            self.rows.len(),
            self.options.alpha,
            self.options.threshold * 100.0,
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
            out.push_str("REGRESSION: at least one record is significantly slower.\n");
        }
        out.push_str(&self.summary_line());
        out.push('\n');
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
            out.push_str("> **REGRESSION:** at least one record is significantly slower.\n\n");
        }
        out.push_str(&self.summary_line());
        out.push_str("\n\n");
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
                alpha: 0.05,
                threshold: 0.01,
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
}
