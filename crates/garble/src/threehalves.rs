//! Three-halves garbling: Rosulek and Roy, "Three Halves Make a Whole? Beating
//! the Half-Gates Lower Bound for Garbled Circuits" (CRYPTO 2021, ePrint
//! 2021/749), the construction of its section 5 ("slicing and dicing"), with
//! free XOR and INV as in [`crate::gc`]. An AND gate costs three half-labels
//! and five control bits, `1.5 kappa + 5` bits: [`TABLE_BYTES`] = 25 bytes on
//! the wire (three 8-byte halves and one byte that holds the five bits),
//! against half-gates' 32.
//!
//! # Labels and offset
//!
//! A label `X` is sliced into halves `X = X_L || X_R` (`X_L` the low 64 bits
//! of the block, `X_R` the high 64). The global offset `R = R_L || R_R` is the
//! one of half-gates, with `lsb(R) = 1`: a label's colour is `lsb(X)`, the
//! lowest bit of `X_L`, and the two labels of a wire have different colours.
//!
//! # One AND gate (the garbler)
//!
//! Inputs `a`, `b` with zero labels `A0`, `B0`; `A = A0 ^ lsb(A0) R` and
//! `B = B0 ^ lsb(B0) R` are the labels of colour 0, and `alpha = 1 ^ lsb(A0)`,
//! `beta = 1 ^ lsb(B0)` the colours of the labels of truth 1 (the paper's `a`
//! and `b`: the output is 1 in the row `(i, j) = (alpha, beta)` only). The
//! evaluator holds `A_i = A ^ i R` and `B_j = B ^ j R` for its colours `i`,
//! `j`, and must end with `C ^ [i = alpha and j = beta] R`, `C` the output's
//! zero label.
//!
//! Gate `g` (counted over the whole session) hashes with three tweaks, one
//! per hash of the evaluator: `3g` for `A_i`, `3g + 1` for `B_j`, `3g + 2`
//! for `A_i ^ B_j`, so no tweak repeats across gates, calls or computations
//! of a session (under MITCCRH each key serves the two inputs `X`, `X ^ R`
//! when garbling and one when evaluating, as in half-gates). Of each
//! 128-bit hash `H` the garbled gate uses `h = H_L` (64 bits) and one more
//! bit, `hb = lsb(H_R)`, which masks the control bits. The garbler computes
//! all six: `hA_i = H(A_i, 3g)`, `hB_j = H(B_j, 3g + 1)`,
//! `hX_k = H(A ^ B ^ k R, 3g + 2)` for `i, j, k` in `{0, 1}` (note
//! `A_i ^ B_j = A ^ B ^ (i ^ j) R`).
//!
//! The evaluator's row `(i, j)` computes, in halves,
//!
//! ```text
//! [C_L]   [hA_i ^ hX_(i^j)]         [G0]                  [A_iL]
//! [C_R] = [hB_j ^ hX_(i^j)] ^ V_ij  [G1]  ^  R_ij (2x4) . [A_iR]
//!                                   [G2]                  [B_jL]
//!                                                         [B_jR]
//!
//! V_ij = [ i  0  i^j ]    (the paper's V, less its identity columns for C)
//!        [ 0  j  i^j ]
//! ```
//!
//! Stacked over the four rows this is 8 equations in 5 unknown halves
//! `(C_L, C_R, G0, G1, G2)` whose 8x5 matrix `[I | V_ij]` has rank 5: its
//! left kernel (3 dimensions: rows `{00L, 00R, 01L, 10R}`, `{00R, 01R, 10R,
//! 11R}`, `{00R, 10L, 10R, 11L}`) annihilates every hash column, so the hash
//! terms are always solvable. What makes the system solvable for the
//! `[i = alpha and j = beta] R` on the right is the "slicing" term: the
//! matrices `R_ij` mix halves of the evaluator's own labels into its output.
//! They depend on `alpha`, `beta`, so they are "diced": the garbler draws two
//! coins `r1`, `r2` per gate and row `(i, j)` gets the 2-bit value
//!
//! ```text
//! r_00 = (r1, r2)              r_01 = (alpha^beta^r1, alpha^r2)
//! r_10 = (beta^r1, alpha^beta^r2)   r_11 = (alpha^r1, beta^r2)
//! R_ij = Rp_ij ^ r_ij1 S1 ^ r_ij2 S2
//!
//! S1 = [1 1 1 0]   S2 = [1 0 0 1]   Rp_00 = [0 0 1 0]   Rp_01 = [0 0 1 0]
//!      [1 0 0 1]        [0 1 1 1]           [0 1 0 0]           [0 0 0 0]
//! Rp_10 = [0 0 0 0]   Rp_11 = 0     (columns: A_iL, A_iR, B_jL, B_jR)
//!         [0 1 0 0]
//! ```
//!
//! so each row's `r_ij` is uniform whatever `alpha`, `beta` are, and the
//! evaluator learns only its own. The 8 bits `(r_ij)` lie in the column space
//! of the same `[I | V_ij]`, so five control bits `z` carry them, masked by
//! the hash bits exactly as the halves are: the evaluator computes
//! `r_ij = (z0, z1) ^ V_ij (z2, z3, z4) ^ (hbA_i ^ hbX_(i^j), hbB_j ^ hbX_(i^j))`.
//!
//! The garbler solves with one left inverse of `[I | V_ij]` (rows `00`, `01L`
//! and `11`): with `RHS_ij` the right-hand side of row `(i, j)` (hash terms,
//! `R_ij` applied to `A_i`, `B_j`, and `[i = alpha and j = beta] R`),
//!
//! ```text
//! C  = RHS_00                    G0 = RHS_00L ^ RHS_11L = hA_0 ^ hA_1 ^ lin
//! G1 = RHS_00R ^ RHS_11R = hB_0 ^ hB_1 ^ lin    G2 = RHS_00L ^ RHS_01L = hX_0 ^ hX_1 ^ lin
//! z0 = r1 ^ hbA_0 ^ hbX_0        z1 = r2 ^ hbB_0 ^ hbX_0
//! z2 = alpha ^ hbA_0 ^ hbA_1     z3 = beta ^ hbB_0 ^ hbB_1    z4 = alpha ^ beta ^ hbX_0 ^ hbX_1
//! ```
//!
//! where each `lin` is a linear combination of `A_L, A_R, B_L, B_R, R_L, R_R`
//! that depends on `(alpha, beta, r1, r2)` only: `GARBLE_LIN`, computed at
//! compile time from the matrices above (and tested against a direct
//! evaluation of all four rows).
//!
//! # Wire format
//!
//! Per AND gate, in circuit order: `G0`, `G1`, `G2` (8 bytes each, little
//! endian), then one byte with `z0..z4` in bits 0..4. The three high bits are
//! zero; the evaluator ignores them (they enter no computation, so a peer that
//! sets them changes nothing).
//!
//! # Kernels
//!
//! Where the CPU has VAES (`Hasher::fused`), both parties run each AND run
//! in fused kernels (`Hasher::garble_run_3h`, `Hasher::eval_run_3h`, in
//! `hash/ni/threehalves.rs`, compiled for AVX2 and for AVX-512VL, both
//! hashes), a group of gates at a time in vector registers.
//!
//! The garbler, four gates a group: per gate the 256-bit registers `(A | B)`
//! and `(A ^ R | B ^ R)` under the tweaks `(3g | 3g + 1)` and
//! `(A ^ B | A ^ B ^ R)` under `3g + 2` (under MITCCRH the `A ^ B` registers
//! of two gates are paired, so that each key register holds two distinct
//! keys; four gates' twelve keys are expanded as four word-sliced registers
//! and two plain ones), a few shuffles for the hash terms, and the linear
//! terms without a branch or a per-half table lookup: the masks and the terms
//! in `R` of `GARBLE_LIN`, re-expressed over the zero labels `A0`, `B0` as
//! they are in the label array, are looked up once per gate by its colours
//! and coins (`FusedLin`, 256 bytes per index, built per garbling from `R`),
//! and the label halves are broadcast from memory and masked, all five
//! outputs in two registers. The coins are drawn 64 gates a PRG block into a
//! buffer first, the same coins in the same order as `Coins::two`.
//!
//! The evaluator, four (fixed-key) or eight (MITCCRH, AVX-512VL) gates a
//! group: per gate `(Wa | Wb)` under `(3g | 3g + 1)`, per two gates
//! `(Wa ^ Wb | Wa' ^ Wb')` under `(3g + 2 | 3g' + 2)`; the bits `r_ij` are
//! decoded from the control byte and the colours (`FUSED_EVAL_IDX`) and
//! three hash bits, and select the masks of `EVAL_R` and of `G0, G1, G2` in a 16-entry table
//! (`FUSED_EVAL`).
//!
//! The tables and labels are byte for byte those of the generic code (tested
//! on random and library circuits with both instances and both hashes, in
//! any pieces); the kernels count tweaks in 64 bits, so a run whose tweaks
//! would pass `2^64` goes to the generic code.
//!
//! The generic code (without VAES) hashes in batches of [`BATCH`] gates: the
//! garbler 48 blocks under 24 tweaks ([`Hasher::hash_pairs`]: under MITCCRH
//! with AES-NI one key schedule per pair), the evaluator 24 blocks under 24
//! tweaks ([`Hasher::hash`]), then computes the linear terms in scalar code.

