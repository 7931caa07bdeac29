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

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::fd::OwnedFd;
use rustix::thread::futex;

use crate::model::TransitionModel;
use crate::ocall::{self, LogEntry, OcallHandler, OcallTable};
use crate::seal::{DEFAULT_SIGNER, Identity, RootKey, Sealer, signer_hash};
use crate::service::{Ctx, OcallError, OcallPort, Registry, Service, ServiceError};
use crate::shm::{self, ConvError, Layout, Shm, Side, Waiter};
use crate::switchless::{IdSet, Pool, SwitchlessConfig};
use crate::trace::{EnclaveOcallCounters, NATIVE_SAMPLE, Trace, TraceSnapshot};
use crate::wire::{Header, Kind, Status};
use crate::{Error, child};

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
    spin: Duration,
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
}

/// Default TCS slots.
pub const DEFAULT_TCS: usize = 4;
/// Default slot area (bytes per direction per TCS slot).
pub const DEFAULT_AREA: usize = 1 << 20;
/// Area of a switchless pool slot.
pub const POOL_AREA: usize = 64 << 10;
/// Default bounded spin before a futex sleep.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);
/// Most TCS slots.
pub const MAX_TCS: usize = 32;

impl EnclaveBuilder {
    fn new(name: &str) -> Self {
        EnclaveBuilder {
            name: name.to_owned(),
            backend: Backend::Sandbox,
            tcs: DEFAULT_TCS,
            area: DEFAULT_AREA,
            spin: DEFAULT_SPIN,
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
    /// The bounded spin before a futex sleep, on both sides (default 20 µs; zero means
    /// every wait sleeps at once).
    pub fn spin(mut self, d: Duration) -> Self {
        self.spin = d;
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
    /// Registers a host ocall handler (ids below [`ocall::builtin::FIRST_USER`] replace
    /// built-ins).
    pub fn ocall(
        mut self,
        id: u32,
        handler: impl Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> Self {
        self.ocalls.push((id, Arc::new(handler)));
        self
    }
    /// Enables sealing, with the platform key in the default directory
    /// ([`RootKey::default_dir`]).
    pub fn sealing(mut self) -> Self {
        self.sealing = Some(None);
        self
    }
    /// Enables sealing with the platform key in `dir`.
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
        let backend = match self.backend {
            Backend::Native => {
                let service = registry.construct(&self.name, &self.init)?;
                let sealer = match &key_dir {
                    Some(d) => Some(native_sealer(d, &self.name, &self.signer)?),
                    None => None,
                };
                Imp::Native(NativeImp { service, sealer })
            }
            Backend::Sandbox => Imp::Sandbox(SandboxImp::start(
                &self,
                key_dir.as_deref(),
                table.clone(),
                trace.clone(),
            )?),
        };
        Ok(Enclave {
            name: self.name,
            backend_kind: self.backend,
            model: self.model,
            table,
            trace,
            started: Instant::now(),
            imp: backend,
        })
    }
}

fn native_sealer(dir: &std::path::Path, name: &str, signer: &str) -> Result<Sealer, Error> {
    let root = RootKey::load_or_create(dir).map_err(|e| Error::Startup(e.to_string()))?;
    let id = Identity::of_current_exe(name, signer)?;
    Ok(Sealer::new(root, id))
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
    imp: Imp,
}

enum Imp {
    Native(NativeImp),
    Sandbox(SandboxImp),
}

struct NativeImp {
    service: Arc<dyn Service>,
    sealer: Option<Sealer>,
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
            Imp::Sandbox(s) => s.ecall(self, call_id, input),
        }
    }

    /// The native fast path: count the call, charge the model if any, call the service.
    /// One call in [`NATIVE_SAMPLE`] per thread takes [`Enclave::native_ecall_timed`].
    /// Inlined into the caller with [`Enclave::ecall`], so that the result need not make
    /// extra trips through memory (see [`Enclave::native_call`]).
    #[inline(always)]
    fn native_ecall(&self, n: &NativeImp, call_id: u32, input: &[u8]) -> Result<Vec<u8>, Error> {
        let stats = self.trace.ecall(call_id);
        if stats.count().is_multiple_of(NATIVE_SAMPLE) {
            return self.native_ecall_timed(n, &stats, call_id, input);
        }
        if let Some(m) = &self.model {
            m.charge(1);
        }
        let r = self.native_call(n, call_id, input);
        if let Some(m) = &self.model {
            m.charge(1);
        }
        native_output(call_id, r)
    }

    /// A sampled native call: as [`Enclave::native_ecall`], timed.
    #[cold]
    #[inline(never)]
    fn native_ecall_timed(
        &self,
        n: &NativeImp,
        stats: &crate::trace::Stats<'_>,
        call_id: u32,
        input: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let t0 = Instant::now();
        // Without a model nothing runs between the clock reads and the call, so the call's
        // own two reads serve as the total too (two reads fewer per sample; a native call
        // then has no transition time, which is what it is).
        let t1 = match &self.model {
            Some(m) => {
                m.charge(1);
                Instant::now()
            }
            None => t0,
        };
        let r = self.native_call(n, call_id, input);
        let t2 = Instant::now();
        let t3 = match &self.model {
            Some(m) => {
                m.charge(1);
                Instant::now()
            }
            None => t2,
        };
        stats.timed((t3 - t0).as_nanos() as u64, (t2 - t1).as_nanos() as u64);
        native_output(call_id, r)
    }

    /// The service call itself, with panics caught at the boundary.
    ///
    /// The service has just written its result with one store per field; copying the
    /// `Vec` out of it whole makes the compiler use wider loads, each of which stalls until
    /// those stores reach the cache (a load fed by two stores cannot be forwarded), and
    /// those stalls cost more than the rest of a native call. So the common case (an
    /// exact-size output, as `to_vec`, `collect` and `Vec::new` give) leaves as a boxed
    /// slice, read field by field and carried in registers until [`native_output`] turns it
    /// back into the same `Vec`; anything else is passed on unchanged.
    #[inline(always)]
    fn native_call(&self, n: &NativeImp, call_id: u32, input: &[u8]) -> NativeResult {
        let mut port = NativePort { enclave: self };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ctx = Ctx::new(&mut port, n.sealer.as_ref(), 0);
            match n.service.ecall(call_id, input, &mut ctx) {
                Ok(v) if v.len() == v.capacity() => Called::Exact(v.into_boxed_slice()),
                r => Called::Other(r),
            }
        }))
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

