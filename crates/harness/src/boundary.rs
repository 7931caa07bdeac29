//! What the enclave scenarios share: starting an enclave the way the run's options ask
//! (backend, transition-cost model), naming the configuration in records, and turning an
//! enclave's trace and the advisor's recommendations into records.

use enclave::{
    Advice, AdvisorConfig, Backend, CallTrace, Direction, Enclave, EnclaveBuilder, Registry,
    SwitchlessConfig, TraceSnapshot,
};
use measure::record::{Body, Bucket, Histogram, Params, Table, Value};

use crate::{At, Context, ScenarioError};

/// One way of running a service: a backend, optionally with switchless workers.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Native or sandbox.
    pub backend: Backend,
    /// Switchless workers (enclave and host side each); 0 for regular calls only.
    pub workers: usize,
}

impl Config {
    /// Regular calls on `backend`.
    pub fn regular(backend: Backend) -> Self {
        Config {
            backend,
            workers: 0,
        }
    }

    /// The sandbox with `workers` switchless workers on each side.
    pub fn switchless(workers: usize) -> Self {
        Config {
            backend: Backend::Sandbox,
            workers,
        }
    }

    /// The `backend` field of records made under this configuration.
    pub fn label(&self) -> &'static str {
        match (self.backend, self.workers) {
            (Backend::Native, _) => "native",
            (Backend::Sandbox, 0) => "sandbox",
            (Backend::Sandbox, _) => "sandbox-switchless",
        }
    }

    /// A short human name, for table columns.
    pub fn title(&self) -> String {
        match self.workers {
            0 => self.label().to_owned(),
            1 => "sandbox switchless, 1 worker".to_owned(),
            n => format!("sandbox switchless, {n} workers"),
        }
    }

    /// Parameters every record of this configuration carries: the worker count for
    /// switchless runs (the context adds the run's transition-cost model).
    pub fn params(&self) -> Params {
        let mut p = Params::new();
        if self.workers > 0 {
            p.insert("workers".into(), Value::from(self.workers));
        }
        p
    }

    /// A builder for `service` under this configuration, with the run's transition-cost
    /// model and call time limit; `ecalls` and `ocalls` are the ids made switchless when the
    /// configuration has workers.
    pub fn builder(
        &self,
        ctx: &Context<'_>,
        service: &str,
        ecalls: &[u32],
        ocalls: &[u32],
    ) -> EnclaveBuilder {
        let mut b = Enclave::builder(service)
            .backend(self.backend)
            .transition_model(ctx.options.transition_model.clone())
            .call_timeout(ctx.options.call_timeout);
        if let Ok(workers @ 1..) = u32::try_from(self.workers) {
            b = b.switchless(SwitchlessConfig {
                num_tworkers: workers,
                num_uworkers: workers,
                ecalls: ecalls.to_vec(),
                ocalls: ocalls.to_vec(),
                ..SwitchlessConfig::default()
            });
        }
        b
    }
}

/// One ecall, a failure named by the call and the service: `ecall put of kv-store: the
/// enclave lost: ...`. `call` is the call's name in traces.
pub fn ecall(
    enclave: &Enclave,
    call_id: u32,
    call: &str,
    input: &[u8],
) -> Result<Vec<u8>, ScenarioError> {
    enclave
        .ecall(call_id, input)
        .at(&format!("ecall {call} of {}", enclave.service_name()))
}

/// Enables sealing on `builder`, with the platform root key where the run's options keep it
/// (`RunOptions::platform_key_dir`, else the user's data directory).
pub fn with_sealing(ctx: &Context<'_>, builder: EnclaveBuilder) -> EnclaveBuilder {
    match &ctx.options.platform_key_dir {
        Some(dir) => builder.sealing_key_dir(dir),
        None => builder.sealing(),
    }
}

/// Starts an enclave, turning a start-up failure into a scenario error naming the service.
pub fn start(builder: EnclaveBuilder, registry: &Registry) -> Result<Enclave, ScenarioError> {
    builder.start(registry).at("starting the enclave")
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Ecall => "ecall",
        Direction::Ocall => "ocall",
    }
}

