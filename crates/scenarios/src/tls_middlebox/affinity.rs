//! Core affinity of switchless workers (SGXBox's Table 1): two switchless workers and two
//! application threads on two cores, placed by `sched_setaffinity` as
//!
//! - **grouping**: both workers on one core, both application threads on the other;
//! - **pairing**: one worker and one application thread on each core;
//!
//! for an empty switchless ecall, an empty switchless ocall and a switchless ocall that
//! reads 1 KiB from a file (the `transitions` service's calls). The published figures sit
//! beside ours. Threads pinned: our two calling threads; in the enclave process its
//! switchless ecall workers (`tworker-*`) and its TCS threads (`tcs-*`, which run the ecall
//! that makes the ocalls: the ocalls' application threads); in this process the switchless
//! ocall workers (`enclave-uworker-*`). Workers and TCS threads of one kind are assigned to
//! cores in the order of their thread ids.
//!
//! On a virtual machine the vCPUs are not pinned to physical cores: the hypervisor may run
//! both on one core, or move them. The table says so when the CPU reports a hypervisor.

use std::sync::Barrier;
use std::time::Instant;

use enclave::ocall::builtin;
use enclave::{Backend, Enclave, Registry};
use measure::record::{Body, Check, Params, Table, Value, Verdict};
use measure::sampler::Samples;
use rustix::process::Pid;
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

use super::Plan;
use super::analysis::published;
use crate::transitions::{self, Call as TCall, Reads};
use harness::boundary::{self, Config};
use harness::codec::Encode;
use harness::{At, Context, ScenarioError};

/// Where the workers go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Workers on one core, application threads on the other.
    Grouping,
    /// A worker and an application thread on each core.
    Pairing,
}

impl Placement {
    /// `"grouping"` or `"pairing"`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Grouping => "grouping",
            Placement::Pairing => "pairing",
        }
    }

    /// The core of the `i`-th thread of a kind (`worker`: a switchless worker, else an
    /// application thread), given the two cores.
    pub fn core(self, worker: bool, i: usize, cores: [usize; 2]) -> usize {
        match self {
            Placement::Grouping => cores[usize::from(!worker)],
            Placement::Pairing => cores[i % 2],
        }
    }
}

/// The three calls of Table 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ecall,
    Ocall,
    Read,
}

/// Switchless workers per direction, and application threads: the paper's two and two.
const WORKERS: usize = 2;
const APP_THREADS: usize = 2;

/// Ocalls per ecall in the ocall measurements.
const OCALLS_PER_ECALL: u32 = 100;

/// Thread ids of a process whose names start with `prefix`, in increasing order.
fn threads(pid: u32, prefix: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<i32> = dir
        .filter_map(|e| {
            let e = e.ok()?;
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            comm.starts_with(prefix).then_some(tid)
        })
        .collect();
    out.sort_unstable();
    out
}

fn pin(tid: Option<i32>, core: usize) -> Result<(), String> {
    let mut set = CpuSet::new();
    set.set(core);
    let pid = match tid {
        Some(t) => Some(Pid::from_raw(t).ok_or_else(|| format!("bad thread id {t}"))?),
        None => None,
    };
    sched_setaffinity(pid, &set).map_err(|e| format!("sched_setaffinity({tid:?}, {core}): {e}"))?;
    let got = sched_getaffinity(pid).map_err(|e| format!("sched_getaffinity: {e}"))?;
    if got.is_set(core) && got.count() == 1 {
        Ok(())
    } else {
        Err(format!(
            "thread {tid:?} is not pinned to core {core} after sched_setaffinity"
        ))
    }
}

/// The first two CPUs this process may run on, if it may run on two.
fn two_cores() -> Option<[usize; 2]> {
    let set = sched_getaffinity(None).ok()?;
    let mut it = (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c));
    Some([it.next()?, it.next()?])
}

fn hypervisor() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false)
}

/// Pins the enclave's workers and TCS threads, and our ocall workers, for `placement`;
/// `(kind, count)` of the threads pinned. A thread names itself once it runs, so the names
/// are looked for until every expected thread has one (at most 2 s).
fn pin_enclave(
    e: &Enclave,
    placement: Placement,
    cores: [usize; 2],
) -> Result<Vec<(&'static str, usize)>, String> {
    let child = e.pid().ok_or("the enclave has no process")?;
    let me = std::process::id();
    let mut pinned = Vec::new();
    for (worker, pid, prefix, want) in [
        (true, child, "tworker-", WORKERS),
        // Thread names are cut at 15 bytes: "enclave-uworker".
        (true, me, "enclave-uworke", WORKERS),
        (false, child, "tcs-", APP_THREADS),
    ] {
        let until = Instant::now() + std::time::Duration::from_secs(2);
        let mut tids = threads(pid, prefix);
        while tids.len() < want && Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
            tids = threads(pid, prefix);
        }
        if tids.len() < want {
            return Err(format!(
                "{} of {want} {prefix}* threads found in process {pid}",
                tids.len()
            ));
        }
        pinned.push((prefix, tids.len()));
        for (i, tid) in tids.into_iter().enumerate() {
            pin(Some(tid), placement.core(worker, i, cores))?;
        }
    }
    Ok(pinned)
}

