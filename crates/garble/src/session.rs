//! The two-party session: a garbler and an evaluator over a [`Channel`],
//! one or many evaluations of the same circuit ("bulk" mode), outputs
//! decoded for both parties, and a stage breakdown.
//!
//! Protocol of one computation (after both sides compile the circuit):
//!
//! 1. Init: the garbler sends `MAGIC`, the circuit digest, the number of
//!    evaluations, the computation's index in the session, the garbling hash
//!    ([`GcHash`]), the garbling scheme ([`Scheme`]) and, for MITCCRH, the
//!    session seed (80 bytes); the evaluator answers with its own header (the
//!    seed echoed) before it checks the garbler's, so that a mismatch is
//!    reported on both sides, each naming both values.
//! 2. OT Init: 128 Chou-Orlandi base OTs (32 of 1-out-of-16, see
//!    [`crate::ot`]) seed the IKNP extension, in the first computation of a
//!    session only: the evaluator sends its point `A`, the garbler its 32
//!    points, the evaluator its encrypted keys (32 KiB).
//! 3. Peer Inputs: the evaluator gets the labels of all its input bits, for
//!    all evaluations at once, by correlated OT extension (16 + 16 bytes per
//!    bit; in memory 32 bytes per bit on each side at once, the received or
//!    kept matrix and the labels, [`bulk_memory_bytes`]); then, per
//!    evaluation, the garbler sends its 16-byte input labels.
//! 4. Garble: the garbler streams 32 bytes per AND gate (half-gates) or 25
//!    (three-halves) while garbling; the evaluator evaluates as the bytes
//!    arrive. Nothing else is on the wire.
//! 5. Result: per evaluation the garbler sends the output decoding bits and
//!    the output check (two 8-byte tags per output, [`gc::output_check`]); the
//!    evaluator checks its output labels against it ([`SessionError::OutputCheck`]
//!    if one is neither of the garbler's), decodes and, after the last
//!    evaluation, sends all output bits
//!    back in one message, so both parties learn them. The garbler never
//!    waits for the evaluator inside the loop, nor flushes its channel
//!    there: in bulk mode the two run as a pipeline.
//!
//! Round trips (each stage's [`StageReport::round_trips`], counted by
//! [`RoundTrips`] as the session runs): the points where a party must wait for
//! the other's answer to what it sent. In the first computation of a session,
//! the garbler waits three times: for the evaluator's header (Init), for the
//! base-OT sender's encrypted keys, which answer its points (OT Init; the IKNP
//! matrix of Peer Inputs follows them unasked), and for the outputs, which
//! follow its last table (Result). The evaluator waits twice: for the
//! garbler's base-OT points, which answer its point `A` (OT Init), and for the
//! OT-extension labels, which answer its matrix (Peer Inputs); its first wait,
//! for the header, is half a trip. Later computations have no OT Init: the
//! evaluator's matrix follows its header without waiting, so the garbler waits
//! twice and the evaluator once. Bulk mode adds none: neither party waits
//! inside the loop over evaluations. Without evaluator inputs there is no OT
//! extension, but the garbler's input labels follow the end of the base OTs,
//! which the evaluator then waits for (Peer Inputs).
//!
//! [`run_garbler`]/[`run_evaluator`] run a session of one computation.
//! [`GarblerSession`]/[`EvaluatorSession`] run any number of computations
//! (any circuits) over one connection and pay for the base OTs once, on
//! circuits compiled in each computation or before the session (`run_program`).
//!
//! One global offset `R` serves the whole session; gate tweaks, OT indices and
//! output-check indices keep counting across evaluations and computations, so
//! no hash input repeats, and under MITCCRH no key: the seed is drawn once per
//! session and the keys `seed ^ swap(tweak)` follow the counters. Semi-honest security: bytes from the peer are checked for framing
//! (magic, digest, counts, computation index, curve points) and never trusted
//! for memory sizes, but a malicious peer can make the outputs wrong.
//!
//! # Why reusing the OT set-up is sound (semi-honest)
//!
//! IKNP (Ishai, Kilian, Nissim, Petrank, CRYPTO 2003, section 3) turns `k`
//! base OTs into any polynomial number `m` of OTs: the base OTs only seed
//! `k` PRGs, and each extended OT `i` uses row `i` of the PRG output
//! matrix and the correlation-robust hash at index `i`. Running the
//! extension in batches, one per computation, is the same protocol as one
//! extension of the concatenated batches: the PRGs continue where the last
//! batch stopped (no PRG output is used twice) and the hash index continues
//! from a session counter (the `OT_TWEAK` range, disjoint from gate tweaks),
//! so the simulator of the single long extension covers every batch. Keeping
//! `R` across computations is what bulk mode already does: half-gates (Zahur,
//! Rosulek, Evans, EUROCRYPT 2015) is secure for any number of gates under
//! one `R` provided every hash call has a fresh tweak, which the session-wide
//! gate counter guarantees; several computations are, to the evaluator, one
//! larger circuit whose outputs it decodes in parts. What a session must not
//! do, and does not: restart either counter, or reuse a session after a
//! computation failed part-way (its state is then unknown; `run` refuses).
//!
use std::borrow::Cow;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::channel::{Channel, ChannelError, Deadline, RoundTrips, thread_cpu};
use crate::circuit::{
    Circuit, GateKind, InputLengthError, Party, Stats, bits_from_bytes, bytes_from_bits,
};
use crate::gc;
use crate::hash::{Backend, BackendUnavailable, Block, GcHash, Hasher, Prg, RandomnessError};
use crate::ot::{IknpReceiver, IknpSender, OtError};
use crate::program::Program;
use crate::scheme::Scheme;
use crate::trace::{StartTrace, StepLog};

/// Protocol magic and version (3: the header names the garbling hash and
/// carries MITCCRH's seed, and the Result stage has the output check; 4: the
/// header names the garbling scheme too; 5: the base OTs go in bundles of
/// four, [`crate::ot`]; 6: the base OTs' pads hash a bundle's common block
/// first, and the circuit digest hashes wire ids in fewer bytes; 7: the
/// base OTs run on Edwards points, not Ristretto).
pub const MAGIC: [u8; 8] = *b"CCGC\x00\x07\x00\x00";

