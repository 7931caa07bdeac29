//! The middlebox's host side: a TCP relay, one thread per direction, that reassembles
//! records and hands each encrypted one to the enclave (`reproduce_ssl_context`) before
//! forwarding it, or, with batching on ([`Middlebox::with_batching`]), queues the encrypted
//! records of each read with the [`Batcher`] and forwards them at once: the batcher carries
//! them and other flows' in `reproduce_ssl_context_batch` ecalls, off the forwarding path,
//! and their verdicts are counted as they come (every one before the flow closes).
//!
//! What the relay does with bad input, per flow (the middlebox keeps serving the others):
//!
//! | input | relay |
//! |---|---|
//! | a record longer than `2^14 + 2048`, an unknown content type, a non-TLS version | counted as malformed; the flow is closed (the stream cannot be followed) |
//! | a record that fails authentication (a changed byte, a wrong key share) | counted; forwarded unchanged (the endpoint is the authority and will reject it) |
//! | no key share for the flow's client random | counted; the flow is passed through uninspected |
//! | a key share that arrives after the flow's ChangeCipherSpec (with [`Middlebox::share_wait`]) | the records are forwarded at once and copies queued (at most [`Middlebox::max_queued_bytes`]); inspected in order when the share arrives, counted as uninspected past the bound or the wait |
//! | the stream ends inside a record (a peer disconnects mid-record) | counted as truncated; the half-close is passed on |
//! | no bytes either way for the idle limit | counted; the flow is closed |
//!
//! Every socket has a read timeout; every loop ends on end-of-stream, an error, the idle
//! limit or the flow's own close.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::batch::{BatchLimits, Batcher, Segment, Tally, TallyCounts};
use super::book::{BookLimits, Offer, ShareBook, ShareSignal, ShareStatus};
use super::keys::Direction;
use super::records::{ContentType, FrameError, Hello, Reassembler, hello_random};
use super::service::{
    Client, ClientError, DirectionCounts, EngineKey, EngineLimits, FlowInfo, KeyShare,
    MiddleboxError, RecordIn, Ruleset, StartTls, TlsRandoms,
};

/// Per-direction counts the relay keeps on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirReport {
    /// Whole records relayed.
    pub records: u64,
    /// Records handed to the enclave.
    pub inspected: u64,
    /// Application-data records the enclave decrypted.
    pub app_records: u64,
    /// Their plaintext bytes.
    pub app_bytes: u64,
    /// Pattern matches the enclave reported.
    pub matches: u64,
    /// Records that failed authentication (forwarded unchanged).
    pub auth_failures: u64,
    /// Bytes forwarded.
    pub bytes: u64,
    /// Encrypted records queued while the flow waited for its key share.
    pub queued: u64,
    /// The queue outgrew [`Middlebox::max_queued_bytes`]: its records went uninspected.
    pub queue_overflow: bool,
    /// Encrypted records passed through uninspected (no key share).
    pub uninspected: u64,
    /// `start_tls_process` found no key share for the flow.
    pub no_key_share: bool,
    /// Framing the relay could not follow (the flow was closed).
    pub malformed: Option<FrameError>,
    /// The stream ended inside a record.
    pub truncated: Option<FrameError>,
    /// Other enclave refusals (messages carry no secrets).
    pub enclave_errors: Vec<String>,
    /// The flow was closed for being idle.
    pub idle_timeout: bool,
    /// Reading or forwarding failed (a reset, a refused write).
    pub io_error: Option<String>,
    /// Wall time spent handling bytes read (parsing, ecalls, forwarding), ns.
    pub busy_ns: u64,
    /// Wall time inside `reproduce_ssl_context` calls (without batching), ns.
    pub ecall_ns: u64,
    /// Wall time handing records to the batcher (with batching): at once unless its queue
    /// is full (back-pressure) or nobody serves it (then the relay carries batches itself),
    /// ns. The wait for the direction's last verdicts before it closes is not in it.
    pub queue_ns: u64,
    /// The relay thread's CPU time, ns.
    pub cpu_ns: u64,
}

/// One flow as the middlebox saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowReport {
    /// The middlebox's flow id.
    pub flow: u64,
    /// The client's address.
    pub client: String,
    /// The server's address.
    pub server: String,
    /// From accepting the connection to the end of both directions, ns.
    pub duration_ns: u64,
    /// Client to server, server to client.
    pub dirs: [DirReport; 2],
    /// The enclave's own counts, from `set_info_flow(Close)`.
    pub enclave: Option<[DirectionCounts; 2]>,
    /// Key shares the enclave held, unclaimed, after this flow closed.
    pub shares_pending: u32,
}