/// What a native service call returned (see [`Enclave::native_call`]).
enum Called {
    /// An exact-size output.
    Exact(Box<[u8]>),
    /// Anything else.
    Other(Result<Vec<u8>, ServiceError>),
}

type NativeResult = std::thread::Result<Called>;

/// The result of [`Enclave::native_call`].
#[inline(always)]
fn native_output(call_id: u32, r: NativeResult) -> Result<Vec<u8>, Error> {
    match r {
        Ok(Called::Exact(out)) => Ok(Vec::from(out)),
        Ok(Called::Other(Ok(v))) => Ok(v),
        Ok(Called::Other(Err(e))) => Err(native_error(call_id, e)),
        Err(p) => Err(native_panic(call_id, p)),
    }
}

/// The error of a failed native call.
#[cold]
#[inline(never)]
fn native_error(call_id: u32, e: ServiceError) -> Error {
    match e {
        ServiceError::UnknownCall(id) => Error::UnknownCall(id),
        e => Error::Service {
            call_id,
            message: e.to_string(),
        },
    }
}

/// The error of a native call that panicked.
#[cold]
#[inline(never)]
fn native_panic(call_id: u32, p: Box<dyn std::any::Any + Send>) -> Error {
    Error::Panicked {
        call_id,
        message: crate::panic_message(&*p),
    }
}

/// Ocalls of the native backend: a direct call into the table.
struct NativePort<'a> {
    enclave: &'a Enclave,
}

