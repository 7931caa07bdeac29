//! The half-gates kernels on 512-bit registers (AVX-512F, BW and DQ with VAES), both
//! hashes: four blocks a register, the same tables and labels as the 256-bit kernels of
//! [`super`] (tests compare them); and the MITCCRH hash of the three-halves kernels' 256-bit
//! registers on 512-bit ones ([`mmo_rekeyed_pairs`]).
//!
//! Why a second width: on the Intel cores with AVX-512 (Sapphire/Emerald Rapids),
//! 256-bit shuffles and VAES each issue on two ports and 512-bit ones on one (the two low
//! ports fuse), so shuffles and AES rounds move the same bytes per cycle at either width;
//! but every other operation of a gate (XORs, selects, the key schedules' XORs) and the
//! front end see half the instructions, and those, not the AES units, bound the 256-bit
//! kernels. The MITCCRH rounds of sixteen gates' evaluation took 0.69 times as long at
//! 512 bits as at 256, garbling's 0.72 (a scratch harness of the two `mmo_rekeyed`
//! loops, `docs/gc-2pc.md`).
//!
//! Layout: data register `i` of a group holds gates `2i` and `2i + 1`,
//! `(A_2i | B_2i | A_2i+1 | B_2i+1)`, hashed under the tweaks `j0 + 4i + l` in lane `l`
//! (`2g` for `A` and `2g + 1` for `B`, `j0 = 2 g0` for the group's first gate `g0`); when
//! garbling, a second register `^ (R | R | R | R)` under the same tweaks. The two gates'
//! tables are 64 contiguous bytes `(TG | TE | TG' | TE')`: one load or store per register.
//! MITCCRH keys a lane by its tweak (one key register per data register); the fixed-key
//! hash puts the tweak into the pre-image's low half.

use super::*;

/// Transposes four registers as 4x4 matrices of 32-bit words in each 128-bit lane (as
/// [`super::transpose4`]).
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose4(r: [__m512i; 4]) -> [__m512i; 4] {
    let t0 = _mm512_unpacklo_epi32(r[0], r[1]);
    let t1 = _mm512_unpackhi_epi32(r[0], r[1]);
    let t2 = _mm512_unpacklo_epi32(r[2], r[3]);
    let t3 = _mm512_unpackhi_epi32(r[2], r[3]);
    [
        _mm512_unpacklo_epi64(t0, t2),
        _mm512_unpackhi_epi64(t0, t2),
        _mm512_unpacklo_epi64(t1, t3),
        _mm512_unpackhi_epi64(t1, t3),
    ]
}

/// [`super::expand_step_sliced`] for sixteen keys.
#[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
#[inline]
fn expand_step_sliced(w: &mut [__m512i; 4], rcon: i32) {
    // SAFETY: `SLICED_SUB_ROT` is 16 readable bytes; `loadu` has no alignment requirement.
    let sub_rot =
        _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(SLICED_SUB_ROT.as_ptr().cast()) });
    let p01 = _mm512_xor_si512(w[0], w[1]);
    let p012 = _mm512_xor_si512(p01, w[2]);
    let p0123 = _mm512_xor_si512(p012, w[3]);
    let t = _mm512_aesenclast_epi128(_mm512_shuffle_epi8(w[3], sub_rot), _mm512_set1_epi32(rcon));
    w[0] = _mm512_xor_si512(w[0], t);
    w[1] = _mm512_xor_si512(p01, t);
    w[2] = _mm512_xor_si512(p012, t);
    w[3] = _mm512_xor_si512(p0123, t);
}

/// Dword `4l + i` of a slice's tweak offsets: the key in lane `l` of the slice's key
/// register `i` has tweak `j + 4i + l` (`j` the slice's first).
const TWEAK_OFFSETS: [i32; 16] = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15];

/// The session seed's words, each in all sixteen dwords, and the seed in every lane.
#[derive(Clone, Copy)]
struct Seed {
    words: [__m512i; 4],
    lanes: __m512i,
}

#[target_feature(enable = "avx512f")]
#[inline]
fn seed_of(seed: Block) -> Seed {
    let b = seed.0;
    Seed {
        words: core::array::from_fn(|j| _mm512_set1_epi32((b >> (32 * j)) as u32 as i32)),
        lanes: _mm512_broadcast_i32x4(load(&seed)),
    }
}

