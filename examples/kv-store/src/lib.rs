//! Scenario `kv-store`: a worked example of measuring one's own enclave service with ccbench.
//!
//! The service ([`service`]) is a key-value store whose values are sealed to the enclave and
//! persisted by the host as sealed blobs, through ocalls. The scenario runs it natively, in
//! the sandbox, and in the sandbox with switchless calls, and for each:
//!
//! 1. a load phase: every item put once (per-put time, in chunks);
//! 2. the latency of one small get and one small put (the sampler, one thread);
//! 3. a mixed workload (nine gets to one put, 64-byte values) swept over threads, weak and
//!    strong scaling, every get's value checked against the last put;
//! 4. the boundary trace (per ecall and ocall) and the advisor's verdict per call;
//! 5. checks of its own: every get returned what was put; delete semantics; a blob modified
//!    on the host's disk, and an old blob replayed by the host, are refused with typed errors
//!    and the enclave keeps serving.
//!
//! The cost summary gets one row for a get and one for a put: native against both sandbox
//! configurations. Everything here uses only the public layer (`harness`) that the built-in
//! scenarios use; `main.rs` is one line.

pub mod service;
pub mod workload;

use std::sync::atomic::{AtomicUsize, Ordering};

use harness::boundary::{self, Config};
use harness::enclave::{Backend, Registry};
use harness::measure::record::{Body, Check, Measurement, Params, Verdict};
use harness::measure::sampler::{Samples, try_sample};
use harness::measure::sweep::{SweepConfig, sweep_with_setup};
use harness::{At, Context, Preset, Scenario, ScenarioError};

pub use service::register;
use service::{Call, KvError, Ocall, SERVICE, Store};
use workload::{Client, Expected, key, value};

const NAME: &str = "kv-store";

/// Bytes per value.
const VALUE_LEN: usize = 64;
/// One put in this many operations of the mixed workload.
const PUT_EVERY: u64 = 10;
/// The calls made switchless in the switchless configuration: the get and the blob read it
/// makes, short and nine in ten of all calls (the advisor's pick on the regular sandbox;
/// puts are long, dominated by the host's file write).
const SWITCHLESS: (Call, Ocall) = (Call::Get, Ocall::Read);
/// Puts per timed chunk of the load phase.
const LOAD_CHUNK: u64 = 50;

/// The `kv-store` scenario.
pub struct KvStore;

/// Sizes of one run, by preset.
struct Plan {
    items: u64,
    /// Operations per thread (weak scaling) or in total (strong).
    ops: u64,
    threads: Vec<usize>,
    runs: usize,
}

impl Plan {
    fn of(ctx: &Context<'_>) -> Plan {
        let (items, ops, threads, runs) = match ctx.options.preset {
            Preset::Quick => (400, 500, vec![1, 2], 3),
            Preset::Full => (10_000, 20_000, vec![1, 2, 4], 5),
        };
        Plan {
            items,
            ops,
            threads: ctx.options.threads.clone().unwrap_or(threads),
            runs,
        }
    }
}

/// The configurations: native (no boundary), the sandbox, and the sandbox with one
/// switchless worker on each side for the short, frequent calls ([`SWITCHLESS`]).
fn configs() -> [Config; 3] {
    [
        Config::regular(Backend::Native),
        Config::regular(Backend::Sandbox),
        Config::switchless(1),
    ]
}

/// What one configuration measured, for the cost summary.
struct Latencies {
    label: &'static str,
    get: Measurement,
    put: Measurement,
}