impl OcallPort for NativePort<'_> {
    fn ocall(&mut self, id: u32, input: &[u8]) -> Result<Vec<u8>, OcallError> {
        let e = self.enclave;
        let stats = e.trace.ocall(id);
        let timed = stats.count().is_multiple_of(NATIVE_SAMPLE);
        let t0 = timed.then(Instant::now);
        if let Some(m) = &e.model {
            m.charge(1);
        }
        let t1 = timed.then(Instant::now);
        let (status, out) = e.table.dispatch(id, input);
        let t2 = timed.then(Instant::now);
        if let Some(m) = &e.model {
            m.charge(1);
        }
        if let (Some(t0), Some(t1), Some(t2)) = (t0, t1, t2) {
            stats.timed(t0.elapsed().as_nanos() as u64, (t2 - t1).as_nanos() as u64);
        }
        ocall::to_result(id, status, out)
    }
}

// ---------------------------------------------------------------- sandbox

struct SandboxImp {
    shm: Arc<Shm>,
    layout: Layout,
    lost: Arc<AtomicBool>,
    lost_reason: Arc<Mutex<Option<String>>>,
    free_tcs: Arc<AtomicU32>,
    tcs_waiters: AtomicU32,
    spin: Duration,
    pid: u32,
    pidfd: Option<OwnedFd>,
    monitor: Option<JoinHandle<()>>,
    uworkers: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    sw: Option<(SwitchlessConfig, IdSet)>,
}

const TCS_WAIT_TIMEOUT: rustix::time::Timespec = rustix::time::Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};

fn all_bits(n: usize) -> u32 {
    if n >= 32 { u32::MAX } else { (1u32 << n) - 1 }
}

