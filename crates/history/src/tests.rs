//! The SQLite store end to end: runs stored whole and read back equal, selectors, tags,
//! machines, series with a change point, concurrent writers, and the errors of a database
//! that is corrupt, newer, or not writable. The store-level checks take any [`Store`]:
//! `pg_tests` runs them on PostgreSQL too.

use measure::record::{Body, BuildInfo, Check, Env, Measurement, Params, Record, Verdict};
use measure::sampler::Samples;

use crate::changepoint;
use crate::*;

pub(crate) fn env(time: &str, commit: &str, cores: u64) -> Record {
    Record::new(
        "run",
        "host",
        Params::new(),
        Body::Env(Env {
            cpu_model: "AMD EPYC".into(),
            cores,
            cpu_flags: vec!["aes".into()],
            trusted_hardware: vec![],
            memory_bytes: 24 << 30,
            kernel: "6.18".into(),
            os: "Debian".into(),
            build: BuildInfo {
                version: "0.1.0".into(),
                git_commit: commit.into(),
                profile: "release".into(),
                rustc: "rustc".into(),
            },
            time_utc: time.into(),
            harness_overhead_ns: None,
            load_avg_1m: None,
        }),
    )
}

fn measurement(name: &str, backend: &str, ns: f64) -> Record {
    let s = Samples {
        iters_per_sample: 1,
        per_iter_ns: (0..9).map(|i| ns * (1.0 + 0.01 * f64::from(i))).collect(),
        overhead_ns: None,
    };
    let m: Measurement = s.into_measurement(name, None).unwrap();
    Record::new(
        "sealing",
        backend,
        measure::params! {"size_bytes" => 4096},
        Body::Measurement(m),
    )
}

pub(crate) fn run(time: &str, ns: f64) -> Vec<Record> {
    vec![
        env(time, "abc123", 2),
        measurement("seal", "native", ns),
        measurement("seal", "sandbox", 3.0 * ns),
        Record::new(
            "sealing",
            "native",
            Params::new(),
            Body::Check(Check::run("round-trip", Verdict::Pass, "ok")),
        ),
    ]
}

pub(crate) fn store_run(s: &mut dyn Store, records: &[Record], status: RunStatus) -> i64 {
    s.record_run(&NewRun {
        records,
        status,
        machine_name: None,
        source: "run".into(),
    })
    .unwrap()
}

#[test]
fn a_run_is_stored_whole_and_read_back_equal() {
    check_round_trip(&mut Sqlite::in_memory().unwrap());
}

/// A run stored and read back equal, listed with its summary; a run without an environment
/// record refused.
pub(crate) fn check_round_trip(s: &mut dyn Store) {
    let records = run("2026-11-24T10:00:00Z", 1000.0);
    let id = store_run(s, &records, RunStatus::Complete);
    assert_eq!(s.records(id).unwrap(), records);
    let runs = s.runs(&RunFilter::default()).unwrap();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(
        (r.id, r.commit.as_str(), r.status),
        (id, "abc123", RunStatus::Complete)
    );
    assert_eq!(r.scenarios, ["sealing"]);
    assert_eq!(r.verdicts, [1, 0, 0]);
    assert_eq!(r.records, 4);
    // Not a run: no environment record.
    assert!(matches!(
        s.record_run(&NewRun {
            records: &records[1..],
            status: RunStatus::Complete,
            machine_name: None,
            source: "run".into(),
        }),
        Err(HistoryError::NotARun(_))
    ));
}

#[test]
fn interrupted_runs_stay_interrupted() {
    check_interrupted(&mut Sqlite::in_memory().unwrap());
}

/// An interrupted run is listed as interrupted, never as complete.
pub(crate) fn check_interrupted(s: &mut dyn Store) {
    store_run(s, &run("2026-11-24T10:00:00Z", 1.0), RunStatus::Interrupted);
    assert_eq!(
        s.runs(&RunFilter::default()).unwrap()[0].status,
        RunStatus::Interrupted
    );
}

#[test]
fn selectors_name_runs_by_number_tag_last_and_range() {
    check_selectors(&mut Sqlite::in_memory().unwrap());
}