use crate::gc::{BATCH, CHUNK_BYTES, Chunks, Slots, TableReader, TableSink, TableSource, refill};
use crate::hash::{Block, Hasher, Prg};
use crate::program::{ONE_SLOT, Program, Run, ZERO_SLOT};

/// Bytes of garbled table per AND gate: three 8-byte halves and a byte of
/// five control bits.
pub const TABLE_BYTES: usize = 25;

/// Gates per call of the fused garbling kernel (the coins of a call are
/// drawn into a buffer first).
const FUSED_PIECE: usize = 1024;

/// A 2x4 matrix over the halves `(A_iL, A_iR, B_jL, B_jR)`: one 4-bit mask
/// per output half (bit `k` = column `k`).
type Mat = [u8; 2];

/// `S1`, `S2` and `Rp_ij` of the paper's dicing (see the module documentation).
const S1: Mat = [0b0111, 0b1001];
const S2: Mat = [0b1001, 0b1110];
const RP: [Mat; 4] = [[0b0100, 0b0010], [0b0100, 0], [0, 0b0010], [0, 0]];

/// Index of row `(i, j)` in [`RP`]: `2 i + j`.
const fn row(i: usize, j: usize) -> usize {
    (i << 1) | j
}

/// `R_ij = Rp_ij ^ r1 S1 ^ r2 S2`.
const fn r_matrix(i: usize, j: usize, r1: u8, r2: u8) -> Mat {
    let p = RP[row(i, j)];
    let m1 = 0u8.wrapping_sub(r1);
    let m2 = 0u8.wrapping_sub(r2);
    [
        p[0] ^ (m1 & S1[0]) ^ (m2 & S2[0]),
        p[1] ^ (m1 & S1[1]) ^ (m2 & S2[1]),
    ]
}

/// The evaluator's `R_ij`, indexed by `i | j << 1 | r1 << 2 | r2 << 3`.
const EVAL_R: [Mat; 16] = {
    let mut t = [[0u8; 2]; 16];
    let mut x = 0;
    while x < 16 {
        t[x] = r_matrix(
            x & 1,
            (x >> 1) & 1,
            ((x >> 2) & 1) as u8,
            ((x >> 3) & 1) as u8,
        );
        x += 1;
    }
    t
};

/// The two bits `r_ij` of row `(i, j)` from the coins and the colours of
/// truth 1 (see the module documentation).
const fn r_bits(i: usize, j: usize, al: u8, be: u8, r1: u8, r2: u8) -> (u8, u8) {
    match (i, j) {
        (0, 0) => (r1, r2),
        (0, 1) => (al ^ be ^ r1, al ^ r2),
        (1, 0) => (be ^ r1, al ^ be ^ r2),
        _ => (al ^ r1, be ^ r2),
    }
}

/// The linear part of `RHS_ij`, half `h` (0 = left, 1 = right), as a 6-bit
/// mask over `(A_L, A_R, B_L, B_R, R_L, R_R)` (`A`, `B` of colour 0): `R_ij`
/// applied to `A_i = A ^ i R`, `B_j = B ^ j R`, plus `R_h` in the row
/// `(alpha, beta)`.
const fn rhs_lin(i: usize, j: usize, h: usize, al: u8, be: u8, r1: u8, r2: u8) -> u8 {
    let (x1, x2) = r_bits(i, j, al, be, r1, r2);
    let m = r_matrix(i, j, x1, x2)[h];
    let (i8, j8) = (i as u8, j as u8);
    // A_iL = A_L ^ i R_L, A_iR = A_R ^ i R_R, B_jL = B_L ^ j R_L, B_jR = B_R ^ j R_R.
    let rl = (i8 & m) ^ (j8 & (m >> 2)) & 1;
    let rr = (i8 & (m >> 1)) ^ (j8 & (m >> 3)) & 1;
    let mut lin = (m & 0xf) | ((rl & 1) << 4) | ((rr & 1) << 5);
    if i8 == al && j8 == be {
        lin ^= 1 << (4 + h);
    }
    lin
}

/// The garbler's linear terms of `(C_L, C_R, G0, G1, G2)`, 6-bit masks over
/// `(A_L, A_R, B_L, B_R, R_L, R_R)`, indexed by
/// `alpha | beta << 1 | r1 << 2 | r2 << 3`: the left inverse of the module
/// documentation applied to [`rhs_lin`].
pub(crate) const GARBLE_LIN: [[u8; 5]; 16] = {
    let mut t = [[0u8; 5]; 16];
    let mut x = 0;
    while x < 16 {
        let (al, be) = ((x & 1) as u8, ((x >> 1) & 1) as u8);
        let (r1, r2) = (((x >> 2) & 1) as u8, ((x >> 3) & 1) as u8);
        let l00 = rhs_lin(0, 0, 0, al, be, r1, r2);
        let r00 = rhs_lin(0, 0, 1, al, be, r1, r2);
        t[x] = [
            l00,
            r00,
            l00 ^ rhs_lin(1, 1, 0, al, be, r1, r2),
            r00 ^ rhs_lin(1, 1, 1, al, be, r1, r2),
            l00 ^ rhs_lin(0, 1, 0, al, be, r1, r2),
        ];
        x += 1;
    }
    t
};

/// The tables of the fused garbling kernels (`Hasher::garble_run_3h`) for one
/// offset `R`: [`GARBLE_LIN`] re-expressed over the gate's zero labels `A0`,
/// `B0` (as they sit in the label array) instead of the colour-0 labels `A`,
/// `B`, so that a kernel needs no select on the colours. Indexed by
/// `pa | pb << 1 | r1 << 2 | r2 << 3`, where `pa = lsb(A0)`, `pb = lsb(B0)`
/// (so `alpha = 1 ^ pa`, `beta = 1 ^ pb`) and `(r1, r2)` are the gate's coins.
///
/// A kernel computes the table `S = (G0, G1, G2, -)` and the output's zero
/// label `C = (C_L, C_R)` as the hash terms of the module documentation plus
/// `rs ^ XOR_k (q_k & ms[k])` and `rc ^ XOR_k (q_k & mc[k])`, where `q_k` is
/// `A0_L, A0_R, B0_L, B0_R` in every 64-bit lane, and the control byte as the
/// hash bits XOR `z`.
#[derive(Clone)]
pub(crate) struct FusedLin {
    /// The masks and constants of each index.
    pub(crate) e: [LinEntry; 16],
    /// `(pa R | pb R)`, indexed by `pa | pb << 1`: `(A0 | B0)` XOR this is
    /// `(A | B)`.
    pub(crate) ab: [[u64; 4]; 4],
    /// `((pa ^ pb) R | (1 ^ pa ^ pb) R)`: `(A0 ^ B0)` in both lanes XOR this
    /// is `(A ^ B | A ^ B ^ R)`.
    pub(crate) x: [[u64; 4]; 4],
}

