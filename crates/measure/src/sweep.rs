//! Multi-threaded measurement: weak and strong thread sweeps, and fixed-duration passes.
//!
//! Throughput is computed in exactly one place, [`throughput`]: total operations over wall
//! time. Speed-up and efficiency are ratios of throughputs. (A published weak-scaling figure
//! multiplied by the thread count twice; computing it once, and testing that, prevents it.)

use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::record::{DurationPass, ScalingMode, ScalingPoint};
use crate::stats::median;

pub use crate::env::available_cores;

/// Operations per second: `ops_total` operations finished in `wall_ns` of wall time.
pub fn throughput(ops_total: u64, wall_ns: f64) -> f64 {
    if wall_ns > 0.0 {
        ops_total as f64 / (wall_ns / 1e9)
    } else {
        0.0
    }
}

/// Operations each thread does at one sweep point: `work` per thread in weak scaling, `work`
/// split as evenly as possible in strong scaling.
pub fn ops_per_thread(mode: ScalingMode, work: u64, threads: usize) -> Vec<u64> {
    let t = threads.max(1) as u64;
    match mode {
        ScalingMode::Weak => vec![work; threads.max(1)],
        ScalingMode::Strong => (0..t).map(|i| work / t + u64::from(i < work % t)).collect(),
    }
}

/// Builds the sweep's points from measured wall times: `runs[i]` holds the wall times (ns) of
/// the measured runs at `threads[i]`, each run doing `ops[i]` operations in total.
/// Speed-up and efficiency are relative to the first (smallest) thread count.
pub fn scaling_points(
    name: &str,
    mode: ScalingMode,
    threads: &[usize],
    ops: &[u64],
    runs: &[Vec<f64>],
    cores: u64,
) -> Vec<ScalingPoint> {
    let mut out: Vec<ScalingPoint> = Vec::with_capacity(threads.len());
    for ((&t, &ops_total), walls) in threads.iter().zip(ops).zip(runs) {
        let wall_ns = median(walls).unwrap_or(0.0);
        let ops_per_s = throughput(ops_total, wall_ns);
        let base = out
            .first()
            .map(|b| (b.threads, b.ops_per_s))
            .unwrap_or((t as u64, ops_per_s));
        let (speedup, efficiency) = speedup_efficiency(base, t as u64, ops_per_s);
        out.push(ScalingPoint {
            name: name.to_owned(),
            mode,
            threads: t as u64,
            cores,
            oversubscribed: t as u64 > cores,
            ops_total,
            wall_samples_ns: walls.clone(),
            wall_ns,
            ops_per_s,
            speedup,
            efficiency,
        });
    }
    out
}

/// Speed-up and parallel efficiency of `ops_per_s` at `threads` against a baseline
/// `(threads, ops_per_s)`: speed-up is the ratio of throughputs, efficiency the speed-up
/// divided by the ratio of thread counts (1 is linear scaling). The one place ccbench
/// computes them. Both are 0 when the baseline did no work.
pub fn speedup_efficiency(base: (u64, f64), threads: u64, ops_per_s: f64) -> (f64, f64) {
    let (base_threads, base_rate) = base;
    if base_rate <= 0.0 || base_threads == 0 {
        return (0.0, 0.0);
    }
    let speedup = ops_per_s / base_rate;
    (speedup, speedup / (threads as f64 / base_threads as f64))
}

/// A sweep point whose speed-up exceeds what its thread count allows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Superlinear {
    /// Threads at the point.
    pub threads: u64,
    /// Its speed-up over the sweep's first point.
    pub speedup: f64,
    /// The largest speed-up the thread counts allow (`threads / base threads`).
    pub bound: f64,
}

