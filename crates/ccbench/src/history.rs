//! `ccbench history` and the recording of every run: opening the store the options name,
//! and printing what the `history` crate returns.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use history::{Key, NewRun, Postgres, RunFilter, RunInfo, RunStatus, Sqlite, Store};
use measure::record::Record;

use crate::Exit;
use crate::args::{HistoryArgs, HistoryCommand, HistoryLocation};
use crate::run::compare_sides;

/// The environment variable that names the history database.
pub const ENV_HISTORY: &str = "CCBENCH_HISTORY";

/// Where a history lives: an SQLite file or a PostgreSQL server.
enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

/// The database `--history`, else `$CCBENCH_HISTORY`, else the default file names: a
/// `postgres://` or `postgresql://` URL is a server, anything else a file.
fn location_of(location: &HistoryLocation) -> Result<Location> {
    let given = location
        .history
        .clone()
        .map(PathBuf::into_os_string)
        .or_else(|| std::env::var_os(ENV_HISTORY).filter(|v| !v.is_empty()));
    if let Some(given) = given {
        return Ok(match given.to_str() {
            Some(url) if history::postgres::is_url(url) => Location::Postgres(url.to_owned()),
            _ => Location::Sqlite(PathBuf::from(given)),
        });
    }
    Sqlite::default_path().map(Location::Sqlite).ok_or_else(|| {
        Exit::usage(format!(
            "no data directory for the history (set HOME, XDG_DATA_HOME or {ENV_HISTORY}, or \
             pass --history PATH|URL)"
        ))
        .into()
    })
}

/// Opens the history the options name; past this, both stores take the same code path.
fn open(location: &HistoryLocation) -> Result<Box<dyn Store>> {
    Ok(match location_of(location)? {
        Location::Sqlite(path) => Box::new(Sqlite::open(&path)?),
        Location::Postgres(url) => Box::new(Postgres::open(&url)?),
    })
}

/// Records a finished run, or says once why it could not: the history never fails a run.
pub fn record(
    location: &HistoryLocation,
    machine_name: Option<&str>,
    results: &Path,
    status: RunStatus,
) {
    let outcome = (|| -> Result<(i64, String)> {
        let records = measure::jsonl::read_records(results)?;
        let mut store = open(location)?;
        let id = store.record_run(&NewRun {
            records: &records,
            status,
            machine_name,
            source: "run".into(),
        })?;
        Ok((id, store.location().to_owned()))
    })();
    match outcome {
        Ok((id, db)) => eprintln!("history: run {id} recorded in {db}"),
        Err(e) => eprintln!(
            "warning: this run was not recorded in the history: {}",
            crate::error_message(&e)
        ),
    }
}

