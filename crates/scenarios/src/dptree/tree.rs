//! The binary aggregation tree (the "tree mechanism" for differentially private continual
//! counting: Dwork, Naor, Pitassi, Rothblum 2010; Chan, Shi, Song 2011).
//!
//! A tree of capacity `n` has height `h = ceil(log2 n)` and levels `0..=h`; node `j` of level
//! `l` covers the elements `[j 2^l, (j+1) 2^l)`. Every node starts with its own Gaussian
//! noise `N(0, sigma^2)`, drawn once when the tree is built. `add(v)` adds `v` to the `h + 1`
//! nodes on the path from the new element's leaf to the root and returns the private prefix
//! sum of the `m` elements added so far: the sum of the nodes of the dyadic decomposition of
//! `[0, m)` (one node per set bit of `m`, the left siblings on the path of leaf `m`). So every
//! prefix sum carries the noise of `popcount(m) <= ceil(log2 n) + 1` nodes, variance
//! `popcount(m) sigma^2`, and one element changes `h + 1` nodes.
//!
//! Node noise is fixed at construction: asking for the same prefix twice returns the same
//! value and spends no further privacy.
//!
//! # The noise
//!
//! Uniforms come from ChaCha20 ([`rand_chacha::ChaCha20Rng`]), a CSPRNG, seeded with 32 bytes
//! from the operating system (`getrandom`, which the enclave's seccomp allow-list admits) each
//! time a tree is built. Gaussians are made by the Box-Muller transform, see
//! [`standard_normal_pair`]. The floating-point caveats that apply to every textbook
//! implementation apply here too; `docs/scenario-dp-tree.md` states them.

use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRng, RngCore, SeedableRng};

/// The largest capacity a tree accepts: 2^26 elements, 2^27 nodes of 8 bytes (1 GiB).
pub const MAX_CAPACITY: u64 = 1 << 26;

/// Why a tree could not be built or refused an operation.
#[derive(
    Debug,
    Clone,
    PartialEq,
    thiserror::Error,
    parity_scale_codec::Encode,
    parity_scale_codec::Decode,
)]
pub enum TreeError {
    /// `n = 0`: a tree must hold at least one element.
    #[error("the capacity n must be at least 1")]
    ZeroCapacity,
    /// `n` above [`MAX_CAPACITY`].
    #[error("the capacity {n} exceeds the maximum {max}")]
    CapacityTooLarge {
        /// The capacity asked for.
        n: u64,
        /// [`MAX_CAPACITY`].
        max: u64,
    },
    /// `sigma` is zero, negative, NaN or infinite.
    #[error("sigma must be finite and greater than 0, got {sigma}")]
    BadSigma {
        /// The value given.
        sigma: f64,
    },
    /// The call would add more elements than the tree holds; nothing was added.
    #[error("capacity exceeded: {added} of {capacity} elements added, {requested} more requested")]
    CapacityExceeded {
        /// The tree's capacity.
        capacity: u64,
        /// Elements added before the call.
        added: u64,
        /// Elements the call would add.
        requested: u64,
    },
    /// A value to add is NaN or infinite; nothing was added.
    #[error("value {index} of the call is not finite")]
    NonFinite {
        /// Its position in the call's values.
        index: u64,
    },
    /// An operation before the first `init`.
    #[error("no tree: call init first")]
    NotInitialized,
    /// The operating system's random source failed.
    #[error("seeding the noise generator from the operating system: {0}")]
    Entropy(String),
}

/// `ceil(log2 n)` for `n >= 1`: the tree's height.
pub fn height(n: u64) -> u32 {
    u64::BITS - n.saturating_sub(1).leading_zeros()
}

/// The variance of the noise in the prefix sum of the first `m` elements: one `sigma^2` per
/// node of the dyadic decomposition of `[0, m)`.
pub fn prefix_variance(m: u64, sigma: f64) -> f64 {
    f64::from(m.count_ones()) * sigma * sigma
}

/// The nodes `(level, index)` whose sum is the prefix sum of the first `m` elements, highest
/// level first: for every set bit `l` of `m`, node `(m >> l) - 1` of level `l`.
pub fn prefix_nodes(m: u64) -> impl Iterator<Item = (u32, u64)> {
    (0..u64::BITS)
        .rev()
        .filter(move |l| m >> l & 1 == 1)
        .map(move |l| (l, (m >> l) - 1))
}

