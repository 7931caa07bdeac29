//! Always-on tracing of boundary crossings.
//!
//! Per direction (ecall/ocall) and call id: the number of calls, how many of them were
//! timed, the summed total / inside / transition time of the timed ones, an HDR histogram
//! of their total latency, and switchless hits and misses.
//!
//! Cost: counters live in stripes, so threads do not share cache lines; ids below 256 are a
//! direct index, larger ids go through a map. Each live thread holds a small number,
//! unique among live threads and recycled when a thread exits. The first [`OWNED`] numbers
//! each own a stripe outright: only that thread ever writes it, so its counters are bumped
//! with a plain load and store instead of a locked read-modify-write (which is most of the
//! cost of a native call). Threads beyond those share the remaining stripes, with atomic
//! adds. A stripe's counters only grow; a snapshot sums them with relaxed loads.
//!
//! On the sandbox backend every call is timed (two clock reads against a
//! microsecond-scale call). On the native backend a clock read costs more than the call
//! itself, so 1 call in [`NATIVE_SAMPLE`] is timed (the first of each thread, then every
//! 64th) and the rest are only counted: means and percentiles come from the timed calls,
//! counts from all.
//!
//! *Inside* is the time the service ran (for ecalls, measured in the enclave and carried
//! back in the return header; for ocalls, the host handler's time). *Transition* is the
//! caller's total minus inside: copies, handoffs, wake-ups and the transition-cost model.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;

/// On the native backend, one call in this many is timed.
pub const NATIVE_SAMPLE: u64 = 64;

/// Stripes owned by one thread each (threads numbered `0..OWNED`).
const OWNED: usize = 8;
/// Stripes shared, with atomic adds, by the threads numbered `OWNED..`.
const SHARED: usize = 4;
const STRIPES: usize = OWNED + SHARED;
const DIRECT_IDS: usize = 256;
/// Histogram range: 1 ns .. 100 s, 2 significant digits.
const HIST_MAX: u64 = 100_000_000_000;

/// Which way a call crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Host into enclave.
    Ecall,
    /// Enclave out to host.
    Ocall,
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX, 2).expect("constant histogram bounds are valid")
}

#[derive(Default)]
pub(crate) struct IdStats {
    count: AtomicU64,
    timed: AtomicU64,
    total_ns: AtomicU64,
    inside_ns: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    hist: Mutex<Option<Box<Histogram<u64>>>>,
}

/// Adds `v` to a counter; returns the old value. `owned`: only this thread writes the
/// counter, so a plain load and store suffice (no locked instruction).
#[inline(always)]
fn add(a: &AtomicU64, v: u64, owned: bool) -> u64 {
    if owned {
        let old = a.load(Ordering::Relaxed);
        a.store(old.wrapping_add(v), Ordering::Relaxed);
        old
    } else {
        a.fetch_add(v, Ordering::Relaxed)
    }
}

impl IdStats {
    fn record(&self, owned: bool, total_ns: u64, inside_ns: u64) {
        add(&self.timed, 1, owned);
        add(&self.total_ns, total_ns, owned);
        add(&self.inside_ns, inside_ns.min(total_ns), owned);
        if let Ok(mut h) = self.hist.lock() {
            let h = h.get_or_insert_with(|| Box::new(new_hist()));
            h.saturating_record(total_ns.max(1));
        }
    }
}

enum StatsRef<'a> {
    Direct(&'a IdStats),
    Shared(Arc<IdStats>),
}

/// One id's counters in the calling thread's stripe.
pub(crate) struct Stats<'a> {
    s: StatsRef<'a>,
    owned: bool,
}

impl Stats<'_> {
    #[inline(always)]
    fn get(&self) -> &IdStats {
        match &self.s {
            StatsRef::Direct(s) => s,
            StatsRef::Shared(s) => s,
        }
    }
    /// Counts a call; returns its sequence number in this stripe (0 for the first).
    #[inline(always)]
    pub fn count(&self) -> u64 {
        add(&self.get().count, 1, self.owned)
    }
    pub fn hit(&self) {
        add(&self.get().hits, 1, self.owned);
    }
    pub fn miss(&self) {
        add(&self.get().misses, 1, self.owned);
    }
    /// Records a timed call.
    pub fn timed(&self, total_ns: u64, inside_ns: u64) {
        self.get().record(self.owned, total_ns, inside_ns);
    }
}

