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
//! The report gets the stage table (`Load | Init | OT Init | Peer Inputs | Garble | Result`,
//! time, % and bytes), a per-gate table (count, ns/gate, time) and the theoretical minimum
//! (gates × isolated garbling cost) against the measured total. Every 2PC output is checked
//! against plain evaluation, by both parties.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use garble::channel::{ChannelError, TcpChannel};
use garble::circuit::{bits_from_bytes_exact, bytes_from_bits};
use garble::hash::Backend as HashBackend;
use garble::microbench;
use garble::program::Program;
use garble::session::{self, SessionOptions, SessionReport, Stage};
use garble::{Circuit, GateKind, Party};
use measure::params;
use measure::record::{Body, Check, Table, Value, Verdict};
use measure::sampler::Samples;
use measure::stages::Stages;

use crate::{Context, Preset, Scenario, ScenarioError};

const NAME: &str = "gc-2pc";
/// Environment variable that makes this binary the evaluator of one session.
pub const EVALUATOR_ENV: &str = "CCBENCH_GC_EVALUATOR";
/// How long either party waits for the other before giving up.
const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// The circuits, by library name.
pub const CIRCUITS: [&str; 3] = ["aes128", "sha256", "mul1024"];

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
}

fn step(what: &str) -> impl Fn(String) -> ScenarioError + '_ {
    move |m| ScenarioError::step(what, m)
}

fn gate_name(k: GateKind) -> &'static str {
    k.name()
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

// ---------------------------------------------------------------------------------------
// The evaluator process.

/// What the evaluator child is told, through [`EVALUATOR_ENV`].
struct EvaluatorSpec {
    addr: String,
    circuit: String,
    evaluations: u64,
    input: Vec<u8>,
}

impl EvaluatorSpec {
    fn encode(&self) -> String {
        format!(
            "v1;{};{};{};{}",
            self.addr,
            self.circuit,
            self.evaluations,
            hex(&self.input)
        )
    }

