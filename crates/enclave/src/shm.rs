//! Shared memory between the host and the sandboxed enclave, and the channel protocol.
//!
//! # Layout
//!
//! One memfd, mapped `MAP_SHARED` by both processes (at different addresses; nothing in it
//! is a pointer). Offsets are fixed by [`Layout`], which both sides compute from the
//! configuration in the first page:
//!
//! ```text
//! 0       header page: magic, version, start-up status (a futex), configuration,
//!         the switchless pools' doorbells (one cache line each), service name, errors
//! 4096    enclave-side ocall counters: 256 x {count, round-trip ns, hits, misses}
//! 12288   the service's init bytes
//! ...     channels: n_tcs TCS channels, then the switchless ecall pool, then the ocall pool
//! ```
//!
//! # Channels
//!
//! A channel is a control line (`turn`, the futex word both sides wait on; one "sleeping"
//! flag per side; `claim`, used by switchless pools) and two mailboxes, one per direction,
//! each a 32-byte [`wire`](crate::wire) header plus an area of `area` bytes. The conversation
//! is strictly ping-pong: the side whose turn it is reads the peer's mailbox, writes its own,
//! and passes the turn. A message is therefore never overwritten while it is being read, and
//! every direction change costs exactly one cache-line handoff.
//!
//! Waiting is a bounded spin (`spin`, 20 µs by default) followed by a futex wait. The waker
//! calls `FUTEX_WAKE` only when the peer has announced that it sleeps (Dekker-style: each
//! side stores its own flag, then loads the other's, both `SeqCst`), so calls that arrive
//! while the peer still spins cost no system call at all. This spin is what makes a regular
//! call take a few microseconds instead of two futex round trips; it is bounded, so an idle
//! enclave costs no CPU. A caller on a TCS channel may spin longer ([`Adaptive`]): its
//! channel's bound ([`SpinLimit`]) grows when a wait slept although it ended within
//! `spin_max` (1 ms by default) and falls back towards `spin` after waits longer than that,
//! and the spin goes past `spin` only if every runnable thread on the machine has a core
//! when that spin ends (so it takes no core anyone waits for then). Without it, every call
//! longer than the spin paid the wake-up of a sleeping caller, which SGX's caller (it runs
//! the call on its own core) never does: tens of µs a call on a 2-vCPU KVM guest, which
//! made a 31-40 µs `add_batch` of the dp-tree service cost 58-78 µs (`docs/enclave.md`).
//! Past `spin_max`, one wake-up is a few percent of the wait. The enclave's threads keep
//! the fixed spin: in SGX nothing waits between calls. The spin only pays while the peer
//! has a core of its own: a TCS channel's waiters spin only while the spin gate
//! ([`H_SPIN_GATE`]) is open, which the host keeps so while the regular conversations in
//! flight, two threads each, fit the cores. Beyond that (many threads calling in at once,
//! as a middlebox's relay threads do) a spinning waiter takes the core the thread it waits
//! for needs, and measured 2-4x fewer calls per second than sleeping at once. Switchless
//! calls differ in *who* serves them (a worker pool polled without any doorbell per call)
//! and in the fallback rule, not in this spin.
//!
//! # Trust
//!
//! Both sides read headers through atomics and validate them ([`RawHeader::validate`]);
//! payload bytes are copied out of the area before they are interpreted (the `[in]`/`[out]`
//! copies of SGX's edger8r). A peer that scribbles over an area while we copy it can make us
//! copy garbage, which the payload's own decoder then rejects, but cannot make us read or
//! write outside the mapping: every length is checked against the area first.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::fd::OwnedFd;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::thread::futex;

use crate::wire::{Assembler, Header, Kind, Limits, RawHeader, Status, WireError};

/// "CCBENCLV" little-endian.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"CCBENCLV");
/// Layout version; bumped on any change.
pub(crate) const VERSION: u32 = 2;

/// A payload as its sender holds it: one slice, or pieces sent as their concatenation (a
/// gather list), so that a host with its request in pieces (a batch of records) writes them
/// straight into the area instead of assembling them in a buffer first. The receiver sees
/// one payload either way.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// One slice.
    Whole(&'a [u8]),
    /// The concatenation of the pieces, of the given total length.
    Pieces(&'a [&'a [u8]], usize),
}

