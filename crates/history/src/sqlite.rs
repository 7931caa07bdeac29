//! The history in an SQLite file (bundled SQLite, WAL mode): the default store, one file
//! per user under the data directory, safe for several ccbench processes writing at once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use measure::record::Record;
use rusqlite::{Connection, OptionalExtension, params};

use crate::machine::Machine;
use crate::store::{
    HistoryError, NewRun, RunFilter, RunInfo, RunStatus, Store, Summary, check_tag_name,
};

/// The schema this build reads and writes. Each step of `MIGRATIONS` takes a database one
/// version up; a database at a higher version is refused, never rewritten.
pub const SCHEMA_VERSION: i64 = 1;

/// The schema, one step per version (index 0 takes an empty database to version 1).
const MIGRATIONS: &[&str] = &["
    CREATE TABLE machines (
        id TEXT PRIMARY KEY,
        name TEXT,
        cpu_model TEXT NOT NULL,
        cores INTEGER NOT NULL,
        memory_bytes INTEGER NOT NULL,
        kernel TEXT NOT NULL,
        tee TEXT NOT NULL,
        first_seen TEXT NOT NULL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        started TEXT NOT NULL,
        machine TEXT NOT NULL REFERENCES machines(id),
        machine_name TEXT,
        git_commit TEXT NOT NULL,
        profile TEXT NOT NULL,
        status TEXT NOT NULL,
        scenarios TEXT NOT NULL,
        pass INTEGER NOT NULL,
        warn INTEGER NOT NULL,
        fail INTEGER NOT NULL,
        records INTEGER NOT NULL,
        source TEXT NOT NULL
    );
    CREATE INDEX runs_by_machine ON runs(machine, started);
    CREATE TABLE records (
        run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        scenario TEXT NOT NULL,
        backend TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT,
        line TEXT NOT NULL,
        PRIMARY KEY (run, seq)
    );
    CREATE INDEX records_by_name ON records(scenario, kind, name);
    CREATE TABLE tags (
        name TEXT PRIMARY KEY,
        run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE
    );
"];

/// An SQLite history.
pub struct Sqlite {
    conn: Connection,
    location: String,
}

impl Sqlite {
    /// The records a query of `(seq, line)` rows returns, parsed; `run` names them in errors.
    fn lines(
        &self,
        run: i64,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<Record>, HistoryError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(args, |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, line) = row.map_err(|e| self.err(e))?;
            out.push(
                measure::jsonl::parse_line(&line)
                    .map_err(|m| self.err(format!("run {run}, record {seq}: {m}")))?,
            );
        }
        Ok(out)
    }

    /// The default file: `ccbench/history.sqlite` under `$XDG_DATA_HOME` (else
    /// `~/.local/share`), beside the platform key.
    pub fn default_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("share"))
            })?;
        Some(base.join("ccbench").join("history.sqlite"))
    }

    /// Opens (creating it and its folder if missing) the history at `path`, migrating an
    /// older schema up. A database of a newer schema is refused.
    pub fn open(path: &Path) -> Result<Sqlite, HistoryError> {
        let location = path.display().to_string();
        let db = |e: &dyn std::fmt::Display| HistoryError::Database {
            db: location.clone(),
            message: e.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| db(&e))?;
        }
        let conn = Connection::open(path).map_err(|e| db(&e))?;
        let mut s = Sqlite { conn, location };
        s.init()?;
        Ok(s)
    }

    /// An in-memory history (tests).
    pub fn in_memory() -> Result<Sqlite, HistoryError> {
        let conn = Connection::open_in_memory().map_err(|e| HistoryError::Database {
            db: ":memory:".into(),
            message: e.to_string(),
        })?;
        let mut s = Sqlite {
            conn,
            location: ":memory:".into(),
        };
        s.init()?;
        Ok(s)
    }

    fn err(&self, e: impl std::fmt::Display) -> HistoryError {
        HistoryError::Database {
            db: self.location.clone(),
            message: e.to_string(),
        }
    }

    /// Pragmas, then the migrations this database has not had, each in its transaction.
    fn init(&mut self) -> Result<(), HistoryError> {
        // Another writer holds the lock for the length of one run's insert at most.
        self.conn
            .busy_timeout(Duration::from_secs(30))
            .map_err(|e| self.err(e))?;
        self.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| self.err(e))?;
        self.conn
            .pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| self.err(e))?;
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if version > SCHEMA_VERSION {
            return Err(HistoryError::NewerSchema {
                db: self.location.clone(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let location = self.location.clone();
        let err = |e: rusqlite::Error| HistoryError::Database {
            db: location.clone(),
            message: e.to_string(),
        };
        for (v, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err)?;
            // Another process may have migrated since we read the version.
            let now: i64 = tx
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(err)?;
            if now > v as i64 {
                continue;
            }
            let step = |e: rusqlite::Error| HistoryError::Database {
                db: location.clone(),
                message: format!("migrating to schema {}: {e}", v + 1),
            };
            tx.execute_batch(sql).map_err(step)?;
            tx.pragma_update(None, "user_version", (v + 1) as i64)
                .map_err(step)?;
            tx.commit().map_err(step)?;
        }
        Ok(())
    }
}

impl Store for Sqlite {
    fn location(&self) -> &str {
        &self.location
    }

    fn record_run(&mut self, run: &NewRun<'_>) -> Result<i64, HistoryError> {
        let summary = Summary::of(run.records)?;
        let machine = Machine::of(summary.env, run.machine_name);
        let lines = run
            .records
            .iter()
            .map(measure::jsonl::to_line)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let location = self.location.clone();
        let err = |e: rusqlite::Error| HistoryError::Database {
            db: location.clone(),
            message: e.to_string(),
        };
        // IMMEDIATE: take the write lock at the start, so that two writers queue instead of
        // one failing at its first write.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute(
            "INSERT INTO machines (id, name, cpu_model, cores, memory_bytes, kernel, tee, first_seen)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT(id) DO UPDATE SET name = COALESCE(excluded.name, machines.name)",
            params![
                machine.id,
                machine.name,
                machine.cpu_model,
                machine.cores as i64,
                machine.memory_bytes as i64,
                machine.kernel,
                machine.tee,
                summary.env.time_utc,
            ],
        )
        .map_err(err)?;
        tx.execute(
            "INSERT INTO runs (started, machine, machine_name, git_commit, profile, status,
                               scenarios, pass, warn, fail, records, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                summary.env.time_utc,
                machine.id,
                machine.name,
                summary.env.build.git_commit,
                summary.env.build.profile,
                run.status.name(),
                summary.scenarios.join(" "),
                summary.verdicts[0] as i64,
                summary.verdicts[1] as i64,
                summary.verdicts[2] as i64,
                run.records.len() as i64,
                run.source,
            ],
        )
        .map_err(err)?;
        let id = tx.last_insert_rowid();
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO records (run, seq, scenario, backend, kind, name, line)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(err)?;
            for (seq, (r, line)) in run.records.iter().zip(&lines).enumerate() {
                insert
                    .execute(params![
                        id,
                        seq as i64,
                        r.scenario,
                        r.backend,
                        r.kind(),
                        r.name(),
                        line
                    ])
                    .map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        Ok(id)
    }

    fn runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.id, r.started, r.machine, r.machine_name, r.git_commit, r.profile,
                        r.status, r.scenarios, r.pass, r.warn, r.fail, r.records, r.source,
                        (SELECT group_concat(t.name, ' ') FROM tags t WHERE t.run = r.id)
                 FROM runs r
                 WHERE ?1 IS NULL OR r.machine = ?1 OR r.machine_name = ?1
                 ORDER BY r.started DESC, r.id DESC
                 LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let limit = filter.limit.map_or(-1, |l| l as i64);
        let rows = stmt
            .query_map(params![filter.machine, limit], |row| {
                let status: String = row.get(6)?;
                let scenarios: String = row.get(7)?;
                let tags: Option<String> = row.get(13)?;
                Ok(RunInfo {
                    id: row.get(0)?,
                    started: row.get(1)?,
                    machine: row.get(2)?,
                    machine_name: row.get(3)?,
                    commit: row.get(4)?,
                    profile: row.get(5)?,
                    status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
                    scenarios: scenarios.split_whitespace().map(str::to_owned).collect(),
                    verdicts: [
                        row.get::<_, i64>(8)? as u64,
                        row.get::<_, i64>(9)? as u64,
                        row.get::<_, i64>(10)? as u64,
                    ],
                    records: row.get::<_, i64>(11)? as u64,
                    source: row.get(12)?,
                    tags: tags
                        .map(|t| t.split_whitespace().map(str::to_owned).collect())
                        .unwrap_or_default(),
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    fn records(&self, run: i64) -> Result<Vec<Record>, HistoryError> {
        self.lines(
            run,
            "SELECT seq, line FROM records WHERE run = ?1 ORDER BY seq",
            params![run],
        )
    }

    fn measurements(
        &self,
        run: i64,
        scenario: &str,
        name: &str,
    ) -> Result<Vec<Record>, HistoryError> {
        self.lines(
            run,
            "SELECT seq, line FROM records
             WHERE run = ?1 AND scenario = ?2 AND kind = 'measurement' AND name = ?3
             ORDER BY seq",
            params![run, scenario, name],
        )
    }

    fn tag(&mut self, run: i64, name: &str) -> Result<(), HistoryError> {
        check_tag_name(&self.location, name)?;
        let exists: Option<i64> = self
            .conn
            .query_row("SELECT id FROM runs WHERE id = ?1", params![run], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.err(e))?;
        if exists.is_none() {
            return Err(HistoryError::NotFound {
                db: self.location.clone(),
                what: format!("no run {run}"),
            });
        }
        self.conn
            .execute(
                "INSERT INTO tags (name, run) VALUES (?1, ?2)
                 ON CONFLICT(name) DO UPDATE SET run = excluded.run",
                params![name, run],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn tagged(&self, name: &str) -> Result<Option<i64>, HistoryError> {
        self.conn
            .query_row("SELECT run FROM tags WHERE name = ?1", params![name], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.err(e))
    }

    fn machines(&self) -> Result<Vec<Machine>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, name, cpu_model, cores, memory_bytes, kernel, tee
                 FROM machines ORDER BY first_seen",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |row| {
                Ok(Machine {
                    id: row.get(0)?,
                    name: row.get(1)?,
                    cpu_model: row.get(2)?,
                    cores: row.get::<_, i64>(3)? as u64,
                    memory_bytes: row.get::<_, i64>(4)? as u64,
                    kernel: row.get(5)?,
                    tee: row.get(6)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }
}
