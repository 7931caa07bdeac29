//! Measurements for the scenarios and the benches:
//!
//! * [`gate_timing`]: garble and evaluate one gate kind in isolation (no
//!   network), for the per-gate table and the "theoretical minimum" of a
//!   2PC run;
//! * [`lookup_timing`]: one lookup in a public table, as a generated circuit's label
//!   backends compute it;
//! * [`garble_only`]: the garbling rate of a whole circuit (no network);
//! * [`loopback_2pc`]: a whole two-party session over loopback TCP, one or
//!   many evaluations (the bulk 2PC rate).
//!
//! Timing only: correctness is tested elsewhere ([`loopback_2pc`] still
//! checks its outputs, outside the timed session).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::builder::Builder;
use crate::channel::{DEFAULT_TIMEOUT, TcpChannel, thread_cpu};
use crate::circuit::{Circuit, GateKind, Party};
use crate::gc::TableSink;
use crate::hash::{Backend, BackendUnavailable, Block, GcHash, Hasher, Prg};
use crate::program::Program;
use crate::scheme::Scheme;
use crate::session::{
    SessionError, SessionOptions, SessionOutput, SessionReport, Stage, run_evaluator, run_garbler,
};

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
    /// The garbling thread's CPU time over the same spans as `garble` (no
    /// time preempted by other processes: steadier on a shared machine).
    pub garble_cpu: Duration,
    /// The evaluating thread's CPU time over the spans of `evaluate`.
    pub evaluate_cpu: Duration,
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

    /// Thread CPU nanoseconds per gate, garbling.
    pub fn garble_cpu_ns(&self) -> f64 {
        self.garble_cpu.as_nanos() as f64 / self.gates.max(1) as f64
    }

    /// Thread CPU nanoseconds per gate, evaluation.
    pub fn evaluate_cpu_ns(&self) -> f64 {
        self.evaluate_cpu.as_nanos() as f64 / self.gates.max(1) as f64
    }
}

/// A program of `gates` independent gates of `kind` over 128 input wires
/// (64 per party); `Eq` and `Eqw` are supported too.
pub fn synthetic(kind: GateKind, gates: usize) -> Program {
    Program::compile(&synthetic_circuit(kind, gates))
}

