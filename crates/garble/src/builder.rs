//! Build circuits from Rust: bits, words (least significant bit first) and
//! integer arithmetic, with constant folding.
//!
//! Costs (AND gates, the only ones that cost anything under free-XOR):
//! addition and subtraction one AND per bit (none for the top bit when the
//! carry is dropped), unsigned comparison one per bit, a multiplexer one per
//! bit, equality `n - 1`. Constants are folded as the circuit is built, so
//! adding a constant costs nothing for the low bits where the carry is still
//! known. Multiplication is schoolbook below a threshold and Karatsuba above.

use crate::circuit::{Circuit, CircuitError, Gate, Party};
use crate::sbox::BoolOps;

/// A wire in a circuit under construction, or a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bit(u32);

const ZERO_ID: u32 = u32::MAX;
const ONE_ID: u32 = u32::MAX - 1;

impl Bit {
    /// The constant 0.
    pub const ZERO: Bit = Bit(ZERO_ID);
    /// The constant 1.
    pub const ONE: Bit = Bit(ONE_ID);

    /// The constant `b`.
    pub fn constant(b: bool) -> Bit {
        if b { Bit::ONE } else { Bit::ZERO }
    }

    /// `Some(value)` when this bit is a constant.
    pub fn as_constant(self) -> Option<bool> {
        match self.0 {
            ZERO_ID => Some(false),
            ONE_ID => Some(true),
            _ => None,
        }
    }
}

/// Default width from which [`Builder::mul`] switches to Karatsuba.
pub const DEFAULT_KARATSUBA_THRESHOLD: usize = 12;

