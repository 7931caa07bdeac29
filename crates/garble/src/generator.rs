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
//! * [`BuilderGen`]: a flat [`Circuit`] through the [`Builder`] (small
//!   sub-circuits, Bristol Fashion, cross-checks with the compiled engine);
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
//! Words are `Vec<W<L>>`, least significant bit first. Costs in AND gates:
//! addition and subtraction one per bit (none for the top bit when its
//! carry is dropped), a multiplexer one per bit, schoolbook multiplication
//! about `2 n m`, Karatsuba above a threshold, squaring about half a
//! multiplication.

use sha2::{Digest, Sha256};

use crate::builder::{Bit, Builder};
use crate::circuit::{Circuit, CircuitError, GateKind, Party, Stats};
use crate::program::Program;

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

/// A gate sink with constant folding and word arithmetic. Implement the
/// three `*_raw` methods (gates on two non-constant wires); circuits call
/// the provided methods.
pub trait Gen {
    /// A non-constant wire of this backend.
    type L: Copy;

    /// An XOR gate.
    fn xor_raw(&mut self, a: Self::L, b: Self::L) -> Self::L;
    /// An AND gate.
    fn and_raw(&mut self, a: Self::L, b: Self::L) -> Self::L;
    /// An INV gate.
    fn not_raw(&mut self, a: Self::L) -> Self::L;

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

