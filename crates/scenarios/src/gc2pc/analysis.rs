//! The seed's method from our own measurements: the stage table, the per-gate table and the
//! theoretical minimum.

use garble::GateKind;
use garble::session::{SessionReport, Stage};
use measure::record::{Table, Value};
use measure::stages::Stages;

pub(super) fn gate_name(k: GateKind) -> &'static str {
    k.name()
}

/// Per-gate costs measured in isolation (garble and evaluate), in ns per gate.
pub(super) struct GateCosts {
    pub(super) garble: [f64; 3],
    pub(super) evaluate: [f64; 3],
}

pub(super) const MICRO_KINDS: [GateKind; 3] = [GateKind::And, GateKind::Xor, GateKind::Inv];

impl GateCosts {
    /// Isolated garbling cost of one evaluation of a circuit: gates × ns/gate (EQ and EQW
    /// are copies and cost nothing).
    pub(super) fn garble_ns(&self, stats: &garble::Stats) -> f64 {
        MICRO_KINDS
            .iter()
            .zip(self.garble)
            .map(|(&k, ns)| stats.count(k) as f64 * ns)
            .sum()
    }
}

/// A party's stage breakdown of one session (`Load | Init | OT Init | Peer Inputs | Garble |
/// Result`, time and bytes), as a record body.
pub fn stage_breakdown(name: &str, r: &SessionReport) -> measure::record::StageBreakdown {
    let mut stages = Stages::new();
    add_stages(&mut stages, r);
    stages.finish(name, Some(r.total), None)
}

pub(super) fn add_stages(stages: &mut Stages, r: &SessionReport) {
    for st in Stage::ALL {
        let s = r.stage(st);
        // Bytes as the socket counted them (`wire_*`), not as the protocol handed them over.
        stages.add(st.name(), s.time, s.wire_received, s.wire_sent);
    }
    stages.end_run();
}

/// The per-gate table of one evaluation: count, isolated ns/gate, time.
pub(super) fn gate_table(name: &str, stats: &garble::Stats, costs: &GateCosts) -> Table {
    let mut rows: Vec<Vec<Value>> = MICRO_KINDS
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let n = stats.count(k);
            vec![
                Value::from(gate_name(k)),
                Value::from(n),
                Value::from(costs.garble[i]),
                Value::from(costs.evaluate[i]),
                Value::from(n as f64 * costs.garble[i] / 1e3),
            ]
        })
        .collect();
    // Copies are not measured: their cells are left blank, not written as zero.
    let copies = stats.count(GateKind::Eq) + stats.count(GateKind::Eqw);
    rows.push(vec![
        Value::from("EQ/EQW"),
        Value::from(copies),
        Value::from(NOT_MEASURED),
        Value::from(NOT_MEASURED),
        Value::from(NOT_MEASURED),
    ]);
    Table {
        name: format!("gates-{name}"),
        title: format!("Per-gate cost of one {name} evaluation (isolated micro-benchmarks)"),
        columns: [
            "gate",
            "count",
            "garble ns/gate",
            "evaluate ns/gate",
            "garble time µs",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes: vec![
            "The theoretical minimum of a session is the garbling time of its gates measured \
             alone; the stage table shows the measured total against it."
                .into(),
            format!(
                "EQ/EQW are wire copies without cryptography; they are not measured \
                 ({NOT_MEASURED})."
            ),
        ],
    }
}

/// A table cell whose value this run did not measure.
const NOT_MEASURED: &str = "—";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_not_written_as_zero_ns() {
        let c = garble::library::aes128();
        let costs = GateCosts {
            garble: [10.0, 1.0, 1.0],
            evaluate: [5.0, 1.0, 1.0],
        };
        let t = gate_table("aes128", &c.stats(), &costs);
        let copies = t
            .rows
            .iter()
            .find(|r| r[0] == Value::from("EQ/EQW"))
            .unwrap();
        assert!(
            copies[2..].iter().all(|v| *v == Value::from(NOT_MEASURED)),
            "{copies:?}"
        );
    }
}
