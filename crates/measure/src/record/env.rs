//! The environment record: the machine, the build and the time of a run (captured by
//! [`crate::env`]).

use serde::{Deserialize, Serialize};

/// Facts about the binary that only the binary knows (passed in by the cli at compile time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildInfo {
    /// The ccbench version.
    pub version: String,
    /// The project's git commit, or `unknown`.
    pub git_commit: String,
    /// `release` or `debug`.
    pub profile: String,
    /// `rustc --version` of the compiler that built it.
    pub rustc: String,
}

/// The machine, the build and the time of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Env {
    /// CPU model name.
    pub cpu_model: String,
    /// Logical cores available to the process.
    pub cores: u64,
    /// The relevant CPU flags present (a subset of [`crate::env::RELEVANT_CPU_FLAGS`]).
    pub cpu_flags: Vec<String>,
    /// Trusted-hardware device nodes found (names from [`crate::env::TRUSTED_DEVICES`]).
    pub trusted_hardware: Vec<String>,
    /// Total memory, in bytes (0 when unknown).
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// Operating system name and version.
    pub os: String,
    /// The build.
    pub build: BuildInfo,
    /// When the run started, RFC 3339 UTC.
    pub time_utc: String,
    /// The harness's per-iteration overhead on an empty operation, in ns, measured at start-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_overhead_ns: Option<f64>,
    /// The 1-minute load average when the run started (`/proc/loadavg`): other work on the
    /// machine, which inflates timings and starves spinning workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_avg_1m: Option<f64>,
}

impl Env {
    /// Whether the machine was busy when the run started: a 1-minute load average of at
    /// least a quarter of the cores (at least 0.5), so that some core was likely shared.
    pub fn busy(&self) -> bool {
        self.load_avg_1m
            .is_some_and(|l| l >= (self.cores as f64 / 4.0).max(0.5))
    }
}