impl<'a> Payload<'a> {
    /// The concatenation of `pieces`.
    pub fn pieces(pieces: &'a [&'a [u8]]) -> Self {
        Payload::Pieces(pieces, pieces.iter().map(|p| p.len()).sum())
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Whole(d) => d.len(),
            Payload::Pieces(_, len) => *len,
        }
    }

    /// Calls `f(offset, bytes)` for the bytes `start .. start + n` of the payload, in
    /// order, `offset` counted from `start`.
    fn each_in(&self, start: usize, n: usize, mut f: impl FnMut(usize, &[u8])) {
        match self {
            Payload::Whole(d) => f(0, &d[start..start + n]),
            Payload::Pieces(pieces, _) => {
                let end = start + n;
                let mut at = 0;
                for p in pieces.iter() {
                    let (lo, hi) = (at.max(start), (at + p.len()).min(end));
                    if lo < hi {
                        f(lo - start, &p[lo - at..hi - at]);
                    }
                    at += p.len();
                    if at >= end {
                        break;
                    }
                }
            }
        }
    }

    /// The bytes, assembled (for a receiver in this process, which has no area to write).
    pub fn to_vec(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.each_in(0, self.len(), |_, b| v.extend_from_slice(b));
        v
    }
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(d: &'a [u8]) -> Self {
        Payload::Whole(d)
    }
}

impl<'a> From<&'a Vec<u8>> for Payload<'a> {
    fn from(d: &'a Vec<u8>) -> Self {
        Payload::Whole(d)
    }
}

// Header page offsets.
pub(crate) const H_MAGIC: usize = 0;
pub(crate) const H_VERSION: usize = 8;
pub(crate) const H_STATUS: usize = 12;
pub(crate) const H_N_TCS: usize = 16;
pub(crate) const H_N_EPOOL: usize = 20;
pub(crate) const H_N_OPOOL: usize = 24;
pub(crate) const H_AREA: usize = 28;
pub(crate) const H_POOL_AREA: usize = 32;
pub(crate) const H_TWORKERS: usize = 36;
pub(crate) const H_UWORKERS: usize = 40;
pub(crate) const H_RETRIES_FALLBACK: usize = 44;
pub(crate) const H_RETRIES_SLEEP: usize = 48;
pub(crate) const H_SPIN_NS: usize = 52;
pub(crate) const H_MAX_PAYLOAD: usize = 56;
pub(crate) const H_EPOOL_SEQ: usize = 128;
pub(crate) const H_EPOOL_SLEEPERS: usize = 132;
pub(crate) const H_OPOOL_SEQ: usize = 192;
pub(crate) const H_OPOOL_SLEEPERS: usize = 196;
pub(crate) const H_SW_ECALLS: usize = 256;
pub(crate) const H_SW_OCALLS: usize = 288;
pub(crate) const H_SEALING: usize = 320;
pub(crate) const H_NAME_LEN: usize = 324;
pub(crate) const H_INIT_LEN: usize = 328;
pub(crate) const H_KEYDIR_LEN: usize = 332;
pub(crate) const H_ERR_LEN: usize = 336;
pub(crate) const H_SECCOMP: usize = 340;
pub(crate) const H_SIGNER: usize = 384;
pub(crate) const H_NAME: usize = 448;
pub(crate) const NAME_CAP: usize = 256;
pub(crate) const H_ERR: usize = 704;
pub(crate) const ERR_CAP: usize = 512;
pub(crate) const H_KEYDIR: usize = 1216;
pub(crate) const KEYDIR_CAP: usize = 2048;
/// The spin gate, on its own cache line: 1 while every regular conversation in flight can
/// have a core for each of its two threads, 0 when they outnumber the cores and a waiter
/// must sleep at once. Written by the host at every TCS acquire and release.
pub(crate) const H_SPIN_GATE: usize = 3328;
const HEADER_PAGE: usize = 4096;
/// Enclave-side ocall counters.
pub(crate) const OCALL_STATS: usize = HEADER_PAGE;
/// Number of ocall ids with their own counters (larger ids share the last entry).
pub(crate) const OCALL_STATS_IDS: usize = 256;
const OCALL_STATS_SIZE: usize = OCALL_STATS_IDS * 32;
pub(crate) const INIT_OFF: usize = OCALL_STATS + OCALL_STATS_SIZE;

/// Start-up status values (`H_STATUS`).
pub(crate) const STATUS_STARTING: u32 = 0;
pub(crate) const STATUS_READY: u32 = 1;
pub(crate) const STATUS_FAILED: u32 = 2;

/// Switchless claim states (`claim` word of a pool channel).
pub(crate) const CLAIM_FREE: u32 = 0;
pub(crate) const CLAIM_BUSY: u32 = 1;
pub(crate) const CLAIM_POSTED: u32 = 2;
pub(crate) const CLAIM_TAKEN: u32 = 3;

