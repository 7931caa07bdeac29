//! The middlebox as a service that real TLS clients go through (`ccbench middlebox`): an
//! accept loop that relays each connection to the upstream server through the same
//! [`Middlebox`] the scenario measures, and a share port where share agents hand in key
//! shares ([`share::serve_agent`]). Until stopped; then the flows are closed and their
//! counts returned ([`LiveReport`]), which [`emit_records`] turns into records.
//!
//! Faults are per flow or per agent: an upstream that refuses is counted and the client's
//! connection closed; an agent that disconnects or sends garbage loses its connection and is
//! counted; the other flows and agents keep going.

use std::io::ErrorKind;
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use enclave::{AdvisorConfig, TraceSnapshot};
use harness::boundary::{self, Config};
use harness::{Context, ScenarioError};
use measure::env::MachineTicks;
use measure::record::{Body, Check, CheckSubject, Table, Value, Verdict};

use super::Selection;
use super::book::BookCounts;
use super::relay::{DirReport, FlowReport, Middlebox};
use super::share;

/// How the live middlebox runs.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// The server every accepted connection is relayed to.
    pub upstream: String,
    /// How long connecting to the upstream may take.
    pub connect_timeout: Duration,
    /// A status line this often ([`Status`]); `None`: none.
    pub status_every: Option<Duration>,
}

/// How share agents' connections went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentCounts {
    /// Agents that connected.
    pub connected: u64,
    /// Shares they sent.
    pub shares: u64,
    /// Connections the agent closed between shares.
    pub closed: u64,
    /// Connections that broke (a reset, a timeout mid-frame, something that is not a share).
    pub broken: u64,
    /// The last few reasons a connection broke.
    pub errors: Vec<String>,
}

/// What a live session did.
#[derive(Debug, Clone, Default)]
pub struct LiveReport {
    /// Every flow, in the order they ended.
    pub flows: Vec<FlowReport>,
    /// Connections whose upstream could not be reached.
    pub upstream_failures: u64,
    /// The last few reasons.
    pub upstream_errors: Vec<String>,
    /// Share agents.
    pub agents: AgentCounts,
    /// What became of the shares.
    pub book: BookCounts,
    /// From start to stop.
    pub wall: Duration,
    /// Cores the machine left idle over the session (from `/proc/stat`), for the advisor.
    pub idle_cores: Option<f64>,
    /// The batcher's limits, when the relay batched.
    pub batching: Option<super::batch::BatchLimits>,
}

/// A running total, for the periodic status line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// Flows accepted, and open now.
    pub flows: u64,
    /// Flows open now.
    pub open: u64,
    /// Bytes forwarded, both directions.
    pub bytes: u64,
    /// Application records the enclave decrypted.
    pub app_records: u64,
    /// Pattern matches.
    pub matches: u64,
    /// Encrypted records not inspected.
    pub uninspected: u64,
    /// Shares handed to the enclave.
    pub shares: u64,
}

impl Status {
    /// The totals now.
    pub fn of(mb: &Middlebox<'_>) -> Status {
        let s = mb.stats();
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        Status {
            flows: get(&s.flows),
            open: get(&s.open),
            bytes: get(&s.bytes),
            app_records: get(&s.app_records),
            matches: get(&s.matches),
            uninspected: get(&s.uninspected),
            shares: mb.book().counts().delivered,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "flows {} ({} open), {} bytes relayed, {} records decrypted, {} matches, {} \
             uninspected, {} shares",
            self.flows,
            self.open,
            self.bytes,
            self.app_records,
            self.matches,
            self.uninspected,
            self.shares
        )
    }
}

/// How often the listeners look for new connections and for the stop flag.
const ACCEPT_TICK: Duration = Duration::from_millis(20);
/// Reasons kept per kind of failure.
const KEEP_ERRORS: usize = 8;

