//! The enclave process: the entry hook every host binary calls first.
//!
//! The sandbox backend re-executes the host's own binary (`/proc/self/exe`) with
//! `CCBENCH_ENCLAVE_MODE=1` in the environment and the shared memfd as standard input.
//! [`run_if_enclave`] must be the first thing `main` does: in a normal run it returns at
//! once; in enclave mode it never returns. The same registry of services must be passed as
//! to [`crate::EnclaveBuilder::start`] (normally one function builds it for both).
//!
//! Start-up, in order:
//! 0. aws-lc's allocations are routed through the global allocator
//!    ([`crate::alloc::route_aws_lc`]), so that a service's choice of enclave allocator
//!    governs its C code too,
//! 1. a no-op panic hook (the enclave never prints; panics become error replies),
//! 2. `PR_SET_PDEATHSIG(SIGKILL)`, then a check that the parent is still the host that
//!    started us (closing the race where the host died before the prctl),
//! 3. `PR_SET_DUMPABLE(0)`: no core dumps, no ptrace attach by other same-user processes,
//!    `/proc/<pid>/mem` closed,
//! 4. map the shared memory from fd 0 and validate its header and layout,
//! 5. construct the service; with sealing enabled, load the platform root key, measure
//!    the executable and derive the platform keys, sealing's and the attestation key
//!    ([`crate::attest`]) (file access is still allowed at this point),
//! 6. spawn the TCS threads and the switchless workers (thread creation is denied later),
//! 7. install the seccomp allow-list on all threads (`SECCOMP_FILTER_FLAG_TSYNC`),
//! 8. report READY through the header's status futex, and park the main thread forever.
//!
//! Any failure before READY is written to the header (the host returns it as
//! [`crate::Error::Startup`]) and the process exits.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::fd::AsFd;

use crate::attest::PlatformKeys;
use crate::ocall;
use crate::seal::{Identity, RootKey};
use crate::service::{Ctx, OcallError, OcallPort, Registry, Service, ServiceError};
use crate::shm::{self, Channel, ConvError, Layout, Shm, Side, Waiter};
use crate::switchless::{IdSet, Pool};
use crate::wire::{Kind, Status};

/// Set (to `1`) in the enclave process's environment.
pub const ENV_MODE: &str = "CCBENCH_ENCLAVE_MODE";
/// The host's pid, for the enclave's orphan check.
pub const ENV_PARENT: &str = "CCBENCH_ENCLAVE_PARENT";
/// If set in the host's environment, the enclave's stderr is inherited (debugging only;
/// the enclave itself never writes to it).
pub const ENV_DEBUG: &str = "CCBENCH_ENCLAVE_DEBUG";

/// Exit status: the environment or shared memory is not a valid enclave set-up.
pub const EXIT_BAD_SETUP: i32 = 70;
/// Exit status: the host died before the enclave could tie itself to it.
pub const EXIT_ORPHAN: i32 = 71;
/// Exit status: start-up failed (the reason is in the shared header).
pub const EXIT_STARTUP: i32 = 72;
/// Exit status: the host broke the message protocol.
pub const EXIT_PROTOCOL: i32 = 73;

pub(crate) fn describe_exit_code(c: i32) -> &'static str {
    match c {
        EXIT_BAD_SETUP => " (invalid enclave set-up)",
        EXIT_ORPHAN => " (host vanished during start-up)",
        EXIT_STARTUP => " (start-up failed)",
        EXIT_PROTOCOL => " (the host broke the protocol)",
        _ => "",
    }
}

/// Whether this process was started as an enclave.
pub fn is_enclave_process() -> bool {
    std::env::var_os(ENV_MODE).is_some_and(|v| v == "1")
}

/// The entry hook: call first thing in `main`. Returns at once unless this process is an
/// enclave, in which case it runs the enclave and never returns.
pub fn run_if_enclave(registry: &Registry) {
    if !is_enclave_process() {
        return;
    }
    let code = run(registry);
    std::process::exit(code);
}

struct Runtime {
    shm: Arc<Shm>,
    layout: Layout,
    service: Arc<dyn Service>,
    keys: Option<PlatformKeys>,
    spin: Duration,
    sw_ocalls: IdSet,
    retries_before_fallback: u32,
    retries_before_sleep: u32,
}

