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

/// A deterministic source of uniform numbers in `[0, 1)` (the generator `samples` uses).
struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Lcg {
        Lcg(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }

    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
}

/// Noise between runs like the 2-core dev VM's: each run's median of a record varies by up to
/// `noise` either way, and a record that is `bimodal` (a switchless call that hits or misses)
/// is 3-6x slower in a run with probability `p_outlier`.
#[derive(Clone, Copy)]
struct VmNoise {
    noise: f64,
    p_outlier: f64,
}

/// `n_runs` runs of `records` measurements (`op0`, `op1`, ...); record `i` sits around
/// `100 * (i + 1) * slowdown(i)` ns with the VM's noise between runs (every `bimodal`-th
/// record bimodal, none when 0) and ±2% jitter within a run.
fn vm_runs(
    n_runs: usize,
    records: usize,
    bimodal: usize,
    vm: VmNoise,
    slowdown: impl Fn(usize) -> f64,
    seed: u64,
) -> Vec<Vec<Record>> {
    let mut rng = Lcg::new(seed);
    (0..n_runs)
        .map(|run| {
            (0..records)
                .map(|i| {
                    let mut m = 100.0 * (i + 1) as f64 * slowdown(i);
                    m *= 1.0 + rng.range(-vm.noise, vm.noise);
                    if bimodal > 0 && i % bimodal == 0 && rng.uniform() < vm.p_outlier {
                        m *= rng.range(3.0, 6.0);
                    }
                    let s = samples(m, 10, seed * 1_000_003 + (run * records + i) as u64);
                    meas(&format!("op{i}"), i as i64, s)
                })
                .collect()
        })
        .collect()
}

/// The medians of one record (by index) in each run.
fn per_run(runs: &[Vec<Record>], i: usize) -> Vec<f64> {
    runs.iter()
        .map(|r| match &r[i].body {
            Body::Measurement(m) => median(&m.samples_ns).unwrap(),
            _ => unreachable!(),
        })
        .collect()
}

const VM: VmNoise = VmNoise {
    noise: 0.15,
    p_outlier: 0.3,
};

/// Rows that make a claim: marked slower or faster, or a gross regression.
fn claims(c: &Comparison) -> Vec<&Row> {
    c.rows
        .iter()
        .filter(|r| {
            matches!(r.change, Change::Slower | Change::Faster) || r.gross_regression(&c.options)
        })
        .collect()
}

#[test]
fn spread_and_separation_of_runs() {
    assert_eq!(spread(&[100.0]), None);
    assert_eq!(spread(&[]), None);
    assert_eq!(spread(&[100.0, 100.0, 100.0]), Some(1.0));
    assert_eq!(spread(&[100.0, 300.0, 150.0]), Some(3.0));
    assert_eq!(spread(&[0.0, 1.0]), Some(f64::INFINITY));
    assert_eq!(spread(&[1.0, f64::NAN]), None);
    // Below 10 runs every run counts; from 10 on the fastest and slowest tenth are left out.
    let nine: Vec<f64> = (1..=9).map(f64::from).collect();
    assert_eq!(spread(&nine), Some(9.0));
    let ten: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(spread(&ten), Some(9.0 / 2.0));
    // B's fastest run over A's slowest for a slowdown, A's fastest over B's slowest for a
    // speed-up.
    let a = [100.0, 105.0, 110.0];
    let b = [130.0, 125.0, 140.0];
    assert!((separation(&a, &b, 1.2).unwrap() - 125.0 / 110.0).abs() < 1e-12);
    assert!((separation(&b, &a, 1.0 / 1.2).unwrap() - 125.0 / 110.0).abs() < 1e-12);
    assert!(separation(&a, &[104.0, 200.0], 1.4).unwrap() < 1.0);
    assert_eq!(separation(&[], &b, 1.2), None);
}

