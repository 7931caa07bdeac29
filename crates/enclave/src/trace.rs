//! Always-on tracing of boundary crossings.
//!
//! Per direction (ecall/ocall) and call id: the number of calls, how many of them were
//! timed, the summed total / inside / transition time of the timed ones, an HDR histogram
//! of their total latency, and switchless hits and misses.
//!
//! Cost: counters live in 8 stripes (a thread sticks to one), so threads do not share
//! cache lines; ids below 256 are a direct index, larger ids go through a map. On the
//! sandbox backend every call is timed (two clock reads against a microsecond-scale call).
//! On the native backend a clock read costs more than the call itself, so 1 call in
//! [`NATIVE_SAMPLE`] is timed and the rest are only counted: means and percentiles come from
//! the timed calls, counts from all.
//!
//! *Inside* is the time the service ran (for ecalls, measured in the enclave and carried
//! back in the return header; for ocalls, the host handler's time). *Transition* is the
//! caller's total minus inside: copies, handoffs, wake-ups and the transition-cost model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;

/// On the native backend, one call in this many is timed.
pub const NATIVE_SAMPLE: u64 = 64;

const STRIPES: usize = 8;
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

impl IdStats {
    /// Counts a call; returns its sequence number in this stripe.
    pub fn count(&self) -> u64 {
        self.count.fetch_add(1, Ordering::Relaxed)
    }
    pub fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }
    pub fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }
    /// Records a timed call.
    pub fn timed(&self, total_ns: u64, inside_ns: u64) {
        self.timed.fetch_add(1, Ordering::Relaxed);
        self.total_ns.fetch_add(total_ns, Ordering::Relaxed);
        self.inside_ns
            .fetch_add(inside_ns.min(total_ns), Ordering::Relaxed);
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

impl std::ops::Deref for StatsRef<'_> {
    type Target = IdStats;
    fn deref(&self) -> &IdStats {
        match self {
            StatsRef::Direct(s) => s,
            StatsRef::Shared(s) => s,
        }
    }
}

struct Stripe {
    direct: Box<[IdStats]>,
    other: Mutex<HashMap<u32, Arc<IdStats>>>,
}

/// One id's stripes: (id, shared entries for large ids, direct entries).
type IdParts<'a> = (u32, Vec<Arc<IdStats>>, Vec<&'a IdStats>);

struct Table {
    stripes: Box<[Stripe]>,
}

impl Table {
    fn new() -> Self {
        Table {
            stripes: (0..STRIPES)
                .map(|_| Stripe {
                    direct: (0..DIRECT_IDS).map(|_| IdStats::default()).collect(),
                    other: Mutex::default(),
                })
                .collect(),
        }
    }

    fn get(&self, id: u32) -> StatsRef<'_> {
        let stripe = &self.stripes[stripe_index()];
        if (id as usize) < DIRECT_IDS {
            return StatsRef::Direct(&stripe.direct[id as usize]);
        }
        let mut m = match stripe.other.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        StatsRef::Shared(m.entry(id).or_default().clone())
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

/// A small per-thread number (0, 1, 2, ... in order of first use).
pub(crate) fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static N: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    N.with(|s| *s)
}

fn stripe_index() -> usize {
    thread_number() % STRIPES
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

    pub fn ecall(&self, id: u32) -> impl std::ops::Deref<Target = IdStats> + '_ {
        self.ecalls.get(id)
    }

    pub fn ocall(&self, id: u32) -> impl std::ops::Deref<Target = IdStats> + '_ {
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
