//! The sections of a scenario: one subsection per backend listing its records by kind, stage
//! breakdowns, histograms, a scenario's own tables, and the scaling plots that close it.

use measure::Record;
use measure::record::{
    Body, CheckSubject, Histogram, Measurement, ScalingMode, ScalingPoint, StageBreakdown,
    Table as TableRecord, Value,
};

use super::tables::{
    calibration_table, check_table, duration_table, histogram_table, measurement_table,
    scaling_table, value_cell,
};
use super::{Block, Builder, params_text};
use crate::plots::{BarChart, Chart, Fmt, HistChart, LineChart, Point, Reference, Series};
use crate::table::Table;
use crate::units;

pub(super) fn backend_section(
    b: &mut Builder<'_>,
    scenario: &str,
    backend: &str,
    recs: &[&Record],
) {
    macro_rules! of_kind {
        ($variant:ident) => {
            recs.iter()
                .filter_map(|r| match &r.body {
                    Body::$variant(x) => Some((*r, x)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
    }
    let checks = of_kind!(Check);
    let measurements = of_kind!(Measurement);
    let scaling = of_kind!(Scaling);
    let durations = of_kind!(Duration);
    let calibrations = of_kind!(Calibration);
    let stages = of_kind!(Stages);
    let histograms = of_kind!(Histogram);
    let tables = of_kind!(Table);

    let (own, published): (Vec<_>, Vec<_>) = checks
        .iter()
        .partition(|(_, c)| c.subject != CheckSubject::Published);
    if !own.is_empty() {
        b.blocks.push(Block::Heading(4, "Checks".to_owned()));
        b.blocks.push(Block::Table(check_table(&own)));
    }
    if !published.is_empty() {
        b.blocks.push(Block::Heading(
            4,
            "Findings about the published figures".to_owned(),
        ));
        b.blocks.push(Block::Text(
            "The same checks run on figures someone published: a verdict here is a finding \
             about the publication, not a failure of this run."
                .to_owned(),
        ));
        b.blocks.push(Block::Table(check_table(&published)));
    }
    if !measurements.is_empty() {
        b.blocks.push(Block::Heading(4, "Measurements".to_owned()));
        b.blocks.push(Block::Text(
            "Per-iteration time: median with its bootstrap 95% confidence interval, \
             95th percentile, median absolute deviation and Tukey outliers over the samples; \
             throughput at the median; the harness's own per-iteration overhead."
                .to_owned(),
        ));
        b.blocks
            .push(Block::Table(measurement_table(&measurements)));
    }
    if !scaling.is_empty() {
        b.blocks
            .push(Block::Heading(4, "Thread scaling".to_owned()));
        b.blocks.push(Block::Text(
            "Throughput is total operations over wall time; speed-up and efficiency are \
             relative to the sweep's smallest thread count (efficiency 100% is perfect scaling)."
                .to_owned(),
        ));
        b.blocks.push(Block::Table(scaling_table(&scaling)));
    }
    if !durations.is_empty() {
        b.blocks
            .push(Block::Heading(4, "Fixed-duration passes".to_owned()));
        b.blocks.push(Block::Table(duration_table(&durations)));
    }
    if !calibrations.is_empty() {
        b.blocks.push(Block::Heading(4, "Calibration".to_owned()));
        b.blocks
            .push(Block::Table(calibration_table(&calibrations)));
    }
    for (r, s) in &stages {
        stage_section(b, scenario, backend, r, s);
    }
    if !histograms.is_empty() {
        b.blocks
            .push(Block::Heading(4, "Latency histograms".to_owned()));
        b.blocks.push(Block::Table(histogram_table(&histograms)));
        if b.plots_wanted {
            for (r, h) in &histograms {
                if let Some(chart) = histogram_chart(scenario, backend, r, h) {
                    let block = b.plot(
                        &format!(
                            "{scenario}-{backend}-{}-{}-hist",
                            h.name,
                            params_text(&r.params)
                        ),
                        chart,
                    );
                    b.blocks.push(block);
                }
            }
        }
    }
    for (_, t) in &tables {
        table_record_section(b, t);
    }
    if b.plots_wanted && b.opts.sample_histograms && !measurements.is_empty() {
        let mut inner = vec![Block::Text(
            "Each sample is the mean per-iteration time of a batch, so these show the spread \
             between batches rather than single-operation latencies."
                .to_owned(),
        )];
        for (r, m) in &measurements {
            if m.samples_ns.is_empty() {
                continue;
            }
            let p = params_text(&r.params);
            let title = if p.is_empty() {
                format!("{} · {backend}: {}", scenario, m.name)
            } else {
                format!("{} · {backend}: {} ({p})", scenario, m.name)
            };
            let bins = crate::plots::bin_samples(&m.samples_ns, 40);
            let chart = Chart::Hist(HistChart {
                title,
                x_label: format!(
                    "time per iteration ({} samples of {} iterations)",
                    m.samples_ns.len(),
                    units::count(m.iters_per_sample)
                ),
                bins,
                log_x: false,
                markers: vec![
                    ("median".to_owned(), m.summary.median_ns),
                    ("p95".to_owned(), m.summary.p95_ns),
                ],
            });
            let block = b.plot(
                &format!("{scenario}-{backend}-{}-{p}-samples", m.name),
                chart,
            );
            inner.push(block);
        }
        b.blocks.push(Block::Details(
            format!(
                "Sample distributions ({} plots)",
                inner.len().saturating_sub(1)
            ),
            inner,
        ));
    }
}
fn stage_section(
    b: &mut Builder<'_>,
    scenario: &str,
    backend: &str,
    r: &Record,
    s: &StageBreakdown,
) {
    let p = params_text(&r.params);
    let heading = if p.is_empty() {
        format!("Stages: {}", s.name)
    } else {
        format!("Stages: {} ({p})", s.name)
    };
    b.blocks.push(Block::Heading(4, heading.clone()));
    let runs = s.runs.max(1) as f64;
    b.blocks.push(Block::Text(format!(
        "{} run(s); time is the total over all runs, per run is time / runs.",
        s.runs
    )));
    // Round trips and the link's prediction, where the pipeline has them: per run, beside
    // the measured time, with measured ÷ predicted and measured − predicted (a ratio far
    // from 1 on a stage of tens of microseconds is a few of them: the difference says so).
    let rounds = s.stages.iter().any(|st| st.round_trips.is_some());
    let predicted = s.stages.iter().any(|st| st.predicted_ns.is_some());
    // CPU time, where measured: beside the time, what the party computed rather than waited.
    let cpu = s.stages.iter().any(|st| st.cpu_ns.is_some());
    let mut head = vec!["stage", "time", "per run"];
    if cpu {
        head.push("CPU per run");
    }
    head.extend(["share", "bytes in", "bytes out"]);
    if rounds {
        head.push("round trips per run");
    }
    if predicted {
        head.extend([
            "predicted per run",
            "measured / predicted",
            "measured − predicted per run",
        ]);
    }
    let width = head.len();
    let mut t = Table::new(head).right(1..width);
    let extra = |round_trips: Option<f64>, time_ns: f64, predicted_ns: Option<f64>| {
        let mut v = Vec::new();
        if rounds {
            v.push(round_trips.map_or(String::new(), |n| {
                let per = n / runs;
                if per.fract() == 0.0 {
                    format!("{per}")
                } else {
                    format!("{per:.1}")
                }
            }));
        }
        if predicted {
            v.push(predicted_ns.map_or(String::new(), |p| units::duration_ns(p / runs)));
            v.push(match predicted_ns {
                Some(p) if p > 0.0 => format!("{:.2}", time_ns / p),
                _ => String::new(),
            });
            v.push(predicted_ns.map_or(String::new(), |p| {
                let d = (time_ns - p) / runs;
                let sign = if d > 0.0 { "+" } else { "" };
                format!("{sign}{}", units::duration_ns(d))
            }));
        }
        v
    };
    let cpu_cell = |ns: Option<f64>| ns.map_or(String::new(), |c| units::duration_ns(c / runs));
    for st in &s.stages {
        let mut row = vec![
            st.name.clone(),
            units::duration_ns(st.time_ns),
            units::duration_ns(st.time_ns / runs),
        ];
        if cpu {
            row.push(cpu_cell(st.cpu_ns));
        }
        row.extend([
            units::percent(st.percent),
            units::bytes(st.bytes_in as f64),
            units::bytes(st.bytes_out as f64),
        ]);
        row.extend(extra(
            st.round_trips.map(|n| n as f64),
            st.time_ns,
            st.predicted_ns,
        ));
        t.push(row);
    }
    let (bin, bout) = s.stages.iter().fold((0u64, 0u64), |(i, o), st| {
        (i + st.bytes_in, o + st.bytes_out)
    });
    let sum_rounds =
        rounds.then(|| s.stages.iter().filter_map(|st| st.round_trips).sum::<u64>() as f64);
    // The total's prediction covers every stage only when each stage has one.
    let sum_predicted = s
        .stages
        .iter()
        .map(|st| st.predicted_ns)
        .sum::<Option<f64>>();
    let mut row = vec![
        "measured total".to_owned(),
        units::duration_ns(s.total_ns),
        units::duration_ns(s.total_ns / runs),
    ];
    if cpu {
        // The stages' sum, where every stage has one.
        row.push(cpu_cell(
            s.stages.iter().map(|st| st.cpu_ns).sum::<Option<f64>>(),
        ));
    }
    row.extend([
        units::percent(100.0),
        units::bytes(bin as f64),
        units::bytes(bout as f64),
    ]);
    row.extend(extra(sum_rounds, s.total_ns, sum_predicted));
    t.push(row);
    let share = |v: f64| {
        if s.total_ns > 0.0 {
            units::percent(v / s.total_ns * 100.0)
        } else {
            String::new()
        }
    };
    // A row of a time with its share only (no CPU, bytes or rounds).
    let time_row = |label: &str, ns: f64| {
        let mut row = vec![
            label.to_owned(),
            units::duration_ns(ns),
            units::duration_ns(ns / runs),
        ];
        if cpu {
            row.push(String::new());
        }
        row.push(share(ns));
        row.resize(width, String::new());
        row
    };
    if let Some(min) = s.theoretical_min_ns {
        t.push(time_row("theoretical minimum", min));
    }
    if let Some(o) = s.overhead_ns {
        t.push(time_row("overhead (measured − minimum)", o));
    }
    b.blocks.push(Block::Table(t));
    if b.plots_wanted && !s.stages.is_empty() {
        let mut labels: Vec<String> = s.stages.iter().map(|st| st.name.clone()).collect();
        let mut values: Vec<f64> = s.stages.iter().map(|st| st.time_ns / runs).collect();
        labels.push("measured total".to_owned());
        values.push(s.total_ns / runs);
        let mut summary = 1;
        if let Some(min) = s.theoretical_min_ns {
            labels.push("theoretical minimum".to_owned());
            values.push(min / runs);
            summary += 1;
        }
        let chart = Chart::Bars(BarChart {
            title: format!("{scenario} · {backend}: {}", heading),
            x_label: "time per run".to_owned(),
            fmt: Fmt::Duration,
            labels,
            values,
            summary,
        });
        let block = b.plot(
            &format!("{scenario}-{backend}-{}-{p}-stages", s.name),
            chart,
        );
        b.blocks.push(block);
    }
}
fn histogram_chart(scenario: &str, backend: &str, r: &Record, h: &Histogram) -> Option<Chart> {
    let first = h.buckets.iter().position(|b| b.count > 0)?;
    let last = h.buckets.iter().rposition(|b| b.count > 0)?;
    let mut bins = Vec::new();
    for i in first..=last {
        let hi = h.buckets[i].le_ns;
        let lo = if i > 0 {
            h.buckets[i - 1].le_ns
        } else if hi > 0.0 {
            hi / 2.0
        } else {
            hi - 1.0
        };
        bins.push((lo, hi, h.buckets[i].count));
    }
    let lo = bins.first().map(|b| b.0).unwrap_or(0.0);
    let hi = bins.last().map(|b| b.1).unwrap_or(1.0);
    let p = params_text(&r.params);
    Some(Chart::Hist(HistChart {
        title: if p.is_empty() {
            format!("{scenario} · {backend}: {}", h.name)
        } else {
            format!("{scenario} · {backend}: {} ({p})", h.name)
        },
        x_label: format!("latency ({} values)", units::count(h.count)),
        bins,
        log_x: lo > 0.0 && hi / lo > 50.0,
        markers: vec![("p50".to_owned(), h.p50_ns), ("p99".to_owned(), h.p99_ns)],
    }))
}
fn table_record_section(b: &mut Builder<'_>, t: &TableRecord) {
    b.blocks.push(Block::Heading(4, t.title.clone()));
    if let Some(src) = &t.source {
        b.blocks.push(Block::Text(format!(
            "Figures marked as published were not measured by ccbench. Source: {src}"
        )));
    }
    let numeric: Vec<usize> = (0..t.columns.len())
        .filter(|&c| {
            let mut any = false;
            let all = t.rows.iter().all(|row| match row.get(c) {
                Some(v) if v.as_f64().is_some() => {
                    any = true;
                    true
                }
                Some(Value::Str(s)) => s.is_empty(),
                _ => true,
            });
            all && any
        })
        .collect();
    let mut table = Table::new(t.columns.iter().cloned()).right(numeric);
    for row in &t.rows {
        table.push(row.iter().map(value_cell).collect());
    }
    b.blocks.push(Block::Table(table));
    for note in &t.notes {
        b.blocks.push(Block::Text(format!("Note: {note}")));
    }
}
/// Largest over smallest of the positive, finite `values` (1 when there are none): a
/// spread above 20 gets a log axis.
fn spread(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.filter(|v| *v > 0.0 && v.is_finite()).collect();
    match (
        v.iter().copied().reduce(f64::min),
        v.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) => hi / lo,
        _ => 1.0,
    }
}

/// Scaling plots of one scenario: per mode, throughput, speed-up and efficiency against
/// threads, one line per (backend, name, params except `threads`).
pub(super) fn scaling_plots(b: &mut Builder<'_>, scenario: &str, recs: &[&Record]) {
    for mode in [ScalingMode::Weak, ScalingMode::Strong] {
        let points: Vec<(&Record, &ScalingPoint)> = recs
            .iter()
            .filter_map(|r| match &r.body {
                Body::Scaling(p) if p.mode == mode => Some((*r, p)),
                _ => None,
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        // Group in order of first appearance.
        let mut groups: Vec<(String, Vec<&ScalingPoint>)> = Vec::new();
        for (r, p) in &points {
            let mut params = r.params.clone();
            params.remove("threads");
            let ps = params_text(&params);
            let key = if ps.is_empty() {
                format!("{} {}", r.backend, p.name)
            } else {
                format!("{} {} ({ps})", r.backend, p.name)
            };
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => g.1.push(p),
                None => groups.push((key, vec![p])),
            }
        }
        for g in &mut groups {
            g.1.sort_by_key(|p| p.threads);
        }
        let series = |y: &dyn Fn(&ScalingPoint) -> f64| -> Vec<Series> {
            groups
                .iter()
                .map(|(label, ps)| Series {
                    label: label.clone(),
                    points: ps
                        .iter()
                        .map(|p| Point {
                            x: p.threads as f64,
                            y: y(p),
                            hollow: p.oversubscribed,
                        })
                        .collect(),
                })
                .collect()
        };
        let any_oversub = points.iter().any(|(_, p)| p.oversubscribed);
        let base = points
            .iter()
            .map(|(_, p)| p.threads)
            .min()
            .unwrap_or(1)
            .max(1) as f64;
        let spread = spread(points.iter().map(|(_, p)| p.ops_per_s));
        b.blocks.push(Block::Heading(
            3,
            format!("{scenario} · {mode} scaling plots"),
        ));
        let what = match mode {
            ScalingMode::Weak => "work per thread fixed",
            ScalingMode::Strong => "total work fixed",
        };
        b.blocks.push(Block::Text(format!(
            "{mode} scaling ({what}).{}",
            if any_oversub {
                " Hollow markers: more threads than cores (oversubscribed)."
            } else {
                ""
            }
        )));
        let charts = [
            (
                "throughput",
                Chart::Lines(LineChart {
                    title: format!("{scenario}: throughput, {mode} scaling"),
                    x_label: "threads".to_owned(),
                    x_fmt: Fmt::Threads,
                    y_label: "operations per second".to_owned(),
                    y_fmt: Fmt::Rate,
                    log_y: spread > 20.0,
                    legend_low: false,
                    series: series(&|p| p.ops_per_s),
                    reference: None,
                }),
            ),
            (
                "speedup",
                Chart::Lines(LineChart {
                    title: format!("{scenario}: speed-up, {mode} scaling"),
                    x_label: "threads".to_owned(),
                    x_fmt: Fmt::Threads,
                    y_label: "speed-up".to_owned(),
                    y_fmt: Fmt::Ratio,
                    log_y: false,
                    legend_low: false,
                    series: series(&|p| p.speedup),
                    reference: Some(Reference::Ideal { base }),
                }),
            ),
            (
                "efficiency",
                Chart::Lines(LineChart {
                    title: format!("{scenario}: efficiency, {mode} scaling"),
                    x_label: "threads".to_owned(),
                    x_fmt: Fmt::Threads,
                    y_label: "efficiency".to_owned(),
                    y_fmt: Fmt::Fraction,
                    log_y: false,
                    legend_low: true,
                    series: series(&|p| p.efficiency),
                    reference: Some(Reference::Level(1.0)),
                }),
            ),
        ];
        for (what, chart) in charts {
            let block = b.plot(&format!("{scenario}-{mode}-{what}"), chart);
            b.blocks.push(block);
        }
    }
}

/// Throughput against size, for measurements swept over a size parameter (a params key
/// ending in `_bytes` with at least three values under one name, as `tls-middlebox`'s
/// `record_size_bytes`): payload bytes per second on a log2 size axis, one line per
/// (backend, name, the other params).
pub(super) fn size_plots(b: &mut Builder<'_>, scenario: &str, recs: &[&Record]) {
    let ms: Vec<(&Record, &Measurement)> = recs
        .iter()
        .filter_map(|r| match &r.body {
            Body::Measurement(m) if m.bytes_per_s.is_some() => Some((*r, m)),
            _ => None,
        })
        .collect();
    let size = |r: &Record, key: &str| r.params.get(key).and_then(|v| v.as_f64());
    let mut keys: Vec<(String, String)> = Vec::new();
    for (r, m) in &ms {
        for k in r.params.keys().filter(|k| k.ends_with("_bytes")) {
            let key = (m.name.clone(), k.clone());
            if keys.contains(&key) {
                continue;
            }
            let mut values: Vec<f64> = ms
                .iter()
                .filter(|(_, o)| o.name == m.name)
                .filter_map(|(o, _)| size(o, k))
                .filter(|v| *v > 0.0)
                .collect();
            values.sort_by(f64::total_cmp);
            values.dedup();
            if values.len() >= 3 {
                keys.push(key);
            }
        }
    }
    for (name, key) in keys {
        let mut groups: Vec<(String, Vec<Point>)> = Vec::new();
        for (r, m) in ms.iter().filter(|(_, m)| m.name == name) {
            let (Some(x), Some(y)) = (size(r, &key).filter(|v| *v > 0.0), m.bytes_per_s) else {
                continue;
            };
            let mut params = r.params.clone();
            params.remove(&key);
            let ps = params_text(&params);
            let label = if ps.is_empty() {
                r.backend.clone()
            } else {
                format!("{} ({ps})", r.backend)
            };
            let point = Point {
                x: x.log2(),
                y,
                hollow: false,
            };
            match groups.iter_mut().find(|g| g.0 == label) {
                Some(g) => g.1.push(point),
                None => groups.push((label, vec![point])),
            }
        }
        let series: Vec<Series> = groups
            .into_iter()
            .map(|(label, mut points)| {
                points.sort_by(|a, b| a.x.total_cmp(&b.x));
                Series { label, points }
            })
            .collect();
        let spread = spread(series.iter().flat_map(|s| s.points.iter().map(|p| p.y)));
        let what = key.trim_end_matches("_bytes").replace('_', " ");
        b.blocks.push(Block::Heading(
            3,
            format!("{scenario} · {name}: throughput by {what}"),
        ));
        let chart = Chart::Lines(LineChart {
            title: format!("{scenario}: {name} throughput by {what}"),
            x_label: format!("{what} (log scale)"),
            x_fmt: Fmt::Log2Bytes,
            y_label: "payload bytes per second (median)".to_owned(),
            y_fmt: Fmt::ByteRate,
            log_y: spread > 20.0,
            legend_low: false,
            series,
            reference: None,
        });
        let block = b.plot(&format!("{scenario}-{name}-by-{what}"), chart);
        b.blocks.push(block);
    }
}