pub fn history(args: HistoryArgs) -> Result<ExitCode> {
    match args.command {
        HistoryCommand::List { machine, limit } => {
            let store = open(&args.location)?;
            let runs = store.runs(&RunFilter {
                machine,
                limit: Some(limit),
            })?;
            print_runs(&runs);
            if runs.is_empty() {
                eprintln!("the history {} holds no run yet", store.location());
            }
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Show { run } => {
            let store = open(&args.location)?;
            let ids = history::select(&*store, &run)?;
            for id in ids {
                let records = store.records(id)?;
                println!("run {id}");
                println!("{}", report::terminal_summary(&records));
            }
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Tag { run, name } => {
            let mut store = open(&args.location)?;
            let ids = history::select(&*store, &run)?;
            let [id] = ids[..] else {
                return Err(Exit::usage(format!(
                    "{run} names {} runs; a tag names one",
                    ids.len()
                ))
                .into());
            };
            store.tag(id, &name)?;
            println!("{name} -> run {id}");
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Compare {
            base,
            cand,
            machine,
            runs,
            opts,
        } => {
            let store = open(&args.location)?;
            let (a, b) = match (base, cand, &machine[..]) {
                (Some(a), Some(b), []) => (
                    side(&*store, &history::select(&*store, &a)?)?,
                    side(&*store, &history::select(&*store, &b)?)?,
                ),
                (None, None, [ma, mb]) => {
                    let latest = |m: &str| -> Result<Vec<Vec<Record>>> {
                        let rs = store.runs(&RunFilter {
                            machine: Some(m.to_owned()),
                            limit: Some(runs.max(1)),
                        })?;
                        if rs.is_empty() {
                            return Err(Exit::usage(format!(
                                "no run of machine {m:?} in {} (see `ccbench history machines`)",
                                store.location()
                            ))
                            .into());
                        }
                        side(&*store, &rs.iter().map(|r| r.id).collect::<Vec<_>>())
                    };
                    println!("A: machine {ma}, B: machine {mb} (cost of B against A per workload)");
                    (latest(ma)?, latest(mb)?)
                }
                _ => {
                    return Err(Exit::usage(
                        "history compare takes two sides (BASE CAND) or two --machine",
                    )
                    .into());
                }
            };
            Ok(compare_sides(&a, &b, &opts))
        }
        HistoryCommand::Trend {
            measurement,
            params,
            machine,
            alpha,
            fail_on_change,
            plot,
        } => {
            let store = open(&args.location)?;
            let key = Key::parse(&measurement, &params).map_err(Exit::usage)?;
            let cfg = history::changepoint::Config {
                alpha,
                ..Default::default()
            };
            let s = history::series(
                &*store,
                &key,
                &RunFilter {
                    machine,
                    limit: None,
                },
                &cfg,
            )?;
            print_trend(&s);
            if let Some(path) = plot {
                write_plot(&trend_of(&s), &path)?;
                eprintln!("plot: {}", path.display());
            }
            if fail_on_change && !s.changes.is_empty() {
                eprintln!(
                    "change: {} change point(s) at alpha {alpha}",
                    s.changes.len()
                );
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Report {
            out,
            machine,
            last,
            alpha,
            plot_all,
            fail_on_change,
        } => {
            let store = open(&args.location)?;
            let cfg = history::changepoint::Config {
                alpha,
                ..Default::default()
            };
            let filter = RunFilter {
                machine: machine.clone(),
                limit: last,
            };
            let all = history::every_series(&*store, &filter, &cfg)?;
            let trends: Vec<report::trend::Trend> = all.iter().map(trend_of).collect();
            let which = match (&machine, last) {
                (Some(m), Some(n)) => format!("the newest {n} runs of machine {m}"),
                (Some(m), None) => format!("the runs of machine {m}"),
                (None, Some(n)) => format!("the newest {n} runs"),
                (None, None) => "every run".to_owned(),
            };
            let page = report::trend::HistoryPage {
                title: "ccbench history".to_owned(),
                source: format!("From {}, {which}:", store.location()),
                alpha,
                plot_all,
                png: true,
            };
            let w = report::trend::write_history(&trends, &out, &page)?;
            let changed = trends.iter().filter(|t| !t.steps.is_empty()).count();
            println!(
                "{} measurement(s), {changed} with a change point: {}",
                trends.len(),
                w.html.display()
            );
            if fail_on_change && changed > 0 {
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Machines => {
            let store = open(&args.location)?;
            println!(
                "{:<16}  {:<14} {:<24} {:>5} {:>8}  {:<18} tee",
                "machine", "name", "cpu", "cores", "memory", "kernel"
            );
            for m in store.machines()? {
                println!(
                    "{:<16}  {:<14} {:<24} {:>5} {:>6.1} G  {:<18} {}",
                    m.id,
                    m.name.as_deref().unwrap_or("-"),
                    m.cpu_model,
                    m.cores,
                    m.memory_bytes as f64 / (1u64 << 30) as f64,
                    m.kernel,
                    m.tee
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        HistoryCommand::Import {
            paths,
            machine_name,
        } => {
            let mut store = open(&args.location)?;
            let mut n = 0;
            for p in &paths {
                for f in crate::run::run_files(p)? {
                    let records = measure::jsonl::read_records(&f)?;
                    let id = store
                        .record_run(&NewRun {
                            records: &records,
                            status: RunStatus::Complete,
                            machine_name: machine_name.as_deref(),
                            source: format!("import {}", f.display()),
                        })
                        .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
                    println!("{} -> run {id}", f.display());
                    n += 1;
                }
            }
            eprintln!("{n} run(s) imported into {}", store.location());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The records of each run of one side.
fn side(store: &dyn Store, ids: &[i64]) -> Result<Vec<Vec<Record>>> {
    ids.iter()
        .map(|&id| Ok(store.records(id)?))
        .collect::<Result<Vec<_>>>()
}

fn print_runs(runs: &[RunInfo]) {
    println!(
        "{:>5}  {:<20}  {:<16}  {:<18}  {:<11}  {:>14}  scenarios",
        "run", "started (UTC)", "machine", "commit", "status", "pass/warn/fail"
    );
    for r in runs {
        let tags = if r.tags.is_empty() {
            String::new()
        } else {
            format!("  [{}]", r.tags.join(", "))
        };
        println!(
            "{:>5}  {:<20}  {:<16}  {:<18}  {:<11}  {:>14}  {}{tags}",
            r.id,
            r.started,
            r.machine_name.as_deref().unwrap_or(&r.machine),
            r.commit,
            r.status.name(),
            format!("{}/{}/{}", r.verdicts[0], r.verdicts[1], r.verdicts[2]),
            r.scenarios.join(" ")
        );
    }
}

/// A series as the report draws it.
fn trend_of(s: &history::Series) -> report::trend::Trend {
    report::trend::Trend {
        measurement: s.key.to_string(),
        points: s
            .points
            .iter()
            .map(|p| report::trend::TrendPoint {
                run: p.run.id,
                started: p.run.started.clone(),
                commit: p.run.commit.clone(),
                median_ns: p.median_ns,
                ci_ns: p.ci_ns,
            })
            .collect(),
        steps: s
            .changes
            .iter()
            .map(|c| report::trend::TrendStep {
                index: c.index,
                p_value: c.p_value,
                before_ns: c.before,
                after_ns: c.after,
            })
            .collect(),
    }
}

/// Writes a trend's plot to `path`, SVG or PNG by its extension, atomically.
fn write_plot(t: &report::trend::Trend, path: &Path) -> Result<()> {
    let bytes = match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => t.to_svg()?.into_bytes(),
        Some(e) if e.eq_ignore_ascii_case("png") => t.to_png()?,
        _ => {
            return Err(Exit::usage(format!(
                "--plot {}: name a .svg or .png file",
                path.display()
            ))
            .into());
        }
    };
    crate::atomic::write_atomically(path, |f| std::io::Write::write_all(f, &bytes))
}

fn print_trend(s: &history::Series) {
    let k = &s.key;
    println!(
        "{}/{}{} {}: {} run(s)",
        k.scenario,
        k.name,
        k.backend
            .as_deref()
            .map(|b| format!("@{b}"))
            .unwrap_or_default(),
        k.params
            .iter()
            .map(|(a, b)| format!("{a}={b}"))
            .collect::<Vec<_>>()
            .join(" "),
        s.points.len()
    );
    println!(
        "{:>5}  {:<20}  {:<18}  {:>12}  {:>25}",
        "run", "started (UTC)", "commit", "median", "95% CI"
    );
    for (i, p) in s.points.iter().enumerate() {
        let mark = s
            .changes
            .iter()
            .find(|c| c.index == i)
            .map(|c| format!("  <- change: x{:.3} (p = {:.3})", c.ratio(), c.p_value))
            .unwrap_or_default();
        println!(
            "{:>5}  {:<20}  {:<18}  {:>12}  {:>25}{mark}",
            p.run.id,
            p.run.started,
            p.run.commit,
            report::units::duration_ns(p.median_ns),
            format!(
                "{} - {}",
                report::units::duration_ns(p.ci_ns.0),
                report::units::duration_ns(p.ci_ns.1)
            ),
        );
    }
    if s.changes.is_empty() {
        println!("no change point");
    }
}
