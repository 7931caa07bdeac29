//! Scenario `x509`: certificate-chain verification throughput in and out of the enclave, and
//! the enclave allocator behind it (Open Enclave's X.509 benchmark, 2021).
//!
//! Each thread makes ONE long ecall that loops {parse the chain from PEM, verify the leaf
//! against the root for server authentication at a fixed time, free} until its deadline and
//! returns how many verifications succeeded; a failed verification stops the pass with an
//! error. Threads are swept (1..8 by default) in three configurations: `native` (the
//! standalone baseline), `sandbox` with the system allocator, and `sandbox` with a bounded
//! single-lock heap ([`enclave::alloc`], 2 MiB by default) — the cause the original found for
//! its enclave throughput falling as threads were added. Chains (root, intermediate, leaf;
//! RSA-2048 and ECDSA P-256) are generated with `rcgen`, written to the run's folder (and
//! reused from there when the folder already holds them) and fingerprinted in the records.

mod analysis;
mod chain;
mod service;

use std::time::{Duration, Instant};

use enclave::alloc::{self};
use enclave::{Backend, Registry};
use measure::record::{Body, DurationPass, Params, ScalingPoint, Value};

pub use self::analysis::PUBLISHED;
use self::analysis::{
    alloc_table, chain_table, checks, comparison_table, costs, delta, scaling_point,
};
pub use self::chain::{Chain, KeyKind, LeafValidity, VERIFY_AT, X509Error, chain_dir};
pub use self::service::{
    AllocReport, Allocator, Call, LoadRequest, LoopRequest, SERVICE, register,
};
use harness::boundary::{self, Config};
use harness::codec::{Encode, decode};
use harness::{At, Context, Preset, Scenario, ScenarioError};

const NAME: &str = "x509";

/// One configuration of the sweep.
#[derive(Debug, Clone)]
pub struct X509Config {
    /// Backend.
    pub config: Config,
    /// The enclave's allocator.
    pub allocator: Allocator,
}

impl X509Config {
    /// A readable name (table rows, plot legends come from records).
    pub fn title(&self) -> String {
        match self.config.backend {
            Backend::Native => "native (standalone)".to_owned(),
            Backend::Sandbox => format!("sandbox, {} allocator", self.allocator.name()),
        }
    }
}

/// The three configurations, in run order.
pub fn configs() -> Vec<X509Config> {
    vec![
        X509Config {
            config: Config::regular(Backend::Native),
            allocator: Allocator::System,
        },
        X509Config {
            config: Config::regular(Backend::Sandbox),
            allocator: Allocator::System,
        },
        X509Config {
            config: Config::regular(Backend::Sandbox),
            allocator: Allocator::SingleLock(alloc::DEFAULT_HEAP),
        },
    ]
}

/// Thread counts swept by default.
pub fn default_threads(preset: Preset) -> Vec<usize> {
    match preset {
        Preset::Quick => vec![1, 2, 4],
        Preset::Full => (1..=8).collect(),
    }
}

/// Duration of each pass by default: the original's 6 s, or 0.5 s for `--quick`.
pub fn default_duration(preset: Preset) -> Duration {
    match preset {
        Preset::Quick => Duration::from_millis(500),
        Preset::Full => Duration::from_secs(2),
    }
}

/// Passes per thread count: the full preset repeats each point so that a comparison has
/// samples to test (five 2-second passes: 10 s a point, against the original's one 6-second
/// pass); the quick preset runs one.
pub fn passes_per_point(preset: Preset) -> usize {
    match preset {
        Preset::Quick => 1,
        Preset::Full => 5,
    }
}

/// Starts the service under `cfg` with `tcs` slots and loads `chain` into it.
pub fn start(
    ctx_model: Option<enclave::TransitionModel>,
    cfg: &X509Config,
    tcs: usize,
    chain: &Chain,
) -> Result<enclave::Enclave, ScenarioError> {
    let b = enclave::Enclave::builder(SERVICE)
        .backend(cfg.config.backend)
        .transition_model(ctx_model)
        .tcs(tcs)
        .init(&cfg.allocator.init());
    let e = boundary::start(b, &register(Registry::new()))?;
    e.ecall(Call::Load.into(), &chain.load_input())
        .at("loading the chain")?;
    Ok(e)
}

