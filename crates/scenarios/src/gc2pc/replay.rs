//! The start of a session (its stages before garbling) replayed over a link from both
//! parties' traces of one session over loopback ([`garble::trace`]).
//!
//! Each party runs its steps in order: the compute between two steps is what it was over
//! loopback (the gap from the end of one to the start of the next), a flush puts its bytes
//! on the link at once (behind any bytes still leaving at the link's rate) and they arrive
//! one delay later, and a receive ends when the bytes it waits for have arrived, or at once
//! if they already had. The bytes leave through the link's token bucket ([`Wire::burst`]):
//! after a pause, up to the bucket's depth leave at once, and only what is beyond it waits
//! for the rate, as on the links of `garble::link` (its user-space bucket and the kernel's
//! `tbf` have the same depth). The evaluator starts its session at 0 and the garbler as much later
//! as it did in the session predicted ([`Wire::start_lag`], the traces' origins on the
//! machine's monotonic clock: the garbler starts once it has seen the evaluator's token,
//! which the evaluator sends just before its session), or, where that is not known, as it
//! did over loopback plus one delay, the token's way across the link. (The start is the
//! harness's: over an emulated link it also holds the link's set-up of the connection, a
//! proxy's accept and connect and its threads' start, 0.1-3.8 ms on the 2-vCPU dev VM,
//! which no profile describes; a garbler that starts later waits less for the evaluator's
//! compilation in Init.)
//!
//! What it leaves out: the receive's own copy (small before garbling), the link's
//! queueing beyond its rate (a session's start sends a few kilobytes), and that the two
//! parties' compute, which share the machine's cores over loopback, overlap differently
//! once a link moves them apart.

use std::time::Duration;

use garble::session::Stage;
use garble::trace::{StartTrace, Step, TraceStep};

/// The stages a replay predicts: those before the first Garble stage.
pub const STAGES: [Stage; 4] = [Stage::Load, Stage::Init, Stage::OtInit, Stage::PeerInputs];

/// A link as the replay sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wire {
    /// One-way delay.
    pub one_way: Duration,
    /// Bytes per second; `None` for no limit.
    pub rate: Option<f64>,
    /// The depth of the link's token bucket, in bytes ([`garble::link::Shape::burst_bytes`]):
    /// what leaves at once after a pause long enough to fill it.
    pub burst: f64,
    /// How much later than the evaluator the garbler started its session over the link, in
    /// the session predicted ([`start_lag`]; negative: sooner); `None`: as in each loopback
    /// session replayed, plus [`Wire::one_way`].
    pub start_lag: Option<f64>,
}

impl Wire {
    /// No delay and no limit: the replay of the traces as they were.
    pub const NONE: Wire = Wire {
        one_way: Duration::ZERO,
        rate: None,
        burst: 0.0,
        start_lag: None,
    };
}

/// How much later than the evaluator (trace `e`) the garbler (trace `g`) started its
/// session, in seconds (negative: sooner); `None` when either trace is missing.
pub fn start_lag(g: &StartTrace, e: &StartTrace) -> Option<f64> {
    (!g.is_empty() && !e.is_empty()).then_some(g.origin.as_secs_f64() - e.origin.as_secs_f64())
}

/// One party as the replay runs it.
struct Party<'a> {
    steps: &'a [TraceStep],
    next: usize,
    /// Where the replay has it: the end of its last step.
    at: f64,
    /// The end of its last step in the trace.
    traced: f64,
    /// Its flushes: bytes sent up to then, and when the last of them arrives.
    out: Vec<(u64, f64)>,
    sent: u64,
    /// The link's token bucket as a virtual clock (GCRA, as `garble::link` keeps it): when
    /// the bytes sent so far have all left at the link's rate, the bucket aside.
    free: f64,
    /// The stages it entered, and when.
    entered: Vec<(Stage, f64)>,
}

