//! Scenario `gc-2pc`: secure two-party computation with garbled circuits (after
//! markkurossi/mpc, 2022). AES-128, the SHA-256 compression function and a 1024-bit
//! multiplication, each:
//!
//! * evaluated in the clear (`native`, the baseline);
//! * garbled locally, without a network (`gc`), and gate by gate (AND, XOR, INV; garble and
//!   evaluate) as micro-benchmarks;
//! * computed end to end by two processes over loopback TCP (`2pc`): this process garbles,
//!   a child process (this binary again, see [`run_if_evaluator`]) evaluates. Single-shot
//!   (one evaluation per session, OT included) and bulk (many evaluations per session).
//!
//! Given circuits of the user's (`ccbench run gc-2pc --circuit FILE`, `RunOptions::circuits`),
//! the same method runs on those instead, with the user's inputs or inputs of the right
//! widths made here, and the cost summary gets a row for each.
//!
//! The report gets the stage table (`Load | Init | OT Init | Peer Inputs | Garble | Result`,
//! time, % and bytes), a per-gate table (count, ns/gate, time) and the theoretical minimum
//! (gates × isolated garbling cost) against the measured total. Every 2PC output is checked
//! against plain evaluation, by both parties.
//!
//! The garbling hash (`--hash`, [`RunOptions::gc_hash`](harness::RunOptions)): the sessions
//! run MITCCRH unless the user chose the fixed-key hash. The per-gate micro-benchmarks and
//! the garbling without a network always measure both hashes, and without `--hash` the bulk
//! sessions run under both too, so the `hashes` table shows what the multi-instance bound
//! costs (the bulk configurations' sessions run in turn, one of each after the other, so
//! that the machine's changes of speed fall on all of them alike). Every record says its
//! hash in `params.gc_hash` (`params.hash` is the AES backend, as before). The `peers`
//! table puts other engines' published or measured figures beside this run's.
//!
//! The garbling scheme (`--scheme`, [`RunOptions::gc_scheme`](harness::RunOptions)): the
//! sessions garble with half-gates unless the user chose three-halves (Rosulek and Roy,
//! CRYPTO 2021: 25 bytes per AND instead of 32, more hashing). Without `--scheme` the AND
//! micro-benchmark, the garbling without a network and the bulk sessions also run under the
//! other scheme (with the sessions' hash, over the same link), and the `schemes` table puts
//! the two side by side and says which wins where. Every garbled-circuit record says its
//! scheme in `params.gc_scheme`.

pub(crate) mod analysis;
pub mod net;
mod peer;
pub mod replay;

use std::time::Duration;

use garble::circuit::bits_from_bytes_exact;
use garble::hash::{Backend as HashBackend, GcHash};
use garble::microbench;
use garble::program::Program;
use garble::scheme::Scheme;
use garble::{Circuit, GateKind, Party};
use measure::params;
use measure::record::{Body, Check, StageBreakdown, Table, Value, Verdict};
use measure::sampler::Samples;
use measure::stages::Stages;

pub(crate) use self::analysis::add_party_stages;
pub use self::analysis::stage_breakdown;
use self::analysis::{GateCosts, MICRO_KINDS, add_stages, gate_name, gate_table};
use self::net::{Compute, Model, add_predictions, link_params, net_params, open_net};
pub use self::peer::{EVALUATOR_ENV, load_circuit, run_if_evaluator};
pub(crate) use self::peer::{
    PartyStage, Token, decode_stages, encode_stages, run_child_if, spec_fields, spec_text,
    with_evaluator,
};
pub use self::peer::{
    TwoParty, two_party, two_party_both, two_party_compiled_ahead, two_party_over,
};
use garble::link::Net;
use garble::session::Stage;
use harness::{At, CircuitChoice, Context, Preset, Scenario, ScenarioError};

/// The scenario's name.
pub const NAME: &str = "gc-2pc";

/// The circuits, by library name.
pub const CIRCUITS: [&str; 3] = ["aes128", "sha256", "mul1024"];

/// What the garbler wrote to its socket in one single-shot session.
#[derive(Debug, Clone, Copy, Default)]
struct WireBytes {
    /// Measured: the socket's counter.
    measured: u64,
    /// Predicted from the protocol's messages and the circuit.
    expected: u64,
    /// The measured bytes less everything but the tables, per AND gate.
    tables_per_and: f64,
}

/// The circuit of the cost summary's row.
const HEADLINE_CIRCUIT: &str = "aes128";

/// The `gc-2pc` scenario.
pub struct Gc2pc;

/// Sizes of one run, by preset.
struct Plan {
    /// Gates per micro-benchmark run.
    gates: usize,
    /// Runs of each micro-benchmark and garble-only measurement.
    runs: usize,
    /// Single-shot sessions per circuit.
    sessions: usize,
    /// Evaluations per bulk session (AES-128; the larger circuits get proportionally fewer).
    bulk: u64,
    /// Bulk sessions per circuit.
    bulk_sessions: usize,
}

impl Plan {
    fn of(preset: Preset) -> Plan {
        match preset {
            Preset::Quick => Plan {
                gates: 1 << 20,
                runs: 7,
                sessions: 5,
                bulk: 256,
                bulk_sessions: 2,
            },
            Preset::Full => Plan {
                gates: 1 << 22,
                runs: 21,
                sessions: 20,
                bulk: 4096,
                bulk_sessions: 5,
            },
        }
    }

    /// Evaluations per bulk session for a circuit of `and_gates`: about the AND gates of
    /// `bulk` AES-128 evaluations, at least 4.
    fn bulk_for(&self, and_gates: u64) -> u64 {
        const AES_AND: u64 = 6_400;
        (self.bulk * AES_AND / and_gates.max(1)).max(4)
    }

