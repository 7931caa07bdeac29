//! The advisor: per call id, make it switchless, batch it, or leave it — with the numbers.
//!
//! Rules, applied in order to each call id of a [`TraceSnapshot`]:
//!
//! 1. Fewer than `min_calls` calls: **as is** (too rare to matter).
//! 2. If the caller says how many logical operations the trace covers and there are at
//!    least `batch_min_calls_per_op` calls per operation, each spending under
//!    `batch_max_inside_ns` inside: **batch** (many tiny crossings per operation; one call
//!    carrying k items pays one transition instead of k).
//! 3. Transition time at least `switchless_min_share` of the call's total time (SGXBox's
//!    efficiency metric, inverted) and the call is short (`switchless_max_total_ns`):
//!    **switchless** (a worker on another core removes the transition; a long call would
//!    occupy a worker for little gain).
//!    If the caller says how many cores are spare while the calls run (`spare_cores`) and
//!    that is less than one, **batch** instead: a switchless worker polls on a core of its
//!    own, and without a spare one it takes the core a caller needs (SGXBox's own caveat);
//!    carrying `batch_size` such calls in one crossing removes transitions without any
//!    extra core (LightBox's and HotCalls' way on busy machines). The estimate assumes
//!    batches of `batch_size` calls.
//! 4. Otherwise **as is**.
//!
//! Each [`Advice`] carries the numbers behind it and an estimate of the time saved.

use crate::trace::{Direction, TraceSnapshot};

/// What to do with a call id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recommendation {
    /// Make it switchless.
    Switchless,
    /// Batch several of these calls into one.
    Batch,
    /// Leave it as it is.
    AsIs,
}

impl Recommendation {
    /// `"switchless"`, `"batch"` or `"as-is"`.
    pub fn name(self) -> &'static str {
        match self {
            Recommendation::Switchless => "switchless",
            Recommendation::Batch => "batch",
            Recommendation::AsIs => "as-is",
        }
    }
}

/// Thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdvisorConfig {
    /// Ignore ids with fewer calls.
    pub min_calls: u64,
    /// Transition share (0..1) from which switchless pays.
    pub switchless_min_share: f64,
    /// Longest mean call (ns) worth a switchless worker.
    pub switchless_max_total_ns: f64,
    /// Calls per logical operation from which batching pays.
    pub batch_min_calls_per_op: f64,
    /// Longest mean time inside (ns) of a "tiny" call.
    pub batch_max_inside_ns: f64,
    /// Cores idle while the calls run, if known (cores minus the CPU time of the callers'
    /// processes over wall time). Below one, no call is made switchless; a short call
    /// dominated by its transition is recommended for batching instead.
    pub spare_cores: Option<f64>,
    /// Calls per batch that the batching estimate assumes (at least 1).
    pub batch_size: f64,
}

impl Default for AdvisorConfig {
    fn default() -> Self {
        AdvisorConfig {
            min_calls: 100,
            switchless_min_share: 0.5,
            switchless_max_total_ns: 100_000.0,
            batch_min_calls_per_op: 4.0,
            batch_max_inside_ns: 2_000.0,
            spare_cores: None,
            batch_size: 8.0,
        }
    }
}

/// A recommendation with its numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    /// Ecall or ocall.
    pub direction: Direction,
    /// The id.
    pub call_id: u32,
    /// The verdict.
    pub recommendation: Recommendation,
    /// Calls observed.
    pub calls: u64,
    /// Calls per logical operation (when operations were given).
    pub calls_per_op: Option<f64>,
    /// Mean total ns per call.
    pub mean_total_ns: f64,
    /// Mean ns inside per call.
    pub mean_inside_ns: f64,
    /// Mean transition ns per call.
    pub mean_transition_ns: f64,
    /// Transition share of total time (0..1).
    pub transition_share: f64,
    /// Switchless misses / switchless attempts, if any were made.
    pub switchless_miss_rate: Option<f64>,
    /// Estimated ns saved over the trace if the advice is followed.
    pub estimated_saving_ns: f64,
    /// One sentence: why.
    pub reason: String,
}

