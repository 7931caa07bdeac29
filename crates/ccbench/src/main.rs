//! The `ccbench` command: argument parsing, progress bars, output folders and exit codes.
//! Everything else lives in the library crates, where tests can reach it.

mod args;
mod gc;
mod progress;
mod run;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

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

/// The enclave's allocator is a parameter of the `x509` scenario: the enclave (this binary,
/// re-executed) must allocate through the switchable allocator. It stays the system
/// allocator, behind one branch, unless an enclave service switches it.
#[global_allocator]
static ALLOC: scenarios::EnclaveAlloc = scenarios::EnclaveAlloc;

fn main() -> ExitCode {
    // The sandbox backend re-executes this binary as the enclave: become it if asked.
    scenarios::run_if_child();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => run::list(),
        Command::Run(a) => run::run(a),
        Command::Report(a) => run::report(a),
        Command::Compare(a) => run::compare(a),
        Command::Ab(a) => run::ab(a),
        Command::Env => run::env(),
        Command::Gc(c) => gc::gc(c),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            if let Some(exit) = err.downcast_ref::<Exit>() {
                eprintln!("error: {exit}");
                return ExitCode::from(exit.code);
            }
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
