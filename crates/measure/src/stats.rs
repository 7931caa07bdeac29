//! Statistics on raw samples: location, spread, percentiles, a bootstrap confidence interval
//! of the median, Tukey outliers, and the Mann-Whitney U test used by `compare`.
//!
//! Outliers are classified and counted, never dropped: a bimodal operation is a finding.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

pub use crate::record::summary::{Outliers, Summary};

/// Bootstrap resamples used for confidence intervals.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// Why statistics could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// No samples at all.
    #[error("no samples")]
    Empty,
    /// A sample was NaN or infinite.
    #[error("sample {index} is not a finite number")]
    NotFinite {
        /// Position of the offending sample.
        index: usize,
    },
}

fn check(samples: &[f64]) -> Result<(), StatsError> {
    if samples.is_empty() {
        return Err(StatsError::Empty);
    }
    match samples.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NotFinite { index }),
        None => Ok(()),
    }
}

fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The `q`-quantile (0..=1) of sorted data, interpolating linearly between order statistics
/// (Hyndman and Fan's type 7, the default of R and NumPy).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The median of sorted data.
pub fn median_sorted(sorted: &[f64]) -> f64 {
    quantile_sorted(sorted, 0.5)
}

/// The median of unsorted data.
pub fn median(samples: &[f64]) -> Result<f64, StatsError> {
    check(samples)?;
    Ok(median_sorted(&sorted(samples)))
}

/// Tukey's fences over sorted data.
pub fn outliers_sorted(sorted: &[f64]) -> Outliers {
    let q1 = quantile_sorted(sorted, 0.25);
    let q3 = quantile_sorted(sorted, 0.75);
    let iqr = q3 - q1;
    let (lo_sev, lo_mild) = (q1 - 3.0 * iqr, q1 - 1.5 * iqr);
    let (hi_mild, hi_sev) = (q3 + 1.5 * iqr, q3 + 3.0 * iqr);
    let mut o = Outliers::default();
    for &x in sorted {
        if x < lo_sev {
            o.low_severe += 1;
        } else if x < lo_mild {
            o.low_mild += 1;
        } else if x > hi_sev {
            o.high_severe += 1;
        } else if x > hi_mild {
            o.high_mild += 1;
        }
    }
    o
}

/// A deterministic generator for resampling, so that the same data give the same interval.
fn resampler(samples: &[f64]) -> StdRng {
    let mut seed = 0x6363_6265_6e63_6800_u64 ^ samples.len() as u64;
    for x in samples.iter().take(64) {
        seed = seed.rotate_left(7) ^ x.to_bits();
    }
    StdRng::seed_from_u64(seed)
}

fn resample_median(rng: &mut StdRng, data: &[f64], buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..data.len()).map(|_| data[rng.random_range(0..data.len())]));
    buf.sort_by(f64::total_cmp);
    median_sorted(buf)
}

/// Percentile-bootstrap 95% confidence interval of the median.
pub fn bootstrap_median_ci(samples: &[f64]) -> Result<(f64, f64), StatsError> {
    check(samples)?;
    let mut rng = resampler(samples);
    let mut buf = Vec::with_capacity(samples.len());
    let mut medians: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| resample_median(&mut rng, samples, &mut buf))
        .collect();
    medians.sort_by(f64::total_cmp);
    Ok((
        quantile_sorted(&medians, 0.025),
        quantile_sorted(&medians, 0.975),
    ))
}

/// Percentile-bootstrap 95% confidence interval of `median(b) / median(a)`, resampling each
/// set independently.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64]) -> Result<(f64, f64), StatsError> {
    check(a)?;
    check(b)?;
    let mut rng = resampler(b);
    let (mut ba, mut bb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let mut ratios: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let ma = resample_median(&mut rng, a, &mut ba);
            let mb = resample_median(&mut rng, b, &mut bb);
            mb / ma
        })
        .filter(|r| r.is_finite())
        .collect();
    if ratios.is_empty() {
        return Err(StatsError::NotFinite { index: 0 });
    }
    ratios.sort_by(f64::total_cmp);
    Ok((
        quantile_sorted(&ratios, 0.025),
        quantile_sorted(&ratios, 0.975),
    ))
}