/// Bytes of the header each party sends per computation: [`MAGIC`], the
/// circuit digest, the number of evaluations, the computation's index in the
/// session, the hash's id ([`GcHash::id`], 4 bytes), the scheme's id
/// ([`Scheme::id`], 4 bytes) and the 16-byte seed (zero for the fixed-key
/// hash).
pub const HEADER_BYTES: usize = 80;

/// Which side of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Garbles and streams the tables.
    Garbler,
    /// Evaluates.
    Evaluator,
}

/// A stage of the session, in protocol order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Compiling the circuit (schedule, slots, digest) and checking inputs; empty in a
    /// computation on a circuit compiled before ([`GarblerSession::run_program`]).
    Load,
    /// Handshake and session randomness.
    Init,
    /// Base OTs.
    OtInit,
    /// Input labels: the garbler's directly, the evaluator's by OT extension.
    PeerInputs,
    /// Garbling/evaluating and streaming the tables.
    Garble,
    /// Output decoding, both ways.
    Result,
}

impl Stage {
    /// All stages in order.
    pub const ALL: [Stage; 6] = [
        Stage::Load,
        Stage::Init,
        Stage::OtInit,
        Stage::PeerInputs,
        Stage::Garble,
        Stage::Result,
    ];

    /// The display name (`Load`, `Init`, `OT Init`, `Peer Inputs`, `Garble`,
    /// `Result`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Load => "Load",
            Stage::Init => "Init",
            Stage::OtInit => "OT Init",
            Stage::PeerInputs => "Peer Inputs",
            Stage::Garble => "Garble",
            Stage::Result => "Result",
        }
    }
}

/// Time and traffic of one stage (summed over evaluations in bulk mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageReport {
    /// The stage.
    pub stage: Stage,
    /// Wall time spent in it.
    pub time: Duration,
    /// Bytes this party's protocol sent during it (handed to the channel).
    pub bytes_sent: u64,
    /// Bytes this party's protocol received during it.
    pub bytes_received: u64,
    /// Bytes that crossed the transport outwards during it (written to the socket; a byte
    /// buffered at the end of a stage counts in the stage that flushed it).
    pub wire_sent: u64,
    /// Bytes that crossed the transport inwards during it (read from the socket, read-ahead
    /// included).
    pub wire_received: u64,
    /// Round trips in it: the times this party waited for the peer's answer to what it
    /// had sent (see [`RoundTrips`] and the module documentation).
    pub round_trips: u64,
    /// Bytes this party's protocol sent in it after its last round trip in it (all it sent
    /// in it when it has none): bytes no answer waited for, which may still be on their
    /// way when the stage ends (the tables garbled after a mid-circuit reveal).
    pub tail_sent: u64,
    /// Wall time in it after the answer of its last round trip arrived (all of it without
    /// one): over loopback, the compute behind [`StageReport::tail_sent`], during which a
    /// link already carries those bytes.
    pub tail_time: Duration,
    /// This party's CPU time in it (its thread's: the channel writes from it too). Measured
    /// in computations of one evaluation only (single-shot sessions, the streamed circuits):
    /// a thread's CPU clock is a system call (740-840 ns on the dev VM), and a bulk
    /// computation enters three stages per evaluation. Beside [`StageReport::time`] it
    /// tells computing from waiting for the peer.
    pub cpu: Option<Duration>,
}

/// What a session measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionReport {
    /// This party's role.
    pub role: Role,
    /// Evaluations run.
    pub evaluations: u64,
    /// The AES backend of the hash.
    pub backend: Backend,
    /// The garbling hash.
    pub hash: GcHash,
    /// The garbling scheme of the AND gates.
    pub scheme: Scheme,
    /// One entry per [`Stage`], in order.
    pub stages: Vec<StageReport>,
    /// Statistics of the circuit (one evaluation).
    pub circuit: Stats,
    /// Label slots (peak live wires) of the compiled circuit.
    pub label_slots: u32,
    /// Garbled-table bytes moved ([`Scheme::table_bytes`] per AND gate per
    /// evaluation).
    pub table_bytes: u64,
    /// Wall time of the whole session.
    pub total: Duration,
    /// CPU time this party spent in the session: its own thread and the
    /// channel's helper thread (the writer). Against [`SessionReport::total`]
    /// it says how busy the party was, whatever else ran on the machine.
    pub busy: Duration,
    /// Time of [`Program::compile`] (part of the Load stage; zero for
    /// generated circuits, which are not compiled).
    pub compile: Duration,
    /// Total bytes this party's protocol sent.
    pub bytes_sent: u64,
    /// Total bytes this party's protocol received.
    pub bytes_received: u64,
    /// Total bytes this party wrote to its transport (the socket's counter): what crossed
    /// the wire, counted independently of the protocol's own bookkeeping.
    pub wire_bytes_sent: u64,
    /// Total bytes this party read from its transport.
    pub wire_bytes_received: u64,
    /// Round trips of the whole session (the sum of the stages').
    pub round_trips: u64,
    /// This party's steps from the session's start to its first Garble stage: the stages
    /// it entered, its flushes and its receives, with their times ([`crate::trace`]); empty
    /// when they did not fit in a trace. The replay of both parties' traces over a link
    /// predicts the stages before garbling.
    pub start: StartTrace,
}

impl SessionReport {
    /// The report of one stage.
    pub fn stage(&self, s: Stage) -> StageReport {
        self.stages[s as usize]
    }

    /// Gates of one kind processed over all evaluations.
    pub fn gates(&self, kind: GateKind) -> u64 {
        self.circuit.count(kind) * self.evaluations
    }

    /// AND gates over all evaluations.
    pub fn and_gates(&self) -> u64 {
        self.gates(GateKind::And)
    }

    /// XOR gates over all evaluations.
    pub fn xor_gates(&self) -> u64 {
        self.gates(GateKind::Xor)
    }
}