fn run(registry: &Registry) -> i32 {
    // Before anything can touch aws-lc: its C allocations go through the enclave's
    // allocator from now on, as everything inside an SGX enclave allocates from its heap.
    crate::alloc::route_aws_lc();
    std::panic::set_hook(Box::new(|_| {}));
    if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .is_err()
    {
        return EXIT_BAD_SETUP;
    }
    let expected_parent = std::env::var(ENV_PARENT)
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
    if expected_parent.is_none() || parent != expected_parent {
        return EXIT_ORPHAN;
    }
    if rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .is_err()
    {
        return EXIT_BAD_SETUP;
    }
    let stdin = std::io::stdin();
    let shm = match Shm::open(stdin.as_fd()) {
        Ok(s) => Arc::new(s),
        Err(_) => return EXIT_BAD_SETUP,
    };
    if shm.u64(shm::H_MAGIC).load(Ordering::Acquire) != shm::MAGIC
        || shm.u32(shm::H_VERSION).load(Ordering::Relaxed) != shm::VERSION
    {
        return EXIT_BAD_SETUP;
    }
    match start(&shm, registry) {
        Ok(()) => {
            shm.u32(shm::H_STATUS)
                .store(shm::STATUS_READY, Ordering::SeqCst);
            shm::wake_all(shm.u32(shm::H_STATUS));
            loop {
                std::thread::park();
            }
        }
        Err(msg) => {
            let b = msg.as_bytes();
            let n = b.len().min(shm::ERR_CAP);
            shm.write(shm::H_ERR, &b[..n]);
            shm.u32(shm::H_ERR_LEN).store(n as u32, Ordering::Release);
            shm.u32(shm::H_STATUS)
                .store(shm::STATUS_FAILED, Ordering::SeqCst);
            shm::wake_all(shm.u32(shm::H_STATUS));
            EXIT_STARTUP
        }
    }
}

