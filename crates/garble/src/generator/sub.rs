//! Sub-circuits compiled once into the engine's [`Program`] and replayed with the
//! caller's labels ([`super::Gen::call`]): field multiplication and squaring are 96% of
//! the signature's AND gates.

use super::backends::BuilderGen;
use super::{W, Word};
use crate::builder::Bit;
use crate::circuit::{CircuitError, Party};
use crate::program::Program;

/// A sub-circuit compiled once per process and replayed at every call (see
/// [`super::Gen::call`]): its program, its statistics and, per output, its AND
/// depth from the inputs.
#[derive(Debug)]
pub struct Sub {
    pub(super) name: &'static str,
    pub(super) prog: Program,
    pub(super) out_depth: Vec<u32>,
    pub(super) a_bits: usize,
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