struct Stripe {
    direct: Box<[IdStats; DIRECT_IDS]>,
    other: Mutex<HashMap<u32, Arc<IdStats>>>,
}

impl Stripe {
    #[cold]
    fn shared(&self, id: u32) -> Arc<IdStats> {
        let mut m = match self.other.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        m.entry(id).or_default().clone()
    }
}

/// One id's stripes: (id, shared entries for large ids, direct entries).
type IdParts<'a> = (u32, Vec<Arc<IdStats>>, Vec<&'a IdStats>);

struct Table {
    stripes: [Stripe; STRIPES],
}

impl Table {
    fn new() -> Self {
        Table {
            stripes: std::array::from_fn(|_| Stripe {
                direct: Box::new(std::array::from_fn(|_| IdStats::default())),
                other: Mutex::default(),
            }),
        }
    }

    #[inline(always)]
    fn get(&self, id: u32) -> Stats<'_> {
        let (index, owned) = stripe();
        let stripe = &self.stripes[index];
        if (id as usize) < DIRECT_IDS {
            return Stats {
                s: StatsRef::Direct(&stripe.direct[id as usize]),
                owned,
            };
        }
        Stats {
            s: StatsRef::Shared(stripe.shared(id)),
            owned,
        }
    }

    fn all(&self) -> Vec<IdParts<'_>> {
        let mut out: Vec<IdParts<'_>> = Vec::new();
        for id in 0..DIRECT_IDS {
            let parts: Vec<&IdStats> = self.stripes.iter().map(|s| &s.direct[id]).collect();
            if parts.iter().any(|p| p.count.load(Ordering::Relaxed) > 0) {
                out.push((id as u32, Vec::new(), parts));
            }
        }
        let mut big: HashMap<u32, Vec<Arc<IdStats>>> = HashMap::new();
        for s in self.stripes.iter() {
            let m = match s.other.lock() {
                Ok(m) => m,
                Err(p) => p.into_inner(),
            };
            for (id, st) in m.iter() {
                big.entry(*id).or_default().push(st.clone());
            }
        }
        let mut big: Vec<_> = big.into_iter().collect();
        big.sort_by_key(|(id, _)| *id);
        out.extend(big.into_iter().map(|(id, v)| (id, v, Vec::new())));
        out
    }
}

/// Thread numbers: the lowest free one goes to the next thread that asks.
struct Numbers {
    next: usize,
    free: Vec<usize>,
}

static NUMBERS: Mutex<Numbers> = Mutex::new(Numbers {
    next: 0,
    free: Vec::new(),
});

/// Not yet numbered.
const UNSET: usize = usize::MAX;
/// Numbered and exited (a destructor of another thread-local traced a call after ours
/// ran): a shared stripe.
const GONE: usize = usize::MAX - 1;

thread_local! {
    static NUMBER: Cell<usize> = const { Cell::new(UNSET) };
    static RELEASE: Release = const { Release };
}

/// Returns the thread's number when the thread exits.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let n = NUMBER.with(|c| c.replace(GONE));
        if n < GONE {
            let mut ns = match NUMBERS.lock() {
                Ok(m) => m,
                Err(p) => p.into_inner(),
            };
            ns.free.push(n);
        }
    }
}

#[cold]
fn take_number() -> usize {
    // Registering the destructor first: if this thread is already being torn down, it
    // fails and the thread stays unnumbered-but-shared rather than leaking a number.
    if RELEASE.try_with(|_| ()).is_err() {
        NUMBER.with(|c| c.set(GONE));
        return GONE;
    }
    let n = {
        let mut ns = match NUMBERS.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        match ns.free.iter().enumerate().min_by_key(|&(_, &n)| n) {
            Some((i, _)) => ns.free.swap_remove(i),
            None => {
                ns.next += 1;
                ns.next - 1
            }
        }
    };
    NUMBER.with(|c| c.set(n));
    n
}