/// The shared state of one flow's two relay threads.
struct FlowShared {
    flow: u64,
    client_random: Mutex<Option<[u8; 32]>>,
    /// Told when the flow's key share reaches the enclave after the flow started.
    signal: Arc<ShareSignal>,
    closing: AtomicBool,
    last_activity: AtomicU64,
    born: Instant,
    /// With batching: the verdicts of each direction's records, client to server first.
    tallies: [Arc<Tally>; 2],
}

impl FlowShared {
    fn touch(&self) {
        self.last_activity
            .store(self.born.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_nanos(self.last_activity.load(Ordering::Relaxed));
        self.born.elapsed().saturating_sub(last)
    }
}

/// The thread's CPU time so far.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The middlebox's host side.
pub struct Middlebox<'e> {
    client: Client<'e>,
    engine: EngineKey,
    next_flow: AtomicU64,
    /// Read-timeout tick of the relay's sockets.
    pub tick: Duration,
    /// A flow with no bytes either way for this long is closed.
    pub idle: Duration,
    /// Records of all flows batched into one ecall (`None`: one ecall per record).
    batcher: Option<Batcher>,
    /// How long a flow without its key share at its ChangeCipherSpec waits for it, its
    /// records forwarded and copies queued meanwhile (zero: no wait, no queue; the
    /// scenario's endpoints share before their ChangeCipherSpec).
    pub share_wait: Duration,
    /// The most record bytes queued per direction while waiting for a share.
    pub max_queued_bytes: usize,
    book: ShareBook,
    stopping: AtomicBool,
    stats: RelayStats,
}

/// Running totals over all flows, for a status line while the middlebox runs.
#[derive(Debug, Default)]
pub struct RelayStats {
    /// Flows accepted.
    pub flows: AtomicU64,
    /// Flows open now.
    pub open: AtomicU64,
    /// Bytes forwarded, both directions.
    pub bytes: AtomicU64,
    /// Application-data records the enclave decrypted.
    pub app_records: AtomicU64,
    /// Pattern matches.
    pub matches: AtomicU64,
    /// Encrypted records that went uninspected.
    pub uninspected: AtomicU64,
}

/// A direction's inspection state.
enum Inspection {
    /// Before the direction's ChangeCipherSpec: records are clear text.
    Clear,
    /// Records go to the enclave.
    On,
    /// No key share yet: copies of the records wait for it.
    Waiting {
        queue: Vec<RecordIn>,
        bytes: usize,
        since: Instant,
    },
    /// Records pass uninspected.
    Off,
}

/// The read buffer of a relay thread.
const READ_CHUNK: usize = 64 << 10;

impl<'e> Middlebox<'e> {
    /// Initialises the engine and loads the rule set: the first two ecalls.
    pub fn start(
        client: Client<'e>,
        limits: &EngineLimits,
        patterns: &[&[u8]],
    ) -> Result<Self, ClientError> {
        let engine = client.init_decryption_engine(limits)?;
        client.load_ruleset(&Ruleset {
            patterns: patterns.iter().map(|p| p.to_vec()).collect(),
        })?;
        Ok(Middlebox {
            client,
            engine,
            next_flow: AtomicU64::new(1),
            tick: Duration::from_millis(100),
            idle: Duration::from_secs(10),
            batcher: None,
            share_wait: Duration::ZERO,
            max_queued_bytes: 1 << 20,
            book: ShareBook::new(BookLimits::default()),
            stopping: AtomicBool::new(false),
            stats: RelayStats::default(),
        })
    }

    /// Holds shares that arrive before their flows within `limits`.
    pub fn with_book(mut self, limits: BookLimits) -> Self {
        self.book = ShareBook::new(limits);
        self
    }

    /// The book of shares that arrive on their own schedule.
    pub fn book(&self) -> &ShareBook {
        &self.book
    }

    /// Running totals over all flows.
    pub fn stats(&self) -> &RelayStats {
        &self.stats
    }

    /// Stops: open flows are closed at their next read tick, flows waiting for a share stop
    /// waiting, and new flows are refused.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.book.stop();
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// A key share from a share agent: handed to the enclave if its flow is open, held if
    /// its flow has not been seen yet, refused if its flow closed or has a share.
    pub fn offer_share(&self, share: KeyShare) -> ShareStatus {
        match self.book.offer(share) {
            Offer::Deliver(share, signal) => self.deliver(&share, &signal),
            Offer::Held => ShareStatus::Held,
            Offer::Refused(why) => ShareStatus::Refused(why),
        }
    }

