//! CSV files for spreadsheets and other plotting tools: one file per record kind with raw
//! numbers in SI units (no human formatting), plus one file per scenario-composed table.

use measure::Record;
use measure::record::Body;

use crate::doc::params_text;
use crate::table::csv;

fn f(x: f64) -> String {
    x.to_string()
}

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// The CSV files for these records: `(file stem, contents)`, only for kinds present.
///
/// Stems: `measurements`, `scaling`, `durations`, `calibrations`, `stages`, `histograms`,
/// `checks`, and `table-<name>` for each scenario-composed table.
pub fn csv_files(records: &[Record]) -> Vec<(String, String)> {
    let mut measurements = Vec::new();
    let mut scaling = Vec::new();
    let mut durations = Vec::new();
    let mut calibrations = Vec::new();
    let mut stages = Vec::new();
    let mut histograms = Vec::new();
    let mut checks = Vec::new();
    let mut tables = Vec::new();
    for r in records {
        let head = || {
            vec![
                r.scenario.clone(),
                r.backend.clone(),
                params_text(&r.params),
            ]
        };
        match &r.body {
            Body::Env(_) => {}
            Body::Measurement(m) => {
                let s = &m.summary;
                let mut row = head();
                row.extend([
                    m.name.clone(),
                    s.n.to_string(),
                    m.iters_per_sample.to_string(),
                    f(s.median_ns),
                    f(s.median_ci_low_ns),
                    f(s.median_ci_high_ns),
                    f(s.mean_ns),
                    f(s.stddev_ns),
                    f(s.mad_ns),
                    f(s.min_ns),
                    f(s.max_ns),
                    f(s.p95_ns),
                    f(s.p99_ns),
                    (s.outliers.low_mild + s.outliers.high_mild).to_string(),
                    (s.outliers.low_severe + s.outliers.high_severe).to_string(),
                    f(m.ops_per_s),
                    opt(m.bytes_per_op),
                    opt(m.bytes_per_s),
                    opt(m.overhead_ns),
                ]);
                measurements.push(row);
            }
            Body::Scaling(p) => {
                let mut row = head();
                row.extend([
                    p.name.clone(),
                    p.mode.to_string(),
                    p.threads.to_string(),
                    p.cores.to_string(),
                    p.oversubscribed.to_string(),
                    p.ops_total.to_string(),
                    f(p.wall_ns),
                    f(p.ops_per_s),
                    f(p.speedup),
                    f(p.efficiency),
                ]);
                scaling.push(row);
            }
            Body::Duration(d) => {
                let mut row = head();
                row.extend([
                    d.name.clone(),
                    d.threads.to_string(),
                    d.cores.to_string(),
                    d.oversubscribed.to_string(),
                    f(d.target_ns),
                    f(d.wall_ns),
                    d.ops_total.to_string(),
                    f(d.ops_per_s),
                    f(d.ops_per_s_per_thread),
                ]);
                durations.push(row);
            }
            Body::Calibration(c) => {
                let mut row = head();
                row.extend([
                    c.name.clone(),
                    f(c.target_ns),
                    c.attempts.len().to_string(),
                    c.size.to_string(),
                    f(c.time_ns),
                    f(c.overshoot),
                    c.reached.to_string(),
                    c.warning.clone().unwrap_or_default(),
                ]);
                calibrations.push(row);
            }
            Body::Stages(s) => {
                for st in &s.stages {
                    let mut row = head();
                    row.extend([
                        s.name.clone(),
                        s.runs.to_string(),
                        st.name.clone(),
                        f(st.time_ns),
                        f(st.percent),
                        st.bytes_in.to_string(),
                        st.bytes_out.to_string(),
                        f(s.total_ns),
                        opt(s.theoretical_min_ns),
                        opt(s.overhead_ns),
                        st.round_trips.map(|n| n.to_string()).unwrap_or_default(),
                        opt(st.predicted_ns),
                        opt(st.cpu_ns),
                    ]);
                    stages.push(row);
                }
            }
            Body::Histogram(h) => {
                for b in &h.buckets {
                    let mut row = head();
                    row.extend([
                        h.name.clone(),
                        f(b.le_ns),
                        b.count.to_string(),
                        h.count.to_string(),
                        f(h.p50_ns),
                        f(h.p99_ns),
                        f(h.max_ns),
                    ]);
                    histograms.push(row);
                }
            }
            Body::Check(c) => {
                let mut row = head();
                row.extend([
                    c.name.clone(),
                    format!("{:?}", c.verdict).to_lowercase(),
                    c.message.clone(),
                ]);
                checks.push(row);
            }
            Body::Table(t) => {
                let mut header: Vec<&str> = vec!["scenario", "backend", "params"];
                header.extend(t.columns.iter().map(String::as_str));
                let rows: Vec<Vec<String>> = t
                    .rows
                    .iter()
                    .map(|cells| {
                        let mut row = head();
                        row.extend(cells.iter().map(ToString::to_string));
                        row
                    })
                    .collect();
                tables.push((format!("table-{}", t.name), csv(&header, &rows)));
            }
            // The cost summary is derived from the other records' samples; its CSV is
            // the summary table the report renders.
            Body::Cost(_) => {}
        }
    }
    const HEAD: [&str; 3] = ["scenario", "backend", "params"];
    let mut out = Vec::new();
    let mut add = |stem: &str, cols: &[&str], rows: Vec<Vec<String>>| {
        if !rows.is_empty() {
            let header: Vec<&str> = HEAD.iter().chain(cols).copied().collect();
            out.push((stem.to_owned(), csv(&header, &rows)));
        }
    };
    add(
        "measurements",
        &[
            "name",
            "samples",
            "iters_per_sample",
            "median_ns",
            "median_ci_low_ns",
            "median_ci_high_ns",
            "mean_ns",
            "stddev_ns",
            "mad_ns",
            "min_ns",
            "max_ns",
            "p95_ns",
            "p99_ns",
            "outliers_mild",
            "outliers_severe",
            "ops_per_s",
            "bytes_per_op",
            "bytes_per_s",
            "overhead_ns",
        ],
        measurements,
    );
    add(
        "scaling",
        &[
            "name",
            "mode",
            "threads",
            "cores",
            "oversubscribed",
            "ops_total",
            "wall_ns",
            "ops_per_s",
            "speedup",
            "efficiency",
        ],
        scaling,
    );
    add(
        "durations",
        &[
            "name",
            "threads",
            "cores",
            "oversubscribed",
            "target_ns",
            "wall_ns",
            "ops_total",
            "ops_per_s",
            "ops_per_s_per_thread",
        ],
        durations,
    );
    add(
        "calibrations",
        &[
            "name",
            "target_ns",
            "attempts",
            "size",
            "time_ns",
            "overshoot",
            "reached",
            "warning",
        ],
        calibrations,
    );
    add(
        "stages",
        &[
            "name",
            "runs",
            "stage",
            "time_ns",
            "percent",
            "bytes_in",
            "bytes_out",
            "total_ns",
            "theoretical_min_ns",
            "overhead_ns",
            "round_trips",
            "predicted_ns",
            "cpu_ns",
        ],
        stages,
    );
    add(
        "histograms",
        &[
            "name",
            "le_ns",
            "count",
            "total_count",
            "p50_ns",
            "p99_ns",
            "max_ns",
        ],
        histograms,
    );
    add("checks", &["name", "verdict", "message"], checks);
    out.extend(tables);
    out
}
