//! The record types and their JSON-lines form (`schema: "ccbench.v1"`).
//!
//! One JSON object a line. Every record carries `schema`, `kind`, `scenario`, `backend` and a
//! flat `params` map; the rest depends on the kind. Numbers are SI units named in the field
//! (`median_ns`, `bytes_per_s`). Raw samples are kept so that a later `compare` can test
//! significance. The format is documented in `docs/results-format.md` and validated against
//! `docs/results.schema.json` by the tests.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub mod env;
pub mod summary;

pub use env::{BuildInfo, Env};
pub use summary::{Outliers, Summary};

/// The schema tag written into every record.
pub const SCHEMA: &str = "ccbench.v1";

/// The parameters of a record: a flat map from name to a scalar.
pub type Params = BTreeMap<String, Value>;

/// A scalar parameter or table cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number (always finite in a valid record).
    Float(f64),
    /// Text.
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

impl Value {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(x) => Some(*x),
            _ => None,
        }
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
macro_rules! value_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
    )*};
}
value_from_int!(i32, i64, u32, u64, usize);

/// Builds a [`Params`] map: `params! { "size_bytes" => 1024, "algorithm" => "aes-128-gcm" }`.
#[macro_export]
macro_rules! params {
    () => { $crate::record::Params::new() };
    ($($k:expr => $v:expr),+ $(,)?) => {{
        let mut p = $crate::record::Params::new();
        $( p.insert(::std::string::String::from($k), $crate::record::Value::from($v)); )+
        p
    }};
}

/// One line of a results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The scenario that made the record (`"run"` for the environment record).
    pub scenario: String,
    /// The backend it ran on: `native`, `sandbox`, `sandbox+switchless`, `2pc`, `host`, ...
    pub backend: String,
    /// The configuration that distinguishes this record from its siblings.
    #[serde(default)]
    pub params: Params,
    /// The kind-specific body; its `kind` tag sits beside the fields above.
    #[serde(flatten)]
    pub body: Body,
}

impl Record {
    /// A record of the current schema.
    pub fn new(scenario: &str, backend: &str, params: Params, body: Body) -> Self {
        Record {
            schema: SCHEMA.to_owned(),
            scenario: scenario.to_owned(),
            backend: backend.to_owned(),
            params,
            body,
        }
    }

    /// The record's `kind` tag.
    pub fn kind(&self) -> &'static str {
        match &self.body {
            Body::Env(_) => "env",
            Body::Measurement(_) => "measurement",
            Body::Scaling(_) => "scaling",
            Body::Calibration(_) => "calibration",
            Body::Duration(_) => "duration",
            Body::Stages(_) => "stages",
            Body::Histogram(_) => "histogram",
            Body::Table(_) => "table",
            Body::Check(_) => "check",
            Body::Cost(_) => "cost",
        }
    }

    /// The name of the measured thing, when the kind has one.
    pub fn name(&self) -> Option<&str> {
        match &self.body {
            Body::Measurement(m) => Some(&m.name),
            Body::Scaling(s) => Some(&s.name),
            Body::Calibration(c) => Some(&c.name),
            Body::Duration(d) => Some(&d.name),
            Body::Stages(s) => Some(&s.name),
            Body::Histogram(h) => Some(&h.name),
            Body::Table(t) => Some(&t.name),
            Body::Check(c) => Some(&c.name),
            Body::Cost(c) => Some(&c.name),
            Body::Env(_) => None,
        }
    }
}

/// The kind-specific part of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// The machine and build the run happened on; written first.
    Env(Env),
    /// Repeated timings of one operation.
    Measurement(Measurement),
    /// One point of a thread sweep.
    Scaling(ScalingPoint),
    /// How a workload size was calibrated to a target time.
    Calibration(Calibration),
    /// A fixed-duration multi-threaded pass.
    Duration(DurationPass),
    /// A pipeline broken into named stages.
    Stages(StageBreakdown),
    /// A latency distribution.
    Histogram(Histogram),
    /// A table a scenario composed (an ablation, a per-gate table, published figures).
    Table(Table),
    /// A self-check with its verdict.
    Check(Check),
    /// What confidentiality costs for one headline workload: the unprotected figure and
    /// the protected ones, with their raw samples.
    Cost(Cost),
}

