//! The checks, the tables and the published figures that go beside ours.
//!
//! Correctness (a failure fails the run): every byte each server received equals what its
//! client sent; the middlebox decrypted every application-data record the client sent, and
//! found exactly the patterns planted. Targets (warnings): at 1 KiB records the sandbox with
//! regular ecalls keeps at least 70% of the native middlebox's throughput, at 16 KiB at
//! least 90%. The advisor's choice (a failure when contradicted): not slower than the best
//! measured configuration by more than a tolerance beyond the noise (the medians' 95%
//! confidence intervals).

use measure::record::{Check, Stage, StageBreakdown, Table, Value, Verdict};
use measure::stats::Summary;

use super::service::Call;
use super::workload::PassResult;

/// SGXBox's published findings (Kim, Applied Sciences 11(18) 8379, 2021), for the record.
pub mod published {
    /// Making every ecall switchless lowered TLS decryption throughput by this share, on
    /// average over record sizes.
    pub const ALL_SWITCHLESS_LOSS: f64 = 0.33;
    /// `ecall_reproduce_ssl_context` made switchless: ~10% shorter.
    pub const SELECTIVE_GAIN: f64 = 0.10;
    /// Waiting for a switchless worker, µs (per call, reproduce_ssl_context).
    pub const WORKER_WAIT_US: f64 = 2.6;
    /// The transitions it saved, µs (per call).
    pub const TRANSITIONS_US: f64 = 5.3;
    /// Table 1, µs: (call, grouping, pairing).
    pub const TABLE_1: [(&str, f64, f64); 3] = [
        ("empty ecall", 0.902, 1.05),
        ("empty ocall", 0.602, 0.833),
        ("ocall reading 1 KiB", 8.90, 4.91),
    ];
    /// Where the figures come from.
    pub const SOURCE: &str = "SGXBox: Kim, \"An Optimization Methodology for Adapting \
        Legacy SGX Applications to Use Switchless Calls\", Applied Sciences 11(18) 8379 \
        (2021), on SGX hardware";
}

/// The key shares' attestation, for the record: emulated, what the clients trusted, and
/// in how many middlebox passes they verified the enclave's quote before sealing any share.
/// A refused quote fails the check, naming the reason (the pass's own correctness check
/// fails too).
pub fn attestation_check<'a>(
    trust: &super::service::Trust,
    passes: impl IntoIterator<Item = &'a super::workload::Attestation>,
) -> Check {
    use super::workload::Attestation;
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let (mut verified, mut other) = (0usize, Vec::new());
    for a in passes {
        match a {
            Attestation::Verified(t) if t == trust => verified += 1,
            Attestation::Verified(_) => other.push("verified against other trust anchors".into()),
            Attestation::Refused(e) => other.push(e.to_string()),
            Attestation::NotNeeded => other.push("no attestation was made".into()),
        }
    }
    let mut message = format!(
        "emulated attestation (an Ed25519 platform key derived from the platform root key, no \
         hardware): in {verified} of {} middlebox passes the clients verified the enclave's \
         quote of its key-share key against platform {} and measurement {} before sealing \
         any share",
        verified + other.len(),
        trust.platform,
        hex(&trust.measurement)
    );
    if let Some(first) = other.first() {
        message.push_str(&format!("; {} not: {first}", other.len()));
    }
    let verdict = if other.is_empty() && verified > 0 {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    Check::run("key-share-attestation", verdict, message)
}

/// What went wrong in one pass, for the correctness check: empty when everything held.
/// `through_middlebox`: whether the middlebox's counts are expected.
pub fn problems(pass: &PassResult, flows: usize, through_middlebox: bool) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(pass.client_errors.iter().take(4).cloned());
    if pass.servers.len() != flows {
        out.push(format!(
            "{} of {flows} servers reported",
            pass.servers.len()
        ));
    }
    let unknown: Vec<String> = (pass.wall_ns.iter().enumerate())
        .filter(|(_, w)| w.is_none())
        .map(|(k, _)| k.to_string())
        .collect();
    if !unknown.is_empty() {
        out.push(format!(
            "round(s) {} not measured: not every server had all of it",
            unknown.join(", ")
        ));
    }
    for s in &pass.servers {
        let who = s.index.map_or("a flow".to_owned(), |i| format!("flow {i}"));
        if let Some(e) = &s.error {
            out.push(format!("{who}: {e}"));
        }
        if s.bytes != s.expected {
            out.push(format!(
                "{who}: server got {} of {} bytes",
                s.bytes, s.expected
            ));
        }
        if let Some(at) = s.mismatch_at {
            out.push(format!(
                "{who}: the server's byte {at} differs from the client's"
            ));
        }
    }
    if through_middlebox {
        if let super::workload::Attestation::Refused(e) = &pass.attestation {
            out.push(format!(
                "the clients refused the middlebox's key and sent no key share ({} withheld): {e}",
                pass.shares_withheld
            ));
        }
        if pass.flows.len() != flows {
            out.push(format!(
                "the middlebox relayed {} of {flows} flows",
                pass.flows.len()
            ));
        }
        let per_flow = pass.records_sent / flows.max(1) as u64;
        let mut matches = 0;
        for f in &pass.flows {
            let c2s = &f.dirs[0];
            matches += f.dirs.iter().map(|d| d.matches).sum::<u64>();
            if c2s.app_records != per_flow {
                out.push(format!(
                    "flow {}: the middlebox decrypted {} of {per_flow} application records",
                    f.flow, c2s.app_records
                ));
            }
            for d in &f.dirs {
                if d.auth_failures + d.uninspected > 0 || d.no_key_share {
                    out.push(format!(
                        "flow {}: {} authentication failures, {} records uninspected",
                        f.flow, d.auth_failures, d.uninspected
                    ));
                }
                if let Some(e) = d.malformed.as_ref().or(d.truncated.as_ref()) {
                    out.push(format!("flow {}: {e}", f.flow));
                }
                out.extend(
                    d.enclave_errors
                        .iter()
                        .take(2)
                        .map(|e| format!("flow {}: {e}", f.flow)),
                );
            }
            if let Some(counts) = &f.enclave
                && counts[0].app_records != c2s.app_records
            {
                out.push(format!(
                    "flow {}: the enclave counted {} application records, the host {}",
                    f.flow, counts[0].app_records, c2s.app_records
                ));
            }
        }
        if matches != pass.planted {
            out.push(format!(
                "the middlebox found {matches} pattern occurrences, {} were planted",
                pass.planted
            ));
        }
    }
    out
}