    fn deliver(&self, share: &KeyShare, signal: &ShareSignal) -> ShareStatus {
        match self.client.init_out_of_band_key_share(share) {
            Ok(_) => {
                self.book.delivered(true);
                signal.arrive();
                ShareStatus::Delivered
            }
            Err(e) => {
                self.book.delivered(false);
                ShareStatus::Refused(super::book::ShareRefusal::Enclave(e.to_string()))
            }
        }
    }

    /// Batches the records of all flows into `reproduce_ssl_context_batch` ecalls within
    /// `limits`, off the forwarding path, instead of one `reproduce_ssl_context` per record
    /// before forwarding it.
    pub fn with_batching(mut self, limits: BatchLimits) -> Self {
        self.batcher = Some(Batcher::new(limits));
        self
    }

    /// The batcher, when batching is on.
    pub fn batcher(&self) -> Option<&Batcher> {
        self.batcher.as_ref()
    }

    /// Serves the batcher's queues, a thread each, until `until` is set: the relay's
    /// threads then only queue records, and these threads carry them into the enclave
    /// ([`Batcher::serve`]). Returns at once without batching. Without it the relay's
    /// threads drain the queues themselves.
    pub fn serve_inspection(&self, until: &AtomicBool) {
        let Some(b) = &self.batcher else {
            return;
        };
        std::thread::scope(|s| {
            for shard in 0..b.shards() {
                // No thread (spawning failed): the relay's threads drain that shard.
                let _ = std::thread::Builder::new()
                    .name(format!("inspect-{shard}"))
                    .spawn_scoped(s, move || b.serve(self.client, shard, until));
            }
        });
    }

    /// Waits until every record handed to the batcher so far was inspected; returns when
    /// the last batch's verdicts were counted (`None`: no batch, or no batching). Without
    /// batching a record is inspected before it is forwarded: nothing to wait for.
    pub fn settle_inspection(&self) -> Option<Instant> {
        self.batcher.as_ref()?.settle(self.client)
    }

    /// The engine's public key and the enclave's quote of it, as the host hands them to
    /// endpoints (who verify the quote before sealing a share to the key).
    pub fn engine(&self) -> &EngineKey {
        &self.engine
    }

    /// Replaces the engine key the host hands out: what a dishonest host does (tests of
    /// the endpoints' attestation check).
    #[cfg(test)]
    pub(super) fn substitute_engine_key(&mut self, engine: EngineKey) {
        self.engine = engine;
    }