impl Summary {
    /// Summarises raw samples.
    pub fn from_samples(samples: &[f64]) -> Result<Summary, StatsError> {
        check(samples)?;
        let s = sorted(samples);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            s.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let med = median_sorted(&s);
        let dev = sorted(&s.iter().map(|x| (x - med).abs()).collect::<Vec<_>>());
        let (lo, hi) = bootstrap_median_ci(&s)?;
        Ok(Summary {
            n: n as u64,
            mean_ns: mean,
            median_ns: med,
            min_ns: s[0],
            max_ns: s[n - 1],
            stddev_ns: var.sqrt(),
            mad_ns: median_sorted(&dev),
            p50_ns: med,
            p95_ns: quantile_sorted(&s, 0.95),
            p99_ns: quantile_sorted(&s, 0.99),
            median_ci_low_ns: lo,
            median_ci_high_ns: hi,
            outliers: outliers_sorted(&s),
        })
    }
}

/// The result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// The U statistic of the first sample.
    pub u: f64,
    /// The standardised statistic (with tie and continuity corrections).
    pub z: f64,
    /// Two-sided p-value from the normal approximation.
    pub p_value: f64,
}

/// Two-sided Mann-Whitney U test of whether `a` and `b` come from the same distribution.
///
/// Uses mid-ranks for ties, the tie-corrected variance and a continuity correction; the normal
/// approximation is adequate for the sample counts ccbench takes (at least 5 per side).
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Result<MannWhitney, StatsError> {
    check(a)?;
    check(b)?;
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let mid_rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += all[i..=j].iter().filter(|e| e.1).count() as f64 * mid_rank;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mean_u = n1 * n2 / 2.0;
    let nt = n1 + n2;
    let var_u = n1 * n2 / 12.0 * ((nt + 1.0) - tie_term / (nt * (nt - 1.0)));
    if var_u <= 0.0 {
        // Every value identical: no evidence of a difference.
        return Ok(MannWhitney {
            u,
            z: 0.0,
            p_value: 1.0,
        });
    }
    let diff = u - mean_u;
    let corrected = (diff.abs() - 0.5).max(0.0) * diff.signum();
    let z = corrected / var_u.sqrt();
    Ok(MannWhitney {
        u,
        z,
        p_value: (2.0 * normal_sf(z.abs())).min(1.0),
    })
}

/// Upper tail of the standard normal distribution, `P(Z > z)`.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function, to a relative error below 1.2e-7 everywhere
/// (the Chebyshev fit of Numerical Recipes, 3rd ed., section 6.2.2).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

