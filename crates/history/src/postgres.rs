//! The history on a PostgreSQL server (`postgres://` or `postgresql://` URL), for a fleet:
//! many machines write their runs into one database at once. The same tables and semantics
//! as the SQLite store ([`crate::sqlite`]); the schema version is kept in a small
//! `ccbench_meta` table, and each migration runs in its own transaction under an advisory
//! lock, so that two machines starting at once migrate once.
//!
//! The connection is not encrypted (no TLS): use it on a trusted network, or through a tunnel.

use std::cell::RefCell;
use std::str::FromStr;
use std::time::Duration;

use ::postgres as pg;
use measure::record::Record;
use pg::{Client, NoTls};

use crate::machine::Machine;
use crate::sqlite::SCHEMA_VERSION;
use crate::store::{
    HistoryError, NewRun, RunFilter, RunInfo, RunStatus, Store, Summary, check_tag_name,
};

/// The schema, one step per version, numbered as the SQLite store's ([`SCHEMA_VERSION`]):
/// index 0 takes an empty database to version 1.
const MIGRATIONS: &[&str] = &["
    CREATE TABLE machines (
        id TEXT PRIMARY KEY,
        name TEXT,
        cpu_model TEXT NOT NULL,
        cores BIGINT NOT NULL,
        memory_bytes BIGINT NOT NULL,
        kernel TEXT NOT NULL,
        tee TEXT NOT NULL,
        first_seen TEXT NOT NULL
    );
    CREATE TABLE runs (
        id BIGSERIAL PRIMARY KEY,
        started TEXT NOT NULL,
        machine TEXT NOT NULL REFERENCES machines(id),
        machine_name TEXT,
        git_commit TEXT NOT NULL,
        profile TEXT NOT NULL,
        status TEXT NOT NULL,
        scenarios TEXT NOT NULL,
        pass BIGINT NOT NULL,
        warn BIGINT NOT NULL,
        fail BIGINT NOT NULL,
        records BIGINT NOT NULL,
        source TEXT NOT NULL
    );
    CREATE INDEX runs_by_machine ON runs(machine, started);
    CREATE TABLE records (
        run BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
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
        run BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE
    );
"];

const _: () = assert!(MIGRATIONS.len() as i64 == SCHEMA_VERSION);

/// The advisory lock that serialises migrations ("ccbench" in ASCII): advisory locks are
/// per database, so two histories on one server do not wait for each other.
const MIGRATION_LOCK: i64 = 0x0063_6362_656e_6368;

/// How long to wait for the server to answer a connection when the URL does not say
/// (`connect_timeout=`): an unreachable history must not hold a finished run for long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `location` names a PostgreSQL server rather than an SQLite file.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `url` without its password (in the user part or a `password=` parameter), for messages.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    // The user part ends at the last '@' before the query (a raw '@' in a password included).
    let main = match main.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{user}@{host}")
        }
        None => main.to_owned(),
    };
    let query = query.map(|q| {
        q.split('&')
            .filter(|kv| !kv.to_ascii_lowercase().starts_with("password="))
            .collect::<Vec<_>>()
            .join("&")
    });
    let mut out = if scheme.is_empty() {
        main
    } else {
        format!("{scheme}://{main}")
    };
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        out.push('?');
        out.push_str(&q);
    }
    out
}

/// A PostgreSQL history: one connection, without TLS.
pub struct Postgres {
    // The sync client needs `&mut` even to read; the store's readers take `&self`.
    client: RefCell<Client>,
    location: String,
}