/// The correctness check of one configuration and record size over all its passes.
pub fn correctness(what: &str, passes: usize, problems: &[String]) -> Check {
    if problems.is_empty() {
        Check::run(
            "correctness",
            Verdict::Pass,
            format!(
                "{what}: {passes} measured round(s), every byte arrived unchanged; every application \
                 record decrypted and every planted pattern found"
            ),
        )
    } else {
        let mut m = format!("{what}: ");
        m.push_str(
            &problems
                .iter()
                .take(6)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
        );
        if problems.len() > 6 {
            m.push_str(&format!("; and {} more", problems.len() - 6));
        }
        Check::run("correctness", Verdict::Fail, m)
    }
}

/// One row of the throughput table: a configuration at a record size.
#[derive(Debug, Clone)]
pub struct Row {
    /// The configuration's title.
    pub config: String,
    /// Plaintext bytes per record.
    pub record_size: usize,
    /// Wall time per record of each measured pass, ns.
    pub ns_per_record: Vec<f64>,
    /// Middlebox CPU (relay threads and enclave process) per record, ns; `None` direct, or
    /// where the enclave process's CPU time could not be read.
    pub cpu_ns_per_record: Option<f64>,
}

impl Row {
    /// Median, CI low, CI high of ns per record.
    pub fn summary(&self) -> Option<Summary> {
        Summary::from_samples(&self.ns_per_record).ok()
    }

    /// Records/s at the median.
    pub fn records_per_s(&self) -> f64 {
        self.summary().map_or(0.0, |s| 1e9 / s.median_ns)
    }
}

/// The row of configuration `config` at `size`.
fn find_row<'r>(rows: &'r [Row], config: &str, size: usize) -> Option<&'r Row> {
    rows.iter()
        .find(|r| r.config == config && r.record_size == size)
}

/// The record sizes of `rows`, ascending, each once.
fn record_sizes(rows: &[Row]) -> Vec<usize> {
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.record_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The throughput table: decrypted bytes/s and records/s at the servers, by configuration
/// and record size, with the 95% interval and the middlebox's CPU.
pub fn throughput_table(rows: &[Row], flows: usize, load: Option<f64>) -> Table {
    let mut out = Vec::new();
    for r in rows {
        let Some(s) = r.summary() else { continue };
        let rate = |ns: f64| if ns > 0.0 { 1e9 / ns } else { 0.0 };
        let mbps = |ns: f64| rate(ns) * r.record_size as f64 / 1e6;
        out.push(vec![
            Value::from(r.config.as_str()),
            Value::from(r.record_size),
            Value::from((mbps(s.median_ns) * 10.0).round() / 10.0),
            Value::from(format!(
                "{:.1} - {:.1}",
                mbps(s.median_ci_high_ns),
                mbps(s.median_ci_low_ns)
            )),
            Value::from(rate(s.median_ns).round()),
            Value::from(r.ns_per_record.len()),
            match r.cpu_ns_per_record {
                Some(c) => Value::from((c / 10.0).round() / 100.0),
                None => Value::from("-"),
            },
        ]);
    }
    let mut notes = vec![format!(
        "{flows} concurrent flows; throughput is application bytes (and records) that reached \
         the servers over the wall time from the start barrier to the last byte (batched: or \
         to the last record's verdict, if later); 95% interval of the median over passes."
    )];
    notes.push(
        "Middlebox CPU: the relay threads' CPU time plus the enclave process's (sandbox: \
         including its switchless workers; native: none, the service runs in the relay \
         threads), per record, handshakes and the warm-up round included."
            .into(),
    );
    if let Some(l) = load {
        notes.push(format!(
            "Load average (1 min) when the scenario started: {l:.2}."
        ));
    }
    Table {
        name: "throughput".into(),
        title: "TLS 1.2 middlebox throughput by configuration and record size".into(),
        columns: [
            "configuration",
            "record bytes",
            "MB/s (median)",
            "MB/s 95% CI",
            "records/s",
            "rounds",
            "middlebox CPU µs/record",
        ]
        .map(String::from)
        .to_vec(),
        rows: out,
        source: None,
        notes,
    }
}

/// One configuration's per-record breakdown at one record size, from the relay's timers and
/// the enclave's trace of `reproduce_ssl_context`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Breakdown {
    /// Records inspected.
    pub records: u64,
    /// Host time per record outside the ecall: reassembly, parsing, forwarding, ns.
    pub untrusted_ns: f64,
    /// Time inside the enclave per record: decrypt and inspect, ns.
    pub trusted_ns: f64,
    /// The ecall's time per record minus the time inside: transition or switchless wait, ns.
    pub transition_ns: f64,
    /// With batching: the relay's wait for room in a full queue per record, ns (0 without).
    pub queue_ns: f64,
}