/// The keys of `M` key registers from tweak `j0` on (`k(t) = seed ^ (t << 64)`, as
/// [`super::mi_key`]): in natural form (register `i`, lane `l`: tweak `j0 + 4i + l`), the
/// round-0 keys, and word-sliced by fours (see [`TWEAK_OFFSETS`]), built from the tweaks
/// directly rather than transposed.
#[target_feature(enable = "avx512f")]
#[inline]
fn group_keys<const M: usize>(s: &Seed, j0: u64) -> ([__m512i; M], [__m512i; M]) {
    // Qword 2l + 1 of register i: j0 + 4i + l.
    let ctr = _mm512_add_epi64(
        _mm512_maskz_set1_epi64(0b1010_1010, j0 as i64),
        _mm512_set_epi64(3, 0, 2, 0, 1, 0, 0, 0),
    );
    let natural = core::array::from_fn(|i| {
        let c = _mm512_add_epi64(ctr, _mm512_maskz_set1_epi64(0b1010_1010, 4 * i as i64));
        _mm512_xor_si512(s.lanes, c)
    });
    // SAFETY: `TWEAK_OFFSETS` is 64 readable bytes; `loadu` has no alignment requirement.
    let offsets = unsafe { _mm512_loadu_si512(TWEAK_OFFSETS.as_ptr().cast()) };
    let mut sliced = [_mm512_setzero_si512(); M];
    for q in (0..M).step_by(4) {
        let j = j0.wrapping_add(4 * q as u64);
        let lo = _mm512_add_epi32(_mm512_set1_epi32(j as u32 as i32), offsets);
        // The low words wrapped where they fell below their offset: carry into the high.
        let carry = _mm512_cmplt_epu32_mask(lo, offsets);
        let hi0 = _mm512_set1_epi32((j >> 32) as u32 as i32);
        let hi = _mm512_mask_add_epi32(hi0, carry, hi0, _mm512_set1_epi32(1));
        sliced[q] = s.words[0];
        sliced[q + 1] = s.words[1];
        sliced[q + 2] = _mm512_xor_si512(s.words[2], lo);
        sliced[q + 3] = _mm512_xor_si512(s.words[3], hi);
    }
    (natural, sliced)
}

/// [`super::expand_step2`] for four keys, one a lane.
#[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
#[inline]
fn expand_step4(k: __m512i, rcon: i32) -> __m512i {
    let aux = _mm512_aesenclast_epi128(
        _mm512_shuffle_epi8(k, _mm512_set1_epi32(ROT_WORD)),
        _mm512_set1_epi32(rcon),
    );
    let k = _mm512_xor_si512(k, _mm512_bslli_epi128::<4>(k));
    let k = _mm512_xor_si512(k, _mm512_bslli_epi128::<8>(k));
    _mm512_xor_si512(k, aux)
}

/// `AES_K(x) ^ x` for `M` 256-bit key registers (two keys each) and `P` data registers per
/// key, on 512-bit registers: registers `2i` and `2i + 1` paired into one (`Z` pairs, the
/// last one's high half unused when `M` is odd), the first `4 floor(Z / 4)` pairs' key
/// schedules word-sliced by fours, the rest one register at a time. For the three-halves
/// kernels ([`super::threehalves`]), whose gate logic stays on 256-bit registers: the
/// rounds and key schedules are most of a gate's operations, and at 512 bits the XORs
/// among them take half the instructions (module docs).
#[target_feature(enable = "aes,avx2,avx512f,avx512bw,vaes")]
#[inline]
pub(super) fn mmo_rekeyed_pairs<const M: usize, const Z: usize, const P: usize>(
    k: [__m256i; M],
    x: &[[__m256i; P]; M],
) -> [[__m256i; P]; M] {
    const { assert!(Z == M.div_ceil(2)) };
    // Registers `2i` and `2i + 1` as one (the high half zero past the last).
    let pair = |a: __m256i, b: Option<&__m256i>| match b {
        Some(b) => _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), *b),
        None => _mm512_zextsi256_si512(a),
    };
    let kz: [__m512i; Z] = core::array::from_fn(|i| pair(k[2 * i], k.get(2 * i + 1)));
    let xz: [[__m512i; P]; Z] = core::array::from_fn(|i| {
        core::array::from_fn(|p| pair(x[2 * i][p], x.get(2 * i + 1).map(|y| &y[p])))
    });
    // The rounds of the 256-bit three-halves hash (`mixed_rekeyed_mmo!`), each round's key
    // steps all before its AES rounds, not `mmo_rekeyed`'s: with this kernel calling a
    // `mmo_rekeyed` that took the rest one register at a time, three-halves read 2.18 and
    // 2.24 times half-gates (medians of nine alternated pairs, garble and evaluate) against
    // 2.10 and 2.09 (2026-11-29, 05:25 UTC).
    let v = mixed_rekeyed_mmo!(
        kz,
        &xz,
        Z,
        P,
        expand_step4,
        _mm512_xor_si512,
        _mm512_aesenc_epi128,
        _mm512_aesenclast_epi128
    );
    core::array::from_fn(|i| {
        core::array::from_fn(|p| {
            let z = v[i / 2][p];
            if i % 2 == 0 {
                _mm512_castsi512_si256(z)
            } else {
                _mm512_extracti64x4_epi64::<1>(z)
            }
        })
    })
}

