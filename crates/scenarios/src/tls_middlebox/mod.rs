//! Scenario `tls-middlebox`: SGXBox's application (Kim, Applied Sciences 11(18) 8379, 2021)
//! rebuilt on our boundary: a TLS 1.2 middlebox that decrypts and inspects traffic inside an
//! enclave, and the question the paper asked of it: which ecalls should be switchless?
//!
//! # What runs
//!
//! Clients and servers speak real TLS 1.2 (`rustls`, `ECDHE_RSA_WITH_AES_256_GCM_SHA384`
//! only, certificates from `rcgen`) on loopback, through a TCP relay that never terminates
//! TLS ([`workload`]). Each client shares its master secret out of band through its key log,
//! sealed to the enclave's key. The relay reassembles records on the host ([`records`]) and
//! hands each encrypted one to the enclave, which derives the key block with the TLS 1.2
//! PRF ([`keys`]), decrypts with AES-256-GCM and counts a rule set's patterns
//! ([`service`], seven ecalls after SGXBox's). Secrets stay inside: no reply, error or
//! record carries one.
//!
//! The engine's key reaches clients through the host, so the enclave quotes it
//! (`enclave::attest`, **emulated**: an Ed25519 platform key derived from the platform root
//! key, no hardware), and each pass's clients verify the quote against the platform identity
//! and the enclave measurement they know ([`service::Trust`]) before sealing any share; a
//! refused quote means no share is sent and the pass fails, saying why. Every middlebox
//! record carries `attestation = "emulated"`.
//!
//! # What is measured, and why
//!
//! 1. **Per-ecall profile and the advisor**: one flow through the sandbox with regular
//!    ecalls at 1 KiB records (one, so that the trace times the crossing and not the wait
//!    for a core), every ecall traced (count, time inside, in transition), SGXBox's
//!    efficiency (inside over total) per ecall, and `enclave`'s advisor's verdict. Its
//!    choice of switchless ecalls is the configuration "advisor's selection".
//! 2. **Throughput by configuration and record size**: `flows` long flows of 256 B .. 16 KiB
//!    records, for direct (no middlebox), the middlebox on `native`, `sandbox` with regular
//!    ecalls, all seven switchless, and the advisor's selection; decrypted bytes/s and
//!    records/s at the servers, and the middlebox's CPU. Every pass is checked: each server
//!    got its client's bytes unchanged, the enclave decrypted every application record and
//!    found exactly the planted patterns. A failure fails the run.
//! 3. **Per-record breakdown** at 1 KiB (SGXBox's Fig. 5): host time, time inside, and
//!    transition or switchless wait, per configuration ([`analysis::Breakdown`]).
//! 4. **Core affinity** (SGXBox's Table 1), in [`affinity`].
//!
//! `--transition-cycles sgxbox-ecall` runs the same under the modelled SGX transition cost.
//! The paper's figures sit beside ours, labelled as published.

pub mod affinity;
pub mod analysis;
pub mod batch;
pub mod book;
pub mod keylog;
pub mod keys;
pub mod live;
pub mod pki;
pub mod records;
pub mod relay;
pub mod service;
pub mod share;
pub mod workload;

use std::time::Duration;

use enclave::{
    Advice, AdvisorConfig, Backend, Direction, MAX_TCS, Recommendation, Registry, TraceSnapshot,
};
use measure::env::MachineTicks;
use measure::record::{Body, Cost, CostFigure, Params, Value};
use measure::sampler::Samples;
use measure::sweep::available_cores;

use analysis::{Breakdown, Row};
use batch::BatchLimits;
use harness::boundary::{self, Config};
use harness::{At, Context, Preset, RunOptions, Scenario, ScenarioError};
use pki::Pki;
use relay::Middlebox;
use service::{Call, Client, EngineLimits, SERVICE, Trust};
use workload::{PATTERNS, PassConfig, PassResult};

pub use service::register;

const NAME: &str = "tls-middlebox";

/// The record size of the profile, the breakdown and the headline (the paper's 1 KiB).
pub const PROFILE_SIZE: usize = 1024;

/// A way of running the flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// Client to server, no middlebox.
    Direct,
    /// The middlebox with its service in-process.
    Native,
    /// The sandbox, regular ecalls.
    Sandbox,
    /// The sandbox, records of all flows batched into one ecall ([`batch`]).
    Batched,
    /// The sandbox, all seven ecalls switchless.
    AllSwitchless,
    /// The sandbox, the ecalls the advisor chose switchless.
    Advisor,
    /// The sandbox, batches posted through a switchless call: a shared ring of batches that
    /// an enclave worker drains without a crossing (LightBox's etap shape), measured beside
    /// [`Setup::Batched`], the shape the relay uses.
    Ring,
}