impl<'a> Party<'a> {
    fn new(steps: &'a [TraceStep], at: f64) -> Party<'a> {
        Party {
            steps,
            next: 0,
            at,
            traced: 0.0,
            out: Vec::new(),
            sent: 0,
            free: 0.0,
            entered: Vec::new(),
        }
    }

    fn done(&self) -> bool {
        self.next == self.steps.len()
    }

    /// Runs steps until the party waits for bytes `peer` has not flushed yet, or ends;
    /// whether it ran any.
    fn run(&mut self, peer: &[(u64, f64)], wire: Wire) -> bool {
        let mut ran = false;
        while let Some(s) = self.steps.get(self.next) {
            let (start, end) = (s.start.as_secs_f64(), s.end.as_secs_f64());
            let ready = self.at + (start - self.traced).max(0.0);
            self.at = match s.step {
                Step::Enter(stage) => {
                    self.entered.push((stage, ready));
                    ready
                }
                Step::Flush { sent } => {
                    if sent > self.sent {
                        let bytes = (sent - self.sent) as f64;
                        let leaves = match wire.rate {
                            None => ready,
                            Some(r) => {
                                // They leave once they and the bytes before them fit in
                                // the bucket: up to its depth at once after a pause.
                                self.free = ready.max(self.free) + bytes / r;
                                (self.free - wire.burst / r).max(ready)
                            }
                        };
                        self.out.push((sent, leaves + wire.one_way.as_secs_f64()));
                        self.sent = sent;
                    }
                    ready + (end - start)
                }
                Step::Recv { upto } => match peer.iter().find(|&&(sent, _)| sent >= upto) {
                    Some(&(_, arrives)) => ready.max(arrives),
                    None => return ran,
                },
            };
            self.traced = end;
            self.next += 1;
            ran = true;
        }
        ran
    }
}

/// The garbler's time in each of [`STAGES`] when the garbler's trace `g` and the
/// evaluator's `e`, of one session, run over `wire`; `None` when the traces do not fit
/// together (a receive of bytes the peer never flushed, or no Garble stage).
pub fn garbler_start(g: &StartTrace, e: &StartTrace, wire: Wire) -> Option<[Duration; 4]> {
    let lag = match wire.start_lag {
        Some(lag) => lag,
        None => g.origin.as_secs_f64() - e.origin.as_secs_f64() + wire.one_way.as_secs_f64(),
    };
    let mut gp = Party::new(&g.steps, lag.max(0.0));
    let mut ep = Party::new(&e.steps, (-lag).max(0.0));
    while !gp.done() {
        let ran_g = gp.run(&ep.out, wire);
        let ran_e = !ep.done() && ep.run(&gp.out, wire);
        if !ran_g && !ran_e {
            return None;
        }
    }
    let when = |s: Stage| gp.entered.iter().find(|(x, _)| *x == s).map(|&(_, t)| t);
    let mut out = [Duration::ZERO; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let next = if i + 1 < STAGES.len() {
            STAGES[i + 1]
        } else {
            Stage::Garble
        };
        *o = Duration::from_secs_f64((when(next)? - when(STAGES[i])?).max(0.0));
    }
    Some(out)
}

/// What `wire` adds to each of [`STAGES`] of the garbler, against the same traces replayed
/// without a link: the median over the sessions `pairs` (garbler's and evaluator's trace
/// of each), in seconds (negative where the link lets a party wait less, never so);
/// `None` when no pair replays.
pub fn added_by(pairs: &[(StartTrace, StartTrace)], wire: Wire) -> Option<[f64; 4]> {
    let mut added: [Vec<f64>; 4] = Default::default();
    for (g, e) in pairs {
        let (Some(over), Some(bare)) = (garbler_start(g, e, wire), garbler_start(g, e, Wire::NONE))
        else {
            continue;
        };
        for i in 0..4 {
            added[i].push(over[i].as_secs_f64() - bare[i].as_secs_f64());
        }
    }
    let mut out = [0.0; 4];
    for (o, a) in out.iter_mut().zip(&added) {
        *o = measure::stats::median(a).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1e3)
    }

    /// A step from `a` to `b` ms.
    fn st(step: Step, a: f64, b: f64) -> TraceStep {
        TraceStep {
            step,
            start: ms(a),
            end: ms(b),
        }
    }

