//! The subcommands: each resolves its arguments, calls the libraries and decides what to print
//! and which exit status to return.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result};
use measure::env::{BuildInfo, Env};
use measure::jsonl::{RecordSink, read_records};
use measure::record::{Body, Record};
use scenarios::{Context, Emit, Preset, RunOptions, ScalingSelection, ScenarioError};

use crate::args::{CompareArgs, ReportArgs, RunArgs, Scaling};
use crate::progress::Bar;
use crate::{EXIT_INTERRUPTED, Exit};

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
fn capture_env() -> Env {
    let mut env = Env::capture(build_info());
    // The minimum over a few large batches: the harness's floor, not the machine's noise.
    let overhead = (0..20)
        .map(|_| measure::sampler::harness_overhead_ns(1_000_000))
        .fold(f64::INFINITY, f64::min);
    env.harness_overhead_ns = Some(overhead);
    env
}

pub fn list() -> Result<ExitCode> {
    let width = scenarios::registry()
        .iter()
        .map(|s| s.name().len())
        .max()
        .unwrap_or(0);
    for s in scenarios::registry() {
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
fn default_out_dir() -> PathBuf {
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

fn install_ctrlc(bar_quiet: bool) -> Arc<AtomicBool> {
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

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let selected = scenarios::resolve(&args.scenarios).map_err(|e| Exit::usage(e.to_string()))?;
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
    };
    let sink = Sink {
        file: RecordSink::create(&results)?,
        count: Mutex::new(0),
    };
    let cancel = install_ctrlc(args.quiet);
    let bar = Bar::new(args.quiet);

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
        match scenario.run(&ctx) {
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

    // The report is made from the file alone, exactly as `ccbench report` would.
    let records = read_records(&results)?;
    let written = report::write_report(&records, &out_dir, &report::Options::default())
        .with_context(|| format!("writing the report into {}", out_dir.display()))?;
    println!("{}", report::terminal_summary(&records));
    println!(
        "{} records in {}; report: {}",
        records.len(),
        results.display(),
        written.html.display()
    );
    if interrupted {
        eprintln!("interrupted: the results file holds every record measured before Ctrl-C");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} scenario(s) failed:\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let records = read_records(&args.results)?;
    let out_dir = match args.out {
        Some(d) => d,
        None => args
            .results
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
    println!("report: {}", written.html.display());
    Ok(ExitCode::SUCCESS)
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let a = read_records(&args.baseline)?;
    let b = read_records(&args.candidate)?;
    let opts = report::compare::CompareOptions {
        alpha: args.alpha,
        threshold: args.threshold / 100.0,
    };
    let cmp = report::compare::compare(&a, &b, &opts);
    if args.markdown {
        println!("{}", cmp.render_markdown());
    } else {
        println!("{}", cmp.render_terminal());
    }
    if args.fail_on_regression && cmp.has_regression() {
        eprintln!("regression: at least one significant slowdown beyond the threshold");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
