//! Every kind of record the harness emits validates against docs/results.schema.json, and the
//! schema rejects records that break the format.

use std::time::Duration;

use measure::calibrate::{CalibrateConfig, calibrate};
use measure::env::{BuildInfo, Env};
use measure::params;
use measure::record::*;
use measure::sampler::{SamplerConfig, Samples, sample};
use measure::stages::Stages;
use measure::sweep::{SweepConfig, fixed_duration, loop_until, sweep};

const SCHEMA_TEXT: &str = include_str!("../../../docs/results.schema.json");

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA_TEXT).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn assert_valid(v: &jsonschema::Validator, r: &Record) {
    let line = measure::jsonl::to_line(r).unwrap();
    let json: serde_json::Value = serde_json::from_str(&line).unwrap();
    let errors: Vec<String> = v.iter_errors(&json).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{} record invalid: {errors:?}\n{line}",
        r.kind()
    );
    // And it reads back to the same record.
    assert_eq!(&measure::jsonl::parse_line(line.trim_end()).unwrap(), r);
}

fn all_kinds() -> Vec<Record> {
    let build = BuildInfo {
        version: "0.1.0".into(),
        git_commit: "abc".into(),
        profile: "release".into(),
        rustc: "rustc 1.95.0".into(),
    };
    let mut env = Env::capture(build);
    env.harness_overhead_ns = Some(0.4);
    let cfg = SamplerConfig {
        warmup: Duration::from_millis(2),
        samples: 5,
        sample_time: Duration::from_micros(200),
        max_time: Duration::from_millis(50),
        min_samples: 3,
    };
    let m = sample(&cfg, || 1 + 1)
        .into_measurement("add", Some(8))
        .unwrap();
    let pts = sweep::<(), _>(
        "noop",
        &SweepConfig {
            threads: vec![1, 2],
            mode: ScalingMode::Weak,
            work: 10,
            warmup_runs: 0,
            runs: 2,
        },
        |_, _| Ok(()),
        |_| {},
    )
    .unwrap();
    let cal = calibrate::<()>(
        "lin",
        &CalibrateConfig {
            initial: 1,
            max: 8,
            target: Duration::from_nanos(4),
            runs: 1,
        },
        |n| Ok(Duration::from_nanos(n)),
    )
    .unwrap();
    let pass = fixed_duration::<(), _>("tick", 1, Duration::from_millis(2), |_, d| {
        loop_until(d, || Ok(()))
    })
    .unwrap();
    let mut st = Stages::new();
    st.add("a", Duration::from_micros(3), 1, 2);
    st.end_run();
    let stages = st.finish("p", None, Some(Duration::from_micros(2)));
    let p = || params! {"size_bytes" => 64, "alg" => "x", "ok" => true, "ratio" => 0.5};
    vec![
        Record::new("run", "host", params! {}, Body::Env(env)),
        Record::new("s", "native", p(), Body::Measurement(m)),
        Record::new("s", "native", p(), Body::Scaling(pts[1].clone())),
        Record::new("s", "native", p(), Body::Calibration(cal)),
        Record::new("s", "sandbox", p(), Body::Duration(pass)),
        Record::new("s", "native", p(), Body::Stages(stages)),
        Record::new(
            "s",
            "native",
            p(),
            Body::Histogram(Histogram {
                name: "ecall".into(),
                count: 3,
                buckets: vec![Bucket {
                    le_ns: 100.0,
                    count: 3,
                }],
                p50_ns: 90.0,
                p99_ns: 99.0,
                max_ns: 100.0,
            }),
        ),
        Record::new(
            "s",
            "native",
            p(),
            Body::Table(Table {
                name: "ref".into(),
                title: "Published".into(),
                columns: vec!["a".into(), "b".into()],
                rows: vec![vec![Value::from("x"), Value::from(1.5)]],
                source: Some("a paper".into()),
                notes: vec![],
            }),
        ),
        Record::new(
            "s",
            "native",
            p(),
            Body::Check(Check {
                subject: measure::record::CheckSubject::Run,
                name: "c".into(),
                verdict: Verdict::Fail,
                message: "m".into(),
            }),
        ),
    ]
}

#[test]
fn every_kind_validates_and_round_trips() {
    let v = validator();
    let records = all_kinds();
    assert_eq!(records.len(), 9);
    for r in &records {
        assert_valid(&v, r);
    }
    // Every subject of a check.
    for subject in [CheckSubject::Published, CheckSubject::Machine] {
        let r = Record::new(
            "s",
            "host",
            Params::new(),
            Body::Check(Check {
                subject,
                ..Check::run("hypervisor steal", Verdict::Warn, "m")
            }),
        );
        assert_valid(&v, &r);
    }
}

#[test]
fn the_schema_rejects_broken_records() {
    let v = validator();
    let good: serde_json::Value =
        serde_json::from_str(measure::jsonl::to_line(&all_kinds()[1]).unwrap().trim()).unwrap();
    assert!(v.is_valid(&good));
    let mutate = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut x = good.clone();
        f(&mut x);
        v.is_valid(&x)
    };
    assert!(!mutate(&|x| x["schema"] = "ccbench.v0".into()));
    assert!(!mutate(&|x| x["kind"] = "nonsense".into()));
    assert!(!mutate(
        &|x| x["params"]["nested"] = serde_json::json!({"a": 1})
    ));
    assert!(!mutate(&|x| {
        x.as_object_mut().unwrap().remove("summary");
    }));
    assert!(!mutate(&|x| x["samples_ns"] = serde_json::json!([-1.0])));
    assert!(!mutate(&|x| x["ops_per_s"] = serde_json::Value::Null));
}

#[test]
fn a_sample_set_becomes_a_valid_measurement_even_with_one_sample() {
    let s = Samples {
        iters_per_sample: 1,
        per_iter_ns: vec![42.0],
        overhead_ns: None,
    };
    let r = Record::new(
        "s",
        "native",
        params! {},
        Body::Measurement(s.into_measurement("one", None).unwrap()),
    );
    assert_valid(&validator(), &r);
}