impl Scenario for KvStore {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "example: a sealed key-value store (put/get/delete, values sealed and persisted through ocalls); native, sandbox, switchless"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let plan = Plan::of(ctx);
        if plan.threads.is_empty() || plan.threads.contains(&0) {
            return Err(ScenarioError::Option(format!(
                "thread counts must be at least 1, got {:?}",
                plan.threads
            )));
        }
        let modes = ctx.options.scaling.modes();
        let configs = configs();
        ctx.progress().begin(
            NAME,
            (configs.len() * (3 + modes.len() * plan.threads.len())) as u64,
        );
        let folder = tempfile::Builder::new()
            .prefix("kv-store-")
            .tempdir()
            .at("creating the store's folder")?;
        let registry = register(Registry::new());
        let mut latencies = Vec::new();
        for config in &configs {
            ctx.check_cancel()?;
            let store = Store::open(folder.path().join(config.label())).at("opening the store")?;
            let tcs = plan.threads.iter().copied().max().unwrap_or(1);
            let b = config
                .builder(ctx, SERVICE, &[SWITCHLESS.0.into()], &[SWITCHLESS.1.into()])
                .tcs(tcs);
            let b = boundary::with_sealing(ctx, store.ocalls(b));
            let e = boundary::start(b, &registry)?;
            let client = Client::new(&e);
            latencies.push(measure_config(ctx, &plan, config, client)?);
            emit_checks(ctx, config, client, &store)?;
            ctx.progress().advance(1);
            if config.backend == Backend::Sandbox {
                let trace = e.trace();
                boundary::emit_trace(ctx, NAME, config, &trace, &service::call_name)?;
                boundary::emit_advice(
                    ctx,
                    NAME,
                    config,
                    &trace,
                    &Default::default(),
                    &service::call_name,
                )?;
            }
        }
        if let [native, protected @ ..] = &latencies[..] {
            for (op, pick) in [
                (
                    "get",
                    (|l: &Latencies| &l.get) as fn(&Latencies) -> &Measurement,
                ),
                ("put", |l: &Latencies| &l.put),
            ] {
                let protected: Vec<_> = protected
                    .iter()
                    .map(|l| (l.label, l.label, pick(l)))
                    .collect();
                ctx.emit_cost(
                    NAME,
                    &format!("{op} of a {VALUE_LEN}-byte value"),
                    op,
                    (native.label, native.label, pick(native)),
                    &protected,
                )?;
            }
        }
        Ok(())
    }
}

fn params(config: &Config, plan: &Plan) -> Params {
    let mut p = config.params();
    p.insert("items".into(), plan.items.into());
    p.insert("value_bytes".into(), VALUE_LEN.into());
    p
}

/// The load phase, the single-operation latencies and the mixed sweep of one configuration.
fn measure_config(
    ctx: &Context<'_>,
    plan: &Plan,
    config: &Config,
    client: Client<'_>,
) -> Result<Latencies, ScenarioError> {
    let label = config.label();
    let expected = Expected::new(plan.items, VALUE_LEN);

    // Load: every item once, timed in chunks.
    let mut per_put = Vec::new();
    for chunk in (0..plan.items)
        .collect::<Vec<_>>()
        .chunks(LOAD_CHUNK as usize)
    {
        ctx.check_cancel()?;
        let t = std::time::Instant::now();
        for &i in chunk {
            expected.load(client, i)?;
        }
        per_put.push(t.elapsed().as_nanos() as f64 / chunk.len() as f64);
    }
    let s = Samples {
        iters_per_sample: LOAD_CHUNK,
        per_iter_ns: per_put,
        overhead_ns: None,
    };
    ctx.emit_samples(NAME, label, params(config, plan), "load-put", s, None)?;
    ctx.progress().advance(1);

    // One get, one put: the sampler, on one thread, over rotating items.
    let cfg = ctx.options.sampler();
    let latency = |put: bool| -> Result<Measurement, ScenarioError> {
        ctx.check_cancel()?;
        let mut n = 0u64;
        let s = try_sample(&cfg, || {
            n += 1;
            expected.op(client, n % plan.items, put)
        })?;
        let name = if put { "put" } else { "get" };
        let m = ctx.emit_measurement(
            NAME,
            label,
            params(config, plan),
            name,
            s,
            Some(VALUE_LEN as u64),
        )?;
        ctx.progress().advance(1);
        Ok(m)
    };
    let get = latency(false)?;
    let put = latency(true)?;

    // The mixed workload over threads.
    for &mode in ctx.options.scaling.modes() {
        let sweep_cfg = SweepConfig {
            threads: plan.threads.clone(),
            mode,
            work: plan.ops,
            warmup_runs: 1,
            runs: plan.runs,
        };
        ctx.check_cancel()?;
        let threads_max = plan.threads.iter().copied().max().unwrap_or(1);
        if plan.items < threads_max as u64 {
            return Err(ScenarioError::Option(format!(
                "{threads_max} threads need at least as many items ({} in this preset)",
                plan.items
            )));
        }
        // The items are partitioned by the run's thread count, which the set-up of each
        // run is told.
        let run_threads = AtomicUsize::new(1);
        let points = sweep_with_setup(
            "mixed",
            &sweep_cfg,
            |threads, _| {
                run_threads.store(threads, Ordering::Relaxed);
                Ok(())
            },
            |thread, ops| {
                let threads = run_threads.load(Ordering::Relaxed);
                expected.mixed(client, thread, threads, ops, PUT_EVERY)
            },
            |_| ctx.progress().advance(1),
        )
        .at("mixed workload")?;
        for p in points {
            let mut params = params(config, plan);
            params.insert("put_share".into(), (1.0 / PUT_EVERY as f64).into());
            ctx.emit(NAME, label, params, Body::Scaling(p))?;
        }
    }

    // Every get of this configuration, checked.
    let checked = expected.checked.load(Ordering::Relaxed);
    let wrong = expected.mismatches.load(Ordering::Relaxed);
    let (verdict, message) = if wrong == 0 && checked > 0 {
        (
            Verdict::Pass,
            format!("all {checked} gets returned the value last put"),
        )
    } else if checked == 0 {
        (Verdict::Fail, "no get was checked".to_owned())
    } else {
        (
            Verdict::Fail,
            format!("{wrong} of {checked} gets returned another value than the last put"),
        )
    };
    ctx.emit(
        NAME,
        label,
        config.params(),
        Body::Check(Check::run("gets-return-puts", verdict, message)),
    )?;
    Ok(Latencies { label, get, put })
}

