//! The `tx-pipeline` worker end to end on both backends: every configuration with the
//! counter and the extrinsic checked, the bad inputs (a payload that does not decrypt, a
//! tampered state file, a wasm hash mismatch, an overflowing update) each refused with a typed
//! fault, the state on disk unchanged and the next transaction fine; and the scenario itself
//! with a tiny sampler, every record validating against the schema.
//!
//! The sandbox enclave re-executes this test binary, so it has its own `main`
//! (`harness = false`) that becomes the enclave when asked.

mod common;

use std::path::Path;

use common::{options, run, run_tests};
use enclave::{Backend, Enclave};
use measure::record::{Body, CheckSubject, Value, Verdict};
use parity_scale_codec::Encode;
use scenarios::txpipeline::proto::{Payload, sha256};
use scenarios::txpipeline::worker::STATE_FILE;
use scenarios::txpipeline::{
    self, Client, ConfigId, SERVICE, TxError, TxFault, accounts, counter_module, load_module,
    setup, submit, worker_builder,
};

/// A worker with fresh RSA-2048 keys (fast to generate) and 4 accounts in `dir`.
fn worker(backend: Backend, dir: &Path) -> (Enclave, Client) {
    let b = worker_builder(
        Enclave::builder(SERVICE).backend(backend),
        Some(&dir.join("keys")),
    );
    let e = b.start(&scenarios::enclave_services()).unwrap();
    let accounts = accounts(4);
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let keys = setup(&e, run.to_str().unwrap(), 2048, &accounts, true).unwrap();
    let module = counter_module().unwrap();
    assert_eq!(load_module(&e, &module).unwrap(), sha256(&module));
    let client = Client::new(keys, module, accounts).unwrap();
    (e, client)
}

fn state(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("run").join(STATE_FILE)).unwrap()
}

fn fault(r: Result<txpipeline::Done, TxError>) -> TxFault {
    match r {
        Err(TxError::Fault(f)) => f,
        other => panic!("expected a typed fault, got {other:?}"),
    }
}

fn every_configuration_end_to_end(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (e, mut client) = worker(backend, dir.path());
    let accounts = accounts(4);
    for c in ConfigId::ALL {
        for _ in 0..2 {
            let before = state(dir.path());
            let done = client.transact(&e, c).unwrap();
            assert!(done.timed_ns > 0);
            // The worker reports the steps the configuration runs, inside the enclave.
            let ran: Vec<_> = done.steps.iter().map(|(s, _)| *s).collect();
            for s in c.steps().iter().filter(|s| s.in_enclave()) {
                assert!(ran.contains(s), "{c:?} did not report {s:?}");
            }
            // Only the configurations that update the state change the file.
            assert_eq!(
                state(dir.path()) != before,
                c.runs(scenarios::txpipeline::Step::StateWrite),
                "{c:?}"
            );
        }
    }
    // 5 updating configurations x 2 transactions, amounts 1..=7 round robin over 4 accounts
    // (the decrypt-only and sealed-read payloads advance the round robin too).
    let total: u64 = accounts.iter().map(|a| client.expected(a).unwrap()).sum();
    assert!(total >= 12, "{total}");

    // The host's verification catches a forged extrinsic and a wrong counter.
    let mut p = client.prepare(ConfigId::Full).unwrap();
    p.request.module_hash = client.module_hash();
    let ok = submit(&e, &p.request).unwrap();
    let mut forged = ok.clone();
    if let Some(x) = forged.extrinsic.as_mut() {
        // Signer (32 bytes), then the signature: flip a bit of the signature.
        x[40] ^= 1;
    }
    assert!(matches!(
        client.verify(&p, &forged),
        Err(TxError::Verify(_))
    ));
    let mut wrong = ok.clone();
    wrong.new_value = wrong.new_value.map(|v| v + 1);
    assert!(matches!(client.verify(&p, &wrong), Err(TxError::Verify(_))));
    client.verify(&p, &ok).unwrap();
    client.transact(&e, ConfigId::Full).unwrap();
}

