//! One measurement over runs: its per-run median and 95% interval, and the change points
//! of the medians.

use measure::record::{Body, Record};

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

/// The series of `key` over the runs `filter` selects. A run in which several records match
/// (the key is ambiguous) is an error naming their parameters.
pub fn series(
    store: &dyn Store,
    key: &Key,
    filter: &RunFilter,
    cfg: &changepoint::Config,
) -> Result<Series, HistoryError> {
    let mut runs = store.runs(filter)?;
    runs.reverse();
    let mut points = Vec::new();
    for run in runs {
        let records = store.records(run.id)?;
        let found: Vec<&Record> = records.iter().filter(|r| key.matches(r)).collect();
        match found[..] {
            [] => {}
            [r] => {
                if let Body::Measurement(m) = &r.body {
                    points.push(Point {
                        run,
                        median_ns: m.summary.median_ns,
                        ci_ns: (m.summary.median_ci_low_ns, m.summary.median_ci_high_ns),
                    });
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
    let medians: Vec<f64> = points.iter().map(|p| p.median_ns).collect();
    let changes = changepoint::detect(&medians, cfg);
    Ok(Series {
        key: key.clone(),
        points,
        changes,
    })
}
