//! A comparison as text: the summary line, the records unstable on this machine, the cost
//! summary of both sides, the table of matched records and the unmatched ones, for a
//! terminal or as markdown.

use super::{Basis, Comparison, MIN_SAMPLES, RecordKey, Row};
use crate::table::{Charset, Table};
use crate::units;

/// The heading of the cost summary in a comparison.
const COST_HEADING: &str =
    "What confidentiality costs, A and B (protected median / unprotected median)";

impl Comparison {
    fn table(&self) -> Table {
        let between = matches!(self.basis, Basis::BetweenRuns { .. });
        let n_header = if between { "n (runs)" } else { "n (samples)" };
        let mut header = vec![
            "scenario", "backend", "kind", "name", "params", "metric", "A", "B", "B/A", "95% CI",
            "p", n_header,
        ];
        if between {
            header.push("runs spread A/B");
        }
        header.push("change");
        let last_number = header.len() - 1;
        let mut t = Table::new(header).right(6..last_number);
        for r in &self.rows {
            let mut cells = vec![
                r.key.scenario.clone(),
                r.key.backend.clone(),
                r.key.kind.clone(),
                r.key.name.clone(),
                r.key.params.clone(),
                r.metric.to_owned(),
                units::duration_ns(r.a_ns),
                units::duration_ns(r.b_ns),
                units::ratio(r.ratio),
                r.ratio_ci
                    .map(|(lo, hi)| format!("{:.3}–{:.3}", lo, hi))
                    .unwrap_or_default(),
                r.p_value.map(units::p_value).unwrap_or_default(),
                format!("{}/{}", r.n_a, r.n_b),
            ];
            if between {
                cells.push(spread_text(r));
            }
            cells.push(r.change_text(&self.options));
            t.push(cells);
        }
        t
    }

    fn cost_table(&self) -> Option<Table> {
        if self.costs.is_empty() {
            return None;
        }
        let mut t = Table::new([
            "scenario",
            "workload",
            "protected",
            "cost in A",
            "cost in B",
            "B/A",
        ])
        .right(3..6);
        for c in &self.costs {
            t.push(vec![
                c.scenario.clone(),
                c.workload.clone(),
                c.protected.clone(),
                units::ratio(c.a_cost),
                units::ratio(c.b_cost),
                units::ratio(c.ratio()),
            ]);
        }
        Some(t)
    }

    fn basis_line(&self) -> String {
        match self.basis {
            Basis::WithinRun => "Tested on the samples within one run per side: they do not see \
                                 drift between runs, so give several runs per side \
                                 (`A1 A2 ... -- B1 B2 ...`) before trusting a small change."
                .to_owned(),
            Basis::BetweenRuns { runs_a, runs_b } => format!(
                "Tested between runs: {runs_a} run(s) of A, {runs_b} of B; each record's \
                 per-run median (or single figure) is one value."
            ),
        }
    }

    fn summary_line(&self) -> String {
        let c = self.counts();
        format!(
            "{} matched: {} slower, {} faster, {} unchanged, {} not enough samples, {} not \
             tested, {} unstable (a change needs p < {} and a shift of more than {:.1}%; at \
             least {} values per side, and sample sizes at which p < {} is attainable); {} \
             beyond the gross ratio {}; {} only in A, {} only in B.",
            self.rows.len(),
            c.slower,
            c.faster,
            c.unchanged,
            c.not_enough_samples,
            c.untested,
            c.unstable,
            self.options.alpha,
            self.options.threshold * 100.0,
            MIN_SAMPLES,
            self.options.alpha,
            c.gross,
            units::ratio(self.options.gross_ratio),
            self.only_in_a.len(),
            self.only_in_b.len()
        )
    }

    /// The heading of the list of unstable records, with the rule that made them so.
    fn unstable_heading(&self) -> String {
        format!(
            "Unstable on this machine: the runs of a side spread more than the change (a \
             change must hold run for run: beyond {:.1}% when the test marks it, beyond {} for \
             a gross regression), or more than the gross ratio {}; never counted as regressions",
            self.options.threshold * 100.0,
            units::ratio(self.options.gross_ratio),
            units::ratio(self.options.gross_ratio),
        )
    }

