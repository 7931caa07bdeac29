//! What every ccbench scenario is written against, the nine built-in experiments and a user's
//! own alike: the [`Scenario`] trait, the [`Context`] it runs with (options, records,
//! progress, Ctrl-C), the one [`codec`] for typed messages across the enclave boundary, the
//! [`boundary`] helpers (configurations, start-up, trace and advisor tables) and [`hex`].
//!
//! It depends on the engines a scenario wires together (`enclave` and `measure`, re-exported
//! here so that a user's crate needs no other path to them) and on none of the experiments:
//! a user's crate that depends on `harness` compiles without the nine. The `ccbench` crate's
//! `main!` macro then gives a binary made of the built-in scenarios and the user's the whole
//! command line (see `docs/own-workload.md`).
//!
//! A scenario never parses a command line and never prints: it emits records through its
//! context, and the cli renders them.

pub mod boundary;
pub mod codec;
pub mod context;
pub mod hex;

pub use codec::{Decode, Encode};
pub use context::{
    CircuitChoice, Context, Emit, NoProgress, Preset, Progress, RunOptions, ScalingSelection,
};
/// The enclave engine: `Service`, `Ctx`, `Registry`, `Enclave` and its builder.
pub use enclave;
/// The measurement harness: the sampler, statistics, records.
pub use measure;

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

/// The scenarios a binary offers, in the order `all` runs them, with unique names.
#[derive(Clone)]
pub struct Catalog {
    scenarios: Vec<&'static dyn Scenario>,
}

/// Two scenarios of a [`Catalog`] share a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "two scenarios are named {name:?}: scenario names must be unique (and `all` is reserved); \
     rename yours"
)]
pub struct DuplicateScenario {
    /// The name given twice.
    pub name: String,
}

/// A scenario name that is not in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scenario {name:?}; known scenarios: {}", known.join(", "))]
pub struct UnknownScenario {
    /// The name given.
    pub name: String,
    /// Every known name.
    pub known: Vec<&'static str>,
}

impl Catalog {
    /// A catalog of `scenarios`, in order; a name given twice (or `all`) is an error.
    pub fn new(
        scenarios: impl IntoIterator<Item = &'static dyn Scenario>,
    ) -> Result<Self, DuplicateScenario> {
        let mut out: Vec<&'static dyn Scenario> = Vec::new();
        for s in scenarios {
            if s.name() == "all" || out.iter().any(|o| o.name() == s.name()) {
                return Err(DuplicateScenario {
                    name: s.name().to_owned(),
                });
            }
            out.push(s);
        }
        Ok(Catalog { scenarios: out })
    }

    /// Every scenario, in run order.
    pub fn all(&self) -> &[&'static dyn Scenario] {
        &self.scenarios
    }

    /// Looks a scenario up by name.
    pub fn find(&self, name: &str) -> Option<&'static dyn Scenario> {
        self.scenarios.iter().copied().find(|s| s.name() == name)
    }

    /// Resolves names (or `all`) to scenarios, in the order given, without duplicates.
    pub fn resolve(&self, names: &[String]) -> Result<Vec<&'static dyn Scenario>, UnknownScenario> {
        let mut out: Vec<&'static dyn Scenario> = Vec::new();
        for name in names {
            let found: Vec<&'static dyn Scenario> = if name == "all" {
                self.scenarios.clone()
            } else {
                vec![self.find(name).ok_or_else(|| UnknownScenario {
                    name: name.clone(),
                    known: self.scenarios.iter().map(|s| s.name()).collect(),
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
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.scenarios.iter().map(|s| s.name()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl Scenario for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn description(&self) -> &'static str {
            "a test scenario"
        }
        fn run(&self, _: &Context<'_>) -> Result<(), ScenarioError> {
            Ok(())
        }
    }

    static A: Named = Named("a");
    static B: Named = Named("b");
    static A2: Named = Named("a");
    static ALL: Named = Named("all");

    #[test]
    fn resolves_names_and_all() {
        let cat = Catalog::new([&A as &dyn Scenario, &B]).unwrap();
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let r = cat.resolve(&names(&["b", "b"])).unwrap();
        assert_eq!(r.iter().map(|s| s.name()).collect::<Vec<_>>(), ["b"]);
        let r = cat.resolve(&names(&["b", "all"])).unwrap();
        assert_eq!(r.iter().map(|s| s.name()).collect::<Vec<_>>(), ["b", "a"]);
        let Err(err) = cat.resolve(&names(&["a", "nope"])) else {
            panic!("an unknown name resolved")
        };
        assert_eq!(err.name, "nope");
        assert!(err.to_string().contains("known scenarios: a, b"));
    }

    #[test]
    fn refuses_a_name_given_twice_and_all() {
        let err = Catalog::new([&A as &dyn Scenario, &B, &A2]).unwrap_err();
        assert_eq!(err.name, "a");
        assert!(Catalog::new([&ALL as &dyn Scenario]).is_err());
    }
}