/// The circuit behind [`synthetic`].
pub fn synthetic_circuit(kind: GateKind, gates: usize) -> Circuit {
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

/// Gates in one synthetic program of [`gate_timing`], and so in one timed
/// garbling (and one timed evaluation): its gate list (12 bytes a gate,
/// 768 KiB) and its tables (32 bytes an AND gate, 2 MiB) stay in the cache,
/// as a real circuit's gate list does when it is garbled again and again
/// and as a session's tables do on their way through the channel buffer.
pub const GATE_BLOCK: usize = 1 << 16;

/// Garbles and evaluates about `gates` gates of one kind and reports the
/// times: [`synthetic`]`(kind, min(gates, GATE_BLOCK))` garbled and then
/// evaluated `ceil(gates / GATE_BLOCK)` times (the AND counter runs on, so
/// every AND gate has its own tweak and table). With AND gates, each
/// repetition garbles into one table buffer of `32 bytes x` the block's AND
/// gates (touched before timing; the kernels write the tables in place, as a
/// session's channel takes them) and is then evaluated from it (copied
/// piecewise into the evaluator's table buffer, where a session's socket reads
/// them; that copy is not timed, as garbling's tables are not copied); free
/// gates have no tables, so their repetitions are all garbled, then all
/// evaluated. Garbling and evaluation are timed separately and summed over the
/// repetitions.
///
/// Why the feeding copy is left out: a session's evaluator reads its tables
/// from the socket straight into that buffer (the kernel's copy, a cost of the
/// network), and a `memcpy` in user space here measured 16-24 ns per AND gate
/// in one process and 6 ns in another with the same kernel (fixed-key hash,
/// 2026-11-27, Zen 4 VM): glibc's `rep movsb` path runs several times slower
/// for some placements of the two buffers (`GLIBC_TUNABLES=
/// glibc.cpu.x86_rep_movsb_threshold=4294967295` brought the slow process to
/// 6.7 ns), so the figure depended on the heap's layout, not on the gate.
///
/// Why blocks and not one long program: one program of four million XOR
/// gates has a 48 MB gate list, and one million AND gates write 32 MB of
/// tables; the time per gate would then be the memory bandwidth of
/// streaming them (which the 2PC figures measure), not the gate. A block
/// keeps both in the cache, so the figure is the gate's own cost.
///
/// Never inlined: inlined into a large caller (the `gc-2pc` scenario's run), its
/// garbling loop was compiled as a separate, slower instance of `gc::garble`
/// (measured 17-18 ns per AND against 12-14 ns here, with the same kernels), so the
/// figure depended on who asked for it.
///
/// `hash` is the garbling hash ([`GcHash`]; MITCCRH under a fixed seed: its
/// cost does not depend on the seed). Half-gates; [`gate_timing_with`] takes
/// the scheme.
pub fn gate_timing(
    kind: GateKind,
    gates: usize,
    backend: Backend,
    hash: GcHash,
) -> Result<GateTiming, BackendUnavailable> {
    gate_timing_with(kind, gates, backend, hash, Scheme::HalfGates)
}

/// [`gate_timing`] under a garbling scheme (the tables of one block take
/// [`Scheme::table_bytes`] per AND gate).
#[inline(never)]
pub fn gate_timing_with(
    kind: GateKind,
    gates: usize,
    backend: Backend,
    hash: GcHash,
    scheme: Scheme,
) -> Result<GateTiming, BackendUnavailable> {
    let mut prg = Prg::from_seed([0x5a; 16]);
    let mut coins = Prg::from_seed([0x5b; 16]);
    let hasher = Hasher::of(hash, prg.block(), backend)?;
    let block = gates.clamp(1, GATE_BLOCK);
    let reps = gates.div_ceil(block).max(1);
    let prog = synthetic(kind, block);
    let mut delta = prg.block();
    delta.0 |= 1;
    let n = prog.label_capacity();
    let mut g = vec![Block::ZERO; n];
    prg.fill(&mut g);
    let mut e = g.clone();
    // Touch the table memory first so that page faults are not timed.
    let mut tables = vec![1u8; prog.and_gates() as usize * scheme.table_bytes()];
    let (mut gctr, mut ectr) = (0, 0);
    let (mut garble, mut evaluate) = (Duration::ZERO, Duration::ZERO);
    let (mut garble_cpu, mut evaluate_cpu) = (Duration::ZERO, Duration::ZERO);
    let mut garble_once = |g: &mut [Block], tables: &mut [u8]| {
        let c0 = thread_cpu();
        let t0 = Instant::now();
        let mut sink = InPlace {
            buf: tables,
            fill: 0,
        };
        let Ok(()) = scheme.garble_to(&prog, &hasher, delta, &mut coins, g, &mut gctr, &mut sink);
        garble += t0.elapsed();
        garble_cpu += thread_cpu().saturating_sub(c0);
    };
    let mut evaluate_once = |e: &mut [Block], tables: &[u8]| {
        let mut off = 0;
        // The feeding copies' own time, taken out of the evaluation's (see above).
        let mut feed = Duration::ZERO;
        let c0 = thread_cpu();
        let t0 = Instant::now();
        let _: Result<(), ()> = scheme.evaluate(&prog, &hasher, e, &mut ectr, &mut |buf| {
            let t = Instant::now();
            buf.copy_from_slice(&tables[off..off + buf.len()]);
            off += buf.len();
            feed += t.elapsed();
            Ok(())
        });
        evaluate += t0.elapsed().saturating_sub(feed);
        evaluate_cpu += thread_cpu().saturating_sub(c0).saturating_sub(feed);
    };
    if prog.and_gates() == 0 {
        // Free gates have no tables: all garblings, then all evaluations, so that each
        // loop runs over its own label array and not the one the other just evicted it
        // with (alternating costs one of them 10-15%, whichever runs second).
        for _ in 0..reps {
            garble_once(&mut g, &mut tables);
        }
        for _ in 0..reps {
            evaluate_once(&mut e, &tables);
        }
    } else {
        for _ in 0..reps {
            garble_once(&mut g, &mut tables);
            evaluate_once(&mut e, &tables);
        }
    }
    std::hint::black_box((&g, &e));
    Ok(GateTiming {
        kind,
        gates: (block * reps) as u64,
        garble,
        evaluate,
        garble_cpu,
        evaluate_cpu,
    })
}

/// The tables of one timed garbling, written where the kernels put them, as a session's
/// channel takes them into its send buffer (`TableSink` over `send_in_place`): no copy
/// after the kernel is timed that a session does not make. The buffer holds all of a
/// program's tables, so the room left always fits the rest.
struct InPlace<'a> {
    buf: &'a mut [u8],
    fill: usize,
}