/// Outputs and report of a session.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionOutput {
    /// Output bits of each evaluation (both parties get the same).
    pub outputs: Vec<Vec<bool>>,
    /// Measurements.
    pub report: SessionReport,
}

impl SessionOutput {
    /// Outputs of each evaluation as bytes (see [`bytes_from_bits`]).
    pub fn output_bytes(&self) -> Vec<Vec<u8>> {
        self.outputs.iter().map(|o| bytes_from_bits(o)).collect()
    }
}

/// Session settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// AES backend for the hash (default: detected).
    pub backend: Backend,
    /// The whole session's deadline (default: none). Set on the channel at the start of
    /// each computation ([`Channel::set_deadline`]) and left there, so that a peer that
    /// paces its bytes to stay within the channel's per-read timeout still cannot keep the
    /// session alive past it. `None` leaves the channel's own deadline, if any.
    pub deadline: Option<Deadline>,
    /// The garbling hash (default: [`GcHash::Mitccrh`]). Both parties must
    /// choose the same one: the header carries it.
    pub hash: GcHash,
    /// The garbling scheme (default: [`Scheme::HalfGates`]). Both parties
    /// must choose the same one: the header carries it. The streaming session
    /// of generated circuits ([`crate::stream`]) takes either too.
    pub scheme: Scheme,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            backend: Backend::detect(),
            deadline: None,
            hash: GcHash::default(),
            scheme: Scheme::default(),
        }
    }
}

/// Sets a session's deadline on `ch`, if it has one (see [`SessionOptions::deadline`]).
pub(crate) fn apply_deadline<C: Channel>(deadline: Option<Deadline>, ch: &mut C) {
    if let Some(d) = deadline {
        ch.set_deadline(Some(d));
    }
}

/// Why a session failed.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The channel failed (peer closed, timed out, I/O error).
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// Oblivious transfer failed.
    #[error(transparent)]
    Ot(#[from] OtError),
    /// Our own input has the wrong length.
    #[error("evaluation {evaluation}: {source}")]
    Input {
        /// Which evaluation.
        evaluation: usize,
        /// The length problem.
        source: InputLengthError,
    },
    /// The peer is not speaking this protocol.
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    /// The peer runs a different circuit.
    #[error("the peer runs a different circuit (digest mismatch)")]
    CircuitMismatch,
    /// The peer wants a different number of evaluations.
    #[error("we run {ours} evaluations, the peer {peer}")]
    EvaluationCount {
        /// Ours.
        ours: u64,
        /// The peer's.
        peer: u64,
    },
    /// No session randomness.
    #[error(transparent)]
    Randomness(#[from] RandomnessError),
    /// The requested AES backend is missing.
    #[error(transparent)]
    Backend(#[from] BackendUnavailable),
    /// The peer garbles with another hash.
    #[error(
        "we garble with the {ours} hash, the peer with {peer}: both parties need the same --hash"
    )]
    HashMismatch {
        /// Ours.
        ours: GcHash,
        /// The peer's.
        peer: GcHash,
    },
    /// The peer's header names a hash this build does not know.
    #[error(
        "the peer's header names garbling hash number {peer}, which this build does not know (we garble with {ours})"
    )]
    UnknownHash {
        /// Ours.
        ours: GcHash,
        /// The number in the peer's header.
        peer: u64,
    },
    /// The peer garbles with another scheme.
    #[error("we garble with {ours}, the peer with {peer}: both parties need the same --scheme")]
    SchemeMismatch {
        /// Ours.
        ours: Scheme,
        /// The peer's.
        peer: Scheme,
    },
    /// The peer's header names a scheme this build does not know.
    #[error(
        "the peer's header names garbling scheme number {peer}, which this build does not know (we garble with {ours})"
    )]
    UnknownScheme {
        /// Ours.
        ours: Scheme,
        /// The number in the peer's header.
        peer: u32,
    },
    /// An output label failed the garbler's output check: the outputs are
    /// not accepted.
    #[error("evaluation {evaluation}: {source}")]
    OutputCheck {
        /// Which evaluation.
        evaluation: usize,
        /// Which output.
        source: gc::CheckFailed,
    },
    /// The circuit refused a value revealed in its middle (both parties stop there; for
    /// the Ed25519 signature, a blinded `R` with `Z = 0`, which a blinding share of 0
    /// gives).
    #[error(transparent)]
    Refused(#[from] crate::generator::Refused),
}

pub(crate) struct Stages {
    pub(crate) acc: Vec<StageReport>,
    /// The current stage, its start, the counters then and, where measured, the CPU time.
    cur: Option<(Stage, Instant, Counters, Option<Duration>)>,
    /// Whether the stages' CPU time is measured ([`StageReport::cpu`]).
    cpu: bool,
    /// The stages' entries, for the start trace.
    enters: StepLog,
    /// The session's start trace ([`Stages::trace_start`]).
    pub(crate) start: StartTrace,
}

/// A channel's four byte counters at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) wire_sent: u64,
    pub(crate) wire_received: u64,
    pub(crate) round_trips: u64,
}

impl Counters {
    pub(crate) fn of<C: Channel>(ch: &C) -> Counters {
        Counters {
            sent: ch.bytes_sent(),
            received: ch.bytes_received(),
            wire_sent: ch.wire_bytes_sent(),
            wire_received: ch.wire_bytes_received(),
            round_trips: ch.round_trips(),
        }
    }

    /// What moved since `earlier`.
    pub(crate) fn since(self, earlier: Counters) -> Counters {
        Counters {
            sent: self.sent - earlier.sent,
            received: self.received - earlier.received,
            wire_sent: self.wire_sent - earlier.wire_sent,
            wire_received: self.wire_received - earlier.wire_received,
            round_trips: self.round_trips - earlier.round_trips,
        }
    }
}

impl Stages {
    /// Empty stages; `cpu`: measure each stage's CPU time ([`StageReport::cpu`]).
    pub(crate) fn new(cpu: bool) -> Stages {
        Stages {
            acc: Stage::ALL
                .iter()
                .map(|&stage| StageReport {
                    stage,
                    time: Duration::ZERO,
                    bytes_sent: 0,
                    bytes_received: 0,
                    wire_sent: 0,
                    wire_received: 0,
                    round_trips: 0,
                    tail_sent: 0,
                    tail_time: Duration::ZERO,
                    cpu: None,
                })
                .collect(),
            cur: None,
            cpu,
            enters: StepLog::default(),
            start: StartTrace::default(),
        }
    }

