//! Circuits as generators: Rust code that emits gates into a [`Gen`], run
//! once per purpose instead of stored.
//!
//! A [`Circuit`] holds every gate (12 bytes each in memory, more once
//! compiled), which is fine for AES but not for the Ed25519 signature
//! (tens of millions of AND gates, well over a hundred million gates). A
//! generator is the same circuit as code: it is written once, generically
//! over [`Gen`], and each backend gives the gates a meaning:
//!
//! * [`Plain`]: plain evaluation on `bool` (tests, references);
//! * [`Counter`]: gate counts, AND depth and a structural digest, without
//!   storing anything ([`stats`]);
//! * [`BuilderGen`]: a flat [`Circuit`] through the
//!   [`Builder`](crate::builder::Builder) (small sub-circuits, Bristol
//!   Fashion, cross-checks with the compiled engine);
//! * the streaming garbler and evaluator of [`crate::stream`], which garble
//!   or evaluate each gate the moment it is emitted: memory is the live
//!   values of the Rust code (labels in `Vec`s that are dropped when they go
//!   out of scope), never the gate list.
//!
//! Constants are folded here, in the provided methods of [`Gen`], before a
//! backend sees a gate: every backend therefore sees exactly the same gate
//! stream, in the same order, so the garbler's and the evaluator's AND
//! counters (the hash tweaks) agree by construction. The fold never
//! compares two non-constant values (labels of equal wires look different
//! to the two parties), only constants.
//!
//! The module is split by role: [`Gen`] and [`Generator`] here, the
//! multiplication and squaring algorithms in `arith`, compiled sub-circuits in
//! `sub`, and the generic backends in `backends`.
//!
//! Words are `Vec<W<L>>`, least significant bit first. Costs in AND gates:
//! addition and subtraction one per bit (none for the top bit when its
//! carry is dropped), a multiplexer one per bit, schoolbook multiplication
//! about `2 n m`, Karatsuba above a threshold, squaring about half a
//! multiplication.

mod arith;
mod backends;
mod bristol;
mod sub;

pub use arith::naf;
pub use backends::{BuilderGen, CountWire, Counter, Plain, plain_bits, plain_word};
pub use bristol::write_bristol;
pub use sub::Sub;

use sha2::{Digest, Sha256};

use crate::circuit::{Circuit, CircuitError, Party, Stats};

use self::arith::{mul_rec, square_rec};

/// A value in a circuit under construction: a public constant or a wire of
/// the backend (a label, a plain bit, a wire id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum W<L> {
    /// A public constant.
    C(bool),
    /// A wire.
    V(L),
}

impl<L: Copy> W<L> {
    /// The constant 0.
    pub const ZERO: W<L> = W::C(false);
    /// The constant 1.
    pub const ONE: W<L> = W::C(true);

    /// `Some(value)` for a constant.
    pub fn as_constant(self) -> Option<bool> {
        match self {
            W::C(b) => Some(b),
            W::V(_) => None,
        }
    }
}

/// A word: bits, least significant first.
pub type Word<L> = Vec<W<L>>;

/// Multiplications of at least this many bits (the shorter operand) use
/// Karatsuba; below, schoolbook.
pub const KARATSUBA_THRESHOLD: usize = 20;

/// The bits of a little-endian byte string as constants.
pub fn const_bytes<L: Copy>(bytes: &[u8]) -> Word<L> {
    (0..bytes.len() * 8)
        .map(|i| W::C((bytes[i / 8] >> (i % 8)) & 1 == 1))
        .collect()
}

/// The low `width` bits of `v` as constants.
pub fn const_u64<L: Copy>(v: u64, width: usize) -> Word<L> {
    (0..width)
        .map(|i| W::C(i < 64 && (v >> i) & 1 == 1))
        .collect()
}

