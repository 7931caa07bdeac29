//! The middlebox's host side: a TCP relay, one thread per direction, that reassembles
//! records and hands each encrypted one to the enclave (`reproduce_ssl_context`), or, with
//! batching on ([`Middlebox::with_batching`]), all the encrypted records of one read up to
//! [`BatchLimits::max_record_bytes`] to the [`Batcher`], which carries them and other flows'
//! in one `reproduce_ssl_context_batch` (larger records keep one ecall each).
//!
//! What the relay does with bad input, per flow (the middlebox keeps serving the others):
//!
//! | input | relay |
//! |---|---|
//! | a record longer than `2^14 + 2048`, an unknown content type, a non-TLS version | counted as malformed; the flow is closed (the stream cannot be followed) |
//! | a record that fails authentication (a changed byte, a wrong key share) | counted; forwarded unchanged (the endpoint is the authority and will reject it) |
//! | no key share for the flow's client random | counted; the flow is passed through uninspected |
//! | the stream ends inside a record (a peer disconnects mid-record) | counted as truncated; the half-close is passed on |
//! | no bytes either way for the idle limit | counted; the flow is closed |
//!
//! Every socket has a read timeout; every loop ends on end-of-stream, an error, the idle
//! limit or the flow's own close.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::batch::{BatchLimits, Batcher};
use super::keys::Direction;
use super::records::{ContentType, FrameError, Hello, Reassembler, hello_random};
use super::service::{
    Client, ClientError, DirectionCounts, EngineKey, EngineLimits, FlowInfo, KeyShare,
    MiddleboxError, RecordIn, Ruleset, StartTls, TlsRandoms, Verdict,
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
    /// Wall time spent handling bytes read (parsing, ecalls, forwarding), ns.
    pub busy_ns: u64,
    /// Wall time inside `reproduce_ssl_context` calls, ns.
    pub ecall_ns: u64,
    /// The relay thread's CPU time, ns.
    pub cpu_ns: u64,
}