/// One verification through the enclave, at [`VERIFY_AT`].
pub fn verify(e: &enclave::Enclave) -> Result<(), enclave::Error> {
    e.ecall(Call::Verify.into(), &VERIFY_AT.encode()).map(drop)
}

/// The passes of one configuration and key, in thread order.
struct Sweep {
    cfg: X509Config,
    key: KeyKind,
    passes: Vec<DurationPass>,
    /// The allocator's counters at the end (sandbox only).
    stats: Option<AllocReport>,
    /// What each pass added to the bounded heap's counters (sandbox only).
    deltas: Vec<alloc::HeapStats>,
}

/// The `x509` scenario.
pub struct X509;

impl X509 {
    fn params(&self, cfg: &X509Config, chain: &Chain) -> Params {
        let mut p = cfg.config.params();
        p.insert("key".into(), Value::from(chain.key.name()));
        p.insert("allocator".into(), Value::from(cfg.allocator.name()));
        if let Allocator::SingleLock(n) = cfg.allocator {
            p.insert("heap_bytes".into(), Value::from(n));
        }
        // A prefix keeps plot legends readable; the full fingerprints are in the chain table.
        p.insert("chain".into(), Value::from(&chain.fingerprint()[..16]));
        p
    }

    fn sweep(
        &self,
        ctx: &Context<'_>,
        cfg: &X509Config,
        chain: &Chain,
        threads: &[usize],
        duration: Duration,
    ) -> Result<Sweep, ScenarioError> {
        let tcs = threads.iter().copied().max().unwrap_or(1);
        let e = start(ctx.options.transition_model.clone(), cfg, tcs, chain)?;
        // The chain must verify before it is timed: a failure is an error, not a zero.
        verify(&e).at("verifying the chain once")?;
        let params = self.params(cfg, chain);
        let sandbox = cfg.config.backend == Backend::Sandbox;
        let pass = |t: usize, d: Duration| {
            measure::sweep::fixed_duration("verify", t, d, |_, deadline| {
                let left = deadline.saturating_duration_since(Instant::now());
                let input = LoopRequest {
                    duration_ns: left.as_nanos() as u64,
                    at_s: VERIFY_AT,
                }
                .encode();
                let out = e.ecall(Call::Loop.into(), &input)?;
                decode::<u64>("loop reply", &out)
                    .map_err(|err| enclave::Error::Config(err.to_string()))
            })
            .map_err(|err| {
                ScenarioError::step(
                    format!("verification pass, {} ({})", cfg.title(), chain.key.name()),
                    err,
                )
            })
        };
        // An untimed warm-up on every TCS thread: a fresh enclave's first pass pays for its
        // threads' first allocations (arenas, page faults) and cold caches; measured, the
        // 1-thread ECDSA pass in the sandbox ran ~30% below the 2-thread pass per thread.
        pass(tcs, (duration / 5).min(Duration::from_millis(200)))?;
        let counters = || -> Result<AllocReport, ScenarioError> {
            let b = e
                .ecall(Call::Stats.into(), &[])
                .at("reading the allocator's counters")?;
            AllocReport::decode(&b).at("allocator counters")
        };
        let mut last = if sandbox { Some(counters()?) } else { None };
        let mut deltas = Vec::new();
        let mut passes = Vec::new();
        let mut points: Vec<ScalingPoint> = Vec::new();
        for &t in threads {
            let mut repeats = Vec::new();
            for _ in 0..passes_per_point(ctx.options.preset) {
                ctx.check_cancel()?;
                repeats.push(pass(t, duration)?);
            }
            let pass = measure::sweep::merge_passes(&repeats)
                .ok_or_else(|| ScenarioError::step("verification passes", "no pass ran"))?;
            let p = params.clone();
            ctx.emit(
                NAME,
                cfg.config.label(),
                p.clone(),
                Body::Duration(pass.clone()),
            )?;
            // The same pass as a scaling point, so that the report plots throughput,
            // speed-up and efficiency against threads (a fixed time per thread: the ideal is
            // weak scaling's, throughput growing with threads).
            let point = scaling_point(&pass, points.first());
            ctx.emit(NAME, cfg.config.label(), p, Body::Scaling(point.clone()))?;
            points.push(point);
            passes.push(pass);
            if let Some(before) = last {
                let now = counters()?;
                deltas.push(delta(&before.heap, &now.heap));
                last = Some(now);
            }
            ctx.progress().advance(1);
        }
        Ok(Sweep {
            cfg: cfg.clone(),
            key: chain.key,
            passes,
            stats: last,
            deltas,
        })
    }

