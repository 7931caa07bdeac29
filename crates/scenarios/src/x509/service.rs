//! The enclave side: the verification service (load a chain, verify once, loop until a
//! deadline, report the allocator's counters) and the allocator it runs under.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use enclave::alloc::{self, Mode};
use enclave::{Ctx, Registry, Service, ServiceError};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::chain::{X509Error, verify_once};

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

impl From<X509Error> for ServiceError {
    fn from(e: X509Error) -> Self {
        ServiceError::Failed(e.to_string())
    }
}

/// A chain as the service holds it.
pub(super) struct Loaded {
    root: Vec<u8>,
    chain_pem: Vec<u8>,
}

/// The enclave service: holds a chain and verifies it in loops.
pub(super) struct X509Service {
    chain: RwLock<Option<Arc<Loaded>>>,
    /// Capacity of the bounded heap when this enclave runs on one.
    heap: Option<usize>,
}

pub(super) fn le_u64(b: &[u8], at: usize) -> Result<u64, X509Error> {
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

    pub(crate) fn parse(b: &[u8]) -> Result<Self, String> {
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