impl Setup {
    /// The ecalls this setup makes switchless and whether it batches; the advisor's
    /// setup runs `advised`.
    fn selection(self, advised: &Selection) -> Selection {
        match self {
            Setup::AllSwitchless => Selection {
                switchless: Call::ALL.iter().map(|&c| c.into()).collect(),
                batched: false,
            },
            Setup::Advisor => advised.clone(),
            Setup::Batched => Selection {
                switchless: Vec::new(),
                batched: true,
            },
            Setup::Ring => Selection {
                switchless: vec![Call::ReproduceSslContextBatch.into()],
                batched: true,
            },
            Setup::Direct | Setup::Native | Setup::Sandbox => Selection::default(),
        }
    }

    /// Every setup, in run order (the advisor's after the sandbox's profile).
    pub const ALL: [Setup; 7] = [
        Setup::Direct,
        Setup::Native,
        Setup::Sandbox,
        Setup::Batched,
        Setup::Ring,
        Setup::AllSwitchless,
        Setup::Advisor,
    ];

    /// The name in tables and in `params.config`.
    pub fn title(self) -> &'static str {
        match self {
            Setup::Direct => "direct (no middlebox)",
            Setup::Native => "middlebox native",
            Setup::Sandbox => "middlebox sandbox regular",
            Setup::Batched => "middlebox sandbox batched",
            Setup::AllSwitchless => "middlebox sandbox all switchless",
            Setup::Advisor => "middlebox sandbox advisor's selection",
            Setup::Ring => "middlebox sandbox batched through a ring (switchless)",
        }
    }

    /// The `config` param.
    pub fn key(self) -> &'static str {
        match self {
            Setup::Direct => "direct",
            Setup::Native => "native",
            Setup::Sandbox => "regular",
            Setup::Batched => "batched",
            Setup::AllSwitchless => "all-switchless",
            Setup::Advisor => "advisor",
            Setup::Ring => "ring",
        }
    }
}

/// How much a run does.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Concurrent flows.
    pub flows: usize,
    /// Plaintext bytes per record, one throughput point each.
    pub sizes: Vec<usize>,
    /// Application bytes all flows send in the warm-up round, per record size (and in every
    /// round without a `round_target`).
    pub bytes_per_pass: u64,
    /// Records each flow sends in one round at least, whatever `bytes_per_pass` gives: a
    /// round of the largest records must outlast a scheduler time slice (2 MiB are 4 records
    /// a flow at 16 KiB, a round of about 5 ms).
    pub min_records_per_flow: u64,
    /// Measured rounds per configuration and size (after one warm-up round), over the same
    /// long-running flows.
    pub runs: usize,
    /// How long a measured round lasts, about: its records are sized from the warm-up
    /// round's pace ([`PassConfig::round_target`]). `None`: as many as the warm-up.
    pub round_target: Option<Duration>,
    /// A pattern in every this-many records.
    pub plant_every: usize,
    /// Switchless workers (enclave side; no ocalls are made).
    pub workers: usize,
    /// Socket timeouts.
    pub timeout: Duration,
    /// Calls per affinity measurement.
    pub affinity_calls: u64,
    /// The bounds of one batch in the `batched` configuration (and the advisor's, when it
    /// advises batching).
    pub batch: BatchLimits,
    /// Pairs of passes, `native` and `batched` back to back, that the batched configuration's
    /// target checks measure at their record sizes after the sweep, which ran the two
    /// minutes apart ([`analysis::BATCHED_TARGETS`]).
    pub share_pairs: usize,
}

/// The plan: 32 long-running flows; a warm-up round of 8 MiB (quick) or 16 MiB (full), a
/// second warm-up sized from the first's pace, then 3 (quick) or 5 (full) measured rounds of
/// about 150 ms (quick) or 400 ms (full) each, sized from the second warm-up's pace, so that
/// every configuration is measured over the same time however fast it is. Fixed rounds of
/// 2 MiB (a few ms) had not reached the flows' steady state: the native middlebox's
/// records/s at 1 KiB rose by about 40% from 2 to 8 MiB rounds, the sandbox's much less, so
/// short rounds flattered the sandbox; and rounds of 8 MiB (10-20 ms) still moved by 10-15
/// points of the sandbox's share from run to run. Sized from the first warm-up alone (its
/// ramp-up included), quick rounds of 32 flows lasted 29-118 ms instead of 150, most 30-70
/// (2026-11-26, 16 KiB and 1 KiB records); from the second, 93-196 ms. `--threads N` sets
/// the number of flows.
pub fn plan(options: &RunOptions) -> Plan {
    let quick = options.preset == Preset::Quick;
    Plan {
        flows: options
            .threads
            .as_ref()
            .and_then(|t| t.iter().copied().max())
            .unwrap_or(32)
            .clamp(1, 256),
        sizes: vec![256, 1024, 4096, 16384],
        bytes_per_pass: if quick { 8 << 20 } else { 16 << 20 },
        min_records_per_flow: 16,
        runs: if quick { 3 } else { 5 },
        round_target: Some(Duration::from_millis(if quick { 150 } else { 400 })),
        plant_every: 4,
        workers: 1,
        timeout: Duration::from_secs(20),
        affinity_calls: if quick { 20_000 } else { 200_000 },
        batch: BatchLimits::default(),
        share_pairs: 2,
    }
}