/// The points of a sweep, `(threads, ops/s)` with the baseline first, whose speed-up over
/// the baseline exceeds the thread ratio by more than `tolerance` (0.25: 25% beyond linear).
/// Works the same on a sweep ccbench measured and on a published table: a speed-up of 168x
/// on 32 threads is not a measurement but an error, most often a throughput that already
/// counted the threads being multiplied by them again.
pub fn superlinear(points: &[(u64, f64)], tolerance: f64) -> Vec<Superlinear> {
    let Some(&base) = points.first() else {
        return Vec::new();
    };
    points
        .iter()
        .skip(1)
        .filter_map(|&(threads, rate)| {
            let (speedup, efficiency) = speedup_efficiency(base, threads, rate);
            let bound = threads as f64 / base.0.max(1) as f64;
            (efficiency > 1.0 + tolerance).then_some(Superlinear {
                threads,
                speedup,
                bound,
            })
        })
        .collect()
}

/// A thread sweep's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepConfig {
    /// Thread counts, in increasing order; the first is the speed-up baseline.
    pub threads: Vec<usize>,
    /// Weak or strong scaling.
    pub mode: ScalingMode,
    /// Operations per thread (weak) or in total (strong).
    pub work: u64,
    /// Unmeasured runs before the measured ones, per point.
    pub warmup_runs: usize,
    /// Measured runs per point (the median wall time is used).
    pub runs: usize,
}

/// Validation failures of a sweep or pass configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A thread count of zero, or an empty list.
    #[error("thread counts must be at least 1 (got {0:?})")]
    Threads(Vec<usize>),
    /// Zero measured runs.
    #[error("at least one measured run is needed")]
    Runs,
    /// Zero work.
    #[error("the work per point must be at least 1 operation")]
    Work,
    /// A zero duration.
    #[error("the duration must be positive")]
    Duration,
}

/// An error from a sweep: either its configuration or the workload.
#[derive(Debug, thiserror::Error)]
pub enum SweepError<E> {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The workload failed on one of the threads.
    #[error("workload failed on thread {thread} of {threads}: {source}")]
    Workload {
        /// Index of the failing thread.
        thread: usize,
        /// Threads in the run.
        threads: usize,
        /// The workload's error.
        source: E,
    },
}

/// Runs `f(thread_index, ops)` on each thread once, all released together by a barrier, and
/// returns the wall time from the first thread's start to the last thread's end.
///
/// Each thread reads the clock itself, right after the barrier and right after its work:
/// a clock read by the spawning thread after the barrier is late whenever that thread is
/// descheduled at the release (likely on a loaded or oversubscribed machine), and then the
/// workers' time goes unmeasured (runs of milliseconds were timed at microseconds).
fn run_once<E, F>(threads: usize, ops: &[u64], f: &F) -> Result<Duration, SweepError<E>>
where
    E: Send,
    F: Fn(usize, u64) -> Result<(), E> + Sync,
{
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let barrier = &barrier;
                let n = ops[i];
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let r = f(i, n);
                    (start, Instant::now(), r)
                })
            })
            .collect();
        let mut first_err = None;
        let mut span: Option<(Instant, Instant)> = None;
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok((start, end, r)) => {
                    span = Some(match span {
                        Some((s0, e0)) => (s0.min(start), e0.max(end)),
                        None => (start, end),
                    });
                    if let Err(e) = r {
                        first_err.get_or_insert(SweepError::Workload {
                            thread: i,
                            threads,
                            source: e,
                        });
                    }
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match (first_err, span) {
            (Some(e), _) => Err(e),
            (None, Some((start, end))) => Ok(end - start),
            (None, None) => Ok(Duration::ZERO),
        }
    })
}

/// Runs a thread sweep. `f(thread_index, ops)` does `ops` operations on the calling thread.
/// `progress(threads)` is called before each point.
pub fn sweep<E, F>(
    name: &str,
    cfg: &SweepConfig,
    f: F,
    progress: impl FnMut(usize),
) -> Result<Vec<ScalingPoint>, SweepError<E>>
where
    E: Send,
    F: Fn(usize, u64) -> Result<(), E> + Sync,
{
    sweep_with_setup(name, cfg, |_, _| Ok(()), f, progress)
}

