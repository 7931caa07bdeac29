//! One table per kind of record: checks, measurements, scaling points, fixed-duration passes,
//! calibrations, histograms, and the cells of a scenario's own tables.

use measure::Record;
use measure::record::{
    Calibration, Check, DurationPass, Histogram, Measurement, ScalingPoint, Value,
};

use super::{ci_text, outliers_text, oversub_note, param_cells, param_keys};
use crate::table::Table;
use crate::units;

pub(super) fn check_table(checks: &[(&Record, &Check)]) -> Table {
    let keys = param_keys(checks.iter().map(|(r, _)| &r.params));
    let mut header = vec!["check".to_owned()];
    header.extend(keys.iter().cloned());
    header.extend(["verdict".to_owned(), "message".to_owned()]);
    let mut t = Table::new(header);
    for (r, c) in checks {
        let mut row = vec![c.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(crate::verdicts::verdict_text(c.verdict).to_owned());
        row.push(c.message.clone());
        t.push(row);
    }
    t
}
/// The measurements table (public to the crate for tests and the terminal summary).
pub(crate) fn measurement_table(ms: &[(&Record, &Measurement)]) -> Table {
    let keys = param_keys(ms.iter().map(|(r, _)| &r.params));
    let with_bytes = ms.iter().any(|(_, m)| m.bytes_per_s.is_some());
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(
        ["median", "95% CI", "p95", "MAD", "outliers", "ops/s"]
            .iter()
            .map(|s| s.to_string()),
    );
    if with_bytes {
        header.push("bytes/s".to_owned());
    }
    header.push("overhead".to_owned());
    let n = header.len();
    let mut t = Table::new(header).right(first_num..n);
    for (r, m) in ms {
        let s = &m.summary;
        let mut row = vec![m.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(units::duration_ns(s.median_ns));
        row.push(ci_text(s.median_ci_low_ns, s.median_ci_high_ns));
        row.push(units::duration_ns(s.p95_ns));
        row.push(units::duration_ns(s.mad_ns));
        row.push(outliers_text(m));
        row.push(units::rate(m.ops_per_s));
        if with_bytes {
            row.push(m.bytes_per_s.map(units::bytes_rate).unwrap_or_default());
        }
        row.push(
            m.overhead_ns
                .map_or_else(|| "—".to_owned(), units::duration_ns),
        );
        t.push(row);
    }
    t
}
pub(super) fn scaling_table(ps: &[(&Record, &ScalingPoint)]) -> Table {
    let keys = param_keys(ps.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    header.push("mode".to_owned());
    let first_num = header.len();
    header.extend(
        ["threads", "wall", "ops/s", "speed-up", "efficiency"]
            .iter()
            .map(|s| s.to_string()),
    );
    let last_num = header.len();
    header.push("note".to_owned());
    let mut t = Table::new(header).right(first_num..last_num);
    for (r, p) in ps {
        let mut row = vec![p.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(p.mode.to_string());
        row.push(p.threads.to_string());
        row.push(units::duration_ns(p.wall_ns));
        row.push(units::rate(p.ops_per_s));
        row.push(units::ratio(p.speedup));
        row.push(units::percent(p.efficiency * 100.0));
        row.push(oversub_note(p.threads, p.cores, p.oversubscribed));
        t.push(row);
    }
    t
}
pub(super) fn duration_table(ds: &[(&Record, &DurationPass)]) -> Table {
    let keys = param_keys(ds.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(
        [
            "threads",
            "total time",
            "count",
            "ops/s",
            "ops/s per thread",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let last_num = header.len();
    header.push("note".to_owned());
    let mut t = Table::new(header).right(first_num..last_num);
    for (r, d) in ds {
        let mut row = vec![d.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(d.threads.to_string());
        row.push(units::duration_ns(d.wall_ns));
        row.push(units::count(d.ops_total));
        row.push(units::rate(d.ops_per_s));
        row.push(units::rate(d.ops_per_s_per_thread));
        row.push(oversub_note(d.threads, d.cores, d.oversubscribed));
        t.push(row);
    }
    t
}
pub(super) fn calibration_table(cs: &[(&Record, &Calibration)]) -> Table {
    let keys = param_keys(cs.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(
        ["target", "attempts", "size", "time", "overshoot"]
            .iter()
            .map(|s| s.to_string()),
    );
    let last_num = header.len();
    header.push("warning".to_owned());
    let mut t = Table::new(header).right(first_num..last_num);
    for (r, c) in cs {
        let mut row = vec![c.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(units::duration_ns(c.target_ns));
        let attempts = match (c.attempts.first(), c.attempts.last()) {
            (Some(f), Some(l)) if c.attempts.len() > 1 => {
                format!("{} ({} → {})", c.attempts.len(), f.size, l.size)
            }
            _ => c.attempts.len().to_string(),
        };
        row.push(attempts);
        row.push(units::count(c.size));
        row.push(units::duration_ns(c.time_ns));
        row.push(units::ratio(c.overshoot));
        let warning = match (&c.warning, c.reached) {
            (Some(w), _) => w.clone(),
            (None, false) => "target not reached".to_owned(),
            (None, true) => String::new(),
        };
        row.push(warning);
        t.push(row);
    }
    t
}
pub(super) fn histogram_table(hs: &[(&Record, &Histogram)]) -> Table {
    let keys = param_keys(hs.iter().map(|(r, _)| &r.params));
    let mut header = vec!["name".to_owned()];
    header.extend(keys.iter().cloned());
    let first_num = header.len();
    header.extend(["count", "p50", "p99", "max"].iter().map(|s| s.to_string()));
    let n = header.len();
    let mut t = Table::new(header).right(first_num..n);
    for (r, h) in hs {
        let mut row = vec![h.name.clone()];
        row.extend(param_cells(&keys, &r.params));
        row.push(units::count(h.count));
        row.push(units::duration_ns(h.p50_ns));
        row.push(units::duration_ns(h.p99_ns));
        row.push(units::duration_ns(h.max_ns));
        t.push(row);
    }
    t
}
/// A table cell: floats to four significant digits (tables are read, not parsed; the raw
/// value stays in the results file).
pub(super) fn value_cell(v: &Value) -> String {
    match v {
        Value::Float(x) if x.is_finite() && *x != 0.0 => {
            let decimals = (3 - x.abs().log10().floor() as i64).clamp(0, 6) as usize;
            let s = format!("{x:.decimals$}");
            if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_owned()
            } else {
                s
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_cells_show_four_significant_digits() {
        let f = |x: f64| value_cell(&Value::Float(x));
        assert_eq!(f(679.2272894150814), "679.2");
        assert_eq!(f(1526.1037), "1526");
        assert_eq!(f(0.398), "0.398");
        assert_eq!(f(0.02700001), "0.027");
        assert_eq!(f(2.5), "2.5");
        assert_eq!(f(-12.3456), "-12.35");
        assert_eq!(f(0.0), "0");
        assert_eq!(value_cell(&Value::Int(1_000_000)), "1000000");
        assert_eq!(value_cell(&Value::from("2-5")), "2-5");
    }
}
