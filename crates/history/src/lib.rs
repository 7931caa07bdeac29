//! The results history: every run kept with its environment, machine, build, verdicts and
//! records (raw samples included), in an SQLite file by default or on a PostgreSQL server
//! for a fleet of machines; runs named by number, tag or
//! `last`; one measurement's series over runs with its change points.
//!
//! It reads and writes `measure`'s record types and nothing else: the cli records runs and
//! wires the commands, `report` draws what it returns.

pub mod changepoint;
pub mod machine;
pub mod postgres;
pub mod series;
pub mod sqlite;
pub mod store;
#[cfg(any(test, feature = "test-server"))]
pub mod test_server;

pub use crate::postgres::Postgres;
pub use machine::Machine;
pub use series::{Key, Series, every_series, series};
pub use sqlite::Sqlite;
pub use store::{HistoryError, NewRun, RunFilter, RunInfo, RunStatus, Store, select};

#[cfg(test)]
mod pg_tests;
#[cfg(test)]
mod tests;
