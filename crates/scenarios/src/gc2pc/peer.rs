//! The evaluator party: this binary re-executed as a child process that connects back over
//! loopback TCP, and the garbler's side of one two-party session with it.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use garble::channel::TcpChannel;
use garble::circuit::{bits_from_bytes_exact, bytes_from_bits};
use garble::hash::GcHash;
use garble::session::{self, SessionOptions, SessionReport};
use garble::{Circuit, Party};

use harness::hex::{hex, unhex};
use harness::{At, ScenarioError};

/// Environment variable that makes this binary the evaluator of one session.
pub const EVALUATOR_ENV: &str = "CCBENCH_GC_EVALUATOR";

/// How long either party waits for the other before giving up.
pub(super) const PEER_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// The evaluator process.

/// An evaluator spec as one environment value: a version, then the fields, `;`-separated
/// (no field may contain `;`: addresses, names, numbers and hex).
pub(crate) fn spec_text(fields: &[&str]) -> String {
    format!("v1;{}", fields.join(";"))
}

/// The `N` fields of a spec made by [`spec_text`]; `env` names the variable in errors.
pub(crate) fn spec_fields<'a, const N: usize>(
    env: &str,
    s: &'a str,
) -> Result<[&'a str; N], String> {
    let parts: Vec<&str> = s.split(';').collect();
    let Some((&version, fields)) = parts.split_first() else {
        return Err(format!("{env}: empty"));
    };
    if version != "v1" {
        return Err(format!("{env}: unknown version {version:?}"));
    }
    <[&str; N]>::try_from(fields)
        .map_err(|_| format!("{env}: expected {} fields, got {}", N + 1, parts.len()))
}

/// What the evaluator child is told, through [`EVALUATOR_ENV`].
pub(super) struct EvaluatorSpec {
    addr: String,
    circuit: String,
    evaluations: u64,
    input: Vec<u8>,
    hash: GcHash,
}

impl EvaluatorSpec {
    fn encode(&self) -> String {
        spec_text(&[
            &self.addr,
            &self.circuit,
            &self.evaluations.to_string(),
            &hex(&self.input),
            self.hash.name(),
        ])
    }

    fn decode(s: &str) -> Result<EvaluatorSpec, String> {
        let [addr, circuit, evaluations, input, hash] = spec_fields(EVALUATOR_ENV, s)?;
        Ok(EvaluatorSpec {
            addr: addr.to_owned(),
            circuit: circuit.to_owned(),
            evaluations: evaluations
                .parse()
                .map_err(|_| format!("{EVALUATOR_ENV}: bad evaluation count {evaluations:?}"))?,
            input: unhex(input)?,
            hash: hash.parse().map_err(|e| format!("{EVALUATOR_ENV}: {e}"))?,
        })
    }
}

/// Runs one evaluator session from its spec; prints `ok <output hex>` on success.
pub(super) fn evaluate(spec: &str) -> Result<String, String> {
    let spec = EvaluatorSpec::decode(spec)?;
    let c = load_circuit(&spec.circuit)?;
    let bits = bits_from_bytes_exact(Party::Evaluator, &spec.input, c.evaluator_input_bits())
        .map_err(|e| e.to_string())?;
    let mut ch = TcpChannel::connect(&spec.addr, PEER_TIMEOUT).map_err(|e| e.to_string())?;
    let n = usize::try_from(spec.evaluations).map_err(|e| e.to_string())?;
    let opts = SessionOptions {
        hash: spec.hash,
        ..SessionOptions::default()
    };
    let out =
        session::run_evaluator(&mut ch, &c, &vec![bits; n], &opts).map_err(|e| e.to_string())?;
    let first = out.output_bytes().into_iter().next().unwrap_or_default();
    if out.outputs.iter().any(|o| bytes_from_bits(o) != first) {
        return Err("evaluations of the same inputs gave different outputs".into());
    }
    // The outputs, then this party's CPU time (`busy`), for the garbler's records.
    Ok(format!(
        "ok {} busy_ns={}",
        hex(&first),
        out.report.busy.as_nanos()
    ))
}

/// What the evaluator process printed: its output and its CPU time.
fn parse_evaluator_line(line: &str) -> Option<(&str, Duration)> {
    let mut it = line.split_whitespace();
    let (ok, out, busy) = (it.next()?, it.next()?, it.next()?);
    let ns: u64 = busy.strip_prefix("busy_ns=")?.parse().ok()?;
    (ok == "ok" && it.next().is_none()).then_some((out, Duration::from_nanos(ns)))
}

/// A session's reports: the garbler's, and the evaluator's CPU time.
#[derive(Debug, Clone)]
pub struct TwoParty {
    /// The garbler's report (this process).
    pub garbler: SessionReport,
    /// The evaluator process's CPU time in the session (thread and writer).
    pub evaluator_busy: Duration,
}

/// Becomes the evaluator of one session and exits when this process was started as one;
/// returns at once otherwise. Called first thing in `main` (see [`crate::run_if_child`]).
pub fn run_if_evaluator() {
    run_child_if(EVALUATOR_ENV, "gc-2pc evaluator", evaluate);
}