/// Builds a [`Circuit`]. Declare inputs with [`Builder::input`], compute, and
/// call [`Builder::finish`] with the output values.
#[derive(Debug, Clone)]
pub struct Builder {
    next: u32,
    inputs: Vec<(Party, Vec<u32>)>,
    gates: Vec<Gate>,
    karatsuba_threshold: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Builder {
            next: 0,
            inputs: Vec::new(),
            gates: Vec::new(),
            karatsuba_threshold: DEFAULT_KARATSUBA_THRESHOLD,
        }
    }

    /// Sets the operand width (in bits) from which multiplication uses
    /// Karatsuba instead of schoolbook.
    pub fn set_karatsuba_threshold(&mut self, bits: usize) {
        self.karatsuba_threshold = bits.max(2);
    }

    fn fresh(&mut self) -> u32 {
        let id = self.next;
        self.next += 1;
        id
    }

    /// Declares an input value of `width` bits owned by `party`. In the
    /// finished circuit the garbler's values come first, each party's in
    /// declaration order.
    pub fn input(&mut self, party: Party, width: usize) -> Vec<Bit> {
        let ids: Vec<u32> = (0..width).map(|_| self.fresh()).collect();
        let bits = ids.iter().map(|&i| Bit(i)).collect();
        self.inputs.push((party, ids));
        bits
    }

    /// The number of AND gates emitted so far.
    pub fn and_count(&self) -> usize {
        self.gates
            .iter()
            .filter(|g| matches!(g, Gate::And { .. }))
            .count()
    }

    /// `a ^ b`
    pub fn xor(&mut self, a: Bit, b: Bit) -> Bit {
        match (a.as_constant(), b.as_constant()) {
            (Some(x), Some(y)) => Bit::constant(x ^ y),
            (Some(false), None) => b,
            (None, Some(false)) => a,
            (Some(true), None) => self.not(b),
            (None, Some(true)) => self.not(a),
            (None, None) if a == b => Bit::ZERO,
            (None, None) => {
                let out = self.fresh();
                self.gates.push(Gate::Xor {
                    a: a.0,
                    b: b.0,
                    out,
                });
                Bit(out)
            }
        }
    }

    /// `a & b`
    pub fn and(&mut self, a: Bit, b: Bit) -> Bit {
        match (a.as_constant(), b.as_constant()) {
            (Some(false), _) | (_, Some(false)) => Bit::ZERO,
            (Some(true), _) => b,
            (_, Some(true)) => a,
            (None, None) if a == b => a,
            (None, None) => {
                let out = self.fresh();
                self.gates.push(Gate::And {
                    a: a.0,
                    b: b.0,
                    out,
                });
                Bit(out)
            }
        }
    }

    /// `!a`
    pub fn not(&mut self, a: Bit) -> Bit {
        match a.as_constant() {
            Some(x) => Bit::constant(!x),
            None => {
                let out = self.fresh();
                self.gates.push(Gate::Inv { a: a.0, out });
                Bit(out)
            }
        }
    }

    /// `a | b` (one AND).
    pub fn or(&mut self, a: Bit, b: Bit) -> Bit {
        let x = self.xor(a, b);
        let y = self.and(a, b);
        self.xor(x, y)
    }

    /// The majority of three bits (one AND): the carry of a full adder.
    pub fn maj(&mut self, a: Bit, b: Bit, c: Bit) -> Bit {
        let ac = self.xor(a, c);
        let bc = self.xor(b, c);
        let t = self.and(ac, bc);
        self.xor(t, c)
    }

    /// `sel ? b : a` (one AND).
    pub fn mux_bit(&mut self, sel: Bit, a: Bit, b: Bit) -> Bit {
        let d = self.xor(a, b);
        let t = self.and(sel, d);
        self.xor(a, t)
    }

    /// A constant word of `width` bits holding the low bits of `v`.
    pub fn constant(&self, v: u128, width: usize) -> Vec<Bit> {
        (0..width)
            .map(|i| Bit::constant(i < 128 && (v >> i) & 1 == 1))
            .collect()
    }

    /// Bitwise XOR of two words of equal width.
    pub fn xor_words(&mut self, a: &[Bit], b: &[Bit]) -> Vec<Bit> {
        a.iter().zip(b).map(|(&x, &y)| self.xor(x, y)).collect()
    }

    /// Bitwise AND of two words of equal width.
    pub fn and_words(&mut self, a: &[Bit], b: &[Bit]) -> Vec<Bit> {
        a.iter().zip(b).map(|(&x, &y)| self.and(x, y)).collect()
    }

    /// Bitwise NOT.
    pub fn not_word(&mut self, a: &[Bit]) -> Vec<Bit> {
        a.iter().map(|&x| self.not(x)).collect()
    }

    /// `a + b + carry_in`, same width as `a` (`b` is zero-extended or
    /// truncated), and the carry out. One AND per bit.
    pub fn add_carry(&mut self, a: &[Bit], b: &[Bit], carry_in: Bit) -> (Vec<Bit>, Bit) {
        let mut c = carry_in;
        let mut out = Vec::with_capacity(a.len());
        for (i, &x) in a.iter().enumerate() {
            let y = b.get(i).copied().unwrap_or(Bit::ZERO);
            let s = self.xor(x, y);
            out.push(self.xor(s, c));
            c = self.maj(x, y, c);
        }
        (out, c)
    }

    /// `a + b` modulo `2^a.len()` (`a.len() - 1` ANDs; the top carry is not
    /// computed).
    pub fn add(&mut self, a: &[Bit], b: &[Bit]) -> Vec<Bit> {
        let Some((&top, low)) = a.split_last() else {
            return Vec::new();
        };
        let (mut s, c) = self.add_carry(low, b, Bit::ZERO);
        let y = b.get(low.len()).copied().unwrap_or(Bit::ZERO);
        let t = self.xor(top, y);
        s.push(self.xor(t, c));
        s
    }

    /// `a - b - borrow_in` in the width of `a`, and the borrow out (1 when the
    /// true result is negative). One AND per bit.
    pub fn sub_borrow(&mut self, a: &[Bit], b: &[Bit], borrow_in: Bit) -> (Vec<Bit>, Bit) {
        let mut bo = borrow_in;
        let mut out = Vec::with_capacity(a.len());
        for (i, &x) in a.iter().enumerate() {
            let y = b.get(i).copied().unwrap_or(Bit::ZERO);
            let d = self.xor(x, y);
            out.push(self.xor(d, bo));
            let nx = self.not(x);
            bo = self.maj(nx, y, bo);
        }
        (out, bo)
    }

    /// `a - b` modulo `2^a.len()`.
    pub fn sub(&mut self, a: &[Bit], b: &[Bit]) -> Vec<Bit> {
        let Some((&top, low)) = a.split_last() else {
            return Vec::new();
        };
        let (mut d, bo) = self.sub_borrow(low, b, Bit::ZERO);
        let y = b.get(low.len()).copied().unwrap_or(Bit::ZERO);
        let t = self.xor(top, y);
        d.push(self.xor(t, bo));
        d
    }

    /// Unsigned `a < b` (one AND per bit).
    pub fn lt(&mut self, a: &[Bit], b: &[Bit]) -> Bit {
        let n = a.len().max(b.len());
        let mut bo = Bit::ZERO;
        for i in 0..n {
            let x = a.get(i).copied().unwrap_or(Bit::ZERO);
            let y = b.get(i).copied().unwrap_or(Bit::ZERO);
            let nx = self.not(x);
            bo = self.maj(nx, y, bo);
        }
        bo
    }

    /// `a == b` (`n - 1` ANDs).
    pub fn eq(&mut self, a: &[Bit], b: &[Bit]) -> Bit {
        let n = a.len().max(b.len());
        let mut acc = Bit::ONE;
        for i in 0..n {
            let x = a.get(i).copied().unwrap_or(Bit::ZERO);
            let y = b.get(i).copied().unwrap_or(Bit::ZERO);
            let d = self.xor(x, y);
            let e = self.not(d);
            acc = self.and(acc, e);
        }
        acc
    }

    /// `sel ? b : a`, word-wise (one AND per bit).
    pub fn mux(&mut self, sel: Bit, a: &[Bit], b: &[Bit]) -> Vec<Bit> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.mux_bit(sel, x, y))
            .collect()
    }

    /// The full product of two unsigned words (`a.len() + b.len()` bits).
    pub fn mul(&mut self, a: &[Bit], b: &[Bit]) -> Vec<Bit> {
        if a.is_empty() || b.is_empty() {
            return vec![Bit::ZERO; a.len() + b.len()];
        }
        let (a, b) = if a.len() >= b.len() { (a, b) } else { (b, a) };
        if b.len() < self.karatsuba_threshold {
            return self.mul_schoolbook(a, b);
        }
        let h = a.len().div_ceil(2);
        if b.len() <= h {
            // Unbalanced: split only the longer operand.
            let lo = self.mul(&a[..h], b);
            let hi = self.mul(&a[h..], b);
            return self.combine(lo, h, &hi, a.len() + b.len());
        }
        let (a0, a1) = a.split_at(h);
        let (b0, b1) = b.split_at(h);
        let z0 = self.mul(a0, b0);
        let z2 = self.mul(a1, b1);
        let (sa, ca) = self.add_carry(a0, a1, Bit::ZERO);
        let (sb, cb) = self.add_carry(b0, b1, Bit::ZERO);
        let mut sa = sa;
        sa.push(ca);
        let mut sb = sb;
        sb.push(cb);
        // (a0 + a1)(b0 + b1) - z0 - z2 = a0 b1 + a1 b0 < 2^(2h + 1).
        let mut z1 = self.mul(&sa, &sb);
        z1.truncate(2 * h + 1);
        let z1 = self.sub(&z1, &z0);
        let z1 = self.sub(&z1, &z2);
        // z0 and z2 do not overlap: concatenate, then add z1 at offset h.
        let mut r = z0;
        r.resize(2 * h, Bit::ZERO);
        r.extend_from_slice(&z2);
        r.truncate(a.len() + b.len());
        let hi = self.add(&r[h..], &z1);
        r.truncate(h);
        r.extend(hi);
        r
    }

    /// `lo + hi * 2^shift` in `width` bits, where `lo` has at most `shift +
    /// len(hi)` bits.
    fn combine(&mut self, mut lo: Vec<Bit>, shift: usize, hi: &[Bit], width: usize) -> Vec<Bit> {
        lo.resize(width, Bit::ZERO);
        let top = self.add(&lo[shift..], hi);
        lo.truncate(shift);
        lo.extend(top);
        lo
    }

    /// Schoolbook multiplication: `|a| * |b|` partial-product ANDs plus one
    /// row addition per bit of `b`.
    pub fn mul_schoolbook(&mut self, a: &[Bit], b: &[Bit]) -> Vec<Bit> {
        let n = a.len();
        let mut out = Vec::with_capacity(n + b.len());
        // acc holds the running sum above the bits already emitted.
        let mut acc: Vec<Bit> = a.iter().map(|&x| self.and(x, b[0])).collect();
        acc.push(Bit::ZERO);
        for &y in &b[1..] {
            out.push(acc[0]);
            let row: Vec<Bit> = a.iter().map(|&x| self.and(x, y)).collect();
            let (mut s, c) = self.add_carry(&acc[1..], &row, Bit::ZERO);
            s.push(c);
            acc = s;
        }
        out.extend(acc);
        out.truncate(n + b.len());
        out
    }

    /// Finishes the circuit with the given output values. Outputs that are
    /// constants, inputs or repeated get an `EQ`/`EQW` gate so that every
    /// output is its own wire, as Bristol Fashion requires.
    pub fn finish(mut self, outputs: &[Vec<Bit>]) -> Result<Circuit, CircuitError> {
        let input_ids: Vec<u32> = self
            .inputs
            .iter()
            .filter(|(p, _)| *p == Party::Garbler)
            .chain(self.inputs.iter().filter(|(p, _)| *p == Party::Evaluator))
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        let garbler_values = self
            .inputs
            .iter()
            .filter(|(p, _)| *p == Party::Garbler)
            .count();
        let widths: Vec<u32> = self
            .inputs
            .iter()
            .filter(|(p, _)| *p == Party::Garbler)
            .chain(self.inputs.iter().filter(|(p, _)| *p == Party::Evaluator))
            .map(|(_, ids)| ids.len() as u32)
            .collect();
        let total = self.next as usize;
        let mut is_input = vec![false; total];
        for &i in &input_ids {
            is_input[i as usize] = true;
        }
        let mut is_output = vec![false; total];
        let mut out_ids = Vec::new();
        for v in outputs {
            for &bit in v {
                let id = match bit.as_constant() {
                    Some(value) => {
                        let out = self.fresh();
                        self.gates.push(Gate::Eq { value, out });
                        out
                    }
                    None if is_input[bit.0 as usize] || is_output[bit.0 as usize] => {
                        let out = self.fresh();
                        self.gates.push(Gate::Eqw { a: bit.0, out });
                        out
                    }
                    None => bit.0,
                };
                if is_output.len() <= id as usize {
                    is_output.resize(id as usize + 1, false);
                    is_input.resize(id as usize + 1, false);
                }
                is_output[id as usize] = true;
                out_ids.push(id);
            }
        }
        let num_wires = self.next;
        let mut map = vec![u32::MAX; num_wires as usize];
        for (i, &id) in input_ids.iter().enumerate() {
            map[id as usize] = i as u32;
        }
        let first_out = num_wires - out_ids.len() as u32;
        for (i, &id) in out_ids.iter().enumerate() {
            map[id as usize] = first_out + i as u32;
        }
        let mut next = input_ids.len() as u32;
        for g in &self.gates {
            let o = g.output() as usize;
            if map[o] == u32::MAX {
                map[o] = next;
                next += 1;
            }
        }
        let m = |w: u32| map[w as usize];
        let gates = self
            .gates
            .iter()
            .map(|g| match *g {
                Gate::Xor { a, b, out } => Gate::Xor {
                    a: m(a),
                    b: m(b),
                    out: m(out),
                },
                Gate::And { a, b, out } => Gate::And {
                    a: m(a),
                    b: m(b),
                    out: m(out),
                },
                Gate::Inv { a, out } => Gate::Inv {
                    a: m(a),
                    out: m(out),
                },
                Gate::Eq { value, out } => Gate::Eq { value, out: m(out) },
                Gate::Eqw { a, out } => Gate::Eqw {
                    a: m(a),
                    out: m(out),
                },
            })
            .collect();
        let out_widths = outputs.iter().map(|v| v.len() as u32).collect();
        let mut c = Circuit::new(num_wires, widths, out_widths, gates)?;
        c.set_garbler_values(garbler_values)?;
        Ok(c)
    }
}