    /// Evaluations per bulk session of `c`: [`Plan::bulk_for`] its AND gates, at most
    /// [`MAX_BULK`] (a circuit of few AND gates would otherwise get millions), no more than
    /// both parties' sessions, which share this machine, hold in [`BULK_MEMORY`] or half the
    /// memory available when the run starts, whichever is less
    /// ([`garble::session::bulk_memory_bytes`]: the OT extension for all evaluations' inputs
    /// runs at once), and over a link of `rate` bytes per second no more than the garbler's
    /// bytes of [`BULK_LINK_TIME`] (at least four). At least one.
    fn bulk_evaluations(&self, c: &Circuit, available: Option<u64>, rate: Option<f64>) -> u64 {
        let per_eval = garble::session::bulk_memory_bytes(c, 1, Party::Garbler)
            + garble::session::bulk_memory_bytes(c, 1, Party::Evaluator);
        let budget = available.map_or(BULK_MEMORY, |a| (a / 2).min(BULK_MEMORY));
        let fits = budget / per_eval.max(1);
        let sent = |n| garble::session::expected_wire_bytes(c, n).0;
        let per_eval_sent = sent(2).saturating_sub(sent(1)).max(1);
        let carried = rate.map_or(u64::MAX, |r| {
            ((r * BULK_LINK_TIME.as_secs_f64()) as u64 / per_eval_sent).max(4)
        });
        self.bulk_for(c.stats().and_gates())
            .min(MAX_BULK)
            .min(carried)
            .min(fits)
            .max(1)
    }
}

/// The most evaluations of one bulk session, as `ccbench gc garble|evaluate` allow.
const MAX_BULK: u64 = 1_000_000;

/// The most memory both parties of a bulk session may hold for it: the built-in circuits
/// take about 36 MB (AES-128's 4,096 evaluations) or less.
const BULK_MEMORY: u64 = 1 << 30;

/// The longest a bulk session's tables may take on its link at the link's rate: the named
/// profiles stay under it with every built-in circuit (AES-128's 4,096 evaluations, 864 MB
/// from the garbler, take 35 s over `wan` and 69 s over `intercontinental`); a custom
/// profile of 1 Mbit/s gets 71 AES-128 evaluations a session instead of 4,096 (1.9 hours).
const BULK_LINK_TIME: Duration = Duration::from_secs(120);

/// The hash of the sessions, and whether the user chose it (`--hash`): without a choice the
/// sessions run the default (MITCCRH) and `gc-2pc` measures the other hash beside it.
pub(crate) fn session_hash(ctx: &Context<'_>) -> Result<(GcHash, bool), ScenarioError> {
    match &ctx.options.gc_hash {
        None => Ok((GcHash::default(), false)),
        Some(s) => s
            .parse()
            .map(|h| (h, true))
            .map_err(|e| ScenarioError::step("--hash", e)),
    }
}

/// The scheme of the sessions, and whether the user chose it (`--scheme`): without a choice
/// the sessions garble with half-gates and `gc-2pc` measures three-halves beside it.
pub(crate) fn session_scheme(ctx: &Context<'_>) -> Result<(Scheme, bool), ScenarioError> {
    match &ctx.options.gc_scheme {
        None => Ok((Scheme::default(), false)),
        Some(s) => s
            .parse()
            .map(|x| (x, true))
            .map_err(|e| ScenarioError::step("--scheme", e)),
    }
}

/// The scheme that is not `s`.
fn other_scheme(s: Scheme) -> Scheme {
    match s {
        Scheme::HalfGates => Scheme::ThreeHalves,
        Scheme::ThreeHalves => Scheme::HalfGates,
    }
}

/// What one scheme cost in this run (the sessions' hash, detected AES backend): the AND gate
/// alone, for the `schemes` table.
#[derive(Debug, Clone, Copy)]
struct SchemeFigures {
    scheme: Scheme,
    /// AND gate, isolated: garble and evaluate, ns.
    and_garble: f64,
    and_evaluate: f64,
}

/// One circuit's figures under one scheme (the sessions' hash): garbling without a network
/// and bulk 2PC in M AND/s, and the table bytes per AND the bulk sessions' garbler sent.
#[derive(Debug, Clone)]
struct CircuitSchemeFigures {
    circuit: String,
    scheme: Scheme,
    garble_mand: f64,
    bulk_mand: Option<f64>,
    bytes_per_and: Option<f64>,
}

/// The hash that is not `h`.
fn other(h: GcHash) -> GcHash {
    match h {
        GcHash::Mitccrh => GcHash::FixedKey,
        GcHash::FixedKey => GcHash::Mitccrh,
    }
}

/// What one hash cost in this run (detected AES backend), for the `hashes` and `peers` tables.
#[derive(Debug, Clone, Copy)]
struct HashFigures {
    hash: GcHash,
    /// AND gate, isolated: garble and evaluate, ns.
    and_garble: f64,
    and_evaluate: f64,
}

/// One circuit's figures under one hash: garbling without a network and bulk 2PC, as AND
/// gates per µs (M AND/s); `None` where not measured.
#[derive(Debug, Clone)]
struct CircuitHashFigures {
    circuit: String,
    hash: GcHash,
    garble_mand: f64,
    bulk_mand: Option<f64>,
    single_ms: Option<f64>,
}

fn hash_name(b: HashBackend) -> &'static str {
    match b {
        HashBackend::AesNi => "aes-ni",
        HashBackend::Portable => "portable",
    }
}

/// Deterministic, input-length inputs for a circuit: the parties' inputs are not secret in
/// a benchmark, and fixed inputs make runs comparable.
fn inputs(c: &Circuit) -> (Vec<u8>, Vec<u8>) {
    let fill = |n: usize, seed: u8| -> Vec<u8> {
        (0..n.div_ceil(8))
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    };
    (
        fill(c.garbler_input_bits(), 0x11),
        fill(c.evaluator_input_bits(), 0x77),
    )
}