/// [`sweep`] with `setup(threads, ops_total)` called before every run, warm-up and
/// measured, outside the timing: for workloads whose state a run consumes (a structure
/// with a fixed capacity, say) and must be rebuilt between runs. A setup error is reported
/// as the workload's, on thread 0.
pub fn sweep_with_setup<E, S, F>(
    name: &str,
    cfg: &SweepConfig,
    mut setup: S,
    f: F,
    mut progress: impl FnMut(usize),
) -> Result<Vec<ScalingPoint>, SweepError<E>>
where
    E: Send,
    S: FnMut(usize, u64) -> Result<(), E>,
    F: Fn(usize, u64) -> Result<(), E> + Sync,
{
    if cfg.threads.is_empty() || cfg.threads.contains(&0) {
        return Err(ConfigError::Threads(cfg.threads.clone()).into());
    }
    if cfg.runs == 0 {
        return Err(ConfigError::Runs.into());
    }
    if cfg.work == 0 {
        return Err(ConfigError::Work.into());
    }
    let mut ops_totals = Vec::new();
    let mut runs = Vec::new();
    for &t in &cfg.threads {
        progress(t);
        let per = ops_per_thread(cfg.mode, cfg.work, t);
        let total: u64 = per.iter().sum();
        let mut setup_run = |threads| {
            setup(threads, total).map_err(|source| SweepError::Workload {
                thread: 0,
                threads,
                source,
            })
        };
        for _ in 0..cfg.warmup_runs {
            setup_run(t)?;
            run_once(t, &per, &f)?;
        }
        let walls = (0..cfg.runs)
            .map(|_| {
                setup_run(t)?;
                run_once(t, &per, &f).map(|d| d.as_nanos() as f64)
            })
            .collect::<Result<Vec<_>, _>>()?;
        ops_totals.push(total);
        runs.push(walls);
    }
    Ok(scaling_points(
        name,
        cfg.mode,
        &cfg.threads,
        &ops_totals,
        &runs,
        available_cores(),
    ))
}

/// Builds a fixed-duration pass record from per-thread counts and the measured wall time.
pub fn duration_pass(
    name: &str,
    target: Duration,
    wall: Duration,
    ops_per_thread: Vec<u64>,
    cores: u64,
) -> DurationPass {
    let threads = ops_per_thread.len() as u64;
    let ops_total: u64 = ops_per_thread.iter().sum();
    let wall_ns = wall.as_nanos() as f64;
    let ops_per_s = throughput(ops_total, wall_ns);
    DurationPass {
        name: name.to_owned(),
        threads,
        cores,
        oversubscribed: threads > cores,
        target_ns: target.as_nanos() as f64,
        wall_ns,
        ops_total,
        ops_per_thread,
        ops_per_s,
        ops_per_s_per_thread: if threads > 0 {
            ops_per_s / threads as f64
        } else {
            0.0
        },
        pass_ops_per_s: Vec::new(),
    }
}

/// Repeated passes of one point as one record: operations and wall times summed, the
/// throughput the median of the passes' (robust to one disturbed pass), and every pass's
/// throughput kept as the point's samples. `None` for no passes or passes of different
/// thread counts.
pub fn merge_passes(passes: &[DurationPass]) -> Option<DurationPass> {
    let first = passes.first()?;
    if passes.iter().any(|p| p.threads != first.threads) {
        return None;
    }
    if passes.len() == 1 {
        return Some(first.clone());
    }
    let rates: Vec<f64> = passes.iter().map(|p| p.ops_per_s).collect();
    let ops_per_s = median(&rates).ok()?;
    let mut ops_per_thread = vec![0u64; first.ops_per_thread.len()];
    for p in passes {
        for (sum, n) in ops_per_thread.iter_mut().zip(&p.ops_per_thread) {
            *sum += n;
        }
    }
    Some(DurationPass {
        target_ns: passes.iter().map(|p| p.target_ns).sum(),
        wall_ns: passes.iter().map(|p| p.wall_ns).sum(),
        ops_total: passes.iter().map(|p| p.ops_total).sum(),
        ops_per_thread,
        ops_per_s,
        ops_per_s_per_thread: ops_per_s / first.threads.max(1) as f64,
        pass_ops_per_s: rates,
        ..first.clone()
    })
}