/// `AES_K(x) ^ x` for `M` key registers (four keys each) and `P` data registers per key,
/// the key schedules made round by round in word-sliced form, four registers at a time.
#[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
#[inline]
fn mmo_rekeyed<const M: usize, const P: usize>(
    k: &[__m512i; M],
    mut w: [__m512i; M],
    x: &[[__m512i; P]; M],
) -> [[__m512i; P]; M] {
    const { assert!(M.is_multiple_of(4)) };
    let mut v: [[__m512i; P]; M] =
        core::array::from_fn(|i| core::array::from_fn(|p| _mm512_xor_si512(x[i][p], k[i])));
    rekeyed_rounds!(|rc, last| {
        for s in (0..M).step_by(4) {
            let mut ws = [w[s], w[s + 1], w[s + 2], w[s + 3]];
            expand_step_sliced(&mut ws, rc);
            w[s..s + 4].copy_from_slice(&ws);
            for (i, key) in transpose4(ws).into_iter().enumerate() {
                for p in 0..P {
                    let y = &mut v[s + i][p];
                    *y = if last {
                        _mm512_xor_si512(_mm512_aesenclast_epi128(*y, key), x[s + i][p])
                    } else {
                        _mm512_aesenc_epi128(*y, key)
                    };
                }
            }
        }
    });
    v
}

/// `(A | B | A' | B')` of gates `ga`, `gb`.
#[target_feature(enable = "avx512f")]
#[inline]
fn gather2(labels: &[Block], mask: usize, ga: &[u32; 3], gb: &[u32; 3]) -> __m512i {
    let v = _mm512_castsi128_si512(gather(labels, mask, ga[0]));
    let v = _mm512_inserti32x4::<1>(v, gather(labels, mask, ga[1]));
    let v = _mm512_inserti32x4::<2>(v, gather(labels, mask, gb[0]));
    _mm512_inserti32x4::<3>(v, gather(labels, mask, gb[1]))
}

/// Each lane's lsb as a mask of both its qwords: the colour bits of `(A | B | A' | B')`.
/// (A test of the low qwords and the mask spread by a shift and an OR was 2-6% slower per
/// AND, `docs/gc-2pc.md`.)
#[target_feature(enable = "avx512f,avx512dq")]
#[inline]
fn colours(x: __m512i) -> __mmask8 {
    _mm512_test_epi64_mask(_mm512_unpacklo_epi64(x, x), _mm512_set1_epi64(1))
}

/// The two 128-bit halves of each 256-bit half swapped: `(B | A | B' | A')`.
#[target_feature(enable = "avx512f")]
#[inline]
fn swap_pairs(x: __m512i) -> __m512i {
    _mm512_shuffle_i32x4::<0b10_11_00_01>(x, x)
}

/// Lanes 1 and 3 (qwords 2, 3, 6, 7).
const ODD_LANES: __mmask8 = 0b1100_1100;

/// Stores the output labels of gates `ga`, `gb` from `w = (Wg | We | Wg' | We')`.
#[target_feature(enable = "avx512f")]
#[inline]
fn scatter2(labels: &mut [Block], mask: usize, ga: &[u32; 3], gb: &[u32; 3], w: __m512i) {
    let o = _mm512_xor_si512(w, swap_pairs(w));
    scatter(labels, mask, ga[2], _mm512_castsi512_si128(o));
    scatter(labels, mask, gb[2], _mm512_extracti32x4_epi32::<2>(o));
}

