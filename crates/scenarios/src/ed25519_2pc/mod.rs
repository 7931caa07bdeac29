//! Scenario `ed25519-2pc`: an Ed25519 signature computed by two parties who each hold an
//! XOR share of the private key, by garbling the whole RFC 8032 signing algorithm (after
//! markkurossi/mpc's "Measure First", 2022, whose published run is 830 M gates, 267.5 M AND,
//! 15 GB on the wire and 87.85 s).
//!
//! The circuit is `garble::ed25519::Ed25519Sign` (64-byte message, as published), by
//! default the variant that reveals `R` blinded and encodes it in the clear
//! (`ed25519-sign-reveal`, about half the AND gates); `--variant one-pass` measures the
//! whole signature in one circuit (`ed25519-sign`); `--scheme three-halves` garbles its AND
//! gates with three-halves instead of half-gates (every record says which in
//! `params.gc_scheme`). Too large to store, so each party
//! generates it and garbles or evaluates every gate as it is emitted (`garble::stream`),
//! with field multiplications compiled once and replayed. Per signature,
//! this process garbles and a child process (this binary again, see [`run_if_evaluator`])
//! evaluates, over loopback TCP, OT and circuit generation included. Both parties' outputs
//! must equal the plain RFC 8032 signature of the same key and message (aws-lc's, an
//! implementation independent of the circuit) and verify with aws-lc; a mismatch is a
//! failing check, which fails the run.
//!
//! Records: the seed's stage table (`Compile | Init | OT Init | Peer Inputs | Garble |
//! Result`, time, % and bytes) with the theoretical minimum computed the seed's way from
//! this run's own measurements (gates × isolated ns per gate + bytes ÷ loopback bandwidth +
//! setup stages), the per-gate table, peak RSS of both parties and bytes on the wire, the
//! published and peer figures beside ours ([`analysis`]), the checks, and the cost: the
//! plain signature in one process against the two-party one.

pub mod analysis;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use garble::channel::{Channel, ChannelError, Deadline, TcpChannel};
use garble::circuit::bits_from_bytes;
use garble::ed25519::{Ed25519Sign, KEY_BYTES, Variant};
use garble::generator::{self, Generator};
use garble::hash::{Backend as HashBackend, GcHash};
use garble::microbench;
use garble::scheme::Scheme;
use garble::session::{SessionOptions, SessionReport, Stage};
use garble::{GateKind, stream};
use measure::params;
use measure::record::{Body, Value};
use measure::sampler::Samples;
use measure::stages::Stages;

use crate::gc2pc::{Token, spec_fields, spec_text};
use analysis::{Counts, GateCosts, Ours, SignatureRun};
use harness::hex::{hex, unhex};
use harness::{At, Context, Preset, Scenario, ScenarioError};

const NAME: &str = "ed25519-2pc";
/// Environment variable that makes this binary the evaluator of one signature (its value
/// says that the spec, with the evaluator's key share, comes on stdin).
pub const EVALUATOR_ENV: &str = "CCBENCH_ED25519_EVALUATOR";
/// How long either party waits for the other's next bytes.
const PEER_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one signature may take, from the evaluator's start to its output: generous (a
/// signature takes seconds to a few minutes), and out of reach of a peer that trickles
/// bytes, each within [`PEER_TIMEOUT`].
const SESSION_LIMIT: Duration = Duration::from_secs(60 * 60);

/// The `ed25519-2pc` scenario.
pub struct Ed25519Pc;

/// Sizes of one run, by preset.
struct Plan {
    /// Signatures (two-party sessions).
    signatures: usize,
    /// Gates per per-gate micro-benchmark run.
    gates: usize,
    /// Runs of each micro-benchmark.
    runs: usize,
    /// Bytes sent to measure loopback bandwidth.
    loopback_bytes: usize,
    /// Pairs of signatures, one under each garbling hash, when `--hash` chose none (over
    /// loopback: the price of the multi-instance bound, `analysis::hash_table`).
    hash_pairs: usize,
}

impl Plan {
    fn of(preset: Preset) -> Plan {
        match preset {
            Preset::Quick => Plan {
                signatures: 1,
                gates: 1 << 20,
                runs: 5,
                loopback_bytes: 256 << 20,
                hash_pairs: 2,
            },
            Preset::Full => Plan {
                signatures: 5,
                gates: 1 << 22,
                runs: 11,
                loopback_bytes: 1 << 30,
                hash_pairs: 5,
            },
        }
    }
}

/// The key and message of a benchmark signature: a fixed RFC 8032-style key (seed and its
/// public key), split into two XOR shares with a mask, and a fixed 64-byte message.
pub struct SignInputs {
    /// `seed || A`.
    pub key: [u8; 64],
    /// The garbler's share.
    pub garbler_share: [u8; 64],
    /// The evaluator's share.
    pub evaluator_share: [u8; 64],
    /// The message.
    pub message: Vec<u8>,
}

impl SignInputs {
    /// Inputs for signature number `i` (the mask differs per signature).
    pub fn new(i: usize) -> SignInputs {
        let seed: [u8; 32] = core::array::from_fn(|k| (k as u8).wrapping_mul(29).wrapping_add(3));
        let mut key = [0u8; 64];
        key[..32].copy_from_slice(&seed);
        key[32..].copy_from_slice(&garble::ed25519::public_key(&seed));
        let evaluator_share: [u8; 64] =
            core::array::from_fn(|k| (k as u8).wrapping_mul(83).wrapping_add(i as u8 * 17 + 1));
        let garbler_share: [u8; 64] = core::array::from_fn(|k| key[k] ^ evaluator_share[k]);
        let message = (0..64u8).map(|k| k.wrapping_mul(7) ^ 0x5a).collect();
        SignInputs {
            key,
            garbler_share,
            evaluator_share,
            message,
        }
    }
}

