//! The circuit model: a flat, topologically ordered list of Boolean gates over
//! `u32` wire ids, with input and output values per party.
//!
//! The layout follows Bristol Fashion so that a [`Circuit`] and a Bristol
//! Fashion file are the same thing:
//!
//! * wires `0..input_bits()` are the inputs, value after value, in the order of
//!   [`Circuit::inputs`]; the first [`Circuit::garbler_values`] values belong to
//!   the garbler, the rest to the evaluator;
//! * wires `num_wires - output_bits() .. num_wires` are the outputs, value after
//!   value; both parties learn every output;
//! * every wire is assigned once, by a gate that comes before any gate that
//!   reads it.
//!
//! A value of `w` bits is carried on `w` consecutive wires, bit 0 first. When
//! values are given as bytes (see [`bits_from_bytes`]), bit `i` of the value is
//! bit `i % 8` (least significant first) of byte `i / 8`.

use thiserror::Error;

/// One gate. `XOR`, `AND` and `INV` compute; `EQ` assigns a constant and `EQW`
/// copies a wire (Bristol Fashion's assignments). Every `u32` field is a wire id, named
/// as in the variant's formula.
#[allow(missing_docs)] // The fields are the wires of each variant's one-line formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    /// `out = a ^ b`
    Xor { a: u32, b: u32, out: u32 },
    /// `out = a & b`
    And { a: u32, b: u32, out: u32 },
    /// `out = !a`
    Inv { a: u32, out: u32 },
    /// `out = value` (a public constant)
    Eq { value: bool, out: u32 },
    /// `out = a`
    Eqw { a: u32, out: u32 },
}

impl Gate {
    /// The kind of this gate.
    pub fn kind(&self) -> GateKind {
        match self {
            Gate::Xor { .. } => GateKind::Xor,
            Gate::And { .. } => GateKind::And,
            Gate::Inv { .. } => GateKind::Inv,
            Gate::Eq { .. } => GateKind::Eq,
            Gate::Eqw { .. } => GateKind::Eqw,
        }
    }

    /// The wire this gate assigns.
    pub fn output(&self) -> u32 {
        match *self {
            Gate::Xor { out, .. }
            | Gate::And { out, .. }
            | Gate::Inv { out, .. }
            | Gate::Eq { out, .. }
            | Gate::Eqw { out, .. } => out,
        }
    }

    /// The wires this gate reads (zero, one or two).
    pub fn inputs(&self) -> impl Iterator<Item = u32> {
        let (x, y) = match *self {
            Gate::Xor { a, b, .. } | Gate::And { a, b, .. } => (Some(a), Some(b)),
            Gate::Inv { a, .. } | Gate::Eqw { a, .. } => (Some(a), None),
            Gate::Eq { .. } => (None, None),
        };
        x.into_iter().chain(y)
    }
}

/// Gate kinds, for statistics and per-kind cost tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GateKind {
    /// Exclusive or (free under free-XOR).
    Xor,
    /// And (two ciphertexts under half-gates).
    And,
    /// Not (free).
    Inv,
    /// Constant assignment (free).
    Eq,
    /// Wire copy (free).
    Eqw,
}

impl GateKind {
    /// All kinds, in a fixed order.
    pub const ALL: [GateKind; 5] = [
        GateKind::Xor,
        GateKind::And,
        GateKind::Inv,
        GateKind::Eq,
        GateKind::Eqw,
    ];