impl Breakdown {
    /// From the relay's busy and ecall time (summed over `records` inspected records) and
    /// the trace's mean time inside per call.
    pub fn new(records: u64, busy_ns: u64, ecall_ns: u64, mean_inside_ns: f64) -> Self {
        if records == 0 {
            return Breakdown::default();
        }
        let n = records as f64;
        let ecall = ecall_ns as f64 / n;
        let trusted = mean_inside_ns.min(ecall);
        Breakdown {
            records,
            untrusted_ns: (busy_ns.saturating_sub(ecall_ns)) as f64 / n,
            trusted_ns: trusted,
            transition_ns: (ecall - trusted).max(0.0),
            queue_ns: 0.0,
        }
    }

    /// With batching, where the relay does not wait for the enclave's work: its busy time
    /// and its time queueing records (summed over the `records` it inspected), and the batch
    /// ecalls' time inside and in crossing (`batch_inside_ns`, `batch_transition_ns`, summed
    /// over all batches, which carried `batched` records). Trusted is the time inside per
    /// record carried, transition the crossing per record carried, and queue the relay's
    /// queueing per record (back-pressure from a full queue).
    pub fn batched(
        (records, busy_ns, queue_ns): (u64, u64, u64),
        batched: u64,
        batch_inside_ns: f64,
        batch_transition_ns: f64,
    ) -> Self {
        if records == 0 || batched == 0 {
            return Breakdown::default();
        }
        let (n, m) = (records as f64, batched as f64);
        Breakdown {
            records,
            untrusted_ns: busy_ns.saturating_sub(queue_ns) as f64 / n,
            trusted_ns: batch_inside_ns / m,
            transition_ns: batch_transition_ns / m,
            queue_ns: queue_ns as f64 / n,
        }
    }

    /// As a stage breakdown record.
    pub fn stages(&self, name: &str) -> StageBreakdown {
        let n = self.records as f64;
        let mut parts = vec![
            ("untrusted: I/O, reassembly, forwarding", self.untrusted_ns),
            ("trusted: decrypt and inspect", self.trusted_ns),
            ("transition or switchless wait", self.transition_ns),
        ];
        if self.queue_ns > 0.0 {
            parts.push(("queue: waiting for room", self.queue_ns));
        }
        let total: f64 = parts.iter().map(|p| p.1).sum();
        StageBreakdown {
            name: name.to_owned(),
            runs: self.records,
            stages: parts
                .iter()
                .map(|(s, ns)| Stage {
                    name: (*s).to_owned(),
                    time_ns: ns * n,
                    percent: if total > 0.0 { ns / total * 100.0 } else { 0.0 },
                    bytes_in: 0,
                    bytes_out: 0,
                    round_trips: None,
                    predicted_ns: None,
                    cpu_ns: None,
                })
                .collect(),
            total_ns: total * n,
            theoretical_min_ns: None,
            overhead_ns: None,
        }
    }
}

/// The breakdown table: one row per configuration, ns per record.
pub fn breakdown_table(rows: &[(String, Breakdown)], record_size: usize) -> Table {
    let r = |x: f64| Value::from(x.round());
    Table {
        name: "breakdown".into(),
        title: format!(
            "Per-record breakdown at {record_size}-byte records (ns per record; SGXBox Fig. 5)"
        ),
        columns: [
            "configuration",
            "records",
            "untrusted",
            "trusted",
            "transition / wait",
            "queue wait",
            "total",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|(c, b)| {
                vec![
                    Value::from(c.as_str()),
                    Value::from(b.records),
                    r(b.untrusted_ns),
                    r(b.trusted_ns),
                    r(b.transition_ns),
                    r(b.queue_ns),
                    r(b.untrusted_ns + b.trusted_ns + b.transition_ns + b.queue_ns),
                ]
            })
            .collect(),
        source: None,
        notes: vec![
            "Untrusted: the relay thread's time handling the bytes it read, minus its time in \
             reproduce_ssl_context. Trusted: the trace's mean time inside that ecall (on \
             native, 1 call in 64 is timed). Transition / wait: the ecall's time as the relay \
             saw it, minus the time inside: the crossing, or for a switchless call the wait \
             for a worker and the slot's round trip."
                .into(),
            "Batched configurations: the relay queues records and goes on forwarding. \
             Untrusted: its time handling the bytes it read, minus its time queueing. Trusted: \
             the time inside reproduce_ssl_context_batch per record carried. Transition / \
             wait: the batch calls' crossing (or switchless wait) per record carried. Queue \
             wait: the relay's time queueing per record (waiting for room in a full queue)."
                .into(),
            "Times are wall time on a thread among the flows' relay, client and server \
             threads: a wait for a core counts where it falls."
                .into(),
        ],
    }
}