/// Two independent standard normal variates from two uniforms of `rng`, by the Box-Muller
/// transform: `u1` in `(0, 1]` and `u2` in `[0, 1)`, each from the top 53 bits of a `u64`;
/// `r = sqrt(-2 ln u1)`, and the pair is `(r cos 2 pi u2, r sin 2 pi u2)`.
///
/// Exactly two generator outputs per pair (no rejection loop, unlike the polar method), and
/// exact in distribution up to double-precision rounding, except that the tail is cut at
/// `sqrt(-2 ln 2^-53) = 8.57` standard deviations (a variate beyond that has probability
/// about 1e-17).
pub fn standard_normal_pair<R: RngCore + ?Sized>(rng: &mut R) -> (f64, f64) {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    let u1 = ((rng.next_u64() >> 11) + 1) as f64 * SCALE;
    let u2 = (rng.next_u64() >> 11) as f64 * SCALE;
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
    (r * c, r * s)
}

/// Fills `out` with independent `N(0, sigma^2)` variates.
pub fn fill_gaussian<R: RngCore + ?Sized>(rng: &mut R, sigma: f64, out: &mut [f64]) {
    let mut pairs = out.chunks_exact_mut(2);
    for pair in &mut pairs {
        let (a, b) = standard_normal_pair(rng);
        pair[0] = sigma * a;
        pair[1] = sigma * b;
    }
    if let [last] = pairs.into_remainder() {
        *last = sigma * standard_normal_pair(rng).0;
    }
}

/// A binary aggregation tree of fixed capacity.
#[derive(Debug, Clone)]
pub struct Tree {
    capacity: u64,
    height: u32,
    sigma: f64,
    /// Start of each level in `nodes`, levels `0..=height`.
    offsets: Vec<usize>,
    /// Every node's noisy sum, level by level.
    nodes: Vec<f64>,
    /// Elements added so far.
    count: u64,
}

fn check_capacity(n: u64) -> Result<(), TreeError> {
    match n {
        0 => Err(TreeError::ZeroCapacity),
        n if n > MAX_CAPACITY => Err(TreeError::CapacityTooLarge {
            n,
            max: MAX_CAPACITY,
        }),
        _ => Ok(()),
    }
}

fn check_sigma(sigma: f64) -> Result<(), TreeError> {
    if sigma.is_finite() && sigma > 0.0 {
        Ok(())
    } else {
        Err(TreeError::BadSigma { sigma })
    }
}

/// Checks `init(n, sigma)`'s parameters without building anything.
pub fn validate(n: u64, sigma: f64) -> Result<(), TreeError> {
    check_capacity(n)?;
    check_sigma(sigma)
}

impl Tree {
    /// A private tree of capacity `n` with node noise `N(0, sigma^2)`, the generator seeded
    /// from the operating system.
    pub fn new(n: u64, sigma: f64) -> Result<Tree, TreeError> {
        check_capacity(n)?;
        check_sigma(sigma)?;
        let mut rng =
            ChaCha20Rng::try_from_os_rng().map_err(|e| TreeError::Entropy(e.to_string()))?;
        Tree::with_rng(n, sigma, &mut rng)
    }

    /// As [`Tree::new`], the noise drawn from `rng` (a CSPRNG; tests pass a seeded one).
    pub fn with_rng<R: RngCore + CryptoRng + ?Sized>(
        n: u64,
        sigma: f64,
        rng: &mut R,
    ) -> Result<Tree, TreeError> {
        check_capacity(n)?;
        check_sigma(sigma)?;
        let mut t = Tree::zeroed(n, sigma);
        fill_gaussian(rng, sigma, &mut t.nodes);
        Ok(t)
    }

    /// A tree without noise (`sigma = 0`): its prefix sums are the exact sums. Not private;
    /// the reference the noisy trees are tested against, through the same arithmetic.
    pub fn noiseless(n: u64) -> Result<Tree, TreeError> {
        check_capacity(n)?;
        Ok(Tree::zeroed(n, 0.0))
    }

