//! The published figures of the Ed25519 signature in garbled-circuit 2PC, the table that
//! puts them beside ours, the per-gate table, the theoretical minimum and the checks.

use std::time::Duration;

use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
use measure::record::{Check, CheckSubject, Table, Value, Verdict};

/// markkurossi/mpc, "Measure First" (January 2022), the published run on a laptop CPU.
pub mod published {
    /// Gates of the signature circuit.
    pub const GATES: u64 = 830_082_709;
    /// AND gates.
    pub const AND: u64 = 267_491_441;
    /// Bytes on the wire (15 GB).
    pub const BYTES: u64 = 15_000_000_000;
    /// Total time, seconds.
    pub const TOTAL_S: f64 = 87.85;
    /// Garbling (and writing) time, seconds.
    pub const GARBLE_S: f64 = 81.3;
    /// Per-gate cost reported for AND, ns.
    pub const AND_NS: f64 = 176.5;
    /// Per-gate cost reported for XOR, ns.
    pub const XOR_NS: f64 = 20.6;
    /// Where the figures come from.
    pub const SOURCE: &str = "markkurossi/mpc, \"Measure First\" (January 2022): Ed25519 signature on an XOR-shared key, published run";
}

/// The same engine at its current head, measured by a peer on a 2-core AMD EPYC VM like ours
/// (streaming mode, loopback): a peer's figure on a similar machine, not measured by this run.
pub mod peer {
    /// Gates.
    pub const GATES: u64 = 844_974_614;
    /// AND gates.
    pub const AND: u64 = 272_844_240;
    /// Total time, seconds (2 min 3 s).
    pub const TOTAL_S: f64 = 123.0;
    /// Peak memory, bytes (about 1.3 GB).
    pub const RSS_BYTES: u64 = 1_300_000_000;
}

/// How many times fewer AND gates than the engine's head we claim (docs/ed25519-2pc.md;
/// the circuit is the same in every run, so a unit test holds the claim).
pub const CLAIMED_AND_FACTOR: f64 = 10.0;

/// Target: one signature over loopback, OT and circuit generation included, seconds
/// (issue 24 on the 2-core VM; issue 11's was 5 s).
pub const TARGET_TOTAL_S: f64 = 0.5;

/// Target over a link: a signature's time at most this many times its predicted time
/// (issue 24, for `lan`).
pub const TARGET_LINK_RATIO: f64 = 1.25;

/// Target: peak memory per party, bytes.
pub const TARGET_RSS_BYTES: u64 = 1 << 30;

/// Target: the signature under MITCCRH at most this many times its time under the
/// fixed-key hash (issue 25), the median of alternated pairs ([`hash_cost_check`]).
pub const TARGET_HASH_RATIO: f64 = 1.10;

/// One pair of signatures on the same inputs, one under each garbling hash, run back to
/// back (seconds each; `mitccrh_first` says which ran first).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HashPair {
    /// The signature's time under MITCCRH, seconds.
    pub mitccrh_s: f64,
    /// The same signature's time under the fixed-key hash, seconds.
    pub fixed_key_s: f64,
    /// Whether the MITCCRH signature ran first.
    pub mitccrh_first: bool,
}

impl HashPair {
    /// MITCCRH's time over the fixed-key hash's.
    pub fn ratio(&self) -> f64 {
        self.mitccrh_s / self.fixed_key_s
    }
}

/// The median of the pairs' ratios, and their range (`None` without a pair).
fn hash_ratios(pairs: &[HashPair]) -> Option<(f64, f64, f64)> {
    let mut r: Vec<f64> = pairs.iter().map(HashPair::ratio).collect();
    r.sort_by(f64::total_cmp);
    let (&lo, &hi) = (r.first()?, r.last()?);
    Some((measure::stats::median_sorted(&r), lo, hi))
}

