//! Calibration: grow a workload size (x2) until a run reaches a target time.
//!
//! Every attempt is kept, with the size and time reached and the overshoot, so that a
//! calibration that "stops" far past its target on the first try is visible, not hidden.

use std::time::Duration;

use crate::record::{Calibration, CalibrationAttempt};

/// The calibration's bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrateConfig {
    /// First size tried.
    pub initial: u64,
    /// Largest size tried.
    pub max: u64,
    /// Time a run should reach.
    pub target: Duration,
    /// Runs per attempt; their mean is compared to the target.
    pub runs: usize,
}

/// Overshoot on the first attempt above which a warning is recorded.
pub const FIRST_ATTEMPT_WARNING: f64 = 10.0;

/// Why calibration failed.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError<E> {
    /// `initial` is zero or above `max`, `runs` is zero, or the target is zero.
    #[error("invalid calibration: initial {initial}, max {max}, runs {runs}, target {target:?}")]
    Config {
        /// First size.
        initial: u64,
        /// Largest size.
        max: u64,
        /// Runs per attempt.
        runs: usize,
        /// Target time.
        target: Duration,
    },
    /// The workload failed.
    #[error("workload failed at size {size}: {source}")]
    Workload {
        /// The size being tried.
        size: u64,
        /// The workload's error.
        source: E,
    },
}

/// Calibrates: `run(size)` runs the workload once at `size` and returns its duration.
pub fn calibrate<E>(
    name: &str,
    cfg: &CalibrateConfig,
    mut run: impl FnMut(u64) -> Result<Duration, E>,
) -> Result<Calibration, CalibrateError<E>> {
    if cfg.initial == 0 || cfg.initial > cfg.max || cfg.runs == 0 || cfg.target.is_zero() {
        return Err(CalibrateError::Config {
            initial: cfg.initial,
            max: cfg.max,
            runs: cfg.runs,
            target: cfg.target,
        });
    }
    let target_ns = cfg.target.as_nanos() as f64;
    let mut attempts = Vec::new();
    let mut size = cfg.initial;
    loop {
        let mut total = 0.0;
        for _ in 0..cfg.runs {
            let d = run(size).map_err(|source| CalibrateError::Workload { size, source })?;
            total += d.as_nanos() as f64;
        }
        let time_ns = total / cfg.runs as f64;
        attempts.push(CalibrationAttempt { size, time_ns });
        let reached = time_ns >= target_ns;
        if reached || size >= cfg.max {
            return Ok(finish(name, target_ns, attempts, reached));
        }
        size = size.saturating_mul(2).min(cfg.max);
    }
}

fn finish(
    name: &str,
    target_ns: f64,
    attempts: Vec<CalibrationAttempt>,
    reached: bool,
) -> Calibration {
    let last = attempts[attempts.len() - 1].clone();
    let overshoot = last.time_ns / target_ns;
    let warning = if !reached {
        Some(format!(
            "target not reached: {:.3} ms at the maximum size {} (target {:.3} ms)",
            last.time_ns / 1e6,
            last.size,
            target_ns / 1e6
        ))
    } else if attempts.len() == 1 && overshoot > FIRST_ATTEMPT_WARNING {
        Some(format!(
            "first attempt already overshot the target {overshoot:.1}x ({:.3} ms against {:.3} ms): \
             start from a smaller size",
            last.time_ns / 1e6,
            target_ns / 1e6
        ))
    } else {
        None
    };
    Calibration {
        name: name.to_owned(),
        target_ns,
        size: last.size,
        time_ns: last.time_ns,
        overshoot,
        reached,
        warning,
        attempts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(initial: u64, max: u64, target_us: u64) -> CalibrateConfig {
        CalibrateConfig {
            initial,
            max,
            target: Duration::from_micros(target_us),
            runs: 2,
        }
    }

    #[test]
    fn doubles_until_the_target() {
        // Synthetic workload: 1 us per element.
        let mut calls = Vec::new();
        let c = calibrate::<()>("lin", &cfg(1024, 65536, 5000), |n| {
            calls.push(n);
            Ok(Duration::from_micros(n))
        })
        .unwrap();
        let sizes: Vec<u64> = c.attempts.iter().map(|a| a.size).collect();
        assert_eq!(sizes, [1024, 2048, 4096, 8192]);
        assert_eq!(calls.len(), 8, "two runs per attempt");
        assert_eq!(c.size, 8192);
        assert!(c.reached);
        assert!((c.overshoot - 8192.0 / 5000.0).abs() < 1e-12);
        assert!(c.warning.is_none());
    }

    #[test]
    fn warns_when_the_first_attempt_overshoots_tenfold() {
        // The dp-tree original: 115 ms against a 0.5 ms target on the first try.
        let c = calibrate::<()>("slow", &cfg(1024, 65536, 500), |_| {
            Ok(Duration::from_millis(115))
        })
        .unwrap();
        assert_eq!(c.attempts.len(), 1);
        assert!((c.overshoot - 230.0).abs() < 1e-9);
        assert!(c.warning.as_deref().unwrap().contains("230.0x"));
    }

    #[test]
    fn stops_at_the_maximum_and_says_so() {
        let c = calibrate::<()>("fast", &cfg(1024, 4096, 1_000_000), |n| {
            Ok(Duration::from_nanos(n))
        })
        .unwrap();
        assert!(!c.reached);
        assert_eq!(c.size, 4096);
        assert!(c.warning.unwrap().contains("not reached"));
    }

    #[test]
    fn rejects_bad_bounds_and_passes_errors_through() {
        assert!(matches!(
            calibrate::<()>("x", &cfg(0, 10, 1), |_| Ok(Duration::ZERO)),
            Err(CalibrateError::Config { .. })
        ));
        assert!(matches!(
            calibrate("x", &cfg(4, 64, 1000), |n| if n == 8 {
                Err("oom")
            } else {
                Ok(Duration::ZERO)
            }),
            Err(CalibrateError::Workload {
                size: 8,
                source: "oom"
            })
        ));
    }
}
