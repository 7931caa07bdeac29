//! [`Scheme`]: which garbling scheme garbles the AND gates of a session,
//! half-gates ([`crate::gc`], 32 bytes per AND) or three-halves
//! ([`crate::threehalves`], 25 bytes per AND). XOR, INV and constants are
//! free in both, and both use the same labels, offset, hashes, output
//! decoding and output check, so the choice changes the AND gates alone.
//! Both parties must choose the same one: the session header carries it.

use std::fmt;
use std::str::FromStr;

use crate::gc::{self, TableSink, TableSource};
use crate::hash::{Block, Hasher, Prg};
use crate::program::Program;
use crate::threehalves;

/// A garbling scheme for AND gates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Half-gates (Zahur, Rosulek, Evans, EUROCRYPT 2015): two ciphertexts,
    /// 32 bytes per AND. The default.
    #[default]
    HalfGates,
    /// Three-halves (Rosulek, Roy, CRYPTO 2021): three half-ciphertexts and
    /// five control bits, 25 bytes per AND, three hash calls per AND to
    /// evaluate (half-gates: two) and six to garble (four).
    ThreeHalves,
}

impl Scheme {
    /// Both schemes, the default first.
    pub const ALL: [Scheme; 2] = [Scheme::HalfGates, Scheme::ThreeHalves];

    /// The name on the command line and in records: `half-gates`,
    /// `three-halves`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::HalfGates => "half-gates",
            Scheme::ThreeHalves => "three-halves",
        }
    }

    /// The number that names the scheme in a session header.
    pub fn id(self) -> u32 {
        match self {
            Scheme::HalfGates => 1,
            Scheme::ThreeHalves => 2,
        }
    }

    /// The scheme a header's number names, if any.
    pub fn from_id(id: u32) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Bytes of garbled table per AND gate: 32 or 25.
    pub fn table_bytes(self) -> usize {
        match self {
            Scheme::HalfGates => gc::TABLE_BYTES,
            Scheme::ThreeHalves => threehalves::TABLE_BYTES,
        }
    }

    /// Garbles `prog` once into `sink` ([`gc::garble_to`] or
    /// [`threehalves::garble_to`]); `prg` gives three-halves its secret
    /// coins (half-gates draws none).
    #[allow(clippy::too_many_arguments)]
    pub fn garble_to<S: TableSink + ?Sized>(
        self,
        prog: &Program,
        hasher: &Hasher,
        delta: Block,
        prg: &mut Prg,
        labels: &mut [Block],
        gate_counter: &mut u64,
        sink: &mut S,
    ) -> Result<(), S::Error> {
        match self {
            Scheme::HalfGates => gc::garble_to(prog, hasher, delta, labels, gate_counter, sink),
            Scheme::ThreeHalves => {
                threehalves::garble_to(prog, hasher, delta, prg, labels, gate_counter, sink)
            }
        }
    }

    /// Garbles `prog` once, the tables to `sink` in chunks ([`gc::garble`] or
    /// [`threehalves::garble`]).
    #[allow(clippy::too_many_arguments)]
    pub fn garble<E>(
        self,
        prog: &Program,
        hasher: &Hasher,
        delta: Block,
        prg: &mut Prg,
        labels: &mut [Block],
        gate_counter: &mut u64,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Scheme::HalfGates => gc::garble(prog, hasher, delta, labels, gate_counter, sink),
            Scheme::ThreeHalves => {
                threehalves::garble(prog, hasher, delta, prg, labels, gate_counter, sink)
            }
        }
    }

    /// Evaluates `prog` once ([`gc::evaluate`] or [`threehalves::evaluate`]).
    pub fn evaluate<E>(
        self,
        prog: &Program,
        hasher: &Hasher,
        labels: &mut [Block],
        gate_counter: &mut u64,
        source: &mut TableSource<'_, E>,
    ) -> Result<(), E> {
        match self {
            Scheme::HalfGates => gc::evaluate(prog, hasher, labels, gate_counter, source),
            Scheme::ThreeHalves => {
                threehalves::evaluate(prog, hasher, labels, gate_counter, source)
            }
        }
    }

    /// [`gc::simulate`] under this scheme: garbler and evaluator in one
    /// process, no channel, no OT. Returns the decoded outputs and the table
    /// bytes produced.
    pub fn simulate(
        self,
        prog: &Program,
        hasher: &Hasher,
        prg: &mut Prg,
        garbler_inputs: &[bool],
        evaluator_inputs: &[bool],
    ) -> (Vec<bool>, usize) {
        let mut delta = prg.block();
        delta.0 |= 1;
        let n = prog.label_capacity();
        let mut g = vec![Block::ZERO; n];
        let mut e = vec![Block::ZERO; n];
        for (&s, &x) in prog
            .garbler_inputs
            .iter()
            .zip(garbler_inputs)
            .chain(prog.evaluator_inputs.iter().zip(evaluator_inputs))
        {
            g[s as usize] = prg.block();
            e[s as usize] = g[s as usize] ^ delta.select(x);
        }
        let mut tables = Vec::with_capacity(prog.and_gates() as usize * self.table_bytes());
        let ok: Result<(), ()> = self.garble(prog, hasher, delta, prg, &mut g, &mut 0, &mut |b| {
            tables.extend_from_slice(b);
            Ok(())
        });
        debug_assert!(ok.is_ok());
        let d = gc::decode_bits(prog, &g);
        let mut off = 0usize;
        let ok: Result<(), ()> = self.evaluate(prog, hasher, &mut e, &mut 0, &mut |buf| {
            buf.copy_from_slice(&tables[off..off + buf.len()]);
            off += buf.len();
            Ok(())
        });
        debug_assert!(ok.is_ok());
        (gc::decode(prog, &e, &d), tables.len())
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheme name that is neither `half-gates` nor `three-halves`.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("unknown garbling scheme {0:?}: expected half-gates or three-halves")]
pub struct UnknownScheme(pub String);

impl FromStr for Scheme {
    type Err = UnknownScheme;
    fn from_str(s: &str) -> Result<Scheme, UnknownScheme> {
        Scheme::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| UnknownScheme(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        for s in Scheme::ALL {
            assert_eq!(s.name().parse::<Scheme>(), Ok(s));
            assert_eq!(Scheme::from_id(s.id()), Some(s));
            assert_eq!(s.to_string(), s.name());
        }
        assert_eq!(Scheme::default(), Scheme::HalfGates);
        assert!("threehalves".parse::<Scheme>().is_err());
        assert_eq!(Scheme::from_id(0), None);
        assert_eq!(Scheme::from_id(3), None);
        assert_eq!(Scheme::HalfGates.table_bytes(), 32);
        assert_eq!(Scheme::ThreeHalves.table_bytes(), 25);
    }
}