/// A library circuit, or a scenario error naming it.
fn circuit(name: &str) -> Result<Circuit, ScenarioError> {
    garble::library::by_name(name)
        .ok_or_else(|| ScenarioError::step("circuit", format!("no library circuit {name:?}")))
}

/// A circuit this run measures, with the parties' inputs.
pub struct Chosen {
    /// How the evaluator process loads it, and its name in records: the file's path as
    /// given, or the library name.
    pub spec: String,
    /// The circuit.
    pub circuit: Circuit,
    /// The garbler's input bytes.
    pub garbler_input: Vec<u8>,
    /// The evaluator's input bytes.
    pub evaluator_input: Vec<u8>,
}

/// Why a circuit given with `--circuit` cannot be measured: a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// The file does not exist (and is no library name), or does not parse: the message
    /// names the file and line.
    #[error("{0}")]
    Load(String),
    /// An input of the wrong width.
    #[error(
        "{spec}: the {party} input is {got} bytes; the circuit takes {expected_bits} bits of \
         it, so {} bytes", expected_bits.div_ceil(8)
    )]
    Width {
        /// The circuit.
        spec: String,
        /// `garbler` or `evaluator`.
        party: &'static str,
        /// Bytes given.
        got: usize,
        /// Bits the circuit takes.
        expected_bits: usize,
    },
    /// A path the evaluator process cannot be handed.
    #[error("{0:?}: a circuit path may not contain ';'")]
    Path(String),
}

/// Loads a circuit of the user's and checks the widths of the inputs given; makes inputs
/// of the right widths (deterministic, as for the built-in circuits) where none were given.
pub fn choose(choice: &CircuitChoice) -> Result<Chosen, ChoiceError> {
    if choice.spec.contains(';') {
        return Err(ChoiceError::Path(choice.spec.clone()));
    }
    let c = load_circuit(&choice.spec).map_err(ChoiceError::Load)?;
    let (gi, ei) = inputs(&c);
    let take = |given: &Option<Vec<u8>>, made: Vec<u8>, party, bits: usize| match given {
        Some(v) if v.len() != bits.div_ceil(8) => Err(ChoiceError::Width {
            spec: choice.spec.clone(),
            party,
            got: v.len(),
            expected_bits: bits,
        }),
        Some(v) => Ok(v.clone()),
        None => Ok(made),
    };
    let garbler_input = take(&choice.garbler_input, gi, "garbler", c.garbler_input_bits())?;
    let evaluator_input = take(
        &choice.evaluator_input,
        ei,
        "evaluator",
        c.evaluator_input_bits(),
    )?;
    Ok(Chosen {
        spec: choice.spec.clone(),
        circuit: c,
        garbler_input,
        evaluator_input,
    })
}

/// The circuits of a run: the user's, or the three of the published comparison.
fn chosen(ctx: &Context<'_>) -> Result<Vec<Chosen>, ScenarioError> {
    if !ctx.options.circuits.is_empty() {
        return ctx
            .options
            .circuits
            .iter()
            .map(|c| choose(c).map_err(|e| ScenarioError::Option(e.to_string())))
            .collect();
    }
    CIRCUITS
        .iter()
        .map(|&name| {
            let c = circuit(name)?;
            let (garbler_input, evaluator_input) = inputs(&c);
            Ok(Chosen {
                spec: name.to_owned(),
                circuit: c,
                garbler_input,
                evaluator_input,
            })
        })
        .collect()
}

impl Gc2pc {
    /// The per-gate micro-benchmarks under both hashes and every backend here, with the
    /// sessions' scheme `schemes[0]`, and the AND gate under every scheme of `schemes` with
    /// the sessions' hash on the detected backend (XOR and INV are the same in both
    /// schemes); returns the costs of `session` on the detected backend (the theoretical
    /// minimum of the sessions), the AND figures of both hashes on it and those of the
    /// schemes.
    #[allow(clippy::type_complexity)]
    fn gate_costs(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        session: GcHash,
        schemes: &[Scheme],
    ) -> Result<(GateCosts, Vec<HashFigures>, Vec<SchemeFigures>), ScenarioError> {
        let mut costs = GateCosts {
            garble: [0.0; 3],
            evaluate: [0.0; 3],
        };
        let mut figures = Vec::new();
        let mut by_scheme = Vec::new();
        let mut backends = vec![HashBackend::detect()];
        if backends[0] != HashBackend::Portable {
            backends.push(HashBackend::Portable);
        }
        for &backend in &backends {
            for hash in [session, other(session)] {
                let mut and = [0.0; 2];
                for (i, &kind) in MICRO_KINDS.iter().enumerate() {
                    let these =
                        if kind == GateKind::And && backend == backends[0] && hash == session {
                            schemes
                        } else {
                            &schemes[..1]
                        };
                    // The portable cipher is ~35x slower: fewer gates keep the run short.
                    let gates = if backend == HashBackend::Portable {
                        plan.gates / 16
                    } else {
                        plan.gates
                    };
                    // The schemes' runs alternate (one of each, then again), so that a
                    // slow spell of the machine weighs on every scheme alike: their ratio
                    // is the schemes table's figure.
                    let mut times = vec![(Vec::new(), Vec::new()); these.len()];
                    for _ in 0..plan.runs {
                        for (&scheme, (garble, evaluate)) in these.iter().zip(&mut times) {
                            ctx.check_cancel()?;
                            let t =
                                microbench::gate_timing_with(kind, gates, backend, hash, scheme)
                                    .at("gate timing")?;
                            garble.push(t.garble_ns());
                            evaluate.push(t.evaluate_ns());
                        }
                    }
                    for (&scheme, (garble, evaluate)) in these.iter().zip(times) {
                        let mut this = [0.0; 2];
                        for (op, v) in [("garble", garble), ("evaluate", evaluate)] {
                            let s = Samples {
                                iters_per_sample: gates as u64,
                                per_iter_ns: v,
                                overhead_ns: None,
                            };
                            let p = params! {
                                "gate" => gate_name(kind),
                                "hash" => hash_name(backend),
                                "gc_hash" => hash.name(),
                                "gc_scheme" => scheme.name(),
                            };
                            let median =
                                ctx.emit_samples(NAME, "gc", p, &format!("{op}-gate"), s, None)?;
                            let slot = usize::from(op != "garble");
                            this[slot] = median;
                            if scheme != schemes[0] {
                                continue;
                            }
                            if i == 0 {
                                and[slot] = median;
                            }
                            if backend == backends[0] && hash == session {
                                match op {
                                    "garble" => costs.garble[i] = median,
                                    _ => costs.evaluate[i] = median,
                                }
                            }
                        }
                        if kind == GateKind::And && backend == backends[0] && hash == session {
                            by_scheme.push(SchemeFigures {
                                scheme,
                                and_garble: this[0],
                                and_evaluate: this[1],
                            });
                        }
                        ctx.progress().advance(1);
                    }
                }
                if backend == backends[0] {
                    figures.push(HashFigures {
                        hash,
                        and_garble: and[0],
                        and_evaluate: and[1],
                    });
                }
            }
        }
        Ok((costs, figures, by_scheme))
    }