#[test]
fn a_a_on_a_noisy_vm_flags_nothing_at_3_and_5_runs() {
    // 137 records as in the A/A of issue 21: per-run medians within ±15%, and every 20th
    // record bimodal (3-6x in about a third of its runs). Interleaved A/A runs are draws
    // from the same distribution: any claim is a false alarm.
    for n in [3, 5] {
        let a = vm_runs(n, 137, 20, VM, |_| 1.0, 10 + n as u64);
        let b = vm_runs(n, 137, 20, VM, |_| 1.0, 20 + n as u64);
        let c = compare_runs(&a, &b, &CompareOptions::default());
        assert_eq!(c.rows.len(), 137);
        let flagged: Vec<String> = claims(&c)
            .iter()
            .map(|r| format!("{} {:?} {}", r.key.name, r.change, r.ratio))
            .collect();
        assert!(flagged.is_empty(), "{n} runs: {flagged:?}");
        assert!(!c.has_regression(), "{n} runs");
        // The bimodal records whose runs spread beyond the gross ratio are listed as unstable,
        // with their spread.
        for row in c.unstable() {
            let i: usize = row.key.name.trim_start_matches("op").parse().unwrap();
            let (sa, sb) = (per_run(&a, i), per_run(&b, i));
            assert_eq!(row.spread_a, spread(&sa));
            assert_eq!(row.spread_b, spread(&sb));
        }
        assert!(
            c.counts().unstable > 0,
            "{n} runs: no bimodal record spread"
        );
        let text = c.render_terminal();
        assert!(text.contains("Unstable on this machine"), "{text}");
        assert!(!text.contains("REGRESSION"), "{text}");
    }
}

#[test]
fn the_old_rule_cried_wolf_on_the_same_a_a() {
    // The same A/A at 3 runs under the rule before the spread (the gross ratio on the
    // medians alone): the bimodal records whose medians land in different modes were
    // regressions. Now each is unstable, with its spread.
    let a = vm_runs(3, 137, 20, VM, |_| 1.0, 13);
    let b = vm_runs(3, 137, 20, VM, |_| 1.0, 23);
    let c = compare_runs(&a, &b, &CompareOptions::default());
    let gross_on_medians: Vec<&Row> = c
        .rows
        .iter()
        .filter(|r| r.ratio > c.options.gross_ratio)
        .collect();
    assert!(!gross_on_medians.is_empty(), "the seed shows no wolf");
    for r in gross_on_medians {
        assert_eq!(r.change, Change::Unstable, "{r:?}");
        assert!(r.spread().unwrap() > c.options.gross_ratio, "{r:?}");
    }
}

#[test]
fn a_a_false_alarms_over_many_runs_are_rare_and_hold_run_for_run() {
    // 12 A/A comparisons of 137 records at 5 runs a side with the VM's noise: the test alone
    // (p < 0.05 and a 5% shift) marks about 3% of the records (159 of 5,480 over 40 such
    // comparisons); a claim must also hold run for run, which leaves a small fraction of that
    // (7 of 5,480, 0.13%), and every claim left has every run of the slower side beyond every
    // run of the other by the threshold.
    let opts = CompareOptions::default();
    let (mut total, mut marked_by_test, mut claimed) = (0, 0, 0);
    for seed in 0..12u64 {
        let a = vm_runs(5, 137, 20, VM, |_| 1.0, 1000 + seed);
        let b = vm_runs(5, 137, 20, VM, |_| 1.0, 2000 + seed);
        let c = compare_runs(&a, &b, &opts);
        total += c.rows.len();
        for (i, row) in c.rows.iter().enumerate() {
            let (sa, sb) = (per_run(&a, i), per_run(&b, i));
            let p = mann_whitney_u(&sa, &sb).unwrap().p_value;
            if p < opts.alpha && (row.ratio - 1.0).abs() > opts.threshold {
                marked_by_test += 1;
            }
        }
        for row in claims(&c) {
            claimed += 1;
            let i: usize = row.key.name.trim_start_matches("op").parse().unwrap();
            let (sa, sb) = (per_run(&a, i), per_run(&b, i));
            let max = |v: &[f64]| v.iter().cloned().fold(f64::MIN, f64::max);
            let min = |v: &[f64]| v.iter().cloned().fold(f64::MAX, f64::min);
            let sep = if row.ratio > 1.0 {
                min(&sb) / max(&sa)
            } else {
                min(&sa) / max(&sb)
            };
            assert!(sep > 1.0 + opts.threshold, "{row:?} {sa:?} {sb:?}");
        }
    }
    let rate = |k: usize| k as f64 / total as f64;
    assert!(
        rate(marked_by_test) > 0.015,
        "test alone: {marked_by_test} of {total}"
    );
    assert!(rate(claimed) < 0.004, "claims left: {claimed} of {total}");
    assert!(
        claimed * 5 < marked_by_test,
        "{claimed} vs {marked_by_test}"
    );
}

