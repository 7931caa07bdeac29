//! The published figures of the Ed25519 signature in garbled-circuit 2PC, the table that
//! puts them beside ours, the per-gate table, the theoretical minimum and the checks.

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

/// How many times fewer AND gates than the engine's head we claim (docs/ed25519-2pc.md).
pub const CLAIMED_AND_FACTOR: f64 = 10.0;

/// Target: one signature, OT and circuit generation included, seconds (issue 11).
pub const TARGET_TOTAL_S: f64 = 5.0;

/// Target: peak memory per party, bytes.
pub const TARGET_RSS_BYTES: u64 = 1 << 30;

/// Tolerance of the wire-bytes check.
pub const WIRE_TOLERANCE: f64 = 0.05;

/// Isolated per-gate costs measured by this run, ns per gate.
#[derive(Clone, Copy, Debug, Default)]
pub struct GateCosts {
    /// AND, XOR, INV: garbling.
    pub garble: [f64; 3],
    /// AND, XOR, INV: evaluation.
    pub evaluate: [f64; 3],
}

/// Gate counts of the circuit as garbled.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// AND gates.
    pub and: u64,
    /// XOR gates.
    pub xor: u64,
    /// INV gates.
    pub inv: u64,
    /// EQ and EQW (copies; free).
    pub copies: u64,
}

impl Counts {
    /// All gates.
    pub fn gates(&self) -> u64 {
        self.and + self.xor + self.inv + self.copies
    }

    fn by_kind(&self) -> [u64; 3] {
        [self.and, self.xor, self.inv]
    }
}

/// The seed's theoretical minimum: the gates at their isolated garbling cost, the bytes at
/// the measured loopback bandwidth, plus the setup stages as measured (ns).
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
    gates + wire + setup_ns
}

/// The per-gate table: count, isolated ns per gate (garble, evaluate), garbling time.
pub fn gate_table(counts: &Counts, costs: &GateCosts) -> Table {
    let names = ["AND", "XOR", "INV"];
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
    rows.push(vec![
        Value::from("EQ/EQW"),
        Value::from(counts.copies),
        Value::from(0.0),
        Value::from(0.0),
        Value::from(0.0),
    ]);
    let total: f64 = (0..3)
        .map(|i| counts.by_kind()[i] as f64 * costs.garble[i] / 1e6)
        .sum();
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
        notes: vec![format!(
            "Published per-gate costs (mpc, Go): AND {} ns, XOR {} ns.",
            published::AND_NS,
            published::XOR_NS
        )],
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
    /// them where the kernel allows), bytes.
    pub rss_garbler: u64,
    /// Peak RSS of the evaluator process (largest over runs), bytes.
    pub rss_evaluator: u64,
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
            Value::from(ours.rss_garbler.max(ours.rss_evaluator) as f64 / 1e9),
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

/// AND gates below mpc's head by the factor we claim.
pub fn and_factor_check(and: u64) -> Check {
    let f = peer::AND as f64 / and.max(1) as f64;
    let verdict = if f >= CLAIMED_AND_FACTOR {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    check(
        "and-gates-vs-mpc",
        verdict,
        format!(
            "{and} AND gates, {f:.1}x fewer than mpc's head ({}); claimed at least {CLAIMED_AND_FACTOR}x",
            peer::AND
        ),
    )
}

/// Bytes on the wire (the socket's count) within [`WIRE_TOLERANCE`] of 32 per AND gate plus
/// the input, OT and output traffic (the protocol's count).
pub fn wire_check(and: u64, other_bytes: u64, measured: u64) -> Check {
    let expected = 32 * and + other_bytes;
    let dev = (measured as f64 - expected as f64).abs() / expected.max(1) as f64;
    let verdict = if dev <= WIRE_TOLERANCE {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    check(
        "wire-bytes",
        verdict,
        format!(
            "{measured} bytes on the wire per signature; 32 x {and} AND + {other_bytes} bytes of inputs, OT and outputs = {expected} ({:.3}% off, tolerance {}%)",
            dev * 100.0,
            WIRE_TOLERANCE * 100.0
        ),
    )
}

/// Peak memory per party within the target (a warning otherwise: memory depends on the
/// machine's allocator and the rest of the process).
pub fn rss_check(garbler: u64, evaluator: u64) -> Check {
    let worst = garbler.max(evaluator);
    let verdict = if worst <= TARGET_RSS_BYTES {
        Verdict::Pass
    } else {
        Verdict::Warn
    };
    check(
        "peak-rss",
        verdict,
        format!(
            "peak RSS: garbler {:.1} MB, evaluator {:.1} MB (target at most 1 GiB per party; mpc head ~1.3 GB)",
            garbler as f64 / 1e6,
            evaluator as f64 / 1e6
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

/// The signatures matched plain RFC 8032 signing and verified.
pub fn signature_check(n: usize) -> Check {
    check(
        "signature-matches-plain",
        Verdict::Pass,
        format!(
            "{n} signature(s): both parties' outputs equal the plain RFC 8032 signature and verify"
        ),
    )
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
        };
        let k = GateCosts {
            garble: [10.0, 1.0, 1.0],
            evaluate: [5.0, 1.0, 1.0],
        };
        // 10,000 + 2,000 + 10 ns of gates, 1e6 bytes at 1e9 B/s = 1e6 ns, 500 ns setup.
        let m = theoretical_minimum_ns(&c, &k, 1_000_000, 1e9, 500.0);
        assert!((m - 1_012_510.0).abs() < 1e-6, "{m}");
        assert_eq!(c.gates(), 3015);
    }

    #[test]
    fn checks_judge_their_thresholds() {
        assert_eq!(and_factor_check(20_000_000).verdict, Verdict::Pass);
        assert_eq!(and_factor_check(30_000_000).verdict, Verdict::Fail);
        assert_eq!(wire_check(1000, 100, 32_100).verdict, Verdict::Pass);
        assert_eq!(wire_check(1000, 100, 40_000).verdict, Verdict::Fail);
        assert_eq!(rss_check(1 << 20, 1 << 31).verdict, Verdict::Warn);
        assert_eq!(time_check(1.0).verdict, Verdict::Pass);
        assert_eq!(comparison_table(&Ours::default()).rows.len(), 3);
        assert_eq!(
            gate_table(&Counts::default(), &GateCosts::default())
                .rows
                .len(),
            5
        );
    }
}
