//! Summary statistics of a sample set, as records carry them (computed by [`crate::stats`]).

use serde::{Deserialize, Serialize};

/// Counts of Tukey outliers: mild beyond 1.5 IQR from the quartiles, severe beyond 3 IQR.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outliers {
    /// Below `q1 - 3 IQR`.
    pub low_severe: u64,
    /// In `[q1 - 3 IQR, q1 - 1.5 IQR)`.
    pub low_mild: u64,
    /// In `(q3 + 1.5 IQR, q3 + 3 IQR]`.
    pub high_mild: u64,
    /// Above `q3 + 3 IQR`.
    pub high_severe: u64,
}

impl Outliers {
    /// All outliers, mild and severe.
    pub fn total(&self) -> u64 {
        self.low_severe + self.low_mild + self.high_mild + self.high_severe
    }
}

/// Summary statistics of a sample set, in the samples' unit (ns in records).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: u64,
    /// Arithmetic mean.
    pub mean_ns: f64,
    /// Median (the mean of the two middle values for an even count).
    pub median_ns: f64,
    /// Smallest sample.
    pub min_ns: f64,
    /// Largest sample.
    pub max_ns: f64,
    /// Sample standard deviation (n - 1 in the denominator; 0 for one sample).
    pub stddev_ns: f64,
    /// Median absolute deviation from the median (unscaled).
    pub mad_ns: f64,
    /// 50th percentile (linear interpolation between order statistics).
    pub p50_ns: f64,
    /// 95th percentile.
    pub p95_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Lower bound of the bootstrap 95% confidence interval of the median.
    pub median_ci_low_ns: f64,
    /// Upper bound of the bootstrap 95% confidence interval of the median.
    pub median_ci_high_ns: f64,
    /// Tukey outlier counts.
    pub outliers: Outliers,
}