/// Two pinned application threads each make `calls` calls of `kind`; the time per call of
/// the slower thread, ns.
fn measure_once(
    e: &Enclave,
    kind: Kind,
    calls: u64,
    placement: Placement,
    cores: [usize; 2],
    read_input: &[u8],
) -> Result<f64, ScenarioError> {
    let barrier = Barrier::new(2);
    let per_ecall = match kind {
        Kind::Ecall => 1,
        Kind::Ocall | Kind::Read => u64::from(OCALLS_PER_ECALL),
    };
    let ecalls = (calls / per_ecall).max(1);
    let ocall_input = OCALLS_PER_ECALL.encode();
    let times = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let barrier = &barrier;
                let ocall_input = &ocall_input;
                s.spawn(move || -> Result<f64, String> {
                    pin(None, placement.core(false, i, cores))?;
                    barrier.wait();
                    let t = Instant::now();
                    for _ in 0..ecalls {
                        let r = match kind {
                            Kind::Ecall => e.ecall(TCall::Empty.into(), &[]),
                            Kind::Ocall => e.ecall(TCall::Ocalls.into(), ocall_input),
                            Kind::Read => e.ecall(TCall::Reads.into(), read_input),
                        };
                        r.map_err(|e| e.to_string())?;
                    }
                    Ok(t.elapsed().as_nanos() as f64 / (ecalls * per_ecall) as f64)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a calling thread panicked".into()))
            })
            .collect::<Result<Vec<f64>, String>>()
    })
    .map_err(|e| ScenarioError::step("affinity measurement", e))?;
    Ok(times.into_iter().fold(0.0, f64::max))
}

/// Runs the affinity study and emits its measurements and table.
pub fn run(ctx: &Context<'_>, scenario: &str, plan: &Plan) -> Result<(), ScenarioError> {
    let vm = hypervisor();
    let Some(cores) = two_cores() else {
        return ctx.emit(
            scenario,
            "sandbox-switchless",
            Params::new(),
            Body::Check(Check::run(
                "core-affinity",
                Verdict::Warn,
                "fewer than two CPUs available: the affinity study needs two",
            )),
        );
    };
    let dir = tempfile::tempdir().at("a folder for the 1 KiB file")?;
    let path = dir.path().join("1k.bin");
    std::fs::write(&path, [0x42u8; transitions::READ_SIZE]).at("writing the 1 KiB file")?;
    let read_input = Reads {
        count: OCALLS_PER_ECALL,
        path: path.to_string_lossy().into_owned(),
    }
    .encode();

    let config = Config::switchless(WORKERS);
    let mut ours: Vec<(Placement, [f64; 3])> = Vec::new();
    let mut pinned_threads = String::new();
    for placement in [Placement::Grouping, Placement::Pairing] {
        ctx.check_cancel()?;
        let registry = transitions::register(Registry::new());
        let builder = config
            .builder(
                ctx,
                transitions::SERVICE,
                &[TCall::Empty.into()],
                &[builtin::NOOP, builtin::READ_FILE],
            )
            .backend(Backend::Sandbox)
            .tcs(APP_THREADS);
        let e = boundary::start(builder, &registry)?;
        match pin_enclave(&e, placement, cores) {
            Ok(kinds) => {
                pinned_threads = kinds
                    .iter()
                    .map(|(k, n)| format!("{n} {k}*"))
                    .collect::<Vec<_>>()
                    .join(", ");
            }
            Err(m) => {
                // No figure without the placement it claims.
                return ctx.emit(
                    scenario,
                    config.label(),
                    Params::new(),
                    Body::Check(Check::run(
                        "core-affinity",
                        Verdict::Warn,
                        format!("the study was skipped: pinning the threads failed: {m}"),
                    )),
                );
            }
        }
        let mut medians = [0.0; 3];
        for (k, kind) in [Kind::Ecall, Kind::Ocall, Kind::Read]
            .into_iter()
            .enumerate()
        {
            // One unmeasured round, then three measured.
            measure_once(
                &e,
                kind,
                plan.affinity_calls / 4,
                placement,
                cores,
                &read_input,
            )?;
            let samples: Vec<f64> = (0..3)
                .map(|_| measure_once(&e, kind, plan.affinity_calls, placement, cores, &read_input))
                .collect::<Result<_, _>>()?;
            let name = ["ecall-empty", "ocall-empty", "ocall-read"][k];
            let mut params = config.params();
            params.insert("placement".into(), Value::from(placement.name()));
            params.insert("app_threads".into(), Value::from(2));
            params.insert(
                "cores".into(),
                Value::from(format!("{},{}", cores[0], cores[1])),
            );
            let s = Samples {
                iters_per_sample: plan.affinity_calls,
                per_iter_ns: samples,
                overhead_ns: None,
            };
            medians[k] = ctx.emit_samples(scenario, config.label(), params, name, s, None)?;
        }
        ours.push((placement, medians));
    }
    ctx.emit(
        scenario,
        "all",
        Params::new(),
        Body::Table(table(&ours, cores, vm, &pinned_threads)),
    )
}

