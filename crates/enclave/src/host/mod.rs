//! The host handle: [`Enclave`], its builder, and the two backends.
//!
//! * **native**: the service lives in this process; an ecall is a direct (dynamic) call
//!   wrapped in `catch_unwind`. No TCS limit applies (a standalone program has none), and
//!   switchless settings are ignored (there is nothing to switch). This is the baseline.
//! * **sandbox**: the service lives in a child process started by re-executing our own
//!   binary (see [`crate::child`]). The host holds the shared mapping, a bitmask of free TCS
//!   slots (callers beyond `tcs` wait on a futex), a monitor thread and, if switchless
//!   ocalls are configured, the `num_uworkers` host workers.
//!
//! # Losing the enclave
//!
//! The monitor thread spawns the child *and* waits for it (so `PR_SET_PDEATHSIG`, which is
//! tied to the spawning thread, lasts as long as the enclave). When the child exits for any
//! reason, the monitor sets the `lost` flag and wakes every futex a host thread can sleep
//! on; spinning callers check the flag every 64 iterations and sleeping ones also wake up
//! every 50 ms on their own. So every in-flight and later call returns
//! [`Error::EnclaveLost`] within milliseconds of the child's death. A protocol violation by
//! the enclave is treated as a compromised enclave: the host kills it.
//!
//! # Layout
//!
//! This module holds the handle ([`Enclave`]) and its builder; [`native`] and [`sandbox`] hold
//! the two backends, each behind the handle's private `Imp`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::Error;
use crate::attest::PlatformIdentity;
use crate::model::TransitionModel;
use crate::ocall::{LogEntry, OcallHandler, OcallTable};
use crate::seal::{DEFAULT_SIGNER, RootKey};
use crate::service::Registry;
use crate::shm::Payload;
use crate::switchless::SwitchlessConfig;
use crate::trace::{Trace, TraceSnapshot};

mod native;
mod sandbox;

use native::{NativeImp, native_keys};
use sandbox::SandboxImp;

/// Where the service runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Backend {
    /// In the host process, a direct call (the standalone baseline).
    Native,
    /// In a sandboxed child process behind shared memory (the default).
    #[default]
    Sandbox,
}

impl Backend {
    /// `"native"` or `"sandbox"` (the records' `backend` field).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Sandbox => "sandbox",
        }
    }

    /// Parses a backend name.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "native" => Ok(Backend::Native),
            "sandbox" => Ok(Backend::Sandbox),
            other => Err(Error::Config(format!(
                "unknown backend {other:?} (native, sandbox)"
            ))),
        }
    }
}

/// What the enclave's seccomp filter does with a system call outside its allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeccompMode {
    /// The call fails with `EPERM`; the service sees an ordinary I/O error (default).
    #[default]
    Deny,
    /// The kernel kills the enclave with `SIGSYS`; the host reports
    /// [`Error::EnclaveLost`] naming the seccomp violation.
    Kill,
}

/// Configures and starts an [`Enclave`].
pub struct EnclaveBuilder {
    name: String,
    backend: Backend,
    tcs: usize,
    area: usize,
    pool_area: usize,
    spin: Duration,
    spin_max: Duration,
    max_payload: u64,
    init: Vec<u8>,
    switchless: Option<SwitchlessConfig>,
    model: Option<TransitionModel>,
    ocalls: Vec<(u32, OcallHandler)>,
    sealing: Option<Option<PathBuf>>,
    signer: String,
    executable: Option<PathBuf>,
    seccomp: SeccompMode,
    start_timeout: Duration,
    call_timeout: Option<Duration>,
}

/// Default TCS slots.
pub const DEFAULT_TCS: usize = 4;
/// Default slot area (bytes per direction per TCS slot).
pub const DEFAULT_AREA: usize = 1 << 20;
/// Default area of a switchless pool slot (bytes per direction).
pub const POOL_AREA: usize = 64 << 10;
/// Default bounded spin before a futex sleep.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);
/// Default most a TCS channel's adaptive spin grows to ([`EnclaveBuilder::spin_max`]).
pub const DEFAULT_SPIN_MAX: Duration = Duration::from_millis(1);
/// Most TCS slots.
pub const MAX_TCS: usize = 32;

