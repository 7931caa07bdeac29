//! `ccbench middlebox`: the TLS middlebox of the `tls-middlebox` scenario as a relay that
//! real clients go through, and `ccbench middlebox share`, the agent that follows a key log
//! and hands its sessions' secrets to the middlebox's enclave. The relay, the share
//! protocol and the key log are `scenarios::tls_middlebox`'s; this module wires sockets,
//! options, Ctrl-C and the output folder.

use std::net::TcpListener;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use harness::boundary::{self, Config};
use harness::enclave::{Backend, MAX_TCS, Registry};
use harness::{Context, Emit, Preset, RunOptions, ScenarioError};
use measure::jsonl::to_line;
use measure::record::{Body, Record};
use scenarios::tls_middlebox::batch::BatchLimits;
use scenarios::tls_middlebox::book::ShareStatus;
use scenarios::tls_middlebox::keylog::{KeylogFollower, Start};
use scenarios::tls_middlebox::live::{self, LiveConfig, LiveSetup};
use scenarios::tls_middlebox::relay::Middlebox;
use scenarios::tls_middlebox::service::{Call, Client, EngineLimits, SERVICE, Trust};
use scenarios::tls_middlebox::share::ShareAgent;
use scenarios::tls_middlebox::{Selection, TlsMiddlebox};

use crate::Exit;
use crate::args::{
    MiddleboxArgs, MiddleboxBackend, MiddleboxCommand, RelayArgs, ShareArgs, SwitchlessMode,
};
use crate::atomic::write_atomically;
use crate::progress::Bar;

/// `ccbench middlebox ...`.
pub fn middlebox(args: MiddleboxArgs, registry: &Registry) -> Result<ExitCode> {
    match args.command {
        Some(MiddleboxCommand::Share(s)) => share(s),
        None => relay(args.relay, registry),
    }
}

/// The rule set of `--rules`: one pattern a line; blank lines and lines starting with `#`
/// skipped; `hex:` before a pattern gives its bytes in hex.
fn load_rules(path: Option<&Path>) -> Result<Vec<Vec<u8>>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the rules file {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let pattern = match line.strip_prefix("hex:") {
            Some(h) => harness::hex::unhex(h.trim())
                .map_err(|e| Exit::usage(format!("{} line {}: {e}", path.display(), i + 1)))?,
            None => line.as_bytes().to_vec(),
        };
        out.push(pattern);
    }
    Ok(out)
}

/// Keeps the session's records in memory: written whole at the end.
#[derive(Default)]
struct Records(Mutex<Vec<Record>>);

impl Emit for Records {
    fn emit(&self, record: &Record) -> Result<(), ScenarioError> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record.clone());
        Ok(())
    }
}

/// The synthetic flows of `--switchless advisor`'s load pass (the scenario's default).
const ADVISOR_FLOWS: usize = 32;

/// A selection in words: `none`, or the switchless ecalls and `batched`.
fn describe_choice(s: &Selection) -> String {
    match s.describe().as_str() {
        "none" => "none (regular ecalls, one a record)".to_owned(),
        d => d.to_owned(),
    }
}

fn bind(addr: &str, what: &str) -> Result<TcpListener> {
    TcpListener::bind(addr).with_context(|| format!("listening on {addr} ({what})"))
}

/// Sets `stop` after `duration`, unless it is set first.
fn stop_after(stop: &Arc<AtomicBool>, duration: Option<f64>) {
    let Some(d) = duration else { return };
    let stop = Arc::clone(stop);
    let end = Instant::now() + Duration::from_secs_f64(d);
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::SeqCst);
    });
}

