//! Writes a report from a synthetic results set holding every record kind:
//! `cargo run -p report --example sample_report -- OUT_DIR`.

#[path = "../tests/fixture/mod.rs"]
mod fixture;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args_os()
        .nth(1)
        .ok_or("usage: sample_report OUT_DIR")?;
    let mut records = fixture::all_kinds();
    records.push(fixture::check(
        measure::record::Verdict::Fail,
        "sandbox seal is faster than native: impossible",
    ));
    let written = report::write_report(
        &records,
        std::path::Path::new(&out),
        &report::Options::default(),
    )?;
    println!("{}", report::terminal_summary(&records));
    println!("{} plots; {}", written.plots.len(), written.html.display());
    Ok(())
}
