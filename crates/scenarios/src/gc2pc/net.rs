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

use garble::link::{Choice, Net, ParamValue, Profile};
use garble::session::{SessionReport, Stage};
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
/// and half a second's worth of bytes at the profile's rate, 1 to 64 MB) and returns the
/// `link` table: the profile's rate and RTT beside what the emulator delivered. `None` for
/// loopback.
pub fn link_table(link: &Net) -> Result<Option<Table>, ScenarioError> {
    let net = link.profile();
    let Some(rate) = net.rate_bytes_per_s() else {
        return Ok(None);
    };
    let bytes = ((rate * 0.5) as usize).clamp(1 << 20, 64 << 20);
    let timeout = Duration::from_secs(60);
    let Some(m) = garble::link::measure(link, bytes, 10, timeout)
        .map_err(|e| ScenarioError::step("measuring the link", e.to_string()))?
    else {
        return Ok(None);
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let rtt = ms(net.rtt);
    Ok(Some(Table {
        name: "link".into(),
        title: format!("The emulated link ({net}) measured on its own"),
        columns: [
            "profile",
            "emulator",
            "rate Mbit/s",
            "measured Mbit/s",
            "measured / profile",
            "RTT ms",
            "measured RTT ms (min)",
            "measured RTT ms (median)",
            "transfer bytes",
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
            Value::from(ms(m.rtt_min)),
            Value::from(ms(m.rtt_median)),
            Value::from(m.bytes),
        ]],
        source: None,
        notes: [
            Some(
                "Rate: one one-way transfer between two threads through the link, from the \
                 first write to the answer that the last byte arrived, less the RTT. RTT: ten \
                 one-byte round trips. The token bucket (tbf's, or the user-space link's) lets \
                 its depth (1 ms of bytes, at least 64 KiB) through at once, which puts a short \
                 transfer's rate above the profile's."
                    .to_owned(),
            ),
            link.notice().map(str::to_owned),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }))
}

/// The mean time of each stage in sessions over loopback: the compute of the prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compute {
    per_stage: [Duration; Stage::ALL.len()],
}

impl Compute {
    /// The mean of each stage over `reports` (sessions of one computation over loopback);
    /// `None` without reports.
    pub fn of(reports: &[SessionReport]) -> Option<Compute> {
        let n = u32::try_from(reports.len()).ok().filter(|&n| n > 0)?;
        let mut per_stage = [Duration::ZERO; Stage::ALL.len()];
        for r in reports {
            for (slot, &s) in per_stage.iter_mut().zip(&Stage::ALL) {
                *slot += r.stage(s).time;
            }
        }
        for d in &mut per_stage {
            *d /= n;
        }
        Some(Compute { per_stage })
    }

    /// A stage's mean time.
    pub fn stage(&self, s: Stage) -> Duration {
        self.per_stage[s as usize]
    }
}

/// The predicted time of stage `s` of session `r` over `net`.
pub fn predict(net: &Profile, r: &SessionReport, compute: &Compute, s: Stage) -> Duration {
    let st = r.stage(s);
    net.predict(
        st.round_trips,
        st.wire_sent + st.wire_received,
        compute.stage(s),
    )
}

/// Adds the predictions of session `r`'s stages over `net` to `stages`, under the names
/// `name(stage)` (the breakdown's own names).
pub fn add_predictions(
    stages: &mut Stages,
    name: impl Fn(Stage) -> &'static str,
    net: &Profile,
    r: &SessionReport,
    compute: &Compute,
) {
    for s in Stage::ALL {
        stages.add_predicted(name(s), predict(net, r, compute, s));
    }
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
        }
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
        let wan: Profile = "wan".parse().unwrap();
        // Garble: 2.5 MB out and 1.25 MB back at 25 MB/s, no round trip: 150 ms + 6 ms.
        let over = report([0; 6], [0, 1, 0, 1, 0, 1], [0, 80, 0, 0, 2_500_000, 0]);
        assert_eq!(
            predict(&wan, &over, &compute, Stage::Garble),
            Duration::from_millis(156)
        );
        // Init: one 20 ms round trip, 120 bytes (4.8 µs), 2 ms of compute.
        let init = predict(&wan, &over, &compute, Stage::Init).as_nanos() as f64;
        assert!((init - 22_004_800.0).abs() < 10.0, "{init}");
        let mut st = Stages::new();
        add_predictions(&mut st, Stage::name, &wan, &over, &compute);
        let b = st.finish("x", None, None);
        assert_eq!(b.stages[4].predicted_ns, Some(156e6));
        assert!(Compute::of(&[]).is_none());
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