/// The store's own checks, made once per configuration after the workload: delete, then a
/// rollback and a modified blob on the host's disk, each refused with its typed error.
fn emit_checks(
    ctx: &Context<'_>,
    config: &Config,
    client: Client<'_>,
    store: &Store,
) -> Result<(), ScenarioError> {
    let emit = |name: &str, verdict: Verdict, message: String| {
        ctx.emit(
            NAME,
            config.label(),
            config.params(),
            Body::Check(Check::run(name, verdict, message)),
        )
    };
    let k = b"check:delete";
    workload::must("put", client.put(k, b"x")?)?;
    let first = workload::must("delete", client.delete(k)?)?;
    let after = workload::must("get", client.get(k)?)?;
    let second = workload::must("delete", client.delete(k)?)?;
    if first && after.is_none() && !second {
        emit(
            "delete",
            Verdict::Pass,
            "a deleted key reads as absent; deleting it again reports it absent".into(),
        )?;
    } else {
        emit(
            "delete",
            Verdict::Fail,
            format!(
                "delete returned {first}, then get {after:?}, then delete {second} \
                 (expected true, None, false)"
            ),
        )?;
    }

    // Rollback: the host puts back an older blob of the key.
    let k = key(u64::MAX);
    workload::must("put", client.put(&k, &value(0, 1, VALUE_LEN))?)?;
    let path = store.path_of(&k);
    let old = std::fs::read(&path).at("reading a stored blob")?;
    workload::must("put", client.put(&k, &value(0, 2, VALUE_LEN))?)?;
    std::fs::write(&path, &old).at("replaying an old blob")?;
    let (verdict, message) = match client.get(&k)? {
        Err(KvError::Rollback {
            found, expected, ..
        }) => (
            Verdict::Pass,
            format!("a replayed blob of version {found} was refused (version {expected} expected)"),
        ),
        other => (
            Verdict::Fail,
            format!("a replayed old blob gave {other:?}, not a rollback error"),
        ),
    };
    emit("rollback-refused", verdict, message)?;

    // Tampering: one bit of a current blob flipped on the host's disk.
    workload::must("put", client.put(&k, &value(0, 3, VALUE_LEN))?)?;
    let mut blob = std::fs::read(&path).at("reading a stored blob")?;
    let mid = blob.len() / 2;
    blob[mid] ^= 0x10;
    std::fs::write(&path, &blob).at("tampering with a stored blob")?;
    let tampered = client.get(&k)?;
    // The enclave must keep serving after refusing it.
    workload::must("put", client.put(&k, &value(0, 4, VALUE_LEN))?)?;
    let healthy = workload::must("get", client.get(&k)?)? == Some(value(0, 4, VALUE_LEN));
    let (verdict, message) = match (tampered, healthy) {
        (Err(KvError::Tampered { reason, .. }), true) => (
            Verdict::Pass,
            format!("a blob with one bit flipped was refused ({reason}); the enclave kept serving"),
        ),
        (other, healthy) => (
            Verdict::Fail,
            format!(
                "a tampered blob gave {other:?}, not a tampering error; the enclave kept \
                 serving: {healthy}"
            ),
        ),
    };
    emit("tampered-blob-refused", verdict, message)
}