/// Advises on every call id in `trace`. `operations`: how many logical operations the trace
/// covers, if known (enables the batching rule).
pub fn advise(trace: &TraceSnapshot, operations: Option<u64>, cfg: &AdvisorConfig) -> Vec<Advice> {
    trace
        .calls
        .iter()
        .map(|c| {
            let calls_per_op = operations.filter(|&o| o > 0).map(|o| c.count as f64 / o as f64);
            let attempts = c.switchless_hits + c.switchless_misses;
            let mut a = Advice {
                direction: c.direction,
                call_id: c.call_id,
                recommendation: Recommendation::AsIs,
                calls: c.count,
                calls_per_op,
                mean_total_ns: c.mean_total_ns(),
                mean_inside_ns: c.mean_inside_ns(),
                mean_transition_ns: c.mean_transition_ns(),
                transition_share: c.transition_share(),
                switchless_miss_rate: (attempts > 0).then(|| c.switchless_misses as f64 / attempts as f64),
                estimated_saving_ns: 0.0,
                reason: String::new(),
            };
            if c.count < cfg.min_calls || c.timed == 0 {
                a.reason = format!("{} calls: too few to matter", c.count);
            } else if let Some(k) = calls_per_op
                && k >= cfg.batch_min_calls_per_op
                && a.mean_inside_ns < cfg.batch_max_inside_ns
            {
                a.recommendation = Recommendation::Batch;
                // One crossing per operation instead of k.
                a.estimated_saving_ns = a.mean_transition_ns * (c.count as f64) * (1.0 - 1.0 / k);
                a.reason = format!(
                    "{k:.1} calls per operation, {:.0} ns inside each: batch them into one call per operation",
                    a.mean_inside_ns
                );
            } else if a.transition_share >= cfg.switchless_min_share
                && a.mean_total_ns <= cfg.switchless_max_total_ns
            {
                let share = a.transition_share * 100.0;
                match cfg.spare_cores.filter(|&s| s < 1.0) {
                    Some(spare) => {
                        let b = cfg.batch_size.max(1.0);
                        a.recommendation = Recommendation::Batch;
                        // One crossing per `b` calls instead of one each.
                        a.estimated_saving_ns =
                            a.mean_transition_ns * c.count as f64 * (1.0 - 1.0 / b);
                        a.reason = format!(
                            "{share:.0}% of its {:.0} ns is transition, but {spare:.2} cores are spare: a switchless worker would take a core the callers need; batch it ({b:.0} calls a crossing saves {:.0} of its {:.0} ns of transition per call)",
                            a.mean_total_ns,
                            a.mean_transition_ns * (1.0 - 1.0 / b),
                            a.mean_transition_ns
                        );
                    }
                    None => {
                        a.recommendation = Recommendation::Switchless;
                        a.estimated_saving_ns = a.mean_transition_ns * c.count as f64;
                        a.reason = format!(
                            "{share:.0}% of its {:.0} ns is transition: make it switchless",
                            a.mean_total_ns
                        );
                    }
                }
            } else {
                a.reason = format!(
                    "transition is {:.0}% of {:.0} ns per call: leave it",
                    a.transition_share * 100.0,
                    a.mean_total_ns
                );
            }
            a
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{CallTrace, TraceSnapshot};

    fn call(id: u32, count: u64, total_ns: u64, inside_ns: u64) -> CallTrace {
        CallTrace {
            direction: Direction::Ecall,
            call_id: id,
            count,
            timed: count,
            total_ns,
            inside_ns,
            transition_ns: total_ns - inside_ns,
            switchless_hits: 0,
            switchless_misses: 0,
            latency: hdrhistogram::Histogram::new(2).unwrap(),
        }
    }

    fn trace() -> TraceSnapshot {
        TraceSnapshot {
            backend: "sandbox",
            model: None,
            elapsed_ns: 1,
            calls: vec![
                // Rare.
                call(0, 3, 3_000_000, 10_000),
                // Frequent, short, 90% transition.
                call(1, 1_000, 10_000_000, 1_000_000),
                // Frequent, mostly inside.
                call(2, 1_000, 10_000_000, 9_000_000),
                // Frequent, mostly transition, but 1 ms a call: too long for a worker.
                call(3, 1_000, 1_000_000_000, 1_000_000),
            ],
        }
    }

    fn verdicts(cfg: &AdvisorConfig, ops: Option<u64>) -> Vec<Recommendation> {
        advise(&trace(), ops, cfg)
            .iter()
            .map(|a| a.recommendation)
            .collect()
    }

    #[test]
    fn each_rule_decides_its_case() {
        use Recommendation::*;
        let cfg = AdvisorConfig::default();
        assert_eq!(verdicts(&cfg, None), [AsIs, Switchless, AsIs, AsIs]);
        let a = advise(&trace(), None, &cfg);
        assert!((a[1].transition_share - 0.9).abs() < 1e-9);
        assert!((a[1].estimated_saving_ns - 9_000_000.0).abs() < 1e-3);
        // 10 calls of id 1 per operation, 1 µs inside each: batch.
        assert_eq!(verdicts(&cfg, Some(100))[1], Batch);
    }

    #[test]
    fn no_spare_core_means_batching_instead_of_a_switchless_worker() {
        use Recommendation::*;
        let busy = AdvisorConfig {
            spare_cores: Some(0.3),
            ..AdvisorConfig::default()
        };
        // The short, frequent, transition-bound call is batched; the others as before.
        assert_eq!(verdicts(&busy, None), [AsIs, Batch, AsIs, AsIs]);
        let a = advise(&trace(), None, &busy);
        // 9 µs of transition per call, batches of 8: 7/8 of it saved on each of 1000 calls.
        assert!((a[1].estimated_saving_ns - 9_000.0 * 1_000.0 * 7.0 / 8.0).abs() < 1e-3);
        assert!(
            a[1].reason.contains("0.30 cores are spare")
                && a[1]
                    .reason
                    .contains("batch it (8 calls a crossing saves 7875 of its 9000 ns"),
            "{}",
            a[1].reason
        );
        let one = AdvisorConfig {
            batch_size: 1.0,
            ..busy
        };
        assert_eq!(advise(&trace(), None, &one)[1].estimated_saving_ns, 0.0);
        let idle = AdvisorConfig {
            spare_cores: Some(1.5),
            ..AdvisorConfig::default()
        };
        assert_eq!(verdicts(&idle, None)[1], Switchless);
    }
}
