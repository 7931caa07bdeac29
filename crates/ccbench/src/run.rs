//! The subcommands: each resolves its arguments, calls the libraries and decides what to print
//! and which exit status to return.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result};
use garble::link::Choice;
use harness::hex::unhex;
use harness::{
    Catalog, CircuitChoice, Context, Emit, Preset, RunOptions, ScalingSelection, Scenario,
    ScenarioError,
};
use measure::env::{BuildInfo, Env, MachineTicks};
use measure::jsonl::{RecordSink, read_records};
use measure::record::{Body, Check, CheckSubject, Record, Verdict};
use report::verdicts::Verdicts;

use crate::args::{AbArgs, CompareArgs, CompareOpts, ReportArgs, RunArgs, Scaling};
use crate::progress::Bar;
use crate::{EXIT_CHECK_FAILED, EXIT_INTERRUPTED, Exit};

/// The identity of this binary, for the environment record.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        git_commit: env!("CCBENCH_GIT_COMMIT").to_owned(),
        profile: env!("CCBENCH_PROFILE").to_owned(),
        rustc: env!("CCBENCH_RUSTC").to_owned(),
    }
}

/// The environment with the harness's own overhead measured (an empty operation, batched).
pub(crate) fn capture_env() -> Env {
    let mut env = Env::capture(build_info());
    // The minimum over a few large batches: the harness's floor, not the machine's noise.
    let overhead = (0..20)
        .map(|_| measure::sampler::harness_overhead_ns(1_000_000))
        .fold(f64::INFINITY, f64::min);
    env.harness_overhead_ns = Some(overhead);
    env
}