    /// The run's chain of `key`: read from the output folder when an earlier run left one
    /// there, else generated and written.
    fn chain(&self, ctx: &Context<'_>, key: KeyKind) -> Result<(Chain, bool), ScenarioError> {
        let dir = chain_dir(&ctx.options.out_dir, key);
        if let Some(c) = Chain::read(key, &dir)? {
            return Ok((c, true));
        }
        let c = Chain::generate(key, LeafValidity::Current)?;
        c.write(&dir)?;
        Ok((c, false))
    }
}

/// How many cores two CPU-bound threads actually get right now: their combined spin count
/// over one thread's, in `each` per pass. A busy neighbour (a build, another benchmark)
/// shows here first, and explains a sweep that does not scale.
pub fn two_thread_headroom(each: Duration) -> f64 {
    let spin = |_: usize, deadline: Instant| {
        measure::sweep::loop_until(deadline, || {
            let mut x = std::hint::black_box(0x9e37_79b9_7f4a_7c15u64);
            for _ in 0..1000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            std::hint::black_box(x);
            Ok::<(), std::convert::Infallible>(())
        })
    };
    let rate = |threads| {
        measure::sweep::fixed_duration("spin", threads, each, spin)
            .map(|p| p.ops_per_s)
            .unwrap_or(0.0)
    };
    let one = rate(1);
    if one > 0.0 { rate(2) / one } else { 0.0 }
}