impl Plan {
    /// The pass of one record size.
    pub fn pass(&self, size: usize) -> PassConfig {
        let records = (self.bytes_per_pass / size as u64 / self.flows as u64)
            .max(self.min_records_per_flow)
            .max(1);
        PassConfig {
            flows: self.flows,
            record_size: size,
            records_per_flow: records,
            rounds: self.runs + 2,
            plant_every: self.plant_every,
            timeout: self.timeout,
            round_target: self.round_target,
        }
    }
}

fn call_name(d: Direction, id: u32) -> String {
    match (d, Call::try_from(id)) {
        (Direction::Ecall, Ok(c)) => c.name().to_owned(),
        _ => id.to_string(),
    }
}

/// A process's CPU time (user + system, all its threads), from `/proc`; `None` when it
/// cannot be read.
fn process_cpu_ns(pid: Option<u32>) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    cpu_ns_of_stat(&stat, rustix::param::clock_ticks_per_second())
}

/// Cores left idle between two `/proc/stat` readings (unknown where either is).
fn idle_cores_between(before: Option<MachineTicks>, after: Option<MachineTicks>) -> Option<f64> {
    after?.idle_cores_since(&before?)
}

/// The cores spare for switchless workers: those our processes left (`cores - busy`), but
/// no more than the whole machine left idle, since other processes' load is invisible in
/// our own CPU time (a busy neighbour makes our processes wait, and look light). Unknown
/// when our own use is; the machine's idle time only lowers it.
fn spare_cores(cores: u64, busy: Option<f64>, idle: Option<f64>) -> Option<f64> {
    let ours = cores as f64 - busy?;
    Some(idle.map_or(ours, |i| ours.min(i)))
}

/// utime + stime of a `/proc/PID/stat` line, in ns, at `hz` clock ticks per second.
fn cpu_ns_of_stat(stat: &str, hz: u64) -> Option<u64> {
    // Fields after the command name (which may hold spaces): utime is the 14th field.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some((ticks(11)? + ticks(12)?) * 1_000_000_000 / hz.max(1))
}

/// Time per record of each measured round of `r` (after its warm-up rounds) of `flows`
/// flows; a round whose time is unknown is left out, not counted as 0.
fn per_record(r: &PassResult, flows: usize) -> Vec<f64> {
    r.wall_ns
        .iter()
        .zip(&r.records_per_round)
        .skip(r.warm_up_rounds)
        .filter_map(|(w, &n)| Some(*w.as_ref()? as f64 / (n * flows as u64).max(1) as f64))
        .collect()
}

/// Records of all flows in one measured round of `r` (every measured round has as many).
fn measured_round_records(r: &PassResult, flows: usize) -> u64 {
    r.records_per_round
        .get(r.warm_up_rounds)
        .copied()
        .unwrap_or(0)
        * flows as u64
}

/// One configuration at one record size.
struct Outcome {
    setup: Setup,
    /// Records of all flows in each measured round.
    round_records: u64,
    /// The boundary configuration used (none: direct).
    config: Option<Config>,
    /// The ecalls made switchless.
    switchless: Vec<u32>,
    size: usize,
    row: Row,
    trace: Option<TraceSnapshot>,
    /// Cores kept busy during the pass: the CPU time of this process (clients, servers,
    /// relay) and of the enclave process over the wall time.
    busy_cores: Option<f64>,
    /// Cores the whole machine left idle during the pass (`/proc/stat`): what other
    /// processes used is not spare either, though our own CPU time cannot see it.
    idle_cores: Option<f64>,
    breakdown: Option<Breakdown>,
    problems: Vec<String>,
    /// The clients' check of the enclave's key (none without a middlebox).
    attestation: workload::Attestation,
    /// With batching: the bounds, and the ecalls made and records they carried.
    batching: Option<(BatchLimits, u64, u64)>,
    /// With batching: whether the inspection threads ran at `batch::SERVE_NICE`.
    serving_priority: Option<bool>,
}

/// How the sandbox's ecalls are made in one configuration: the scenario's and, with
/// `--switchless advisor`, the live relay's ([`TlsMiddlebox::advise_relay`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The ecalls made switchless (ids of [`Call`]).
    pub switchless: Vec<u32>,
    /// Records batched across flows ([`batch`]).
    pub batched: bool,
}

/// The batcher's limits as params, and, where the batch call is switchless, the size of
/// its request slots (sized for a whole batch: [`BatchLimits::max_request_bytes`]).
pub(crate) fn batch_params(p: &mut Params, limits: &BatchLimits, switchless: &[u32]) {
    p.insert("batch_max_records".into(), Value::from(limits.max_records));
    p.insert("batch_max_bytes".into(), Value::from(limits.max_bytes));
    p.insert(
        "batch_queue_bytes".into(),
        Value::from(limits.max_queued_bytes),
    );
    if switchless.contains(&Call::ReproduceSslContextBatch.into()) {
        p.insert(
            "switchless_slot_bytes".into(),
            Value::from(limits.max_request_bytes()),
        );
    }
}