    /// A call of a sub-circuit that is compiled once and replayed: `f`
    /// emits its gates (the default, for plain evaluation, counting and
    /// Bristol output); the streaming garbler and evaluator instead run
    /// `sub`, `f` compiled into a [`Program`] (scheduled, its AND gates
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

/// The non-adjacent form of a little-endian byte string: digits in
/// `{-1, 0, 1}`, least significant first, no two adjacent non-zero.
pub fn naf(c: &[u8]) -> Vec<i8> {
    // Work on bits with a carry: standard right-to-left recoding.
    let bits: Vec<u8> = (0..c.len() * 8)
        .map(|i| (c[i / 8] >> (i % 8)) & 1)
        .collect();
    let mut out = Vec::with_capacity(bits.len() + 1);
    let mut carry = 0u8;
    let mut i = 0;
    while i < bits.len() || carry != 0 {
        let b = bits.get(i).copied().unwrap_or(0) + carry;
        let next = bits.get(i + 1).copied().unwrap_or(0);
        match b {
            0 => {
                out.push(0);
                carry = 0;
            }
            1 => {
                if next == 1 {
                    // ...11 -> -1 with a carry.
                    out.push(-1);
                    carry = 1;
                } else {
                    out.push(1);
                    carry = 0;
                }
            }
            _ => {
                out.push(0);
                carry = 1;
            }
        }
        i += 1;
    }
    out
}

fn mul_rec<G: Gen + ?Sized>(
    g: &mut G,
    a: &[W<G::L>],
    b: &[W<G::L>],
    threshold: usize,
) -> Word<G::L> {
    if a.is_empty() || b.is_empty() {
        return vec![W::ZERO; a.len() + b.len()];
    }
    let (a, b) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    if b.len() < threshold {
        return mul_schoolbook(g, a, b);
    }
    let h = a.len().div_ceil(2);
    if b.len() <= h {
        let lo = mul_rec(g, &a[..h], b, threshold);
        let hi = mul_rec(g, &a[h..], b, threshold);
        return combine(g, lo, h, &hi, a.len() + b.len());
    }
    let (a0, a1) = a.split_at(h);
    let (b0, b1) = b.split_at(h);
    let z0 = mul_rec(g, a0, b0, threshold);
    let z2 = mul_rec(g, a1, b1, threshold);
    let sa = g.add_wide(a0, a1);
    let sb = g.add_wide(b0, b1);
    let mut z1 = mul_rec(g, &sa, &sb, threshold);
    z1.truncate(2 * h + 1);
    let z1 = g.sub(&z1, &z0);
    let z1 = g.sub(&z1, &z2);
    karatsuba_join(g, z0, z2, &z1, h, a.len() + b.len())
}

fn karatsuba_join<G: Gen + ?Sized>(
    g: &mut G,
    z0: Word<G::L>,
    z2: Word<G::L>,
    z1: &[W<G::L>],
    h: usize,
    width: usize,
) -> Word<G::L> {
    let mut r = z0;
    r.resize(2 * h, W::ZERO);
    r.extend_from_slice(&z2);
    r.resize(width, W::ZERO);
    r.truncate(width);
    let hi = g.add(&r[h..], z1);
    r.truncate(h);
    r.extend(hi);
    r
}

fn combine<G: Gen + ?Sized>(
    g: &mut G,
    mut lo: Word<G::L>,
    shift: usize,
    hi: &[W<G::L>],
    width: usize,
) -> Word<G::L> {
    lo.resize(width, W::ZERO);
    let top = g.add(&lo[shift..], hi);
    lo.truncate(shift);
    lo.extend(top);
    lo
}

fn mul_schoolbook<G: Gen + ?Sized>(g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
    let n = a.len();
    let mut out = Vec::with_capacity(n + b.len());
    let mut acc: Word<G::L> = a.iter().map(|&x| g.and(x, b[0])).collect();
    acc.push(W::ZERO);
    for &y in &b[1..] {
        out.push(acc[0]);
        let row: Word<G::L> = a.iter().map(|&x| g.and(x, y)).collect();
        let (mut s, c) = g.add_carry(&acc[1..], &row, W::ZERO);
        s.push(c);
        acc = s;
    }
    out.extend(acc);
    out.resize(n + b.len(), W::ZERO);
    out
}

fn square_rec<G: Gen + ?Sized>(g: &mut G, a: &[W<G::L>], threshold: usize) -> Word<G::L> {
    let n = a.len();
    if n < threshold {
        return square_schoolbook(g, a);
    }
    let h = n.div_ceil(2);
    let (a0, a1) = a.split_at(h);
    let z0 = square_rec(g, a0, threshold);
    let z2 = square_rec(g, a1, threshold);
    let s = g.add_wide(a0, a1);
    let mut z1 = square_rec(g, &s, threshold);
    z1.truncate(2 * h + 1);
    let z1 = g.sub(&z1, &z0);
    let z1 = g.sub(&z1, &z2);
    karatsuba_join(g, z0, z2, &z1, h, 2 * n)
}

/// `a^2 = sum_i 4^i row_i` with `row_i = a_i + sum_{j>i} a_i a_j 2^(j-i+1)`:
/// `n (n - 1) / 2` cross products and one row addition per bit.
fn square_schoolbook<G: Gen + ?Sized>(g: &mut G, a: &[W<G::L>]) -> Word<G::L> {
    let n = a.len();
    let mut out: Word<G::L> = Vec::with_capacity(2 * n);
    let mut acc: Word<G::L> = Vec::new();
    for i in 0..n {
        let mut row: Word<G::L> = vec![a[i], W::ZERO];
        for j in i + 1..n {
            row.push(g.and(a[i], a[j]));
        }
        let w = row.len().max(acc.len());
        row.resize(w, W::ZERO);
        let (mut s, c) = g.add_carry(&row, &acc, W::ZERO);
        s.push(c);
        out.push(s[0]);
        out.push(s[1]);
        acc = s.split_off(2);
    }
    out.extend(acc);
    out.resize(2 * n, W::ZERO);
    out
}

/// A sub-circuit compiled once per process and replayed at every call (see
/// [`Gen::call`]): its program, its statistics and, per output, its AND
/// depth from the inputs.
#[derive(Debug)]
pub struct Sub {
    name: &'static str,
    prog: Program,
    out_depth: Vec<u32>,
    a_bits: usize,
    b_bits: usize,
}

impl Sub {
    /// Compiles `f` (instantiated for the [`BuilderGen`]) with inputs of
    /// `a_bits` and `b_bits`.
    pub fn compile(
        name: &'static str,
        a_bits: usize,
        b_bits: usize,
        f: impl FnOnce(&mut BuilderGen, &[W<Bit>], &[W<Bit>]) -> Word<Bit>,
    ) -> Result<Sub, CircuitError> {
        let mut g = BuilderGen::default();
        let a = g.input(Party::Garbler, a_bits);
        let b = g.input(Party::Evaluator, b_bits);
        let out = f(&mut g, &a, &b);
        let c = g.finish(&[out])?;
        let mut depth = vec![0u32; c.num_wires() as usize];
        for gate in c.gates() {
            let d = gate.inputs().map(|w| depth[w as usize]).max().unwrap_or(0);
            depth[gate.output() as usize] = match gate {
                crate::circuit::Gate::And { .. } => d + 1,
                _ => d,
            };
        }
        let out_depth = c.output_wires().map(|w| depth[w as usize]).collect();
        Ok(Sub {
            name,
            prog: Program::compile(&c),
            out_depth,
            a_bits,
            b_bits,
        })
    }

