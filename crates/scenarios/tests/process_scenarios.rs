//! Scenarios that start child processes: the enclave scenarios (`transitions`, `sealing`,
//! `dp-tree`) run end to end on every backend with a tiny sampler (or plan), every record
//! they emit validating against the schema; `gc-2pc`'s two-party sessions run between two
//! processes.
//!
//! The sandbox enclave and the 2PC evaluator re-execute this test binary, so it has its own
//! `main` (`harness = false`) that becomes the child when asked.

mod common;

use std::time::Duration;

use common::{options, run, run_tests};
use measure::record::{Body, Record, Value};
use scenarios::TransitionModel;

/// The enclave (this binary, re-executed) switches to the single-lock heap in `x509`.
#[global_allocator]
static ALLOC: scenarios::EnclaveAlloc = scenarios::EnclaveAlloc;

fn measurement<'a>(records: &'a [Record], backend: &str, name: &str) -> Vec<&'a Record> {
    records
        .iter()
        .filter(|r| r.backend == backend && r.name() == Some(name) && r.kind() == "measurement")
        .collect()
}

fn transitions_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let records = run("transitions", &options(dir.path()));
    let sizes = scenarios::transitions::payload_sizes(harness::Preset::Quick).len();
    for backend in ["native", "sandbox", "sandbox-switchless"] {
        let configs = if backend == "sandbox-switchless" {
            2
        } else {
            1
        };
        for name in ["ecall-empty", "ocall-empty", "ocall-read"] {
            assert_eq!(
                measurement(&records, backend, name).len(),
                configs,
                "{backend} {name}"
            );
        }
        for name in ["ecall-in", "ecall-out", "ecall-inout"] {
            assert_eq!(
                measurement(&records, backend, name).len(),
                configs * sizes,
                "{backend} {name}"
            );
        }
    }
    // Switchless runs name their worker count; each configuration has a trace table.
    let workers: Vec<&Value> = measurement(&records, "sandbox-switchless", "ecall-empty")
        .iter()
        .map(|r| &r.params["workers"])
        .collect();
    assert_eq!(workers, [&Value::Int(1), &Value::Int(2)]);
    let traces = records
        .iter()
        .filter(|r| matches!(&r.body, Body::Table(t) if t.name == "trace"))
        .count();
    assert_eq!(traces, 4);
    assert!(
        records
            .iter()
            .any(|r| matches!(&r.body, Body::Table(t) if t.name == "advice"))
    );
    assert!(
        records
            .iter()
            .any(|r| matches!(&r.body, Body::Histogram(_)))
    );
    // The switchless configurations served calls through their workers.
    let hits = records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Table(t) if t.name == "trace" && r.backend == "sandbox-switchless" => Some(t),
            _ => None,
        })
        .flat_map(|t| t.rows.iter().map(|row| row[6].as_f64().unwrap()))
        .sum::<f64>();
    assert!(hits > 0.0, "no switchless hits");
    // The published table sits beside ours: 3 rows, 3 + 4 columns.
    let Some(Body::Table(t)) = records
        .iter()
        .find(|r| matches!(&r.body, Body::Table(t) if t.name == "sgxbox-table-1"))
        .map(|r| &r.body)
    else {
        panic!("no SGXBox table")
    };
    assert_eq!((t.rows.len(), t.columns.len()), (3, 7));
    // Payloads carry a byte rate: in/out counts both directions.
    let inout = measurement(&records, "sandbox", "ecall-inout");
    let big = inout
        .iter()
        .find(|r| r.params["size_bytes"] == Value::Int(1 << 20))
        .unwrap();
    let Body::Measurement(m) = &big.body else {
        unreachable!()
    };
    assert_eq!(m.bytes_per_op, Some(2 << 20));
}

fn transition_model_is_named_in_every_enclave_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(dir.path());
    opts.transition_model = Some(TransitionModel::parse("hotcalls-ecall-warm").unwrap());
    let records = run("sealing", &opts);
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(
            r.params.get("transition_model"),
            Some(&Value::from("hotcalls-ecall-warm")),
            "{r:?}"
        );
    }
}