pub fn list(catalog: &Catalog) -> Result<ExitCode> {
    let width = catalog
        .all()
        .iter()
        .map(|s| s.name().len())
        .max()
        .unwrap_or(0);
    for s in catalog.all() {
        println!("{:width$}  {}", s.name(), s.description());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn env() -> Result<ExitCode> {
    let env = capture_env();
    println!("cpu               {}", env.cpu_model);
    println!("cores             {}", env.cores);
    println!("cpu flags         {}", env.cpu_flags.join(" "));
    let hw = if env.trusted_hardware.is_empty() {
        "none found (the sandbox backend emulates the boundary)".to_owned()
    } else {
        env.trusted_hardware.join(" ")
    };
    println!("trusted hardware  {hw}");
    println!(
        "memory            {:.1} GiB",
        env.memory_bytes as f64 / (1u64 << 30) as f64
    );
    println!("kernel            {}", env.kernel);
    println!("os                {}", env.os);
    println!(
        "build             ccbench {} ({}, {}), {}",
        env.build.version, env.build.git_commit, env.build.profile, env.build.rustc
    );
    if let Some(o) = env.harness_overhead_ns {
        println!("harness overhead  {o:.2} ns per iteration (batched empty operation)");
    }
    if let Some(l) = env.load_avg_1m {
        let busy = if env.busy() { " (busy)" } else { "" };
        println!("load average      {l:.2} (1 minute){busy}");
    }
    println!("time              {}", env.time_utc);
    Ok(ExitCode::SUCCESS)
}

/// Writes records to the results file and keeps them for the summary.
struct Sink {
    file: RecordSink,
    count: Mutex<usize>,
}

impl Emit for Sink {
    fn emit(&self, record: &Record) -> Result<(), ScenarioError> {
        self.file.write(record)?;
        *self.count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Ok(())
    }
}

/// `results/<UTC timestamp>`, made unique if a run started in the same second.
pub(crate) fn default_out_dir() -> PathBuf {
    let stamp = measure::env::rfc3339_utc(SystemTime::now()).replace(':', "-");
    let base = Path::new("results").join(&stamp);
    let mut dir = base.clone();
    let mut n = 2;
    while dir.exists() {
        dir = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    dir
}

pub(crate) fn install_ctrlc(bar_quiet: bool) -> Arc<AtomicBool> {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    // A second Ctrl-C exits at once; the results file is still valid (records are whole lines).
    let handler = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        if !bar_quiet {
            eprintln!(
                "\ninterrupted: finishing the current measurement (Ctrl-C again to quit now)"
            );
        }
    });
    if let Err(e) = handler {
        eprintln!("warning: cannot handle Ctrl-C ({e}); an interrupted run keeps its results file");
    }
    cancel
}

/// The circuits of `--circuit`, each loaded and its inputs' widths checked before anything
/// runs: a bad file or width is a usage error (exit 2) naming it.
fn circuit_choices(args: &RunArgs, selected: &[&dyn Scenario]) -> Result<Vec<CircuitChoice>> {
    if args.circuit.is_empty() {
        return Ok(Vec::new());
    }
    if !selected.iter().any(|s| s.name() == scenarios::gc2pc::NAME) {
        return Err(Exit::usage(format!(
            "--circuit applies to the {} scenario, which this run does not include",
            scenarios::gc2pc::NAME
        ))
        .into());
    }
    let hex_input = |v: &Option<String>, flag: &str| -> Result<Option<Vec<u8>>> {
        v.as_deref()
            .map(|h| unhex(h).map_err(|e| Exit::usage(format!("{flag}: {e}")).into()))
            .transpose()
    };
    let garbler_input = hex_input(&args.garbler_input, "--garbler-input")?;
    let evaluator_input = hex_input(&args.evaluator_input, "--evaluator-input")?;
    let mut out = Vec::new();
    for spec in &args.circuit {
        let choice = CircuitChoice {
            spec: spec.clone(),
            garbler_input: garbler_input.clone(),
            evaluator_input: evaluator_input.clone(),
        };
        scenarios::gc2pc::choose(&choice).map_err(|e| Exit::usage(e.to_string()))?;
        out.push(choice);
    }
    Ok(out)
}

/// Checks `--link-emulator` against what this machine allows, before anything runs: a
/// kernel link asked for and not available is a usage error with the reason; `auto` without
/// one returns the notice that the user-space link carries the profile instead.
fn link_emulator(args: &RunArgs) -> Result<Option<String>> {
    let shaped = args.net.as_ref().is_some_and(|p| !p.is_loopback());
    if !shaped || args.link_emulator == Choice::User {
        return Ok(None);
    }
    match (garble::link::netns::probe(), args.link_emulator) {
        (Ok(_), _) => Ok(None),
        (Err(e), Choice::Kernel) => Err(Exit::usage(format!(
            "--link-emulator kernel: the kernel link is not available here: {e}"
        ))
        .into()),
        (Err(e), _) => Ok(Some(format!(
            "note: the kernel link is not available here ({e}): the user-space link carries --net"
        ))),
    }
}

pub fn run(args: RunArgs, catalog: &Catalog) -> Result<ExitCode> {
    let selected = catalog
        .resolve(&args.scenarios)
        .map_err(|e| Exit::usage(e.to_string()))?;
    let circuits = circuit_choices(&args, &selected)?;
    let link_notice = link_emulator(&args)?;
    let injected = injected_check()?;
    let out_dir = args.out.clone().unwrap_or_else(default_out_dir);
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("creating the output folder {}", out_dir.display()))?;
    let results = out_dir.join("results.jsonl");
    let options = RunOptions {
        preset: if args.quick {
            Preset::Quick
        } else {
            Preset::Full
        },
        threads: args
            .threads
            .map(|t| t.into_iter().map(|x| x as usize).collect()),
        scaling: match args.scaling {
            Scaling::Weak => ScalingSelection::Weak,
            Scaling::Strong => ScalingSelection::Strong,
            Scaling::Both => ScalingSelection::Both,
        },
        duration: args.duration.map(Duration::from_secs_f64),
        out_dir: out_dir.clone(),
        transition_model: args.transition_cycles.clone(),
        sampler: None,
        platform_key_dir: None,
        circuits,
        gc_hash: args.hash.map(|h| h.name().to_owned()),
        gc_scheme: args.scheme.map(|s| s.name().to_owned()),
        net: args.net.as_ref().map(|p| p.spec()),
        ed25519_variant: args.variant.clone(),
        link_emulator: Some(args.link_emulator.name().to_owned()),
        call_timeout: Some(Duration::from_secs_f64(args.call_timeout)),
    };
    let sink = Sink {
        file: RecordSink::create(&results)?,
        count: Mutex::new(0),
    };
    let cancel = install_ctrlc(args.quiet);
    let bar = Bar::new(args.quiet);

    if let Some(n) = &link_notice {
        bar.println(n);
    }
    let env = capture_env();
    if env.busy() {
        bar.println(&format!(
            "warning: the machine is busy (load average {:.2} on {} cores): timings will be \
             inflated; the report says so",
            env.load_avg_1m.unwrap_or_default(),
            env.cores
        ));
    }
    sink.emit(&Record::new(
        "run",
        "host",
        measure::params! {},
        Body::Env(env),
    ))?;

    let mut failed = Vec::new();
    let mut interrupted = false;
    for scenario in &selected {
        bar.scenario(scenario.name());
        let ctx = Context::new(&options, &sink, &bar, &cancel);
        let ticks = MachineTicks::read();
        let result = scenario.run(&ctx);
        if let Some(check) = steal_check(scenario.name(), ticks, MachineTicks::read()) {
            if check.verdict != Verdict::Pass {
                bar.println(&format!("warning: {}", check.message));
            }
            sink.emit(&Record::new(
                scenario.name(),
                "host",
                measure::params! {},
                Body::Check(check),
            ))?;
        }
        match result {
            Ok(()) => bar.println(&format!("{:>12} done", scenario.name())),
            Err(ScenarioError::Cancelled) => {
                interrupted = true;
                break;
            }
            Err(e) => {
                bar.println(&format!("{:>12} failed: {e}", scenario.name()));
                failed.push(format!("{}: {e}", scenario.name()));
            }
        }
    }
    bar.clear();
    if let Some(check) = injected {
        sink.emit(&Record::new(
            "run",
            "host",
            measure::params! {},
            Body::Check(check),
        ))?;
    }

    // The report is made from the file alone, exactly as `ccbench report` would.
    let records = read_records(&results)?;
    let written = report::write_report(&records, &out_dir, &report::Options::default())
        .with_context(|| format!("writing the report into {}", out_dir.display()))?;
    // The tables, ending with the cost summary, then the checks' verdicts.
    println!("{}", report::terminal_summary(&records));
    let verdicts = Verdicts::of(&records);
    println!("{}", verdicts.render_terminal());
    println!(
        "{} records in {}; report: {}",
        records.len(),
        results.display(),
        written.html.display()
    );
    if !args.no_history {
        let status = if interrupted {
            history::RunStatus::Interrupted
        } else if failed.is_empty() {
            history::RunStatus::Complete
        } else {
            history::RunStatus::Failed
        };
        crate::history::record(
            &args.history,
            args.machine_name.as_deref(),
            &results,
            status,
        );
    }
    match outcome(interrupted, !failed.is_empty(), &verdicts, args.strict) {
        Outcome::Interrupted => {
            eprintln!("interrupted: the results file holds every record measured before Ctrl-C");
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        Outcome::ScenarioFailed => anyhow::bail!(
            "{} scenario(s) failed:\n  {}",
            failed.len(),
            failed.join("\n  ")
        ),
        Outcome::CheckFailed => {
            let what = if args.strict {
                format!(
                    "--strict: {} check(s) of this run's data failed and {} warned",
                    verdicts.run.fail, verdicts.run.warn
                )
            } else {
                format!("{} check(s) of this run's data failed", verdicts.run.fail)
            };
            eprintln!(
                "{what}; results, report and plots are written (exit status {EXIT_CHECK_FAILED})"
            );
            Ok(ExitCode::from(EXIT_CHECK_FAILED))
        }
        Outcome::Success => Ok(ExitCode::SUCCESS),
    }
}

/// How a run ended, most important first: the exit status follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Ctrl-C: exit 130.
    Interrupted,
    /// A scenario returned an error: exit 1.
    ScenarioFailed,
    /// A check of the run's own data failed (or warned, under `--strict`): exit 3.
    CheckFailed,
    /// Exit 0.
    Success,
}