/// Run numbers, `last`, `last~N`, ranges and tags; a tag moves; bad selectors and tag names
/// are errors naming the database.
pub(crate) fn check_selectors(s: &mut dyn Store) {
    let ids: Vec<i64> = (0..4)
        .map(|i| {
            store_run(
                s,
                &run(&format!("2026-11-24T1{i}:00:00Z"), 1.0),
                RunStatus::Complete,
            )
        })
        .collect();
    assert_eq!(select(&*s, &ids[1].to_string()).unwrap(), [ids[1]]);
    assert_eq!(select(&*s, "last").unwrap(), [ids[3]]);
    assert_eq!(select(&*s, "last~2").unwrap(), [ids[1]]);
    assert_eq!(
        select(&*s, &format!("{}..{}", ids[1], ids[2])).unwrap(),
        [ids[1], ids[2]]
    );
    s.tag(ids[0], "baseline").unwrap();
    assert_eq!(select(&*s, "baseline").unwrap(), [ids[0]]);
    s.tag(ids[2], "baseline").unwrap();
    assert_eq!(select(&*s, "baseline").unwrap(), [ids[2]], "a tag moves");
    assert_eq!(s.runs(&RunFilter::default()).unwrap()[1].tags, ["baseline"]);
    for bad in ["99", "last~9", "nope", "50..60"] {
        let e = select(&*s, bad).unwrap_err();
        assert!(matches!(e, HistoryError::NotFound { .. }), "{bad}: {e}");
        assert!(e.to_string().contains(s.location()), "{e}");
    }
    for bad in ["12", "last", "a b", "1..2", ""] {
        assert!(s.tag(ids[0], bad).is_err(), "{bad:?} became a tag");
    }
    assert!(s.tag(999, "x").is_err());
    // A run imported now that started before all of them takes its place by its time: it
    // is listed last and is not `last`, though its number is the highest.
    let old = store_run(s, &run("2026-11-23T09:00:00Z", 1.0), RunStatus::Complete);
    assert!(old > ids[3]);
    assert_eq!(select(&*s, "last").unwrap(), [ids[3]]);
    let listed: Vec<i64> = s
        .runs(&RunFilter::default())
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, [ids[3], ids[2], ids[1], ids[0], old]);
}

#[test]
fn machines_are_told_apart_by_their_fingerprint_and_named() {
    check_machines(&mut Sqlite::in_memory().unwrap());
}

/// Two fingerprints, two machines; a name given is kept and filters the listing.
pub(crate) fn check_machines(s: &mut dyn Store) {
    let mut a = run("2026-11-24T10:00:00Z", 1.0);
    store_run(s, &a, RunStatus::Complete);
    a[0] = env("2026-11-24T11:00:00Z", "abc123", 8);
    s.record_run(&NewRun {
        records: &a,
        status: RunStatus::Complete,
        machine_name: Some("sgx-host"),
        source: "run".into(),
    })
    .unwrap();
    let m = s.machines().unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(m[1].name.as_deref(), Some("sgx-host"));
    assert_eq!(m[1].cores, 8);
    let only = s
        .runs(&RunFilter {
            machine: Some("sgx-host".into()),
            limit: None,
        })
        .unwrap();
    assert_eq!(only.len(), 1);
}

#[test]
fn a_series_has_one_point_per_run_and_its_change_point() {
    check_series(&mut Sqlite::in_memory().unwrap());
}

