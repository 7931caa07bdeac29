//! The evaluator party: this binary re-executed as a child process that connects back over
//! loopback TCP, and the garbler's side of one two-party session with it.
//!
//! The child learns it is an evaluator from an environment variable, and everything else
//! (its input, which may be a key share, and a one-time token) from a spec on its stdin:
//! every process of the same user can read another's environment (`/proc/PID/environ`),
//! none its stdin. The child presents the token first on its connection, and the garbler
//! drops every connection that does not, so no other local process can take the
//! evaluator's place. Both sides work to a session deadline that a slow peer cannot
//! stretch.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use garble::channel::{Channel, Deadline, TcpChannel};
use garble::circuit::{bits_from_bytes_exact, bytes_from_bits};
use garble::hash::GcHash;
use garble::link::Net;
use garble::program::Program;
use garble::scheme::Scheme;
use garble::session::{
    self, EvaluatorSession, GarblerSession, SessionOptions, SessionReport, Stage,
};
use garble::trace::StartTrace;
use garble::{Circuit, Party};

use harness::hex::{hex, unhex};
use harness::{At, ScenarioError};

/// Environment variable that makes this binary the evaluator of one session; its value is
/// `stdin` (`SPEC_ON_STDIN`): the spec comes on its stdin.
pub const EVALUATOR_ENV: &str = "CCBENCH_GC_EVALUATOR";

/// The value of an evaluator's environment variable: its spec comes on its stdin.
pub(crate) const SPEC_ON_STDIN: &str = "stdin";

/// The most bytes of spec a child reads from its stdin.
const MAX_SPEC: u64 = 1 << 20;

/// How long either party waits for the other's next bytes (or its connection).
pub(super) const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a whole session may take, from the evaluator's start to its output: generous
/// (the largest session of the full preset takes seconds), and out of reach of a peer that
/// trickles bytes, each within [`PEER_TIMEOUT`].
pub(super) const SESSION_LIMIT: Duration = Duration::from_secs(30 * 60);

/// Bytes of a [`Token`].
pub(crate) const TOKEN_BYTES: usize = 32;

/// Connections kept at once while they have not presented the token (more are dropped on
/// arrival), and how long each may take to present it.
const MAX_CANDIDATES: usize = 16;
const TOKEN_WAIT: Duration = Duration::from_secs(5);

/// A one-time token from the operating system's CSPRNG: the garbler hands it to its
/// evaluator process over the pipe, and the evaluator presents it as the first bytes of its
/// connection. `Debug` shows no bytes; cleared when dropped.
#[derive(Clone)]
pub(crate) struct Token([u8; TOKEN_BYTES]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        self.0.fill(0);
        std::hint::black_box(&self.0);
    }
}

impl Token {
    /// A fresh token.
    pub(crate) fn new() -> Result<Token, String> {
        let mut t = [0u8; TOKEN_BYTES];
        aws_lc_rs::rand::fill(&mut t).map_err(|_| "no randomness for the evaluator's token")?;
        Ok(Token(t))
    }

    /// The token as a spec field.
    pub(crate) fn hex(&self) -> String {
        hex(&self.0)
    }

    /// A token from its spec field.
    pub(crate) fn from_hex(s: &str) -> Result<Token, String> {
        let mut b = unhex(s).map_err(|_| "the token is not hex".to_owned())?;
        let t = <[u8; TOKEN_BYTES]>::try_from(b.as_slice())
            .map_err(|_| format!("the token is {TOKEN_BYTES} bytes, got {}", b.len()));
        b.fill(0);
        t.map(Token)
    }

    /// Whether `got` is this token, compared in constant time.
    fn matches(&self, got: &[u8]) -> bool {
        aws_lc_rs::constant_time::verify_slices_are_equal(&self.0, got).is_ok()
    }

    /// Sends the token first on `ch`, as the evaluator does right after connecting.
    pub(crate) fn present(&self, ch: &mut TcpChannel) -> Result<(), String> {
        ch.send(&self.0).map_err(|e| e.to_string())?;
        ch.flush().map_err(|e| e.to_string())
    }
}

// ---------------------------------------------------------------------------------------
// The evaluator process.

/// An evaluator spec as one line of text: a version, then the fields, `;`-separated (no
/// field may contain `;`: addresses, names, numbers and hex).
pub(crate) fn spec_text(fields: &[&str]) -> String {
    format!("v3;{}", fields.join(";"))
}

