//! 128-bit blocks, AES-128 with two backends, the garbling hash and a PRG.
//!
//! # The hash
//!
//! Half-gates needs a hash `H(x, i)` of a wire label `x` under a tweak `i`
//! (the gate index) that stays pseudorandom when its inputs are correlated by
//! the free-XOR offset. We use the fixed-key construction
//!
//! ```text
//! H(x, i) = pi(sigma(x) ^ i) ^ sigma(x) ^ i
//! ```
//!
//! where `pi` is AES-128 under a fixed, public key and `sigma(xL || xR) =
//! (xL ^ xR) || xL` is a linear orthomorphism. This is the "MMO with an
//! orthomorphism" hash of Bellare, Hoang, Keelveedhi and Rogaway, "Efficient
//! Garbling from a Fixed-Key Blockcipher" (IEEE S&P 2013, with doubling as
//! the orthomorphism), the one used by Zahur, Rosulek and Evans' half-gates
//! implementation, with the orthomorphism and the correlation-robustness
//! analysis of Guo, Katz, Wang and Yu, "Efficient and Secure Multiparty
//! Computation from Fixed-Key Block Ciphers" (IEEE S&P 2020, sections 3 and
//! 7). One AES call per hash. GKWY20 point out that for this tweakable form
//! the security bound degrades with the number of hash queries (an attacker
//! who sees `q` ciphertexts needs about `2^128 / q` work); their TCCR
//! `pi(pi(x) ^ i) ^ pi(x)` avoids that at twice the AES calls. For a
//! benchmark of semi-honest 2PC we take the one-call hash and say so.
//!
//! # Backends
//!
//! [`Backend::AesNi`] uses `core::arch` AES-NI with eight blocks in flight;
//! [`Backend::Portable`] is a bitsliced, table-free AES (the Boyar-Peralta
//! S-box circuit on 128-bit words, eight blocks at a time). [`Backend::detect`]
//! picks AES-NI when the CPU has it; tests force the portable backend to
//! check that both agree.

use std::fmt;

use thiserror::Error;

use crate::sbox::{Words, sbox, sbox_byte};

/// A 128-bit block: a wire label, a hash output, an AES block. The bytes of
/// the block as AES sees them are `to_le_bytes()`.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(transparent)]
pub struct Block(pub u128);

impl fmt::Debug for Block {
    /// Blocks are usually secret labels: never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Block(..)")
    }
}

impl Block {
    /// The all-zero block.
    pub const ZERO: Block = Block(0);

    /// The least significant bit (the point-and-permute colour of a label).
    #[inline(always)]
    pub fn lsb(self) -> bool {
        self.0 & 1 == 1
    }

    /// The block from 16 bytes.
    pub fn from_bytes(b: [u8; 16]) -> Block {
        Block(u128::from_le_bytes(b))
    }

    /// The 16 bytes of the block.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }

    /// `self` if `bit`, else zero (branch free).
    #[inline(always)]
    pub fn select(self, bit: bool) -> Block {
        Block(self.0 & (u128::from(bit)).wrapping_neg())
    }

    /// The orthomorphism `sigma(xL || xR) = (xL ^ xR) || xL` (xL the high half).
    #[inline(always)]
    pub fn sigma(self) -> Block {
        let hi = self.0 >> 64;
        let lo = self.0 & u128::from(u64::MAX);
        Block(((hi ^ lo) << 64) | hi)
    }
}

impl std::ops::BitXor for Block {
    type Output = Block;
    #[inline(always)]
    fn bitxor(self, r: Block) -> Block {
        Block(self.0 ^ r.0)
    }
}

impl std::ops::BitXorAssign for Block {
    #[inline(always)]
    fn bitxor_assign(&mut self, r: Block) {
        self.0 ^= r.0;
    }
}

/// Which AES implementation to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// AES-NI through `core::arch` (x86-64 only).
    AesNi,
    /// Portable, constant-time bitsliced AES.
    Portable,
}

/// The requested backend is not supported by this CPU.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("AES backend {0:?} is not available on this CPU")]
pub struct BackendUnavailable(pub Backend);