/// Peak resident memory of this process (VmHWM), bytes; `None` where `/proc` has no such
/// line.
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The plain RFC 8032 signature of `inputs` by aws-lc, in one process with the whole key,
/// and the public key aws-lc derives from the seed: `(public key, signature)`.
pub fn plain_signature(inputs: &SignInputs) -> Result<([u8; 32], [u8; 64]), ScenarioError> {
    let step = "plain signature (aws-lc)";
    let kp = Ed25519KeyPair::from_seed_unchecked(&inputs.key[..32])
        .map_err(|e| ScenarioError::step(step, e))?;
    let (pk, sig) = (kp.public_key().as_ref(), kp.sign(&inputs.message));
    let public_key = pk
        .try_into()
        .map_err(|_| ScenarioError::step(step, "a public key that is not 32 bytes"))?;
    let signature = sig
        .as_ref()
        .try_into()
        .map_err(|_| ScenarioError::step(step, "a signature that is not 64 bytes"))?;
    Ok((public_key, signature))
}

/// Resets this process's peak resident memory to its current size (Linux: `5` to
/// `/proc/self/clear_refs`), so that [`peak_rss`] measures what follows; best effort.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

// ---------------------------------------------------------------------------------------
// The evaluator process.

/// What the evaluator child is told, on its stdin (see [`crate::gc2pc`]'s evaluator). Its
/// key share is cleared when dropped; `Debug` shows none of it.
struct EvaluatorSpec {
    addr: String,
    msg_len: usize,
    variant: Variant,
    share: Vec<u8>,
    token: Token,
    hash: GcHash,
    /// The garbling scheme: the evaluator's must be the garbler's (the session header
    /// carries it, and a different one is refused on both sides).
    scheme: Scheme,
}

impl std::fmt::Debug for EvaluatorSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvaluatorSpec")
            .field("addr", &self.addr)
            .field("msg_len", &self.msg_len)
            .field("variant", &self.variant)
            .field("hash", &self.hash)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl Drop for EvaluatorSpec {
    fn drop(&mut self) {
        self.share.fill(0);
        std::hint::black_box(&self.share);
    }
}

impl EvaluatorSpec {
    fn encode(&self) -> String {
        spec_text(&[
            &self.addr,
            &self.msg_len.to_string(),
            self.variant.circuit_name(),
            &hex(&self.share),
            &self.token.hex(),
            self.hash.name(),
            self.scheme.name(),
        ])
    }

    fn decode(s: &str) -> Result<EvaluatorSpec, String> {
        let [addr, msg_len, variant, share, token, hash, scheme] = spec_fields(EVALUATOR_ENV, s)?;
        let msg_len = msg_len
            .parse()
            .map_err(|_| format!("{EVALUATOR_ENV} spec: bad message length"))?;
        let variant = parse_variant(variant)
            .ok_or_else(|| format!("{EVALUATOR_ENV} spec: unknown circuit variant"))?;
        let mut share =
            unhex(share).map_err(|_| format!("{EVALUATOR_ENV} spec: the key share is not hex"))?;
        if share.len() != KEY_BYTES {
            let n = share.len();
            share.fill(0);
            return Err(format!(
                "{EVALUATOR_ENV} spec: a key share is {KEY_BYTES} bytes, got {n}"
            ));
        }
        Ok(EvaluatorSpec {
            addr: addr.to_owned(),
            msg_len,
            variant,
            share,
            token: Token::from_hex(token)?,
            hash: hash.parse().map_err(|e| format!("{EVALUATOR_ENV}: {e}"))?,
            scheme: scheme
                .parse()
                .map_err(|e| format!("{EVALUATOR_ENV}: {e}"))?,
        })
    }
}

/// What the evaluator reports back on its stdout: `ok <signature hex> <peak RSS bytes>
/// <preparation ns>`, with `-` for a peak it could not read. The garbler judges the
/// signature.
///
/// The evaluator prepares ([`Ed25519Sign::prepare`]: the public tables and the compiled
/// field sub-circuits) before it connects, as the garbler has before its first signature:
/// a signature's time is then the same work on both sides, and this process's start is
/// reported apart, not hidden in the garbler's Init stage.
fn evaluate(spec: &str) -> Result<String, String> {
    let deadline = Deadline::after(SESSION_LIMIT);
    let spec = EvaluatorSpec::decode(spec)?;
    let c = Ed25519Sign {
        msg_len: spec.msg_len,
        variant: spec.variant,
    };
    let t = Instant::now();
    Ed25519Sign::prepare();
    let prepare_ns = t.elapsed().as_nanos();
    let mut input = spec.share.clone();
    input.extend(blinding(c.variant).map_err(|e| e.to_string())?);
    let bits = bits_from_bytes(&input, c.evaluator_input_bits());
    input.fill(0);
    let mut ch = TcpChannel::connect(&spec.addr, PEER_TIMEOUT).map_err(|e| e.to_string())?;
    ch.set_deadline(Some(deadline));
    spec.token.present(&mut ch)?;
    let opts = SessionOptions {
        deadline: Some(deadline),
        hash: spec.hash,
        scheme: spec.scheme,
        ..SessionOptions::default()
    };
    let out = stream::run_evaluator(&mut ch, &c, &bits, &opts).map_err(|e| e.to_string())?;
    let bytes = out.output_bytes().into_iter().next().unwrap_or_default();
    let (sig, _) = split_output(&bytes)?;
    let rss = peak_rss().map_or("-".to_owned(), |b| b.to_string());
    let start = garble::trace::encode(&out.report.start);
    let stages = crate::gc2pc::encode_stages(&out.report);
    Ok(format!(
        "ok {} {rss} {prepare_ns} {start} {stages}",
        hex(&sig)
    ))
}