fn relay(a: RelayArgs, registry: &Registry) -> Result<ExitCode> {
    let (Some(listen), Some(upstream), Some(share_listen)) =
        (&a.listen, &a.upstream, &a.share_listen)
    else {
        return Err(Exit::usage("--listen, --upstream and --share-listen are required").into());
    };
    let patterns = load_rules(a.rules.as_deref())?;
    let out_dir = a.out.clone().unwrap_or_else(crate::run::default_out_dir);
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("creating the output folder {}", out_dir.display()))?;
    let relay_l = bind(listen, "--listen")?;
    let share_l = bind(share_listen, "--share-listen")?;

    let options = RunOptions {
        preset: Preset::Full,
        duration: a.duration.map(Duration::from_secs_f64),
        platform_key_dir: a.platform_key_dir.clone(),
        ..RunOptions::quick(out_dir.clone())
    };
    let records = Records::default();
    let stop = crate::run::install_ctrlc(true);
    let bar = Bar::new(true);
    let ctx = Context::new(&options, &records, &bar, &stop);
    records.emit(&Record::new(
        "middlebox",
        "host",
        measure::params! {},
        Body::Env(crate::run::capture_env()),
    ))?;

    let backend = match a.backend {
        MiddleboxBackend::Native => Backend::Native,
        MiddleboxBackend::Sandbox => Backend::Sandbox,
    };
    let mut setup = match a.switchless {
        SwitchlessMode::None => LiveSetup::default(),
        SwitchlessMode::All | SwitchlessMode::Advisor if backend == Backend::Native => {
            return Err(Exit::usage(
                "--switchless all and --switchless advisor need --backend sandbox",
            )
            .into());
        }
        SwitchlessMode::All => LiveSetup {
            selection: Selection {
                switchless: Call::ALL.iter().map(|c| u32::from(*c)).collect(),
                batched: false,
            },
            advised: false,
        },
        SwitchlessMode::Advisor => {
            eprintln!(
                "middlebox: profiling the enclave's ecalls on synthetic 1 KiB flows for \
                 --switchless advisor..."
            );
            let selection = match TlsMiddlebox.advise_relay(&ctx, ADVISOR_FLOWS) {
                Ok(s) if !stop.load(Ordering::Relaxed) => s,
                // Ctrl-C while profiling: a choice from an interrupted profile is not
                // acted on, and nothing was relayed.
                Ok(_) | Err(ScenarioError::Cancelled) => {
                    eprintln!(
                        "middlebox: interrupted while profiling for --switchless advisor; \
                         nothing was relayed or written"
                    );
                    return Ok(ExitCode::from(crate::EXIT_INTERRUPTED));
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e)
                        .context("profiling the middlebox for --switchless advisor"));
                }
            };
            eprintln!(
                "middlebox: the advisor chose: {} (its verdicts are in the records)",
                describe_choice(&selection)
            );
            LiveSetup {
                selection,
                advised: true,
            }
        }
    };
    setup.selection.batched |= a.batch;
    let ecalls = &setup.selection.switchless;
    let config = if ecalls.is_empty() {
        Config::regular(backend)
    } else {
        Config::switchless(1)
    };
    // The platform keys: the enclave quotes its engine key with them.
    let mut builder =
        boundary::with_sealing(&ctx, config.builder(&ctx, SERVICE, ecalls, &[])).tcs(MAX_TCS);
    let batch_limits = BatchLimits::default().clamped();
    if setup.selection.batched {
        builder = batch_limits.slots_for_batches(builder);
    }
    let enclave = builder
        .start(registry)
        .context("starting the middlebox enclave")?;
    let limits = EngineLimits {
        max_flows: a.max_flows,
        max_pending_shares: a.max_flows,
    };
    let pattern_refs: Vec<&[u8]> = patterns.iter().map(Vec::as_slice).collect();
    let mut mb = Middlebox::start(Client::new(&enclave), &limits, &pattern_refs)
        .context("starting the middlebox's engine")?;
    mb.share_wait = Duration::from_secs_f64(a.share_wait);
    if setup.selection.batched {
        mb = mb.with_batching(batch_limits);
    }
    let relay_addr = relay_l.local_addr()?;
    let share_addr = share_l.local_addr()?;
    eprintln!(
        "middlebox: relaying {relay_addr} -> {upstream}; key shares on {share_addr} ({}, \
         ecalls: {}, {} rule patterns); Ctrl-C to stop",
        config.title(),
        describe_choice(&setup.selection),
        patterns.len()
    );
    stop_after(&stop, a.duration);
    let cfg = LiveConfig {
        upstream: upstream.clone(),
        connect_timeout: Duration::from_secs(10),
        status_every: (!a.quiet && a.status_every > 0.0)
            .then(|| Duration::from_secs_f64(a.status_every)),
    };
    let report = live::serve(&mb, &cfg, relay_l, share_l, &stop, &|s| {
        eprintln!("middlebox: {s}")
    })
    .context("serving")?;
    eprintln!(
        "middlebox: stopped after {:.1} s: {}",
        report.wall.as_secs_f64(),
        live::Status::of(&mb)
    );
    // What went wrong is in the records and the report; the terminal says that it did.
    if let Some(first) = report.upstream_errors.first() {
        eprintln!(
            "middlebox: {} connection(s) could not reach the upstream (first: {first})",
            report.upstream_failures
        );
    }
    if let Some(first) = report.agents.errors.first() {
        eprintln!(
            "middlebox: {} share agent connection(s) broke (first: {first})",
            report.agents.broken
        );
    }
    let trace = enclave.trace();
    live::emit_records(&ctx, &report, &config, &setup, Some(&trace))?;
    drop(mb);
    drop(enclave);

    let records = records
        .0
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let results = out_dir.join("results.jsonl");
    let mut text = String::new();
    for r in &records {
        text.push_str(&to_line(r)?);
    }
    write_atomically(&results, |f| std::io::Write::write_all(f, text.as_bytes()))?;
    let written = report::write_report(&records, &out_dir, &report::Options::default())
        .with_context(|| format!("writing the report into {}", out_dir.display()))?;
    eprintln!(
        "middlebox: wrote {}, {} and {}",
        results.display(),
        written.markdown.display(),
        written.html.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn share(a: ShareArgs) -> Result<ExitCode> {
    let trust = Trust::of_this_binary(a.platform_key_dir.as_deref())
        .context("establishing what to trust")?;
    let timeout = Duration::from_secs_f64(a.timeout);
    // Nothing is read from the key log before the middlebox's quote verified.
    let mut agent = ShareAgent::connect(&a.to, &trust, timeout)?;
    let m = trust
        .measurement
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    eprintln!(
        "share agent: the middlebox at {} runs the enclave measured {m}... on this platform; \
         following {}",
        a.to,
        a.keylog.display()
    );
    let stop = crate::run::install_ctrlc(true);
    stop_after(&stop, a.duration);
    let start = if a.from_end {
        Start::End
    } else {
        Start::Beginning
    };
    let mut follower = KeylogFollower::new(&a.keylog, start);
    let poll = Duration::from_secs_f64(a.poll);
    let (mut delivered, mut held, mut refused) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let lines = follower
            .poll()
            .with_context(|| format!("reading the key log {}", a.keylog.display()))?;
        for line in lines {
            match line {
                Ok(entry) => match agent.share(&entry)? {
                    ShareStatus::Delivered => delivered += 1,
                    ShareStatus::Held => held += 1,
                    ShareStatus::Refused(why) => {
                        refused += 1;
                        eprintln!("share agent: a share was refused: {why}");
                    }
                },
                // Names the line, never its bytes.
                Err(e) => eprintln!("share agent: skipped {e}"),
            }
        }
        std::thread::sleep(poll);
    }
    let c = follower.counts();
    eprintln!(
        "share agent: {} shares sent ({delivered} delivered, {held} held for flows not seen \
         yet, {refused} refused); key log: {} other labels, {} comments, {} malformed lines, \
         reopened {} times",
        delivered + held + refused,
        c.other_labels,
        c.comments,
        c.malformed,
        c.reopened
    );
    Ok(ExitCode::SUCCESS)
}
