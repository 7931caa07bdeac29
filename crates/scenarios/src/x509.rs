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

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use aws_lc_rs::digest::{SHA256, digest};
use enclave::alloc::{self, Mode};
use enclave::{Backend, Ctx, Registry, Service, ServiceError};
use measure::record::{
    Body, Check, DurationPass, Params, ScalingMode, ScalingPoint, Table, Value, Verdict,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, RsaKeySize, SignatureAlgorithm,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm, UnixTime};
use webpki::{EndEntityCert, KeyUsage, anchor_from_trusted_cert};

use crate::boundary::{self, Config};
use crate::{Context, Preset, Scenario, ScenarioError};

const NAME: &str = "x509";
/// The enclave service's name.
pub const SERVICE: &str = "ccbench.x509";

/// Ecall ids of the service.
pub mod id {
    /// Input: `[u32 root length][root DER][chain PEM: leaf, then intermediates]`. Keeps the
    /// chain for the calls below (the chain enters the enclave once, not per verification).
    pub const LOAD: u32 = 0;
    /// Input: `[u64 verification time, s since the Unix epoch]`. One verification.
    pub const VERIFY: u32 = 1;
    /// Input: `[u64 duration, ns][u64 verification time, s]`. Loops verifications for the
    /// duration; returns the count as a little-endian u64.
    pub const LOOP: u32 = 2;
    /// Returns the enclave allocator's counters, see [`super::AllocReport`].
    pub const STATS: u32 = 3;
}

/// The fixed verification time: 2025-06-01T00:00:00Z, inside every valid chain's validity.
pub const VERIFY_AT: u64 = 1_748_736_000;

/// Signature algorithms the verifier accepts (the two the chains use).
static ALGS: &[&dyn SignatureVerificationAlgorithm] = &[
    webpki::aws_lc_rs::ECDSA_P256_SHA256,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
];

/// Why the service refused a chain or a call. Crosses the boundary as its message.
#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    /// The PEM chain did not decode.
    #[error("parsing the chain's PEM: {0}")]
    Pem(String),
    /// The chain holds no certificate.
    #[error("the chain holds no certificate")]
    Empty,
    /// A certificate did not parse (`which`: leaf or root).
    #[error("parsing the {which} certificate: {source}")]
    Parse {
        /// Which certificate.
        which: &'static str,
        /// webpki's reason.
        source: webpki::Error,
    },
    /// The chain did not verify.
    #[error("the chain did not verify: {0}")]
    Verify(webpki::Error),
    /// The bounded heap could not serve the work: the requests were served outside the
    /// budget (see [`enclave::alloc`]), which a real enclave would not have survived.
    #[error(
        "heap exhausted: {events} allocation(s) did not fit the enclave's {capacity}-byte heap"
    )]
    HeapExhausted {
        /// The heap's capacity in bytes.
        capacity: usize,
        /// Requests that did not fit since the call began.
        events: u64,
    },
    /// No chain was loaded before verifying.
    #[error("no chain loaded")]
    NotLoaded,
    /// A malformed ecall input.
    #[error("malformed input: {0}")]
    Input(&'static str),
}

impl From<X509Error> for ServiceError {
    fn from(e: X509Error) -> Self {
        ServiceError::Failed(e.to_string())
    }
}

/// The key type of a chain (every certificate in it uses the same kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA-2048, PKCS#1 v1.5 signatures with SHA-256.
    Rsa2048,
    /// ECDSA over P-256 with SHA-256.
    EcdsaP256,
}

impl KeyKind {
    /// Both kinds, in run order.
    pub const ALL: [KeyKind; 2] = [KeyKind::Rsa2048, KeyKind::EcdsaP256];

    /// The name in records and file names.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Rsa2048 => "rsa-2048",
            KeyKind::EcdsaP256 => "ecdsa-p256",
        }
    }

    fn alg(self) -> &'static SignatureAlgorithm {
        match self {
            KeyKind::Rsa2048 => &rcgen::PKCS_RSA_SHA256,
            KeyKind::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        }
    }

    fn key(self) -> Result<KeyPair, rcgen::Error> {
        match self {
            KeyKind::Rsa2048 => KeyPair::generate_rsa_for(self.alg(), RsaKeySize::_2048),
            KeyKind::EcdsaP256 => KeyPair::generate_for(self.alg()),
        }
    }
}

/// The leaf's validity period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafValidity {
    /// 2024-01-01 to 2030-01-01: valid at [`VERIFY_AT`].
    Current,
    /// 2020-01-01 to 2021-01-01: expired at [`VERIFY_AT`].
    Expired,
}