/// The sizes a slot's area may take (TCS slots and switchless pool slots alike), bytes per
/// direction: what the host accepts when it lays the mapping out, and what the enclave
/// accepts when it reads the layout back.
pub(crate) const AREA_BYTES: std::ops::RangeInclusive<usize> = 64..=1 << 30;

const fn round64(n: usize) -> usize {
    (n + 63) & !63
}

/// Where everything lives in the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub n_tcs: usize,
    pub n_epool: usize,
    pub n_opool: usize,
    pub area: usize,
    pub pool_area: usize,
    pub init_len: usize,
    pub max_payload: u64,
}

impl Layout {
    fn channel_size(area: usize) -> usize {
        192 + 2 * round64(area)
    }

    fn channels_off(&self) -> usize {
        round64(INIT_OFF + self.init_len)
    }

    /// Offset of channel `i` (TCS channels first, then the ecall pool, then the ocall pool).
    pub fn channel_off(&self, i: usize) -> (usize, usize) {
        let base = self.channels_off();
        let tcs = Self::channel_size(self.area);
        let pool = Self::channel_size(self.pool_area);
        if i < self.n_tcs {
            (base + i * tcs, self.area)
        } else {
            (
                base + self.n_tcs * tcs + (i - self.n_tcs) * pool,
                self.pool_area,
            )
        }
    }

    /// Total size, or `None` on overflow.
    pub fn total(&self) -> Option<usize> {
        let tcs = Self::channel_size(self.area).checked_mul(self.n_tcs)?;
        let pool = Self::channel_size(self.pool_area).checked_mul(self.n_epool + self.n_opool)?;
        self.channels_off().checked_add(tcs)?.checked_add(pool)
    }

    /// Validates a layout read from a header against the mapping's size.
    pub fn checked(self, map_len: usize) -> Option<Self> {
        let ok = self.n_tcs >= 1
            && self.n_tcs <= 64
            && self.n_epool <= 1024
            && self.n_opool <= 1024
            && AREA_BYTES.contains(&self.area)
            && AREA_BYTES.contains(&self.pool_area)
            && self.init_len <= 1 << 30
            && self.total()? <= map_len;
        ok.then_some(self)
    }
}

/// A shared mapping.
pub(crate) struct Shm {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes through atomics or
// through the channel protocol's turn-taking, and the pointer stays valid until drop.
unsafe impl Send for Shm {}
// SAFETY: as above; `&Shm` hands out only atomics and copy operations.
unsafe impl Sync for Shm {}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping created in `map`, unmapped once here;
        // no references into it outlive `self` (they borrow from it).
        unsafe {
            let _ = rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

impl Shm {
    /// Creates a memfd of `len` bytes and maps it; returns the mapping and the fd.
    pub fn create(len: usize) -> std::io::Result<(Shm, OwnedFd)> {
        let fd = rustix::fs::memfd_create("ccbench-enclave", rustix::fs::MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        let shm = Self::map(&fd, len)?;
        Ok((shm, fd))
    }

    /// Maps an existing memfd (the enclave side), whole.
    pub fn open(fd: rustix::fd::BorrowedFd<'_>) -> std::io::Result<Shm> {
        let st = rustix::fs::fstat(fd)?;
        let len = usize::try_from(st.st_size)
            .map_err(|_| std::io::Error::other("shared memory size out of range"))?;
        if len < INIT_OFF {
            return Err(std::io::Error::other("shared memory too small"));
        }
        Self::map(fd, len)
    }

    fn map(fd: impl rustix::fd::AsFd, len: usize) -> std::io::Result<Shm> {
        // SAFETY: a fresh shared mapping of a file we own; the kernel picks the address, so
        // nothing existing is replaced. The result is checked for null below.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| std::io::Error::other("mmap"))?;
        Ok(Shm { ptr, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn check(&self, off: usize, n: usize, align: usize) {
        assert!(
            off.checked_add(n).is_some_and(|e| e <= self.len) && off.is_multiple_of(align),
            "shared memory access out of bounds (internal layout bug)"
        );
    }

    pub fn u32(&self, off: usize) -> &AtomicU32 {
        self.check(off, 4, 4);
        // SAFETY: in bounds and 4-aligned (checked above; the mapping is page-aligned); the
        // memory lives as long as `self`, and AtomicU32 has the layout of u32.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() }
    }

    pub fn u64(&self, off: usize) -> &AtomicU64 {
        self.check(off, 8, 8);
        // SAFETY: as in `u32`, with 8-byte alignment checked.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU64>() }
    }

    /// Copies `src` into the mapping at `off`.
    pub fn write(&self, off: usize, src: &[u8]) {
        self.check(off, src.len(), 1);
        // SAFETY: destination range checked in bounds; source is a distinct Rust slice, so
        // the ranges cannot overlap. Concurrent access is excluded by the protocol (only
        // the side holding the turn writes its mailbox).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len())
        }
    }

    /// Copies from the mapping at `off` into `dst`.
    pub fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len(), 1);
        // SAFETY: source range checked in bounds; `dst` is a distinct Rust slice. A
        // misbehaving peer writing concurrently can only change the bytes we copy.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }

    /// Appends `n` bytes from the mapping at `off` to `dst` without zero-filling first
    /// (payloads are up to megabytes; a memset before the copy would cost a third more).
    pub fn append(&self, off: usize, n: usize, dst: &mut Vec<u8>) {
        self.check(off, n, 1);
        dst.reserve(n);
        let len = dst.len();
        // SAFETY: source range checked in bounds; `reserve` guarantees room for `n` more
        // bytes after `len`; the copy initialises exactly those bytes before `set_len`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr().add(len), n);
            dst.set_len(len + n);
        }
    }

    pub fn read_vec(&self, off: usize, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.read(off, &mut v);
        v
    }

    /// A channel by index (see [`Layout::channel_off`]).
    pub fn channel<'a>(&'a self, layout: &Layout, i: usize) -> Channel<'a> {
        let (base, area) = layout.channel_off(i);
        Channel {
            shm: self,
            base,
            area,
            limits: Limits {
                area: area as u64,
                max_payload: layout.max_payload,
            },
        }
    }
}

/// Which end of a channel: `A` starts conversations (the caller), `B` serves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    A,
    B,
}

