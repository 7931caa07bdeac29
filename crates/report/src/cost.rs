//! The cost summary: what confidentiality costs, one row per headline workload.
//!
//! Scenarios emit a [`Cost`] record for each headline workload: the unprotected figure and the
//! protected ones, each with its samples. The summary divides each protected median by the
//! unprotected one and bootstraps a 95% confidence interval of that ratio from the samples
//! (`measure::stats::bootstrap_ratio_ci`), beside the scenario's check verdicts. It is the
//! first section of the report and the end of a run's terminal output; `compare` shows how
//! each cost moved between two runs.

use measure::Record;
use measure::record::{Body, Cost, CostFigure};
use measure::stats::bootstrap_ratio_ci;

use crate::doc::slug;
use crate::table::Table;
use crate::units;
use crate::verdicts::Verdicts;

/// The HTML id of a scenario's section (its level-2 heading).
pub(crate) fn section_id(scenario: &str) -> String {
    format!("sec-{}", slug(scenario))
}

/// The Cost records, with their record.
pub(crate) fn costs(records: &[Record]) -> Vec<(&Record, &Cost)> {
    records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Cost(c) => Some((r, c)),
            _ => None,
        })
        .collect()
}

/// `protected / unprotected`, from the recorded medians.
pub(crate) fn ratio(baseline: &CostFigure, protected: &CostFigure) -> f64 {
    protected.median_ns / baseline.median_ns
}

/// The bootstrap 95% confidence interval of `protected / unprotected`, when both figures
/// have samples.
pub(crate) fn ratio_ci(baseline: &CostFigure, protected: &CostFigure) -> Option<(f64, f64)> {
    bootstrap_ratio_ci(&baseline.samples_ns, &protected.samples_ns).ok()
}

/// `1.23×–1.31×`, or `—` when there is no interval.
pub(crate) fn ci_text(ci: Option<(f64, f64)>) -> String {
    ci.map(|(lo, hi)| format!("{}–{}", units::ratio(lo), units::ratio(hi)))
        .unwrap_or_else(|| "—".to_owned())
}

/// `3 pass, 0 warn, 1 fail; 1 finding about published figures`.
fn verdicts_text(v: &Verdicts) -> String {
    let mut s = v.run.text();
    if !v.findings.is_empty() {
        s.push_str(&format!(
            "; {} finding(s) about published figures",
            v.findings.len()
        ));
    }
    s
}

/// The summary table: one row per protected figure of each Cost record; the scenario,
/// workload, unprotected figure and check verdicts only on a record's first row. With
/// `links`, each record's first row links to its scenario's section in the HTML report.
/// `None` when there is no Cost record.
pub(crate) fn summary_table(records: &[Record], links: bool) -> Option<Table> {
    let costs = costs(records);
    if costs.is_empty() {
        return None;
    }
    let mut t = Table::new([
        "scenario",
        "workload",
        "per",
        "unprotected",
        "protected",
        "median",
        "cost",
        "95% CI",
        "checks",
    ])
    .right([3, 5, 6, 7]);
    for (r, c) in costs {
        let verdicts = verdicts_text(&Verdicts::of_scenario(records, &r.scenario));
        let first = [
            r.scenario.clone(),
            c.name.clone(),
            c.unit.clone(),
            format!(
                "{} ({})",
                units::duration_ns(c.baseline.median_ns),
                c.baseline.label
            ),
        ];
        if c.protected.is_empty() {
            let mut row = first.to_vec();
            row.extend(["—".into(), "—".into(), "—".into(), "—".into(), verdicts]);
            push(&mut t, row, links.then(|| section_id(&r.scenario)));
            continue;
        }
        for (i, p) in c.protected.iter().enumerate() {
            let mut row = if i == 0 {
                first.to_vec()
            } else {
                vec![String::new(); 4]
            };
            row.extend([
                p.label.clone(),
                units::duration_ns(p.median_ns),
                units::ratio(ratio(&c.baseline, p)),
                ci_text(ratio_ci(&c.baseline, p)),
                if i == 0 {
                    verdicts.clone()
                } else {
                    String::new()
                },
            ]);
            let link = (links && i == 0).then(|| section_id(&r.scenario));
            push(&mut t, row, link);
        }
    }
    Some(t)
}

