//! The results history: runs kept over time and across machines, and the change points in
//! each workload's series of per-run medians.

pub mod changepoint;