/// The `N` fields of a spec made by [`spec_text`]; `env` names the evaluator's variable in
/// errors. Errors quote no field (a field may be a secret).
pub(crate) fn spec_fields<'a, const N: usize>(
    env: &str,
    s: &'a str,
) -> Result<[&'a str; N], String> {
    let parts: Vec<&str> = s.trim_end().split(';').collect();
    let Some((&version, fields)) = parts.split_first() else {
        return Err(format!("{env} spec: empty"));
    };
    if version != "v3" {
        return Err(format!("{env} spec: unknown version"));
    }
    <[&str; N]>::try_from(fields)
        .map_err(|_| format!("{env} spec: expected {} fields, got {}", N + 1, parts.len()))
}

/// What the evaluator child is told, on its stdin. Its input is cleared when dropped.
pub(super) struct EvaluatorSpec {
    addr: String,
    circuit: String,
    evaluations: u64,
    input: Vec<u8>,
    token: Token,
    hash: GcHash,
    scheme: Scheme,
    /// Whether the evaluator compiles its circuit before it connects
    /// ([`two_party_compiled_ahead`]) rather than in the session's Load stage.
    compiled_ahead: bool,
}

/// How an [`EvaluatorSpec`] says where its evaluator compiles the circuit.
const AHEAD: &str = "compiled-ahead";
const IN_SESSION: &str = "compiled-in-session";

impl Drop for EvaluatorSpec {
    fn drop(&mut self) {
        self.input.fill(0);
        std::hint::black_box(&self.input);
    }
}

impl EvaluatorSpec {
    fn encode(&self) -> String {
        spec_text(&[
            &self.addr,
            &self.circuit,
            &self.evaluations.to_string(),
            &hex(&self.input),
            &self.token.hex(),
            self.hash.name(),
            self.scheme.name(),
            if self.compiled_ahead {
                AHEAD
            } else {
                IN_SESSION
            },
        ])
    }

    fn decode(s: &str) -> Result<EvaluatorSpec, String> {
        let [
            addr,
            circuit,
            evaluations,
            input,
            token,
            hash,
            scheme,
            compile,
        ] = spec_fields(EVALUATOR_ENV, s)?;
        Ok(EvaluatorSpec {
            addr: addr.to_owned(),
            circuit: circuit.to_owned(),
            evaluations: evaluations
                .parse()
                .map_err(|_| format!("{EVALUATOR_ENV} spec: bad evaluation count"))?,
            input: unhex(input).map_err(|_| format!("{EVALUATOR_ENV} spec: bad input"))?,
            token: Token::from_hex(token)?,
            hash: hash
                .parse()
                .map_err(|e| format!("{EVALUATOR_ENV} spec: {e}"))?,
            scheme: scheme
                .parse()
                .map_err(|e| format!("{EVALUATOR_ENV} spec: {e}"))?,
            compiled_ahead: match compile {
                AHEAD => true,
                IN_SESSION => false,
                _ => {
                    return Err(format!(
                        "{EVALUATOR_ENV} spec: compilation neither {AHEAD} nor {IN_SESSION}"
                    ));
                }
            },
        })
    }
}

/// Runs one evaluator session from its spec; prints `ok <output hex>` on success.
pub(super) fn evaluate(spec: &str) -> Result<String, String> {
    let deadline = Deadline::after(SESSION_LIMIT);
    let spec = EvaluatorSpec::decode(spec)?;
    let c = load_circuit(&spec.circuit)?;
    let bits = bits_from_bytes_exact(Party::Evaluator, &spec.input, c.evaluator_input_bits())
        .map_err(|e| e.to_string())?;
    // Before connecting: the garbler's clock starts at the connection.
    let prog = spec.compiled_ahead.then(|| Program::compile(&c));
    let mut ch = TcpChannel::connect(&spec.addr, PEER_TIMEOUT).map_err(|e| e.to_string())?;
    ch.set_deadline(Some(deadline));
    spec.token.present(&mut ch)?;
    let n = usize::try_from(spec.evaluations).map_err(|e| e.to_string())?;
    let opts = SessionOptions {
        deadline: Some(deadline),
        hash: spec.hash,
        scheme: spec.scheme,
        ..SessionOptions::default()
    };
    let inputs = vec![bits; n];
    let out = match &prog {
        Some(p) => {
            EvaluatorSession::new(&opts).and_then(|mut s| s.run_program(&mut ch, p, &inputs))
        }
        None => session::run_evaluator(&mut ch, &c, &inputs, &opts),
    }
    .map_err(|e| e.to_string())?;
    let first = out.output_bytes().into_iter().next().unwrap_or_default();
    if out.outputs.iter().any(|o| bytes_from_bits(o) != first) {
        return Err("evaluations of the same inputs gave different outputs".into());
    }
    // The outputs, then this party's CPU time (`busy`), its start trace and its stages, for
    // the garbler's records and predictions.
    Ok(format!(
        "ok {} busy_ns={} start={} stages={}",
        hex(&first),
        out.report.busy.as_nanos(),
        garble::trace::encode(&out.report.start),
        encode_stages(&out.report),
    ))
}