/// The masks and constants of one index of [`FusedLin`] (256 bytes, so that
/// a kernel finds them with one shift of the index).
#[derive(Clone, Copy, Default)]
#[repr(C, align(256))]
pub(crate) struct LinEntry {
    /// The masks of `q_k` over `S` (the fourth lane zero).
    pub(crate) ms: [[u64; 4]; 4],
    /// The terms in `R` of `S`: those of [`GARBLE_LIN`] plus the colour
    /// corrections `pa A-part(R) ^ pb B-part(R)` (as `A = A0 ^ pa R`).
    pub(crate) rs: [u64; 4],
    /// The masks of `q_k` over `C`.
    pub(crate) mc: [[u64; 2]; 4],
    /// The terms in `R` of `C`.
    pub(crate) rc: [u64; 2],
    /// The control bits' terms that are not hash bits: `r1`, `r2`, `alpha`,
    /// `beta`, `alpha ^ beta` in bits 0..4.
    pub(crate) z: u64,
}

impl FusedLin {
    /// The tables for offset `delta`.
    pub(crate) fn new(delta: Block) -> FusedLin {
        let (rl, rr) = (lo(delta), hi(delta));
        let mut f = FusedLin {
            e: [LinEntry::default(); 16],
            ab: [[0; 4]; 4],
            x: [[0; 4]; 4],
        };
        for idx in 0..16u8 {
            let (pa, pb) = (idx & 1, (idx >> 1) & 1);
            let (r1, r2) = ((idx >> 2) & 1, (idx >> 3) & 1);
            let (al, be) = (1 ^ pa, 1 ^ pb);
            let m = GARBLE_LIN[usize::from(al | (be << 1) | (r1 << 2) | (r2 << 3))];
            // The terms in R of one output: its own, and those that A = A0 ^ pa R
            // and B = B0 ^ pb R bring.
            let rterm = |mm: u8| {
                let on_a = (mask(mm, 0) & rl) ^ (mask(mm, 1) & rr);
                let on_b = (mask(mm, 2) & rl) ^ (mask(mm, 3) & rr);
                (mask(mm, 4) & rl)
                    ^ (mask(mm, 5) & rr)
                    ^ (on_a & mask(pa, 0))
                    ^ (on_b & mask(pb, 0))
            };
            let e = &mut f.e[usize::from(idx)];
            for k in 0..4u32 {
                e.ms[k as usize] = [mask(m[2], k), mask(m[3], k), mask(m[4], k), 0];
                e.mc[k as usize] = [mask(m[0], k), mask(m[1], k)];
            }
            e.rs = [rterm(m[2]), rterm(m[3]), rterm(m[4]), 0];
            e.rc = [rterm(m[0]), rterm(m[1])];
            e.z = u64::from(r1 | (r2 << 1) | (al << 2) | (be << 3) | ((al ^ be) << 4));
        }
        for p in 0..4u8 {
            let (pa, pb) = (p & 1, p >> 1);
            let (ma, mb, mx) = (mask(pa, 0), mask(pb, 0), mask(pa ^ pb, 0));
            f.ab[usize::from(p)] = [ma & rl, ma & rr, mb & rl, mb & rr];
            f.x[usize::from(p)] = [mx & rl, mx & rr, !mx & rl, !mx & rr];
        }
        f
    }
}

/// The evaluator's masks of the fused evaluation kernels for one index
/// `i | j << 1 | r1 << 2 | r2 << 3` (its colours and the `r_ij` it decoded):
/// the output label is the hash terms plus `(G0, G1) & g01 ^ (G2, G2) & g2 ^
/// XOR_k (q_k & mc[k])`, `q_k` being `Wa_L, Wa_R, Wb_L, Wb_R`.
#[derive(Clone, Copy)]
#[repr(C, align(128))]
pub(crate) struct EvalEntry {
    /// The masks of `q_k` over `(C_L, C_R)`: [`EVAL_R`].
    pub(crate) mc: [[u64; 2]; 4],
    /// `(i, j)` as all-ones masks: `G0` enters `C_L` in rows `i = 1`, `G1`
    /// enters `C_R` in rows `j = 1`.
    pub(crate) g01: [u64; 2],
    /// `i ^ j` twice: `G2` enters both halves.
    pub(crate) g2: [u64; 2],
}

/// The evaluator's [`FUSED_EVAL`] index `i | j << 1 | r1 << 2 | r2 << 3` with
/// the hash bits left out of `r_ij` (the kernel XORs them in), indexed by
/// `(i | j << 1) << 5 | z` for the control bits `z` (five bits): `r1 = z0 ^
/// z2 i ^ z4 (i ^ j)`, `r2 = z1 ^ z3 j ^ z4 (i ^ j)`.
pub(crate) static FUSED_EVAL_IDX: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut x = 0;
    while x < 128 {
        let (z, i, j) = (x & 31, (x >> 5) & 1, (x >> 6) & 1);
        let ij = i ^ j;
        let r1 = (z ^ ((z >> 2) & i) ^ ((z >> 4) & ij)) & 1;
        let r2 = ((z >> 1) ^ ((z >> 3) & j) ^ ((z >> 4) & ij)) & 1;
        t[x] = (i | (j << 1) | (r1 << 2) | (r2 << 3)) as u8;
        x += 1;
    }
    t
};

/// [`EvalEntry`] of every index.
pub(crate) static FUSED_EVAL: [EvalEntry; 16] = {
    const fn all(b: usize) -> u64 {
        0u64.wrapping_sub((b & 1) as u64)
    }
    let mut t = [EvalEntry {
        mc: [[0; 2]; 4],
        g01: [0; 2],
        g2: [0; 2],
    }; 16];
    let mut x = 0;
    while x < 16 {
        let m = EVAL_R[x];
        let mut k = 0;
        while k < 4 {
            t[x].mc[k] = [all((m[0] >> k) as usize), all((m[1] >> k) as usize)];
            k += 1;
        }
        let (i, j) = (x & 1, (x >> 1) & 1);
        t[x].g01 = [all(i), all(j)];
        t[x].g2 = [all(i ^ j), all(i ^ j)];
        x += 1;
    }
    t
};

/// All ones if bit `k` of `m` is set, else zero.
#[inline(always)]
fn mask(m: u8, k: u32) -> u64 {
    u64::from((m >> k) & 1).wrapping_neg()
}

/// The four XORs of subsets of a label's halves, `[0, X_L, X_R, X_L ^ X_R]`,
/// indexed by a 2-bit mask (bit 0 `X_L`, bit 1 `X_R`): a linear combination of
/// six halves is then three lookups instead of six masked terms.
#[inline(always)]
fn subsets(x: Block) -> [u64; 4] {
    [0, lo(x), hi(x), lo(x) ^ hi(x)]
}

/// The XOR of the halves of `a`, `b` (and `d`) that mask `m` selects (bits 0-1:
/// `a`'s, 2-3: `b`'s, 4-5: `d`'s), from their [`subsets`].
#[inline(always)]
fn lin(m: u8, a: &[u64; 4], b: &[u64; 4], d: &[u64; 4]) -> u64 {
    let m = usize::from(m);
    a[m & 3] ^ b[(m >> 2) & 3] ^ d[(m >> 4) & 3]
}

#[inline(always)]
fn lo(b: Block) -> u64 {
    b.0 as u64
}

#[inline(always)]
fn hi(b: Block) -> u64 {
    (b.0 >> 64) as u64
}

/// The mask bit of a hash output: `lsb(H_R)`.
#[inline(always)]
fn hbit(b: Block) -> u8 {
    (hi(b) & 1) as u8
}

/// The three tweaks of gate `g`: `3g`, `3g + 1`, `3g + 2`.
#[inline(always)]
fn tweak(g: u64, k: u128) -> Block {
    Block(3 * u128::from(g) + k)
}

/// The garbler's coins, two per gate, drawn from its [`Prg`] 64 gates at a
/// time.
struct Coins<'a> {
    prg: &'a mut Prg,
    bits: u128,
    left: u32,
}