/// The `switchless_ecalls` param: the ecalls' names comma-separated, or `none`.
fn switchless_names(ids: &[u32]) -> String {
    if ids.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<String> = ids
        .iter()
        .map(|&id| call_name(Direction::Ecall, id))
        .collect();
    names.join(",")
}

impl Selection {
    /// The `switchless_ecalls` param of records made with this selection.
    pub fn switchless_param(&self) -> String {
        switchless_names(&self.switchless)
    }

    /// `"none"`, or the switchless ecalls and `batched`, comma-separated.
    pub fn describe(&self) -> String {
        match (self.switchless.is_empty(), self.batched) {
            (_, false) => self.switchless_param(),
            (true, true) => "batched".into(),
            (false, true) => format!("{},batched", self.switchless_param()),
        }
    }
}

/// What the clients and servers of every pass hold: the certificates, and what the clients
/// trust before sealing a key share.
struct Endpoints {
    pki: Pki,
    trust: Trust,
}

/// The `tls-middlebox` scenario.
pub struct TlsMiddlebox;

impl TlsMiddlebox {
    fn config(setup: Setup, plan: &Plan) -> Option<Config> {
        match setup {
            Setup::Direct => None,
            Setup::Native => Some(Config::regular(Backend::Native)),
            Setup::Sandbox | Setup::Batched => Some(Config::regular(Backend::Sandbox)),
            Setup::AllSwitchless | Setup::Advisor | Setup::Ring => {
                Some(Config::switchless(plan.workers))
            }
        }
    }

    fn params(o: &Outcome, plan: &Plan) -> Params {
        let mut p = o.config.as_ref().map(|c| c.params()).unwrap_or_default();
        p.insert("config".into(), Value::from(o.setup.key()));
        p.insert("record_size_bytes".into(), Value::from(o.size));
        p.insert("flows".into(), Value::from(plan.flows));
        if let Some((limits, batches, records)) = o.batching {
            p.insert("batched".into(), Value::from(true));
            batch_params(&mut p, &limits, &o.switchless);
            if let Some(raised) = o.serving_priority {
                // Whether the inspection threads ran ahead of the relay's (`batch::serve`).
                p.insert(
                    "inspection_nice".into(),
                    Value::from(if raised { batch::SERVE_NICE } else { 0 }),
                );
            }
            if batches > 0 {
                p.insert(
                    "mean_batch_records".into(),
                    Value::from((records as f64 / batches as f64 * 10.0).round() / 10.0),
                );
            }
        }
        if o.config.is_some() {
            // The clients verified the enclave's quote before sealing their shares; the
            // quote is signed by an emulated platform key, not by hardware.
            p.insert("attestation".into(), Value::from("emulated"));
        }
        if matches!(o.setup, Setup::AllSwitchless | Setup::Advisor | Setup::Ring) {
            p.insert(
                "switchless_ecalls".into(),
                Value::from(switchless_names(&o.switchless)),
            );
        }
        p
    }