    /// The typed enclave client.
    pub fn client(&self) -> Client<'e> {
        self.client
    }

    /// Serves key shares from `rx` until every sender is gone: the out-of-band listener.
    /// Returns the shares handed over and those the enclave refused.
    pub fn serve_shares(&self, rx: Receiver<(KeyShare, SyncSender<()>)>) -> (u64, u64) {
        let (mut ok, mut refused) = (0, 0);
        while let Ok((share, ack)) = rx.recv() {
            match self.client.init_out_of_band_key_share(&share) {
                Ok(_) => ok += 1,
                Err(_) => refused += 1,
            }
            let _ = ack.send(());
        }
        (ok, refused)
    }

    /// Relays one connection: `down` from the client, `up` to the server. Returns when
    /// both directions have ended (and, for a flow waiting for its key share, when the
    /// share came or the wait ended).
    pub fn relay(&self, down: TcpStream, up: TcpStream) -> FlowReport {
        let born = Instant::now();
        let flow = self.next_flow.fetch_add(1, Ordering::Relaxed);
        let addr = |s: &TcpStream, peer: bool| {
            if peer { s.peer_addr() } else { s.local_addr() }
                .map(|a| a.to_string())
                .unwrap_or_default()
        };
        let mut report = FlowReport {
            flow,
            client: addr(&down, true),
            server: addr(&up, true),
            ..FlowReport::default()
        };
        self.stats.flows.fetch_add(1, Ordering::Relaxed);
        let opened = if self.stopping() {
            Err("the middlebox is stopping".to_owned())
        } else {
            self.client
                .set_info_flow(&FlowInfo::Open {
                    flow,
                    client: report.client.clone(),
                    server: report.server.clone(),
                })
                .map_err(|e| e.to_string())
        };
        if let Err(e) = opened {
            report.dirs[0].enclave_errors.push(e);
            let _ = down.shutdown(Shutdown::Both);
            let _ = up.shutdown(Shutdown::Both);
            return report;
        }
        self.stats.open.fetch_add(1, Ordering::Relaxed);
        let shared = FlowShared {
            flow,
            client_random: Mutex::new(None),
            signal: Arc::new(ShareSignal::default()),
            closing: AtomicBool::new(false),
            last_activity: AtomicU64::new(0),
            born,
            tallies: Default::default(),
        };
        let sockets = (|| Some((down.try_clone().ok()?, up.try_clone().ok()?)))();
        if let Some((down2, up2)) = sockets {
            let ([c2s, s2c], waiting) = std::thread::scope(|s| {
                let h = s.spawn(|| self.pump(&shared, Direction::ServerToClient, up2, down2));
                let (c2s, w0) = self.pump(&shared, Direction::ClientToServer, down, up);
                let (s2c, w1) = h.join().unwrap_or_else(|_| {
                    let r = DirReport {
                        enclave_errors: vec!["the relay thread panicked".into()],
                        ..DirReport::default()
                    };
                    (r, Inspection::Off)
                });
                ([c2s, s2c], [w0, w1])
            });
            report.dirs = [c2s, s2c];
            self.finish_waiting(&shared, waiting, &mut report);
        } else {
            report.dirs[0]
                .enclave_errors
                .push("cloning the sockets failed".into());
        }
        match self.client.set_info_flow(&FlowInfo::Close { flow }) {
            Ok(r) => {
                report.enclave = r.counts;
                report.shares_pending = r.shares_pending;
            }
            Err(e) => report.dirs[0].enclave_errors.push(e.to_string()),
        }
        let cr = *shared
            .client_random
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(cr) = cr {
            self.book.close(cr);
        }
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
        report.duration_ns = born.elapsed().as_nanos() as u64;
        report
    }

    /// After both directions ended: a direction still waiting for its key share waits for
    /// the rest of [`share_wait`](Self::share_wait), then has its queue inspected, or
    /// counted as uninspected.
    fn finish_waiting(
        &self,
        shared: &FlowShared,
        waiting: [Inspection; 2],
        report: &mut FlowReport,
    ) {
        let deadline = waiting
            .iter()
            .filter_map(|w| match w {
                Inspection::Waiting { since, .. } => Some(*since + self.share_wait),
                _ => None,
            })
            .max();
        let Some(deadline) = deadline else {
            return;
        };
        shared.signal.wait_until(deadline);
        for (i, mut state) in waiting.into_iter().enumerate() {
            let dir = if i == 0 {
                Direction::ClientToServer
            } else {
                Direction::ServerToClient
            };
            let r = &mut report.dirs[i];
            let mut batch = Segment::new(shared.flow, dir);
            self.resume(shared, dir, &mut state, &mut batch, r);
            self.finish_direction(shared, dir, r);
            if let Inspection::Waiting { queue, .. } = state {
                self.give_up(queue.len() as u64, r);
            }
        }
    }

    /// Counts `n` queued records as uninspected: the share never came.
    fn give_up(&self, n: u64, r: &mut DirReport) {
        r.uninspected += n;
        r.no_key_share = true;
        self.stats.uninspected.fetch_add(n, Ordering::Relaxed);
    }

    /// A direction waiting for its share whose share has arrived: starts the direction and
    /// inspects its queue in order; one whose wait is over: its queue goes uninspected.
    fn resume(
        &self,
        shared: &FlowShared,
        dir: Direction,
        state: &mut Inspection,
        batch: &mut Segment,
        r: &mut DirReport,
    ) {
        let Inspection::Waiting { since, .. } = state else {
            return;
        };
        if !shared.signal.arrived() {
            if (since.elapsed() >= self.share_wait || self.stopping())
                && let Inspection::Waiting { queue, .. } = std::mem::replace(state, Inspection::Off)
            {
                self.give_up(queue.len() as u64, r);
            }
            return;
        }
        let Inspection::Waiting { queue, .. } = std::mem::replace(state, Inspection::Off) else {
            return;
        };
        *state = self.start_direction(shared, dir, r);
        match state {
            Inspection::On => {
                for record in queue {
                    self.inspect(shared, dir, &record.record, batch, r);
                }
                self.flush(shared, dir, batch, r);
            }
            _ => {
                *state = Inspection::Off;
                self.give_up(queue.len() as u64, r);
            }
        }
    }

    /// At a direction's ChangeCipherSpec: starts its decrypter, or, without a key share,
    /// waits for one (with [`share_wait`](Self::share_wait)) or passes it uninspected.
    fn start_direction(
        &self,
        shared: &FlowShared,
        dir: Direction,
        r: &mut DirReport,
    ) -> Inspection {
        match self.client.start_tls_process(&StartTls {
            flow: shared.flow,
            direction: dir,
        }) {
            Ok(()) => Inspection::On,
            Err(ClientError::Middlebox(MiddleboxError::NoKeyShare(_)))
                if !self.share_wait.is_zero() && !shared.signal.arrived() =>
            {
                Inspection::Waiting {
                    queue: Vec::new(),
                    bytes: 0,
                    since: Instant::now(),
                }
            }
            Err(ClientError::Middlebox(MiddleboxError::NoKeyShare(_))) => {
                r.no_key_share = true;
                Inspection::Off
            }
            Err(e) => {
                r.enclave_errors.push(e.to_string());
                Inspection::Off
            }
        }
    }

    /// One encrypted record to the enclave: into this read's batch, or an ecall of its own.
    fn inspect(
        &self,
        shared: &FlowShared,
        dir: Direction,
        record: &[u8],
        batch: &mut Segment,
        r: &mut DirReport,
    ) {
        if self.batcher.is_some() {
            batch.push(record);
        } else {
            let record = RecordIn {
                flow: shared.flow,
                direction: dir,
                record: record.to_vec(),
            };
            let t = Instant::now();
            let verdict = self.client.reproduce_ssl_context(&record);
            r.ecall_ns += t.elapsed().as_nanos() as u64;
            r.inspected += 1;
            self.merge(TallyCounts::of(verdict), r);
        }
    }

    /// One direction: read, reassemble, inspect, forward. Returns the direction's report
    /// and, if it still waits for its key share, its queue.
    fn pump(
        &self,
        shared: &FlowShared,
        dir: Direction,
        mut src: TcpStream,
        mut dst: TcpStream,
    ) -> (DirReport, Inspection) {
        let cpu0 = thread_cpu();
        let mut r = DirReport::default();
        let mut asm = Reassembler::new();
        let mut state = Inspection::Clear;
        // With batching: this read's encrypted records, inspected together before forwarding.
        let mut batch = Segment::new(shared.flow, dir);
        let _ = src.set_read_timeout(Some(self.tick));
        let _ = dst.set_write_timeout(Some(self.idle));
        let close_both = |src: &TcpStream, dst: &TcpStream| {
            shared.closing.store(true, Ordering::Relaxed);
            let _ = src.shutdown(Shutdown::Both);
            let _ = dst.shutdown(Shutdown::Both);
        };
        loop {
            let buf = asm.spare(READ_CHUNK);
            let read = src.read(buf);
            let n = match read {
                Ok(n) => {
                    asm.commit(READ_CHUNK, n);
                    n
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    asm.commit(READ_CHUNK, 0);
                    self.resume(shared, dir, &mut state, &mut batch, &mut r);
                    if shared.closing.load(Ordering::Relaxed) {
                        break;
                    }
                    if self.stopping() {
                        close_both(&src, &dst);
                        break;
                    }
                    if shared.idle_for() >= self.idle {
                        r.idle_timeout = true;
                        close_both(&src, &dst);
                        break;
                    }
                    continue;
                }
                Err(e) => {
                    asm.commit(READ_CHUNK, 0);
                    r.io_error = Some(format!("reading: {e}"));
                    0
                }
            };
            if n == 0 {
                // End of stream: a record cut short is the peer's disconnect mid-record.
                if let Err(e) = asm.finish() {
                    r.truncated = Some(e);
                }
                let _ = dst.shutdown(Shutdown::Write);
                break;
            }
            shared.touch();
            let busy = Instant::now();
            // A share that arrived since the last read: the queue goes first.
            self.resume(shared, dir, &mut state, &mut batch, &mut r);
            let mut broken = false;
            loop {
                match asm.next_range() {
                    Ok(None) => break,
                    Ok(Some((ct, _, range))) => {
                        r.records += 1;
                        let bytes = asm.bytes(range);
                        match &mut state {
                            Inspection::Clear => match ct {
                                ContentType::Handshake => self.hello(shared, bytes, &mut r),
                                ContentType::ChangeCipherSpec => {
                                    state = self.start_direction(shared, dir, &mut r);
                                }
                                _ => {}
                            },
                            Inspection::On => {
                                self.inspect(shared, dir, bytes, &mut batch, &mut r);
                            }
                            Inspection::Waiting {
                                queue, bytes: q, ..
                            } => {
                                if *q + bytes.len() <= self.max_queued_bytes {
                                    *q += bytes.len();
                                    r.queued += 1;
                                    queue.push(RecordIn {
                                        flow: shared.flow,
                                        direction: dir,
                                        record: bytes.to_vec(),
                                    });
                                } else {
                                    // Past the bound: this record and the queue go
                                    // uninspected; the traffic is never held up.
                                    let n = queue.len() as u64 + 1;
                                    r.queue_overflow = true;
                                    r.uninspected += n;
                                    self.stats.uninspected.fetch_add(n, Ordering::Relaxed);
                                    state = Inspection::Off;
                                }
                            }
                            Inspection::Off => {
                                r.uninspected += 1;
                                self.stats.uninspected.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(e) => {
                        r.malformed = Some(e);
                        broken = true;
                        break;
                    }
                }
            }
            self.flush(shared, dir, &mut batch, &mut r);
            let out = asm.consumed();
            let forwarded = dst.write_all(out);
            match &forwarded {
                Ok(()) => {
                    r.bytes += out.len() as u64;
                    self.stats
                        .bytes
                        .fetch_add(out.len() as u64, Ordering::Relaxed);
                }
                Err(e) => r.io_error = Some(format!("forwarding: {e}")),
            }
            asm.compact();
            r.busy_ns += busy.elapsed().as_nanos() as u64;
            if broken || forwarded.is_err() || self.stopping() {
                close_both(&src, &dst);
                break;
            }
        }
        // The direction's records are all inspected before the flow can close.
        self.finish_direction(shared, dir, &mut r);
        r.cpu_ns = thread_cpu().saturating_sub(cpu0).as_nanos() as u64;
        (r, state)
    }

    /// Hands the records collected for a batch (if any) to the batcher, and counts the
    /// verdicts that have come meanwhile.
    fn flush(&self, shared: &FlowShared, dir: Direction, batch: &mut Segment, r: &mut DirReport) {
        let Some(b) = &self.batcher else {
            return;
        };
        if batch.is_empty() {
            return;
        }
        let tally = &shared.tallies[dir.index()];
        r.inspected += batch.len() as u64;
        let t = Instant::now();
        b.submit(self.client, tally, batch);
        r.queue_ns += t.elapsed().as_nanos() as u64;
        self.merge(tally.take(), r);
    }

    /// With batching: waits until the direction's records all have their verdicts, and
    /// counts them.
    fn finish_direction(&self, shared: &FlowShared, dir: Direction, r: &mut DirReport) {
        let Some(b) = &self.batcher else {
            return;
        };
        let tally = &shared.tallies[dir.index()];
        b.finish(self.client, shared.flow, tally);
        self.merge(tally.take(), r);
    }

    /// Verdicts counted (by the batcher, or of one record's own ecall), into the direction's
    /// report and the totals.
    fn merge(&self, c: TallyCounts, r: &mut DirReport) {
        r.app_records += c.app_records;
        r.app_bytes += c.app_bytes;
        r.matches += c.matches;
        r.auth_failures += c.auth_failures;
        self.stats
            .app_records
            .fetch_add(c.app_records, Ordering::Relaxed);
        self.stats.matches.fetch_add(c.matches, Ordering::Relaxed);
        for e in c.errors {
            if r.enclave_errors.len() < 8 {
                r.enclave_errors.push(e);
            }
        }
    }

    /// A clear-text handshake record: remember the client random; at the ServerHello,
    /// hand both randoms to the enclave.
    fn hello(&self, shared: &FlowShared, record: &[u8], r: &mut DirReport) {
        let lock = || {
            shared
                .client_random
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        match hello_random(&record[super::records::HEADER_LEN..]) {
            Some(Hello::Client(cr)) => {
                let first = lock().replace(cr).is_none();
                // A share that came before its flow is handed over now.
                if first && let Some(share) = self.book.open(cr, Arc::clone(&shared.signal)) {
                    self.deliver(&share, &shared.signal);
                }
            }
            Some(Hello::Server(sr)) => {
                let cr = *lock();
                if let Some(cr) = cr
                    && let Err(e) = self.client.init_tls_process(&TlsRandoms {
                        flow: shared.flow,
                        client_random: cr,
                        server_random: sr,
                    })
                {
                    r.enclave_errors.push(e.to_string());
                }
            }
            None => {}
        }
    }
}