    /// The name (part of the circuit digest).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The compiled program.
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// Input widths.
    pub fn input_bits(&self) -> (usize, usize) {
        (self.a_bits, self.b_bits)
    }

    /// Output bits.
    pub fn output_bits(&self) -> usize {
        self.out_depth.len()
    }
}

/// Plain evaluation: wires are `bool`s.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain;

impl Gen for Plain {
    type L = bool;
    #[inline]
    fn xor_raw(&mut self, a: bool, b: bool) -> bool {
        a ^ b
    }
    #[inline]
    fn and_raw(&mut self, a: bool, b: bool) -> bool {
        a & b
    }
    #[inline]
    fn not_raw(&mut self, a: bool) -> bool {
        !a
    }
}

/// Inputs of a plain evaluation as wires.
pub fn plain_word(bits: &[bool]) -> Word<bool> {
    bits.iter().map(|&b| W::V(b)).collect()
}

/// Output bits of a plain evaluation.
pub fn plain_bits(w: &[W<bool>]) -> Vec<bool> {
    w.iter()
        .map(|x| match *x {
            W::C(b) | W::V(b) => b,
        })
        .collect()
}

/// A wire of the [`Counter`]: its id and its AND depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountWire {
    id: u32,
    depth: u32,
}

/// Counts gates by kind, the AND depth and a structural digest (gate kinds
/// and wire ids in emission order) without storing anything.
#[derive(Clone, Debug, Default)]
pub struct Counter {
    next: u64,
    /// XOR gates.
    pub xor: u64,
    /// AND gates.
    pub and: u64,
    /// INV gates.
    pub inv: u64,
    /// EQ gates (constant outputs of sub-circuits).
    pub eq: u64,
    /// EQW gates (copied outputs of sub-circuits).
    pub eqw: u64,
    /// Whether sub-circuit calls are expanded gate by gate (as a Bristol
    /// file has them) instead of counted from their compiled programs (as
    /// they are garbled).
    pub expand: bool,
    /// The deepest AND chain so far (an upper bound across sub-circuit
    /// calls, whose outputs get the deepest input's depth plus their own).
    pub and_depth: u32,
    mix: u64,
}

impl Counter {
    /// A counter whose first `inputs` wire ids are the circuit's inputs.
    pub fn new() -> Counter {
        Counter::default()
    }

    /// A fresh input wire.
    pub fn input(&mut self) -> W<CountWire> {
        let id = self.next as u32;
        self.next += 1;
        W::V(CountWire { id, depth: 0 })
    }

    /// `n` fresh input wires.
    pub fn inputs(&mut self, n: usize) -> Word<CountWire> {
        (0..n).map(|_| self.input()).collect()
    }

    /// Wires assigned so far (inputs included).
    pub fn wires(&self) -> u64 {
        self.next
    }

    #[inline]
    fn gate(&mut self, kind: u64, a: u32, b: u32) -> u32 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let v = (u64::from(a) << 32 | u64::from(b)) ^ kind.wrapping_mul(K);
        self.mix = (self.mix.rotate_left(23) ^ v).wrapping_mul(K);
        let id = self.next as u32;
        self.next += 1;
        id
    }

    /// The structural digest so far.
    pub fn mix(&self) -> u64 {
        self.mix
    }
}

impl Gen for Counter {
    type L = CountWire;
    #[inline]
    fn xor_raw(&mut self, a: CountWire, b: CountWire) -> CountWire {
        self.xor += 1;
        let id = self.gate(1, a.id, b.id);
        CountWire {
            id,
            depth: a.depth.max(b.depth),
        }
    }
    #[inline]
    fn and_raw(&mut self, a: CountWire, b: CountWire) -> CountWire {
        self.and += 1;
        let id = self.gate(2, a.id, b.id);
        let depth = a.depth.max(b.depth) + 1;
        self.and_depth = self.and_depth.max(depth);
        CountWire { id, depth }
    }
    #[inline]
    fn not_raw(&mut self, a: CountWire) -> CountWire {
        self.inv += 1;
        let id = self.gate(3, a.id, u32::MAX);
        CountWire { id, depth: a.depth }
    }