    pub(crate) fn enter<C: Channel>(&mut self, s: Stage, ch: &C) {
        self.close(ch);
        self.enters.enter(s);
        let cpu = self.cpu.then(thread_cpu);
        self.cur = Some((s, Instant::now(), Counters::of(ch), cpu));
    }

    /// Keeps the session's start trace: the stages' entries and the steps of `log` (the
    /// session's channel), since `t0` ([`SessionReport::start`]).
    pub(crate) fn trace_start(&mut self, log: &StepLog, t0: Instant) {
        self.start = crate::trace::start(&self.enters, log, t0);
    }

    pub(crate) fn close<C: Channel>(&mut self, ch: &C) {
        if let Some((s, t, at, cpu)) = self.cur.take() {
            let cpu = cpu.map(|c0| thread_cpu().saturating_sub(c0));
            let end = Instant::now();
            let now = Counters::of(ch);
            let d = now.since(at);
            // What was sent after the stage's last round trip (all of it without one), and
            // the time since its answer.
            let (tail, tail_from) = if d.round_trips > 0 {
                (
                    now.sent.saturating_sub(ch.sent_at_last_round_trip()),
                    ch.answered_at().map_or(t, |a| a.max(t)),
                )
            } else {
                (d.sent, t)
            };
            let r = &mut self.acc[s as usize];
            r.time += end.saturating_duration_since(t);
            r.tail_time += end.saturating_duration_since(tail_from);
            r.bytes_sent += d.sent;
            r.bytes_received += d.received;
            r.wire_sent += d.wire_sent;
            r.wire_received += d.wire_received;
            r.round_trips += d.round_trips;
            r.tail_sent += tail;
            if let Some(c) = cpu {
                r.cpu = Some(r.cpu.unwrap_or_default() + c);
            }
        }
    }
}

fn check_inputs(inputs: &[Vec<bool>], party: Party, expected: usize) -> Result<(), SessionError> {
    for (i, v) in inputs.iter().enumerate() {
        if v.len() != expected {
            return Err(SessionError::Input {
                evaluation: i,
                source: InputLengthError {
                    party,
                    got: v.len(),
                    expected,
                },
            });
        }
    }
    Ok(())
}

/// The circuit of a computation: compiled in its Load stage, or before the session.
#[derive(Clone, Copy)]
enum Source<'a> {
    Circuit(&'a Circuit),
    Program(&'a Program),
}

impl<'a> Source<'a> {
    /// The program, after checking `party`'s inputs against it, and the time its
    /// compilation took (in the Load stage, which a compiled program skips).
    fn prepare<C: Channel>(
        self,
        party: Party,
        inputs: &[Vec<bool>],
        st: &mut Stages,
        ch: &C,
    ) -> Result<(Cow<'a, Program>, Duration), SessionError> {
        match self {
            Source::Circuit(c) => {
                st.enter(Stage::Load, ch);
                check_inputs(inputs, party, c.party_input_bits(party))?;
                let tc = Instant::now();
                let prog = Program::compile_with(c, inputs.len() >= SUMS_FROM);
                Ok((Cow::Owned(prog), tc.elapsed()))
            }
            Source::Program(p) => {
                check_inputs(inputs, party, p.party_input_bits(party))?;
                Ok((Cow::Borrowed(p), Duration::ZERO))
            }
        }
    }
}

/// The fewest evaluations for which a session compiles its circuit's free
/// gates into XOR sums ([`Program::compile_with`]): the sums take AES-128's
/// compilation from about 0.63 to 1.1 ms and save about 7 µs of each
/// evaluation's garbling (`docs/gc-2pc.md`, "XOR sums"), so a single evaluation
/// would pay for them and not get them back.
pub const SUMS_FROM: usize = 64;

/// The memory a computation of `n` evaluations of `circuit` takes in `party`'s process at its
/// peak, in bytes, beyond the circuit and its compiled program: the correlated OT extension
/// for the evaluator inputs of all `n` evaluations runs at once, before the first is garbled
/// (so that neither party waits inside the loop over evaluations), at
/// [`crate::ot::SENDER_BYTES_PER_OT`] or [`crate::ot::RECEIVER_BYTES_PER_OT`] per input bit,
/// and every evaluation's inputs and outputs are held (a byte a bit and a vector each). An
/// estimate from the buffers' sizes: on the dev VM, AES-128 took 4.16 KB (garbler) and
/// 4.32 KB (evaluator, KiB both) more peak RSS per evaluation between 10,000 and 40,000
/// evaluations (`/usr/bin/time` of `ccbench gc garble|evaluate`, 2026-11-29), against 4.3
/// here (14.2 and 12.3 KB before the extension worked in chunks). Callers that let a user
/// choose `n` check it against the memory available (`ccbench gc garble|evaluate`).
pub fn bulk_memory_bytes(circuit: &Circuit, n: u64, party: Party) -> u64 {
    let per_ot = match party {
        Party::Garbler => crate::ot::SENDER_BYTES_PER_OT,
        Party::Evaluator => crate::ot::RECEIVER_BYTES_PER_OT,
    };
    let ebits = circuit.evaluator_input_bits() as u64;
    let held = (circuit.party_input_bits(party) + circuit.output_bits()) as u64 + 48;
    n.saturating_mul(ebits * per_ot + held)
}

/// What each party of a session must write to its transport, in bytes, derived from the
/// protocol's messages and the circuit alone: `(garbler, evaluator)` for `n` evaluations.
///
/// Garbler: the 80-byte header; its base-OT points, 32 bytes per bundle of four base OTs
/// (it is the base OTs' receiver; [`crate::ot::base_ot_bytes`]); 16 bytes per evaluator
/// input bit for the correlated OT extension; and per
/// evaluation 16 bytes per garbler input bit (its labels), 32 bytes per AND gate (two
/// half-gate ciphertexts; see [`expected_wire_bytes_with`] for three-halves' 25), one
/// output-decoding bit per output wire, in whole bytes, and
/// 16 bytes of output check per output wire. Evaluator: the 80-byte header; its base-OT
/// point and encrypted keys (32 bytes, then 1 KiB per bundle); the IKNP matrix, 16 bytes per
/// 128 evaluator input bits (rounded up) per base OT; and the outputs, in whole bytes per
/// evaluation. A session's measured socket counters are checked against these.
pub fn expected_wire_bytes(circuit: &Circuit, n: u64) -> (u64, u64) {
    expected_wire_bytes_with(circuit, n, Scheme::HalfGates)
}

/// [`expected_wire_bytes`] under a garbling scheme: [`Scheme::table_bytes`] per AND gate.
pub fn expected_wire_bytes_with(circuit: &Circuit, n: u64, scheme: Scheme) -> (u64, u64) {
    wire_bytes(
        HEADER_BYTES as u64,
        circuit.garbler_input_bits(),
        circuit.evaluator_input_bits(),
        circuit.output_bits(),
        circuit.output_bits(),
        circuit.stats().and_gates() * scheme.table_bytes() as u64,
        n,
    )
}

/// [`expected_wire_bytes`] from the header's size, the input and output widths, the outputs
/// that carry a check (not constants) and the table bytes of one evaluation (shared with
/// [`crate::stream::expected_wire_bytes`]).
pub(crate) fn wire_bytes(
    header: u64,
    garbler_bits: usize,
    evaluator_bits: usize,
    output_bits: usize,
    checked_outputs: usize,
    tables: u64,
    n: u64,
) -> (u64, u64) {
    let gbits = garbler_bits as u64;
    let ebits = evaluator_bits as u64;
    let out = output_bits.div_ceil(8) as u64;
    let kappa = crate::ot::KAPPA as u64;
    let m = ebits * n;
    let (ot_garbler, ot_evaluator) = if m == 0 {
        (0, 0)
    } else {
        (16 * m, 16 * m.div_ceil(128) * kappa)
    };
    let check = (crate::gc::CHECK_BYTES * checked_outputs) as u64;
    // The garbler is the base OTs' receiver.
    let (base_garbler, base_evaluator) = crate::ot::base_ot_bytes(crate::ot::KAPPA);
    let garbler = header + base_garbler + ot_garbler + n * (16 * gbits + tables + out + check);
    let evaluator = header + base_evaluator + ot_evaluator + n * out;
    (garbler, evaluator)
}

/// What a header says beyond the circuit: the hash and its seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HashParams {
    pub(crate) hash: GcHash,
    /// MITCCRH's seed; zero for the fixed-key hash.
    pub(crate) seed: Block,
}

