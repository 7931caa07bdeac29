//! The sampler: warm-up, then samples that each batch enough iterations to reach a target
//! sample time, so that a 1 ns operation and a 1 s operation are both measured well.
//!
//! Each sample is the mean time of one iteration within its batch. The harness's own cost per
//! iteration (the loop and `black_box` around an empty operation, at the same batch size) is
//! measured alongside and reported, not subtracted: the reader sees both.

use std::time::{Duration, Instant};

pub use std::hint::black_box;

use crate::record::Measurement;
use crate::stats::{StatsError, Summary};

/// How long to warm up and how to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Time spent running the operation before measuring (caches, branch predictors, clocks).
    pub warmup: Duration,
    /// Samples to take.
    pub samples: usize,
    /// Target duration of one sample; iterations are batched to reach it.
    pub sample_time: Duration,
    /// Upper bound on the measuring phase: slow operations get fewer samples, never fewer
    /// than [`SamplerConfig::min_samples`].
    pub max_time: Duration,
    /// Samples taken even when `max_time` is exceeded.
    pub min_samples: usize,
}

impl SamplerConfig {
    /// Defaults for publishable numbers: 1 s warm-up, 50 samples of 20 ms.
    pub fn full() -> Self {
        SamplerConfig {
            warmup: Duration::from_millis(1000),
            samples: 50,
            sample_time: Duration::from_millis(20),
            max_time: Duration::from_secs(10),
            min_samples: 5,
        }
    }

    /// A fast configuration for smoke runs: 100 ms warm-up, 20 samples of 5 ms.
    pub fn quick() -> Self {
        SamplerConfig {
            warmup: Duration::from_millis(100),
            samples: 20,
            sample_time: Duration::from_millis(5),
            max_time: Duration::from_secs(2),
            min_samples: 5,
        }
    }
}

/// Raw timings of one operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    /// Iterations per sample.
    pub iters_per_sample: u64,
    /// Per-iteration time of each sample, in ns.
    pub per_iter_ns: Vec<f64>,
    /// Per-iteration harness overhead at this batch size, in ns; `None` when the workload
    /// timed itself ([`try_sample_custom`]) and the harness's own cost is not in the figure.
    pub overhead_ns: Option<f64>,
}

impl Samples {
    /// The same samples per operation, when one iteration performs `ops` operations (an
    /// ecall that makes 100 ocalls, a batch of 64 adds): times and overhead are divided,
    /// iterations multiplied.
    pub fn per_op(self, ops: u64) -> Samples {
        let n = ops.max(1);
        let k = n as f64;
        Samples {
            iters_per_sample: self.iters_per_sample.saturating_mul(n),
            per_iter_ns: self.per_iter_ns.into_iter().map(|x| x / k).collect(),
            overhead_ns: self.overhead_ns.map(|o| o / k),
        }
    }

    /// Turns the samples into a measurement record body. `bytes_per_op` adds a byte rate.
    pub fn into_measurement(
        self,
        name: &str,
        bytes_per_op: Option<u64>,
    ) -> Result<Measurement, StatsError> {
        let summary = Summary::from_samples(&self.per_iter_ns)?;
        let median_s = summary.median_ns / 1e9;
        let ops_per_s = if median_s > 0.0 { 1.0 / median_s } else { 0.0 };
        Ok(Measurement {
            name: name.to_owned(),
            iters_per_sample: self.iters_per_sample,
            samples_ns: self.per_iter_ns,
            summary,
            overhead_ns: self.overhead_ns,
            ops_per_s,
            bytes_per_op,
            bytes_per_s: bytes_per_op.map(|b| b as f64 * ops_per_s),
        })
    }
}

/// Runs `f` `iters` times back to back and returns the elapsed time.
#[inline(never)]
fn run_batch<T, F: FnMut() -> T>(f: &mut F, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed()
}

/// Runs `f` `iters` times, stopping early (with the error) at the first failure.
#[inline(never)]
fn try_run_batch<T, E, F: FnMut() -> Result<T, E>>(f: &mut F, iters: u64) -> Result<Duration, E> {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f()?);
    }
    Ok(start.elapsed())
}

/// Per-iteration cost of the harness itself at a batch size: an empty operation timed the
/// same way (the minimum of a few batches, as the least disturbed estimate).
pub fn harness_overhead_ns(iters: u64) -> f64 {
    let iters = iters.max(1);
    let mut empty = || ();
    (0..5)
        .map(|_| run_batch(&mut empty, iters).as_nanos() as f64 / iters as f64)
        .fold(f64::INFINITY, f64::min)
}

/// Measures an infallible operation.
pub fn sample<T, F: FnMut() -> T>(cfg: &SamplerConfig, mut f: F) -> Samples {
    match try_sample::<T, std::convert::Infallible, _>(cfg, || Ok(f())) {
        Ok(s) => s,
        Err(never) => match never {},
    }
}

/// Measures a fallible operation; the first error stops the measurement and is returned.
pub fn try_sample<T, E, F: FnMut() -> Result<T, E>>(
    cfg: &SamplerConfig,
    mut f: F,
) -> Result<Samples, E> {
    sample_batches(
        cfg,
        |iters| try_run_batch(&mut f, iters),
        |iters| Some(harness_overhead_ns(iters)),
    )
}