/// Why a circuit refused the values of a mid-circuit reveal ([`Gen::reveal`]): for the
/// Ed25519 signature, a projective `R` whose `Z` is 0 (a party's blinding share was 0) or
/// that is not on the curve. The run ends with it; nothing after the reveal is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the circuit refused a revealed value: {0}")]
pub struct Refused(pub &'static str);

/// A gate sink with constant folding and word arithmetic. Implement the
/// three `*_raw` methods (gates on two non-constant wires) and the three
/// of a mid-circuit reveal; circuits call the provided methods.
pub trait Gen {
    /// A non-constant wire of this backend.
    type L: Copy;

    /// An XOR gate.
    fn xor_raw(&mut self, a: Self::L, b: Self::L) -> Self::L;
    /// An AND gate.
    fn and_raw(&mut self, a: Self::L, b: Self::L) -> Self::L;
    /// An INV gate.
    fn not_raw(&mut self, a: Self::L) -> Self::L;

    /// Reveals `w` to both parties in the middle of the circuit and returns its values;
    /// `None` where this backend does not know them (counting: the circuit's structure
    /// must not depend on them), cannot reveal (a flat circuit), or has already failed.
    /// In a session the garbler sends the decoding bits and the evaluator answers with the
    /// values: one round trip, `w.len()` bits each way, after every AND table before it.
    fn reveal(&mut self, w: &[W<Self::L>]) -> Option<Vec<bool>>;

    /// Bits both parties know (a public function of revealed values) as wires, never as
    /// constants: the gates that use them, and so the circuit's structure and AND count,
    /// do not depend on their values. (A garbler's zero label for public bit `b` is
    /// `b R`, the evaluator's active label 0, as for a constant input of a sub-circuit.)
    fn public(&mut self, bits: &[bool]) -> Word<Self::L>;

    /// The circuit cannot go on with the values [`Gen::reveal`] returned: the run ends
    /// with `why` (no further gate is garbled, evaluated or sent; the first refusal is
    /// kept).
    fn refuse(&mut self, why: Refused);

    /// `a ^ b`
    #[inline]
    fn xor(&mut self, a: W<Self::L>, b: W<Self::L>) -> W<Self::L> {
        match (a, b) {
            (W::C(x), W::C(y)) => W::C(x ^ y),
            (W::C(false), v) | (v, W::C(false)) => v,
            (W::C(true), W::V(v)) | (W::V(v), W::C(true)) => W::V(self.not_raw(v)),
            (W::V(x), W::V(y)) => W::V(self.xor_raw(x, y)),
        }
    }

    /// `a & b`
    #[inline]
    fn and(&mut self, a: W<Self::L>, b: W<Self::L>) -> W<Self::L> {
        match (a, b) {
            (W::C(false), _) | (_, W::C(false)) => W::C(false),
            (W::C(true), v) | (v, W::C(true)) => v,
            (W::V(x), W::V(y)) => W::V(self.and_raw(x, y)),
        }
    }

    /// `!a`
    #[inline]
    fn not(&mut self, a: W<Self::L>) -> W<Self::L> {
        match a {
            W::C(x) => W::C(!x),
            W::V(v) => W::V(self.not_raw(v)),
        }
    }

    /// `a | b` (one AND).
    fn or(&mut self, a: W<Self::L>, b: W<Self::L>) -> W<Self::L> {
        let x = self.xor(a, b);
        let y = self.and(a, b);
        self.xor(x, y)
    }

    /// Majority of three bits (one AND).
    #[inline]
    fn maj(&mut self, a: W<Self::L>, b: W<Self::L>, c: W<Self::L>) -> W<Self::L> {
        let ac = self.xor(a, c);
        let bc = self.xor(b, c);
        let t = self.and(ac, bc);
        self.xor(t, c)
    }

    /// `s ? b : a` (one AND).
    #[inline]
    fn mux(&mut self, s: W<Self::L>, a: W<Self::L>, b: W<Self::L>) -> W<Self::L> {
        let d = self.xor(a, b);
        let t = self.and(s, d);
        self.xor(a, t)
    }

    /// Bitwise XOR of two words (the shorter one zero-extended).
    fn xor_w(&mut self, a: &[W<Self::L>], b: &[W<Self::L>]) -> Word<Self::L> {
        let n = a.len().max(b.len());
        (0..n)
            .map(|i| {
                let x = a.get(i).copied().unwrap_or(W::ZERO);
                let y = b.get(i).copied().unwrap_or(W::ZERO);
                self.xor(x, y)
            })
            .collect()
    }

    /// Bitwise AND of two words of equal width.
    fn and_w(&mut self, a: &[W<Self::L>], b: &[W<Self::L>]) -> Word<Self::L> {
        a.iter().zip(b).map(|(&x, &y)| self.and(x, y)).collect()
    }

    /// Bitwise NOT.
    fn not_w(&mut self, a: &[W<Self::L>]) -> Word<Self::L> {
        a.iter().map(|&x| self.not(x)).collect()
    }

    /// `s ? b : a` word-wise (one AND per bit).
    fn mux_w(&mut self, s: W<Self::L>, a: &[W<Self::L>], b: &[W<Self::L>]) -> Word<Self::L> {
        a.iter().zip(b).map(|(&x, &y)| self.mux(s, x, y)).collect()
    }

    /// Conditional swap: `(b, a)` when `s`, else `(a, b)` (one AND per bit).
    fn cswap(
        &mut self,
        s: W<Self::L>,
        a: &[W<Self::L>],
        b: &[W<Self::L>],
    ) -> (Word<Self::L>, Word<Self::L>) {
        let mut x = Vec::with_capacity(a.len());
        let mut y = Vec::with_capacity(b.len());
        for (&p, &q) in a.iter().zip(b) {
            let d = self.xor(p, q);
            let t = self.and(s, d);
            x.push(self.xor(p, t));
            y.push(self.xor(q, t));
        }
        (x, y)
    }

    /// `a + b + cin` in the width of `a` (`b` zero-extended or truncated)
    /// and the carry out. One AND per bit.
    fn add_carry(
        &mut self,
        a: &[W<Self::L>],
        b: &[W<Self::L>],
        cin: W<Self::L>,
    ) -> (Word<Self::L>, W<Self::L>) {
        let mut c = cin;
        let mut out = Vec::with_capacity(a.len());
        for (i, &x) in a.iter().enumerate() {
            let y = b.get(i).copied().unwrap_or(W::ZERO);
            let s = self.xor(x, y);
            out.push(self.xor(s, c));
            c = self.maj(x, y, c);
        }
        (out, c)
    }

    /// `a + b` modulo `2^a.len()` (no AND for the top bit).
    fn add(&mut self, a: &[W<Self::L>], b: &[W<Self::L>]) -> Word<Self::L> {
        let Some((&top, low)) = a.split_last() else {
            return Vec::new();
        };
        let (mut s, c) = self.add_carry(low, b, W::ZERO);
        let y = b.get(low.len()).copied().unwrap_or(W::ZERO);
        let t = self.xor(top, y);
        s.push(self.xor(t, c));
        s
    }

    /// `a + b` in `max(len) + 1` bits.
    fn add_wide(&mut self, a: &[W<Self::L>], b: &[W<Self::L>]) -> Word<Self::L> {
        let (a, b) = if a.len() >= b.len() { (a, b) } else { (b, a) };
        let (mut s, c) = self.add_carry(a, b, W::ZERO);
        s.push(c);
        s
    }

    /// `a - b - bin` in the width of `a`, and the borrow out (1 when the
    /// true result is negative). One AND per bit.
    fn sub_borrow(
        &mut self,
        a: &[W<Self::L>],
        b: &[W<Self::L>],
        bin: W<Self::L>,
    ) -> (Word<Self::L>, W<Self::L>) {
        let mut bo = bin;
        let mut out = Vec::with_capacity(a.len());
        for (i, &x) in a.iter().enumerate() {
            let y = b.get(i).copied().unwrap_or(W::ZERO);
            let d = self.xor(x, y);
            out.push(self.xor(d, bo));
            let nx = self.not(x);
            bo = self.maj(nx, y, bo);
        }
        (out, bo)
    }

    /// `a - b` modulo `2^a.len()` (no AND for the top bit).
    fn sub(&mut self, a: &[W<Self::L>], b: &[W<Self::L>]) -> Word<Self::L> {
        let Some((&top, low)) = a.split_last() else {
            return Vec::new();
        };
        let (mut d, bo) = self.sub_borrow(low, b, W::ZERO);
        let y = b.get(low.len()).copied().unwrap_or(W::ZERO);
        let t = self.xor(top, y);
        d.push(self.xor(t, bo));
        d
    }

    /// `a` if `a < m`, else `a - m` (same width; one subtraction and one
    /// multiplexer).
    fn cond_sub(&mut self, a: &[W<Self::L>], m: &[W<Self::L>]) -> Word<Self::L> {
        let (d, borrow) = self.sub_borrow(a, m, W::ZERO);
        self.mux_w(borrow, &d, a)
    }

    /// The full product (`a.len() + b.len()` bits): schoolbook below
    /// [`KARATSUBA_THRESHOLD`], Karatsuba above.
    fn mul(&mut self, a: &[W<Self::L>], b: &[W<Self::L>]) -> Word<Self::L> {
        mul_rec(self, a, b, KARATSUBA_THRESHOLD)
    }

    /// `a * a` (`2 a.len()` bits): Karatsuba's three half-size squares
    /// above the threshold, a schoolbook square (each cross product once)
    /// below.
    fn square(&mut self, a: &[W<Self::L>]) -> Word<Self::L> {
        square_rec(self, a, KARATSUBA_THRESHOLD)
    }

    /// `init ^ items[0] ^ items[1] ^ ...`, folded left to right (the gates of
    /// a long XOR chain, as in a public-table lookup). Backends may count
    /// such a chain in one step; the gates are those of the fold.
    fn xor_all(&mut self, init: W<Self::L>, items: &[W<Self::L>]) -> W<Self::L> {
        let mut acc = init;
        for &w in items {
            acc = self.xor(acc, w);
        }
        acc
    }

    /// The output bits of a lookup in a public table by a selector word `items`: bit `k`
    /// is `init ^ XOR of the items[j] whose bit is set in mask` for `bits[k] = (init,
    /// mask)` (bit `j % 64` of `mask[j / 64]` selects `items[j]`; bits past `items.len()`
    /// select nothing). The gates are those of [`Gen::xor_all`] over each bit's selected
    /// items in order ([`xor_select_fold`]); a counting backend may count them from the
    /// masks alone.
    fn xor_select(&mut self, items: &[W<Self::L>], bits: &[(bool, Vec<u64>)]) -> Word<Self::L>
    where
        Self: Sized,
    {
        xor_select_fold(self, items, bits)
    }

    /// A call of a sub-circuit that is compiled once and replayed: `f`
    /// emits its gates (the default, for plain evaluation, counting and
    /// Bristol output); the streaming garbler and evaluator instead run
    /// `sub`, `f` compiled into a [`Program`](crate::program::Program) (scheduled, its AND gates
    /// hashed in batches), over the same inputs. `a` and `b` must have
    /// `sub`'s input widths.
    fn call<F>(&mut self, sub: &Sub, a: &[W<Self::L>], b: &[W<Self::L>], f: F) -> Word<Self::L>
    where
        Self: Sized,
        F: FnOnce(&mut Self, &[W<Self::L>], &[W<Self::L>]) -> Word<Self::L>,
    {
        let _ = sub;
        f(self, a, b)
    }

    /// `a * c mod 2^width` for a public constant `c` (little-endian bytes):
    /// one shifted addition or subtraction per non-zero digit of `c`'s
    /// non-adjacent form.
    fn mul_const(&mut self, a: &[W<Self::L>], c: &[u8], width: usize) -> Word<Self::L> {
        let mut acc: Word<Self::L> = vec![W::ZERO; width];
        for (k, d) in naf(c).into_iter().enumerate() {
            if d == 0 || k >= width {
                continue;
            }
            let mut shifted: Word<Self::L> = vec![W::ZERO; k];
            shifted.extend(a.iter().copied().take(width - k));
            acc = if d > 0 {
                self.add(&acc, &shifted)
            } else {
                self.sub(&acc, &shifted)
            };
        }
        acc
    }
}

/// [`Gen::xor_select`] as folds of [`Gen::xor_all`], one per output bit.
pub fn xor_select_fold<G: Gen>(
    g: &mut G,
    items: &[W<G::L>],
    bits: &[(bool, Vec<u64>)],
) -> Word<G::L> {
    let mut picked = Vec::with_capacity(items.len());
    bits.iter()
        .map(|(init, mask)| {
            picked.clear();
            for (wi, &word) in mask.iter().enumerate() {
                let mut m = word;
                while m != 0 {
                    let j = wi * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    if let Some(&w) = items.get(j) {
                        picked.push(w);
                    }
                }
            }
            g.xor_all(W::C(*init), &picked)
        })
        .collect()
}

/// A circuit given as a generator: fixed input and output widths and a
/// function that emits its gates into any [`Gen`].
pub trait Generator {
    /// A name that identifies the circuit and its parameters.
    fn name(&self) -> String;
    /// Garbler input bits.
    fn garbler_input_bits(&self) -> usize;
    /// Evaluator input bits.
    fn evaluator_input_bits(&self) -> usize;
    /// Output bits.
    fn output_bits(&self) -> usize;
    /// Emits the circuit: the outputs (exactly [`Generator::output_bits`])
    /// from the inputs.
    fn generate<G: Gen>(&self, g: &mut G, garbler: &[W<G::L>], evaluator: &[W<G::L>])
    -> Word<G::L>;
}

/// Gate counts, AND depth and digest of a generated circuit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenStats {
    /// The statistics in the same form as a flat circuit's (the output
    /// copies a Bristol file adds are not counted: they are free).
    pub stats: Stats,
    /// SHA-256 over the name, the widths, the counts and the structural
    /// digest of the gate stream: the circuit identity both parties
    /// exchange.
    pub digest: [u8; 32],
    /// Outputs that folded to a public constant (an Ed25519 signature's `S` is below
    /// 2^253, so its top three bits are): they need no decoding bit's check.
    pub constant_outputs: u64,
    /// The mid-circuit reveals ([`Gen::reveal`]), in order: the AND gates before each, and
    /// its width in bits. The evaluator reads exactly those tables before a reveal, and
    /// each reveal puts `bits.div_ceil(8)` bytes on the wire each way.
    pub reveals: Vec<(u64, usize)>,
    /// The lookups in public tables ([`Gen::xor_select`] over wires), in order. Their XOR
    /// and INV gates are in `stats`, but the label backends compute a lookup in far fewer
    /// operations than its gates (see [`crate::stream::xor_select_blocks`]), so a cost
    /// model prices them apart.
    pub lookups: Vec<Lookup>,
}

