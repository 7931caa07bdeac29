//! Times report generation for a results set the size of a full `crypto` run
//! (`cargo bench -p report`): 60 measurements of 100 samples, two thread sweeps, stages.

#[path = "../tests/fixture/mod.rs"]
mod fixture;

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut records = fixture::all_kinds();
    for i in 0..60u64 {
        records.push(fixture::measurement(
            "native",
            "aes-256-gcm open",
            Some(256 << (i % 7)),
            200.0 * (1 + i % 7) as f64,
            i,
        ));
    }
    let dir = tempfile::tempdir()?;
    for (label, opts) in [
        (
            "default (SVG + PNG + CSV, sample histograms)",
            report::Options::default(),
        ),
        (
            "SVG only, no sample histograms",
            report::Options {
                png: false,
                sample_histograms: false,
                ..report::Options::default()
            },
        ),
    ] {
        let t = Instant::now();
        let w = report::write_report(&records, dir.path(), &opts)?;
        let el = t.elapsed();
        let html = std::fs::metadata(&w.html)?.len();
        println!(
            "{label}: {} records -> {} plot files, report.html {} KiB, in {:.0} ms",
            records.len(),
            w.plots.len(),
            html / 1024,
            el.as_secs_f64() * 1e3
        );
    }
    let t = Instant::now();
    let s = report::terminal_summary(&records);
    println!(
        "terminal_summary: {} lines in {:.1} ms",
        s.lines().count(),
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