    fn decode(s: &str) -> Result<EvaluatorSpec, String> {
        let parts: Vec<&str> = s.split(';').collect();
        let [version, addr, circuit, evaluations, input] = parts[..] else {
            return Err(format!(
                "{EVALUATOR_ENV}: expected 5 fields, got {}",
                parts.len()
            ));
        };
        if version != "v1" {
            return Err(format!("{EVALUATOR_ENV}: unknown version {version:?}"));
        }
        Ok(EvaluatorSpec {
            addr: addr.to_owned(),
            circuit: circuit.to_owned(),
            evaluations: evaluations
                .parse()
                .map_err(|_| format!("{EVALUATOR_ENV}: bad evaluation count {evaluations:?}"))?,
            input: unhex(input)?,
        })
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses hex (upper or lower case, no separators, an optional `0x`).
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    if !s.len().is_multiple_of(2) {
        return Err(format!(
            "hex input has an odd number of digits ({})",
            s.len()
        ));
    }
    let digit = |c: u8| -> Result<u8, String> {
        (c as char)
            .to_digit(16)
            .map(|d| d as u8)
            .ok_or_else(|| format!("{:?} is not a hex digit", c as char))
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// Runs one evaluator session from its spec; prints `ok <output hex>` on success.
fn evaluate(spec: &str) -> Result<String, String> {
    let spec = EvaluatorSpec::decode(spec)?;
    let c = circuit(&spec.circuit).map_err(|e| e.to_string())?;
    let bits = bits_from_bytes_exact(Party::Evaluator, &spec.input, c.evaluator_input_bits())
        .map_err(|e| e.to_string())?;
    let mut ch = TcpChannel::connect(&spec.addr, PEER_TIMEOUT).map_err(|e| e.to_string())?;
    let n = usize::try_from(spec.evaluations).map_err(|e| e.to_string())?;
    let out = session::run_evaluator(&mut ch, &c, &vec![bits; n], &SessionOptions::default())
        .map_err(|e| e.to_string())?;
    let first = out.output_bytes().into_iter().next().unwrap_or_default();
    if out.outputs.iter().any(|o| bytes_from_bits(o) != first) {
        return Err("evaluations of the same inputs gave different outputs".into());
    }
    Ok(format!("ok {}", hex(&first)))
}

/// Becomes the evaluator of one session and exits when this process was started as one;
/// returns at once otherwise. Called first thing in `main` (see [`crate::run_if_child`]).
pub fn run_if_evaluator() {
    let Some(spec) = std::env::var_os(EVALUATOR_ENV) else {
        return;
    };
    let code = match evaluate(&spec.to_string_lossy()) {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(e) => {
            eprintln!("gc-2pc evaluator: {e}");
            1
        }
    };
    std::process::exit(code);
}

// ---------------------------------------------------------------------------------------
// The garbler side.

/// One two-party session over loopback TCP: this process garbles, a child process (this
/// binary, which must call [`crate::run_if_child`] first thing) evaluates the library
/// circuit `name` (`c` is the same circuit, already built). Returns the garbler's report
/// after checking both parties' outputs against plain evaluation.
pub fn two_party(
    name: &str,
    c: &Circuit,
    garbler_input: &[u8],
    evaluator_input: &[u8],
    evaluations: u64,
) -> Result<SessionReport, ScenarioError> {
    let fail = step("two-party session");
    let expected = c
        .eval_bytes(garbler_input, evaluator_input)
        .map_err(|e| fail(e.to_string()))?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| fail(e.to_string()))?;
    let addr = listener.local_addr().map_err(|e| fail(e.to_string()))?;
    let spec = EvaluatorSpec {
        addr: addr.to_string(),
        circuit: name.to_owned(),
        evaluations,
        input: evaluator_input.to_vec(),
    };
    let exe = std::env::current_exe().map_err(|e| fail(format!("own executable: {e}")))?;
    let mut child = Command::new(exe)
        .env(EVALUATOR_ENV, spec.encode())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("starting the evaluator: {e}")))?;
    let garbled = (|| {
        let mut ch = accept_from(&listener, &mut child)?;
        let bits = bits_from_bytes_exact(Party::Garbler, garbler_input, c.garbler_input_bits())
            .map_err(|e| e.to_string())?;
        let n = usize::try_from(evaluations).map_err(|e| e.to_string())?;
        session::run_garbler(&mut ch, c, &vec![bits; n], &SessionOptions::default())
            .map_err(|e| e.to_string())
    })();
    if garbled.is_err() {
        // The evaluator may be stuck waiting for us: do not wait for its timeout.
        let _ = child.kill();
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut stdout);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut stderr);
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("waiting for the evaluator: {e}")))?;
    let out = garbled.map_err(|e| {
        fail(format!(
            "garbler: {e}; evaluator ({status}): {}",
            stderr.trim()
        ))
    })?;
    if !status.success() {
        return Err(fail(format!(
            "evaluator failed ({status}): {}",
            stderr.trim()
        )));
    }
    let want = format!("ok {}", hex(&expected));
    if stdout.trim() != want {
        return Err(fail(format!(
            "the evaluator's output {:?} differs from plain evaluation {want:?}",
            stdout.trim()
        )));
    }
    if out.output_bytes().iter().any(|o| *o != expected) {
        return Err(fail(
            "the garbler's output differs from plain evaluation".into(),
        ));
    }
    Ok(out.report)
}

