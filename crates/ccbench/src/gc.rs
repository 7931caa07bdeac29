//! `ccbench gc`: the garbled-circuit engine by hand — build and inspect circuits, and run
//! one party of a two-party computation (two terminals or two hosts).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use garble::channel::TcpChannel;
use garble::circuit::bits_from_bytes_exact;
use garble::session::{self, SessionOptions};
use garble::{Circuit, GateKind, Party};
use measure::record::{Body, Record};
use scenarios::gc2pc::{load_circuit, stage_breakdown};
use scenarios::hex::{hex, unhex};

use crate::Exit;
use crate::args::{GcCircuitCommand, GcCommand, PartyArgs};

pub fn gc(cmd: GcCommand) -> Result<ExitCode> {
    match cmd {
        GcCommand::Garble(a) => party(Party::Garbler, a.party, &a.listen),
        GcCommand::Evaluate(a) => party(Party::Evaluator, a.party, &a.connect),
        GcCommand::Circuit(GcCircuitCommand::Build { name, output }) => build(&name, &output),
        GcCommand::Circuit(GcCircuitCommand::Stats { circuit }) => stats(&circuit),
    }
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
    // Write next to the target, then rename: never a half-written circuit file.
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    garble::bristol::write_fashion(&c, std::io::BufWriter::new(tmp.as_file_mut()))
        .and_then(|()| tmp.as_file_mut().flush())
        .with_context(|| format!("writing {}", output.display()))?;
    tmp.persist(output)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", output.display()))?;
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
    let s = c.stats();
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
    println!(
        "garbled tables     {} bytes per evaluation ({} per AND gate)",
        s.and_gates() * garble::gc::TABLE_BYTES as u64,
        garble::gc::TABLE_BYTES
    );
    Ok(ExitCode::SUCCESS)
}

fn party(role: Party, a: PartyArgs, addr: &str) -> Result<ExitCode> {
    let c = circuit(&a.circuit)?;
    let bytes = unhex(&a.input).map_err(|e| Exit::usage(format!("--input: {e}")))?;
    let bits = bits_from_bytes_exact(role, &bytes, c.party_input_bits(role))
        .map_err(|e| Exit::usage(format!("--input: {e}")))?;
    let timeout = Duration::from_secs_f64(a.timeout);
    let inputs = vec![bits; a.evaluations as usize];
    let opts = SessionOptions::default();
    let (out, label) = match role {
        Party::Garbler => {
            eprintln!("garbler: waiting for the evaluator on {addr}");
            let mut ch = TcpChannel::listen(addr, timeout)
                .with_context(|| format!("waiting for the evaluator on {addr}"))?;
            let out = session::run_garbler(&mut ch, &c, &inputs, &opts)
                .context("the two-party session failed")?;
            (out, "garbler")
        }
        Party::Evaluator => {
            let mut ch = TcpChannel::connect(addr, timeout)
                .with_context(|| format!("connecting to the garbler at {addr}"))?;
            let out = session::run_evaluator(&mut ch, &c, &inputs, &opts)
                .context("the two-party session failed")?;
            (out, "evaluator")
        }
    };
    let r = &out.report;
    let rec = Record::new(
        "gc",
        label,
        measure::params! {"circuit" => a.circuit.as_str(), "evaluations" => r.evaluations},
        Body::Stages(stage_breakdown(&format!("{label}, {}", a.circuit), r)),
    );
    eprintln!("{}", report::terminal_summary(&[rec]));
    for o in out.output_bytes().iter().take(1) {
        println!("{}", hex(o));
    }
    Ok(ExitCode::SUCCESS)
}