impl Coins<'_> {
    /// `out[i] = r1 | r2 << 1` of the next `out.len()` gates: the coins
    /// [`Coins::two`] would give, in the same order.
    #[inline]
    fn fill(&mut self, out: &mut [u8]) {
        // What is left of the current block, then whole blocks of 64 gates
        // (no test per gate), then the start of a new block.
        let first = out.len().min(self.left as usize);
        let (head, rest) = out.split_at_mut(first);
        self.take(head);
        let (blocks, tail) = rest.as_chunks_mut::<64>();
        for b in blocks {
            let bits = self.prg.block().0;
            for (j, c) in b.iter_mut().enumerate() {
                *c = ((bits >> (2 * j)) & 3) as u8;
            }
        }
        if !tail.is_empty() {
            self.bits = self.prg.block().0;
            self.left = 64;
            self.take(tail);
        }
    }

    /// `out.len() <= self.left` gates' coins from the current block.
    #[inline]
    fn take(&mut self, out: &mut [u8]) {
        for c in out {
            *c = (self.bits & 3) as u8;
            self.bits >>= 2;
            self.left -= 1;
        }
    }

    #[inline(always)]
    fn two(&mut self) -> (u8, u8) {
        if self.left == 0 {
            self.bits = self.prg.block().0;
            self.left = 64;
        }
        let r = (self.bits & 1) as u8;
        let s = ((self.bits >> 1) & 1) as u8;
        self.bits >>= 2;
        self.left -= 1;
        (r, s)
    }
}

/// Garbles one AND gate from its six hashes `h` (`H(A, 3g)`, `H(A ^ R, 3g)`,
/// `H(B, 3g+1)`, `H(B ^ R, 3g+1)`, `H(A ^ B, 3g+2)`, `H(A ^ B ^ R, 3g+2)`, with
/// `A`, `B` the colour-0 labels), the [`subsets`] `d` of `R`, the colours
/// `(alpha, beta)` of truth 1 and the coins `(r1, r2)`: writes the table to
/// `t` and returns the output's zero label.
#[inline(always)]
fn garble_gate(
    h: &[Block],
    (a, b): (Block, Block),
    d: &[u64; 4],
    (al, be): (u8, u8),
    (r1, r2): (u8, u8),
    t: &mut [u8],
) -> Block {
    let m = GARBLE_LIN[usize::from(al | (be << 1) | (r1 << 2) | (r2 << 3))];
    let (sa, sb) = (subsets(a), subsets(b));
    let (ha0, ha1, hb0, hb1, hx0, hx1) = (h[0], h[1], h[2], h[3], h[4], h[5]);
    let cl = lin(m[0], &sa, &sb, d) ^ lo(ha0) ^ lo(hx0);
    let cr = lin(m[1], &sa, &sb, d) ^ lo(hb0) ^ lo(hx0);
    let g0 = lin(m[2], &sa, &sb, d) ^ lo(ha0) ^ lo(ha1);
    let g1 = lin(m[3], &sa, &sb, d) ^ lo(hb0) ^ lo(hb1);
    let g2 = lin(m[4], &sa, &sb, d) ^ lo(hx0) ^ lo(hx1);
    let z0 = r1 ^ hbit(ha0) ^ hbit(hx0);
    let z1 = r2 ^ hbit(hb0) ^ hbit(hx0);
    let z2 = al ^ hbit(ha0) ^ hbit(ha1);
    let z3 = be ^ hbit(hb0) ^ hbit(hb1);
    let z4 = al ^ be ^ hbit(hx0) ^ hbit(hx1);
    t[..8].copy_from_slice(&g0.to_le_bytes());
    t[8..16].copy_from_slice(&g1.to_le_bytes());
    t[16..24].copy_from_slice(&g2.to_le_bytes());
    t[24] = z0 | (z1 << 1) | (z2 << 2) | (z3 << 3) | (z4 << 4);
    Block(u128::from(cl) | (u128::from(cr) << 64))
}

/// Evaluates one AND gate from the active labels `wa`, `wb`, their three
/// hashes `h` (`H(wa, 3g)`, `H(wb, 3g+1)`, `H(wa ^ wb, 3g+2)`) and the table
/// `t`: the output's active label.
#[inline(always)]
fn eval_gate(h: &[Block], wa: Block, wb: Block, t: &[u8]) -> Block {
    let half = |k: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&t[8 * k..8 * k + 8]);
        u64::from_le_bytes(b)
    };
    let (g0, g1, g2) = (half(0), half(1), half(2));
    let z = t[24];
    let bit = |k: u32| (z >> k) & 1;
    let (i, j) = (u8::from(wa.lsb()), u8::from(wb.lsb()));
    let (ha, hb, hx) = (h[0], h[1], h[2]);
    let r1 = bit(0) ^ (i & bit(2)) ^ ((i ^ j) & bit(4)) ^ hbit(ha) ^ hbit(hx);
    let r2 = bit(1) ^ (j & bit(3)) ^ ((i ^ j) & bit(4)) ^ hbit(hb) ^ hbit(hx);
    let m = EVAL_R[usize::from(i | (j << 1) | (r1 << 2) | (r2 << 3))];
    let (sa, sb) = (subsets(wa), subsets(wb));
    const NONE: [u64; 4] = [0; 4];
    let ij = mask(i ^ j, 0);
    let cl = lo(ha) ^ lo(hx) ^ (g0 & mask(i, 0)) ^ (g2 & ij) ^ lin(m[0], &sa, &sb, &NONE);
    let cr = lo(hb) ^ lo(hx) ^ (g1 & mask(j, 0)) ^ (g2 & ij) ^ lin(m[1], &sa, &sb, &NONE);
    Block(u128::from(cl) | (u128::from(cr) << 64))
}

/// Garbles `prog` once, handing the tables to `sink` in chunks of at most
/// [`CHUNK_BYTES`]; otherwise as [`garble_to`].
pub fn garble<E>(
    prog: &Program,
    hasher: &Hasher,
    delta: Block,
    prg: &mut Prg,
    labels: &mut [Block],
    gate_counter: &mut u64,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut chunks = Chunks {
        buf: vec![0u8; CHUNK_BYTES],
        fill: 0,
        to: sink,
    };
    garble_to(prog, hasher, delta, prg, labels, gate_counter, &mut chunks)?;
    chunks.finish()
}

/// Garbles `prog` once with three-halves, as [`crate::gc::garble_to`] does
/// with half-gates: `labels` holds the zero labels of the input slots on
/// entry and of every slot on return, `gate_counter` (the session's AND
/// counter) advances by the AND gates, and the tables ([`TABLE_BYTES`] per
/// AND) go to `sink` in circuit order. `prg` supplies the two secret coins
/// per gate; it must be the garbler's own secret randomness.
pub fn garble_to<S: TableSink + ?Sized>(
    prog: &Program,
    hasher: &Hasher,
    delta: Block,
    prg: &mut Prg,
    labels: &mut [Block],
    gate_counter: &mut u64,
    sink: &mut S,
) -> Result<(), S::Error> {
    let mut l = Slots::new(prog, labels);
    l.set(ZERO_SLOT, Block::ZERO);
    l.set(ONE_SLOT, delta);
    let mut coins = Coins {
        prg,
        bits: 0,
        left: 0,
    };
    let d = subsets(delta);
    let flin = hasher.fused().then(|| FusedLin::new(delta));
    let mut cbuf = [0u8; FUSED_PIECE];
    let mut h = [Block::ZERO; 6 * BATCH];
    let mut tw = [Block::ZERO; 3 * BATCH];
    let mut ab = [(Block::ZERO, Block::ZERO, 0u8, 0u8); BATCH];
    let mut outs = [0u32; BATCH];
    for run in prog.runs() {
        match run {
            Run::Ands(run) => {
                // The fused kernels count tweaks in 64 bits.
                let fits = gate_counter
                    .checked_add(run.len() as u64)
                    .is_some_and(|end| end < u64::MAX / 3);
                if let Some(f) = flin.as_ref().filter(|_| fits) {
                    // The whole run in the fused kernel, one piece per stretch
                    // of room in the sink (and of the coin buffer).
                    let mut rest = run;
                    while !rest.is_empty() {
                        let k = rest.len().min(sink.room() / TABLE_BYTES).min(FUSED_PIECE);
                        let (now, later) = rest.split_at(k);
                        coins.fill(&mut cbuf[..k]);
                        let ctr = *gate_counter;
                        sink.put(k * TABLE_BYTES, &mut |tables| {
                            hasher.garble_run_3h(f, delta, l.l, now, &cbuf[..k], ctr, tables);
                        })?;
                        *gate_counter += k as u64;
                        rest = later;
                    }
                    continue;
                }
                for chunk in run.chunks(BATCH) {
                    let k = chunk.len();
                    for (i, &[a, b, o]) in chunk.iter().enumerate() {
                        let (a0, b0) = (l.get(a), l.get(b));
                        let (pa, pb) = (a0.lsb(), b0.lsb());
                        let ca = a0 ^ delta.select(pa);
                        let cb = b0 ^ delta.select(pb);
                        ab[i] = (ca, cb, u8::from(!pa), u8::from(!pb));
                        outs[i] = o;
                        let x = ca ^ cb;
                        h[6 * i..6 * i + 6].copy_from_slice(&[
                            ca,
                            ca ^ delta,
                            cb,
                            cb ^ delta,
                            x,
                            x ^ delta,
                        ]);
                        let g = *gate_counter + i as u64;
                        tw[3 * i..3 * i + 3].copy_from_slice(&[
                            tweak(g, 0),
                            tweak(g, 1),
                            tweak(g, 2),
                        ]);
                    }
                    hasher.hash_pairs(&mut h[..6 * k], &tw[..3 * k]);
                    sink.put(k * TABLE_BYTES, &mut |tables| {
                        for (i, t) in tables.chunks_exact_mut(TABLE_BYTES).enumerate() {
                            let (ca, cb, al, be) = ab[i];
                            let c = garble_gate(
                                &h[6 * i..6 * i + 6],
                                (ca, cb),
                                &d,
                                (al, be),
                                coins.two(),
                                t,
                            );
                            l.set(outs[i], c);
                        }
                    })?;
                    *gate_counter += k as u64;
                }
            }
            Run::Xors(run) => l.xor_run(run),
        }
    }
    Ok(())
}

