//! Per-gate cost measurements (garble and evaluate one gate kind in
//! isolation, no network), for the per-gate table and the "theoretical
//! minimum" of a 2PC run. Timing only: correctness is tested elsewhere.

use std::time::{Duration, Instant};

use crate::builder::Builder;
use crate::circuit::{GateKind, Party};
use crate::gc::{self, TABLE_BYTES};
use crate::hash::{Backend, BackendUnavailable, Block, Hasher, Prg};
use crate::program::Program;

/// Time to garble and to evaluate `gates` gates of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateTiming {
    /// The gate kind measured.
    pub kind: GateKind,
    /// Gates processed.
    pub gates: u64,
    /// Garbling time (tables written to memory, not sent).
    pub garble: Duration,
    /// Evaluation time (tables read from memory).
    pub evaluate: Duration,
}

impl GateTiming {
    /// Nanoseconds per gate, garbling.
    pub fn garble_ns(&self) -> f64 {
        self.garble.as_nanos() as f64 / self.gates.max(1) as f64
    }

    /// Nanoseconds per gate, evaluation.
    pub fn evaluate_ns(&self) -> f64 {
        self.evaluate.as_nanos() as f64 / self.gates.max(1) as f64
    }
}

/// A program of `gates` independent gates of `kind` over 128 input wires
/// (64 per party); `Eq` and `Eqw` are supported too.
pub fn synthetic(kind: GateKind, gates: usize) -> Program {
    Program::compile(&synthetic_circuit(kind, gates))
}

/// The circuit behind [`synthetic`].
pub fn synthetic_circuit(kind: GateKind, gates: usize) -> crate::Circuit {
    let mut b = Builder::new();
    let x = b.input(Party::Garbler, 64);
    let y = b.input(Party::Evaluator, 64);
    let mut outs = Vec::new();
    for i in 0..gates {
        let (p, q) = (x[i % 64], y[(i * 7 + i / 64) % 64]);
        let o = match kind {
            GateKind::And => b.and(p, q),
            GateKind::Xor => b.xor(p, q),
            GateKind::Inv => b.not(p),
            GateKind::Eq | GateKind::Eqw => {
                outs.push(if kind == GateKind::Eq {
                    crate::Bit::ONE
                } else {
                    p
                });
                continue;
            }
        };
        let _ = o;
    }
    // Only EQ/EQW keep outputs (they are emitted by `finish`).
    match b.finish(&[outs]) {
        Ok(c) => c,
        Err(e) => unreachable!("synthetic circuit is malformed: {e}"),
    }
}

/// Garbles and evaluates [`synthetic`]`(kind, gates)` once each and reports
/// the times.
pub fn gate_timing(
    kind: GateKind,
    gates: usize,
    backend: Backend,
) -> Result<GateTiming, BackendUnavailable> {
    let hasher = Hasher::with_backend(backend)?;
    let prog = synthetic(kind, gates);
    let mut prg = Prg::from_seed([0x5a; 16]);
    let mut delta = prg.block();
    delta.0 |= 1;
    let n = prog.label_capacity();
    let mut g = vec![Block::ZERO; n];
    prg.fill(&mut g);
    let mut e = g.clone();
    // Touch the table memory first so that page faults are not timed.
    let mut tables = vec![1u8; prog.and_gates() as usize * TABLE_BYTES];
    let mut counter = 0;
    let mut woff = 0;
    let t0 = Instant::now();
    let _: Result<(), ()> = gc::garble(&prog, &hasher, delta, &mut g, &mut counter, &mut |b| {
        tables[woff..woff + b.len()].copy_from_slice(b);
        woff += b.len();
        Ok(())
    });
    let garble = t0.elapsed();
    let mut counter = 0;
    let mut off = 0;
    let t0 = Instant::now();
    let _: Result<(), ()> = gc::evaluate(&prog, &hasher, &mut e, &mut counter, &mut |buf| {
        buf.copy_from_slice(&tables[off..off + buf.len()]);
        off += buf.len();
        Ok(())
    });
    let evaluate = t0.elapsed();
    Ok(GateTiming {
        kind,
        gates: gates as u64,
        garble,
        evaluate,
    })
}

/// Garbles `prog` `reps` times with tables discarded (no memory traffic for
/// tables beyond one chunk) and returns the total time: the pure garbling
/// rate of a circuit.
pub fn garble_only(
    prog: &Program,
    reps: usize,
    backend: Backend,
) -> Result<Duration, BackendUnavailable> {
    let hasher = Hasher::with_backend(backend)?;
    let mut prg = Prg::from_seed([0xa5; 16]);
    let mut delta = prg.block();
    delta.0 |= 1;
    let mut g = vec![Block::ZERO; prog.label_capacity()];
    prg.fill(&mut g);
    let mut counter = 0;
    let mut sum = 0u8;
    let t0 = Instant::now();
    for _ in 0..reps {
        let _: Result<(), ()> = gc::garble(prog, &hasher, delta, &mut g, &mut counter, &mut |b| {
            sum ^= b[0];
            Ok(())
        });
    }
    let t = t0.elapsed();
    std::hint::black_box(sum);
    Ok(t)
}
