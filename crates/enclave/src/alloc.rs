//! The enclave's allocator as a parameter.
//!
//! An SGX enclave cannot call the host's `malloc`: it carries its own heap, sized when the
//! enclave is built, and its own allocator. Open Enclave's and the Intel SDK's default was
//! dlmalloc behind one global lock in a small heap, and that lock is why the X.509
//! benchmark's throughput *fell* as threads were added. To reproduce that cause, a binary
//! that runs enclave services installs [`EnclaveAlloc`] as its global allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: enclave::alloc::EnclaveAlloc = enclave::alloc::EnclaveAlloc;
//! ```
//!
//! It starts in [`Mode::System`] and stays there in the host: every call goes straight to
//! [`std::alloc::System`] after one well-predicted branch (deallocation: one range check).
//! An enclave service may switch its enclave process to [`Mode::SingleLock`] with
//! [`use_single_lock`]: new allocations then come from a fixed-capacity heap (a first-fit,
//! coalescing free list, [`linked_list_allocator::Heap`]) behind one global
//! [`std::sync::Mutex`], as in those SDKs.
//!
//! # Exhaustion is an error, not a crash
//!
//! A global allocator cannot return an error (a null pointer aborts the process), so when
//! the bounded heap cannot serve a request, the request is served from the system allocator
//! and counted as an *over-budget event* ([`over_budget_events`]). A service checks that
//! counter after each unit of work and fails the call with a typed error when it moved: the
//! work completed, but it needed more than the configured heap, which a real enclave would
//! not have survived. The counter is process-wide, so one thread's exhaustion fails the
//! work of every thread that checks it during that time.
//!
//! # What the parameter governs
//!
//! Every allocation made through Rust's global allocator in the enclave process, and, where
//! [`route_aws_lc`] succeeded (the enclave process calls it at start-up), every allocation of
//! aws-lc's C code (`OPENSSL_malloc`), which otherwise goes to libc's `malloc`. Other C code
//! (libc itself, e.g. `stdio` or thread start-up) still allocates from libc.
//! [`stats`] splits the bounded heap's allocations by origin.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use linked_list_allocator::Heap;

/// The heap of a single-lock enclave when none is given: 2 MiB, as the original's enclave.
pub const DEFAULT_HEAP: usize = 2 << 20;

/// The smallest bounded heap accepted.
pub const MIN_HEAP: usize = 4096;

/// Where new allocations come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The system allocator (glibc `malloc`): per-thread arenas, no global lock.
    System,
    /// A fixed-capacity heap behind one global lock.
    SingleLock,
}

impl Mode {
    /// The name used in records and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::System => "system",
            Mode::SingleLock => "single-lock",
        }
    }

    /// Parses [`Mode::name`].
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "system" => Some(Mode::System),
            "single-lock" => Some(Mode::SingleLock),
            _ => None,
        }
    }
}

/// Why the allocator could not be switched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The requested capacity is too small or not representable.
    #[error("heap capacity {0} bytes is invalid (at least {MIN_HEAP} bytes)")]
    Capacity(usize),
    /// The heap's region could not be reserved from the system.
    #[error("could not reserve a {0}-byte heap")]
    Reserve(usize),
    /// A heap of another size still holds live allocations.
    #[error("a {existing}-byte heap still holds {live} bytes; cannot resize it to {requested}")]
    Busy {
        /// Capacity of the current heap.
        existing: usize,
        /// Bytes still allocated from it.
        live: usize,
        /// Capacity asked for.
        requested: usize,
    },
    /// The heap's region is reserved once per process, at the first switch; a later heap
    /// may not be larger.
    #[error("the heap's region was reserved at {reserved} bytes; cannot grow it to {requested}")]
    Reserved {
        /// Bytes reserved.
        reserved: usize,
        /// Capacity asked for.
        requested: usize,
    },
    /// This binary's global allocator is not [`EnclaveAlloc`], so switching has no effect.
    #[error(
        "the global allocator is not enclave::alloc::EnclaveAlloc; add it with #[global_allocator]"
    )]
    NotInstalled,
}