    fn enter(s: Stage, a: f64) -> TraceStep {
        st(Step::Enter(s), a, a)
    }

    /// A session's start as over loopback: both parties compile (the garbler 30 ms, the
    /// evaluator `e_compile`), exchange headers, run base OTs (the garbler 6 ms after the
    /// evaluator's point, the evaluator `e_ot` ms after the garbler's last chunk, sent 2 ms
    /// in), and the evaluator then sends its extension matrix, which the garbler waits for
    /// in Peer Inputs.
    fn session(e_compile: f64, e_ot: f64) -> (StartTrace, StartTrace) {
        // Evaluator's times, then the garbler's, on one loopback clock (both start at 0).
        let hdr_g: f64 = 30.0; // the garbler's header leaves
        let hdr_e = hdr_g.max(e_compile); // the evaluator has it once it has compiled
        let point = hdr_e + 0.1; // the evaluator's point (with its answer)
        let chunks = point + 2.0; // the garbler's last chunk
        let g_ot_end = point + 6.0;
        let matrix = chunks + e_ot; // the evaluator's extension matrix leaves
        let g = vec![
            enter(Stage::Load, 0.0),
            enter(Stage::Init, 30.0),
            st(Step::Flush { sent: 80 }, 30.0, 30.0),
            st(Step::Recv { upto: 80 }, 30.0, hdr_e),
            enter(Stage::OtInit, hdr_e),
            st(Step::Recv { upto: 112 }, hdr_e, point),
            st(Step::Flush { sent: 4176 }, chunks, chunks),
            enter(Stage::PeerInputs, g_ot_end),
            st(Step::Recv { upto: 12400 }, g_ot_end, g_ot_end.max(matrix)),
            enter(Stage::Garble, g_ot_end.max(matrix) + 0.2),
        ];
        let e = vec![
            enter(Stage::Load, 0.0),
            enter(Stage::Init, e_compile),
            st(Step::Recv { upto: 80 }, e_compile, hdr_e),
            st(Step::Flush { sent: 80 }, hdr_e, hdr_e),
            enter(Stage::OtInit, hdr_e),
            st(Step::Flush { sent: 112 }, point, point),
            st(Step::Recv { upto: 4176 }, point, chunks),
            enter(Stage::PeerInputs, matrix),
            st(Step::Flush { sent: 12400 }, matrix, matrix),
            enter(Stage::Garble, matrix + 1.0),
        ];
        let at = |steps| StartTrace {
            origin: Duration::from_secs(100),
            steps,
        };
        (at(g), at(e))
    }

    fn close(a: Duration, b_ms: f64) -> bool {
        (a.as_secs_f64() * 1e3 - b_ms).abs() < 1e-6
    }

    #[test]
    fn without_a_link_the_replay_is_the_trace() {
        for (e_compile, e_ot) in [(28.0, 3.0), (33.0, 3.0), (28.0, 7.0)] {
            let (g, e) = session(e_compile, e_ot);
            let got = garbler_start(&g, &e, Wire::NONE).unwrap();
            let when = |s: Stage| {
                g.steps
                    .iter()
                    .find(|x| x.step == Step::Enter(s))
                    .unwrap()
                    .start
                    .as_secs_f64()
                    * 1e3
            };
            for (i, &s) in STAGES.iter().enumerate() {
                let next = STAGES.get(i + 1).copied().unwrap_or(Stage::Garble);
                assert!(close(got[i], when(next) - when(s)), "{s:?}: {:?}", got[i]);
            }
        }
    }

