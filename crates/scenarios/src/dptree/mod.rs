//! Scenario `dp-tree`: differentially private continual counting in an enclave (the Teaclave
//! Java SDK benchmark, 2025), with calibration and weak/strong thread scaling.
//!
//! The binary aggregation tree ([`tree`]) runs as an enclave service ([`service`]) behind
//! one lock, as the original's did. The host calibrates the work (x2 from 1,024 adds until a
//! single-thread run reaches the target time, at most 65,536), then sweeps threads with the
//! work per thread fixed (weak) and the total fixed (strong), on `native`, `sandbox` and the
//! sandbox with switchless ecalls, one add per ecall (the original's) and `k` adds per ecall.
//! Throughput is total adds over wall time, computed once (`measure::sweep`). The original's
//! published figures sit beside ours, with its weak-scaling and calibration mistakes named,
//! and the issue's claims are checked on this machine's numbers.

mod analysis;

pub mod service;
pub mod tree;

use std::time::{Duration, Instant};

use enclave::{Backend, Direction, MAX_TCS, Registry};
use measure::calibrate::{CalibrateConfig, CalibrateError, calibrate};
use measure::record::{Body, Calibration, ScalingMode, ScalingPoint, Value};
use measure::sampler::black_box;
use measure::sweep::{SweepConfig, SweepError, sweep_with_setup};

use harness::boundary::{self, Config};
use harness::{Context, Preset, RunOptions, Scenario, ScenarioError};
use service::{Call, Client, ClientError, SERVICE};

pub use self::analysis::{
    CLAIM_BATCH, SUPERLINEAR_TOLERANCE, checks, comparison, costs, superlinear_checks,
    weak_32_derived_kops,
};
pub use service::register;

const NAME: &str = "dp-tree";

/// The noise's standard deviation, the original's.
pub const SIGMA: f64 = 0.5;

/// Calibration's first size (adds), the original's.
pub const CALIBRATION_INITIAL: u64 = 1024;

/// Calibration's largest size (adds): 2^20, 16x the original's 65,536. The original had one
/// configuration; ours span ~500x in cost per add (native batched at ~20 ns, the sandbox at
/// one ecall per add at several µs), and 1,024 .. 65,536 spans 64x: with the original's cap
/// no one target is reachable by all of them (measured here: native, 1,024 adds per call,
/// took 1.3 ms at 65,536 adds while the sandbox, one add per ecall, took 13 ms at 1,024).
pub const CALIBRATION_MAX: u64 = 1 << 20;

/// The original's largest calibration size, for the record.
pub const ORIGINAL_CALIBRATION_MAX: u64 = 65536;

/// How much a run does, by preset and options.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Thread counts, increasing.
    pub threads: Vec<usize>,
    /// Adds per ecall.
    pub batches: Vec<usize>,
    /// The time a calibration run should reach.
    pub target: Duration,
    /// Runs per calibration attempt.
    pub calibration_runs: usize,
    /// Unmeasured runs per sweep point.
    pub warmup_runs: usize,
    /// Measured runs per sweep point.
    pub runs: usize,
}

/// The plan of a run: `--threads` (sorted, deduplicated) or the preset's thread list
/// (quick: 1, 2, 4; full: the original's 1 .. 32); `--duration` sets the calibration
/// target (quick 10 ms, full 20 ms).
pub fn plan(options: &RunOptions) -> Plan {
    let quick = options.preset == Preset::Quick;
    let mut threads = match &options.threads {
        Some(t) => t.clone(),
        None if quick => vec![1, 2, 4],
        None => vec![1, 2, 4, 8, 16, 32],
    };
    threads.sort_unstable();
    threads.dedup();
    Plan {
        threads,
        batches: if quick {
            vec![1, CLAIM_BATCH]
        } else {
            vec![1, 32, CLAIM_BATCH]
        },
        target: options.duration.unwrap_or(if quick {
            Duration::from_millis(10)
        } else {
            Duration::from_millis(20)
        }),
        calibration_runs: if quick { 2 } else { 3 },
        warmup_runs: if quick { 1 } else { 2 },
        runs: if quick { 3 } else { 5 },
    }
}

/// The configurations measured, in order.
pub fn configs() -> Vec<Config> {
    vec![
        Config::regular(Backend::Native),
        Config::regular(Backend::Sandbox),
        Config::switchless(1),
    ]
}

