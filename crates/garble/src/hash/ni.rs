//! The AES-NI backend (x86-64): AES-128 and the hash with eight blocks in
//! flight, the same with 256-bit VAES (sixteen), and the fused half-gates
//! kernels that keep a batch of AND gates in vector registers from the label
//! gather to the table store.
//!
//! Every function here has `#[target_feature]`; callers check the features
//! at run time (see [`super::Aes128`]) before the `unsafe` call.

use super::Block;
use core::arch::x86_64::*;

/// The ten rounds of the MITCCRH kernels' rekeyed AES written out, `$body` once per round
/// with `$rc` its key-schedule constant and `$last` whether it is the last round (both
/// constants where each copy is compiled). Rolled, the loop kept a branch for the last
/// round and LLVM spilled and reloaded data registers every round (AVX2 garbling
/// 17.1-18.0 -> 14.7-15.3 ns per AND, `docs/gc-2pc.md`).
macro_rules! rekeyed_rounds {
    (|$rc:ident, $last:ident| $body:block) => {
        rekeyed_rounds!(@ $rc $last $body;
            (RCON[0], false) (RCON[1], false) (RCON[2], false) (RCON[3], false)
            (RCON[4], false) (RCON[5], false) (RCON[6], false) (RCON[7], false)
            (RCON[8], false) (RCON[9], true));
    };
    (@ $rc:ident $last:ident $body:block; $(($r:expr, $l:expr))*) => {
        $({
            let $rc: i32 = $r;
            let $last: bool = $l;
            $body
        })*
    };
}

/// `AES_K(x) ^ x` for `$n` key registers `$k` and `$p` data registers per key `$x` (an
/// array of arrays), with the key schedules of the first `4 floor($n / 4)` registers
/// word-sliced by fours (`expand_step_sliced` and `transpose4` where it expands) and the
/// rest one register at a time (`$step`), each round's key steps before its AES rounds: the
/// MITCCRH hash of the three-halves kernels, at 256 bits
/// (`threehalves::mmo_rekeyed_mixed`) and at 512 (`zmm::mmo_rekeyed_pairs`), `$xor`,
/// `$enc` and `$enclast` the width's intrinsics.
macro_rules! mixed_rekeyed_mmo {
    ($k:expr, $x:expr, $n:expr, $p:expr, $step:ident, $xor:ident, $enc:ident, $enclast:ident) => {{
        let (k, x) = ($k, $x);
        let s4 = $n / 4 * 4;
        let mut v: [[_; $p]; $n] =
            core::array::from_fn(|i| core::array::from_fn(|p| $xor(x[i][p], k[i])));
        let mut w = k;
        for s in (0..s4).step_by(4) {
            let t = transpose4([w[s], w[s + 1], w[s + 2], w[s + 3]]);
            w[s..s + 4].copy_from_slice(&t);
        }
        rekeyed_rounds!(|rc, last| {
            let mut rk = w;
            for s in (0..s4).step_by(4) {
                let mut ws = [w[s], w[s + 1], w[s + 2], w[s + 3]];
                expand_step_sliced(&mut ws, rc);
                w[s..s + 4].copy_from_slice(&ws);
                rk[s..s + 4].copy_from_slice(&transpose4(ws));
            }
            for i in s4..$n {
                w[i] = $step(w[i], rc);
                rk[i] = w[i];
            }
            for i in 0..$n {
                for p in 0..$p {
                    v[i][p] = if last {
                        $xor($enclast(v[i][p], rk[i]), x[i][p])
                    } else {
                        $enc(v[i][p], rk[i])
                    };
                }
            }
        });
        v
    }};
}

/// A 64-byte-aligned local for [`align_frame!`].
#[repr(C, align(64))]
struct Align64([u8; 64]);

/// Realigns the calling kernel's stack frame to 64 bytes. A kernel that keeps more data
/// than registers spills vectors to its frame, which Rust only keeps 16-byte aligned: a
/// 512-bit spill slot then straddles two cache lines on every access, and the slot that
/// straddles a page boundary costs far more (the MITCCRH garbling kernel had a fifth of
/// its samples on two such spills in an Ed25519 session, `docs/gc-2pc.md`). With one
/// 64-byte-aligned local in the frame, LLVM realigns it once at entry and gives the spills
/// aligned slots. Costs one 64-byte store per call and the frame pointer's register, which
/// the three-halves MITCCRH kernels cannot spare (they spilled more and garbled slower with
/// it), so only the half-gates run kernels take it.
macro_rules! align_frame {
    () => {
        let _aligned = core::hint::black_box($crate::hash::ni::Align64([0; 64]));
    };
}

pub(super) mod threehalves;
pub(super) mod zmm;

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
            pin(&mut v);
        }
        for (i, x) in v.iter().enumerate() {
            let e = _mm256_aesenclast_epi128(*x, k[10]);
            store2(&mut c[i], _mm256_xor_si256(e, pre[i]));
        }
    }
    tccr(rk, tail, &tweaks[n16..]);
}