/// Measures work that must time itself (criterion's `iter_custom`): `f(iters)` performs
/// `iters` iterations and returns the time they took, as the workload measured it (inside
/// an enclave, say, where only the service knows when its step began). The harness still
/// owns warm-up, batch sizing and the number of samples; the records carry no harness
/// overhead, because the harness's loop is not inside the timing.
pub fn try_sample_custom<E, F: FnMut(u64) -> Result<Duration, E>>(
    cfg: &SamplerConfig,
    f: F,
) -> Result<Samples, E> {
    sample_batches(cfg, f, |_| None)
}

/// The one sampling loop: warm up in doubling batches until `cfg.warmup` has passed, size
/// a batch to `cfg.sample_time` from the last warm-up batch, then take samples until
/// `cfg.samples` (or `cfg.max_time` once `cfg.min_samples` are in).
fn sample_batches<E>(
    cfg: &SamplerConfig,
    mut batch: impl FnMut(u64) -> Result<Duration, E>,
    overhead: impl FnOnce(u64) -> Option<f64>,
) -> Result<Samples, E> {
    let warm_start = Instant::now();
    let mut iters = 1u64;
    let mut est_ns;
    loop {
        let d = batch(iters)?;
        est_ns = d.as_nanos() as f64 / iters as f64;
        if warm_start.elapsed() >= cfg.warmup {
            break;
        }
        if d < cfg.warmup / 4 {
            iters = iters.saturating_mul(2);
        }
    }
    let target_ns = cfg.sample_time.as_nanos() as f64;
    let iters_per_sample = (target_ns / est_ns.max(0.1)).clamp(1.0, 1e12) as u64;
    let overhead_ns = overhead(iters_per_sample);

    let min_samples = cfg.min_samples.clamp(1, cfg.samples.max(1));
    let mut per_iter_ns = Vec::with_capacity(cfg.samples);
    let measure_start = Instant::now();
    while per_iter_ns.len() < cfg.samples.max(1) {
        if per_iter_ns.len() >= min_samples && measure_start.elapsed() >= cfg.max_time {
            break;
        }
        let d = batch(iters_per_sample)?;
        per_iter_ns.push(d.as_nanos() as f64 / iters_per_sample as f64);
    }
    Ok(Samples {
        iters_per_sample,
        per_iter_ns,
        overhead_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> SamplerConfig {
        SamplerConfig {
            warmup: Duration::from_millis(5),
            samples: 10,
            sample_time: Duration::from_millis(1),
            max_time: Duration::from_millis(200),
            min_samples: 3,
        }
    }

    #[test]
    fn per_op_divides_times_and_multiplies_iterations() {
        let s = Samples {
            iters_per_sample: 3,
            per_iter_ns: vec![100.0, 250.0],
            overhead_ns: Some(1.0),
        }
        .per_op(50);
        assert_eq!(s.iters_per_sample, 150);
        assert_eq!(s.per_iter_ns, vec![2.0, 5.0]);
        assert_eq!(s.overhead_ns, Some(0.02));
    }

    #[test]
    fn batches_fast_operations() {
        let mut n = 0u64;
        let s = sample(&tiny(), || {
            n = n.wrapping_add(1);
            n
        });
        assert_eq!(s.per_iter_ns.len(), 10);
        // A counter increment takes far less than the 1 ms sample target.
        assert!(s.iters_per_sample > 100, "{}", s.iters_per_sample);
        assert!(s.per_iter_ns.iter().all(|x| x.is_finite() && *x >= 0.0));
    }

    #[test]
    fn slow_operations_run_once_per_sample_and_respect_max_time() {
        let cfg = SamplerConfig {
            max_time: Duration::from_millis(20),
            ..tiny()
        };
        let s = sample(&cfg, || std::thread::sleep(Duration::from_millis(3)));
        assert_eq!(s.iters_per_sample, 1);
        // 20 ms budget at >= 3 ms a sample: stops early, but keeps the minimum of 3.
        assert!(s.per_iter_ns.len() >= 3 && s.per_iter_ns.len() < 10);
        assert!(s.per_iter_ns.iter().all(|&x| x >= 3e6));
    }

    #[test]
    fn errors_stop_the_measurement() {
        let mut calls = 0;
        let r = try_sample(&tiny(), || {
            calls += 1;
            if calls > 50 { Err("boom") } else { Ok(()) }
        });
        assert_eq!(r, Err("boom"));
    }

    #[test]
    fn measurement_rates_come_from_the_median() {
        let s = Samples {
            iters_per_sample: 4,
            per_iter_ns: vec![100.0, 200.0, 300.0],
            overhead_ns: Some(0.5),
        };
        let m = s.into_measurement("op", Some(1000)).unwrap();
        assert_eq!(m.summary.median_ns, 200.0);
        assert_eq!(m.ops_per_s, 5e6);
        assert_eq!(m.bytes_per_s, Some(5e9));
        // 16 KiB sealed in a median of 4,096 ns: 4 bytes a nanosecond, 4 GB/s.
        let s = Samples {
            iters_per_sample: 1,
            per_iter_ns: vec![5000.0, 4096.0, 3000.0],
            overhead_ns: None,
        };
        let m = s.into_measurement("seal", Some(16384)).unwrap();
        let rate = m.bytes_per_s.unwrap();
        assert!((rate - 4e9).abs() < 1.0, "{rate}");
        assert_eq!(m.overhead_ns, None);
    }
}
