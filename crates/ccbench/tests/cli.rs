//! The `ccbench` binary end to end: what a user types, what they get, and how it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary, with its history in a file of this test process's own (never the user's).
fn ccbench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ccbench"));
    c.env(
        "CCBENCH_HISTORY",
        std::env::temp_dir().join(format!("ccbench-cli-test-{}.sqlite", std::process::id())),
    );
    c
}

fn run(args: &[&str]) -> Output {
    ccbench().args(args).output().expect("ccbench starts")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `ccbench run SCENARIO --quick --quiet --out DIR/run` plus `extra`, which must succeed;
/// the temporary directory (kept alive by the caller), the output folder and the output.
fn run_quick(scenario: &str, extra: &[&str]) -> (tempfile::TempDir, PathBuf, Output) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec![
        "run",
        scenario,
        "--quick",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir, out, o)
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
    for name in ["crypto", "transitions", "sealing", "dp-tree"] {
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
    // Every record of the scenario's own says so; the run's check of the machine (the
    // hypervisor's steal during the scenario) is not one.
    for r in records.iter().filter(|r| r["subject"] != "machine") {
        assert_eq!(r["params"]["transition_model"], "cycles-1000", "{r}");
    }
    let key = dir.path().join("keys");
    assert!(key.is_dir(), "the platform key is created where asked");
}

#[test]
fn run_crypto_quick_writes_results_report_and_plots() {
    let (dir, out, o) = run_quick("crypto", &[]);
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
    // The run folder stands for its results file; a folder without one is named.
    let folder = dir.path().join("from-folder");
    let o = run(&[
        "report",
        out.to_str().unwrap(),
        "--out",
        folder.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(folder.join("report.md")).unwrap(),
        std::fs::read(again.join("report.md")).unwrap()
    );
    let o = run(&["report", again.join("plots").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("without a results.jsonl"),
        "{}",
        stderr(&o)
    );

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
fn run_dp_tree_quick_writes_scaling_plots_and_the_original_beside_ours() {
    // Two thread counts and a 2 ms calibration target keep it short; every backend runs.
    // Sweeps this short on a loaded machine can look super-linear (a 1-thread point slowed by
    // another process): a warning, not a failure, so the run still exits 0.
    let (_dir, out, _) = run_quick("dp-tree", &["--threads", "1,2", "--duration", "0.002"]);
    let kinds = validate_file(&out.join("results.jsonl"));
    // 3 backends x 2 batch sizes x (weak + strong) x 2 thread counts.
    assert_eq!(kinds.iter().filter(|k| *k == "scaling").count(), 24);
    assert_eq!(kinds.iter().filter(|k| *k == "calibration").count(), 6);
    for mode in ["weak", "strong"] {
        for what in ["throughput", "speedup", "efficiency"] {
            let plot = out.join(format!("plots/dp-tree-{mode}-{what}.svg"));
            assert!(plot.exists(), "{plot:?}");
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("the original's figures beside ours"));
    let plot = std::fs::read_to_string(out.join("plots/dp-tree-weak-throughput.svg")).unwrap();
    for line in ["native add (batch=1)", "sandbox add (batch=1024)"] {
        assert!(
            plot.contains(line),
            "one line per backend and batch: {line}"
        );
    }
    no_temp_files(&out);
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

#[test]
fn gc_circuit_build_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("aes.txt");
    let o = run(&[
        "gc",
        "circuit",
        "build",
        "aes128",
        "-o",
        f.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["gc", "circuit", "stats", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("AND              6400"), "{out}");
    assert!(out.contains("garbler input      128 bits"), "{out}");
    no_temp_files(dir.path());

    let o = run(&[
        "gc",
        "circuit",
        "build",
        "aes256",
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("aes128"), "{}", stderr(&o));
    // A malformed file: an error naming the file and the line.
    std::fs::write(&f, "3 5\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n2 1 2 9 3 XOR\n").unwrap();
    let o = run(&["gc", "circuit", "stats", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(f.to_str().unwrap()) && err.contains("line"),
        "{err}"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A garbler (`gc garble ARGS --listen ADDR`) in the background and an evaluator
/// (`gc evaluate ARGS --connect ADDR`) on a fresh port: both outputs, the garbler's second.
fn two_party(garbler: &[&str], evaluator: &[&str]) -> (Output, Output) {
    two_party_stdin(garbler, evaluator, None)
}

/// [`two_party`], with `stdin` written to the evaluator's standard input.
fn two_party_stdin(garbler: &[&str], evaluator: &[&str], stdin: Option<&str>) -> (Output, Output) {
    let addr = format!("127.0.0.1:{}", free_port());
    let g = ccbench()
        .args(["gc", "garble"])
        .args(garbler)
        .args(["--listen", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut e_args = vec!["gc", "evaluate"];
    e_args.extend_from_slice(evaluator);
    e_args.extend(["--connect", addr.as_str()]);
    let e = run_stdin(&e_args, stdin);
    (e, g.wait_with_output().unwrap())
}

/// `ccbench ARGS` with `stdin` (if any) on its standard input.
fn run_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let Some(text) = stdin else {
        return run(args);
    };
    let mut child = ccbench()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The input from a file (the garbler's key) and from stdin (the evaluator's plaintext);
/// no warning, as neither is a signing share.
#[test]
fn gc_inputs_come_from_a_file_or_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key.hex");
    std::fs::write(&key, "000102030405060708090a0b0c0d0e0f\n").unwrap();
    let (e, g) = two_party_stdin(
        &["--circuit", "aes128", "--input-file", key.to_str().unwrap()],
        &["--circuit", "aes128", "--input", "-"],
        Some("00112233445566778899AABBCCDDEEFF\n"),
    );
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(e.status.success(), "{}", stderr(&e));
    let fips = "69c4e0d86a7b0430d8cdb78070b4c55a";
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), fips);
    assert_eq!(String::from_utf8_lossy(&e.stdout).trim(), fips);
    assert!(!stderr(&g).contains("warning"), "{}", stderr(&g));
}

#[test]
fn gc_input_errors_name_their_source_and_never_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-share.hex");
    let bad = dir.path().join("bad.hex");
    std::fs::write(&bad, "00112233445566778899aabbccddeeffXY").unwrap();
    let evaluate = |input: &[&str], stdin: Option<&str>| {
        let mut args = vec!["gc", "evaluate", "--circuit", "aes128"];
        args.extend_from_slice(input);
        run_stdin(&args, stdin)
    };
    // A file that does not exist, and one that is not hex: usage errors naming the file.
    let o = evaluate(&["--input-file", missing.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(missing.to_str().unwrap()),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("cannot read"), "{}", stderr(&o));
    let o = evaluate(&["--input-file", bad.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(bad.to_str().unwrap()), "{}", stderr(&o));
    assert!(stderr(&o).contains("hex"), "{}", stderr(&o));
    assert!(stderr(&o).contains("character 33"), "{}", stderr(&o));
    // Nothing of the content (the temporary folder's random name may hold an X: not that).
    let said = stderr(&o).replace(bad.to_str().unwrap(), "");
    assert!(!said.contains("00112233") && !said.contains('X'), "{said}");
    // Bad or no hex on stdin.
    let o = evaluate(&["--input", "-"], Some("not hex at all"));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("stdin"), "{}", stderr(&o));
    let o = evaluate(&["--input", "-"], Some(""));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("empty"), "{}", stderr(&o));
    // Exactly one source: neither, or both, is a usage error.
    let o = evaluate(&[], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--input"), "{}", stderr(&o));
    let o = evaluate(
        &["--input", "00", "--input-file", bad.to_str().unwrap()],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A signing share written on the command line draws a warning; one from a file does not.
#[test]
fn gc_a_key_share_on_the_command_line_is_warned_about() {
    let (_, mask, _, _) = sign_inputs();
    let dir = tempfile::tempdir().unwrap();
    let share = dir.path().join("share.hex");
    std::fs::write(&share, hexs(&mask)).unwrap();
    // Nobody listens there: each party fails to connect, quickly, after reading its input.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let evaluate = |input: &[&str]| {
        let mut args = vec!["gc", "evaluate", "--circuit", "ed25519-sign"];
        args.extend_from_slice(input);
        args.extend(["--connect", &nowhere, "--timeout", "0.3"]);
        run(&args)
    };
    let o = evaluate(&["--input", &hexs(&mask)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning") && stderr(&o).contains("command line"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("--input-file"), "{}", stderr(&o));
    let o = evaluate(&["--input-file", share.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

/// A failure's cause is printed once: the connection error names the refusal once, though the
/// channel's error both quotes it and gives it as its source.
#[test]
fn an_errors_cause_is_printed_once() {
    let nowhere = format!("127.0.0.1:{}", free_port());
    let zeros = "00".repeat(16);
    let o = run(&[
        "gc",
        "evaluate",
        "--circuit",
        "aes128",
        "--input",
        &zeros,
        "--connect",
        &nowhere,
        "--timeout",
        "0.3",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&nowhere), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
}

/// A number of evaluations whose OT extension (all evaluations' inputs at once) would not fit
/// in memory is refused before anything is sent, naming the size and the most that fits,
/// instead of the kernel's OOM killer ending the party mid-session.
#[test]
fn gc_evaluations_that_would_not_fit_in_memory_are_refused() {
    // mul1024: 1,024 evaluator input bits, about 36 GB for a million evaluations.
    let input = "00".repeat(128);
    for (role, peer) in [("garble", "--listen"), ("evaluate", "--connect")] {
        let addr = format!("127.0.0.1:{}", free_port());
        let start = Instant::now();
        let o = run(&[
            "gc",
            role,
            "--circuit",
            "mul1024",
            "--input",
            &input,
            "--evaluations",
            "1000000",
            peer,
            &addr,
            "--timeout",
            "5",
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{role}: {err}");
        assert!(
            err.contains("--evaluations 1000000") && err.contains("available"),
            "{role}: {err}"
        );
        assert!(err.contains("at most"), "{role}: {err}");
        // Refused at once, not after waiting for the peer.
        assert!(start.elapsed() < Duration::from_secs(4), "{role}");
    }
}

/// A peer that sends a byte every 100 ms never lets the 30 s --timeout run out; the
/// garbler gives up when its 1 s --deadline passes, not after.
#[test]
fn gc_a_trickling_peer_is_cut_off_by_the_deadline() {
    use std::io::Write;
    let addr = format!("127.0.0.1:{}", free_port());
    let start = Instant::now();
    let g = ccbench()
        .args(["gc", "garble", "--circuit", "aes128", "--input", "-"])
        .args(["--listen", &addr, "--timeout", "30", "--deadline", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut g = g;
    g.stdin
        .take()
        .unwrap()
        .write_all(b"000102030405060708090a0b0c0d0e0f")
        .unwrap();
    let trickler = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            match std::net::TcpStream::connect(&addr) {
                Ok(s) => break s,
                Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("the garbler never listened: {e}"),
            }
        };
        while Instant::now() < until && s.write_all(&[0x43]).is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let o = g.wait_with_output().unwrap();
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("deadline"), "{}", stderr(&o));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "{took:?}"
    );
    trickler.join().unwrap();
}

#[test]
fn gc_garbler_and_evaluator_compute_aes_over_tcp() {
    let (e, g) = two_party(
        &[
            "--circuit",
            "aes128",
            "--input",
            "000102030405060708090a0b0c0d0e0f",
            "--evaluations",
            "3",
        ],
        &[
            "--circuit",
            "aes128",
            "--input",
            "00112233445566778899AABBCCDDEEFF",
            "--evaluations",
            "3",
        ],
    );
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(e.status.success(), "{}", stderr(&e));
    // FIPS-197 appendix C.1, seen by both parties.
    let fips = "69c4e0d86a7b0430d8cdb78070b4c55a";
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), fips);
    assert_eq!(String::from_utf8_lossy(&e.stdout).trim(), fips);
    assert!(stderr(&e).contains("OT Init"), "{}", stderr(&e));
}

#[test]
fn gc_bad_input_and_a_mismatched_peer_fail_cleanly() {
    // Wrong input length: a usage error before any network.
    let o = run(&["gc", "evaluate", "--circuit", "aes128", "--input", "0011"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--input"), "{}", stderr(&o));
    let o = run(&["gc", "evaluate", "--circuit", "aes128", "--input", "xyz"]);
    assert_eq!(o.status.code(), Some(2));

    // The peers disagree on the circuit: both report it and exit non-zero, promptly.
    let start = Instant::now();
    let (e, g) = two_party(
        &["--circuit", "mul8", "--input", "05"],
        &["--circuit", "mul16", "--input", "0700", "--timeout", "20"],
    );
    assert_eq!(g.status.code(), Some(1), "{}", stderr(&g));
    assert_eq!(e.status.code(), Some(1), "{}", stderr(&e));
    assert!(stderr(&e).contains("session failed"), "{}", stderr(&e));
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn gc_parties_with_different_hashes_both_fail_naming_both() {
    // The same hash on both sides, the fixed-key one: FIPS-197 as with the default.
    let (e, g) = two_party(
        &[
            "--circuit",
            "aes128",
            "--input",
            "000102030405060708090a0b0c0d0e0f",
            "--hash",
            "fixed-key",
        ],
        &[
            "--circuit",
            "aes128",
            "--input",
            "00112233445566778899AABBCCDDEEFF",
            "--hash",
            "fixed-key",
        ],
    );
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(e.status.success(), "{}", stderr(&e));
    assert_eq!(
        String::from_utf8_lossy(&e.stdout).trim(),
        "69c4e0d86a7b0430d8cdb78070b4c55a"
    );
    // Different hashes: exit 1 on both sides, each naming both.
    let (e, g) = two_party(
        &["--circuit", "mul8", "--input", "05", "--hash", "fixed-key"],
        &["--circuit", "mul8", "--input", "07", "--timeout", "20"],
    );
    for o in [&g, &e] {
        assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
        let err = stderr(o);
        assert!(
            err.contains("mitccrh") && err.contains("fixed-key"),
            "{err}"
        );
    }
    // An unknown hash is a usage error.
    let o = run(&[
        "gc",
        "evaluate",
        "--circuit",
        "mul8",
        "--input",
        "07",
        "--hash",
        "sha",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown garbling hash"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn gc_parties_with_three_halves_agree_and_different_schemes_fail_naming_both() {
    // Three-halves on both sides: FIPS-197 as with half-gates.
    let (e, g) = two_party(
        &[
            "--circuit",
            "aes128",
            "--input",
            "000102030405060708090a0b0c0d0e0f",
            "--scheme",
            "three-halves",
        ],
        &[
            "--circuit",
            "aes128",
            "--input",
            "00112233445566778899AABBCCDDEEFF",
            "--scheme",
            "three-halves",
        ],
    );
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(e.status.success(), "{}", stderr(&e));
    assert_eq!(
        String::from_utf8_lossy(&e.stdout).trim(),
        "69c4e0d86a7b0430d8cdb78070b4c55a"
    );
    // Different schemes: exit 1 on both sides, each naming both.
    let (e, g) = two_party(
        &[
            "--circuit",
            "mul8",
            "--input",
            "05",
            "--scheme",
            "three-halves",
        ],
        &["--circuit", "mul8", "--input", "07", "--timeout", "20"],
    );
    for o in [&g, &e] {
        assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
        let err = stderr(o);
        assert!(
            err.contains("half-gates") && err.contains("three-halves"),
            "{err}"
        );
    }
    // An unknown scheme: a usage error.
    let o = run(&[
        "gc",
        "evaluate",
        "--circuit",
        "mul8",
        "--input",
        "07",
        "--scheme",
        "halves",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("scheme"), "{}", stderr(&o));
}

/// A results file with one measurement of `samples` (ns per iteration).
fn write_results(path: &Path, samples: &[f64]) {
    use measure::record::{Body, Measurement, Record};
    let summary = measure::stats::Summary::from_samples(samples).unwrap();
    let ops = 1e9 / summary.median_ns;
    let r = Record::new(
        "gc-2pc",
        "2pc",
        measure::params! {},
        Body::Measurement(Measurement {
            name: "evaluate AND".into(),
            iters_per_sample: 1000,
            samples_ns: samples.to_vec(),
            summary,
            overhead_ns: Some(0.5),
            ops_per_s: ops,
            bytes_per_op: None,
            bytes_per_s: None,
        }),
    );
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut line = serde_json::to_string(&serde_json::to_value(&r).unwrap()).unwrap();
    line.push('\n');
    std::fs::write(path, line).unwrap();
}

#[test]
fn compare_says_not_enough_samples_for_a_10x_slowdown_on_two_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    write_results(&a, &[14.6, 14.9]);
    write_results(&b, &[146.0, 149.0]);
    let args = [a.to_str().unwrap(), b.to_str().unwrap()];
    let o = run(&["compare", args[0], args[1]]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("not enough samples"), "{out}");
    assert!(!out.contains("no change"), "{out}");
    let o = run(&["compare", args[0], args[1], "--fail-on-regression"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // Under a gross threshold above 10x the undecidable pair no longer fails.
    let o = run(&[
        "compare",
        args[0],
        args[1],
        "--fail-on-regression",
        "--gross-threshold",
        "20",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["compare", args[0], args[1], "--gross-threshold", "0.9"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn compare_tests_between_runs_given_several_per_side() {
    let dir = tempfile::tempdir().unwrap();
    let p = |side: &str, i: usize| dir.path().join(side).join(format!("run-{i}/results.jsonl"));
    // Each run is tight within itself, but the runs drift by a few percent: A/A.
    let drift = [1.0, 1.03, 0.98, 1.05, 1.01];
    for (i, d) in drift.iter().enumerate() {
        let s: Vec<f64> = (0..20).map(|k| 100.0 * d + 0.01 * k as f64).collect();
        write_results(&p("a", i), &s);
        let s: Vec<f64> = (0..20)
            .map(|k| 100.0 * drift[(i + 3) % 5] + 0.01 * k as f64)
            .collect();
        write_results(&p("b", i), &s);
    }
    // Within one run per side the drift looks like a 5% change ...
    let o = run(&[
        "compare",
        p("a", 0).to_str().unwrap(),
        p("b", 0).to_str().unwrap(),
        "--threshold",
        "1",
    ]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("SLOWER"));
    // ... between five runs per side (folders of run folders), it is no change.
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let o = run(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--threshold",
        "1",
        "--fail-on-regression",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("5 run(s) of A, 5 of B") && out.contains("no change"),
        "{out}"
    );
    // The same, as files listed on each side of `--`.
    let mut args = vec!["compare".to_owned()];
    args.extend((0..5).map(|i| p("a", i).to_str().unwrap().to_owned()));
    args.push("--".to_owned());
    args.extend((0..5).map(|i| p("b", i).to_str().unwrap().to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no change"));
    // A folder without results is a usage error.
    let o = run(&["compare", dir.path().to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[cfg(unix)]
#[test]
fn ab_interleaves_the_two_binaries_and_compares_between_runs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // Two fake builds: each copies its prepared results into --out and logs its turn.
    let log = dir.path().join("order.log");
    let mut bins = Vec::new();
    for (side, ns) in [("A", 100.0), ("B", 130.0)] {
        let res = dir.path().join(format!("{side}.jsonl"));
        let s: Vec<f64> = (0..10).map(|k| ns + k as f64).collect();
        write_results(&res, &s);
        let bin = dir.path().join(format!("ccbench-{side}"));
        std::fs::write(
            &bin,
            format!(
                "#!/bin/sh\nwhile [ \"$1\" != --out ]; do shift; done\n\
                 cp '{}' \"$2/results.jsonl\"\necho {side} >> '{}'\n",
                res.display(),
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bins.push(bin);
    }
    let out = dir.path().join("ab");
    let o = run(&[
        "ab",
        "--a",
        bins[0].to_str().unwrap(),
        "--b",
        bins[1].to_str().unwrap(),
        "--runs",
        "5",
        "--out",
        out.to_str().unwrap(),
        "--fail-on-regression",
        "--",
        "run",
        "gc-2pc",
        "--quick",
    ]);
    let order = std::fs::read_to_string(&log).unwrap().replace('\n', "");
    assert_eq!(order, "ABBAABBAAB");
    assert!(out.join("a/run-05/results.jsonl").is_file());
    assert!(out.join("b/run-05/results.jsonl").is_file());
    // Identical runs per side, 30% apart: between five runs, a regression.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("SLOWER") && text.contains("5 run(s) of A"),
        "{text}"
    );
    // `--out` is ab's to choose.
    let o = run(&[
        "ab",
        "--a",
        bins[0].to_str().unwrap(),
        "--b",
        bins[1].to_str().unwrap(),
        "--",
        "run",
        "crypto",
        "--out",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_failed_check_of_the_run_exits_3_after_writing_everything() {
    let dir = tempfile::tempdir().unwrap();
    let go = |verdict: &str, out: &str, strict: bool| {
        let out = dir.path().join(out);
        let mut args = vec!["run", "crypto", "--quick", "--quiet", "--out"];
        args.push(out.to_str().unwrap());
        if strict {
            args.push("--strict");
        }
        let o = ccbench()
            .env("CCBENCH_TEST_CHECK", verdict)
            .args(&args)
            .output()
            .unwrap();
        (o, out)
    };
    let (o, out) = go("fail", "fail", false);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Checks of this run's data:"), "{text}");
    assert!(
        text.contains("  FAIL  run/host: injected by CCBENCH_TEST_CHECK"),
        "{text}"
    );
    for f in ["results.jsonl", "report.md", "report.html", "plots"] {
        assert!(out.join(f).exists(), "{f} written before the exit");
    }
    // A warn passes, unless --strict.
    let (o, _) = go("warn", "warn", false);
    assert!(o.status.success(), "{}", stderr(&o));
    let (o, _) = go("warn", "strict", true);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // A finding about published figures never fails the run, even under --strict.
    let (o, _) = go("published-fail", "published", true);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("Findings about the published figures (not failures of this run)")
    );
}

// ---------------------------------------------------------------------------------------
// ed25519-sign: the signature circuit, by hand.

fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A key `seed || A`, an evaluator share (the mask), the garbler's share and a message.
fn sign_inputs() -> ([u8; 64], Vec<u8>, Vec<u8>, Vec<u8>) {
    let seed: [u8; 32] = core::array::from_fn(|i| i as u8 * 3 + 1);
    let mut key = [0u8; 64];
    key[..32].copy_from_slice(&seed);
    key[32..].copy_from_slice(&garble::ed25519::public_key(&seed));
    let mask: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(101) ^ 0x3c).collect();
    let gshare: Vec<u8> = key.iter().zip(&mask).map(|(k, m)| k ^ m).collect();
    let msg: Vec<u8> = (0..64u8).collect();
    (key, mask, gshare, msg)
}

#[test]
fn gc_ed25519_stats_print_the_and_count() {
    let o = run(&["gc", "circuit", "stats", "ed25519-sign"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let and: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("AND"))
        .and_then(|v| v.trim().parse().ok())
        .expect("an AND line");
    assert!(and > 10_000_000 && and <= 40_000_000, "{out}");
    assert!(out.contains("AND depth"), "{out}");
}

/// The reveal circuit: at most 8.5 M AND, its reveal printed; it has no Bristol form.
#[test]
fn gc_ed25519_reveal_stats_and_no_bristol_file() {
    let o = run(&["gc", "circuit", "stats", "ed25519-sign-reveal"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let and: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("AND"))
        .and_then(|v| v.trim().parse().ok())
        .expect("an AND line");
    assert!(and > 5_000_000 && and <= 8_500_000, "{out}");
    assert!(out.contains("reveal             768 bits"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.txt");
    let o = run(&[
        "gc",
        "circuit",
        "build",
        "ed25519-sign-reveal",
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("Bristol"), "{}", stderr(&o));
    assert!(!f.exists());
}

/// Two processes sign with the reveal circuit, each drawing its own blinding share, under
/// either garbling scheme (the generated circuit is garbled as it is generated with
/// three-halves too).
#[test]
fn gc_ed25519_reveal_two_processes_print_the_same_verifying_signature() {
    let (key, mask, gshare, msg) = sign_inputs();
    let want = hexs(&garble::ed25519::reference_sign(&key, &msg));
    for scheme in ["half-gates", "three-halves"] {
        let garbler_input = format!("{}{}", hexs(&gshare), hexs(&msg));
        let (e, g) = two_party_stdin(
            &[
                "--circuit",
                "ed25519-sign-reveal",
                "--input",
                &garbler_input,
                "--scheme",
                scheme,
            ],
            &[
                "--circuit",
                "ed25519-sign-reveal",
                "--input",
                "-",
                "--message",
                &hexs(&msg),
                "--scheme",
                scheme,
            ],
            Some(&hexs(&mask)),
        );
        assert!(g.status.success(), "{scheme}: {}", stderr(&g));
        assert!(e.status.success(), "{scheme}: {}", stderr(&e));
        assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), want, "{scheme}");
        assert_eq!(String::from_utf8_lossy(&e.stdout).trim(), want, "{scheme}");
        assert!(stderr(&e).contains("signature verifies"), "{}", stderr(&e));
    }
}

#[test]
fn gc_ed25519_two_processes_print_the_same_verifying_signature() {
    let (key, mask, gshare, msg) = sign_inputs();
    // As the docs show it: the garbler's share from a file, the evaluator's on stdin.
    let dir = tempfile::tempdir().unwrap();
    let gfile = dir.path().join("garbler.hex");
    std::fs::write(&gfile, format!("{}{}\n", hexs(&gshare), hexs(&msg))).unwrap();
    let (e, g) = two_party_stdin(
        &[
            "--circuit",
            "ed25519-sign",
            "--input-file",
            gfile.to_str().unwrap(),
        ],
        &[
            "--circuit",
            "ed25519-sign",
            "--input",
            "-",
            "--message",
            &hexs(&msg),
        ],
        Some(&hexs(&mask)),
    );
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(e.status.success(), "{}", stderr(&e));
    assert!(!stderr(&g).contains("warning"), "{}", stderr(&g));
    assert!(!stderr(&e).contains("warning"), "{}", stderr(&e));
    let want = hexs(&garble::ed25519::reference_sign(&key, &msg));
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), want);
    assert_eq!(String::from_utf8_lossy(&e.stdout).trim(), want);
    assert!(stderr(&e).contains("signature verifies"), "{}", stderr(&e));
}

#[test]
fn gc_ed25519_bad_input_and_bad_peers_fail_cleanly() {
    let (_, mask, gshare, msg) = sign_inputs();
    // A share that is not 64 bytes; a garbler input without its message.
    let o = run(&[
        "gc",
        "evaluate",
        "--circuit",
        "ed25519-sign",
        "--input",
        &hexs(&mask[..63]),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("key share"), "{}", stderr(&o));
    let o = run(&[
        "gc",
        "garble",
        "--circuit",
        "ed25519-sign",
        "--input",
        &hexs(&gshare),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("64-byte message"), "{}", stderr(&o));

    // A peer with a different circuit (a 3-byte message): both refuse at Init.
    let start = Instant::now();
    let (e, g) = two_party(
        &[
            "--circuit",
            "ed25519-sign",
            "--input",
            &format!("{}{}", hexs(&gshare), hexs(&msg)),
            "--timeout",
            "20",
        ],
        &[
            "--circuit",
            "ed25519-sign:3",
            "--input",
            &hexs(&mask),
            "--timeout",
            "20",
        ],
    );
    assert_eq!(g.status.code(), Some(1), "{}", stderr(&g));
    assert_eq!(e.status.code(), Some(1), "{}", stderr(&e));
    assert!(stderr(&g).contains("different circuit"), "{}", stderr(&g));
    assert!(stderr(&e).contains("different circuit"), "{}", stderr(&e));
    assert!(start.elapsed() < Duration::from_secs(20));

    // A "garbler" that answers with garbage: the evaluator reports it and exits 1.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let fake = std::thread::spawn(move || {
        use std::io::Write;
        let (mut s, _) = listener.accept().unwrap();
        let _ = s.write_all(&[0xa5; 4096]);
        std::thread::sleep(Duration::from_millis(500));
    });
    let e = run(&[
        "gc",
        "evaluate",
        "--circuit",
        "ed25519-sign",
        "--input",
        &hexs(&mask),
        "--connect",
        &addr,
        "--timeout",
        "10",
    ]);
    fake.join().unwrap();
    assert_eq!(e.status.code(), Some(1), "{}", stderr(&e));
    assert!(stderr(&e).contains("not a ccbench"), "{}", stderr(&e));

    // An evaluator whose connection breaks mid-stream (a proxy cuts it once
    // 8 MiB of the 515 MiB of tables have passed, however fast the session
    // runs): the garbler fails promptly.
    let addr = format!("127.0.0.1:{}", free_port());
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let paddr = proxy.local_addr().unwrap().to_string();
    let cut = cut_after(proxy, addr.clone(), 8 << 20);
    let start = Instant::now();
    let garbler = ccbench()
        .args([
            "gc",
            "garble",
            "--circuit",
            "ed25519-sign",
            "--input",
            &format!("{}{}", hexs(&gshare), hexs(&msg)),
            "--listen",
            &addr,
            "--timeout",
            "20",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ev = ccbench()
        .args([
            "gc",
            "evaluate",
            "--circuit",
            "ed25519-sign",
            "--input",
            &hexs(&mask),
            "--connect",
            &paddr,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let g = garbler.wait_with_output().unwrap();
    assert!(
        cut.join().unwrap(),
        "the session ended before the proxy cut it"
    );
    let _ = ev.kill();
    let _ = ev.wait();
    assert_eq!(g.status.code(), Some(1), "{}", stderr(&g));
    assert!(stderr(&g).contains("session failed"), "{}", stderr(&g));
    assert!(start.elapsed() < Duration::from_secs(20));
}

/// A TCP proxy for one connection: accepts it on `listener`, connects to
/// `upstream` (retrying while it is not listening yet), forwards both ways,
/// and closes both sides once `limit` bytes have come from upstream.
/// Returns whether it cut the connection (rather than seeing it end first).
fn cut_after(
    listener: std::net::TcpListener,
    upstream: String,
    limit: usize,
) -> std::thread::JoinHandle<bool> {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};
    std::thread::spawn(move || {
        let (mut down, _) = listener.accept().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut up = loop {
            match TcpStream::connect(&upstream) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("proxy: cannot reach {upstream}: {e}"),
            }
        };
        let (mut d2, mut u2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut d2, &mut u2);
        });
        let (mut buf, mut passed) = (vec![0u8; 1 << 16], 0usize);
        while passed < limit {
            match up.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    if down.write_all(&buf[..n]).is_err() {
                        return false;
                    }
                    passed += n;
                }
            }
        }
        let _ = up.shutdown(Shutdown::Both);
        let _ = down.shutdown(Shutdown::Both);
        true
    })
}

#[test]
fn run_ed25519_2pc_quick_writes_stages_gates_published_figures_and_checks() {
    let (_dir, out, _) = run_quick("ed25519-2pc", &[]);
    let kinds = validate_file(&out.join("results.jsonl"));
    assert!(kinds.iter().any(|k| k == "stages"), "{kinds:?}");
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    for needle in [
        "Compile",
        "gates-ed25519-sign",
        "published-vs-ours",
        "peak_rss_evaluator_bytes",
        "bytes_on_wire",
        "signature-matches-plain",
        "wire-bytes",
        // Each party's preparation outside the signatures, and the lookups priced apart.
        "prepare-ed25519-sign",
        "lookup in a public table",
        // The default circuit reveals R blinded.
        "ed25519-sign-reveal/msg64",
        // Without --hash, the signature under both hashes in pairs, and their ratio judged.
        "hashes-ed25519-sign",
        "hash-cost",
    ] {
        assert!(text.contains(needle), "{needle} missing");
    }
    // Both parties' stage tables, each stage with its CPU time.
    for party in ["garbler", "evaluator"] {
        let line = text
            .lines()
            .find(|l| l.contains("\"kind\":\"stages\"") && l.contains(&format!("({party})")))
            .unwrap_or_else(|| panic!("no stage table of the {party}"));
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let st = r["stages"].as_array().unwrap();
        assert_eq!(st.len(), 6, "{line}");
        assert!(st.iter().all(|s| s["cpu_ns"].as_f64().is_some()), "{line}");
    }
    // Every check of this run passes or warns (time and memory depend on the machine).
    assert!(!text.contains("\"verdict\":\"fail\""), "{text}");
    // The signature and the wire bytes are checked against this run's data: they pass.
    for check in ["signature-matches-plain", "wire-bytes"] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("\"name\":\"{check}\"")))
            .unwrap_or_else(|| panic!("{check} missing"));
        assert!(line.contains("\"verdict\":\"pass\""), "{line}");
    }
    // The plain signature against the 2PC one, on the report's first page.
    assert!(kinds.iter().any(|k| k == "cost"), "{kinds:?}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let costs = report
        .split("What confidentiality costs")
        .nth(1)
        .expect("the cost summary");
    let row = costs
        .lines()
        .find(|l| l.contains("ed25519-2pc"))
        .expect("an ed25519-2pc row in the cost summary");
    assert!(row.contains("Ed25519 signature"), "{row}");
}

/// The library circuit `name` as a Bristol file in `dir`, written by `ccbench gc circuit
/// build`.
fn built_circuit(dir: &Path, name: &str) -> PathBuf {
    let file = dir.join(format!("{name}.txt"));
    let o = run(&["gc", "circuit", "build", name, "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    file
}

/// `ccbench run gc-2pc --circuit FILE`: the whole method on a circuit of the user's, from a
/// Bristol file written by `gc circuit build`: stages, the per-gate table, throughput and a
/// cost row for it, its 2PC output checked against evaluation in the clear.
#[test]
fn run_gc_2pc_on_a_users_circuit_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = built_circuit(dir.path(), "mul32");
    let spec = file.to_str().unwrap();
    let (_keep, out, _) = run_quick("gc-2pc", &["--circuit", spec]);
    let kinds = validate_file(&out.join("results.jsonl"));
    assert!(kinds.iter().any(|k| k == "stages"), "{kinds:?}");
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let recs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of_circuit = |kind: &str| {
        recs.iter()
            .filter(|r| r["kind"] == kind && r["params"]["circuit"] == spec)
            .count()
    };
    assert_eq!(
        of_circuit("stages"),
        3,
        "single-shot (both parties) and bulk stage tables"
    );
    // CPU per stage in the single-shot tables (both parties), not in the bulk one.
    let stages_of = |name: &str| {
        recs.iter()
            .find(|r| r["kind"] == "stages" && r["params"]["circuit"] == spec && r["name"] == name)
            .unwrap_or_else(|| panic!("no stage table {name:?}"))["stages"]
            .as_array()
            .unwrap()
            .clone()
    };
    for name in [format!("2pc {spec}"), format!("2pc {spec}, evaluator")] {
        let st = stages_of(&name);
        assert_eq!(st.len(), 6, "{name}");
        assert!(
            st.iter().all(|s| s["cpu_ns"].as_f64().is_some()),
            "{name}: {st:?}"
        );
    }
    let bulk = recs
        .iter()
        .find(|r| {
            r["kind"] == "stages"
                && r["params"]["circuit"] == spec
                && r["name"]
                    .as_str()
                    .unwrap()
                    .contains("evaluations per session")
        })
        .expect("the bulk stage table");
    assert!(
        bulk["stages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s.get("cpu_ns").is_none())
    );
    assert!(of_circuit("table") >= 1, "the per-gate table");
    // The single-shot sessions, and as many compiled before the session, alternated.
    let samples = |name: &str| {
        recs.iter()
            .find(|r| {
                r["kind"] == "measurement" && r["name"] == name && r["params"]["circuit"] == spec
            })
            .unwrap_or_else(|| panic!("no {name} record"))["samples_ns"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(samples("session-compiled-ahead"), samples("session"));
    assert!(
        recs.iter()
            .any(|r| r["kind"] == "table" && r["name"] == "throughput" && r["rows"][0][0] == spec),
        "the throughput table's row"
    );
    // Only the given circuit: none of the built-in three.
    assert!(!text.contains("\"aes128\""));
    let cost = recs
        .iter()
        .find(|r| r["kind"] == "cost")
        .expect("a cost row");
    assert!(cost["name"].as_str().unwrap().contains(spec));
    let labels: Vec<&str> = cost["protected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels.len(), 3, "{labels:?}");
    assert!(labels[1].contains("compiled before"), "{labels:?}");
    let check = recs
        .iter()
        .find(|r| r["kind"] == "check" && r["name"] == "wire-bytes-per-and")
        .unwrap();
    assert_eq!(check["verdict"], "pass");
    assert!(
        check["message"]
            .as_str()
            .unwrap()
            .contains("matched plain evaluation")
    );
}

/// Over a link, the `stage-predictions` check counts what the stage records say: the
/// stages with a prediction in the single-shot and bulk tables, and those whose measured time
/// came within 15% of it, recounted here from the records. Over loopback there is no such
/// check (nothing is predicted).
#[test]
fn run_gc_2pc_over_a_link_checks_its_stage_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let file = built_circuit(dir.path(), "mul32");
    let spec = file.to_str().unwrap();
    let net = ["--net", "rate=200mbit,rtt=2ms", "--link-emulator", "user"];
    let (_keep, out, _) = run_quick("gc-2pc", &[&["--circuit", spec][..], &net].concat());
    validate_file(&out.join("results.jsonl"));
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let recs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (mut n, mut within, mut tables) = (0, 0, 0);
    for r in recs
        .iter()
        .filter(|r| r["kind"] == "stages" && r["params"]["net"] == "custom")
    {
        let mut any = false;
        for s in r["stages"].as_array().unwrap() {
            let Some(p) = s["predicted_ns"].as_f64() else {
                continue;
            };
            any = true;
            n += 1;
            let ratio = s["time_ns"].as_f64().unwrap() / p;
            if (ratio - 1.0).abs() <= 0.15 + 1e-9 {
                within += 1;
            }
        }
        tables += usize::from(any);
    }
    assert_eq!(
        tables, 2,
        "the single-shot and the bulk tables carry predictions"
    );
    let checks: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["kind"] == "check" && r["name"] == "stage-predictions")
        .collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    let msg = checks[0]["message"].as_str().unwrap();
    if within == n {
        assert_eq!(checks[0]["verdict"], "pass", "{msg}");
        assert!(
            msg.starts_with(&format!("all {n} predicted stages")),
            "{msg}"
        );
    } else {
        assert_eq!(checks[0]["verdict"], "warn", "{msg}");
        assert!(
            msg.starts_with(&format!("{within} of {n} predicted stages")),
            "{msg}"
        );
    }
    // Over loopback: no prediction, no check.
    let (_keep, out, _) = run_quick("gc-2pc", &["--circuit", spec]);
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert!(!text.contains("stage-predictions"));
}

#[test]
fn run_gc_2pc_refuses_bad_circuits_and_inputs_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "2 5\n1 2\n1 1\n\n2 1 0 1 4 AND\n2 1 9 9 3 XOR\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--circuit", bad.to_str().unwrap()], "bad.txt"),
        (vec!["--circuit", "/no/such/file.txt"], "/no/such/file.txt"),
        (
            vec!["--circuit", "mul32", "--garbler-input", "0011"],
            "4 bytes",
        ),
        (
            vec!["--circuit", "mul32", "--evaluator-input", "zz"],
            "--evaluator-input",
        ),
    ];
    for (extra, says) in cases {
        let mut args = vec!["run", "gc-2pc", "--quick", "--quiet", "--out"];
        let out = dir.path().join("never");
        args.push(out.to_str().unwrap());
        args.extend(extra.iter().copied());
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{extra:?}: {}", stderr(&o));
        assert!(!out.exists(), "{extra:?} made the output folder");
    }
    let o = run(&["run", "crypto", "--quick", "--circuit", "mul32"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("gc-2pc"), "{}", stderr(&o));
}

/// `ccbench gc garble|evaluate --out DIR` writes each party's records and report.
#[test]
fn gc_parties_write_results_and_a_report_with_out() {
    let dir = tempfile::tempdir().unwrap();
    let (g_out, e_out) = (dir.path().join("g"), dir.path().join("e"));
    let (e, g) = two_party(
        &[
            "--circuit",
            "mul32",
            "--input",
            "01000000",
            "--out",
            g_out.to_str().unwrap(),
        ],
        &[
            "--circuit",
            "mul32",
            "--input",
            "03000000",
            "--out",
            e_out.to_str().unwrap(),
        ],
    );
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(e.status.success(), "{}", stderr(&e));
    for out in [&g_out, &e_out] {
        let kinds = validate_file(&out.join("results.jsonl"));
        assert_eq!(kinds, ["env", "stages"]);
        assert!(out.join("report.html").is_file() && out.join("report.md").is_file());
    }
}

/// Every run goes into the history (unless --no-history); `history` lists, shows, tags,
/// follows one measurement over runs, compares two runs, lists machines and imports old
/// results files; a history that cannot be written costs the run nothing.
#[test]
fn runs_are_kept_in_the_history_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let h = db.to_str().unwrap();
    let mut outs = Vec::new();
    for i in 0..2 {
        let out = dir.path().join(format!("run{i}"));
        let o = run(&[
            "run",
            "sealing",
            "--quick",
            "--quiet",
            "--history",
            h,
            "--machine-name",
            "dev",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains(&format!("history: run {} recorded", i + 1)));
        outs.push(out);
    }
    let o = run(&[
        "run",
        "sealing",
        "--quick",
        "--quiet",
        "--history",
        h,
        "--no-history",
        "--out",
        dir.path().join("skipped").to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let list = run(&["history", "--history", h, "list"]);
    let text = String::from_utf8_lossy(&list.stdout).into_owned();
    assert_eq!(text.lines().count(), 3, "a header and two runs:\n{text}");
    assert!(text.contains("dev") && text.contains("complete") && text.contains("sealing"));
    // The database may also be named after the subcommand.
    let after = run(&["history", "list", "--history", h]);
    assert!(after.status.success(), "{}", stderr(&after));
    assert_eq!(String::from_utf8_lossy(&after.stdout), text);

    let o = run(&["history", "--history", h, "tag", "1", "baseline"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["history", "--history", h, "show", "baseline"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("sealing"));
    let o = run(&[
        "history",
        "--history",
        h,
        "trend",
        "sealing/seal@native",
        "size_bytes=4096",
    ]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        text.contains("2 run(s)") && text.contains("no change point"),
        "{text}"
    );
    let o = run(&["history", "--history", h, "trend", "sealing/seal"]);
    assert!(
        !o.status.success(),
        "an ambiguous measurement must be refused"
    );
    // The trend drawn into a file, and the history page of every measurement.
    let svg = dir.path().join("trend.svg");
    let o = run(&[
        "history",
        "--history",
        h,
        "trend",
        "sealing/seal@native",
        "size_bytes=4096",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let o = run(&[
        "history",
        "--history",
        h,
        "trend",
        "sealing/seal@native",
        "size_bytes=4096",
        "--plot",
        dir.path().join("trend.gif").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let page = dir.path().join("page");
    let o = run(&[
        "history",
        "--history",
        h,
        "report",
        "--plot-all",
        "--out",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(page.join("report.html")).unwrap();
    assert!(
        html.contains("sealing/seal@native") && html.contains("2 run(s)"),
        "{html}"
    );
    assert!(
        html.contains("No measurement changed"),
        "two runs cannot show a step"
    );
    assert!(html.contains("<svg"), "--plot-all draws the two-run trends");
    let o = run(&["history", "--history", h, "compare", "baseline", "last"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["history", "--history", h, "machines"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("dev"));

    // Import: the two results files again, as runs 3 and 4.
    let o = run(&[
        "history",
        "--history",
        h,
        "import",
        outs[0].to_str().unwrap(),
        outs[1].to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("-> run 4"));
    let o = run(&["history", "--history", h, "show", "nope"]);
    assert!(
        !o.status.success() && stderr(&o).contains("h.sqlite"),
        "{}",
        stderr(&o)
    );

    // A history that is not a database: the run still writes everything and exits 0.
    let bad = dir.path().join("not-a-db.sqlite");
    std::fs::write(&bad, vec![0x5a; 4096]).unwrap();
    let out = dir.path().join("run-bad");
    let o = run(&[
        "run",
        "crypto",
        "--quick",
        "--quiet",
        "--history",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not recorded in the history"),
        "{}",
        stderr(&o)
    );
    assert!(out.join("report.html").is_file());
}

/// A PostgreSQL history that cannot be reached (nothing listens on the port): the run still
/// writes its results and report, says once that history was not recorded and why (naming
/// the server, never the password), and exits 0; `history` commands fail naming the server.
/// `CCBENCH_HISTORY` selects the server as `--history` does.
#[test]
fn an_unreachable_postgres_history_costs_the_run_nothing() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("postgres://ccbench:pw-s3cret@127.0.0.1:{port}/history");
    let shown = format!("postgres://ccbench@127.0.0.1:{port}/history");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = run(&[
        "run",
        "crypto",
        "--quick",
        "--quiet",
        "--history",
        &url,
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.matches("not recorded in the history").count(),
        1,
        "{err}"
    );
    assert!(err.contains(&shown) && !err.contains("s3cret"), "{err}");
    assert!(out.join("results.jsonl").is_file() && out.join("report.html").is_file());

    let o = ccbench()
        .env("CCBENCH_HISTORY", &url)
        .args(["history", "list"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains(&shown) && !err.contains("s3cret"), "{err}");
}

/// `--history postgres://...` against a real server this test starts (a throwaway cluster
/// from Debian's postgresql package; skipped loudly without it, failing under CI): runs are
/// recorded there, and the history commands read them back as from an SQLite file.
#[test]
fn runs_are_kept_in_a_postgres_history() {
    let Some(server) = history::test_server::Server::start("runs_are_kept_in_a_postgres_history")
    else {
        return;
    };
    let url = server.database("cli");
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        let out = dir.path().join(format!("run{i}"));
        let o = run(&[
            "run",
            "sealing",
            "--quick",
            "--quiet",
            "--history",
            &url,
            "--machine-name",
            "fleet-1",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("history: run {} recorded in {url}", i + 1)),
            "{}",
            stderr(&o)
        );
    }
    let list = ccbench()
        .env("CCBENCH_HISTORY", &url)
        .args(["history", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout).into_owned();
    assert_eq!(text.lines().count(), 3, "a header and two runs:\n{text}");
    assert!(
        text.contains("fleet-1") && text.contains("sealing"),
        "{text}"
    );
    let o = run(&["history", "--history", &url, "tag", "1", "baseline"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["history", "--history", &url, "compare", "baseline", "last"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["history", "--history", &url, "show", "nope"]);
    assert!(
        !o.status.success() && stderr(&o).contains(&url),
        "{}",
        stderr(&o)
    );
}

/// A `--net` value that is no profile is a usage error naming the bad part, for `run` and
/// for `gc`, before anything runs.
#[test]
fn bad_link_profiles_are_usage_errors_naming_the_bad_part() {
    for (args, part) in [
        (vec!["run", "gc-2pc", "--quick", "--net", "lan2"], "lan2"),
        (
            vec!["run", "ed25519-2pc", "--net", "rate=1mbit,rtt=20"],
            "rtt=20",
        ),
        (
            vec![
                "gc",
                "evaluate",
                "--circuit",
                "aes128",
                "--input",
                "00",
                "--net",
                "rate=fast,rtt=1ms",
            ],
            "rate=fast",
        ),
        (
            vec![
                "gc",
                "garble",
                "--circuit",
                "aes128",
                "--input",
                "00",
                "--net",
                "rate=1gbit",
            ],
            "rtt",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(part), "{args:?}: {}", stderr(&o));
    }
}

/// `--link-emulator kernel` where the kernel link cannot be set up (here: no `ip` or `tc`
/// on the PATH) is a usage error with the reason, before anything runs; an unknown
/// emulator too.
#[test]
fn a_kernel_link_that_cannot_be_set_up_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = ccbench()
        .args(["run", "gc-2pc", "--quick", "--net", "lan"])
        .args(["--link-emulator", "kernel", "--no-history", "--out"])
        .arg(dir.path().join("out"))
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--link-emulator kernel: the kernel link is not available"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("out/results.jsonl").exists());
    let o = run(&["run", "gc-2pc", "--net", "lan", "--link-emulator", "tc"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("auto, kernel or user"),
        "{}",
        stderr(&o)
    );
}

/// `ccbench gc` over an emulated link: the right output on both sides, and each party's
/// record names the link, counts its round trips (3 for the garbler, 2 for the evaluator)
/// and took at least that many round-trip times.
#[test]
fn gc_parties_over_a_link_profile() {
    let dir = tempfile::tempdir().unwrap();
    let (gout, eout) = (dir.path().join("g"), dir.path().join("e"));
    let net = ["--net", "rate=200mbit,rtt=40ms"];
    let mut g_args = vec![
        "--circuit",
        "aes128",
        "--input",
        "000102030405060708090a0b0c0d0e0f",
    ];
    g_args.extend(net);
    g_args.extend(["--out", gout.to_str().unwrap()]);
    let mut e_args = vec![
        "--circuit",
        "aes128",
        "--input",
        "00112233445566778899aabbccddeeff",
    ];
    e_args.extend(net);
    e_args.extend(["--out", eout.to_str().unwrap()]);
    let (e, g) = two_party(&g_args, &e_args);
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(e.status.success(), "{}", stderr(&e));
    let fips = "69c4e0d86a7b0430d8cdb78070b4c55a";
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), fips);
    assert_eq!(String::from_utf8_lossy(&e.stdout).trim(), fips);
    for (out, rounds) in [(&gout, 3u64), (&eout, 2)] {
        let file = out.join("results.jsonl");
        validate_file(&file);
        let text = std::fs::read_to_string(&file).unwrap();
        let rec: serde_json::Value = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["kind"] == "stages")
            .unwrap();
        let p = &rec["params"];
        assert_eq!(p["net"], "custom", "{rec}");
        assert_eq!(p["rate_bits_per_s"], 200_000_000u64, "{rec}");
        assert_eq!(p["rtt_ms"], 40.0, "{rec}");
        assert_eq!(p["link_emulator"], "userspace", "{rec}");
        let stages = rec["stages"].as_array().unwrap();
        let got: u64 = stages
            .iter()
            .map(|s| s["round_trips"].as_u64().unwrap())
            .sum();
        assert_eq!(got, rounds, "{rec}");
        assert!(
            rec["total_ns"].as_f64().unwrap() >= rounds as f64 * 40e6,
            "{rec}"
        );
    }
}
