//! The published figures (Open Enclave's tables) beside ours, the tables that put them side
//! by side, and the checks computed from the sweeps.

use aws_lc_rs::digest::{SHA256, digest};
use enclave::Backend;
use enclave::alloc::{self};
use measure::record::{
    Check, Cost, CostFigure, DurationPass, Params, ScalingMode, ScalingPoint, Table, Value, Verdict,
};
use measure::sweep::speedup_efficiency;

use super::Sweep;
use super::chain::{Chain, KeyKind, VERIFY_AT};
use harness::hex::hex;

/// A fixed-duration pass as a weak-scaling point relative to `base` (the sweep's first).
pub(super) fn scaling_point(pass: &DurationPass, base: Option<&ScalingPoint>) -> ScalingPoint {
    let base = base
        .map(|b| (b.threads, b.ops_per_s))
        .unwrap_or((pass.threads, pass.ops_per_s));
    let (speedup, efficiency) = speedup_efficiency(base, pass.threads, pass.ops_per_s);
    ScalingPoint {
        name: pass.name.clone(),
        mode: ScalingMode::Weak,
        threads: pass.threads,
        cores: pass.cores,
        oversubscribed: pass.oversubscribed,
        ops_total: pass.ops_total,
        wall_samples_ns: vec![pass.wall_ns],
        wall_ns: pass.wall_ns,
        ops_per_s: pass.ops_per_s,
        speedup,
        efficiency,
    }
}

/// Published figures: Open Enclave's X.509 benchmark (2021), 8-vCPU Azure DC8_v2, mbedtls
/// 2.25; requests per second at 1 and 8 threads.
pub const PUBLISHED: [(&str, f64, f64); 2] =
    [("standalone", 386.0, 2062.0), ("enclave", 240.0, 124.0)];

pub(super) fn rate_at(s: &Sweep, threads: u64) -> Option<&DurationPass> {
    s.passes.iter().find(|p| p.threads == threads)
}