/// One lookup in a public table as counted: its selector's items, its output bits, and
/// the gates the folds would have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// Items of the selector (a one-hot vector's entries).
    pub items: usize,
    /// Output bits.
    pub outputs: usize,
    /// XOR gates.
    pub xor_gates: u64,
    /// INV gates.
    pub inv_gates: u64,
}

/// Runs `c` once through a [`Counter`]: the circuit as it is garbled
/// (sub-circuit calls counted from their compiled programs).
pub fn stats<C: Generator>(c: &C) -> GenStats {
    count(c, false)
}

/// [`stats`] with sub-circuit calls expanded gate by gate, as in a Bristol
/// Fashion file (the compiled programs may have folded a few gates more).
pub fn stats_expanded<C: Generator>(c: &C) -> GenStats {
    count(c, true)
}

fn count<C: Generator>(c: &C, expand: bool) -> GenStats {
    let mut k = Counter::new();
    k.expand = expand;
    let g = k.inputs(c.garbler_input_bits());
    let e = k.inputs(c.evaluator_input_bits());
    let out = c.generate(&mut k, &g, &e);
    let mut by_kind = [0u64; 5];
    by_kind[0] = k.xor;
    by_kind[1] = k.and;
    by_kind[2] = k.inv;
    by_kind[3] = k.eq;
    by_kind[4] = k.eqw;
    let mut h = Sha256::new();
    h.update(b"ccbench-garble-generator-v1");
    h.update(c.name().as_bytes());
    for v in [
        c.garbler_input_bits() as u64,
        c.evaluator_input_bits() as u64,
        c.output_bits() as u64,
        k.xor,
        k.and,
        k.inv,
        k.eq,
        k.eqw,
        k.mix(),
    ] {
        h.update(v.to_le_bytes());
    }
    for &(and, bits) in &k.reveals {
        h.update(and.to_le_bytes());
        h.update((bits as u64).to_le_bytes());
    }
    // Which outputs are constants, and which wires the others are.
    for w in &out {
        match *w {
            W::C(b) => h.update([u8::from(b)]),
            W::V(v) => h.update(v.id.to_le_bytes()),
        }
    }
    GenStats {
        stats: Stats {
            gates: k.xor + k.and + k.inv + k.eq + k.eqw,
            wires: k.wires(),
            by_kind,
            and_depth: k.and_depth,
            garbler_input_bits: c.garbler_input_bits() as u64,
            evaluator_input_bits: c.evaluator_input_bits() as u64,
            output_bits: out.len() as u64,
        },
        digest: h.finalize().into(),
        constant_outputs: out.iter().filter(|w| matches!(w, W::C(_))).count() as u64,
        reveals: k.reveals,
        lookups: k.lookups,
    }
}