fn start(shm: &Arc<Shm>, registry: &Registry) -> Result<(), String> {
    let r = |off| shm.u32(off).load(Ordering::Relaxed);
    let layout = Layout {
        n_tcs: r(shm::H_N_TCS) as usize,
        n_epool: r(shm::H_N_EPOOL) as usize,
        n_opool: r(shm::H_N_OPOOL) as usize,
        area: r(shm::H_AREA) as usize,
        pool_area: r(shm::H_POOL_AREA) as usize,
        init_len: r(shm::H_INIT_LEN) as usize,
        max_payload: shm.u64(shm::H_MAX_PAYLOAD).load(Ordering::Relaxed),
    }
    .checked(shm.len())
    .ok_or("invalid shared-memory layout")?;
    let name_len = (r(shm::H_NAME_LEN) as usize).min(shm::NAME_CAP);
    let name = String::from_utf8(shm.read_vec(shm::H_NAME, name_len))
        .map_err(|_| "service name is not UTF-8")?;
    let init = shm.read_vec(shm::INIT_OFF, layout.init_len);
    let service = registry
        .construct(&name, &init)
        .map_err(|e| e.to_string())?;
    let keys = if r(shm::H_SEALING) != 0 {
        let n = (r(shm::H_KEYDIR_LEN) as usize).min(shm::KEYDIR_CAP);
        let dir = String::from_utf8(shm.read_vec(shm::H_KEYDIR, n))
            .map_err(|_| "key directory is not UTF-8")?;
        let root =
            RootKey::load_or_create(std::path::Path::new(&dir)).map_err(|e| e.to_string())?;
        let mut id = Identity::of_current_exe(&name, "")
            .map_err(|e| format!("measuring the executable: {e}"))?;
        let signer = shm.read_vec(shm::H_SIGNER, 32);
        id.signer.copy_from_slice(&signer);
        Some(PlatformKeys::new(root, id).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let mut sw = [0u64; 4];
    for (i, w) in sw.iter_mut().enumerate() {
        *w = shm.u64(shm::H_SW_OCALLS + 8 * i).load(Ordering::Relaxed);
    }
    let rt = Arc::new(Runtime {
        shm: shm.clone(),
        layout,
        service,
        keys,
        spin: Duration::from_nanos(r(shm::H_SPIN_NS).into()),
        sw_ocalls: IdSet(sw),
        retries_before_fallback: r(shm::H_RETRIES_FALLBACK),
        retries_before_sleep: r(shm::H_RETRIES_SLEEP),
    });
    // Every thread must have finished the runtime's per-thread set-up (glibc's rseq and
    // robust list, std's signal stack: system calls the filter denies) before the filter
    // goes on, so each one checks in at a barrier first.
    let tworkers = if layout.n_epool > 0 {
        r(shm::H_TWORKERS).min(64)
    } else {
        0
    };
    let barrier = Arc::new(std::sync::Barrier::new(
        layout.n_tcs + tworkers as usize + 1,
    ));
    for i in 0..layout.n_tcs {
        let rt = rt.clone();
        let b = barrier.clone();
        std::thread::Builder::new()
            .name(format!("tcs-{i}"))
            .spawn(move || {
                b.wait();
                tcs_loop(&rt, i)
            })
            .map_err(|e| format!("spawning TCS thread: {e}"))?;
    }
    for i in 0..tworkers {
        let rt = rt.clone();
        let b = barrier.clone();
        std::thread::Builder::new()
            .name(format!("tworker-{i}"))
            .spawn(move || {
                b.wait();
                tworker_loop(&rt)
            })
            .map_err(|e| format!("spawning switchless worker: {e}"))?;
    }
    barrier.wait();
    let kill = r(shm::H_SECCOMP) == 1;
    install_seccomp(kill).map_err(|e| format!("installing the seccomp filter: {e}"))
}

/// The enclave's system-call allow-list. Everything else fails with `EPERM` (or kills the
/// process with `SIGSYS` in [`crate::SeccompMode::Kill`]). Each entry is something the Rust
/// runtime, the allocator or our own protocol provably needs *after* start-up:
fn allowed_syscalls() -> Vec<i64> {
    let mut v = vec![
        // Doorbells (shared futexes), std's Mutex/Condvar/park and the pools' sleep.
        libc::SYS_futex,
        // The allocator: glibc malloc grows/trims arenas (mmap, munmap, mprotect, madvise),
        // reallocates huge blocks (mremap), and grows the main heap (brk).
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        // Clocks: Instant/SystemTime (normally the vDSO; the syscall is its fallback), and
        // thread::sleep for services that model work by sleeping.
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        // Spin loops back off with yield; std uses it in contended paths.
        libc::SYS_sched_yield,
        // Randomness (std's HashMap keys, services' RNGs): SGX has RDRAND inside.
        libc::SYS_getrandom,
        // Leaving: thread and process exit.
        libc::SYS_exit,
        libc::SYS_exit_group,
        // Returning from a signal handler, and restarting a sleep a signal interrupted.
        libc::SYS_rt_sigreturn,
        libc::SYS_restart_syscall,
        // Crashing must work: abort() (a Rust double panic, an explicit abort) blocks
        // signals, looks up its own pid/tid and raises SIGABRT; std's SIGSEGV handler
        // re-arms SIG_DFL before re-faulting. Without these, a crashing enclave spins
        // forever instead of dying. (tgkill is allowed only towards our own pid, below.)
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_getpid,
        libc::SYS_gettid,
    ];
    #[cfg(target_arch = "x86_64")]
    v.push(libc::SYS_gettimeofday);
    v
}

fn install_seccomp(kill: bool) -> Result<(), String> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = allowed_syscalls()
        .into_iter()
        .map(|s| (s, Vec::new()))
        .collect();
    let own = u64::from(std::process::id());
    let only_self = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, own)
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| e.to_string())?;
    rules.insert(libc::SYS_tgkill, vec![only_self]);
    let mismatch = if kill {
        SeccompAction::KillProcess
    } else {
        SeccompAction::Errno(libc::EPERM as u32)
    };
    let filter = SeccompFilter::new(rules, mismatch, SeccompAction::Allow, arch)
        .map_err(|e| e.to_string())?;
    let prog: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter_all_threads(&prog).map_err(|e| e.to_string())
}

fn fatal() -> ! {
    std::process::exit(EXIT_PROTOCOL)
}

fn tcs_loop(rt: &Runtime, tcs: usize) {
    let ch = rt.shm.channel(&rt.layout, tcs);
    loop {
        if serve_call(rt, ch, tcs).is_err() {
            fatal();
        }
    }
}

fn tworker_loop(rt: &Runtime) {
    let pool = Pool {
        shm: &rt.shm,
        layout: &rt.layout,
        first: rt.layout.n_tcs,
        len: rt.layout.n_epool,
        seq: rt.shm.u32(shm::H_EPOOL_SEQ),
        sleepers: rt.shm.u32(shm::H_EPOOL_SLEEPERS),
    };
    let tcs = rt.layout.n_tcs;
    pool.work(rt.retries_before_sleep, None, &|| false, &mut |ch| {
        if serve_call(rt, ch, tcs).is_err() {
            fatal();
        }
    });
}

fn waiter(rt: &Runtime) -> Waiter<'_> {
    Waiter {
        spin: rt.spin,
        adapt: None,
        lost: None,
        gate: Some(rt.shm.u32(shm::H_SPIN_GATE)),
        deadline: None,
    }
}

