//! Tests of matching, the verdicts, the bases of comparison and the cost summary.

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
                pass_ops_per_s: Vec::new(),
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

#[test]
fn repeated_passes_are_tested_as_samples() {
    let dur = |rates: &[f64]| {
        Record::new(
            "x509",
            "native",
            params! {},
            Body::Duration(measure::record::DurationPass {
                name: "verify".into(),
                threads: 1,
                cores: 2,
                oversubscribed: false,
                target_ns: 2e9,
                wall_ns: 2e9,
                ops_total: 1000,
                ops_per_thread: vec![1000],
                ops_per_s: rates[0],
                ops_per_s_per_thread: rates[0],
                pass_ops_per_s: rates.to_vec(),
            }),
        )
    };
    let a = dur(&[1000.0, 1010.0, 990.0, 1005.0, 995.0]);
    let b = dur(&[800.0, 810.0, 790.0, 805.0, 795.0]);
    let c = compare(std::slice::from_ref(&a), &[b], &CompareOptions::default());
    assert_eq!(c.rows[0].change, Change::Slower);
    assert_eq!((c.rows[0].n_a, c.rows[0].n_b), (5, 5));
    assert!((c.rows[0].ratio - 1.25).abs() < 0.01);
    let c = compare(
        std::slice::from_ref(&a),
        std::slice::from_ref(&a),
        &CompareOptions::default(),
    );
    assert_eq!(c.rows[0].change, Change::Unchanged);
}
