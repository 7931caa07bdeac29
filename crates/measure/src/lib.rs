//! The measurement harness of ccbench: the floor every other crate stands on.
//!
//! - [`sampler`]: warm-up and batched samples for operations from nanoseconds to seconds, with
//!   the harness's own overhead measured alongside.
//! - [`stats`]: summaries of raw samples, bootstrap intervals, outliers, Mann-Whitney U.
//! - [`calibrate`]: grow a workload until a run reaches a target time, keeping every attempt.
//! - [`sweep`]: weak and strong thread sweeps and fixed-duration passes.
//! - [`stages`]: stage breakdowns with a theoretical minimum.
//! - [`env`](mod@env): the environment fingerprint.
//! - [`record`] and [`jsonl`]: the `ccbench.v1` records and their JSON-lines files.
//!
//! This crate never prints: it returns data, and the command line decides what to show.

pub mod calibrate;
pub mod env;
pub mod jsonl;
pub mod record;
pub mod sampler;
pub mod stages;
pub mod stats;
pub mod sweep;

pub use record::{Body, Params, Record, Value};