/// Repeated timings of one operation, each sample the mean of a batch of iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// What was measured (`seal`, `ecall`, `garble AND`, ...).
    pub name: String,
    /// Iterations batched into each sample.
    pub iters_per_sample: u64,
    /// Per-iteration time of each sample, in nanoseconds, in the order taken.
    pub samples_ns: Vec<f64>,
    /// Statistics over `samples_ns`.
    pub summary: Summary,
    /// The harness's own cost per iteration at this batch size (an empty operation), in ns;
    /// absent where the harness did not measure it (work timed by the workload itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_ns: Option<f64>,
    /// Operations per second at the median.
    pub ops_per_s: f64,
    /// Payload bytes processed per operation, when the operation has a size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_op: Option<u64>,
    /// Payload bytes per second at the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_s: Option<f64>,
}

/// Weak scaling keeps the work per thread fixed; strong scaling keeps the total fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScalingMode {
    /// Work per thread fixed: ideal throughput grows with the thread count.
    Weak,
    /// Total work fixed: ideal wall time shrinks with the thread count.
    Strong,
}

impl fmt::Display for ScalingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScalingMode::Weak => "weak",
            ScalingMode::Strong => "strong",
        })
    }
}

/// One point of a thread sweep. Throughput is total operations over wall time, computed once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingPoint {
    /// The swept workload.
    pub name: String,
    /// Weak or strong scaling.
    pub mode: ScalingMode,
    /// Threads at this point.
    pub threads: u64,
    /// Logical cores available to the process.
    pub cores: u64,
    /// True when `threads > cores`: the point measures time-sharing, not parallelism.
    pub oversubscribed: bool,
    /// Operations done by all threads together in one run.
    pub ops_total: u64,
    /// Wall time of each measured run, in ns.
    pub wall_samples_ns: Vec<f64>,
    /// Median wall time, in ns.
    pub wall_ns: f64,
    /// `ops_total / wall` at the median.
    pub ops_per_s: f64,
    /// Throughput relative to the sweep's smallest thread count.
    pub speedup: f64,
    /// `speedup / (threads / base_threads)`: 1.0 is perfect scaling.
    pub efficiency: f64,
}

/// One attempt of a calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationAttempt {
    /// Workload size tried.
    pub size: u64,
    /// Mean run time at that size, in ns.
    pub time_ns: f64,
}

/// How a workload size was grown (x2) until a run reached a target time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The calibrated workload.
    pub name: String,
    /// The time a run should reach, in ns.
    pub target_ns: f64,
    /// Every attempt, in order.
    pub attempts: Vec<CalibrationAttempt>,
    /// The size chosen.
    pub size: u64,
    /// Mean run time at the chosen size, in ns.
    pub time_ns: f64,
    /// `time_ns / target_ns`.
    pub overshoot: f64,
    /// False when the maximum size was reached below the target.
    pub reached: bool,
    /// Set when the first attempt already overshot the target by more than 10x, or the target
    /// was not reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// A fixed-duration pass: `threads` threads each loop for the duration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DurationPass {
    /// The operation looped.
    pub name: String,
    /// Threads in the pass.
    pub threads: u64,
    /// Logical cores available to the process.
    pub cores: u64,
    /// True when `threads > cores`.
    pub oversubscribed: bool,
    /// The requested duration, in ns.
    pub target_ns: f64,
    /// Measured wall time from start to the last thread's end, in ns.
    pub wall_ns: f64,
    /// Operations completed by all threads.
    pub ops_total: u64,
    /// Operations completed by each thread.
    pub ops_per_thread: Vec<u64>,
    /// `ops_total / wall`.
    pub ops_per_s: f64,
    /// `ops_per_s / threads`.
    pub ops_per_s_per_thread: f64,
    /// When the point repeated its pass: each pass's `ops_total / wall`, in order (the
    /// samples a comparison tests). Absent for a single pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_ops_per_s: Vec<f64>,
}

/// One named stage of a pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// The stage's name.
    pub name: String,
    /// Time spent in the stage, in ns (summed over all runs the breakdown covers).
    pub time_ns: f64,
    /// Share of the breakdown's total, in percent.
    pub percent: f64,
    /// Bytes received during the stage.
    #[serde(default)]
    pub bytes_in: u64,
    /// Bytes sent during the stage.
    #[serde(default)]
    pub bytes_out: u64,
    /// Round trips in the stage (summed over runs): the times a party waited for its
    /// peer's answer. Absent where the pipeline has no peer or did not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trips: Option<u64>,
    /// The stage's predicted time over a network link (summed over runs), in ns:
    /// `round_trips × RTT + bytes ÷ rate + the stage's compute measured on loopback`.
    /// Absent where no link profile was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ns: Option<f64>,
    /// CPU time of the measured party in the stage (summed over runs), in ns: beside
    /// `time_ns`, what it computed rather than waited for. Absent where not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<f64>,
}