#[test]
fn a_clean_20_percent_slowdown_at_5_runs_is_a_regression() {
    // ±5% between runs, 5 runs a side: every record 20% slower is marked SLOWER.
    let quiet = VmNoise {
        noise: 0.05,
        p_outlier: 0.0,
    };
    let a = vm_runs(5, 30, 0, quiet, |_| 1.0, 31);
    let b = vm_runs(5, 30, 0, quiet, |_| 1.2, 32);
    let c = compare_runs(&a, &b, &CompareOptions::default());
    assert_eq!(c.rows.len(), 30);
    for row in &c.rows {
        assert_eq!(row.change, Change::Slower, "{row:?}");
        assert!((row.ratio - 1.2).abs() < 0.1, "{row:?}");
        assert!(row.spread_a.unwrap() < 1.11 && row.spread_b.unwrap() < 1.11);
    }
    assert!(c.has_regression());
    assert_eq!(c.counts().unstable, 0);
    // And 20% faster is marked faster.
    let c = compare_runs(&b, &a, &CompareOptions::default());
    assert!(c.rows.iter().all(|r| r.change == Change::Faster));
    // One record 20% slower among steady ones on the VM's noise, where its own runs spread
    // within ±5%: caught, and the only claim.
    let mixed = |i: usize| if i == 7 { 0.05 } else { 0.15 };
    let runs = |slow: f64, seed: u64| -> Vec<Vec<Record>> {
        let mut rng = Lcg::new(seed);
        (0..5)
            .map(|run| {
                (0..40)
                    .map(|i| {
                        let f = if i == 7 { slow } else { 1.0 };
                        let m = 100.0 * (i + 1) as f64 * f * (1.0 + rng.range(-mixed(i), mixed(i)));
                        meas(&format!("op{i}"), i as i64, samples(m, 10, seed * 97 + run))
                    })
                    .collect()
            })
            .collect()
    };
    let c = compare_runs(&runs(1.0, 41), &runs(1.2, 42), &CompareOptions::default());
    let flagged: Vec<&str> = claims(&c).iter().map(|r| r.key.name.as_str()).collect();
    assert_eq!(flagged, ["op7"], "{:?}", c.rows[7]);
    assert_eq!(c.rows[7].change, Change::Slower);
    assert!(c.has_regression());
}