fn winner(grouping: f64, pairing: f64) -> &'static str {
    if grouping < pairing {
        "grouping"
    } else {
        "pairing"
    }
}

/// Table 1 published beside ours, µs per call.
fn table(ours: &[(Placement, [f64; 3])], cores: [usize; 2], vm: bool, pinned: &str) -> Table {
    let get = |p: Placement, k: usize| {
        ours.iter()
            .find(|(q, _)| *q == p)
            .map_or(f64::NAN, |(_, m)| m[k])
    };
    let rows = published::TABLE_1
        .iter()
        .enumerate()
        .map(|(k, (call, g, p))| {
            let (og, op) = (get(Placement::Grouping, k), get(Placement::Pairing, k));
            vec![
                Value::from(*call),
                Value::from(*g),
                Value::from(*p),
                Value::from(winner(*g, *p)),
                Value::from((og / 10.0).round() / 100.0),
                Value::from((op / 10.0).round() / 100.0),
                Value::from(winner(og, op)),
            ]
        })
        .collect();
    let mut notes = vec![format!(
        "Two switchless workers per direction and two application threads on CPUs {} and {}; \
         pinned besides our two calling threads: {pinned}. Ocall figures are per ocall, \
         {OCALLS_PER_ECALL} per ecall. The slower thread's time per call, median of three \
         runs.",
        cores[0], cores[1]
    )];
    notes.push(if vm {
        "This CPU reports a hypervisor: these are vCPUs, which the host may place on one \
         physical core or move between cores; grouping and pairing are requests to the \
         guest's scheduler only, and the comparison means little here."
            .into()
    } else {
        "No hypervisor reported: the CPUs are the machine's own (hyper-threads of one core \
         would still share it)."
            .into()
    });
    Table {
        name: "core-affinity".into(),
        title: "Switchless worker placement, µs per call (SGXBox Table 1)".into(),
        columns: [
            "call",
            "grouping (published)",
            "pairing (published)",
            "faster (published)",
            "grouping (ours)",
            "pairing (ours)",
            "faster (ours)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: Some(format!("Published columns: {}", published::SOURCE)),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_put_threads_where_the_paper_did() {
        let c = [3, 5];
        // Grouping: workers on the first core, application threads on the second.
        assert_eq!(Placement::Grouping.core(true, 0, c), 3);
        assert_eq!(Placement::Grouping.core(true, 1, c), 3);
        assert_eq!(Placement::Grouping.core(false, 0, c), 5);
        assert_eq!(Placement::Grouping.core(false, 1, c), 5);
        // Pairing: one of each per core.
        assert_eq!(Placement::Pairing.core(true, 0, c), 3);
        assert_eq!(Placement::Pairing.core(false, 0, c), 3);
        assert_eq!(Placement::Pairing.core(true, 1, c), 5);
        assert_eq!(Placement::Pairing.core(false, 1, c), 5);
    }

    #[test]
    fn the_table_names_the_faster_placement_on_both_sides() {
        let t = table(
            &[
                (Placement::Grouping, [1000.0, 700.0, 9000.0]),
                (Placement::Pairing, [1200.0, 800.0, 5000.0]),
            ],
            [0, 1],
            true,
            "2 tworker-*",
        );
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[0][3], Value::from("grouping"));
        assert_eq!(t.rows[2][3], Value::from("pairing"));
        assert_eq!(t.rows[0][6], Value::from("grouping"));
        assert_eq!(t.rows[2][6], Value::from("pairing"));
        assert!(t.notes[1].contains("hypervisor"));
    }

    #[test]
    fn this_thread_can_be_pinned_and_unpinned() {
        let Some(cores) = two_cores() else { return };
        let before = sched_getaffinity(None).unwrap();
        std::thread::spawn(move || pin(None, cores[1]).unwrap())
            .join()
            .unwrap();
        assert_eq!(
            sched_getaffinity(None).unwrap(),
            before,
            "only the spawned thread moved"
        );
        assert!(threads(std::process::id(), "no-such-thread-").is_empty());
    }
}