/// Runs a fixed-duration pass: `threads` threads are released together, each calls
/// `f(thread_index, deadline)`, which loops until the deadline and returns how many operations
/// it completed. (The loop is the caller's so that it can run inside one long call, as the X.509
/// experiment runs it inside one ecall per thread.)
pub fn fixed_duration<E, F>(
    name: &str,
    threads: usize,
    duration: Duration,
    f: F,
) -> Result<DurationPass, SweepError<E>>
where
    E: Send,
    F: Fn(usize, Instant) -> Result<u64, E> + Sync,
{
    if threads == 0 {
        return Err(ConfigError::Threads(vec![0]).into());
    }
    if duration.is_zero() {
        return Err(ConfigError::Duration.into());
    }
    let barrier = Barrier::new(threads + 1);
    let start_cell = std::sync::OnceLock::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, start_cell, f) = (&barrier, &start_cell, &f);
                s.spawn(move || {
                    barrier.wait();
                    let start: &Instant = start_cell.get_or_init(Instant::now);
                    f(i, *start + duration)
                })
            })
            .collect();
        barrier.wait();
        let start = *start_cell.get_or_init(Instant::now);
        let mut counts = Vec::with_capacity(threads);
        let mut first_err = None;
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(Ok(n)) => counts.push(n),
                Ok(Err(e)) => {
                    counts.push(0);
                    first_err.get_or_insert(SweepError::Workload {
                        thread: i,
                        threads,
                        source: e,
                    });
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        let wall = start.elapsed();
        match first_err {
            Some(e) => Err(e),
            None => Ok(duration_pass(
                name,
                duration,
                wall,
                counts,
                available_cores(),
            )),
        }
    })
}