    /// A tree whose node `(level, index)` starts at `noise(level, index)` (tests: known noise
    /// makes the error of each prefix sum checkable node by node).
    #[cfg(test)]
    pub(crate) fn with_noise(
        n: u64,
        mut noise: impl FnMut(u32, u64) -> f64,
    ) -> Result<Tree, TreeError> {
        check_capacity(n)?;
        let mut t = Tree::zeroed(n, f64::NAN);
        for l in 0..=t.height {
            let start = t.offsets[l as usize];
            let end = t
                .offsets
                .get(l as usize + 1)
                .copied()
                .unwrap_or(t.nodes.len());
            for (j, x) in t.nodes[start..end].iter_mut().enumerate() {
                *x = noise(l, j as u64);
            }
        }
        Ok(t)
    }

    /// All nodes at zero; `n` is valid.
    fn zeroed(n: u64, sigma: f64) -> Tree {
        let height = height(n);
        let mut offsets = Vec::with_capacity(height as usize + 1);
        let mut total = 0usize;
        for l in 0..=height {
            offsets.push(total);
            // ceil(n / 2^l); n <= MAX_CAPACITY, so this fits.
            total += (((n - 1) >> l) + 1) as usize;
        }
        Tree {
            capacity: n,
            height,
            sigma,
            offsets,
            nodes: vec![0.0; total],
            count: 0,
        }
    }

    /// The capacity `n`.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// `ceil(log2 n)`.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// The noise's standard deviation (0 for a noiseless tree).
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// Elements added so far.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether nothing has been added yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The number of nodes (noise draws made at construction).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The private prefix sum of the first `m` elements, `m <= len()` (the count is public;
    /// with `m = 0` there is no node to sum and the answer is 0).
    fn prefix(&self, m: u64) -> f64 {
        let mut sum = 0.0;
        let mut bits = m;
        while bits != 0 {
            let l = bits.trailing_zeros();
            sum += self.nodes[self.offsets[l as usize] + ((m >> l) - 1) as usize];
            bits &= bits - 1;
        }
        sum
    }

    /// Adds `v` along the path of the next leaf; the caller has checked capacity and `v`.
    fn add_unchecked(&mut self, v: f64) -> f64 {
        let i = self.count;
        for (l, &off) in self.offsets.iter().enumerate() {
            self.nodes[off + (i >> l) as usize] += v;
        }
        self.count = i + 1;
        self.prefix(i + 1)
    }

    fn check_room(&self, requested: u64) -> Result<(), TreeError> {
        if requested > self.capacity - self.count {
            Err(TreeError::CapacityExceeded {
                capacity: self.capacity,
                added: self.count,
                requested,
            })
        } else {
            Ok(())
        }
    }

    /// Adds one element and returns the private prefix sum of all elements so far.
    pub fn add(&mut self, v: f64) -> Result<f64, TreeError> {
        if !v.is_finite() {
            return Err(TreeError::NonFinite { index: 0 });
        }
        self.check_room(1)?;
        Ok(self.add_unchecked(v))
    }

    /// Adds `values` in order, appending each one's private prefix sum to `out`. All or
    /// nothing: a non-finite value or too little room adds none of them.
    pub fn add_batch(&mut self, values: &[f64], out: &mut Vec<f64>) -> Result<(), TreeError> {
        if let Some(index) = values.iter().position(|v| !v.is_finite()) {
            return Err(TreeError::NonFinite {
                index: index as u64,
            });
        }
        self.check_room(values.len() as u64)?;
        out.reserve(values.len());
        for &v in values {
            out.push(self.add_unchecked(v));
        }
        Ok(())
    }

