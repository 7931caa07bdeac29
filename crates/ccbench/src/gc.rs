//! `ccbench gc`: the garbled-circuit engine by hand — build and inspect circuits, and run
//! one party of a two-party computation (two terminals or two hosts).

use std::io::{Read as _, Write};
use std::net::ToSocketAddrs as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use garble::channel::{Deadline, TcpChannel};
use garble::circuit::bits_from_bytes_exact;
use garble::ed25519::{Ed25519Sign, KEY_BYTES, OUTPUT_BYTES, Variant};
use garble::generator::Generator as _;
use garble::link::{Link, Profile};
use garble::scheme::Scheme;
use garble::session::{self, SessionOptions};
use garble::{Circuit, GateKind, Party};
use harness::hex::{hex, unhex};
use measure::record::{Body, Record};
use scenarios::gc2pc::net::net_params;
use scenarios::gc2pc::{load_circuit, stage_breakdown};

use crate::Exit;
use crate::args::{GcCircuitCommand, GcCommand, PartyArgs};
use crate::atomic::write_atomically;

pub fn gc(cmd: GcCommand) -> Result<ExitCode> {
    match cmd {
        GcCommand::Garble(a) => match ed25519_circuit(&a.party.circuit)? {
            Some(c) => sign_party(Party::Garbler, c, a.party, &a.listen, None),
            None => party(Party::Garbler, a.party, &a.listen),
        },
        GcCommand::Evaluate(a) => match ed25519_circuit(&a.party.circuit)? {
            Some(c) => sign_party(
                Party::Evaluator,
                c,
                a.party,
                &a.connect,
                a.message.as_deref(),
            ),
            None => party(Party::Evaluator, a.party, &a.connect),
        },
        GcCommand::Circuit(GcCircuitCommand::Build { name, output }) => {
            match ed25519_circuit(&name)? {
                Some(c) => build_generated(&name, &c, &output),
                None => build(&name, &output),
            }
        }
        GcCommand::Circuit(GcCircuitCommand::Stats { circuit }) => {
            match ed25519_circuit(&circuit)? {
                Some(c) => stats_generated(&circuit, &c),
                None => stats(&circuit),
            }
        }
    }
}

/// Longest message an `ed25519-sign:LEN` circuit takes (eight SHA-512 blocks).
const MAX_MESSAGE: usize = 1024;

/// `ed25519-sign` (a 64-byte message, as in the published run), `ed25519-sign-reveal` (the
/// same signature with `R` revealed blinded), either with `:LEN` for a LEN-byte message;
/// `None` for any other circuit name.
fn ed25519_circuit(spec: &str) -> Result<Option<Ed25519Sign>> {
    let (name, len) = match spec.split_once(':') {
        Some((n, l)) => (n, Some(l)),
        None => (spec, None),
    };
    let Some(variant) = [Variant::OnePass, Variant::Reveal]
        .into_iter()
        .find(|v| v.circuit_name() == name)
    else {
        return Ok(None);
    };
    let Some(len) = len else {
        return Ok(Some(Ed25519Sign {
            msg_len: Ed25519Sign::PUBLISHED.msg_len,
            variant,
        }));
    };
    match len.parse::<usize>() {
        Ok(n) if n <= MAX_MESSAGE => Ok(Some(Ed25519Sign {
            msg_len: n,
            variant,
        })),
        _ => Err(Exit::usage(format!(
            "{spec}: the message length must be a number of bytes in 0..={MAX_MESSAGE}"
        ))
        .into()),
    }
}