/// Counters of the bounded heap (all zero until one was set up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Capacity of the bounded heap, in bytes (0: none).
    pub capacity: usize,
    /// Bytes currently allocated from it (including the allocator's rounding).
    pub in_use: usize,
    /// Most bytes allocated from it at once.
    pub peak: usize,
    /// Allocations it served through Rust's global allocator.
    pub rust_allocs: u64,
    /// Allocations it served for aws-lc's C code (through [`route_aws_lc`]).
    pub c_allocs: u64,
    /// Deallocations it took back.
    pub frees: u64,
    /// Requests it could not serve (served by the system allocator instead).
    pub over_budget: u64,
    /// Acquisitions of its lock that found it held by another thread (and waited).
    pub contended: u64,
}

/// The switchable global allocator. Install it with `#[global_allocator]` in every binary
/// that runs enclave services (the sandbox re-executes that binary as the enclave).
pub struct EnclaveAlloc;

/// The current mode, as a `u8` (0 system, 1 single lock): read on every allocation.
static MODE: AtomicU8 = AtomicU8::new(0);
/// Address range of the bounded heap's region (`len` 0: none), read on every deallocation;
/// set once per process and never changed.
static HEAP_BASE: AtomicUsize = AtomicUsize::new(0);
static HEAP_LEN: AtomicUsize = AtomicUsize::new(0);
/// Requests the bounded heap could not serve; read by services after each unit of work.
static OVER_BUDGET: AtomicU64 = AtomicU64::new(0);
/// Whether aws-lc's allocations go through the global allocator.
static AWS_LC_ROUTED: AtomicBool = AtomicBool::new(false);

/// The single global lock and the heap it guards.
static HEAP: Mutex<Bounded> = Mutex::new(Bounded::empty());

/// The bounded heap with its counters; one instance lives behind [`HEAP`], tests make
/// their own.
pub(crate) struct Bounded {
    heap: Heap,
    capacity: usize,
    peak: usize,
    rust_allocs: u64,
    c_allocs: u64,
    frees: u64,
    contended: u64,
}

/// Who asked for memory.
#[derive(Clone, Copy)]
pub(crate) enum Origin {
    Rust,
    C,
}

impl Bounded {
    const fn empty() -> Self {
        Bounded {
            heap: Heap::empty(),
            capacity: 0,
            peak: 0,
            rust_allocs: 0,
            c_allocs: 0,
            frees: 0,
            contended: 0,
        }
    }

    /// Takes `region` as the heap.
    ///
    /// # Safety
    /// `region` must be valid for reads and writes for `capacity` bytes, aligned to 16, used
    /// by nothing else, and outlive every allocation made from this heap.
    unsafe fn init(&mut self, region: *mut u8, capacity: usize) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.heap.init(region, capacity) };
        self.capacity = capacity;
        self.peak = 0;
    }

    /// An allocation, or `None` when the heap cannot serve it.
    pub(crate) fn alloc(&mut self, layout: Layout, origin: Origin) -> Option<NonNull<u8>> {
        if self.capacity == 0 {
            return None;
        }
        let p = self.heap.allocate_first_fit(layout).ok()?;
        match origin {
            Origin::Rust => self.rust_allocs += 1,
            Origin::C => self.c_allocs += 1,
        }
        self.peak = self.peak.max(self.heap.used());
        Some(p)
    }

    /// Frees an allocation of this heap.
    ///
    /// # Safety
    /// `ptr` must have come from [`Bounded::alloc`] on this heap with the same `layout`, and
    /// not been freed since.
    pub(crate) unsafe fn dealloc(&mut self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.heap.deallocate(ptr, layout) };
        self.frees += 1;
    }

    fn stats(&self) -> HeapStats {
        HeapStats {
            capacity: self.capacity,
            in_use: self.heap.used(),
            peak: self.peak,
            rust_allocs: self.rust_allocs,
            c_allocs: self.c_allocs,
            frees: self.frees,
            over_budget: OVER_BUDGET.load(Ordering::Relaxed),
            contended: self.contended,
        }
    }
}

