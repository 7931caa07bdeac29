//! A party's start of a session as the steps it took: the stages it entered, the bytes it
//! put on the wire and the bytes it waited for, each with its time, up to the first Garble
//! stage ([`SessionReport::start`](crate::session::SessionReport::start)).
//!
//! Why: the millisecond stages before garbling (Init, OT Init, Peer Inputs) are races
//! between the two parties. The garbler's OT Init waits for the end of the evaluator's side
//! of the base OTs, which runs while the garbler runs its own; over loopback one party or the other finishes
//! first, from one session to the next. A stage's time over a link then depends on when
//! the peer sent what the stage waits for, which one party's stage times do not say. Both
//! parties' traces of one session over loopback do: a replay of them over a link's delay
//! and rate (`scenarios::gc2pc::replay`) moves each message by the link and keeps each
//! party's compute between its steps.
//!
//! The traces are text in the evaluator's report line (`encode`, `decode`): a party of
//! this build writes them, and a line that is not one is an error, not a guess.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::session::Stage;

/// Steps a trace keeps at most: a session's start takes a few dozen (the base OTs' chunks
/// are the most); a longer one is cut, and a replay of it refused.
pub const MAX_STEPS: usize = 256;

/// What a party did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// It entered a stage.
    Enter(Stage),
    /// It flushed its channel: every byte up to `sent` (its protocol's count) is on the
    /// wire.
    Flush {
        /// Bytes sent so far.
        sent: u64,
    },
    /// It received up to byte `upto` of what the peer sent (waiting, if they had not
    /// arrived).
    Recv {
        /// Bytes received so far, this receive's included.
        upto: u64,
    },
}

/// A step and when it started and ended, since the session's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceStep {
    /// The step.
    pub step: Step,
    /// When it started.
    pub start: Duration,
    /// When it ended (a stage's entry takes no time).
    pub end: Duration,
}

/// A party's start of a session: its steps, and when the session started on the machine's
/// monotonic clock (`CLOCK_MONOTONIC`, the same for every process of the machine), so that
/// two parties' traces of one session line up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartTrace {
    /// The session's start, `CLOCK_MONOTONIC`.
    pub origin: Duration,
    /// The steps, times since `origin`; empty when there is no trace.
    pub steps: Vec<TraceStep>,
}

impl StartTrace {
    /// Whether there is no trace.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// The machine's monotonic clock now.
fn monotonic() -> Duration {
    crate::channel::clock(rustix::time::ClockId::Monotonic)
}

/// A trace that is not one.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("malformed session trace at step {index}: {what}")]
pub struct TraceError {
    /// The step's position.
    pub index: usize,
    /// What is wrong.
    pub what: &'static str,
}

/// Steps as a party takes them, each with its start and end: a channel's flushes and
/// receives (`RoundTrips`), or a session's stage entries (`Stages`).
#[derive(Debug, Default)]
pub(crate) struct StepLog {
    steps: Vec<(Step, Instant, Instant)>,
}

impl StepLog {
    /// Whether a step would be kept (no clock to read for one that would not). A log
    /// without room may have dropped steps.
    pub(crate) fn has_room(&self) -> bool {
        self.steps.len() < MAX_STEPS
    }

    /// Records `step`, begun at `start` and ended now, while there is room.
    pub(crate) fn push(&mut self, step: Step, start: Instant) {
        if self.has_room() {
            self.steps.push((step, start, Instant::now()));
        }
    }

