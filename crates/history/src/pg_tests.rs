//! The PostgreSQL store against a real server that each test starts for itself: a throwaway
//! cluster from Debian's `postgresql` package (initdb and pg_ctl under
//! `/usr/lib/postgresql/*/bin`), on a free port of 127.0.0.1 and a socket in a temporary
//! folder, trust authentication, stopped when the test ends. PostgreSQL refuses to run as
//! root: as root the cluster runs as the `postgres` system user.
//!
//! Without the binaries the tests say so loudly and pass, except under CI (`CI` set), where
//! a missing server fails them: CI installs the package (`.ci/run`) and must run them.

use crate::test_server::{Server, free_port};
use crate::tests::{
    check_interrupted, check_machines, check_raw_samples, check_round_trip, check_selectors,
    check_series, run, store_run,
};
use crate::*;

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