/// Emits an enclave's trace: a table (count, mean total / inside / transition time,
/// switchless hits and misses) and a latency histogram per call. `name` gives each
/// `(direction, id)` a readable name.
pub fn emit_trace(
    ctx: &Context<'_>,
    scenario: &str,
    config: &Config,
    trace: &TraceSnapshot,
    name: &dyn Fn(Direction, u32) -> String,
) -> Result<(), ScenarioError> {
    let rows = trace
        .calls
        .iter()
        .map(|c| {
            vec![
                Value::from(direction_name(c.direction)),
                Value::from(name(c.direction, c.call_id)),
                Value::from(c.count),
                Value::from(c.mean_total_ns()),
                Value::from(c.mean_inside_ns()),
                Value::from(c.mean_transition_ns()),
                Value::from(c.switchless_hits),
                Value::from(c.switchless_misses),
            ]
        })
        .collect();
    let mut notes = vec![format!(
        "{} backend; means over the timed calls (on native, 1 call in {} is timed).",
        trace.backend,
        enclave::NATIVE_SAMPLE
    )];
    if let Some(m) = &trace.model {
        notes.push(format!("Transition-cost model {m} active."));
    }
    let table = Table {
        name: "trace".into(),
        title: format!("Boundary trace, {}", config.title()),
        columns: [
            "direction",
            "call",
            "calls",
            "mean total ns",
            "mean inside ns",
            "mean transition ns",
            "switchless hits",
            "switchless misses",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes,
    };
    ctx.emit(
        scenario,
        config.label(),
        config.params(),
        Body::Table(table),
    )?;
    for c in trace.calls.iter().filter(|c| c.timed > 0) {
        let label = format!(
            "{} {}",
            direction_name(c.direction),
            name(c.direction, c.call_id)
        );
        ctx.emit(
            scenario,
            config.label(),
            config.params(),
            Body::Histogram(histogram(&label, c)),
        )?;
    }
    Ok(())
}

/// The latency histogram of a call in power-of-two buckets.
fn histogram(name: &str, c: &CallTrace) -> Histogram {
    let h = &c.latency;
    let buckets = h
        .iter_log(1, 2.0)
        .map(|v| Bucket {
            le_ns: v.value_iterated_to() as f64,
            count: v.count_since_last_iteration(),
        })
        .collect();
    Histogram {
        name: name.to_owned(),
        count: h.len(),
        buckets,
        p50_ns: h.value_at_quantile(0.5) as f64,
        p99_ns: h.value_at_quantile(0.99) as f64,
        max_ns: h.max() as f64,
    }
}

/// Runs the advisor (with `advisor`'s thresholds) over a trace and emits its
/// recommendations as a table, one row per call, with the numbers behind each.
pub fn emit_advice(
    ctx: &Context<'_>,
    scenario: &str,
    config: &Config,
    trace: &TraceSnapshot,
    advisor: &AdvisorConfig,
    name: &dyn Fn(Direction, u32) -> String,
) -> Result<Vec<Advice>, ScenarioError> {
    let advice = enclave::advise(trace, None, advisor);
    let rows = advice
        .iter()
        .map(|a| {
            vec![
                Value::from(direction_name(a.direction)),
                Value::from(name(a.direction, a.call_id)),
                Value::from(a.recommendation.name()),
                Value::from(a.calls),
                Value::from(a.mean_total_ns),
                Value::from(a.transition_share * 100.0),
                Value::from(a.estimated_saving_ns / 1e6),
                Value::from(a.reason.as_str()),
            ]
        })
        .collect();
    let table = Table {
        name: "advice".into(),
        title: format!("Boundary advisor, {}", config.title()),
        columns: [
            "direction",
            "call",
            "advice",
            "calls",
            "mean total ns",
            "transition %",
            "saving ms",
            "why",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes: vec![
            "Switchless: short, frequent calls whose time is mostly transition (SGXBox's \
             efficiency metric). Batch: several small calls per logical operation."
                .into(),
        ],
    };
    ctx.emit(
        scenario,
        config.label(),
        config.params(),
        Body::Table(table),
    )?;
    Ok(advice)
}