/// Locks the heap. Nothing panics while holding the lock, so poisoning cannot happen; if it
/// somehow did, the heap's state is still consistent (every operation on it is complete or
/// not begun), so the guard is taken anyway.
fn lock() -> MutexGuard<'static, Bounded> {
    HEAP.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks the heap for an allocation or a free, counting the acquisitions that had to wait.
fn lock_counting() -> MutexGuard<'static, Bounded> {
    match HEAP.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            let mut g = lock();
            g.contended += 1;
            g
        }
    }
}

#[inline(always)]
fn in_heap(ptr: *mut u8) -> bool {
    // With no heap, `HEAP_LEN` is 0 and the comparison is always false. The length is
    // loaded first (acquire, a plain load on x86-64): once it is non-zero, the base is set.
    let len = HEAP_LEN.load(Ordering::Acquire);
    (ptr as usize).wrapping_sub(HEAP_BASE.load(Ordering::Relaxed)) < len
}

/// The slow path of an allocation in single-lock mode.
#[cold]
#[inline(never)]
fn alloc_bounded(layout: Layout, origin: Origin) -> *mut u8 {
    if let Some(p) = lock_counting().alloc(layout, origin) {
        return p.as_ptr();
    }
    OVER_BUDGET.fetch_add(1, Ordering::Relaxed);
    // SAFETY: `layout` has a non-zero size (GlobalAlloc's contract, and `c_malloc` never
    // asks for zero bytes).
    unsafe { System.alloc(layout) }
}

/// Frees memory of the bounded heap.
///
/// # Safety
/// `ptr` lies in the heap's region, came from it with `layout` and was not freed since.
#[cold]
#[inline(never)]
unsafe fn dealloc_bounded(ptr: *mut u8, layout: Layout) {
    if let Some(p) = NonNull::new(ptr) {
        // SAFETY: forwarded from the caller's contract; the region is only ever handed out
        // by the heap behind this lock.
        unsafe { lock_counting().dealloc(p, layout) };
    }
}