impl Side {
    fn turn_value(self) -> u32 {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }
    fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// How many times a caller past its fixed spin looks for an idle core before it sleeps.
const IDLE_LOOKS: u32 = 3;

/// A caller's adaptive spin bound on one TCS channel, in nanoseconds: how long
/// [`wait_while`] may spin before it sleeps, between the waiter's `spin` and its
/// [`Adaptive::max`] (see the module docs).
#[derive(Debug)]
pub(crate) struct SpinLimit(AtomicU64);

impl SpinLimit {
    /// A bound that starts at `spin`.
    pub fn new(spin: Duration) -> SpinLimit {
        SpinLimit(AtomicU64::new(nanos(spin)))
    }

    fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }

    fn set(&self, d: Duration) {
        self.0.store(nanos(d), Ordering::Relaxed);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The spin bound after a wait that spun to `limit`, then slept, and took `waited` in all,
/// for a side whose bound lies between `spin` and `spin_max`: a wait that ended within
/// `spin_max` would have been cheaper spun through, so the bound grows to cover it with a
/// quarter to spare (at least doubling, so a few waits reach it); a longer one halves the
/// bound, back towards `spin`. (A wait that ended while spinning leaves the bound alone.)
pub(crate) fn next_spin_limit(
    limit: Duration,
    waited: Duration,
    spin: Duration,
    spin_max: Duration,
) -> Duration {
    let next = if waited <= spin_max {
        (2 * limit).max(waited + waited / 4)
    } else {
        limit / 2
    };
    next.clamp(spin, spin_max.max(spin))
}

/// A caller's adaptive spin on a TCS channel (see the module docs).
#[derive(Clone, Copy)]
pub(crate) struct Adaptive<'a> {
    /// The channel's bound, between the waiter's `spin` and `max`.
    pub limit: &'a SpinLimit,
    /// The most the bound grows to.
    pub max: Duration,
    /// Whether the machine has a core for every runnable thread, given its `cores`: the
    /// spin goes past `spin` only then, since it would otherwise hold a core another thread
    /// (the caller's own application's, or anyone's) waits for.
    pub idle: fn(u32) -> bool,
    /// The cores this process may run on.
    pub cores: u32,
}

/// How a side waits.
#[derive(Clone, Copy)]
pub(crate) struct Waiter<'a> {
    /// Bounded spin before sleeping (zero: sleep at once, whatever `adapt` says).
    pub spin: Duration,
    /// Where the spin may go on past `spin` (a caller on a TCS channel); `None`: it never does.
    pub adapt: Option<Adaptive<'a>>,
    /// Set when the peer is gone (host side only); checked while spinning and on wake-up.
    pub lost: Option<&'a AtomicBool>,
    /// The spin gate ([`H_SPIN_GATE`]): spin only while it is non-zero (`None`: always).
    pub gate: Option<&'a AtomicU32>,
    /// When the host stops waiting for this conversation (host side only; checked at least
    /// every [`HOST_WAIT_TIMEOUT`]).
    pub deadline: Option<Instant>,
}