/// A certificate chain: root, intermediate, leaf, all DER.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The key type.
    pub key: KeyKind,
    /// The self-signed root (the trust anchor).
    pub root: Vec<u8>,
    /// The intermediate CA, signed by the root.
    pub intermediate: Vec<u8>,
    /// The server certificate, signed by the intermediate.
    pub leaf: Vec<u8>,
}

fn gen_err(e: rcgen::Error) -> ScenarioError {
    ScenarioError::step("generating a certificate chain", e)
}

impl Chain {
    /// Generates a fresh chain (new keys each time; the keys are dropped, only the
    /// certificates are kept).
    pub fn generate(key: KeyKind, leaf: LeafValidity) -> Result<Chain, ScenarioError> {
        let name = key.name();
        let ca = |cn: String, constraint: BasicConstraints| {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.distinguished_name
                .push(DnType::OrganizationName, "ccbench");
            p.is_ca = IsCa::Ca(constraint);
            p.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2040, 1, 1);
            p
        };
        let root_key = key.key().map_err(gen_err)?;
        let root_params = ca(
            format!("ccbench x509 root ({name})"),
            BasicConstraints::Unconstrained,
        );
        let root = root_params.self_signed(&root_key).map_err(gen_err)?;
        let root_issuer = Issuer::new(root_params, &root_key);

        let int_key = key.key().map_err(gen_err)?;
        let int_params = ca(
            format!("ccbench x509 intermediate ({name})"),
            BasicConstraints::Constrained(0),
        );
        let intermediate = int_params
            .signed_by(&int_key, &root_issuer)
            .map_err(gen_err)?;
        let int_issuer = Issuer::new(int_params, &int_key);