/// Gate pair `i` of a garbling group from its hashes `h0 = H(A0 | B0 | A0' | B0')` and
/// `h1 = H(A1 | ...)` and its zero labels `ab`: stores the two tables at `tables[64 i..]`
/// and the two output zero labels. `dd` is `(R | 0 | R | 0)`.
#[target_feature(enable = "avx512f,avx512dq")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn garble_pair(
    h0: __m512i,
    h1: __m512i,
    ab: __m512i,
    dd: __m512i,
    labels: &mut [Block],
    mask: usize,
    gates: &[[u32; 3]],
    tables: &mut [u8],
    i: usize,
) {
    assert!(tables.len() >= 64 * i + 64 && gates.len() >= 2 * i + 2);
    let ba = swap_pairs(ab);
    // (TG | TE): TG = hA0 ^ hA1 ^ (R if pb), TE = hB0 ^ hB1 ^ A.
    let y = _mm512_mask_mov_epi64(_mm512_maskz_mov_epi64(colours(ba), dd), ODD_LANES, ba);
    let s01 = _mm512_xor_si512(h0, h1);
    let t = _mm512_xor_si512(s01, y);
    // SAFETY: `64 i + 64 <= tables.len()` (checked): 64 writable bytes; `storeu` has no
    // alignment requirement.
    unsafe { _mm512_storeu_si512(tables.as_mut_ptr().add(64 * i).cast(), t) };
    // (WG0 | WE0): WG0 = hA0 ^ (TG if pa), WE0 = hB0 ^ (hB0 ^ hB1 if pb).
    let sel = _mm512_mask_mov_epi64(t, ODD_LANES, s01);
    let w0 = _mm512_mask_xor_epi64(h0, colours(ab), h0, sel);
    scatter2(labels, mask, &gates[2 * i], &gates[2 * i + 1], w0);
}

/// Gate pair `i` of an evaluation group from its hashes `h = H(Wa | Wb | Wa' | Wb')`, its
/// active labels `ab` and the tables at `tables[64 i..]`: stores the output labels.
#[target_feature(enable = "avx512f,avx512dq")]
#[inline]
fn eval_pair(
    h: __m512i,
    ab: __m512i,
    labels: &mut [Block],
    mask: usize,
    gates: &[[u32; 3]],
    tables: &[u8],
    i: usize,
) {
    assert!(tables.len() >= 64 * i + 64 && gates.len() >= 2 * i + 2);
    // SAFETY: `64 i + 64 <= tables.len()` (checked): 64 readable bytes.
    let t = unsafe { _mm512_loadu_si512(tables.as_ptr().add(64 * i).cast()) };
    // (TG | TE ^ A): WG = hA ^ (TG if pa), WE = hB ^ (TE ^ A if pb).
    let sel = _mm512_mask_xor_epi64(t, ODD_LANES, t, swap_pairs(ab));
    let w = _mm512_mask_xor_epi64(h, colours(ab), h, sel);
    scatter2(labels, mask, &gates[2 * i], &gates[2 * i + 1], w);
}

/// MITCCRH garbling of the `2M` gates of `run` (their tables into `tables`, `64 M`
/// bytes), tweaks from `j0` on.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn garble_group_mi<const M: usize>(
    s: &Seed,
    rr: __m512i,
    dd: __m512i,
    labels: &mut [Block],
    mask: usize,
    run: &[[u32; 3]],
    tables: &mut [u8],
    j0: u64,
) {
    assert!(run.len() == 2 * M && tables.len() == 64 * M);
    let (k, w) = group_keys::<M>(s, j0);
    let x: [[__m512i; 2]; M] = core::array::from_fn(|i| {
        let ab = gather2(labels, mask, &run[2 * i], &run[2 * i + 1]);
        [ab, _mm512_xor_si512(ab, rr)]
    });
    let h = mmo_rekeyed(&k, w, &x);
    for i in 0..M {
        garble_pair(h[i][0], h[i][1], x[i][0], dd, labels, mask, run, tables, i);
    }
}