/// Waits for the evaluator to connect, giving up at once if it exits first (bad input,
/// failed start) and after [`PEER_TIMEOUT`] otherwise.
fn accept_from(listener: &TcpListener, child: &mut Child) -> Result<TcpChannel, String> {
    let start = Instant::now();
    loop {
        match TcpChannel::accept(listener, Duration::from_millis(50)) {
            Ok(ch) => return Ok(ch),
            Err(ChannelError::Timeout(_)) => {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("the evaluator exited ({status}) before connecting"));
                }
                if start.elapsed() > PEER_TIMEOUT {
                    return Err(format!(
                        "the evaluator did not connect within {PEER_TIMEOUT:?}"
                    ));
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Per-gate costs measured in isolation (garble and evaluate), in ns per gate.
struct GateCosts {
    garble: [f64; 3],
    evaluate: [f64; 3],
}

const MICRO_KINDS: [GateKind; 3] = [GateKind::And, GateKind::Xor, GateKind::Inv];

impl GateCosts {
    /// Isolated garbling cost of one evaluation of a circuit: gates × ns/gate (EQ and EQW
    /// are copies and cost nothing).
    fn garble_ns(&self, stats: &garble::Stats) -> f64 {
        MICRO_KINDS
            .iter()
            .zip(self.garble)
            .map(|(&k, ns)| stats.count(k) as f64 * ns)
            .sum()
    }
}

impl Gc2pc {
    fn gate_costs(&self, ctx: &Context<'_>, plan: &Plan) -> Result<GateCosts, ScenarioError> {
        let mut costs = GateCosts {
            garble: [0.0; 3],
            evaluate: [0.0; 3],
        };
        let mut hashes = vec![HashBackend::detect()];
        if hashes[0] != HashBackend::Portable {
            hashes.push(HashBackend::Portable);
        }
        for &hash in &hashes {
            for (i, &kind) in MICRO_KINDS.iter().enumerate() {
                ctx.check_cancel()?;
                // The portable hash is ~20x slower: fewer gates keep the run short.
                let gates = if hash == HashBackend::Portable {
                    plan.gates / 16
                } else {
                    plan.gates
                };
                let mut garble = Vec::with_capacity(plan.runs);
                let mut evaluate = Vec::with_capacity(plan.runs);
                for _ in 0..plan.runs {
                    let t = microbench::gate_timing(kind, gates, hash)
                        .map_err(|e| ScenarioError::step("gate timing", e))?;
                    garble.push(t.garble_ns());
                    evaluate.push(t.evaluate_ns());
                }
                for (op, v) in [("garble", garble), ("evaluate", evaluate)] {
                    let s = Samples {
                        iters_per_sample: gates as u64,
                        per_iter_ns: v,
                        overhead_ns: None,
                    };
                    let p = params! {"gate" => gate_name(kind), "hash" => hash_name(hash)};
                    let median = ctx.emit_samples(NAME, "gc", p, &format!("{op}-gate"), s, None)?;
                    if hash == hashes[0] {
                        match op {
                            "garble" => costs.garble[i] = median,
                            _ => costs.evaluate[i] = median,
                        }
                    }
                }
                ctx.progress().advance(1);
            }
        }
        Ok(costs)
    }

    fn run_circuit(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        costs: &GateCosts,
        name: &str,
        rows: &mut Vec<Vec<Value>>,
    ) -> Result<f64, ScenarioError> {
        let c = circuit(name)?;
        let stats = c.stats();
        let and = stats.and_gates();
        let (gi, ei) = inputs(&c);
        let p = || params! {"circuit" => name, "and_gates" => and, "gates" => stats.gates};
        let cfg = ctx.options.sampler();

        // Plain evaluation: the baseline.
        ctx.check_cancel()?;
        let (gb, eb) = (
            bits_from_bytes_exact(Party::Garbler, &gi, c.garbler_input_bits()),
            bits_from_bytes_exact(Party::Evaluator, &ei, c.evaluator_input_bits()),
        );
        let (gb, eb) = (
            gb.map_err(|e| ScenarioError::step("inputs", e))?,
            eb.map_err(|e| ScenarioError::step("inputs", e))?,
        );
        let s = measure::sampler::try_sample(&cfg, || c.eval(&gb, &eb))
            .map_err(|e| ScenarioError::step("plain evaluation", e))?;
        let plain = ctx.emit_samples(NAME, "native", p(), "evaluate", s, None)?;
        ctx.progress().advance(1);

        // Garbling alone, no network.
        ctx.check_cancel()?;
        let prog = Program::compile(&c);
        let reps = (plan.gates as u64 / and.max(1)).clamp(1, 1 << 16) as usize;
        let mut per_eval = Vec::with_capacity(plan.runs);
        for _ in 0..plan.runs {
            let d = microbench::garble_only(&prog, reps, HashBackend::detect())
                .map_err(|e| ScenarioError::step("garbling", e))?;
            per_eval.push(d.as_nanos() as f64 / reps as f64);
        }
        let s = Samples {
            iters_per_sample: reps as u64,
            per_iter_ns: per_eval,
            overhead_ns: None,
        };
        let garble_only = ctx.emit_samples(NAME, "gc", p(), "garble", s, None)?;
        ctx.progress().advance(1);

        // Single-shot sessions: one evaluation each, OT included.
        let mut stages = Stages::new();
        let mut totals = Vec::with_capacity(plan.sessions);
        let mut bytes_per_and = 0.0;
        for _ in 0..plan.sessions {
            ctx.check_cancel()?;
            let r = two_party(name, &c, &gi, &ei, 1)?;
            add_stages(&mut stages, &r);
            totals.push(r.total.as_nanos() as f64);
            // Measured on the wire: what the garbler sent while garbling, per AND gate.
            bytes_per_and = r.stage(Stage::Garble).bytes_sent as f64 / r.and_gates().max(1) as f64;
        }
        let total: f64 = totals.iter().sum();
        let s = Samples {
            iters_per_sample: 1,
            per_iter_ns: totals,
            overhead_ns: None,
        };
        let single = ctx.emit_samples(NAME, "2pc", p(), "session", s, None)?;
        let min = costs.garble_ns(&stats) * plan.sessions as f64;
        let breakdown = stages.finish(
            &format!("2pc {name}"),
            Some(Duration::from_nanos(total as u64)),
            Some(Duration::from_nanos(min as u64)),
        );
        ctx.emit(NAME, "2pc", p(), Body::Stages(breakdown))?;
        ctx.emit(
            NAME,
            "2pc",
            p(),
            Body::Table(gate_table(name, &stats, costs)),
        )?;
        ctx.progress().advance(1);

        // Bulk sessions: many evaluations per session.
        let evals = plan.bulk_for(and);
        let mut per_eval = Vec::with_capacity(plan.bulk_sessions);
        let mut stages = Stages::new();
        let mut total = 0.0;
        for _ in 0..plan.bulk_sessions {
            ctx.check_cancel()?;
            let r = two_party(name, &c, &gi, &ei, evals)?;
            add_stages(&mut stages, &r);
            total += r.total.as_nanos() as f64;
            per_eval.push(r.total.as_nanos() as f64 / evals as f64);
        }
        let s = Samples {
            iters_per_sample: evals,
            per_iter_ns: per_eval,
            overhead_ns: None,
        };
        let mut bp = p();
        bp.insert("evaluations".into(), evals.into());
        let bulk = ctx.emit_samples(NAME, "2pc", bp.clone(), "session-bulk", s, None)?;
        let min = costs.garble_ns(&stats) * (evals * plan.bulk_sessions as u64) as f64;
        let breakdown = stages.finish(
            &format!("2pc {name}, {evals} evaluations per session"),
            Some(Duration::from_nanos(total as u64)),
            Some(Duration::from_nanos(min as u64)),
        );
        ctx.emit(NAME, "2pc", bp, Body::Stages(breakdown))?;
        ctx.progress().advance(1);

        let mand = |ns: f64| Value::from(and as f64 / ns * 1e3);
        rows.push(vec![
            Value::from(name),
            Value::from(and),
            Value::from(stats.gates),
            Value::from(plain / 1e3),
            Value::from(garble_only / 1e3),
            mand(garble_only),
            Value::from(single / 1e6),
            Value::from(bulk / 1e3),
            mand(bulk),
            Value::from(bytes_per_and),
        ]);
        Ok(bytes_per_and)
    }
}

/// A party's stage breakdown of one session (`Load | Init | OT Init | Peer Inputs | Garble |
/// Result`, time and bytes), as a record body.
pub fn stage_breakdown(name: &str, r: &SessionReport) -> measure::record::StageBreakdown {
    let mut stages = Stages::new();
    add_stages(&mut stages, r);
    stages.finish(name, Some(r.total), None)
}

/// A circuit from a Bristol Fashion (or old Bristol) file, or, when no such file exists, from
/// the library by name (`aes128`, `sha256`, `mul1024`, `mulN`).
pub fn load_circuit(spec: &str) -> Result<Circuit, String> {
    let path = std::path::Path::new(spec);
    if !path.exists()
        && let Some(c) = garble::library::by_name(spec)
    {
        return Ok(c);
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{spec}: {e} (and it is not a library circuit: {})",
            garble::library::NAMES.join(", ")
        )
    })?;
    garble::bristol::parse(&text).map_err(|e| format!("{spec}: {e}"))
}

fn add_stages(stages: &mut Stages, r: &SessionReport) {
    for st in Stage::ALL {
        let s = r.stage(st);
        stages.add(st.name(), s.time, s.bytes_received, s.bytes_sent);
    }
    stages.end_run();
}

/// The per-gate table of one evaluation: count, isolated ns/gate, time.
fn gate_table(name: &str, stats: &garble::Stats, costs: &GateCosts) -> Table {
    let mut rows: Vec<Vec<Value>> = MICRO_KINDS
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let n = stats.count(k);
            vec![
                Value::from(gate_name(k)),
                Value::from(n),
                Value::from(costs.garble[i]),
                Value::from(costs.evaluate[i]),
                Value::from(n as f64 * costs.garble[i] / 1e3),
            ]
        })
        .collect();
    let copies = stats.count(GateKind::Eq) + stats.count(GateKind::Eqw);
    rows.push(vec![
        Value::from("EQ/EQW"),
        Value::from(copies),
        Value::from(0.0),
        Value::from(0.0),
        Value::from(0.0),
    ]);
    Table {
        name: format!("gates-{name}"),
        title: format!("Per-gate cost of one {name} evaluation (isolated micro-benchmarks)"),
        columns: [
            "gate",
            "count",
            "garble ns/gate",
            "evaluate ns/gate",
            "garble time µs",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes: vec![
            "The theoretical minimum of a session is the garbling time of its gates measured \
             alone; the stage table shows the measured total against it."
                .into(),
        ],
    }
}

