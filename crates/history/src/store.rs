//! What the history keeps, whatever the database: runs with their environment, machine,
//! build, verdicts and every record (raw samples included), tags naming runs, and the
//! machines seen.

use measure::record::{Body, Record, Verdict};

use crate::machine::Machine;

/// Why a history operation failed. Every message names the database.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The database could not be opened, read or written (locked, read-only, full, corrupt).
    #[error("history {db}: {message}")]
    Database {
        /// The database's path or address.
        db: String,
        /// What went wrong.
        message: String,
    },
    /// The database was written by a newer ccbench (its schema is ahead of this build's).
    #[error(
        "history {db}: schema version {found} is newer than this ccbench reads ({supported}); \
         use a newer ccbench"
    )]
    NewerSchema {
        /// The database.
        db: String,
        /// Its schema version.
        found: i64,
        /// The version this build reads and writes.
        supported: i64,
    },
    /// A run, tag or selector that names nothing.
    #[error("history {db}: {what}")]
    NotFound {
        /// The database.
        db: String,
        /// What was looked for.
        what: String,
    },
    /// A run to record that is not a run (no environment record first).
    #[error("not a run: {0}")]
    NotARun(String),
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Every selected scenario ran.
    Complete,
    /// Ctrl-C: the records are what was measured before it.
    Interrupted,
    /// A scenario failed.
    Failed,
}

impl RunStatus {
    /// The status's name in the database and in listings.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }

    /// The status of a name written by [`RunStatus::name`].
    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            "failed" => RunStatus::Failed,
            _ => return None,
        })
    }
}

/// A run to record: its records as a results file holds them (the environment record first).
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// Every record of the run, in order.
    pub records: &'a [Record],
    /// How it ended.
    pub status: RunStatus,
    /// The machine's name given by the user, if any.
    pub machine_name: Option<&'a str>,
    /// Where it came from: `run`, `ab`, or `import <path>`.
    pub source: String,
}

/// A stored run, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The run's number in this database.
    pub id: i64,
    /// When it started (RFC 3339 UTC, from its environment record).
    pub started: String,
    /// The machine's fingerprint.
    pub machine: String,
    /// The machine's name, when one was given.
    pub machine_name: Option<String>,
    /// The build's git commit.
    pub commit: String,
    /// The build's profile.
    pub profile: String,
    /// How it ended.
    pub status: RunStatus,
    /// The scenarios that emitted records, in order of their first record.
    pub scenarios: Vec<String>,
    /// Checks of the run's own data: pass, warn, fail.
    pub verdicts: [u64; 3],
    /// Records stored.
    pub records: u64,
    /// Where it came from.
    pub source: String,
    /// Tags naming it.
    pub tags: Vec<String>,
}

/// Which runs a listing shows.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only this machine (a fingerprint or a name).
    pub machine: Option<String>,
    /// At most this many, the newest.
    pub limit: Option<usize>,
}

/// A database of runs. SQLite by default ([`crate::sqlite::Sqlite`]).
pub trait Store {
    /// The database's path or address, for messages.
    fn location(&self) -> &str;
    /// Stores a run whole (in one transaction: a failure stores nothing) and returns its id.
    fn record_run(&mut self, run: &NewRun<'_>) -> Result<i64, HistoryError>;
    /// Runs, newest first: by the time they started, then by number (an imported run
    /// takes its place by its time, not by when it was imported).
    fn runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, HistoryError>;
    /// One run's records, in their order.
    fn records(&self, run: i64) -> Result<Vec<Record>, HistoryError>;
    /// One run's measurement records of `scenario` named `name`, in their order: what a
    /// series needs of a run, read through the database's index on names rather than by
    /// parsing every record.
    fn measurements(
        &self,
        run: i64,
        scenario: &str,
        name: &str,
    ) -> Result<Vec<Record>, HistoryError>;
    /// Names a run (a baseline); a tag names one run, and moves when given again.
    fn tag(&mut self, run: i64, name: &str) -> Result<(), HistoryError>;
    /// The run a tag names.
    fn tagged(&self, name: &str) -> Result<Option<i64>, HistoryError>;
    /// Every machine seen, with its name if one was given.
    fn machines(&self) -> Result<Vec<Machine>, HistoryError>;
}

/// What a run's records say of it: its environment (the first record), the scenarios that
/// emitted records, and the verdicts of the checks of its own data.
pub(crate) struct Summary<'a> {
    pub env: &'a measure::record::Env,
    pub scenarios: Vec<String>,
    pub verdicts: [u64; 3],
}