    /// The Bristol Fashion name (`XOR`, `AND`, `INV`, `EQ`, `EQW`).
    pub fn name(self) -> &'static str {
        match self {
            GateKind::Xor => "XOR",
            GateKind::And => "AND",
            GateKind::Inv => "INV",
            GateKind::Eq => "EQ",
            GateKind::Eqw => "EQW",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which party provides an input value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Party {
    /// The party that garbles (generator).
    Garbler,
    /// The party that evaluates.
    Evaluator,
}

/// Why a circuit is not well formed. `gate` is the index into the gate list.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CircuitError {
    /// The generated circuit reveals a value in its middle, which a flat circuit cannot.
    #[error("the circuit reveals a value mid-circuit and has no flat (Bristol) form")]
    Reveal,
    /// A wire id is not below the wire count.
    #[error("gate {gate}: wire {wire} is out of range (the circuit has {num_wires} wires)")]
    WireOutOfRange {
        /// Gate index.
        gate: usize,
        /// The offending wire.
        wire: u32,
        /// Declared wire count.
        num_wires: u32,
    },
    /// A gate reads a wire that no earlier gate (or input) assigned.
    #[error("gate {gate}: wire {wire} is read before it is defined")]
    Undefined {
        /// Gate index.
        gate: usize,
        /// The offending wire.
        wire: u32,
    },
    /// A gate assigns a wire that is already assigned.
    #[error("gate {gate}: wire {wire} is assigned twice")]
    Reassigned {
        /// Gate index.
        gate: usize,
        /// The offending wire.
        wire: u32,
    },
    /// An output wire is never assigned.
    #[error("output wire {wire} is never assigned")]
    OutputUndefined {
        /// The offending wire.
        wire: u32,
    },
    /// Inputs and outputs need more wires than declared, or overlap.
    #[error("inputs ({inputs} bits) and outputs ({outputs} bits) do not fit in {num_wires} wires")]
    Layout {
        /// Input bits.
        inputs: u64,
        /// Output bits.
        outputs: u64,
        /// Declared wire count.
        num_wires: u32,
    },
    /// More garbler values than input values.
    #[error("{garbler} garbler values but only {values} input values")]
    Parties {
        /// Requested garbler values.
        garbler: usize,
        /// Input values present.
        values: usize,
    },
}

/// Wrong number of input bits for an evaluation.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{party:?} input has {got} bits, the circuit expects {expected}")]
pub struct InputLengthError {
    /// Whose input.
    pub party: Party,
    /// Bits given.
    pub got: usize,
    /// Bits expected.
    pub expected: usize,
}

/// A validated circuit (see the module documentation for the wire layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Circuit {
    num_wires: u32,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    garbler_values: usize,
    gates: Vec<Gate>,
}

/// Gate counts and depth of a circuit.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Stats {
    /// Total number of gates.
    pub gates: u64,
    /// Number of wires.
    pub wires: u64,
    /// Gates by kind (see [`Stats::count`]).
    pub by_kind: [u64; 5],
    /// The longest chain of AND gates from an input to any wire.
    pub and_depth: u32,
    /// Garbler input bits.
    pub garbler_input_bits: u64,
    /// Evaluator input bits.
    pub evaluator_input_bits: u64,
    /// Output bits.
    pub output_bits: u64,
}

impl Stats {
    /// The number of gates of one kind.
    pub fn count(&self, kind: GateKind) -> u64 {
        self.by_kind[kind.index()]
    }

    /// AND gates (the ones that cost ciphertexts).
    pub fn and_gates(&self) -> u64 {
        self.count(GateKind::And)
    }

    /// Gates that are free under free-XOR (XOR, INV, EQ, EQW).
    pub fn free_gates(&self) -> u64 {
        self.gates - self.and_gates()
    }
}

impl Circuit {
    /// Builds and validates a circuit. `inputs` and `outputs` are the widths
    /// of the input and output values; the garbler owns the first
    /// `(inputs.len() + 1) / 2` input values (change with
    /// [`Circuit::set_garbler_values`]).
    pub fn new(
        num_wires: u32,
        inputs: Vec<u32>,
        outputs: Vec<u32>,
        gates: Vec<Gate>,
    ) -> Result<Self, CircuitError> {
        let garbler_values = inputs.len().div_ceil(2);
        let c = Circuit {
            num_wires,
            inputs,
            outputs,
            garbler_values,
            gates,
        };
        c.validate()?;
        Ok(c)
    }

    /// Checks the invariants listed in the module documentation.
    pub fn validate(&self) -> Result<(), CircuitError> {
        let inb = self.input_bits() as u64;
        let outb = self.output_bits() as u64;
        if inb + outb > u64::from(self.num_wires) {
            return Err(CircuitError::Layout {
                inputs: inb,
                outputs: outb,
                num_wires: self.num_wires,
            });
        }
        if self.garbler_values > self.inputs.len() {
            return Err(CircuitError::Parties {
                garbler: self.garbler_values,
                values: self.inputs.len(),
            });
        }
        let mut defined = vec![false; self.num_wires as usize];
        for d in defined.iter_mut().take(inb as usize) {
            *d = true;
        }
        for (gi, g) in self.gates.iter().enumerate() {
            for w in g.inputs() {
                if w >= self.num_wires {
                    return Err(CircuitError::WireOutOfRange {
                        gate: gi,
                        wire: w,
                        num_wires: self.num_wires,
                    });
                }
                if !defined[w as usize] {
                    return Err(CircuitError::Undefined { gate: gi, wire: w });
                }
            }
            let o = g.output();
            if o >= self.num_wires {
                return Err(CircuitError::WireOutOfRange {
                    gate: gi,
                    wire: o,
                    num_wires: self.num_wires,
                });
            }
            if defined[o as usize] {
                return Err(CircuitError::Reassigned { gate: gi, wire: o });
            }
            defined[o as usize] = true;
        }
        for w in self.output_wires() {
            if !defined[w as usize] {
                return Err(CircuitError::OutputUndefined { wire: w });
            }
        }
        Ok(())
    }

