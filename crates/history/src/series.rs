//! One measurement over runs: its per-run median and 95% interval, and the change points
//! of the medians.

use std::collections::{HashMap, HashSet};

use measure::record::{Body, Measurement, Record};

use crate::changepoint::{self, ChangePoint};
use crate::store::{HistoryError, RunFilter, RunInfo, Store};

/// Names one measurement of a run: `scenario/name`, optionally `@backend`, and `key=value`
/// parameters, e.g. `transitions/empty-ecall@sandbox` or `sealing/seal@native size_bytes=4096`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The scenario.
    pub scenario: String,
    /// The measurement's name.
    pub name: String,
    /// The backend, if given.
    pub backend: Option<String>,
    /// Parameters that must match.
    pub params: Vec<(String, String)>,
}

impl Key {
    /// Parses `scenario/name[@backend] [key=value ...]` (the parameters as separate words).
    pub fn parse(selector: &str, params: &[String]) -> Result<Key, String> {
        let (head, backend) = match selector.split_once('@') {
            Some((h, b)) => (h, Some(b.to_owned())),
            None => (selector, None),
        };
        let Some((scenario, name)) = head.split_once('/') else {
            return Err(format!(
                "{selector:?}: a measurement is scenario/name[@backend], e.g. sealing/seal@native"
            ));
        };
        let params = params
            .iter()
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| format!("{p:?}: a parameter is key=value"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Key {
            scenario: scenario.to_owned(),
            name: name.to_owned(),
            backend,
            params,
        })
    }

    /// The key that names exactly `r`'s measurement: its scenario, name, backend and every
    /// parameter.
    pub fn exact(r: &Record, m: &Measurement) -> Key {
        Key {
            scenario: r.scenario.clone(),
            name: m.name.clone(),
            backend: Some(r.backend.clone()),
            params: r
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        }
    }

    /// Whether `r` is this measurement.
    pub fn matches(&self, r: &Record) -> bool {
        matches!(&r.body, Body::Measurement(m) if m.name == self.name)
            && r.scenario == self.scenario
            && self.backend.as_ref().is_none_or(|b| *b == r.backend)
            && self
                .params
                .iter()
                .all(|(k, v)| r.params.get(k).is_some_and(|p| p.to_string() == *v))
    }
}

/// The selector text [`Key::parse`] reads back: `scenario/name[@backend] [key=value ...]`.
impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.scenario, self.name)?;
        if let Some(b) = &self.backend {
            write!(f, "@{b}")?;
        }
        for (k, v) in &self.params {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// One run's figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The run.
    pub run: RunInfo,
    /// Median, ns.
    pub median_ns: f64,
    /// The bootstrap 95% interval of the median, ns.
    pub ci_ns: (f64, f64),
}

impl Point {
    /// Run `run`'s figure from its measurement `m`; `None` when the median is not finite
    /// (only a hand-made file has one), which the change-point test cannot take.
    fn of(run: RunInfo, m: &Measurement) -> Option<Point> {
        m.summary.median_ns.is_finite().then_some(Point {
            run,
            median_ns: m.summary.median_ns,
            ci_ns: (m.summary.median_ci_low_ns, m.summary.median_ci_high_ns),
        })
    }
}

/// A measurement over runs, oldest first, with the change points of its medians.
#[derive(Debug, Clone)]
pub struct Series {
    /// The measurement.
    pub key: Key,
    /// One point per run that has it.
    pub points: Vec<Point>,
    /// Steps in the medians (indices into `points`).
    pub changes: Vec<ChangePoint>,
}

impl Series {
    /// The series of `key` over `points`, with the change points of their medians.
    fn new(key: Key, points: Vec<Point>, cfg: &changepoint::Config) -> Series {
        let medians: Vec<f64> = points.iter().map(|p| p.median_ns).collect();
        Series {
            key,
            changes: changepoint::detect(&medians, cfg),
            points,
        }
    }
}

/// The runs `filter` selects, oldest first.
fn oldest_first(store: &dyn Store, filter: &RunFilter) -> Result<Vec<RunInfo>, HistoryError> {
    let mut runs = store.runs(filter)?;
    runs.reverse();
    Ok(runs)
}

/// The series of `key` over the runs `filter` selects. A run in which several records match
/// (the key is ambiguous) is an error naming their parameters.
pub fn series(
    store: &dyn Store,
    key: &Key,
    filter: &RunFilter,
    cfg: &changepoint::Config,
) -> Result<Series, HistoryError> {
    let mut points = Vec::new();
    for run in oldest_first(store, filter)? {
        let records = store.measurements(run.id, &key.scenario, &key.name)?;
        let found: Vec<&Record> = records.iter().filter(|r| key.matches(r)).collect();
        match found[..] {
            [] => {}
            [r] => {
                if let Body::Measurement(m) = &r.body {
                    points.extend(Point::of(run, m));
                }
            }
            _ => {
                let variants: Vec<String> = found
                    .iter()
                    .map(|r| {
                        let p: Vec<String> =
                            r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        format!("@{} {}", r.backend, p.join(" "))
                    })
                    .collect();
                return Err(HistoryError::NotFound {
                    db: store.location().to_owned(),
                    what: format!(
                        "{}/{} names {} records of run {}; add the backend or parameters: {}",
                        key.scenario,
                        key.name,
                        found.len(),
                        run.id,
                        variants.join("; ")
                    ),
                });
            }
        }
    }
    Ok(Series::new(key.clone(), points, cfg))
}

/// Every measurement of the runs `filter` selects, each as its series over the runs that
/// have it (oldest first) with its change points, in order of first appearance. Each series
/// is named by its [`Key::exact`]; where a run holds the same measurement twice, the first
/// counts. Medians that are not finite (only a hand-made file has them) are left out.
pub fn every_series(
    store: &dyn Store,
    filter: &RunFilter,
    cfg: &changepoint::Config,
) -> Result<Vec<Series>, HistoryError> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut found: Vec<(Key, Vec<Point>)> = Vec::new();
    for run in oldest_first(store, filter)? {
        let records = store.records(run.id)?;
        let mut seen = HashSet::new();
        for r in &records {
            let Body::Measurement(m) = &r.body else {
                continue;
            };
            let Some(point) = Point::of(run.clone(), m) else {
                continue;
            };
            let key = Key::exact(r, m);
            let name = key.to_string();
            if !seen.insert(name.clone()) {
                continue;
            }
            let i = *index.entry(name).or_insert_with(|| {
                found.push((key, Vec::new()));
                found.len() - 1
            });
            found[i].1.push(point);
        }
    }
    Ok(found
        .into_iter()
        .map(|(key, points)| Series::new(key, points, cfg))
        .collect())
}
