//! Batching records across flows, off the forwarding path: the `batched` configuration's
//! one crossing for many records.
//!
//! A relay thread hands the encrypted records of one read to the [`Batcher`] as a
//! [`Segment`] (encoded once, into a buffer the batcher hands back for reuse) and goes on
//! forwarding: it does not wait for their verdicts, which are counted into the direction's
//! [`Tally`] when they come. This is the shape of LightBox's etap (CCS 2019): the host's
//! I/O threads fill a queue that the enclave drains, so a record costs no crossing and no
//! wake-up of its own. The queue is drained by flat combining: a submitter that finds
//! nobody draining becomes the drainer and carries the oldest records, up to the bounds
//! ([`BatchLimits`]: records and bytes), in one `reproduce_ssl_context_batch` ecall, then
//! the next, until the queue is empty, or until it has run [`DRAIN_TURN`] batches and
//! another submitter waits to take over. One drainer per shard at a time, and a flow's
//! records always in the same shard, keep each direction's records in order (the
//! enclave's TLS sequence numbers require it).
//!
//! The queue is bounded ([`BatchLimits::max_queued_bytes`]): a submitter that finds it full
//! waits for room, so a slow enclave slows the relay down (back-pressure) instead of
//! letting records pile up or go uninspected. A direction that ends waits until its own
//! records have their verdicts ([`Batcher::finish`]) before the flow closes in the enclave,
//! and [`Batcher::settle`] says when everything submitted so far was inspected, so that a
//! measured round ends when its last record was inspected, not only when it was forwarded.
//!
//! Measured against the synchronous shape it replaced (each submitter waited on a condition
//! variable for its verdicts before forwarding, up to four batches in flight): see
//! `docs/scenario-tls-middlebox.md`. No thread is added and nothing spins.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use enclave::EnclaveBuilder;
use parity_scale_codec::{Compact, Encode};

use super::keys::Direction;
use super::records::ContentType;
use super::service::{
    BatchVerdicts, Client, ClientError, MAX_BATCH_BYTES, MAX_BATCH_RECORDS, MiddleboxError, Verdict,
};

/// Batches a drainer runs before it hands the queue to a submitter that waits for room: no
/// flow's own forwarding is held up for long serving the others.
pub const DRAIN_TURN: usize = 4;

/// How large one batch may grow, and how much may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Records in one ecall (1 ..= [`MAX_BATCH_RECORDS`]).
    pub max_records: usize,
    /// Record bytes in one ecall (at least one maximal record, at most [`MAX_BATCH_BYTES`]).
    pub max_bytes: usize,
    /// Record bytes queued for inspection per shard before submitters wait (at least one
    /// batch).
    pub max_queued_bytes: usize,
    /// Queues, each with its own drainer; a flow's records always go to the same one. More
    /// than one lets several cores decrypt at once.
    pub shards: usize,
}

impl Default for BatchLimits {
    /// 512 records or 1 MiB a batch, whichever comes first (512 one-KiB records, or 64
    /// maximal ones), 4 MiB queued per shard, two shards. Measured on 2 vCPUs against 64
    /// records or 256 KiB and one shard, four alternated quick runs: the median share of
    /// the native middlebox's records/s rose from 66% to 73% at 1 KiB and from 65% to 81%
    /// at 16 KiB (`docs/scenario-tls-middlebox.md`). A crossing's wait for a core is paid
    /// per batch, and two inspection threads keep one batch going while the other waits.
    fn default() -> Self {
        BatchLimits {
            max_records: 512,
            max_bytes: 1 << 20,
            max_queued_bytes: 4 << 20,
            shards: 2,
        }
    }
}

/// The largest TLS record the relay passes on: a header and 2^14 + 2048 bytes.
const LARGEST_RECORD: usize = super::records::HEADER_LEN + (1 << 14) + 2048;

impl BatchLimits {
    /// The most bytes a `reproduce_ssl_context_batch` request within these limits takes
    /// encoded: the records, and per record its flow, direction and length (13 bytes at the
    /// most), and the count.
    pub fn max_request_bytes(&self) -> usize {
        self.max_bytes + 13 * self.max_records + 5
    }