/// Why a conversation stopped.
#[derive(Debug)]
pub(crate) enum ConvError {
    /// The peer is gone.
    Lost,
    /// The peer broke the protocol.
    Wire(WireError),
    /// The waiter's deadline passed.
    Deadline,
}

impl From<WireError> for ConvError {
    fn from(e: WireError) -> Self {
        ConvError::Wire(e)
    }
}

/// Host-side futex timeout: a safety net under the monitor's explicit wake-ups.
const HOST_WAIT_TIMEOUT: rustix::time::Timespec = rustix::time::Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};

/// Waits until `word != cur`, spinning first, then sleeping on the futex (shared, not
/// private: the other process wakes us). `sleeping` is the flag the waker checks.
pub(crate) fn wait_while(
    word: &AtomicU32,
    cur: u32,
    sleeping: &AtomicU32,
    w: &Waiter<'_>,
) -> Result<u32, ConvError> {
    let lost = |w: &Waiter<'_>| w.lost.is_some_and(|l| l.load(Ordering::Relaxed));
    let v = word.load(Ordering::Acquire);
    if v != cur {
        return Ok(v);
    }
    let gate_open = |w: &Waiter<'_>| w.gate.is_none_or(|g| g.load(Ordering::Relaxed) != 0);
    // When this wait started to spin, if it did: a wait that spun and then slept adapts its
    // channel's bound to how long it took.
    let mut spun = None;
    if !w.spin.is_zero() && gate_open(w) {
        let start = Instant::now();
        let (mut bound, mut extended, mut looks) = (w.spin, false, 0);
        let mut i = 0u32;
        loop {
            std::hint::spin_loop();
            let v = word.load(Ordering::Acquire);
            if v != cur {
                return Ok(v);
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) {
                if lost(w) {
                    return Err(ConvError::Lost);
                }
                if w.deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(ConvError::Deadline);
                }
                if start.elapsed() >= bound {
                    // Past the fixed spin: on to the channel's bound if a core is idle. The
                    // count is of one instant (a timer's thread may be runnable in it), so a
                    // busy machine is looked at again after another fixed spin, three looks
                    // in all.
                    match w.adapt {
                        Some(a) if !extended && a.limit.get() > bound => {
                            looks += 1;
                            if (a.idle)(a.cores) {
                                bound = a.limit.get();
                                extended = true;
                            } else if looks < IDLE_LOOKS {
                                bound += w.spin;
                            } else {
                                break;
                            }
                        }
                        _ => break,
                    }
                }
                if extended && !gate_open(w) {
                    break;
                }
            }
        }
        spun = Some(start);
    }
    let adapted = |v: u32| {
        if let (Some(a), Some(start)) = (w.adapt, spun) {
            let limit = next_spin_limit(a.limit.get(), start.elapsed(), w.spin, a.max);
            a.limit.set(limit);
        }
        v
    };
    loop {
        if lost(w) {
            return Err(ConvError::Lost);
        }
        if w.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ConvError::Deadline);
        }
        sleeping.store(1, Ordering::SeqCst);
        let v = word.load(Ordering::SeqCst);
        if v != cur {
            sleeping.store(0, Ordering::Relaxed);
            return Ok(adapted(v));
        }
        let timeout = w.lost.is_some().then_some(&HOST_WAIT_TIMEOUT);
        // EAGAIN (value changed), EINTR and ETIMEDOUT all just mean "look again".
        let _ = futex::wait(word, futex::Flags::empty(), cur, timeout);
        sleeping.store(0, Ordering::Relaxed);
        let v = word.load(Ordering::Acquire);
        if v != cur {
            return Ok(adapted(v));
        }
    }
}

/// Wakes every waiter on a shared futex word.
pub(crate) fn wake_all(word: &AtomicU32) {
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

/// One channel: a view into the mapping.
#[derive(Clone, Copy)]
pub(crate) struct Channel<'a> {
    shm: &'a Shm,
    base: usize,
    area: usize,
    limits: Limits,
}