/// The per-ecall profile: count, mean time, the share inside (SGXBox's switchless
/// efficiency, time inside over total), and the advisor's verdict.
pub fn profile_table(
    trace: &enclave::TraceSnapshot,
    advice: &[enclave::Advice],
    title: &str,
) -> Table {
    let rows = Call::ALL
        .iter()
        .map(|&c| {
            let id = u32::from(c);
            let t = trace.get(enclave::Direction::Ecall, id);
            let a = advice
                .iter()
                .find(|a| a.direction == enclave::Direction::Ecall && a.call_id == id);
            let (count, total, inside, trans) = t.map_or((0, 0.0, 0.0, 0.0), |t| {
                (
                    t.count,
                    t.mean_total_ns(),
                    t.mean_inside_ns(),
                    t.mean_transition_ns(),
                )
            });
            let eff = if total > 0.0 {
                inside / total * 100.0
            } else {
                0.0
            };
            vec![
                Value::from(c.name()),
                Value::from(count),
                Value::from(total.round()),
                Value::from(inside.round()),
                Value::from(trans.round()),
                Value::from((eff * 10.0).round() / 10.0),
                Value::from(a.map_or("-", |a| a.recommendation.name())),
            ]
        })
        .collect();
    Table {
        name: "ecall-profile".into(),
        title: format!("Per-ecall profile and the advisor's verdicts, {title}"),
        columns: [
            "ecall",
            "calls",
            "mean total ns",
            "mean inside ns",
            "mean transition ns",
            "efficiency % (inside / total)",
            "advisor",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes: vec![format!(
            "SGXBox found only reproduce_ssl_context worth making switchless (per record: \
             {:.1} µs of worker wait against {:.1} µs of transitions saved, ~{:.0}% shorter).",
            published::WORKER_WAIT_US,
            published::TRANSITIONS_US,
            published::SELECTIVE_GAIN * 100.0
        )],
    }
}

/// The target checks: the sandbox's share of native throughput at 1 KiB (>= 70%) and
/// 16 KiB (>= 90%).
pub fn target_checks(rows: &[Row], native: &str, sandbox: &str) -> Vec<Check> {
    let find = |c: &str, size: usize| find_row(rows, c, size);
    let mut out = Vec::new();
    for (size, need) in [(1024usize, 0.70), (16384, 0.90)] {
        if let (Some(n), Some(s)) = (find(native, size), find(sandbox, size)) {
            let share = s.records_per_s() / n.records_per_s();
            out.push(Check::run(
                format!("sandbox-share-{size}"),
                if share >= need {
                    Verdict::Pass
                } else {
                    Verdict::Warn
                },
                format!(
                    "{size}-byte records: sandbox with regular ecalls {:.0} records/s, native \
                     middlebox {:.0} records/s: {:.0}% (target >= {:.0}%)",
                    s.records_per_s(),
                    n.records_per_s(),
                    share * 100.0,
                    need * 100.0
                ),
            ));
        }
    }
    out
}

/// The batched configuration's targets (issue 22): the record sizes and the share of the
/// native middlebox's records/s it keeps at each.
pub const BATCHED_TARGETS: [(usize, f64); 2] = [(1024, 0.80), (16384, 0.90)];

/// The batched configuration against [`BATCHED_TARGETS`] (warnings: targets, not
/// correctness). `passes`: how many passes of each configuration the rows' rounds come from
/// (the sweep's, then pairs of passes run back to back), which the messages say.
pub fn batched_checks(rows: &[Row], native: &str, batched: &str, passes: usize) -> Vec<Check> {
    let find = |c: &str, size: usize| find_row(rows, c, size);
    let mut out = Vec::new();
    let pooled = if passes > 1 {
        format!(
            "; medians of the rounds of {passes} passes of each, all but the sweep's run back \
             to back"
        )
    } else {
        String::new()
    };
    for (size, need) in BATCHED_TARGETS {
        if let (Some(n), Some(b)) = (find(native, size), find(batched, size)) {
            let share = b.records_per_s() / n.records_per_s();
            out.push(Check::run(
                format!("batched-share-{size}"),
                if share >= need {
                    Verdict::Pass
                } else {
                    Verdict::Warn
                },
                format!(
                    "{size}-byte records: sandbox with records batched across flows {:.0} \
                     records/s, native middlebox {:.0} records/s: {:.0}% (target >= {:.0}%){pooled}",
                    b.records_per_s(),
                    n.records_per_s(),
                    share * 100.0,
                    need * 100.0
                ),
            ));
        }
    }
    out
}

/// The two shapes of batching side by side, per record size: batches in one regular ecall
/// each (`batched`, what the relay does) against batches posted through a switchless call
/// that an enclave worker drains (`ring`). Pass where the ring is not faster; a warning
/// where it is faster beyond both medians' 95% intervals: the relay's choice of shape
/// should then be revisited on that machine.
pub fn ring_checks(rows: &[Row], batched: &str, ring: &str) -> Vec<Check> {
    let find = |c: &str, size: usize| find_row(rows, c, size);
    let sizes = record_sizes(rows);
    let mut out = Vec::new();
    for size in sizes {
        let (Some(b), Some(r)) = (
            find(batched, size).and_then(Row::summary),
            find(ring, size).and_then(Row::summary),
        ) else {
            continue;
        };
        let ring_wins = r.median_ci_high_ns < b.median_ci_low_ns;
        out.push(Check::run(
            format!("batching-shape-{size}"),
            if ring_wins {
                Verdict::Warn
            } else {
                Verdict::Pass
            },
            format!(
                "{size}-byte records, ns per record, median [95% CI]: batched ecalls {:.0} \
                 [{:.0}, {:.0}], ring (switchless) {:.0} [{:.0}, {:.0}]: {}",
                b.median_ns,
                b.median_ci_low_ns,
                b.median_ci_high_ns,
                r.median_ns,
                r.median_ci_low_ns,
                r.median_ci_high_ns,
                if ring_wins {
                    "the ring is faster beyond the noise; the relay batches through ecalls"
                } else if r.median_ns < b.median_ns {
                    "the ring's median is lower, within the noise"
                } else {
                    "batched ecalls are at least as fast"
                }
            ),
        ));
    }
    out
}

/// How much slower than the best measured configuration the advisor's selection may be
/// (time per record) before its choice is called wrong.
pub const ADVISOR_TOLERANCE: f64 = 0.20;

/// The advisor's selection against the best configuration at one record size.
enum Judged<'a> {
    /// These configurations have no time per record (or no other one has).
    Missing(Vec<&'a str>),
    /// Every configuration has one.
    Measured {
        verdict: Verdict,
        /// The configuration with the lowest median.
        best: &'a str,
        /// The advisor's median over the best's, less one.
        excess: f64,
        /// Each configuration's summary, the advisor's first.
        known: Vec<(&'a str, Summary)>,
    },
}

/// Judges the advisor's selection at `size` (see [`advisor_checks`]).
fn judge<'a>(
    rows: &[Row],
    advisor: &'a str,
    others: &[&'a str],
    size: usize,
) -> Option<Judged<'a>> {
    let find = |c: &str| find_row(rows, c, size);
    let a = find(advisor)?;
    let mut measured = vec![(advisor, a.summary())];
    measured.extend(others.iter().filter_map(|&c| Some((c, find(c)?.summary()))));
    let missing: Vec<&str> = measured
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(c, _)| *c)
        .collect();
    let known: Vec<(&str, Summary)> = measured
        .into_iter()
        .filter_map(|(c, s)| Some((c, s?)))
        .collect();
    if !missing.is_empty() || known.len() < 2 {
        return Some(Judged::Missing(missing));
    }
    // The advisor's row is first, and the lowest median is the best (the advisor's on a tie).
    let b = (0..known.len())
        .min_by(|&x, &y| known[x].1.median_ns.total_cmp(&known[y].1.median_ns))
        .unwrap_or(0);
    let (sa, (best, sb)) = (&known[0].1, &known[b]);
    let best = *best;
    let excess = sa.median_ns / sb.median_ns - 1.0;
    let verdict = if excess <= ADVISOR_TOLERANCE {
        Verdict::Pass
    } else if sa.median_ci_low_ns > sb.median_ci_high_ns {
        Verdict::Fail
    } else {
        Verdict::Warn
    };
    Some(Judged::Measured {
        verdict,
        best,
        excess,
        known,
    })
}