/// The signature under both garbling hashes, pair by pair: what the multi-instance bound
/// costs a whole signature. The two signatures of a pair run back to back and the order
/// alternates from pair to pair, so that a change in the machine's speed (a shared VM's
/// can move a signature by 20-30% within seconds) falls on both hashes alike.
pub fn hash_table(pairs: &[HashPair]) -> Table {
    let rows = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                Value::from(i as u64 + 1),
                Value::from(if p.mitccrh_first {
                    "MITCCRH"
                } else {
                    "fixed-key"
                }),
                Value::from(p.mitccrh_s * 1e3),
                Value::from(p.fixed_key_s * 1e3),
                Value::from(p.ratio()),
            ]
        })
        .collect();
    let notes = match hash_ratios(pairs) {
        Some((med, lo, hi)) => vec![format!(
            "MITCCRH / fixed-key: median {med:.3} over {} alternated pair(s), range \
             {lo:.3}-{hi:.3} (target at most {TARGET_HASH_RATIO:.2}).",
            pairs.len()
        )],
        None => vec!["No pair was run.".into()],
    };
    Table {
        name: "hashes-ed25519-sign".into(),
        title: "One signature under each garbling hash, in alternated pairs (2PC over loopback, OT included)".into(),
        columns: [
            "pair",
            "first",
            "MITCCRH ms",
            "fixed-key ms",
            "MITCCRH / fixed-key",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes,
    }
}

/// The median of [`hash_table`]'s ratios within [`TARGET_HASH_RATIO`] (a warning
/// otherwise, as for the other times: the ratio depends on the CPU's AES and shuffle
/// units). Without a pair, "not measured", a warning.
pub fn hash_cost_check(pairs: &[HashPair]) -> Check {
    let (verdict, message) = match hash_ratios(pairs) {
        None => (
            Verdict::Warn,
            "not measured: no pair of signatures under both hashes".to_owned(),
        ),
        Some((med, lo, hi)) => (
            if med <= TARGET_HASH_RATIO {
                Verdict::Pass
            } else {
                Verdict::Warn
            },
            format!(
                "the signature under MITCCRH takes {med:.3} times its time under the \
                 fixed-key hash (median of {} alternated pair(s), range {lo:.3}-{hi:.3}; \
                 target at most {TARGET_HASH_RATIO:.2})",
                pairs.len()
            ),
        ),
    };
    check("hash-cost", verdict, message)
}

/// Isolated per-gate costs measured by this run, ns per gate, and the lookups' cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct GateCosts {
    /// AND, XOR, INV: garbling.
    pub garble: [f64; 3],
    /// AND, XOR, INV: evaluation.
    pub evaluate: [f64; 3],
    /// All of the circuit's lookups in public tables, one party, ns: the same computation
    /// on both sides (`garble::microbench::lookup_timing`).
    pub lookups_ns: f64,
}

/// Gate counts of the circuit as garbled.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// AND gates.
    pub and: u64,
    /// XOR gates (those inside lookups included).
    pub xor: u64,
    /// INV gates (those inside lookups included).
    pub inv: u64,
    /// EQ and EQW (copies; free).
    pub copies: u64,
    /// Lookups in public tables.
    pub lookups: u64,
    /// XOR gates inside the lookups.
    pub lookup_xor: u64,
    /// INV gates inside the lookups.
    pub lookup_inv: u64,
}

impl Counts {
    /// All gates.
    pub fn gates(&self) -> u64 {
        self.and + self.xor + self.inv + self.copies
    }

    /// AND, XOR and INV gates priced per gate: the XOR and INV gates outside lookups.
    fn by_kind(&self) -> [u64; 3] {
        [
            self.and,
            self.xor.saturating_sub(self.lookup_xor),
            self.inv.saturating_sub(self.lookup_inv),
        ]
    }
}

/// The seed's theoretical minimum: the gates at their isolated garbling cost (a lookup's
/// gates at the isolated cost of the lookup), the bytes at the measured loopback
/// bandwidth, plus the setup stages as measured (ns).
pub fn theoretical_minimum_ns(
    counts: &Counts,
    costs: &GateCosts,
    bytes: u64,
    loopback_bytes_per_s: f64,
    setup_ns: f64,
) -> f64 {
    let gates: f64 = counts
        .by_kind()
        .iter()
        .zip(costs.garble)
        .map(|(&n, ns)| n as f64 * ns)
        .sum();
    let wire = if loopback_bytes_per_s > 0.0 {
        bytes as f64 / loopback_bytes_per_s * 1e9
    } else {
        0.0
    };
    gates + costs.lookups_ns + wire + setup_ns
}