impl<'a> Channel<'a> {
    pub fn turn(&self) -> &'a AtomicU32 {
        self.shm.u32(self.base)
    }
    fn sleeping(&self, side: Side) -> &'a AtomicU32 {
        self.shm
            .u32(self.base + 4 + 4 * (side.turn_value() as usize))
    }
    pub fn claim(&self) -> &'a AtomicU32 {
        self.shm.u32(self.base + 12)
    }
    fn mailbox(&self, side: Side) -> usize {
        match side {
            Side::A => self.base + 64,
            Side::B => self.base + 128 + round64(self.area),
        }
    }

    /// Writes a message into `me`'s mailbox (does not pass the turn).
    /// Writes header `h` and the bytes `start .. start + h.chunk_len` of `data` to our
    /// mailbox.
    fn write_msg(&self, me: Side, h: &RawHeader, data: Payload<'_>, start: usize) {
        let mb = self.mailbox(me);
        let s = self.shm;
        s.u32(mb).store(h.kind, Ordering::Relaxed);
        s.u32(mb + 4).store(h.id, Ordering::Relaxed);
        s.u32(mb + 8).store(h.status, Ordering::Relaxed);
        s.u32(mb + 12).store(h.chunk_len, Ordering::Relaxed);
        s.u64(mb + 16).store(h.total_len, Ordering::Relaxed);
        s.u64(mb + 24).store(h.t_ns, Ordering::Relaxed);
        data.each_in(start, h.chunk_len as usize, |at, bytes| {
            if !bytes.is_empty() {
                s.write(mb + 64 + at, bytes);
            }
        });
    }

    /// Reads and validates the peer's message header.
    fn read_header(&self, me: Side) -> Result<Header, WireError> {
        let mb = self.mailbox(me.other());
        let s = self.shm;
        RawHeader {
            kind: s.u32(mb).load(Ordering::Relaxed),
            id: s.u32(mb + 4).load(Ordering::Relaxed),
            status: s.u32(mb + 8).load(Ordering::Relaxed),
            chunk_len: s.u32(mb + 12).load(Ordering::Relaxed),
            total_len: s.u64(mb + 16).load(Ordering::Relaxed),
            t_ns: s.u64(mb + 24).load(Ordering::Relaxed),
        }
        .validate(&self.limits)
    }

    /// Appends the peer's current chunk (length already validated against the area).
    fn append_chunk(&self, me: Side, n: usize, dst: &mut Vec<u8>) {
        self.shm.append(self.mailbox(me.other()) + 64, n, dst);
    }

    /// Passes the turn to the peer and wakes it if it sleeps.
    pub fn pass_turn(&self, me: Side) {
        let other = me.other();
        self.turn().store(other.turn_value(), Ordering::SeqCst);
        if self.sleeping(other).load(Ordering::SeqCst) != 0 {
            wake_all(self.turn());
        }
    }

    /// Sets the turn to the peer without a wake-up (switchless posting: the worker polls).
    pub fn set_turn_quiet(&self, to: Side) {
        self.turn().store(to.turn_value(), Ordering::Release);
    }

    /// Waits for `me`'s turn.
    pub fn wait_turn(&self, me: Side, w: &Waiter<'_>) -> Result<(), ConvError> {
        let mine = me.turn_value();
        let other = me.other().turn_value();
        let v = wait_while(self.turn(), other, self.sleeping(me), w)?;
        if v == mine {
            Ok(())
        } else {
            // Any other value is a corrupted turn word: only 0 and 1 are ever written.
            Err(ConvError::Wire(WireError::UnknownKind(v)))
        }
    }

    /// Waits for and validates the next message.
    pub fn recv(&self, me: Side, w: &Waiter<'_>) -> Result<Header, ConvError> {
        self.wait_turn(me, w)?;
        Ok(self.read_header(me)?)
    }

    /// Writes the first chunk of a payload message; returns the bytes sent. The caller then
    /// passes the turn and calls [`Channel::send_rest`].
    pub fn write_first(
        &self,
        me: Side,
        kind: Kind,
        id: u32,
        status: Status,
        t_ns: u64,
        data: Payload<'_>,
    ) -> usize {
        let n = data.len().min(self.area);
        self.write_msg(
            me,
            &RawHeader {
                kind: kind.code(),
                id,
                status: status.code(),
                chunk_len: n as u32,
                total_len: data.len() as u64,
                t_ns,
            },
            data,
            0,
        );
        n
    }

    /// Streams the remaining chunks, each after the peer's ack.
    pub fn send_rest(
        &self,
        me: Side,
        data: Payload<'_>,
        mut sent: usize,
        w: &Waiter<'_>,
    ) -> Result<(), ConvError> {
        while sent < data.len() {
            let h = self.recv(me, w)?;
            if h.kind != Kind::Ack {
                return Err(WireError::Unexpected {
                    got: h.kind,
                    expected: "ack",
                }
                .into());
            }
            let n = (data.len() - sent).min(self.area);
            self.write_msg(
                me,
                &RawHeader {
                    kind: Kind::Chunk.code(),
                    chunk_len: n as u32,
                    total_len: data.len() as u64,
                    ..Default::default()
                },
                data,
                sent,
            );
            sent += n;
            self.pass_turn(me);
        }
        Ok(())
    }

    /// Sends a whole payload message (chunked as needed).
    #[allow(clippy::too_many_arguments)]
    pub fn send_payload(
        &self,
        me: Side,
        kind: Kind,
        id: u32,
        status: Status,
        t_ns: u64,
        data: Payload<'_>,
        w: &Waiter<'_>,
    ) -> Result<(), ConvError> {
        let sent = self.write_first(me, kind, id, status, t_ns, data);
        self.pass_turn(me);
        self.send_rest(me, data, sent, w)
    }

    /// Receives the rest of a payload whose first header was just read (it is our turn).
    pub fn recv_payload(
        &self,
        me: Side,
        first: &Header,
        w: &Waiter<'_>,
    ) -> Result<Vec<u8>, ConvError> {
        let mut asm = Assembler::begin(first)?;
        self.append_chunk(me, first.chunk_len, asm.buf_mut());
        while !asm.is_complete() {
            self.write_msg(
                me,
                &RawHeader {
                    kind: Kind::Ack.code(),
                    ..Default::default()
                },
                Payload::Whole(&[]),
                0,
            );
            self.pass_turn(me);
            let h = self.recv(me, w)?;
            if h.kind != Kind::Chunk {
                return Err(WireError::Unexpected {
                    got: h.kind,
                    expected: "chunk",
                }
                .into());
            }
            if h.chunk_len > asm.remaining() {
                return Err(WireError::LengthMismatch {
                    chunk: h.chunk_len as u64,
                    remaining: asm.remaining() as u64,
                }
                .into());
            }
            self.append_chunk(me, h.chunk_len, asm.buf_mut());
        }
        Ok(asm.finish()?)
    }
}