    /// The private prefix sum of every element added so far.
    pub fn sum(&self) -> f64 {
        self.prefix(self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rng(seed: u64) -> ChaCha20Rng {
        ChaCha20Rng::seed_from_u64(seed)
    }

    #[test]
    fn heights_and_sizes() {
        assert_eq!(
            [1, 2, 3, 4, 5, 1024, 1025].map(height),
            [0, 1, 2, 2, 3, 10, 11]
        );
        // n = 5: levels of 5, 3, 2, 1 nodes.
        assert_eq!(Tree::noiseless(5).unwrap().node_count(), 11);
        assert_eq!(Tree::noiseless(1).unwrap().node_count(), 1);
        assert_eq!(Tree::noiseless(1024).unwrap().node_count(), 2047);
    }

    #[test]
    fn errors_are_typed() {
        assert_eq!(Tree::new(0, 0.5).unwrap_err(), TreeError::ZeroCapacity);
        assert_eq!(
            Tree::new(MAX_CAPACITY + 1, 0.5).unwrap_err(),
            TreeError::CapacityTooLarge {
                n: MAX_CAPACITY + 1,
                max: MAX_CAPACITY
            }
        );
        for sigma in [0.0, -1.0, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                Tree::new(4, sigma).unwrap_err(),
                TreeError::BadSigma { sigma }
            );
        }
        assert!(matches!(
            Tree::new(4, f64::NAN),
            Err(TreeError::BadSigma { sigma }) if sigma.is_nan()
        ));
        let mut t = Tree::new(3, 0.5).unwrap();
        assert_eq!(
            t.add(f64::NAN).unwrap_err(),
            TreeError::NonFinite { index: 0 }
        );
        let mut out = Vec::new();
        assert_eq!(
            t.add_batch(&[1.0, f64::INFINITY], &mut out).unwrap_err(),
            TreeError::NonFinite { index: 1 }
        );
        assert_eq!(
            t.add_batch(&[1.0; 4], &mut out).unwrap_err(),
            TreeError::CapacityExceeded {
                capacity: 3,
                added: 0,
                requested: 4
            }
        );
        assert!(t.is_empty() && out.is_empty(), "failed calls add nothing");
        t.add_batch(&[1.0; 3], &mut out).unwrap();
        assert_eq!(
            t.add(1.0).unwrap_err(),
            TreeError::CapacityExceeded {
                capacity: 3,
                added: 3,
                requested: 1
            }
        );
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn the_os_seeded_tree_is_noisy_and_fresh_each_time() {
        let a = Tree::new(8, 1.0).unwrap();
        let b = Tree::new(8, 1.0).unwrap();
        assert!(a.nodes.iter().all(|x| x.is_finite()));
        assert_ne!(a.nodes, b.nodes, "two trees drew the same noise");
        assert_eq!(a.sum(), 0.0, "the empty prefix has no node");
    }

    proptest! {
        /// sigma = 0: every prefix sum, one at a time or batched, is the exact sum
        /// (integer values, so the float sums are exact).
        #[test]
        fn noiseless_prefix_sums_are_exact(
            values in proptest::collection::vec(-1000i32..1000, 1..300),
            extra in 0u64..300,
            split in 0usize..300,
        ) {
            let n = values.len() as u64 + extra;
            let mut one = Tree::noiseless(n).unwrap();
            let mut batched = Tree::noiseless(n).unwrap();
            let vals: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
            let split = split.min(vals.len());
            let mut out = Vec::new();
            batched.add_batch(&vals[..split], &mut out).unwrap();
            batched.add_batch(&vals[split..], &mut out).unwrap();
            let mut exact = 0.0;
            for (i, &v) in vals.iter().enumerate() {
                exact += v;
                prop_assert_eq!(one.add(v).unwrap(), exact);
                prop_assert_eq!(out[i], exact);
            }
            prop_assert_eq!(one.sum(), exact);
            prop_assert_eq!(batched.sum(), exact);
            prop_assert_eq!(one.len(), vals.len() as u64);
        }

        /// With known node noise, each prefix sum's error is exactly the noise of the nodes
        /// of a plain dyadic decomposition of [0, m) (greedy, largest aligned block first),
        /// and there are at most ceil(log2 n) + 1 of them.
        #[test]
        fn each_prefix_error_is_the_noise_of_at_most_h_plus_1_nodes(n in 1u64..2000) {
            // Node (l, j) starts at a distinct integer, so sums are exact.
            let id = |l: u32, j: u64| (u64::from(l) * 4096 + j + 1) as f64;
            let mut t = Tree::with_noise(n, id).unwrap();
            for m in 1..=n {
                let got = t.add(0.0).unwrap();
                // The reference: cover [0, m) by aligned blocks, largest first.
                let (mut start, mut nodes) = (0u64, Vec::new());
                while start < m {
                    let mut l = 0;
                    while start % (2 << l) == 0 && start + (2 << l) <= m {
                        l += 1;
                    }
                    nodes.push((l, start >> l));
                    start += 1 << l;
                }
                prop_assert!(nodes.len() as u32 <= height(n) + 1);
                prop_assert_eq!(nodes.clone(), prefix_nodes(m).collect::<Vec<_>>());
                let want: f64 = nodes.iter().map(|&(l, j)| id(l, j)).sum();
                prop_assert_eq!(got, want, "m = {}", m);
            }
        }
    }

    /// Over many independent trees (a fixed seed: the test is deterministic), the error of
    /// every prefix sum has mean 0 and variance `popcount(m) sigma^2`.
    ///
    /// Errors are exact Gaussians, so for each prefix `S = sum(e^2) / (popcount(m) sigma^2)`
    /// over `T` trees is chi-square with `T` degrees of freedom (mean `T`, standard deviation
    /// `sqrt(2T)`). The test accepts `|S/T - 1| <= 6 sqrt(2/T)` (6 standard deviations;
    /// with T = 2000, a relative tolerance of 19%) and `|mean| <= 6 sqrt(var/T)`. For a
    /// correct sampler and a random seed, the chance that any of the 2 x 64 tests fails is
    /// below 1e-6 (about 2e-9 each, the chi-square's upper tail a little heavier than the
    /// normal's); the wrong variance a naive analysis gives, `(h+1) sigma^2` for every prefix,
    /// is off by 7x at m = 1 and fails by hundreds of standard deviations.
    #[test]
    fn noise_variance_matches_the_analysis() {
        const N: u64 = 64;
        const TREES: usize = 2000;
        let sigma = 0.5;
        let mut rng = rng(0x0005_eedd_97ee);
        let values: Vec<f64> = (0..N).map(|i| (i % 7) as f64 - 3.0).collect();
        let exact: Vec<f64> = values
            .iter()
            .scan(0.0, |s, v| {
                *s += v;
                Some(*s)
            })
            .collect();
        let mut sum = vec![0.0; N as usize];
        let mut sum_sq = vec![0.0; N as usize];
        let mut out = Vec::with_capacity(N as usize);
        for _ in 0..TREES {
            let mut t = Tree::with_rng(N, sigma, &mut rng).unwrap();
            out.clear();
            t.add_batch(&values, &mut out).unwrap();
            for i in 0..N as usize {
                let e = out[i] - exact[i];
                sum[i] += e;
                sum_sq[i] += e * e;
            }
        }
        let t = TREES as f64;
        let tol = 6.0 * (2.0 / t).sqrt();
        for m in 1..=N {
            let i = (m - 1) as usize;
            let var = prefix_variance(m, sigma);
            let ratio = sum_sq[i] / (t * var);
            assert!(
                (ratio - 1.0).abs() <= tol,
                "prefix {m}: empirical/analytic variance {ratio:.4}, tolerance {tol:.4}"
            );
            let mean = sum[i] / t;
            assert!(
                mean.abs() <= 6.0 * (var / t).sqrt(),
                "prefix {m}: mean error {mean}"
            );
            let naive = f64::from(height(N) + 1) * sigma * sigma;
            if m.count_ones() <= 3 {
                assert!((sum_sq[i] / (t * naive) - 1.0).abs() > tol);
            }
        }
    }

    #[test]
    fn box_muller_moments() {
        // 200,000 variates (fixed seed): mean 0 +- 6 sd/sqrt(N), variance 1 within 6
        // standard errors (sd of the sample variance of N(0,1) is sqrt(2/N)), and the
        // fourth moment near 3 (kurtosis; catches a uniform or a wrong transform).
        let mut r = rng(7);
        let mut xs = vec![0.0; 200_000];
        fill_gaussian(&mut r, 1.0, &mut xs);
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let m2 = xs.iter().map(|x| x * x).sum::<f64>() / n;
        let m4 = xs.iter().map(|x| x.powi(4)).sum::<f64>() / n;
        assert!(mean.abs() < 6.0 / n.sqrt(), "{mean}");
        assert!((m2 - 1.0).abs() < 6.0 * (2.0 / n).sqrt(), "{m2}");
        // Var(x^4) = 105 - 9 = 96 for N(0,1).
        assert!((m4 - 3.0).abs() < 6.0 * (96.0 / n).sqrt(), "{m4}");
        let mut odd = [0.0; 3];
        fill_gaussian(&mut r, 2.0, &mut odd);
        assert!(odd.iter().all(|x| x.is_finite() && *x != 0.0));
    }
}
