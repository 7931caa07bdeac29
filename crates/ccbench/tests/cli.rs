//! The `ccbench` binary end to end: what a user types, what they get, and how it fails.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn ccbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ccbench"))
}

fn run(args: &[&str]) -> Output {
    ccbench().args(args).output().expect("ccbench starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/results.schema.json")).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// Every line of a results file is a record that validates; returns the records' kinds.
fn validate_file(path: &Path) -> Vec<String> {
    let v = validator();
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).unwrap();
            let errors: Vec<String> = v.iter_errors(&json).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{errors:?}\n{line}");
            json["kind"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn no_temp_files(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.contains(".tmp"), "left behind: {name}");
        if entry.file_type().unwrap().is_dir() {
            no_temp_files(&entry.path());
        }
    }
}

#[test]
fn list_names_every_scenario() {
    let o = run(&["list"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for name in ["crypto", "transitions", "sealing"] {
        assert!(out.contains(name), "{out}");
    }
}

#[test]
fn unknown_scenario_is_a_usage_error_listing_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = run(&["run", "nope", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("unknown scenario \"nope\"") && err.contains("crypto"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is created for a usage error");
}

#[test]
fn invalid_option_values_exit_2() {
    for args in [
        &["run", "crypto", "--threads", "0"][..],
        &["run", "crypto", "--duration", "-3"],
        &["run", "crypto", "--scaling", "sideways"],
        &["run", "transitions", "--transition-cycles", "fast"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn an_unknown_transition_model_names_the_presets() {
    let o = run(&["run", "transitions", "--transition-cycles", "sgx9000"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("hotcalls-ecall-warm"), "{err}");
}

#[test]
fn sealing_runs_behind_the_sandbox_under_a_transition_model() {
    // The sandbox re-executes the ccbench binary as the enclave.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = ccbench()
        .env("CCBENCH_PLATFORM_KEY_DIR", dir.path().join("keys"))
        .args([
            "run",
            "sealing",
            "--quick",
            "--quiet",
            "--transition-cycles",
            "1000",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    validate_file(&out.join("results.jsonl"));
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["scenario"] == "sealing")
        .collect();
    assert!(records.iter().any(|r| r["backend"] == "sandbox"));
    for r in &records {
        assert_eq!(r["params"]["transition_model"], "cycles-1000", "{r}");
    }
    let key = dir.path().join("keys");
    assert!(key.is_dir(), "the platform key is created where asked");
}

#[test]
fn run_crypto_quick_writes_results_report_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = run(&[
        "run",
        "crypto",
        "--quick",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kinds = validate_file(&out.join("results.jsonl"));
    assert_eq!(kinds[0], "env");
    assert_eq!(kinds.iter().filter(|k| *k == "measurement").count(), 24);
    for f in ["report.md", "report.html"] {
        let meta = std::fs::metadata(out.join(f)).unwrap();
        assert!(meta.len() > 0, "{f} is empty");
    }
    assert!(out.join("plots").is_dir());
    no_temp_files(&out);
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("seal"), "{summary}");

    // `report` regenerates the same files from the results file alone.
    let again = dir.path().join("again");
    let o = run(&[
        "report",
        out.join("results.jsonl").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(again.join("report.html").exists());

    // Comparing a run with itself finds no change.
    let r = out.join("results.jsonl");
    let o = run(&[
        "compare",
        r.to_str().unwrap(),
        r.to_str().unwrap(),
        "--fail-on-regression",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn malformed_results_name_file_and_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"schema\":\"ccbench.v1\"}\n").unwrap();
    let out = dir.path().join("out");
    let o = run(&[
        "report",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains(&format!("{}:1:", bad.display())), "{err}");
    assert!(!out.join("report.html").exists());

    std::fs::write(&bad, "{\"schema\":\"ccbench.v1\",\"kind\":\"che").unwrap();
    let o = run(&["compare", bad.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains(":1:"), "{}", stderr(&o));
}

#[test]
fn ctrl_c_keeps_a_valid_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("int");
    let child = ccbench()
        .args(["run", "crypto", "--quiet", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first measurement to land, then interrupt.
    let results = out.join("results.jsonl");
    let start = Instant::now();
    while std::fs::read_to_string(&results).map_or(0, |t| t.lines().count()) < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no measurement after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let kinds = validate_file(&results);
    assert!(kinds.len() >= 2 && kinds.len() < 25, "{kinds:?}");
    assert!(
        out.join("report.html").exists(),
        "the partial run is still reported"
    );
}