/// Loops `op` until `deadline`, returning the number of completed operations. The clock is read
/// once per operation, which is negligible for the microsecond-and-up operations it is for.
pub fn loop_until<E>(deadline: Instant, mut op: impl FnMut() -> Result<(), E>) -> Result<u64, E> {
    let mut n = 0;
    while Instant::now() < deadline {
        op()?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_passes_merge_with_the_median_rate() {
        let pass = |ops: u64, ms: u64| {
            duration_pass(
                "op",
                Duration::from_millis(1000),
                Duration::from_millis(ms),
                vec![ops / 2, ops - ops / 2],
                2,
            )
        };
        // 1,000, 3,000 (a disturbed pass would be the outlier) and 1,200 ops/s.
        let m = merge_passes(&[pass(1000, 1000), pass(3000, 1000), pass(1200, 1000)]).unwrap();
        assert_eq!(m.ops_per_s, 1200.0);
        assert_eq!(m.pass_ops_per_s, [1000.0, 3000.0, 1200.0]);
        assert_eq!(
            (m.ops_total, m.ops_per_thread.clone()),
            (5200, vec![2600, 2600])
        );
        assert_eq!(m.ops_per_s_per_thread, 600.0);
        assert_eq!((m.wall_ns, m.target_ns), (3e9, 3e9));
        let one = merge_passes(&[pass(1000, 1000)]).unwrap();
        assert!(one.pass_ops_per_s.is_empty());
        assert!(merge_passes(&[]).is_none());
        let mut three = pass(900, 1000);
        three.threads = 3;
        assert!(merge_passes(&[pass(1000, 1000), three]).is_none());
    }

    #[test]
    fn speedup_and_efficiency_by_hand() {
        assert_eq!(speedup_efficiency((1, 100.0), 4, 300.0), (3.0, 0.75));
        assert_eq!(speedup_efficiency((2, 100.0), 8, 400.0), (4.0, 1.0));
        assert_eq!(speedup_efficiency((1, 0.0), 4, 300.0), (0.0, 0.0));
    }

    #[test]
    fn superlinear_points_are_flagged_and_linear_ones_are_not() {
        // 1.6x on 2 threads is fine; 5x on 4 threads is 25% beyond linear and then some.
        let sweep = [(1, 100.0), (2, 160.0), (4, 500.0), (8, 950.0)];
        let found = superlinear(&sweep, 0.10);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            (found[0].threads, found[0].speedup, found[0].bound),
            (4, 5.0, 4.0)
        );
        assert_eq!(found[1].threads, 8);
        assert!(superlinear(&sweep, 0.30).is_empty());
        assert!(superlinear(&[(1, 10.0), (32, 300.0)], 0.1).is_empty());
        assert!(superlinear(&[], 0.1).is_empty());
    }

    #[test]
    fn weak_scaling_throughput_is_counted_once() {
        // Synthetic timing: 1,000 ops per thread; each run takes 10 ms at any thread count
        // (perfect weak scaling). Throughput at 4 threads is 4,000 ops / 10 ms = 400 kops/s,
        // not 1.6 Mops/s (the thread count applied twice).
        let threads = [1, 2, 4];
        let ops: Vec<u64> = threads.iter().map(|&t| 1000 * t as u64).collect();
        let runs = vec![vec![10e6]; 3];
        let p = scaling_points("x", ScalingMode::Weak, &threads, &ops, &runs, 8);
        assert_eq!(p[0].ops_per_s, 100_000.0);
        assert_eq!(p[2].ops_per_s, 400_000.0);
        assert_eq!(p[2].speedup, 4.0);
        assert_eq!(p[2].efficiency, 1.0);
    }

    #[test]
    fn strong_scaling_from_synthetic_timing() {
        // 8,000 ops in total; 1 thread 80 ms, 2 threads 50 ms, 4 threads 40 ms.
        let threads = [1, 2, 4];
        let ops = [8000, 8000, 8000];
        let runs = vec![vec![80e6], vec![50e6, 49e6, 51e6], vec![40e6]];
        let p = scaling_points("x", ScalingMode::Strong, &threads, &ops, &runs, 2);
        assert_eq!(p[0].ops_per_s, 100_000.0);
        assert_eq!(p[1].ops_per_s, 160_000.0);
        assert_eq!(p[1].speedup, 1.6);
        assert_eq!(p[1].efficiency, 0.8);
        assert_eq!(p[2].speedup, 2.0);
        assert_eq!(p[2].efficiency, 0.5);
        assert!(!p[1].oversubscribed && p[2].oversubscribed);
    }

    #[test]
    fn strong_work_split_covers_all_operations() {
        assert_eq!(ops_per_thread(ScalingMode::Strong, 10, 3), vec![4, 3, 3]);
        assert_eq!(ops_per_thread(ScalingMode::Weak, 10, 3), vec![10, 10, 10]);
    }

    #[test]
    fn sweep_runs_every_operation() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let done = AtomicU64::new(0);
        let cfg = SweepConfig {
            threads: vec![1, 3],
            mode: ScalingMode::Strong,
            work: 100,
            warmup_runs: 1,
            runs: 2,
        };
        let pts = sweep::<(), _>(
            "count",
            &cfg,
            |_, n| {
                done.fetch_add(n, Ordering::Relaxed);
                Ok(())
            },
            |_| {},
        )
        .unwrap();
        // 2 points x (1 warm-up + 2 runs) x 100 ops.
        assert_eq!(done.load(Ordering::Relaxed), 600);
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[1].ops_total, 100);
        assert_eq!(pts[1].wall_samples_ns.len(), 2);
    }

    #[test]
    fn wall_time_covers_the_work_of_every_thread() {
        // Sleeps are lower bounds: every run of 3 threads sleeping 5 ms lasts >= 5 ms, however
        // the spawning thread is scheduled.
        let cfg = SweepConfig {
            threads: vec![1, 3],
            mode: ScalingMode::Weak,
            work: 1,
            warmup_runs: 0,
            runs: 3,
        };
        let pts = sweep::<(), _>(
            "sleep",
            &cfg,
            |_, _| {
                std::thread::sleep(Duration::from_millis(5));
                Ok(())
            },
            |_| {},
        )
        .unwrap();
        for p in pts {
            assert!(p.wall_samples_ns.iter().all(|&w| w >= 5e6), "{p:?}");
        }
    }

    #[test]
    fn setup_runs_before_every_run_with_the_run_total() {
        use std::sync::atomic::{AtomicU64, Ordering};
        // A capacity the runs consume: setup refills it, a run that exceeds it fails.
        let left = AtomicU64::new(0);
        let mut setups = Vec::new();
        let cfg = SweepConfig {
            threads: vec![1, 2],
            mode: ScalingMode::Weak,
            work: 10,
            warmup_runs: 1,
            runs: 2,
        };
        let pts = sweep_with_setup::<&str, _, _>(
            "cap",
            &cfg,
            |t, total| {
                setups.push((t, total));
                left.store(total, Ordering::SeqCst);
                Ok(())
            },
            |_, n| {
                let before = left.fetch_sub(n, Ordering::SeqCst);
                if before < n { Err("capacity") } else { Ok(()) }
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(
            setups,
            [(1, 10), (1, 10), (1, 10), (2, 20), (2, 20), (2, 20)]
        );
        assert_eq!(pts[1].ops_total, 20);
        let r = sweep_with_setup::<&str, _, _>("x", &cfg, |_, _| Err("no"), |_, _| Ok(()), |_| {});
        assert!(matches!(
            r,
            Err(SweepError::Workload {
                thread: 0,
                threads: 1,
                source: "no"
            })
        ));
    }

    #[test]
    fn sweep_rejects_bad_configs_and_reports_the_failing_thread() {
        let mut cfg = SweepConfig {
            threads: vec![1, 0],
            mode: ScalingMode::Weak,
            work: 1,
            warmup_runs: 0,
            runs: 1,
        };
        let ok = |_: usize, _: u64| Ok::<(), &str>(());
        assert!(matches!(
            sweep("x", &cfg, ok, |_| {}),
            Err(SweepError::Config(ConfigError::Threads(_)))
        ));
        cfg.threads = vec![2];
        let r = sweep(
            "x",
            &cfg,
            |i, _| if i == 1 { Err("bad") } else { Ok(()) },
            |_| {},
        );
        assert!(matches!(
            r,
            Err(SweepError::Workload {
                thread: 1,
                threads: 2,
                source: "bad"
            })
        ));
    }

    #[test]
    fn fixed_duration_counts_and_divides_once() {
        let d = Duration::from_millis(30);
        let pass = fixed_duration::<(), _>("spin", 2, d, |_, deadline| {
            loop_until(deadline, || {
                std::thread::sleep(Duration::from_millis(1));
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(pass.threads, 2);
        assert_eq!(pass.ops_per_thread.len(), 2);
        assert!(pass.wall_ns >= 30e6);
        let expect = pass.ops_total as f64 / (pass.wall_ns / 1e9);
        assert!((pass.ops_per_s - expect).abs() < 1e-9);
        assert!((pass.ops_per_s_per_thread * 2.0 - pass.ops_per_s).abs() < 1e-9);
        assert!(matches!(
            fixed_duration::<(), _>("x", 1, Duration::ZERO, |_, _| Ok(0)),
            Err(SweepError::Config(ConfigError::Duration))
        ));
    }
}