impl SandboxImp {
    fn start(
        b: &EnclaveBuilder,
        key_dir: Option<&std::path::Path>,
        table: Arc<OcallTable>,
        trace: Arc<Trace>,
    ) -> Result<Self, Error> {
        if b.area < 64 || b.area > 1 << 30 {
            return Err(Error::Config("slot area must be 64 B ..= 1 GiB".into()));
        }
        if b.name.len() > shm::NAME_CAP {
            return Err(Error::Config("service name too long".into()));
        }
        let key_dir_bytes = key_dir
            .map(|d| d.as_os_str().as_encoded_bytes().to_vec())
            .unwrap_or_default();
        if key_dir_bytes.len() > shm::KEYDIR_CAP {
            return Err(Error::Config("key directory path too long".into()));
        }
        let (n_pool, sw) = match &b.switchless {
            Some(c) => (c.pool_slots.clamp(1, 1024) as usize, Some(c.clone())),
            None => (0, None),
        };
        let layout = Layout {
            n_tcs: b.tcs,
            n_epool: n_pool,
            n_opool: n_pool,
            area: b.area,
            pool_area: POOL_AREA,
            init_len: b.init.len(),
            max_payload: b.max_payload,
        };
        let total = layout
            .total()
            .ok_or_else(|| Error::Config("shared memory size overflows".into()))?;
        let (shm, fd) = Shm::create(total)?;
        let spin_ns = u32::try_from(b.spin.as_nanos()).unwrap_or(u32::MAX);
        let h = |off: usize, v: u32| shm.u32(off).store(v, Ordering::Relaxed);
        h(shm::H_VERSION, shm::VERSION);
        h(shm::H_N_TCS, layout.n_tcs as u32);
        h(shm::H_N_EPOOL, layout.n_epool as u32);
        h(shm::H_N_OPOOL, layout.n_opool as u32);
        h(shm::H_AREA, layout.area as u32);
        h(shm::H_POOL_AREA, layout.pool_area as u32);
        h(shm::H_SPIN_NS, spin_ns);
        shm.u64(shm::H_MAX_PAYLOAD)
            .store(layout.max_payload, Ordering::Relaxed);
        let sw_ids = sw
            .as_ref()
            .map(|c| (IdSet::from_ids(&c.ecalls), IdSet::from_ids(&c.ocalls)));
        if let Some(c) = &sw {
            h(shm::H_TWORKERS, c.num_tworkers);
            h(shm::H_UWORKERS, c.num_uworkers);
            h(shm::H_RETRIES_FALLBACK, c.retries_before_fallback);
            h(shm::H_RETRIES_SLEEP, c.retries_before_sleep);
        }
        if let Some((e, o)) = &sw_ids {
            for i in 0..4 {
                shm.u64(shm::H_SW_ECALLS + 8 * i)
                    .store(e.0[i], Ordering::Relaxed);
                shm.u64(shm::H_SW_OCALLS + 8 * i)
                    .store(o.0[i], Ordering::Relaxed);
            }
        }
        h(shm::H_SEALING, u32::from(key_dir.is_some()));
        h(
            shm::H_SECCOMP,
            match b.seccomp {
                SeccompMode::Deny => 0,
                SeccompMode::Kill => 1,
            },
        );
        h(shm::H_NAME_LEN, b.name.len() as u32);
        shm.write(shm::H_NAME, b.name.as_bytes());
        h(shm::H_INIT_LEN, b.init.len() as u32);
        shm.write(shm::INIT_OFF, &b.init);
        h(shm::H_KEYDIR_LEN, key_dir_bytes.len() as u32);
        shm.write(shm::H_KEYDIR, &key_dir_bytes);
        shm.write(shm::H_SIGNER, &signer_hash(&b.signer));
        shm.u64(shm::H_MAGIC).store(shm::MAGIC, Ordering::Release);
        let shm = Arc::new(shm);

        let lost = Arc::new(AtomicBool::new(false));
        let lost_reason: Arc<Mutex<Option<String>>> = Arc::default();
        let free_tcs = Arc::new(AtomicU32::new(all_bits(layout.n_tcs)));
        let exe = b
            .executable
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
        let stderr_inherit = std::env::var_os(child::ENV_DEBUG).is_some();
        let (tx, rx) = std::sync::mpsc::channel();
        let monitor = {
            let shm = shm.clone();
            let lost = lost.clone();
            let lost_reason = lost_reason.clone();
            let free_tcs = free_tcs.clone();
            std::thread::Builder::new()
                .name("enclave-monitor".into())
                .spawn(move || {
                    let mut cmd = Command::new(&exe);
                    std::os::unix::process::CommandExt::arg0(&mut cmd, "ccbench-enclave");
                    cmd.env(child::ENV_MODE, "1")
                        .env(child::ENV_PARENT, std::process::id().to_string())
                        .stdin(Stdio::from(fd))
                        .stdout(Stdio::null())
                        .stderr(if stderr_inherit {
                            Stdio::inherit()
                        } else {
                            Stdio::null()
                        });
                    let mut c = match cmd.spawn() {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    let pid = c.id();
                    let pidfd = rustix::process::Pid::from_raw(pid as i32).and_then(|p| {
                        rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
                    });
                    let _ = tx.send(Ok((pid, pidfd)));
                    let reason = match c.wait() {
                        Ok(st) => describe_exit(st),
                        Err(e) => format!("lost track of the enclave process: {e}"),
                    };
                    if let Ok(mut r) = lost_reason.lock() {
                        r.get_or_insert(reason);
                    }
                    lost.store(true, Ordering::SeqCst);
                    wake_everything(&shm, &layout, &free_tcs);
                })?
        };
        let (pid, pidfd) = match rx.recv() {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                let _ = monitor.join();
                return Err(Error::Startup(format!(
                    "spawning {}: {e}",
                    b.executable
                        .as_deref()
                        .unwrap_or(std::path::Path::new("/proc/self/exe"))
                        .display()
                )));
            }
            Err(_) => {
                let _ = monitor.join();
                return Err(Error::Startup("monitor thread failed".into()));
            }
        };
        let mut imp = SandboxImp {
            shm,
            layout,
            lost,
            lost_reason,
            free_tcs,
            tcs_waiters: AtomicU32::new(0),
            spin: b.spin,
            pid,
            pidfd,
            monitor: Some(monitor),
            uworkers: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            sw: sw.zip(sw_ids.map(|(e, _)| e)),
        };
        imp.wait_ready(b.start_timeout)?;
        if let Some((cfg, _)) = imp.sw.clone() {
            for i in 0..cfg.num_uworkers {
                let ctx = UworkerCtx {
                    shm: imp.shm.clone(),
                    layout: imp.layout,
                    stop: imp.stop.clone(),
                    lost: imp.lost.clone(),
                    table: table.clone(),
                    trace: trace.clone(),
                    retries_before_sleep: cfg.retries_before_sleep,
                    spin: imp.spin,
                };
                let h = std::thread::Builder::new()
                    .name(format!("enclave-uworker-{i}"))
                    .spawn(move || ctx.run())?;
                imp.uworkers.push(h);
            }
        }
        Ok(imp)
    }