    fn backend(o: &Outcome) -> &'static str {
        o.config.as_ref().map_or("direct", |c| c.label())
    }

    /// One pass of one setup and size: `plan.runs` measured rounds after a warm-up round,
    /// over the same flows. The advisor's setup with nothing to make switchless runs with
    /// regular ecalls and no workers.
    fn measure(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        endpoints: &Endpoints,
        setup: Setup,
        size: usize,
        selection: &Selection,
    ) -> Result<Outcome, ScenarioError> {
        let switchless = selection.switchless.as_slice();
        let pass = plan.pass(size);
        let mut row = Row {
            config: setup.title().to_owned(),
            record_size: size,
            ns_per_record: Vec::new(),
            cpu_ns_per_record: None,
        };
        ctx.check_cancel()?;
        let Some(config) = Self::config(setup, plan) else {
            let r = workload::run_pass(&pass, &endpoints.pki, None, None)?;
            row.ns_per_record = per_record(&r, plan.flows);
            return Ok(Outcome {
                setup,
                round_records: measured_round_records(&r, plan.flows),
                config: None,
                switchless: Vec::new(),
                size,
                row,
                trace: None,
                busy_cores: None,
                idle_cores: None,
                breakdown: None,
                problems: analysis::problems(&r, plan.flows, false),
                attestation: r.attestation,
                batching: None,
                serving_priority: None,
            });
        };
        let config = if switchless.is_empty() {
            Config::regular(config.backend)
        } else {
            config
        };
        let registry = register(Registry::new());
        // The platform keys: the enclave quotes its engine key with them.
        let mut builder =
            boundary::with_sealing(ctx, config.builder(ctx, SERVICE, switchless, &[]))
                .tcs((2 * plan.flows).clamp(2, MAX_TCS));
        if selection.batched {
            builder = plan.batch.clamped().slots_for_batches(builder);
        }
        let enclave = boundary::start(builder, &registry)?;
        let client = Client::new(&enclave);
        let limits = EngineLimits {
            max_flows: u32::try_from(plan.flows * 2).unwrap_or(u32::MAX),
            max_pending_shares: u32::try_from(plan.flows * 2).unwrap_or(u32::MAX),
        };
        let mut mb = Middlebox::start(client, &limits, &PATTERNS).at("starting the middlebox")?;
        if selection.batched {
            mb = mb.with_batching(plan.batch);
        }
        let cpu0 = process_cpu_ns(enclave.pid());
        let own0 = process_cpu_ns(Some(std::process::id()));
        let ticks0 = MachineTicks::read();
        let wall0 = std::time::Instant::now();
        let r = workload::run_pass(&pass, &endpoints.pki, Some((&mb, &endpoints.trust)), None)?;
        let wall = wall0.elapsed().as_nanos() as f64;
        let idle_cores = idle_cores_between(ticks0, MachineTicks::read());
        let since = |now: Option<u64>, then: Option<u64>| Some(now?.saturating_sub(then?));
        let own = since(process_cpu_ns(Some(std::process::id())), own0);
        // Unknown where `/proc` could not be read: then so are the figures made from it. A
        // native enclave runs in the relay's threads: their CPU time holds its work.
        let enclave_cpu = match enclave.pid() {
            Some(pid) => since(process_cpu_ns(Some(pid)), cpu0),
            None => Some(0),
        };
        let busy_cores = match (own, enclave_cpu) {
            (Some(o), Some(e)) if wall > 0.0 => Some((o + e) as f64 / wall),
            _ => None,
        };
        let problems = analysis::problems(&r, plan.flows, true);
        row.ns_per_record = per_record(&r, plan.flows);
        let round_records = measured_round_records(&r, plan.flows);
        // CPU over the whole pass (handshakes and the warm-up round included), per record.
        let relay_cpu: u64 = r
            .flows
            .iter()
            .flat_map(|f| f.dirs.iter())
            .map(|d| d.cpu_ns)
            .sum();
        let all_records = r.records_per_round.iter().sum::<u64>() * plan.flows as u64;
        row.cpu_ns_per_record =
            enclave_cpu.map(|e| (relay_cpu + e) as f64 / all_records.max(1) as f64);
        let attestation = r.attestation.clone();
        let measured = [r];
        let trace = enclave.trace();
        let (mut inspected, mut busy, mut ecall, mut queue) = (0, 0, 0, 0);
        for d in measured
            .iter()
            .flat_map(|r| r.flows.iter())
            .map(|f| &f.dirs[0])
        {
            inspected += d.inspected;
            busy += d.busy_ns;
            ecall += d.ecall_ns;
            queue += d.queue_ns;
        }
        let breakdown = match mb.batcher() {
            Some(b) => {
                // Means over the timed calls, times all calls (every call is timed on the
                // sandbox, a sample on native).
                let call = trace.get(Direction::Ecall, Call::ReproduceSslContextBatch.into());
                let sum = |mean: fn(&enclave::CallTrace) -> f64| {
                    call.map_or(0.0, |t| mean(t) * t.count as f64)
                };
                Breakdown::batched(
                    (inspected, busy, queue),
                    b.stats().1,
                    sum(enclave::CallTrace::mean_inside_ns),
                    sum(enclave::CallTrace::mean_transition_ns),
                )
            }
            None => {
                let inside = trace
                    .get(Direction::Ecall, Call::ReproduceSslContext.into())
                    .map_or(0.0, |t| t.mean_inside_ns());
                Breakdown::new(inspected, busy, ecall, inside)
            }
        };
        ctx.progress().advance(1);
        Ok(Outcome {
            setup,
            round_records,
            config: Some(config),
            switchless: switchless.to_vec(),
            size,
            row,
            trace: Some(trace),
            busy_cores,
            idle_cores,
            breakdown: Some(breakdown),
            problems,
            attestation,
            serving_priority: mb.batcher().and_then(|b| b.serving_priority()),
            batching: mb.batcher().map(|b| {
                let (batches, records) = b.stats();
                (b.limits(), batches, records)
            }),
        })
    }

    /// The per-ecall profile: one flow of 1 KiB records through the sandbox with regular
    /// ecalls. One flow, so that the trace measures the crossing: with every flow running, a
    /// call's time is mostly its wait for a core (two orders of magnitude more on a 2-core
    /// machine), which no choice of ecall mode removes and which would hide the transition
    /// the advisor weighs.
    fn profile(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        endpoints: &Endpoints,
    ) -> Result<(Outcome, Plan), ScenarioError> {
        let one = Plan {
            flows: 1,
            ..plan.clone()
        };
        let o = self.regular_pass(ctx, &one, endpoints, "the per-ecall profile")?;
        Ok((o, one))
    }

    /// A pass of `plan`'s flows through the sandbox with regular ecalls at 1 KiB records; one
    /// with problems is an error naming `what`.
    fn regular_pass(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        endpoints: &Endpoints,
        what: &str,
    ) -> Result<Outcome, ScenarioError> {
        let o = self.measure(
            ctx,
            plan,
            endpoints,
            Setup::Sandbox,
            PROFILE_SIZE,
            &Selection::default(),
        )?;
        if !o.problems.is_empty() {
            return Err(ScenarioError::step(what, o.problems.join("; ")));
        }
        Ok(o)
    }

    /// The advisor's verdicts on the one-flow profile, given the cores left spare while all
    /// flows run with regular ecalls: emitted as the advice and profile tables. Returns the
    /// ecalls to make switchless.
    fn advise(
        &self,
        ctx: &Context<'_>,
        (profile, one): &(Outcome, Plan),
        spare_cores: Option<f64>,
    ) -> Result<Selection, ScenarioError> {
        let Some(t) = &profile.trace else {
            return Ok(Selection::default());
        };
        let config = Config::regular(Backend::Sandbox);
        let advisor = AdvisorConfig {
            spare_cores,
            ..AdvisorConfig::default()
        };
        let advice = boundary::emit_advice(ctx, NAME, &config, t, &advisor, &call_name)?;
        let chosen = advised(&advice);
        let mut params = Self::params(profile, one);
        let switchless = Selection {
            switchless: chosen.switchless.clone(),
            batched: false,
        };
        params.insert(
            "advised_switchless".into(),
            Value::from(switchless.describe()),
        );
        params.insert("advised_batching".into(), Value::from(chosen.batched));
        if let Some(s) = spare_cores {
            params.insert("spare_cores".into(), Value::from(s));
        }
        ctx.emit(
            NAME,
            config.label(),
            params,
            Body::Table(analysis::profile_table(
                t,
                &advice,
                "sandbox, regular ecalls, 1 KiB records, one flow",
            )),
        )?;
        Ok(chosen)
    }

    fn emit_outcome(
        &self,
        ctx: &Context<'_>,
        plan: &Plan,
        o: &Outcome,
    ) -> Result<(), ScenarioError> {
        let backend = Self::backend(o);
        let params = Self::params(o, plan);
        let samples = Samples {
            iters_per_sample: o.round_records,
            per_iter_ns: o.row.ns_per_record.clone(),
            overhead_ns: None,
        };
        ctx.emit_samples(
            NAME,
            backend,
            params.clone(),
            "record",
            samples,
            Some(o.size as u64),
        )?;
        let what = format!("{}, {}-byte records", o.setup.title(), o.size);
        ctx.emit(
            NAME,
            backend,
            params.clone(),
            Body::Check(analysis::correctness(
                &what,
                o.row.ns_per_record.len(),
                &o.problems,
            )),
        )?;
        if let (Some(t), Some(config)) = (&o.trace, &o.config)
            && config.workers > 0
        {
            ctx.emit(
                NAME,
                backend,
                params.clone(),
                Body::Check(hit_check(t, config)),
            )?;
        }
        if o.size == PROFILE_SIZE
            && let (Some(b), Some(t), Some(config)) = (&o.breakdown, &o.trace, &o.config)
        {
            ctx.emit(
                NAME,
                backend,
                params.clone(),
                Body::Stages(b.stages(&format!("record ({})", o.setup.title()))),
            )?;
            boundary::emit_trace(ctx, NAME, config, t, &call_name)?;
        }
        Ok(())
    }
}