fn call_name(d: Direction, call: u32) -> String {
    match (d, Call::try_from(call)) {
        (Direction::Ecall, Ok(c)) => c.name().into(),
        _ => call.to_string(),
    }
}

/// What stops a measured run.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cancelled")]
    Cancelled,
}

/// `ops` adds of 1 (a count), `batch` per ecall, on the calling thread; `input` is a
/// whole batch of ones already encoded ([`service::encode_values`]).
fn work(client: Client<'_>, batch: usize, input: &[u8], ops: u64) -> Result<(), ClientError> {
    if batch == 1 {
        for _ in 0..ops {
            black_box(client.add(1.0)?);
        }
        return Ok(());
    }
    let mut left = ops;
    while left > 0 {
        let k = left.min(batch as u64) as usize;
        let sums = if k == batch {
            client.add_batch_encoded(input, k)?
        } else {
            client.add_batch(&vec![1.0; k])?
        };
        black_box(sums.last());
        left -= k as u64;
    }
    Ok(())
}

/// One configuration and batch size: its calibration and scaling points.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Backend and switchless workers.
    pub config: Config,
    /// Adds per ecall.
    pub batch: usize,
    /// The calibration of the work size.
    pub calibration: Calibration,
    /// Every scaling point, weak then strong.
    pub points: Vec<ScalingPoint>,
}

impl Outcome {
    pub(crate) fn title(&self) -> String {
        format!("{}, batch {}", self.config.title(), self.batch)
    }

    /// The point of `mode` at `threads`, else at the largest thread count below it (and
    /// the thread count used).
    fn at(&self, mode: ScalingMode, threads: u64) -> Option<&ScalingPoint> {
        self.points
            .iter()
            .filter(|p| p.mode == mode && p.threads <= threads)
            .max_by_key(|p| p.threads)
    }

    /// The smallest thread count's point, strong scaling preferred (both start with one
    /// thread's run of the calibrated size).
    pub(crate) fn base(&self) -> Option<&ScalingPoint> {
        [ScalingMode::Strong, ScalingMode::Weak]
            .iter()
            .find_map(|&m| {
                self.points
                    .iter()
                    .filter(|p| p.mode == m)
                    .min_by_key(|p| p.threads)
            })
    }
}

/// The `dp-tree` scenario.
pub struct DpTree;

impl DpTree {
    fn measure(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        config: &Config,
        client: Client<'_>,
        batch: usize,
    ) -> Result<Outcome, ScenarioError> {
        let mut params = config.params();
        params.insert("batch".into(), Value::from(batch));
        let input = service::encode_values(&vec![1.0; batch]);
        let what = format!("{}, batch {batch}", config.label());

        ctx.check_cancel()?;
        // One untimed run first: a fresh enclave's threads are asleep and its pages cold,
        // and the first attempt would time that (35 ms for 1,024 sandbox adds that take
        // 1.3 ms warm, on a loaded 2-core machine).
        client
            .init(CALIBRATION_INITIAL, SIGMA)
            .and_then(|()| work(client, batch, &input, CALIBRATION_INITIAL))
            .map_err(|e| ScenarioError::step(format!("warming up ({what})"), e))?;
        let cal_cfg = CalibrateConfig {
            initial: CALIBRATION_INITIAL,
            max: CALIBRATION_MAX,
            target: plan.target,
            runs: plan.calibration_runs,
        };
        let calibration = calibrate("add", &cal_cfg, |size| {
            ctx.check_cancel().map_err(|_| RunError::Cancelled)?;
            client.init(size, SIGMA)?;
            let start = Instant::now();
            work(client, batch, &input, size)?;
            Ok::<_, RunError>(start.elapsed())
        })
        .map_err(|e| match e {
            CalibrateError::Workload {
                source: RunError::Cancelled,
                ..
            } => ScenarioError::Cancelled,
            e => ScenarioError::step(format!("calibrating ({what})"), e),
        })?;
        ctx.emit(
            NAME,
            config.label(),
            params.clone(),
            Body::Calibration(calibration.clone()),
        )?;
        ctx.progress().advance(1);

        let mut points = Vec::new();
        for &mode in ctx.options.scaling.modes() {
            let cfg = SweepConfig {
                threads: plan.threads.clone(),
                mode,
                work: calibration.size,
                warmup_runs: plan.warmup_runs,
                runs: plan.runs,
            };
            let mut first = true;
            let swept = sweep_with_setup(
                "add",
                &cfg,
                // A fresh tree before every run, sized to the run (outside the timing).
                |_, total| {
                    ctx.check_cancel().map_err(|_| RunError::Cancelled)?;
                    client.init(total, SIGMA).map_err(RunError::from)
                },
                |_, ops| work(client, batch, &input, ops).map_err(RunError::from),
                |_| {
                    if !std::mem::take(&mut first) {
                        ctx.progress().advance(1);
                    }
                },
            )
            .map_err(|e| match e {
                SweepError::Workload {
                    source: RunError::Cancelled,
                    ..
                } => ScenarioError::Cancelled,
                e => ScenarioError::step(format!("{mode} scaling ({what})"), e),
            })?;
            ctx.progress().advance(1);
            for p in swept {
                ctx.emit(
                    NAME,
                    config.label(),
                    params.clone(),
                    Body::Scaling(p.clone()),
                )?;
                points.push(p);
            }
        }
        Ok(Outcome {
            config: config.clone(),
            batch,
            calibration,
            points,
        })
    }
}