// SAFETY: every allocation is served either by `System` (a valid global allocator) or by the
// bounded heap, which hands out disjoint, suitably aligned blocks of its own region (owned
// for the life of the process once set up) and never panics; `dealloc` routes a pointer back
// to whichever served it, by address: the region is disjoint from anything `System` returns.
unsafe impl GlobalAlloc for EnclaveAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if MODE.load(Ordering::Relaxed) == 0 {
            // SAFETY: the caller's contract (non-zero size) is System's.
            return unsafe { System.alloc(layout) };
        }
        alloc_bounded(layout, Origin::Rust)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if MODE.load(Ordering::Relaxed) == 0 {
            // SAFETY: as in `alloc`.
            return unsafe { System.alloc_zeroed(layout) };
        }
        let p = alloc_bounded(layout, Origin::Rust);
        if !p.is_null() {
            // SAFETY: `p` is a fresh allocation of `layout.size()` bytes.
            unsafe { p.write_bytes(0, layout.size()) };
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !in_heap(ptr) {
            // SAFETY: a pointer outside the region came from `System` with this layout.
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: a pointer inside the region came from the bounded heap with this layout.
        unsafe { dealloc_bounded(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if MODE.load(Ordering::Relaxed) == 0 && !in_heap(ptr) {
            // SAFETY: the caller's contract is System's, and `ptr` came from System.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller guarantees `new_size` rounded up to the alignment fits `isize`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_layout` has a non-zero size (the caller's contract).
        let p = unsafe { self.alloc(new_layout) };
        if !p.is_null() {
            // SAFETY: both blocks are valid for the smaller size and do not overlap (`p` is
            // a fresh allocation); `ptr` was allocated with `layout` and is freed once.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        p
    }
}

/// The mode new allocations use.
pub fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        0 => Mode::System,
        _ => Mode::SingleLock,
    }
}

/// Switches new allocations to a bounded heap of `capacity` bytes behind one global lock.
/// The heap's region is reserved from the system at the first call and kept for the life of
/// the process (so that the address check routing frees is never stale); calling again with
/// the same capacity keeps the heap, another capacity (up to the reserved size) starts a new
/// heap over the region when the current one holds nothing. Fails with
/// [`AllocError::NotInstalled`] (and switches back) when [`EnclaveAlloc`] is not this
/// binary's global allocator.
pub fn use_single_lock(capacity: usize) -> Result<(), AllocError> {
    let capacity = capacity & !15;
    if capacity < MIN_HEAP || capacity > isize::MAX as usize / 2 {
        return Err(AllocError::Capacity(capacity));
    }
    {
        let mut heap = lock();
        if heap.capacity != capacity {
            let live = heap.heap.used();
            if heap.capacity != 0 && live > 0 {
                return Err(AllocError::Busy {
                    existing: heap.capacity,
                    live,
                    requested: capacity,
                });
            }
            let reserved = HEAP_LEN.load(Ordering::Acquire);
            let region = if reserved == 0 {
                let layout = Layout::from_size_align(capacity, 4096)
                    .map_err(|_| AllocError::Capacity(capacity))?;
                // SAFETY: `layout` has a non-zero size (checked above).
                let region = unsafe { System.alloc(layout) };
                if region.is_null() {
                    return Err(AllocError::Reserve(capacity));
                }
                // Published once for the life of the process, base before length: a reader
                // that sees the length (acquire) sees the base. The region is never freed,
                // so nothing the system allocator returns can ever fall inside it.
                HEAP_BASE.store(region as usize, Ordering::Relaxed);
                HEAP_LEN.store(capacity, Ordering::Release);
                region
            } else if capacity <= reserved {
                HEAP_BASE.load(Ordering::Relaxed) as *mut u8
            } else {
                return Err(AllocError::Reserved {
                    reserved,
                    requested: capacity,
                });
            };
            let old = std::mem::replace(&mut *heap, Bounded::empty());
            // SAFETY: `region` is the process's reserved heap region, 4096-aligned, at least
            // `capacity` bytes, never freed, and used by nothing else: the previous heap over
            // it holds no live allocation (checked above) and is dropped here.
            unsafe { heap.init(region, capacity) };
            heap.rust_allocs = old.rust_allocs;
            heap.c_allocs = old.c_allocs;
            heap.frees = old.frees;
            heap.contended = old.contended;
        }
    }
    MODE.store(1, Ordering::SeqCst);
    // Prove that the switch took effect: this allocation must come from the heap.
    let probe = std::hint::black_box(Box::new(0u64));
    let served = in_heap(&*probe as *const u64 as *mut u8);
    drop(probe);
    if !served {
        MODE.store(0, Ordering::SeqCst);
        return Err(AllocError::NotInstalled);
    }
    Ok(())
}

/// Switches new allocations back to the system allocator. Memory of the bounded heap stays
/// valid and is returned to it when freed.
pub fn use_system() {
    MODE.store(0, Ordering::SeqCst);
}

/// Requests the bounded heap could not serve since the process started. Cheap: services
/// read it after each unit of work.
#[inline]
pub fn over_budget_events() -> u64 {
    OVER_BUDGET.load(Ordering::Relaxed)
}

/// The bounded heap's counters.
pub fn stats() -> HeapStats {
    lock().stats()
}

/// Whether aws-lc's C allocations go through the global allocator in this process.
pub fn aws_lc_routed() -> bool {
    AWS_LC_ROUTED.load(Ordering::Relaxed)
}

/// Size of the header in front of each C allocation: its size, padded to keep 16-byte
/// alignment (what `malloc` guarantees on x86-64).
const C_HEADER: usize = 16;

fn c_layout(size: usize) -> Option<Layout> {
    let total = size.checked_add(C_HEADER)?;
    Layout::from_size_align(total, C_HEADER).ok()
}

/// Allocates for C as [`EnclaveAlloc`] would (the system allocator, or the bounded heap),
/// with a size header.
fn c_malloc(size: usize) -> *mut u8 {
    let Some(layout) = c_layout(size) else {
        return std::ptr::null_mut();
    };
    let p = if MODE.load(Ordering::Relaxed) == 0 {
        // SAFETY: `layout` has a non-zero size (at least the header).
        unsafe { System.alloc(layout) }
    } else {
        alloc_bounded(layout, Origin::C)
    };
    if p.is_null() {
        return p;
    }
    // SAFETY: `p` is valid for `C_HEADER + size` bytes and 16-aligned.
    unsafe {
        p.cast::<usize>().write(size);
        p.add(C_HEADER)
    }
}

/// Frees a [`c_malloc`] block, wiping it first (as aws-lc's own `OPENSSL_free` does: C
/// allocations hold key material).
///
/// # Safety
/// `ptr` is null or came from [`c_malloc`] and was not freed since.
unsafe fn c_free(ptr: *mut u8) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: `ptr` came from `c_malloc`, so the header sits `C_HEADER` bytes before it.
    let (base, size) = unsafe {
        let base = ptr.sub(C_HEADER);
        (base, base.cast::<usize>().read())
    };
    let Some(layout) = c_layout(size) else {
        return;
    };
    // SAFETY: the block is valid for `layout.size()` bytes; aws-lc's cleanse does not
    // allocate.
    unsafe { aws_lc_sys::OPENSSL_cleanse(base.cast(), layout.size()) };
    if in_heap(base) {
        // SAFETY: a block inside the region came from the bounded heap with `layout`.
        unsafe { dealloc_bounded(base, layout) }
    } else {
        // SAFETY: outside the region, `c_malloc` served it from `System` with `layout`.
        unsafe { System.dealloc(base, layout) }
    }
}

unsafe extern "C" fn aws_lc_malloc(
    size: usize,
    _file: *const std::ffi::c_char,
    _line: std::ffi::c_int,
) -> *mut std::ffi::c_void {
    c_malloc(size).cast()
}

unsafe extern "C" fn aws_lc_free(
    ptr: *mut std::ffi::c_void,
    _file: *const std::ffi::c_char,
    _line: std::ffi::c_int,
) {
    // SAFETY: aws-lc passes only pointers its `malloc_impl`/`realloc_impl` returned.
    unsafe { c_free(ptr.cast()) }
}

unsafe extern "C" fn aws_lc_realloc(
    ptr: *mut std::ffi::c_void,
    size: usize,
    _file: *const std::ffi::c_char,
    _line: std::ffi::c_int,
) -> *mut std::ffi::c_void {
    let ptr = ptr.cast::<u8>();
    let new = c_malloc(size);
    if ptr.is_null() || new.is_null() {
        return new.cast();
    }
    // SAFETY: `ptr` came from `c_malloc` (aws-lc's contract), so its header holds its size;
    // the blocks are distinct; `ptr` is freed once, after the copy.
    unsafe {
        let old = ptr.sub(C_HEADER).cast::<usize>().read();
        std::ptr::copy_nonoverlapping(ptr, new, old.min(size));
        c_free(ptr);
    }
    new.cast()
}

/// Makes aws-lc's C code allocate through Rust's global allocator (and so through the
/// enclave's allocator), as all code inside an SGX enclave allocates from the enclave's
/// heap. aws-lc accepts this once per process and only before its first allocation, so the
/// enclave process calls it first thing at start-up; returns whether aws-lc accepted.
pub fn route_aws_lc() -> bool {
    // SAFETY: the three functions keep the contract aws-lc documents for its memory hooks
    // (malloc/realloc/free semantics, never called with foreign pointers, no calls back into
    // aws-lc except the allocation-free `OPENSSL_cleanse`); aws-lc refuses (returns 0) when
    // hooks are already set.
    let ok = unsafe {
        aws_lc_sys::CRYPTO_set_mem_functions(
            Some(aws_lc_malloc),
            Some(aws_lc_realloc),
            Some(aws_lc_free),
        )
    } == 1;
    if ok {
        AWS_LC_ROUTED.store(true, Ordering::Relaxed);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A bounded heap over a leaked region of `cap` bytes (tests only).
    fn heap(cap: usize) -> Bounded {
        let region: &'static mut [u8] = Vec::leak(vec![0u8; cap + 16]);
        let off = region.as_ptr().align_offset(16);
        let mut b = Bounded::empty();
        // SAFETY: the leaked region lives forever, is used by nothing else and is aligned
        // to 16 at `off`, with `cap` bytes after it.
        unsafe { b.init(region.as_mut_ptr().add(off), cap) };
        b
    }

    #[test]
    fn modes_parse_and_name() {
        for m in [Mode::System, Mode::SingleLock] {
            assert_eq!(Mode::parse(m.name()), Some(m));
        }
        assert_eq!(Mode::parse("dlmalloc"), None);
    }

    #[test]
    fn bounded_heap_exhausts_and_recovers() {
        let mut h = heap(4096);
        let l = Layout::from_size_align(1024, 8).unwrap();
        let mut got = Vec::new();
        while let Some(p) = h.alloc(l, Origin::Rust) {
            got.push(p);
            assert!(got.len() <= 4, "a 4 KiB heap served more than 4 KiB");
        }
        assert!(!got.is_empty());
        assert!(h.alloc(l, Origin::C).is_none());
        for p in got.drain(..) {
            // SAFETY: each came from `h.alloc` with `l`.
            unsafe { h.dealloc(p, l) };
        }
        let s = h.stats();
        assert_eq!(s.in_use, 0);
        assert_eq!(s.frees, s.rust_allocs);
        assert!(s.peak >= 3 * 1024);
        // After freeing everything the whole heap coalesces again.
        assert!(
            h.alloc(Layout::from_size_align(4000, 16).unwrap(), Origin::C)
                .is_some()
        );
        assert_eq!(h.stats().c_allocs, 1);
    }

    proptest! {
        /// Random allocations and frees against a plain model: blocks are aligned, never
        /// overlap, keep their contents, and everything freed is reusable.
        #[test]
        fn bounded_heap_matches_a_model(ops in prop::collection::vec((0usize..3, 1usize..600, 0u32..5, any::<u8>()), 1..300)) {
            let mut h = heap(64 << 10);
            let mut live: Vec<(NonNull<u8>, Layout, u8)> = Vec::new();
            for (op, size, align_pow, fill) in ops {
                if op < 2 || live.is_empty() {
                    let l = Layout::from_size_align(size, 1 << align_pow).unwrap();
                    if let Some(p) = h.alloc(l, Origin::Rust) {
                        prop_assert_eq!(p.as_ptr() as usize % l.align(), 0);
                        for (q, ql, _) in &live {
                            let (a, b) = (p.as_ptr() as usize, q.as_ptr() as usize);
                            prop_assert!(a + l.size() <= b || b + ql.size() <= a, "overlap");
                        }
                        // SAFETY: fresh block of `size` bytes.
                        unsafe { p.as_ptr().write_bytes(fill, size) };
                        live.push((p, l, fill));
                    }
                } else {
                    let (p, l, fill) = live.swap_remove(size % live.len());
                    // SAFETY: the block is live and `size` bytes long.
                    let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), l.size()) };
                    prop_assert!(bytes.iter().all(|&b| b == fill));
                    // SAFETY: came from `h.alloc` with `l`, freed once.
                    unsafe { h.dealloc(p, l) };
                }
            }
            for (p, l, _) in live.drain(..) {
                // SAFETY: as above.
                unsafe { h.dealloc(p, l) };
            }
            prop_assert_eq!(h.stats().in_use, 0);
            prop_assert!(h.alloc(Layout::from_size_align(60 << 10, 16).unwrap(), Origin::Rust).is_some());
        }
    }

    #[test]
    fn switching_without_the_global_allocator_is_refused() {
        // The unit-test binary keeps Rust's default global allocator.
        assert_eq!(use_single_lock(1 << 16), Err(AllocError::NotInstalled));
        assert_eq!(mode(), Mode::System);
        assert_eq!(use_single_lock(100), Err(AllocError::Capacity(96)));
    }
}