/// MITCCRH evaluation of the `2M` gates of `run` with their tables (`64 M` bytes),
/// tweaks from `j0` on.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
#[inline]
fn eval_group_mi<const M: usize>(
    s: &Seed,
    labels: &mut [Block],
    mask: usize,
    run: &[[u32; 3]],
    tables: &[u8],
    j0: u64,
) {
    assert!(run.len() == 2 * M && tables.len() == 64 * M);
    let (k, w) = group_keys::<M>(s, j0);
    let x: [[__m512i; 1]; M] =
        core::array::from_fn(|i| [gather2(labels, mask, &run[2 * i], &run[2 * i + 1])]);
    let h = mmo_rekeyed(&k, w, &x);
    for i in 0..M {
        eval_pair(h[i][0], x[i][0], labels, mask, run, tables, i);
    }
}

/// The orthomorphism `sigma` in every lane (as [`super::sigma256`]), XOR `t` and `k0`:
/// a pre-image whitened by the first round key (see [`mmo_fixed`]).
#[target_feature(enable = "avx512f")]
#[inline]
fn pre(x: __m512i, t: __m512i, k0: __m512i) -> __m512i {
    // The halves swapped, XOR the high half in place.
    let st = _mm512_ternarylogic_epi64::<0x96>(_mm512_shuffle_epi32::<0b01_00_11_10>(x), t, k0);
    _mm512_mask_xor_epi64(st, ODD_QWORDS, st, x)
}

/// The high qword of every lane.
const ODD_QWORDS: __mmask8 = 0b1010_1010;

/// `pi(x) ^ x` for `N` registers of whitened pre-images `w = x ^ k0` under the fixed key
/// (see [`keys512`]). The last round is keyed `k10 ^ k0`, which puts `k0` back into
/// `pi(x)`, so that `^ w` is `^ x`: no XOR to whiten, none to recover `x`.
#[target_feature(enable = "aes,avx512f,vaes")]
#[inline]
fn mmo_fixed<const N: usize>(k: &[__m512i; 12], w: &[__m512i; N]) -> [__m512i; N] {
    let mut v = *w;
    for key in &k[1..10] {
        for x in v.iter_mut() {
            *x = _mm512_aesenc_epi128(*x, *key);
        }
    }
    core::array::from_fn(|i| _mm512_xor_si512(_mm512_aesenclast_epi128(v[i], k[11]), w[i]))
}

/// The fixed key's round keys in every lane, and after them `k10 ^ k0` (for
/// [`mmo_fixed`]).
#[target_feature(enable = "avx512f")]
#[inline]
fn keys512(rk: &[[u8; 16]; 11]) -> [__m512i; 12] {
    let k: [__m512i; 11] = core::array::from_fn(|i| _mm512_broadcast_i32x4(load_bytes(&rk[i])));
    core::array::from_fn(|i| {
        if i < 11 {
            k[i]
        } else {
            _mm512_xor_si512(k[10], k[0])
        }
    })
}

/// The tweaks of a fixed-key group's first data register, `j0 + l` in lane `l`'s low
/// qword.
#[target_feature(enable = "avx512f")]
#[inline]
fn tweaks(j0: u64) -> __m512i {
    _mm512_add_epi64(
        _mm512_maskz_set1_epi64(!ODD_QWORDS, j0 as i64),
        _mm512_set_epi64(0, 3, 0, 2, 0, 1, 0, 0),
    )
}

/// The tweaks of data register `i` from the first register's `t0`: four more a register.
#[target_feature(enable = "avx512f")]
#[inline]
fn register_tweaks(t0: __m512i, i: usize) -> __m512i {
    _mm512_add_epi64(t0, _mm512_maskz_set1_epi64(!ODD_QWORDS, 4 * i as i64))
}

/// Fixed-key garbling of the `2M` gates of `run`, tweaks from `j0` on; `sr` is
/// `sigma(R | R | R | R)` (the pre-images of the one labels by linearity).
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn garble_group_fk<const M: usize>(
    k: &[__m512i; 12],
    sr: __m512i,
    dd: __m512i,
    labels: &mut [Block],
    mask: usize,
    run: &[[u32; 3]],
    tables: &mut [u8],
    j0: u64,
) {
    assert!(run.len() == 2 * M && tables.len() == 64 * M);
    let t0 = tweaks(j0);
    let ab: [__m512i; M] =
        core::array::from_fn(|i| gather2(labels, mask, &run[2 * i], &run[2 * i + 1]));
    // A flat array of eight registers (at most four pairs): as `[[__m512i; 2]; M]`, LLVM
    // kept the blocks in memory (`docs/gc-2pc.md`).
    const { assert!(M <= 4) };
    let mut p = [_mm512_setzero_si512(); 8];
    for i in 0..M {
        p[2 * i] = pre(ab[i], register_tweaks(t0, i), k[0]);
        p[2 * i + 1] = _mm512_xor_si512(p[2 * i], sr);
    }
    let h = mmo_fixed(k, &p);
    for i in 0..M {
        garble_pair(
            h[2 * i],
            h[2 * i + 1],
            ab[i],
            dd,
            labels,
            mask,
            run,
            tables,
            i,
        );
    }
}