/// The circuit variant of a name: `ed25519-sign` or `ed25519-sign-reveal`.
fn parse_variant(name: &str) -> Option<Variant> {
    [Variant::OnePass, Variant::Reveal]
        .into_iter()
        .find(|v| v.circuit_name() == name)
}

/// The variant of this run (`--variant`): `reveal` (the default) or `one-pass`.
fn run_variant(ctx: &Context<'_>) -> Result<Variant, ScenarioError> {
    match ctx.options.ed25519_variant.as_deref() {
        None | Some("reveal") => Ok(Variant::Reveal),
        Some("one-pass") => Ok(Variant::OnePass),
        Some(_) => Err(ScenarioError::step(
            "--variant",
            "the Ed25519 circuit variant is reveal or one-pass",
        )),
    }
}

/// A party's blinding share for `variant`: fresh random bytes for the reveal circuit,
/// nothing for the one-pass one.
fn blinding(variant: Variant) -> Result<Vec<u8>, garble::hash::RandomnessError> {
    match variant {
        Variant::OnePass => Ok(Vec::new()),
        Variant::Reveal => Ok(garble::ed25519::blinding_share()?.to_vec()),
    }
}

/// What the evaluator process reported ([`evaluate`]).
#[derive(Debug, PartialEq, Eq)]
struct EvaluatorReport {
    signature: [u8; 64],
    /// Peak RSS, bytes (`None`: unknown).
    rss: Option<u64>,
    /// Its preparation before it connected ([`Ed25519Sign::prepare`]).
    prepare: Duration,
    /// Its session's start trace ([`SessionReport::start`]).
    start: garble::trace::StartTrace,
    /// Its session's stages.
    stages: Vec<crate::gc2pc::PartyStage>,
}

/// The evaluator's report line: `ok SIGNATURE RSS PREPARE_NS START STAGES` (`-` for an
/// unknown peak; START as `garble::trace::encode` writes it, STAGES as
/// `gc2pc::encode_stages`).
fn parse_report(stdout: &str) -> Result<EvaluatorReport, String> {
    let mut words = stdout.split_whitespace();
    let (ok, sig, rss, prep, start, stages) = (
        words.next(),
        words.next(),
        words.next(),
        words.next(),
        words.next(),
        words.next(),
    );
    let bad = || {
        format!(
            "the evaluator's report {:?} is not `ok SIGNATURE RSS PREPARE_NS START STAGES`",
            stdout.trim()
        )
    };
    if ok != Some("ok") || words.next().is_some() {
        return Err(bad());
    }
    let signature = unhex(sig.ok_or_else(bad)?)?.try_into().map_err(|_| bad())?;
    let rss = match rss.ok_or_else(bad)? {
        "-" => None,
        r => Some(r.parse().map_err(|_| bad())?),
    };
    let prepare = Duration::from_nanos(prep.ok_or_else(bad)?.parse().map_err(|_| bad())?);
    let start = garble::trace::decode(start.ok_or_else(bad)?)
        .map_err(|e| format!("the evaluator's report: {e}"))?;
    let stages = crate::gc2pc::decode_stages(stages.ok_or_else(bad)?).ok_or_else(bad)?;
    Ok(EvaluatorReport {
        signature,
        rss,
        prepare,
        start,
        stages,
    })
}

fn split_output(bytes: &[u8]) -> Result<([u8; 64], [u8; 32]), String> {
    if bytes.len() != garble::ed25519::OUTPUT_BYTES {
        return Err(format!("{} output bytes, expected 96", bytes.len()));
    }
    let mut sig = [0u8; 64];
    sig.copy_from_slice(&bytes[..64]);
    let mut pk = [0u8; 32];
    pk.copy_from_slice(&bytes[64..]);
    Ok((sig, pk))
}

/// Becomes the evaluator of one signature and exits when this process was started as one;
/// returns at once otherwise (see [`crate::run_if_child`]).
pub fn run_if_evaluator() {
    crate::gc2pc::run_child_if(EVALUATOR_ENV, "ed25519-2pc evaluator", evaluate);
}

// ---------------------------------------------------------------------------------------
// The garbler side.

/// One signature: what both parties measured and output.
pub struct Signed {
    /// The garbler's session report.
    pub report: SessionReport,
    /// Both parties' signatures beside the plain one, for [`analysis::signature_check`].
    pub run: SignatureRun,
    /// The evaluator process's peak RSS, bytes; `None` where it could not read it.
    pub evaluator_rss: Option<u64>,
    /// The evaluator process's preparation before the session ([`Ed25519Sign::prepare`]).
    pub evaluator_prepare: Duration,
    /// The evaluator's session start trace ([`SessionReport::start`]).
    pub evaluator_start: garble::trace::StartTrace,
    /// The evaluator's stages, as its process reported them.
    pub evaluator_stages: Vec<crate::gc2pc::PartyStage>,
}