    fn wait_ready(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let status = self.shm.u32(shm::H_STATUS);
        loop {
            match status.load(Ordering::Acquire) {
                shm::STATUS_READY => return Ok(()),
                shm::STATUS_FAILED => {
                    let n = (self.shm.u32(shm::H_ERR_LEN).load(Ordering::Acquire) as usize)
                        .min(shm::ERR_CAP);
                    let msg =
                        String::from_utf8_lossy(&self.shm.read_vec(shm::H_ERR, n)).into_owned();
                    self.kill();
                    return Err(Error::Startup(msg));
                }
                _ => {}
            }
            if self.lost.load(Ordering::Acquire) {
                return Err(Error::Startup(format!(
                    "the enclave process exited during start-up ({}); does this binary call enclave::child::run_if_enclave at the top of main?",
                    self.reason()
                )));
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(Error::Startup("the enclave did not start in time".into()));
            }
            let _ = futex::wait(
                status,
                futex::Flags::empty(),
                shm::STATUS_STARTING,
                Some(&TCS_WAIT_TIMEOUT),
            );
        }
    }

    fn reason(&self) -> String {
        self.lost_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| "the enclave process is gone".into())
    }

    fn lost_error(&self) -> Error {
        Error::EnclaveLost {
            reason: self.reason(),
        }
    }

    fn kill(&self) {
        let sent = self.pidfd.as_ref().is_some_and(|fd| {
            rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL).is_ok()
        });
        if !sent
            && !self.lost.load(Ordering::Acquire)
            && let Some(p) = rustix::process::Pid::from_raw(self.pid as i32)
        {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }

    fn waiter(&self) -> Waiter<'_> {
        Waiter {
            spin: self.spin,
            lost: Some(&self.lost),
        }
    }

    fn acquire_tcs(&self) -> Result<usize, Error> {
        loop {
            let free = self.free_tcs.load(Ordering::Acquire);
            if free != 0 {
                let bit = free.trailing_zeros();
                if self
                    .free_tcs
                    .compare_exchange_weak(
                        free,
                        free & !(1 << bit),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return Ok(bit as usize);
                }
                continue;
            }
            if self.lost.load(Ordering::Acquire) {
                return Err(self.lost_error());
            }
            self.tcs_waiters.fetch_add(1, Ordering::SeqCst);
            if self.free_tcs.load(Ordering::SeqCst) == 0 {
                let _ = futex::wait(
                    &self.free_tcs,
                    futex::Flags::PRIVATE,
                    0,
                    Some(&TCS_WAIT_TIMEOUT),
                );
            }
            self.tcs_waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn release_tcs(&self, slot: usize) {
        self.free_tcs.fetch_or(1 << slot, Ordering::SeqCst);
        if self.tcs_waiters.load(Ordering::SeqCst) > 0 {
            let _ = futex::wake(&self.free_tcs, futex::Flags::PRIVATE, 1);
        }
    }

    fn ecall(&self, e: &Enclave, call_id: u32, input: &[u8]) -> Result<Vec<u8>, Error> {
        if self.lost.load(Ordering::Acquire) {
            return Err(self.lost_error());
        }
        let stats = e.trace.ecall(call_id);
        stats.count();
        let t0 = Instant::now();
        if let Some((cfg, ids)) = &self.sw
            && ids.contains(call_id)
        {
            let pool = self.ecall_pool();
            match pool.post(
                Kind::Ecall,
                call_id,
                input,
                cfg.retries_before_fallback,
                hint(),
            ) {
                Some((ch, sent)) => {
                    stats.hit();
                    let r = self.converse(e, &ch, call_id, input, Some(sent));
                    if r.is_ok() {
                        Pool::release(&ch);
                    }
                    return self.finish(&stats, t0, call_id, r);
                }
                None => stats.miss(),
            }
        }
        let slot = self.acquire_tcs()?;
        if let Some(m) = &e.model {
            m.charge(1);
        }
        let ch = self.shm.channel(&self.layout, slot);
        let r = self.converse(e, &ch, call_id, input, None);
        if let Some(m) = &e.model {
            m.charge(1);
        }
        self.release_tcs(slot);
        self.finish(&stats, t0, call_id, r)
    }

    fn finish(
        &self,
        stats: &crate::trace::Stats<'_>,
        t0: Instant,
        call_id: u32,
        r: Result<(Header, Vec<u8>), ConvError>,
    ) -> Result<Vec<u8>, Error> {
        match r {
            Ok((h, out)) => {
                stats.timed(t0.elapsed().as_nanos() as u64, h.t_ns);
                let text = || String::from_utf8_lossy(&out).into_owned();
                match h.status {
                    Status::Ok => Ok(out),
                    Status::Error => Err(Error::Service {
                        call_id,
                        message: text(),
                    }),
                    Status::Panic => Err(Error::Panicked {
                        call_id,
                        message: text(),
                    }),
                    Status::UnknownId => Err(Error::UnknownCall(call_id)),
                }
            }
            Err(ConvError::Lost) => Err(self.lost_error()),
            Err(ConvError::Wire(w)) => {
                if let Ok(mut r) = self.lost_reason.lock() {
                    r.get_or_insert(format!(
                        "killed by the host after a protocol violation: {w}"
                    ));
                }
                self.kill();
                Err(Error::Protocol(w))
            }
        }
    }

    /// The caller's side of one ecall conversation, serving the enclave's ocalls.
    fn converse(
        &self,
        e: &Enclave,
        ch: &shm::Channel<'_>,
        call_id: u32,
        input: &[u8],
        posted: Option<usize>,
    ) -> Result<(Header, Vec<u8>), ConvError> {
        let w = self.waiter();
        match posted {
            None => ch.send_payload(Side::A, Kind::Ecall, call_id, Status::Ok, 0, input, &w)?,
            Some(sent) => ch.send_rest(Side::A, input, sent, &w)?,
        }
        loop {
            let h = ch.recv(Side::A, &w)?;
            match h.kind {
                Kind::Return => {
                    if h.id != call_id {
                        return Err(ConvError::Wire(crate::wire::WireError::Unexpected {
                            got: h.kind,
                            expected: "return for this call id",
                        }));
                    }
                    let out = ch.recv_payload(Side::A, &h, &w)?;
                    return Ok((h, out));
                }
                Kind::Ocall => {
                    let arg = ch.recv_payload(Side::A, &h, &w)?;
                    if let Some(m) = &e.model {
                        m.charge(1);
                    }
                    let st = e.trace.ocall(h.id);
                    st.count();
                    let t = Instant::now();
                    let (status, out) = e.table.dispatch(h.id, &arg);
                    let dt = t.elapsed().as_nanos() as u64;
                    st.timed(dt, dt);
                    if let Some(m) = &e.model {
                        m.charge(1);
                    }
                    ch.send_payload(Side::A, Kind::Return, h.id, status, dt, &out, &w)?;
                }
                other => {
                    return Err(ConvError::Wire(crate::wire::WireError::Unexpected {
                        got: other,
                        expected: "return or ocall",
                    }));
                }
            }
        }
    }

    fn ecall_pool(&self) -> Pool<'_> {
        Pool {
            shm: &self.shm,
            layout: &self.layout,
            first: self.layout.n_tcs,
            len: self.layout.n_epool,
            seq: self.shm.u32(shm::H_EPOOL_SEQ),
            sleepers: self.shm.u32(shm::H_EPOOL_SLEEPERS),
        }
    }

    fn enclave_ocall_counters(&self, id: u32) -> Option<EnclaveOcallCounters> {
        if id as usize >= shm::OCALL_STATS_IDS - 1 {
            return None;
        }
        let base = shm::OCALL_STATS + 32 * id as usize;
        let r = |k: usize| self.shm.u64(base + 8 * k).load(Ordering::Relaxed);
        Some(EnclaveOcallCounters {
            rtt_ns: r(1),
            hits: r(2),
            misses: r(3),
        })
    }
}