    #[test]
    fn a_link_moves_each_wait_by_what_the_peer_was_doing() {
        let wire = Wire {
            one_way: ms(0.5),
            ..Wire::NONE
        };
        // The evaluator compiles faster and answers the header as soon as it arrives: Init
        // is the round trip. Its base OTs end 1 ms before the garbler's over loopback
        // (3 ms after a chunk sent 4 ms before the garbler's end); over the link the
        // chunk and the matrix take 0.5 ms each, so the matrix arrives as the garbler's
        // own base OTs end, and Peer Inputs is the garbler's own 0.2 ms.
        let (g, e) = session(28.0, 3.0);
        let got = garbler_start(&g, &e, wire).unwrap();
        assert!(close(got[0], 30.0), "Load {:?}", got[0]);
        assert!(close(got[1], 1.0), "Init {:?}", got[1]);
        assert!(close(got[2], 6.0 + 0.1), "OT Init {:?}", got[2]);
        assert!(close(got[3], 0.2), "Peer Inputs {:?}", got[3]);
        // Base OTs 1 ms longer on the evaluator's side than the garbler's: over loopback
        // the garbler waits 1 ms, over the link 2.
        let (g, e) = session(28.0, 5.0);
        let bare = garbler_start(&g, &e, Wire::NONE).unwrap();
        let got = garbler_start(&g, &e, wire).unwrap();
        assert!(close(bare[3], 1.2), "{:?}", bare[3]);
        assert!(close(got[3], 2.2), "{:?}", got[3]);
        // An evaluator that compiles 3 ms longer than the garbler: over the link, as over
        // loopback, its answer comes 3 ms after the header left (it started half a delay
        // sooner, with its token, and the answer's way back is the other half), not
        // 3 ms and a round trip.
        let (g, e) = session(33.0, 3.0);
        let got = garbler_start(&g, &e, wire).unwrap();
        assert!(close(got[1], 3.0), "Init {:?}", got[1]);
    }

    #[test]
    fn the_parties_start_as_far_apart_as_in_the_session_predicted() {
        // The evaluator compiles 3 ms longer than the garbler. Over loopback plus one
        // delay for its token, the garbler waits 3 ms for its answer (above); in a session
        // whose garbler started 3.5 ms after the evaluator (the link's set-up of the
        // connection), the evaluator is ready first and Init is the round trip.
        let (g, e) = session(33.0, 3.0);
        let wire = Wire {
            one_way: ms(0.5),
            start_lag: Some(3.5e-3),
            ..Wire::NONE
        };
        let got = garbler_start(&g, &e, wire).unwrap();
        assert!(close(got[1], 1.0), "Init {:?}", got[1]);
        // A garbler that started 5 ms before the evaluator (negative lag) waits 5 ms more
        // for the evaluator's compilation: 28 ms against its own 30, plus 5, plus nothing
        // for a wire of no delay.
        let (g, e) = session(28.0, 3.0);
        let sooner = Wire {
            start_lag: Some(-5e-3),
            ..Wire::NONE
        };
        let got = garbler_start(&g, &e, sooner).unwrap();
        assert!(close(got[1], 3.0), "Init {:?}", got[1]);
        // The lag of two traces: the garbler's origin less the evaluator's.
        let late = StartTrace {
            origin: e.origin + ms(1.5),
            ..g.clone()
        };
        assert!((start_lag(&late, &e).unwrap() - 1.5e-3).abs() < 1e-12);
        assert_eq!(start_lag(&StartTrace::default(), &e), None);
    }

    /// What a link of 12 MB/s and a token bucket `burst` bytes deep adds to the garbler's
    /// Peer Inputs in `session(28.0, 5.0)` (where the evaluator waits in Peer Inputs: the
    /// garbler's chunks and then the evaluator's matrix are on its critical path), in ms,
    /// against the same link without a rate.
    fn rate_adds_to_peer_inputs(burst: f64) -> f64 {
        let (g, e) = session(28.0, 5.0);
        let fast = Wire {
            one_way: ms(0.5),
            ..Wire::NONE
        };
        let slow = Wire {
            rate: Some(12.0e6),
            burst,
            ..fast
        };
        let (a, b) = (
            garbler_start(&g, &e, slow).unwrap(),
            garbler_start(&g, &e, fast).unwrap(),
        );
        (a[3].as_secs_f64() - b[3].as_secs_f64()) * 1e3
    }

    #[test]
    fn the_rate_delays_what_a_flush_sends() {
        // Each flush on the critical path takes its bytes at the rate more: the chunks'
        // 4096 bytes (which the evaluator waited for) and the matrix's 12,288.
        let extra = rate_adds_to_peer_inputs(0.0);
        assert!((extra - (4096.0 + 12288.0) / 12e3).abs() < 1e-6, "{extra}");
    }