impl HashParams {
    /// The 24 header bytes: the hash's id, then the seed.
    pub(crate) fn bytes(self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&self.hash.id().to_le_bytes());
        b[8..].copy_from_slice(&self.seed.to_bytes());
        b
    }

    /// Reads a peer's 24 header bytes: the hash it names must be `ours`.
    /// Returns the peer's seed.
    pub(crate) fn check(ours: GcHash, got: &[u8]) -> Result<Block, SessionError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(&got[..8]);
        let id = u64::from_le_bytes(b);
        let peer = GcHash::from_id(id).ok_or(SessionError::UnknownHash { ours, peer: id })?;
        if peer != ours {
            return Err(SessionError::HashMismatch { ours, peer });
        }
        let mut s = [0u8; 16];
        s.copy_from_slice(&got[8..24]);
        Ok(Block::from_bytes(s))
    }

    /// The hasher these parameters describe.
    pub(crate) fn hasher(self, backend: Backend) -> Result<Hasher, BackendUnavailable> {
        Hasher::of(self.hash, self.seed, backend)
    }
}

/// The hash of a new session: MITCCRH's seed drawn from `prg`, zero for the
/// fixed-key hash.
pub(crate) fn new_hash_params(hash: GcHash, prg: &mut Prg) -> HashParams {
    let seed = match hash {
        GcHash::Mitccrh => prg.block(),
        GcHash::FixedKey => Block::ZERO,
    };
    HashParams { hash, seed }
}

fn header(prog: &Program, n: u64, seq: u64, hp: HashParams, scheme: Scheme) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_BYTES);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&prog.digest());
    h.extend_from_slice(&n.to_le_bytes());
    h.extend_from_slice(&seq.to_le_bytes());
    let mut hb = hp.bytes();
    // The hash's id is a small number in the low 4 bytes of its 8; the scheme takes the
    // high 4.
    hb[4..8].copy_from_slice(&scheme.id().to_le_bytes());
    h.extend_from_slice(&hb);
    h
}

/// Reads a header's 24 hash bytes: the hash ([`HashParams::check`], on the bytes with the
/// scheme's 4 cleared) and the scheme must be ours. Returns the peer's seed.
pub(crate) fn check_hash_scheme(
    (hash, ours): (GcHash, Scheme),
    got: &[u8],
) -> Result<Block, SessionError> {
    let mut b = [0u8; 24];
    b.copy_from_slice(&got[..24]);
    let mut id = [0u8; 4];
    id.copy_from_slice(&b[4..8]);
    b[4..8].fill(0);
    let seed = HashParams::check(hash, &b)?;
    let id = u32::from_le_bytes(id);
    let peer = Scheme::from_id(id).ok_or(SessionError::UnknownScheme { ours, peer: id })?;
    if peer != ours {
        return Err(SessionError::SchemeMismatch { ours, peer });
    }
    Ok(seed)
}

const BAD_MAGIC: &str = "bad magic: the peer is not a ccbench garble peer of this version";