fn push(t: &mut Table, row: Vec<String>, link: Option<String>) {
    match link {
        Some(href) => t.push_linked(row, format!("#{href}")),
        None => t.push(row),
    }
}

/// The summary's heading.
pub(crate) const HEADING: &str = "What confidentiality costs";

/// The summary for a terminal: heading, table and explanation; empty when the records hold
/// no Cost record.
pub(crate) fn terminal(records: &[Record], charset: crate::Charset) -> String {
    let Some(t) = summary_table(records, false) else {
        return String::new();
    };
    let text = |s: &str| match charset {
        crate::Charset::Unicode => s.to_owned(),
        crate::Charset::Ascii => crate::table::to_ascii(s),
    };
    format!(
        "{}\n{}\n{}{}\n",
        text(HEADING),
        "=".repeat(HEADING.chars().count()),
        t.to_terminal(charset),
        text(EXPLANATION)
    )
}

/// The sentence under the summary table.
pub(crate) const EXPLANATION: &str = "Cost is the protected median over the unprotected one \
    (1.00× is free); its 95% confidence interval is a bootstrap of that ratio from both \
    figures' samples. Checks are the scenario's self-checks of this run's data; findings about \
    published figures are listed apart and never fail a run.";

#[cfg(test)]
mod tests {
    use super::*;
    use measure::params;
    use measure::record::{Check, Verdict};

    fn figure(label: &str, center: f64) -> CostFigure {
        let samples: Vec<f64> = (0..20).map(|i| center * (1.0 + 0.001 * i as f64)).collect();
        CostFigure {
            label: label.into(),
            backend: label.into(),
            median_ns: measure::stats::median(&samples).unwrap(),
            samples_ns: samples,
        }
    }

    pub(crate) fn cost_record(scenario: &str, base: f64, protected: &[(&str, f64)]) -> Record {
        Record::new(
            scenario,
            "all",
            params! {},
            Body::Cost(Cost {
                name: "one transaction".into(),
                unit: "transaction".into(),
                baseline: figure("native", base),
                protected: protected.iter().map(|(l, c)| figure(l, *c)).collect(),
            }),
        )
    }

    #[test]
    fn one_row_per_protected_figure_with_ratio_ci_and_verdicts() {
        let records = vec![
            cost_record("tx", 1000.0, &[("sandbox", 3000.0), ("switchless", 1500.0)]),
            Record::new(
                "tx",
                "native",
                params! {},
                Body::Check(Check::run("consistent", Verdict::Pass, "")),
            ),
        ];
        let t = summary_table(&records, true).unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0][0], "tx");
        assert_eq!(t.rows[0][3], "1.01 µs (native)");
        assert_eq!(t.rows[0][4], "sandbox");
        assert_eq!(t.rows[0][6], "3.00×");
        assert_eq!(t.rows[1][6], "1.50×");
        let (lo, hi) = ratio_ci(&figure("n", 1000.0), &figure("s", 3000.0)).unwrap();
        assert!(lo <= 3.0 && 3.0 <= hi && hi - lo < 0.1, "{lo} {hi}");
        assert_eq!(t.rows[0][8], "1 pass, 0 warn, 0 fail");
        assert_eq!(t.rows[1][0], "");
        assert_eq!(t.links[0].as_deref(), Some("#sec-tx"));
        assert_eq!(t.links.get(1).cloned().flatten(), None);
        assert!(t.to_html().contains("<a href=\"#sec-tx\">tx</a>"));
        assert!(summary_table(&records[1..], true).is_none());
    }
}