impl EnclaveBuilder {
    fn new(name: &str) -> Self {
        EnclaveBuilder {
            name: name.to_owned(),
            backend: Backend::Sandbox,
            tcs: DEFAULT_TCS,
            area: DEFAULT_AREA,
            pool_area: POOL_AREA,
            spin: DEFAULT_SPIN,
            spin_max: DEFAULT_SPIN_MAX,
            max_payload: 1 << 30,
            init: Vec::new(),
            switchless: None,
            model: None,
            ocalls: Vec::new(),
            sealing: None,
            signer: DEFAULT_SIGNER.to_owned(),
            executable: None,
            seccomp: SeccompMode::Deny,
            start_timeout: Duration::from_secs(20),
            call_timeout: None,
        }
    }

    /// The backend (default: sandbox).
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }
    /// Number of TCS slots: concurrent ecalls (1..=32, default 4).
    pub fn tcs(mut self, n: usize) -> Self {
        self.tcs = n;
        self
    }
    /// Bytes per direction per TCS slot (default 1 MiB); larger payloads are streamed.
    pub fn slot_area(mut self, bytes: usize) -> Self {
        self.area = bytes;
        self
    }
    /// Bytes per direction per switchless request slot (default 64 KiB); larger payloads
    /// are streamed through the slot in chunks, each a handoff between caller and worker.
    /// Size it to the switchless calls' payloads: the Intel SDK passes a switchless call's
    /// buffers by pointer, so a large one costs a copy there, not a conversation.
    pub fn pool_area(mut self, bytes: usize) -> Self {
        self.pool_area = bytes;
        self
    }
    /// The bounded spin before a futex sleep, on both sides (default 20 µs; zero means
    /// every wait sleeps at once).
    pub fn spin(mut self, d: Duration) -> Self {
        self.spin = d;
        self
    }
    /// The most a TCS channel's spin grows to (default 1 ms; at or below [`Self::spin`],
    /// the spin stays fixed). A caller whose wait for the enclave slept, though it ended
    /// within this, spins that long the next time, so that calls up to this long do not pay
    /// a sleeping thread's wake-up, which SGX's synchronous ecalls never pay; waits longer
    /// than this bring the spin back down. Only while the spin gate lets a waiter spin at
    /// all (every conversation in flight has two cores), and only past [`Self::spin`] if
    /// every runnable thread on the machine has a core then; the enclave's threads keep the
    /// fixed spin.
    pub fn spin_max(mut self, d: Duration) -> Self {
        self.spin_max = d;
        self
    }
    /// Largest payload accepted in either direction (default 1 GiB).
    pub fn max_payload(mut self, bytes: u64) -> Self {
        self.max_payload = bytes;
        self
    }
    /// Bytes passed to the service's constructor.
    pub fn init(mut self, bytes: &[u8]) -> Self {
        self.init = bytes.to_vec();
        self
    }
    /// Enables switchless calls.
    pub fn switchless(mut self, cfg: SwitchlessConfig) -> Self {
        self.switchless = Some(cfg);
        self
    }
    /// Enables a transition-cost model.
    pub fn transition_model(mut self, m: Option<TransitionModel>) -> Self {
        self.model = m;
        self
    }
    /// Registers a host ocall handler (ids below [`crate::ocall::builtin::FIRST_USER`] replace
    /// built-ins).
    pub fn ocall(
        mut self,
        id: u32,
        handler: impl Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> Self {
        self.ocalls.push((id, Arc::new(handler)));
        self
    }
    /// Enables the platform keys, with the platform root key in the default directory
    /// ([`RootKey::default_dir`]): sealing ([`crate::Ctx::sealer`]) and emulated
    /// attestation ([`crate::Ctx::quote`]), both derived from that one root key.
    pub fn sealing(mut self) -> Self {
        self.sealing = Some(None);
        self
    }
    /// Enables the platform keys (as [`EnclaveBuilder::sealing`]) with the root key in `dir`.
    pub fn sealing_key_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sealing = Some(Some(dir.into()));
        self
    }
    /// The signer name (MRSIGNER analogue; default `"ccbench"`).
    pub fn signer(mut self, name: &str) -> Self {
        self.signer = name.to_owned();
        self
    }
    /// The binary to run as the enclave (default: our own, `/proc/self/exe`). It must call
    /// [`crate::child::run_if_enclave`] with a registry holding the service.
    pub fn executable(mut self, path: impl Into<PathBuf>) -> Self {
        self.executable = Some(path.into());
        self
    }
    /// What the seccomp filter does with a forbidden system call.
    pub fn seccomp(mut self, mode: SeccompMode) -> Self {
        self.seccomp = mode;
        self
    }
    /// How long the enclave may take to start (default 20 s).
    pub fn start_timeout(mut self, d: Duration) -> Self {
        self.start_timeout = d;
        self
    }
    /// How long one ecall may take, ocalls included (default: no limit). On the sandbox a
    /// call still running then fails with [`Error::CallTimeout`] and the host ends the
    /// enclave (its thread is stuck inside the service). The native backend runs the service
    /// on the caller's thread and cannot stop it: the limit applies to the sandbox only.
    pub fn call_timeout(mut self, d: Option<Duration>) -> Self {
        self.call_timeout = d;
        self
    }

    fn key_dir(&self) -> Result<Option<PathBuf>, Error> {
        match &self.sealing {
            None => Ok(None),
            Some(Some(d)) => Ok(Some(d.clone())),
            Some(None) => RootKey::default_dir().map(Some).ok_or_else(|| {
                Error::Config(
                    "no data directory for the platform key (set HOME or CCBENCH_PLATFORM_KEY_DIR)"
                        .into(),
                )
            }),
        }
    }

    /// Starts the enclave. `registry` must know the service name (for the sandbox backend,
    /// the child process looks it up in its own registry, normally the same one).
    pub fn start(self, registry: &Registry) -> Result<Enclave, Error> {
        if self.tcs == 0 || self.tcs > MAX_TCS {
            return Err(Error::Config(format!(
                "tcs must be 1..={MAX_TCS}, got {}",
                self.tcs
            )));
        }
        if !registry.contains(&self.name) {
            return Err(Error::UnknownService(self.name.clone()));
        }
        if let Some(sw) = &self.switchless
            && let Some(bad) = sw
                .ecalls
                .iter()
                .chain(&sw.ocalls)
                .find(|&&id| id > crate::switchless::MAX_SWITCHLESS_ID)
        {
            return Err(Error::Config(format!(
                "switchless ids must be <= 255, got {bad}"
            )));
        }
        let key_dir = self.key_dir()?;
        let table = Arc::new(OcallTable::new(self.ocalls.clone()));
        let trace = Arc::new(Trace::new());
        let (backend, platform) = match self.backend {
            Backend::Native => {
                let service = registry.construct(&self.name, &self.init)?;
                let keys = match &key_dir {
                    Some(d) => Some(native_keys(d, &self.name, &self.signer)?),
                    None => None,
                };
                let platform = keys.as_ref().map(|k| k.quoter.platform());
                (Imp::Native(NativeImp { service, keys }), platform)
            }
            Backend::Sandbox => {
                // The host derives only the public half, from the same root key the enclave
                // loads (created here first if missing, so both see one key).
                let platform = match &key_dir {
                    Some(d) => {
                        Some(PlatformIdentity::load(d).map_err(|e| Error::Startup(e.to_string()))?)
                    }
                    None => None,
                };
                let imp =
                    SandboxImp::start(&self, key_dir.as_deref(), table.clone(), trace.clone())?;
                (Imp::Sandbox(imp), platform)
            }
        };
        Ok(Enclave {
            name: self.name,
            backend_kind: self.backend,
            model: self.model,
            table,
            trace,
            started: Instant::now(),
            platform,
            imp: backend,
        })
    }
}