/// One flow as the middlebox saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowReport {
    /// The middlebox's flow id.
    pub flow: u64,
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
    closing: AtomicBool,
    last_activity: AtomicU64,
    born: Instant,
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
        })
    }

    /// Batches the records of all flows into `reproduce_ssl_context_batch` ecalls within
    /// `limits`, instead of one `reproduce_ssl_context` per record.
    pub fn with_batching(mut self, limits: BatchLimits) -> Self {
        self.batcher = Some(Batcher::new(limits));
        self
    }

    /// The batcher, when batching is on.
    pub fn batcher(&self) -> Option<&Batcher> {
        self.batcher.as_ref()
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
    /// both directions have ended.
    pub fn relay(&self, down: TcpStream, up: TcpStream) -> FlowReport {
        let flow = self.next_flow.fetch_add(1, Ordering::Relaxed);
        let addr = |s: &TcpStream, peer: bool| {
            if peer { s.peer_addr() } else { s.local_addr() }
                .map(|a| a.to_string())
                .unwrap_or_default()
        };
        let opened = self.client.set_info_flow(&FlowInfo::Open {
            flow,
            client: addr(&down, true),
            server: addr(&up, true),
        });
        let mut report = FlowReport {
            flow,
            ..FlowReport::default()
        };
        if let Err(e) = opened {
            report.dirs[0].enclave_errors.push(e.to_string());
            let _ = down.shutdown(Shutdown::Both);
            let _ = up.shutdown(Shutdown::Both);
            return report;
        }
        let shared = FlowShared {
            flow,
            client_random: Mutex::new(None),
            closing: AtomicBool::new(false),
            last_activity: AtomicU64::new(0),
            born: Instant::now(),
        };
        let sockets = (|| Some((down.try_clone().ok()?, up.try_clone().ok()?)))();
        let Some((down2, up2)) = sockets else {
            report.dirs[0]
                .enclave_errors
                .push("cloning the sockets failed".into());
            let _ = self.client.set_info_flow(&FlowInfo::Close { flow });
            return report;
        };
        let [c2s, s2c] = std::thread::scope(|s| {
            let h = s.spawn(|| self.pump(&shared, Direction::ServerToClient, up2, down2));
            let c2s = self.pump(&shared, Direction::ClientToServer, down, up);
            let s2c = h.join().unwrap_or_else(|_| DirReport {
                enclave_errors: vec!["the relay thread panicked".into()],
                ..DirReport::default()
            });
            [c2s, s2c]
        });
        report.dirs = [c2s, s2c];
        match self.client.set_info_flow(&FlowInfo::Close { flow }) {
            Ok(r) => {
                report.enclave = r.counts;
                report.shares_pending = r.shares_pending;
            }
            Err(e) => report.dirs[0].enclave_errors.push(e.to_string()),
        }
        report
    }

    /// One direction: read, reassemble, inspect, forward.
    fn pump(
        &self,
        shared: &FlowShared,
        dir: Direction,
        mut src: TcpStream,
        mut dst: TcpStream,
    ) -> DirReport {
        let cpu0 = thread_cpu();
        let mut r = DirReport::default();
        let mut asm = Reassembler::new();
        let mut encrypted = false;
        let mut inspect = false;
        // With batching: this read's encrypted records, inspected together before forwarding.
        let mut batch: Vec<RecordIn> = Vec::new();
        let _ = src.set_read_timeout(Some(self.tick));
        let _ = dst.set_write_timeout(Some(self.idle));
        let close_both = |src: &TcpStream, dst: &TcpStream| {
            shared.closing.store(true, Ordering::Relaxed);
            let _ = src.shutdown(Shutdown::Both);
            let _ = dst.shutdown(Shutdown::Both);
        };
        loop {
            let buf = asm.spare(READ_CHUNK);
            let n = match src.read(buf) {
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
                    if shared.closing.load(Ordering::Relaxed) {
                        break;
                    }
                    if shared.idle_for() >= self.idle {
                        r.idle_timeout = true;
                        close_both(&src, &dst);
                        break;
                    }
                    continue;
                }
                Err(_) => {
                    asm.commit(READ_CHUNK, 0);
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
            let mut broken = false;
            loop {
                match asm.next_range() {
                    Ok(None) => break,
                    Ok(Some((ct, _, range))) => {
                        r.records += 1;
                        let bytes = asm.bytes(range);
                        if !encrypted {
                            match ct {
                                ContentType::Handshake => self.hello(shared, bytes, &mut r),
                                ContentType::ChangeCipherSpec => {
                                    encrypted = true;
                                    match self.client.start_tls_process(&StartTls {
                                        flow: shared.flow,
                                        direction: dir,
                                    }) {
                                        Ok(()) => inspect = true,
                                        Err(ClientError::Middlebox(
                                            MiddleboxError::NoKeyShare(_),
                                        )) => r.no_key_share = true,
                                        Err(e) => r.enclave_errors.push(e.to_string()),
                                    }
                                }
                                _ => {}
                            }
                        } else if inspect {
                            let record = RecordIn {
                                flow: shared.flow,
                                direction: dir,
                                record: bytes.to_vec(),
                            };
                            let batcher = self
                                .batcher
                                .as_ref()
                                .filter(|b| bytes.len() <= b.limits().max_record_bytes);
                            if batcher.is_some() {
                                batch.push(record);
                            } else {
                                // A record too large to batch: the ones before it go first,
                                // so that each direction's records are decrypted in order.
                                if let Some(b) = &self.batcher {
                                    self.flush(b, &mut batch, &mut r);
                                }
                                let t = Instant::now();
                                let verdict = self.client.reproduce_ssl_context(&record);
                                r.ecall_ns += t.elapsed().as_nanos() as u64;
                                r.inspected += 1;
                                count_verdict(&mut r, verdict);
                            }
                        } else {
                            r.uninspected += 1;
                        }
                    }
                    Err(e) => {
                        r.malformed = Some(e);
                        broken = true;
                        break;
                    }
                }
            }
            if let Some(b) = &self.batcher {
                self.flush(b, &mut batch, &mut r);
            }
            let forwarded = dst.write_all(asm.consumed());
            asm.compact();
            r.busy_ns += busy.elapsed().as_nanos() as u64;
            if broken || forwarded.is_err() {
                close_both(&src, &dst);
                break;
            }
        }
        r.cpu_ns = thread_cpu().saturating_sub(cpu0).as_nanos() as u64;
        r
    }

    /// Inspects the records collected for a batch (if any), counting the verdicts.
    fn flush(&self, b: &Batcher, batch: &mut Vec<RecordIn>, r: &mut DirReport) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let t = Instant::now();
        let verdicts = b.submit(self.client, std::mem::take(batch));
        r.ecall_ns += t.elapsed().as_nanos() as u64;
        r.inspected += n;
        match verdicts {
            Ok(v) => {
                for verdict in v {
                    count_verdict(r, verdict.map_err(ClientError::Middlebox));
                }
            }
            Err(e) => {
                if r.enclave_errors.len() < 8 {
                    r.enclave_errors.push(e);
                }
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
            Some(Hello::Client(cr)) => *lock() = Some(cr),
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

/// Counts the enclave's verdict on one record.
fn count_verdict(r: &mut DirReport, verdict: Result<Verdict, ClientError>) {
    match verdict {
        Ok(v) => {
            if v.content_type == ContentType::ApplicationData.byte() {
                r.app_records += 1;
                r.app_bytes += u64::from(v.plaintext_len);
                r.matches += u64::from(v.matches);
            }
        }
        Err(ClientError::Middlebox(MiddleboxError::Open {
            error: super::keys::OpenError::Authentication,
            ..
        })) => r.auth_failures += 1,
        Err(e) => {
            if r.enclave_errors.len() < 8 {
                r.enclave_errors.push(e.to_string());
            }
        }
    }
}
