//! The sandbox backend: the service lives in a child process started by re-executing our own
//! binary (see [`crate::child`]), reached through shared memory. The host holds the shared
//! mapping, a bitmask of free TCS slots (callers beyond `tcs` wait on a futex), a monitor
//! thread and, if switchless ocalls are configured, the `num_uworkers` host workers.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::fd::OwnedFd;
use rustix::thread::futex;

use super::{Enclave, EnclaveBuilder, SeccompMode};
use crate::ocall::OcallTable;
use crate::seal::signer_hash;
use crate::shm::{self, Adaptive, ConvError, Layout, Payload, Shm, Side, SpinLimit, Waiter};
use crate::switchless::{IdSet, Pool, SwitchlessConfig};
use crate::trace::{EnclaveOcallCounters, Trace};
use crate::wire::{Header, Kind, Status};
use crate::{Error, child};

/// The host side of a sandboxed enclave.
pub(super) struct SandboxImp {
    shm: Arc<Shm>,
    layout: Layout,
    pub(super) lost: Arc<AtomicBool>,
    lost_reason: Arc<Mutex<Option<String>>>,
    free_tcs: Arc<AtomicU32>,
    tcs_waiters: AtomicU32,
    spin: Duration,
    /// The most the callers' spin grows to ([`super::EnclaveBuilder::spin_max`]).
    spin_max: Duration,
    /// Each TCS channel's caller-side spin bound ([`SpinLimit`]).
    tcs_spin: Box<[SpinLimit]>,
    /// The limit of one ecall ([`super::EnclaveBuilder::call_timeout`]).
    call_timeout: Option<Duration>,
    /// Cores this process may run on: the spin gate's measure.
    cores: u32,
    pub(super) pid: u32,
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

/// Whether every runnable thread on the machine has one of the `cores` (the runnable
/// count of `/proc/loadavg`, the caller included, at most `cores`): then a caller that
/// spins on through a long call holds a core nobody waits for. `false` where the count
/// cannot be read. The count is the machine's: for a process confined to fewer cores than
/// the machine has, it errs towards sleeping.
fn every_runnable_thread_has_a_core(cores: u32) -> bool {
    use std::os::unix::fs::FileExt;
    static LOADAVG: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    let Some(f) = LOADAVG.get_or_init(|| std::fs::File::open("/proc/loadavg").ok()) else {
        return false;
    };
    let mut buf = [0u8; 128];
    let Ok(n) = f.read_at(&mut buf, 0) else {
        return false;
    };
    runnable_of_loadavg(&buf[..n]).is_some_and(|r| r <= cores)
}

/// The runnable tasks of a `/proc/loadavg` line (`0.52 0.58 0.59 3/467 12345`: 3).
fn runnable_of_loadavg(line: &[u8]) -> Option<u32> {
    let field = std::str::from_utf8(line).ok()?.split_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

/// Whether waiters may spin with `free` the free-TCS mask of `n_tcs` channels on `cores`
/// cores: each conversation in flight has a host and an enclave thread, and a spinner only
/// helps while its peer has a core of its own.
fn spin_gate_open(n_tcs: usize, free: u32, cores: u32) -> bool {
    let busy = n_tcs as u32 - (free & all_bits(n_tcs)).count_ones();
    2 * busy <= cores
}

/// Checks what the shared mapping's fixed-size fields can hold; returns the key directory
/// as bytes.
fn check_config(b: &EnclaveBuilder, key_dir: Option<&std::path::Path>) -> Result<Vec<u8>, Error> {
    for (what, bytes) in [
        ("slot area", b.area),
        ("switchless pool slot area", b.pool_area),
    ] {
        if !shm::AREA_BYTES.contains(&bytes) {
            return Err(Error::Config(format!("{what} must be 64 B ..= 1 GiB")));
        }
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
    Ok(key_dir_bytes)
}

/// The shared mapping's layout, and the switchless configuration with its id sets.
fn plan_layout(b: &EnclaveBuilder) -> (Layout, SwitchlessIds) {
    let (n_pool, sw) = match &b.switchless {
        Some(c) => (
            c.pool_slots.clamp(1, 1024) as usize,
            Some((
                c.clone(),
                (IdSet::from_ids(&c.ecalls), IdSet::from_ids(&c.ocalls)),
            )),
        ),
        None => (0, None),
    };
    let layout = Layout {
        n_tcs: b.tcs,
        n_epool: n_pool,
        n_opool: n_pool,
        area: b.area,
        pool_area: b.pool_area,
        init_len: b.init.len(),
        max_payload: b.max_payload,
    };
    (layout, sw)
}

/// Writes the header the child reads at start-up; the magic number goes last, with release
/// ordering, so that the child sees a complete header or none.
fn write_header(
    shm: &Shm,
    layout: &Layout,
    b: &EnclaveBuilder,
    sw: &SwitchlessIds,
    sealing: bool,
    key_dir_bytes: &[u8],
) {
    let spin_ns = u32::try_from(b.spin.as_nanos()).unwrap_or(u32::MAX);
    let h = |off: usize, v: u32| shm.u32(off).store(v, Ordering::Relaxed);
    h(shm::H_VERSION, shm::VERSION);
    h(shm::H_N_TCS, layout.n_tcs as u32);
    h(shm::H_N_EPOOL, layout.n_epool as u32);
    h(shm::H_N_OPOOL, layout.n_opool as u32);
    h(shm::H_AREA, layout.area as u32);
    h(shm::H_POOL_AREA, layout.pool_area as u32);
    h(shm::H_SPIN_NS, spin_ns);
    h(shm::H_SPIN_GATE, 1);
    shm.u64(shm::H_MAX_PAYLOAD)
        .store(layout.max_payload, Ordering::Relaxed);
    if let Some((c, (e, o))) = sw {
        h(shm::H_TWORKERS, c.num_tworkers);
        h(shm::H_UWORKERS, c.num_uworkers);
        h(shm::H_RETRIES_FALLBACK, c.retries_before_fallback);
        h(shm::H_RETRIES_SLEEP, c.retries_before_sleep);
        for i in 0..4 {
            shm.u64(shm::H_SW_ECALLS + 8 * i)
                .store(e.0[i], Ordering::Relaxed);
            shm.u64(shm::H_SW_OCALLS + 8 * i)
                .store(o.0[i], Ordering::Relaxed);
        }
    }
    h(shm::H_SEALING, u32::from(sealing));
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
    shm.write(shm::H_KEYDIR, key_dir_bytes);
    shm.write(shm::H_SIGNER, &signer_hash(&b.signer));
    shm.u64(shm::H_MAGIC).store(shm::MAGIC, Ordering::Release);
}

/// What the monitor thread marks and wakes when the child exits.
struct Monitored {
    shm: Arc<Shm>,
    layout: Layout,
    lost: Arc<AtomicBool>,
    lost_reason: Arc<Mutex<Option<String>>>,
    free_tcs: Arc<AtomicU32>,
}

/// Spawns the monitor thread, which spawns the child (so that `PR_SET_PDEATHSIG`, tied to
/// the spawning thread, lasts as long as the enclave) and waits for it; when the child exits
/// for any reason, the monitor records why, sets `lost` and wakes every futex a host thread
/// can sleep on. Returns the monitor, the child's pid and a pidfd when the kernel gives one.
fn spawn_monitored(
    b: &EnclaveBuilder,
    fd: OwnedFd,
    m: Monitored,
) -> Result<(JoinHandle<()>, u32, Option<OwnedFd>), Error> {
    let exe = b
        .executable
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    let stderr_inherit = std::env::var_os(child::ENV_DEBUG).is_some();
    let (tx, rx) = std::sync::mpsc::channel();
    let monitor = std::thread::Builder::new()
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
            if let Ok(mut r) = m.lost_reason.lock() {
                r.get_or_insert(reason);
            }
            m.lost.store(true, Ordering::SeqCst);
            wake_everything(&m.shm, &m.layout, &m.free_tcs);
        })?;
    match rx.recv() {
        Ok(Ok((pid, pidfd))) => Ok((monitor, pid, pidfd)),
        Ok(Err(e)) => {
            let _ = monitor.join();
            Err(Error::Startup(format!(
                "spawning {}: {e}",
                b.executable
                    .as_deref()
                    .unwrap_or(std::path::Path::new("/proc/self/exe"))
                    .display()
            )))
        }
        Err(_) => {
            let _ = monitor.join();
            Err(Error::Startup("monitor thread failed".into()))
        }
    }
}

/// What the header of the shared mapping says about the switchless pools.
type SwitchlessIds = Option<(SwitchlessConfig, (IdSet, IdSet))>;

impl SandboxImp {
    /// Starts the enclave process, in named steps: check the configuration, lay out and
    /// create the shared mapping, write its header, spawn the child under a monitor thread,
    /// wait until the child says it is ready, and start the host's switchless workers.
    pub(super) fn start(
        b: &EnclaveBuilder,
        key_dir: Option<&std::path::Path>,
        table: Arc<OcallTable>,
        trace: Arc<Trace>,
    ) -> Result<Self, Error> {
        let key_dir_bytes = check_config(b, key_dir)?;
        let (layout, sw) = plan_layout(b);
        let total = layout
            .total()
            .ok_or_else(|| Error::Config("shared memory size overflows".into()))?;
        let (shm, fd) = Shm::create(total)?;
        write_header(&shm, &layout, b, &sw, key_dir.is_some(), &key_dir_bytes);
        let shm = Arc::new(shm);

        let lost = Arc::new(AtomicBool::new(false));
        let lost_reason: Arc<Mutex<Option<String>>> = Arc::default();
        let free_tcs = Arc::new(AtomicU32::new(all_bits(layout.n_tcs)));
        let (monitor, pid, pidfd) = spawn_monitored(
            b,
            fd,
            Monitored {
                shm: shm.clone(),
                layout,
                lost: lost.clone(),
                lost_reason: lost_reason.clone(),
                free_tcs: free_tcs.clone(),
            },
        )?;
        let mut imp = SandboxImp {
            shm,
            layout,
            lost,
            lost_reason,
            free_tcs,
            tcs_waiters: AtomicU32::new(0),
            spin: b.spin,
            spin_max: b.spin_max,
            tcs_spin: (0..layout.n_tcs).map(|_| SpinLimit::new(b.spin)).collect(),
            call_timeout: b.call_timeout,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            pid,
            pidfd,
            monitor: Some(monitor),
            uworkers: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            sw: sw.map(|(cfg, (e, _))| (cfg, e)),
        };
        imp.wait_ready(b.start_timeout)?;
        imp.start_uworkers(&table, &trace)?;
        Ok(imp)
    }