/// A pipeline broken into stages, with the measured total and, optionally, the theoretical
/// minimum (the sum of the stages' costs measured in isolation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageBreakdown {
    /// The pipeline.
    pub name: String,
    /// How many runs of the pipeline the times cover.
    pub runs: u64,
    /// The stages in pipeline order.
    pub stages: Vec<Stage>,
    /// Measured total, in ns.
    pub total_ns: f64,
    /// Sum of isolated stage costs, in ns, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theoretical_min_ns: Option<f64>,
    /// `total_ns - theoretical_min_ns`, when the minimum is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_ns: Option<f64>,
}

/// One bucket of a histogram: the count of values in `(previous le, le_ns]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Upper bound of the bucket, in ns.
    pub le_ns: f64,
    /// Values in the bucket.
    pub count: u64,
}

/// A latency distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// What the latencies are of.
    pub name: String,
    /// Values recorded.
    pub count: u64,
    /// Buckets in increasing order of `le_ns`.
    pub buckets: Vec<Bucket>,
    /// Median, in ns.
    pub p50_ns: f64,
    /// 99th percentile, in ns.
    pub p99_ns: f64,
    /// Largest value, in ns.
    pub max_ns: f64,
}

/// A table composed by a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// A stable identifier.
    pub name: String,
    /// The caption shown above the table.
    pub title: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows of cells, each as long as `columns`.
    pub rows: Vec<Vec<Value>>,
    /// Where the figures come from when they are not ours (a publication), else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Notes printed under the table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The verdict of a self-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The check held.
    Pass,
    /// Something to look at; the results stand.
    Warn,
    /// The check failed: a result contradicts another.
    Fail,
}

/// What a check judges: this run's own measurements, figures someone published, or the
/// machine the run was measured on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckSubject {
    /// This run's data: a `fail` means the run contradicts itself and fails the run.
    #[default]
    Run,
    /// A published table fed to the same check: a `fail` is a finding about the
    /// publication, reported as such, and never fails the run.
    Published,
    /// The conditions the run was measured under (the hypervisor's steal, say): a `warn`
    /// qualifies the timings of the scenario it names and never fails the run, even under
    /// `--strict`, since it says nothing about whether the results agree with each other.
    Machine,
}

/// A self-check a scenario ran on its own results (or on published figures).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The numbers behind it.
    pub message: String,
    /// Whose figures were checked (absent in files: this run's).
    #[serde(default, skip_serializing_if = "is_run")]
    pub subject: CheckSubject,
}

fn is_run(s: &CheckSubject) -> bool {
    *s == CheckSubject::Run
}

impl Check {
    /// A check of this run's own data.
    pub fn run(name: impl Into<String>, verdict: Verdict, message: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            verdict,
            message: message.into(),
            subject: CheckSubject::Run,
        }
    }

    /// A check of published figures: its verdict is a finding about the publication.
    pub fn published(
        name: impl Into<String>,
        verdict: Verdict,
        message: impl Into<String>,
    ) -> Self {
        Check {
            subject: CheckSubject::Published,
            ..Check::run(name, verdict, message)
        }
    }

    /// Whether this check fails the run: a `fail` on the run's own data.
    pub fn fails_run(&self) -> bool {
        self.verdict == Verdict::Fail && self.subject == CheckSubject::Run
    }
}

/// One figure of a [`Cost`]: a configuration's time per operation, with its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostFigure {
    /// The configuration, as a reader names it (`native`, `sandbox`, `sandbox switchless`,
    /// `2pc over loopback`).
    pub label: String,
    /// The `backend` of the records the figure comes from.
    pub backend: String,
    /// Time per operation of each sample (or run), in ns.
    pub samples_ns: Vec<f64>,
    /// Median of `samples_ns`.
    pub median_ns: f64,
}

/// The answer to "what does confidentiality cost?" for one workload: the same operation
/// without protection and behind each trust boundary. The report divides each protected
/// median by the unprotected one and bootstraps a confidence interval from the samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// The workload (`one transaction, full pipeline`, `AES-128 block`).
    pub name: String,
    /// What one operation is, for the reader (`transaction`, `evaluation`, `1 KiB record`).
    pub unit: String,
    /// The unprotected figure.
    pub baseline: CostFigure,
    /// The protected figures, most typical first.
    pub protected: Vec<CostFigure>,
}