fn bad_inputs_are_refused_and_leave_the_state(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (e, mut client) = worker(backend, dir.path());
    client.transact(&e, ConfigId::Full).unwrap();

    // A payload that does not decrypt (RSA and HPKE).
    for c in [ConfigId::Full, ConfigId::Hpke, ConfigId::DecryptOnly] {
        let before = state(dir.path());
        let mut p = client.prepare(c).unwrap();
        let n = p.request.payload.len();
        p.request.payload[n / 2] ^= 0x40;
        assert_eq!(
            fault(client.send(&e, p)),
            TxFault::PayloadDecryption,
            "{c:?}"
        );
        assert!(state(dir.path()) == before, "the state changed");
        client.transact(&e, c).unwrap();
    }

    // A tampered state file.
    let good = state(dir.path());
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let path = dir.path().join("run").join(STATE_FILE);
    std::fs::write(&path, &bad).unwrap();
    for c in [ConfigId::Full, ConfigId::StateUpdate] {
        let p = client.prepare(c).unwrap();
        assert_eq!(fault(client.send(&e, p)), TxFault::StateTampered, "{c:?}");
        assert!(
            state(dir.path()) == bad,
            "the worker wrote over a tampered state"
        );
    }
    std::fs::write(&path, &good).unwrap();
    client.transact(&e, ConfigId::Full).unwrap();

    // A payload expecting another module than the request names.
    let before = state(dir.path());
    let mut payload = client.next_payload();
    payload.wasm_hash = sha256(b"another module");
    let bytes = client.encrypt(ConfigId::Full, &payload.encode()).unwrap();
    let p = txpipeline::Prepared {
        request: client.request(ConfigId::Full, bytes),
        payload,
    };
    assert_eq!(fault(client.send(&e, p)), TxFault::WasmHashMismatch);
    assert!(state(dir.path()) == before, "the state changed");
    // ... and a request naming a module the worker never loaded.
    let mut req = client.request(
        ConfigId::Full,
        client.encrypt(ConfigId::Full, &payload.encode()).unwrap(),
    );
    req.module_hash = payload.wasm_hash;
    assert!(matches!(
        submit(&e, &req),
        Err(TxError::Fault(TxFault::UnknownModule))
    ));
    assert!(state(dir.path()) == before, "the state changed");
    client.transact(&e, ConfigId::Full).unwrap();

    // An update that overflows traps in the wasm module; the state is not written.
    let first = accounts(1)[0];
    assert!(client.expected(&first).unwrap() > 0);
    let before = state(dir.path());
    let payload = Payload {
        account: first,
        amount: u64::MAX,
        wasm_hash: client.module_hash(),
    };
    let bytes = client.encrypt(ConfigId::Full, &payload.encode()).unwrap();
    let p = txpipeline::Prepared {
        request: client.request(ConfigId::Full, bytes),
        payload,
    };
    assert!(matches!(fault(client.send(&e, p)), TxFault::Stf(_)));
    assert!(state(dir.path()) == before, "the state changed");
    let done = client.transact(&e, ConfigId::Full).unwrap();
    assert!(!done.steps.is_empty());
}

fn a_second_enclave_opens_the_sealed_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (native, mut client) = worker(Backend::Native, dir.path());
    client.transact(&native, ConfigId::Full).unwrap();
    let e = worker_builder(
        Enclave::builder(SERVICE).backend(Backend::Sandbox),
        Some(&dir.path().join("keys")),
    )
    .start(&scenarios::enclave_services())
    .unwrap();
    let run = dir.path().join("run");
    let keys = setup(&e, run.to_str().unwrap(), 0, &[], false).unwrap();
    assert_eq!(&keys, client.keys());
    load_module(&e, &counter_module().unwrap()).unwrap();
    client.transact(&e, ConfigId::Full).unwrap();
    client.transact(&e, ConfigId::Hpke).unwrap();
    // An enclave without sealing cannot open them.
    let unsealed = Enclave::builder(SERVICE)
        .backend(Backend::Native)
        .start(&scenarios::enclave_services())
        .unwrap();
    assert!(matches!(
        setup(&unsealed, run.to_str().unwrap(), 0, &[], false),
        Err(TxError::Fault(TxFault::NoSealing))
    ));
}

fn the_scenario_runs_and_its_records_validate() {
    let dir = tempfile::tempdir().unwrap();
    let records = run("tx-pipeline", &options(dir.path()));
    for backend in ["native", "sandbox"] {
        let t = txpipeline::throughputs(&records, backend);
        assert_eq!(t.len(), ConfigId::ALL.len(), "{backend}");
        assert!(t.values().all(|x| *x > 0.0));
        let a = txpipeline::alone_costs(&records, backend);
        assert_eq!(a.len(), txpipeline::Step::ALL.len(), "{backend}");
        let stages = records
            .iter()
            .filter(|r| r.backend == backend && matches!(r.body, Body::Stages(_)))
            .count();
        assert_eq!(stages, ConfigId::ALL.len());
        assert!(records.iter().any(|r| r.backend == backend
            && matches!(&r.body, Body::Check(c) if c.name == "consistency")));
    }
    let Some(Body::Table(t)) = records
        .iter()
        .find(|r| matches!(&r.body, Body::Table(t) if t.name == "ablation"))
        .map(|r| &r.body)
    else {
        panic!("no ablation table")
    };
    assert_eq!(t.rows.last().unwrap()[1], Value::Int(332));
    assert!(records.iter().any(|r| matches!(&r.body,
        Body::Check(c) if c.name == "consistency-of-the-published-table"
            && c.verdict == Verdict::Fail
            && c.subject == CheckSubject::Published
            && !c.fails_run())));
    // The cost summary's row: the full pipeline, native against sandbox.
    assert!(records.iter().any(|r| matches!(&r.body,
        Body::Cost(c) if c.baseline.backend == "native"
            && c.protected.iter().any(|p| p.backend == "sandbox"))));
}

fn main() {
    scenarios::run_if_child(&scenarios::enclave_services());
    let tests: [(&str, fn()); 6] = [
        ("every_configuration_end_to_end_native", || {
            every_configuration_end_to_end(Backend::Native)
        }),
        ("every_configuration_end_to_end_sandbox", || {
            every_configuration_end_to_end(Backend::Sandbox)
        }),
        ("bad_inputs_native", || {
            bad_inputs_are_refused_and_leave_the_state(Backend::Native)
        }),
        ("bad_inputs_sandbox", || {
            bad_inputs_are_refused_and_leave_the_state(Backend::Sandbox)
        }),
        (
            "a_second_enclave_opens_the_sealed_keys",
            a_second_enclave_opens_the_sealed_keys,
        ),
        (
            "the_scenario_runs_and_its_records_validate",
            the_scenario_runs_and_its_records_validate,
        ),
    ];
    run_tests(&tests);
}