impl Scenario for DpTree {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "differentially private continual counting (tree mechanism) in an enclave: calibration, weak/strong scaling, batched adds; native, sandbox, switchless"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let plan = plan(ctx.options);
        if plan.threads.is_empty() || plan.threads.contains(&0) {
            return Err(ScenarioError::Option(format!(
                "thread counts must be at least 1, got {:?}",
                plan.threads
            )));
        }
        let configs = configs();
        let modes = ctx.options.scaling.modes().len();
        let units = configs.len() * plan.batches.len() * (1 + modes * plan.threads.len());
        ctx.progress().begin(NAME, units as u64);
        let registry = register(Registry::new());
        // Every sweep thread needs its own TCS slot (beyond MAX_TCS callers queue for one).
        let tcs = plan.threads.iter().copied().max().unwrap_or(1).min(MAX_TCS);
        let mut outcomes = Vec::new();
        for config in &configs {
            ctx.check_cancel()?;
            let b = config
                .builder(
                    ctx,
                    SERVICE,
                    &[Call::Add, Call::Sum, Call::AddBatch].map(u32::from),
                    &[],
                )
                .tcs(tcs);
            let e = boundary::start(b, &registry)?;
            let client = Client::new(&e);
            for &batch in &plan.batches {
                outcomes.push(self.measure(ctx, &plan, config, client, batch)?);
            }
            // Where the boundary cost goes: per call, time inside and in transition.
            if config.backend == Backend::Sandbox {
                let trace = e.trace();
                boundary::emit_trace(ctx, NAME, config, &trace, &call_name)?;
                if config.workers == 0 {
                    boundary::emit_advice(
                        ctx,
                        NAME,
                        config,
                        &trace,
                        &Default::default(),
                        &call_name,
                    )?;
                }
            }
        }
        for (backend, params, body) in checks(&outcomes)
            .into_iter()
            .chain(superlinear_checks(&outcomes))
        {
            ctx.emit(NAME, &backend, params, body)?;
        }
        let params = measure::params! {};
        ctx.emit(
            NAME,
            "all",
            params,
            Body::Table(comparison(&outcomes, &plan.threads)),
        )?;
        for cost in costs(&outcomes) {
            ctx.emit(
                NAME,
                "all",
                measure::record::Params::new(),
                Body::Cost(cost),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use measure::record::Verdict;

    use super::*;
    use measure::sweep::scaling_points;

    fn outcome(label: &str, batch: usize, points: Vec<ScalingPoint>) -> Outcome {
        let config = match label {
            "native" => Config::regular(Backend::Native),
            "sandbox" => Config::regular(Backend::Sandbox),
            _ => Config::switchless(1),
        };
        Outcome {
            config,
            batch,
            calibration: Calibration {
                name: "add".into(),
                target_ns: 5e6,
                attempts: vec![
                    measure::record::CalibrationAttempt {
                        size: 1024,
                        time_ns: 3e6,
                    },
                    measure::record::CalibrationAttempt {
                        size: 2048,
                        time_ns: 6e6,
                    },
                ],
                size: 2048,
                time_ns: 6e6,
                overshoot: 1.2,
                reached: true,
                warning: None,
            },
            points,
        }
    }

    /// The same function flags the published weak-scaling figure (168x on 32 threads) as a
    /// finding about the publication, passes a sub-linear sweep of ours, and warns on one of
    /// ours that scales beyond its thread count.
    #[test]
    fn superlinear_speedups_are_flagged_in_published_and_own_sweeps() {
        let sweep = |rates: &[(u64, f64)]| {
            let threads: Vec<usize> = rates.iter().map(|r| r.0 as usize).collect();
            let ops: Vec<u64> = rates.iter().map(|r| r.1 as u64).collect();
            let walls: Vec<Vec<f64>> = rates.iter().map(|_| vec![1e9]).collect();
            measure::sweep::scaling_points("add", ScalingMode::Weak, &threads, &ops, &walls, 2)
        };
        let ok = outcome("native", 1, sweep(&[(1, 1000.0), (2, 1900.0), (4, 2100.0)]));
        let bad = outcome(
            "sandbox",
            1,
            sweep(&[(1, 1000.0), (2, 1900.0), (4, 9000.0)]),
        );
        let checks = superlinear_checks(&[ok, bad]);
        let verdicts: Vec<(&str, Verdict, bool)> = checks
            .iter()
            .map(|(backend, _, body)| match body {
                Body::Check(c) => (backend.as_str(), c.verdict, c.fails_run()),
                _ => panic!("not a check"),
            })
            .collect();
        assert_eq!(
            verdicts,
            [
                ("all", Verdict::Fail, false),
                ("native", Verdict::Pass, false),
                ("sandbox", Verdict::Warn, false)
            ]
        );
        let Body::Check(published) = &checks[0].2 else {
            unreachable!()
        };
        assert!(published.message.contains("168x"), "{}", published.message);
        assert!(
            published
                .message
                .contains("52.5 kops/s (derived by ccbench)")
        );
    }

    /// The original's weak-scaling run as synthetic timings: 32 threads of 1,024 adds each
    /// in 618 ms of wall time is ~53 kops/s. Throughput must come out once (53 kops/s, not
    /// the published 1.68 Mops/s, which is 32x that), and the comparison table must show it
    /// as computed; strong scaling likewise from 10,240 adds at 1, 2 and 32 threads.
    #[test]
    fn weak_and_strong_throughput_from_synthetic_timings() {
        let threads = [1usize, 2, 32];
        // Weak: 1,024 adds per thread; walls 102.4 ms, 102.4 ms, 618.3 ms.
        let ops: Vec<u64> = threads.iter().map(|&t| 1024 * t as u64).collect();
        let walls = vec![vec![102.4e6], vec![102.4e6], vec![32768.0 / 53_000.0 * 1e9]];
        let weak = scaling_points("add", ScalingMode::Weak, &threads, &ops, &walls, 2);
        assert!((weak[0].ops_per_s - 10_000.0).abs() < 1e-6);
        assert!((weak[1].ops_per_s - 20_000.0).abs() < 1e-6);
        assert!((weak[2].ops_per_s - 53_000.0).abs() < 1e-6, "counted once");
        assert!((weak[2].speedup - 5.3).abs() < 1e-9);
        assert!((weak[2].efficiency - 5.3 / 32.0).abs() < 1e-12);
        assert!(weak[2].oversubscribed && !weak[1].oversubscribed);
        // Strong: 10,240 adds in total; 1 s, 0.5 s, 176.6 ms (58 kops/s).
        let ops = [10_240u64; 3];
        let walls = vec![vec![1e9], vec![0.5e9], vec![10_240.0 / 58_000.0 * 1e9]];
        let strong = scaling_points("add", ScalingMode::Strong, &threads, &ops, &walls, 2);
        assert!((strong[0].ops_per_s - 10_240.0).abs() < 1e-6);
        assert!((strong[1].speedup - 2.0).abs() < 1e-12);
        assert!((strong[1].efficiency - 1.0).abs() < 1e-12);
        assert!((strong[2].ops_per_s - 58_000.0).abs() < 1e-6);

        let mut points = weak;
        points.extend(strong);
        let o = outcome("sandbox", 1, points);
        let t = comparison(&[o], &threads);
        assert_eq!(t.columns.len(), 3);
        assert!(t.rows.iter().all(|r| r.len() == 3));
        let cell = |label: &str| {
            t.rows
                .iter()
                .find(|r| r[0].to_string().starts_with(label))
                .map(|r| (r[1].as_f64().unwrap(), r[2].as_f64()))
                .unwrap()
        };
        let (theirs, ours) = cell("weak scaling counted once");
        // The original's published 1,680 kops/s over the 32 it multiplied by twice: derived
        // by ccbench, and labelled so.
        assert_eq!(theirs, 52.5);
        assert!(
            t.rows
                .iter()
                .any(|r| r[0].to_string().contains("derived by ccbench"))
        );
        assert!((ours.unwrap() - 53.0).abs() < 1e-9, "{ours:?}");
        // Strong scaling at 16 threads was not swept: ours is the largest below, 2 threads.
        let (_, ours) = cell("strong scaling, 16");
        assert!((ours.unwrap() - 20.48).abs() < 1e-9);
        let (_, ours) = cell("time per add");
        assert!((ours.unwrap() - 1e6 / 10_240.0).abs() < 1e-9);
        assert!(t.source.as_deref().unwrap().contains("Teaclave"));
    }

    #[test]
    fn checks_judge_the_issue_claims() {
        let point = |mode, ops_per_s: f64| {
            let walls = vec![vec![1e9 * 1000.0 / ops_per_s]];
            scaling_points("add", mode, &[1], &[1000], &walls, 2).remove(0)
        };
        let both = |r: f64| vec![point(ScalingMode::Weak, r), point(ScalingMode::Strong, r)];
        // Sandbox: 4 µs per add (25x faster than 100 µs); batched 15 M/s vs native 20 M/s.
        let outcomes = [
            outcome("native", 1, both(10e6)),
            outcome("native", CLAIM_BATCH, both(20e6)),
            outcome("sandbox", 1, both(250e3)),
            outcome("sandbox", CLAIM_BATCH, both(15e6)),
        ];
        let c = checks(&outcomes);
        let verdict = |name: &str| {
            c.iter()
                .find_map(|(_, _, b)| match b {
                    Body::Check(k) if k.name == name => Some((k.verdict, k.message.clone())),
                    _ => None,
                })
                .unwrap()
        };
        let (v, m) = verdict("one-add-per-ecall-vs-original");
        assert_eq!(v, Verdict::Pass, "{m}");
        assert!(m.contains("4.00 µs") && m.contains("25x"), "{m}");
        let (v, m) = verdict("batched-sandbox-within-2x-of-native");
        assert_eq!(v, Verdict::Pass, "{m}");
        assert!(m.contains("1.33"), "{m}");
        assert_eq!(
            c.iter()
                .filter(
                    |(_, _, b)| matches!(b, Body::Check(k) if k.name == "calibration-within-2x")
                )
                .count(),
            4
        );
        // Slower than the claims: warnings, not passes.
        let outcomes = [
            outcome("native", CLAIM_BATCH, both(20e6)),
            outcome("sandbox", 1, both(50e3)),
            outcome("sandbox", CLAIM_BATCH, both(5e6)),
        ];
        let c = checks(&outcomes);
        let verdicts: Vec<Verdict> = c
            .iter()
            .filter_map(|(_, _, b)| match b {
                Body::Check(k) if k.name != "calibration-within-2x" => Some(k.verdict),
                _ => None,
            })
            .collect();
        assert_eq!(verdicts, [Verdict::Warn, Verdict::Warn]);
    }

    #[test]
    fn plans_follow_the_preset_and_options() {
        let mut o = RunOptions::quick(std::env::temp_dir());
        let p = plan(&o);
        assert_eq!(p.threads, [1, 2, 4]);
        assert_eq!(p.batches, [1, CLAIM_BATCH]);
        o.threads = Some(vec![8, 1, 8, 2]);
        o.duration = Some(Duration::from_millis(3));
        let p = plan(&o);
        assert_eq!(p.threads, [1, 2, 8]);
        assert_eq!(p.target, Duration::from_millis(3));
        o.preset = Preset::Full;
        o.threads = None;
        assert_eq!(plan(&o).threads, [1, 2, 4, 8, 16, 32]);
    }

    #[test]
    fn the_workload_adds_exactly_the_ops_asked_for() {
        let e = enclave::Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .start(&register(Registry::new()))
            .unwrap();
        let c = Client::new(&e);
        for (batch, ops) in [(1, 5u64), (16, 40), (16, 16), (16, 3)] {
            let input = service::encode_values(&vec![1.0; batch]);
            c.init(ops, SIGMA).unwrap();
            work(c, batch, &input, ops).unwrap();
            // Full: one more add is refused.
            assert!(matches!(
                c.add(1.0),
                Err(ClientError::Tree(tree::TreeError::CapacityExceeded { added, .. }))
                    if added == ops
            ));
        }
    }
}