/// The record sizes at which [`advisor_checks`] would fail, each with the best
/// configuration there: the pairs to measure again before a failure is reported (a single
/// pass's rounds do not show how far a whole pass moves on a busy 2-vCPU machine, where one
/// configuration measured twice has differed by more than the tolerance).
pub fn advisor_failures<'a>(
    rows: &[Row],
    advisor: &'a str,
    others: &[&'a str],
) -> Vec<(usize, &'a str)> {
    record_sizes(rows)
        .into_iter()
        .filter_map(|size| match judge(rows, advisor, others, size)? {
            Judged::Measured {
                verdict: Verdict::Fail,
                best,
                ..
            } => Some((size, best)),
            _ => None,
        })
        .collect()
}

/// The advisor's selection (`advised`: the ecalls it made switchless, `none` for regular
/// ecalls) against the best configuration measured at each record size: the one with the
/// lowest median time per record among `advisor` and `others`. Pass within
/// [`ADVISOR_TOLERANCE`] of the best; beyond it, a warning while the medians' 95% intervals
/// overlap (noise), a failure when the advisor's interval lies wholly above the best's: the
/// measurements contradict the advice. A size where a configuration has no time is "not
/// measured". `again` lists the sizes whose advisor and best rows hold the rounds of a
/// second pass each ([`advisor_failures`]); their messages say so.
pub fn advisor_checks(
    rows: &[Row],
    advisor: &str,
    others: &[&str],
    advised: &str,
    again: &[usize],
) -> Vec<Check> {
    let mut out = Vec::new();
    for size in record_sizes(rows) {
        let name = format!("advisor-choice-{size}");
        let Some(judged) = judge(rows, advisor, others, size) else {
            continue;
        };
        let (verdict, best, excess, known) = match judged {
            Judged::Missing(missing) => {
                out.push(Check::run(
                    name,
                    Verdict::Warn,
                    format!(
                        "{size}-byte records: not measured ({} without a time per record)",
                        if missing.is_empty() {
                            "every other configuration".to_owned()
                        } else {
                            missing.join(", ")
                        }
                    ),
                ));
                continue;
            }
            Judged::Measured {
                verdict,
                best,
                excess,
                known,
            } => (verdict, best, excess, known),
        };
        let all: Vec<String> = known
            .iter()
            .map(|(c, s)| {
                format!(
                    "{c} {:.0} [{:.0}, {:.0}]",
                    s.median_ns, s.median_ci_low_ns, s.median_ci_high_ns
                )
            })
            .collect();
        out.push(Check::run(
            name,
            verdict,
            format!(
                "{size}-byte records, ns per record, median [95% CI]: {}. The advisor's \
                 selection (switchless: {advised}) is {:+.0}% against the best, {best} \
                 (tolerance {:.0}%){}{}",
                all.join("; "),
                excess * 100.0,
                ADVISOR_TOLERANCE * 100.0,
                match verdict {
                    Verdict::Pass => "",
                    Verdict::Warn => ": slower, but within the noise",
                    Verdict::Fail => ": slower beyond the tolerance and the noise",
                },
                if again.contains(&size) {
                    ". The first pass failed this check: the advisor's selection and the best \
                     configuration were measured again, alternated, and these figures hold \
                     the rounds of both passes of each"
                } else {
                    ""
                }
            ),
        ));
    }
    out
}