/// Switchless hits and misses per ecall, with a warning where a configuration's workers and
/// the flows' threads oversubscribe the cores.
fn hit_check(trace: &TraceSnapshot, config: &Config) -> measure::record::Check {
    use measure::record::{Check, Verdict};
    let mut parts = Vec::new();
    let (mut hits, mut misses) = (0u64, 0u64);
    for c in trace
        .calls
        .iter()
        .filter(|c| c.switchless_hits + c.switchless_misses > 0)
    {
        let n = c.switchless_hits + c.switchless_misses;
        parts.push(format!(
            "{}: {:.1}% hits of {n}",
            call_name(c.direction, c.call_id),
            c.switchless_hits as f64 / n as f64 * 100.0
        ));
        hits += c.switchless_hits;
        misses += c.switchless_misses;
    }
    let cores = available_cores();
    let mut message = if parts.is_empty() {
        "no switchless calls were made".to_owned()
    } else {
        parts.join("; ")
    };
    let oversubscribed = config.workers as u64 + 1 > cores || cores <= 2;
    if oversubscribed {
        message.push_str(&format!(
            "; {} spinning worker(s) share {cores} core(s) with the relay, client and server \
             threads: oversubscribed",
            config.workers
        ));
    }
    let rate = if hits + misses == 0 {
        0.0
    } else {
        misses as f64 / (hits + misses) as f64
    };
    Check::run(
        "switchless-hits",
        if oversubscribed || rate > 0.05 || hits == 0 {
            Verdict::Warn
        } else {
            Verdict::Pass
        },
        message,
    )
}