/// One two-party signature over loopback TCP: this process garbles, a child process (this
/// binary, which must call [`crate::run_if_child`] first) evaluates. Fails when the session
/// does, or when a party's output is malformed; whether the signatures are right is for
/// [`analysis::signature_check`] to judge from [`Signed::run`]. Both parties garble with
/// `hash` and `scheme`.
pub fn two_party(
    c: &Ed25519Sign,
    inputs: &SignInputs,
    (hash, scheme): (GcHash, Scheme),
) -> Result<Signed, ScenarioError> {
    two_party_over(c, inputs, (hash, scheme), &garble::link::Net::loopback())
}

/// [`two_party`] over the link `net` (a user-space link between the parties for the
/// session; none for loopback).
pub fn two_party_over(
    c: &Ed25519Sign,
    inputs: &SignInputs,
    (hash, scheme): (GcHash, Scheme),
    net: &garble::link::Net,
) -> Result<Signed, ScenarioError> {
    let step = "two-party signature";
    let (public_key, plain) = plain_signature(inputs)?;
    // Each party prepares before the session (the evaluator in its process, see
    // [`evaluate`]): a no-op after this process's first signature.
    Ed25519Sign::prepare();
    let spec = |addr: SocketAddr, token: &Token| {
        EvaluatorSpec {
            addr: addr.to_string(),
            msg_len: c.msg_len,
            variant: c.variant,
            share: inputs.evaluator_share.to_vec(),
            token: token.clone(),
            hash,
            scheme,
        }
        .encode()
    };
    let limits = (PEER_TIMEOUT, SESSION_LIMIT);
    let share = blinding(c.variant).map_err(|e| ScenarioError::step(step, e))?;
    let (out, stdout) =
        crate::gc2pc::with_evaluator(step, EVALUATOR_ENV, limits, net, spec, |ch| {
            let mut input = inputs.garbler_share.to_vec();
            input.extend_from_slice(&inputs.message);
            input.extend_from_slice(&share);
            let bits = bits_from_bytes(&input, c.garbler_input_bits());
            let opts = SessionOptions {
                hash,
                scheme,
                ..SessionOptions::default()
            };
            stream::run_garbler(ch, c, &bits, &opts).map_err(|e| e.to_string())
        })?;
    let bytes = out.output_bytes().into_iter().next().unwrap_or_default();
    let (garbler, garbler_public_key) =
        split_output(&bytes).map_err(|e| ScenarioError::step(step, e))?;
    let er = parse_report(&stdout).map_err(|e| ScenarioError::step(step, e))?;
    Ok(Signed {
        report: out.report,
        run: SignatureRun {
            public_key,
            message: inputs.message.clone(),
            plain,
            garbler,
            garbler_public_key,
            evaluator: er.signature,
        },
        evaluator_rss: er.rss,
        evaluator_prepare: er.prepare,
        evaluator_start: er.start,
        evaluator_stages: er.stages,
    })
}

/// Loopback bandwidth through the channel the sessions use: `bytes` sent from one thread
/// to another in 1 MiB writes; bytes per second.
pub fn loopback_bandwidth(bytes: usize) -> Result<f64, ScenarioError> {
    let step = "loopback bandwidth";
    let listener = TcpListener::bind("127.0.0.1:0").at(step)?;
    let addr = listener.local_addr().at(step)?.to_string();
    let chunk = vec![0x5au8; 1 << 20];
    let n = bytes.div_ceil(chunk.len());
    std::thread::scope(|s| {
        let rx = s.spawn(|| -> Result<(), ChannelError> {
            let mut ch = TcpChannel::accept(&listener, PEER_TIMEOUT)?;
            let mut buf = vec![0u8; 1 << 20];
            for _ in 0..n {
                ch.recv(&mut buf)?;
            }
            ch.send(&[1])?;
            ch.flush()
        });
        let mut ch = TcpChannel::connect(&addr, PEER_TIMEOUT).at(step)?;
        let t = Instant::now();
        for _ in 0..n {
            ch.send(&chunk).at(step)?;
        }
        ch.flush().at(step)?;
        let mut ack = [0u8; 1];
        ch.recv(&mut ack).at(step)?;
        let dt = t.elapsed().as_secs_f64();
        rx.join()
            .map_err(|_| ScenarioError::step(step, "the receiver panicked"))?
            .at(step)?;
        Ok((n * chunk.len()) as f64 / dt.max(1e-9))
    })
}

const MICRO_KINDS: [GateKind; 3] = [GateKind::And, GateKind::Xor, GateKind::Inv];

/// The isolated per-gate costs under the sessions' hash and scheme (the AND gate's differ
/// between the schemes; XOR and INV are the same code in both).
fn gate_costs(
    ctx: &Context<'_>,
    plan: &Plan,
    (gc_hash, scheme): (GcHash, Scheme),
    lookups: &[generator::Lookup],
) -> Result<GateCosts, ScenarioError> {
    let mut costs = GateCosts::default();
    let hash = HashBackend::detect();
    for (i, &kind) in MICRO_KINDS.iter().enumerate() {
        ctx.check_cancel()?;
        let mut garble = Vec::with_capacity(plan.runs);
        let mut evaluate = Vec::with_capacity(plan.runs);
        for _ in 0..plan.runs {
            let t = microbench::gate_timing_with(kind, plan.gates, hash, gc_hash, scheme)
                .at("gate timing")?;
            garble.push(t.garble_ns());
            evaluate.push(t.evaluate_ns());
        }
        for (op, v) in [("garble", garble), ("evaluate", evaluate)] {
            let s = Samples {
                iters_per_sample: plan.gates as u64,
                per_iter_ns: v,
                overhead_ns: None,
            };
            let p = params! {"gate" => kind.name(), "gc_hash" => gc_hash.name()};
            let median = ctx.emit_samples(NAME, "gc", p, &format!("{op}-gate"), s, None)?;
            match op {
                "garble" => costs.garble[i] = median,
                _ => costs.evaluate[i] = median,
            }
        }
    }
    costs.lookups_ns = lookup_cost(ctx, plan, lookups)?;
    Ok(costs)
}

