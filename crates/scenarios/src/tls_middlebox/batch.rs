//! Batching records across flows: the `batched` configuration's one crossing for many
//! records.
//!
//! Each relay thread collects the encrypted records of one read and submits them; records
//! that threads of other flows submit meanwhile ride in the same ecall
//! (`reproduce_ssl_context_batch`). The scheme is flat combining: a thread that finds fewer
//! than `max_in_flight` batches in flight becomes a *leader*; it takes every waiting
//! submission up to the bounds ([`BatchLimits`]: records and bytes), makes one ecall, and
//! hands each submitter its verdicts. When its own are done it passes the lead to the oldest
//! waiting submission (if any) and returns, so no flow is held up serving the others for
//! longer than one batch. More than one batch in flight (four by default) keeps the
//! enclave's threads decrypting in parallel, as one ecall per record does: with a single
//! leader, large records would be decrypted one after the other on one core.
//! A thread submits one direction of one flow, and waits for its verdicts before it
//! forwards those bytes and reads more, so records of one direction stay in order.
//!
//! No thread is added and nothing spins: a waiting thread sleeps on a condition variable.
//! On a machine without a spare core this is the alternative to switchless workers (which
//! each take a core of their own): it removes crossings instead of moving them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::service::{
    BatchVerdicts, Client, MAX_BATCH_BYTES, MAX_BATCH_RECORDS, RecordBatch, RecordIn,
};

/// How large one batch may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Records in one ecall (1 ..= [`MAX_BATCH_RECORDS`]).
    pub max_records: usize,
    /// Record bytes in one ecall (at least one maximal record, at most [`MAX_BATCH_BYTES`]).
    pub max_bytes: usize,
    /// Batches in the enclave at once (at least 1).
    pub max_in_flight: usize,
    /// Records larger than this (header and fragment) are not batched: each keeps an
    /// ecall of its own. A large record's crossing is a small part of its cost, and
    /// batching them serialises their decryption (measured: 16 KiB records batched kept
    /// 78-79% of the native middlebox's records/s, one ecall each 92-112%).
    pub max_record_bytes: usize,
}

impl Default for BatchLimits {
    /// 64 records or 256 KiB, whichever comes first (64 one-KiB records, or 16 maximal
    /// ones), four batches in flight, records up to 8 KiB batched. Four in flight, not one
    /// per core: a batch's handoffs (submitters to leader, leader to enclave and back) wait
    /// for wake-ups, and more batches in flight cover those waits (measured on 2 vCPUs,
    /// 1 KiB records, rounds of 8 MiB: 53-75% of the native middlebox's records/s with two
    /// in flight, 74-87% with four).
    fn default() -> Self {
        BatchLimits {
            max_records: 64,
            max_bytes: 256 << 10,
            max_in_flight: 4,
            max_record_bytes: 8 << 10,
        }
    }
}

/// The largest TLS record the relay passes on: a header and 2^14 + 2048 bytes.
const LARGEST_RECORD: usize = super::records::HEADER_LEN + (1 << 14) + 2048;

impl BatchLimits {
    /// The limits clamped to what the enclave accepts and to at least one record of any
    /// size, so that every record fits in some batch.
    pub fn clamped(self) -> Self {
        BatchLimits {
            max_records: self.max_records.clamp(1, MAX_BATCH_RECORDS),
            max_bytes: self.max_bytes.clamp(LARGEST_RECORD, MAX_BATCH_BYTES),
            max_in_flight: self.max_in_flight.max(1),
            max_record_bytes: self.max_record_bytes,
        }
    }
}

/// What a submitter waits for: its verdicts, or the lead.
#[derive(Default)]
struct SlotState {
    /// Its verdicts (or why the whole batch failed), once a leader ran its batch.
    result: Option<Result<BatchVerdicts, String>>,
    /// A leader passed the lead to this submission: it holds a leader's place now.
    promoted: bool,
}

#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    cv: Condvar,
}

struct Submission {
    records: Vec<RecordIn>,
    bytes: usize,
    slot: Arc<Slot>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Submission>,
    /// Leaders' places taken (at most `max_in_flight`): leaders at work, and submissions
    /// promoted to lead that have not woken yet.
    leaders: usize,
}