/// Evaluates `prog` once with three-halves, as [`crate::gc::evaluate`] does
/// with half-gates: `labels` holds the active labels of the input slots on
/// entry and of every slot on return, `gate_counter` must match the
/// garbler's, and tables ([`TABLE_BYTES`] per AND) are pulled from `source`
/// in chunks of at most [`CHUNK_BYTES`].
pub fn evaluate<E>(
    prog: &Program,
    hasher: &Hasher,
    labels: &mut [Block],
    gate_counter: &mut u64,
    source: &mut TableSource<'_, E>,
) -> Result<(), E> {
    let mut l = Slots::new(prog, labels);
    l.set(ZERO_SLOT, Block::ZERO);
    l.set(ONE_SLOT, Block::ZERO);
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut remaining = prog.and_gates() as usize * TABLE_BYTES;
    let mut pos = CHUNK_BYTES;
    let mut avail = 0usize;
    let mut h = [Block::ZERO; 3 * BATCH];
    let mut tw = [Block::ZERO; 3 * BATCH];
    let mut ws = [(Block::ZERO, Block::ZERO); BATCH];
    let mut outs = [0u32; BATCH];
    let fused = hasher.fused();
    for run in prog.runs() {
        match run {
            Run::Ands(run) => {
                let fits = gate_counter
                    .checked_add(run.len() as u64)
                    .is_some_and(|end| end < u64::MAX / 3);
                if fused && fits {
                    let mut reader = TableReader {
                        buf: &mut buf,
                        pos: &mut pos,
                        avail: &mut avail,
                        remaining: &mut remaining,
                        source,
                    };
                    reader.in_pieces(run, TABLE_BYTES, gate_counter, |now, g, tables| {
                        hasher.eval_run_3h(l.l, now, g, tables);
                    })?;
                    continue;
                }
                for chunk in run.chunks(BATCH) {
                    let k = chunk.len();
                    if pos + k * TABLE_BYTES > avail {
                        refill(&mut buf, &mut pos, &mut avail, &mut remaining, source)?;
                    }
                    let tables = &buf[pos..pos + k * TABLE_BYTES];
                    pos += k * TABLE_BYTES;
                    for (i, &[a, b, o]) in chunk.iter().enumerate() {
                        let (wa, wb) = (l.get(a), l.get(b));
                        ws[i] = (wa, wb);
                        outs[i] = o;
                        h[3 * i..3 * i + 3].copy_from_slice(&[wa, wb, wa ^ wb]);
                        let g = *gate_counter + i as u64;
                        tw[3 * i..3 * i + 3].copy_from_slice(&[
                            tweak(g, 0),
                            tweak(g, 1),
                            tweak(g, 2),
                        ]);
                    }
                    hasher.hash(&mut h[..3 * k], &tw[..3 * k]);
                    for (i, t) in tables.chunks_exact(TABLE_BYTES).enumerate() {
                        let (wa, wb) = ws[i];
                        l.set(outs[i], eval_gate(&h[3 * i..3 * i + 3], wa, wb, t));
                    }
                    *gate_counter += k as u64;
                }
            }
            Run::Xors(run) => l.xor_run(run),
        }
    }
    Ok(())
}

/// Whether the fused kernels may take gate `gate` alone: they count tweaks in
/// 64 bits (as the `fits` of [`garble_to`] for a run of one gate).
#[inline(always)]
fn one_fits(gate: u64) -> bool {
    gate.checked_add(1).is_some_and(|end| end < u64::MAX / 3)
}

/// The garbler of one AND gate at a time, for a circuit that is emitted gate
/// by gate ([`crate::stream::StreamGarbler`]): the same tables as
/// [`garble_to`] (the fused kernel on a run of one gate where the CPU has
/// VAES, the generic formulas elsewhere), with the coins drawn two per gate
/// from the caller's [`Prg`] 64 gates a block, as [`garble_to`] draws them.
pub(crate) struct GateGarbler {
    delta: Block,
    /// [`subsets`] of `delta`, for the generic formulas.
    d: [u64; 4],
    /// The fused kernels' tables for `delta`; `None` without VAES.
    lin: Option<Box<FusedLin>>,
    /// Coins drawn and not yet used (two bits per gate), and how many gates'.
    bits: u128,
    left: u32,
}

impl GateGarbler {
    /// A garbler under offset `delta` (odd) for gates hashed by `hasher`.
    pub(crate) fn new(hasher: &Hasher, delta: Block) -> GateGarbler {
        GateGarbler {
            delta,
            d: subsets(delta),
            lin: hasher.fused().then(|| Box::new(FusedLin::new(delta))),
            bits: 0,
            left: 0,
        }
    }

    /// Garbles gate `gate` (the session's AND counter) with input zero labels
    /// `a0`, `b0`: writes its [`TABLE_BYTES`] to `t` and returns the output's
    /// zero label. `prg` is the garbler's secret randomness (the coins).
    #[inline]
    pub(crate) fn garble(
        &mut self,
        hasher: &Hasher,
        prg: &mut Prg,
        (a0, b0): (Block, Block),
        gate: u64,
        t: &mut [u8],
    ) -> Block {
        let mut coins = Coins {
            prg,
            bits: self.bits,
            left: self.left,
        };
        let (r1, r2) = coins.two();
        (self.bits, self.left) = (coins.bits, coins.left);
        let delta = self.delta;
        if let Some(f) = self.lin.as_deref().filter(|_| one_fits(gate)) {
            let mut l = [a0, b0, Block::ZERO, Block::ZERO];
            hasher.garble_run_3h(f, delta, &mut l, &[[0, 1, 2]], &[r1 | (r2 << 1)], gate, t);
            return l[2];
        }
        let (pa, pb) = (a0.lsb(), b0.lsb());
        let ca = a0 ^ delta.select(pa);
        let cb = b0 ^ delta.select(pb);
        let x = ca ^ cb;
        let mut h = [ca, ca ^ delta, cb, cb ^ delta, x, x ^ delta];
        hasher.hash_pairs(&mut h, &[tweak(gate, 0), tweak(gate, 1), tweak(gate, 2)]);
        let colours = (u8::from(!pa), u8::from(!pb));
        garble_gate(&h, (ca, cb), &self.d, colours, (r1, r2), t)
    }
}