    /// One line per unstable record: what it is, its ratio and how each side's runs spread.
    fn unstable_items(&self) -> Vec<String> {
        self.unstable()
            .map(|r| {
                format!(
                    "{}: B/A {}, runs spread {} in A, {} in B",
                    r.key.display(),
                    units::ratio(r.ratio),
                    r.spread_a.map(units::ratio).unwrap_or_else(|| "n/a".into()),
                    r.spread_b.map(units::ratio).unwrap_or_else(|| "n/a".into()),
                )
            })
            .collect()
    }

    fn unmatched(&self) -> Vec<(&'static str, Vec<String>)> {
        [
            ("Only in A (baseline)", &self.only_in_a),
            ("Only in B (candidate)", &self.only_in_b),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(title, v)| (title, v.iter().map(RecordKey::display).collect()))
        .collect()
    }

    /// The comparison as box tables for a terminal.
    pub fn render_terminal(&self) -> String {
        self.render_terminal_with(Charset::Unicode)
    }

    /// The comparison for a terminal, drawn with the given characters.
    pub fn render_terminal_with(&self, charset: Charset) -> String {
        let mut out = String::new();
        if self.has_regression() {
            out.push_str(
                "REGRESSION: at least one record is significantly slower, or slower beyond \
                 the gross ratio where the test cannot tell.\n",
            );
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out.push_str(&self.basis_line());
        out.push('\n');
        let unstable = self.unstable_items();
        if !unstable.is_empty() {
            out.push_str(&format!("\n{}:\n", self.unstable_heading()));
            for item in unstable {
                out.push_str(&format!("  - {item}\n"));
            }
        }
        if let Some(t) = self.cost_table() {
            out.push_str(&format!("\n{COST_HEADING}\n"));
            out.push_str(&t.to_terminal(charset));
            out.push('\n');
        }
        if !self.rows.is_empty() {
            out.push_str(&self.table().to_terminal(charset));
        }
        for (title, items) in self.unmatched() {
            out.push_str(&format!("\n{title}:\n"));
            for item in items {
                out.push_str(&format!("  - {item}\n"));
            }
        }
        if charset == Charset::Ascii {
            out = crate::table::to_ascii(&out);
        }
        out
    }

    /// The comparison as GitHub markdown.
    pub fn render_markdown(&self) -> String {
        let mut out = String::from("## Comparison (B / A)\n\n");
        if self.has_regression() {
            out.push_str(
                "> **REGRESSION:** at least one record is significantly slower, or slower \
                 beyond the gross ratio where the test cannot tell.\n\n",
            );
        }
        out.push_str(&self.summary_line());
        out.push_str("\n\n");
        out.push_str(&self.basis_line());
        out.push_str("\n\n");
        let unstable = self.unstable_items();
        if !unstable.is_empty() {
            out.push_str(&format!("### {}\n\n", self.unstable_heading()));
            for item in unstable {
                out.push_str(&format!(
                    "- {}\n",
                    crate::table::markdown_cell(&item).replace('<', "&lt;")
                ));
            }
            out.push('\n');
        }
        if let Some(t) = self.cost_table() {
            out.push_str(&format!("### {COST_HEADING}\n\n"));
            out.push_str(&t.to_markdown());
            out.push('\n');
        }
        if !self.rows.is_empty() {
            out.push_str(&self.table().to_markdown());
            out.push('\n');
        }
        for (title, items) in self.unmatched() {
            out.push_str(&format!("### {title}\n\n"));
            for item in items {
                out.push_str(&format!(
                    "- {}\n",
                    crate::table::markdown_cell(&item).replace('<', "&lt;")
                ));
            }
            out.push('\n');
        }
        while out.ends_with("\n\n") {
            out.pop();
        }
        out
    }
}

/// A row's spread per side as `A/B` (`1.05×/3.20×`), `–` for a side without one.
fn spread_text(r: &Row) -> String {
    let side = |s: Option<f64>| s.map(units::ratio).unwrap_or_else(|| "–".to_owned());
    format!("{}/{}", side(r.spread_a), side(r.spread_b))
}