/// Fixed-key evaluation of the `2M` gates of `run`, tweaks from `j0` on.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
#[inline]
fn eval_group_fk<const M: usize>(
    k: &[__m512i; 12],
    labels: &mut [Block],
    mask: usize,
    run: &[[u32; 3]],
    tables: &[u8],
    j0: u64,
) {
    assert!(run.len() == 2 * M && tables.len() == 64 * M);
    let t0 = tweaks(j0);
    let ab: [__m512i; M] =
        core::array::from_fn(|i| gather2(labels, mask, &run[2 * i], &run[2 * i + 1]));
    let p: [__m512i; M] = core::array::from_fn(|i| pre(ab[i], register_tweaks(t0, i), k[0]));
    let h = mmo_fixed(k, &p);
    for i in 0..M {
        eval_pair(h[i], ab[i], labels, mask, run, tables, i);
    }
}

/// Key registers (gate pairs) a MITCCRH group when garbling.
const GARBLE_KEYS: usize = 8;
/// Key registers a MITCCRH group when evaluating.
const EVAL_KEYS: usize = 8;
/// Gate pairs a fixed-key group when garbling (two data registers each).
const GARBLE_PAIRS_FK: usize = 4;
/// Gate pairs a fixed-key group when evaluating.
const EVAL_PAIRS_FK: usize = 8;

/// A run in groups of `2 * $pairs` gates through `$group`, and the rest of it through the
/// 256-bit kernel `$rest` of the same hash. `$chunks` and `$borrow` say how the tables
/// are borrowed (written when garbling, read when evaluating); `$group` sees a group's
/// gates, tables and first tweak, `$rest` the rest's gates, tables and first gate.
macro_rules! by_groups {
    (
        $chunks:ident, ($($borrow:tt)+), $pairs:expr, $run:ident, $tables:ident, $gate:ident,
        |$r:ident, $t:ident, $j0:ident| $group:expr,
        |$rest_run:ident, $rest_tables:ident, $rest_gate:ident| $rest:expr
    ) => {{
        const G: usize = 2 * $pairs;
        let full = $run.len() / G * G;
        for (n, ($r, $t)) in $run[..full]
            .chunks_exact(G)
            .zip($tables[..32 * full].$chunks(32 * G))
            .enumerate()
        {
            let $j0 = ($gate + (n * G) as u64) << 1;
            $group;
        }
        let ($rest_run, $rest_tables, $rest_gate) =
            (&$run[full..], $($borrow)+ $tables[32 * full..], $gate + full as u64);
        $rest;
    }};
}

/// [`super::avx512::garble_run`] at 512 bits: groups of eight gates, the rest of the run
/// through the 256-bit kernels.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
pub(in crate::hash) fn garble_run(
    rk: &[[u8; 16]; 11],
    delta: Block,
    labels: &mut [Block],
    run: &[[u32; 3]],
    gate: u64,
    tables: &mut [u8],
) {
    align_frame!();
    assert!(labels.len().is_power_of_two() && tables.len() == 32 * run.len());
    let mask = labels.len() - 1;
    let k = keys512(rk);
    let rr = _mm512_broadcast_i32x4(load(&delta));
    let sr = pre(rr, _mm512_setzero_si512(), _mm512_setzero_si512());
    let dd = _mm512_maskz_mov_epi64(!ODD_LANES, rr);
    by_groups!(
        chunks_exact_mut, (&mut), GARBLE_PAIRS_FK, run, tables, gate,
        |r, t, j0| garble_group_fk::<GARBLE_PAIRS_FK>(&k, sr, dd, labels, mask, r, t, j0),
        |r, t, g| super::avx512::garble_run(rk, delta, labels, r, g, t)
    );
}