fn sealing_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let records = run("sealing", &options(dir.path()));
    let sizes = scenarios::sealing::sizes(harness::Preset::Quick).len();
    for backend in ["native", "sandbox"] {
        for name in ["seal", "unseal"] {
            let m = measurement(&records, backend, name);
            assert_eq!(m.len(), sizes, "{backend} {name}");
            assert!(m.iter().all(|r| r.params.contains_key("size_bytes")));
        }
    }
}

fn dp_tree_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(dir.path());
    opts.threads = Some(vec![1, 2]);
    opts.duration = Some(Duration::from_millis(1));
    let records = run("dp-tree", &opts);
    let plan = scenarios::dptree::plan(&opts);
    for backend in ["native", "sandbox", "sandbox-switchless"] {
        for &batch in &plan.batches {
            let of = |kind: &str| {
                records
                    .iter()
                    .filter(|r| {
                        r.backend == backend
                            && r.kind() == kind
                            && r.params.get("batch") == Some(&Value::from(batch))
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(of("calibration").len(), 1, "{backend} {batch}");
            // Weak and strong, two thread counts each.
            let points = of("scaling");
            assert_eq!(points.len(), 4, "{backend} {batch}");
            for r in points {
                let Body::Scaling(p) = &r.body else {
                    unreachable!()
                };
                assert!(p.ops_per_s > 0.0 && p.wall_samples_ns.len() == plan.runs);
            }
        }
    }
    let checks: Vec<&str> = records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Check(c) => Some(c.name.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        checks.contains(&"one-add-per-ecall-vs-original"),
        "{checks:?}"
    );
    assert!(checks.contains(&"batched-sandbox-within-2x-of-native"));
    assert_eq!(
        checks
            .iter()
            .filter(|c| **c == "calibration-within-2x")
            .count(),
        3 * plan.batches.len()
    );
    let Some(Body::Table(t)) = records
        .iter()
        .find(|r| matches!(&r.body, Body::Table(t) if t.name == "original-vs-ours"))
        .map(|r| &r.body)
    else {
        panic!("no comparison table")
    };
    assert_eq!(t.columns.len(), 2 + 3 * plan.batches.len());
    assert!(t.source.is_some());
    // The sandbox configurations show where the boundary cost went.
    let tables = |name: &str| {
        records
            .iter()
            .filter(|r| matches!(&r.body, Body::Table(t) if t.name == name))
            .map(|r| r.backend.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(tables("trace"), ["sandbox", "sandbox-switchless"]);
    assert_eq!(tables("advice"), ["sandbox"]);
}

/// `tls-middlebox` end to end with a small plan: every configuration and record size
/// measured and checked correct, and every table of the issue emitted.
fn tls_middlebox_on_every_backend() {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;

    use scenarios::tls_middlebox::{Plan, TlsMiddlebox};

    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path());
    let plan = Plan {
        flows: 3,
        sizes: vec![1024, 4096],
        bytes_per_pass: 96 << 10,
        min_records_per_flow: 1,
        runs: 2,
        round_target: None,
        plant_every: 4,
        workers: 1,
        timeout: Duration::from_secs(20),
        affinity_calls: 400,
        batch: scenarios::tls_middlebox::batch::BatchLimits::default(),
        share_pairs: 1,
    };
    let sink = common::Collect(Mutex::new(Vec::new()));
    let cancel = AtomicBool::new(false);
    let ctx = harness::Context::new(&opts, &sink, &harness::NoProgress, &cancel);
    TlsMiddlebox.run_plan(&ctx, &plan).unwrap();
    let records = sink.0.into_inner().unwrap();
    common::assert_valid(&records);
    let checks = |name: &str| {
        records
            .iter()
            .filter_map(|r| match &r.body {
                Body::Check(c) if c.name == name => Some(c),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let correctness = checks("correctness");
    assert_eq!(correctness.len(), 7 * plan.sizes.len());
    assert!(
        correctness
            .iter()
            .all(|c| c.verdict == measure::record::Verdict::Pass),
        "{correctness:?}"
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r.kind() == "measurement" && r.name() == Some("record"))
            .count(),
        7 * plan.sizes.len()
    );
    // The clients verified the enclave's (emulated) quote in every measured middlebox pass,
    // and every middlebox record says the attestation is emulated. A failing advisor check
    // is measured again (two more passes at its size) before it is reported, and the
    // batched-share checks measure pairs of native and batched passes at their sizes (of
    // this plan's, 1 KiB only).
    let again = records
        .iter()
        .filter(|r| match &r.body {
            Body::Check(c) => {
                c.name.starts_with("advisor-choice") && c.message.contains("measured again")
            }
            _ => false,
        })
        .count();
    let attested = checks("key-share-attestation");
    assert_eq!(attested.len(), 1);
    assert_eq!(
        attested[0].verdict,
        measure::record::Verdict::Pass,
        "{attested:?}"
    );
    assert!(
        attested[0].message.contains(&format!(
            "in {n} of {n} middlebox passes",
            n = 6 * plan.sizes.len() + 2 * again + 2 * plan.share_pairs
        )),
        "{attested:?}"
    );
    let shares = checks("batched-share-1024");
    assert_eq!(shares.len(), 1);
    assert!(
        shares[0]
            .message
            .contains("medians of the rounds of 2 passes of each"),
        "{shares:?}"
    );
    for r in records
        .iter()
        .filter(|r| r.kind() == "measurement" && r.name() == Some("record"))
    {
        let emulated = r.params.get("attestation") == Some(&Value::from("emulated"));
        assert_eq!(emulated, r.backend != "direct", "{:?}", r.params);
    }
    // The batched configuration ran at every size, its records carried in batches.
    let batched: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind() == "measurement" && r.name() == Some("record"))
        .filter(|r| r.params.get("config") == Some(&Value::from("batched")))
        .collect();
    assert_eq!(batched.len(), plan.sizes.len());
    for r in batched {
        assert_eq!(r.params.get("batched"), Some(&Value::from(true)));
        assert!(
            matches!(r.params.get("mean_batch_records"), Some(Value::Float(x)) if *x >= 1.0),
            "{:?}",
            r.params
        );
    }
    // The ring: batches through the switchless batch ecall, judged against batched ecalls.
    let ring: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind() == "measurement" && r.name() == Some("record"))
        .filter(|r| r.params.get("config") == Some(&Value::from("ring")))
        .collect();
    assert_eq!(ring.len(), plan.sizes.len());
    for r in ring {
        assert_eq!(r.params.get("batched"), Some(&Value::from(true)));
        assert_eq!(
            r.params.get("switchless_ecalls"),
            Some(&Value::from("reproduce_ssl_context_batch")),
            "{:?}",
            r.params
        );
        // Its request slots hold a whole batch.
        assert_eq!(
            r.params.get("switchless_slot_bytes"),
            Some(&Value::from(plan.batch.clamped().max_request_bytes())),
            "{:?}",
            r.params
        );
    }
    for size in &plan.sizes {
        assert_eq!(checks(&format!("batching-shape-{size}")).len(), 1, "{size}");
    }
    let tables: Vec<&str> = records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Table(t) => Some(t.name.as_str()),
            _ => None,
        })
        .collect();
    for t in [
        "throughput",
        "breakdown",
        "all-switchless",
        "ecall-profile",
        "advice",
        "trace",
        "core-affinity",
    ] {
        assert!(tables.contains(&t), "{t} missing from {tables:?}");
    }
    assert!(records.iter().any(|r| r.kind() == "cost"));
    assert!(records.iter().any(|r| r.kind() == "stages"));
    // The advisor's selection is judged against the best configuration at every size.
    for size in &plan.sizes {
        let c = checks(&format!("advisor-choice-{size}"));
        assert_eq!(c.len(), 1, "{size}");
        assert!(
            c[0].message.contains("against the best"),
            "{}",
            c[0].message
        );
    }
    // The advisor weighs a one-flow profile, and the cores the full run left spare.
    let profile = records
        .iter()
        .find(|r| matches!(&r.body, Body::Table(t) if t.name == "ecall-profile"))
        .unwrap();
    assert_eq!(profile.params["flows"], measure::record::Value::from(1));
    assert!(
        profile.params.contains_key("spare_cores"),
        "{:?}",
        profile.params
    );
}

fn aes_two_party_between_processes() {
    let c = garble::library::by_name("aes128").unwrap();
    // FIPS-197 appendix C.1: the garbler holds the key, the evaluator the plaintext.
    let key: Vec<u8> = (0u8..16).collect();
    let plain: Vec<u8> = (0u8..16).map(|i| i * 0x11).collect();
    let r = scenarios::gc2pc::two_party(
        "aes128",
        &c,
        &key,
        &plain,
        1,
        garble::hash::GcHash::default(),
    )
    .unwrap();
    assert_eq!(r.evaluations, 1);
    assert_eq!(r.and_gates(), c.stats().and_gates());
    assert!(r.stage(garble::session::Stage::Load).time > std::time::Duration::ZERO);
    // Compiled before the session on both sides (the evaluator process compiles before it
    // connects): the same output (checked inside) and bytes, no Load stage on either side.
    let prog = garble::program::Program::compile(&c);
    let gc = (
        garble::hash::GcHash::default(),
        garble::scheme::Scheme::default(),
    );
    let ahead = scenarios::gc2pc::two_party_compiled_ahead("aes128", &c, &prog, (&key, &plain), gc)
        .unwrap();
    assert_eq!(
        ahead.garbler.stage(garble::session::Stage::Load).time,
        std::time::Duration::ZERO
    );
    assert_eq!(ahead.garbler.compile, std::time::Duration::ZERO);
    assert_eq!(ahead.garbler.wire_bytes_sent, r.wire_bytes_sent);
    let load = ahead
        .evaluator_stages
        .iter()
        .find(|s| s.stage == garble::session::Stage::Load)
        .expect("the evaluator's Load stage");
    assert_eq!(load.time, std::time::Duration::ZERO);
    // Bulk: 3 evaluations in one session, 32 bytes per AND while garbling.
    let r = scenarios::gc2pc::two_party(
        "aes128",
        &c,
        &key,
        &plain,
        3,
        garble::hash::GcHash::default(),
    )
    .unwrap();
    let garble = r.stage(garble::session::Stage::Garble);
    assert_eq!(garble.bytes_sent, 32 * 3 * c.stats().and_gates());
    // What crossed the garbler's socket is what the protocol predicts.
    let (want, _) = garble::session::expected_wire_bytes(&c, 3);
    assert_eq!(r.wire_bytes_sent, want);
    // Over an emulated link (30 ms RTT), by each emulator this machine has (the kernel's
    // where the process may set it up: then the evaluator runs in its own network
    // namespace): the same outputs (checked inside), the garbler's three round trips, each
    // at least an RTT long.
    let profile: garble::link::Profile = "rate=100mbit,rtt=30ms".parse().unwrap();
    for choice in [garble::link::Choice::User, garble::link::Choice::Auto] {
        let net = garble::link::Net::open(profile.clone(), choice).unwrap();
        let both = scenarios::gc2pc::two_party_over(
            "aes128",
            &c,
            (&key, &plain),
            1,
            (
                garble::hash::GcHash::default(),
                garble::scheme::Scheme::default(),
            ),
            &net,
        )
        .unwrap();
        assert_eq!(both.garbler.round_trips, 3, "{net}");
        assert!(
            both.garbler.total >= 3 * profile.rtt,
            "{net}: {:?}",
            both.garbler.total
        );
    }
    // An evaluator that cannot run the circuit fails the session on both sides, quickly.
    let start = std::time::Instant::now();
    let err =
        scenarios::gc2pc::two_party("mul8", &c, &key, &plain, 1, garble::hash::GcHash::default())
            .unwrap_err();
    assert!(err.to_string().contains("evaluator"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
}

/// The environment and command line (NUL-separated, as text) of each child of this process
/// whose environment holds `marker`.
fn children_with(marker: &str) -> Vec<(String, String)> {
    let me = std::process::id().to_string();
    let read = |p: &std::path::Path| {
        std::fs::read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in dir.flatten() {
        let p = e.path();
        // `pid (comm) state ppid ...`
        let stat = read(&p.join("stat"));
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid != Some(me.as_str()) {
            continue;
        }
        let env = read(&p.join("environ"));
        if env.contains(marker) {
            found.push((env, read(&p.join("cmdline"))));
        }
    }
    found
}

/// Runs `session` on a thread and, while it runs, collects [`children_with`]`(marker)`.
fn watching_children<T: Send>(
    marker: &str,
    session: impl FnOnce() -> T + Send,
) -> (T, Vec<(String, String)>) {
    std::thread::scope(|s| {
        let h = s.spawn(session);
        let mut seen = Vec::new();
        while !h.is_finished() {
            seen.extend(children_with(marker));
            std::thread::sleep(Duration::from_millis(1));
        }
        (h.join().unwrap(), seen)
    })
}

/// The evaluator processes of `gc-2pc` and `ed25519-2pc` get their input (a key share, for
/// the signature) over a pipe: while they run, neither their environment (readable by every
/// process of the user in /proc/PID/environ) nor their command line holds it, only the
/// marker that makes them evaluators.
fn evaluator_inputs_stay_out_of_environment_and_command_line() {
    let c = garble::library::by_name("aes128").unwrap();
    let key: Vec<u8> = (0u8..16).collect();
    let mut secret = vec![0u8; 16];
    garble::hash::Prg::from_os().unwrap().bytes(&mut secret);
    let secret_hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let (r, seen) = watching_children("CCBENCH_GC_EVALUATOR=", || {
        scenarios::gc2pc::two_party(
            "aes128",
            &c,
            &key,
            &secret,
            300,
            garble::hash::GcHash::default(),
        )
    });
    r.unwrap();
    assert!(!seen.is_empty(), "the evaluator process was never seen");
    for (env, cmdline) in &seen {
        assert!(env.contains("CCBENCH_GC_EVALUATOR=stdin"), "{env}");
        assert!(!env.contains(&secret_hex) && !cmdline.contains(&secret_hex));
    }

    let inputs = scenarios::ed25519_2pc::SignInputs::new(0);
    let share_hex: String = inputs
        .evaluator_share
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let (r, seen) = watching_children("CCBENCH_ED25519_EVALUATOR=", || {
        scenarios::ed25519_2pc::two_party(
            &garble::ed25519::Ed25519Sign::PUBLISHED,
            &inputs,
            (
                garble::hash::GcHash::default(),
                garble::scheme::Scheme::default(),
            ),
        )
    });
    r.map(|_| ()).unwrap();
    assert!(!seen.is_empty(), "the evaluator process was never seen");
    for (env, cmdline) in &seen {
        assert!(env.contains("CCBENCH_ED25519_EVALUATOR=stdin"), "{env}");
        assert!(!env.contains(&share_hex) && !cmdline.contains(&share_hex));
    }
}

/// `ed25519-2pc`'s signature with three-halves between two processes (the scheme reaches
/// the evaluator process through its spec): both parties' signatures equal aws-lc's and
/// verify, both sides report the scheme, and the garbler's socket counters equal the
/// prediction under three-halves, 25 bytes per AND gate.
fn ed25519_three_halves_between_processes() {
    use garble::scheme::Scheme;
    let c = garble::ed25519::Ed25519Sign::REVEAL;
    let hash = garble::hash::GcHash::default();
    let signed = scenarios::ed25519_2pc::two_party(
        &c,
        &scenarios::ed25519_2pc::SignInputs::new(1),
        (hash, Scheme::ThreeHalves),
    )
    .unwrap();
    assert_eq!(signed.run.problems(), Vec::<String>::new());
    let r = &signed.report;
    assert_eq!((r.scheme, r.hash), (Scheme::ThreeHalves, hash));
    let gs = garble::generator::stats(&c);
    assert_eq!(r.table_bytes, 25 * gs.stats.and_gates());
    assert_eq!(
        (r.wire_bytes_sent, r.wire_bytes_received),
        garble::stream::expected_wire_bytes(&c, &gs, Scheme::ThreeHalves)
    );
}

fn main() {
    scenarios::run_if_child(&scenarios::enclave_services());
    let tests: [(&str, fn()); 8] = [
        (
            "evaluator_inputs_stay_out_of_environment_and_command_line",
            evaluator_inputs_stay_out_of_environment_and_command_line,
        ),
        (
            "ed25519_three_halves_between_processes",
            ed25519_three_halves_between_processes,
        ),
        ("dp_tree_on_every_backend", dp_tree_on_every_backend),
        (
            "tls_middlebox_on_every_backend",
            tls_middlebox_on_every_backend,
        ),
        (
            "aes_two_party_between_processes",
            aes_two_party_between_processes,
        ),
        ("transitions_on_every_backend", transitions_on_every_backend),
        ("sealing_on_both_backends", sealing_on_both_backends),
        (
            "transition_model_is_named_in_every_enclave_record",
            transition_model_is_named_in_every_enclave_record,
        ),
    ];
    run_tests(&tests);
}
