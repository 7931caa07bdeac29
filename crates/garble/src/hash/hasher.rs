//! [`Hasher`]: the garbling hash `H(x, t)`, fixed-key or MITCCRH (see the
//! module documentation of [`super`]), and the fused half-gates kernels that
//! compute it inside the AND gate when the CPU has VAES.

#[cfg(target_arch = "x86_64")]
use super::ni;
use super::{Aes128, Backend, BackendUnavailable, Block, FIXED_KEY, GcHash, portable};
use crate::threehalves::FusedLin;

/// The garbling hash of a session: [`Aes128::tccr`] under [`FIXED_KEY`]
/// ([`GcHash::FixedKey`]), or MITCCRH under a session seed
/// ([`GcHash::Mitccrh`]).
#[derive(Clone, Debug)]
pub struct Hasher {
    /// The fixed-key cipher; for MITCCRH only its backend (and VAES flag) is
    /// used.
    aes: Aes128,
    /// MITCCRH's session seed; `None` for the fixed-key hash.
    seed: Option<Block>,
    /// AVX-512F and AVX-512VL were detected beside VAES: the fused kernels run their
    /// AVX-512VL instances (32 vector registers; MITCCRH keeps twice the gates in flight).
    avx512: bool,
    /// AVX-512BW and DQ too: half-gates runs go through the 512-bit kernels (`ni::zmm`).
    zmm: bool,
}