/// Pins `v` in vector registers at this point: every value is computed before any
/// instruction after the call uses one of them. It emits no instruction.
///
/// With AVX2's sixteen vector registers LLVM's scheduler trades parallelism for
/// registers. A loop of rounds over eight independent registers (round-major: eight
/// AESENCs in flight, what two pipelined AES units need) came out as one register's
/// ten rounds after the other's, and the out-of-order window overlapped only a few of
/// those chains; a pin after each round keeps the rounds together (`perf annotate` of
/// the fixed-key half-gates kernels on the AVX2-only VM, 2026-11-26: garbling
/// 9.3-11.4 ns per AND before, 7.5-8.0 after, minima of three alternated runs). The
/// three-halves kernels pin a group's twelve AES outputs for the same reason.
/// Twelve registers are pinned together; any other number in groups of eight, and a
/// shorter rest of four or two together, else one by one.
#[target_feature(enable = "avx")]
#[inline]
fn pin(v: &mut [__m256i]) {
    /// One empty `asm!` over the registers named.
    macro_rules! pin {
        ($($r:ident),+) => {
            // SAFETY: the template is empty (a comment naming the operands): no
            // instruction runs, no memory, stack or flag is touched; the operands only
            // tell the compiler that each value is needed, and may have changed, here.
            unsafe {
                core::arch::asm!(
                    concat!("/*", $(" {", stringify!($r), "}",)+ " */"),
                    $($r = inout(ymm_reg) *$r,)+
                    options(pure, nomem, nostack, preserves_flags),
                )
            }
        };
    }
    // Fixed-length patterns only: with a loop over the rest of the slice, the array
    // behind it stayed in memory (half-gates garbling 2.5 times slower).
    if let [a, b, c, d, e, f, g, h, i, j, k, l] = v {
        pin!(a, b, c, d, e, f, g, h, i, j, k, l);
        return;
    }
    for c in v.chunks_mut(8) {
        match c {
            [a, b, c, d, e, f, g, h] => pin!(a, b, c, d, e, f, g, h),
            [a, b, c, d] => pin!(a, b, c, d),
            [a, b] => pin!(a, b),
            _ => {
                for a in c {
                    pin!(a);
                }
            }
        }
    }
}

/// The 11 round keys in both 128-bit lanes.
#[target_feature(enable = "aes,sse2,avx2,vaes")]
#[inline]
fn keys256(rk: &[[u8; 16]; 11]) -> [__m256i; 11] {
    let k1 = load_keys(rk);
    core::array::from_fn(|i| _mm256_broadcastsi128_si256(k1[i]))
}

/// The orthomorphism `sigma` in both lanes. It is linear over XOR, so
/// `sigma(x ^ y) = sigma(x) ^ sigma(y)`.
#[target_feature(enable = "aes,sse2,avx2,vaes")]
#[inline]
fn sigma256(x: __m256i) -> __m256i {
    let hi_mask = _mm256_set_epi64x(-1, 0, -1, 0);
    _mm256_xor_si256(
        _mm256_shuffle_epi32::<0b01_00_11_10>(x),
        _mm256_and_si256(x, hi_mask),
    )
}