    #[allow(clippy::too_many_arguments)]
    fn run_circuit(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        costs: &GateCosts,
        chosen: &Chosen,
        headline: bool,
        (hash, chosen_hash): (GcHash, bool),
        (scheme, chosen_scheme): (Scheme, bool),
        (net, model): (&Net, &Model),
        (rows, predicted_stages): (&mut Vec<Vec<Value>>, &mut Vec<StageBreakdown>),
        (by_hash, by_scheme): (&mut Vec<CircuitHashFigures>, &mut Vec<CircuitSchemeFigures>),
    ) -> Result<WireBytes, ScenarioError> {
        let (name, c) = (chosen.spec.as_str(), &chosen.circuit);
        let (gi, ei) = (&chosen.garbler_input, &chosen.evaluator_input);
        let stats = c.stats();
        let and = stats.and_gates();
        let ph = |h: GcHash, s: Scheme| {
            params! {
                "circuit" => name,
                "and_gates" => and,
                "gates" => stats.gates,
                "gc_hash" => h.name(),
                "gc_scheme" => s.name(),
            }
        };
        let p = || ph(hash, scheme);
        let plain_p = || params! {"circuit" => name, "and_gates" => and, "gates" => stats.gates};
        let cfg = ctx.options.sampler();

        // Plain evaluation: the baseline.
        ctx.check_cancel()?;
        let (gb, eb) = (
            bits_from_bytes_exact(Party::Garbler, gi, c.garbler_input_bits()),
            bits_from_bytes_exact(Party::Evaluator, ei, c.evaluator_input_bits()),
        );
        let (gb, eb) = (gb.at("inputs")?, eb.at("inputs")?);
        let s = measure::sampler::try_sample(&cfg, || c.eval(&gb, &eb)).at("plain evaluation")?;
        let plain_m = ctx.emit_measurement(NAME, "native", plain_p(), "evaluate", s, None)?;
        let plain = plain_m.summary.median_ns;
        ctx.progress().advance(1);

        // Compiling the circuit (schedule, slots, digest): part of a single session's
        // Load stage, measured on its own. (A session of many evaluations, and the
        // program compiled ahead, have XOR sums too: `Program::compile_with`.)
        ctx.check_cancel()?;
        let runs = plan.runs.min(9);
        let mut compile_ns = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = std::time::Instant::now();
            std::hint::black_box(Program::compile_with(c, false));
            compile_ns.push(t.elapsed().as_nanos() as f64);
        }
        let prog = Program::compile(c);
        let s = Samples {
            iters_per_sample: 1,
            per_iter_ns: compile_ns,
            overhead_ns: None,
        };
        ctx.emit_samples(NAME, "gc", plain_p(), "compile", s, None)?;

        // Garbling alone, no network: under both hashes, and under the other scheme (with
        // the sessions' hash) unless the user chose one.
        let reps = (plan.gates as u64 / and.max(1)).clamp(1, 1 << 16) as usize;
        let mut garble_only = 0.0;
        let mut alone = vec![(hash, scheme), (other(hash), scheme)];
        if !chosen_scheme {
            alone.push((hash, other_scheme(scheme)));
        }
        for (h, sc) in alone {
            ctx.check_cancel()?;
            let mut per_eval = Vec::with_capacity(plan.runs);
            for _ in 0..plan.runs {
                let d = microbench::garble_only_with(&prog, reps, HashBackend::detect(), h, sc)
                    .at("garbling")?;
                per_eval.push(d.as_nanos() as f64 / reps as f64);
            }
            let s = Samples {
                iters_per_sample: reps as u64,
                per_iter_ns: per_eval,
                overhead_ns: None,
            };
            let median = ctx.emit_samples(NAME, "gc", ph(h, sc), "garble", s, None)?;
            if h == hash && sc == scheme {
                garble_only = median;
            }
            if sc == scheme {
                by_hash.push(CircuitHashFigures {
                    circuit: name.to_owned(),
                    hash: h,
                    garble_mand: and as f64 / median * 1e3,
                    bulk_mand: None,
                    single_ms: None,
                });
            }
            if h == hash {
                by_scheme.push(CircuitSchemeFigures {
                    circuit: name.to_owned(),
                    scheme: sc,
                    garble_mand: and as f64 / median * 1e3,
                    bulk_mand: None,
                    bytes_per_and: None,
                });
            }
        }
        ctx.progress().advance(1);