/// One stage of a party as its stage tables count it (the evaluator's as its process
/// reports it to the garbler's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartyStage {
    /// The stage.
    pub stage: Stage,
    /// Wall time in it.
    pub time: Duration,
    /// CPU time in it, where measured ([`garble::session::StageReport::cpu`]).
    pub cpu: Option<Duration>,
    /// Bytes read from the socket in it.
    pub wire_received: u64,
    /// Bytes written to the socket in it.
    pub wire_sent: u64,
    /// Round trips in it.
    pub round_trips: u64,
}

/// A session's stages, in [`Stage::ALL`] order, with the bytes as the socket counted them.
pub(crate) fn party_stages(r: &SessionReport) -> Vec<PartyStage> {
    Stage::ALL
        .iter()
        .map(|&stage| {
            let st = r.stage(stage);
            PartyStage {
                stage,
                time: st.time,
                cpu: st.cpu,
                wire_received: st.wire_received,
                wire_sent: st.wire_sent,
                round_trips: st.round_trips,
            }
        })
        .collect()
}

/// A party's stages as one field: `time/cpu/received/sent/rounds` per stage of
/// [`Stage::ALL`], `,`-separated, in ns and bytes; `-` for a CPU time not measured.
pub(crate) fn encode_stages(r: &SessionReport) -> String {
    let one = |st: PartyStage| {
        let cpu = st.cpu.map_or("-".to_owned(), |c| c.as_nanos().to_string());
        let t = st.time.as_nanos();
        let (i, o, n) = (st.wire_received, st.wire_sent, st.round_trips);
        format!("{t}/{cpu}/{i}/{o}/{n}")
    };
    party_stages(r)
        .into_iter()
        .map(one)
        .collect::<Vec<_>>()
        .join(",")
}

/// The stages of [`encode_stages`]; `None` if any part is malformed.
pub(crate) fn decode_stages(s: &str) -> Option<Vec<PartyStage>> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() != Stage::ALL.len() {
        return None;
    }
    let ns = |x: &str| x.parse().ok().map(Duration::from_nanos);
    Stage::ALL
        .iter()
        .zip(parts)
        .map(|(&stage, p)| {
            let f: Vec<&str> = p.split('/').collect();
            let [t, cpu, i, o, n] = f.as_slice() else {
                return None;
            };
            Some(PartyStage {
                stage,
                time: ns(t)?,
                cpu: if *cpu == "-" { None } else { Some(ns(cpu)?) },
                wire_received: i.parse().ok()?,
                wire_sent: o.parse().ok()?,
                round_trips: n.parse().ok()?,
            })
        })
        .collect()
}

/// What the evaluator process printed: its output, its CPU time, its start trace and its
/// stages.
fn parse_evaluator_line(line: &str) -> Option<(&str, Duration, StartTrace, Vec<PartyStage>)> {
    let mut it = line.split_whitespace();
    let (ok, out, busy, start) = (it.next()?, it.next()?, it.next()?, it.next()?);
    let ns: u64 = busy.strip_prefix("busy_ns=")?.parse().ok()?;
    let start = garble::trace::decode(start.strip_prefix("start=")?).ok()?;
    let stages = decode_stages(it.next()?.strip_prefix("stages=")?)?;
    (ok == "ok" && it.next().is_none()).then_some((out, Duration::from_nanos(ns), start, stages))
}

/// A session's reports: the garbler's, and the evaluator's CPU time.
#[derive(Debug, Clone)]
pub struct TwoParty {
    /// The garbler's report (this process).
    pub garbler: SessionReport,
    /// The evaluator process's CPU time in the session (thread and writer).
    pub evaluator_busy: Duration,
    /// The evaluator's start trace ([`SessionReport::start`]).
    pub evaluator_start: StartTrace,
    /// The evaluator's stages.
    pub evaluator_stages: Vec<PartyStage>,
}