/// The published figures beside ours: throughput at the fewest and most threads, and the
/// ratio, which is what compares across machines.
pub(super) fn comparison_table(sweeps: &[Sweep]) -> Table {
    let mut rows: Vec<Vec<Value>> = PUBLISHED
        .iter()
        .map(|(what, one, eight)| {
            vec![
                Value::from(format!("{what} (published)")),
                Value::from("mbedtls 2.25"),
                Value::from(1),
                Value::from(*one),
                Value::from(8),
                Value::from(*eight),
                Value::from(eight / 8.0),
                Value::from((eight / one * 100.0).round() / 100.0),
            ]
        })
        .collect();
    for s in sweeps {
        let (Some(lo), Some(hi)) = (s.passes.first(), s.passes.last()) else {
            continue;
        };
        rows.push(vec![
            Value::from(format!("{} (ours)", s.cfg.title())),
            Value::from(s.key.name()),
            Value::from(lo.threads),
            Value::from(lo.ops_per_s.round()),
            Value::from(hi.threads),
            Value::from(hi.ops_per_s.round()),
            Value::from(hi.ops_per_s_per_thread.round()),
            Value::from(if lo.ops_per_s > 0.0 {
                (hi.ops_per_s / lo.ops_per_s * 100.0).round() / 100.0
            } else {
                0.0
            }),
        ]);
    }
    Table {
        name: "published-vs-ours".into(),
        title: "Chain verifications per second: published (Open Enclave, 2021) and ours".into(),
        columns: [
            "configuration",
            "chain / library",
            "threads (low)",
            "req/s (low)",
            "threads (high)",
            "req/s (high)",
            "req/s per thread (high)",
            "high / low",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: Some(
            "Published rows: Open Enclave X.509 benchmark (2021), 8-vCPU Azure DC8_v2, \
             mbedtls 2.25, SGX enclave with its default single-lock allocator in a 2 MB heap; \
             ours: this run"
                .into(),
        ),
        notes: vec![
            "Absolute rates differ (their chain, library and CPU are not ours); compare the \
             shape: the high/low ratio, above 1 when throughput scales, below 1 when it falls."
                .into(),
        ],
    }
}

/// The enclave allocator's counters per sandbox configuration: how many allocations a
/// verification makes through it, by origin.
pub(super) fn alloc_table(sweeps: &[Sweep]) -> Option<Table> {
    let mut rows: Vec<Vec<Value>> = Vec::new();
    for s in sweeps {
        let Some(st) = s.stats.filter(|st| st.heap.capacity > 0) else {
            continue;
        };
        for (pass, d) in s.passes.iter().zip(&s.deltas) {
            let per = |n: u64| {
                if pass.ops_total > 0 {
                    (n as f64 / pass.ops_total as f64 * 10.0).round() / 10.0
                } else {
                    0.0
                }
            };
            let acquisitions = d.rust_allocs + d.c_allocs + d.frees;
            rows.push(vec![
                Value::from(s.cfg.title()),
                Value::from(s.key.name()),
                Value::from(pass.threads),
                Value::from(pass.ops_total),
                Value::from(per(d.rust_allocs)),
                Value::from(per(d.c_allocs)),
                Value::from(if acquisitions > 0 {
                    (d.contended as f64 / acquisitions as f64 * 1000.0).round() / 10.0
                } else {
                    0.0
                }),
                Value::from(d.over_budget),
                Value::from(st.heap.capacity),
                Value::from(st.heap.peak),
                Value::from(if st.aws_lc_routed { "yes" } else { "no" }),
            ]);
        }
    }
    (!rows.is_empty()).then(|| Table {
        name: "enclave-allocator".into(),
        title: "The enclave's single-lock heap, per pass".into(),
        columns: [
            "configuration",
            "chain",
            "threads",
            "verifications",
            "Rust allocs / verification",
            "aws-lc allocs / verification",
            "lock waits %",
            "over budget",
            "heap bytes",
            "peak bytes",
            "aws-lc routed",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        source: None,
        notes: vec![
            "Lock waits: allocations and frees that found the heap's lock held by another \
             thread, as a share of all of them — the cost the original's enclave paid. The \
             system allocator's configurations do not use the bounded heap."
                .into(),
        ],
    })
}

/// What the heap's counters grew by from `a` to `b` (capacity and peak: `b`'s).
pub(super) fn delta(a: &alloc::HeapStats, b: &alloc::HeapStats) -> alloc::HeapStats {
    alloc::HeapStats {
        capacity: b.capacity,
        in_use: b.in_use,
        peak: b.peak,
        rust_allocs: b.rust_allocs.saturating_sub(a.rust_allocs),
        c_allocs: b.c_allocs.saturating_sub(a.c_allocs),
        frees: b.frees.saturating_sub(a.frees),
        over_budget: b.over_budget.saturating_sub(a.over_budget),
        contended: b.contended.saturating_sub(a.contended),
    }
}

pub(super) fn chain_table(chains: &[(Chain, bool)]) -> Table {
    let mut rows = Vec::new();
    for (c, reused) in chains {
        for (which, der) in [
            ("root", &c.root),
            ("intermediate", &c.intermediate),
            ("leaf", &c.leaf),
        ] {
            rows.push(vec![
                Value::from(c.key.name()),
                Value::from(which),
                Value::from(der.len()),
                Value::from(hex(digest(&SHA256, der).as_ref())),
                Value::from(if *reused { "reused" } else { "generated" }),
            ]);
        }
    }
    Table {
        name: "chains".into(),
        title: "Certificate chains (SHA-256 of each DER certificate)".into(),
        columns: ["chain", "certificate", "bytes", "sha-256", "origin"]
            .map(String::from)
            .to_vec(),
        rows,
        source: None,
        notes: vec![format!(
            "Written to x509/<chain>/ in the run's folder; a run into the same folder reuses \
             them. Verified for server authentication at {VERIFY_AT} s after the epoch \
             (2025-06-01). Records name a chain by the first 16 hex digits of SHA-256(leaf || \
             intermediate || root)."
        )],
    }
}

/// The checks, on this machine's numbers. `headroom(key)`: the cores two spinning
/// threads got before and after that chain's sweeps
/// ([`two_thread_headroom`](super::two_thread_headroom)).
pub(super) fn checks(
    sweeps: &[Sweep],
    headroom: &dyn Fn(KeyKind) -> [f64; 2],
) -> Vec<(String, Params, Check)> {
    let mut out = Vec::new();
    let find = |backend: Backend, alloc: &str, key: KeyKind| {
        sweeps.iter().find(|s| {
            s.cfg.config.backend == backend && s.cfg.allocator.name() == alloc && s.key == key
        })
    };
    let verdict = |ok: bool| if ok { Verdict::Pass } else { Verdict::Warn };
    for key in KeyKind::ALL {
        let h = headroom(key);
        let free = (h[0] + h[1]) / 2.0;
        let busy = if free < 1.7 {
            format!(
                "; two spinning threads got only {:.2} and {:.2} cores before and after these \
                 sweeps (busy neighbours): scaling to 2 threads cannot show here",
                h[0], h[1]
            )
        } else {
            format!(
                "; two spinning threads got {:.2} and {:.2} cores before and after",
                h[0], h[1]
            )
        };
        let p = measure::params! {"key" => key.name()};
        let native = find(Backend::Native, "system", key);
        let system = find(Backend::Sandbox, "system", key);
        let single = find(Backend::Sandbox, "single-lock", key);
        if let Some(n) = native {
            let check = match (rate_at(n, 1), rate_at(n, 2)) {
                (Some(a), Some(b)) => {
                    let r = b.ops_per_s / a.ops_per_s.max(f64::MIN_POSITIVE);
                    Check {
                        subject: measure::record::CheckSubject::Run,
                        name: "native-scales".into(),
                        verdict: verdict(r >= 1.7),
                        message: format!(
                            "2 threads: {:.0} req/s = {r:.2}x the 1-thread {:.0} req/s (want >= 1.7x){busy}",
                            b.ops_per_s, a.ops_per_s
                        ),
                    }
                }
                _ => not_measured("native-scales"),
            };
            out.push(("native".to_owned(), p.clone(), check));
        }
        if let (Some(n), Some(s)) = (native, system) {
            let worst = s
                .passes
                .iter()
                .filter_map(|sp| {
                    rate_at(n, sp.threads).map(|np| {
                        (
                            sp.threads,
                            sp.ops_per_s / np.ops_per_s.max(f64::MIN_POSITIVE),
                        )
                    })
                })
                .min_by(|a, b| (a.1 - 1.0).abs().total_cmp(&(b.1 - 1.0).abs()).reverse());
            let check = match worst {
                Some((t, r)) => Check {
                    subject: measure::record::CheckSubject::Run,
                    name: "sandbox-system-near-native".into(),
                    verdict: verdict((r - 1.0).abs() <= 0.15),
                    message: format!(
                        "largest gap at {t} thread(s): sandbox {:.1}% of native (want within 15% at every count)",
                        r * 100.0
                    ),
                },
                None => not_measured("sandbox-system-near-native"),
            };
            out.push(("sandbox".to_owned(), p.clone(), check));
        }
        if let Some(s) = single {
            let per_thread_ratio = |sw: &Sweep| match (rate_at(sw, 1), rate_at(sw, 2)) {
                (Some(a), Some(b)) => Some((
                    a.ops_per_s_per_thread,
                    b.ops_per_s_per_thread,
                    b.ops_per_s_per_thread / a.ops_per_s_per_thread.max(f64::MIN_POSITIVE),
                )),
                _ => None,
            };
            let check = match per_thread_ratio(s) {
                Some((one, two, r)) => {
                    // The fall is the lock's only if the machine itself scales: the native
                    // run's per-thread ratio is the baseline it must fall visibly below.
                    let base = native.and_then(per_thread_ratio).map(|x| x.2);
                    let ok = r <= 0.85 && base.is_none_or(|n| r <= n - 0.10) && free >= 1.7;
                    Check {
                        subject: measure::record::CheckSubject::Run,
                        name: "single-lock-per-thread-falls".into(),
                        verdict: verdict(ok),
                        message: format!(
                            "per thread: {two:.0} req/s at 2 threads = {:.0}% of {one:.0} at 1{} \
                             (want visibly below: <= 85%, and 10 points below native's)",
                            r * 100.0,
                            match base {
                                Some(n) => format!("; native keeps {:.0}%", n * 100.0),
                                None => String::new(),
                            }
                        ) + &busy,
                    }
                }
                None => not_measured("single-lock-per-thread-falls"),
            };
            let mut p = p.clone();
            p.insert("allocator".into(), Value::from("single-lock"));
            out.push(("sandbox".to_owned(), p, check));
        }
    }
    out
}

pub(super) fn not_measured(name: &str) -> Check {
    Check {
        subject: measure::record::CheckSubject::Run,
        name: name.into(),
        verdict: Verdict::Warn,
        message: "not measured: the sweep lacks 1 or 2 threads".into(),
    }
}

/// The cost summary's rows: time per verification at one thread, per key type, `native`
/// against the sandbox configurations. A fixed-duration pass is one sample.
pub(super) fn costs(sweeps: &[Sweep]) -> Vec<Cost> {
    let figure = |sw: &Sweep| {
        let pass = rate_at(sw, 1).filter(|p| p.ops_per_s > 0.0)?;
        CostFigure::new(
            &sw.cfg.title(),
            sw.cfg.config.label(),
            vec![1e9 / pass.ops_per_s],
        )
    };
    let mut out = Vec::new();
    for key in [KeyKind::Rsa2048, KeyKind::EcdsaP256] {
        let of_key = || sweeps.iter().filter(move |s| s.key == key);
        let Some(baseline) = of_key()
            .find(|s| s.cfg.config.label() == "native")
            .and_then(figure)
        else {
            continue;
        };
        let protected: Vec<CostFigure> = of_key()
            .filter(|s| s.cfg.config.label() != "native")
            .filter_map(figure)
            .collect();
        if !protected.is_empty() {
            out.push(Cost {
                name: format!("verify a {} chain, 1 thread", key.name()),
                unit: "verification".to_owned(),
                baseline,
                protected,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use enclave::alloc::Mode;

    use super::super::{AllocReport, configs};
    use super::*;

    #[test]
    fn comparison_and_checks_from_synthetic_passes() {
        let pass = |t: u64, rate: f64| {
            measure::sweep::duration_pass(
                "verify",
                Duration::from_secs(1),
                Duration::from_secs(1),
                vec![(rate / t as f64) as u64; t as usize],
                2,
            )
        };
        let cfgs = configs();
        let sweep = |i: usize, rates: [f64; 2]| Sweep {
            cfg: cfgs[i].clone(),
            key: KeyKind::Rsa2048,
            passes: vec![pass(1, rates[0]), pass(2, rates[1])],
            stats: None,
            deltas: Vec::new(),
        };
        let sweeps = [
            sweep(0, [1000.0, 1900.0]),
            sweep(1, [980.0, 1850.0]),
            sweep(2, [600.0, 700.0]),
        ];
        let t = comparison_table(&sweeps);
        assert_eq!(t.rows.len(), 2 + 3);
        assert!(t.rows.iter().all(|r| r.len() == t.columns.len()));
        assert_eq!(t.rows[0][7], Value::from(5.34));
        assert!(t.source.as_deref().unwrap().contains("Open Enclave"));
        let c = checks(&sweeps, &|_| [2.0, 1.9]);
        assert_eq!(c.len(), 3);
        assert!(
            c.iter().all(|(_, _, c)| c.verdict == Verdict::Pass),
            "{c:?}"
        );
        let bad = [
            sweep(0, [1000.0, 1200.0]),
            sweep(1, [700.0, 1200.0]),
            sweep(2, [600.0, 1200.0]),
        ];
        let c = checks(&bad, &|_| [1.0, 1.1]);
        assert!(c[0].2.message.contains("busy neighbours"), "{c:?}");
        assert!(
            c.iter().all(|(_, _, c)| c.verdict == Verdict::Warn),
            "{c:?}"
        );
        // The allocator table: one row per single-lock pass, from the counters' growth.
        let heap = |rust, c, frees, contended| alloc::HeapStats {
            capacity: 1 << 21,
            in_use: 0,
            peak: 4096,
            rust_allocs: rust,
            c_allocs: c,
            frees,
            over_budget: 0,
            contended,
        };
        let mut single = sweep(2, [600.0, 700.0]);
        single.stats = Some(AllocReport {
            mode: Mode::SingleLock,
            aws_lc_routed: true,
            heap: heap(0, 0, 0, 0),
        });
        single.deltas = vec![
            heap(3000, 42_000, 45_000, 0),
            delta(&heap(1, 1, 1, 1), &heap(3501, 49_001, 52_501, 10_501)),
        ];
        assert!(alloc_table(&sweeps).is_none());
        let t = alloc_table(std::slice::from_ref(&single)).unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0][4], Value::from(5.0));
        assert_eq!(t.rows[0][5], Value::from(70.0));
        assert_eq!(t.rows[0][6], Value::from(0.0));
        assert_eq!(t.rows[1][6], Value::from(10.0));
        let p = scaling_point(&sweeps[0].passes[1], None);
        assert_eq!((p.speedup, p.efficiency), (1.0, 1.0));
        let base = scaling_point(&sweeps[0].passes[0], None);
        let p = scaling_point(&sweeps[0].passes[1], Some(&base));
        assert!((p.speedup - 1.9).abs() < 1e-9 && (p.efficiency - 0.95).abs() < 1e-9);
    }
}