        let leaf_key = key.key().map_err(gen_err)?;
        let mut p =
            CertificateParams::new(vec!["bench.ccbench.test".to_owned()]).map_err(gen_err)?;
        p.distinguished_name
            .push(DnType::CommonName, "bench.ccbench.test");
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let (from, to) = match leaf {
            LeafValidity::Current => ((2024, 1, 1), (2030, 1, 1)),
            LeafValidity::Expired => ((2020, 1, 1), (2021, 1, 1)),
        };
        p.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        p.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
        let leaf = p.signed_by(&leaf_key, &int_issuer).map_err(gen_err)?;
        Ok(Chain {
            key,
            root: root.der().to_vec(),
            intermediate: intermediate.der().to_vec(),
            leaf: leaf.der().to_vec(),
        })
    }

    /// The chain as the service parses it: leaf, then intermediate, PEM.
    pub fn chain_pem(&self) -> String {
        let mut s = pem::encode(&pem::Pem::new("CERTIFICATE", self.leaf.clone()));
        s.push_str(&pem::encode(&pem::Pem::new(
            "CERTIFICATE",
            self.intermediate.clone(),
        )));
        s
    }

    /// SHA-256 over the leaf, intermediate and root DER, in that order, as hex: names the
    /// chain in records.
    pub fn fingerprint(&self) -> String {
        let mut all = self.leaf.clone();
        all.extend_from_slice(&self.intermediate);
        all.extend_from_slice(&self.root);
        hex(digest(&SHA256, &all).as_ref())
    }

    /// The [`id::LOAD`] input.
    pub fn load_input(&self) -> Vec<u8> {
        let mut v = (self.root.len() as u32).to_le_bytes().to_vec();
        v.extend_from_slice(&self.root);
        v.extend_from_slice(self.chain_pem().as_bytes());
        v
    }

    /// The same chain with one bit of the leaf's signature flipped (its last byte).
    pub fn with_flipped_signature(&self) -> Chain {
        let mut c = self.clone();
        if let Some(b) = c.leaf.last_mut() {
            *b ^= 0x01;
        }
        c
    }

    /// Writes `root`, `intermediate` and `leaf` as `.der` and `.pem`, and `chain.pem`
    /// (leaf, intermediate) into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), ScenarioError> {
        let fail = |e: std::io::Error| {
            ScenarioError::step(format!("writing the chain to {}", dir.display()), e)
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        for (name, der) in [
            ("root", &self.root),
            ("intermediate", &self.intermediate),
            ("leaf", &self.leaf),
        ] {
            std::fs::write(dir.join(format!("{name}.der")), der).map_err(fail)?;
            let pem = pem::encode(&pem::Pem::new("CERTIFICATE", der.clone()));
            std::fs::write(dir.join(format!("{name}.pem")), pem).map_err(fail)?;
        }
        std::fs::write(dir.join("chain.pem"), self.chain_pem()).map_err(fail)
    }

    /// Reads a chain [`Chain::write`] wrote; `Ok(None)` when `dir` holds none.
    pub fn read(key: KeyKind, dir: &Path) -> Result<Option<Chain>, ScenarioError> {
        let names = ["root.der", "intermediate.der", "leaf.der"];
        if !names.iter().all(|n| dir.join(n).is_file()) {
            return Ok(None);
        }
        let mut der = Vec::new();
        for n in names {
            let path = dir.join(n);
            der.push(
                std::fs::read(&path)
                    .map_err(|e| ScenarioError::step(format!("reading {}", path.display()), e))?,
            );
        }
        let [root, intermediate, leaf] = <[Vec<u8>; 3]>::try_from(der)
            .map_err(|_| ScenarioError::step("reading the chain", "three certificates"))?;
        Ok(Some(Chain {
            key,
            root,
            intermediate,
            leaf,
        }))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A chain as the service holds it.
struct Loaded {
    root: Vec<u8>,
    chain_pem: Vec<u8>,
}

/// Parses the chain from PEM and verifies it against the root: the unit of work.
fn verify_once(root: &CertificateDer<'_>, chain_pem: &[u8], at: UnixTime) -> Result<(), X509Error> {
    let anchor = anchor_from_trusted_cert(root).map_err(|source| X509Error::Parse {
        which: "root",
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| X509Error::Pem(e.to_string()))?;
    let (leaf, intermediates) = certs.split_first().ok_or(X509Error::Empty)?;
    let ee = EndEntityCert::try_from(leaf).map_err(|source| X509Error::Parse {
        which: "leaf",
        source,
    })?;
    ee.verify_for_usage(
        ALGS,
        &[anchor],
        intermediates,
        at,
        KeyUsage::server_auth(),
        None,
        None,
    )
    .map_err(X509Error::Verify)?;
    Ok(())
}

/// The enclave service: holds a chain and verifies it in loops.
struct X509Service {
    chain: RwLock<Option<Arc<Loaded>>>,
    /// Capacity of the bounded heap when this enclave runs on one.
    heap: Option<usize>,
}

fn le_u64(b: &[u8], at: usize) -> Result<u64, X509Error> {
    b.get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(u64::from_le_bytes)
        .ok_or(X509Error::Input("expected a little-endian u64"))
}

impl X509Service {
    fn loaded(&self) -> Result<Arc<Loaded>, X509Error> {
        self.chain
            .read()
            .map_err(|_| X509Error::Input("chain lock poisoned"))?
            .clone()
            .ok_or(X509Error::NotLoaded)
    }

    /// Fails when the bounded heap overflowed since `since` (over-budget events).
    fn check_heap(&self, since: u64) -> Result<(), X509Error> {
        let now = alloc::over_budget_events();
        match self.heap {
            Some(capacity) if now != since => Err(X509Error::HeapExhausted {
                capacity,
                events: now - since,
            }),
            _ => Ok(()),
        }
    }
}

impl Service for X509Service {
    fn ecall(&self, call_id: u32, input: &[u8], _: &mut Ctx<'_>) -> Result<Vec<u8>, ServiceError> {
        match call_id {
            id::LOAD => {
                let len = input
                    .first_chunk::<4>()
                    .map(|b| u32::from_le_bytes(*b) as usize)
                    .ok_or(X509Error::Input("missing the root's length"))?;
                let root = input
                    .get(4..4 + len)
                    .ok_or(X509Error::Input("root shorter than its length"))?;
                let loaded = Loaded {
                    root: root.to_vec(),
                    chain_pem: input[4 + len..].to_vec(),
                };
                *self
                    .chain
                    .write()
                    .map_err(|_| X509Error::Input("chain lock poisoned"))? = Some(Arc::new(loaded));
                Ok(Vec::new())
            }
            id::VERIFY => {
                let at = UnixTime::since_unix_epoch(Duration::from_secs(le_u64(input, 0)?));
                let c = self.loaded()?;
                let since = alloc::over_budget_events();
                verify_once(&CertificateDer::from(&c.root[..]), &c.chain_pem, at)?;
                self.check_heap(since)?;
                Ok(Vec::new())
            }
            id::LOOP => {
                let deadline = Instant::now() + Duration::from_nanos(le_u64(input, 0)?);
                let at = UnixTime::since_unix_epoch(Duration::from_secs(le_u64(input, 8)?));
                let c = self.loaded()?;
                let root = CertificateDer::from(&c.root[..]);
                let since = alloc::over_budget_events();
                let n = measure::sweep::loop_until(deadline, || {
                    verify_once(&root, &c.chain_pem, at)?;
                    self.check_heap(since)
                })?;
                Ok(n.to_le_bytes().to_vec())
            }
            id::STATS => Ok(AllocReport::current(self.heap.is_some()).encode()),
            other => Err(ServiceError::UnknownCall(other)),
        }
    }
}

/// What the enclave's allocator did, as [`id::STATS`] returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocReport {
    /// The allocator the service runs on.
    pub mode: Mode,
    /// Whether aws-lc's C allocations go through it.
    pub aws_lc_routed: bool,
    /// The bounded heap's counters (zero with the system allocator).
    pub heap: alloc::HeapStats,
}

impl AllocReport {
    fn current(bounded: bool) -> Self {
        AllocReport {
            mode: if bounded {
                Mode::SingleLock
            } else {
                Mode::System
            },
            aws_lc_routed: alloc::aws_lc_routed(),
            heap: alloc::stats(),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let h = &self.heap;
        [
            u64::from(self.mode == Mode::SingleLock),
            u64::from(self.aws_lc_routed),
            h.capacity as u64,
            h.in_use as u64,
            h.peak as u64,
            h.rust_allocs,
            h.c_allocs,
            h.frees,
            h.over_budget,
            h.contended,
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
    }

    /// Decodes [`id::STATS`]'s output.
    pub fn decode(b: &[u8]) -> Result<Self, X509Error> {
        let v = |i: usize| le_u64(b, 8 * i);
        Ok(AllocReport {
            mode: if v(0)? == 1 {
                Mode::SingleLock
            } else {
                Mode::System
            },
            aws_lc_routed: v(1)? == 1,
            heap: alloc::HeapStats {
                capacity: v(2)? as usize,
                in_use: v(3)? as usize,
                peak: v(4)? as usize,
                rust_allocs: v(5)?,
                c_allocs: v(6)?,
                frees: v(7)?,
                over_budget: v(8)?,
                contended: v(9)?,
            },
        })
    }
}

/// The service's init bytes: the allocator to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// The system allocator.
    System,
    /// A bounded heap of this many bytes behind one global lock.
    SingleLock(usize),
}

impl Allocator {
    /// The init bytes naming this allocator.
    pub fn init(self) -> Vec<u8> {
        match self {
            Allocator::System => b"system".to_vec(),
            Allocator::SingleLock(n) => format!("single-lock:{n}").into_bytes(),
        }
    }

    fn parse(b: &[u8]) -> Result<Self, String> {
        let s = std::str::from_utf8(b).map_err(|_| "allocator name is not UTF-8")?;
        match s.split_once(':') {
            None if s.is_empty() || s == "system" => Ok(Allocator::System),
            Some(("single-lock", n)) => n
                .parse()
                .map(Allocator::SingleLock)
                .map_err(|_| format!("invalid heap size {n:?}")),
            _ => Err(format!("unknown allocator {s:?}")),
        }
    }

    /// The allocator's name in records.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::System => Mode::System.name(),
            Allocator::SingleLock(_) => Mode::SingleLock.name(),
        }
    }
}