/// Checks a peer's header against ours (hash `hash`, scheme `scheme`); returns the peer's
/// seed.
fn check_header(
    prog: &Program,
    n: u64,
    seq: u64,
    ours: (GcHash, Scheme),
    got: &[u8; HEADER_BYTES],
) -> Result<Block, SessionError> {
    if got[..8] != MAGIC {
        return Err(SessionError::Protocol(BAD_MAGIC));
    }
    let seed = check_hash_scheme(ours, &got[56..80])?;
    if got[8..40] != prog.digest() {
        return Err(SessionError::CircuitMismatch);
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&got[40..48]);
    let peer = u64::from_le_bytes(b);
    if peer != n {
        return Err(SessionError::EvaluationCount { ours: n, peer });
    }
    b.copy_from_slice(&got[48..56]);
    if u64::from_le_bytes(b) != seq {
        return Err(SessionError::Protocol(
            "the peer is at another computation of the session (set-up reused on one side only)",
        ));
    }
    Ok(seed)
}

/// Where a party's clocks started: wall time and its thread's CPU time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clocks {
    pub(crate) wall: Instant,
    cpu: Duration,
}

impl Clocks {
    pub(crate) fn start() -> Clocks {
        Clocks {
            wall: Instant::now(),
            cpu: thread_cpu(),
        }
    }

    /// CPU time spent since the start.
    pub(crate) fn busy(&self) -> Duration {
        thread_cpu().saturating_sub(self.cpu)
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    role: Role,
    prog: &Program,
    n: u64,
    (hasher, scheme): (&Hasher, Scheme),
    stages: Stages,
    t0: Instant,
    moved: Counters,
    busy: Duration,
    compile: Duration,
) -> SessionReport {
    SessionReport {
        role,
        evaluations: n,
        backend: hasher.backend(),
        hash: hasher.kind(),
        scheme,
        stages: stages.acc,
        circuit: prog.stats().clone(),
        label_slots: prog.num_slots(),
        table_bytes: prog.and_gates() * scheme.table_bytes() as u64 * n,
        total: t0.elapsed(),
        busy,
        compile,
        bytes_sent: moved.sent,
        bytes_received: moved.received,
        wire_bytes_sent: moved.wire_sent,
        wire_bytes_received: moved.wire_received,
        round_trips: moved.round_trips,
        start: stages.start,
    }
}

/// Runs the garbler: one evaluation per element of `inputs` (the garbler's
/// input bits for that evaluation). A session of one computation: see
/// [`GarblerSession`] to run more on the same connection without a second
/// OT set-up.
pub fn run_garbler<C: Channel>(
    ch: &mut C,
    circuit: &Circuit,
    inputs: &[Vec<bool>],
    opts: &SessionOptions,
) -> Result<SessionOutput, SessionError> {
    GarblerSession::new(opts)?.run(ch, circuit, inputs)
}

/// The computations of one session: how many started, and whether the last one failed (a
/// failure leaves the OT state and the gate counter unknown, so the session refuses to go on).
#[derive(Debug, Default)]
struct Sequence {
    started: u64,
    failed: bool,
}

impl Sequence {
    /// Starts a computation: its index, or an error if an earlier one failed. Until
    /// [`Sequence::succeeded`], the session counts as failed.
    fn start(&mut self) -> Result<u64, SessionError> {
        if self.failed {
            return Err(SessionError::Protocol(
                "an earlier computation of this session failed",
            ));
        }
        self.failed = true;
        self.started += 1;
        Ok(self.started - 1)
    }

    fn succeeded(&mut self) {
        self.failed = false;
    }
}

/// The garbler's side of a session that runs several computations (any
/// circuits, each one or many evaluations) over one connection, with one OT
/// set-up: the base OTs run in the first computation only, and every later
/// one extends the same IKNP instance (see the module documentation for why
/// that is sound). A computation that fails leaves the session unusable.
pub struct GarblerSession {
    hasher: Hasher,
    hash: HashParams,
    scheme: Scheme,
    prg: Prg,
    delta: Block,
    ot: Option<IknpSender>,
    /// AND gates garbled so far in the session: the gate tweaks.
    counter: u64,
    /// Outputs checked so far in the session: the output-check tweaks.
    checks: u64,
    seq: Sequence,
    /// [`SessionOptions::deadline`].
    deadline: Option<Deadline>,
}

impl std::fmt::Debug for GarblerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GarblerSession(computations: {}, ..)", self.seq.started)
    }
}

impl GarblerSession {
    /// A session with fresh randomness (the global offset `R` and, for
    /// MITCCRH, the seed it sends in every computation's header).
    pub fn new(opts: &SessionOptions) -> Result<GarblerSession, SessionError> {
        let mut prg = Prg::from_os()?;
        let mut delta = prg.block();
        delta.0 |= 1;
        let hash = new_hash_params(opts.hash, &mut prg);
        Ok(GarblerSession {
            hasher: hash.hasher(opts.backend)?,
            hash,
            scheme: opts.scheme,
            prg,
            delta,
            ot: None,
            counter: 0,
            checks: 0,
            seq: Sequence::default(),
            deadline: opts.deadline,
        })
    }

    /// Computations run (or started) so far.
    pub fn computations(&self) -> u64 {
        self.seq.started
    }

    /// Runs one computation: one evaluation of `circuit` per element of
    /// `inputs`. The OT Init stage is empty after the first computation.
    pub fn run<C: Channel>(
        &mut self,
        ch: &mut C,
        circuit: &Circuit,
        inputs: &[Vec<bool>],
    ) -> Result<SessionOutput, SessionError> {
        self.run_source(ch, Source::Circuit(circuit), inputs)
    }

    /// [`GarblerSession::run`] on a circuit compiled before ([`Program::compile`]), as a
    /// party that runs the same circuit in many sessions keeps it: the computation has no
    /// Load stage, and its report's [`SessionReport::compile`] is zero.
    pub fn run_program<C: Channel>(
        &mut self,
        ch: &mut C,
        program: &Program,
        inputs: &[Vec<bool>],
    ) -> Result<SessionOutput, SessionError> {
        self.run_source(ch, Source::Program(program), inputs)
    }

    fn run_source<C: Channel>(
        &mut self,
        ch: &mut C,
        source: Source<'_>,
        inputs: &[Vec<bool>],
    ) -> Result<SessionOutput, SessionError> {
        apply_deadline(self.deadline, ch);
        let seq = self.seq.start()?;
        let out = self.run_once(ch, source, inputs, seq)?;
        self.seq.succeeded();
        Ok(out)
    }