impl Backend {
    /// The fastest backend this CPU supports (checked at run time).
    pub fn detect() -> Backend {
        if Backend::AesNi.available() {
            Backend::AesNi
        } else {
            Backend::Portable
        }
    }

    /// Whether this backend can run here.
    pub fn available(self) -> bool {
        match self {
            Backend::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Backend::AesNi => {
                std::arch::is_x86_feature_detected!("aes")
                    && std::arch::is_x86_feature_detected!("sse2")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Backend::AesNi => false,
        }
    }
}

/// AES-128 encryption with an expanded key (no decryption: nothing here
/// needs it).
#[derive(Clone)]
pub struct Aes128 {
    rk: [[u8; 16]; 11],
    backend: Backend,
    /// AES-NI backend only: 256-bit VAES is present too.
    vaes: bool,
}

impl fmt::Debug for Aes128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Aes128")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// The public key of the fixed-key permutation `pi`: the first 16 bytes of
/// the binary expansion of pi (any public constant works).
pub const FIXED_KEY: [u8; 16] = [
    0x24, 0x3f, 0x6a, 0x88, 0x85, 0xa3, 0x08, 0xd3, 0x13, 0x19, 0x8a, 0x2e, 0x03, 0x70, 0x73, 0x44,
];

fn expand_key(key: [u8; 16]) -> [[u8; 16]; 11] {
    let mut rk = [[0u8; 16]; 11];
    rk[0] = key;
    let mut rcon = 1u8;
    for r in 1..11 {
        let p = rk[r - 1];
        let mut t = [p[13], p[14], p[15], p[12]];
        for x in t.iter_mut() {
            *x = sbox_byte(*x);
        }
        t[0] ^= rcon;
        rcon = xtime(rcon);
        for c in 0..4 {
            for j in 0..4 {
                let v = p[4 * c + j] ^ if c == 0 { t[j] } else { rk[r][4 * (c - 1) + j] };
                rk[r][4 * c + j] = v;
            }
        }
    }
    rk
}

fn vaes_available(backend: Backend) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        backend == Backend::AesNi
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("vaes")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = backend;
        false
    }
}

#[inline(always)]
fn xtime(x: u8) -> u8 {
    (x << 1) ^ (((x >> 7) & 1) * 0x1b)
}

impl Aes128 {
    /// AES-128 under `key` with the detected backend.
    pub fn new(key: [u8; 16]) -> Aes128 {
        let backend = Backend::detect();
        Aes128 {
            rk: expand_key(key),
            backend,
            vaes: vaes_available(backend),
        }
    }

