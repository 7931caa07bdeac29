//! The link between the parties of `gc-2pc` and `ed25519-2pc` (`--net`), the parameters
//! every record of a run over it carries, and the prediction of each stage's time over it
//! from the stage's round trips, bytes and compute.
//!
//! The prediction of a stage over a link is `round trips × RTT + bytes ÷ rate + compute`,
//! where the round trips and the bytes (both directions, as the garbler's socket counted
//! them) are the session's own, and the compute is the same stage's mean time in sessions
//! of the same computation over loopback, run for the purpose in the same run. Measured ÷
//! predicted near 1 says the link, not the parties, sets the time; above 1, something the
//! model leaves out (a party computing while the other waits, beyond what loopback showed;
//! TCP buffers that move bytes from one stage's time into the next one's).

use std::time::Duration;

use garble::channel::TCP_BUFFER;
use garble::link::{Choice, Net, ParamValue, Profile};
use garble::session::{SessionReport, Stage};
use garble::trace::StartTrace;
use measure::record::{Params, Table, Value};
use measure::stages::Stages;

use harness::{Context, ScenarioError};

/// The run's link profile (`--net`; loopback when not given). A value the cli let through
/// but that does not parse is an option error naming the bad part.
pub fn net_profile(ctx: &Context<'_>) -> Result<Profile, ScenarioError> {
    match &ctx.options.net {
        None => Ok(Profile::loopback()),
        Some(s) => s
            .parse()
            .map_err(|e: garble::link::ProfileError| ScenarioError::Option(e.to_string())),
    }
}

/// The run's link: its profile ([`net_profile`]) carried by the emulator that
/// `--link-emulator` names (`auto` when not given: the kernel's where this process can set it
/// up, else the user-space link, and the fallback's reason in [`Net::notice`]). A kernel
/// link asked for and not available is an option error with the reason.
pub fn open_net(ctx: &Context<'_>) -> Result<Net, ScenarioError> {
    let profile = net_profile(ctx)?;
    let choice = match &ctx.options.link_emulator {
        None => Choice::Auto,
        Some(s) => s
            .parse()
            .map_err(|e: String| ScenarioError::Option(format!("--link-emulator: {e}")))?,
    };
    Net::open(profile, choice)
        .map_err(|e| ScenarioError::Option(format!("--link-emulator kernel: {e}")))
}

/// The record parameters of a profile: `net`, `link_emulator`, and for a shaped link
/// `rate_bits_per_s` and `rtt_ms` ([`Profile::params`]).
pub fn net_params(p: &Profile) -> Params {
    to_params(p.params())
}

/// The record parameters of a run's link: [`net_params`] with the emulator that carries it.
pub fn link_params(net: &Net) -> Params {
    to_params(net.params())
}