/// The outcome of a run from what happened and the checks' verdicts. Checks of published
/// figures never fail a run.
pub fn outcome(
    interrupted: bool,
    scenario_failed: bool,
    verdicts: &Verdicts,
    strict: bool,
) -> Outcome {
    if interrupted {
        Outcome::Interrupted
    } else if scenario_failed {
        Outcome::ScenarioFailed
    } else if verdicts.fails_run(strict) {
        Outcome::CheckFailed
    } else {
        Outcome::Success
    }
}

/// Test-only: `CCBENCH_TEST_CHECK=fail|warn|published-fail` makes a run emit one check of that
/// verdict (scenario `run`), so that the exit path can be tested end to end without a broken
/// scenario. Unset in normal use.
fn injected_check() -> Result<Option<Check>> {
    let Some(v) = std::env::var_os("CCBENCH_TEST_CHECK") else {
        return Ok(None);
    };
    let name = "injected by CCBENCH_TEST_CHECK";
    let message = "a test-only check, not a measurement";
    Ok(Some(match v.to_str() {
        Some("fail") => Check::run(name, Verdict::Fail, message),
        Some("warn") => Check::run(name, Verdict::Warn, message),
        Some("published-fail") => Check::published(name, Verdict::Fail, message),
        _ => {
            return Err(Exit::usage(format!(
                "CCBENCH_TEST_CHECK must be fail, warn or published-fail, got {v:?}"
            ))
            .into());
        }
    }))
}

