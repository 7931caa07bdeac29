//! The generic backends: plain evaluation ([`Plain`]), counting without storing
//! ([`Counter`]), and a flat [`Circuit`] through the
//! [`Builder`](crate::builder::Builder) ([`BuilderGen`]).

use super::sub::Sub;
use super::{Gen, Refused, W, Word, xor_select_fold};
use crate::builder::{Bit, Builder};
use crate::circuit::{Circuit, CircuitError, GateKind, Party};

/// Plain evaluation: wires are `bool`s. A reveal returns the values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain {
    /// The circuit's refusal of a revealed value, if any ([`Gen::refuse`]).
    pub refused: Option<Refused>,
}

impl Gen for Plain {
    type L = bool;
    fn reveal(&mut self, w: &[W<bool>]) -> Option<Vec<bool>> {
        self.refused.is_none().then(|| plain_bits(w))
    }
    fn public(&mut self, bits: &[bool]) -> Word<bool> {
        plain_word(bits)
    }
    fn refuse(&mut self, why: Refused) {
        self.refused.get_or_insert(why);
    }
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
    pub(super) id: u32,
    pub(super) depth: u32,
}

/// Counts gates by kind, the AND depth and a structural digest (gate kinds
/// and wire ids in emission order) without storing anything.
#[derive(Clone, Debug, Default)]
pub struct Counter {
    pub(super) next: u64,
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
    /// The reveals so far: the AND gates before each, and its width in bits.
    pub reveals: Vec<(u64, usize)>,
    /// The lookups counted from their masks so far.
    pub lookups: Vec<super::Lookup>,
    /// The AND depth of the last reveal's wires: public wires come after it.
    public_depth: u32,
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
    /// Records the reveal; the values are unknown here (the structure does not depend on
    /// them).
    fn reveal(&mut self, w: &[W<CountWire>]) -> Option<Vec<bool>> {
        self.reveals.push((self.and, w.len()));
        let first = w.iter().find_map(|x| match *x {
            W::V(v) => Some(v.id),
            W::C(_) => None,
        });
        let depth = w.iter().filter_map(|x| match *x {
            W::V(v) => Some(v.depth),
            W::C(_) => None,
        });
        self.public_depth = self.public_depth.max(depth.max().unwrap_or(0));
        self.gate(8, first.unwrap_or(u32::MAX), w.len() as u32);
        self.next -= 1;
        None
    }
    /// Fresh wires, whatever the bits, as deep as the reveal they come from (so the AND
    /// depth counts the path through the reveal).
    fn public(&mut self, bits: &[bool]) -> Word<CountWire> {
        let depth = self.public_depth;
        (0..bits.len())
            .map(|_| match self.input() {
                W::V(v) => W::V(CountWire { depth, ..v }),
                c => c,
            })
            .collect()
    }
    fn refuse(&mut self, _why: Refused) {}
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

    /// Counted from the masks: with every item a wire (a one-hot vector's entries, which
    /// all have the same AND depth), bit `k` with `n` items selected is `n - 1` XOR gates
    /// after the first item, plus an INV when `init` is 1, as the fold has them; the digest
    /// mixes the masks and the items' ids instead of each gate. Otherwise, the fold.
    fn xor_select(&mut self, items: &[W<CountWire>], bits: &[(bool, Vec<u64>)]) -> Word<CountWire> {
        let mut wires = Vec::with_capacity(items.len());
        for w in items {
            match *w {
                W::V(v) => wires.push(v),
                W::C(_) => return xor_select_fold(self, items, bits),
            }
        }
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let depth = wires.iter().map(|v| v.depth).max().unwrap_or(0);
        let ids = wires.iter().fold(0u64, |h, v| {
            h.wrapping_mul(31).wrapping_add(u64::from(v.id))
        });
        self.gate(9, wires.len() as u32, bits.len() as u32);
        self.next -= 1;
        self.mix ^= ids;
        let (xor0, inv0) = (self.xor, self.inv);
        let valid = |wi: usize, word: u64| {
            let lo = wi * 64;
            match wires.len().saturating_sub(lo) {
                0 => 0,
                r if r >= 64 => word,
                r => word & (u64::MAX >> (64 - r)),
            }
        };
        let out: Word<CountWire> = bits
            .iter()
            .map(|(init, mask)| {
                let mut n = 0u64;
                let mut h = u64::from(*init);
                for (wi, &word) in mask.iter().enumerate() {
                    let m = valid(wi, word);
                    n += u64::from(m.count_ones());
                    h = (h.rotate_left(23) ^ m).wrapping_mul(K);
                }
                self.mix = (self.mix.rotate_left(23) ^ h).wrapping_mul(K);
                if n == 0 {
                    return W::C(*init);
                }
                if n == 1 && !*init {
                    // The one selected item itself, no gate.
                    let j = mask
                        .iter()
                        .enumerate()
                        .find_map(|(wi, &word)| {
                            let m = valid(wi, word);
                            (m != 0).then(|| wi * 64 + m.trailing_zeros() as usize)
                        })
                        .unwrap_or(0);
                    return W::V(wires[j]);
                }
                self.xor += n - 1;
                self.inv += u64::from(*init);
                self.next += n - 1 + u64::from(*init);
                let id = (self.next - 1) as u32;
                W::V(CountWire { id, depth })
            })
            .collect();
        self.lookups.push(super::Lookup {
            items: wires.len(),
            outputs: bits.len(),
            xor_gates: self.xor - xor0,
            inv_gates: self.inv - inv0,
        });
        out
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

/// Emits gates into a [`Builder`] (a flat [`Circuit`]). A flat circuit has no
/// mid-circuit reveal: a circuit that reveals fails at [`BuilderGen::finish`].
#[derive(Debug, Default)]
pub struct BuilderGen {
    /// The builder that receives the gates.
    pub builder: Builder,
    revealed: bool,
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
        if self.revealed {
            return Err(CircuitError::Reveal);
        }
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
    fn reveal(&mut self, _w: &[W<Bit>]) -> Option<Vec<bool>> {
        self.revealed = true;
        None
    }
    fn public(&mut self, bits: &[bool]) -> Word<Bit> {
        bits.iter().map(|&b| W::V(Bit::constant(b))).collect()
    }
    fn refuse(&mut self, _why: Refused) {}
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