/// [`super::avx512::eval_run`] at 512 bits: groups of sixteen gates.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
pub(in crate::hash) fn eval_run(
    rk: &[[u8; 16]; 11],
    labels: &mut [Block],
    run: &[[u32; 3]],
    gate: u64,
    tables: &[u8],
) {
    align_frame!();
    assert!(labels.len().is_power_of_two() && tables.len() == 32 * run.len());
    let mask = labels.len() - 1;
    let k = keys512(rk);
    by_groups!(
        chunks_exact, (&), EVAL_PAIRS_FK, run, tables, gate,
        |r, t, j0| eval_group_fk::<EVAL_PAIRS_FK>(&k, labels, mask, r, t, j0),
        |r, t, g| super::avx512::eval_run(rk, labels, r, g, t)
    );
}

/// [`super::avx512::garble_run_mi`] at 512 bits: groups of sixteen gates.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
pub(in crate::hash) fn garble_run_mi(
    seed: Block,
    delta: Block,
    labels: &mut [Block],
    run: &[[u32; 3]],
    gate: u64,
    tables: &mut [u8],
) {
    align_frame!();
    assert!(labels.len().is_power_of_two() && tables.len() == 32 * run.len());
    let mask = labels.len() - 1;
    let s = seed_of(seed);
    let rr = _mm512_broadcast_i32x4(load(&delta));
    // (R | 0 | R | 0): TG's term.
    let dd = _mm512_maskz_mov_epi64(!ODD_LANES, rr);
    by_groups!(
        chunks_exact_mut, (&mut), GARBLE_KEYS, run, tables, gate,
        |r, t, j0| garble_group_mi::<GARBLE_KEYS>(&s, rr, dd, labels, mask, r, t, j0),
        |r, t, g| super::avx512::garble_run_mi(seed, delta, labels, r, g, t)
    );
}

/// [`super::avx512::eval_run_mi`] at 512 bits: groups of sixteen gates.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
pub(in crate::hash) fn eval_run_mi(
    seed: Block,
    labels: &mut [Block],
    run: &[[u32; 3]],
    gate: u64,
    tables: &[u8],
) {
    align_frame!();
    assert!(labels.len().is_power_of_two() && tables.len() == 32 * run.len());
    let mask = labels.len() - 1;
    let s = seed_of(seed);
    by_groups!(
        chunks_exact, (&), EVAL_KEYS, run, tables, gate,
        |r, t, j0| eval_group_mi::<EVAL_KEYS>(&s, labels, mask, r, t, j0),
        |r, t, g| super::avx512::eval_run_mi(seed, labels, r, g, t)
    );
}

/// Key registers a group of [`mitccrh_consecutive`]: 16 tweaks. Not the half-gates
/// kernels' eight: with a second caller of `mmo_rekeyed::<8, _>` LLVM stopped inlining it
/// into those kernels, and the Garble stage of an AES-128 bulk session took 16-28% longer
/// (three alternated pairs, `docs/gc-2pc.md`).
const RUN_KEYS: usize = 4;

/// Blocks of `xs` (and, with `P = 2`, of `ys`) a call of [`consecutive_groups`] hashes.
const RUN_BLOCKS: usize = 4 * RUN_KEYS;

/// The whole groups of [`mitccrh_consecutive`]: `xs[i]` under tweak `(hi, lo + i)` and, with
/// `P = 2`, `ys[i] = H(xs[i] ^ offset)` under the same tweak; returns how many blocks it did
/// (a multiple of [`RUN_BLOCKS`]).
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
#[inline]
fn consecutive_groups<const P: usize>(
    seed: Block,
    (hi, lo): (u64, u64),
    xs: &mut [Block],
    offset: Block,
    ys: &mut [Block],
) -> usize {
    // k(t) = seed ^ swap(t): the tweak's high half goes into the seed, its low half is
    // the counter of `group_keys`.
    let s = seed_of(Block(seed.0 ^ u128::from(hi)));
    let off = _mm512_broadcast_i32x4(load(&offset));
    let full = xs.len() / RUN_BLOCKS * RUN_BLOCKS;
    for (n, c) in xs[..full].chunks_exact_mut(RUN_BLOCKS).enumerate() {
        let (k, w) = group_keys::<RUN_KEYS>(&s, lo.wrapping_add((n * RUN_BLOCKS) as u64));
        let x: [[__m512i; P]; RUN_KEYS] = core::array::from_fn(|i| {
            // SAFETY: `c` is `RUN_BLOCKS` blocks long: blocks 4i..4i + 4 are 64 readable
            // bytes; `loadu` has no alignment requirement.
            let v = unsafe { _mm512_loadu_si512(c.as_ptr().add(4 * i).cast()) };
            core::array::from_fn(|p| if p == 0 { v } else { _mm512_xor_si512(v, off) })
        });
        let h = mmo_rekeyed(&k, w, &x);
        for (i, hv) in h.iter().enumerate() {
            // SAFETY: as above, 64 writable bytes.
            unsafe { _mm512_storeu_si512(c.as_mut_ptr().add(4 * i).cast(), hv[0]) };
            if P == 2 {
                let y = &mut ys[n * RUN_BLOCKS + 4 * i..n * RUN_BLOCKS + 4 * i + 4];
                // SAFETY: `y` is 4 blocks, 64 writable bytes.
                unsafe { _mm512_storeu_si512(y.as_mut_ptr().cast(), hv[P - 1]) };
            }
        }
    }
    full
}