/// Becomes the evaluator of one session and exits when this process was started as one;
/// returns at once otherwise. Called first thing in `main` (see [`crate::run_if_child`]).
pub fn run_if_evaluator() {
    run_child_if(EVALUATOR_ENV, "gc-2pc evaluator", evaluate);
}

/// Becomes a child party and exits when the environment variable `var` is set (to
/// [`SPEC_ON_STDIN`]): runs `party` on the spec read from stdin, then prints the party's one
/// line of output on stdout and exits 0, or its error (named by `who`) on stderr and exits
/// 1. Returns at once when `var` is not set.
pub(crate) fn run_child_if(
    var: &str,
    who: &str,
    party: impl FnOnce(&str) -> Result<String, String>,
) {
    let Some(marker) = std::env::var_os(var) else {
        return;
    };
    let result = if marker == SPEC_ON_STDIN {
        read_spec().and_then(|spec| {
            let r = party(&spec);
            let mut bytes = spec.into_bytes();
            bytes.fill(0);
            std::hint::black_box(&bytes);
            r
        })
    } else {
        // Not echoed: an older caller may have put a secret there.
        Err(format!(
            "{var} must be {SPEC_ON_STDIN:?}: the spec comes on stdin"
        ))
    };
    let code = match result {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(e) => {
            eprintln!("{who}: {e}");
            1
        }
    };
    std::process::exit(code);
}

/// The spec on this process's stdin (up to [`MAX_SPEC`] bytes, until the parent closes it).
fn read_spec() -> Result<String, String> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_SPEC)
        .read_to_end(&mut buf)
        .map_err(|e| format!("reading the spec from stdin: {e}"))?;
    String::from_utf8(buf).map_err(|e| {
        let mut b = e.into_bytes();
        b.fill(0);
        "the spec on stdin is not UTF-8".to_owned()
    })
}

// ---------------------------------------------------------------------------------------
// The garbler side.

/// One two-party session over loopback TCP: this process garbles, a child process (this
/// binary, which must call [`crate::run_if_child`] first thing) evaluates the circuit `name`
/// (a library name or a Bristol file's path; `c` is the same circuit, already loaded), both
/// garbling with `hash` and half-gates. Returns the garbler's report after checking both parties' outputs
/// against plain evaluation.
pub fn two_party(
    name: &str,
    c: &Circuit,
    garbler_input: &[u8],
    evaluator_input: &[u8],
    evaluations: u64,
    hash: GcHash,
) -> Result<SessionReport, ScenarioError> {
    two_party_both(name, c, garbler_input, evaluator_input, evaluations, hash).map(|r| r.garbler)
}

/// [`two_party`], with the evaluator's CPU time as well.
pub fn two_party_both(
    name: &str,
    c: &Circuit,
    garbler_input: &[u8],
    evaluator_input: &[u8],
    evaluations: u64,
    hash: GcHash,
) -> Result<TwoParty, ScenarioError> {
    let inputs = (garbler_input, evaluator_input);
    let gc = (hash, Scheme::HalfGates);
    two_party_over(name, c, inputs, evaluations, gc, &Net::loopback())
}

/// [`two_party_both`] with the garbling hash and scheme `(hash, scheme)`, over the link
/// `net` (crossed once for the session: see [`Net::crossing`]).
pub fn two_party_over(
    name: &str,
    c: &Circuit,
    inputs: (&[u8], &[u8]),
    evaluations: u64,
    gc: (GcHash, Scheme),
    net: &Net,
) -> Result<TwoParty, ScenarioError> {
    two_party_with(name, (c, None), inputs, evaluations, gc, net)
}

/// One session of one evaluation over loopback, as [`two_party_over`], with the circuit
/// compiled before the session on both sides: the garbler brings `prog` (`c` compiled),
/// the evaluator compiles its own before it connects, and the session is the protocol
/// alone, without a Load stage (what a service that keeps its circuit compiled pays per
/// session).
pub fn two_party_compiled_ahead(
    name: &str,
    c: &Circuit,
    prog: &Program,
    inputs: (&[u8], &[u8]),
    gc: (GcHash, Scheme),
) -> Result<TwoParty, ScenarioError> {
    two_party_with(name, (c, Some(prog)), inputs, 1, gc, &Net::loopback())
}

