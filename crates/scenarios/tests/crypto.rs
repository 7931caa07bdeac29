//! The crypto scenario runs end to end and every record it emits validates against the schema.

mod common;

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use common::{Collect, run};
use harness::{Context, NoProgress, RunOptions, ScenarioError};
use measure::record::Body;

#[test]
fn crypto_quick_emits_valid_measurements() {
    let records = run("crypto", &RunOptions::quick(std::env::temp_dir()));
    // 2 AEADs x 2 ops x 4 sizes + 4 SHA-256 + RSA + 2 Ed25519 + X25519.
    assert_eq!(records.len(), 24);
    for r in &records {
        let Body::Measurement(m) = &r.body else {
            panic!("unexpected {}", r.kind())
        };
        assert!(m.summary.median_ns > 0.0);
    }
    // Sized operations carry their size and a byte rate; unsized ones neither. (How the
    // rate follows from the median is tested on hand-computed values in
    // `measure::sampler`.)
    for r in &records {
        let Body::Measurement(m) = &r.body else {
            unreachable!()
        };
        let sized = matches!(m.name.as_str(), "seal" | "open" | "digest");
        assert_eq!(m.bytes_per_op.is_some(), sized, "{}", m.name);
        assert_eq!(m.bytes_per_s.is_some(), sized, "{}", m.name);
    }
    assert!(records.iter().any(|r| matches!(&r.body,
        Body::Measurement(m) if m.name == "seal" && m.bytes_per_op == Some(16384))));
}

#[test]
fn a_cancelled_run_stops_without_records() {
    let opts = RunOptions::quick(std::env::temp_dir());
    let sink = Collect(Mutex::new(Vec::new()));
    let cancel = AtomicBool::new(true);
    let ctx = Context::new(&opts, &sink, &NoProgress, &cancel);
    let err = scenarios::catalog()
        .find("crypto")
        .unwrap()
        .run(&ctx)
        .unwrap_err();
    assert!(matches!(err, ScenarioError::Cancelled));
    assert!(sink.0.into_inner().unwrap().is_empty());
}