    /// `builder` with switchless request slots that hold a whole batch, as a TCS slot's
    /// area does: a batch posted switchless goes in one piece, not in a chunked
    /// conversation with the worker (the SDK passes a switchless call's buffers by
    /// pointer). No effect without switchless calls.
    pub fn slots_for_batches(&self, builder: EnclaveBuilder) -> EnclaveBuilder {
        builder.pool_area(self.max_request_bytes())
    }

    /// The limits clamped to what the enclave accepts and to at least one record of any
    /// size, so that every record fits in some batch and in the queue.
    pub fn clamped(self) -> Self {
        let max_bytes = self.max_bytes.clamp(LARGEST_RECORD, MAX_BATCH_BYTES);
        BatchLimits {
            max_records: self.max_records.clamp(1, MAX_BATCH_RECORDS),
            max_bytes,
            max_queued_bytes: self.max_queued_bytes.max(max_bytes),
            shards: self.shards.clamp(1, 64),
        }
    }
}

/// What the enclave said of one direction's records, counted as their verdicts come.
#[derive(Debug, Default)]
pub struct Tally {
    app_records: AtomicU64,
    app_bytes: AtomicU64,
    matches: AtomicU64,
    auth_failures: AtomicU64,
    /// Records submitted whose verdicts have not been counted yet.
    pending: AtomicU64,
    /// Other refusals (at most [`MAX_ERRORS`] kept).
    errors: Mutex<Vec<String>>,
}

/// Refusals a tally keeps the text of.
const MAX_ERRORS: usize = 8;

/// Counts taken from a [`Tally`] since the last [`Tally::take`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TallyCounts {
    /// Application-data records decrypted.
    pub app_records: u64,
    /// Their plaintext bytes.
    pub app_bytes: u64,
    /// Pattern matches in them.
    pub matches: u64,
    /// Records that failed authentication.
    pub auth_failures: u64,
    /// Other refusals, or why a whole batch failed.
    pub errors: Vec<String>,
}

impl Tally {
    /// The counts since the last call, reset to zero.
    pub fn take(&self) -> TallyCounts {
        TallyCounts {
            app_records: self.app_records.swap(0, Ordering::AcqRel),
            app_bytes: self.app_bytes.swap(0, Ordering::AcqRel),
            matches: self.matches.swap(0, Ordering::AcqRel),
            auth_failures: self.auth_failures.swap(0, Ordering::AcqRel),
            errors: std::mem::take(&mut *lock(&self.errors)),
        }
    }

    /// Records submitted and not yet inspected.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Acquire)
    }

    fn error(&self, e: String) {
        let mut errors = lock(&self.errors);
        if errors.len() < MAX_ERRORS {
            errors.push(e);
        }
    }

    /// Counts the outcomes `c` of `records` of this direction's records, which stop pending.
    fn count(&self, c: TallyCounts, records: u64) {
        self.app_records.fetch_add(c.app_records, Ordering::Relaxed);
        self.app_bytes.fetch_add(c.app_bytes, Ordering::Relaxed);
        self.matches.fetch_add(c.matches, Ordering::Relaxed);
        self.auth_failures
            .fetch_add(c.auth_failures, Ordering::Relaxed);
        for e in c.errors {
            self.error(e);
        }
        self.pending.fetch_sub(records, Ordering::AcqRel);
    }
}

impl TallyCounts {
    /// Adds `other`'s counts to these.
    fn add(&mut self, other: TallyCounts) {
        self.app_records += other.app_records;
        self.app_bytes += other.app_bytes;
        self.matches += other.matches;
        self.auth_failures += other.auth_failures;
        self.errors.extend(other.errors);
    }

    /// The counts of one record's outcome, however it was inspected (in a batch, or an
    /// ecall of its own): an application-data record's bytes and matches, a failed
    /// authentication, or another refusal's text.
    pub fn of(verdict: Result<Verdict, ClientError>) -> Self {
        let mut c = TallyCounts::default();
        match verdict {
            Ok(v) => {
                if v.content_type == ContentType::ApplicationData.byte() {
                    c.app_records = 1;
                    c.app_bytes = u64::from(v.plaintext_len);
                    c.matches = u64::from(v.matches);
                }
            }
            Err(ClientError::Middlebox(MiddleboxError::Open {
                error: super::keys::OpenError::Authentication,
                ..
            })) => c.auth_failures = 1,
            Err(e) => c.errors.push(e.to_string()),
        }
        c
    }
}