fn to_params(p: Vec<(&'static str, ParamValue)>) -> Params {
    p.into_iter()
        .map(|(k, v)| {
            let v = match v {
                ParamValue::Str(s) => Value::from(s),
                ParamValue::Int(n) => Value::from(n),
                ParamValue::Float(x) => Value::from(x),
            };
            (k.to_owned(), v)
        })
        .collect()
}

/// Measures the run's link on its own ([`garble::link::measure`]: ten one-byte round trips
/// and two seconds' worth of bytes at the profile's rate, 1 to 64 MiB, split into up to
/// five transfers of at least 8 MiB, or sent as one when there are fewer than 16
/// ([`calibration_transfers`])) and returns the `link` table: the profile's rate and RTT
/// beside what the emulator delivered, with the [`Model`] of the predictions. `None` for
/// loopback.
pub fn link_table(link: &Net) -> Result<Option<(Table, Model)>, ScenarioError> {
    let net = link.profile();
    let Some(rate) = net.rate_bytes_per_s() else {
        return Ok(None);
    };
    let bytes = ((rate * 2.0) as usize).clamp(1 << 20, 64 << 20);
    let transfers = calibration_transfers(bytes);
    let timeout = Duration::from_secs(60);
    let Some(m) = garble::link::measure(link, bytes / transfers, transfers, 10, timeout)
        .map_err(|e| ScenarioError::step("measuring the link", e.to_string()))?
    else {
        return Ok(None);
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let rtt = ms(net.rtt);
    let model = Model::new(net.clone(), m.lead);
    let table = Table {
        name: "link".into(),
        title: format!("The emulated link ({net}) measured on its own"),
        columns: [
            "profile",
            "emulator",
            "rate Mbit/s",
            "measured Mbit/s",
            "measured / profile",
            "RTT ms",
            "delay line's own RTT ms (taken off)",
            "measured RTT ms (min)",
            "measured RTT ms (median)",
            "transfers",
            "bytes each",
            "sender lead ms (median)",
            "sender lead ms (min)",
            "sender lead ms (max)",
            "queue ms",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![vec![
            Value::from(net.name.as_str()),
            Value::from(link.emulator()),
            Value::from(rate * 8.0 / 1e6),
            Value::from(m.rate_bytes_per_s * 8.0 / 1e6),
            Value::from(m.rate_bytes_per_s / rate),
            Value::from(rtt),
            Value::from(ms(link.own_rtt())),
            Value::from(ms(m.rtt_min)),
            Value::from(ms(m.rtt_median)),
            Value::from(m.transfers as u64),
            Value::from(m.bytes),
            Value::from(ms(m.lead)),
            Value::from(ms(m.lead_min)),
            Value::from(ms(m.lead_max)),
            Value::from(ms(model.queue)),
        ]],
        source: None,
        notes: [
            Some(
                "Rate: one-way transfers between two threads through the link, each on a \
                 connection of its own, from the first write to the answer that the last byte \
                 arrived, less the RTT; their bytes over their times. RTT: ten \
                 one-byte round trips. A user-space delay line delays each direction by half \
                 the profile's RTT less its own round trip (its hops and timer wake-ups, \
                 measured when the link was set up), so that a typical round trip takes the \
                 profile's. The token bucket (tbf's, or the user-space link's) lets \
                 its depth (1 ms of bytes, at least 64 KiB) through at once, which puts a short \
                 transfer's rate above the profile's. Sender lead: how long the last byte \
                 arrived after the sender's last write returned, which differs from one \
                 connection to the next (where TCP's window and buffers stand when the sender \
                 stops); the queue is the median lead less \
                 the one-way delay, plus the 64 KiB block a session's channel fills before \
                 it writes: the time a streaming sender runs ahead of its bytes, which the stage \
                 predictions carry into the next stage."
                    .to_owned(),
            ),
            link.notice().map(str::to_owned),
        ]
        .into_iter()
        .flatten()
        .collect(),
    };
    Ok(Some((table, model)))
}

/// How many transfers measure a link with `bytes` in all: one per 8 MiB, one to five.
/// Each must outlast the queue it measures (the socket buffers fill before a write blocks:
/// about 6 MB on this machine kind's kernel link), and a median wants several.
fn calibration_transfers(bytes: usize) -> usize {
    (bytes / (8 << 20)).clamp(1, 5)
}

/// The typical time of each stage in sessions over loopback: the compute of the prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct Compute {
    per_stage: [Duration; Stage::ALL.len()],
    /// Each stage's time after its last round trip's answer
    /// ([`garble::session::StageReport::tail_time`]).
    tail: [Duration; Stage::ALL.len()],
    /// Each stage's CPU time, where every report measured it (single-shot sessions).
    cpu: [Option<Duration>; Stage::ALL.len()],
    /// Both parties' start traces of the same sessions (garbler's, evaluator's), for the
    /// replay of the stages before garbling ([`super::replay`]).
    starts: Vec<(StartTrace, StartTrace)>,
}

impl Compute {
    /// The median of each stage over `reports` (sessions of one computation over loopback;
    /// the mean of the middle two for an even count); `None` without reports. The median,
    /// not the mean: one session that another process slowed (a millisecond stage can take
    /// twice its usual time on a 2-vCPU VM) must not move every prediction.
    pub fn of(reports: &[SessionReport]) -> Option<Compute> {
        let median = |f: &dyn Fn(&SessionReport) -> Duration| -> Option<Duration> {
            let ns: Vec<f64> = reports.iter().map(|r| f(r).as_nanos() as f64).collect();
            Some(Duration::from_nanos(
                measure::stats::median(&ns).ok()?.round() as u64,
            ))
        };
        let mut per_stage = [Duration::ZERO; Stage::ALL.len()];
        let mut tail = [Duration::ZERO; Stage::ALL.len()];
        let mut cpu = [None; Stage::ALL.len()];
        for (i, &s) in Stage::ALL.iter().enumerate() {
            per_stage[i] = median(&|r| r.stage(s).time)?;
            tail[i] = median(&|r| r.stage(s).tail_time)?;
            if reports.iter().all(|r| r.stage(s).cpu.is_some()) {
                cpu[i] = median(&|r| r.stage(s).cpu.unwrap_or_default());
            }
        }
        Some(Compute {
            per_stage,
            tail,
            cpu,
            starts: Vec::new(),
        })
    }

    /// [`Compute::of`] the garbler's `reports`, with the evaluator's start traces
    /// `evaluator` of the same sessions, in order: the stages before garbling are then
    /// predicted by replaying both parties' traces over the link ([`Model::predict`]).
    /// Sessions without both traces are left out of the replay.
    pub fn with_evaluator(reports: &[SessionReport], evaluator: &[StartTrace]) -> Option<Compute> {
        let mut c = Compute::of(reports)?;
        c.starts = reports
            .iter()
            .zip(evaluator)
            .filter(|(r, e)| !r.start.is_empty() && !e.is_empty())
            .map(|(r, e)| (r.start.clone(), e.clone()))
            .collect();
        Some(c)
    }

    /// A stage's typical (median) time.
    pub fn stage(&self, s: Stage) -> Duration {
        self.per_stage[s as usize]
    }

    /// A stage's typical (median) time after its last round trip's answer.
    pub fn tail(&self, s: Stage) -> Duration {
        self.tail[s as usize]
    }

    /// A stage's typical (median) CPU time, where measured (single-shot sessions).
    pub fn cpu(&self, s: Stage) -> Option<Duration> {
        self.cpu[s as usize]
    }
}

/// The link as the predictions see it: the profile, and how much of the link's transfer
/// time a sender can run ahead of its bytes (the queue of socket buffers and emulator it
/// fills before a write blocks), measured on the link itself (`garble::link::Measured::lead` less the
/// one-way delay).
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The link's profile.
    pub profile: Profile,
    /// The queue, in seconds of the link's rate.
    pub queue: Duration,
    /// How much transfer time the link's token bucket (`tbf`'s, or the user-space link's;
    /// [`garble::link::Shape::burst_bytes`] deep) saves a party that waited a round trip:
    /// the bucket refills at the link's rate while the party waits, and then lets that
    /// many bytes through at once.
    pub refill: Duration,
}

impl Model {
    /// The model of `profile` whose sender ran `lead` ahead of its last byte's arrival
    /// (a plain socket's writes), plus the block a session's channel fills before it
    /// writes.
    pub fn new(profile: Profile, lead: Duration) -> Model {
        let channel = TCP_BUFFER as f64;
        let ahead = profile
            .rate_bytes_per_s()
            .map_or(Duration::ZERO, |r| Duration::from_secs_f64(channel / r));
        let queue = lead.saturating_sub(profile.rtt / 2) + ahead;
        let refill = match (profile.shape(), profile.rate_bytes_per_s()) {
            (Some(shape), Some(rate)) => {
                let bytes = (shape.burst_bytes() as f64).min(profile.rtt.as_secs_f64() * rate);
                Duration::from_secs_f64(bytes / rate)
            }
            _ => Duration::ZERO,
        };
        Model {
            profile,
            queue,
            refill,
        }
    }

    /// Each stage's predicted time over the link (in the order of [`Stage::ALL`]), from its
    /// round trips `n`, its bytes both ways `b`, and its loopback compute `c`. The bytes
    /// not yet across when a stage ends (the backlog `q₀`, in seconds of transfer) carry
    /// into the next stage:
    ///
    /// * a stage that waits for an answer (`n > 0`) first drains the backlog:
    ///   `t = c + n × RTT + q₀ + b ÷ rate − q₁`, and leaves `q₁ = min(Q, s ÷ rate)`: of the
    ///   bytes `s` it sent after its last answer
    ///   ([`garble::session::StageReport::tail_sent`], the tables garbled after a
    ///   mid-circuit reveal), what fits in the queue is still on its way; the garbler's
    ///   Garble stage with a round trip (the reveal) garbles while its bytes go, so there
    ///   `t = max(c, q₀ + b ÷ rate − q₁) + n × RTT`, and the link carries its tail while
    ///   the tail is garbled (its loopback time after the answer, `cₜ`,
    ///   [`garble::session::StageReport::tail_time`]): `q₁ = min(Q, s ÷ rate − cₜ)`;
    /// * a streaming stage (`n = 0`, the garbler's Garble) ends when its bytes fit in the
    ///   queue `Q`, its compute overlapping the transfer: `t = max(c, q₀ + b ÷ rate − Q)`,
    ///   and leaves `q₀ + b ÷ rate − t` for the next stage;
    /// * the link's token bucket refills while a party waits for an answer, up to its depth
    ///   or what the rate refills in a round trip (`B`, [`Model::refill`]): the bytes sent
    ///   after the answer leave at once up to `B`, first the stage's own tail (the backlog
    ///   it leaves is `q₁ − min(B, q₁)`), then, with what is left of `B`, the next stage's
    ///   bytes (its `b ÷ rate` is that much less);
    /// * with both parties' start traces ([`Compute::with_evaluator`]), each stage before
    ///   garbling is instead `c` plus what the link adds to it in a replay of the traces
    ///   ([`super::replay::added_by`], the median over the sessions): these stages wait for
    ///   what the peer computed meanwhile (its compile, its base OTs), which the formulas
    ///   above count as a round trip after the stage's own compute whichever party was
    ///   first. The replay starts the two parties as far apart as they started in the
    ///   session predicted (`evaluator`, that session's evaluator's start trace; an empty
    ///   trace: as over loopback, plus one delay for the evaluator's token);
    /// * and no such stage is predicted shorter than its CPU time over loopback
    ///   ([`Compute::cpu`], where measured): that work is the party's whatever the link, and
    ///   before garbling it is its own thread's. The replay counts a receive whose
    ///   bytes have already arrived as free, and over loopback such a receive held a
    ///   wake-up and a copy: without the floor, the garbler's Peer Inputs of a single-shot
    ///   AES-128 session over `lan` was predicted at 38.5 µs, under the 80 µs of CPU it
    ///   took over loopback and over the link alike (2026-11-27).
    ///
    /// What the bucket holds is used by the next bytes, whichever stage sends them: the
    /// garbler's socket takes a single-shot session's tables in Result, after two stages
    /// (Peer Inputs, Garble) that send little or nothing. In a session of several
    /// evaluations, what the garbler's socket sent while it was in Result counts with
    /// Garble's bytes: Result is entered between Garble stages, once per evaluation, while
    /// the tables stream.
    pub fn predict(
        &self,
        r: &SessionReport,
        evaluator: &StartTrace,
        compute: &Compute,
    ) -> [Duration; Stage::ALL.len()] {
        let mut out = [Duration::ZERO; Stage::ALL.len()];
        let Some(rate) = self.profile.rate_bytes_per_s() else {
            for (o, &s) in out.iter_mut().zip(&Stage::ALL) {
                *o = compute.stage(s);
            }
            return out;
        };
        let (rtt, queue) = (self.profile.rtt.as_secs_f64(), self.queue.as_secs_f64());
        let refill = self.refill.as_secs_f64();
        let (mut backlog, mut credit): (f64, f64) = (0.0, 0.0);
        let wire = super::replay::Wire {
            one_way: self.profile.rtt / 2,
            rate: Some(rate),
            burst: self.profile.shape().map_or(0.0, |s| s.burst_bytes() as f64),
            start_lag: super::replay::start_lag(&r.start, evaluator),
        };
        let added = super::replay::added_by(&compute.starts, wire);
        // In a session of several evaluations the garbler enters Result once per evaluation,
        // between two Garble stages (to encode that evaluation's outputs), and its socket
        // sends the tables meanwhile: the bytes sent in Result are the stream's, counted with
        // Garble's; Result keeps what it received (the outputs).
        let several = r.evaluations > 1;
        let bytes = |s: Stage| {
            let st = r.stage(s);
            match s {
                Stage::Garble if several => {
                    st.wire_sent + st.wire_received + r.stage(Stage::Result).wire_sent
                }
                Stage::Result if several => st.wire_received,
                _ => st.wire_sent + st.wire_received,
            }
        };
        for (o, &s) in out.iter_mut().zip(&Stage::ALL) {
            let st = r.stage(s);
            let transfer = bytes(s) as f64 / rate;
            // What the bucket still holds from the last wait leaves at once.
            let used = credit.min(transfer);
            credit -= used;
            let transfer = transfer - used;
            let c = compute.stage(s).as_secs_f64();
            let t = if st.round_trips > 0 {
                let rounds = st.round_trips as f64 * rtt;
                // The garbler streams its tables while it garbles, round trips (a reveal)
                // or not: its compute overlaps its bytes, and what the link carried while
                // it garbled the tail is no longer queued at the end. Every other waiting
                // stage computes, then sends.
                let streams = s == Stage::Garble;
                let overlap = if streams {
                    compute.tail(s).as_secs_f64()
                } else {
                    0.0
                };
                let tail = (st.tail_sent as f64 / rate - overlap)
                    .max(0.0)
                    .min(queue)
                    .min(transfer);
                let t = if streams {
                    c.max(backlog + transfer - tail) + rounds
                } else {
                    c + rounds + backlog + transfer - tail
                };
                // The wait refilled the bucket: the tail leaves at once up to its depth.
                credit = credit.max(refill);
                let at_once = credit.min(tail);
                backlog = tail - at_once;
                credit -= at_once;
                t
            } else {
                let need = backlog + transfer;
                let t = c.max(need - queue);
                backlog = (need - t).max(0.0);
                t
            };
            let replayed = super::replay::STAGES.iter().position(|&x| x == s);
            let t = match (added, replayed) {
                (Some(a), Some(k)) => {
                    let cpu = compute.cpu(s).map_or(0.0, |d| d.as_secs_f64());
                    (c + a[k]).max(cpu)
                }
                _ => t,
            };
            *o = Duration::from_secs_f64(t);
        }
        out
    }
}

/// Adds the predictions of session `r`'s stages (the garbler's report, with the evaluator's
/// start trace of the same session, [`Model::predict`]) over the link of `model` to `stages`,
/// under the names `name(stage)` (the breakdown's own names); returns the session's
/// predicted total.
pub fn add_predictions(
    stages: &mut Stages,
    name: impl Fn(Stage) -> &'static str,
    model: &Model,
    (r, evaluator): (&SessionReport, &StartTrace),
    compute: &Compute,
) -> Duration {
    let mut total = Duration::ZERO;
    for (s, t) in Stage::ALL
        .into_iter()
        .zip(model.predict(r, evaluator, compute))
    {
        stages.add_predicted(name(s), t);
        total += t;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use garble::hash::{Backend, GcHash};
    use garble::session::{Role, StageReport};

    fn report(times_ms: [u64; 6], rounds: [u64; 6], bytes: [u64; 6]) -> SessionReport {
        SessionReport {
            role: Role::Garbler,
            evaluations: 1,
            backend: Backend::Portable,
            hash: GcHash::default(),
            scheme: garble::scheme::Scheme::HalfGates,
            stages: Stage::ALL
                .iter()
                .enumerate()
                .map(|(i, &stage)| StageReport {
                    stage,
                    time: Duration::from_millis(times_ms[i]),
                    bytes_sent: bytes[i],
                    bytes_received: 0,
                    wire_sent: bytes[i],
                    wire_received: bytes[i] / 2,
                    round_trips: rounds[i],
                    tail_sent: 0,
                    tail_time: Duration::from_millis(times_ms[i]),
                    cpu: None,
                })
                .collect(),
            circuit: garble::library::mul(4).stats(),
            label_slots: 0,
            table_bytes: 0,
            total: Duration::from_millis(times_ms.iter().sum()),
            busy: Duration::ZERO,
            compile: Duration::ZERO,
            bytes_sent: bytes.iter().sum(),
            bytes_received: 0,
            wire_bytes_sent: bytes.iter().sum(),
            wire_bytes_received: 0,
            round_trips: rounds.iter().sum(),
            start: StartTrace::default(),
        }
    }

    #[test]
    fn the_calibration_splits_its_bytes_into_transfers_of_at_least_8_mib() {
        assert_eq!(calibration_transfers(1 << 20), 1);
        assert_eq!(calibration_transfers((16 << 20) - 1), 1);
        assert_eq!(calibration_transfers(16 << 20), 2);
        // `wan`: two seconds of 200 Mbit/s.
        assert_eq!(calibration_transfers(50_000_000), 5);
        assert_eq!(calibration_transfers(64 << 20), 5);
    }

    #[test]
    fn predictions_take_round_trips_bytes_and_loopback_compute() {
        let loopback = [
            report([1, 2, 3, 4, 5, 6], [0; 6], [0; 6]),
            report([3, 2, 1, 4, 7, 6], [0; 6], [0; 6]),
        ];
        let compute = Compute::of(&loopback).unwrap();
        assert_eq!(compute.stage(Stage::Load), Duration::from_millis(2));
        assert_eq!(compute.stage(Stage::Garble), Duration::from_millis(6));
        // The median: one slow session does not move it.
        let outlier = [
            report([1, 2, 3, 4, 5, 6], [0; 6], [0; 6]),
            report([30, 2, 3, 4, 5, 6], [0; 6], [0; 6]),
            report([2, 2, 3, 4, 5, 6], [0; 6], [0; 6]),
        ];
        let typical = Compute::of(&outlier).unwrap();
        assert_eq!(typical.stage(Stage::Load), Duration::from_millis(2));
        let wan: Profile = "wan".parse().unwrap();
        let ms = |d: Duration| (d.as_secs_f64() * 1e3 * 1e3).round() / 1e3;
        // Garble: 2.5 MB out and 1.25 MB back at 25 MB/s, no round trip: 150 ms, which the
        // 6 ms of compute overlap; with no queue, nothing carries into Result.
        let over = report([0; 6], [0, 1, 0, 1, 0, 1], [0, 80, 0, 0, 2_500_000, 0]);
        let ahead = 65_536.0 / 25e6;
        let p = Model {
            profile: wan.clone(),
            queue: Duration::ZERO,
            refill: Duration::ZERO,
        }
        .predict(&over, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Garble as usize]), 150.0);
        // Init: one 20 ms round trip, 120 bytes (4.8 µs), 2 ms of compute.
        assert_eq!(ms(p[Stage::Init as usize]), 22.005);
        // Result: its round trip and compute.
        assert_eq!(ms(p[Stage::Result as usize]), 26.0);
        // A queue of 40 ms: Garble ends 40 ms before its bytes are across, and Result
        // drains them before its answer comes.
        let queued = Model::new(wan.clone(), Duration::from_millis(50));
        let q = queued.queue.as_secs_f64();
        assert!((q - 0.04 - ahead).abs() < 1e-9, "{q}");
        let queued = Model {
            queue: Duration::from_millis(40),
            refill: Duration::ZERO,
            ..queued
        };
        let p = queued.predict(&over, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Garble as usize]), 110.0);
        assert_eq!(ms(p[Stage::Result as usize]), 66.0);
        // A compute-bound stream leaves nothing behind.
        let slow = [report([0, 0, 0, 0, 300, 0], [0; 6], [0; 6])];
        let p = queued.predict(&over, &StartTrace::default(), &Compute::of(&slow).unwrap());
        assert_eq!(ms(p[Stage::Garble as usize]), 300.0);
        assert_eq!(ms(p[Stage::Result as usize]), 20.0);
        let mut st = Stages::new();
        let total = add_predictions(
            &mut st,
            Stage::name,
            &queued,
            (&over, &StartTrace::default()),
            &compute,
        );
        assert_eq!(
            total,
            queued
                .predict(&over, &StartTrace::default(), &compute)
                .iter()
                .sum::<Duration>()
        );
        let b = st.finish("x", None, None);
        let garble = b.stages[4].predicted_ns.unwrap();
        assert!((garble - 110e6).abs() < 10.0, "{garble}");
        assert!(Compute::of(&[]).is_none());
    }

    /// The token bucket refills while a party waits for an answer: what the party sends
    /// after the answer leaves at once, up to the bucket's depth.
    #[test]
    fn a_wait_refills_the_bucket_for_the_bytes_after_it() {
        let ms = |d: Duration| (d.as_secs_f64() * 1e3 * 1e3).round() / 1e3;
        // `lan`: a bucket of 1 ms of bytes (125 kB), which a 1 ms round trip refills;
        // `wan`: 64 KiB (2.62 ms at 25 MB/s), which a 20 ms round trip refills.
        let lan = Model::new("lan".parse().unwrap(), Duration::from_millis(1));
        assert_eq!(ms(lan.refill), 1.0);
        let wan = Model::new("wan".parse().unwrap(), Duration::from_millis(10));
        assert_eq!(ms(wan.refill), 2.621);
        // Over loopback nothing computes. Over `lan` with a queue of 100 ms, Peer Inputs
        // waits once and sends 50 kB after the answer (0.4 ms, within the bucket); Garble
        // streams 2 MB (16 ms) into the queue, and Result waits for all of it and its
        // answer.
        let compute = Compute::of(&[report([0; 6], [0; 6], [0; 6])]).unwrap();
        let mut r = report([0; 6], [0, 0, 0, 1, 0, 1], [0, 0, 0, 50_000, 2_000_000, 0]);
        for st in &mut r.stages {
            st.wire_received = 0;
        }
        r.stages[Stage::PeerInputs as usize].tail_sent = 50_000;
        let lan = Model {
            queue: Duration::from_millis(100),
            ..lan
        };
        let p = lan.predict(&r, &StartTrace::default(), &compute);
        // Peer Inputs: its round trip (its tail goes on without it).
        assert_eq!(ms(p[Stage::PeerInputs as usize]), 1.0);
        assert_eq!(ms(p[Stage::Garble as usize]), 0.0);
        // Result: the round trip and Garble's 16 ms, less the 0.6 ms of them that the
        // bucket still held after the tail had left at once.
        assert_eq!(ms(p[Stage::Result as usize]), 1.0 + 16.0 - 0.6);
        // Without the bucket, the tail is queued too: 1 + 0.4 + 16 ms.
        let none = Model {
            refill: Duration::ZERO,
            ..lan.clone()
        };
        let p = none.predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Result as usize]), 17.4);
        // A tail longer than the bucket (1.6 ms): 0.6 ms of it stays queued, and Garble's
        // bytes get nothing of the bucket.
        r.stages[Stage::PeerInputs as usize].tail_sent = 200_000;
        r.stages[Stage::PeerInputs as usize].wire_sent = 200_000;
        let p = lan.predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Result as usize]), 1.0 + 0.6 + 16.0);
    }

    /// What the bucket holds after a wait goes to the next bytes sent, however many stages
    /// later: a single-shot session's tables leave the garbler's socket in Result, after
    /// Peer Inputs (a little) and Garble (nothing).
    #[test]
    fn the_bucket_carries_to_the_next_bytes_whichever_stage_sends_them() {
        let ms = |d: Duration| (d.as_secs_f64() * 1e3 * 1e3).round() / 1e3;
        let compute = Compute::of(&[report([0; 6], [0; 6], [0; 6])]).unwrap();
        // `lan`, 125 kB a ms: OT Init waits (the bucket is full, 1 ms), Peer Inputs sends
        // 25 kB (0.2 ms), Garble nothing, Result 200 kB (1.6 ms) and waits once.
        let lan = Model {
            queue: Duration::from_millis(100),
            ..Model::new("lan".parse().unwrap(), Duration::from_millis(1))
        };
        let mut r = report([0; 6], [0, 0, 1, 0, 0, 1], [0, 0, 0, 25_000, 0, 200_000]);
        for st in &mut r.stages {
            st.wire_received = 0;
        }
        let p = lan.predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::PeerInputs as usize]), 0.0);
        // The 0.8 ms left in the bucket after Peer Inputs take 100 kB of Result's 200 kB.
        assert_eq!(ms(p[Stage::Result as usize]), 1.0 + 1.6 - 0.8);
    }

    /// The stages before garbling are the replay's: in a session whose garbler started 10 s
    /// before its evaluator, Init waits those 10 s and the answer's way back (the header was
    /// there before the evaluator started), which no round trip of the formula gives.
    #[test]
    fn the_stages_before_garbling_replay_the_session_predicted() {
        let c = garble::library::aes128();
        let run = garble::microbench::loopback_2pc(&c, 1, &Default::default()).unwrap();
        let (g, e) = (run.garbler.start.clone(), run.evaluator.start.clone());
        let compute =
            Compute::with_evaluator(std::slice::from_ref(&run.garbler), std::slice::from_ref(&e))
                .unwrap();
        let model = Model::new("rate=1gbit,rtt=2s".parse().unwrap(), Duration::ZERO);
        let later = StartTrace {
            origin: g.origin + Duration::from_secs(10),
            ..e.clone()
        };
        let init = |ev: &StartTrace| model.predict(&run.garbler, ev, &compute)[1].as_secs_f64();
        // As the loopback session started (plus the token's delay): the round trip.
        let usual = init(&e);
        assert!((1.9..3.0).contains(&usual), "{usual}");
        let waited = init(&later);
        assert!((10.9..11.5).contains(&waited), "{waited}");
        // An unknown start: as over loopback.
        assert_eq!(init(&StartTrace::default()), usual);
    }

    /// No stage before garbling is predicted shorter than the CPU it took over loopback,
    /// whatever the replay gives; without a CPU time, and from Garble on (where the CPU is two
    /// threads'), the prediction is the model's own.
    #[test]
    fn no_stage_before_garbling_is_predicted_under_its_loopback_cpu() {
        let c = garble::library::aes128();
        let run = garble::microbench::loopback_2pc(&c, 1, &Default::default()).unwrap();
        let e = run.evaluator.start.clone();
        let lan = Model::new("lan".parse().unwrap(), Duration::ZERO);
        let mut g = run.garbler.clone();
        let predicted = |g: &SessionReport| {
            let compute =
                Compute::with_evaluator(std::slice::from_ref(g), std::slice::from_ref(&e)).unwrap();
            lan.predict(g, &e, &compute)
        };
        for st in &mut g.stages {
            st.cpu = None;
        }
        let free = predicted(&g);
        let (inputs, garble) = (Stage::PeerInputs as usize, Stage::Garble as usize);
        // A replayed stage and the streaming one, each given more CPU than it was predicted.
        g.stages[inputs].cpu = Some(free[inputs] + Duration::from_millis(7));
        g.stages[garble].cpu = Some(free[garble] + Duration::from_millis(9));
        let floored = predicted(&g);
        assert_eq!(floored[inputs], free[inputs] + Duration::from_millis(7));
        // Garble and the stages without a CPU time are as they were.
        for s in [
            Stage::Load,
            Stage::Init,
            Stage::OtInit,
            Stage::Garble,
            Stage::Result,
        ] {
            assert_eq!(floored[s as usize], free[s as usize], "{s:?}");
        }
    }

    /// In a session of several evaluations, the bytes the garbler's socket sent while it was
    /// in Result (entered once per evaluation, between Garble stages) stream with Garble's.
    #[test]
    fn a_bulk_sessions_result_bytes_stream_with_garble() {
        let ms = |d: Duration| (d.as_secs_f64() * 1e3 * 1e3).round() / 1e3;
        let compute = Compute::of(&[report([0, 0, 0, 0, 0, 3], [0; 6], [0; 6])]).unwrap();
        let lan = Model {
            queue: Duration::from_millis(10),
            refill: Duration::ZERO,
            ..Model::new("lan".parse().unwrap(), Duration::from_millis(1))
        };
        // 100 MB in Garble and 25 MB in Result (800 and 200 ms at 125 MB/s).
        let mut r = report(
            [0; 6],
            [0, 0, 0, 0, 0, 1],
            [0, 0, 0, 0, 100_000_000, 25_000_000],
        );
        for st in &mut r.stages {
            st.wire_received = 0;
        }
        r.stages[Stage::Result as usize].wire_received = 125_000;
        // One evaluation: Result waits for its own 200 ms and the outputs' 1 ms.
        let p = lan.predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Garble as usize]), 790.0);
        assert_eq!(ms(p[Stage::Result as usize]), 3.0 + 1.0 + 10.0 + 201.0);
        // Several: Garble streams all 1000 ms less the queue, Result drains the queue.
        r.evaluations = 8;
        let p = lan.predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Garble as usize]), 990.0);
        assert_eq!(ms(p[Stage::Result as usize]), 3.0 + 1.0 + 10.0 + 1.0);
    }

    /// A Garble stage with a round trip inside (a mid-circuit reveal): the tables sent after
    /// the reveal's answer are still queued when it ends, up to the queue, and Result
    /// drains them.
    #[test]
    fn bytes_after_a_stages_last_round_trip_carry_into_the_next() {
        let wan: Profile = "wan".parse().unwrap();
        let ms = |d: Duration| (d.as_secs_f64() * 1e3 * 1e3).round() / 1e3;
        // Over loopback the stage garbles for 6 ms, the last 2 of them after the reveal.
        let with_tail = |garble_ms: u64, tail_ms: u64| {
            let mut r = report([0, 2, 0, 0, garble_ms, 6], [0; 6], [0; 6]);
            r.stages[Stage::Garble as usize].tail_time = Duration::from_millis(tail_ms);
            Compute::of(&[r]).unwrap()
        };
        let compute = with_tail(6, 2);
        assert_eq!(compute.tail(Stage::Garble), Duration::from_millis(2));
        // 2.5 MB of Garble at 25 MB/s (100 ms), 0.5 MB of it after the reveal (20 ms).
        let mut r = report([0; 6], [0, 1, 0, 1, 1, 1], [0, 80, 0, 0, 2_500_000, 0]);
        r.stages[Stage::Garble as usize].wire_received = 0;
        r.stages[Stage::Garble as usize].tail_sent = 500_000;
        let model = |q: u64| Model {
            profile: wan.clone(),
            queue: Duration::from_millis(q),
            refill: Duration::ZERO,
        };
        // No queue: the stage waits for all its bytes, which its 6 ms of garbling
        // overlap, and its round trip; nothing carries over.
        let p = model(0).predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Garble as usize]), 120.0);
        assert_eq!(ms(p[Stage::Result as usize]), 26.0);
        // A queue of 15 ms holds 15 of the tail's 20 ms: Garble ends 15 ms sooner, and
        // Result waits for them before its answer.
        let p = model(15).predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Garble as usize]), 105.0);
        assert_eq!(ms(p[Stage::Result as usize]), 41.0);
        // A queue longer than the tail holds all of it but the 2 ms the link carried while
        // the tail was garbled.
        let p = model(300).predict(&r, &StartTrace::default(), &compute);
        assert_eq!(ms(p[Stage::Garble as usize]), 102.0);
        assert_eq!(ms(p[Stage::Result as usize]), 44.0);
        // A tail garbled slower than the link carries it leaves nothing queued.
        let p = model(300).predict(&r, &StartTrace::default(), &with_tail(30, 25));
        assert_eq!(ms(p[Stage::Garble as usize]), 120.0);
        assert_eq!(ms(p[Stage::Result as usize]), 26.0);
        // Garbling slower than the link: the compute, then the round trip.
        let slow = Compute::of(&[report([0, 2, 0, 0, 300, 6], [0; 6], [0; 6])]).unwrap();
        let p = model(0).predict(&r, &StartTrace::default(), &slow);
        assert_eq!(ms(p[Stage::Garble as usize]), 320.0);
        // Any other waiting stage computes, then sends: Peer Inputs with 2.5 MB.
        let mut pi = report([0; 6], [0, 1, 0, 1, 0, 1], [0, 80, 0, 2_500_000, 0, 0]);
        pi.stages[Stage::PeerInputs as usize].wire_received = 0;
        let c = Compute::of(&[report([0, 2, 0, 50, 0, 6], [0; 6], [0; 6])]).unwrap();
        let p = model(0).predict(&pi, &StartTrace::default(), &c);
        assert_eq!(ms(p[Stage::PeerInputs as usize]), 170.0);
    }

    #[test]
    fn params_name_the_profile_and_its_emulator() {
        let p = net_params(&"lan".parse().unwrap());
        assert_eq!(p.get("net"), Some(&Value::from("lan")));
        assert_eq!(
            p.get("rate_bits_per_s"),
            Some(&Value::from(1_000_000_000u64))
        );
        assert_eq!(p.get("rtt_ms"), Some(&Value::from(1.0)));
        assert_eq!(p.get("link_emulator"), Some(&Value::from("userspace")));
        let l = net_params(&Profile::loopback());
        assert_eq!(l.get("link_emulator"), Some(&Value::from("none")));
        // Loopback is not shaped: no rate or delay written as if measured.
        assert_eq!((l.get("rate_bits_per_s"), l.get("rtt_ms")), (None, None));
    }
}
