//! ccbench's experiments: one module each, their presets, and the registry the cli resolves
//! names against. A scenario wires the engines (`enclave`, `garble`) to the harness
//! (`measure`) and emits records through its [`Context`]; it never parses a command line and
//! never prints.

pub mod boundary;
pub mod codec;
pub mod context;
pub mod crypto;
pub mod dptree;
pub mod ed25519_2pc;
pub mod gc2pc;
pub mod hex;
pub mod sealing;
pub mod tls_middlebox;
pub mod transitions;
pub mod txpipeline;
pub mod x509;

pub use codec::{Decode, Encode};
pub use context::{Context, Emit, NoProgress, Preset, Progress, RunOptions, ScalingSelection};
/// The transition-cost model the enclave scenarios accept (`--transition-cycles`).
pub use enclave::TransitionModel;
/// The enclave allocator: binaries that run scenarios install it as their global allocator
/// (`x509` switches its enclave process to a single-lock heap through it).
pub use enclave::alloc::EnclaveAlloc;

/// Why a scenario stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The user asked to stop (Ctrl-C); records emitted so far are kept.
    #[error("cancelled")]
    Cancelled,
    /// A record could not be written.
    #[error("writing results: {0}")]
    Records(#[from] measure::jsonl::JsonlError),
    /// Statistics over a measurement failed (no samples, a non-finite value).
    #[error("statistics: {0}")]
    Stats(#[from] measure::stats::StatsError),
    /// An option value the scenario cannot use.
    #[error("invalid option: {0}")]
    Option(String),
    /// A step of the workload failed; `source` is the error it failed with.
    #[error("{step}: {source}")]
    Step {
        /// The step that failed.
        step: String,
        /// What went wrong, with its own cause chain.
        #[source]
        source: BoxError,
    },
}

/// Any error, kept with its type and cause chain.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl ScenarioError {
    /// A failed workload step, for a failure that has no error value of its own (a check
    /// on returned data): `message` becomes the source.
    pub fn step(step: impl Into<String>, message: impl std::fmt::Display) -> Self {
        ScenarioError::Step {
            step: step.into(),
            source: message.to_string().into(),
        }
    }
}

/// Names the step an error happened in: `enclave.ecall(..).at("verify chain")?` turns any
/// error into [`ScenarioError::Step`] and keeps it as the source.
pub trait At<T> {
    /// The error of `self`, if any, as a failure of `step`.
    fn at(self, step: &str) -> Result<T, ScenarioError>;
}

impl<T, E: Into<BoxError>> At<T> for Result<T, E> {
    fn at(self, step: &str) -> Result<T, ScenarioError> {
        self.map_err(|e| ScenarioError::Step {
            step: step.to_owned(),
            source: e.into(),
        })
    }
}

/// An experiment ccbench can run.
pub trait Scenario: Sync {
    /// The name used on the command line and in records.
    fn name(&self) -> &'static str;
    /// One line for `ccbench list`.
    fn description(&self) -> &'static str;
    /// Runs the experiment, emitting records through the context.
    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError>;
}

/// Every scenario, in the order `all` runs them.
pub fn registry() -> &'static [&'static dyn Scenario] {
    &[
        &crypto::Crypto,
        &transitions::TransitionsScenario,
        &sealing::SealingScenario,
        &gc2pc::Gc2pc,
        &ed25519_2pc::Ed25519Pc,
        &txpipeline::TxPipeline,
        &x509::X509,
        &dptree::DpTree,
        &tls_middlebox::TlsMiddlebox,
    ]
}

/// The enclave services of every scenario. The sandbox backend re-executes the running
/// binary as the enclave, which looks its service up here.
pub fn enclave_services() -> enclave::Registry {
    let r = enclave::Registry::new();
    let r = transitions::register(r);
    let r = txpipeline::register(r);
    let r = dptree::register(r);
    let r = sealing::register(r);
    let r = tls_middlebox::register(r);
    x509::register(r)
}

/// Becomes the enclave, or the evaluator party of a `gc-2pc` session or an `ed25519-2pc`
/// signature, and never returns
/// when this process was started as one; returns at once otherwise. A binary that runs
/// scenarios calls this first thing in `main`: those scenarios re-execute it.
pub fn run_if_child() {
    enclave::child::run_if_enclave(&enclave_services());
    gc2pc::run_if_evaluator();
    ed25519_2pc::run_if_evaluator();
}

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<&'static dyn Scenario> {
    registry().iter().copied().find(|s| s.name() == name)
}

/// A scenario name that is not in the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scenario {name:?}; known scenarios: {}", known.join(", "))]
pub struct UnknownScenario {
    /// The name given.
    pub name: String,
    /// Every known name.
    pub known: Vec<&'static str>,
}

/// Resolves names (or `all`) to scenarios, in the order given, without duplicates.
pub fn resolve(names: &[String]) -> Result<Vec<&'static dyn Scenario>, UnknownScenario> {
    let mut out: Vec<&'static dyn Scenario> = Vec::new();
    for name in names {
        let found: Vec<&'static dyn Scenario> = if name == "all" {
            registry().to_vec()
        } else {
            vec![find(name).ok_or_else(|| UnknownScenario {
                name: name.clone(),
                known: registry().iter().map(|s| s.name()).collect(),
            })?]
        };
        for s in found {
            if !out.iter().any(|o| o.name() == s.name()) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_names_and_all() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let r = resolve(&names(&["crypto", "crypto"])).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(resolve(&names(&["all"])).unwrap().len(), registry().len());
        let Err(err) = resolve(&names(&["crypto", "nope"])) else {
            panic!("an unknown name resolved")
        };
        assert_eq!(err.name, "nope");
        assert!(
            err.to_string()
                .contains("known scenarios: crypto, transitions")
        );
    }
}