/// Encrypted records of one flow's direction on their way to the enclave, each encoded as
/// a [`RecordIn`](super::service::RecordIn) is in `reproduce_ssl_context_batch`'s request,
/// in a buffer the batcher hands back for the next ones. A record is copied once on the
/// host, from the relay's read into a segment, and from there straight into the ecall's
/// shared area ([`enclave::Enclave::ecall_pieces`]): no record is allocated, and no batch
/// is assembled.
#[derive(Debug)]
pub struct Segment {
    flow: u64,
    direction: Direction,
    bytes: Vec<u8>,
    /// Where each record's encoding ends in `bytes`, and the record's length.
    records: Vec<(usize, usize)>,
    /// Record bytes (headers and fragments, as on the wire): what the batch limits count.
    record_bytes: usize,
}

impl Segment {
    /// An empty segment for the records of `flow` in `direction`.
    pub fn new(flow: u64, direction: Direction) -> Self {
        Segment {
            flow,
            direction,
            bytes: Vec::new(),
            records: Vec::new(),
            record_bytes: 0,
        }
    }

    /// Appends one whole record (header and fragment).
    pub fn push(&mut self, record: &[u8]) {
        (self.flow, self.direction, record).encode_to(&mut self.bytes);
        self.records.push((self.bytes.len(), record.len()));
        self.record_bytes += record.len();
    }

    /// Records in it.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The records' encodings, back to back.
    pub fn encoded(&self) -> &[u8] {
        &self.bytes
    }

    /// Emptied for `flow` and `direction`, its buffer kept.
    fn reuse(mut self, flow: u64, direction: Direction) -> Self {
        self.bytes.clear();
        self.records.clear();
        self.record_bytes = 0;
        self.flow = flow;
        self.direction = direction;
        self
    }

    /// Moves the records from the `k`-th on into a segment of their own.
    fn split_off(&mut self, k: usize) -> Segment {
        let at = match k {
            0 => 0,
            k => self.records[k - 1].0,
        };
        let mut rest = Segment::new(self.flow, self.direction);
        rest.bytes = self.bytes.split_off(at);
        rest.records = self
            .records
            .split_off(k)
            .into_iter()
            .map(|(end, len)| (end - at, len))
            .collect();
        rest.record_bytes = rest.records.iter().map(|&(_, len)| len).sum();
        self.record_bytes -= rest.record_bytes;
        rest
    }
}

/// Emptied segments a shard keeps for reuse; more are dropped.
const SPARE_SEGMENTS: usize = 64;

/// A spare segment's buffer larger than this is not kept (one grown by a long queue).
const SPARE_CAPACITY: usize = 256 << 10;

struct Item {
    tally: Arc<Tally>,
    segment: Segment,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Item>,
    bytes: usize,
    /// A thread holds the drainer's role.
    draining: bool,
    /// Submitters waiting for room.
    room_waiters: usize,
    /// Threads waiting for verdicts ([`Batcher::finish`], [`Batcher::settle`]).
    done_waiters: usize,
    /// A thread serves this shard ([`Batcher::serve`]): submitters leave the draining to
    /// it.
    served: bool,
    /// The serving thread sleeps until a batch is full or [`COALESCE`] has passed.
    server_sleeps: bool,
    /// When the last batch's verdicts were counted.
    last_delivery: Option<Instant>,
    /// Emptied segments, for submitters to take in exchange for full ones.
    spare: Vec<Segment>,
}

#[derive(Default)]
struct Shard {
    queue: Mutex<Queue>,
    /// Room in the queue, or the drainer's role given back: one waiting submitter at a time
    /// (each wakes the next while room is left), not a herd.
    room: Condvar,
    /// Verdicts counted, or the drainer's role given back.
    done: Condvar,
    /// Work for the serving thread: a full batch queued.
    work: Condvar,
}