#[test]
fn a_20_percent_slowdown_in_an_unstable_record_is_unstable() {
    // A switchless-like record: one run in five misses and takes 3-4x. B is 20% slower in
    // every run; its medians say so, and the test may too, but A's slow run sits above B's
    // fast ones: within the record's own spread.
    let a_runs = [1000.0, 950.0, 4200.0, 1050.0, 1010.0];
    let b_runs = [1220.0, 3900.0, 1170.0, 1290.0, 1200.0];
    let runs_of = |v: &[f64]| -> Vec<Vec<Record>> {
        v.iter()
            .enumerate()
            .map(|(i, m)| vec![meas("empty ecall", 0, samples(*m, 20, i as u64 + 1))])
            .collect()
    };
    let (a, b) = (runs_of(&a_runs), runs_of(&b_runs));
    let c = compare_runs(&a, &b, &CompareOptions::default());
    let row = &c.rows[0];
    assert!((row.ratio - 1.2).abs() < 0.05, "{row:?}");
    assert_eq!(row.change, Change::Unstable, "{row:?}");
    assert!(!row.is_regression(&c.options));
    assert!(!c.has_regression());
    assert_eq!(c.counts().unstable, 1);
    assert_eq!(c.counts().slower, 0);
    let (spread_a, spread_b) = (row.spread_a.unwrap(), row.spread_b.unwrap());
    assert!((spread_a - 4200.0 / 950.0).abs() < 0.2, "{row:?}");
    assert!((spread_b - 3900.0 / 1170.0).abs() < 0.2, "{row:?}");
    // The terminal and markdown outputs show the spread per side and list the record.
    let (sa, sb) = (units::ratio(spread_a), units::ratio(spread_b));
    let text = c.render_terminal();
    assert!(text.contains("runs spread A/B"), "{text}");
    assert!(text.contains(&format!("{sa}/{sb}")), "{text}");
    assert!(text.contains("unstable: within its runs' spread"), "{text}");
    assert!(
        text.contains(&format!(
            "crypto/native measurement: empty ecall (size_bytes=0): B/A {}, runs spread {sa} \
             in A, {sb} in B",
            units::ratio(row.ratio)
        )),
        "{text}"
    );
    assert!(text.contains("1 unstable"), "{text}");
    let md = c.render_markdown();
    assert!(md.contains("### Unstable on this machine"), "{md}");
    assert!(md.contains(&format!(" {sa}/{sb} |")), "{md}");
    assert!(!md.contains("REGRESSION"), "{md}");
    // The same slowdown of a record whose runs hold still is a regression.
    let steady = |v: &[f64]| v.iter().map(|m| m.min(1300.0)).collect::<Vec<_>>();
    let a = runs_of(&[1000.0, 950.0, 1020.0, 1050.0, 1010.0]);
    let b = runs_of(&steady(&b_runs));
    let c = compare_runs(&a, &b, &CompareOptions::default());
    assert_eq!(c.rows[0].change, Change::Slower, "{:?}", c.rows[0]);
}

#[test]
fn a_gross_regression_between_few_runs_must_hold_run_for_run() {
    let runs_of = |v: &[f64]| -> Vec<Vec<Record>> {
        v.iter()
            .enumerate()
            .map(|(i, m)| vec![meas("seal", 0, samples(*m, 20, i as u64 + 1))])
            .collect()
    };
    let opts = CompareOptions::default();
    // 3 runs a side: the test cannot decide. 10x in every run is a gross regression, even
    // though A's own runs spread 1.6x.
    let a = runs_of(&[1000.0, 1200.0, 1600.0]);
    let c = compare_runs(&a, &runs_of(&[10_000.0, 12_000.0, 16_000.0]), &opts);
    assert_eq!(c.rows[0].change, Change::NotEnoughSamples);
    assert!(c.has_regression());
    // Medians 4x apart, but one run of B within 10% of A's: unstable (the bimodal A/A).
    let a = runs_of(&[900.0, 950.0, 1000.0]);
    let c = compare_runs(&a, &runs_of(&[1100.0, 4000.0, 4050.0]), &opts);
    assert_eq!(c.rows[0].change, Change::Unstable, "{:?}", c.rows[0]);
    assert!(!c.has_regression());
    // Runs that spread beyond the gross ratio with no claim are unstable too, not "not
    // enough samples".
    let c = compare_runs(&runs_of(&[1000.0, 2500.0, 1100.0]), &a, &opts);
    assert_eq!(c.rows[0].change, Change::Unstable, "{:?}", c.rows[0]);
    // Within one run there are no runs to spread: unchanged behaviour.
    let c = compare(&a[0], &runs_of(&[10_000.0])[0], &opts);
    assert_eq!((c.rows[0].spread_a, c.rows[0].spread_b), (None, None));
    assert_eq!(c.rows[0].change, Change::Slower);
}