/// Writes `records` (after this machine's environment record) as `results.jsonl` in
/// `out_dir`, then the report from that file, as `run` does; returns the HTML report's path.
pub fn save(out_dir: &Path, records: &[Record]) -> Result<PathBuf> {
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("creating the output folder {}", out_dir.display()))?;
    let results = out_dir.join("results.jsonl");
    let sink = RecordSink::create(&results)?;
    sink.write(&Record::new(
        "run",
        "host",
        measure::params! {},
        Body::Env(capture_env()),
    ))?;
    for r in records {
        sink.write(r)?;
    }
    drop(sink);
    let records = read_records(&results)?;
    let written = report::write_report(&records, out_dir, &report::Options::default())
        .with_context(|| format!("writing the report into {}", out_dir.display()))?;
    Ok(written.html)
}

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    // A run folder stands for its results file, as in `compare`.
    let results = if args.results.is_dir() {
        let inside = args.results.join("results.jsonl");
        if !inside.is_file() {
            anyhow::bail!(
                "{} is a folder without a results.jsonl: give a results file or a run folder",
                args.results.display()
            );
        }
        inside
    } else {
        args.results
    };
    let records = read_records(&results)?;
    let out_dir = match args.out {
        Some(d) => d,
        None => results
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_owned(),
    };
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("creating the output folder {}", out_dir.display()))?;
    let written = report::write_report(&records, &out_dir, &report::Options::default())
        .with_context(|| format!("writing the report into {}", out_dir.display()))?;
    println!("{}", report::terminal_summary(&records));
    println!("{}", Verdicts::of(&records).render_terminal());
    println!("report: {}", written.html.display());
    Ok(ExitCode::SUCCESS)
}

/// The results files a compare argument stands for: a file; a run folder holding
/// `results.jsonl`; or a folder of run folders (as `ccbench ab` writes), in name order.
pub fn run_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let direct = path.join("results.jsonl");
    if direct.is_file() {
        return Ok(vec![direct]);
    }
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(path).with_context(|| format!("reading the folder {}", path.display()))?
    {
        let entry = entry.with_context(|| format!("reading the folder {}", path.display()))?;
        let f = entry.path().join("results.jsonl");
        if f.is_file() {
            files.push(f);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(Exit::usage(format!(
            "{} holds no results.jsonl, and no folder that holds one",
            path.display()
        ))
        .into());
    }
    Ok(files)
}

fn read_side(paths: &[PathBuf]) -> Result<Vec<Vec<Record>>> {
    let mut runs = Vec::new();
    for p in paths {
        for f in run_files(p)? {
            runs.push(read_records(&f)?);
        }
    }
    Ok(runs)
}

fn compare_options(o: &CompareOpts) -> report::compare::CompareOptions {
    report::compare::CompareOptions {
        alpha: o.alpha,
        threshold: o.threshold / 100.0,
        gross_ratio: o.gross_threshold,
    }
}