impl Shard {
    fn wait_room<'a>(&self, mut q: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        q.room_waiters += 1;
        let mut q = self.room.wait(q).unwrap_or_else(PoisonError::into_inner);
        q.room_waiters -= 1;
        q
    }

    fn wait_done<'a>(&self, mut q: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        q.done_waiters += 1;
        let mut q = self.done.wait(q).unwrap_or_else(PoisonError::into_inner);
        q.done_waiters -= 1;
        q
    }

    /// Wakes a submitter waiting for room, if any.
    fn wake_room(&self, q: &Queue) {
        if q.room_waiters > 0 {
            self.room.notify_one();
        }
    }

    /// Wakes everyone waiting for verdicts.
    fn wake_done(&self, q: &Queue) {
        if q.done_waiters > 0 {
            self.done.notify_all();
        }
    }
}

/// How long a serving thread lets records gather before it carries fewer than a full batch:
/// one wake-up per batch under load, and a record inspected within about this long of its
/// arrival when traffic is light.
pub const COALESCE: std::time::Duration = std::time::Duration::from_micros(500);

/// The batcher shared by all relay threads of one middlebox.
pub struct Batcher {
    limits: BatchLimits,
    shards: Vec<Shard>,
    batches: AtomicU64,
    records: AtomicU64,
    /// 0: nobody served; 1: served at the default priority; 2: at [`SERVE_NICE`].
    priority: AtomicU8,
}

