//! The example end to end, as a user runs it: its binary lists its scenario beside the
//! built-in ones, runs it on every backend, and writes the records a report needs; and the
//! store refuses what a dishonest host hands back.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The binary, with its history in a file of this test process's own (never the user's).
fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kv-store"));
    c.env(
        "CCBENCH_HISTORY",
        std::env::temp_dir().join(format!("kv-store-test-{}.sqlite", std::process::id())),
    );
    c
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn lists_its_scenario_beside_the_built_in_ones() {
    let out = bin().arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(names.contains(&"kv-store"), "{text}");
    assert!(
        names.contains(&"crypto") && names.contains(&"gc-2pc"),
        "{text}"
    );
    assert_eq!(names.last(), Some(&"kv-store"), "user scenarios come last");
}

#[test]
fn a_quick_run_measures_every_backend_with_trace_advice_cost_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = bin()
        .args(["run", "kv-store", "--quick", "--quiet", "--threads", "1,2"])
        .arg("--out")
        .arg(&out_dir)
        .env("CCBENCH_PLATFORM_KEY_DIR", dir.path().join("keys"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = records(&out_dir.join("results.jsonl"));
    let ours: Vec<&Value> = recs
        .iter()
        .filter(|r| r["scenario"] == "kv-store")
        .collect();
    let backends: BTreeSet<&str> = ours.iter().filter_map(|r| r["backend"].as_str()).collect();
    for b in ["native", "sandbox", "sandbox-switchless"] {
        assert!(backends.contains(b), "no {b} records: {backends:?}");
    }
    let kind = |k: &'static str| ours.iter().filter(move |r| r["kind"] == k);
    let tables: BTreeSet<&str> = kind("table").filter_map(|r| r["name"].as_str()).collect();
    assert!(
        tables.contains("trace") && tables.contains("advice"),
        "{tables:?}"
    );
    // The advisor's table has a verdict for every call of the store.
    let advice = kind("table")
        .find(|r| r["name"] == "advice" && r["backend"] == "sandbox")
        .expect("the regular sandbox's advice");
    let calls: BTreeSet<&str> = advice["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row[1].as_str())
        .collect();
    for c in ["put", "get", "store-read", "store-write"] {
        assert!(calls.contains(c), "no advice for {c}: {calls:?}");
    }
    assert_eq!(kind("cost").count(), 2, "a cost row for get and for put");
    assert!(kind("scaling").count() >= 3 * 2 * 2, "mixed sweeps");
    let checks: Vec<(&str, &str)> = kind("check")
        .map(|r| (r["name"].as_str().unwrap(), r["verdict"].as_str().unwrap()))
        .collect();
    for name in [
        "gets-return-puts",
        "delete",
        "rollback-refused",
        "tampered-blob-refused",
    ] {
        let of_name: Vec<_> = checks.iter().filter(|c| c.0 == name).collect();
        assert_eq!(
            of_name.len(),
            3,
            "{name} once per configuration: {checks:?}"
        );
        assert!(of_name.iter().all(|c| c.1 == "pass"), "{checks:?}");
    }
    assert!(out_dir.join("report.html").is_file());
}

#[test]
fn an_unknown_scenario_is_a_usage_error_naming_the_known_ones() {
    let out = bin().args(["run", "kv-stor", "--quick"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kv-store") && err.contains("crypto"), "{err}");
}