/// Prints a comparison and decides the exit status.
pub fn compare_sides(a: &[Vec<Record>], b: &[Vec<Record>], o: &CompareOpts) -> ExitCode {
    let cmp = report::compare::compare_runs(a, b, &compare_options(o));
    if o.markdown {
        println!("{}", cmp.render_markdown());
    } else {
        println!("{}", cmp.render_terminal());
    }
    if o.fail_on_regression && cmp.has_regression() {
        eprintln!(
            "regression: at least one significant slowdown beyond the threshold, or a slowdown \
             beyond the gross threshold that the test cannot decide (unstable records do not \
             count)"
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let (a_paths, b_paths) = if args.candidate.is_empty() {
        match args.baseline.as_slice() {
            [a, b] => (vec![a.clone()], vec![b.clone()]),
            _ => {
                return Err(Exit::usage(format!(
                    "compare takes two paths (A B), or several per side separated by `--` \
                     (A1 A2 -- B1 B2); got {} path(s) and no `--`",
                    args.baseline.len()
                ))
                .into());
            }
        }
    } else {
        (args.baseline.clone(), args.candidate.clone())
    };
    let a = read_side(&a_paths)?;
    let b = read_side(&b_paths)?;
    Ok(compare_sides(&a, &b, &args.opts))
}

/// Which side runs at position `i` of an A/B interleaving: A B B A A B B A ..., so that a
/// linear drift of the machine over time adds the same to both sides.
pub fn ab_side(i: usize) -> usize {
    [0, 1, 1, 0][i % 4]
}

pub fn ab(args: AbArgs) -> Result<ExitCode> {
    if args.command.first().map(String::as_str) != Some("run") {
        return Err(Exit::usage(
            "ab runs `run ...` on each binary: put `-- run SCENARIO... [options]` last",
        )
        .into());
    }
    if args
        .command
        .iter()
        .any(|a| a == "--out" || a.starts_with("--out="))
    {
        return Err(Exit::usage("ab chooses each run's --out itself; leave it out").into());
    }
    for bin in [&args.a, &args.b] {
        if !bin.is_file() {
            return Err(Exit::usage(format!("{} is not a file", bin.display())).into());
        }
    }
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = measure::env::rfc3339_utc(SystemTime::now()).replace(':', "-");
        Path::new("results").join(format!("ab-{stamp}"))
    });
    let sides = [("a", &args.a), ("b", &args.b)];
    let runs = args.runs as usize;
    let quiet = args.command.iter().any(|a| a == "--quiet" || a == "-q");
    let mut done = [0usize; 2];
    // Every block of four positions (and the last two of 2N) gives each side the same count.
    for i in 0..2 * runs {
        let side = ab_side(i);
        done[side] += 1;
        let (name, bin) = sides[side];
        let dir = out.join(name).join(format!("run-{:02}", done[side]));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the output folder {}", dir.display()))?;
        eprintln!(
            "ab: run {}/{}: {} ({}) -> {}",
            i + 1,
            2 * runs,
            name.to_uppercase(),
            bin.display(),
            dir.display()
        );
        let status = std::process::Command::new(bin)
            .args(&args.command)
            .args((!quiet).then_some("--quiet"))
            .arg("--out")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .status()
            .with_context(|| format!("starting {}", bin.display()))?;
        // A run whose checks failed still measured: its results count.
        match status.code() {
            Some(0) => {}
            Some(c) if c == i32::from(crate::EXIT_CHECK_FAILED) => eprintln!(
                "ab: {} exited {c}: a check failed on its data (see {}/report.md); its \
                 results are compared all the same",
                bin.display(),
                dir.display()
            ),
            _ => anyhow::bail!(
                "{} {} failed ({status}); the runs so far are in {}",
                bin.display(),
                args.command.join(" "),
                out.display()
            ),
        }
    }
    let a = read_side(&[out.join("a")])?;
    let b = read_side(&[out.join("b")])?;
    println!(
        "A: {} ({} runs), B: {} ({} runs), interleaved; results in {}",
        args.a.display(),
        a.len(),
        args.b.display(),
        b.len(),
        out.display()
    );
    Ok(compare_sides(&a, &b, &args.opts))
}