    /// Records a stage's entry, up to the first Garble stage's.
    pub(crate) fn enter(&mut self, stage: Stage) {
        let garbling = self
            .steps
            .iter()
            .any(|(s, _, _)| *s == Step::Enter(Stage::Garble));
        if !garbling {
            let now = Instant::now();
            self.push(Step::Enter(stage), now);
        }
    }
}

/// A session's start from its stage entries `enters` and its channel's steps `io`, times
/// since `t0` (the session's start), in order, up to the first Garble stage's entry; no
/// steps when there is none or when `io` dropped a step before it (a trace with a hole
/// cannot be replayed).
pub(crate) fn start(enters: &StepLog, io: &StepLog, t0: Instant) -> StartTrace {
    let origin = monotonic().saturating_sub(t0.elapsed());
    StartTrace {
        origin,
        steps: steps(enters, io, t0),
    }
}

fn steps(enters: &StepLog, io: &StepLog, t0: Instant) -> Vec<TraceStep> {
    let Some(&(_, garble, _)) = enters
        .steps
        .iter()
        .find(|(s, _, _)| *s == Step::Enter(Stage::Garble))
    else {
        return Vec::new();
    };
    let cut =
        |log: &StepLog| !log.has_room() && log.steps.last().is_none_or(|&(_, t, _)| t < garble);
    if cut(enters) || cut(io) {
        return Vec::new();
    }
    let mut steps: Vec<(Step, Instant, Instant)> = enters
        .steps
        .iter()
        .copied()
        .chain(io.steps.iter().copied().filter(|&(_, t, _)| t < garble))
        .collect();
    // Stable: a stage entered at the very instant of a step stays before it.
    steps.sort_by_key(|&(_, t, _)| t);
    steps
        .into_iter()
        .map(|(step, s, e)| TraceStep {
            step,
            start: s.saturating_duration_since(t0),
            end: e.saturating_duration_since(t0),
        })
        .collect()
}

/// `trace` as text: the origin in nanoseconds, then `;` and the steps, `;`-separated, each
/// `KIND:VALUE:START:END` with times in nanoseconds; the kinds are `E` (a stage's entry,
/// the stage's index), `F` (a flush, bytes sent) and `R` (a receive, bytes received).
pub fn encode(trace: &StartTrace) -> String {
    let mut out = trace.origin.as_nanos().to_string();
    for s in &trace.steps {
        let (kind, value) = match s.step {
            Step::Enter(stage) => ('E', stage as u64),
            Step::Flush { sent } => ('F', sent),
            Step::Recv { upto } => ('R', upto),
        };
        out.push(';');
        let _ = write!(
            out,
            "{kind}:{value}:{}:{}",
            s.start.as_nanos(),
            s.end.as_nanos()
        );
    }
    out
}

/// The trace [`encode`] wrote: an origin, and every step well-formed, times not running
/// backwards, and byte counts not falling. Steps count from 1 in errors (0 is the origin).
pub fn decode(text: &str) -> Result<StartTrace, TraceError> {
    let mut parts = text.split(';');
    let origin = parts
        .next()
        .and_then(|o| o.parse::<u64>().ok())
        .ok_or(TraceError {
            index: 0,
            what: "no origin",
        })?;
    let mut out: Vec<TraceStep> = Vec::new();
    for (i, part) in parts.enumerate() {
        let index = i + 1;
        let err = |what| TraceError { index, what };
        if i >= MAX_STEPS {
            return Err(err("more steps than a trace keeps"));
        }
        let mut f = part.split(':');
        let (Some(kind), Some(value), Some(start), Some(end), None) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            return Err(err("not KIND:VALUE:START:END"));
        };
        let num = |s: &str| s.parse::<u64>().map_err(|_| err("not a number"));
        let (value, start, end) = (num(value)?, num(start)?, num(end)?);
        let step = match kind {
            "E" => Step::Enter(
                *Stage::ALL
                    .get(value as usize)
                    .ok_or_else(|| err("no such stage"))?,
            ),
            "F" => Step::Flush { sent: value },
            "R" => Step::Recv { upto: value },
            _ => return Err(err("an unknown kind of step")),
        };
        let (start, end) = (Duration::from_nanos(start), Duration::from_nanos(end));
        if end < start || out.last().is_some_and(|p| start < p.start) {
            return Err(err("time runs backwards"));
        }
        let falls = out.iter().rev().any(|p| match (p.step, step) {
            (Step::Flush { sent: a }, Step::Flush { sent: b }) => b < a,
            (Step::Recv { upto: a }, Step::Recv { upto: b }) => b < a,
            _ => false,
        });
        if falls {
            return Err(err("a byte count falls"));
        }
        out.push(TraceStep { step, start, end });
    }
    Ok(StartTrace {
        origin: Duration::from_nanos(origin),
        steps: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: Step, start_us: u64, end_us: u64) -> TraceStep {
        TraceStep {
            step,
            start: Duration::from_micros(start_us),
            end: Duration::from_micros(end_us),
        }
    }

    #[test]
    fn traces_round_trip_through_text() {
        let steps = vec![
            step(Step::Enter(Stage::Load), 0, 0),
            step(Step::Enter(Stage::Init), 30, 30),
            step(Step::Flush { sent: 80 }, 31, 33),
            step(Step::Recv { upto: 80 }, 33, 1200),
            step(Step::Enter(Stage::OtInit), 1201, 1201),
            step(Step::Enter(Stage::Garble), 9000, 9000),
        ];
        let trace = StartTrace {
            origin: Duration::from_nanos(123_456_789),
            steps,
        };
        let text = encode(&trace);
        assert!(text.starts_with("123456789;E:0:0:0;"), "{text}");
        assert_eq!(decode(&text), Ok(trace));
        let empty = StartTrace {
            origin: Duration::from_nanos(5),
            steps: vec![],
        };
        assert_eq!(encode(&empty), "5");
        assert_eq!(decode("5"), Ok(empty));
    }

    #[test]
    fn malformed_traces_are_refused_with_the_step() {
        for (text, index, what) in [
            ("", 0, "no origin"),
            ("x;E:0:0:0", 0, "no origin"),
            ("1;E:0:0", 1, "not KIND:VALUE:START:END"),
            ("1;E:0:0:0:1", 1, "not KIND:VALUE:START:END"),
            ("1;E:0:0:0;X:1:2:3", 2, "an unknown kind of step"),
            ("1;E:9:0:0", 1, "no such stage"),
            ("1;F:x:0:0", 1, "not a number"),
            ("1;F:-1:0:0", 1, "not a number"),
            ("1;R:5:10:9", 1, "time runs backwards"),
            ("1;R:5:10:20;R:6:9:30", 2, "time runs backwards"),
            ("1;F:5:1:2;R:3:3:4;F:4:5:6", 3, "a byte count falls"),
        ] {
            assert_eq!(decode(text), Err(TraceError { index, what }), "{text}");
        }
        let long = format!("1;{}", vec!["E:0:0:0"; MAX_STEPS + 1].join(";"));
        assert_eq!(
            decode(&long).unwrap_err().what,
            "more steps than a trace keeps"
        );
    }

    proptest::proptest! {
        /// Any trace `encode` writes reads back as itself, and no text makes `decode`
        /// panic.
        #[test]
        fn encoded_traces_read_back_and_any_text_is_safe(
            origin in proptest::prelude::any::<u64>(),
            raw in proptest::collection::vec((0u8..3, 0u64..1 << 40, 0u64..1 << 20, 0u64..1 << 20), 0..40),
            junk in ".{0,80}",
        ) {
            // Steps in order: times and byte counts only grow.
            let (mut t, mut sent, mut got) = (0u64, 0u64, 0u64);
            let steps: Vec<TraceStep> = raw
                .iter()
                .map(|&(kind, value, gap, took)| {
                    t += gap;
                    let step = match kind {
                        0 => Step::Enter(Stage::ALL[(value % 6) as usize]),
                        1 => { sent += value; Step::Flush { sent } }
                        _ => { got += value; Step::Recv { upto: got } }
                    };
                    TraceStep {
                        step,
                        start: Duration::from_nanos(t),
                        end: Duration::from_nanos(t + took),
                    }
                })
                .collect();
            let trace = StartTrace { origin: Duration::from_nanos(origin), steps };
            proptest::prop_assert_eq!(decode(&encode(&trace)), Ok(trace));
            let _ = decode(&junk);
            let _ = decode(&format!("1;{junk}"));
        }
    }

    #[test]
    fn the_start_is_the_steps_up_to_garbling_in_order_and_nothing_with_a_hole() {
        let t0 = Instant::now();
        let (mut enters, mut io) = (StepLog::default(), StepLog::default());
        enters.enter(Stage::Load);
        io.push(Step::Flush { sent: 4 }, Instant::now());
        enters.enter(Stage::Init);
        io.push(Step::Recv { upto: 9 }, Instant::now());
        enters.enter(Stage::Garble);
        io.push(Step::Recv { upto: 99 }, Instant::now());
        enters.enter(Stage::Result);
        let trace = start(&enters, &io, t0);
        assert!(
            trace.origin >= monotonic().saturating_sub(t0.elapsed()) - Duration::from_millis(100)
        );
        let kinds: Vec<Step> = trace.steps.iter().map(|s| s.step).collect();
        assert_eq!(
            kinds,
            [
                Step::Enter(Stage::Load),
                Step::Flush { sent: 4 },
                Step::Enter(Stage::Init),
                Step::Recv { upto: 9 },
                Step::Enter(Stage::Garble)
            ]
        );

        // A channel log that filled before garbling gives no trace; one that filled after
        // it loses nothing of the start.
        let (mut enters, mut io) = (StepLog::default(), StepLog::default());
        enters.enter(Stage::Load);
        for i in 0..MAX_STEPS as u64 + 5 {
            io.push(Step::Flush { sent: i }, Instant::now());
        }
        enters.enter(Stage::Garble);
        assert!(start(&enters, &io, t0).is_empty());
        let (mut enters, mut io) = (StepLog::default(), StepLog::default());
        enters.enter(Stage::Load);
        io.push(Step::Flush { sent: 1 }, Instant::now());
        enters.enter(Stage::Garble);
        for i in 0..MAX_STEPS as u64 + 5 {
            io.push(Step::Recv { upto: i }, Instant::now());
        }
        assert_eq!(start(&enters, &io, t0).steps.len(), 3);
        // No Garble stage, no trace.
        let mut enters = StepLog::default();
        enters.enter(Stage::Load);
        assert!(start(&enters, &StepLog::default(), t0).is_empty());
    }
}