impl TableSink for InPlace<'_> {
    type Error = std::convert::Infallible;
    fn room(&self) -> usize {
        self.buf.len() - self.fill
    }
    fn put(&mut self, n: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), Self::Error> {
        fill(&mut self.buf[self.fill..self.fill + n]);
        self.fill += n;
        Ok(())
    }
}

/// Time per lookup in a public table of `items` entries with `outputs` output bits, as
/// both streaming parties compute it ([`crate::stream::xor_select_blocks`]), over random
/// labels and masks with half their bits set, the mean of `reps` lookups. For a cost model
/// of generated circuits, whose lookups cost far less than their XOR gates at the per-gate
/// rate.
#[inline(never)]
pub fn lookup_timing(items: usize, outputs: usize, reps: usize) -> Duration {
    let mut prg = Prg::from_seed([0x5c; 16]);
    let labels: Vec<Block> = (0..items).map(|_| prg.block()).collect();
    let bits: Vec<(bool, Vec<u64>)> = (0..outputs)
        .map(|_| {
            let m = (0..items.div_ceil(64))
                .map(|_| prg.block().0 as u64)
                .collect();
            (false, m)
        })
        .collect();
    // One untimed lookup: the first touches the memory.
    std::hint::black_box(crate::stream::xor_select_blocks(&labels, &bits));
    let reps = reps.max(1);
    let t0 = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(crate::stream::xor_select_blocks(
            std::hint::black_box(&labels),
            &bits,
        ));
    }
    t0.elapsed() / reps as u32
}

/// Garbles `prog` `reps` times with tables discarded (no memory traffic for
/// tables beyond one chunk) and returns the total time: the pure garbling
/// rate of a circuit, under the garbling hash `hash`, with half-gates
/// ([`garble_only_with`] takes the scheme).
pub fn garble_only(
    prog: &Program,
    reps: usize,
    backend: Backend,
    hash: GcHash,
) -> Result<Duration, BackendUnavailable> {
    garble_only_with(prog, reps, backend, hash, Scheme::HalfGates)
}

/// [`garble_only`] under a garbling scheme.
pub fn garble_only_with(
    prog: &Program,
    reps: usize,
    backend: Backend,
    hash: GcHash,
    scheme: Scheme,
) -> Result<Duration, BackendUnavailable> {
    let mut prg = Prg::from_seed([0xa5; 16]);
    let mut coins = Prg::from_seed([0xa6; 16]);
    let hasher = Hasher::of(hash, prg.block(), backend)?;
    let mut delta = prg.block();
    delta.0 |= 1;
    let mut g = vec![Block::ZERO; prog.label_capacity()];
    prg.fill(&mut g);
    let mut counter = 0;
    let mut sum = 0u8;
    let t0 = Instant::now();
    for _ in 0..reps {
        let sink = &mut |b: &[u8]| {
            sum ^= b[0];
            Ok(())
        };
        let _: Result<(), ()> =
            scheme.garble(prog, &hasher, delta, &mut coins, &mut g, &mut counter, sink);
    }
    let t = t0.elapsed();
    std::hint::black_box(sum);
    Ok(t)
}

/// What [`loopback_2pc`] measured: both parties' session reports.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopbackRun {
    /// The garbler's report (its `total` is the session's wall time: the
    /// garbler starts first and finishes last, when the outputs are back).
    pub garbler: SessionReport,
    /// The evaluator's report.
    pub evaluator: SessionReport,
}