        // Single-shot sessions: one evaluation each, OT included.
        let mut stages = Stages::new();
        // The evaluator's, as its process reported them: who waited for whom.
        let mut estages = Stages::new();
        let mut totals = Vec::with_capacity(plan.sessions);
        // The garbler's socket counters against what the protocol's messages predict.
        let mut wire = WireBytes::default();
        let mut busy = [Vec::new(), Vec::new()];
        let mut over = Vec::with_capacity(plan.sessions);
        // Over a link, each session is followed by the same session over loopback, the
        // compute of the predictions: alternated, so that the machine's drift (another
        // process, the VM's neighbours) weighs on both alike.
        let mut base = Vec::new();
        // Over loopback, each session is followed by one whose parties compiled the circuit
        // before it (the garbler once, the evaluator before it connects): the protocol alone,
        // as a service that keeps its circuit compiled runs it.
        let mut ahead = Vec::with_capacity(plan.sessions);
        let mut ahead_busy = [Vec::new(), Vec::new()];
        let inputs = (gi.as_slice(), ei.as_slice());
        for _ in 0..plan.sessions {
            ctx.check_cancel()?;
            let both = two_party_over(name, c, inputs, 1, (hash, scheme), net)?;
            if net.is_loopback() {
                let a = two_party_compiled_ahead(name, c, &prog, inputs, (hash, scheme))?;
                ahead.push(a.garbler.total.as_nanos() as f64);
                ahead_busy[0].push(a.garbler.busy.as_nanos() as f64);
                ahead_busy[1].push(a.evaluator_busy.as_nanos() as f64);
            } else {
                base.push(two_party_over(
                    name,
                    c,
                    inputs,
                    1,
                    (hash, scheme),
                    &Net::loopback(),
                )?);
            }
            busy[0].push(both.garbler.busy.as_nanos() as f64);
            busy[1].push(both.evaluator_busy.as_nanos() as f64);
            add_party_stages(&mut estages, &both.evaluator_stages, Stage::name);
            let r = both.garbler;
            add_stages(&mut stages, &r);
            over.push((r.clone(), both.evaluator_start));
            totals.push(r.total.as_nanos() as f64);
            let expected = garble::session::expected_wire_bytes_with(c, 1, scheme).0;
            let tables = scheme.table_bytes() as u64 * and;
            wire = WireBytes {
                measured: r.wire_bytes_sent,
                expected,
                tables_per_and: (r.wire_bytes_sent as f64 - (expected - tables) as f64)
                    / and.max(1) as f64,
            };
        }
        let total: f64 = totals.iter().sum();
        let s = Samples {
            iters_per_sample: 1,
            per_iter_ns: totals,
            overhead_ns: None,
        };
        let single_m = ctx.emit_measurement(NAME, "2pc", p(), "session", s, None)?;
        let single = single_m.summary.median_ns;
        emit_busy(ctx, p(), "session", busy, 1)?;
        let ahead_m = if ahead.is_empty() {
            None
        } else {
            let s = Samples {
                iters_per_sample: 1,
                per_iter_ns: ahead,
                overhead_ns: None,
            };
            let m = ctx.emit_measurement(NAME, "2pc", p(), "session-compiled-ahead", s, None)?;
            emit_busy(ctx, p(), "session-compiled-ahead", ahead_busy, 1)?;
            Some(m)
        };
        // Over a link: the same sessions over loopback give each stage's compute, and each
        // stage its predicted time over the link.
        if !net.is_loopback() {
            let base = loopback_baseline(ctx, name, 1, &base, p())?;
            for (r, e) in &over {
                add_predictions(&mut stages, Stage::name, model, (r, e), &base);
            }
        }
        let min = costs.garble_ns(&stats) * plan.sessions as f64;
        let breakdown = stages.finish(
            &format!("2pc {name}"),
            Some(Duration::from_nanos(total as u64)),
            Some(Duration::from_nanos(min as u64)),
        );
        if !net.is_loopback() {
            predicted_stages.push(breakdown.clone());
        }
        ctx.emit(NAME, "2pc", p(), Body::Stages(breakdown))?;
        let evaluator = estages.finish(&format!("2pc {name}, evaluator"), None, None);
        ctx.emit(NAME, "2pc", p(), Body::Stages(evaluator))?;
        ctx.emit(
            NAME,
            "2pc",
            p(),
            Body::Table(gate_table(name, scheme, &stats, costs)),
        )?;
        ctx.progress().advance(1);

