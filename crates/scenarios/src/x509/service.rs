//! The enclave side: the verification service (load a chain, verify once, loop until a
//! deadline, report the allocator's counters) and the allocator it runs under.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use enclave::alloc::{self, Mode};
use enclave::{Ctx, Registry, Service, ServiceError};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::chain::{X509Error, verify_once};
use harness::codec::{CodecError, Decode, Encode, decode};

/// The enclave service's name.
pub const SERVICE: &str = "ccbench.x509";

harness::calls! {
    /// The service's ecalls.
    pub enum Call {
        /// Input: a [`LoadRequest`]. Replaces the chain the service holds.
        Load = 0 => "load",
        /// Input: the verification time (`u64`, s since the Unix epoch). One verification.
        Verify = 1 => "verify",
        /// Input: a [`LoopRequest`]. Loops verifications for the duration; returns the
        /// count (`u64`).
        Loop = 2 => "loop",
        /// Returns the enclave allocator's counters, an [`AllocReport`].
        Stats = 3 => "stats",
    }
}

/// The input of [`Call::Load`]: the trust anchor and the chain to verify.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct LoadRequest {
    /// The root certificate, DER.
    pub root: Vec<u8>,
    /// Leaf and intermediate, PEM.
    pub chain_pem: Vec<u8>,
}

/// The input of [`Call::Loop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Encode, Decode)]
pub struct LoopRequest {
    /// How long to loop, ns.
    pub duration_ns: u64,
    /// The verification time, s since the Unix epoch.
    pub at_s: u64,
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
        match Call::try_from(call_id)? {
            Call::Load => {
                let r: LoadRequest = decode("load request", input)?;
                let loaded = Loaded {
                    root: r.root,
                    chain_pem: r.chain_pem,
                };
                *self
                    .chain
                    .write()
                    .map_err(|_| X509Error::Input("chain lock poisoned"))? = Some(Arc::new(loaded));
                Ok(Vec::new())
            }
            Call::Verify => {
                let at_s: u64 = decode("verify request", input)?;
                let at = UnixTime::since_unix_epoch(Duration::from_secs(at_s));
                let c = self.loaded()?;
                let since = alloc::over_budget_events();
                verify_once(&CertificateDer::from(&c.root[..]), &c.chain_pem, at)?;
                self.check_heap(since)?;
                Ok(Vec::new())
            }
            Call::Loop => {
                let r: LoopRequest = decode("loop request", input)?;
                let deadline = Instant::now() + Duration::from_nanos(r.duration_ns);
                let at = UnixTime::since_unix_epoch(Duration::from_secs(r.at_s));
                let c = self.loaded()?;
                let root = CertificateDer::from(&c.root[..]);
                let since = alloc::over_budget_events();
                let n = measure::sweep::loop_until(deadline, || {
                    verify_once(&root, &c.chain_pem, at)?;
                    self.check_heap(since)
                })?;
                Ok(n.encode())
            }
            Call::Stats => Ok(AllocReport::current(self.heap.is_some()).encode()),
        }
    }
}

/// What the enclave's allocator did, as [`Call::Stats`] returns it.
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

    /// The message [`Call::Stats`] returns: the mode, the routing flag, then the heap's
    /// counters in field order.
    pub fn encode(&self) -> Vec<u8> {
        let h = &self.heap;
        (
            self.mode == Mode::SingleLock,
            self.aws_lc_routed,
            [h.capacity as u64, h.in_use as u64, h.peak as u64],
            [
                h.rust_allocs,
                h.c_allocs,
                h.frees,
                h.over_budget,
                h.contended,
            ],
        )
            .encode()
    }

    /// Decodes [`Call::Stats`]'s output.
    pub fn decode(b: &[u8]) -> Result<Self, CodecError> {
        let (single_lock, aws_lc_routed, sizes, counts): (bool, bool, [u64; 3], [u64; 5]) =
            decode("allocator report", b)?;
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(AllocReport {
            mode: if single_lock {
                Mode::SingleLock
            } else {
                Mode::System
            },
            aws_lc_routed,
            heap: alloc::HeapStats {
                capacity: size(sizes[0]),
                in_use: size(sizes[1]),
                peak: size(sizes[2]),
                rust_allocs: counts[0],
                c_allocs: counts[1],
                frees: counts[2],
                over_budget: counts[3],
                contended: counts[4],
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
