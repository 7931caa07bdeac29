//! The `x509` scenario behind the sandbox boundary: valid chains verify and tampered ones
//! (a flipped signature bit, an expired leaf, a wrong root) are rejected on both allocators;
//! a heap too small for a verification fails the ecall with `HeapExhausted` instead of
//! crashing the enclave; a short run emits schema-valid records with the tables and checks.
//!
//! The sandbox re-executes this test binary as the enclave, so it has its own `main`
//! (`harness = false`) and installs the enclave allocator, as `ccbench` does.

mod common;

use std::time::Duration;

use common::{run, run_tests};

use enclave::Backend;
use harness::RunOptions;
use harness::boundary::Config;
use measure::record::{Body, Record};
use scenarios::x509::{self, Allocator, Chain, KeyKind, LeafValidity, X509Config};

#[global_allocator]
static ALLOC: scenarios::EnclaveAlloc = scenarios::EnclaveAlloc;

fn sandbox(allocator: Allocator) -> X509Config {
    X509Config {
        config: Config::regular(Backend::Sandbox),
        allocator,
    }
}

fn verify(cfg: &X509Config, chain: &Chain) -> Result<(), String> {
    let e = x509::start(None, cfg, 1, chain).map_err(|e| e.to_string())?;
    x509::verify(&e).map_err(|e| e.to_string())
}

fn tampered_chains_are_rejected_in_the_sandbox() {
    for key in KeyKind::ALL {
        let good = Chain::generate(key, LeafValidity::Current).unwrap();
        let expired = Chain::generate(key, LeafValidity::Expired).unwrap();
        let other = Chain::generate(key, LeafValidity::Current).unwrap();
        let wrong_root = Chain {
            root: other.root,
            ..good.clone()
        };
        for cfg in [
            sandbox(Allocator::System),
            sandbox(Allocator::SingleLock(enclave::alloc::DEFAULT_HEAP)),
        ] {
            let what = format!("{} {}", key.name(), cfg.title());
            verify(&cfg, &good).unwrap_or_else(|e| panic!("{what}: {e}"));
            for (bad, why) in [
                (good.with_flipped_signature(), "did not verify"),
                (expired.clone(), "Expired"),
                (wrong_root.clone(), "did not verify"),
            ] {
                let err = verify(&cfg, &bad).expect_err(&what);
                assert!(err.contains(why), "{what}: {err}");
            }
        }
    }
}

fn heap_exhaustion_is_an_error_not_a_crash() {
    let chain = Chain::generate(KeyKind::Rsa2048, LeafValidity::Current).unwrap();
    let e = x509::start(None, &sandbox(Allocator::SingleLock(8192)), 1, &chain).unwrap();
    let err = x509::verify(&e).unwrap_err().to_string();
    assert!(err.contains("heap exhausted"), "{err}");
    assert!(err.contains("8192-byte heap"), "{err}");
    // The enclave survives and says what happened.
    let stats =
        x509::AllocReport::decode(&e.ecall(x509::Call::Stats.into(), &[]).unwrap()).unwrap();
    assert_eq!(stats.mode, enclave::alloc::Mode::SingleLock);
    assert!(stats.heap.over_budget > 0);
    assert!(stats.aws_lc_routed);
    assert!(!e.is_lost());
    // The default heap is large enough for the same chain.
    let e = x509::start(
        None,
        &sandbox(Allocator::SingleLock(enclave::alloc::DEFAULT_HEAP)),
        1,
        &chain,
    )
    .unwrap();
    x509::verify(&e).unwrap();
    let stats =
        x509::AllocReport::decode(&e.ecall(x509::Call::Stats.into(), &[]).unwrap()).unwrap();
    assert_eq!(stats.heap.over_budget, 0);
    assert!(
        stats.heap.c_allocs > 0 && stats.heap.rust_allocs > 0,
        "{stats:?}"
    );
}

fn short_run_emits_valid_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = RunOptions::quick(dir.path().to_path_buf());
    opts.threads = Some(vec![1, 2]);
    opts.duration = Some(Duration::from_millis(60));
    let records = run("x509", &opts);
    // 2 keys x 3 configurations x 2 thread counts, each a pass and a scaling point.
    let count = |kind: &str| records.iter().filter(|r| r.kind() == kind).count();
    assert_eq!(count("duration"), 12);
    assert_eq!(count("scaling"), 12);
    for r in records.iter().filter(|r| r.kind() == "duration") {
        let Body::Duration(d) = &r.body else {
            unreachable!()
        };
        assert!(d.ops_total > 0, "{r:?}");
        assert!(r.params.contains_key("chain") && r.params.contains_key("key"));
    }
    let tables: Vec<&str> = records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Table(t) => Some(t.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tables, ["chains", "published-vs-ours", "enclave-allocator"]);
    assert_eq!(count("check"), 6);
    // The chains were written, and a second run into the same folder reuses them.
    for key in KeyKind::ALL {
        assert!(x509::chain_dir(dir.path(), key).join("chain.pem").is_file());
    }
    let again = run("x509", &opts);
    let reused = again.iter().any(|r| match &r.body {
        Body::Table(t) if t.name == "chains" => t
            .rows
            .iter()
            .all(|row| row[4] == measure::record::Value::from("reused")),
        _ => false,
    });
    assert!(reused);
    let chain_of = |rs: &[Record]| {
        rs.iter()
            .find(|r| r.kind() == "duration")
            .map(|r| r.params["chain"].clone())
    };
    assert_eq!(chain_of(&records), chain_of(&again));
}

fn main() {
    scenarios::run_if_child(&scenarios::enclave_services());
    let tests: [(&str, fn()); 3] = [
        (
            "tampered_chains_are_rejected_in_the_sandbox",
            tampered_chains_are_rejected_in_the_sandbox,
        ),
        (
            "heap_exhaustion_is_an_error_not_a_crash",
            heap_exhaustion_is_an_error_not_a_crash,
        ),
        (
            "short_run_emits_valid_records",
            short_run_emits_valid_records,
        ),
    ];
    run_tests(&tests);
}