impl Scenario for X509 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "X.509 chain verification req/s vs threads (RSA-2048, ECDSA P-256): native, sandbox with the system or a single-lock allocator"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let threads = ctx
            .options
            .threads
            .clone()
            .unwrap_or_else(|| default_threads(ctx.options.preset));
        if threads.is_empty()
            || threads.contains(&0)
            || threads.iter().any(|&t| t > enclave::MAX_TCS)
        {
            return Err(ScenarioError::Option(format!(
                "x509 needs thread counts in 1..={}, got {threads:?}",
                enclave::MAX_TCS
            )));
        }
        let duration = ctx
            .options
            .duration
            .unwrap_or_else(|| default_duration(ctx.options.preset));
        let configs = configs();
        ctx.progress().begin(
            NAME,
            (KeyKind::ALL.len() * configs.len() * threads.len()) as u64,
        );
        let mut chains = Vec::new();
        for key in KeyKind::ALL {
            ctx.check_cancel()?;
            chains.push(self.chain(ctx, key)?);
        }
        let spin = Duration::from_millis(150);
        let mut headroom = Vec::new();
        let mut sweeps = Vec::new();
        for (chain, _) in &chains {
            let before = two_thread_headroom(spin);
            for cfg in &configs {
                sweeps.push(self.sweep(ctx, cfg, chain, &threads, duration)?);
            }
            headroom.push((chain.key, [before, two_thread_headroom(spin)]));
        }
        let all = measure::params! {};
        ctx.emit(NAME, "all", all.clone(), Body::Table(chain_table(&chains)))?;
        let mut cmp = comparison_table(&sweeps);
        let cores = measure::sweep::available_cores();
        if threads.iter().any(|&t| t as u64 > cores) {
            cmp.notes.push(format!(
                "This machine has {cores} cores: passes with more threads time-share them \
                 (oversubscribed); the original had 8 vCPUs."
            ));
        }
        ctx.emit(NAME, "all", all.clone(), Body::Table(cmp))?;
        if let Some(t) = alloc_table(&sweeps) {
            ctx.emit(NAME, "sandbox", all.clone(), Body::Table(t))?;
        }
        for (backend, mut p, check) in checks(&sweeps, &|key| {
            headroom
                .iter()
                .find(|h| h.0 == key)
                .map_or([0.0; 2], |h| h.1)
        }) {
            p.extend(all.clone());
            ctx.emit(NAME, &backend, p, Body::Check(check))?;
        }
        for cost in costs(&sweeps) {
            ctx.emit(NAME, "all", all.clone(), Body::Cost(cost))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use enclave::alloc::Mode;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    use super::*;

    fn verify_native(chain: &Chain) -> Result<(), enclave::Error> {
        let cfg = &configs()[0];
        let e = start(None, cfg, 1, chain).map_err(|e| enclave::Error::Config(e.to_string()))?;
        verify(&e)
    }

    #[test]
    fn valid_chains_verify_and_tampered_ones_do_not() {
        for key in KeyKind::ALL {
            let c = Chain::generate(key, LeafValidity::Current).unwrap();
            verify_native(&c).unwrap();
            let err = verify_native(&c.with_flipped_signature()).unwrap_err();
            assert!(err.to_string().contains("did not verify"), "{key:?}: {err}");
            let expired = Chain::generate(key, LeafValidity::Expired).unwrap();
            let err = verify_native(&expired).unwrap_err();
            assert!(err.to_string().contains("Expired"), "{key:?}: {err}");
            let other = Chain::generate(key, LeafValidity::Current).unwrap();
            let wrong_root = Chain {
                root: other.root,
                ..c.clone()
            };
            // The other root has the same name but another key: the path is built and its
            // signature fails.
            let err = verify_native(&wrong_root).unwrap_err();
            assert!(err.to_string().contains("did not verify"), "{key:?}: {err}");
        }
    }

    #[test]
    fn chain_round_trips_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let c = Chain::generate(KeyKind::EcdsaP256, LeafValidity::Current).unwrap();
        assert!(Chain::read(c.key, dir.path()).unwrap().is_none());
        c.write(dir.path()).unwrap();
        let back = Chain::read(c.key, dir.path()).unwrap().unwrap();
        assert_eq!(back.fingerprint(), c.fingerprint());
        assert_eq!(c.fingerprint().len(), 64);
        let pem = std::fs::read(dir.path().join("chain.pem")).unwrap();
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(certs.len(), 2);
        assert_eq!(certs[0].as_ref(), &c.leaf[..]);
    }

    #[test]
    fn service_rejects_bad_input_and_single_lock_outside_an_enclave() {
        let reg = register(Registry::new());
        let e = enclave::Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .start(&reg)
            .unwrap();
        assert!(verify(&e).unwrap_err().to_string().contains("no chain"));
        assert!(e.ecall(Call::Load.into(), &[9, 0, 0, 0, 1]).is_err());
        assert!(e.ecall(Call::Loop.into(), b"short").is_err());
        let mut long = VERIFY_AT.encode();
        long.push(0);
        assert!(e.ecall(Call::Verify.into(), &long).is_err());
        let stats = AllocReport::decode(&e.ecall(Call::Stats.into(), &[]).unwrap()).unwrap();
        assert_eq!(stats.mode, Mode::System);
        let err = enclave::Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .init(&Allocator::SingleLock(1 << 20).init())
            .start(&reg)
            .err()
            .unwrap();
        assert!(err.to_string().contains("enclave process"), "{err}");
        assert_eq!(
            Allocator::parse(&Allocator::SingleLock(4096).init()),
            Ok(Allocator::SingleLock(4096))
        );
        assert!(Allocator::parse(b"tcmalloc").is_err());
    }

    #[test]
    fn loop_counts_successful_verifications() {
        let c = Chain::generate(KeyKind::EcdsaP256, LeafValidity::Current).unwrap();
        let e = start(None, &configs()[0], 1, &c).unwrap();
        let input = LoopRequest {
            duration_ns: 20_000_000,
            at_s: VERIFY_AT,
        }
        .encode();
        let n: u64 = decode("loop reply", &e.ecall(Call::Loop.into(), &input).unwrap()).unwrap();
        assert!(n > 0);
        // A failing chain stops the loop with an error, not a count.
        e.ecall(Call::Load.into(), &c.with_flipped_signature().load_input())
            .unwrap();
        assert!(e.ecall(Call::Loop.into(), &input).is_err());
    }
}
