//! What the scenario integration tests share: running a scenario into memory with its
//! records checked against the schema, small sampler settings, and the runner of the test
//! binaries that have their own `main` (the sandbox backend re-executes them as the
//! enclave, so they cannot use libtest's harness).

#![allow(dead_code)] // Each test binary uses a different part.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use harness::{Context, Emit, NoProgress, RunOptions, ScenarioError};
use measure::record::Record;
use measure::sampler::SamplerConfig;

/// Keeps the records a scenario emits.
pub struct Collect(pub Mutex<Vec<Record>>);

impl Emit for Collect {
    fn emit(&self, record: &Record) -> Result<(), ScenarioError> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

/// A sampler that takes a few short samples: tests check behaviour, not speed.
pub fn tiny_sampler() -> SamplerConfig {
    SamplerConfig {
        warmup: Duration::from_millis(2),
        samples: 5,
        sample_time: Duration::from_micros(500),
        max_time: Duration::from_millis(50),
        min_samples: 3,
    }
}

/// Quick options writing into `dir`, with the platform key in `dir/keys` (never the user's
/// data directory) and [`tiny_sampler`].
pub fn options(dir: &std::path::Path) -> RunOptions {
    let mut o = RunOptions::quick(dir.to_path_buf());
    o.platform_key_dir = Some(dir.join("keys"));
    o.sampler = Some(tiny_sampler());
    o
}

/// Runs scenario `name` and returns its records, each checked against the schema.
pub fn run(name: &str, opts: &RunOptions) -> Vec<Record> {
    let sink = Collect(Mutex::new(Vec::new()));
    let cancel = AtomicBool::new(false);
    let ctx = Context::new(opts, &sink, &NoProgress, &cancel);
    scenarios::catalog().find(name).unwrap().run(&ctx).unwrap();
    let records = sink.0.into_inner().unwrap();
    assert_valid(&records);
    records
}

/// Asserts that every record validates against `docs/results.schema.json`.
pub fn assert_valid(records: &[Record]) {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../../docs/results.schema.json")).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    for r in records {
        let json: serde_json::Value =
            serde_json::from_str(&measure::jsonl::to_line(r).unwrap()).unwrap();
        assert!(v.is_valid(&json), "{json}");
    }
}

/// Runs the named tests with the runner harness-less test binaries share
/// ([`enclave::testing::run`]) and exits.
pub fn run_tests(tests: &[(&str, fn())]) -> ! {
    enclave::testing::run(tests)
}
