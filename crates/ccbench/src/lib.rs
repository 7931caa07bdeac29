//! The `ccbench` command line, as a library: argument parsing, progress bars, output folders
//! and exit codes. Everything else lives in the library crates, where tests can reach it.
//!
//! A binary of one's own gets the whole command line (`list`, `run`, `report`, `compare`,
//! `ab`, `env`, `gc`) over the built-in scenarios and its own, and the sandbox re-execution
//! of itself as the enclave, from one macro (after criterion's `criterion_main!`):
//!
//! ```ignore
//! ccbench::main!(scenarios = [my_crate::MyScenario], services = my_crate::register);
//! ```
//!
//! `docs/own-workload.md` walks through it; `examples/kv-store` is a whole one.

mod args;
mod atomic;
mod gc;
mod history;
mod middlebox;
mod progress;
mod run;

use std::process::ExitCode;

use clap::Parser;
use harness::enclave::Registry;
use harness::{Catalog, Scenario};

use args::{Cli, Command};

/// The enclave allocator, which [`main!`] installs as the binary's global allocator
/// (the `x509` scenario switches its enclave process to a single-lock heap through it).
pub use scenarios::EnclaveAlloc;

/// Exit status for a usage error (unknown scenario, invalid option value).
pub const EXIT_USAGE: u8 = 2;
/// Exit status of a run in which a check failed on the run's own data (or, with `--strict`,
/// warned): everything was written, and the results should not be trusted as they are.
pub const EXIT_CHECK_FAILED: u8 = 3;
/// Exit status after Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// An error that decides its own exit status.
#[derive(Debug)]
pub struct Exit {
    code: u8,
    message: String,
}

impl Exit {
    /// A usage error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Exit {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// What a ccbench binary offers beyond the built-in scenarios: the user's scenarios and the
/// enclave services they start. Built by [`main!`]; see [`main_with`].
#[derive(Default)]
pub struct App {
    scenarios: Vec<&'static dyn Scenario>,
    services: Vec<fn(Registry) -> Registry>,
}

impl App {
    /// The built-in scenarios only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a scenario, listed and run after the built-in ones.
    pub fn scenario(mut self, s: &'static dyn Scenario) -> Self {
        self.scenarios.push(s);
        self
    }

    /// Adds the enclave services a scenario starts: `register` adds them to a registry
    /// (`enclave::Registry::with`). The sandbox's enclave process (this binary, re-executed)
    /// looks its service up among these and the built-in ones.
    pub fn services(mut self, register: fn(Registry) -> Registry) -> Self {
        self.services.push(register);
        self
    }

    /// Every scenario, the built-in ones first; a name given twice is an error.
    pub fn catalog(&self) -> Result<Catalog, harness::DuplicateScenario> {
        Catalog::new(
            scenarios::registry()
                .iter()
                .copied()
                .chain(self.scenarios.iter().copied()),
        )
    }