/// Registers the service. Its init bytes name the allocator ([`Allocator::init`]); the
/// single-lock allocator is refused outside an enclave process (it would switch the host's
/// allocator under every other thread).
pub fn register(r: Registry) -> Registry {
    r.with(SERVICE, |init| {
        let heap = match Allocator::parse(init)? {
            Allocator::System => None,
            Allocator::SingleLock(n) => {
                if !enclave::child::is_enclave_process() {
                    return Err("the single-lock allocator runs only in an enclave process \
                                (sandbox backend)"
                        .to_owned());
                }
                alloc::use_single_lock(n).map_err(|e| e.to_string())?;
                Some(n)
            }
        };
        Ok(Arc::new(X509Service {
            chain: RwLock::new(None),
            heap,
        }))
    })
}

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
        Preset::Full => Duration::from_secs(6),
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
    e.ecall(id::LOAD, &chain.load_input())
        .map_err(boundary::call_failed("loading the chain"))?;
    Ok(e)
}

/// One verification through the enclave, at [`VERIFY_AT`].
pub fn verify(e: &enclave::Enclave) -> Result<(), enclave::Error> {
    e.ecall(id::VERIFY, &VERIFY_AT.to_le_bytes()).map(drop)
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
        verify(&e).map_err(boundary::call_failed("verifying the chain once"))?;
        let params = self.params(cfg, chain);
        let sandbox = cfg.config.backend == Backend::Sandbox;
        let pass = |t: usize, d: Duration| {
            measure::sweep::fixed_duration("verify", t, d, |_, deadline| {
                let left = deadline.saturating_duration_since(Instant::now());
                let mut input = (left.as_nanos() as u64).to_le_bytes().to_vec();
                input.extend_from_slice(&VERIFY_AT.to_le_bytes());
                let out = e.ecall(id::LOOP, &input)?;
                out.first_chunk::<8>()
                    .map(|b| u64::from_le_bytes(*b))
                    .ok_or_else(|| enclave::Error::Config("the loop returned no count".into()))
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
                .ecall(id::STATS, &[])
                .map_err(boundary::call_failed("reading the allocator's counters"))?;
            AllocReport::decode(&b).map_err(|err| ScenarioError::step("allocator counters", err))
        };
        let mut last = if sandbox { Some(counters()?) } else { None };
        let mut deltas = Vec::new();
        let mut passes = Vec::new();
        let mut points: Vec<ScalingPoint> = Vec::new();
        for &t in threads {
            ctx.check_cancel()?;
            let pass = pass(t, duration)?;
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

/// Where the chain of `key` lives in a run's folder.
pub fn chain_dir(out_dir: &Path, key: KeyKind) -> PathBuf {
    out_dir.join("x509").join(key.name())
}

/// A fixed-duration pass as a weak-scaling point relative to `base` (the sweep's first).
fn scaling_point(pass: &DurationPass, base: Option<&ScalingPoint>) -> ScalingPoint {
    let (base_threads, base_rate) = base
        .map(|b| (b.threads as f64, b.ops_per_s))
        .unwrap_or((pass.threads as f64, pass.ops_per_s));
    let speedup = if base_rate > 0.0 {
        pass.ops_per_s / base_rate
    } else {
        0.0
    };
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
        efficiency: speedup / (pass.threads as f64 / base_threads),
    }
}

/// Published figures: Open Enclave's X.509 benchmark (2021), 8-vCPU Azure DC8_v2, mbedtls
/// 2.25; requests per second at 1 and 8 threads.
pub const PUBLISHED: [(&str, f64, f64); 2] =
    [("standalone", 386.0, 2062.0), ("enclave", 240.0, 124.0)];

fn rate_at(s: &Sweep, threads: u64) -> Option<&DurationPass> {
    s.passes.iter().find(|p| p.threads == threads)
}

/// The published figures beside ours: throughput at the fewest and most threads, and the
/// ratio, which is what compares across machines.
fn comparison_table(sweeps: &[Sweep]) -> Table {
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
fn alloc_table(sweeps: &[Sweep]) -> Option<Table> {
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
fn delta(a: &alloc::HeapStats, b: &alloc::HeapStats) -> alloc::HeapStats {
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

fn chain_table(chains: &[(Chain, bool)]) -> Table {
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

/// The checks, on this machine's numbers. `headroom(key)`: the cores two spinning
/// threads got before and after that chain's sweeps ([`two_thread_headroom`]).
fn checks(
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

fn not_measured(name: &str) -> Check {
    Check {
        subject: measure::record::CheckSubject::Run,
        name: name.into(),
        verdict: Verdict::Warn,
        message: "not measured: the sweep lacks 1 or 2 threads".into(),
    }
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
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
        assert!(e.ecall(id::LOAD, &[9, 0, 0, 0, 1]).is_err());
        assert!(e.ecall(id::LOOP, b"short").is_err());
        let stats = AllocReport::decode(&e.ecall(id::STATS, &[]).unwrap()).unwrap();
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
        let mut input = 20_000_000u64.to_le_bytes().to_vec();
        input.extend_from_slice(&VERIFY_AT.to_le_bytes());
        let n = u64::from_le_bytes(*e.ecall(id::LOOP, &input).unwrap().first_chunk().unwrap());
        assert!(n > 0);
        // A failing chain stops the loop with an error, not a count.
        e.ecall(id::LOAD, &c.with_flipped_signature().load_input())
            .unwrap();
        assert!(e.ecall(id::LOOP, &input).is_err());
    }

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