    fn run_once<C: Channel>(
        &mut self,
        ch: &mut C,
        source: Source<'_>,
        inputs: &[Vec<bool>],
        seq: u64,
    ) -> Result<SessionOutput, SessionError> {
        let ch = &mut RoundTrips::new(ch);
        let clocks = Clocks::start();
        let t0 = clocks.wall;
        let c0 = Counters::of(ch);
        let mut st = Stages::new(inputs.len() == 1);
        let (hasher, delta) = (&self.hasher, self.delta);
        let (prog, compile) = source.prepare(Party::Garbler, inputs, &mut st, ch)?;
        let prog = &*prog;
        let n = inputs.len() as u64;

        st.enter(Stage::Init, ch);
        let scheme = self.scheme;
        ch.send(&header(prog, n, seq, self.hash, scheme))?;
        ch.flush()?;
        let mut ack = [0u8; HEADER_BYTES];
        ch.recv(&mut ack)?;
        if check_header(prog, n, seq, (self.hash.hash, scheme), &ack)? != self.hash.seed {
            return Err(SessionError::Protocol(
                "the peer echoed another hash seed than ours",
            ));
        }
        let prg = &mut self.prg;
        let mut labels = vec![Block::ZERO; prog.label_capacity()];

        st.enter(Stage::OtInit, ch);
        if self.ot.is_none() {
            self.ot = Some(IknpSender::setup(ch, prg)?);
        }
        let ot = self
            .ot
            .as_mut()
            .ok_or(SessionError::Protocol("no OT set-up"))?;

        // Peer inputs, evaluator side: one OT extension for all evaluations, so
        // that the garbler never waits for the evaluator inside the loop.
        st.enter(Stage::PeerInputs, ch);
        let ebits = prog.evaluator_input_bits();
        let all_l0 = ot.send_correlated(ch, hasher, delta, ebits * inputs.len())?;

        let counter = &mut self.counter;
        let out_bytes = prog.output_bits().div_ceil(8);
        for (k, x) in inputs.iter().enumerate() {
            st.enter(Stage::PeerInputs, ch);
            let mut msg = Vec::with_capacity(16 * x.len());
            for (&s, &bit) in prog.garbler_inputs.iter().zip(x) {
                let l0 = prg.block();
                labels[s as usize] = l0;
                msg.extend_from_slice(&(l0 ^ delta.select(bit)).to_bytes());
            }
            ch.send(&msg)?;
            for (&s, &l0) in prog.evaluator_inputs.iter().zip(&all_l0[k * ebits..]) {
                labels[s as usize] = l0;
            }

            st.enter(Stage::Garble, ch);
            scheme.garble_to(prog, hasher, delta, prg, &mut labels, counter, ch)?;

            st.enter(Stage::Result, ch);
            let mut msg = bytes_from_bits(&gc::decode_bits(prog, &labels));
            let outs: Vec<Block> = prog.outputs.iter().map(|&s| labels[s as usize]).collect();
            gc::output_check(hasher, &outs, delta, self.checks, &mut msg);
            self.checks += outs.len() as u64;
            ch.send(&msg)?;
            // No flush per evaluation: the channel writes whenever its buffer
            // fills (every few evaluations in bulk mode), which costs fewer
            // system calls and wake-ups than one write per evaluation.
        }
        // The evaluator sends every evaluation's outputs at the end.
        st.enter(Stage::Result, ch);
        ch.flush()?;
        let mut out = vec![0u8; out_bytes * inputs.len()];
        ch.recv(&mut out)?;
        let outputs: Vec<Vec<bool>> = (0..inputs.len())
            .map(|k| bits_from_bytes(&out[k * out_bytes..(k + 1) * out_bytes], prog.output_bits()))
            .collect();
        st.close(ch);
        st.trace_start(ch.log(), t0);
        let moved = Counters::of(ch).since(c0);
        Ok(SessionOutput {
            outputs,
            report: report(
                Role::Garbler,
                prog,
                n,
                (hasher, scheme),
                st,
                t0,
                moved,
                clocks.busy(),
                compile,
            ),
        })
    }
}

/// Runs the evaluator: one evaluation per element of `inputs` (the
/// evaluator's input bits for that evaluation). A session of one
/// computation: see [`EvaluatorSession`].
pub fn run_evaluator<C: Channel>(
    ch: &mut C,
    circuit: &Circuit,
    inputs: &[Vec<bool>],
    opts: &SessionOptions,
) -> Result<SessionOutput, SessionError> {
    EvaluatorSession::new(opts)?.run(ch, circuit, inputs)
}

/// The evaluator's side of a session of several computations (see
/// [`GarblerSession`]).
pub struct EvaluatorSession {
    opts: SessionOptions,
    /// The hash, once the garbler's first header gave its seed.
    hasher: Option<(Hasher, HashParams)>,
    prg: Prg,
    ot: Option<IknpReceiver>,
    counter: u64,
    checks: u64,
    seq: Sequence,
    /// [`SessionOptions::deadline`].
    deadline: Option<Deadline>,
}

impl std::fmt::Debug for EvaluatorSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EvaluatorSession(computations: {}, ..)",
            self.seq.started
        )
    }
}

impl EvaluatorSession {
    /// A session with fresh randomness.
    pub fn new(opts: &SessionOptions) -> Result<EvaluatorSession, SessionError> {
        if !opts.backend.available() {
            return Err(BackendUnavailable(opts.backend).into());
        }
        Ok(EvaluatorSession {
            opts: *opts,
            hasher: None,
            prg: Prg::from_os()?,
            ot: None,
            counter: 0,
            checks: 0,
            seq: Sequence::default(),
            deadline: opts.deadline,
        })
    }

    /// Computations run (or started) so far.
    pub fn computations(&self) -> u64 {
        self.seq.started
    }