/// Evaluates `c` in plain. For a circuit whose reveal can be refused, use
/// [`try_eval_plain`]: here a refused reveal gives no outputs (an empty vector).
pub fn eval_plain<C: Generator>(c: &C, garbler: &[bool], evaluator: &[bool]) -> Vec<bool> {
    try_eval_plain(c, garbler, evaluator).unwrap_or_default()
}

/// Evaluates `c` in plain; the circuit's refusal of a revealed value is an error.
pub fn try_eval_plain<C: Generator>(
    c: &C,
    garbler: &[bool],
    evaluator: &[bool],
) -> Result<Vec<bool>, Refused> {
    let mut p = Plain::default();
    let out = c.generate(&mut p, &plain_word(garbler), &plain_word(evaluator));
    match p.refused {
        Some(r) => Err(r),
        None => Ok(plain_bits(&out)),
    }
}

/// Builds `c` as a flat [`Circuit`] (only for circuits that fit in memory).
/// A circuit with a mid-circuit reveal has no flat form: [`CircuitError::Reveal`].
pub fn build<C: Generator>(c: &C) -> Result<Circuit, CircuitError> {
    let mut b = BuilderGen::default();
    let g = b.input(Party::Garbler, c.garbler_input_bits());
    let e = b.input(Party::Evaluator, c.evaluator_input_bits());
    let out = c.generate(&mut b, &g, &e);
    b.finish(&[out])
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigUint;
    use proptest::prelude::*;

    fn to_big(bits: &[bool]) -> BigUint {
        let bytes = crate::circuit::bytes_from_bits(bits);
        BigUint::from_bytes_le(&bytes)
    }

    fn from_big(v: &BigUint, n: usize) -> Vec<bool> {
        crate::circuit::bits_from_bytes(&v.to_bytes_le(), n)
    }

    proptest! {
        #[test]
        fn mul_square_and_constants_match_bigint(
            a in proptest::collection::vec(any::<u8>(), 1..40),
            b in proptest::collection::vec(any::<u8>(), 1..40),
        ) {
            let x = BigUint::from_bytes_le(&a);
            let y = BigUint::from_bytes_le(&b);
            let (n, m) = (a.len() * 8, b.len() * 8);
            let xa = plain_word(&from_big(&x, n));
            let yb = plain_word(&from_big(&y, m));
            let mut p = Plain::default();
            let prod = p.mul(&xa, &yb);
            prop_assert_eq!(to_big(&plain_bits(&prod)), &x * &y);
            let sq = p.square(&xa);
            prop_assert_eq!(to_big(&plain_bits(&sq)), &x * &x);
            let w = n + 13;
            let mc = p.mul_const(&xa, &b, w);
            prop_assert_eq!(to_big(&plain_bits(&mc)), (&x * &y) % (BigUint::from(1u8) << w));
            let s = p.add_wide(&xa, &yb);
            prop_assert_eq!(to_big(&plain_bits(&s)), &x + &y);
        }
    }

    /// The counter's `xor_select` from the masks has the fold's gates, wires and depths.
    #[test]
    fn counter_counts_selections_like_the_fold() {
        let mut k = Counter::new();
        let items = k.inputs(150);
        let mut state = 0x9e37_79b9u64;
        let mut word = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut bits: Vec<(bool, Vec<u64>)> = (0..40)
            .map(|i| (i % 3 == 0, vec![word(), word(), word() | (1 << 40)]))
            .collect();
        // None selected, one selected (with and without init), bits past the items.
        bits.push((false, vec![0, 0, 0]));
        bits.push((true, vec![0, 0, 0]));
        bits.push((false, vec![0, 1 << 5, 0]));
        bits.push((true, vec![0, 1 << 5, 0]));
        bits.push((false, vec![0, 0, u64::MAX << 22]));
        let (mut a, mut b) = (k.clone(), k.clone());
        let fast = a.xor_select(&items, &bits);
        let fold = xor_select_fold(&mut b, &items, &bits);
        assert_eq!((a.xor, a.inv, a.next), (b.xor, b.inv, b.next));
        assert_eq!(fast, fold);
        // A constant item: the fold itself.
        let mut items2 = items.clone();
        items2[3] = W::ONE;
        let (mut a, mut b) = (k.clone(), k.clone());
        assert_eq!(
            a.xor_select(&items2, &bits),
            xor_select_fold(&mut b, &items2, &bits)
        );
        assert_eq!(
            (a.xor, a.inv, a.next, a.mix()),
            (b.xor, b.inv, b.next, b.mix())
        );
    }

    #[test]
    fn counter_counts_xor_chains_like_the_fold() {
        let mut k = Counter::new();
        let v = k.inputs(10);
        let mut items = v.clone();
        items.insert(3, W::ONE);
        items.push(W::ZERO);
        let mut a = k.clone();
        let r1 = a.xor_all(W::ONE, &items);
        let mut b = k.clone();
        let mut acc = W::ONE;
        for &w in &items {
            acc = b.xor(acc, w);
        }
        assert_eq!((a.xor, a.inv, a.next), (b.xor, b.inv, b.next));
        let depth = |w: W<CountWire>| match w {
            W::V(x) => x.depth,
            W::C(_) => 0,
        };
        assert_eq!(depth(r1), depth(acc));
        assert_eq!(
            plain_bits(&[Plain::default().xor_all(W::ONE, &[W::V(true), W::ZERO, W::V(true)])]),
            [true]
        );
    }

    #[test]
    fn naf_reconstructs() {
        for v in [0u64, 1, 3, 7, 0xdead_beef, u64::MAX] {
            let d = naf(&v.to_le_bytes());
            let mut acc: i128 = 0;
            for (i, &x) in d.iter().enumerate() {
                acc += i128::from(x) << i;
            }
            assert_eq!(acc, i128::from(v));
            assert!(d.windows(2).all(|w| w[0] == 0 || w[1] == 0));
        }
    }

    #[test]
    fn counter_agrees_with_builder() {
        struct M;
        impl Generator for M {
            fn name(&self) -> String {
                "mul24".into()
            }
            fn garbler_input_bits(&self) -> usize {
                24
            }
            fn evaluator_input_bits(&self) -> usize {
                24
            }
            fn output_bits(&self) -> usize {
                48
            }
            fn generate<G: Gen>(&self, g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
                g.mul(a, b)
            }
        }
        let s = stats(&M);
        let c = build(&M).unwrap();
        assert_eq!(s.stats.and_gates(), c.stats().and_gates());
        assert_eq!(s.stats.and_depth, c.stats().and_depth);
        let x = from_big(&BigUint::from(123_456u32), 24);
        let y = from_big(&BigUint::from(654_321u32), 24);
        assert_eq!(c.eval(&x, &y).unwrap(), eval_plain(&M, &x, &y));
    }
}