/// MITCCRH under consecutive tweaks, the whole groups of sixteen of a run: `xs[i] =
/// H(xs[i], t0 + i)` and, when `pair` is `(offset, ys)`, `ys[i] = H(xs[i] ^ offset, t0 + i)`
/// from the same key schedule (the OT sender's two hashes of a row), their keys made
/// together as a half-gates group's. Returns how many blocks it did (a multiple of
/// sixteen); the caller hashes the rest. The low half of `t0` plus `xs.len()` must not
/// pass 2^64 (the caller checks), nor may `ys` be shorter than `xs`.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl,avx512bw,avx512dq")]
pub(in crate::hash) fn mitccrh_consecutive(
    seed: Block,
    t0: Block,
    xs: &mut [Block],
    pair: Option<(Block, &mut [Block])>,
) -> usize {
    align_frame!();
    let (hi, lo) = ((t0.0 >> 64) as u64, t0.0 as u64);
    assert!(
        lo.checked_add(xs.len() as u64).is_some(),
        "tweaks past 2^64"
    );
    match pair {
        None => consecutive_groups::<1>(seed, (hi, lo), xs, Block::ZERO, &mut []),
        Some((offset, ys)) => {
            let ys = &mut ys[..xs.len()];
            consecutive_groups::<2>(seed, (hi, lo), xs, offset, ys)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of [`group_keys`] as bytes: natural form, and the sliced form transposed
    /// back, register by register.
    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    fn keys_of(seed: Block, j0: u64) -> [[u128; 4]; 8] {
        let (natural, sliced) = group_keys::<8>(&seed_of(seed), j0);
        let mut from_sliced = sliced;
        for q in (0..8).step_by(4) {
            let t = transpose4([sliced[q], sliced[q + 1], sliced[q + 2], sliced[q + 3]]);
            from_sliced[q..q + 4].copy_from_slice(&t);
        }
        let bytes = |v: __m512i| {
            let mut o = [0u128; 4];
            // SAFETY: `o` is 64 writable bytes; `storeu` has no alignment requirement.
            unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), v) };
            o
        };
        let keys: [[u128; 4]; 8] = core::array::from_fn(|i| bytes(natural[i]));
        for i in 0..8 {
            assert_eq!(
                bytes(from_sliced[i]),
                keys[i],
                "sliced register {i}, j0 {j0:#x}"
            );
        }
        keys
    }

    /// Lane `l` of key register `i` holds the key of tweak `j0 + 4i + l`, `seed ^ (t <<
    /// 64)`, in both forms, also where the tweaks' low 32 bits wrap within a group.
    #[test]
    fn group_keys_are_the_tweaks_keys_across_a_carry() {
        if !crate::hash::hasher::zmm_available() {
            eprintln!("skipped: no AVX-512BW/DQ with VAES on this CPU");
            return;
        }
        let seed = Block(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        for j0 in [0, 2 * 12_345, (1 << 32) - 6, (1 << 33) - 20, (1 << 40) - 2] {
            // SAFETY: the features were detected above.
            let keys = unsafe { keys_of(seed, j0) };
            for (i, reg) in keys.iter().enumerate() {
                for (l, &k) in reg.iter().enumerate() {
                    let t = j0 + 4 * i as u64 + l as u64;
                    assert_eq!(
                        k,
                        seed.0 ^ (u128::from(t) << 64),
                        "j0 {j0:#x}, key {i}, lane {l}"
                    );
                }
            }
        }
    }
}