fn hint() -> usize {
    crate::trace::thread_number()
}

fn wake_everything(shm: &Shm, layout: &Layout, free_tcs: &AtomicU32) {
    shm::wake_all(shm.u32(shm::H_STATUS));
    for i in 0..layout.n_tcs + layout.n_epool + layout.n_opool {
        shm::wake_all(shm.channel(layout, i).turn());
    }
    shm::wake_all(shm.u32(shm::H_EPOOL_SEQ));
    shm::wake_all(shm.u32(shm::H_OPOOL_SEQ));
    let _ = futex::wake(free_tcs, futex::Flags::PRIVATE, i32::MAX as u32);
}

fn describe_exit(st: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = st.signal() {
        if sig == libc::SIGSYS {
            return "killed by SIGSYS: a system call outside the enclave's seccomp allow-list"
                .into();
        }
        return format!(
            "killed by signal {sig}{}",
            if st.core_dumped() {
                " (core dumped)"
            } else {
                ""
            }
        );
    }
    match st.code() {
        Some(c) => format!("exited with status {c}{}", child::describe_exit_code(c)),
        None => "exited".into(),
    }
}

impl Drop for SandboxImp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.kill();
        if let Some(m) = self.monitor.take() {
            let _ = m.join();
        }
        shm::wake_all(self.shm.u32(shm::H_OPOOL_SEQ));
        for u in self.uworkers.drain(..) {
            let _ = u.join();
        }
    }
}