    #[test]
    fn the_bucket_lets_a_burst_through_at_once() {
        // Over a link whose token bucket holds `burst` bytes each flush comes after a pause
        // that filled the bucket, so only its bytes beyond the depth wait for the rate (the
        // link's own `due` in `garble::link`). A depth of 8 KiB: the chunks' 4096 bytes
        // leave at once, the matrix's 12,288 pay for their last 4096.
        let x = rate_adds_to_peer_inputs(8192.0);
        assert!((x - 4096.0 / 12e3).abs() < 1e-6, "{x}");
        // A bucket deeper than either flush: the rate adds nothing.
        let x = rate_adds_to_peer_inputs(65536.0);
        assert!(x.abs() < 1e-6, "{x}");
    }

    #[test]
    fn traces_that_do_not_fit_are_refused() {
        let (g, mut e) = session(28.0, 3.0);
        // The evaluator never sends its matrix.
        e.steps.retain(|s| s.step != Step::Flush { sent: 12400 });
        assert_eq!(garbler_start(&g, &e, Wire::NONE), None);
        // A garbler trace without its Garble stage.
        let (mut g, e) = session(28.0, 3.0);
        g.steps.pop();
        assert_eq!(garbler_start(&g, &e, Wire::NONE), None);
        assert_eq!(added_by(&[(g, e)], Wire::NONE), None);
    }

    #[test]
    fn a_real_sessions_traces_replay_and_a_long_link_adds_its_round_trips() {
        let c = garble::library::aes128();
        let run = garble::microbench::loopback_2pc(&c, 1, &Default::default()).unwrap();
        let (g, e) = (&run.garbler.start, &run.evaluator.start);
        for t in [g, e] {
            let mut entered: Vec<Stage> = t
                .steps
                .iter()
                .filter_map(|s| match s.step {
                    Step::Enter(x) => Some(x),
                    _ => None,
                })
                .collect();
            // Peer Inputs is entered once for the OT extension and once per evaluation.
            entered.dedup();
            assert_eq!(
                entered,
                [
                    Stage::Load,
                    Stage::Init,
                    Stage::OtInit,
                    Stage::PeerInputs,
                    Stage::Garble
                ]
            );
        }
        // Each party waits only for bytes the other flushed: the traces fit together.
        let bare = garbler_start(g, e, Wire::NONE).expect("the traces replay");
        // The Load stage waits for nothing: replayed, it is what it was.
        let load = run.garbler.stage(Stage::Load).time.as_secs_f64();
        assert!(
            (bare[0].as_secs_f64() - load).abs() < 1e-3,
            "{bare:?} {load}"
        );
        // Over a second each way, the header's answer takes two of them (the evaluator
        // compiled long before), and the evaluator's extension matrix waits for the
        // garbler's base-OT points: a round trip more.
        let far = Wire {
            one_way: Duration::from_secs(1),
            ..Wire::NONE
        };
        let added = added_by(&[(g.clone(), e.clone())], far).unwrap();
        assert!(added[1] > 1.9, "Init {added:?}");
        assert!(
            added[2] + added[3] > 1.9,
            "OT Init and Peer Inputs {added:?}"
        );
        assert!(added[0].abs() < 1e-9, "Load {added:?}");
    }

    #[test]
    fn what_a_link_adds_is_the_median_over_sessions() {
        let wire = Wire {
            one_way: ms(0.5),
            ..Wire::NONE
        };
        let pairs = vec![session(28.0, 3.0), session(28.0, 5.0), session(28.0, 9.0)];
        let added = added_by(&pairs, wire).unwrap();
        // Init: the round trip, 1 ms, in each. Peer Inputs: 0 (the evaluator ended
        // before), +1 and +1 ms (it ended after: the link moves its end by a round trip).
        assert!((added[1] - 1e-3).abs() < 1e-9, "{added:?}");
        assert!((added[3] - 1e-3).abs() < 1e-9, "{added:?}");
    }
}