impl Postgres {
    /// The records a query of `(seq, line)` rows returns, parsed; `run` names them in errors.
    fn lines(
        &self,
        run: i64,
        sql: &str,
        args: &[&(dyn pg::types::ToSql + Sync)],
    ) -> Result<Vec<Record>, HistoryError> {
        let rows = self
            .client
            .borrow_mut()
            .query(sql, args)
            .map_err(|e| self.err(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let seq: i64 = row.try_get(0).map_err(|e| self.err(e))?;
            let line: &str = row.try_get(1).map_err(|e| self.err(e))?;
            out.push(
                measure::jsonl::parse_line(line)
                    .map_err(|m| self.err(format!("run {run}, record {seq}: {m}")))?,
            );
        }
        Ok(out)
    }

    /// Connects to the server `url` names (`postgres://user[:password]@host[:port]/database`,
    /// libpq's URL form) without TLS, and migrates an older schema up. A database of a newer
    /// schema is refused. Messages name the server without the password.
    pub fn open(url: &str) -> Result<Postgres, HistoryError> {
        let location = redact(url);
        let db = |message: String| HistoryError::Database {
            db: location.clone(),
            message,
        };
        let mut config =
            pg::Config::from_str(url).map_err(|e| db(format!("not a PostgreSQL URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("ccbench");
        }
        let client = config.connect(NoTls).map_err(|e| db(e.to_string()))?;
        let s = Postgres {
            client: RefCell::new(client),
            location,
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

    fn newer(&self, found: i64) -> HistoryError {
        HistoryError::NewerSchema {
            db: self.location.clone(),
            found,
            supported: SCHEMA_VERSION,
        }
    }

    /// The migrations this database has not had, each in its transaction under the
    /// migration lock, the version read again once the lock is held.
    fn init(&self) -> Result<(), HistoryError> {
        let version = {
            let mut client = self.client.borrow_mut();
            let exists: bool = client
                .query_one("SELECT to_regclass('ccbench_meta') IS NOT NULL", &[])
                .and_then(|row| row.try_get(0))
                .map_err(|e| self.err(e))?;
            if exists {
                schema_version(&mut *client).map_err(|e| self.err(e))?
            } else {
                0
            }
        };
        if version > SCHEMA_VERSION {
            return Err(self.newer(version));
        }
        for (v, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let v = v as i64;
            let step = |e: pg::Error| HistoryError::Database {
                db: self.location.clone(),
                message: format!("migrating to schema {}: {e}", v + 1),
            };
            let mut client = self.client.borrow_mut();
            let mut tx = client.transaction().map_err(step)?;
            // Held until the transaction ends: another machine migrating waits here, then
            // finds the version it wrote.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .map_err(step)?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS ccbench_meta (
                     key TEXT PRIMARY KEY,
                     value BIGINT NOT NULL
                 )",
            )
            .map_err(step)?;
            let now = schema_version(&mut tx).map_err(step)?;
            if now > SCHEMA_VERSION {
                return Err(self.newer(now));
            }
            if now > v {
                tx.commit().map_err(step)?;
                continue;
            }
            tx.batch_execute(sql).map_err(step)?;
            tx.execute(
                "INSERT INTO ccbench_meta (key, value) VALUES ('schema_version', $1)
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&(v + 1)],
            )
            .map_err(step)?;
            tx.commit().map_err(step)?;
        }
        Ok(())
    }
}

/// The version `ccbench_meta` holds (0 when it holds none).
fn schema_version(client: &mut impl pg::GenericClient) -> Result<i64, pg::Error> {
    Ok(client
        .query_opt(
            "SELECT value FROM ccbench_meta WHERE key = 'schema_version'",
            &[],
        )?
        .map(|row| row.try_get(0))
        .transpose()?
        .unwrap_or(0))
}

/// A count as the database keeps it (BIGINT); counts past `i64::MAX` do not occur.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A count read back; a negative one (written by hand) reads as 0.
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Store for Postgres {
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
        let seqs: Vec<i64> = (0..run.records.len() as i64).collect();
        let scenarios: Vec<&str> = run.records.iter().map(|r| r.scenario.as_str()).collect();
        let backends: Vec<&str> = run.records.iter().map(|r| r.backend.as_str()).collect();
        let kinds: Vec<&str> = run.records.iter().map(|r| r.kind()).collect();
        let names: Vec<Option<&str>> = run.records.iter().map(|r| r.name()).collect();
        let location = self.location.clone();
        let err = |e: pg::Error| HistoryError::Database {
            db: location.clone(),
            message: e.to_string(),
        };
        // One transaction: another machine's run goes in before or after this one, never
        // into it, and a failure stores nothing.
        let mut client = self.client.borrow_mut();
        let mut tx = client.transaction().map_err(err)?;
        tx.execute(
            "INSERT INTO machines (id, name, cpu_model, cores, memory_bytes, kernel, tee, first_seen)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (id) DO UPDATE SET name = COALESCE(EXCLUDED.name, machines.name)",
            &[
                &machine.id,
                &machine.name,
                &machine.cpu_model,
                &int(machine.cores),
                &int(machine.memory_bytes),
                &machine.kernel,
                &machine.tee,
                &summary.env.time_utc,
            ],
        )
        .map_err(err)?;
        let id: i64 = tx
            .query_one(
                "INSERT INTO runs (started, machine, machine_name, git_commit, profile, status,
                                   scenarios, pass, warn, fail, records, source)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                 RETURNING id",
                &[
                    &summary.env.time_utc,
                    &machine.id,
                    &machine.name,
                    &summary.env.build.git_commit,
                    &summary.env.build.profile,
                    &run.status.name(),
                    &summary.scenarios.join(" "),
                    &int(summary.verdicts[0]),
                    &int(summary.verdicts[1]),
                    &int(summary.verdicts[2]),
                    &int(run.records.len() as u64),
                    &run.source,
                ],
            )
            .and_then(|row| row.try_get(0))
            .map_err(err)?;
        // Every record in one statement: one round trip to a server that may be far away.
        tx.execute(
            "INSERT INTO records (run, seq, scenario, backend, kind, name, line)
             SELECT $1, * FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[],
                                      $6::TEXT[], $7::TEXT[])",
            &[&id, &seqs, &scenarios, &backends, &kinds, &names, &lines],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(id)
    }