/// The batcher shared by all relay threads of one middlebox.
pub struct Batcher {
    limits: BatchLimits,
    queue: Mutex<Queue>,
    batches: AtomicU64,
    records: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section below leaves the state whole before it can panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Batcher {
    /// A batcher within `limits` (clamped, [`BatchLimits::clamped`]).
    pub fn new(limits: BatchLimits) -> Self {
        Batcher {
            limits: limits.clamped(),
            queue: Mutex::default(),
            batches: AtomicU64::new(0),
            records: AtomicU64::new(0),
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

    /// Decrypts and inspects `records` in the enclave, batched with whatever other flows
    /// submit meanwhile; returns one outcome per record, in order, or why their batch failed
    /// as a whole. Records beyond the limits go in several batches, in order.
    pub fn submit(
        &self,
        client: Client<'_>,
        records: Vec<RecordIn>,
    ) -> Result<BatchVerdicts, String> {
        let mut out = Vec::with_capacity(records.len());
        let mut chunk = Vec::new();
        let mut bytes = 0;
        for r in records {
            if !chunk.is_empty()
                && (chunk.len() == self.limits.max_records
                    || bytes + r.record.len() > self.limits.max_bytes)
            {
                out.extend(self.submit_one(client, std::mem::take(&mut chunk), bytes)?);
                bytes = 0;
            }
            bytes += r.record.len();
            chunk.push(r);
        }
        if !chunk.is_empty() {
            out.extend(self.submit_one(client, chunk, bytes)?);
        }
        Ok(out)
    }

    /// One submission within the limits.
    fn submit_one(
        &self,
        client: Client<'_>,
        records: Vec<RecordIn>,
        bytes: usize,
    ) -> Result<BatchVerdicts, String> {
        let slot = Arc::new(Slot::default());
        {
            let mut q = lock(&self.queue);
            q.waiting.push_back(Submission {
                records,
                bytes,
                slot: slot.clone(),
            });
            if q.leaders < self.limits.max_in_flight {
                q.leaders += 1;
            } else {
                drop(q);
                // Wait for our verdicts, or for the lead.
                let mut st = lock(&slot.state);
                loop {
                    if st.promoted {
                        break;
                    }
                    if let Some(r) = st.result.take() {
                        return r;
                    }
                    st = slot.cv.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
        self.lead(client, &slot)
    }

    /// Leads, holding a leader's place: batches of waiting submissions until our own is
    /// done, then passes the place on.
    fn lead(&self, client: Client<'_>, own: &Slot) -> Result<BatchVerdicts, String> {
        loop {
            let mine = lock(&own.state).result.take();
            if let Some(r) = mine {
                self.pass_lead();
                return r;
            }
            let taken = self.take();
            if taken.is_empty() {
                // Another leader has our submission in its batch: wait for it.
                let mut st = lock(&own.state);
                while st.result.is_none() {
                    st = own.cv.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
                continue;
            }
            self.run(client, taken);
        }
    }

    /// Gives our leader's place to the oldest waiting submission not yet promoted, or
    /// frees it when there is none.
    fn pass_lead(&self) {
        let mut q = lock(&self.queue);
        for s in &q.waiting {
            let mut st = lock(&s.slot.state);
            if !st.promoted && st.result.is_none() {
                st.promoted = true;
                s.slot.cv.notify_one();
                return;
            }
        }
        q.leaders = q.leaders.saturating_sub(1);
    }

    /// The oldest waiting submissions, up to the limits (at least one).
    fn take(&self) -> Vec<Submission> {
        let mut q = lock(&self.queue);
        let (mut n, mut bytes) = (0, 0);
        let mut taken = Vec::new();
        while let Some(s) = q.waiting.front() {
            if !taken.is_empty()
                && (n + s.records.len() > self.limits.max_records
                    || bytes + s.bytes > self.limits.max_bytes)
            {
                break;
            }
            n += s.records.len();
            bytes += s.bytes;
            if let Some(s) = q.waiting.pop_front() {
                taken.push(s);
            }
        }
        taken
    }

    /// One ecall for `taken`; each submitter gets its share of the verdicts.
    fn run(&self, client: Client<'_>, mut taken: Vec<Submission>) {
        if taken.is_empty() {
            return;
        }
        let counts: Vec<usize> = taken.iter().map(|s| s.records.len()).collect();
        let total: usize = counts.iter().sum();
        let batch = RecordBatch {
            records: taken
                .iter_mut()
                .flat_map(|s| std::mem::take(&mut s.records))
                .collect(),
        };
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(total as u64, Ordering::Relaxed);
        let reply = match client.reproduce_ssl_context_batch(&batch) {
            Ok(v) if v.len() == total => Ok(v),
            Ok(v) => Err(format!(
                "reproduce_ssl_context_batch: {} verdicts for {total} records",
                v.len()
            )),
            Err(e) => Err(e.to_string()),
        };
        drop(batch);
        let mut verdicts = match reply {
            Ok(v) => Ok(v.into_iter()),
            Err(e) => Err(e),
        };
        for (s, n) in taken.iter().zip(counts) {
            let r = match &mut verdicts {
                Ok(it) => Ok(it.by_ref().take(n).collect()),
                Err(e) => Err(e.clone()),
            };
            lock(&s.slot.state).result = Some(r);
            s.slot.cv.notify_one();
        }
    }
}