/// What the advisor's advice selects: the ecalls it would make switchless, and batching
/// when it advises batching the per-record ecall (`reproduce_ssl_context`), the one the
/// `batched` configuration replaces.
fn advised(advice: &[Advice]) -> Selection {
    let ecall =
        |a: &&Advice, r: Recommendation| a.direction == Direction::Ecall && a.recommendation == r;
    Selection {
        switchless: advice
            .iter()
            .filter(|a| ecall(a, Recommendation::Switchless))
            .map(|a| a.call_id)
            .collect(),
        batched: advice.iter().any(|a| {
            ecall(&a, Recommendation::Batch) && a.call_id == u32::from(Call::ReproduceSslContext)
        }),
    }
}

impl Scenario for TlsMiddlebox {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "SGXBox's TLS 1.2 middlebox: decrypt and inspect in the enclave; throughput by record size, per-ecall profile and advisor, switchless selection, core affinity"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        self.run_plan(ctx, &plan(ctx.options))
    }
}

impl TlsMiddlebox {
    /// The advisor's selection for a relay that serves real traffic (`ccbench middlebox
    /// --switchless advisor`), made before it serves, since the real traffic is not there
    /// yet: the scenario's one-flow profile of the sandbox with regular ecalls at 1 KiB
    /// records, and, for the cores left spare, a pass of `flows` synthetic flows at that
    /// size. The profile and advice tables go to `ctx`'s records.
    pub fn advise_relay(
        &self,
        ctx: &Context<'_>,
        flows: usize,
    ) -> Result<Selection, ScenarioError> {
        let plan = Plan {
            flows: flows.clamp(1, 256),
            sizes: vec![PROFILE_SIZE],
            bytes_per_pass: 1 << 20,
            runs: 1,
            round_target: None,
            ..plan(ctx.options)
        };
        let endpoints = Endpoints {
            pki: Pki::generate()?,
            trust: Trust::of_this_binary(ctx.options.platform_key_dir.as_deref())
                .at("the clients' trust anchors")?,
        };
        let profile = self.profile(ctx, &plan, &endpoints)?;
        let load = self.regular_pass(ctx, &plan, &endpoints, "the advisor's load pass")?;
        let spare = spare_cores(available_cores(), load.busy_cores, load.idle_cores);
        self.advise(ctx, &profile, spare)
    }