/// All-switchless against selective (the advisor's) and regular, as the paper compared:
/// the mean loss over record sizes, with the published 33% beside it.
pub fn all_switchless_table(rows: &[Row], sandbox: &str, all: &str, advisor: &str) -> Table {
    let find = |c: &str, size: usize| find_row(rows, c, size);
    let sizes = record_sizes(rows);
    let mut body = Vec::new();
    let mut losses = Vec::new();
    for size in sizes {
        let (Some(r), Some(w), Some(a)) =
            (find(sandbox, size), find(all, size), find(advisor, size))
        else {
            continue;
        };
        let loss = 1.0 - w.records_per_s() / a.records_per_s();
        losses.push(loss);
        body.push(vec![
            Value::from(size),
            Value::from(r.records_per_s().round()),
            Value::from(a.records_per_s().round()),
            Value::from(w.records_per_s().round()),
            Value::from((loss * 1000.0).round() / 10.0),
        ]);
    }
    let mean = if losses.is_empty() {
        0.0
    } else {
        losses.iter().sum::<f64>() / losses.len() as f64
    };
    body.push(vec![
        Value::from("mean"),
        Value::from("-"),
        Value::from("-"),
        Value::from("-"),
        Value::from((mean * 1000.0).round() / 10.0),
    ]);
    body.push(vec![
        Value::from("SGXBox (published)"),
        Value::from("-"),
        Value::from("-"),
        Value::from("-"),
        Value::from(published::ALL_SWITCHLESS_LOSS * 100.0),
    ]);
    Table {
        name: "all-switchless".into(),
        title: "All ecalls switchless against the advisor's selection (records/s)".into(),
        columns: [
            "record bytes",
            "regular",
            "advisor's selection",
            "all switchless",
            "all-switchless loss vs selection %",
        ]
        .map(String::from)
        .to_vec(),
        rows: body,
        source: Some(format!("Last row: {}", published::SOURCE)),
        notes: vec![
            "A negative loss: all-switchless was faster here. Workers spin on the cores the \
             flows' relay threads need; on a machine with few cores that is where the loss \
             comes from (see the CPU column of the throughput table)."
                .into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(config: &str, size: usize, ns: &[f64]) -> Row {
        Row {
            config: config.into(),
            record_size: size,
            ns_per_record: ns.to_vec(),
            cpu_ns_per_record: None,
        }
    }

    #[test]
    fn batched_shares_judge_the_pooled_medians() {
        let rows = [
            row("n", 1024, &[1000.0, 1000.0, 3000.0]),
            row("b", 1024, &[1200.0, 1210.0, 1190.0]),
            row("n", 16384, &[10_000.0; 3]),
            row("b", 16384, &[12_000.0; 3]),
        ];
        let checks = batched_checks(&rows, "n", "b", 1);
        let verdicts: Vec<_> = checks
            .iter()
            .map(|c| (c.name.as_str(), c.verdict))
            .collect();
        // 1000 / 1200 = 83% >= 80; 10000 / 12000 = 83% < 90. The native row's slow round
        // is outvoted by its median.
        assert_eq!(
            verdicts,
            [
                ("batched-share-1024", Verdict::Pass),
                ("batched-share-16384", Verdict::Warn)
            ]
        );
        assert!(
            checks[0].message.contains(": 83% (target >= 80%)"),
            "{checks:?}"
        );
        assert!(!checks[0].message.contains("passes"), "{checks:?}");
        let pooled = batched_checks(&rows, "n", "b", 3);
        assert!(
            pooled[1].message.ends_with(
                "; medians of the rounds of 3 passes of each, all but the sweep's run back to back"
            ),
            "{pooled:?}"
        );
        // A target size without both configurations: no check.
        assert_eq!(batched_checks(&rows[..3], "n", "b", 1).len(), 1);
    }

    #[test]
    fn the_ring_warns_only_when_faster_beyond_the_noise() {
        let verdicts = |b: &[f64], r: &[f64]| -> Vec<Verdict> {
            ring_checks(&[row("b", 1024, b), row("r", 1024, r)], "b", "r")
                .into_iter()
                .map(|c| c.verdict)
                .collect()
        };
        let fast = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
        let slow = [2000.0, 2010.0, 1990.0, 2005.0, 1995.0];
        assert_eq!(verdicts(&fast, &slow), [Verdict::Pass]);
        assert_eq!(verdicts(&slow, &fast), [Verdict::Warn]);
        let wide = [900.0, 3000.0, 950.0, 2900.0, 1000.0];
        assert_eq!(
            verdicts(&wide, &fast),
            [Verdict::Pass],
            "overlapping intervals"
        );
        // A size measured for one shape only: no check.
        assert!(ring_checks(&[row("b", 1024, &fast), row("r", 4096, &fast)], "b", "r").is_empty());
    }

    #[test]
    fn breakdown_splits_the_ecall_into_inside_and_transition() {
        let b = Breakdown::new(10, 100_000, 60_000, 2_000.0);
        assert_eq!(b.untrusted_ns, 4_000.0);
        assert_eq!(b.trusted_ns, 2_000.0);
        assert_eq!(b.transition_ns, 4_000.0);
        let s = b.stages("x");
        assert_eq!(s.stages.len(), 3, "no queue stage without batching");
        assert_eq!(s.total_ns, 100_000.0);
        assert!((s.stages.iter().map(|s| s.percent).sum::<f64>() - 100.0).abs() < 1e-9);
        // Inside can exceed what the relay saw (sampled on native): clamp, never negative.
        let b = Breakdown::new(10, 100_000, 10_000, 5_000.0);
        assert_eq!(b.transition_ns, 0.0);
        assert_eq!(Breakdown::new(0, 1, 1, 1.0), Breakdown::default());
    }

    #[test]
    fn batched_breakdown_takes_the_batch_calls_per_record_carried() {
        // The relay inspected 10 records in 100 us, 20 us of it queueing; the batches
        // carried 40 records (both directions) in 80 us inside and 8 us crossing.
        let b = Breakdown::batched((10, 100_000, 20_000), 40, 80_000.0, 8_000.0);
        assert_eq!(b.records, 10);
        assert_eq!(b.untrusted_ns, 8_000.0);
        assert_eq!(b.trusted_ns, 2_000.0);
        assert_eq!(b.transition_ns, 200.0);
        assert_eq!(b.queue_ns, 2_000.0);
        let s = b.stages("x");
        assert_eq!(s.stages.len(), 4);
        assert_eq!(s.total_ns, 10.0 * (8_000.0 + 2_000.0 + 200.0 + 2_000.0));
        // Queueing longer than the busy time (a clock's rounding): never negative.
        assert_eq!(
            Breakdown::batched((10, 100, 200), 10, 0.0, 0.0).untrusted_ns,
            0.0
        );
        assert_eq!(
            Breakdown::batched((0, 1, 1), 1, 1.0, 1.0),
            Breakdown::default()
        );
        assert_eq!(
            Breakdown::batched((1, 1, 1), 0, 1.0, 1.0),
            Breakdown::default()
        );
    }

    #[test]
    fn targets_compare_shares() {
        let rows = vec![
            row("native", 1024, &[1000.0, 1010.0, 990.0, 1005.0, 995.0]),
            row("sandbox", 1024, &[2000.0, 2010.0, 1990.0, 2005.0, 1995.0]),
            row("native", 16384, &[1000.0, 1010.0, 990.0]),
            row("sandbox", 16384, &[1050.0, 1060.0, 1040.0]),
        ];
        let c = target_checks(&rows, "native", "sandbox");
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].verdict, Verdict::Warn, "{}", c[0].message); // 50% < 70%
        assert_eq!(c[1].verdict, Verdict::Pass, "{}", c[1].message); // 95%
    }

    #[test]
    fn the_advisor_is_judged_against_the_best_measured_configuration() {
        let others = ["sandbox", "all"];
        let check = |rows: &[Row]| {
            let c = advisor_checks(rows, "advisor", &others, "none", &[]);
            assert_eq!(c.len(), 1);
            c.into_iter().next().unwrap()
        };
        // The advisor picked nothing (regular ecalls), all-switchless is much faster: fail,
        // though the advisor's run is as fast as regular's.
        let c = check(&[
            row("sandbox", 256, &[5000.0, 5010.0, 4990.0, 5005.0, 4995.0]),
            row("all", 256, &[1000.0, 1010.0, 990.0, 1005.0, 995.0]),
            row("advisor", 256, &[5000.0, 5001.0, 4999.0, 5003.0, 4997.0]),
        ]);
        assert_eq!(c.verdict, Verdict::Fail, "{}", c.message);
        assert!(c.message.contains("the best, all"), "{}", c.message);
        assert!(c.message.contains("switchless: none"), "{}", c.message);
        assert!(!c.message.contains("measured again"), "{}", c.message);
        // Within the tolerance of the best: pass.
        let c = check(&[
            row("sandbox", 256, &[1000.0, 1010.0, 990.0]),
            row("all", 256, &[1500.0, 1510.0, 1490.0]),
            row("advisor", 256, &[1100.0, 1110.0, 1090.0]),
        ]);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.message);
        // The advisor's selection is the best: pass.
        let c = check(&[
            row("sandbox", 256, &[2000.0, 2010.0, 1990.0]),
            row("all", 256, &[3000.0, 3010.0, 2990.0]),
            row("advisor", 256, &[1000.0, 1010.0, 990.0]),
        ]);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.message);
        // Slower beyond the tolerance, but the intervals overlap: a warning.
        let c = check(&[
            row("sandbox", 256, &[1000.0, 3000.0, 900.0, 2900.0, 950.0]),
            row("all", 256, &[5000.0, 5010.0, 4990.0]),
            row("advisor", 256, &[1400.0, 3100.0, 1300.0, 3000.0, 1350.0]),
        ]);
        assert_eq!(c.verdict, Verdict::Warn, "{}", c.message);
        // A configuration without a time: not measured.
        let c = check(&[
            row("sandbox", 256, &[1000.0]),
            row("all", 256, &[]),
            row("advisor", 256, &[1000.0]),
        ]);
        assert_eq!(c.verdict, Verdict::Warn, "{}", c.message);
        assert!(c.message.contains("not measured"), "{}", c.message);
    }

    /// A failure is what gets measured again, with the configuration it lost to; after the
    /// second pass the check says whose rounds it read.
    #[test]
    fn failing_sizes_are_named_with_the_best_configuration() {
        let others = ["sandbox", "all"];
        let rows = vec![
            // 256 B: the advisor loses to all-switchless beyond the noise.
            row("sandbox", 256, &[5000.0, 5010.0, 4990.0]),
            row("all", 256, &[1000.0, 1010.0, 990.0]),
            row("advisor", 256, &[5000.0, 5001.0, 4999.0]),
            // 1 KiB: the advisor is the best.
            row("sandbox", 1024, &[2000.0, 2010.0, 1990.0]),
            row("all", 1024, &[3000.0, 3010.0, 2990.0]),
            row("advisor", 1024, &[1000.0, 1010.0, 990.0]),
            // 4 KiB: slower, within the noise (a warning, not a failure).
            row("sandbox", 4096, &[1000.0, 3000.0, 900.0, 2900.0, 950.0]),
            row("all", 4096, &[5000.0, 5010.0, 4990.0]),
            row("advisor", 4096, &[1400.0, 3100.0, 1300.0, 3000.0, 1350.0]),
        ];
        assert_eq!(
            advisor_failures(&rows, "advisor", &others),
            vec![(256, "all")]
        );
        // The second pass of each moved the two together: the pooled rounds overlap.
        let mut again = rows.clone();
        again[1].ns_per_record.extend([4000.0, 4100.0, 3900.0]);
        again[2].ns_per_record.extend([1100.0, 1000.0, 1050.0]);
        assert!(advisor_failures(&again, "advisor", &others).is_empty());
        let c = advisor_checks(&again, "advisor", &others, "none", &[256]);
        assert_eq!(c[0].verdict, Verdict::Warn, "{}", c[0].message);
        assert!(c[0].message.contains("measured again"), "{}", c[0].message);
        assert!(!c[1].message.contains("measured again"), "{}", c[1].message);
    }

    #[test]
    fn correctness_fails_on_any_problem() {
        assert_eq!(correctness("x", 1, &[]).verdict, Verdict::Pass);
        let c = correctness("x", 1, &vec!["bad".to_owned(); 9]);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.message.contains("3 more"));
    }

    #[test]
    fn the_all_switchless_table_ends_with_the_published_loss() {
        let rows = vec![
            row("sandbox", 1024, &[2000.0]),
            row("all", 1024, &[3000.0]),
            row("advisor", 1024, &[1500.0]),
        ];
        let t = all_switchless_table(&rows, "sandbox", "all", "advisor");
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[0][4], Value::from(50.0));
        assert_eq!(t.rows[2][4], Value::from(33.0));
    }
}