/// Evaluates gate `gate` (the session's AND counter) alone from the active
/// labels `wa`, `wb` and its [`TABLE_BYTES`] `t`: the output's active label,
/// as [`evaluate`] computes it (the fused kernel on a run of one gate where
/// the CPU has VAES).
#[inline]
pub(crate) fn eval_one(hasher: &Hasher, wa: Block, wb: Block, gate: u64, t: &[u8]) -> Block {
    if hasher.fused() && one_fits(gate) {
        let mut l = [wa, wb, Block::ZERO, Block::ZERO];
        hasher.eval_run_3h(&mut l, &[[0, 1, 2]], gate, t);
        return l[2];
    }
    let mut h = [wa, wb, wa ^ wb];
    hasher.hash(&mut h, &[tweak(gate, 0), tweak(gate, 1), tweak(gate, 2)]);
    eval_gate(&h, wa, wb, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{Circuit, bits_from_bytes};
    use crate::gc::tests::{all_kinds_circuit, hashers_of};
    use crate::gc::{CheckFailed, decode, decode_bits, output_check, verify_check};
    use crate::hash::{Backend, GcHash};
    use crate::library;
    use crate::scheme::Scheme;

    /// One gate, every case: for random labels, every colour of the zero
    /// labels, every pair of coins and every row `(i, j)` the evaluator can
    /// be in, the evaluator's label is `C ^ [truth a and truth b] R`. The
    /// control bits decode to the `r_ij` of the module documentation.
    #[test]
    fn one_gate_decodes_in_every_row_with_every_coin() {
        let mut prg = Prg::from_seed([9; 16]);
        for h in GcHash::ALL.into_iter().flat_map(hashers_of) {
            for _ in 0..50 {
                let mut delta = prg.block();
                delta.0 |= 1;
                let (a0, b0) = (prg.block(), prg.block());
                let g = prg.block().0 as u64 >> 4;
                for coins in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    let (pa, pb) = (a0.lsb(), b0.lsb());
                    let ca = a0 ^ delta.select(pa);
                    let cb = b0 ^ delta.select(pb);
                    let x = ca ^ cb;
                    let mut hs = [ca, ca ^ delta, cb, cb ^ delta, x, x ^ delta];
                    let (t0, t1, t2) = (tweak(g, 0), tweak(g, 1), tweak(g, 2));
                    h.hash(&mut hs, &[t0, t0, t1, t1, t2, t2]);
                    let mut t = [0u8; TABLE_BYTES];
                    let (al, be) = (u8::from(!pa), u8::from(!pb));
                    let c0 = garble_gate(&hs, (ca, cb), &subsets(delta), (al, be), coins, &mut t);
                    assert_eq!(t[24] >> 5, 0, "the high bits of the control byte are zero");
                    for (xa, xb) in [(false, false), (false, true), (true, false), (true, true)] {
                        let wa = a0 ^ delta.select(xa);
                        let wb = b0 ^ delta.select(xb);
                        let mut he = [wa, wb, wa ^ wb];
                        h.hash(&mut he, &[t0, t1, t2]);
                        let got = eval_gate(&he, wa, wb, &t);
                        assert!(got == c0 ^ delta.select(xa && xb), "{xa} {xb} {coins:?}");
                    }
                }
            }
        }
    }

    /// Gates one at a time ([`GateGarbler`], [`eval_one`]): every hasher of a
    /// hash (fused kernel, generic code) writes the same tables from the same
    /// coins, and the evaluator decodes every row, at counters near zero and
    /// near the fused kernels' limit (where the generic code takes over).
    #[test]
    fn gates_one_at_a_time_agree_on_every_hasher_and_decode() {
        for kind in GcHash::ALL {
            let hs = hashers_of(kind);
            let mut want: Option<Vec<u8>> = None;
            for h in &hs {
                let mut prg = Prg::from_seed([4; 16]);
                let mut delta = prg.block();
                delta.0 |= 1;
                let mut coins = Prg::from_seed([5; 16]);
                let mut gg = GateGarbler::new(h, delta);
                let mut all = Vec::new();
                // 70 gates: more than one block of coins.
                for (k, start) in [(0usize, 3u64), (70, u64::MAX / 3 - 40)] {
                    for i in 0..70u64 {
                        let g = start + i;
                        let (a0, b0) = (prg.block(), prg.block());
                        let mut t = [0u8; TABLE_BYTES];
                        let c0 = gg.garble(h, &mut coins, (a0, b0), g, &mut t);
                        all.extend_from_slice(&t);
                        for (xa, xb) in [(false, false), (false, true), (true, false), (true, true)]
                        {
                            let wa = a0 ^ delta.select(xa);
                            let wb = b0 ^ delta.select(xb);
                            let got = eval_one(h, wa, wb, g, &t);
                            assert!(
                                got == c0 ^ delta.select(xa && xb),
                                "{kind:?} fused {} gate {} ({xa}, {xb})",
                                h.fused(),
                                k + i as usize
                            );
                        }
                    }
                }
                match &want {
                    None => want = Some(all),
                    Some(w) => assert!(*w == all, "{kind:?} fused {}", h.fused()),
                }
            }
        }
    }

    /// The linear terms follow the paper's dicing: each row's `R_ij` is
    /// uniform over the coins whatever the colours of truth 1 are (the
    /// evaluator learns nothing about them from its own `R_ij`).
    #[test]
    fn each_row_sees_every_r_matrix_once_over_the_coins() {
        for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let mut want: Vec<Mat> = (0..4u8).map(|c| r_matrix(i, j, c & 1, c >> 1)).collect();
            want.sort();
            for (al, be) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                let mut got: Vec<Mat> = (0..4u8)
                    .map(|c| {
                        let (x1, x2) = r_bits(i, j, al, be, c & 1, c >> 1);
                        r_matrix(i, j, x1, x2)
                    })
                    .collect();
                got.sort();
                assert_eq!(got, want, "row ({i}, {j}), colours ({al}, {be})");
            }
        }
    }

    fn garble_all(p: &Program, h: &Hasher, delta: Block, g0: &[Block], ctr: u64) -> Vec<u8> {
        let (mut l, mut c, mut t) = (g0.to_vec(), ctr, Vec::new());
        let mut coins = Prg::from_seed([7; 16]);
        let _: Result<(), ()> = garble(p, h, delta, &mut coins, &mut l, &mut c, &mut |b| {
            t.extend_from_slice(b);
            Ok(())
        });
        assert_eq!(c, ctr + p.and_gates());
        t
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Random circuits of every gate kind garble and evaluate to the
        /// circuit's value in the clear, with every hasher (both hashes, the
        /// portable backend, AES-NI with and without VAES), at exactly
        /// [`TABLE_BYTES`] per AND.
        #[test]
        fn random_circuits_evaluate_like_plain(seed in proptest::prelude::any::<u64>(),
                                               gi in 0u32..5, ei in 0u32..5,
                                               n in 0u32..300, nout in 1u32..10) {
            let c = all_kinds_circuit(seed, gi, ei, n, nout);
            let p = Program::compile(&c);
            let mut prg = Prg::from_seed(seed.to_le_bytes().repeat(2).try_into().unwrap());
            for h in GcHash::ALL.into_iter().flat_map(hashers_of) {
                for _ in 0..2 {
                    let g: Vec<bool> = (0..gi).map(|_| prg.block().lsb()).collect();
                    let e: Vec<bool> = (0..ei).map(|_| prg.block().lsb()).collect();
                    let want = c.eval(&g, &e).unwrap();
                    let (got, bytes) = Scheme::ThreeHalves.simulate(&p, &h, &mut prg, &g, &e);
                    proptest::prop_assert_eq!(got, want);
                    proptest::prop_assert_eq!(bytes as u64, 25 * c.stats().and_gates());
                }
            }
        }

        /// Every hasher of one kind garbles the same tables from the same
        /// labels, counter and coins, and evaluates them to the same labels.
        #[test]
        fn hashers_agree(seed in proptest::prelude::any::<u64>(), n in 0u32..400,
                         start in proptest::prelude::any::<u32>(),
                         mitccrh in proptest::prelude::any::<bool>()) {
            let kind = if mitccrh { GcHash::Mitccrh } else { GcHash::FixedKey };
            let p = Program::compile(&all_kinds_circuit(seed, 4, 4, n, 3));
            let mut prg = Prg::from_seed([seed as u8; 16]);
            let mut delta = prg.block();
            delta.0 |= 1;
            let mut g0 = vec![Block::ZERO; p.label_capacity()];
            prg.fill(&mut g0);
            let hs = hashers_of(kind);
            let t0 = garble_all(&p, &hs[0], delta, &g0, u64::from(start));
            let mut e = g0.clone();
            for x in e.iter_mut().step_by(3) {
                *x ^= delta;
            }
            let mut first: Option<Vec<Block>> = None;
            for h in &hs {
                proptest::prop_assert!(garble_all(&p, h, delta, &g0, u64::from(start)) == t0);
                let (mut l, mut ctr, mut off) = (e.clone(), u64::from(start), 0usize);
                let _: Result<(), ()> = evaluate(&p, h, &mut l, &mut ctr, &mut |buf| {
                    buf.copy_from_slice(&t0[off..off + buf.len()]);
                    off += buf.len();
                    Ok(())
                });
                proptest::prop_assert_eq!(off, t0.len());
                match &first {
                    None => first = Some(l),
                    Some(f) => proptest::prop_assert!(*f == l),
                }
            }
        }
    }

    /// A sink that offers a fixed room and records the pieces it gets.
    struct Pieces {
        room: usize,
        bytes: Vec<u8>,
    }

    impl TableSink for Pieces {
        type Error = ();
        fn room(&self) -> usize {
            self.room
        }
        fn put(&mut self, n: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), ()> {
            assert!(n <= self.room && n.is_multiple_of(TABLE_BYTES) && n > 0);
            let at = self.bytes.len();
            // Stale bytes, as in a reused send buffer: `fill` must overwrite them.
            self.bytes.resize(at + n, 0xa5);
            fill(&mut self.bytes[at..]);
            Ok(())
        }
    }

    /// The table stream is the same whatever pieces the sink takes it in,
    /// and whatever chunks the evaluator reads it in.
    #[test]
    fn tables_are_the_same_in_any_pieces() {
        let p = Program::compile(&all_kinds_circuit(5, 4, 4, 3000, 4));
        let delta = Block(0x1234_5678_9abc_def1);
        let mut g0 = vec![Block::ZERO; p.label_capacity()];
        Prg::from_seed([4; 16]).fill(&mut g0);
        for h in GcHash::ALL.into_iter().flat_map(hashers_of) {
            let want = garble_all(&p, &h, delta, &g0, 7);
            assert_eq!(want.len() as u64, p.and_gates() * TABLE_BYTES as u64);
            for room in [TABLE_BYTES * BATCH, 1000, 1 << 20] {
                let mut s = Pieces {
                    room,
                    bytes: Vec::new(),
                };
                let (mut l, mut ctr) = (g0.clone(), 7);
                let mut coins = Prg::from_seed([7; 16]);
                garble_to(&p, &h, delta, &mut coins, &mut l, &mut ctr, &mut s).unwrap();
                assert!(s.bytes == want, "room {room}: tables differ");
            }
            // The evaluator, fed in odd-sized reads, ends with the same labels.
            let mut e = g0.clone();
            for x in e.iter_mut().step_by(2) {
                *x ^= delta;
            }
            let mut ends = Vec::new();
            for most in [1usize, 77, CHUNK_BYTES] {
                let (mut l, mut ctr, mut off) = (e.clone(), 7, 0usize);
                let _: Result<(), ()> = evaluate(&p, &h, &mut l, &mut ctr, &mut |buf| {
                    // The source must fill the buffer; it hands it over in pieces.
                    for piece in buf.chunks_mut(most) {
                        piece.copy_from_slice(&want[off..off + piece.len()]);
                        off += piece.len();
                    }
                    Ok(())
                });
                ends.push(l);
            }
            assert!(ends.iter().all(|x| *x == ends[0]));
        }
    }

    /// Garbles `c`, evaluates tables that `corrupt` may change, and decodes
    /// through the output check.
    fn run_checked(
        c: &Circuit,
        h: &Hasher,
        gi: &[bool],
        ei: &[bool],
        corrupt: &dyn Fn(&mut Vec<u8>),
    ) -> Result<Vec<bool>, CheckFailed> {
        let p = Program::compile(c);
        let mut prg = Prg::from_seed([0x55; 16]);
        let mut delta = prg.block();
        delta.0 |= 1;
        let mut gl = vec![Block::ZERO; p.label_capacity()];
        let mut el = gl.clone();
        for (&s, &x) in p
            .garbler_inputs
            .iter()
            .zip(gi)
            .chain(p.evaluator_inputs.iter().zip(ei))
        {
            gl[s as usize] = prg.block();
            el[s as usize] = gl[s as usize] ^ delta.select(x);
        }
        let mut tables = Vec::new();
        let _: Result<(), ()> = garble(&p, h, delta, &mut prg, &mut gl, &mut 3, &mut |b| {
            tables.extend_from_slice(b);
            Ok(())
        });
        corrupt(&mut tables);
        let outs: Vec<Block> = p.outputs.iter().map(|&s| gl[s as usize]).collect();
        let mut check = Vec::new();
        output_check(h, &outs, delta, 0, &mut check);
        let d = decode_bits(&p, &gl);
        let mut off = 0;
        let _: Result<(), ()> = evaluate(&p, h, &mut el, &mut 3, &mut |b| {
            b.copy_from_slice(&tables[off..off + b.len()]);
            off += b.len();
            Ok(())
        });
        let mine: Vec<Block> = p.outputs.iter().map(|&s| el[s as usize]).collect();
        verify_check(h, &mine, 0, &check)?;
        Ok(decode(&p, &el, &d))
    }

    /// A flipped bit in a half-ciphertext or in a control bit of a gate that
    /// every output depends on is caught by the output check (with AES-128:
    /// its last AND gates feed the outputs); the three unused bits of the
    /// control byte change nothing.
    #[test]
    fn a_corrupted_table_fails_the_output_check() {
        let c = library::aes128();
        let mut prg = Prg::from_seed([0x31; 16]);
        let mut gi = vec![0u8; 16];
        let mut ei = vec![0u8; 16];
        prg.bytes(&mut gi);
        prg.bytes(&mut ei);
        let (g, e) = (bits_from_bytes(&gi, 128), bits_from_bytes(&ei, 128));
        let want = c.eval(&g, &e).unwrap();
        for be in [Backend::Portable, Backend::AesNi] {
            let Ok(h) = Hasher::mitccrh(Block(5), be) else {
                continue;
            };
            assert_eq!(run_checked(&c, &h, &g, &e, &|_| {}), Ok(want.clone()));
            // The last gate's G0, G2 and each control bit it uses.
            for (byte, bit) in [
                (0usize, 3u8),
                (16, 0),
                (24, 0),
                (24, 1),
                (24, 2),
                (24, 3),
                (24, 4),
            ] {
                let r = run_checked(&c, &h, &g, &e, &|t: &mut Vec<u8>| {
                    let at = t.len() - TABLE_BYTES + byte;
                    t[at] ^= 1 << bit;
                });
                // A flipped control bit that the evaluator's row does not use
                // changes nothing; every other flip must fail the check.
                assert!(
                    r.is_err() || r == Ok(want.clone()),
                    "{be:?} {byte} {bit}: {r:?}"
                );
            }
            // Corrupting every gate's G0 is never accepted as a wrong output.
            let r = run_checked(&c, &h, &g, &e, &|t: &mut Vec<u8>| {
                for x in t.iter_mut().step_by(TABLE_BYTES) {
                    *x ^= 0x10;
                }
            });
            assert!(r.is_err(), "{be:?}: {r:?}");
            // Nor every gate's first control bit, which every row uses.
            let r = run_checked(&c, &h, &g, &e, &|t: &mut Vec<u8>| {
                for x in t.iter_mut().skip(24).step_by(TABLE_BYTES) {
                    *x ^= 1;
                }
            });
            assert!(r.is_err(), "{be:?}: {r:?}");
            let r = run_checked(&c, &h, &g, &e, &|t: &mut Vec<u8>| {
                for x in t.iter_mut().skip(24).step_by(TABLE_BYTES) {
                    *x ^= 0xe0;
                }
            });
            assert_eq!(r, Ok(want.clone()), "{be:?}: the unused bits are ignored");
        }
    }

    /// [`FusedLin`] is [`GARBLE_LIN`] over the zero labels: the fused kernels'
    /// formula, written out here in scalar code, gives the table and output
    /// label of [`garble_gate`] for random labels and hashes, every colour and
    /// every coin.
    #[test]
    fn fused_tables_give_the_gates_of_garble_lin() {
        let mut prg = Prg::from_seed([0x17; 16]);
        for _ in 0..200 {
            let mut delta = prg.block();
            delta.0 |= 1;
            let f = FusedLin::new(delta);
            let hs: [Block; 6] = core::array::from_fn(|_| prg.block());
            let (a0, b0) = (prg.block(), prg.block());
            for coin in 0..4u8 {
                let (pa, pb) = (a0.lsb(), b0.lsb());
                let (ca, cb) = (a0 ^ delta.select(pa), b0 ^ delta.select(pb));
                let mut want = [0u8; TABLE_BYTES];
                let (al, be) = (u8::from(!pa), u8::from(!pb));
                let c_want = garble_gate(
                    &hs,
                    (ca, cb),
                    &subsets(delta),
                    (al, be),
                    (coin & 1, coin >> 1),
                    &mut want,
                );
                // The kernels' inputs: (A | B), (A | B) ^ (R | R), (X | X ^ R).
                let p = usize::from(pa) | usize::from(pb) << 1;
                let two = |l: Block, r: Block, m: &[u64; 4]| {
                    (
                        l ^ Block(u128::from(m[0]) | u128::from(m[1]) << 64),
                        r ^ Block(u128::from(m[2]) | u128::from(m[3]) << 64),
                    )
                };
                assert!(two(a0, b0, &f.ab[p]) == (ca, cb));
                assert!(two(a0 ^ b0, a0 ^ b0, &f.x[p]) == (ca ^ cb, ca ^ cb ^ delta));
                // The kernels' outputs.
                let e = &f.e[p | usize::from(coin) << 2];
                let q = [lo(a0), hi(a0), lo(b0), hi(b0)];
                let [ha0, ha1, hb0, hb1, hx0, hx1] = hs;
                let mut s = [lo(ha0) ^ lo(ha1), lo(hb0) ^ lo(hb1), lo(hx0) ^ lo(hx1)];
                let mut c = [lo(ha0) ^ lo(hx0), lo(hb0) ^ lo(hx0)];
                for (j, sj) in s.iter_mut().enumerate() {
                    *sj ^= e.rs[j];
                    for (qk, m) in q.iter().zip(&e.ms) {
                        *sj ^= qk & m[j];
                    }
                }
                for (j, cj) in c.iter_mut().enumerate() {
                    *cj ^= e.rc[j];
                    for (qk, m) in q.iter().zip(&e.mc) {
                        *cj ^= qk & m[j];
                    }
                }
                assert_eq!(e.rs[3] | e.ms.iter().fold(0, |a, m| a | m[3]), 0);
                let z = (hbit(ha0) ^ hbit(hx0))
                    | (hbit(hb0) ^ hbit(hx0)) << 1
                    | (hbit(ha0) ^ hbit(ha1)) << 2
                    | (hbit(hb0) ^ hbit(hb1)) << 3
                    | (hbit(hx0) ^ hbit(hx1)) << 4;
                let mut got = [0u8; TABLE_BYTES];
                for (j, x) in s.iter().enumerate() {
                    got[8 * j..8 * j + 8].copy_from_slice(&x.to_le_bytes());
                }
                got[24] = z ^ e.z as u8;
                assert_eq!(got, want, "coin {coin}");
                assert!(Block(u128::from(c[0]) | u128::from(c[1]) << 64) == c_want);
            }
        }
    }

    /// Garbles `p` from zero labels `g0` with `h`, the tables going to a sink
    /// of fixed room: the tables and all labels after.
    fn garble_in_pieces(
        p: &Program,
        h: &Hasher,
        delta: Block,
        g0: &[Block],
        start: u64,
        room: usize,
    ) -> (Vec<u8>, Vec<Block>) {
        let mut s = Pieces {
            room,
            bytes: Vec::new(),
        };
        let (mut l, mut ctr) = (g0.to_vec(), start);
        let mut coins = Prg::from_seed([0x29; 16]);
        garble_to(p, h, delta, &mut coins, &mut l, &mut ctr, &mut s).unwrap();
        assert_eq!(ctr, start + p.and_gates());
        (s.bytes, l)
    }

    /// The fused kernels (their AVX-512VL and AVX2 instances, where the CPU
    /// has them) garble exactly the tables and labels of the generic code
    /// (the portable hash, and AES-NI without VAES), and evaluate them to the
    /// same labels, with both hashes, on the
    /// library circuits and on random circuits, whatever pieces the sink
    /// takes the tables in (or the evaluator reads them in), and with a counter that crosses the limit below
    /// which the kernels count tweaks in 64 bits (the runs past it go to the
    /// generic code). On a CPU without VAES there is nothing to compare: the
    /// test says so.
    #[test]
    fn fused_kernels_match_the_generic_code() {
        let mut circuits = vec![
            library::aes128(),
            library::sha256_compress(),
            library::mul(64),
        ];
        for seed in 0..6u64 {
            circuits.push(all_kinds_circuit(seed, 4, 4, 40 + 300 * seed as u32, 5));
        }
        let mut prg = Prg::from_seed([0x61; 16]);
        for kind in GcHash::ALL {
            let hs = hashers_of(kind);
            let (fused, generic): (Vec<&Hasher>, Vec<&Hasher>) = hs.iter().partition(|h| h.fused());
            if fused.is_empty() {
                eprintln!("skipped: no VAES on this CPU, so no fused kernel to compare");
                return;
            }
            assert!(!generic.is_empty());
            for c in &circuits {
                let p = Program::compile(c);
                let mut delta = prg.block();
                delta.0 |= 1;
                let mut g0 = vec![Block::ZERO; p.label_capacity()];
                prg.fill(&mut g0);
                for start in [7, u64::MAX / 3 - p.and_gates() / 2] {
                    let want = garble_in_pieces(&p, generic[0], delta, &g0, start, 1 << 20);
                    // The evaluator: active labels of random truth values, the
                    // tables read in pieces of 1, 77 and 64 KiB bytes.
                    let mut e = g0.clone();
                    for x in e.iter_mut() {
                        if prg.block().lsb() {
                            *x ^= delta;
                        }
                    }
                    let mut ends = Vec::new();
                    for h in generic.iter().chain(&fused) {
                        for most in [1usize, 77, CHUNK_BYTES] {
                            let (mut l, mut ctr, mut off) = (e.clone(), start, 0usize);
                            let _: Result<(), ()> = evaluate(&p, h, &mut l, &mut ctr, &mut |buf| {
                                for piece in buf.chunks_mut(most) {
                                    piece.copy_from_slice(&want.0[off..off + piece.len()]);
                                    off += piece.len();
                                }
                                Ok(())
                            });
                            assert_eq!((off, ctr), (want.0.len(), start + p.and_gates()));
                            ends.push((l, h.fused(), most));
                        }
                    }
                    for (l, f, most) in &ends {
                        assert!(
                            *l == ends[0].0,
                            "{kind} evaluator fused={f} reads of {most}"
                        );
                    }
                    // Each evaluator label is the garbler's zero label, or it XOR R.
                    let (gl, el) = (&want.1, &ends[0].0);
                    assert!(gl.iter().zip(el).all(|(g, e)| *g == *e || *g ^ delta == *e));
                    for h in generic.iter().chain(&fused) {
                        for room in [TABLE_BYTES * BATCH, 1000, 1 << 20] {
                            let got = garble_in_pieces(&p, h, delta, &g0, start, room);
                            assert!(
                                got == want,
                                "{kind} {:?} fused={} room {room} start {start}",
                                h.backend(),
                                h.fused()
                            );
                        }
                    }
                }
            }
        }
    }

    /// The library circuits garble correctly at 25 bytes per AND.
    #[test]
    fn library_circuits_garble_correctly() {
        let mut prg = Prg::from_seed([3; 16]);
        for h in GcHash::ALL.into_iter().flat_map(hashers_of) {
            for c in [
                library::aes128(),
                library::sha256_compress(),
                library::mul(64),
            ] {
                let p = Program::compile(&c);
                let mut gi = vec![0u8; c.garbler_input_bits().div_ceil(8)];
                let mut ei = vec![0u8; c.evaluator_input_bits().div_ceil(8)];
                prg.bytes(&mut gi);
                prg.bytes(&mut ei);
                let g = bits_from_bytes(&gi, c.garbler_input_bits());
                let e = bits_from_bytes(&ei, c.evaluator_input_bits());
                let (got, bytes) = Scheme::ThreeHalves.simulate(&p, &h, &mut prg, &g, &e);
                assert_eq!(got, c.eval(&g, &e).unwrap(), "{:?}", h.backend());
                assert_eq!(bytes as u64, 25 * c.stats().and_gates());
            }
        }
    }
}