impl LoopbackRun {
    /// AND gates over all evaluations.
    pub fn and_gates(&self) -> u64 {
        self.garbler.and_gates()
    }

    /// AND gates per second over the whole session: the garbler's wall time,
    /// compiling, handshake and base OTs included.
    pub fn and_per_s(&self) -> f64 {
        self.and_gates() as f64 / self.garbler.total.as_secs_f64().max(1e-12)
    }

    /// AND gates per second of the garbler's `Garble` stage alone.
    pub fn garble_stage_and_per_s(&self) -> f64 {
        let t = self.garbler.stage(Stage::Garble).time;
        self.and_gates() as f64 / t.as_secs_f64().max(1e-12)
    }

    /// Bytes the garbler sent while garbling, per AND gate: exactly the
    /// scheme's [`Scheme::table_bytes`] (32 or 25).
    pub fn table_bytes_per_and(&self) -> f64 {
        self.garbler.stage(Stage::Garble).bytes_sent as f64 / self.and_gates().max(1) as f64
    }
}

/// Why [`loopback_2pc`] failed.
#[derive(Debug, Error)]
pub enum LoopbackError {
    /// The loopback listener could not be set up.
    #[error("loopback socket: {0}")]
    Socket(#[from] std::io::Error),
    /// The garbler's session failed.
    #[error("garbler: {0}")]
    Garbler(SessionError),
    /// The evaluator's session failed.
    #[error("evaluator: {0}")]
    Evaluator(SessionError),
    /// The evaluator thread panicked.
    #[error("the evaluator thread panicked")]
    Panicked,
    /// A party's output differs from plain evaluation.
    #[error("evaluation {0}: the two-party output differs from plain evaluation")]
    WrongOutput(usize),
}

/// A two-party session over TCP on 127.0.0.1 inside this process: the
/// garbler on the calling thread, the evaluator on a new one, `evaluations`
/// evaluations of `circuit` with pseudorandom inputs (bulk mode: one base
/// OT and one OT extension for all). Both parties' outputs are checked
/// against plain evaluation after the session (not timed). The bulk 2PC
/// rate is [`LoopbackRun::and_per_s`].
pub fn loopback_2pc(
    circuit: &Circuit,
    evaluations: usize,
    opts: &SessionOptions,
) -> Result<LoopbackRun, LoopbackError> {
    let mut prg = Prg::from_seed([0x3c; 16]);
    let mut bits = |n: usize| -> Vec<bool> { (0..n).map(|_| prg.block().lsb()).collect() };
    let g: Vec<Vec<bool>> = (0..evaluations)
        .map(|_| bits(circuit.garbler_input_bits()))
        .collect();
    let e: Vec<Vec<bool>> = (0..evaluations)
        .map(|_| bits(circuit.evaluator_input_bits()))
        .collect();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    let (c2, e2, o2) = (circuit.clone(), e.clone(), *opts);
    let evaluator = std::thread::spawn(move || -> Result<SessionOutput, SessionError> {
        let mut ch = TcpChannel::connect(&addr, DEFAULT_TIMEOUT)?;
        run_evaluator(&mut ch, &c2, &e2, &o2)
    });
    let garbled = TcpChannel::accept(&listener, DEFAULT_TIMEOUT)
        .map_err(SessionError::from)
        .and_then(|mut ch| run_garbler(&mut ch, circuit, &g, opts));
    // A failed garbler drops its socket, so the evaluator fails fast too.
    let evaluated = evaluator.join().map_err(|_| LoopbackError::Panicked)?;
    let go = garbled.map_err(LoopbackError::Garbler)?;
    let eo = evaluated.map_err(LoopbackError::Evaluator)?;
    for (k, (x, y)) in g.iter().zip(&e).enumerate() {
        let want = circuit
            .eval(x, y)
            .map_err(|_| LoopbackError::WrongOutput(k))?;
        if go.outputs.get(k) != Some(&want) || eo.outputs.get(k) != Some(&want) {
            return Err(LoopbackError::WrongOutput(k));
        }
    }
    Ok(LoopbackRun {
        garbler: go.report,
        evaluator: eo.report,
    })
}