        // Bulk sessions: many evaluations per session; under the other hash and the other
        // scheme too unless the user chose them.
        let evals = plan.bulk_evaluations(
            c,
            measure::env::available_memory_bytes(),
            net.profile().rate_bytes_per_s(),
        );
        let mut bulk_runs = vec![(hash, scheme)];
        if !chosen_hash {
            bulk_runs.push((other(hash), scheme));
        }
        if !chosen_scheme {
            bulk_runs.push((hash, other_scheme(scheme)));
        }
        let mut bulk = 0.0;
        // The configurations' sessions in turn, one of each after the other, so that a
        // change in the machine's speed (a shared VM's can move by 20-30% within seconds)
        // falls on every configuration the `hashes` and `schemes` tables compare, not on one.
        let mut runs: Vec<BulkSessions> = bulk_runs.iter().map(|_| Default::default()).collect();
        // The configuration whose stages are predicted over a link.
        let is_predicted = |h: GcHash, sc: Scheme| h == hash && sc == scheme && !net.is_loopback();
        for round in 0..plan.bulk_sessions {
            for (&(h, sc), run) in bulk_runs.iter().zip(&mut runs) {
                ctx.check_cancel()?;
                let inputs = (gi.as_slice(), ei.as_slice());
                let both = two_party_over(name, c, inputs, evals, (h, sc), net)?;
                // Alternated with the same sessions over loopback, as the single-shot ones
                // are (for the sessions whose stages are predicted).
                if is_predicted(h, sc) {
                    run.base.push(two_party_over(
                        name,
                        c,
                        inputs,
                        evals,
                        (h, sc),
                        &Net::loopback(),
                    )?);
                }
                run.busy[0].push(both.garbler.busy.as_nanos() as f64 / evals as f64);
                run.busy[1].push(both.evaluator_busy.as_nanos() as f64 / evals as f64);
                let r = both.garbler;
                add_stages(&mut run.stages, &r);
                run.total += r.total.as_nanos() as f64;
                run.per_eval.push(r.total.as_nanos() as f64 / evals as f64);
                run.over.push((r, both.evaluator_start));
                // A configuration is one step of the progress: done with its last session.
                if round + 1 == plan.bulk_sessions {
                    ctx.progress().advance(1);
                }
            }
        }
        for ((h, sc), run) in bulk_runs.into_iter().zip(runs) {
            let BulkSessions {
                per_eval,
                mut stages,
                total,
                busy,
                over,
                base,
            } = run;
            let predicted = is_predicted(h, sc);
            let s = Samples {
                iters_per_sample: evals,
                per_iter_ns: per_eval,
                overhead_ns: None,
            };
            let mut bp = ph(h, sc);
            bp.insert("evaluations".into(), evals.into());
            let bulk_m = ctx.emit_measurement(NAME, "2pc", bp.clone(), "session-bulk", s, None)?;
            let median = bulk_m.summary.median_ns;
            emit_busy(ctx, bp.clone(), "session-bulk", busy, evals)?;
            if let Some(f) = by_hash
                .iter_mut()
                .find(|f| f.circuit == name && f.hash == h && sc == scheme)
            {
                f.bulk_mand = Some(and as f64 / median * 1e3);
                if h == hash {
                    f.single_ms = Some(single / 1e6);
                }
            }
            if let Some(f) = by_scheme
                .iter_mut()
                .find(|f| f.circuit == name && f.scheme == sc && h == hash)
            {
                f.bulk_mand = Some(and as f64 / median * 1e3);
                f.bytes_per_and = over.first().map(|(r, _)| {
                    r.stage(Stage::Garble).bytes_sent as f64 / (and * evals).max(1) as f64
                });
            }
            if h == hash && sc == scheme {
                bulk = median;
                if predicted {
                    let base = loopback_baseline(ctx, name, evals, &base, bp.clone())?;
                    for (r, e) in &over {
                        add_predictions(&mut stages, Stage::name, model, (r, e), &base);
                    }
                }
                if headline {
                    let mut protected = vec![
                        ("2PC, one per session (OT included)", "2pc", &single_m),
                        ("2PC, bulk session, per evaluation", "2pc", &bulk_m),
                    ];
                    if let Some(m) = &ahead_m {
                        protected.insert(
                            1,
                            ("2PC, one per session, circuit compiled before", "2pc", m),
                        );
                    }
                    ctx.emit_cost(
                        NAME,
                        &format!("{name} evaluation"),
                        "evaluation",
                        ("in the clear", "native", &plain_m),
                        &protected,
                    )?;
                }
                let min = costs.garble_ns(&stats) * (evals * plan.bulk_sessions as u64) as f64;
                let breakdown = stages.finish(
                    &format!("2pc {name}, {evals} evaluations per session"),
                    Some(Duration::from_nanos(total as u64)),
                    Some(Duration::from_nanos(min as u64)),
                );
                if predicted {
                    predicted_stages.push(breakdown.clone());
                }
                ctx.emit(NAME, "2pc", bp, Body::Stages(breakdown))?;
            }
        }

        let mand = |ns: f64| Value::from(and as f64 / ns * 1e3);
        rows.push(vec![
            Value::from(name),
            Value::from(hash.name()),
            Value::from(scheme.name()),
            Value::from(and),
            Value::from(stats.gates),
            Value::from(plain / 1e3),
            Value::from(garble_only / 1e3),
            mand(garble_only),
            Value::from(single / 1e6),
            analysis::cell(ahead_m.as_ref().map(|m| m.summary.median_ns / 1e6)),
            Value::from(bulk / 1e3),
            mand(bulk),
            Value::from(wire.tables_per_and),
        ]);
        Ok(wire)
    }
}

/// One bulk configuration's sessions (hash and scheme), gathered while every
/// configuration's sessions run in turn.
#[derive(Default)]
struct BulkSessions {
    /// Each session's time per evaluation, ns.
    per_eval: Vec<f64>,
    /// The garbler's stages over the sessions.
    stages: Stages,
    /// The sessions' time, ns.
    total: f64,
    /// Each party's busy time per evaluation, ns, session by session.
    busy: [Vec<f64>; 2],
    /// Each session's garbler report and the evaluator's start.
    over: Vec<(garble::session::SessionReport, garble::trace::StartTrace)>,
    /// The same sessions over loopback, where the stages are predicted.
    base: Vec<peer::TwoParty>,
}