    /// The host workers that serve switchless ocalls, if any are configured.
    fn start_uworkers(&mut self, table: &Arc<OcallTable>, trace: &Arc<Trace>) -> Result<(), Error> {
        let Some((cfg, _)) = self.sw.clone() else {
            return Ok(());
        };
        for i in 0..cfg.num_uworkers {
            let ctx = UworkerCtx {
                shm: self.shm.clone(),
                layout: self.layout,
                stop: self.stop.clone(),
                lost: self.lost.clone(),
                table: table.clone(),
                trace: trace.clone(),
                retries_before_sleep: cfg.retries_before_sleep,
                spin: self.spin,
            };
            let h = std::thread::Builder::new()
                .name(format!("enclave-uworker-{i}"))
                .spawn(move || ctx.run())?;
            self.uworkers.push(h);
        }
        Ok(())
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

    pub(super) fn kill(&self) {
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

    /// How a caller waits; `adapt`: its channel's spin bound (TCS channels).
    fn waiter<'s>(&'s self, adapt: Option<&'s SpinLimit>) -> Waiter<'s> {
        Waiter {
            spin: self.spin,
            adapt: adapt.map(|limit| Adaptive {
                limit,
                max: self.spin_max,
                idle: every_runnable_thread_has_a_core,
                cores: self.cores,
            }),
            lost: Some(&self.lost),
            gate: Some(self.shm.u32(shm::H_SPIN_GATE)),
            deadline: self.call_timeout.map(|t| Instant::now() + t),
        }
    }

    /// Opens the spin gate while the regular conversations in flight (`free` is the free-TCS
    /// mask after a change), a host and an enclave thread each, fit the cores; closes it
    /// otherwise. Two threads may store from different snapshots in the wrong order: the
    /// gate only decides whether a waiter spins before it sleeps, and the next acquire or
    /// release corrects it.
    fn set_spin_gate(&self, free: u32) {
        let open = u32::from(spin_gate_open(self.layout.n_tcs, free, self.cores));
        let gate = self.shm.u32(shm::H_SPIN_GATE);
        if gate.load(Ordering::Relaxed) != open {
            gate.store(open, Ordering::Relaxed);
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
                    self.set_spin_gate(free & !(1 << bit));
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
        let free = self.free_tcs.fetch_or(1 << slot, Ordering::SeqCst) | (1 << slot);
        self.set_spin_gate(free);
        if self.tcs_waiters.load(Ordering::SeqCst) > 0 {
            let _ = futex::wake(&self.free_tcs, futex::Flags::PRIVATE, 1);
        }
    }

    pub(super) fn ecall(
        &self,
        e: &Enclave,
        call_id: u32,
        input: Payload<'_>,
    ) -> Result<Vec<u8>, Error> {
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
                    let r = self.converse(e, &ch, call_id, input, Some(sent), None);
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
        let r = self.converse(e, &ch, call_id, input, None, Some(&self.tcs_spin[slot]));
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
            Err(ConvError::Deadline) => {
                // The service's thread is still inside the call, holding its slot: the only
                // way to get the enclave back to a known state is to end it.
                let limit = self.call_timeout.unwrap_or_default();
                if let Ok(mut r) = self.lost_reason.lock() {
                    r.get_or_insert(format!(
                        "killed by the host: ecall {call_id} did not return within {limit:?}"
                    ));
                }
                self.kill();
                Err(Error::CallTimeout { call_id, limit })
            }
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

    /// The caller's side of one ecall conversation, serving the enclave's ocalls; `adapt`:
    /// the channel's spin bound (a TCS channel's; none for a switchless slot).
    fn converse(
        &self,
        e: &Enclave,
        ch: &shm::Channel<'_>,
        call_id: u32,
        input: Payload<'_>,
        posted: Option<usize>,
        adapt: Option<&SpinLimit>,
    ) -> Result<(Header, Vec<u8>), ConvError> {
        let w = self.waiter(adapt);
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
                    ch.send_payload(Side::A, Kind::Return, h.id, status, dt, (&out).into(), &w)?;
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

    pub(super) fn enclave_ocall_counters(&self, id: u32) -> Option<EnclaveOcallCounters> {
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
            adapt: None,
            lost: Some(&self.lost),
            gate: None,
            deadline: None,
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
                    ch.send_payload(Side::B, Kind::Return, h.id, status, dt, (&out).into(), &w)
                })();
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{all_bits, runnable_of_loadavg, spin_gate_open};

    #[test]
    fn the_runnable_count_is_read_from_loadavg() {
        assert_eq!(
            runnable_of_loadavg(b"0.52 0.58 0.59 3/467 12345\n"),
            Some(3)
        );
        assert_eq!(runnable_of_loadavg(b"1.00 2.00 3.00 12/9 1"), Some(12));
        for bad in [
            &b""[..],
            b"0.5 0.5 0.5",
            b"0.5 0.5 0.5 x/3 1",
            b"0.5 0.5 0.5 3 1",
            b"\xff",
        ] {
            assert_eq!(runnable_of_loadavg(bad), None, "{bad:?}");
        }
        // This machine's, with this test's thread running: at least one.
        let line = std::fs::read("/proc/loadavg").unwrap();
        assert!(runnable_of_loadavg(&line).unwrap() >= 1);
    }

    #[test]
    fn the_spin_gate_closes_when_conversations_outnumber_the_cores() {
        // 2 cores: one conversation (two threads) may spin, two may not.
        assert!(spin_gate_open(32, all_bits(32), 2), "idle");
        assert!(spin_gate_open(32, all_bits(32) & !1, 2), "one in flight");
        assert!(
            !spin_gate_open(32, all_bits(32) & !0b11, 2),
            "two in flight"
        );
        // 8 cores: four conversations fit.
        assert!(spin_gate_open(4, 0, 8), "all four TCS busy on 8 cores");
        assert!(!spin_gate_open(5, 0, 8), "five busy on 8 cores");
        // One core: a spinner would only delay the thread it waits for.
        assert!(!spin_gate_open(4, 0b1110, 1));
        // Bits beyond n_tcs are ignored.
        assert!(!spin_gate_open(2, !0b11, 2));
    }
}