    /// AES-128 under `key` with a chosen backend.
    pub fn with_backend(key: [u8; 16], backend: Backend) -> Result<Aes128, BackendUnavailable> {
        if !backend.available() {
            return Err(BackendUnavailable(backend));
        }
        Ok(Aes128 {
            rk: expand_key(key),
            backend,
            vaes: vaes_available(backend),
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Encrypts every block in place.
    pub fn encrypt_blocks(&self, blocks: &mut [Block]) {
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: an `AesNi` backend is only constructed after
            // `Backend::available` confirmed AES-NI and SSE2 at run time.
            Backend::AesNi => unsafe { ni::encrypt(&self.rk, blocks) },
            _ => portable::encrypt(&self.rk, blocks),
        }
    }

    /// `xs[i] = pi(sigma(xs[i]) ^ t[i]) ^ sigma(xs[i]) ^ t[i]` for every `i`
    /// (the hash of the module documentation, with this cipher as `pi`).
    /// `tweaks` must be at least as long as `xs`.
    #[inline]
    pub fn tccr(&self, xs: &mut [Block], tweaks: &[Block]) {
        let tweaks = &tweaks[..xs.len()];
        match self.backend {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `vaes` is set only when AES-NI, AVX2 and VAES were
            // detected at run time.
            Backend::AesNi if self.vaes => unsafe { ni::tccr_vaes(&self.rk, xs, tweaks) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `encrypt_blocks`.
            Backend::AesNi => unsafe { ni::tccr(&self.rk, xs, tweaks) },
            _ => {
                for (x, t) in xs.iter_mut().zip(tweaks) {
                    *x = x.sigma() ^ *t;
                }
                let mut y = [Block::ZERO; 32];
                for chunk in xs.chunks_mut(32) {
                    let y = &mut y[..chunk.len()];
                    y.copy_from_slice(chunk);
                    portable::encrypt(&self.rk, y);
                    for (x, e) in chunk.iter_mut().zip(y.iter()) {
                        *x ^= *e;
                    }
                }
            }
        }
    }
}

/// The garbling hash: [`Aes128::tccr`] under [`FIXED_KEY`].
#[derive(Clone, Debug)]
pub struct Hasher {
    aes: Aes128,
}

impl Hasher {
    /// The hash with the detected backend.
    pub fn new() -> Hasher {
        Hasher {
            aes: Aes128::new(FIXED_KEY),
        }
    }

    /// The hash with a chosen backend.
    pub fn with_backend(backend: Backend) -> Result<Hasher, BackendUnavailable> {
        Ok(Hasher {
            aes: Aes128::with_backend(FIXED_KEY, backend)?,
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.aes.backend()
    }

    #[cfg(test)]
    pub(crate) fn no_vaes_for_tests(&mut self) {
        self.aes.vaes = false;
    }

    /// `xs[i] = H(xs[i], tweaks[i])`.
    #[inline]
    pub fn hash(&self, xs: &mut [Block], tweaks: &[Block]) {
        self.aes.tccr(xs, tweaks)
    }

    /// Whether the fused VAES half-gates kernels ([`Hasher::garble_ands`],
    /// [`Hasher::eval_ands`]) are available.
    #[inline]
    pub(crate) fn fused(&self) -> bool {
        self.aes.vaes
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
        assert!(self.aes.vaes, "no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `vaes` is set only when AES-NI, AVX2 and VAES were
        // detected at run time.
        unsafe {
            ni::garble_ands(&self.aes.rk, delta, a0, b0, gate, tables, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (delta, a0, b0, gate, tables, out);
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
        assert!(self.aes.vaes, "no VAES");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `garble_ands`.
        unsafe {
            ni::eval_ands(&self.aes.rk, wa, wb, gate, tables, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (wa, wb, gate, tables, out);
    }

    /// `H(x, tweak)` for one block.
    pub fn hash_one(&self, x: Block, tweak: Block) -> Block {
        let mut v = [x];
        self.aes.tccr(&mut v, &[tweak]);
        v[0]
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Self::new()
    }
}

/// A pseudorandom generator: AES-128 in counter mode under a secret seed.
pub struct Prg {
    aes: Aes128,
    counter: u128,
    buf: [Block; 8],
    used: usize,
}

impl fmt::Debug for Prg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Prg(..)")
    }
}

/// The operating system's random source failed.
#[derive(Debug, Error)]
#[error("operating system randomness unavailable: {0}")]
pub struct RandomnessError(pub String);

/// Fills `buf` from the operating system's random source.
pub fn os_random(buf: &mut [u8]) -> Result<(), RandomnessError> {
    getrandom::fill(buf).map_err(|e| RandomnessError(e.to_string()))
}

impl Prg {
    /// A PRG seeded from the operating system.
    pub fn from_os() -> Result<Prg, RandomnessError> {
        let mut seed = [0u8; 16];
        os_random(&mut seed)?;
        Ok(Prg::from_seed(seed))
    }

    /// A PRG from a 16-byte seed (deterministic).
    pub fn from_seed(seed: [u8; 16]) -> Prg {
        Prg::from_aes(Aes128::new(seed))
    }

    /// A PRG from a seed with a chosen backend.
    pub fn from_seed_with(seed: [u8; 16], backend: Backend) -> Result<Prg, BackendUnavailable> {
        Ok(Prg::from_aes(Aes128::with_backend(seed, backend)?))
    }

    fn from_aes(aes: Aes128) -> Prg {
        Prg {
            aes,
            counter: 0,
            buf: [Block::ZERO; 8],
            used: 8,
        }
    }

    /// Fills `out` with pseudorandom blocks.
    pub fn fill(&mut self, out: &mut [Block]) {
        let mut rest = out;
        // Drain the buffer first, then generate directly into `out`.
        while self.used < 8 && !rest.is_empty() {
            rest[0] = self.buf[self.used];
            self.used += 1;
            rest = &mut rest[1..];
        }
        for b in rest.iter_mut() {
            *b = Block(self.counter);
            self.counter += 1;
        }
        self.aes.encrypt_blocks(rest);
    }

    /// One pseudorandom block.
    pub fn block(&mut self) -> Block {
        if self.used == 8 {
            for (i, b) in self.buf.iter_mut().enumerate() {
                *b = Block(self.counter + i as u128);
            }
            self.counter += 8;
            self.aes.encrypt_blocks(&mut self.buf);
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }

    /// Pseudorandom bytes.
    pub fn bytes(&mut self, out: &mut [u8]) {
        for c in out.chunks_mut(16) {
            let b = self.block().to_bytes();
            c.copy_from_slice(&b[..c.len()]);
        }
    }
}

mod portable {
    use super::*;

    /// Bitsliced AES: up to 8 blocks at a time, byte `j` of block `k` in bit
    /// position `16 k + j` of eight 128-bit planes (plane `i` = bit `i`).
    pub(super) fn encrypt(rk: &[[u8; 16]; 11], blocks: &mut [Block]) {
        for chunk in blocks.chunks_mut(8) {
            let mut buf = [[0u8; 16]; 8];
            let st = &mut buf[..chunk.len()];
            for (s, b) in st.iter_mut().zip(chunk.iter()) {
                *s = b.to_bytes();
            }
            for s in st.iter_mut() {
                xor16(s, &rk[0]);
            }
            for (r, k) in rk.iter().enumerate().skip(1) {
                sub_bytes(st);
                for s in st.iter_mut() {
                    shift_rows(s);
                    if r < 10 {
                        mix_columns(s);
                    }
                    xor16(s, k);
                }
            }
            for (b, s) in chunk.iter_mut().zip(st.iter()) {
                *b = Block::from_bytes(*s);
            }
        }
    }

    fn xor16(s: &mut [u8; 16], k: &[u8; 16]) {
        for (x, y) in s.iter_mut().zip(k) {
            *x ^= y;
        }
    }

    fn sub_bytes(st: &mut [[u8; 16]]) {
        let mut planes = [0u128; 8];
        for (k, s) in st.iter().enumerate() {
            for (j, &byte) in s.iter().enumerate() {
                let pos = 16 * k + j;
                for (i, p) in planes.iter_mut().enumerate() {
                    *p |= u128::from((byte >> i) & 1) << pos;
                }
            }
        }
        let u: [u128; 8] = core::array::from_fn(|i| planes[7 - i]);
        let o = sbox(&mut Words::of::<u128>(), u);
        for (k, s) in st.iter_mut().enumerate() {
            for (j, byte) in s.iter_mut().enumerate() {
                let pos = 16 * k + j;
                let mut v = 0u8;
                for i in 0..8 {
                    v |= (((o[7 - i] >> pos) & 1) as u8) << i;
                }
                *byte = v;
            }
        }
    }

    fn shift_rows(s: &mut [u8; 16]) {
        let o = *s;
        for c in 0..4 {
            for r in 0..4 {
                s[r + 4 * c] = o[r + 4 * ((c + r) % 4)];
            }
        }
    }

    fn mix_columns(s: &mut [u8; 16]) {
        for c in 0..4 {
            let a = [s[4 * c], s[4 * c + 1], s[4 * c + 2], s[4 * c + 3]];
            for r in 0..4 {
                s[4 * c + r] = xtime(a[r])
                    ^ xtime(a[(r + 1) % 4])
                    ^ a[(r + 1) % 4]
                    ^ a[(r + 2) % 4]
                    ^ a[(r + 3) % 4];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod ni {
    use super::Block;
    use core::arch::x86_64::*;

    #[inline(always)]
    fn load_keys(rk: &[[u8; 16]; 11]) -> [__m128i; 11] {
        // SAFETY: each `rk[i]` is 16 readable bytes; `loadu` has no
        // alignment requirement.
        core::array::from_fn(|i| unsafe { _mm_loadu_si128(rk[i].as_ptr().cast()) })
    }

    #[inline(always)]
    fn load(b: &Block) -> __m128i {
        // SAFETY: a `Block` is 16 readable bytes (repr(transparent) u128).
        unsafe { _mm_loadu_si128((b as *const Block).cast()) }
    }

    #[inline(always)]
    fn store(b: &mut Block, v: __m128i) {
        // SAFETY: a `Block` is 16 writable bytes.
        unsafe { _mm_storeu_si128((b as *mut Block).cast(), v) }
    }

    #[target_feature(enable = "aes,sse2")]
    fn rounds8(k: &[__m128i; 11], x: &mut [__m128i; 8]) {
        for v in x.iter_mut() {
            *v = _mm_xor_si128(*v, k[0]);
        }
        for key in &k[1..10] {
            for v in x.iter_mut() {
                *v = _mm_aesenc_si128(*v, *key);
            }
        }
        for v in x.iter_mut() {
            *v = _mm_aesenclast_si128(*v, k[10]);
        }
    }

    #[target_feature(enable = "aes,sse2")]
    fn rounds1(k: &[__m128i; 11], mut v: __m128i) -> __m128i {
        v = _mm_xor_si128(v, k[0]);
        for key in &k[1..10] {
            v = _mm_aesenc_si128(v, *key);
        }
        _mm_aesenclast_si128(v, k[10])
    }

    /// Encrypts blocks eight at a time.
    #[target_feature(enable = "aes,sse2")]
    pub(super) fn encrypt(rk: &[[u8; 16]; 11], blocks: &mut [Block]) {
        let k = load_keys(rk);
        let mut chunks = blocks.chunks_exact_mut(8);
        for c in &mut chunks {
            let mut x: [__m128i; 8] = core::array::from_fn(|i| load(&c[i]));
            rounds8(&k, &mut x);
            for (b, v) in c.iter_mut().zip(x) {
                store(b, v);
            }
        }
        for b in chunks.into_remainder() {
            let v = rounds1(&k, load(b));
            store(b, v);
        }
    }

    #[target_feature(enable = "sse2")]
    #[inline]
    fn sigma(x: __m128i) -> __m128i {
        // (hi, lo) -> (hi ^ lo, hi): swap halves, then add hi into the top.
        let swapped = _mm_shuffle_epi32::<0b01_00_11_10>(x);
        let hi_only = _mm_and_si128(x, _mm_set_epi64x(-1, 0));
        _mm_xor_si128(swapped, hi_only)
    }

    /// `xs[i] = pi(sigma(xs[i]) ^ t[i]) ^ sigma(xs[i]) ^ t[i]`.
    #[target_feature(enable = "aes,sse2")]
    pub(super) fn tccr(rk: &[[u8; 16]; 11], xs: &mut [Block], tweaks: &[Block]) {
        let k = load_keys(rk);
        let mut chunks = xs.chunks_exact_mut(8);
        let mut tw = tweaks.chunks_exact(8);
        for (c, t) in (&mut chunks).zip(&mut tw) {
            let pre: [__m128i; 8] =
                core::array::from_fn(|i| _mm_xor_si128(sigma(load(&c[i])), load(&t[i])));
            let mut x = pre;
            rounds8(&k, &mut x);
            for i in 0..8 {
                store(&mut c[i], _mm_xor_si128(x[i], pre[i]));
            }
        }
        let rest_t = tw.remainder();
        for (b, t) in chunks.into_remainder().iter_mut().zip(rest_t) {
            let pre = _mm_xor_si128(sigma(load(b)), load(t));
            let v = rounds1(&k, pre);
            store(b, _mm_xor_si128(v, pre));
        }
    }

    /// Two consecutive blocks as one 256-bit register. The array type carries the bounds:
    /// callers split their slices with `as_chunks`, so no check remains at run time.
    #[inline(always)]
    fn load2(b: &[Block; 2]) -> __m256i {
        // SAFETY: `b` is two consecutive blocks, 32 readable bytes; `loadu` has no
        // alignment requirement.
        unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
    }

    /// Stores one 256-bit register into two consecutive blocks.
    #[inline(always)]
    fn store2(b: &mut [Block; 2], v: __m256i) {
        // SAFETY: `b` is two consecutive blocks, 32 writable bytes.
        unsafe { _mm256_storeu_si256(b.as_mut_ptr().cast(), v) }
    }

    /// [`tccr`] with 256-bit VAES: 16 blocks (8 registers) in flight.
    #[target_feature(enable = "aes,sse2,avx2,vaes")]
    pub(super) fn tccr_vaes(rk: &[[u8; 16]; 11], xs: &mut [Block], tweaks: &[Block]) {
        let k1 = load_keys(rk);
        let k: [__m256i; 11] = core::array::from_fn(|i| _mm256_broadcastsi128_si256(k1[i]));
        let hi_mask = _mm256_set_epi64x(-1, 0, -1, 0);
        let n16 = xs.len() / 16 * 16;
        let (head, tail) = xs.split_at_mut(n16);
        let (head, _) = head.as_chunks_mut::<2>();
        let (tw, _) = tweaks.as_chunks::<2>();
        for (c, t) in head.chunks_exact_mut(8).zip(tw.chunks_exact(8)) {
            let pre: [__m256i; 8] = core::array::from_fn(|i| {
                let x = load2(&c[i]);
                let s = _mm256_xor_si256(
                    _mm256_shuffle_epi32::<0b01_00_11_10>(x),
                    _mm256_and_si256(x, hi_mask),
                );
                _mm256_xor_si256(s, load2(&t[i]))
            });
            let mut v: [__m256i; 8] = core::array::from_fn(|i| _mm256_xor_si256(pre[i], k[0]));
            for key in &k[1..10] {
                for x in v.iter_mut() {
                    *x = _mm256_aesenc_epi128(*x, *key);
                }
            }
            for (i, x) in v.iter().enumerate() {
                let e = _mm256_aesenclast_epi128(*x, k[10]);
                store2(&mut c[i], _mm256_xor_si256(e, pre[i]));
            }
        }
        tccr(rk, tail, &tweaks[n16..]);
    }

    /// The 11 round keys in both 128-bit lanes.
    #[target_feature(enable = "aes,sse2,avx2,vaes")]
    #[inline]
    fn keys256(rk: &[[u8; 16]; 11]) -> [__m256i; 11] {
        let k1 = load_keys(rk);
        core::array::from_fn(|i| _mm256_broadcastsi128_si256(k1[i]))
    }

    /// `x ^ AES(x)` for eight registers (sixteen blocks) of pre-images.
    #[target_feature(enable = "aes,sse2,avx2,vaes")]
    #[inline]
    fn mmo8(k: &[__m256i; 11], pre: &[__m256i; 8]) -> [__m256i; 8] {
        let mut v: [__m256i; 8] = core::array::from_fn(|i| _mm256_xor_si256(pre[i], k[0]));
        for key in &k[1..10] {
            for x in v.iter_mut() {
                *x = _mm256_aesenc_epi128(*x, *key);
            }
        }
        core::array::from_fn(|i| _mm256_xor_si256(_mm256_aesenclast_epi128(v[i], k[10]), pre[i]))
    }

    /// `sigma(x) ^ t` in both lanes (the hash's pre-image).
    #[target_feature(enable = "aes,sse2,avx2,vaes")]
    #[inline]
    fn pre256(x: __m256i, t: __m256i) -> __m256i {
        let hi_mask = _mm256_set_epi64x(-1, 0, -1, 0);
        let s = _mm256_xor_si256(
            _mm256_shuffle_epi32::<0b01_00_11_10>(x),
            _mm256_and_si256(x, hi_mask),
        );
        _mm256_xor_si256(s, t)
    }

    /// All ones if `lsb(x)`, else zero.
    #[target_feature(enable = "sse2")]
    #[inline]
    fn lsb_mask(x: __m128i) -> __m128i {
        let low = _mm_shuffle_epi32::<0b01_00_01_00>(x);
        _mm_sub_epi64(
            _mm_setzero_si128(),
            _mm_and_si128(low, _mm_set_epi64x(1, 1)),
        )
    }

    /// The tweak `2 g + odd` in both lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn tweak2(g: u64, odd: u64) -> __m256i {
        let j = (g << 1 | odd) as i64;
        _mm256_set_epi64x(0, j, 0, j)
    }

    #[inline(always)]
    fn load_bytes(b: &[u8]) -> __m128i {
        assert!(b.len() >= 16);
        // SAFETY: at least 16 readable bytes (checked); no alignment needed.
        unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
    }

    #[inline(always)]
    fn store_bytes(b: &mut [u8], v: __m128i) {
        assert!(b.len() >= 16);
        // SAFETY: at least 16 writable bytes (checked).
        unsafe { _mm_storeu_si128(b.as_mut_ptr().cast(), v) }
    }

    /// See `Hasher::garble_ands`: two passes of four gates, each pass eight
    /// registers `(A0 | A1)`, `(B0 | B1)` through the hash.
    #[target_feature(enable = "aes,sse2,avx2,vaes")]
    pub(super) fn garble_ands(
        rk: &[[u8; 16]; 11],
        delta: Block,
        a0: &[Block],
        b0: &[Block],
        gate: u64,
        tables: &mut [u8],
        out: &mut [Block],
    ) {
        let n = a0.len();
        assert!(n <= 8 && b0.len() == n && out.len() == n && tables.len() == 32 * n);
        let k = keys256(rk);
        let d = load(&delta);
        for p in 0..n.div_ceil(4) {
            let lo = 4 * p;
            let m = (n - lo).min(4);
            let mut pre = [_mm256_setzero_si256(); 8];
            let mut a = [_mm_setzero_si128(); 4];
            let mut b = [_mm_setzero_si128(); 4];
            for i in 0..m {
                let g = gate + (lo + i) as u64;
                a[i] = load(&a0[lo + i]);
                b[i] = load(&b0[lo + i]);
                let aa = _mm256_set_m128i(_mm_xor_si128(a[i], d), a[i]);
                let bb = _mm256_set_m128i(_mm_xor_si128(b[i], d), b[i]);
                pre[2 * i] = pre256(aa, tweak2(g, 0));
                pre[2 * i + 1] = pre256(bb, tweak2(g, 1));
            }
            let h = mmo8(&k, &pre);
            for i in 0..m {
                let (ha0, ha1) = (
                    _mm256_castsi256_si128(h[2 * i]),
                    _mm256_extracti128_si256::<1>(h[2 * i]),
                );
                let (hb0, hb1) = (
                    _mm256_castsi256_si128(h[2 * i + 1]),
                    _mm256_extracti128_si256::<1>(h[2 * i + 1]),
                );
                let pa = lsb_mask(a[i]);
                let pb = lsb_mask(b[i]);
                let tg = _mm_xor_si128(_mm_xor_si128(ha0, ha1), _mm_and_si128(d, pb));
                let wg0 = _mm_xor_si128(ha0, _mm_and_si128(tg, pa));
                let te = _mm_xor_si128(_mm_xor_si128(hb0, hb1), a[i]);
                let we0 = _mm_xor_si128(hb0, _mm_and_si128(_mm_xor_si128(te, a[i]), pb));
                let t = &mut tables[32 * (lo + i)..32 * (lo + i) + 32];
                store_bytes(&mut t[..16], tg);
                store_bytes(&mut t[16..], te);
                store(&mut out[lo + i], _mm_xor_si128(wg0, we0));
            }
        }
    }

    /// See `Hasher::eval_ands`: one register `(Wa | Wb)` per gate.
    #[target_feature(enable = "aes,sse2,avx2,vaes")]
    pub(super) fn eval_ands(
        rk: &[[u8; 16]; 11],
        wa: &[Block],
        wb: &[Block],
        gate: u64,
        tables: &[u8],
        out: &mut [Block],
    ) {
        let n = wa.len();
        assert!(n <= 8 && wb.len() == n && out.len() == n && tables.len() == 32 * n);
        let k = keys256(rk);
        let mut pre = [_mm256_setzero_si256(); 8];
        let mut a = [_mm_setzero_si128(); 8];
        let mut b = [_mm_setzero_si128(); 8];
        for i in 0..n {
            let g = gate + i as u64;
            a[i] = load(&wa[i]);
            b[i] = load(&wb[i]);
            let j = (g << 1) as i64;
            let t = _mm256_set_epi64x(0, j | 1, 0, j);
            pre[i] = pre256(_mm256_set_m128i(b[i], a[i]), t);
        }
        let h = mmo8(&k, &pre);
        for i in 0..n {
            let ha = _mm256_castsi256_si128(h[i]);
            let hb = _mm256_extracti128_si256::<1>(h[i]);
            let t = &tables[32 * i..32 * i + 32];
            let tg = load_bytes(&t[..16]);
            let te = load_bytes(&t[16..]);
            let wg = _mm_xor_si128(ha, _mm_and_si128(tg, lsb_mask(a[i])));
            let we = _mm_xor_si128(hb, _mm_and_si128(_mm_xor_si128(te, a[i]), lsb_mask(b[i])));
            store(&mut out[i], _mm_xor_si128(wg, we));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex16(s: &str) -> [u8; 16] {
        core::array::from_fn(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
    }

    fn backends() -> Vec<Backend> {
        [Backend::Portable, Backend::AesNi]
            .into_iter()
            .filter(|b| b.available())
            .collect()
    }

    #[test]
    fn fips197_both_backends() {
        for be in backends() {
            let aes = Aes128::with_backend(hex16("000102030405060708090a0b0c0d0e0f"), be).unwrap();
            let mut v = vec![Block::from_bytes(hex16("00112233445566778899aabbccddeeff")); 11];
            aes.encrypt_blocks(&mut v);
            for b in &v {
                assert_eq!(
                    b.to_bytes(),
                    hex16("69c4e0d86a7b0430d8cdb78070b4c55a"),
                    "{be:?}"
                );
            }
        }
    }

    #[test]
    fn backends_agree() {
        let p = Hasher::with_backend(Backend::Portable).unwrap();
        let mut prg = Prg::from_seed_with([7; 16], Backend::Portable).unwrap();
        let mut xs = vec![Block::ZERO; 77];
        let mut ts = vec![Block::ZERO; 77];
        prg.fill(&mut xs);
        prg.fill(&mut ts);
        let mut a = xs.clone();
        p.hash(&mut a, &ts);
        // Reference: the definition, one block at a time.
        for i in 0..xs.len() {
            let pre = xs[i].sigma() ^ ts[i];
            let mut e = [pre];
            Aes128::with_backend(FIXED_KEY, Backend::Portable)
                .unwrap()
                .encrypt_blocks(&mut e);
            assert_eq!(a[i], e[0] ^ pre);
        }
        if Backend::AesNi.available() {
            let n = Hasher::with_backend(Backend::AesNi).unwrap();
            let mut b = xs.clone();
            n.hash(&mut b, &ts);
            assert_eq!(a, b);
            let mut q = Prg::from_seed_with([7; 16], Backend::AesNi).unwrap();
            let mut ys = vec![Block::ZERO; 77];
            q.fill(&mut ys);
            assert_eq!(xs, ys);
        }
    }

    #[test]
    fn sigma_is_the_orthomorphism() {
        let x = Block((0x1111u128 << 64) | 0x2222);
        assert_eq!(x.sigma(), Block(((0x1111u128 ^ 0x2222) << 64) | 0x1111));
    }

    #[test]
    fn prg_is_a_stream() {
        let mut a = Prg::from_seed([1; 16]);
        let mut b = Prg::from_seed([1; 16]);
        let x: Vec<Block> = (0..20).map(|_| a.block()).collect();
        let mut y = vec![Block::ZERO; 3];
        b.fill(&mut y);
        let mut z = vec![Block::ZERO; 17];
        b.fill(&mut z);
        y.extend(z);
        // `fill` after `block` continues the same stream only when aligned;
        // here both start fresh, so the streams match.
        assert_eq!(x, y);
    }
}