    /// Number of wires.
    pub fn num_wires(&self) -> u32 {
        self.num_wires
    }

    /// The gates, in evaluation order.
    pub fn gates(&self) -> &[Gate] {
        &self.gates
    }

    /// Widths of the input values.
    pub fn inputs(&self) -> &[u32] {
        &self.inputs
    }

    /// Widths of the output values.
    pub fn outputs(&self) -> &[u32] {
        &self.outputs
    }

    /// How many of the input values (from the first) belong to the garbler.
    pub fn garbler_values(&self) -> usize {
        self.garbler_values
    }

    /// Gives the first `n` input values to the garbler and the rest to the
    /// evaluator.
    pub fn set_garbler_values(&mut self, n: usize) -> Result<(), CircuitError> {
        if n > self.inputs.len() {
            return Err(CircuitError::Parties {
                garbler: n,
                values: self.inputs.len(),
            });
        }
        self.garbler_values = n;
        Ok(())
    }

    /// Total input bits.
    pub fn input_bits(&self) -> usize {
        self.inputs.iter().map(|&w| w as usize).sum()
    }

    /// Input bits of the garbler (wires `0..garbler_input_bits()`).
    pub fn garbler_input_bits(&self) -> usize {
        self.inputs[..self.garbler_values]
            .iter()
            .map(|&w| w as usize)
            .sum()
    }

    /// Input bits of the evaluator (the input wires after the garbler's).
    pub fn evaluator_input_bits(&self) -> usize {
        self.input_bits() - self.garbler_input_bits()
    }

    /// Input bits of one party.
    pub fn party_input_bits(&self, party: Party) -> usize {
        match party {
            Party::Garbler => self.garbler_input_bits(),
            Party::Evaluator => self.evaluator_input_bits(),
        }
    }

    /// Total output bits.
    pub fn output_bits(&self) -> usize {
        self.outputs.iter().map(|&w| w as usize).sum()
    }

    /// The output wires, in order (the last `output_bits()` wires).
    pub fn output_wires(&self) -> std::ops::Range<u32> {
        (self.num_wires - self.output_bits() as u32)..self.num_wires
    }

    /// Gate counts by kind and the AND depth.
    pub fn stats(&self) -> Stats {
        let mut s = Stats {
            gates: self.gates.len() as u64,
            wires: u64::from(self.num_wires),
            garbler_input_bits: self.garbler_input_bits() as u64,
            evaluator_input_bits: self.evaluator_input_bits() as u64,
            output_bits: self.output_bits() as u64,
            ..Stats::default()
        };
        let mut depth = vec![0u32; self.num_wires as usize];
        let mut max = 0;
        for g in &self.gates {
            s.by_kind[g.kind().index()] += 1;
            let d = g.inputs().map(|w| depth[w as usize]).max().unwrap_or(0);
            let d = if g.kind() == GateKind::And { d + 1 } else { d };
            depth[g.output() as usize] = d;
            max = max.max(d);
        }
        s.and_depth = max;
        s
    }

    /// Plain (cleartext) evaluation: the reference that garbling must match.
    /// Returns the output bits, value after value.
    pub fn eval(
        &self,
        garbler: &[bool],
        evaluator: &[bool],
    ) -> Result<Vec<bool>, InputLengthError> {
        check_len(Party::Garbler, garbler.len(), self.garbler_input_bits())?;
        check_len(
            Party::Evaluator,
            evaluator.len(),
            self.evaluator_input_bits(),
        )?;
        let mut w = vec![false; self.num_wires as usize];
        w[..garbler.len()].copy_from_slice(garbler);
        w[garbler.len()..garbler.len() + evaluator.len()].copy_from_slice(evaluator);
        for g in &self.gates {
            match *g {
                Gate::Xor { a, b, out } => w[out as usize] = w[a as usize] ^ w[b as usize],
                Gate::And { a, b, out } => w[out as usize] = w[a as usize] & w[b as usize],
                Gate::Inv { a, out } => w[out as usize] = !w[a as usize],
                Gate::Eq { value, out } => w[out as usize] = value,
                Gate::Eqw { a, out } => w[out as usize] = w[a as usize],
            }
        }
        Ok(self.output_wires().map(|o| w[o as usize]).collect())
    }

