//! The runner of test binaries that host sandboxed enclaves.
//!
//! The sandbox backend starts the enclave by re-executing the running binary, so a test
//! binary that starts one must decide in `main`, before anything else, whether it is the
//! enclave: libtest's harness cannot do that (`harness = false` in `Cargo.toml`). This is
//! the one runner such binaries share. It reads the command line the way libtest does for
//! the flags `cargo test` passes on (`--test-threads N`, `--nocapture`, `--exact`,
//! `--skip F`, `--list`, `-q`, ...), runs the selected tests one after the other (an
//! enclave test starts processes and threads of its own), prints libtest's lines, and
//! fails when a test failed or when no test ran at all: a runner that runs nothing must not
//! pass.

use std::time::Instant;

/// What the command line asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Substrings (or exact names with `exact`) of the tests to run; empty for all.
    pub filters: Vec<String>,
    /// Substrings of the tests to leave out.
    pub skip: Vec<String>,
    /// Filters match whole names.
    pub exact: bool,
    /// List the tests instead of running them.
    pub list: bool,
    /// One character per test instead of one line.
    pub quiet: bool,
}

/// A command-line argument the runner does not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown test-runner argument {0:?}")]
pub struct UnknownArgument(pub String);

/// Flags of libtest that take a value (`--flag VALUE` or `--flag=VALUE`) and do not change
/// what this runner does: tests run one at a time, output is never captured.
const IGNORED_WITH_VALUE: &[&str] = &[
    "--test-threads",
    "--color",
    "--format",
    "--logfile",
    "-Z",
    "--shuffle-seed",
];

/// Flags of libtest without a value that do not change what this runner does.
const IGNORED: &[&str] = &[
    "--nocapture",
    "--show-output",
    "--include-ignored",
    "--ignored",
    "--test",
    "--bench",
    "--shuffle",
    "--ensure-time",
    "--force-run-in-process",
    "--report-time",
];

impl Selection {
    /// Parses the arguments after the program name.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Self, UnknownArgument> {
        let mut s = Selection::default();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with('-') => (f.to_owned(), Some(v.to_owned())),
                _ => (a.clone(), None),
            };
            match flag.as_str() {
                "--exact" => s.exact = true,
                "--list" => s.list = true,
                "-q" | "--quiet" => s.quiet = true,
                "--skip" => match inline.or_else(|| it.next()) {
                    Some(v) => s.skip.push(v),
                    None => return Err(UnknownArgument(a)),
                },
                f if IGNORED_WITH_VALUE.contains(&f) => {
                    if inline.is_none() && it.next().is_none() {
                        return Err(UnknownArgument(a));
                    }
                }
                f if IGNORED.contains(&f) => {}
                f if f.starts_with('-') => return Err(UnknownArgument(a)),
                _ => s.filters.push(a),
            }
        }
        Ok(s)
    }

    /// Whether the test `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| {
            if self.exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(hit))
            && !self.skip.iter().any(|f| name.contains(f.as_str()))
    }
}

/// Runs the selected `tests` (name, function) in order and exits: status 0 when every
/// selected test passed and at least one ran, 101 (libtest's) otherwise, 2 for an argument
/// it does not understand. Call it at the end of the test binary's `main`.
pub fn run(tests: &[(&str, fn())]) -> ! {
    let selection = match Selection::parse(std::env::args().skip(1)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let selected: Vec<&(&str, fn())> = tests.iter().filter(|t| selection.selects(t.0)).collect();
    if selection.list {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        std::process::exit(0);
    }
    println!("\nrunning {} tests", selected.len());
    let started = Instant::now();
    let mut failed = Vec::new();
    for (name, f) in &selected {
        let t = Instant::now();
        let ok = std::panic::catch_unwind(f).is_ok();
        if selection.quiet {
            print!("{}", if ok { '.' } else { 'F' });
        } else {
            let verdict = if ok { "ok" } else { "FAILED" };
            println!("test {name} ... {verdict} ({:.2?})", t.elapsed());
        }
        if !ok {
            failed.push(*name);
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    let passed = selected.len() - failed.len();
    let verdict = if failed.is_empty() && !selected.is_empty() {
        "ok"
    } else {
        "FAILED"
    };
    println!(
        "\ntest result: {verdict}. {passed} passed; {} failed; 0 ignored; 0 measured; {} \
         filtered out; finished in {:.2}s\n",
        failed.len(),
        tests.len() - selected.len(),
        started.elapsed().as_secs_f64()
    );
    if selected.is_empty() {
        eprintln!(
            "error: no test ran (filters {:?}, skip {:?}); this runner fails rather than pass \
             on nothing — pick a test binary with `--test NAME`",
            selection.filters, selection.skip
        );
    }
    std::process::exit(if verdict == "ok" { 0 } else { 101 });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Selection, UnknownArgument> {
        Selection::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn libtest_flags_are_not_filters() {
        let s = parse(&["--test-threads", "1", "--nocapture", "--color=always"]).unwrap();
        assert!(s.filters.is_empty(), "{s:?}");
        assert!(s.selects("anything"));
        let s = parse(&["--test-threads=1", "-q", "round"]).unwrap();
        assert_eq!(s.filters, ["round"]);
        assert!(s.quiet);
    }

    #[test]
    fn filters_skip_and_exact() {
        let s = parse(&["trips", "--skip", "chunk"]).unwrap();
        assert!(s.selects("round_trips"));
        assert!(!s.selects("chunked_trips"));
        assert!(!s.selects("start_up"));
        let s = parse(&["--exact", "round_trips"]).unwrap();
        assert!(s.selects("round_trips"));
        assert!(!s.selects("round_trips_2"));
    }

    #[test]
    fn unknown_flags_and_missing_values_are_errors() {
        assert_eq!(
            parse(&["--frobnicate"]),
            Err(UnknownArgument("--frobnicate".into()))
        );
        assert!(parse(&["--test-threads"]).is_err());
        assert!(parse(&["--skip"]).is_err());
    }
}