/// The host handle of an enclave. `Send + Sync`: share it (by reference or `Arc`) between
/// threads; up to `tcs` ecalls run at once on the sandbox backend.
pub struct Enclave {
    name: String,
    backend_kind: Backend,
    model: Option<TransitionModel>,
    table: Arc<OcallTable>,
    trace: Arc<Trace>,
    started: Instant,
    platform: Option<PlatformIdentity>,
    imp: Imp,
}

enum Imp {
    Native(NativeImp),
    Sandbox(SandboxImp),
}

impl std::fmt::Debug for Enclave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enclave")
            .field("service", &self.name)
            .field("backend", &self.backend_kind)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Enclave {
    /// Starts configuring an enclave running the service registered as `service`.
    pub fn builder(service: &str) -> EnclaveBuilder {
        EnclaveBuilder::new(service)
    }

    /// The service name.
    pub fn service_name(&self) -> &str {
        &self.name
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend_kind
    }

    /// The transition-cost model, if any.
    pub fn transition_model(&self) -> Option<&TransitionModel> {
        self.model.as_ref()
    }

    /// Calls into the enclave: `input` is copied in, the output copied out.
    #[inline]
    pub fn ecall(&self, call_id: u32, input: &[u8]) -> Result<Vec<u8>, Error> {
        match &self.imp {
            Imp::Native(n) => self.native_ecall(n, call_id, input),
            Imp::Sandbox(s) => s.ecall(self, call_id, Payload::Whole(input)),
        }
    }

    /// [`ecall`](Self::ecall) with an input held in pieces, which the enclave receives as
    /// their concatenation. The sandbox copies the pieces straight into the call's shared
    /// area, as an SGX host passes the enclave its own buffer: a caller that keeps a request
    /// in pieces (a batch of records, each where it was queued) saves assembling it, a copy
    /// of every byte. The native backend, which has no area, assembles them.
    pub fn ecall_pieces(&self, call_id: u32, pieces: &[&[u8]]) -> Result<Vec<u8>, Error> {
        match &self.imp {
            Imp::Native(n) => self.native_ecall(n, call_id, &Payload::pieces(pieces).to_vec()),
            Imp::Sandbox(s) => s.ecall(self, call_id, Payload::pieces(pieces)),
        }
    }

    /// The identity of the (emulated) platform the enclave runs on: the public half of its
    /// attestation key, against which the enclave's quotes verify
    /// ([`crate::attest::verify`]). `None` when the enclave was started without platform keys.
    pub fn platform_identity(&self) -> Option<PlatformIdentity> {
        self.platform
    }

    /// A snapshot of the trace so far.
    pub fn trace(&self) -> TraceSnapshot {
        let calls = match &self.imp {
            Imp::Native(_) => self.trace.snapshot(&|_| None),
            Imp::Sandbox(s) => self.trace.snapshot(&|id| s.enclave_ocall_counters(id)),
        };
        TraceSnapshot {
            backend: self.backend_kind.name(),
            model: self.model.as_ref().map(|m| m.name().to_owned()),
            elapsed_ns: self.started.elapsed().as_nanos() as u64,
            calls,
        }
    }

    /// Takes the messages the enclave logged (and how many were dropped when full).
    pub fn take_logs(&self) -> (Vec<LogEntry>, u64) {
        match self.table.logs.lock() {
            Ok(mut b) => (
                std::mem::take(&mut b.entries),
                std::mem::take(&mut b.dropped),
            ),
            Err(_) => (Vec::new(), 0),
        }
    }

    /// The enclave process id (sandbox).
    pub fn pid(&self) -> Option<u32> {
        match &self.imp {
            Imp::Sandbox(s) => Some(s.pid),
            Imp::Native(_) => None,
        }
    }

    /// Kills the enclave process (as a crash would); later calls fail with
    /// [`Error::EnclaveLost`]. No effect on the native backend.
    pub fn kill(&self) {
        if let Imp::Sandbox(s) = &self.imp {
            s.kill();
        }
    }

    /// Whether the enclave has been lost.
    pub fn is_lost(&self) -> bool {
        match &self.imp {
            Imp::Sandbox(s) => s.lost.load(Ordering::Acquire),
            Imp::Native(_) => false,
        }
    }
}