fn build_generated(name: &str, c: &Ed25519Sign, output: &Path) -> Result<ExitCode> {
    if c.variant == Variant::Reveal {
        return Err(Exit::usage(format!(
            "{name} reveals R in the middle of the circuit, which a Bristol file cannot express; build {} instead",
            Variant::OnePass.circuit_name()
        ))
        .into());
    }
    let mut written = None;
    write_atomically(output, |f| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let (n, st) = garble::generator::write_bristol(c, &mut w)?;
        w.flush()?;
        written = Some((n, st));
        Ok(())
    })?;
    if let Some((bytes, st)) = written {
        let s = st.stats;
        println!(
            "{}: {name}, {} gates ({} AND) plus {} output copies, {} wires, {bytes} bytes ({:.2} GB)",
            output.display(),
            s.gates,
            s.and_gates(),
            s.output_bits,
            s.wires + s.output_bits,
            bytes as f64 / 1e9
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn stats_generated(spec: &str, c: &Ed25519Sign) -> Result<ExitCode> {
    let st = garble::generator::stats(c);
    print_stats(spec, &st.stats);
    println!("message            {} bytes", c.msg_len);
    for (and, bits) in &st.reveals {
        println!("reveal             {bits} bits (R blinded) after {and} AND gates");
    }
    println!("digest             {}", hex(&st.digest));
    println!(
        "{}",
        match c.variant {
            Variant::OnePass =>
                "(generated circuit: garbled as it is generated, never stored; `ccbench gc circuit build` streams it to a Bristol file)",
            Variant::Reveal =>
                "(generated circuit: garbled as it is generated, never stored; its reveal has no Bristol form)",
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// A party's input, and whether it was written on the command line (where every local
/// user can read it).
struct Input {
    bytes: Vec<u8>,
    /// Where it came from, for errors: `--input`, `--input - (stdin)`, `--input-file PATH`.
    source: String,
    on_command_line: bool,
}

/// This party's input: `--input HEX`, `--input -` (hex on stdin) or `--input-file PATH`
/// (clap makes sure exactly one is given). Errors name the source, never its content.
fn read_input(a: &PartyArgs) -> Result<Input> {
    let (text, source, on_command_line) = match (&a.input, &a.input_file) {
        (Some(dash), None) if dash == "-" => {
            let mut t = String::new();
            std::io::stdin()
                .read_to_string(&mut t)
                .map_err(|e| Exit::usage(format!("--input -: reading stdin: {e}")))?;
            (t, "--input - (stdin)".to_owned(), false)
        }
        (Some(hex), None) => (hex.clone(), "--input".to_owned(), true),
        (None, Some(path)) => {
            let source = format!("--input-file {}", path.display());
            let t = std::fs::read_to_string(path)
                .map_err(|e| Exit::usage(format!("{source}: cannot read it: {e}")))?;
            (t, source, false)
        }
        _ => {
            return Err(
                Exit::usage("give the input with exactly one of --input or --input-file").into(),
            );
        }
    };
    if text.trim().is_empty() {
        return Err(Exit::usage(format!("{source}: no hex input (it is empty)")).into());
    }
    let bytes = unhex(&text).map_err(|_| Exit::usage(format!("{source}: {}", not_hex(&text))))?;
    Ok(Input {
        bytes,
        source,
        on_command_line,
    })
}

/// Why `text` is not hex, by position: the message quotes none of it (it may be a secret
/// with a typo).
fn not_hex(text: &str) -> String {
    let t = text.trim();
    let t = t.strip_prefix("0x").unwrap_or(t);
    match t.chars().position(|c| !c.is_ascii_hexdigit()) {
        Some(i) => format!("not hex: character {} is not a hex digit", i + 1),
        None => format!("not hex: an odd number of digits ({})", t.len()),
    }
}

/// The deadline of a session (`--deadline`), counted from now.
fn session_deadline(a: &PartyArgs) -> Deadline {
    Deadline::after(Duration::from_secs_f64(a.deadline))
}

/// One party of a two-party Ed25519 signature. The garbler's input is its key share
/// and the message, the evaluator's its key share; both print the signature, which the
/// garbler (and the evaluator, given the message) verifies.
fn sign_party(
    role: Party,
    c: Ed25519Sign,
    a: PartyArgs,
    addr: &str,
    message: Option<&str>,
) -> Result<ExitCode> {
    let Input {
        bytes: input,
        source,
        on_command_line,
    } = read_input(&a)?;
    if on_command_line {
        eprintln!(
            "warning: --input puts this party's key share on the command line, where every local user can read it (ps, /proc/PID/cmdline); pass it with --input-file PATH or --input - (stdin)"
        );
    }
    let share_note = "a key share is 64 bytes: this party's XOR share of `seed || public key`";
    let expected = match role {
        Party::Garbler => KEY_BYTES + c.msg_len,
        Party::Evaluator => KEY_BYTES,
    };
    if input.len() != expected {
        anyhow::bail!(match role {
            Party::Garbler => format!(
                "{source}: the garbler's input is its key share followed by the {}-byte message ({} bytes), got {} bytes ({share_note})",
                c.msg_len,
                expected,
                input.len()
            ),
            Party::Evaluator => format!(
                "{source}: the evaluator's input is its key share, got {} bytes ({share_note})",
                input.len()
            ),
        });
    }
    let message = match (role, message) {
        (Party::Garbler, _) => Some(input[KEY_BYTES..].to_vec()),
        (Party::Evaluator, Some(m)) => {
            let m = unhex(m).map_err(|e| anyhow::anyhow!("--message: {e}"))?;
            if m.len() != c.msg_len {
                anyhow::bail!(
                    "--message: {} bytes, the circuit signs {}-byte messages",
                    m.len(),
                    c.msg_len
                );
            }
            Some(m)
        }
        (Party::Evaluator, None) => None,
    };
    if a.evaluations != 1 {
        anyhow::bail!("--evaluations: ed25519-sign runs one signature per session");
    }
    let mut input = input;
    if c.variant == Variant::Reveal {
        // This party's blinding share of R, fresh for the session.
        input.extend_from_slice(
            &garble::ed25519::blinding_share().context("drawing the blinding share")?,
        );
    }
    let bits = garble::circuit::bits_from_bytes(&input, 8 * input.len());
    let timeout = Duration::from_secs_f64(a.timeout);
    let deadline = session_deadline(&a);
    // Either scheme: the generated circuit is garbled as it is generated
    // (garble::stream), and the session header carries the scheme.
    let opts = SessionOptions {
        deadline: Some(deadline),
        hash: a.hash,
        scheme: a.scheme,
        ..SessionOptions::default()
    };
    let (mut ch, _link) = channel(role, addr, timeout, deadline, &a.net)?;
    let (out, label) = match role {
        Party::Garbler => {
            let out = garble::stream::run_garbler(&mut ch, &c, &bits, &opts)
                .context("the two-party session failed")?;
            (out, "garbler")
        }
        Party::Evaluator => {
            let out = garble::stream::run_evaluator(&mut ch, &c, &bits, &opts)
                .context("the two-party session failed")?;
            (out, "evaluator")
        }
    };
    let r = &out.report;
    let name = c.name();
    let mut params = measure::params! {
        "circuit" => name.as_str(),
        "evaluations" => 1u64,
        "gc_hash" => r.hash.name(),
        "gc_scheme" => r.scheme.name(),
    };
    params.extend(net_params(&a.net));
    let rec = Record::new(
        "gc",
        label,
        params,
        Body::Stages(stage_breakdown(&format!("{label}, {name}"), r)),
    );
    eprintln!("{}", report::terminal_summary(std::slice::from_ref(&rec)));
    save(a.out.as_deref(), rec)?;
    let bytes = out.output_bytes().into_iter().next().unwrap_or_default();
    if bytes.len() != OUTPUT_BYTES {
        anyhow::bail!("the session returned {} output bytes", bytes.len());
    }
    let mut sig = [0u8; 64];
    sig.copy_from_slice(&bytes[..64]);
    let mut pk = [0u8; 32];
    pk.copy_from_slice(&bytes[64..]);
    eprintln!("public key         {}", hex(&pk));
    println!("{}", hex(&sig));
    match message {
        Some(m) if !garble::ed25519::verify(&pk, &m, &sig) => anyhow::bail!(
            "the signature does not verify under the public key {}: the peer sent garbage, or the key shares do not belong to one key",
            hex(&pk)
        ),
        Some(_) => eprintln!("signature verifies"),
        None => eprintln!("signature not verified here (no --message)"),
    }
    Ok(ExitCode::SUCCESS)
}

fn circuit(spec: &str) -> Result<Circuit> {
    load_circuit(spec).map_err(anyhow::Error::msg)
}

fn build(name: &str, output: &Path) -> Result<ExitCode> {
    let c = garble::library::by_name(name).ok_or_else(|| {
        Exit::usage(format!(
            "no library circuit {name:?}; known: {}, or mulN for N in 1..=4096",
            garble::library::NAMES.join(", ")
        ))
    })?;
    write_atomically(output, |f| {
        garble::bristol::write_fashion(&c, std::io::BufWriter::new(&mut *f))?;
        f.flush()
    })?;
    let s = c.stats();
    println!(
        "{}: {name}, {} gates ({} AND), {} wires",
        output.display(),
        s.gates,
        s.and_gates(),
        s.wires
    );
    Ok(ExitCode::SUCCESS)
}

fn stats(spec: &str) -> Result<ExitCode> {
    let c = circuit(spec)?;
    // The compiler's first pass computes the circuit's statistics too.
    let p = garble::program::Program::compile(&c);
    print_stats(spec, p.stats());
    println!(
        "compiled           {} free gates as {} XOR sums, {} label slots",
        p.stats().free_gates(),
        p.xor_sums(),
        p.num_slots()
    );
    Ok(ExitCode::SUCCESS)
}

fn print_stats(spec: &str, s: &garble::Stats) {
    println!("circuit            {spec}");
    println!("gates              {}", s.gates);
    for k in [
        GateKind::And,
        GateKind::Xor,
        GateKind::Inv,
        GateKind::Eq,
        GateKind::Eqw,
    ] {
        println!("  {:<16} {}", k.name(), s.count(k));
    }
    println!("wires              {}", s.wires);
    println!("AND depth          {}", s.and_depth);
    println!("garbler input      {} bits", s.garbler_input_bits);
    println!("evaluator input    {} bits", s.evaluator_input_bits);
    println!("output             {} bits", s.output_bits);
    for scheme in Scheme::ALL {
        println!(
            "garbled tables     {} bytes per evaluation with {scheme} ({} per AND gate)",
            s.and_gates() * scheme.table_bytes() as u64,
            scheme.table_bytes()
        );
    }
}

/// Refuses (a usage error, before connecting) a number of evaluations whose session would
/// take more than half the memory this machine has available now: the OT extension for
/// all evaluations' inputs runs at once ([`session::bulk_memory_bytes`]), and a session's two
/// parties often share one machine. Without the check the kernel's OOM killer ends the
/// process mid-session (1,000,000 AES-128 evaluations: 4.4 GB in each party).
fn check_memory(c: &Circuit, n: u64, role: Party) -> Result<()> {
    let need = session::bulk_memory_bytes(c, n, role);
    let Some(available) = measure::env::available_memory_bytes() else {
        return Ok(());
    };
    if need <= available / 2 {
        return Ok(());
    }
    let most = (available / 2) / session::bulk_memory_bytes(c, 1, role).max(1);
    Err(Exit::usage(format!(
        "--evaluations {n}: the session would hold about {} in this process at once (the \
         OT extension for all evaluations' inputs runs before the first is garbled), more \
         than half of the {} this machine has available now; at most {most} evaluations of \
         this circuit here, or several sessions",
        report::units::bytes(need as f64),
        report::units::bytes(available as f64),
    ))
    .into())
}

fn party(role: Party, a: PartyArgs, addr: &str) -> Result<ExitCode> {
    let c = circuit(&a.circuit)?;
    let input = read_input(&a)?;
    let bits = bits_from_bytes_exact(role, &input.bytes, c.party_input_bits(role))
        .map_err(|e| Exit::usage(format!("{}: {e}", input.source)))?;
    check_memory(&c, u64::from(a.evaluations), role)?;
    let timeout = Duration::from_secs_f64(a.timeout);
    let inputs = vec![bits; a.evaluations as usize];
    let deadline = session_deadline(&a);
    let opts = SessionOptions {
        deadline: Some(deadline),
        hash: a.hash,
        scheme: a.scheme,
        ..SessionOptions::default()
    };
    let (mut ch, _link) = channel(role, addr, timeout, deadline, &a.net)?;
    let (out, label) = match role {
        Party::Garbler => {
            let out = session::run_garbler(&mut ch, &c, &inputs, &opts)
                .context("the two-party session failed")?;
            (out, "garbler")
        }
        Party::Evaluator => {
            let out = session::run_evaluator(&mut ch, &c, &inputs, &opts)
                .context("the two-party session failed")?;
            (out, "evaluator")
        }
    };
    let r = &out.report;
    let mut params = measure::params! {
        "circuit" => a.circuit.as_str(),
        "evaluations" => r.evaluations,
        "gc_hash" => r.hash.name(),
        "gc_scheme" => r.scheme.name(),
    };
    params.extend(net_params(&a.net));
    let rec = Record::new(
        "gc",
        label,
        params,
        Body::Stages(stage_breakdown(&format!("{label}, {}", a.circuit), r)),
    );
    eprintln!("{}", report::terminal_summary(std::slice::from_ref(&rec)));
    save(a.out.as_deref(), rec)?;
    for o in out.output_bytes().iter().take(1) {
        println!("{}", hex(o));
    }
    Ok(ExitCode::SUCCESS)
}

/// With `--out DIR`: the session's record into `DIR/results.jsonl`, and its report.
fn save(out: Option<&Path>, rec: Record) -> Result<()> {
    if let Some(dir) = out {
        let html = crate::run::save(dir, &[rec])?;
        eprintln!("report: {}", html.display());
    }
    Ok(())
}

/// The connection to the other party: the garbler listens on `addr`, the evaluator connects
/// to it, each waiting at most `timeout` and never past `deadline`. Over a link profile
/// other than loopback, the evaluator connects through a user-space link it runs in front
/// of `addr` (returned, to live as long as the session).
fn channel(
    role: Party,
    addr: &str,
    timeout: Duration,
    deadline: Deadline,
    net: &Profile,
) -> Result<(TcpChannel, Option<Link>)> {
    let wait = timeout.min(deadline.left());
    match role {
        Party::Garbler => {
            eprintln!("garbler: waiting for the evaluator on {addr}");
            let ch = TcpChannel::listen(addr, wait)
                .with_context(|| format!("waiting for the evaluator on {addr}"))?;
            Ok((ch, None))
        }
        Party::Evaluator => {
            let upstream = addr
                .to_socket_addrs()
                .with_context(|| format!("resolving the garbler's address {addr}"))?
                .next()
                .with_context(|| format!("the garbler's address {addr} resolves to nothing"))?;
            let link = net
                .start(upstream)
                .with_context(|| format!("starting the link {net} to {addr}"))?;
            let to = link
                .as_ref()
                .map_or_else(|| addr.to_owned(), |l| l.addr().to_string());
            if link.is_some() {
                eprintln!("evaluator: connecting to {addr} over the emulated link {net}");
            }
            let ch = TcpChannel::connect(&to, wait)
                .with_context(|| format!("connecting to the garbler at {addr}"))?;
            Ok((ch, link))
        }
    }
}