/// One point per run, oldest first, and the step found; an ambiguous key refused.
pub(crate) fn check_series(s: &mut dyn Store) {
    for i in 0..30 {
        // A 30% step after run 15, little noise.
        let level = if i < 15 { 1000.0 } else { 1300.0 };
        let wobble = 1.0 + 0.02 * f64::from(i % 5);
        store_run(
            s,
            &run(&format!("2026-11-{:02}T00:00:00Z", i + 1), level * wobble),
            RunStatus::Complete,
        );
    }
    let key = Key::parse("sealing/seal@native", &["size_bytes=4096".into()]).unwrap();
    let series = series(
        &*s,
        &key,
        &RunFilter::default(),
        &changepoint::Config::default(),
    )
    .unwrap();
    assert_eq!(series.points.len(), 30);
    assert!(
        series.points[0].run.started < series.points[29].run.started,
        "oldest first"
    );
    assert_eq!(series.changes.len(), 1, "{:?}", series.changes);
    assert_eq!(series.changes[0].index, 15);
    // Without the backend the key names two records of each run: an error naming them.
    let ambiguous = Key::parse("sealing/seal", &[]).unwrap();
    let e = crate::series(&*s, &ambiguous, &RunFilter::default(), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("@native") && e.contains("@sandbox"), "{e}");
    assert!(Key::parse("no-slash", &[]).is_err());
    // A run's measurements by name: exactly its measurement records of that scenario and
    // name, in order; a check of a name is not a measurement.
    let id = s.runs(&RunFilter::default()).unwrap()[0].id;
    let want: Vec<Record> = s
        .records(id)
        .unwrap()
        .into_iter()
        .filter(|r| {
            r.scenario == "sealing" && matches!(&r.body, Body::Measurement(m) if m.name == "seal")
        })
        .collect();
    assert_eq!(want.len(), 2);
    assert_eq!(s.measurements(id, "sealing", "seal").unwrap(), want);
    assert!(
        s.measurements(id, "sealing", "round-trip")
            .unwrap()
            .is_empty()
    );
    assert!(s.measurements(id, "other", "seal").unwrap().is_empty());
    // Every measurement at once: the two backends apart, each with the step, and each key's
    // text parses back to a key that selects the same series.
    let all = every_series(&*s, &RunFilter::default(), &Default::default()).unwrap();
    let names: Vec<String> = all.iter().map(|s| s.key.to_string()).collect();
    assert_eq!(
        names,
        [
            "sealing/seal@native size_bytes=4096",
            "sealing/seal@sandbox size_bytes=4096"
        ]
    );
    for one in &all {
        assert_eq!(one.points.len(), 30);
        assert_eq!(one.changes.len(), 1, "{:?}", one.changes);
        assert_eq!(one.changes[0].index, 15);
        let text = one.key.to_string();
        let mut words = text.split(' ');
        let head = words.next().unwrap();
        let params: Vec<String> = words.map(str::to_owned).collect();
        let again = crate::series(
            &*s,
            &Key::parse(head, &params).unwrap(),
            &RunFilter::default(),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(again.points, one.points);
    }
    assert!(Key::parse("a/b", &["novalue".into()]).is_err());
}

#[test]
fn two_writers_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    Sqlite::open(&path).unwrap();
    std::thread::scope(|sc| {
        for w in 0..2 {
            let path = &path;
            sc.spawn(move || {
                let mut s = Sqlite::open(path).unwrap();
                for i in 0..20 {
                    let t = format!("2026-11-24T{w:02}:{i:02}:00Z");
                    store_run(&mut s, &run(&t, 1.0), RunStatus::Complete);
                }
            });
        }
    });
    let s = Sqlite::open(&path).unwrap();
    let runs = s.runs(&RunFilter::default()).unwrap();
    assert_eq!(runs.len(), 40);
    assert!(runs.iter().all(|r| s.records(r.id).unwrap().len() == 4));
}

#[test]
fn a_corrupt_or_newer_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    let e = Sqlite::open(&garbage)
        .err()
        .expect("garbage opened")
        .to_string();
    assert!(e.contains("garbage.sqlite"), "{e}");

    let newer = dir.path().join("newer.sqlite");
    {
        let c = rusqlite::Connection::open(&newer).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    match Sqlite::open(&newer) {
        Err(HistoryError::NewerSchema { found: 99, .. }) => {}
        other => panic!("{:?}", other.err()),
    }
    // A database migrated once opens again without migrating.
    let ok = dir.path().join("ok.sqlite");
    Sqlite::open(&ok).unwrap();
    Sqlite::open(&ok).unwrap();
}

#[test]
fn raw_samples_survive_the_round_trip() {
    check_raw_samples(&mut Sqlite::in_memory().unwrap());
}

/// The raw samples are what compare tests significance on: kept to the last bit.
pub(crate) fn check_raw_samples(s: &mut dyn Store) {
    let records = run("2026-11-24T10:00:00Z", 1234.567);
    let id = store_run(s, &records, RunStatus::Complete);
    let back = s.records(id).unwrap();
    let (Body::Measurement(a), Body::Measurement(b)) = (&records[1].body, &back[1].body) else {
        panic!()
    };
    assert_eq!(a.samples_ns, b.samples_ns);
}