/// The sessions of `evaluations` evaluations of circuit `name` over loopback (`sessions`,
/// run alternated with the ones over the link), the compute of the predictions: their
/// stage breakdown is emitted (params `p` and the loopback profile's), and each stage's
/// median time returned ([`Compute::of`]) with both parties' start traces
/// ([`Compute::with_evaluator`]).
fn loopback_baseline(
    ctx: &Context<'_>,
    name: &str,
    evaluations: u64,
    sessions: &[peer::TwoParty],
    mut p: measure::record::Params,
) -> Result<Compute, ScenarioError> {
    let reports: Vec<_> = sessions.iter().map(|s| s.garbler.clone()).collect();
    let starts: Vec<_> = sessions.iter().map(|s| s.evaluator_start.clone()).collect();
    let mut stages = Stages::new();
    for r in &reports {
        add_stages(&mut stages, r);
    }
    let total: Duration = reports.iter().map(|r| r.total).sum();
    p.extend(net_params(&garble::link::Profile::loopback()));
    let what = if evaluations == 1 {
        format!("2pc {name} over loopback (the compute of the predictions)")
    } else {
        format!(
            "2pc {name}, {evaluations} evaluations per session, over loopback (the compute of \
             the predictions)"
        )
    };
    ctx.emit(
        NAME,
        "2pc",
        p,
        Body::Stages(stages.finish(&what, Some(total), None)),
    )?;
    Compute::with_evaluator(&reports, &starts)
        .ok_or_else(|| ScenarioError::step("loopback baseline", "no sessions"))
}

/// The parties' CPU time (`busy`) of the sessions just measured as `{name}-garbler-busy` and
/// `{name}-evaluator-busy`: per session (or per evaluation in bulk, `iters` evaluations a
/// session). Against the wall time of `name` it says whether a party was the bottleneck
/// (busy close to the wall time) or waited for the other.
fn emit_busy(
    ctx: &Context<'_>,
    params: measure::record::Params,
    name: &str,
    busy: [Vec<f64>; 2],
    iters: u64,
) -> Result<(), ScenarioError> {
    let [garbler, evaluator] = busy;
    for (party, v) in [("garbler", garbler), ("evaluator", evaluator)] {
        let s = Samples {
            iters_per_sample: iters,
            per_iter_ns: v,
            overhead_ns: None,
        };
        ctx.emit_samples(
            NAME,
            "2pc",
            params.clone(),
            &format!("{name}-{party}-busy"),
            s,
            None,
        )?;
    }
    Ok(())
}