#[cfg(test)]
mod tests {
    use super::{Adaptive, Payload, SpinLimit, Waiter, next_spin_limit, wait_while};
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::Duration;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn the_spin_bound_grows_to_cover_a_short_sleep_and_halves_after_a_long_one() {
        let (spin, max) = (20 * US, 1000 * US);
        // Grows to the wait and a quarter, at least doubling, at most `max`.
        assert_eq!(
            next_spin_limit(spin, 90 * US, spin, max),
            112_500 * US / 1000
        );
        assert_eq!(next_spin_limit(spin, 25 * US, spin, max), 40 * US);
        assert_eq!(next_spin_limit(400 * US, 900 * US, spin, max), max);
        assert_eq!(next_spin_limit(spin, max, spin, max), max);
        // A wait past `max` halves it, down to `spin`.
        assert_eq!(next_spin_limit(400 * US, 2 * max, spin, max), 200 * US);
        assert_eq!(next_spin_limit(30 * US, 2 * max, spin, max), spin);
        // `max` at or below `spin`: the bound stays `spin`.
        for waited in [US, spin, 50 * US, max] {
            assert_eq!(next_spin_limit(spin, waited, spin, 10 * US), spin);
            assert_eq!(next_spin_limit(spin, waited, spin, spin), spin);
        }
    }

    /// A waiter's shared words: the turn word, its sleeping flag, the spin gate.
    struct Words {
        word: AtomicU32,
        sleeping: AtomicU32,
        gate: AtomicU32,
    }

