//! The crypto scenario runs end to end and every record it emits validates against the schema.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use measure::record::{Body, Record};
use scenarios::{Context, Emit, NoProgress, RunOptions, ScenarioError};

struct Collect(Mutex<Vec<Record>>);

impl Emit for Collect {
    fn emit(&self, record: &Record) -> Result<(), ScenarioError> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

#[test]
fn crypto_quick_emits_valid_measurements() {
    let dir = std::env::temp_dir();
    let opts = RunOptions::quick(dir);
    let sink = Collect(Mutex::new(Vec::new()));
    let cancel = AtomicBool::new(false);
    let ctx = Context::new(&opts, &sink, &NoProgress, &cancel);
    scenarios::find("crypto").unwrap().run(&ctx).unwrap();
    let records = sink.0.into_inner().unwrap();
    // 2 AEADs x 2 ops x 4 sizes + 4 SHA-256 + RSA + 2 Ed25519 + X25519.
    assert_eq!(records.len(), 24);

    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/results.schema.json")).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    for r in &records {
        let json: serde_json::Value =
            serde_json::from_str(&measure::jsonl::to_line(r).unwrap()).unwrap();
        assert!(v.is_valid(&json), "{json}");
        let Body::Measurement(m) = &r.body else {
            panic!("unexpected {}", r.kind())
        };
        assert!(m.summary.median_ns > 0.0);
    }
    // Sized operations carry a byte rate consistent with their median.
    let seal = records
        .iter()
        .find_map(|r| match &r.body {
            Body::Measurement(m) if m.name == "seal" && m.bytes_per_op == Some(16384) => Some(m),
            _ => None,
        })
        .unwrap();
    let expect = 16384.0 / (seal.summary.median_ns / 1e9);
    assert!((seal.bytes_per_s.unwrap() - expect).abs() / expect < 1e-9);
}

#[test]
fn a_cancelled_run_stops_without_records() {
    let opts = RunOptions::quick(std::env::temp_dir());
    let sink = Collect(Mutex::new(Vec::new()));
    let cancel = AtomicBool::new(true);
    let ctx = Context::new(&opts, &sink, &NoProgress, &cancel);
    let err = scenarios::find("crypto").unwrap().run(&ctx).unwrap_err();
    assert!(matches!(err, ScenarioError::Cancelled));
    assert!(sink.0.into_inner().unwrap().is_empty());
}