impl Scenario for Gc2pc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "garbled-circuit 2PC (AES-128, SHA-256, 1024-bit multiply) over loopback TCP, two processes; per-gate costs"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let net = open_net(ctx)?;
        // Every record of a run over a link says which link, and the link's own rate and
        // delay come first.
        let ctx = &ctx.with_params(link_params(&net));
        let model = match net::link_table(&net)? {
            Some((t, model)) => {
                ctx.emit(NAME, "2pc", params! {}, Body::Table(t))?;
                model
            }
            None => Model::new(net.profile().clone(), Duration::ZERO),
        };
        let plan = Plan::of(ctx.options.preset);
        let (hash, chosen_hash) = session_hash(ctx)?;
        let (scheme, chosen_scheme) = session_scheme(ctx)?;
        let schemes: Vec<Scheme> = if chosen_scheme {
            vec![scheme]
        } else {
            vec![scheme, other_scheme(scheme)]
        };
        // Three gate kinds, two hashes, one or two backends; the AND gate under the other
        // scheme.
        let micro = if HashBackend::detect() == HashBackend::Portable {
            6
        } else {
            12
        } + schemes.len()
            - 1;
        let circuits = chosen(ctx)?;
        let own = !ctx.options.circuits.is_empty();
        let per_circuit = 4 + usize::from(!chosen_hash) + usize::from(!chosen_scheme);
        ctx.progress()
            .begin(NAME, (micro + circuits.len() * per_circuit) as u64);
        let (costs, figures, scheme_figures) = self.gate_costs(ctx, &plan, hash, &schemes)?;
        let mut rows = Vec::new();
        // Over a link, every stage breakdown with predictions: the `stage-predictions` check.
        let mut predicted = Vec::new();
        let mut bytes = Vec::new();
        let mut by_hash = Vec::new();
        let mut by_scheme = Vec::new();
        for chosen in &circuits {
            // The cost summary: AES-128 of the published comparison, or each of the user's.
            let headline = own || chosen.spec == HEADLINE_CIRCUIT;
            let wire = self.run_circuit(
                ctx,
                &plan,
                &costs,
                chosen,
                headline,
                (hash, chosen_hash),
                (scheme, chosen_scheme),
                (&net, &model),
                (&mut rows, &mut predicted),
                (&mut by_hash, &mut by_scheme),
            )?;
            bytes.push((chosen.spec.as_str(), wire));
        }
        let table = Table {
            name: "throughput".into(),
            title: "Garbled-circuit throughput (medians)".into(),
            columns: [
                "circuit",
                "hash",
                "scheme",
                "AND gates",
                "gates",
                "plain µs",
                "garble µs",
                "garble M AND/s",
                "2PC single-shot ms",
                "2PC single-shot, compiled before ms",
                "2PC bulk µs/eval",
                "2PC bulk M AND/s",
                "table bytes/AND",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            source: None,
            notes: vec![
                format!(
                    "2PC: two processes over {net}, OT included; single-shot is one \
                     evaluation per session, bulk many."
                ),
                "Single-shot: each party compiles the circuit in the session (its Load \
                 stage); compiled before: both parties compiled it before the session (the \
                 garbler once, the evaluator before it connects), as a service that keeps \
                 its circuit compiled runs it (over loopback only; the `compile` record is \
                 one compilation's time)."
                    .into(),
                "Other engines' figures: the peers table.".into(),
            ],
        };
        ctx.emit(NAME, "2pc", params! {}, Body::Table(table))?;
        ctx.emit(
            NAME,
            "gc",
            params! {},
            Body::Table(analysis::hash_table(&figures, &by_hash)),
        )?;
        ctx.emit(
            NAME,
            "2pc",
            params! {},
            Body::Table(analysis::peer_table(&figures, &by_hash)),
        )?;
        if !chosen_scheme {
            ctx.emit(
                NAME,
                "2pc",
                params! {},
                Body::Table(analysis::scheme_table(
                    (hash, net.profile()),
                    &scheme_figures,
                    &by_scheme,
                )),
            )?;
        }
        if !net.is_loopback() {
            let check = analysis::prediction_check(&predicted, &net.to_string());
            ctx.emit(NAME, "2pc", params! {}, Body::Check(check))?;
        }
        // The garbler's socket counters (bytes the kernel accepted), one single-shot session
        // per circuit, against the protocol's messages: the scheme's table bytes per AND gate
        // plus the input labels, the OT traffic and the header (`expected_wire_bytes_with`).
        let off: Vec<String> = bytes
            .iter()
            .filter(|(_, w)| w.measured.abs_diff(w.expected) as f64 > 0.05 * w.expected as f64)
            .map(|(n, w)| {
                format!(
                    "{n}: {} bytes on the socket, {} expected",
                    w.measured, w.expected
                )
            })
            .collect();
        let summary: Vec<String> = bytes
            .iter()
            .map(|(n, w)| {
                format!(
                    "{n} {} bytes ({} expected; {:.3} table bytes per AND)",
                    w.measured, w.expected, w.tables_per_and
                )
            })
            .collect();
        let (verdict, message) = if off.is_empty() {
            (
                Verdict::Pass,
                format!(
                    "every 2PC output matched plain evaluation on both sides; the garbler's \
                     socket carried what the protocol predicts ({scheme}) within 5%: {}",
                    summary.join("; ")
                ),
            )
        } else {
            (
                Verdict::Fail,
                format!(
                    "the garbler's socket traffic is not what the protocol predicts: {}",
                    off.join(", ")
                ),
            )
        };
        ctx.emit(
            NAME,
            "2pc",
            params! {},
            Body::Check(Check {
                subject: measure::record::CheckSubject::Run,
                name: "wire-bytes-per-and".into(),
                verdict,
                message,
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_size_scales_with_the_circuit() {
        let p = Plan::of(Preset::Quick);
        assert_eq!(p.bulk_for(6_400), p.bulk);
        assert!(p.bulk_for(1_000_000) >= 4);
        assert!(p.bulk_for(100) > p.bulk);
    }

    /// A bulk session's evaluations: by AND gates where memory allows, at most a million
    /// (an AND-free circuit would otherwise get 26 million), within the budget or half the
    /// memory available for both parties' OT extensions, and within two minutes of a slow
    /// link; never none.
    #[test]
    fn bulk_sessions_fit_in_memory() {
        let p = Plan::of(Preset::Full);
        let plenty = Some(1 << 40);
        let aes = garble::library::aes128();
        assert_eq!(p.bulk_evaluations(&aes, plenty, None), p.bulk);
        assert_eq!(p.bulk_evaluations(&aes, None, None), p.bulk);
        // 128 evaluator bits XORed with the garbler's: no AND gate at all.
        let mut b = garble::builder::Builder::new();
        let (g, e) = (b.input(Party::Garbler, 128), b.input(Party::Evaluator, 128));
        let x = b.xor_words(&g, &e);
        let xor = b.finish(&[x]).unwrap();
        let per_eval = garble::session::bulk_memory_bytes(&xor, 1, Party::Garbler)
            + garble::session::bulk_memory_bytes(&xor, 1, Party::Evaluator);
        // The budget, then half the memory available where that is less.
        assert_eq!(
            p.bulk_evaluations(&xor, plenty, None),
            BULK_MEMORY / per_eval
        );
        let quarter = BULK_MEMORY / 4;
        let n = p.bulk_evaluations(&xor, Some(quarter), None);
        assert_eq!(n, quarter / 2 / per_eval);
        assert!(n * per_eval <= quarter / 2 && (n + 1) * per_eval > quarter / 2);
        assert_eq!(p.bulk_evaluations(&xor, Some(1000), None), 1);
        // A circuit with one evaluator input bit and no AND gate: the count's own limit.
        let mut b = garble::builder::Builder::new();
        let (g, e) = (b.input(Party::Garbler, 1), b.input(Party::Evaluator, 1));
        let x = b.xor_words(&g, &e);
        let tiny = b.finish(&[x]).unwrap();
        assert_eq!(p.bulk_evaluations(&tiny, plenty, None), MAX_BULK);
        // Over a link: every named profile keeps the full count of every built-in circuit;
        // 1 Mbit/s carries two minutes of AES-128's tables, 500 kbit/s still four evaluations
        // of mul1024.
        let rate = |s: &str| {
            s.parse::<garble::link::Profile>()
                .unwrap()
                .rate_bytes_per_s()
        };
        for name in ["lan10g", "lan", "wan", "intercontinental"] {
            for c in [
                &aes,
                &garble::library::sha256_compress(),
                &garble::library::mul(1024),
            ] {
                let full = p.bulk_evaluations(c, plenty, None);
                assert_eq!(p.bulk_evaluations(c, plenty, rate(name)), full, "{name}");
            }
        }
        let slow = p.bulk_evaluations(&aes, plenty, rate("rate=1mbit,rtt=10ms"));
        let per_eval = garble::session::expected_wire_bytes(&aes, 2).0
            - garble::session::expected_wire_bytes(&aes, 1).0;
        assert_eq!(slow, 125_000 * 120 / per_eval);
        let mul = garble::library::mul(1024);
        assert_eq!(
            p.bulk_evaluations(&mul, plenty, rate("rate=500kbit,rtt=10ms")),
            4
        );
    }
}