    fn runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, HistoryError> {
        let limit = filter.limit.map(|l| int(l as u64));
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT r.id, r.started, r.machine, r.machine_name, r.git_commit, r.profile,
                        r.status, r.scenarios, r.pass, r.warn, r.fail, r.records, r.source,
                        (SELECT string_agg(t.name, ' ' ORDER BY t.name)
                         FROM tags t WHERE t.run = r.id)
                 FROM runs r
                 WHERE $1::TEXT IS NULL OR r.machine = $1 OR r.machine_name = $1
                 ORDER BY r.started DESC, r.id DESC
                 LIMIT $2",
                &[&filter.machine, &limit],
            )
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|row| -> Result<RunInfo, pg::Error> {
                let status: String = row.try_get(6)?;
                let scenarios: String = row.try_get(7)?;
                let tags: Option<String> = row.try_get(13)?;
                Ok(RunInfo {
                    id: row.try_get(0)?,
                    started: row.try_get(1)?,
                    machine: row.try_get(2)?,
                    machine_name: row.try_get(3)?,
                    commit: row.try_get(4)?,
                    profile: row.try_get(5)?,
                    status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
                    scenarios: scenarios.split_whitespace().map(str::to_owned).collect(),
                    verdicts: [
                        count(row.try_get(8)?),
                        count(row.try_get(9)?),
                        count(row.try_get(10)?),
                    ],
                    records: count(row.try_get(11)?),
                    source: row.try_get(12)?,
                    tags: tags
                        .map(|t| t.split_whitespace().map(str::to_owned).collect())
                        .unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    fn records(&self, run: i64) -> Result<Vec<Record>, HistoryError> {
        self.lines(
            run,
            "SELECT seq, line FROM records WHERE run = $1 ORDER BY seq",
            &[&run],
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
             WHERE run = $1 AND scenario = $2 AND kind = 'measurement' AND name = $3
             ORDER BY seq",
            &[&run, &scenario, &name],
        )
    }

    fn tag(&mut self, run: i64, name: &str) -> Result<(), HistoryError> {
        check_tag_name(&self.location, name)?;
        let location = self.location.clone();
        let err = |e: pg::Error| HistoryError::Database {
            db: location.clone(),
            message: e.to_string(),
        };
        let mut client = self.client.borrow_mut();
        let exists = client
            .query_opt("SELECT id FROM runs WHERE id = $1", &[&run])
            .map_err(err)?;
        if exists.is_none() {
            return Err(HistoryError::NotFound {
                db: self.location.clone(),
                what: format!("no run {run}"),
            });
        }
        client
            .execute(
                "INSERT INTO tags (name, run) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET run = EXCLUDED.run",
                &[&name, &run],
            )
            .map_err(err)?;
        Ok(())
    }

    fn tagged(&self, name: &str) -> Result<Option<i64>, HistoryError> {
        self.client
            .borrow_mut()
            .query_opt("SELECT run FROM tags WHERE name = $1", &[&name])
            .map_err(|e| self.err(e))?
            .map(|row| row.try_get(0).map_err(|e| self.err(e)))
            .transpose()
    }

    fn machines(&self) -> Result<Vec<Machine>, HistoryError> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT id, name, cpu_model, cores, memory_bytes, kernel, tee
                 FROM machines ORDER BY first_seen, id",
                &[],
            )
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|row| -> Result<Machine, pg::Error> {
                Ok(Machine {
                    id: row.try_get(0)?,
                    name: row.try_get(1)?,
                    cpu_model: row.try_get(2)?,
                    cores: count(row.try_get(3)?),
                    memory_bytes: count(row.try_get(4)?),
                    kernel: row.try_get(5)?,
                    tee: row.try_get(6)?,
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }
}
