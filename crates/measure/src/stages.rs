//! Stage breakdowns: a pipeline's time split into named spans, with bytes in and out, each
//! stage's share of the total, and, when the stages' isolated costs are known, the theoretical
//! minimum against the measured total.

use std::time::{Duration, Instant};

use crate::record::{Stage, StageBreakdown};

/// Accumulates named stages over one or many runs of a pipeline. Stages keep the order in
/// which they were first seen; repeated names add up.
#[derive(Debug, Clone, Default)]
pub struct Stages {
    stages: Vec<Stage>,
    runs: u64,
}

impl Stages {
    /// An empty breakdown.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds time and bytes to a stage.
    pub fn add(&mut self, name: &str, time: Duration, bytes_in: u64, bytes_out: u64) {
        let ns = time.as_nanos() as f64;
        match self.stages.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                s.time_ns += ns;
                s.bytes_in += bytes_in;
                s.bytes_out += bytes_out;
            }
            None => self.stages.push(Stage {
                name: name.to_owned(),
                time_ns: ns,
                percent: 0.0,
                bytes_in,
                bytes_out,
                round_trips: None,
                predicted_ns: None,
                cpu_ns: None,
            }),
        }
    }

    /// Adds round trips to a stage (added first with no time if it is new).
    pub fn add_round_trips(&mut self, name: &str, n: u64) {
        self.add(name, Duration::ZERO, 0, 0);
        if let Some(s) = self.stages.iter_mut().find(|s| s.name == name) {
            *s.round_trips.get_or_insert(0) += n;
        }
    }

    /// Adds a predicted time to a stage (added first with no time if it is new).
    pub fn add_predicted(&mut self, name: &str, predicted: Duration) {
        self.add(name, Duration::ZERO, 0, 0);
        if let Some(s) = self.stages.iter_mut().find(|s| s.name == name) {
            *s.predicted_ns.get_or_insert(0.0) += predicted.as_nanos() as f64;
        }
    }

    /// Adds CPU time to a stage (added first with no time if it is new).
    pub fn add_cpu(&mut self, name: &str, cpu: Duration) {
        self.add(name, Duration::ZERO, 0, 0);
        if let Some(s) = self.stages.iter_mut().find(|s| s.name == name) {
            *s.cpu_ns.get_or_insert(0.0) += cpu.as_nanos() as f64;
        }
    }

    /// Times `f` as the stage `name`.
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add(name, start.elapsed(), 0, 0);
        out
    }

    /// Counts one more run of the pipeline.
    pub fn end_run(&mut self) {
        self.runs += 1;
    }

    /// Adds all stages and runs of another breakdown (e.g. from another thread).
    pub fn merge(&mut self, other: &Stages) {
        for s in &other.stages {
            self.add(
                &s.name,
                Duration::from_nanos(s.time_ns as u64),
                s.bytes_in,
                s.bytes_out,
            );
            if let Some(n) = s.round_trips {
                self.add_round_trips(&s.name, n);
            }
            if let Some(p) = s.predicted_ns {
                self.add_predicted(&s.name, Duration::from_nanos(p as u64));
            }
            if let Some(c) = s.cpu_ns {
                self.add_cpu(&s.name, Duration::from_nanos(c as u64));
            }
        }
        self.runs += other.runs;
    }

    /// Finishes the breakdown. `total` is the measured end-to-end time (when `None`, the sum of
    /// the stages); `isolated` is the sum of the stages' costs measured alone, if known.
    pub fn finish(
        self,
        name: &str,
        total: Option<Duration>,
        isolated: Option<Duration>,
    ) -> StageBreakdown {
        let sum: f64 = self.stages.iter().map(|s| s.time_ns).sum();
        let total_ns = total.map_or(sum, |d| d.as_nanos() as f64);
        let stages = self
            .stages
            .into_iter()
            .map(|mut s| {
                s.percent = if total_ns > 0.0 {
                    100.0 * s.time_ns / total_ns
                } else {
                    0.0
                };
                s
            })
            .collect();
        let theoretical_min_ns = isolated.map(|d| d.as_nanos() as f64);
        StageBreakdown {
            name: name.to_owned(),
            runs: self.runs.max(1),
            stages,
            total_ns,
            theoretical_min_ns,
            overhead_ns: theoretical_min_ns.map(|m| total_ns - m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_and_overhead() {
        let mut s = Stages::new();
        s.add("ot", Duration::from_millis(10), 100, 200);
        s.add("garble", Duration::from_millis(30), 0, 4000);
        s.add("ot", Duration::from_millis(10), 1, 1);
        s.end_run();
        let b = s.finish(
            "2pc",
            Some(Duration::from_millis(80)),
            Some(Duration::from_millis(60)),
        );
        assert_eq!(b.stages.len(), 2);
        assert_eq!(b.stages[0].name, "ot");
        assert_eq!(b.stages[0].time_ns, 20e6);
        assert_eq!(b.stages[0].bytes_in, 101);
        assert_eq!(b.stages[0].percent, 25.0);
        assert_eq!(b.stages[1].percent, 37.5);
        assert_eq!(b.theoretical_min_ns, Some(60e6));
        assert_eq!(b.overhead_ns, Some(20e6));
        assert_eq!(b.runs, 1);
    }

    #[test]
    fn total_defaults_to_the_sum_and_merge_adds_up() {
        let mut a = Stages::new();
        a.add("x", Duration::from_nanos(30), 0, 0);
        a.end_run();
        let mut b = Stages::new();
        b.add("x", Duration::from_nanos(10), 0, 0);
        b.add("y", Duration::from_nanos(60), 0, 0);
        b.end_run();
        a.merge(&b);
        let r = a.finish("p", None, None);
        assert_eq!(r.total_ns, 100.0);
        assert_eq!(r.runs, 2);
        assert_eq!(r.stages[0].percent, 40.0);
        assert_eq!(r.overhead_ns, None);
        assert_eq!(r.stages[0].round_trips, None);
    }

    #[test]
    fn round_trips_predictions_and_cpu_add_up_and_merge() {
        let mut a = Stages::new();
        a.add("init", Duration::from_millis(21), 80, 80);
        a.add_round_trips("init", 1);
        a.add_predicted("init", Duration::from_millis(20));
        a.add_cpu("init", Duration::from_micros(300));
        a.add("garble", Duration::from_millis(5), 0, 1000);
        a.end_run();
        let mut b = Stages::new();
        b.add("init", Duration::from_millis(19), 80, 80);
        b.add_round_trips("init", 1);
        b.add_predicted("init", Duration::from_millis(20));
        b.add_cpu("init", Duration::from_micros(200));
        b.end_run();
        a.merge(&b);
        let r = a.finish("p", None, None);
        assert_eq!(r.stages[0].round_trips, Some(2));
        assert_eq!(r.stages[0].predicted_ns, Some(40e6));
        assert_eq!(r.stages[0].time_ns, 40e6);
        assert_eq!(r.stages[1].round_trips, None);
        assert_eq!(r.stages[1].predicted_ns, None);
        assert_eq!(r.stages[0].cpu_ns, Some(500e3));
        assert_eq!(r.stages[1].cpu_ns, None);
    }
}
