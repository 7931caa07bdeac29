//! The PostgreSQL store against a real server that each test starts for itself: a throwaway
//! cluster from Debian's `postgresql` package (initdb and pg_ctl under
//! `/usr/lib/postgresql/*/bin`), on a free port of 127.0.0.1 and a socket in a temporary
//! folder, trust authentication, stopped when the test ends. PostgreSQL refuses to run as
//! root: as root the cluster runs as the `postgres` system user.
//!
//! Without the binaries the tests say so loudly and pass, except under CI (`CI` set), where
//! a missing server fails them: CI installs the package (`.ci/run`) and must run them.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use crate::tests::{
    check_interrupted, check_machines, check_raw_samples, check_round_trip, check_selectors,
    check_series, run, store_run,
};
use crate::*;

/// A PostgreSQL cluster of this test's own; stopped (immediately) when dropped.
struct Server {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
}

/// The newest installed PostgreSQL's binaries folder, holding initdb and pg_ctl.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

impl Server {
    /// Starts a cluster, or returns None (after a banner saying why) when the PostgreSQL
    /// binaries are absent and `CI` is not set. Under CI their absence fails the test.
    fn start(test: &str) -> Option<Server> {
        let Some(bin) = bin_dir() else {
            let why = "the PostgreSQL binaries (initdb, pg_ctl under /usr/lib/postgresql/*/bin) \
                       are absent; install Debian's postgresql package";
            if std::env::var_os("CI").is_some() {
                panic!("{test}: CI is set and {why}: this test must run under CI");
            }
            eprintln!(
                "\n==================== SKIPPED: {test} ====================\n\
                 {why} (apt-get install -y postgresql) to run this test against a real server.\n\
                 ========================================================================\n"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("ccbench-pg-")
            .tempdir()
            .expect("a temporary folder");
        let as_postgres = is_root();
        let mut server = Server {
            bin,
            dir,
            port: 0,
            as_postgres,
        };
        if as_postgres {
            let o = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(server.dir.path())
                .output()
                .expect("chown runs");
            assert!(
                o.status.success(),
                "{test}: as root the cluster runs as the postgres user, which must exist: {}",
                text(&o)
            );
        }
        let data = server.data();
        let o = server
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .output()
            .expect("initdb runs");
        assert!(o.status.success(), "{test}: initdb failed: {}", text(&o));
        // A port free now may be taken before the server binds it (other tests, other
        // agents): try a few.
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let o = server
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(server.dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o"])
                .arg(format!(
                    "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off \
                     -c max_connections=40",
                    server.dir.path().display()
                ))
                .arg("start")
                .output()
                .expect("pg_ctl runs");
            if o.status.success() {
                server.port = port;
                eprintln!(
                    "{test}: PostgreSQL from {} on 127.0.0.1:{port}",
                    server.bin.display()
                );
                return Some(server);
            }
            last = format!(
                "{}\n{}",
                text(&o),
                std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default()
            );
        }
        panic!("{test}: the PostgreSQL server did not start: {last}");
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// One of the binaries, as the postgres user when running as root.
    fn command(&self, name: &str) -> Command {
        let exe = self.bin.join(name);
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        c.current_dir(self.dir.path());
        c
    }

    /// A new empty database on this server, and its URL.
    fn database(&self, name: &str) -> String {
        let mut admin = ::postgres::Client::connect(&self.url("postgres"), ::postgres::NoTls)
            .expect("the test server answers");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("CREATE DATABASE");
        self.url(name)
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.port == 0 {
            return;
        }
        let data = self.data();
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// A store-level check of `tests`, run on any store.
type Check = fn(&mut dyn Store);

fn open(url: &str) -> Postgres {
    Postgres::open(url).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn postgres_stores_and_selects_as_sqlite_does() {
    let Some(server) = Server::start("postgres_stores_and_selects_as_sqlite_does") else {
        return;
    };
    let checks: [(&str, Check); 6] = [
        ("round_trip", check_round_trip),
        ("interrupted", check_interrupted),
        ("selectors", check_selectors),
        ("machines", check_machines),
        ("series", check_series),
        ("raw_samples", check_raw_samples),
    ];
    for (name, check) in checks {
        let mut s = open(&server.database(name));
        check(&mut s);
    }
}

/// Two machines (here two threads, each with its connection) opening a new database at once
/// migrate it once, then each stores 20 runs: all 40 are there, whole.
#[test]
fn postgres_two_writers_at_once_lose_nothing() {
    let Some(server) = Server::start("postgres_two_writers_at_once_lose_nothing") else {
        return;
    };
    let url = server.database("fleet");
    let barrier = std::sync::Barrier::new(2);
    let ids: Vec<Vec<i64>> = std::thread::scope(|sc| {
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (url, barrier) = (&url, &barrier);
                sc.spawn(move || {
                    barrier.wait();
                    let mut s = open(url);
                    (0..20)
                        .map(|i| {
                            let t = format!("2026-11-24T{w:02}:{i:02}:00Z");
                            store_run(&mut s, &run(&t, 1.0 + f64::from(i)), RunStatus::Complete)
                        })
                        .collect()
                })
            })
            .collect();
        writers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let s = open(&url);
    let runs = s.runs(&RunFilter::default()).unwrap();
    assert_eq!(runs.len(), 40);
    let mut all: Vec<i64> = ids.concat();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 40, "every run its own id");
    for (w, ids) in ids.iter().enumerate() {
        for (i, &id) in ids.iter().enumerate() {
            let t = format!("2026-11-24T{w:02}:{:02}:00Z", i);
            assert_eq!(
                s.records(id).unwrap(),
                run(&t, 1.0 + i as f64),
                "writer {w}, run {i}"
            );
        }
    }
    assert_eq!(s.machines().unwrap().len(), 1);
    let mut version = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let rows = version
        .query("SELECT value FROM ccbench_meta", &[])
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i64>(0), sqlite::SCHEMA_VERSION);
}

/// A database migrated once opens again without migrating; one of a newer schema is refused.
#[test]
fn postgres_newer_schema_is_refused() {
    let Some(server) = Server::start("postgres_newer_schema_is_refused") else {
        return;
    };
    let url = server.database("newer");
    open(&url);
    open(&url);
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    admin
        .batch_execute("UPDATE ccbench_meta SET value = 99 WHERE key = 'schema_version'")
        .unwrap();
    match Postgres::open(&url) {
        Err(HistoryError::NewerSchema {
            found: 99,
            supported: sqlite::SCHEMA_VERSION,
            db,
        }) => assert!(db.contains("/newer"), "{db}"),
        other => panic!("{:?}", other.err()),
    }
}

/// No server on the port: an error naming the server, never its password. (No server
/// needed: it runs everywhere.)
#[test]
fn postgres_unreachable_server_is_a_clear_error() {
    let port = free_port();
    let url = format!("postgresql://ccbench:s3cret-pw@127.0.0.1:{port}/history");
    let e = Postgres::open(&url).err().expect("nothing listens there");
    assert!(matches!(e, HistoryError::Database { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains(&format!("postgresql://ccbench@127.0.0.1:{port}/history")),
        "{m}"
    );
    assert!(!m.contains("s3cret"), "{m}");
    let e = Postgres::open("postgres://h:notaport/x").err().unwrap();
    assert!(e.to_string().contains("postgres://h:notaport/x"), "{e}");
}

#[test]
fn urls_lose_their_password() {
    for (url, shown) in [
        ("postgres://u:pw@h:5432/db", "postgres://u@h:5432/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        (
            "postgres://h/db?password=pw&sslmode=disable",
            "postgres://h/db?sslmode=disable",
        ),
        ("postgres://u:p@ss@h/db?PASSWORD=x", "postgres://u@h/db"),
        ("postgres://h", "postgres://h"),
    ] {
        assert_eq!(crate::postgres::redact(url), shown);
    }
    assert!(crate::postgres::is_url("postgresql://h/db"));
    assert!(!crate::postgres::is_url("history.sqlite"));
}