impl crate::record::CostFigure {
    /// A figure from per-operation samples; `None` when there are none or one is not
    /// finite.
    pub fn new(label: &str, backend: &str, samples_ns: Vec<f64>) -> Option<Self> {
        let median_ns = median(&samples_ns).ok()?;
        Some(crate::record::CostFigure {
            label: label.to_owned(),
            backend: backend.to_owned(),
            samples_ns,
            median_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    #[test]
    fn summary_of_a_known_set() {
        // Values chosen so every statistic is easy to check by hand.
        let x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let s = Summary::from_samples(&x).unwrap();
        assert_eq!(s.n, 8);
        assert_eq!(s.mean_ns, 5.0);
        assert_eq!(s.median_ns, 4.5);
        assert_eq!(s.min_ns, 2.0);
        assert_eq!(s.max_ns, 9.0);
        // Population sd is 2; the sample sd is 2 * sqrt(8/7).
        assert!(close(s.stddev_ns, 2.0 * (8.0f64 / 7.0).sqrt(), 1e-12));
        // |x - 4.5| = 2.5 .5 .5 .5 .5 .5 2.5 4.5 -> median 0.5
        assert_eq!(s.mad_ns, 0.5);
        // Type 7: h = 7 * 0.95 = 6.65 -> 7 + 0.65 * (9 - 7)
        assert!(close(s.p95_ns, 8.3, 1e-12));
        assert!(s.median_ci_low_ns <= 4.5 && 4.5 <= s.median_ci_high_ns);
        assert!(s.median_ci_low_ns >= 2.0 && s.median_ci_high_ns <= 9.0);
        // q1 = 4, q3 = 5.5, IQR = 1.5: 9 lies beyond 7.75 but within 10, a mild high outlier.
        assert_eq!(s.outliers.high_mild, 1);
        assert_eq!(s.outliers.total(), 1);
    }

    #[test]
    fn quantiles_match_numpy() {
        // numpy.percentile([1, 2, 3, 4, 10], [25, 50, 99]) = [2.0, 3.0, 9.76]
        let s = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert_eq!(quantile_sorted(&s, 0.25), 2.0);
        assert_eq!(quantile_sorted(&s, 0.5), 3.0);
        assert!(close(quantile_sorted(&s, 0.99), 9.76, 1e-12));
    }

    #[test]
    fn tukey_classifies_mild_and_severe() {
        // q1 = 10, q3 = 11, IQR = 1 (type 7 over the 20 values below).
        let mut x: Vec<f64> = (0..18).map(|i| 10.0 + (i % 2) as f64).collect();
        x.push(13.0); // mild: q3 + 1.5 IQR = 12.5 < 13 <= q3 + 3 IQR = 14
        x.push(50.0); // severe
        let s = sorted(&x);
        let q1 = quantile_sorted(&s, 0.25);
        let q3 = quantile_sorted(&s, 0.75);
        assert_eq!((q1, q3), (10.0, 11.0));
        let o = outliers_sorted(&s);
        assert_eq!(o.high_mild, 1, "{o:?}");
        assert_eq!(o.high_severe, 1, "{o:?}");
        assert_eq!(o.low_mild + o.low_severe, 0);
        // Reported, not dropped: the summary still counts all 20 samples.
        assert_eq!(Summary::from_samples(&x).unwrap().n, 20);
    }

    #[test]
    fn errors_on_empty_and_nan() {
        assert_eq!(Summary::from_samples(&[]), Err(StatsError::Empty));
        assert_eq!(
            Summary::from_samples(&[1.0, f64::NAN]),
            Err(StatsError::NotFinite { index: 1 })
        );
    }

    #[test]
    fn erfc_known_values() {
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(erfc(1.0), 0.157_299_207_050_285_13, 2e-7));
        assert!(close(erfc(-1.0), 1.842_700_792_949_715, 2e-7));
        assert!(close(normal_sf(1.959_963_984_540_054), 0.025, 1e-6));
    }

    #[test]
    fn mann_whitney_matches_scipy() {
        // By hand: U_a = 2 (5 > 4.5, 6 > 4.5); mean 18, variance 6 * 6 * 13 / 12 = 39,
        // z = (|2 - 18| - 0.5) / sqrt(39) = 2.4820, p = 2 * P(Z > 2.4820) = 0.01306.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [4.5, 6.5, 7.0, 8.0, 9.0, 10.0];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert_eq!(r.u, 2.0);
        assert!((r.p_value - 0.01306).abs() < 1e-4, "{r:?}");
        let same = mann_whitney_u(&a, &a).unwrap();
        assert!(same.p_value > 0.9);
        let constant = mann_whitney_u(&[1.0; 5], &[1.0; 5]).unwrap();
        assert_eq!(constant.p_value, 1.0);
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_ratio() {
        let a: Vec<f64> = (0..50).map(|i| 100.0 + (i % 7) as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.2).collect();
        let (lo, hi) = bootstrap_ratio_ci(&a, &b).unwrap();
        assert!(lo <= 1.2 && 1.2 <= hi, "{lo} {hi}");
        assert!(hi - lo < 0.1);
        assert_eq!(bootstrap_ratio_ci(&a, &b).unwrap(), (lo, hi));
    }
}