/// `sigma(x) ^ t` in both lanes (the hash's pre-image).
#[target_feature(enable = "aes,sse2,avx2,vaes")]
#[inline]
fn pre256(x: __m256i, t: __m256i) -> __m256i {
    _mm256_xor_si256(sigma256(x), t)
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

/// Label `s` of a power-of-two label array (`mask = len - 1`: the index is
/// in bounds by construction).
#[inline(always)]
fn gather(labels: &[Block], mask: usize, s: u32) -> __m128i {
    load(&labels[s as usize & mask])
}

/// Sets label `s` of a power-of-two label array.
#[inline(always)]
fn scatter(labels: &mut [Block], mask: usize, s: u32, v: __m128i) {
    store(&mut labels[s as usize & mask], v)
}

/// Stores a gate's table `TG || TE` (one 32-byte store).
#[inline(always)]
fn store_table(t: &mut [u8; 32], tg: __m128i, te: __m128i) {
    // SAFETY: `t` is 32 writable bytes; `storeu` has no alignment
    // requirement; AVX is implied by the callers' `avx2` feature.
    unsafe { _mm256_storeu_si256(t.as_mut_ptr().cast(), _mm256_set_m128i(te, tg)) }
}

/// Loads a gate's table `TG || TE`.
#[inline(always)]
fn load_table(t: &[u8; 32]) -> __m256i {
    // SAFETY: `t` is 32 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(t.as_ptr().cast()) }
}

// ---------------------------------------------------------------------------
// MITCCRH: AES re-keyed per tweak (see `super` for the construction). Every
// key's schedule is computed next to the blocks it encrypts, one round key at
// a time, several keys in flight.

/// The round constants of the AES-128 key schedule.
const RCON: [i32; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];

/// Byte shuffle that puts `RotWord` of the key's last word in all four
/// columns.
const ROT_WORD: i32 = 0x0c0f_0e0d;

/// One step of the AES-128 key expansion (FIPS-197 section 5.2) without
/// AESKEYGENASSIST, whose round constant must be an immediate: `RotWord` of
/// the last word in every column by a byte shuffle, then `SubWord` and the
/// round constant by AESENCLAST (its `ShiftRows` is the identity on four equal
/// columns), then the running XOR of the four words.
#[target_feature(enable = "aes,sse2,ssse3")]
#[inline]
fn expand_step(k: __m128i, rcon: i32) -> __m128i {
    let aux = _mm_aesenclast_si128(
        _mm_shuffle_epi8(k, _mm_set1_epi32(ROT_WORD)),
        _mm_set1_epi32(rcon),
    );
    // The running XOR of the four words in two shift-and-XOR steps (by one word, then by
    // two) rather than three: the key schedules of MITCCRH are vector-ALU bound.
    let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    let k = _mm_xor_si128(k, _mm_slli_si128::<8>(k));
    _mm_xor_si128(k, aux)
}

/// [`expand_step`] for two keys, one per 128-bit lane.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes")]
#[inline]
fn expand_step2(k: __m256i, rcon: i32) -> __m256i {
    let aux = _mm256_aesenclast_epi128(
        _mm256_shuffle_epi8(k, _mm256_set1_epi32(ROT_WORD)),
        _mm256_set1_epi32(rcon),
    );
    let k = _mm256_xor_si256(k, _mm256_bslli_epi128::<4>(k));
    let k = _mm256_xor_si256(k, _mm256_bslli_epi128::<8>(k));
    _mm256_xor_si256(k, aux)
}

/// The key of tweak `t` under seed `s`: `s ^ (t with its halves swapped)`.
#[target_feature(enable = "sse2")]
#[inline]
fn mi_key(s: __m128i, t: __m128i) -> __m128i {
    _mm_xor_si128(s, _mm_shuffle_epi32::<0b01_00_11_10>(t))
}

/// The 11 round keys of `key` (FIPS-197 order), computed with [`expand_step`]
/// (tests compare them with the bytewise expansion, whose S-box is a
/// constant-time Boolean circuit: with it, a `Prg::from_seed` took about 385 ns
/// on the dev VM, with this one 93; each PRG seed of the OT extension is a key).
#[target_feature(enable = "aes,sse2,ssse3")]
pub(super) fn expand_key_ni(key: [u8; 16]) -> [[u8; 16]; 11] {
    let mut rk = [[0u8; 16]; 11];
    // SAFETY: `key` is 16 readable bytes; `loadu` has no alignment requirement.
    let mut k = unsafe { _mm_loadu_si128(key.as_ptr().cast()) };
    rk[0] = key;
    for (r, &c) in RCON.iter().enumerate() {
        k = expand_step(k, c);
        // SAFETY: `rk[r + 1]` is 16 writable bytes.
        unsafe { _mm_storeu_si128(rk[r + 1].as_mut_ptr().cast(), k) };
    }
    rk
}

/// [`mitccrh`] of pairs: `xs[2i]` and `xs[2i + 1]` both under tweak `t[i]`
/// (`xs.len() == 2 t.len()`), one key schedule per pair: eight blocks and their
/// four schedules in flight. Three-halves garbling hashes `X` and `X ^ R` under
/// one tweak, as half-gates does.
#[target_feature(enable = "aes,sse2,ssse3")]
pub(super) fn mitccrh_pairs(seed: Block, xs: &mut [Block], tweaks: &[Block]) {
    let s = load(&seed);
    for (c, t) in xs.chunks_mut(8).zip(tweaks.chunks(4)) {
        let n = c.len().min(2 * t.len());
        let mut x = [_mm_setzero_si128(); 8];
        let mut k = [s; 4];
        for (i, ti) in t.iter().enumerate() {
            k[i] = mi_key(s, load(ti));
        }
        for i in 0..n {
            x[i] = load(&c[i]);
        }
        let mut v: [__m128i; 8] = core::array::from_fn(|i| _mm_xor_si128(x[i], k[i / 2]));
        for &rc in &RCON[..9] {
            for i in 0..4 {
                k[i] = expand_step(k[i], rc);
                v[2 * i] = _mm_aesenc_si128(v[2 * i], k[i]);
                v[2 * i + 1] = _mm_aesenc_si128(v[2 * i + 1], k[i]);
            }
        }
        for i in 0..4 {
            k[i] = expand_step(k[i], RCON[9]);
            v[2 * i] = _mm_aesenclast_si128(v[2 * i], k[i]);
            v[2 * i + 1] = _mm_aesenclast_si128(v[2 * i + 1], k[i]);
        }
        for i in 0..n {
            store(&mut c[i], _mm_xor_si128(v[i], x[i]));
        }
    }
}

/// `xs[i] = AES_{k(t[i])}(xs[i]) ^ xs[i]` with `k(t) = seed ^ swap(t)`: eight
/// blocks and their eight key schedules in flight, each round key made just
/// before the round that uses it.
#[target_feature(enable = "aes,sse2,ssse3")]
pub(super) fn mitccrh(seed: Block, xs: &mut [Block], tweaks: &[Block]) {
    let s = load(&seed);
    for (c, t) in xs.chunks_mut(8).zip(tweaks.chunks(8)) {
        let n = c.len().min(t.len());
        let mut x = [_mm_setzero_si128(); 8];
        let mut k = [s; 8];
        for i in 0..n {
            x[i] = load(&c[i]);
            k[i] = mi_key(s, load(&t[i]));
        }
        let mut v: [__m128i; 8] = core::array::from_fn(|i| _mm_xor_si128(x[i], k[i]));
        for &rc in &RCON[..9] {
            for i in 0..8 {
                k[i] = expand_step(k[i], rc);
                v[i] = _mm_aesenc_si128(v[i], k[i]);
            }
        }
        for i in 0..8 {
            k[i] = expand_step(k[i], RCON[9]);
            v[i] = _mm_aesenclast_si128(v[i], k[i]);
        }
        for i in 0..n {
            store(&mut c[i], _mm_xor_si128(v[i], x[i]));
        }
    }
}

/// The byte shuffle of the word-sliced key schedule: applied before AESENCLAST, whose
/// `ShiftRows` then leaves `RotWord` of every word in that word's own place, so that one
/// AESENCLAST gives `SubWord(RotWord(w))` of four words at once (four keys' last words).
/// Destination byte `4c + r` takes source byte `4((c - r) mod 4) + (r + 1) mod 4`.
const SLICED_SUB_ROT: [i8; 16] = [1, 14, 11, 4, 5, 2, 15, 8, 9, 6, 3, 12, 13, 10, 7, 0];

/// Transposes four registers as 4x4 matrices of 32-bit words, in each 128-bit lane:
/// word `j` of register `i` goes to word `i` of register `j`. Between four keys (one a
/// register, per lane) and their word-sliced form (word `j` of the four keys in register
/// `j`), both ways.
#[target_feature(enable = "avx2")]
#[inline]
fn transpose4(r: [__m256i; 4]) -> [__m256i; 4] {
    let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
    let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
    let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    [
        _mm256_unpacklo_epi64(t0, t2),
        _mm256_unpackhi_epi64(t0, t2),
        _mm256_unpacklo_epi64(t1, t3),
        _mm256_unpackhi_epi64(t1, t3),
    ]
}

/// One step of the AES-128 key expansion for eight keys in word-sliced form (`w[j]`
/// holds word `j` of four keys per lane): `t = SubWord(RotWord(w3)) ^ rcon`, then
/// `w0 ^= t, w1 ^= w0, w2 ^= w1, w3 ^= w2` (FIPS-197 section 5.2). Six vector operations
/// for eight keys, where [`expand_step2`] takes six for two: in the sliced form the
/// running XOR of the words needs no shifts, and one AESENCLAST serves four keys.
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes")]
#[inline]
fn expand_step_sliced(w: &mut [__m256i; 4], rcon: i32) {
    let [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = SLICED_SUB_ROT;
    let sub_rot = _mm256_setr_epi8(
        a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, a, b, c, d, e, f, g, h, i, j, k, l, m, n,
        o, p,
    );
    // The running XOR of the old words first, off the critical path (last word ->
    // shuffle -> AESENCLAST -> XOR -> the next round's last word).
    let p01 = _mm256_xor_si256(w[0], w[1]);
    let p012 = _mm256_xor_si256(p01, w[2]);
    let p0123 = _mm256_xor_si256(p012, w[3]);
    let t = _mm256_aesenclast_epi128(_mm256_shuffle_epi8(w[3], sub_rot), _mm256_set1_epi32(rcon));
    w[0] = _mm256_xor_si256(w[0], t);
    w[1] = _mm256_xor_si256(p01, t);
    w[2] = _mm256_xor_si256(p012, t);
    w[3] = _mm256_xor_si256(p0123, t);
}

/// The 11 round keys of eight keys at once through [`expand_step_sliced`] (key `i` in
/// lane `i / 4` of register `i % 4`, transposed in and out): tests compare them with the
/// bytewise expansion.
#[cfg(test)]
#[target_feature(enable = "aes,sse2,ssse3,avx2,vaes")]
pub(super) fn expand_keys_sliced(keys: [[u8; 16]; 8]) -> [[[u8; 16]; 11]; 8] {
    let reg = |i: usize| _mm256_set_m128i(load_bytes(&keys[i + 4]), load_bytes(&keys[i]));
    let mut w = transpose4([reg(0), reg(1), reg(2), reg(3)]);
    let mut out = [[[0u8; 16]; 11]; 8];
    for r in 0..11 {
        if r > 0 {
            expand_step_sliced(&mut w, RCON[r - 1]);
        }
        for (i, k) in transpose4(w).into_iter().enumerate() {
            store_bytes(&mut out[i][r], _mm256_castsi256_si128(k));
            store_bytes(&mut out[i + 4][r], _mm256_extracti128_si256::<1>(k));
        }
    }
    out
}

/// The keys of a gate's two tweaks, `(k(2g) | k(2g + 1))`, from the seed in
/// both lanes and `ctr = (2g | 2g + 1)` in the high halves.
#[target_feature(enable = "avx2")]
#[inline]
fn gate_keys(seed2: __m256i, ctr: __m256i) -> __m256i {
    _mm256_xor_si256(seed2, ctr)
}

/// `(2g << 64 | (2g + 1) << 64)`: gate `g`'s tweaks in the high half of each lane.
#[target_feature(enable = "avx2")]
#[inline]
fn gate_ctr(g: u64) -> __m256i {
    let j = (g << 1) as i64;
    _mm256_set_epi64x(j | 1, 0, j, 0)
}

/// The fused half-gates kernels of both hashes, compiled once per instruction set
/// (`$features`): each instance is a module of its own, so that every function of the
/// chain (run, group, gate, cipher) is compiled with the instance's features. With
/// AVX-512VL's 32 vector registers (EVEX encodings of the same VAES and AVX2
/// operations) nothing of a group spills. `$garble_group` and `$eval_group` are the
/// MITCCRH gates in flight (at most eight).
macro_rules! fused_kernels {
    ($name:ident, $features:literal, $garble_group:literal, $eval_group:literal) => {
        pub(super) mod $name {
            use super::*;

            /// `x ^ AES(x)` for eight registers (sixteen blocks) of pre-images.
            #[target_feature(enable = $features)]
            #[inline]
            fn mmo8(k: &[__m256i; 11], pre: &[__m256i; 8]) -> [__m256i; 8] {
                let mut v: [__m256i; 8] = core::array::from_fn(|i| _mm256_xor_si256(pre[i], k[0]));
                for key in &k[1..10] {
                    for x in v.iter_mut() {
                        *x = _mm256_aesenc_epi128(*x, *key);
                    }
                    pin(&mut v);
                }
                core::array::from_fn(|i| {
                    _mm256_xor_si256(_mm256_aesenclast_epi128(v[i], k[10]), pre[i])
                })
            }

            /// See `Hasher::garble_ands`: two passes of four gates, each pass eight
            /// registers `(A0 | A1)`, `(B0 | B1)` through the hash.
            #[target_feature(enable = $features)]
            pub(in crate::hash) fn garble_ands(
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
            #[target_feature(enable = $features)]
            pub(in crate::hash) fn eval_ands(
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
                    let we =
                        _mm_xor_si128(hb, _mm_and_si128(_mm_xor_si128(te, a[i]), lsb_mask(b[i])));
                    store(&mut out[i], _mm_xor_si128(wg, we));
                }
            }

            /// `M <= 4` gates of a garbling run: eight registers `(A0 | A1)`,
            /// `(B0 | B1)` through the hash. `tw` holds the tweak `2g` of the first
            /// gate in both lanes and is advanced by `M` gates. `M` is a constant, so
            /// that a full group is straight-line code.
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::too_many_arguments)]
            fn garble_group<const M: usize>(
                k: &[__m256i; 11],
                d: __m128i,
                dd: __m256i,
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; M],
                tables: &mut [[u8; 32]; M],
                tw: &mut __m256i,
            ) {
                const { assert!(M <= 4) };
                let one = _mm256_set_epi64x(0, 1, 0, 1);
                let two = _mm256_set_epi64x(0, 2, 0, 2);
                let mut pre = [_mm256_setzero_si256(); 8];
                let mut a = [_mm_setzero_si128(); 4];
                let mut b = [_mm_setzero_si128(); 4];
                for (i, &[sa, sb, _]) in run.iter().enumerate() {
                    a[i] = gather(labels, mask, sa);
                    b[i] = gather(labels, mask, sb);
                    // (X0 | X0 ^ R): the zero and the one label of each input.
                    let aa = _mm256_xor_si256(_mm256_broadcastsi128_si256(a[i]), dd);
                    let bb = _mm256_xor_si256(_mm256_broadcastsi128_si256(b[i]), dd);
                    pre[2 * i] = pre256(aa, *tw);
                    pre[2 * i + 1] = pre256(bb, _mm256_add_epi64(*tw, one));
                    *tw = _mm256_add_epi64(*tw, two);
                }
                let h = mmo8(k, &pre);
                for (i, (&[_, _, so], t)) in run.iter().zip(tables.iter_mut()).enumerate() {
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
                    let hb = _mm_xor_si128(hb0, hb1);
                    let te = _mm_xor_si128(hb, a[i]);
                    // TE ^ A0 = HB0 ^ HB1.
                    let we0 = _mm_xor_si128(hb0, _mm_and_si128(hb, pb));
                    store_table(t, tg, te);
                    scatter(labels, mask, so, _mm_xor_si128(wg0, we0));
                }
            }

            /// See `Hasher::garble_run`: the run four gates at a time, round keys
            /// loaded once.
            #[target_feature(enable = $features)]
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
                let k = keys256(rk);
                let d = load(&delta);
                let dd = _mm256_set_m128i(d, _mm_setzero_si128());
                let mut tw = tweak2(gate, 0);
                let (tabs, _) = tables.as_chunks_mut::<32>();
                let (gs, g_rest) = run.as_chunks::<4>();
                let (ts, t_rest) = tabs.as_chunks_mut::<4>();
                for (g, t) in gs.iter().zip(ts) {
                    garble_group(&k, d, dd, labels, mask, g, t, &mut tw);
                }
                // The rest of the run in groups of 2 and 1 gates.
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal) => {
                        if g_rest.len() - at >= $m {
                            garble_group::<$m>(
                                &k,
                                d,
                                dd,
                                labels,
                                mask,
                                g_rest[at..at + $m].try_into().expect("length checked"),
                                (&mut t_rest[at..at + $m])
                                    .try_into()
                                    .expect("length checked"),
                                &mut tw,
                            );
                            at += $m;
                        }
                    };
                }
                group_of!(2);
                group_of!(1);
                debug_assert_eq!(at, g_rest.len());
            }

            /// `M <= 8` gates of an evaluation run: one register `(Wa | Wb)` per
            /// gate. `tw` holds `(2g | 2g + 1)` of the first gate and is advanced.
            #[target_feature(enable = $features)]
            #[inline]
            fn eval_group<const M: usize>(
                k: &[__m256i; 11],
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; M],
                tables: &[[u8; 32]; M],
                tw: &mut __m256i,
            ) {
                const { assert!(M <= 8) };
                let two = _mm256_set_epi64x(0, 2, 0, 2);
                let mut pre = [_mm256_setzero_si256(); 8];
                let mut a = [_mm_setzero_si128(); 8];
                let mut b = [_mm_setzero_si128(); 8];
                for (i, &[sa, sb, _]) in run.iter().enumerate() {
                    a[i] = gather(labels, mask, sa);
                    b[i] = gather(labels, mask, sb);
                    pre[i] = pre256(_mm256_set_m128i(b[i], a[i]), *tw);
                    *tw = _mm256_add_epi64(*tw, two);
                }
                let h = mmo8(k, &pre);
                for (i, (&[_, _, so], t)) in run.iter().zip(tables).enumerate() {
                    let ha = _mm256_castsi256_si128(h[i]);
                    let hb = _mm256_extracti128_si256::<1>(h[i]);
                    let tt = load_table(t);
                    let tg = _mm256_castsi256_si128(tt);
                    let te = _mm256_extracti128_si256::<1>(tt);
                    let wg = _mm_xor_si128(ha, _mm_and_si128(tg, lsb_mask(a[i])));
                    let we =
                        _mm_xor_si128(hb, _mm_and_si128(_mm_xor_si128(te, a[i]), lsb_mask(b[i])));
                    scatter(labels, mask, so, _mm_xor_si128(wg, we));
                }
            }

            /// See `Hasher::eval_run`: the run eight gates at a time, round keys
            /// loaded once.
            #[target_feature(enable = $features)]
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
                let k = keys256(rk);
                let j = (gate << 1) as i64;
                let mut tw = _mm256_set_epi64x(0, j | 1, 0, j);
                let (tabs, _) = tables.as_chunks::<32>();
                let (gs, g_rest) = run.as_chunks::<8>();
                let (ts, t_rest) = tabs.as_chunks::<8>();
                for (g, t) in gs.iter().zip(ts) {
                    eval_group(&k, labels, mask, g, t, &mut tw);
                }
                // The rest of the run in groups of 4, 2 and 1 gates.
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal) => {
                        if g_rest.len() - at >= $m {
                            eval_group::<$m>(
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
                group_of!(4);
                group_of!(2);
                group_of!(1);
                debug_assert_eq!(at, g_rest.len());
            }

            // MITCCRH: AES re-keyed per tweak.

            /// `AES_K(x) ^ x` for `M` key registers `K` (two keys each, one per lane) and
            /// `P` data registers per key, the key schedules made round by round next to
            /// the rounds that use them.
            #[target_feature(enable = $features)]
            #[inline]
            fn mmo_rekeyed<const M: usize, const P: usize>(
                mut k: [__m256i; M],
                x: &[[__m256i; P]; M],
            ) -> [[__m256i; P]; M] {
                let mut v: [[__m256i; P]; M] = core::array::from_fn(|i| {
                    core::array::from_fn(|p| _mm256_xor_si256(x[i][p], k[i]))
                });
                for &rc in &RCON[..9] {
                    for i in 0..M {
                        k[i] = expand_step2(k[i], rc);
                        for vp in v[i].iter_mut() {
                            *vp = _mm256_aesenc_epi128(*vp, k[i]);
                        }
                    }
                }
                for i in 0..M {
                    k[i] = expand_step2(k[i], RCON[9]);
                    for p in 0..P {
                        v[i][p] =
                            _mm256_xor_si256(_mm256_aesenclast_epi128(v[i][p], k[i]), x[i][p]);
                    }
                }
                v
            }

            /// [`mmo_rekeyed`] for `M` key registers, `M` a multiple of four, with the key schedules
            /// computed four registers (eight keys) at a time in word-sliced form: each round, one
            /// [`expand_step_sliced`] and a [`transpose4`] back to the round keys, about half the
            /// vector operations of [`expand_step2`] per key, which bound the MITCCRH kernels.
            #[target_feature(enable = $features)]
            #[inline]
            fn mmo_rekeyed_sliced<const M: usize, const P: usize>(
                k: [__m256i; M],
                x: &[[__m256i; P]; M],
            ) -> [[__m256i; P]; M] {
                assert!(M % 4 == 0);
                let mut v: [[__m256i; P]; M] = core::array::from_fn(|i| {
                    core::array::from_fn(|p| _mm256_xor_si256(x[i][p], k[i]))
                });
                let mut w = k;
                for s in (0..M).step_by(4) {
                    let t = transpose4([w[s], w[s + 1], w[s + 2], w[s + 3]]);
                    w[s..s + 4].copy_from_slice(&t);
                }
                rekeyed_rounds!(|rc, last| {
                    for s in (0..M).step_by(4) {
                        let mut ws = [w[s], w[s + 1], w[s + 2], w[s + 3]];
                        expand_step_sliced(&mut ws, rc);
                        w[s..s + 4].copy_from_slice(&ws);
                        let rk = transpose4(ws);
                        for (i, &key) in rk.iter().enumerate() {
                            for p in 0..P {
                                v[s + i][p] = if last {
                                    _mm256_xor_si256(
                                        _mm256_aesenclast_epi128(v[s + i][p], key),
                                        x[s + i][p],
                                    )
                                } else {
                                    _mm256_aesenc_epi128(v[s + i][p], key)
                                };
                            }
                        }
                    }
                });
                v
            }

            /// Half-gates garbling of `M` gates with input zero labels `a`, `b` under
            /// MITCCRH: per gate one key register `(k(2g) | k(2g + 1))` and two data
            /// registers `(A0 | B0)`, `(A1 | B1)`. Returns each gate's `TG`, `TE` and
            /// output zero label; advances `ctr` by `M` gates.
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::type_complexity)]
            fn garble_mi<const M: usize>(
                seed2: __m256i,
                d: __m128i,
                rr: __m256i,
                a: &[__m128i; M],
                b: &[__m128i; M],
                ctr: &mut __m256i,
            ) -> ([__m128i; M], [__m128i; M], [__m128i; M]) {
                let two = _mm256_set_epi64x(2, 0, 2, 0);
                let mut keys = [_mm256_setzero_si256(); M];
                let mut x = [[_mm256_setzero_si256(); 2]; M];
                for i in 0..M {
                    keys[i] = gate_keys(seed2, *ctr);
                    *ctr = _mm256_add_epi64(*ctr, two);
                    let ab = _mm256_set_m128i(b[i], a[i]);
                    x[i] = [ab, _mm256_xor_si256(ab, rr)];
                }
                let h = if M % 4 == 0 {
                    mmo_rekeyed_sliced(keys, &x)
                } else {
                    mmo_rekeyed(keys, &x)
                };
                let mut tg = [_mm_setzero_si128(); M];
                let mut te = [_mm_setzero_si128(); M];
                let mut out = [_mm_setzero_si128(); M];
                for i in 0..M {
                    let (ha0, hb0) = (
                        _mm256_castsi256_si128(h[i][0]),
                        _mm256_extracti128_si256::<1>(h[i][0]),
                    );
                    let (ha1, hb1) = (
                        _mm256_castsi256_si128(h[i][1]),
                        _mm256_extracti128_si256::<1>(h[i][1]),
                    );
                    let pa = lsb_mask(a[i]);
                    let pb = lsb_mask(b[i]);
                    tg[i] = _mm_xor_si128(_mm_xor_si128(ha0, ha1), _mm_and_si128(d, pb));
                    let wg0 = _mm_xor_si128(ha0, _mm_and_si128(tg[i], pa));
                    let hb = _mm_xor_si128(hb0, hb1);
                    te[i] = _mm_xor_si128(hb, a[i]);
                    let we0 = _mm_xor_si128(hb0, _mm_and_si128(hb, pb));
                    out[i] = _mm_xor_si128(wg0, we0);
                }
                (tg, te, out)
            }

            /// Half-gates evaluation of `M` gates with active labels `a`, `b` and tables
            /// `tg`, `te` under MITCCRH: per gate one key register and one data register
            /// `(Wa | Wb)`. Returns each gate's output label; advances `ctr`.
            #[target_feature(enable = $features)]
            #[inline]
            fn eval_mi<const M: usize>(
                seed2: __m256i,
                a: &[__m128i; M],
                b: &[__m128i; M],
                tabs: &[__m256i; M],
                ctr: &mut __m256i,
            ) -> [__m128i; M] {
                let two = _mm256_set_epi64x(2, 0, 2, 0);
                let mut keys = [_mm256_setzero_si256(); M];
                let mut x = [[_mm256_setzero_si256(); 1]; M];
                for i in 0..M {
                    keys[i] = gate_keys(seed2, *ctr);
                    *ctr = _mm256_add_epi64(*ctr, two);
                    x[i] = [_mm256_set_m128i(b[i], a[i])];
                }
                let h = if M % 4 == 0 {
                    mmo_rekeyed_sliced(keys, &x)
                } else {
                    mmo_rekeyed(keys, &x)
                };
                core::array::from_fn(|i| {
                    let ha = _mm256_castsi256_si128(h[i][0]);
                    let hb = _mm256_extracti128_si256::<1>(h[i][0]);
                    let tg = _mm256_castsi256_si128(tabs[i]);
                    let te = _mm256_extracti128_si256::<1>(tabs[i]);
                    let wg = _mm_xor_si128(ha, _mm_and_si128(tg, lsb_mask(a[i])));
                    let we =
                        _mm_xor_si128(hb, _mm_and_si128(_mm_xor_si128(te, a[i]), lsb_mask(b[i])));
                    _mm_xor_si128(wg, we)
                })
            }

            /// One group of a MITCCRH garbling run: gathers, garbles, stores, scatters.
            #[target_feature(enable = $features)]
            #[inline]
            #[allow(clippy::too_many_arguments)]
            fn garble_group_mi<const M: usize>(
                seed2: __m256i,
                d: __m128i,
                rr: __m256i,
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; M],
                tables: &mut [[u8; 32]; M],
                ctr: &mut __m256i,
            ) {
                let a: [__m128i; M] = core::array::from_fn(|i| gather(labels, mask, run[i][0]));
                let b: [__m128i; M] = core::array::from_fn(|i| gather(labels, mask, run[i][1]));
                let (tg, te, out) = garble_mi(seed2, d, rr, &a, &b, ctr);
                for i in 0..M {
                    store_table(&mut tables[i], tg[i], te[i]);
                    scatter(labels, mask, run[i][2], out[i]);
                }
            }

            /// One group of a MITCCRH evaluation run.
            #[target_feature(enable = $features)]
            #[inline]
            fn eval_group_mi<const M: usize>(
                seed2: __m256i,
                labels: &mut [Block],
                mask: usize,
                run: &[[u32; 3]; M],
                tables: &[[u8; 32]; M],
                ctr: &mut __m256i,
            ) {
                let a: [__m128i; M] = core::array::from_fn(|i| gather(labels, mask, run[i][0]));
                let b: [__m128i; M] = core::array::from_fn(|i| gather(labels, mask, run[i][1]));
                let t: [__m256i; M] = core::array::from_fn(|i| load_table(&tables[i]));
                let out = eval_mi(seed2, &a, &b, &t, ctr);
                for i in 0..M {
                    scatter(labels, mask, run[i][2], out[i]);
                }
            }

            /// [`garble_run`] under MITCCRH with session seed `seed`.
            #[target_feature(enable = $features)]
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
                let seed2 = _mm256_broadcastsi128_si256(load(&seed));
                let d = load(&delta);
                let rr = _mm256_broadcastsi128_si256(d);
                let mut ctr = gate_ctr(gate);
                let (tabs, _) = tables.as_chunks_mut::<32>();
                let (gs, g_rest) = run.as_chunks::<$garble_group>();
                let (ts, t_rest) = tabs.as_chunks_mut::<$garble_group>();
                for (g, t) in gs.iter().zip(ts) {
                    garble_group_mi(seed2, d, rr, labels, mask, g, t, &mut ctr);
                }
                // The rest of the run in groups of four, two and one gates.
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal) => {
                        if g_rest.len() - at >= $m {
                            garble_group_mi::<$m>(
                                seed2,
                                d,
                                rr,
                                labels,
                                mask,
                                g_rest[at..at + $m].try_into().expect("length checked"),
                                (&mut t_rest[at..at + $m])
                                    .try_into()
                                    .expect("length checked"),
                                &mut ctr,
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

            /// [`eval_run`] under MITCCRH with session seed `seed`.
            #[target_feature(enable = $features)]
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
                let seed2 = _mm256_broadcastsi128_si256(load(&seed));
                let mut ctr = gate_ctr(gate);
                let (tabs, _) = tables.as_chunks::<32>();
                let (gs, g_rest) = run.as_chunks::<$eval_group>();
                let (ts, t_rest) = tabs.as_chunks::<$eval_group>();
                for (g, t) in gs.iter().zip(ts) {
                    eval_group_mi(seed2, labels, mask, g, t, &mut ctr);
                }
                // The rest of the run in groups of four, two and one gates.
                let mut at = 0;
                macro_rules! group_of {
                    ($m:literal) => {
                        if g_rest.len() - at >= $m {
                            eval_group_mi::<$m>(
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
                group_of!(4);
                group_of!(2);
                group_of!(1);
                debug_assert_eq!(at, g_rest.len());
            }

            /// [`garble_ands`] under MITCCRH (the streaming garbler's gates, one or a few
            /// at a time).
            #[target_feature(enable = $features)]
            #[allow(clippy::too_many_arguments)]
            pub(in crate::hash) fn garble_ands_mi(
                seed: Block,
                delta: Block,
                a0: &[Block],
                b0: &[Block],
                gate: u64,
                tables: &mut [u8],
                out: &mut [Block],
            ) {
                let n = a0.len();
                assert!(n <= 8 && b0.len() == n && out.len() == n && tables.len() == 32 * n);
                let seed2 = _mm256_broadcastsi128_si256(load(&seed));
                let d = load(&delta);
                let rr = _mm256_broadcastsi128_si256(d);
                let mut ctr = gate_ctr(gate);
                for i in 0..n {
                    let (tg, te, o) =
                        garble_mi::<1>(seed2, d, rr, &[load(&a0[i])], &[load(&b0[i])], &mut ctr);
                    let t = &mut tables[32 * i..32 * i + 32];
                    store_bytes(&mut t[..16], tg[0]);
                    store_bytes(&mut t[16..], te[0]);
                    store(&mut out[i], o[0]);
                }
            }

            /// [`eval_ands`] under MITCCRH.
            #[target_feature(enable = $features)]
            pub(in crate::hash) fn eval_ands_mi(
                seed: Block,
                wa: &[Block],
                wb: &[Block],
                gate: u64,
                tables: &[u8],
                out: &mut [Block],
            ) {
                let n = wa.len();
                assert!(n <= 8 && wb.len() == n && out.len() == n && tables.len() == 32 * n);
                let seed2 = _mm256_broadcastsi128_si256(load(&seed));
                let mut ctr = gate_ctr(gate);
                for i in 0..n {
                    let t = &tables[32 * i..32 * i + 32];
                    let tab = _mm256_set_m128i(load_bytes(&t[16..]), load_bytes(&t[..16]));
                    let o = eval_mi::<1>(seed2, &[load(&wa[i])], &[load(&wb[i])], &[tab], &mut ctr);
                    store(&mut out[i], o[0]);
                }
            }
        }
    };
}

// Four MITCCRH gates a group both ways with sixteen registers: with the rounds written out,
// evaluation in groups of eight spilled (16.5-20.4 ns per AND, against 10.0-11.0 in groups of
// four and 10.6-12.3 before the rounds were written out; `docs/gc-2pc.md`).
fused_kernels!(avx2, "aes,sse2,ssse3,avx2,vaes", 4, 4);
// Eight MITCCRH gates' keys and data in flight without spilling.
fused_kernels!(avx512, "aes,sse2,ssse3,avx2,vaes,avx512f,avx512vl", 8, 8);