fn two_party_with(
    name: &str,
    (c, prog): (&Circuit, Option<&Program>),
    (garbler_input, evaluator_input): (&[u8], &[u8]),
    evaluations: u64,
    (hash, scheme): (GcHash, Scheme),
    net: &Net,
) -> Result<TwoParty, ScenarioError> {
    let step = "two-party session";
    let fail = |m: String| ScenarioError::step(step, m);
    let expected = c.eval_bytes(garbler_input, evaluator_input).at(step)?;
    let spec = |addr: SocketAddr, token: &Token| {
        EvaluatorSpec {
            addr: addr.to_string(),
            circuit: name.to_owned(),
            evaluations,
            input: evaluator_input.to_vec(),
            token: token.clone(),
            hash,
            scheme,
            compiled_ahead: prog.is_some(),
        }
        .encode()
    };
    let limits = (PEER_TIMEOUT, SESSION_LIMIT);
    let (out, stdout) = with_evaluator(step, EVALUATOR_ENV, limits, net, spec, |ch| {
        let bits = bits_from_bytes_exact(Party::Garbler, garbler_input, c.garbler_input_bits())
            .map_err(|e| e.to_string())?;
        let n = usize::try_from(evaluations).map_err(|e| e.to_string())?;
        let opts = SessionOptions {
            hash,
            scheme,
            ..SessionOptions::default()
        };
        let inputs = vec![bits; n];
        match prog {
            Some(p) => GarblerSession::new(&opts).and_then(|mut s| s.run_program(ch, p, &inputs)),
            None => session::run_garbler(ch, c, &inputs, &opts),
        }
        .map_err(|e| e.to_string())
    })?;
    let want = hex(&expected);
    let Some((got, evaluator_busy, evaluator_start, evaluator_stages)) =
        parse_evaluator_line(stdout.trim())
    else {
        return Err(fail(format!(
            "the evaluator printed {:?}, not \"ok <output> busy_ns=<n> start=<trace> \
             stages=<stages>\"",
            stdout.trim()
        )));
    };
    if got != want {
        return Err(fail(format!(
            "the evaluator's output {got:?} differs from plain evaluation {want:?}"
        )));
    }
    if out.output_bytes().iter().any(|o| *o != expected) {
        return Err(fail(
            "the garbler's output differs from plain evaluation".into(),
        ));
    }
    Ok(TwoParty {
        garbler: out.report,
        evaluator_busy,
        evaluator_start,
        evaluator_stages,
    })
}

/// Runs the garbler's side of a session with an evaluator process: starts this binary with
/// `var` set to [`SPEC_ON_STDIN`], writes `spec(address it must connect to, a fresh token)`
/// to its stdin, accepts the connection that presents the token, runs `garble` on the
/// channel, and waits for the evaluator to exit (killing it first when the garbler failed,
/// so that neither waits for the other's timeout). `limits` are the wait for each of the
/// peer's steps and the whole session's limit (the channel's deadline, from now). Over a
/// link `net` other than loopback, the evaluator connects across it ([`Net::crossing`]:
/// through a user-space link, or from the client's network namespace of the kernel's link,
/// where the evaluator process is started), and the crossing lives until the evaluator has
/// exited. Returns the
/// garbler's result and what the evaluator printed; a failure of either party is an error
/// of `step` with both sides' words.
pub(crate) fn with_evaluator<T>(
    step: &str,
    var: &str,
    limits: (Duration, Duration),
    net: &Net,
    spec: impl FnOnce(SocketAddr, &Token) -> String,
    garble: impl FnOnce(&mut TcpChannel) -> Result<T, String>,
) -> Result<(T, String), ScenarioError> {
    let (timeout, limit) = limits;
    let deadline = Deadline::after(limit);
    // Dropped at the end of this function, after the evaluator exited.
    let crossing = net
        .crossing()
        .map_err(|e| ScenarioError::step(step, format!("link {}: {e}", net.profile())))?;
    let listener = crossing.listener();
    let token = Token::new().map_err(|e| ScenarioError::step(step, e))?;
    let spec = spec(crossing.addr(), &token);
    let exe = std::env::current_exe().at(&format!("{step}: own executable"))?;
    let mut child = crossing
        .client_side(|| {
            Command::new(exe)
                .env(var, SPEC_ON_STDIN)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        })
        .map_err(|e| ScenarioError::step(step, e.to_string()))?
        .at(&format!("{step}: starting the evaluator"))?;
    let garbled = hand_spec(&mut child, spec)
        .and_then(|()| {
            accept_from(listener, &token, timeout, deadline, || {
                child.try_wait().ok().flatten().map(|s| s.to_string())
            })
        })
        .and_then(|mut ch| garble(&mut ch));
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
        .at(&format!("{step}: waiting for the evaluator"))?;
    let out = garbled.map_err(|e| {
        ScenarioError::step(
            step,
            format!("garbler: {e}; evaluator ({status}): {}", stderr.trim()),
        )
    })?;
    if !status.success() {
        return Err(ScenarioError::step(
            step,
            format!("evaluator failed ({status}): {}", stderr.trim()),
        ));
    }
    Ok((out, stdout))
}