    /// [`Circuit::eval`] with inputs and outputs as bytes (see
    /// [`bits_from_bytes`]).
    pub fn eval_bytes(
        &self,
        garbler: &[u8],
        evaluator: &[u8],
    ) -> Result<Vec<u8>, InputLengthError> {
        let g = bits_from_bytes_exact(Party::Garbler, garbler, self.garbler_input_bits())?;
        let e = bits_from_bytes_exact(Party::Evaluator, evaluator, self.evaluator_input_bits())?;
        Ok(bytes_from_bits(&self.eval(&g, &e)?))
    }
}

fn check_len(party: Party, got: usize, expected: usize) -> Result<(), InputLengthError> {
    if got == expected {
        Ok(())
    } else {
        Err(InputLengthError {
            party,
            got,
            expected,
        })
    }
}

/// The first `nbits` bits of `bytes`, least significant bit of byte 0 first.
/// Missing bytes read as zero.
pub fn bits_from_bytes(bytes: &[u8], nbits: usize) -> Vec<bool> {
    (0..nbits)
        .map(|i| bytes.get(i / 8).is_some_and(|b| (b >> (i % 8)) & 1 == 1))
        .collect()
}

/// Like [`bits_from_bytes`], but `bytes` must be exactly `ceil(nbits / 8)`
/// long (the error counts bits, rounded to whole bytes).
pub fn bits_from_bytes_exact(
    party: Party,
    bytes: &[u8],
    nbits: usize,
) -> Result<Vec<bool>, InputLengthError> {
    if bytes.len() != nbits.div_ceil(8) {
        return Err(InputLengthError {
            party,
            got: bytes.len() * 8,
            expected: nbits,
        });
    }
    Ok(bits_from_bytes(bytes, nbits))
}

/// Packs bits into bytes, bit 0 into the least significant bit of byte 0.
pub fn bytes_from_bits(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        out[i / 8] |= u8::from(b) << (i % 8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_and_evaluates() {
        // (a & b) ^ !a
        let c = Circuit::new(
            5,
            vec![1, 1],
            vec![1],
            vec![
                Gate::And { a: 0, b: 1, out: 2 },
                Gate::Inv { a: 0, out: 3 },
                Gate::Xor { a: 2, b: 3, out: 4 },
            ],
        )
        .unwrap();
        for a in [false, true] {
            for b in [false, true] {
                assert_eq!(c.eval(&[a], &[b]).unwrap(), vec![(a & b) ^ !a]);
            }
        }
        let s = c.stats();
        assert_eq!(s.and_gates(), 1);
        assert_eq!(s.count(GateKind::Xor), 1);
        assert_eq!(s.and_depth, 1);
        assert!(c.eval(&[true, false], &[true]).is_err());
    }

    #[test]
    fn rejects_bad_circuits() {
        let undefined = Circuit::new(
            4,
            vec![1, 1],
            vec![1],
            vec![Gate::And { a: 0, b: 2, out: 3 }],
        );
        assert_eq!(undefined, Err(CircuitError::Undefined { gate: 0, wire: 2 }));
        let twice = Circuit::new(
            4,
            vec![1, 1],
            vec![1],
            vec![
                Gate::And { a: 0, b: 1, out: 3 },
                Gate::Xor { a: 0, b: 1, out: 3 },
            ],
        );
        assert_eq!(twice, Err(CircuitError::Reassigned { gate: 1, wire: 3 }));
        let range = Circuit::new(
            4,
            vec![1, 1],
            vec![1],
            vec![Gate::And { a: 0, b: 9, out: 3 }],
        );
        assert!(matches!(range, Err(CircuitError::WireOutOfRange { .. })));
        let missing = Circuit::new(
            4,
            vec![1, 1],
            vec![1],
            vec![Gate::And { a: 0, b: 1, out: 2 }],
        );
        assert_eq!(missing, Err(CircuitError::OutputUndefined { wire: 3 }));
    }

    #[test]
    fn byte_bit_order() {
        let bits = bits_from_bytes(&[0b0000_0101, 0x80], 16);
        assert!(bits[0] && !bits[1] && bits[2] && bits[15]);
        assert_eq!(bytes_from_bits(&bits), vec![0b0000_0101, 0x80]);
    }
}