/// The circuit's lookups in public tables, one party, ns: the largest lookup measured
/// alone, and every lookup priced in proportion to its items times its outputs (the
/// subset tables grow with the items, the XORs with items times outputs).
fn lookup_cost(
    ctx: &Context<'_>,
    plan: &Plan,
    lookups: &[generator::Lookup],
) -> Result<f64, ScenarioError> {
    let size = |l: &generator::Lookup| (l.items * l.outputs) as f64;
    let Some(big) = lookups.iter().max_by(|a, b| size(a).total_cmp(&size(b))) else {
        return Ok(0.0);
    };
    ctx.check_cancel()?;
    const REPS: usize = 4;
    let v = (0..plan.runs)
        .map(|_| microbench::lookup_timing(big.items, big.outputs, REPS).as_nanos() as f64)
        .collect();
    let s = Samples {
        iters_per_sample: REPS as u64,
        per_iter_ns: v,
        overhead_ns: None,
    };
    let p = params! {"items" => big.items as u64, "outputs" => big.outputs as u64};
    let median = ctx.emit_samples(NAME, "gc", p, "lookup", s, None)?;
    Ok(lookups.iter().map(|l| median * size(l) / size(big)).sum())
}

/// A stage's name in the signature's breakdown: the Load stage generates and counts the
/// circuit (`Compile`).
fn stage_name(s: Stage) -> &'static str {
    if s == Stage::Load {
        "Compile"
    } else {
        s.name()
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

impl Scenario for Ed25519Pc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Ed25519 signing (RFC 8032) on an XOR-shared key in garbled-circuit 2PC, two processes over loopback; against mpc's published 267 M-AND run"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        // The sessions' garbling scheme (`--scheme`; half-gates by default): the signature
        // circuit is generated as it is garbled (garble::stream), under either scheme.
        let (scheme, _) = crate::gc2pc::session_scheme(ctx)?;
        let net = crate::gc2pc::net::open_net(ctx)?;
        // Every record of a run over a link says which link, and every record says which
        // scheme (`gc_scheme`, as gc-2pc's records do).
        let mut stamp = crate::gc2pc::net::link_params(&net);
        stamp.insert("gc_scheme".into(), scheme.name().into());
        let ctx = &ctx.with_params(stamp);
        let model = match crate::gc2pc::net::link_table(&net)? {
            Some((t, model)) => {
                ctx.emit(NAME, "2pc", params! {}, Body::Table(t))?;
                model
            }
            None => crate::gc2pc::net::Model::new(net.profile().clone(), Duration::ZERO),
        };
        let plan = Plan::of(ctx.options.preset);
        // The sessions' garbling hash (`--hash`; MITCCRH by default).
        let (hash, hash_chosen) = crate::gc2pc::session_hash(ctx)?;
        // Without a choice, and over loopback, both hashes in alternated pairs as well.
        let hash_pairs = if hash_chosen || !net.is_loopback() {
            0
        } else {
            plan.hash_pairs
        };
        // Over a link, each signature has a twin over loopback (the predictions' compute).
        let sessions = plan.signatures * if net.is_loopback() { 1 } else { 2 } + 2 * hash_pairs;
        ctx.progress()
            .begin(NAME, (sessions + MICRO_KINDS.len() + 2) as u64);
        let c = Ed25519Sign {
            variant: run_variant(ctx)?,
            ..Ed25519Sign::PUBLISHED
        };
        let t = Instant::now();
        Ed25519Sign::prepare();
        let garbler_prepare = t.elapsed();
        let gs = generator::stats(&c);
        let st = &gs.stats;
        let counts = Counts {
            and: st.count(GateKind::And),
            xor: st.count(GateKind::Xor),
            inv: st.count(GateKind::Inv),
            copies: st.count(GateKind::Eq) + st.count(GateKind::Eqw),
            lookups: gs.lookups.len() as u64,
            lookup_xor: gs.lookups.iter().map(|l| l.xor_gates).sum(),
            lookup_inv: gs.lookups.iter().map(|l| l.inv_gates).sum(),
        };
        let p = || {
            params! {
                "circuit" => c.name(),
                "message_bytes" => c.msg_len as u64,
                "and_gates" => counts.and,
                "gates" => counts.gates(),
                "and_depth" => u64::from(st.and_depth),
                "gc_hash" => hash.name()
            }
        };

        let costs = gate_costs(ctx, &plan, (hash, scheme), &gs.lookups)?;
        ctx.progress().advance(MICRO_KINDS.len() as u64);
        ctx.check_cancel()?;
        let bandwidth = loopback_bandwidth(plan.loopback_bytes)?;
        ctx.emit(
            NAME,
            "2pc",
            params! {"bytes" => plan.loopback_bytes as u64},
            Body::Table(measure::record::Table {
                name: "loopback".into(),
                title: "Loopback TCP bandwidth (one stream, 1 MiB writes)".into(),
                columns: vec!["bytes".into(), "GB/s".into()],
                rows: vec![vec![
                    Value::from(plan.loopback_bytes as u64),
                    Value::from(bandwidth / 1e9),
                ]],
                source: None,
                notes: vec![],
            }),
        )?;
        ctx.progress().advance(1);

        // The baseline: the same signature in the clear, the whole key in one process.
        ctx.check_cancel()?;
        let inputs = SignInputs::new(0);
        let kp = Ed25519KeyPair::from_seed_unchecked(&inputs.key[..32])
            .map_err(|e| ScenarioError::step("plain signature (aws-lc)", e))?;
        let s = measure::sampler::sample(&ctx.options.sampler(), || kp.sign(&inputs.message));
        let plain_m = ctx.emit_measurement(NAME, "native", p(), "sign", s, None)?;
        ctx.progress().advance(1);

        let mut stages = Stages::new();
        // The evaluator's, as its process reported them: who waited for whom.
        let mut estages = Stages::new();
        let mut over = Vec::with_capacity(plan.signatures);
        let mut totals = Vec::with_capacity(plan.signatures);
        let mut garbles = Vec::with_capacity(plan.signatures);
        let mut setup = Vec::with_capacity(plan.signatures);
        let mut runs = Vec::with_capacity(plan.signatures);
        // The garbler's socket counters, (sent, received), per signature.
        let mut wire = Vec::with_capacity(plan.signatures);
        let mut bytes = 0u64;
        let mut rss_e = Vec::with_capacity(plan.signatures);
        let mut prepare_e = Vec::with_capacity(plan.signatures);
        // The garbler's peak from here on: the signatures, not the micro-benchmarks above.
        let reset = reset_peak_rss();
        // Over a link, the same signatures over loopback, alternated with them: their median
        // stages are the compute of the predictions. One loopback signature was too few: its
        // millisecond stages (base OTs on both sides, the evaluator's start) move 2-30x from
        // one session to the next, and one unlucky session moved every prediction.
        let (mut base, mut base_e) = (Vec::new(), Vec::new());
        for i in 0..plan.signatures {
            ctx.check_cancel()?;
            let inputs = SignInputs::new(i);
            if !net.is_loopback() {
                let twin = two_party(&c, &inputs, (hash, scheme))?;
                base.push(twin.report);
                base_e.push(twin.evaluator_start);
                ctx.progress().advance(1);
                ctx.check_cancel()?;
            }
            let signed = two_party_over(&c, &inputs, (hash, scheme), &net)?;
            let r = &signed.report;
            for s in Stage::ALL {
                let sr = r.stage(s);
                let name = stage_name(s);
                stages.add(name, sr.time, sr.bytes_received, sr.bytes_sent);
                stages.add_round_trips(name, sr.round_trips);
                if let Some(c) = sr.cpu {
                    stages.add_cpu(name, c);
                }
            }
            stages.end_run();
            crate::gc2pc::add_party_stages(&mut estages, &signed.evaluator_stages, stage_name);
            over.push((signed.report.clone(), signed.evaluator_start));
            totals.push(r.total.as_nanos() as f64);
            garbles.push(r.stage(Stage::Garble).time.as_nanos() as f64);
            setup.push(
                [Stage::Load, Stage::Init, Stage::OtInit, Stage::PeerInputs]
                    .iter()
                    .map(|&s| r.stage(s).time.as_nanos() as f64)
                    .sum::<f64>(),
            );
            // On the wire: the socket's counters, both directions.
            wire.push((r.wire_bytes_sent, r.wire_bytes_received));
            bytes = r.wire_bytes_sent + r.wire_bytes_received;
            rss_e.push(signed.evaluator_rss);
            prepare_e.push(signed.evaluator_prepare);
            runs.push(signed.run);
            ctx.progress().advance(1);
        }
        let rss_g = peak_rss();
        // The same signature under each hash, back to back, the order alternating; each
        // signature and its bytes on the wire checked as the others are.
        let mut pairs = Vec::with_capacity(hash_pairs);
        for i in 0..hash_pairs {
            let inputs = SignInputs::new(i);
            let mitccrh_first = i % 2 == 0;
            let sign = |h: GcHash| -> Result<Signed, ScenarioError> {
                ctx.check_cancel()?;
                let r = two_party(&c, &inputs, (h, scheme))?;
                ctx.progress().advance(1);
                Ok(r)
            };
            let (m, f) = if mitccrh_first {
                let m = sign(GcHash::Mitccrh)?;
                (m, sign(GcHash::FixedKey)?)
            } else {
                let f = sign(GcHash::FixedKey)?;
                (sign(GcHash::Mitccrh)?, f)
            };
            pairs.push(analysis::HashPair {
                mitccrh_s: m.report.total.as_secs_f64(),
                fixed_key_s: f.report.total.as_secs_f64(),
                mitccrh_first,
            });
            for s in [m, f] {
                wire.push((s.report.wire_bytes_sent, s.report.wire_bytes_received));
                runs.push(s.run);
            }
        }
        // Over a link: the signatures over loopback give each stage's compute (the median),
        // and each stage of the signatures over the link its predicted time.
        // Each signature's predicted time over the link (none over loopback).
        let mut predicted = Vec::new();
        if !net.is_loopback() {
            let mut bst = Stages::new();
            for b in &base {
                for s in Stage::ALL {
                    let sr = b.stage(s);
                    bst.add(stage_name(s), sr.time, sr.bytes_received, sr.bytes_sent);
                    bst.add_round_trips(stage_name(s), sr.round_trips);
                }
                bst.end_run();
            }
            let mut lp = p();
            lp.extend(crate::gc2pc::net::net_params(
                &garble::link::Profile::loopback(),
            ));
            let what = format!(
                "2pc {} (garbler) over loopback (the compute of the predictions)",
                c.name()
            );
            ctx.emit(
                NAME,
                "2pc",
                lp,
                Body::Stages(bst.finish(&what, Some(base.iter().map(|b| b.total).sum()), None)),
            )?;
            let compute = crate::gc2pc::net::Compute::with_evaluator(&base, &base_e)
                .ok_or_else(|| ScenarioError::step("loopback baseline", "no signature"))?;
            for (r, e) in &over {
                let total = crate::gc2pc::net::add_predictions(
                    &mut stages,
                    stage_name,
                    &model,
                    (r, e),
                    &compute,
                );
                predicted.push(total.as_secs_f64());
            }
        }
        // Unknown when any run could not read it.
        let rss_e = rss_e
            .into_iter()
            .collect::<Option<Vec<u64>>>()
            .and_then(|v| v.into_iter().max());
        let total_ns: f64 = totals.iter().sum();
        let min_ns =
            analysis::theoretical_minimum_ns(&counts, &costs, bytes, bandwidth, median(&setup))
                * plan.signatures as f64;
        let s = Samples {
            iters_per_sample: 1,
            per_iter_ns: totals.clone(),
            overhead_ns: None,
        };
        let mut mp = p();
        mp.insert("bytes_on_wire".into(), bytes.into());
        if let Some(g) = rss_g {
            mp.insert("peak_rss_garbler_bytes".into(), g.into());
        }
        if let Some(e) = rss_e {
            mp.insert("peak_rss_evaluator_bytes".into(), e.into());
        }
        mp.insert("peak_rss_garbler_reset".into(), reset.into());
        let sig_m = ctx.emit_measurement(NAME, "2pc", mp.clone(), "signature", s, Some(bytes))?;
        let med = sig_m.summary.median_ns;
        ctx.emit_cost(
            NAME,
            &format!("Ed25519 signature (RFC 8032), {}-byte message", c.msg_len),
            "signature",
            (
                "plain, whole key in one process (aws-lc)",
                "native",
                &plain_m,
            ),
            &[(
                &format!("2PC on XOR-shared key, two processes over {net} (OT included)"),
                "2pc",
                &sig_m,
            )],
        )?;
        let breakdown = stages.finish(
            &format!("2pc {} (garbler)", c.name()),
            Some(Duration::from_nanos(total_ns as u64)),
            Some(Duration::from_nanos(min_ns as u64)),
        );
        // Over a link, how close each stage came to its prediction (issue 24's 15%).
        let stage_check = (!predicted.is_empty()).then(|| {
            crate::gc2pc::analysis::prediction_check(
                std::slice::from_ref(&breakdown),
                &net.to_string(),
            )
        });
        ctx.emit(NAME, "2pc", mp.clone(), Body::Stages(breakdown))?;
        let evaluator = estages.finish(&format!("2pc {} (evaluator)", c.name()), None, None);
        ctx.emit(NAME, "2pc", mp.clone(), Body::Stages(evaluator))?;
        ctx.emit(
            NAME,
            "2pc",
            p(),
            Body::Table(analysis::gate_table(&counts, &costs)),
        )?;
        ctx.emit(
            NAME,
            "2pc",
            p(),
            Body::Table(analysis::prepare_table(garbler_prepare, &prepare_e)),
        )?;
        let ours = Ours {
            counts,
            total_s: med / 1e9,
            garble_s: median(&garbles) / 1e9,
            bytes,
            rss_garbler: rss_g,
            rss_evaluator: rss_e,
        };
        ctx.emit(
            NAME,
            "all",
            p(),
            Body::Table(analysis::comparison_table(&ours)),
        )?;
        if hash_pairs > 0 {
            let mut hp = p();
            hp.remove("gc_hash");
            ctx.emit(
                NAME,
                "2pc",
                hp.clone(),
                Body::Table(analysis::hash_table(&pairs)),
            )?;
            ctx.emit(
                NAME,
                "2pc",
                hp,
                Body::Check(analysis::hash_cost_check(&pairs)),
            )?;
        }
        for check in [
            analysis::signature_check(&runs),
            analysis::wire_check(stream::expected_wire_bytes(&c, &gs, scheme), &wire),
            analysis::rss_check(rss_g, rss_e),
            if predicted.is_empty() {
                analysis::time_check(ours.total_s)
            } else {
                analysis::link_time_check(ours.total_s, median(&predicted), &net.to_string())
            },
        ]
        .into_iter()
        .chain(stage_check)
        {
            ctx.emit(NAME, "2pc", p(), Body::Check(check))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluator_spec_round_trips_and_rejects_bad_fields() {
        let token = Token::new().unwrap();
        let s = EvaluatorSpec {
            addr: "127.0.0.1:4000".into(),
            msg_len: 64,
            variant: Variant::Reveal,
            share: vec![7; 64],
            token: token.clone(),
            hash: GcHash::FixedKey,
            scheme: Scheme::ThreeHalves,
        };
        let d = EvaluatorSpec::decode(&s.encode()).unwrap();
        assert_eq!(
            (
                d.addr.as_str(),
                d.msg_len,
                d.variant,
                &d.share,
                d.hash,
                d.scheme
            ),
            (
                "127.0.0.1:4000",
                64,
                Variant::Reveal,
                &vec![7; 64],
                GcHash::FixedKey,
                Scheme::ThreeHalves
            )
        );
        // Both schemes round-trip.
        for scheme in Scheme::ALL {
            let s = EvaluatorSpec {
                addr: "a".into(),
                msg_len: 0,
                variant: Variant::OnePass,
                share: vec![1; 64],
                token: token.clone(),
                hash: GcHash::Mitccrh,
                scheme,
            };
            assert_eq!(EvaluatorSpec::decode(&s.encode()).unwrap().scheme, scheme);
        }
        assert_eq!(d.token.hex(), token.hex());
        // Debug shows neither the share nor the token.
        assert!(!format!("{d:?}").contains("0707"), "{d:?}");
        let t = token.hex();
        let share = "07".repeat(64);
        let v = "ed25519-sign";
        let ok = |rest: &str| format!("v3;a;64;{v};{share};{t};{rest}");
        assert!(EvaluatorSpec::decode(&ok("mitccrh;three-halves")).is_ok());
        assert!(EvaluatorSpec::decode(&ok("fixed-key;half-gates")).is_ok());
        // Another version, a bad length, a field missing, an unknown hash, scheme or variant.
        for bad in [
            format!("v2;a;64;{v};{share};{t};mitccrh;half-gates"),
            format!("v3;a;x;{v};{share};{t};mitccrh;half-gates"),
            format!("v3;a;64;{v};{share};{t};mitccrh"),
            format!("v3;a;64;{v};{share};{t}"),
            format!("v3;a;64;{v};{share};{t};aes;half-gates"),
            format!("v3;a;64;x;{share};{t};mitccrh;half-gates"),
        ] {
            assert!(EvaluatorSpec::decode(&bad).is_err(), "{bad}");
        }
        for scheme in ["halves", "three_halves", "Half-Gates", ""] {
            let e = EvaluatorSpec::decode(&ok(&format!("mitccrh;{scheme}"))).unwrap_err();
            assert!(e.contains("garbling scheme"), "{scheme}: {e}");
        }
        // A share that is not 64 bytes.
        assert!(
            EvaluatorSpec::decode(&format!("v3;a;64;{v};0011;{t};mitccrh;half-gates"))
                .unwrap_err()
                .contains("64 bytes")
        );
    }

    #[test]
    fn evaluator_report_parses_and_an_unknown_peak_stays_unknown() {
        let sig = hex(&[9u8; 64]);
        let st = "5/4/0/0/0,7/-/80/80/1,1/1/2/3/1,1/1/0/0/0,1/1/0/0/0,1/1/0/0/0";
        assert_eq!(
            parse_report(&format!("ok {sig} 4096 1500 77;E:0:0:0;F:80:5:9 {st}\n")).unwrap(),
            EvaluatorReport {
                signature: [9u8; 64],
                rss: Some(4096),
                prepare: Duration::from_nanos(1500),
                start: garble::trace::decode("77;E:0:0:0;F:80:5:9").unwrap(),
                stages: crate::gc2pc::decode_stages(st).unwrap(),
            }
        );
        let r = parse_report(&format!("ok {sig} - 7 8 {st}")).unwrap();
        assert_eq!((r.rss, r.start.steps.len()), (None, 0));
        assert_eq!(r.stages[1].cpu, None);
        for bad in [
            format!("ok {sig} - 7 8"),
            format!("ok {sig} - 7 8 1/1/1/1/1"),
            format!("ok {sig} - 7 8 {st} extra"),
            format!("err {sig} 1 1 -"),
            format!("ok {sig}"),
            format!("ok {sig} 1"),
            format!("ok {sig} 1 1"),
            format!("ok {sig} x 1 -"),
            format!("ok {sig} 1 x -"),
            format!("ok {sig} 1 - -"),
            format!("ok {sig} 1 2 E:0:0"),
            format!("ok {sig} 1 2 - 3"),
            "ok 0011 1".to_owned(),
            String::new(),
        ] {
            assert!(parse_report(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn inputs_share_the_key_and_the_plain_signature_is_rfc_8032() {
        let i = SignInputs::new(2);
        for k in 0..64 {
            assert_eq!(i.garbler_share[k] ^ i.evaluator_share[k], i.key[k]);
        }
        // aws-lc's signature and public key are the circuit's reference.
        let (pk, sig) = plain_signature(&i).unwrap();
        assert_eq!(pk[..], i.key[32..]);
        assert_eq!(sig, garble::ed25519::reference_sign(&i.key, &i.message));
        assert!(garble::ed25519::verify(&pk, &i.message, &sig));
    }

    /// Linux has `/proc/self/status`: the peak is read, is at least what this test holds,
    /// and a reset brings it down to the current size.
    #[test]
    fn peak_rss_is_read_and_reset() {
        let before = peak_rss().expect("VmHWM in /proc/self/status");
        // 64 MiB touched: the peak covers it.
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let peak = peak_rss().expect("VmHWM");
        assert!(peak >= before.max(64 << 20), "{peak} < 64 MiB");
        drop(big);
        if reset_peak_rss() {
            let after = peak_rss().expect("VmHWM");
            assert!(after < peak, "the reset kept the peak: {after} >= {peak}");
        }
    }
}