/// Writes the evaluator's spec to its stdin and closes it (the child reads to the end);
/// the spec's bytes are cleared after.
fn hand_spec(child: &mut Child, spec: String) -> Result<(), String> {
    let mut bytes = spec.into_bytes();
    bytes.push(b'\n');
    let r = match child.stdin.take() {
        Some(mut pipe) => pipe
            .write_all(&bytes)
            .map_err(|e| format!("handing the evaluator its spec: {e}")),
        None => Err("the evaluator has no stdin".into()),
    };
    bytes.fill(0);
    std::hint::black_box(&bytes);
    r
}

/// A connection that has not presented the token yet.
struct Candidate {
    stream: TcpStream,
    got: [u8; TOKEN_BYTES],
    n: usize,
    since: Instant,
}

/// Waits for the evaluator to connect and present `token`, dropping every connection that
/// presents anything else, closes before presenting it, or takes longer than
/// [`TOKEN_WAIT`]; gives up when `exited` reports that the evaluator process exited (bad
/// input, failed start), or once `timeout` has passed (or `deadline`, if sooner). The
/// channel gets `timeout` for each read and write (an evaluator may compute for a while
/// before it answers) and `deadline` for the whole session.
pub(crate) fn accept_from(
    listener: &TcpListener,
    token: &Token,
    timeout: Duration,
    deadline: Deadline,
    mut exited: impl FnMut() -> Option<String>,
) -> Result<TcpChannel, String> {
    let by = if deadline.left() < timeout {
        deadline
    } else {
        Deadline::after(timeout)
    };
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut pending: Vec<Candidate> = Vec::new();
    let mut dropped = 0usize;
    loop {
        let mut busy = false;
        match listener.accept() {
            Ok((stream, _)) => {
                busy = true;
                if pending.len() < MAX_CANDIDATES && stream.set_nonblocking(true).is_ok() {
                    pending.push(Candidate {
                        stream,
                        got: [0; TOKEN_BYTES],
                        n: 0,
                        since: Instant::now(),
                    });
                } else {
                    dropped += 1;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.to_string()),
        }
        let mut i = 0;
        while i < pending.len() {
            let c = &mut pending[i];
            // Some(true): the token; Some(false): drop it; None: not yet.
            let verdict = match (&c.stream).read(&mut c.got[c.n..]) {
                Ok(0) => Some(false),
                Ok(k) => {
                    busy = true;
                    c.n += k;
                    (c.n == TOKEN_BYTES).then(|| token.matches(&c.got))
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    (c.since.elapsed() > TOKEN_WAIT).then_some(false)
                }
                Err(_) => Some(false),
            };
            match verdict {
                Some(true) => {
                    let c = pending.swap_remove(i);
                    c.stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                    let mut ch = TcpChannel::new(c.stream, timeout).map_err(|e| e.to_string())?;
                    ch.set_deadline(Some(deadline));
                    return Ok(ch);
                }
                Some(false) => {
                    pending.swap_remove(i);
                    dropped += 1;
                }
                None => i += 1,
            }
        }
        if let Some(status) = exited() {
            return Err(format!("the evaluator exited ({status}) before connecting"));
        }
        if by.passed() {
            return Err(format!(
                "no connection presented the evaluator's token within {:?} ({dropped} dropped)",
                by.limit()
            ));
        }
        if !busy {
            wait_readable(listener, &pending, IDLE_WAIT);
        }
    }
}

/// The longest [`accept_from`] waits in one go for a connection or a candidate's bytes
/// before it looks at the evaluator process and the clock again.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// Sleeps until the listener has a connection or a candidate has bytes (or has closed), or
/// `most` has passed: the evaluator is accepted as soon as it presents its token, not at
/// the next tick of a polling loop. An error of `poll` itself ends the wait early (the
/// caller's loop looks again).
fn wait_readable(listener: &TcpListener, pending: &[Candidate], most: Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds: Vec<PollFd<'_>> = std::iter::once(PollFd::new(listener, PollFlags::IN))
        .chain(
            pending
                .iter()
                .map(|c| PollFd::new(&c.stream, PollFlags::IN)),
        )
        .collect();
    let timeout = Timespec {
        tv_sec: i64::try_from(most.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(most.subsec_nanos()),
    };
    let _ = poll(&mut fds, Some(&timeout));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluator_spec_round_trips_and_rejects_bad_fields() {
        let token = Token::new().unwrap();
        let s = EvaluatorSpec {
            addr: "127.0.0.1:4000".into(),
            circuit: "aes128".into(),
            evaluations: 7,
            input: vec![1, 2, 3],
            token: token.clone(),
            hash: GcHash::FixedKey,
            scheme: Scheme::ThreeHalves,
            compiled_ahead: true,
        };
        let d = EvaluatorSpec::decode(&s.encode()).unwrap();
        assert!(d.compiled_ahead);
        assert_eq!(
            (d.addr.as_str(), d.circuit.as_str(), d.evaluations, &d.input),
            ("127.0.0.1:4000", "aes128", 7, &vec![1, 2, 3])
        );
        assert_eq!((d.hash, d.scheme), (GcHash::FixedKey, Scheme::ThreeHalves));
        assert!(d.token.matches(&token.0));
        let t = token.hex();
        let ok = "mitccrh;half-gates;compiled-in-session";
        let d = EvaluatorSpec::decode(&format!("v3;a;b;1;00;{t};{ok}"));
        assert!(!d.unwrap().compiled_ahead);
        for bad in [
            // An unknown scheme.
            format!("v3;a;b;1;00;{t};mitccrh;two-halves;compiled-in-session"),
            // Another version, a bad count, a bad token, a field missing, an unknown hash.
            format!("v2;a;b;1;00;{t};{ok}"),
            format!("v3;a;b;x;00;{t};{ok}"),
            format!("v3;a;b;1;00;0011;{ok}"),
            format!("v3;a;b;1;00;{t}"),
            format!("v3;a;b;1;00;{t};mitccrh;half-gates"),
            format!("v3;a;b;1;00;{t};sha;half-gates;compiled-in-session"),
            // Where to compile: one of two words.
            format!("v3;a;b;1;00;{t};mitccrh;half-gates;compiled-later"),
        ] {
            assert!(EvaluatorSpec::decode(&bad).is_err(), "{bad}");
        }
        // Errors quote no field: the input may be a secret.
        let e = EvaluatorSpec::decode(&format!("v3;a;b;1;abcdefgz;{t};{ok}"))
            .err()
            .unwrap();
        assert!(!e.contains("abcdef"), "{e}");
        assert_eq!(format!("{token:?}"), "Token(..)");
    }

    fn aes_key_and_plaintext() -> (Vec<u8>, Vec<u8>) {
        ((0u8..16).collect(), (0u8..16).map(|i| i * 0x11).collect())
    }

    /// The garbler of an AES-128 session on `ch` (FIPS-197 C.1): its output as hex.
    fn garble_aes(ch: &mut TcpChannel) -> String {
        let c = garble::library::by_name("aes128").unwrap();
        let (key, _) = aes_key_and_plaintext();
        let bits = bits_from_bytes_exact(Party::Garbler, &key, c.garbler_input_bits()).unwrap();
        let out = session::run_garbler(ch, &c, &[bits], &SessionOptions::default()).unwrap();
        hex(&out.output_bytes()[0])
    }

    /// Two local processes connect before the evaluator, one with a wrong token and one
    /// with none: neither becomes the evaluator, and the session with the real one (here a
    /// thread running the child's code) completes.
    #[test]
    fn rogue_connections_first_do_not_become_the_evaluator() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let token = Token::new().unwrap();
        let mut wrong = TcpStream::connect(addr).unwrap();
        wrong.write_all(&[0x5a; TOKEN_BYTES]).unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let (_, plain) = aes_key_and_plaintext();
        let spec = EvaluatorSpec {
            addr: addr.to_string(),
            circuit: "aes128".into(),
            evaluations: 1,
            input: plain,
            token: token.clone(),
            hash: GcHash::default(),
            scheme: Scheme::default(),
            // The evaluator compiles before it connects, the garbler in its session.
            compiled_ahead: true,
        }
        .encode();
        let evaluator = std::thread::spawn(move || evaluate(&spec));
        let deadline = Deadline::after(Duration::from_secs(30));
        let mut ch = accept_from(&listener, &token, Duration::from_secs(10), deadline, || {
            None
        })
        .unwrap();
        let fips = "69c4e0d86a7b0430d8cdb78070b4c55a";
        assert_eq!(garble_aes(&mut ch), fips);
        let line = evaluator.join().unwrap().unwrap();
        assert!(line.starts_with(&format!("ok {fips} ")), "{line}");
        // The rogue with the wrong token was dropped: it reads the end of the stream.
        wrong
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 1];
        let r = wrong.read(&mut b);
        let reset = |e: &std::io::Error| e.kind() == std::io::ErrorKind::ConnectionReset;
        assert!(matches!(&r, Ok(0)) || r.as_ref().is_err_and(reset), "{r:?}");
    }

    /// Only a wrong token arrives: the garbler gives up cleanly when its wait runs out (the
    /// rogue is not handed a session), and at once when the evaluator process exits.
    #[test]
    fn a_wrong_token_alone_fails_by_the_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let token = Token::new().unwrap();
        let mut rogue = TcpStream::connect(addr).unwrap();
        let mut other = token.0;
        other[31] ^= 1;
        rogue.write_all(&other).unwrap();
        let start = Instant::now();
        let deadline = Deadline::after(Duration::from_secs(30));
        let timeout = Duration::from_millis(300);
        let err = accept_from(&listener, &token, timeout, deadline, || None).unwrap_err();
        assert!(err.contains("token") && err.contains("1 dropped"), "{err}");
        assert!(!err.contains(&token.hex()), "{err}");
        let took = start.elapsed();
        assert!(took >= timeout && took < Duration::from_secs(3), "{took:?}");
        // An evaluator process that exited is reported, without waiting.
        let start = Instant::now();
        let err = accept_from(&listener, &token, Duration::from_secs(10), deadline, || {
            Some("exit status: 1".into())
        })
        .unwrap_err();
        assert!(err.contains("exited"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn evaluator_line_parses_and_rejects_garbage() {
        let stages = "5/4/0/0/0,7/-/80/80/1,1/1/2/3/1,1/1/0/0/0,1/1/0/0/0,1/1/0/0/0";
        let line = format!("ok 00ff busy_ns=1500 start=9;E:0:0:0 stages={stages}");
        let (out, busy, start, parsed) = parse_evaluator_line(&line).unwrap();
        assert_eq!((out, busy), ("00ff", Duration::from_nanos(1500)));
        assert_eq!(start, garble::trace::decode("9;E:0:0:0").unwrap());
        assert_eq!(parsed.len(), Stage::ALL.len());
        assert_eq!(
            parsed[1],
            PartyStage {
                stage: Stage::Init,
                time: Duration::from_nanos(7),
                cpu: None,
                wire_received: 80,
                wire_sent: 80,
                round_trips: 1,
            }
        );
        assert_eq!(parsed[0].cpu, Some(Duration::from_nanos(4)));
        // Five stages, a field short, a word for a number: refused.
        for bad in [
            "5/4/0/0/0,7/-/80/80/1,1/1/2/3/1,1/1/0/0/0,1/1/0/0/0",
            "5/4/0/0,7/-/80/80/1,1/1/2/3/1,1/1/0/0/0,1/1/0/0/0,1/1/0/0/0",
            "5/x/0/0/0,7/-/80/80/1,1/1/2/3/1,1/1/0/0/0,1/1/0/0/0,1/1/0/0/0",
        ] {
            let line = format!("ok 00ff busy_ns=1500 start=9;E:0:0:0 stages={bad}");
            assert_eq!(parse_evaluator_line(&line), None, "{bad}");
        }
        assert_eq!(
            parse_evaluator_line("ok 00ff busy_ns=1500 start=9;E:0:0:0"),
            None
        );
        assert_eq!(parse_evaluator_line("ok 00ff"), None);
        assert_eq!(parse_evaluator_line("ok 00ff busy_ns=1500"), None);
        assert_eq!(parse_evaluator_line("ok 00ff busy_ns=x start=9"), None);
        assert_eq!(parse_evaluator_line("no 00ff busy_ns=1 start=9"), None);
        assert_eq!(parse_evaluator_line("ok 00ff busy_ns=1 start=x"), None);
        assert_eq!(parse_evaluator_line("ok 00ff busy_ns=1 9"), None);
        assert_eq!(
            parse_evaluator_line(&format!("ok 00ff busy_ns=1 start=9 stages={stages} extra")),
            None
        );
    }
}