    /// One wait of a caller whose channel's bound is `limit` (`idle`: whether it may spin
    /// past `spin`), on a word that `waker` changes (then waking the waiter if it sleeps).
    fn wait_with(
        limit: &SpinLimit,
        (spin, max, idle): (Duration, Duration, fn(u32) -> bool),
        gate: u32,
        waker: impl FnOnce(&Words) + Send,
    ) {
        let words = Words {
            word: AtomicU32::new(0),
            sleeping: AtomicU32::new(0),
            gate: AtomicU32::new(gate),
        };
        let adapt = Adaptive {
            limit,
            max,
            idle,
            cores: 2,
        };
        let w = Waiter {
            spin,
            adapt: Some(adapt),
            lost: None,
            gate: Some(&words.gate),
            deadline: None,
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                waker(&words);
                words.word.store(1, Ordering::SeqCst);
                if words.sleeping.load(Ordering::SeqCst) != 0 {
                    super::wake_all(&words.word);
                }
            });
            assert_eq!(wait_while(&words.word, 0, &words.sleeping, &w).unwrap(), 1);
        });
    }

    /// A waker that changes the word `d` after the waiter went to sleep (so that the wait
    /// lasts at least `d` however late the waiter's thread started).
    fn after(d: Duration) -> impl FnOnce(&Words) + Send {
        move |w| {
            asleep_within(w, Duration::from_secs(20));
            std::thread::sleep(d)
        }
    }

    /// Whether the waiter of `w` goes to sleep within `within` (looked at every ms).
    fn asleep_within(w: &Words, within: Duration) -> bool {
        let t = std::time::Instant::now();
        while w.sleeping.load(Ordering::SeqCst) == 0 && t.elapsed() < within {
            std::thread::sleep(Duration::from_millis(1));
        }
        w.sleeping.load(Ordering::SeqCst) != 0
    }

    /// Whether the waiter goes to sleep within `within` (then the waker changes the word).
    fn sleeps_within(within: Duration, slept: &AtomicBool) -> impl FnOnce(&Words) + Send + '_ {
        move |w| slept.store(asleep_within(w, within), Ordering::SeqCst)
    }

    /// The bound's adaptation in `wait_while` (lower bounds only: the waker sleeps at least
    /// as long as asked after the waiter fell asleep, however loaded the machine).
    #[test]
    fn a_wait_that_slept_adapts_its_channels_spin_bound() {
        let ms = Duration::from_millis(1);
        let idle: fn(u32) -> bool = |_| true;
        let limit = SpinLimit::new(US);
        // Slept after a 1 µs spin, woken 50 ms or more later: the bound covers it.
        wait_with(&limit, (US, 10_000 * ms, idle), 1, after(50 * ms));
        assert!(limit.get() >= 62 * ms, "{:?}", limit.get());
        // Slept after spinning to its 20 ms, woken past the most (20 ms): the bound halves.
        limit.set(20 * ms);
        wait_with(&limit, (US, 20 * ms, idle), 1, after(10 * ms));
        assert_eq!(limit.get(), 10 * ms);
        // With the spin gate closed the wait sleeps at once, and the bound stays.
        wait_with(&limit, (US, 10_000 * ms, idle), 0, after(30 * ms));
        assert_eq!(limit.get(), 10 * ms);
    }

    /// The spin goes past `spin` only while a core is idle, and stops when the gate closes.
    #[test]
    fn a_long_spin_needs_an_idle_core_and_an_open_gate() {
        let long = Duration::from_secs(60);
        let (slept, wait) = (AtomicBool::new(false), Duration::from_secs(20));
        // No idle core: asleep after the 1 µs spin, whatever the bound.
        let busy: fn(u32) -> bool = |_| false;
        wait_with(
            &SpinLimit::new(long),
            (US, long, busy),
            1,
            sleeps_within(wait, &slept),
        );
        assert!(slept.load(Ordering::SeqCst));
        // An idle core: still spinning (towards a minute) 50 ms later.
        let idle: fn(u32) -> bool = |_| true;
        let d = Duration::from_millis(50);
        wait_with(
            &SpinLimit::new(long),
            (US, long, idle),
            1,
            sleeps_within(d, &slept),
        );
        assert!(!slept.load(Ordering::SeqCst));
        // The gate closes while it spins on: it goes to sleep.
        wait_with(&SpinLimit::new(long), (US, long, idle), 1, |w| {
            std::thread::sleep(Duration::from_millis(20));
            w.gate.store(0, Ordering::SeqCst);
            sleeps_within(wait, &slept)(w);
        });
        assert!(slept.load(Ordering::SeqCst));
    }

    /// Every range of a payload in pieces is visited as exactly the bytes of that range of
    /// the concatenation, at their offsets, and nothing outside it (a byte past the range
    /// would land past a chunk, at worst in the next mailbox).
    #[test]
    fn a_range_of_pieces_is_that_range_of_their_concatenation() {
        let whole: Vec<u8> = (0..23u8).collect();
        let cuts = [0, 0, 1, 4, 4, 9, 16, 23];
        let pieces: Vec<&[u8]> = cuts.windows(2).map(|w| &whole[w[0]..w[1]]).collect();
        for p in [Payload::pieces(&pieces), Payload::Whole(&whole)] {
            assert_eq!(p.len(), whole.len());
            assert_eq!(p.to_vec(), whole);
            for start in 0..=whole.len() {
                for n in 0..=whole.len() - start {
                    let mut got = vec![None; n];
                    p.each_in(start, n, |at, bytes| {
                        for (i, &b) in bytes.iter().enumerate() {
                            assert!(got[at + i].replace(b).is_none(), "written twice");
                        }
                    });
                    let want: Vec<_> = whole[start..start + n].iter().copied().map(Some).collect();
                    assert_eq!(got, want, "start {start}, n {n}");
                }
            }
        }
    }
}