    /// Runs every experiment of `plan` (the presets' or a test's).
    pub fn run_plan(&self, ctx: &Context<'_>, plan: &Plan) -> Result<(), ScenarioError> {
        let plan = plan.clone();
        let load = rustix::system::sysinfo().loads[0] as f64 / 65536.0;
        ctx.progress()
            .begin(NAME, (1 + Setup::ALL.len() * plan.sizes.len()) as u64);
        // What the clients trust: the platform identity from the key directory the enclaves
        // use, and the middlebox's measurement in this executable (not learned from the host).
        let endpoints = Endpoints {
            pki: Pki::generate()?,
            trust: Trust::of_this_binary(ctx.options.platform_key_dir.as_deref())
                .at("the clients' trust anchors")?,
        };
        let profile = self.profile(ctx, &plan, &endpoints)?;
        let mut advisor_selection = Selection::default();
        let mut outcomes: Vec<Outcome> = Vec::new();
        for setup in Setup::ALL {
            for &size in &plan.sizes {
                let selection = setup.selection(&advisor_selection);
                let o = self.measure(ctx, &plan, &endpoints, setup, size, &selection)?;
                self.emit_outcome(ctx, &plan, &o)?;
                if setup == Setup::Sandbox && size == PROFILE_SIZE {
                    // Before the switchless setups run: the advisor needs the spare cores.
                    let spare = spare_cores(available_cores(), o.busy_cores, o.idle_cores);
                    advisor_selection = self.advise(ctx, &profile, spare)?;
                }
                outcomes.push(o);
            }
        }

        let rows: Vec<Row> = outcomes.iter().map(|o| o.row.clone()).collect();
        ctx.emit(
            NAME,
            "all",
            Params::new(),
            Body::Table(analysis::throughput_table(&rows, plan.flows, Some(load))),
        )?;
        let breakdowns: Vec<(String, Breakdown)> = outcomes
            .iter()
            .filter(|o| o.size == PROFILE_SIZE)
            .filter_map(|o| Some((o.setup.title().to_owned(), o.breakdown?)))
            .collect();
        ctx.emit(
            NAME,
            "all",
            Params::new(),
            Body::Table(analysis::breakdown_table(&breakdowns, PROFILE_SIZE)),
        )?;
        ctx.emit(
            NAME,
            "all",
            Params::new(),
            Body::Table(analysis::all_switchless_table(
                &rows,
                Setup::Sandbox.title(),
                Setup::AllSwitchless.title(),
                Setup::Advisor.title(),
            )),
        )?;
        let advised = advisor_selection.describe();
        // The advisor's selection against the best configuration; a failure is measured
        // again before it is reported (see `analysis::advisor_failures`).
        let rivals = [Setup::Sandbox, Setup::Batched, Setup::AllSwitchless];
        let rival_titles = rivals.map(Setup::title);
        let mut advice_rows = rows.clone();
        let again = analysis::advisor_failures(&rows, Setup::Advisor.title(), &rival_titles);
        if !again.is_empty() {
            ctx.progress().begin(
                &format!("{NAME}: measuring a failed advisor check again"),
                2 * again.len() as u64,
            );
        }
        // A pass measured again for a check: its rounds join its configuration's row in the
        // check's pooled rows. It is not written as a record of its own; its correctness and
        // attestation count with the others'.
        let measure_pooled = |setup: Setup, size: usize, rows: &mut [Row]| {
            let o = self.measure(
                ctx,
                &plan,
                &endpoints,
                setup,
                size,
                &setup.selection(&advisor_selection),
            )?;
            if let Some(r) = rows
                .iter_mut()
                .find(|r| r.config == o.row.config && r.record_size == size)
            {
                r.ns_per_record.extend_from_slice(&o.row.ns_per_record);
            }
            Ok::<_, ScenarioError>(o)
        };
        let mut remeasured = Vec::new();
        for &(size, best) in &again {
            let Some(best) = rivals.into_iter().find(|s| s.title() == best) else {
                continue;
            };
            remeasured.push(size);
            for setup in [best, Setup::Advisor] {
                outcomes.push(measure_pooled(setup, size, &mut advice_rows)?);
            }
        }
        // Issue 22's shares: the sweep measured `native` and `batched` minutes apart, and a
        // whole pass moves with the machine by more than its rounds' spread (20 points of
        // share from run to run on the 2-vCPU VM), so pairs of passes of the two run back to
        // back, in alternating order, and the checks judge all their rounds.
        let share_sizes: Vec<usize> = analysis::BATCHED_TARGETS
            .iter()
            .map(|&(size, _)| size)
            .filter(|size| plan.sizes.contains(size))
            .collect();
        let mut share_rows = rows.clone();
        if plan.share_pairs > 0 && !share_sizes.is_empty() {
            ctx.progress().begin(
                &format!("{NAME}: native and batched passes back to back"),
                (2 * plan.share_pairs * share_sizes.len()) as u64,
            );
        }
        for pair in 0..plan.share_pairs {
            for &size in &share_sizes {
                let mut order = [Setup::Native, Setup::Batched];
                if pair % 2 == 1 {
                    order.reverse();
                }
                for setup in order {
                    outcomes.push(measure_pooled(setup, size, &mut share_rows)?);
                }
            }
        }
        let checks = analysis::target_checks(&rows, Setup::Native.title(), Setup::Sandbox.title())
            .into_iter()
            .chain(analysis::batched_checks(
                &share_rows,
                Setup::Native.title(),
                Setup::Batched.title(),
                1 + plan.share_pairs,
            ))
            .chain(analysis::ring_checks(
                &rows,
                Setup::Batched.title(),
                Setup::Ring.title(),
            ))
            .chain(analysis::advisor_checks(
                &advice_rows,
                Setup::Advisor.title(),
                &rival_titles,
                &advised,
                &remeasured,
            ));
        for c in checks {
            ctx.emit(NAME, "all", Params::new(), Body::Check(c))?;
        }
        // The headline: time per 1 KiB record, native middlebox against the sandbox's.
        let fig = |s: Setup| {
            outcomes
                .iter()
                .find(|o| o.setup == s && o.size == PROFILE_SIZE)
                .and_then(|o| {
                    CostFigure::new(s.title(), Self::backend(o), o.row.ns_per_record.clone())
                })
        };
        if let Some(baseline) = fig(Setup::Native) {
            let protected = [
                Setup::Sandbox,
                Setup::Batched,
                Setup::Ring,
                Setup::Advisor,
                Setup::AllSwitchless,
            ]
            .into_iter()
            .filter_map(fig)
            .collect();
            ctx.emit(
                NAME,
                "all",
                Params::new(),
                Body::Cost(Cost {
                    name: format!(
                        "TLS 1.2 record decrypted and inspected by the middlebox, {} flows",
                        plan.flows
                    ),
                    unit: "1 KiB record".into(),
                    baseline,
                    protected,
                }),
            )?;
        }

        ctx.emit(
            NAME,
            "all",
            Params::from([("attestation".to_owned(), Value::from("emulated"))]),
            Body::Check(analysis::attestation_check(
                &endpoints.trust,
                outcomes
                    .iter()
                    .filter(|o| o.config.is_some())
                    .map(|o| &o.attestation),
            )),
        )?;

        affinity::run(ctx, NAME, &plan)?;

        let failed: Vec<String> = outcomes
            .iter()
            .filter(|o| !o.problems.is_empty())
            .map(|o| {
                format!(
                    "{}, {}-byte records: {}",
                    o.setup.title(),
                    o.size,
                    o.problems[0]
                )
            })
            .collect();
        if !failed.is_empty() {
            return Err(ScenarioError::step("correctness", failed.join("; ")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