    /// Every enclave service: the built-in ones and the user's. A user service named like a
    /// built-in one (or like another of theirs) is an error naming it.
    pub fn registry(&self) -> Result<Registry, String> {
        let mut all = scenarios::enclave_services();
        for register in &self.services {
            let theirs = register(Registry::new());
            if let Some(clash) = theirs.names().find(|n| all.contains(n)) {
                return Err(format!(
                    "two enclave services are named {clash:?}: service names must be unique; \
                     rename yours"
                ));
            }
            all = register(all);
        }
        Ok(all)
    }
}

/// Gives a binary the whole ccbench command line over the built-in scenarios and `app`'s:
/// becomes the enclave or a 2PC party when this process was started as one, then parses the
/// command line, runs it and returns the exit status. The binary must install
/// [`EnclaveAlloc`] as its global allocator; [`main!`] does both.
pub fn main_with(app: App) -> ExitCode {
    let registry = match app.registry() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // The sandbox backend re-executes this binary as the enclave: become it if asked.
    scenarios::run_if_child(&registry);
    let catalog = match app.catalog() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => run::list(&catalog),
        Command::Run(a) => run::run(a, &catalog),
        Command::Report(a) => run::report(a),
        Command::Compare(a) => run::compare(a),
        Command::Ab(a) => run::ab(a),
        Command::Env => run::env(),
        Command::Gc(c) => gc::gc(c),
        Command::History(h) => history::history(h),
        Command::Middlebox(m) => middlebox::middlebox(m, &registry),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            if let Some(exit) = err.downcast_ref::<Exit>() {
                eprintln!("error: {exit}");
                return ExitCode::from(exit.code);
            }
            eprintln!("error: {}", error_message(&err));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, `outer: cause: ...`, as anyhow's `{:#}` writes it, but
/// without a cause whose text the line already holds: most of our errors (and some of our
/// dependencies', such as tempfile's) put their cause into their own message and also give it
/// as their `source`, which `{:#}` would then print twice ("Connection refused (os error
/// 111): Connection refused (os error 111)").
pub(crate) fn error_message(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// Defines `main` (and the global allocator) of a ccbench binary: the whole command line over
/// the built-in scenarios and the given ones, with the sandbox re-execution of this binary as
/// the enclave of the given services.
///
/// ```ignore
/// // The built-in scenarios only (this is ccbench's own main.rs):
/// ccbench::main!();
/// // With scenarios of one's own and the enclave services they start:
/// ccbench::main!(scenarios = [KvStore], services = kv_store::register);
/// ```
///
/// Each scenario is a `static` item or a unit struct (anything `&'static dyn Scenario` can
/// point to); `services` is a `fn(Registry) -> Registry` that adds the services.
#[macro_export]
macro_rules! main {
    () => {
        $crate::main!(scenarios = []);
    };
    (scenarios = [$($scenario:expr),* $(,)?] $(, services = $services:expr)? $(,)?) => {
        #[global_allocator]
        static CCBENCH_ALLOC: $crate::EnclaveAlloc = $crate::EnclaveAlloc;

        fn main() -> ::std::process::ExitCode {
            let app = $crate::App::new() $(.scenario(&$scenario))* $(.services($services))?;
            $crate::main_with(app)
        }
    };
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use harness::{Context, ScenarioError};

    use super::*;

    /// An error that quotes its cause in its message and also gives it as its source, as
    /// `thiserror`'s `#[error("...: {source}")]` does.
    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "could not connect to 127.0.0.1:1: {}", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn error_message_prints_each_cause_once() {
        let refused = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let err = anyhow::Error::new(Quoting(refused())).context("connecting to the garbler");
        let cause = refused().to_string();
        assert_eq!(
            error_message(&err),
            format!("connecting to the garbler: could not connect to 127.0.0.1:1: {cause}")
        );
        // Causes the message does not hold yet are all kept, in order.
        let err = anyhow::Error::new(refused())
            .context("reading results.jsonl")
            .context("writing the report");
        assert_eq!(
            error_message(&err),
            format!("writing the report: reading results.jsonl: {cause}")
        );
        assert_eq!(format!("{err:#}"), error_message(&err));
    }

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

    static MINE: Named = Named("mine");
    static CLASH: Named = Named("crypto");

    struct Nothing;
    impl harness::enclave::Service for Nothing {
        fn ecall(
            &self,
            _: u32,
            _: &[u8],
            _: &mut harness::enclave::Ctx<'_>,
        ) -> Result<Vec<u8>, harness::enclave::ServiceError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn a_users_scenarios_come_after_the_built_in_ones_and_may_not_share_a_name() {
        let cat = App::new().scenario(&MINE).catalog().unwrap();
        let names: Vec<_> = cat.all().iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), scenarios::registry().len() + 1);
        assert_eq!(names.last(), Some(&"mine"));
        let err = App::new().scenario(&CLASH).catalog().unwrap_err();
        assert_eq!(err.name, "crypto");
    }

    #[test]
    fn a_users_services_join_the_built_in_ones_and_may_not_share_a_name() {
        let reg = App::new()
            .services(|r| r.with("mine", |_| Ok(Arc::new(Nothing))))
            .registry()
            .unwrap();
        assert!(reg.contains("mine") && reg.contains(scenarios::sealing::SERVICE));
        let err = App::new()
            .services(|r| r.with(scenarios::sealing::SERVICE, |_| Ok(Arc::new(Nothing))))
            .registry()
            .unwrap_err();
        assert!(err.contains(scenarios::sealing::SERVICE), "{err}");
    }
}