    /// Runs one computation: one evaluation of `circuit` per element of
    /// `inputs`.
    pub fn run<C: Channel>(
        &mut self,
        ch: &mut C,
        circuit: &Circuit,
        inputs: &[Vec<bool>],
    ) -> Result<SessionOutput, SessionError> {
        self.run_source(ch, Source::Circuit(circuit), inputs)
    }

    /// [`EvaluatorSession::run`] on a circuit compiled before (see
    /// [`GarblerSession::run_program`]).
    pub fn run_program<C: Channel>(
        &mut self,
        ch: &mut C,
        program: &Program,
        inputs: &[Vec<bool>],
    ) -> Result<SessionOutput, SessionError> {
        self.run_source(ch, Source::Program(program), inputs)
    }

    fn run_source<C: Channel>(
        &mut self,
        ch: &mut C,
        source: Source<'_>,
        inputs: &[Vec<bool>],
    ) -> Result<SessionOutput, SessionError> {
        apply_deadline(self.deadline, ch);
        let seq = self.seq.start()?;
        let out = self.run_once(ch, source, inputs, seq)?;
        self.seq.succeeded();
        Ok(out)
    }

    fn run_once<C: Channel>(
        &mut self,
        ch: &mut C,
        source: Source<'_>,
        inputs: &[Vec<bool>],
        seq: u64,
    ) -> Result<SessionOutput, SessionError> {
        let ch = &mut RoundTrips::new(ch);
        let clocks = Clocks::start();
        let t0 = clocks.wall;
        let c0 = Counters::of(ch);
        let mut st = Stages::new(inputs.len() == 1);
        let (prog, compile) = source.prepare(Party::Evaluator, inputs, &mut st, ch)?;
        let prog = &*prog;
        let n = inputs.len() as u64;

        st.enter(Stage::Init, ch);
        let mut hdr = [0u8; HEADER_BYTES];
        ch.recv(&mut hdr)?;
        if hdr[..8] != MAGIC {
            // Not a peer of this version: nothing to answer.
            return Err(SessionError::Protocol(BAD_MAGIC));
        }
        // Answer before checking, so that the garbler reports a mismatch too,
        // naming both sides' values; the seed goes back as received.
        let (ours, scheme) = (self.opts.hash, self.opts.scheme);
        let echo = match check_hash_scheme((ours, scheme), &hdr[56..80]) {
            Ok(seed) => HashParams { hash: ours, seed },
            Err(_) => HashParams {
                hash: ours,
                seed: Block::ZERO,
            },
        };
        ch.send(&header(prog, n, seq, echo, scheme))?;
        ch.flush()?;
        let seed = check_header(prog, n, seq, (ours, scheme), &hdr)?;
        let hp = HashParams { hash: ours, seed };
        match &self.hasher {
            None => self.hasher = Some((hp.hasher(self.opts.backend)?, hp)),
            Some((_, first)) if *first != hp => {
                return Err(SessionError::Protocol(
                    "the garbler changed the hash seed within the session",
                ));
            }
            Some(_) => {}
        }
        let hasher = match &self.hasher {
            Some((h, _)) => h,
            None => return Err(SessionError::Protocol("no hash")),
        };
        let mut labels = vec![Block::ZERO; prog.label_capacity()];

        st.enter(Stage::OtInit, ch);
        if self.ot.is_none() {
            self.ot = Some(IknpReceiver::setup(ch, &mut self.prg)?);
        }
        let ot = self
            .ot
            .as_mut()
            .ok_or(SessionError::Protocol("no OT set-up"))?;

        st.enter(Stage::PeerInputs, ch);
        let ebits = prog.evaluator_input_bits();
        let all_choices: Vec<bool> = inputs.iter().flatten().copied().collect();
        let mine = ot.receive_correlated(ch, hasher, &all_choices)?;

        let counter = &mut self.counter;
        let mut outputs = Vec::with_capacity(inputs.len());
        let gbits = prog.garbler_input_bits();
        let mut glabels = vec![0u8; 16 * gbits];
        let dlen = prog.output_bits().div_ceil(8);
        let mut dbytes = vec![0u8; dlen + gc::CHECK_BYTES * prog.output_bits()];
        let mut outs = vec![Block::ZERO; prog.output_bits()];
        let mut out_msg = Vec::with_capacity(dlen * inputs.len());
        for k in 0..inputs.len() {
            st.enter(Stage::PeerInputs, ch);
            ch.recv(&mut glabels)?;
            for (i, &s) in prog.garbler_inputs.iter().enumerate() {
                let mut b = [0u8; 16];
                b.copy_from_slice(&glabels[16 * i..16 * i + 16]);
                labels[s as usize] = Block::from_bytes(b);
            }
            for (&s, &l) in prog.evaluator_inputs.iter().zip(&mine[k * ebits..]) {
                labels[s as usize] = l;
            }

            st.enter(Stage::Garble, ch);
            scheme.evaluate(prog, hasher, &mut labels, counter, &mut |b| ch.recv(b))?;

            st.enter(Stage::Result, ch);
            ch.recv(&mut dbytes)?;
            for (o, &s) in outs.iter_mut().zip(&prog.outputs) {
                *o = labels[s as usize];
            }
            gc::verify_check(hasher, &outs, self.checks, &dbytes[dlen..]).map_err(|source| {
                SessionError::OutputCheck {
                    evaluation: k,
                    source,
                }
            })?;
            self.checks += outs.len() as u64;
            let d = bits_from_bytes(&dbytes[..dlen], prog.output_bits());
            let out = gc::decode(prog, &labels, &d);
            out_msg.extend_from_slice(&bytes_from_bits(&out));
            outputs.push(out);
        }
        // Outputs go back in one message at the end: sending them inside the
        // loop could fill both socket buffers while the garbler is still writing.
        st.enter(Stage::Result, ch);
        ch.send(&out_msg)?;
        ch.flush()?;
        st.close(ch);
        st.trace_start(ch.log(), t0);
        let moved = Counters::of(ch).since(c0);
        Ok(SessionOutput {
            outputs,
            report: report(
                Role::Evaluator,
                prog,
                n,
                (hasher, scheme),
                st,
                t0,
                moved,
                clocks.busy(),
                compile,
            ),
        })
    }
}