/// The hypervisor's steal while `scenario` ran, between two `/proc/stat` readings, as a check
/// of the machine: a warning where at least 5% of the CPU time the machine wanted went to
/// other guests (its timings are then slower and more variable than the code makes them).
/// `None` where either reading is unknown.
fn steal_check(
    scenario: &str,
    before: Option<MachineTicks>,
    after: Option<MachineTicks>,
) -> Option<Check> {
    let steal = after?.steal_since(&before?)?;
    let share = format!(
        "the hypervisor gave {:.1}% of the CPU time this machine wanted during {scenario} to \
         other guests ({} of {} ticks)",
        100.0 * steal.share(),
        steal.stolen,
        steal.wanted
    );
    let (verdict, message) = if steal.notable() {
        (
            Verdict::Warn,
            format!(
                "{share}: its timings are slower and vary more from run to run than the code \
                 makes them; compare them with runs of similar steal"
            ),
        )
    } else {
        (Verdict::Pass, share)
    };
    Some(Check {
        subject: CheckSubject::Machine,
        ..Check::run("hypervisor steal", verdict, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use measure::params;

    #[test]
    fn steal_over_a_scenario_is_a_check_of_the_machine() {
        let at = |busy: u64, idle: u64, steal: u64| {
            MachineTicks::parse(&format!(
                "cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\n"
            ))
        };
        let before = at(1000, 1000, 100);
        // 600 busy, 400 idle, 300 stolen: 300 of the 900 ticks wanted.
        let c = steal_check("gc-2pc", before, at(1600, 1400, 400)).unwrap();
        assert_eq!(c.subject, CheckSubject::Machine);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.message.starts_with(
                "the hypervisor gave 33.3% of the CPU time this machine wanted during gc-2pc \
                 to other guests (300 of 900 ticks): "
            ),
            "{}",
            c.message
        );
        // 2 of 1000 wanted: a pass that still says how much.
        let c = steal_check("x509", before, at(1998, 1400, 102)).unwrap();
        assert_eq!(c.verdict, Verdict::Pass);
        assert!(c.message.contains("0.2% of the CPU time"), "{}", c.message);
        // Unknown or backwards readings: no check.
        assert!(steal_check("x509", None, before).is_none());
        assert!(steal_check("x509", at(1600, 1400, 400), before).is_none());
        // It never fails the run, even under --strict.
        let v = verdicts(vec![steal_check("s", before, at(1600, 1400, 400)).unwrap()]);
        assert_eq!(outcome(false, false, &v, true), Outcome::Success);
    }

    fn verdicts(checks: Vec<Check>) -> Verdicts {
        let records: Vec<Record> = checks
            .into_iter()
            .map(|c| Record::new("s", "native", params! {}, Body::Check(c)))
            .collect();
        Verdicts::of(&records)
    }

    #[test]
    fn the_exit_status_follows_the_checks_of_the_run() {
        let pass = verdicts(vec![Check::run("a", Verdict::Pass, "")]);
        let warn = verdicts(vec![Check::run("a", Verdict::Warn, "")]);
        let fail = verdicts(vec![Check::run("a", Verdict::Fail, "")]);
        let published = verdicts(vec![Check::published("a", Verdict::Fail, "")]);
        assert_eq!(outcome(false, false, &pass, true), Outcome::Success);
        assert_eq!(outcome(false, false, &warn, false), Outcome::Success);
        assert_eq!(outcome(false, false, &warn, true), Outcome::CheckFailed);
        assert_eq!(outcome(false, false, &fail, false), Outcome::CheckFailed);
        assert_eq!(outcome(false, false, &published, true), Outcome::Success);
        // Precedence: Ctrl-C, then a scenario's error, then the checks.
        assert_eq!(outcome(false, true, &fail, false), Outcome::ScenarioFailed);
        assert_eq!(outcome(true, true, &fail, false), Outcome::Interrupted);
    }

    #[test]
    fn ab_interleaving_is_balanced() {
        for runs in 1..10 {
            let a = (0..2 * runs).filter(|&i| ab_side(i) == 0).count();
            assert_eq!(a, runs);
        }
    }
}