/// Becomes a child party and exits when the environment variable `var` holds its spec: the
/// party's one line of output on stdout and status 0, or its error (named by `who`) on
/// stderr and status 1. Returns at once when `var` is not set.
pub(crate) fn run_child_if(
    var: &str,
    who: &str,
    party: impl FnOnce(&str) -> Result<String, String>,
) {
    let Some(spec) = std::env::var_os(var) else {
        return;
    };
    let code = match party(&spec.to_string_lossy()) {
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

// ---------------------------------------------------------------------------------------
// The garbler side.

/// One two-party session over loopback TCP: this process garbles, a child process (this
/// binary, which must call [`crate::run_if_child`] first thing) evaluates the circuit `name`
/// (a library name or a Bristol file's path; `c` is the same circuit, already loaded), both
/// garbling with `hash`. Returns the garbler's report after checking both parties' outputs
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
    let step = "two-party session";
    let fail = |m: String| ScenarioError::step(step, m);
    let expected = c.eval_bytes(garbler_input, evaluator_input).at(step)?;
    let spec = |addr: SocketAddr| {
        EvaluatorSpec {
            addr: addr.to_string(),
            circuit: name.to_owned(),
            evaluations,
            input: evaluator_input.to_vec(),
            hash,
        }
        .encode()
    };
    let (out, stdout) = with_evaluator(step, EVALUATOR_ENV, spec, |ch| {
        let bits = bits_from_bytes_exact(Party::Garbler, garbler_input, c.garbler_input_bits())
            .map_err(|e| e.to_string())?;
        let n = usize::try_from(evaluations).map_err(|e| e.to_string())?;
        let opts = SessionOptions {
            hash,
            ..SessionOptions::default()
        };
        session::run_garbler(ch, c, &vec![bits; n], &opts).map_err(|e| e.to_string())
    })?;
    let want = hex(&expected);
    let Some((got, evaluator_busy)) = parse_evaluator_line(stdout.trim()) else {
        return Err(fail(format!(
            "the evaluator printed {:?}, not \"ok <output> busy_ns=<n>\"",
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
    })
}

/// Runs the garbler's side of a session with an evaluator process: starts this binary with
/// `var` set to `spec(address it must connect to)`, accepts it, runs `garble` on the channel,
/// and waits for the evaluator to exit (killing it first when the garbler failed, so that
/// neither waits for the other's timeout). Returns the garbler's result and what the
/// evaluator printed; a failure of either party is an error of `step` with both sides' words.
pub(crate) fn with_evaluator<T>(
    step: &str,
    var: &str,
    spec: impl FnOnce(SocketAddr) -> String,
    garble: impl FnOnce(&mut TcpChannel) -> Result<T, String>,
) -> Result<(T, String), ScenarioError> {
    let listener = TcpListener::bind("127.0.0.1:0").at(step)?;
    let addr = listener.local_addr().at(step)?;
    let exe = std::env::current_exe().at(&format!("{step}: own executable"))?;
    let mut child = Command::new(exe)
        .env(var, spec(addr))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .at(&format!("{step}: starting the evaluator"))?;
    let garbled =
        accept_from(&listener, &mut child, PEER_TIMEOUT).and_then(|mut ch| garble(&mut ch));
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

/// Waits for the evaluator process `child` to connect, giving up at once if it exits first
/// (bad input, failed start) and after `timeout` otherwise. The channel gets `timeout` for
/// its reads and writes too (an evaluator may compute for a while before it answers).
pub(crate) fn accept_from(
    listener: &TcpListener,
    child: &mut Child,
    timeout: Duration,
) -> Result<TcpChannel, String> {
    let start = Instant::now();
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                return TcpChannel::new(s, timeout).map_err(|e| e.to_string());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("the evaluator exited ({status}) before connecting"));
                }
                if start.elapsed() > timeout {
                    return Err(format!("the evaluator did not connect within {timeout:?}"));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
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
        let s = EvaluatorSpec {
            addr: "127.0.0.1:4000".into(),
            circuit: "aes128".into(),
            evaluations: 7,
            input: vec![1, 2, 3],
            hash: GcHash::FixedKey,
        };
        let d = EvaluatorSpec::decode(&s.encode()).unwrap();
        assert_eq!(
            (
                d.addr.as_str(),
                d.circuit.as_str(),
                d.evaluations,
                d.input,
                d.hash
            ),
            (
                "127.0.0.1:4000",
                "aes128",
                7,
                vec![1, 2, 3],
                GcHash::FixedKey
            )
        );
        assert!(EvaluatorSpec::decode("v2;a;b;1;00;mitccrh").is_err());
        assert!(EvaluatorSpec::decode("v1;a;b;x;00;mitccrh").is_err());
        assert!(EvaluatorSpec::decode("v1;a;b;1;00;sha").is_err());
        assert!(EvaluatorSpec::decode("v1;a;b;1;00").is_err());
        assert!(EvaluatorSpec::decode("v1;a;b").is_err());
    }

    #[test]
    fn evaluator_line_parses_and_rejects_garbage() {
        assert_eq!(
            parse_evaluator_line("ok 00ff busy_ns=1500"),
            Some(("00ff", Duration::from_nanos(1500)))
        );
        assert_eq!(parse_evaluator_line("ok 00ff"), None);
        assert_eq!(parse_evaluator_line("ok 00ff busy_ns=x"), None);
        assert_eq!(parse_evaluator_line("no 00ff busy_ns=1"), None);
        assert_eq!(parse_evaluator_line("ok 00ff busy_ns=1 extra"), None);
    }
}