/// The nice value of a serving thread: the highest priority of the normal scheduler.
pub const SERVE_NICE: i32 = -20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section below leaves the state whole before it can panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Batcher {
    /// A batcher within `limits` (clamped, [`BatchLimits::clamped`]).
    pub fn new(limits: BatchLimits) -> Self {
        let limits = limits.clamped();
        Batcher {
            limits,
            shards: (0..limits.shards).map(|_| Shard::default()).collect(),
            batches: AtomicU64::new(0),
            records: AtomicU64::new(0),
            priority: AtomicU8::new(0),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    /// Ecalls made, and the records they carried.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.batches.load(Ordering::Relaxed),
            self.records.load(Ordering::Relaxed),
        )
    }

    fn shard(&self, flow: u64) -> &Shard {
        &self.shards[(flow % self.shards.len() as u64) as usize]
    }

    /// Queues the records of `segment` (one flow's direction) for inspection, their
    /// outcomes to be counted into `tally`, and leaves it empty (with a buffer that earlier
    /// records went in) for the next ones; returns once they are queued, which is at once
    /// unless the queue is full or nobody else is draining it (then this thread drains
    /// some batches first).
    pub fn submit(&self, client: Client<'_>, tally: &Arc<Tally>, segment: &mut Segment) {
        if segment.is_empty() {
            return;
        }
        let (flow, direction) = (segment.flow, segment.direction);
        let shard = self.shard(flow);
        tally
            .pending
            .fetch_add(segment.len() as u64, Ordering::AcqRel);
        let len = segment.record_bytes;
        let mut q = lock(&shard.queue);
        loop {
            if q.items.is_empty() || q.bytes + len <= self.limits.max_queued_bytes {
                break;
            }
            if q.served && q.server_sleeps {
                q.server_sleeps = false;
                shard.work.notify_one();
            }
            q = if q.draining || q.served {
                shard.wait_room(q)
            } else {
                self.drain(client, shard, q, Some(DRAIN_TURN))
            };
        }
        let fresh = match q.spare.pop() {
            Some(s) => s.reuse(flow, direction),
            None => Segment::new(flow, direction),
        };
        q.bytes += len;
        q.items.push_back(Item {
            tally: tally.clone(),
            segment: std::mem::replace(segment, fresh),
        });
        if q.bytes < self.limits.max_queued_bytes {
            // Room left: the next waiting submitter may go on too.
            shard.wake_room(&q);
        }
        if q.served {
            // One wake-up per full batch; the server looks on its own every `COALESCE`.
            if q.server_sleeps && self.full(&q) {
                q.server_sleeps = false;
                shard.work.notify_one();
            }
        } else if !q.draining {
            drop(self.drain(client, shard, q, Some(DRAIN_TURN)));
        }
    }

    /// A full batch is queued.
    fn full(&self, q: &Queue) -> bool {
        q.items.len() >= self.limits.max_records || q.bytes >= self.limits.max_bytes
    }

    /// Serves shard `shard` until `until` is set: drains its queue in batches, sleeping
    /// while less than a full batch waits, for at most [`COALESCE`]. The relay's threads
    /// then only queue records (LightBox's etap shape); without a serving thread, they
    /// drain the queue themselves.
    ///
    /// Run it on a thread of its own: it raises that thread to [`SERVE_NICE`] where the
    /// process may ([`serving_priority`](Self::serving_priority) says whether it could).
    /// LightBox gives its etap a core of its own; on a machine without a spare one the
    /// next best is to run ahead of the relay, client and server threads when woken. At the
    /// default priority, on the 2-vCPU VM, the serving thread woken by its batch's reply
    /// waited for a slice behind about a hundred runnable threads, the queue filled and the
    /// relay's threads waited for room with both cores part idle.
    pub fn serve(&self, client: Client<'_>, shard: usize, until: &AtomicBool) {
        let Some(shard) = self.shards.get(shard) else {
            return;
        };
        let raised =
            rustix::process::setpriority_process(Some(rustix::thread::gettid()), SERVE_NICE)
                .is_ok();
        self.priority
            .store(if raised { 2 } else { 1 }, Ordering::Relaxed);
        let mut q = lock(&shard.queue);
        q.served = true;
        while !until.load(Ordering::Acquire) {
            if q.draining || !self.full(&q) {
                q.server_sleeps = true;
                q = shard
                    .work
                    .wait_timeout(q, COALESCE)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                q.server_sleeps = false;
            }
            if !q.draining && !q.items.is_empty() {
                q = self.drain(client, shard, q, None);
            }
        }
        q.served = false;
        // Submitters waiting for room drain it themselves from now on.
        shard.wake_room(&q);
        shard.wake_done(&q);
    }

    /// Whether the serving threads run at [`SERVE_NICE`] (`None`: none has served yet).
    pub fn serving_priority(&self) -> Option<bool> {
        match self.priority.load(Ordering::Relaxed) {
            0 => None,
            p => Some(p == 2),
        }
    }

    /// Shards: [`serve`](Self::serve) takes 0 .. this.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Waits until every record submitted with `tally` (records of `flow`) has its outcome
    /// counted, draining the queue while nobody else does.
    pub fn finish(&self, client: Client<'_>, flow: u64, tally: &Tally) {
        let shard = self.shard(flow);
        let mut q = lock(&shard.queue);
        while tally.pending() > 0 && (q.draining || !q.items.is_empty()) {
            q = self.help(client, shard, q);
        }
    }

    /// Waits until everything submitted so far was inspected, draining the queue while
    /// nobody else does; returns when the last batch's outcomes were counted (`None`: no
    /// batch ever ran).
    pub fn settle(&self, client: Client<'_>) -> Option<Instant> {
        let mut last = None;
        for shard in &self.shards {
            let mut q = lock(&shard.queue);
            while q.draining || !q.items.is_empty() {
                q = self.help(client, shard, q);
            }
            last = last.max(q.last_delivery);
        }
        last
    }

    /// One step of waiting for verdicts: the next batch of whoever drains `shard`, or, if
    /// nobody does, the queue drained by this thread.
    fn help<'a>(
        &self,
        client: Client<'_>,
        shard: &'a Shard,
        q: MutexGuard<'a, Queue>,
    ) -> MutexGuard<'a, Queue> {
        if q.draining {
            shard.wait_done(q)
        } else {
            self.drain(client, shard, q, None)
        }
    }

    /// Holds the drainer's role (taken from `q`, where nobody held it): runs batches of the
    /// oldest records until the queue is empty or `turn` batches are done and a submitter
    /// waits to take over. Returns the queue, locked, the role given back.
    fn drain<'a>(
        &self,
        client: Client<'_>,
        shard: &'a Shard,
        mut q: MutexGuard<'a, Queue>,
        turn: Option<usize>,
    ) -> MutexGuard<'a, Queue> {
        debug_assert!(!q.draining);
        q.draining = true;
        let mut turns = 0;
        loop {
            let taken = self.take(&mut q);
            if taken.is_empty() {
                break;
            }
            // Room in the queue: a submitter waiting for it may go on.
            shard.wake_room(&q);
            drop(q);
            let emptied = self.run(client, taken);
            q = lock(&shard.queue);
            for s in emptied {
                if q.spare.len() < SPARE_SEGMENTS && s.bytes.capacity() <= SPARE_CAPACITY {
                    q.spare.push(s);
                }
            }
            q.last_delivery = Some(Instant::now());
            shard.wake_done(&q);
            turns += 1;
            if turn.is_some_and(|t| turns >= t) && q.room_waiters > 0 {
                break;
            }
        }
        q.draining = false;
        // The role is free: a waiter may take it.
        shard.wake_room(&q);
        shard.wake_done(&q);
        q
    }

    /// The oldest queued records, up to the limits: whole segments, and of a first
    /// segment over the limits on its own, as many records as fit (at least one).
    fn take(&self, q: &mut Queue) -> Vec<Item> {
        let (max_records, max_bytes) = (self.limits.max_records, self.limits.max_bytes);
        let (mut records, mut bytes) = (0, 0);
        let mut taken = Vec::new();
        while let Some(item) = q.items.front_mut() {
            let (n, len) = (item.segment.len(), item.segment.record_bytes);
            if taken.is_empty() && (n > max_records || len > max_bytes) {
                let mut k = 0;
                let mut fit = 0;
                for &(_, l) in &item.segment.records {
                    if k == max_records || (k > 0 && fit + l > max_bytes) {
                        break;
                    }
                    k += 1;
                    fit += l;
                }
                let rest = item.segment.split_off(k);
                let head = Item {
                    tally: item.tally.clone(),
                    segment: std::mem::replace(&mut item.segment, rest),
                };
                q.bytes -= fit;
                taken.push(head);
                return taken;
            }
            if !taken.is_empty() && (records + n > max_records || bytes + len > max_bytes) {
                break;
            }
            records += n;
            bytes += len;
            if let Some(item) = q.items.pop_front() {
                taken.push(item);
            }
        }
        q.bytes -= bytes;
        taken
    }

    /// One ecall for `taken`; each record's outcome goes to its tally. Returns the emptied
    /// segments.
    fn run(&self, client: Client<'_>, taken: Vec<Item>) -> Vec<Segment> {
        let total: usize = taken.iter().map(|i| i.segment.len()).sum();
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(total as u64, Ordering::Relaxed);
        // The request is the count and the segments' records, in order (`RecordBatch`'s
        // encoding), sent as pieces.
        let count = Compact(u32::try_from(total).unwrap_or(u32::MAX)).encode();
        let pieces: Vec<&[u8]> = std::iter::once(&count[..])
            .chain(taken.iter().map(|i| i.segment.encoded()))
            .collect();
        let reply: Result<BatchVerdicts, String> =
            match client.reproduce_ssl_context_batch_pieces(&pieces) {
                Ok(v) if v.len() == total => Ok(v),
                Ok(v) => Err(format!(
                    "reproduce_ssl_context_batch: {} verdicts for {total} records",
                    v.len()
                )),
                Err(e) => Err(e.to_string()),
            };
        drop(pieces);
        let runs: Vec<(&Arc<Tally>, u64)> = taken
            .iter()
            .map(|i| (&i.tally, i.segment.len() as u64))
            .collect();
        match reply {
            Ok(verdicts) => {
                // A segment is one direction's records: each is counted into its tally at
                // once, a few atomic additions on a line the relay's thread reads, not a
                // few per record.
                let mut verdicts = verdicts.into_iter();
                for (tally, n) in runs {
                    let mut sum = TallyCounts::default();
                    for v in verdicts.by_ref().take(n as usize) {
                        sum.add(TallyCounts::of(v.map_err(ClientError::Middlebox)));
                    }
                    tally.count(sum, n);
                }
            }
            Err(e) => fail(&runs, &e),
        }
        taken.into_iter().map(|i| i.segment).collect()
    }
}