/// A host worker serving switchless ocalls.
struct UworkerCtx {
    shm: Arc<Shm>,
    layout: Layout,
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    table: Arc<OcallTable>,
    trace: Arc<Trace>,
    retries_before_sleep: u32,
    spin: Duration,
}

impl UworkerCtx {
    fn run(self) {
        let pool = Pool {
            shm: &self.shm,
            layout: &self.layout,
            first: self.layout.n_tcs + self.layout.n_epool,
            len: self.layout.n_opool,
            seq: self.shm.u32(shm::H_OPOOL_SEQ),
            sleepers: self.shm.u32(shm::H_OPOOL_SLEEPERS),
        };
        let w = Waiter {
            spin: self.spin,
            lost: Some(&self.lost),
        };
        let stop = || self.stop.load(Ordering::Relaxed) || self.lost.load(Ordering::Relaxed);
        pool.work(
            self.retries_before_sleep,
            Some(&TCS_WAIT_TIMEOUT),
            &stop,
            &mut |ch| {
                // A malformed request from the enclave ends this conversation; the enclave side
                // then waits forever on that slot, which only hurts the enclave itself.
                let _ = (|| -> Result<(), ConvError> {
                    let h = ch.recv(Side::B, &w)?;
                    if h.kind != Kind::Ocall {
                        return Err(ConvError::Wire(crate::wire::WireError::Unexpected {
                            got: h.kind,
                            expected: "ocall",
                        }));
                    }
                    let arg = ch.recv_payload(Side::B, &h, &w)?;
                    let t = Instant::now();
                    let (status, out) = self.table.dispatch(h.id, &arg);
                    let dt = t.elapsed().as_nanos() as u64;
                    let st = self.trace.ocall(h.id);
                    st.count();
                    st.timed(dt, dt);
                    ch.send_payload(Side::B, Kind::Return, h.id, status, dt, &out, &w)
                })();
            },
        );
    }
}