/// A small per-thread number: unique among live threads, the lowest free one at the
/// thread's first use, given back when it exits.
#[inline(always)]
pub(crate) fn thread_number() -> usize {
    let n = NUMBER.with(Cell::get);
    if n == UNSET { take_number() } else { n }
}

/// The calling thread's stripe, and whether the thread owns it alone.
#[inline(always)]
fn stripe() -> (usize, bool) {
    let n = thread_number();
    if n < OWNED {
        (n, true)
    } else {
        (OWNED + n % SHARED, false)
    }
}

/// Extra per-ocall figures measured inside the enclave (sandbox backend).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EnclaveOcallCounters {
    pub rtt_ns: u64,
    pub hits: u64,
    pub misses: u64,
}

pub(crate) struct Trace {
    ecalls: Table,
    ocalls: Table,
}

impl Trace {
    pub fn new() -> Self {
        Trace {
            ecalls: Table::new(),
            ocalls: Table::new(),
        }
    }

    #[inline(always)]
    pub fn ecall(&self, id: u32) -> Stats<'_> {
        self.ecalls.get(id)
    }

    #[inline(always)]
    pub fn ocall(&self, id: u32) -> Stats<'_> {
        self.ocalls.get(id)
    }

    /// Merges the stripes into a snapshot. `enclave_ocalls` supplies the enclave-side
    /// round trips and switchless counters for ocalls (sandbox only).
    pub fn snapshot(
        &self,
        enclave_ocalls: &dyn Fn(u32) -> Option<EnclaveOcallCounters>,
    ) -> Vec<CallTrace> {
        let mut out = Vec::new();
        for (dir, table) in [
            (Direction::Ecall, &self.ecalls),
            (Direction::Ocall, &self.ocalls),
        ] {
            for (id, shared, direct) in table.all() {
                let parts: Vec<&IdStats> = direct
                    .into_iter()
                    .chain(shared.iter().map(|a| &**a))
                    .collect();
                let sum = |f: fn(&IdStats) -> &AtomicU64| {
                    parts
                        .iter()
                        .map(|p| f(p).load(Ordering::Relaxed))
                        .sum::<u64>()
                };
                let mut hist = new_hist();
                for p in &parts {
                    if let Ok(h) = p.hist.lock()
                        && let Some(h) = h.as_ref()
                    {
                        let _ = hist.add(&**h);
                    }
                }
                let total_ns = sum(|s| &s.total_ns);
                let inside_ns = sum(|s| &s.inside_ns);
                let mut t = CallTrace {
                    direction: dir,
                    call_id: id,
                    count: sum(|s| &s.count),
                    timed: sum(|s| &s.timed),
                    total_ns,
                    inside_ns,
                    transition_ns: total_ns.saturating_sub(inside_ns),
                    switchless_hits: sum(|s| &s.hits),
                    switchless_misses: sum(|s| &s.misses),
                    latency: hist,
                };
                if dir == Direction::Ocall
                    && let Some(c) = enclave_ocalls(id)
                {
                    // The enclave measured the whole round trip of every ocall; the host
                    // measured its handler. Both cover all calls.
                    t.total_ns = c.rtt_ns.max(t.inside_ns);
                    t.transition_ns = t.total_ns - t.inside_ns;
                    t.switchless_hits = c.hits;
                    t.switchless_misses = c.misses;
                }
                out.push(t);
            }
        }
        out
    }
}

/// One call id's trace. Sums cover the `timed` calls; `count` covers all calls.
#[derive(Debug, Clone)]
pub struct CallTrace {
    /// Ecall or ocall.
    pub direction: Direction,
    /// The call or ocall id.
    pub call_id: u32,
    /// Calls made.
    pub count: u64,
    /// Calls that were timed (all on the sandbox backend, a sample on native).
    pub timed: u64,
    /// Summed caller-observed time of the timed calls.
    pub total_ns: u64,
    /// Summed time inside the callee.
    pub inside_ns: u64,
    /// `total_ns - inside_ns`: the cost of crossing.
    pub transition_ns: u64,
    /// Switchless calls served by a worker.
    pub switchless_hits: u64,
    /// Switchless calls that fell back to a regular call.
    pub switchless_misses: u64,
    /// Latency of the timed calls (total, ns). For sandbox ocalls, the host handler's time.
    pub latency: Histogram<u64>,
}