    fn xor_all(&mut self, init: W<CountWire>, items: &[W<CountWire>]) -> W<CountWire> {
        // The gates of the fold, counted without mixing each one: the chain
        // is mixed into the digest once, by its length and its wires' ids.
        let mut acc = init;
        let mut ids = 0u64;
        for &w in items {
            acc = match (acc, w) {
                (W::C(x), W::C(y)) => W::C(x ^ y),
                (W::C(false), v) | (v, W::C(false)) => v,
                (W::C(true), W::V(v)) | (W::V(v), W::C(true)) => {
                    self.inv += 1;
                    let id = self.next as u32;
                    self.next += 1;
                    W::V(CountWire { id, depth: v.depth })
                }
                (W::V(a), W::V(b)) => {
                    self.xor += 1;
                    ids = ids.wrapping_mul(31).wrapping_add(u64::from(b.id));
                    let id = self.next as u32;
                    self.next += 1;
                    W::V(CountWire {
                        id,
                        depth: a.depth.max(b.depth),
                    })
                }
            };
        }
        let first = match init {
            W::C(b) => u32::from(b),
            W::V(v) => v.id,
        };
        self.gate(7, first, items.len() as u32);
        self.next -= 1;
        self.mix ^= ids;
        acc
    }

    fn call<F>(
        &mut self,
        sub: &Sub,
        a: &[W<CountWire>],
        b: &[W<CountWire>],
        f: F,
    ) -> Word<CountWire>
    where
        F: FnOnce(&mut Self, &[W<CountWire>], &[W<CountWire>]) -> Word<CountWire>,
    {
        if self.expand {
            return f(self, a, b);
        }
        let st = sub.prog.stats();
        self.xor += st.count(GateKind::Xor);
        self.and += st.count(GateKind::And);
        self.inv += st.count(GateKind::Inv);
        self.eq += st.count(GateKind::Eq);
        self.eqw += st.count(GateKind::Eqw);
        let next0 = self.next;
        let d = sub.prog.digest();
        let mut dg = [0u8; 8];
        dg.copy_from_slice(&d[..8]);
        self.gate(4, 0, 0);
        self.mix ^= u64::from_le_bytes(dg);
        let mut d_in = 0u32;
        for w in a.iter().chain(b) {
            match *w {
                W::C(v) => {
                    self.gate(5, u32::from(v), u32::MAX);
                }
                W::V(x) => {
                    self.gate(6, x.id, u32::MAX);
                    d_in = d_in.max(x.depth);
                }
            }
        }
        // The sub-circuit's inner wires take ids; its outputs come next.
        let io = (a.len() + b.len() + sub.out_depth.len()) as u64;
        self.next = next0 + st.wires.saturating_sub(io);
        sub.out_depth
            .iter()
            .map(|&od| {
                let depth = d_in + od;
                self.and_depth = self.and_depth.max(depth);
                let id = self.next as u32;
                self.next += 1;
                W::V(CountWire { id, depth })
            })
            .collect()
    }
}

/// Emits gates into a [`Builder`] (a flat [`Circuit`]).
#[derive(Debug, Default)]
pub struct BuilderGen {
    /// The builder that receives the gates.
    pub builder: Builder,
}

impl BuilderGen {
    /// `width` input wires of `party`.
    pub fn input(&mut self, party: Party, width: usize) -> Word<Bit> {
        self.builder
            .input(party, width)
            .into_iter()
            .map(W::V)
            .collect()
    }

    /// Finishes the circuit with the given outputs.
    pub fn finish(self, outputs: &[Word<Bit>]) -> Result<Circuit, CircuitError> {
        let outs: Vec<Vec<Bit>> = outputs
            .iter()
            .map(|w| {
                w.iter()
                    .map(|x| match *x {
                        W::C(b) => Bit::constant(b),
                        W::V(v) => v,
                    })
                    .collect()
            })
            .collect();
        self.builder.finish(&outs)
    }
}

impl Gen for BuilderGen {
    type L = Bit;
    fn xor_raw(&mut self, a: Bit, b: Bit) -> Bit {
        self.builder.xor(a, b)
    }
    fn and_raw(&mut self, a: Bit, b: Bit) -> Bit {
        self.builder.and(a, b)
    }
    fn not_raw(&mut self, a: Bit) -> Bit {
        self.builder.not(a)
    }
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
    }
}

/// Evaluates `c` in plain.
pub fn eval_plain<C: Generator>(c: &C, garbler: &[bool], evaluator: &[bool]) -> Vec<bool> {
    let out = c.generate(&mut Plain, &plain_word(garbler), &plain_word(evaluator));
    plain_bits(&out)
}

/// Builds `c` as a flat [`Circuit`] (only for circuits that fit in memory).
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
            let mut p = Plain;
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
            plain_bits(&[Plain.xor_all(W::ONE, &[W::V(true), W::ZERO, W::V(true)])]),
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