impl Scenario for Gc2pc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "garbled-circuit 2PC (AES-128, SHA-256, 1024-bit multiply) over loopback TCP, two processes; per-gate costs"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let plan = Plan::of(ctx.options.preset);
        let micro = if HashBackend::detect() == HashBackend::Portable {
            3
        } else {
            6
        };
        ctx.progress()
            .begin(NAME, (micro + CIRCUITS.len() * 4) as u64);
        let costs = self.gate_costs(ctx, &plan)?;
        let mut rows = Vec::new();
        let mut bytes = Vec::new();
        for name in CIRCUITS {
            bytes.push((name, self.run_circuit(ctx, &plan, &costs, name, &mut rows)?));
        }
        let table = Table {
            name: "throughput".into(),
            title: "Garbled-circuit throughput (medians)".into(),
            columns: [
                "circuit",
                "AND gates",
                "gates",
                "plain µs",
                "garble µs",
                "garble M AND/s",
                "2PC single-shot ms",
                "2PC bulk µs/eval",
                "2PC bulk M AND/s",
                "table bytes/AND",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            source: None,
            notes: vec![
                "2PC: two processes over loopback TCP, OT included; single-shot is one \
                 evaluation per session, bulk many."
                    .into(),
                "Reference (markkurossi/mpc, Go, 2022): AND 176.5 ns, XOR 20.6 ns per gate.".into(),
            ],
        };
        ctx.emit(NAME, "2pc", params! {}, Body::Table(table))?;
        // Half-gates send exactly two ciphertexts (32 bytes) per AND gate while garbling.
        let off: Vec<String> = bytes
            .iter()
            .filter(|(_, b)| *b != garble::gc::TABLE_BYTES as f64)
            .map(|(n, b)| format!("{n}: {b:.3} bytes per AND"))
            .collect();
        let (verdict, message) = if off.is_empty() {
            (
                Verdict::Pass,
                format!(
                    "every 2PC output matched plain evaluation on both sides; the garbler sent \
                     exactly {} bytes per AND gate while garbling",
                    garble::gc::TABLE_BYTES
                ),
            )
        } else {
            (
                Verdict::Warn,
                format!(
                    "garbling traffic is not 32 bytes per AND: {}",
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
    fn hex_round_trips_and_rejects_garbage() {
        assert_eq!(unhex("00ff10Ab").unwrap(), [0x00, 0xff, 0x10, 0xab]);
        assert_eq!(unhex("0x0102").unwrap(), [1, 2]);
        assert_eq!(hex(&[0xde, 0xad]), "dead");
        assert!(unhex("abc").unwrap_err().contains("odd"));
        assert!(unhex("zz").unwrap_err().contains("not a hex digit"));
    }

    #[test]
    fn evaluator_spec_round_trips_and_rejects_bad_fields() {
        let s = EvaluatorSpec {
            addr: "127.0.0.1:4000".into(),
            circuit: "aes128".into(),
            evaluations: 7,
            input: vec![1, 2, 3],
        };
        let d = EvaluatorSpec::decode(&s.encode()).unwrap();
        assert_eq!(
            (d.addr.as_str(), d.circuit.as_str(), d.evaluations, d.input),
            ("127.0.0.1:4000", "aes128", 7, vec![1, 2, 3])
        );
        assert!(EvaluatorSpec::decode("v2;a;b;1;00").is_err());
        assert!(EvaluatorSpec::decode("v1;a;b;x;00").is_err());
        assert!(EvaluatorSpec::decode("v1;a;b").is_err());
    }

    #[test]
    fn bulk_size_scales_with_the_circuit() {
        let p = Plan::of(Preset::Quick);
        assert_eq!(p.bulk_for(6_400), p.bulk);
        assert!(p.bulk_for(1_000_000) >= 4);
        assert!(p.bulk_for(100) > p.bulk);
    }
}