/// AVX-512F and AVX-512VL beside VAES and AVX2 (checked at run time).
fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("vaes")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// AVX-512BW and AVX-512DQ beside [`avx512_available`].
pub(super) fn zmm_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512_available()
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl Hasher {
    /// The fixed-key hash with the detected backend.
    pub fn new() -> Hasher {
        Hasher {
            aes: Aes128::new(FIXED_KEY),
            seed: None,
            avx512: avx512_available(),
            zmm: zmm_available(),
        }
    }

    /// The fixed-key hash with a chosen backend.
    pub fn with_backend(backend: Backend) -> Result<Hasher, BackendUnavailable> {
        Hasher::of(GcHash::FixedKey, Block::ZERO, backend)
    }

    /// MITCCRH under the session seed `seed` with a chosen backend.
    pub fn mitccrh(seed: Block, backend: Backend) -> Result<Hasher, BackendUnavailable> {
        Hasher::of(GcHash::Mitccrh, seed, backend)
    }

    /// The hash `kind` with a chosen backend; `seed` is MITCCRH's session seed
    /// (ignored by the fixed-key hash).
    pub fn of(kind: GcHash, seed: Block, backend: Backend) -> Result<Hasher, BackendUnavailable> {
        Ok(Hasher {
            aes: Aes128::with_backend(FIXED_KEY, backend)?,
            seed: match kind {
                GcHash::FixedKey => None,
                GcHash::Mitccrh => Some(seed),
            },
            avx512: backend == Backend::AesNi && avx512_available(),
            zmm: backend == Backend::AesNi && zmm_available(),
        })
    }

    /// Which hash this is.
    pub fn kind(&self) -> GcHash {
        match self.seed {
            None => GcHash::FixedKey,
            Some(_) => GcHash::Mitccrh,
        }
    }

    /// MITCCRH's session seed (`None` for the fixed-key hash).
    pub fn seed(&self) -> Option<Block> {
        self.seed
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.aes.backend()
    }

    #[cfg(test)]
    pub(crate) fn no_vaes_for_tests(&mut self) {
        self.aes.no_vaes();
        self.avx512 = false;
        self.zmm = false;
    }

    /// Turns the AVX-512VL kernels off: tests compare them with the AVX2 ones.
    #[cfg(test)]
    pub(crate) fn no_avx512_for_tests(&mut self) {
        self.avx512 = false;
        self.zmm = false;
    }

    /// Turns the 512-bit kernels off: tests compare them with the 256-bit ones.
    #[cfg(test)]
    pub(crate) fn no_zmm_for_tests(&mut self) {
        self.zmm = false;
    }

    /// Whether half-gates runs take the 512-bit kernels.
    #[cfg(test)]
    pub(crate) fn zmm(&self) -> bool {
        self.zmm
    }

    /// Whether the fused kernels run their AVX-512VL instances.
    #[cfg(test)]
    pub(crate) fn avx512(&self) -> bool {
        self.avx512
    }

    /// `xs[i] = H(xs[i], tweaks[i])`. `tweaks` must be at least as long as
    /// `xs`.
    #[inline]
    pub fn hash(&self, xs: &mut [Block], tweaks: &[Block]) {
        let Some(seed) = self.seed else {
            return self.aes.tccr(xs, tweaks);
        };
        let tweaks = &tweaks[..xs.len()];
        match self.backend() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the AES-NI backend exists only where `Backend::available`
            // found AES-NI, SSE2 and SSSE3 at run time.
            Backend::AesNi => unsafe { ni::mitccrh(seed, xs, tweaks) },
            #[cfg(not(target_arch = "x86_64"))]
            Backend::AesNi => unreachable!("AES-NI is never available off x86-64"),
            Backend::Portable => portable::mitccrh(seed, xs, tweaks),
        }
    }

    /// `xs[i] = H(xs[i], t0 + i)`: [`Hasher::hash`] under consecutive tweaks (the OT
    /// extension's and the output check's), with the MITCCRH key schedules of 16 tweaks
    /// made together where the 512-bit kernels run.
    pub fn hash_consecutive(&self, xs: &mut [Block], t0: Block) {
        self.consecutive(xs, t0, None);
    }

    /// `ys[i] = H(xs[i] ^ offset, t0 + i)` and `xs[i] = H(xs[i], t0 + i)` (the OT sender's
    /// two hashes of each row): as two calls of [`Hasher::hash_consecutive`], but under
    /// MITCCRH with the 512-bit kernels each key schedule serves both.
    ///
    /// # Panics
    ///
    /// If `ys` is shorter than `xs`.
    pub fn hash_consecutive_with_offset(
        &self,
        xs: &mut [Block],
        offset: Block,
        ys: &mut [Block],
        t0: Block,
    ) {
        assert!(ys.len() >= xs.len(), "ys shorter than xs");
        self.consecutive(xs, t0, Some((offset, ys)));
    }

    /// [`Hasher::hash_consecutive`], and with `pair` its `_with_offset` twin: the whole
    /// groups of the 512-bit MITCCRH kernel where it runs, the rest through
    /// [`Hasher::hash`].
    fn consecutive(&self, xs: &mut [Block], t0: Block, mut pair: Option<(Block, &mut [Block])>) {
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(seed) = self.seed
            && self.zmm
            && (t0.0 as u64).checked_add(xs.len() as u64).is_some()
        {
            let pair = pair.as_mut().map(|(offset, ys)| (*offset, &mut **ys));
            // SAFETY: `zmm` is set only where AES-NI, VAES and AVX-512F/VL/BW/DQ were
            // detected at run time; the tweaks' low halves do not pass 2^64 (checked).
            done = unsafe { ni::zmm::mitccrh_consecutive(seed, t0, xs, pair) };
        }
        let xs = &mut xs[done..];
        let tweaks: Vec<Block> = (done..done + xs.len())
            .map(|i| Block(t0.0.wrapping_add(i as u128)))
            .collect();
        if let Some((offset, ys)) = pair {
            let ys = &mut ys[done..done + xs.len()];
            for (y, x) in ys.iter_mut().zip(xs.iter()) {
                *y = *x ^ offset;
            }
            self.hash(ys, &tweaks);
        }
        self.hash(xs, &tweaks);
    }

    /// `xs[2i] = H(xs[2i], tweaks[i])` and `xs[2i + 1] = H(xs[2i + 1], tweaks[i])`:
    /// pairs of blocks under one tweak (the garbler's `X`, `X ^ R`), the same
    /// values as [`Hasher::hash`] with each tweak repeated. Under MITCCRH with
    /// AES-NI one key schedule serves each pair. `xs.len()` must be
    /// `2 * tweaks.len()`.
    ///
    /// # Panics
    ///
    /// If the lengths do not match.
    #[inline]
    pub fn hash_pairs(&self, xs: &mut [Block], tweaks: &[Block]) {
        assert_eq!(xs.len(), 2 * tweaks.len(), "two blocks per tweak");
        match (self.seed, self.backend()) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the AES-NI backend exists only where `Backend::available`
            // found AES-NI, SSE2 and SSSE3 at run time.
            (Some(seed), Backend::AesNi) => unsafe { ni::mitccrh_pairs(seed, xs, tweaks) },
            _ => {
                // Each tweak twice, 16 blocks at a time.
                for (c, t) in xs.chunks_mut(16).zip(tweaks.chunks(8)) {
                    let mut tw = [Block::ZERO; 16];
                    for (i, &ti) in t.iter().enumerate() {
                        tw[2 * i] = ti;
                        tw[2 * i + 1] = ti;
                    }
                    self.hash(c, &tw[..c.len()]);
                }
            }
        }
    }

    /// Whether the fused VAES half-gates kernels ([`Hasher::garble_ands`],
    /// [`Hasher::eval_ands`]) are available.
    #[inline]
    pub(crate) fn fused(&self) -> bool {
        self.aes.vaes_keys().is_some()
    }

    /// Half-gates garbling of `a0.len() <= 8` independent AND gates in
    /// registers (the formulas of [`crate::gc`]): gate `i` has input zero
    /// labels `a0[i]`, `b0[i]` and tweaks `2 (gate + i)`, `2 (gate + i) + 1`;
    /// writes its table `TG || TE` to `tables[32 i..32 i + 32]` and its
    /// output zero label to `out[i]`.
    ///
    /// # Panics
    ///
    /// Without [`Hasher::fused`], or if the lengths do not match.
    #[inline]
    pub(crate) fn garble_ands(
        &self,
        delta: Block,
        a0: &[Block],
        b0: &[Block],
        gate: u64,
        tables: &mut [u8],
        out: &mut [Block],
    ) {
        let rk = self.aes.vaes_keys().expect("no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `vaes_keys` is `Some` only when AES-NI, SSSE3, AVX2 and VAES
        // were detected at run time, and `avx512` is set only when AVX-512F and
        // AVX-512VL were detected too.
        unsafe {
            match self.seed {
                None if self.avx512 => {
                    ni::avx512::garble_ands(rk, delta, a0, b0, gate, tables, out)
                }
                None => ni::avx2::garble_ands(rk, delta, a0, b0, gate, tables, out),
                Some(s) if self.avx512 => {
                    ni::avx512::garble_ands_mi(s, delta, a0, b0, gate, tables, out)
                }
                Some(s) => ni::avx2::garble_ands_mi(s, delta, a0, b0, gate, tables, out),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (rk, delta, a0, b0, gate, tables, out);
    }

    /// Half-gates evaluation of `wa.len() <= 8` independent AND gates in
    /// registers: gate `i` has active labels `wa[i]`, `wb[i]`, tweaks as in
    /// [`Hasher::garble_ands`] and its table at `tables[32 i..32 i + 32]`;
    /// writes its output label to `out[i]`.
    ///
    /// # Panics
    ///
    /// Without [`Hasher::fused`], or if the lengths do not match.
    #[inline]
    pub(crate) fn eval_ands(
        &self,
        wa: &[Block],
        wb: &[Block],
        gate: u64,
        tables: &[u8],
        out: &mut [Block],
    ) {
        let rk = self.aes.vaes_keys().expect("no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `garble_ands`.
        unsafe {
            match self.seed {
                None if self.avx512 => ni::avx512::eval_ands(rk, wa, wb, gate, tables, out),
                None => ni::avx2::eval_ands(rk, wa, wb, gate, tables, out),
                Some(s) if self.avx512 => ni::avx512::eval_ands_mi(s, wa, wb, gate, tables, out),
                Some(s) => ni::avx2::eval_ands_mi(s, wa, wb, gate, tables, out),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (rk, wa, wb, gate, tables, out);
    }

    /// Half-gates garbling of a run of independent AND gates `[a, b, out]`
    /// over `labels` (a power-of-two number of zero labels; slots are
    /// masked with `labels.len() - 1`), with the formulas of [`crate::gc`]:
    /// gate `i` has tweaks `2 (gate + i)`, `2 (gate + i) + 1`, its table
    /// goes to `tables[32 i..32 i + 32]` and its output zero label to its
    /// `out` slot. The run's gates must not read a slot that another gate
    /// of the run writes (a run of one AND depth never does).
    ///
    /// # Panics
    ///
    /// Without [`Hasher::fused`], if `labels.len()` is not a power of two,
    /// or if `tables.len() != 32 * run.len()`.
    #[inline]
    pub(crate) fn garble_run(
        &self,
        delta: Block,
        labels: &mut [Block],
        run: &[[u32; 3]],
        gate: u64,
        tables: &mut [u8],
    ) {
        let rk = self.aes.vaes_keys().expect("no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `garble_ands`.
        unsafe {
            match self.seed {
                None if self.zmm => ni::zmm::garble_run(rk, delta, labels, run, gate, tables),
                None if self.avx512 => ni::avx512::garble_run(rk, delta, labels, run, gate, tables),
                None => ni::avx2::garble_run(rk, delta, labels, run, gate, tables),
                Some(s) if self.zmm => ni::zmm::garble_run_mi(s, delta, labels, run, gate, tables),
                Some(s) if self.avx512 => {
                    ni::avx512::garble_run_mi(s, delta, labels, run, gate, tables)
                }
                Some(s) => ni::avx2::garble_run_mi(s, delta, labels, run, gate, tables),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (rk, delta, labels, run, gate, tables);
    }

    /// Half-gates evaluation of a run (see [`Hasher::garble_run`]): active
    /// labels in `labels`, gate `i`'s table at `tables[32 i..32 i + 32]`.
    ///
    /// # Panics
    ///
    /// As [`Hasher::garble_run`].
    #[inline]
    pub(crate) fn eval_run(
        &self,
        labels: &mut [Block],
        run: &[[u32; 3]],
        gate: u64,
        tables: &[u8],
    ) {
        let rk = self.aes.vaes_keys().expect("no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `garble_ands`.
        unsafe {
            match self.seed {
                None if self.zmm => ni::zmm::eval_run(rk, labels, run, gate, tables),
                None if self.avx512 => ni::avx512::eval_run(rk, labels, run, gate, tables),
                None => ni::avx2::eval_run(rk, labels, run, gate, tables),
                Some(s) if self.zmm => ni::zmm::eval_run_mi(s, labels, run, gate, tables),
                Some(s) if self.avx512 => ni::avx512::eval_run_mi(s, labels, run, gate, tables),
                Some(s) => ni::avx2::eval_run_mi(s, labels, run, gate, tables),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (rk, labels, run, gate, tables);
    }

    /// Three-halves garbling of a run of independent AND gates `[a, b, out]`
    /// over `labels` (as [`Hasher::garble_run`]) in the fused kernels, with
    /// the formulas of [`crate::threehalves`]: gate `i` has tweaks
    /// `3 (gate + i) + {0, 1, 2}`, coins `coins[i] = r1 | r2 << 1`, its table
    /// goes to `tables[25 i..25 i + 25]` and its output zero label to its
    /// `out` slot. `f` is [`FusedLin::new`] of `delta`. `3 (gate + run.len())`
    /// must fit in 64 bits.
    ///
    /// # Panics
    ///
    /// Without [`Hasher::fused`], if `labels.len()` is not a power of two,
    /// or if `tables.len() != 25 * run.len()` or `coins.len() != run.len()`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn garble_run_3h(
        &self,
        f: &FusedLin,
        delta: Block,
        labels: &mut [Block],
        run: &[[u32; 3]],
        coins: &[u8],
        gate: u64,
        tables: &mut [u8],
    ) {
        let rk = self.aes.vaes_keys().expect("no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `garble_ands`.
        unsafe {
            use ni::threehalves::{avx2, avx512, zmm512};
            match self.seed {
                None if self.zmm => {
                    zmm512::garble_run(rk, f, delta, labels, run, coins, gate, tables)
                }
                None if self.avx512 => {
                    avx512::garble_run(rk, f, delta, labels, run, coins, gate, tables)
                }
                None => avx2::garble_run(rk, f, delta, labels, run, coins, gate, tables),
                Some(s) if self.zmm => {
                    zmm512::garble_run_mi(s, f, delta, labels, run, coins, gate, tables)
                }
                Some(s) if self.avx512 => {
                    avx512::garble_run_mi(s, f, delta, labels, run, coins, gate, tables)
                }
                Some(s) => avx2::garble_run_mi(s, f, delta, labels, run, coins, gate, tables),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (rk, f, delta, labels, run, coins, gate, tables);
    }

    /// Three-halves evaluation of a run (see [`Hasher::garble_run_3h`]) in the
    /// fused kernels: active labels in `labels`, gate `i`'s table at
    /// `tables[25 i..25 i + 25]`. `3 (gate + run.len())` must fit in 64 bits.
    ///
    /// # Panics
    ///
    /// Without [`Hasher::fused`], if `labels.len()` is not a power of two, or
    /// if `tables.len() != 25 * run.len()`.
    #[inline]
    pub(crate) fn eval_run_3h(
        &self,
        labels: &mut [Block],
        run: &[[u32; 3]],
        gate: u64,
        tables: &[u8],
    ) {
        let rk = self.aes.vaes_keys().expect("no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `garble_ands`.
        unsafe {
            use ni::threehalves::{avx2, avx512, zmm512};
            match self.seed {
                None if self.zmm => zmm512::eval_run(rk, labels, run, gate, tables),
                None if self.avx512 => avx512::eval_run(rk, labels, run, gate, tables),
                None => avx2::eval_run(rk, labels, run, gate, tables),
                Some(s) if self.zmm => zmm512::eval_run_mi(s, labels, run, gate, tables),
                Some(s) if self.avx512 => avx512::eval_run_mi(s, labels, run, gate, tables),
                Some(s) => avx2::eval_run_mi(s, labels, run, gate, tables),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (rk, labels, run, gate, tables);
    }

    /// `H(x, tweak)` for one block.
    pub fn hash_one(&self, x: Block, tweak: Block) -> Block {
        let mut v = [x];
        self.hash(&mut v, &[tweak]);
        v[0]
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Self::new()
    }
}