/// Serves one ecall on `ch` (TCS channel or a taken switchless slot).
fn serve_call(rt: &Runtime, ch: Channel<'_>, tcs: usize) -> Result<(), ConvError> {
    let w = waiter(rt);
    let h = ch.recv(Side::B, &w)?;
    if h.kind != Kind::Ecall {
        return Err(ConvError::Wire(crate::wire::WireError::Unexpected {
            got: h.kind,
            expected: "ecall",
        }));
    }
    let input = ch.recv_payload(Side::B, &h, &w)?;
    let t0 = Instant::now();
    let mut port = EnclavePort { rt, ch };
    let r = {
        let mut ctx = Ctx::new(&mut port, rt.keys.as_ref(), tcs);
        std::panic::catch_unwind(AssertUnwindSafe(|| {
            rt.service.ecall(h.id, &input, &mut ctx)
        }))
    };
    let inside = t0.elapsed().as_nanos() as u64;
    drop(input);
    let (status, out) = match r {
        Ok(Ok(v)) => (Status::Ok, v),
        Ok(Err(ServiceError::UnknownCall(_))) => (Status::UnknownId, Vec::new()),
        Ok(Err(e)) => (Status::Error, e.to_string().into_bytes()),
        Err(p) => (Status::Panic, crate::panic_message(&*p).into_bytes()),
    };
    ch.send_payload(
        Side::B,
        Kind::Return,
        h.id,
        status,
        inside,
        (&out).into(),
        &w,
    )
}

struct EnclavePort<'a> {
    rt: &'a Runtime,
    ch: Channel<'a>,
}

impl EnclavePort<'_> {
    fn regular(&self, id: u32, input: &[u8]) -> Result<(Status, Vec<u8>), ConvError> {
        let w = waiter(self.rt);
        self.ch
            .send_payload(Side::B, Kind::Ocall, id, Status::Ok, 0, input.into(), &w)?;
        receive_return(&self.ch, Side::B, id, &w)
    }

    /// A switchless ocall: `None` on a miss.
    fn switchless(&self, id: u32, input: &[u8]) -> Option<Result<(Status, Vec<u8>), ConvError>> {
        let rt = self.rt;
        let pool = Pool {
            shm: &rt.shm,
            layout: &rt.layout,
            first: rt.layout.n_tcs + rt.layout.n_epool,
            len: rt.layout.n_opool,
            seq: rt.shm.u32(shm::H_OPOOL_SEQ),
            sleepers: rt.shm.u32(shm::H_OPOOL_SLEEPERS),
        };
        let (ch, sent) = pool.post(
            Kind::Ocall,
            id,
            input.into(),
            rt.retries_before_fallback,
            crate::trace::thread_number(),
        )?;
        let w = waiter(rt);
        let r = ch
            .send_rest(Side::A, input.into(), sent, &w)
            .and_then(|()| receive_return(&ch, Side::A, id, &w));
        if r.is_ok() {
            Pool::release(&ch);
        }
        Some(r)
    }
}

fn receive_return(
    ch: &Channel<'_>,
    me: Side,
    id: u32,
    w: &Waiter<'_>,
) -> Result<(Status, Vec<u8>), ConvError> {
    let h = ch.recv(me, w)?;
    if h.kind != Kind::Return || h.id != id {
        return Err(ConvError::Wire(crate::wire::WireError::Unexpected {
            got: h.kind,
            expected: "ocall return",
        }));
    }
    let out = ch.recv_payload(me, &h, w)?;
    Ok((h.status, out))
}

impl OcallPort for EnclavePort<'_> {
    fn ocall(&mut self, id: u32, input: &[u8]) -> Result<Vec<u8>, OcallError> {
        let t0 = Instant::now();
        let base = shm::OCALL_STATS + 32 * (id as usize).min(shm::OCALL_STATS_IDS - 1);
        let counter = |k: usize| self.rt.shm.u64(base + 8 * k);
        let mut r = None;
        if self.rt.sw_ocalls.contains(id) {
            r = self.switchless(id, input);
            counter(if r.is_some() { 2 } else { 3 }).fetch_add(1, Ordering::Relaxed);
        }
        let r = match r {
            Some(r) => r,
            None => self.regular(id, input),
        };
        counter(0).fetch_add(1, Ordering::Relaxed);
        counter(1).fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        match r {
            Ok((status, out)) => ocall::to_result(id, status, out),
            // The host broke the protocol: the conversation cannot continue.
            Err(_) => fatal(),
        }
    }
}