impl CallTrace {
    fn mean(&self, v: u64) -> f64 {
        if self.timed == 0 {
            0.0
        } else {
            v as f64 / self.timed as f64
        }
    }
    /// Mean caller-observed time per call.
    pub fn mean_total_ns(&self) -> f64 {
        self.mean(self.total_ns)
    }
    /// Mean time inside per call.
    pub fn mean_inside_ns(&self) -> f64 {
        self.mean(self.inside_ns)
    }
    /// Mean transition time per call.
    pub fn mean_transition_ns(&self) -> f64 {
        self.mean(self.transition_ns)
    }
    /// Transition time as a share of total time (0..1): 1 − SGXBox's efficiency.
    pub fn transition_share(&self) -> f64 {
        if self.total_ns == 0 {
            0.0
        } else {
            self.transition_ns as f64 / self.total_ns as f64
        }
    }
    /// Median latency (ns), from the histogram.
    pub fn median_ns(&self) -> u64 {
        self.latency.value_at_quantile(0.5)
    }
    /// 99th-percentile latency (ns).
    pub fn p99_ns(&self) -> u64 {
        self.latency.value_at_quantile(0.99)
    }
}

/// A trace of one enclave, taken by [`crate::Enclave::trace`].
#[derive(Debug, Clone)]
pub struct TraceSnapshot {
    /// `"native"` or `"sandbox"`.
    pub backend: &'static str,
    /// The transition-cost model's name, if one was active.
    pub model: Option<String>,
    /// Wall time since the enclave started (ns).
    pub elapsed_ns: u64,
    /// Per direction and id, sorted.
    pub calls: Vec<CallTrace>,
}

impl TraceSnapshot {
    /// The trace of one call id.
    pub fn get(&self, direction: Direction, call_id: u32) -> Option<&CallTrace> {
        self.calls
            .iter()
            .find(|c| c.direction == direction && c.call_id == call_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ecall_count(t: &Trace, id: u32) -> (u64, u64) {
        let s = t.snapshot(&|_| None);
        let c = s
            .iter()
            .find(|c| c.direction == Direction::Ecall && c.call_id == id)
            .expect("traced");
        (c.count, c.timed)
    }

    #[test]
    fn counts_are_exact_across_owned_and_shared_stripes() {
        let t = Trace::new();
        // More threads than owned stripes, in waves, so numbers are recycled and shared
        // stripes see concurrent adds.
        for _ in 0..3 {
            std::thread::scope(|s| {
                for _ in 0..(OWNED + 2 * SHARED + 1) {
                    s.spawn(|| {
                        for _ in 0..1000 {
                            let st = t.ecall(7);
                            if st.count().is_multiple_of(NATIVE_SAMPLE) {
                                st.timed(10, 5);
                            }
                            t.ecall(300).count();
                        }
                    });
                }
            });
        }
        let threads = 3 * (OWNED + 2 * SHARED + 1) as u64;
        assert_eq!(ecall_count(&t, 7).0, threads * 1000);
        assert_eq!(ecall_count(&t, 300).0, threads * 1000);
        // Each thread times its first call at least.
        assert!(ecall_count(&t, 7).1 >= threads);
    }

    #[test]
    fn live_threads_have_distinct_numbers() {
        let barrier = std::sync::Barrier::new(OWNED + 3);
        let numbers = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..OWNED + 3 {
                s.spawn(|| {
                    let n = thread_number();
                    numbers.lock().unwrap().push(n);
                    // Stay alive until every thread has its number.
                    barrier.wait();
                    assert_eq!(thread_number(), n);
                });
            }
        });
        let mut v = numbers.into_inner().unwrap();
        let len = v.len();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), len);
    }
}