fn keep(errors: &mut Vec<String>, e: String) {
    if errors.len() < KEEP_ERRORS {
        errors.push(e);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each update is whole before the lock is released.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Connects to the first of `upstream`'s addresses that answers.
fn connect_upstream(upstream: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(ErrorKind::NotFound, "the address resolves to nothing");
    for a in upstream.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Serves until `stop` is set: relays connections accepted on `relay` to the upstream,
/// and key shares from agents on `shares`. Then stops the middlebox (open flows close at
/// their next read tick) and returns once every flow and agent connection has ended.
/// `status` gets the running totals every [`LiveConfig::status_every`].
pub fn serve(
    mb: &Middlebox<'_>,
    cfg: &LiveConfig,
    relay: TcpListener,
    shares: TcpListener,
    stop: &AtomicBool,
    status: &(dyn Fn(&Status) + Sync),
) -> std::io::Result<LiveReport> {
    relay.set_nonblocking(true)?;
    shares.set_nonblocking(true)?;
    let flows = Mutex::new(Vec::new());
    let upstream = Mutex::new((0u64, Vec::new()));
    let agents = Mutex::new(AgentCounts::default());
    let stopped = || stop.load(Ordering::Relaxed);
    let ticks0 = MachineTicks::read();
    let start = Instant::now();
    std::thread::scope(|s| {
        // Inspection of batched records, off the relay threads.
        s.spawn(|| mb.serve_inspection(stop));
        // The share port.
        s.spawn(|| {
            while !stopped() {
                match shares.accept() {
                    Ok((mut stream, _)) => {
                        lock(&agents).connected += 1;
                        let agents = &agents;
                        s.spawn(move || {
                            let setup = stream
                                .set_nonblocking(false)
                                .and_then(|()| stream.set_read_timeout(Some(mb.tick)))
                                .and_then(|()| stream.set_write_timeout(Some(mb.idle)));
                            let served = setup.map_err(share::WireError::Io).and_then(|()| {
                                share::serve_agent(
                                    &mut stream,
                                    mb.engine(),
                                    |share| mb.offer_share(share),
                                    || !stopped(),
                                )
                            });
                            let mut a = lock(agents);
                            match served {
                                Ok(n) => {
                                    a.shares += n;
                                    a.closed += 1;
                                }
                                Err(e) => {
                                    a.broken += 1;
                                    keep(&mut a.errors, e.to_string());
                                }
                            }
                            let _ = stream.shutdown(Shutdown::Both);
                        });
                    }
                    // Nothing waiting (or a failed accept): look again in a tick.
                    Err(_) => std::thread::sleep(ACCEPT_TICK),
                }
            }
        });
        // The status line.
        if let Some(every) = cfg.status_every {
            s.spawn(move || {
                let mut next = Instant::now() + every;
                while !stopped() {
                    std::thread::sleep(ACCEPT_TICK.min(every));
                    if Instant::now() >= next {
                        status(&Status::of(mb));
                        next += every;
                    }
                }
            });
        }
        // The relay port.
        while !stopped() {
            match relay.accept() {
                Ok((down, _)) => {
                    let (flows, upstream) = (&flows, &upstream);
                    s.spawn(move || {
                        let _ = down.set_nonblocking(false);
                        match connect_upstream(&cfg.upstream, cfg.connect_timeout) {
                            Ok(up) => {
                                let report = mb.relay(down, up);
                                lock(flows).push(report);
                            }
                            Err(e) => {
                                let mut u = lock(upstream);
                                u.0 += 1;
                                keep(&mut u.1, format!("upstream {}: {e}", cfg.upstream));
                                let _ = down.shutdown(Shutdown::Both);
                            }
                        }
                    });
                }
                Err(_) => std::thread::sleep(ACCEPT_TICK),
            }
        }
        mb.stop();
    });
    let (upstream_failures, upstream_errors) = upstream
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    Ok(LiveReport {
        flows: flows.into_inner().unwrap_or_else(PoisonError::into_inner),
        upstream_failures,
        upstream_errors,
        agents: agents.into_inner().unwrap_or_else(PoisonError::into_inner),
        book: mb.book().counts(),
        wall: start.elapsed(),
        idle_cores: super::idle_cores_between(ticks0, MachineTicks::read()),
        batching: mb.batcher().map(|b| b.limits()),
    })
}

/// What went wrong in one direction, as text for the flows table (empty: nothing).
fn dir_problems(d: &DirReport, name: &str, out: &mut Vec<String>) {
    if let Some(e) = &d.malformed {
        out.push(format!("{name}: malformed ({e})"));
    }
    if let Some(e) = &d.truncated {
        out.push(format!("{name}: truncated ({e})"));
    }
    if d.no_key_share {
        out.push(format!("{name}: no key share"));
    }
    if d.queue_overflow {
        out.push(format!("{name}: inspection queue overflowed"));
    }
    if d.idle_timeout {
        out.push(format!("{name}: idle"));
    }
    if let Some(e) = &d.io_error {
        out.push(format!("{name}: {e}"));
    }
    for e in &d.enclave_errors {
        out.push(format!("{name}: {e}"));
    }
}

/// A flow's problems, `; `-joined.
pub fn flow_problems(f: &FlowReport) -> String {
    let mut out = Vec::new();
    dir_problems(&f.dirs[0], "client to server", &mut out);
    dir_problems(&f.dirs[1], "server to client", &mut out);
    out.join("; ")
}

fn sum(r: &LiveReport, f: impl Fn(&DirReport) -> u64) -> u64 {
    r.flows.iter().flat_map(|x| x.dirs.iter()).map(f).sum()
}

/// How a live relay's ecalls were made: the selection, and who chose it.
#[derive(Debug, Clone, Default)]
pub struct LiveSetup {
    /// The switchless ecalls and batching.
    pub selection: Selection,
    /// The advisor chose it (`--switchless advisor`), not the options.
    pub advised: bool,
}

/// Emits a live session's records: the flows table, the summary (throughput, shares,
/// agents, upstream failures), the inspection check, and, when the enclave was traced, the
/// per-ecall trace and the advisor's verdicts on it. Every record names the selection
/// (`switchless_ecalls`, `batched`) and who made it (`selected_by`).
pub fn emit_records(
    ctx: &Context<'_>,
    report: &LiveReport,
    config: &Config,
    setup: &LiveSetup,
    trace: Option<&TraceSnapshot>,
) -> Result<(), ScenarioError> {
    let name = super::NAME;
    let backend = config.label();
    let mut params = config.params();
    params.insert("mode".into(), Value::from("live"));
    let s = &setup.selection;
    params.insert(
        "switchless_ecalls".into(),
        Value::from(s.switchless_param()),
    );
    params.insert("batched".into(), Value::from(s.batched));
    if let Some(limits) = &report.batching {
        super::batch_params(&mut params, limits, &s.switchless);
    }
    params.insert(
        "selected_by".into(),
        Value::from(if setup.advised { "advisor" } else { "options" }),
    );
    let rows = report
        .flows
        .iter()
        .map(|f| {
            let [c, s] = &f.dirs;
            let secs = f.duration_ns as f64 / 1e9;
            let bytes = c.bytes + s.bytes;
            vec![
                Value::from(f.flow),
                Value::from(f.client.as_str()),
                Value::from(f.server.as_str()),
                Value::from(secs),
                Value::from(c.bytes),
                Value::from(s.bytes),
                Value::from(if secs > 0.0 {
                    bytes as f64 / secs / 1e6
                } else {
                    0.0
                }),
                Value::from(c.app_records + s.app_records),
                Value::from(c.app_bytes + s.app_bytes),
                Value::from(c.matches + s.matches),
                Value::from(c.queued + s.queued),
                Value::from(c.uninspected + s.uninspected),
                Value::from(c.auth_failures + s.auth_failures),
                Value::from(flow_problems(f)),
            ]
        })
        .collect();
    let flows = Table {
        name: "live_flows".into(),
        title: "Middlebox flows (live)".into(),
        columns: [
            "flow",
            "client",
            "server",
            "seconds",
            "bytes client to server",
            "bytes server to client",
            "MB/s",
            "records decrypted",
            "plaintext bytes",
            "matches",
            "queued for a share",
            "uninspected",
            "authentication failures",
            "problems",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes: vec![
            "Records decrypted, plaintext bytes and matches are application data, both \
             directions; bytes are forwarded unchanged."
                .into(),
        ],
    };
    ctx.emit(name, backend, params.clone(), Body::Table(flows))?;

    let wall = report.wall.as_secs_f64();
    let bytes = sum(report, |d| d.bytes);
    let app_bytes = sum(report, |d| d.app_bytes);
    let b = &report.book;
    let a = &report.agents;
    let row = |what: &str, v: Value| vec![Value::from(what), v];
    let summary = Table {
        name: "live_summary".into(),
        title: "Middlebox session (live)".into(),
        columns: vec!["what".into(), "value".into()],
        rows: vec![
            row("seconds", Value::from(wall)),
            row("flows", Value::from(report.flows.len() as u64)),
            row("bytes relayed", Value::from(bytes)),
            row(
                "relayed MB/s over the session",
                Value::from(if wall > 0.0 {
                    bytes as f64 / wall / 1e6
                } else {
                    0.0
                }),
            ),
            row(
                "records decrypted",
                Value::from(sum(report, |d| d.app_records)),
            ),
            row("plaintext bytes inspected", Value::from(app_bytes)),
            row("matches", Value::from(sum(report, |d| d.matches))),
            row(
                "records queued for a late share",
                Value::from(sum(report, |d| d.queued)),
            ),
            row(
                "records uninspected",
                Value::from(sum(report, |d| d.uninspected)),
            ),
            row(
                "authentication failures",
                Value::from(sum(report, |d| d.auth_failures)),
            ),
            row("upstream failures", Value::from(report.upstream_failures)),
            row("share agents connected", Value::from(a.connected)),
            row("share agent connections broken", Value::from(a.broken)),
            row("shares received", Value::from(a.shares)),
            row("shares delivered to the enclave", Value::from(b.delivered)),
            row("shares held for a flow not seen yet", Value::from(b.held)),
            row("held shares expired", Value::from(b.expired)),
            row("shares refused: flow closed", Value::from(b.refused_closed)),
            row(
                "shares refused: duplicate",
                Value::from(b.refused_duplicate),
            ),
            row("shares refused: too many held", Value::from(b.refused_full)),
            row(
                "shares refused by the enclave",
                Value::from(b.refused_enclave),
            ),
        ],
        source: None,
        notes: report
            .upstream_errors
            .iter()
            .chain(&a.errors)
            .cloned()
            .collect(),
    };
    ctx.emit(name, backend, params.clone(), Body::Table(summary))?;

    let uninspected = sum(report, |d| d.uninspected);
    let troubled: Vec<_> = report
        .flows
        .iter()
        .filter(|f| !flow_problems(f).is_empty())
        .map(|f| f.flow.to_string())
        .collect();
    let verdict = if uninspected == 0 && troubled.is_empty() && report.upstream_failures == 0 {
        Verdict::Pass
    } else {
        Verdict::Warn
    };
    let check = Check {
        name: "live-inspection".into(),
        verdict,
        message: format!(
            "{} flows; {} records decrypted, {} uninspected; flows with problems: {}; {} \
             upstream failures",
            report.flows.len(),
            sum(report, |d| d.app_records),
            uninspected,
            if troubled.is_empty() {
                "none".to_owned()
            } else {
                troubled.join(", ")
            },
            report.upstream_failures
        ),
        subject: CheckSubject::Run,
    };
    ctx.emit(name, backend, params, Body::Check(check))?;

    if let Some(t) = trace {
        boundary::emit_trace(ctx, name, config, t, &super::call_name)?;
        let advisor = AdvisorConfig {
            spare_cores: report.idle_cores,
            ..AdvisorConfig::default()
        };
        boundary::emit_advice(ctx, name, config, t, &advisor, &super::call_name)?;
    }
    Ok(())
}
