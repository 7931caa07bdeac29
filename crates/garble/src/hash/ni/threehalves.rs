//! The fused three-halves garbling kernels (see [`crate::threehalves`]): a
//! group of AND gates in vector registers from the label gather to the table
//! store, as the half-gates kernels of [`super`] do, for both hashes,
//! compiled for AVX2 with VAES and for AVX-512VL, and once more with the
//! MITCCRH hash on 512-bit registers ([`zmm::mmo_rekeyed_pairs`]) where the
//! half-gates kernels are 512-bit.
//!
//! Per gate, three 256-bit data registers go through the hash: `(A | B)` and
//! `(A ^ R | B ^ R)` under the tweaks `(3g | 3g + 1)`, and `(X | X ^ R)`
//! (`X = A ^ B`) under `3g + 2` (under MITCCRH the `X` registers of two
//! gates are paired, `(X_g | X_g')` and `(X_g ^ R | X_g' ^ R)`, so that every
//! key register holds two distinct keys). The hashes come out as
//! `h0 = (hA0 | hB0)`, `h1 = (hA1 | hB1)`, `hx = (hX0 | hX1)`; a few
//! shuffles give the hash terms of `(G0, G1, G2)`, of `C` and of the control
//! bits, and the linear terms are masked broadcasts of the zero labels'
//! halves with masks looked up by the gate's colours and coins
//! ([`FusedLin`]), so nothing depends on a branch. The fixed-key garbling
//! kernel leaves the pre-images out of the hashes and adds their terms to
//! the hash terms instead (see `SigmaLin`).

use super::*;
use crate::threehalves::{EvalEntry, FUSED_EVAL, FUSED_EVAL_IDX, FusedLin};
use zmm::mmo_rekeyed_pairs;

/// Bytes of table per gate ([`crate::threehalves::TABLE_BYTES`]).
const TB: usize = 25;

#[inline(always)]
fn ld4(x: &[u64; 4]) -> __m256i {
    // SAFETY: `x` is 32 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(x.as_ptr().cast()) }
}

#[inline(always)]
fn ld2(x: &[u64; 2]) -> __m128i {
    // SAFETY: `x` is 16 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm_loadu_si128(x.as_ptr().cast()) }
}

/// Stores gate `i`'s table of a group: `(G0, G1, G2)` from `s` and the
/// control byte `z`. All but the group's last gate store all of `s` (32
/// bytes, the last 7 of which the next gate's table overwrites); the last
/// stores 24 bytes.
#[inline(always)]
fn store_gate<const G: usize>(t: &mut [[u8; TB]; G], i: usize, s: __m256i, z: u8) {
    assert!(i < G);
    let p: *mut u8 = t.as_mut_ptr().cast();
    if i + 1 < G {
        // SAFETY: gate `i < G - 1` starts at byte `25 i` of the group's `25 G`
        // bytes, so `25 i + 32 <= 25 G`: 32 writable bytes. `storeu` has no
        // alignment requirement; AVX is implied by the callers' features.
        unsafe { _mm256_storeu_si256(p.add(TB * i).cast(), s) };
    } else {
        // SAFETY: `25 i + 24 <= 25 G`: 16 and then 8 writable bytes.
        unsafe {
            _mm_storeu_si128(p.add(TB * i).cast(), _mm256_castsi256_si128(s));
            _mm_storel_epi64(p.add(TB * i + 16).cast(), _mm256_extracti128_si256::<1>(s));
        }
    }
    t[i][24] = z;
}

/// The lsbs of the four qwords of `v` (bit `i` = lsb of qword `i`).
#[target_feature(enable = "avx2")]
#[inline]
fn lsbs_avx2(v: __m256i) -> i32 {
    _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_slli_epi64::<63>(v)))
}

/// [`lsbs_avx2`] in one AVX-512VL test.
#[target_feature(enable = "avx2,avx512f,avx512vl")]
#[inline]
fn lsbs_avx512(v: __m256i) -> i32 {
    i32::from(_mm256_test_epi64_mask(v, _mm256_set1_epi64x(1)))
}

