//! Fuzzes the results-file reader: arbitrary bytes as a JSONL results file through
//! `measure::jsonl::parse_records`, the path `read_records` takes for `ccbench report` and
//! `compare`. No input may panic; whatever parses must also survive what those commands do
//! with it: the report in every format but files, and a comparison between runs (the records
//! against themselves, and the two halves of the file as two runs a side).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use measure::Record;
use report::compare::{CompareOptions, compare, compare_runs};

fuzz_target!(|data: &[u8]| {
    let Ok(records) = measure::jsonl::parse_records(data, Path::new("fuzz.jsonl")) else {
        return;
    };
    // Every record that parsed serialises again (unless it holds a number JSON cannot carry,
    // which the writer refuses) and reads back as the same record.
    for r in &records {
        if let Ok(line) = measure::jsonl::to_line(r) {
            let again = measure::jsonl::parse_line(&line).expect("a written line reads back");
            assert_eq!(&again, r);
        }
    }
    let opts = report::Options::default();
    let _ = report::render_markdown(&records, &opts);
    let _ = report::render_html(&records, &opts);
    let _ = report::terminal_summary(&records);
    let _ = report::terminal_tables(&records, report::Charset::Ascii);
    let _ = report::verdicts::Verdicts::of(&records);

    let c = compare(&records, &records, &CompareOptions::default());
    assert!(!c.has_regression(), "a file compared with itself regressed");
    let _ = c.render_terminal();
    let _ = c.render_markdown();
    let half = records.len() / 2;
    let (a, b): (&[Record], &[Record]) = records.split_at(half);
    let c = compare_runs(&[a, b], &[b, a], &CompareOptions::default());
    let _ = c.render_terminal();
    let _ = c.render_markdown();
});