impl BoolOps for Builder {
    type T = Bit;
    fn xor(&mut self, a: Bit, b: Bit) -> Bit {
        Builder::xor(self, a, b)
    }
    fn and(&mut self, a: Bit, b: Bit) -> Bit {
        Builder::and(self, a, b)
    }
    fn not(&mut self, a: Bit) -> Bit {
        Builder::not(self, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{bits_from_bytes, bytes_from_bits};

    fn to_u128(bits: &[bool]) -> u128 {
        bits.iter()
            .enumerate()
            .fold(0, |acc, (i, &b)| acc | (u128::from(b) << i))
    }

    fn bits(v: u128, n: usize) -> Vec<bool> {
        bits_from_bytes(&v.to_le_bytes(), n)
    }

    #[test]
    fn arithmetic_matches_integers() {
        let n = 16;
        let mut b = Builder::new();
        let x = b.input(Party::Garbler, n);
        let y = b.input(Party::Evaluator, n);
        let add = b.add(&x, &y);
        let sub = b.sub(&x, &y);
        let lt = b.lt(&x, &y);
        let eq = b.eq(&x, &y);
        let mux = b.mux(lt, &x, &y);
        let mul = b.mul_schoolbook(&x, &y);
        b.set_karatsuba_threshold(4);
        let kmul = b.mul(&x, &y);
        let k = b.constant(0xbeef, n);
        let addk = b.add(&x, &k);
        let c = b
            .finish(&[
                add,
                sub,
                vec![lt],
                vec![eq],
                mux,
                mul,
                kmul,
                addk,
                vec![Bit::ONE],
            ])
            .unwrap();
        let samples = [
            (0u128, 0u128),
            (1, 0xffff),
            (0xffff, 0xffff),
            (1234, 1234),
            (40000, 123),
            (7, 9),
        ];
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut all = samples.to_vec();
        for _ in 0..50 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            all.push((u128::from(state >> 48), u128::from((state >> 16) & 0xffff)));
        }
        for (xv, yv) in all {
            let out = c.eval(&bits(xv, n), &bits(yv, n)).unwrap();
            let m = 1u128 << n;
            let mut o = 0;
            let mut take = |w: usize| {
                let v = to_u128(&out[o..o + w]);
                o += w;
                v
            };
            assert_eq!(take(n), (xv + yv) % m);
            assert_eq!(take(n), (xv + m - yv) % m);
            assert_eq!(take(1), u128::from(xv < yv));
            assert_eq!(take(1), u128::from(xv == yv));
            assert_eq!(take(n), if xv < yv { yv } else { xv });
            assert_eq!(take(2 * n), xv * yv);
            assert_eq!(take(2 * n), xv * yv);
            assert_eq!(take(n), (xv + 0xbeef) % m);
            assert_eq!(take(1), 1);
        }
        let _ = bytes_from_bits(&[]);
    }

    #[test]
    fn constant_folding_saves_gates() {
        let mut b = Builder::new();
        let x = b.input(Party::Garbler, 8);
        let z = b.constant(0, 8);
        let s = b.add(&x, &z);
        assert_eq!(s, x);
        assert_eq!(b.and_count(), 0);
        let t = b.and(x[0], Bit::ONE);
        assert_eq!(t, x[0]);
    }
}