impl<'a> Summary<'a> {
    pub fn of(records: &'a [Record]) -> Result<Summary<'a>, HistoryError> {
        let env = records
            .iter()
            .find_map(|r| match &r.body {
                Body::Env(e) => Some(e),
                _ => None,
            })
            .ok_or_else(|| HistoryError::NotARun("no environment record".into()))?;
        let mut scenarios: Vec<String> = Vec::new();
        let mut verdicts = [0u64; 3];
        for r in records {
            if r.scenario != "run" && !scenarios.contains(&r.scenario) {
                scenarios.push(r.scenario.clone());
            }
            if let Body::Check(c) = &r.body
                && c.subject == measure::record::CheckSubject::Run
            {
                verdicts[match c.verdict {
                    Verdict::Pass => 0,
                    Verdict::Warn => 1,
                    Verdict::Fail => 2,
                }] += 1;
            }
        }
        Ok(Summary {
            env,
            scenarios,
            verdicts,
        })
    }
}

/// Refuses a tag name that would read as a run number or selector (or could not be listed).
pub(crate) fn check_tag_name(db: &str, name: &str) -> Result<(), HistoryError> {
    if name.is_empty()
        || name.bytes().all(|b| b.is_ascii_digit())
        || name.contains(char::is_whitespace)
        || name.starts_with("last")
        || name.contains("..")
    {
        return Err(HistoryError::NotFound {
            db: db.to_owned(),
            what: format!("{name:?} cannot be a tag: it would read as a run number or selector"),
        });
    }
    Ok(())
}

/// The runs a selector names: a run number, a tag, `last` (the run that started last),
/// `last~N` (the N-th before it), or `A..B` (run numbers A to B, both included, that exist).
pub fn select(store: &dyn Store, selector: &str) -> Result<Vec<i64>, HistoryError> {
    let not_found = |what: String| HistoryError::NotFound {
        db: store.location().to_owned(),
        what,
    };
    let all = || -> Result<Vec<i64>, HistoryError> {
        Ok(store
            .runs(&RunFilter::default())?
            .iter()
            .map(|r| r.id)
            .collect())
    };
    if let Some((a, b)) = selector.split_once("..")
        && let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>())
    {
        let mut ids: Vec<i64> = all()?.into_iter().filter(|&i| a <= i && i <= b).collect();
        ids.sort();
        if ids.is_empty() {
            return Err(not_found(format!("no run numbered {a} to {b}")));
        }
        return Ok(ids);
    }
    if let Ok(id) = selector.parse::<i64>() {
        return if all()?.contains(&id) {
            Ok(vec![id])
        } else {
            Err(not_found(format!("no run {id}")))
        };
    }
    if let Some(back) = selector
        .strip_prefix("last")
        .map(|rest| rest.strip_prefix('~').unwrap_or(rest))
        && (back.is_empty() || back.bytes().all(|b| b.is_ascii_digit()))
    {
        let n: usize = if back.is_empty() {
            0
        } else {
            back.parse()
                .map_err(|_| not_found(format!("no run {selector}")))?
        };
        return all()?
            .get(n)
            .map(|&id| vec![id])
            .ok_or_else(|| not_found(format!("no run {selector}: the history holds fewer")));
    }
    store
        .tagged(selector)?
        .map(|id| vec![id])
        .ok_or_else(|| not_found(format!("no run or tag named {selector:?}")))
}