/// A batch's ecall failed: each direction with records in it (`runs`: a tally and a number
/// of its records, a direction possibly more than once) gets one message, with how many of
/// its records went uninspected, not one per record (a tally keeps only its first few
/// messages), and those records stop pending.
fn fail(runs: &[(&Arc<Tally>, u64)], e: &str) {
    let mut per: Vec<(&Arc<Tally>, u64)> = Vec::new();
    for &(t, k) in runs {
        match per.iter_mut().find(|(u, _)| Arc::ptr_eq(u, t)) {
            Some((_, n)) => *n += k,
            None => per.push((t, k)),
        }
    }
    for (tally, n) in per {
        tally.error(format!("{e} (a batch failed: {n} record(s) not inspected)"));
        tally.pending.fetch_sub(n, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_batch_gives_each_direction_one_message() {
        let (a, b) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
        a.pending.store(5, Ordering::Relaxed);
        b.pending.store(1, Ordering::Relaxed);
        // Interleaved, as flows share a queue.
        fail(&[(&a, 1), (&b, 1), (&a, 2)], "enclave lost");
        assert_eq!(a.pending(), 2);
        assert_eq!(b.pending(), 0);
        let (ea, eb) = (a.take().errors, b.take().errors);
        assert_eq!(
            ea,
            ["enclave lost (a batch failed: 3 record(s) not inspected)"]
        );
        assert_eq!(
            eb,
            ["enclave lost (a batch failed: 1 record(s) not inspected)"]
        );
        // Counted as nothing else.
        assert_eq!(a.take(), TallyCounts::default());
    }

    /// Batches of whole segments within the limits, a segment over the limits on its own
    /// cut at them, and the request made of the taken segments the encoding of the same
    /// records as a `RecordBatch`, in order.
    #[test]
    fn batches_take_whole_segments_and_cut_one_over_the_limits() {
        use super::super::service::{RecordBatch, RecordIn};
        let b = Batcher::new(BatchLimits {
            max_records: 4,
            max_bytes: LARGEST_RECORD + 5_000,
            max_queued_bytes: usize::MAX,
            shards: 1,
        });
        let tally = Arc::new(Tally::default());
        let mut q = Queue::default();
        let mut all = Vec::new();
        // Segments of 1, 2, 10 and 1 small records, then 3 of 10 KB (two fit the bytes).
        for (flow, n, len) in [
            (1u64, 1, 100),
            (2, 2, 100),
            (3, 10, 100),
            (4, 1, 100),
            (5, 3, 10_000),
        ] {
            let mut s = Segment::new(flow, Direction::ServerToClient);
            for k in 0..n {
                let record = vec![k as u8 ^ flow as u8; len + k];
                s.push(&record);
                all.push(RecordIn {
                    flow,
                    direction: Direction::ServerToClient,
                    record,
                });
            }
            q.bytes += s.record_bytes;
            q.items.push_back(Item {
                tally: tally.clone(),
                segment: s,
            });
        }
        let mut shapes = Vec::new();
        let mut done = 0;
        loop {
            let taken = b.take(&mut q);
            if taken.is_empty() {
                break;
            }
            let n: usize = taken.iter().map(|i| i.segment.len()).sum();
            let mut request = Compact(n as u32).encode();
            for i in &taken {
                request.extend_from_slice(i.segment.encoded());
            }
            let want = RecordBatch {
                records: all[done..done + n].to_vec(),
            };
            assert_eq!(request, want.encode(), "batch {}", shapes.len());
            done += n;
            shapes.push(taken.iter().map(|i| i.segment.len()).collect::<Vec<_>>());
        }
        assert_eq!(
            shapes,
            [vec![1, 2], vec![4], vec![4], vec![2, 1], vec![2], vec![1]],
            "records per segment of each batch"
        );
        assert_eq!((done, q.bytes), (all.len(), 0));
    }

    #[test]
    fn a_full_batch_encodes_within_its_bound() {
        use super::super::service::{RecordBatch, RecordIn};
        let limits = BatchLimits {
            max_records: 3,
            max_bytes: 3 * LARGEST_RECORD,
            ..BatchLimits::default()
        }
        .clamped();
        let record = RecordIn {
            flow: u64::MAX,
            direction: Direction::ServerToClient,
            record: vec![0; LARGEST_RECORD],
        };
        let batch = RecordBatch {
            records: vec![record; 3],
        };
        let n = batch.encode().len();
        assert!(n <= limits.max_request_bytes(), "{n}");
        assert!(
            n + 16 > limits.max_request_bytes(),
            "{n}: the bound is tight"
        );
    }
}