/// The per-gate table: count, isolated ns per gate (garble, evaluate), garbling time.
pub fn gate_table(counts: &Counts, costs: &GateCosts) -> Table {
    let names = ["AND", "XOR (outside lookups)", "INV (outside lookups)"];
    let mut rows: Vec<Vec<Value>> = (0..3)
        .map(|i| {
            let n = counts.by_kind()[i];
            vec![
                Value::from(names[i]),
                Value::from(n),
                Value::from(costs.garble[i]),
                Value::from(costs.evaluate[i]),
                Value::from(n as f64 * costs.garble[i] / 1e6),
            ]
        })
        .collect();
    // A lookup's figures are per lookup: the same computation for both parties.
    let per_lookup = costs.lookups_ns / counts.lookups.max(1) as f64;
    rows.push(vec![
        Value::from("lookup in a public table"),
        Value::from(counts.lookups),
        Value::from(per_lookup),
        Value::from(per_lookup),
        Value::from(costs.lookups_ns / 1e6),
    ]);
    // Copies are not measured: their cells are left blank, not written as zero.
    rows.push(vec![
        Value::from("EQ/EQW"),
        Value::from(counts.copies),
        Value::from(NOT_MEASURED),
        Value::from(NOT_MEASURED),
        Value::from(NOT_MEASURED),
    ]);
    let total: f64 = (0..3)
        .map(|i| counts.by_kind()[i] as f64 * costs.garble[i] / 1e6)
        .sum::<f64>()
        + costs.lookups_ns / 1e6;
    rows.push(vec![
        Value::from("total"),
        Value::from(counts.gates()),
        Value::from(""),
        Value::from(""),
        Value::from(total),
    ]);
    Table {
        name: "gates-ed25519-sign".into(),
        title: "Per-gate cost of one Ed25519 signature (isolated micro-benchmarks, this run)"
            .into(),
        columns: [
            "gate",
            "count",
            "garble ns/gate",
            "evaluate ns/gate",
            "garble time ms",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes: vec![
            format!(
                "Published per-gate costs (mpc, Go): AND {} ns, XOR {} ns.",
                published::AND_NS,
                published::XOR_NS
            ),
            format!(
                "A lookup's ns are per lookup, not per gate: its {} XOR and {} INV gates (over \
                 all {} lookups) are free-XOR gates that both parties compute with the method \
                 of four Russians, about a third of the operations of one XOR per gate.",
                counts.lookup_xor, counts.lookup_inv, counts.lookups
            ),
            format!(
                "EQ/EQW are wire copies without cryptography; they are not measured \
                 ({NOT_MEASURED}), and the total garbling time is that of AND, XOR, INV and \
                 the lookups."
            ),
        ],
    }
}

/// A table cell whose value this run did not measure.
pub const NOT_MEASURED: &str = "—";

/// Each party's preparation outside the signatures' time (`Ed25519Sign::prepare`: the
/// public tables and the compiled field sub-circuits): the garbler's once in this process,
/// the evaluator's in each of its processes (one a signature). Shown so that what a
/// signature's time leaves out is a measured number, not a footnote.
pub fn prepare_table(garbler: Duration, evaluator: &[Duration]) -> Table {
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    let mut e: Vec<f64> = evaluator.iter().map(ms).collect();
    e.sort_by(f64::total_cmp);
    let row = |party: &str, runs: usize, v: &[f64]| {
        let (lo, hi) = match (v.first(), v.last()) {
            (Some(&lo), Some(&hi)) => (Value::from(lo), Value::from(hi)),
            _ => (Value::from(NOT_MEASURED), Value::from(NOT_MEASURED)),
        };
        let med = v
            .get(v.len() / 2)
            .map_or(Value::from(NOT_MEASURED), |&m| Value::from(m));
        vec![Value::from(party), Value::from(runs as u64), med, lo, hi]
    };
    Table {
        name: "prepare-ed25519-sign".into(),
        title: "Preparation per process, outside each signature's time".into(),
        columns: ["party", "processes", "median ms", "min ms", "max ms"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            row("garbler (this process, once)", 1, &[ms(&garbler)]),
            row("evaluator (a process per signature)", e.len(), &e),
        ],
        source: None,
        notes: vec![
            "The fixed-base tables (20 x 8,192 points) and the compiled field \
             multiplication and squaring: the same for every key and message, computed once \
             per process before a session starts, as a plain signer precomputes its tables. \
             A signature's time counts each party's circuit generation and counting pass, \
             OT and garbling, not this."
                .into(),
        ],
    }
}

/// What this run measured, for the comparison table and the checks.
#[derive(Clone, Debug, Default)]
pub struct Ours {
    /// Gate counts.
    pub counts: Counts,
    /// Median total per signature, seconds.
    pub total_s: f64,
    /// Median Garble stage, seconds.
    pub garble_s: f64,
    /// Bytes on the wire per signature, both directions.
    pub bytes: u64,
    /// Peak RSS of the garbler process during the signatures (its peak is reset before
    /// them where the kernel allows), bytes; `None` where it could not be read.
    pub rss_garbler: Option<u64>,
    /// Peak RSS of the evaluator process (largest over runs), bytes; `None` where a run
    /// could not read it.
    pub rss_evaluator: Option<u64>,
}

/// Published and peer figures beside ours.
pub fn comparison_table(ours: &Ours) -> Table {
    let none = || Value::from("—");
    let rows = vec![
        vec![
            Value::from("mpc, published (laptop CPU, 2022)"),
            Value::from(published::GATES),
            Value::from(published::AND),
            Value::from(published::BYTES as f64 / 1e9),
            Value::from(published::TOTAL_S),
            Value::from(published::GARBLE_S),
            none(),
        ],
        vec![
            Value::from("mpc head, 2-core EPYC VM (a peer's figure, not this run)"),
            Value::from(peer::GATES),
            Value::from(peer::AND),
            none(),
            Value::from(peer::TOTAL_S),
            none(),
            Value::from(peer::RSS_BYTES as f64 / 1e9),
        ],
        vec![
            Value::from("ccbench (this run, median)"),
            Value::from(ours.counts.gates()),
            Value::from(ours.counts.and),
            Value::from(ours.bytes as f64 / 1e9),
            Value::from(ours.total_s),
            Value::from(ours.garble_s),
            match (ours.rss_garbler, ours.rss_evaluator) {
                (Some(g), Some(e)) => Value::from(g.max(e) as f64 / 1e9),
                _ => Value::from(NOT_MEASURED),
            },
        ],
    ];
    Table {
        name: "published-vs-ours".into(),
        title: "Ed25519 signature in 2PC: published figures beside this run".into(),
        columns: [
            "run",
            "gates",
            "AND gates",
            "wire GB",
            "total s",
            "garble s",
            "peak RSS GB (per party)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: Some(published::SOURCE.into()),
        notes: vec![
            "Published and peer rows are other people's measurements on other machines, for \
             shape and order of magnitude; only the last row is this run."
                .into(),
            format!(
                "AND gates: {:.1}x fewer than the published circuit, {:.1}x fewer than mpc's head.",
                published::AND as f64 / ours.counts.and.max(1) as f64,
                peer::AND as f64 / ours.counts.and.max(1) as f64
            ),
        ],
    }
}

fn check(name: &str, verdict: Verdict, message: String) -> Check {
    Check {
        subject: CheckSubject::Run,
        name: name.into(),
        verdict,
        message,
    }
}

/// Bytes on the wire per signature, as the garbler's socket counted them each way, against
/// what the protocol's messages predict exactly (`garble::stream::expected_wire_bytes`:
/// 32 bytes per AND gate under half-gates, 25 under three-halves, plus the header, OT,
/// input labels and outputs). `expected` and
/// each of `measured` are `(sent, received)` by the garbler. Any difference fails: one byte
/// of the ~37 KB that is not tables shows.
pub fn wire_check(expected: (u64, u64), measured: &[(u64, u64)]) -> Check {
    let (sent, received) = expected;
    let off: Vec<String> = measured
        .iter()
        .enumerate()
        .filter(|(_, m)| **m != expected)
        .map(|(i, &(s, r))| format!("signature {}: {s} sent, {r} received", i + 1))
        .collect();
    let verdict = if measured.is_empty() {
        Verdict::Warn
    } else if off.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    let total = sent + received;
    let what = format!(
        "the protocol's messages predict {sent} bytes sent and {received} received by the \
         garbler per signature ({total} in all)"
    );
    check(
        "wire-bytes",
        verdict,
        if measured.is_empty() {
            format!("not measured: no signature ({what})")
        } else if off.is_empty() {
            format!(
                "{} signature(s): the garbler's socket sent {sent} and received {received} \
                 bytes each ({total} in all), exactly what the protocol's messages predict",
                measured.len()
            )
        } else {
            format!("{what}; the socket differs: {}", off.join("; "))
        },
    )
}

/// Peak memory per party within the target (a warning otherwise: memory depends on the
/// machine's allocator and the rest of the process). A peak that could not be read is "not
/// measured", a warning, never a pass.
pub fn rss_check(garbler: Option<u64>, evaluator: Option<u64>) -> Check {
    let mb = |b: Option<u64>| {
        b.map_or("not measured".to_owned(), |b| {
            format!("{:.1} MB", b as f64 / 1e6)
        })
    };
    let verdict = match (garbler, evaluator) {
        (Some(g), Some(e)) if g.max(e) <= TARGET_RSS_BYTES => Verdict::Pass,
        _ => Verdict::Warn,
    };
    check(
        "peak-rss",
        verdict,
        format!(
            "peak RSS: garbler {}, evaluator {} (target at most 1 GiB per party; mpc head ~1.3 GB)",
            mb(garbler),
            mb(evaluator)
        ),
    )
}

/// One signature within the target time (a warning otherwise: time depends on the machine
/// and its load).
pub fn time_check(total_s: f64) -> Check {
    let verdict = if total_s <= TARGET_TOTAL_S {
        Verdict::Pass
    } else {
        Verdict::Warn
    };
    check(
        "signature-time",
        verdict,
        format!(
            "median {total_s:.2} s per signature, OT and circuit generation included (target {TARGET_TOTAL_S} s; mpc head {} s, published {} s)",
            peer::TOTAL_S,
            published::TOTAL_S
        ),
    )
}

/// [`time_check`] over a link `net`, where the link sets the time: the median signature
/// against the median of the signatures' predicted times (rounds, bytes and loopback
/// compute, `crate::gc2pc::net::Model`).
pub fn link_time_check(total_s: f64, predicted_s: f64, net: &str) -> Check {
    let ratio = total_s / predicted_s;
    let verdict = if ratio.is_finite() && ratio <= TARGET_LINK_RATIO {
        Verdict::Pass
    } else {
        Verdict::Warn
    };
    check(
        "signature-time",
        verdict,
        format!(
            "median {total_s:.2} s per signature over {net}, predicted {predicted_s:.2} s: \
             {ratio:.2}x (target at most {TARGET_LINK_RATIO}x the prediction)"
        ),
    )
}

/// One two-party signature as both parties output it, beside the plain one.
#[derive(Clone, Debug)]
pub struct SignatureRun {
    /// The signer's public key, derived from the seed by aws-lc (not by the circuit).
    pub public_key: [u8; 32],
    /// The message signed.
    pub message: Vec<u8>,
    /// The plain RFC 8032 signature of the same key and message (aws-lc).
    pub plain: [u8; 64],
    /// The garbler's output: the signature.
    pub garbler: [u8; 64],
    /// The garbler's output: the public key the circuit computed.
    pub garbler_public_key: [u8; 32],
    /// The evaluator's output: the signature.
    pub evaluator: [u8; 64],
}

impl SignatureRun {
    /// What is wrong with this run's outputs, if anything: each party's signature must
    /// equal the plain one and verify under the public key with aws-lc's Ed25519 (an
    /// implementation independent of the circuit's), and the circuit's public key must be
    /// the signer's.
    pub fn problems(&self) -> Vec<String> {
        let key = UnparsedPublicKey::new(&ED25519, &self.public_key);
        let mut p = Vec::new();
        for (who, sig) in [("garbler", &self.garbler), ("evaluator", &self.evaluator)] {
            if sig != &self.plain {
                p.push(format!("the {who}'s signature differs from the plain one"));
            }
            if key.verify(&self.message, sig).is_err() {
                p.push(format!("the {who}'s signature does not verify (aws-lc)"));
            }
        }
        if self.garbler_public_key != self.public_key {
            p.push("the circuit's public key is not the signer's".into());
        }
        p
    }
}

/// Every signature of this run equals the plain RFC 8032 signature on both sides and
/// verifies with aws-lc; `fail` when one does not.
pub fn signature_check(runs: &[SignatureRun]) -> Check {
    let bad: Vec<String> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let p = r.problems();
            (!p.is_empty()).then(|| format!("signature {}: {}", i + 1, p.join(", ")))
        })
        .collect();
    let (verdict, message) = if runs.is_empty() {
        (
            Verdict::Warn,
            "not measured: no signature was made".to_owned(),
        )
    } else if bad.is_empty() {
        (
            Verdict::Pass,
            format!(
                "{} signature(s): both parties' outputs equal the plain RFC 8032 signature \
                 and verify with aws-lc's Ed25519",
                runs.len()
            ),
        )
    } else {
        (
            Verdict::Fail,
            format!(
                "{} of {} signature(s) wrong: {}",
                bad.len(),
                runs.len(),
                bad.join("; ")
            ),
        )
    };
    check("signature-matches-plain", verdict, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimum_adds_gates_wire_and_setup() {
        let c = Counts {
            and: 1000,
            xor: 2000,
            inv: 10,
            copies: 5,
            lookups: 2,
            lookup_xor: 500,
            lookup_inv: 4,
        };
        let k = GateCosts {
            garble: [10.0, 1.0, 1.0],
            evaluate: [5.0, 1.0, 1.0],
            lookups_ns: 40.0,
        };
        // 10,000 + 1,500 + 6 ns of gates outside lookups, 40 ns of lookups, 1e6 bytes at
        // 1e9 B/s = 1e6 ns, 500 ns setup.
        let m = theoretical_minimum_ns(&c, &k, 1_000_000, 1e9, 500.0);
        assert!((m - 1_012_046.0).abs() < 1e-6, "{m}");
        assert_eq!(c.gates(), 3015);
    }

    #[test]
    fn hash_pairs_give_the_median_ratio_and_judge_it() {
        let pair = |m: f64, f: f64, first: bool| HashPair {
            mitccrh_s: m,
            fixed_key_s: f,
            mitccrh_first: first,
        };
        // Ratios 1.20, 1.05, 1.08: the median is the pairs' middle ratio, not the ratio
        // of the medians (0.36 / 0.30 = 1.20 here would fail).
        let pairs = [
            pair(0.36, 0.30, true),
            pair(0.315, 0.30, false),
            pair(0.27, 0.25, true),
        ];
        let (med, lo, hi) = hash_ratios(&pairs).unwrap();
        assert!((med - 1.08).abs() < 1e-9, "{med}");
        assert!((lo - 1.05).abs() < 1e-9 && (hi - 1.2).abs() < 1e-9);
        let c = hash_cost_check(&pairs);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.message);
        assert!(c.message.contains("1.080"), "{}", c.message);
        let slow = [pair(0.36, 0.30, true), pair(0.35, 0.30, false)];
        assert_eq!(hash_cost_check(&slow).verdict, Verdict::Warn);
        let none = hash_cost_check(&[]);
        assert_eq!(none.verdict, Verdict::Warn);
        assert!(none.message.contains("not measured"));
        let t = hash_table(&pairs);
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[1][1], Value::from("fixed-key"));
        assert!(t.notes[0].contains("median 1.080"), "{:?}", t.notes);
    }

    #[test]
    fn checks_judge_their_thresholds() {
        let runs = [(32_100, 900), (32_100, 900)];
        assert_eq!(wire_check((32_100, 900), &runs).verdict, Verdict::Pass);
        // One byte more on one signature's socket fails.
        let off = [(32_100, 900), (32_100, 901)];
        assert_eq!(wire_check((32_100, 900), &off).verdict, Verdict::Fail);
        assert_eq!(wire_check((32_100, 900), &[]).verdict, Verdict::Warn);
        assert_eq!(
            rss_check(Some(1 << 20), Some(1 << 31)).verdict,
            Verdict::Warn
        );
        assert_eq!(
            rss_check(Some(1 << 20), Some(1 << 20)).verdict,
            Verdict::Pass
        );
        let unknown = rss_check(None, Some(1 << 20));
        assert_eq!(unknown.verdict, Verdict::Warn);
        assert!(
            unknown.message.contains("not measured"),
            "{}",
            unknown.message
        );
        assert_eq!(time_check(0.4).verdict, Verdict::Pass);
        assert_eq!(time_check(1.0).verdict, Verdict::Warn);
        assert_eq!(link_time_check(2.2, 2.36, "lan").verdict, Verdict::Pass);
        assert_eq!(link_time_check(3.0, 2.36, "lan").verdict, Verdict::Warn);
        assert_eq!(link_time_check(3.0, 0.0, "lan").verdict, Verdict::Warn);
        assert_eq!(comparison_table(&Ours::default()).rows.len(), 3);
    }

    #[test]
    fn unknown_values_are_not_zeros() {
        let t = gate_table(&Counts::default(), &GateCosts::default());
        assert_eq!(t.rows.len(), 6);
        let copies = &t.rows[4];
        assert_eq!(copies[0], Value::from("EQ/EQW"));
        assert!(copies[2..].iter().all(|v| *v == Value::from(NOT_MEASURED)));
        // The peak RSS cell is blank when a party's peak is unknown.
        let ours = Ours {
            rss_garbler: Some(1 << 20),
            ..Ours::default()
        };
        assert_eq!(
            comparison_table(&ours).rows[2][6],
            Value::from(NOT_MEASURED)
        );
    }

    fn run() -> SignatureRun {
        let i = crate::ed25519_2pc::SignInputs::new(0);
        let (public_key, plain) = crate::ed25519_2pc::plain_signature(&i).unwrap();
        SignatureRun {
            public_key,
            message: i.message,
            plain,
            garbler: plain,
            garbler_public_key: public_key,
            evaluator: plain,
        }
    }

    #[test]
    fn signature_check_fails_on_one_corrupt_byte() {
        assert_eq!(signature_check(&[run(), run()]).verdict, Verdict::Pass);
        assert_eq!(signature_check(&[]).verdict, Verdict::Warn);
        for which in 0..3 {
            let mut r = run();
            match which {
                0 => r.garbler[17] ^= 0x01,
                1 => r.evaluator[40] ^= 0x80,
                _ => r.garbler_public_key[3] ^= 0x10,
            }
            let c = signature_check(&[run(), r]);
            assert_eq!(c.verdict, Verdict::Fail, "{which}: {}", c.message);
            assert!(c.message.contains("signature 2"), "{}", c.message);
        }
        // A wrong signature that both parties and the "plain" figure agree on still fails:
        // aws-lc's verification does not trust the comparison.
        let mut r = run();
        r.plain[5] ^= 0x04;
        r.garbler = r.plain;
        r.evaluator = r.plain;
        let c = signature_check(&[r]);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.message.contains("does not verify"), "{}", c.message);
    }

    /// The claim of the docs (at least [`CLAIMED_AND_FACTOR`] fewer AND gates than mpc's
    /// head): the circuit is the same in every run, so it is held here, not by a run.
    #[test]
    fn and_gates_are_fewer_than_mpc_head_by_the_claimed_factor() {
        let and = garble::generator::stats(&garble::ed25519::Ed25519Sign::PUBLISHED)
            .stats
            .and_gates();
        let f = peer::AND as f64 / and as f64;
        assert!(f >= CLAIMED_AND_FACTOR, "{and} AND gates: {f:.2}x");
    }
}