/// The kernels of both hashes for one instruction set (as `fused_kernels!`):
/// `$group_fk` fixed-key gates in flight, `$group_mi` MITCCRH gates with
/// `$keys_mi` key registers (`G + ceil(G / 2)`, in `$zkeys_mi` pairs);
/// `$egroup_fk` and `$egroup_mi` gates in flight when evaluating (with
/// `$ekeys_fk` and `$ekeys_mi` registers, `G + ceil(G / 2)`, the latter in
/// `$ezkeys_mi` pairs); `$lsbs` extracts the lsbs of four qwords;
/// `$mi_hash` is the MITCCRH hash of a group's key and data registers,
/// `mmo_rekeyed_mixed` on 256-bit registers or
/// [`zmm::mmo_rekeyed_pairs`] on 512-bit ones (the pair counts are its).
macro_rules! threehalves_kernels {
    (
        $name:ident,
        $features:literal,
        $lsbs:ident,
        $group_fk:literal,
        $group_mi:literal,
        $keys_mi:literal,
        $egroup_fk:literal,
        $ekeys_fk:literal,
        $egroup_mi:literal,
        $ekeys_mi:literal,
        $mi_hash:ident,
        $zkeys_mi:literal,
        $ezkeys_mi:literal
    ) => {
        pub(in crate::hash) mod $name {
            use super::*;

            /// Gate `[sa, sb, _]`'s `(A0 | B0)`, its colours `pa | pb << 1` and
            /// its [`FusedLin`] index `pa | pb << 1 | r1 << 2 | r2 << 3`; `coin`
            /// is `r1 | r2 << 1`.
            #[target_feature(enable = $features)]
            #[inline]
            fn gather_gate(
                labels: &[Block],
                mask: usize,
                sa: u32,
                sb: u32,
                coin: u8,
            ) -> (__m256i, usize, usize) {
                let (la, lb) = (&labels[sa as usize & mask], &labels[sb as usize & mask]);
                let p = ((la.0 & 1) | ((lb.0 & 1) << 1)) as usize;
                let idx = p | usize::from(coin & 3) << 2;
                (_mm256_set_m128i(load(lb), load(la)), p, idx)
            }

            /// One MITCCRH gate's data registers and its [`FusedLin`] index.
            #[derive(Clone, Copy)]
            struct In {
                /// `(A | B)`, the colour-0 labels.
                ab: __m256i,
                /// `(A ^ R | B ^ R)`.
                ab1: __m256i,
                /// `(X | X ^ R)`, `X = A ^ B`.
                xx: __m256i,
                /// `pa | pb << 1 | r1 << 2 | r2 << 3` (see [`FusedLin`]).
                idx: usize,
            }

            /// Gathers gate `[sa, sb, _]`'s zero labels; `coin` is `r1 | r2 << 1`.
            #[target_feature(enable = $features)]
            #[inline]
            fn prep(
                f: &FusedLin,
                labels: &[Block],
                mask: usize,
                sa: u32,
                sb: u32,
                coin: u8,
                rr: __m256i,
            ) -> In {
                let (ab0, p, idx) = gather_gate(labels, mask, sa, sb, coin);
                let ab = _mm256_xor_si256(ab0, ld4(&f.ab[p]));
                let ab1 = _mm256_xor_si256(ab, rr);
                let x0 = _mm256_xor_si256(ab0, _mm256_permute2x128_si256::<0x01>(ab0, ab0));
                let xx = _mm256_xor_si256(x0, ld4(&f.x[p]));
                In { ab, ab1, xx, idx }
            }

            /// The fixed-key hash's pre-image terms that do not depend on a
            /// gate's labels, from `sigma` of [`FusedLin`]'s offsets `ab[p]` and
            /// `x[p]`, of `(R | R)` and of the first round key `k0`.
            ///
            /// The kernel never adds the pre-images back to the AES outputs (the
            /// `^ x` of `AES(x) ^ x`): `finish` needs only `h0 ^ h1`,
            /// `hx ^ swap(hx)` and `h0 ^ (hX0 | hX0)`, whose pre-image terms are
            /// `sigma(R | R)`, again `sigma(R | R)` (as `x[p] ^ swap(x[p]) =
            /// (R | R)` for every `p`), and `w` below plus the gate's labels and
            /// tweaks, so the pre-images need not live through the AES rounds.
            struct SigmaLin {
                /// `sigma(ab[p]) ^ k0`.
                abk: [__m256i; 4],
                /// `sigma(x[p]) ^ k0`.
                xk: [__m256i; 4],
                /// `sigma(ab[p]) ^ (lane 0 of sigma(x[p]), twice)`: the offsets'
                /// terms of `pre0 ^ (prex's lane 0, twice)`.
                w: [__m256i; 4],
                /// `sigma(R | R)`.
                r: __m256i,
                /// The last round keys of `(v0, v1, vx)`: `k10`, `k10 ^ sigma(R |
                /// R)` and `k10 ^ (0 | sigma(R))`, so that the AES outputs come
                /// out with the terms `sigma(R | R)` of `h0 ^ h1` and of `hx ^
                /// swap(hx)` already in (`aesenclast(x, k ^ c)` is
                /// `aesenclast(x, k) ^ c`; `hx`'s low lane, which `h0 ^ (hX0 |
                /// hX0)` takes, gets nothing).
                last: [__m256i; 3],
            }

            #[target_feature(enable = $features)]
            #[inline]
            fn sigma_lin(f: &FusedLin, rr: __m256i, k0: __m256i, k10: __m256i) -> SigmaLin {
                let ab: [__m256i; 4] = core::array::from_fn(|p| sigma256(ld4(&f.ab[p])));
                let x: [__m256i; 4] = core::array::from_fn(|p| sigma256(ld4(&f.x[p])));
                let r = sigma256(rr);
                let r_hi = _mm256_blend_epi32::<0b1111_0000>(_mm256_setzero_si256(), r);
                SigmaLin {
                    last: [k10, _mm256_xor_si256(k10, r), _mm256_xor_si256(k10, r_hi)],
                    abk: core::array::from_fn(|p| _mm256_xor_si256(ab[p], k0)),
                    xk: core::array::from_fn(|p| _mm256_xor_si256(x[p], k0)),
                    w: core::array::from_fn(|p| {
                        _mm256_xor_si256(ab[p], _mm256_permute4x64_epi64::<0b01_00_01_00>(x[p]))
                    }),
                    r,
                }
            }

            /// One fixed-key gate's [`FusedLin`] index, its three pre-images
            /// `sigma(x) ^ t` of `(A | B)`, `(A ^ R | B ^ R)` (tweaks `tw`) and
            /// `(X | X ^ R)` (tweak `tx`) XOR the first round key `k0`, by the
            /// linearity of `sigma`: one `sigma` of `(A0 | B0)` for all three;
            /// and the pre-image terms of `h0 ^ (hX0 | hX0)` (see [`SigmaLin`]):
            /// `pre0 ^ (prex's lane 0, twice)`, which is `swap(sigma(A0 | B0)) ^
            /// w[p] ^ tw ^ tx` (`tx` has its tweak in both lanes).
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::too_many_arguments)]
            fn prep_fk(
                sl: &SigmaLin,
                labels: &[Block],
                mask: usize,
                sa: u32,
                sb: u32,
                coin: u8,
                tw: __m256i,
                tx: __m256i,
            ) -> (usize, [__m256i; 3], __m256i) {
                let (ab0, p, idx) = gather_gate(labels, mask, sa, sb, coin);
                let s0 = sigma256(ab0);
                let v0 = _mm256_xor_si256(_mm256_xor_si256(s0, sl.abk[p]), tw);
                let v1 = _mm256_xor_si256(v0, sl.r);
                let s0s = _mm256_permute2x128_si256::<0x01>(s0, s0);
                let sx = _mm256_xor_si256(s0, s0s);
                let vx = _mm256_xor_si256(_mm256_xor_si256(sx, sl.xk[p]), tx);
                let w = _mm256_xor_si256(_mm256_xor_si256(s0s, sl.w[p]), _mm256_xor_si256(tw, tx));
                (idx, [v0, v1, vx], w)
            }

            /// One gate's table `S = (G0, G1, G2, -)`, output zero label `C` and
            /// control byte from its zero labels `a0`, `b0` and its hashes
            /// `h0 = (hA0 | hB0)`, `h1 = (hA1 | hB1)`, `hx = (hX0 | hX1)`.
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::too_many_arguments)]
            fn finish(
                f: &FusedLin,
                idx: usize,
                a0: &Block,
                b0: &Block,
                h0: __m256i,
                h1: __m256i,
                hx: __m256i,
            ) -> (__m256i, __m128i, u8) {
                let hx0 = _mm256_permute4x64_epi64::<0b01_00_01_00>(hx);
                let y = _mm256_xor_si256(h0, hx0);
                let t01 = _mm256_xor_si256(h0, h1);
                let tx = _mm256_xor_si256(hx, _mm256_permute2x128_si256::<0x01>(hx, hx));
                finish_terms(f, idx, a0, b0, y, t01, tx)
            }

            /// [`finish`] from the hash terms `y = h0 ^ (hX0 | hX0)`, `t01 = h0 ^
            /// h1` and `tx = hx ^ swap(hx)`. The halves of the labels are
            /// broadcast from memory (a load, no shuffle).
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::too_many_arguments)]
            fn finish_terms(
                f: &FusedLin,
                idx: usize,
                a0: &Block,
                b0: &Block,
                y: __m256i,
                t01: __m256i,
                tx: __m256i,
            ) -> (__m256i, __m128i, u8) {
                // Qwords (low first); `*` marks a high half whose lsb is a hash bit.
                // y: [CLh, z0*, CRh, z1*]; t01: [G0h, z2*, G1h, z3*]; tx: [G2h, z4*] twice.
                let ch = _mm256_permute4x64_epi64::<0b11_01_10_00>(y); // [CLh, CRh, z0*, z1*]
                let p = _mm256_permute4x64_epi64::<0b11_01_10_00>(t01); // [G0h, G1h, z2*, z3*]
                let sh = _mm256_blend_epi32::<0b1111_0000>(p, tx); // [G0h, G1h, G2h, z4*]
                let zq = _mm256_permute2x128_si256::<0x31>(ch, p); // [z0*, z1*, z2*, z3*]
                let (m4, m5) = ($lsbs(zq), $lsbs(sh));
                let e = &f.e[idx & 15];
                let z = ((m4 | ((m5 & 8) << 1)) as u8) ^ e.z as u8;
                let mut s = _mm256_xor_si256(sh, ld4(&e.rs));
                let mut c = _mm_xor_si128(_mm256_castsi256_si128(ch), ld2(&e.rc));
                let q = [
                    a0.0 as u64,
                    (a0.0 >> 64) as u64,
                    b0.0 as u64,
                    (b0.0 >> 64) as u64,
                ];
                for k in 0..4 {
                    let qk = _mm256_set1_epi64x(q[k] as i64);
                    s = _mm256_xor_si256(s, _mm256_and_si256(qk, ld4(&e.ms[k])));
                    c = _mm_xor_si128(c, _mm_and_si128(_mm256_castsi256_si128(qk), ld2(&e.mc[k])));
                }
                (s, c, z)
            }

            /// `AES(x)` under the fixed key for `N` registers `x ^ k0` (whitened),
            /// register `i` with the last round key `last[i % 3]` (see
            /// [`SigmaLin`]).
            #[target_feature(enable = $features)]
            #[inline]
            fn aes_n<const N: usize>(
                k: &[__m256i; 11],
                last: &[__m256i; 3],
                v: &[__m256i; N],
            ) -> [__m256i; N] {
                let mut v = *v;
                for key in &k[1..10] {
                    for x in v.iter_mut() {
                        *x = _mm256_aesenc_epi128(*x, *key);
                    }
                }
                core::array::from_fn(|i| _mm256_aesenclast_epi128(v[i], last[i % 3]))
            }

            /// `x ^ AES(x)` under the fixed key for `N` registers of pre-images.
            #[target_feature(enable = $features)]
            #[inline]
            fn mmo_n<const N: usize>(k: &[__m256i; 11], pre: &[__m256i; N]) -> [__m256i; N] {
                let mut v: [__m256i; N] = core::array::from_fn(|i| _mm256_xor_si256(pre[i], k[0]));
                for key in &k[1..10] {
                    for x in v.iter_mut() {
                        *x = _mm256_aesenc_epi128(*x, *key);
                    }
                }
                core::array::from_fn(|i| {
                    _mm256_xor_si256(_mm256_aesenclast_epi128(v[i], k[10]), pre[i])
                })
            }

            /// `AES_K(x) ^ x` for `M` key registers (two keys each) and `P` data
            /// registers per key: the schedules of the first `4 floor(M / 4)`
            /// registers word-sliced by fours (`expand_step_sliced`), the rest
            /// one register at a time (`expand_step2`). (`Z` is the 512-bit
            /// hash's and unused here.)
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(dead_code)] // where `$mi_hash` is the 512-bit hash
            fn mmo_rekeyed_mixed<const M: usize, const Z: usize, const P: usize>(
                k: [__m256i; M],
                x: &[[__m256i; P]; M],
            ) -> [[__m256i; P]; M] {
                mixed_rekeyed_mmo!(
                    k,
                    x,
                    M,
                    P,
                    expand_step2,
                    _mm256_xor_si256,
                    _mm256_aesenc_epi128,
                    _mm256_aesenclast_epi128
                )
            }

            /// `G` fixed-key gates: `tw` holds `(3g | 3g + 1)` of the first gate
            /// in the low halves and is advanced by `G` gates.
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::too_many_arguments)]
            fn group_fk<const G: usize, const N: usize>(
                k: &[__m256i; 11],
                f: &FusedLin,
                sl: &SigmaLin,
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; G],
                coins: &[u8; G],
                tables: &mut [[u8; TB]; G],
                tw: &mut __m256i,
            ) {
                const { assert!(N == 3 * G) };
                let three = _mm256_set_epi64x(0, 3, 0, 3);
                let to_x = _mm256_set_epi64x(0, 1, 0, 2);
                let mut v = [_mm256_setzero_si256(); N];
                let mut w = [_mm256_setzero_si256(); G];
                let mut idx = [0; G];
                for i in 0..G {
                    let tx = _mm256_add_epi64(*tw, to_x);
                    let (x, p, wi) =
                        prep_fk(sl, labels, mask, run[i][0], run[i][1], coins[i], *tw, tx);
                    idx[i] = x;
                    v[3 * i..3 * i + 3].copy_from_slice(&p);
                    w[i] = wi;
                    *tw = _mm256_add_epi64(*tw, three);
                }
                let mut e = aes_n(k, &sl.last, &v);
                if let Ok(e12) = <&mut [__m256i; 12]>::try_from(&mut e[..]) {
                    pin(e12);
                }
                macro_rules! fin {
                    ($i:expr) => {{
                    let i: usize = $i;
                    let (a0, b0) = (
                        &labels[run[i][0] as usize & mask],
                        &labels[run[i][1] as usize & mask],
                    );
                    let (e0, e1, ex) = (e[3 * i], e[3 * i + 1], e[3 * i + 2]);
                    // The hash terms with their pre-image terms (see `SigmaLin`).
                    let ex0 = _mm256_permute4x64_epi64::<0b01_00_01_00>(ex);
                    let y = _mm256_xor_si256(_mm256_xor_si256(e0, ex0), w[i]);
                    let t01 = _mm256_xor_si256(e0, e1);
                    let tx = _mm256_xor_si256(ex, _mm256_permute2x128_si256::<0x01>(ex, ex));
                    let (s, c, z) = finish_terms(f, idx[i], a0, b0, y, t01, tx);
                    store_gate(tables, i, s, z);
                    scatter(labels, mask, run[i][2], c);
                    }};
                }
                // Unrolled by hand: the optimizer kept this loop rolled (and its
                // arrays in memory).
                const { assert!(G <= 4) };
                fin!(0);
                if G > 1 {
                    fin!(1);
                }
                if G > 2 {
                    fin!(2);
                }
                if G > 3 {
                    fin!(3);
                }
            }

            /// `G` MITCCRH gates with `K = G + ceil(G / 2)` key registers: gate
            /// `i`'s `(k(3g) | k(3g + 1))` and the pairs' `(k(3g + 2) | k(3g' + 2))`.
            /// `ctr` holds `(3g | 3g + 1)` of the first gate in the high halves and
            /// is advanced by `G` gates. `Z = ceil(K / 2)` is for a 512-bit
            /// `$mi_hash`.
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::too_many_arguments)]
            fn group_mi<const G: usize, const K: usize, const Z: usize>(
                seed2: __m256i,
                f: &FusedLin,
                rr: __m256i,
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; G],
                coins: &[u8; G],
                tables: &mut [[u8; TB]; G],
                ctr: &mut __m256i,
            ) {
                const { assert!(K == G + G.div_ceil(2)) };
                let three = _mm256_set_epi64x(3, 0, 3, 0);
                let g: [In; G] = core::array::from_fn(|i| {
                    prep(f, labels, mask, run[i][0], run[i][1], coins[i], rr)
                });
                let mut keys = [_mm256_setzero_si256(); K];
                let mut x = [[_mm256_setzero_si256(); 2]; K];
                let mut c = *ctr;
                for i in 0..G {
                    keys[i] = _mm256_xor_si256(seed2, c);
                    x[i] = [g[i].ab, g[i].ab1];
                    if i % 2 == 0 {
                        // (3g + 2 | 3g' + 2) from (3g | 3g + 1): g' = g + 1, or g
                        // itself for a last gate without a partner.
                        let (j, d) = if i + 1 < G { (i + 1, 4) } else { (i, 1) };
                        let cx = _mm256_add_epi64(c, _mm256_set_epi64x(d, 0, 2, 0));
                        keys[G + i / 2] = _mm256_xor_si256(seed2, cx);
                        x[G + i / 2] = [
                            _mm256_permute2x128_si256::<0x20>(g[i].xx, g[j].xx),
                            _mm256_permute2x128_si256::<0x31>(g[i].xx, g[j].xx),
                        ];
                    }
                    c = _mm256_add_epi64(c, three);
                }
                *ctr = c;
                let h = $mi_hash::<K, Z, 2>(keys, &x);
                // Unrolled by hand: the optimizer kept this loop rolled (the
                // hashes stored to the stack and read back, a branch on the
                // pair's lane).
                macro_rules! fin {
                    ($i:literal) => {
                        if $i < G {
                            let hp = &h[G + $i / 2];
                            let hx = if $i % 2 == 0 {
                                _mm256_permute2x128_si256::<0x20>(hp[0], hp[1])
                            } else {
                                _mm256_permute2x128_si256::<0x31>(hp[0], hp[1])
                            };
                            let (a0, b0) = (
                                &labels[run[$i][0] as usize & mask],
                                &labels[run[$i][1] as usize & mask],
                            );
                            let (s, c, z) = finish(f, g[$i].idx, a0, b0, h[$i][0], h[$i][1], hx);
                            store_gate(tables, $i, s, z);
                            scatter(labels, mask, run[$i][2], c);
                        }
                    };
                }
                const { assert!(G <= 8) };
                fin!(0);
                fin!(1);
                fin!(2);
                fin!(3);
                fin!(4);
                fin!(5);
                fin!(6);
                fin!(7);
            }

            /// See `Hasher::garble_run_3h`, fixed-key hash with round keys `rk`.
            #[target_feature(enable = $features)]
            #[allow(clippy::too_many_arguments)]
            pub(in crate::hash) fn garble_run(
                rk: &[[u8; 16]; 11],
                f: &FusedLin,
                delta: Block,
                labels: &mut [Block],
                run: &[[u32; 3]],
                coins: &[u8],
                gate: u64,
                tables: &mut [u8],
            ) {
                assert!(labels.len().is_power_of_two());
                assert!(tables.len() == TB * run.len() && coins.len() == run.len());
                let mask = labels.len() - 1;
                let k = keys256(rk);
                let sl = sigma_lin(f, _mm256_broadcastsi128_si256(load(&delta)), k[0], k[10]);
                let t = (3 * gate) as i64;
                let mut tw = _mm256_set_epi64x(0, t + 1, 0, t);
                let (tabs, _) = tables.as_chunks_mut::<TB>();
                let (gs, g_rest) = run.as_chunks::<$group_fk>();
                let (cs, c_rest) = coins.as_chunks::<$group_fk>();
                let (ts, t_rest) = tabs.as_chunks_mut::<$group_fk>();
                for ((g, c), t) in gs.iter().zip(cs).zip(ts) {
                    group_fk::<$group_fk, { 3 * $group_fk }>(
                        &k, f, &sl, labels, mask, g, c, t, &mut tw,
                    );
                }
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal) => {
                        if g_rest.len() - at >= $m {
                            group_fk::<$m, { 3 * $m }>(
                                &k,
                                f,
                                &sl,
                                labels,
                                mask,
                                g_rest[at..at + $m].try_into().expect("length checked"),
                                c_rest[at..at + $m].try_into().expect("length checked"),
                                (&mut t_rest[at..at + $m])
                                    .try_into()
                                    .expect("length checked"),
                                &mut tw,
                            );
                            at += $m;
                        }
                    };
                }
                group_of!(4);
                group_of!(2);
                group_of!(1);
                debug_assert_eq!(at, g_rest.len());
            }

            /// See `Hasher::garble_run_3h`, MITCCRH with session seed `seed`.
            #[target_feature(enable = $features)]
            #[allow(clippy::too_many_arguments)]
            pub(in crate::hash) fn garble_run_mi(
                seed: Block,
                f: &FusedLin,
                delta: Block,
                labels: &mut [Block],
                run: &[[u32; 3]],
                coins: &[u8],
                gate: u64,
                tables: &mut [u8],
            ) {
                assert!(labels.len().is_power_of_two());
                assert!(tables.len() == TB * run.len() && coins.len() == run.len());
                let mask = labels.len() - 1;
                let seed2 = _mm256_broadcastsi128_si256(load(&seed));
                let rr = _mm256_broadcastsi128_si256(load(&delta));
                let t = (3 * gate) as i64;
                let mut ctr = _mm256_set_epi64x(t + 1, 0, t, 0);
                let (tabs, _) = tables.as_chunks_mut::<TB>();
                let (gs, g_rest) = run.as_chunks::<$group_mi>();
                let (cs, c_rest) = coins.as_chunks::<$group_mi>();
                let (ts, t_rest) = tabs.as_chunks_mut::<$group_mi>();
                for ((g, c), t) in gs.iter().zip(cs).zip(ts) {
                    group_mi::<$group_mi, $keys_mi, $zkeys_mi>(
                        seed2, f, rr, labels, mask, g, c, t, &mut ctr,
                    );
                }
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal, $km:literal, $zm:literal) => {
                        if g_rest.len() - at >= $m {
                            group_mi::<$m, $km, $zm>(
                                seed2,
                                f,
                                rr,
                                labels,
                                mask,
                                g_rest[at..at + $m].try_into().expect("length checked"),
                                c_rest[at..at + $m].try_into().expect("length checked"),
                                (&mut t_rest[at..at + $m])
                                    .try_into()
                                    .expect("length checked"),
                                &mut ctr,
                            );
                            at += $m;
                        }
                    };
                }
                group_of!(4, 6, 3);
                group_of!(2, 3, 2);
                group_of!(1, 2, 1);
                debug_assert_eq!(at, g_rest.len());
            }

            // Evaluation: per gate the register `(Wa | Wb)` under the tweaks
            // `(3g | 3g + 1)`, and per two gates `(Wa ^ Wb | Wa' ^ Wb')` under
            // `(3g + 2 | 3g' + 2)`.

            /// One evaluated gate's output label from its active labels, its hashes
            /// `h = (hA | hB)`, its pair's `hp = (hX | hX')` (`lane` 0: this gate's is
            /// the low lane), and its table.
            #[target_feature(enable = $features)]
            #[inline]
            fn eval_finish(
                wa: &Block,
                wb: &Block,
                h: __m256i,
                hp: __m256i,
                lane: usize,
                t: &[u8; TB],
            ) -> __m128i {
                let (i, j) = ((wa.0 & 1) as usize, (wb.0 & 1) as usize);
                let mh = $lsbs(h) as usize;
                let hxb = ($lsbs(hp) as usize >> (1 + 2 * lane)) & 1;
                let z = usize::from(t[24]);
                // The index with `r_ij` from the control bits and colours alone
                // (a table), then the hash bits: `hbA_i` (lsb of `h`'s lane 1)
                // and `hbX` into `r1`, `hbB_j` (lane 3) and `hbX` into `r2`.
                let base = usize::from(FUSED_EVAL_IDX[((i | (j << 1)) << 5) | (z & 31)]);
                let x = base ^ ((mh & 2) << 1) ^ (mh & 8) ^ (hxb * 12);
                let e: &EvalEntry = &FUSED_EVAL[x & 15];
                // [lo hA, lo hB] ^ [lo hX, lo hX].
                let hab = _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b11_01_10_00>(h));
                let hx = if lane == 0 {
                    _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b00_00_00_00>(hp))
                } else {
                    _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b10_10_10_10>(hp))
                };
                let g01 = load_bytes(&t[..16]);
                let mut g2 = [0u8; 8];
                g2.copy_from_slice(&t[16..24]);
                let g2 = _mm_set1_epi64x(i64::from_le_bytes(g2));
                let mut c = _mm_xor_si128(_mm_xor_si128(hab, hx), _mm_and_si128(g01, ld2(&e.g01)));
                c = _mm_xor_si128(c, _mm_and_si128(g2, ld2(&e.g2)));
                let q = [
                    wa.0 as u64,
                    (wa.0 >> 64) as u64,
                    wb.0 as u64,
                    (wb.0 >> 64) as u64,
                ];
                for k in 0..4 {
                    c = _mm_xor_si128(
                        c,
                        _mm_and_si128(_mm_set1_epi64x(q[k] as i64), ld2(&e.mc[k])),
                    );
                }
                c
            }

            /// The data registers of `G` gates' evaluation: `(Wa | Wb)` of gate `i`
            /// at `i`, the pairs' `(Wa ^ Wb | Wa' ^ Wb')` at `G + i / 2`.
            #[target_feature(enable = $features)]
            #[inline]
            fn eval_data<const G: usize, const K: usize>(
                labels: &[Block],
                mask: usize,
                run: &[[u32; 3]; G],
            ) -> [__m256i; K] {
                const { assert!(K == G + G.div_ceil(2)) };
                let w: [__m256i; G] = core::array::from_fn(|i| {
                    let a = load(&labels[run[i][0] as usize & mask]);
                    let b = load(&labels[run[i][1] as usize & mask]);
                    _mm256_set_m128i(b, a)
                });
                let mut x = [_mm256_setzero_si256(); K];
                x[..G].copy_from_slice(&w);
                for i in (0..G).step_by(2) {
                    let j = (i + 1).min(G - 1);
                    // (Wa | Wb) ^ (Wb | Wa) has Wa ^ Wb in both lanes.
                    let xi = _mm256_xor_si256(w[i], _mm256_permute2x128_si256::<0x01>(w[i], w[i]));
                    let xj = _mm256_xor_si256(w[j], _mm256_permute2x128_si256::<0x01>(w[j], w[j]));
                    x[G + i / 2] = _mm256_blend_epi32::<0b1111_0000>(xi, xj);
                }
                x
            }

            /// Finishes `G` evaluated gates from their hashes `$h` (as
            /// [`eval_data`]). A macro, unrolled by hand: as an `#[inline]`
            /// function it stayed an out-of-line call with a rolled loop, a
            /// branch and a variable shift on the lane, and bounds checks on the
            /// labels (the mask not known there).
            macro_rules! eval_out {
                ($h:expr, $labels:expr, $mask:expr, $run:expr, $tables:expr) => {{
                    let (h, labels, mask, run, tables) = ($h, $labels, $mask, $run, $tables);
                    const { assert!(G <= 16) };
                    macro_rules! one {
                        ($i:literal) => {
                            if $i < G {
                                let wa = &labels[run[$i][0] as usize & mask];
                                let wb = &labels[run[$i][1] as usize & mask];
                                let c = eval_finish(
                                    wa,
                                    wb,
                                    h[$i],
                                    h[G + $i / 2],
                                    $i % 2,
                                    &tables[$i],
                                );
                                scatter(labels, mask, run[$i][2], c);
                            }
                        };
                    }
                    one!(0);
                    one!(1);
                    one!(2);
                    one!(3);
                    one!(4);
                    one!(5);
                    one!(6);
                    one!(7);
                    one!(8);
                    one!(9);
                    one!(10);
                    one!(11);
                    one!(12);
                    one!(13);
                    one!(14);
                    one!(15);
                }};
            }

            /// `G` fixed-key gates of an evaluation run; `tw` as in [`group_fk`].
            #[target_feature(enable = $features)]
            #[inline]
            fn eval_group_fk<const G: usize, const K: usize>(
                k: &[__m256i; 11],
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; G],
                tables: &[[u8; TB]; G],
                tw: &mut __m256i,
            ) {
                let three = _mm256_set_epi64x(0, 3, 0, 3);
                let x: [__m256i; K] = eval_data(labels, mask, run);
                let mut pre = [_mm256_setzero_si256(); K];
                for i in 0..G {
                    pre[i] = pre256(x[i], *tw);
                    if i % 2 == 0 {
                        // (3g + 2 | 3g' + 2) from (3g | 3g + 1).
                        let d = if i + 1 < G { 4 } else { 1 };
                        let t = _mm256_add_epi64(*tw, _mm256_set_epi64x(0, d, 0, 2));
                        pre[G + i / 2] = pre256(x[G + i / 2], t);
                    }
                    *tw = _mm256_add_epi64(*tw, three);
                }
                let h = mmo_n(k, &pre);
                eval_out!(&h, labels, mask, run, tables);
            }

            /// `G` MITCCRH gates of an evaluation run; `ctr` as in [`group_mi`].
            #[target_feature(enable = $features)]
            #[inline]
            fn eval_group_mi<const G: usize, const K: usize, const Z: usize>(
                seed2: __m256i,
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; G],
                tables: &[[u8; TB]; G],
                ctr: &mut __m256i,
            ) {
                let three = _mm256_set_epi64x(3, 0, 3, 0);
                let x: [__m256i; K] = eval_data(labels, mask, run);
                let mut keys = [_mm256_setzero_si256(); K];
                let mut c = *ctr;
                for i in 0..G {
                    keys[i] = _mm256_xor_si256(seed2, c);
                    if i % 2 == 0 {
                        let d = if i + 1 < G { 4 } else { 1 };
                        let cx = _mm256_add_epi64(c, _mm256_set_epi64x(d, 0, 2, 0));
                        keys[G + i / 2] = _mm256_xor_si256(seed2, cx);
                    }
                    c = _mm256_add_epi64(c, three);
                }
                *ctr = c;
                let xs: [[__m256i; 1]; K] = core::array::from_fn(|i| [x[i]]);
                let h2 = $mi_hash::<K, Z, 1>(keys, &xs);
                let h: [__m256i; K] = core::array::from_fn(|i| h2[i][0]);
                eval_out!(&h, labels, mask, run, tables);
            }

            /// See `Hasher::eval_run_3h`, fixed-key hash with round keys `rk`.
            #[target_feature(enable = $features)]
            pub(in crate::hash) fn eval_run(
                rk: &[[u8; 16]; 11],
                labels: &mut [Block],
                run: &[[u32; 3]],
                gate: u64,
                tables: &[u8],
            ) {
                assert!(labels.len().is_power_of_two() && tables.len() == TB * run.len());
                let mask = labels.len() - 1;
                let k = keys256(rk);
                let t = (3 * gate) as i64;
                let mut tw = _mm256_set_epi64x(0, t + 1, 0, t);
                let (tabs, _) = tables.as_chunks::<TB>();
                let (gs, g_rest) = run.as_chunks::<$egroup_fk>();
                let (ts, t_rest) = tabs.as_chunks::<$egroup_fk>();
                for (g, t) in gs.iter().zip(ts) {
                    eval_group_fk::<$egroup_fk, $ekeys_fk>(&k, labels, mask, g, t, &mut tw);
                }
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal, $km:literal) => {
                        if g_rest.len() - at >= $m {
                            eval_group_fk::<$m, $km>(
                                &k,
                                labels,
                                mask,
                                g_rest[at..at + $m].try_into().expect("length checked"),
                                (&t_rest[at..at + $m]).try_into().expect("length checked"),
                                &mut tw,
                            );
                            at += $m;
                        }
                    };
                }
                group_of!(4, 6);
                group_of!(2, 3);
                group_of!(1, 2);
                debug_assert_eq!(at, g_rest.len());
            }

            /// See `Hasher::eval_run_3h`, MITCCRH with session seed `seed`.
            #[target_feature(enable = $features)]
            pub(in crate::hash) fn eval_run_mi(
                seed: Block,
                labels: &mut [Block],
                run: &[[u32; 3]],
                gate: u64,
                tables: &[u8],
            ) {
                assert!(labels.len().is_power_of_two() && tables.len() == TB * run.len());
                let mask = labels.len() - 1;
                let seed2 = _mm256_broadcastsi128_si256(load(&seed));
                let t = (3 * gate) as i64;
                let mut ctr = _mm256_set_epi64x(t + 1, 0, t, 0);
                let (tabs, _) = tables.as_chunks::<TB>();
                let (gs, g_rest) = run.as_chunks::<$egroup_mi>();
                let (ts, t_rest) = tabs.as_chunks::<$egroup_mi>();
                for (g, t) in gs.iter().zip(ts) {
                    eval_group_mi::<$egroup_mi, $ekeys_mi, $ezkeys_mi>(
                        seed2, labels, mask, g, t, &mut ctr,
                    );
                }
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal, $km:literal, $zm:literal) => {
                        if g_rest.len() - at >= $m {
                            eval_group_mi::<$m, $km, $zm>(
                                seed2,
                                labels,
                                mask,
                                g_rest[at..at + $m].try_into().expect("length checked"),
                                (&t_rest[at..at + $m]).try_into().expect("length checked"),
                                &mut ctr,
                            );
                            at += $m;
                        }
                    };
                }
                group_of!(8, 12, 6);
                group_of!(4, 6, 3);
                group_of!(2, 3, 2);
                group_of!(1, 2, 1);
                debug_assert_eq!(at, g_rest.len());
            }
        }
    };
}

threehalves_kernels!(
    avx2,
    "aes,sse2,ssse3,avx2,vaes",
    lsbs_avx2,
    4,
    4,
    6,
    4,
    6,
    4,
    6,
    mmo_rekeyed_mixed,
    3,
    3
);
threehalves_kernels!(
    avx512,
    "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl",
    lsbs_avx512,
    4,
    4,
    6,
    4,
    6,
    8,
    12,
    mmo_rekeyed_mixed,
    3,
    6
);
// The MITCCRH hash on 512-bit registers (the gate logic as above): eight gates a group
// when garbling (six pairs of key registers), sixteen when evaluating (twelve).
threehalves_kernels!(
    zmm512,
    "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq",
    lsbs_avx512,
    4,
    8,
    12,
    4,
    6,
    16,
    24,
    mmo_rekeyed_pairs,
    6,
    12
);
