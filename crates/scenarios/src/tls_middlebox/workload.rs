//! The flows: TLS 1.2 endpoints (rustls, `ECDHE_RSA_WITH_AES_256_GCM_SHA384` only) on
//! loopback, and the middlebox's host side, a TCP relay that reassembles records and hands
//! each encrypted one to the enclave.
//!
//! A flow: the client connects to the middlebox, which connects to the server and relays
//! both directions, one thread each. The client's key log seals the session's master secret
//! to the enclave's key and hands it over an out-of-band channel before the client sends its
//! ChangeCipherSpec, so the share is in the enclave before the first encrypted record. The
//! client first sends a small record naming its flow (so the server knows which stream to
//! expect), waits at a barrier until every flow is up, then sends its records from a
//! per-flow pool in which known patterns are planted at a known rate, and closes. The
//! server checks every byte against the stream it expects.
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
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, KeyLog, RootCertStore, ServerConfig, ServerConnection,
};

use super::keys::Direction;
use super::records::{ContentType, FrameError, Hello, Reassembler, hello_random};
use super::service::{
    Client, ClientError, DirectionCounts, EngineKey, EngineLimits, FlowInfo, KeyShare,
    MiddleboxError, RecordIn, Ruleset, StartTls, TlsRandoms, seal_share,
};
use crate::At;
use crate::ScenarioError;

/// The server name the certificate is for.
pub const SERVER_NAME: &str = "middlebox.ccbench.test";

/// The inspection patterns: upper case, digits and dashes, so the lower-case filler of the
/// payloads never contains one by chance.
pub const PATTERNS: [&[u8]; 4] = [
    b"CCBENCH-RULE-ALPHA",
    b"EXFIL-TOKEN-7731",
    b"DROP-TABLE-USERS",
    b"X-MALWARE-SIG-42",
];

/// A certificate authority and a server certificate with its RSA-2048 key.
pub struct Pki {
    root: CertificateDer<'static>,
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
}

impl Pki {
    /// Generates a fresh root and server certificate (RSA-2048: the suite is ECDHE_RSA).
    pub fn generate() -> Result<Pki, ScenarioError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose, RsaKeySize,
        };
        let rsa = || KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048);
        let root_key = rsa().at("generating the root key")?;
        let mut p = CertificateParams::default();
        p.distinguished_name
            .push(DnType::CommonName, "ccbench tls-middlebox root");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let root = p.self_signed(&root_key).at("signing the root")?;
        let issuer = Issuer::new(p, &root_key);
        let leaf_key = rsa().at("generating the server key")?;
        let mut p = CertificateParams::new(vec![SERVER_NAME.to_owned()]).at("server name")?;
        p.distinguished_name.push(DnType::CommonName, SERVER_NAME);
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.not_before = rcgen::date_time_ymd(2024, 1, 1);
        p.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let leaf = p
            .signed_by(&leaf_key, &issuer)
            .at("signing the server certificate")?;
        Ok(Pki {
            root: root.der().clone(),
            chain: vec![leaf.der().clone()],
            key: leaf_key.serialize_der(),
        })
    }
}

/// aws-lc-rs with the one suite the paper used.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(CryptoProvider {
        cipher_suites: vec![
            rustls::crypto::aws_lc_rs::cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ],
        ..rustls::crypto::aws_lc_rs::default_provider()
    })
}

/// The server's configuration: TLS 1.2 only, the one suite.
pub fn server_config(pki: &Pki) -> Result<Arc<ServerConfig>, ScenarioError> {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key.clone()));
    let mut c = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .at("server protocol versions")?
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), key)
        .at("server certificate")?;
    c.enable_secret_extraction = true;
    Ok(Arc::new(c))
}

/// The client's configuration: TLS 1.2 only, the one suite, `key_log` for the session
/// secrets.
pub fn client_config(
    pki: &Pki,
    key_log: Arc<dyn KeyLog>,
) -> Result<Arc<ClientConfig>, ScenarioError> {
    let mut roots = RootCertStore::empty();
    roots.add(pki.root.clone()).at("client trust anchor")?;
    let mut c = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .at("client protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.key_log = key_log;
    c.enable_secret_extraction = true;
    // Every connection a full handshake: each flow needs its own key share.
    c.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(c))
}

/// What a key log hands over: a client random and the master secret, in the clear inside
/// the endpoint's process only.
pub type ShareFn = dyn Fn([u8; 32], &[u8]) + Send + Sync;

/// The client's key log: `CLIENT_RANDOM` lines go to a function (the out-of-band share).
pub struct ShareLog(pub Arc<ShareFn>);

impl std::fmt::Debug for ShareLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShareLog")
    }
}

impl KeyLog for ShareLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        if label == "CLIENT_RANDOM"
            && let Ok(cr) = <[u8; 32]>::try_from(client_random)
        {
            (self.0)(cr, secret);
        }
    }

    fn will_log(&self, label: &str) -> bool {
        label == "CLIENT_RANDOM"
    }
}

/// How an endpoint's key share reaches the middlebox: sealed, then sent over a channel to
/// the middlebox's key-share listener, which acknowledges once the enclave holds it.
#[derive(Clone)]
pub struct ShareChannel {
    engine: EngineKey,
    tx: SyncSender<(KeyShare, SyncSender<()>)>,
}

impl ShareChannel {
    /// A channel to the engine whose public key is `engine`, and its receiving end.
    pub fn new(engine: EngineKey) -> (Self, Receiver<(KeyShare, SyncSender<()>)>) {
        let (tx, rx) = sync_channel(64);
        (ShareChannel { engine, tx }, rx)
    }

    /// Seals and sends one share; waits (at most 5 s) until the middlebox has handed it
    /// to the enclave.
    pub fn send(&self, client_random: [u8; 32], master: &[u8]) {
        let Ok(share) = seal_share(&self.engine, client_random, master) else {
            return;
        };
        let (ack_tx, ack_rx) = sync_channel(1);
        if self.tx.send((share, ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(Duration::from_secs(5));
        }
    }

    /// A key-log function that sends every share (the normal endpoint).
    pub fn share_fn(&self) -> Arc<ShareFn> {
        let me = self.clone();
        Arc::new(move |cr, secret| me.send(cr, secret))
    }
}

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
        })
    }

    /// The engine's public key (for endpoints' key shares).
    pub fn engine(&self) -> &EngineKey {
        &self.engine
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
                            let t = Instant::now();
                            let verdict = self.client.reproduce_ssl_context(&RecordIn {
                                flow: shared.flow,
                                direction: dir,
                                record: bytes.to_vec(),
                            });
                            r.ecall_ns += t.elapsed().as_nanos() as u64;
                            r.inspected += 1;
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

/// The payloads one flow sends: `pool` records of `size` bytes, lower-case filler with one
/// pattern planted in every `plant_every`-th record.
#[derive(Debug, Clone)]
pub struct Payloads {
    /// The records, in sending order (cycled).
    pub pool: Vec<Vec<u8>>,
    /// Patterns planted in each record (0 or 1).
    pub planted: Vec<u64>,
}

/// Records in each flow's pool.
pub const POOL: usize = 16;

impl Payloads {
    /// The payloads of flow `index`.
    pub fn new(index: u64, size: usize, plant_every: usize) -> Self {
        let mut x = 0x2545_f491_4f6c_dd1d_u64 ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut pool = Vec::with_capacity(POOL);
        let mut planted = Vec::with_capacity(POOL);
        for j in 0..POOL {
            let mut rec: Vec<u8> = (0..size)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b'a' + (x % 26) as u8
                })
                .collect();
            let mut n = 0;
            if plant_every > 0 && j % plant_every == 0 {
                let p = PATTERNS[(j / plant_every) % PATTERNS.len()];
                if p.len() <= size {
                    let at = (j * 37 + index as usize) % (size - p.len() + 1);
                    rec[at..at + p.len()].copy_from_slice(p);
                    n = 1;
                }
            }
            pool.push(rec);
            planted.push(n);
        }
        Payloads { pool, planted }
    }

    /// Patterns planted in the first `records` records sent.
    pub fn planted_in(&self, records: u64) -> u64 {
        let full = records / POOL as u64;
        let rest = (records % POOL as u64) as usize;
        full * self.planted.iter().sum::<u64>() + self.planted[..rest].iter().sum::<u64>()
    }

    /// Byte `offset` of the stream of records sent.
    fn expected(&self, offset: u64, out: &mut [u8]) {
        let size = self.pool[0].len() as u64;
        let mut off = offset;
        let mut i = 0;
        while i < out.len() {
            let rec = ((off / size) % POOL as u64) as usize;
            let at = (off % size) as usize;
            let n = (out.len() - i).min(size as usize - at);
            out[i..i + n].copy_from_slice(&self.pool[rec][at..at + n]);
            i += n;
            off += n as u64;
        }
    }
}

/// The first record of every flow: `FLOW` and the flow's index.
fn flow_hello(index: u64) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[..4].copy_from_slice(b"FLOW");
    h[4..].copy_from_slice(&index.to_be_bytes());
    h
}

/// What one pass sends.
#[derive(Debug, Clone)]
pub struct PassConfig {
    /// Concurrent flows.
    pub flows: usize,
    /// Plaintext bytes per record.
    pub record_size: usize,
    /// Records each flow sends per round.
    pub records_per_flow: u64,
    /// Rounds: every flow waits at a barrier, then sends `records_per_flow` records; a round
    /// starts when every server has all of the one before. The connections stay up across
    /// rounds (long-running flows, one handshake each).
    pub rounds: usize,
    /// A pattern in every this-many records of the pool (0: none).
    pub plant_every: usize,
    /// Socket timeouts: no endpoint waits longer than this for a byte.
    pub timeout: Duration,
}

/// What the server of one flow received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerReport {
    /// The flow's index (from its first record), if it arrived.
    pub index: Option<u64>,
    /// Plaintext bytes received after the first record.
    pub bytes: u64,
    /// Bytes expected.
    pub expected: u64,
    /// The first offset where a byte differed from what the client sent.
    pub mismatch_at: Option<u64>,
    /// Per round: when its last byte arrived, since the round's start.
    pub done_ns: Vec<Option<u64>>,
    /// An error that ended the connection early.
    pub error: Option<String>,
}

/// One pass over all flows.
#[derive(Debug, Clone, Default)]
pub struct PassResult {
    /// Per round: from its barrier until the last server had all of it, ns; 0 when some
    /// server never did.
    pub wall_ns: Vec<u64>,
    /// Each server's view.
    pub servers: Vec<ServerReport>,
    /// Each flow's middlebox view (empty without a middlebox).
    pub flows: Vec<FlowReport>,
    /// Errors on the client side.
    pub client_errors: Vec<String>,
    /// Patterns the clients planted, in total.
    pub planted: u64,
    /// Application-data records the clients sent (the first record of each flow included).
    pub records_sent: u64,
    /// Key shares handed to the enclave, and refused by it.
    pub shares: (u64, u64),
}

fn push<T>(m: &Mutex<Vec<T>>, v: T) {
    m.lock().unwrap_or_else(PoisonError::into_inner).push(v);
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Accepts exactly `n` connections, or fewer if `deadline` passes first.
fn accept_n(listener: &TcpListener, n: usize, deadline: Instant, mut on: impl FnMut(TcpStream)) {
    let _ = listener.set_nonblocking(true);
    let mut got = 0;
    while got < n && Instant::now() < deadline {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_nodelay(true);
                on(s);
                got += 1;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// When each round began, and how many servers have finished each.
struct Rounds {
    start: Mutex<Vec<Instant>>,
    done: Vec<AtomicU64>,
}

/// The server of one connection: handshake, read everything, check it as it arrives,
/// note when each round's last byte came, close.
fn serve(
    conn: TcpStream,
    config: Arc<ServerConfig>,
    cfg: &PassConfig,
    rounds: &Rounds,
) -> ServerReport {
    let mut rep = ServerReport {
        done_ns: vec![None; cfg.rounds],
        ..ServerReport::default()
    };
    let _ = conn.set_read_timeout(Some(cfg.timeout));
    let _ = conn.set_write_timeout(Some(cfg.timeout));
    let tls = match ServerConnection::new(config) {
        Ok(t) => t,
        Err(e) => {
            rep.error = Some(format!("server connection: {e}"));
            return rep;
        }
    };
    let mut s = rustls::StreamOwned::new(tls, conn);
    let mut hello = [0u8; 12];
    if let Err(e) = s.read_exact(&mut hello) {
        rep.error = Some(format!("reading the flow's first record: {e}"));
        return rep;
    }
    if &hello[..4] != b"FLOW" {
        rep.error = Some("the first record does not name a flow".into());
        return rep;
    }
    let index = u64::from_be_bytes(hello[4..].try_into().unwrap_or_default());
    rep.index = Some(index);
    let payloads = Payloads::new(index, cfg.record_size, cfg.plant_every);
    let per_round = (cfg.records_per_flow * cfg.record_size as u64).max(1);
    rep.expected = per_round * cfg.rounds as u64;
    let mut buf = vec![0u8; 64 << 10];
    let mut want = vec![0u8; 64 << 10];
    let mut rounds_seen = 0usize;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if rep.mismatch_at.is_none() {
                    payloads.expected(rep.bytes, &mut want[..n]);
                    if let Some(i) = buf[..n].iter().zip(&want[..n]).position(|(a, b)| a != b) {
                        rep.mismatch_at = Some(rep.bytes + i as u64);
                    }
                }
                rep.bytes += n as u64;
                let full = usize::try_from(rep.bytes / per_round)
                    .unwrap_or(usize::MAX)
                    .min(cfg.rounds);
                while rounds_seen < full {
                    let t0 = rounds
                        .start
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get(rounds_seen)
                        .copied();
                    rep.done_ns[rounds_seen] = t0.map(|t| t.elapsed().as_nanos() as u64);
                    rounds.done[rounds_seen].fetch_add(1, Ordering::Release);
                    rounds_seen += 1;
                }
            }
            Err(e) => {
                rep.error = Some(format!("server read: {e}"));
                break;
            }
        }
    }
    s.conn.send_close_notify();
    let _ = s.flush();
    let _ = s.sock.shutdown(Shutdown::Both);
    rep
}

/// Connects and completes the handshake; the connection is ready to send.
pub fn connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    timeout: Duration,
) -> Result<rustls::StreamOwned<ClientConnection, TcpStream>, String> {
    let sock = TcpStream::connect_timeout(&addr, timeout).map_err(io_err("connect"))?;
    let _ = sock.set_nodelay(true);
    sock.set_read_timeout(Some(timeout))
        .map_err(io_err("timeout"))?;
    sock.set_write_timeout(Some(timeout))
        .map_err(io_err("timeout"))?;
    let name = ServerName::try_from(SERVER_NAME).map_err(|e| e.to_string())?;
    let tls = ClientConnection::new(config, name).map_err(|e| format!("client connection: {e}"))?;
    let mut s = rustls::StreamOwned::new(tls, sock);
    while s.conn.is_handshaking() {
        s.conn
            .complete_io(&mut s.sock)
            .map_err(io_err("handshake"))?;
    }
    Ok(s)
}

/// Sends `n` records of the pool, continuing at record `sent`.
fn send_round(
    s: &mut rustls::StreamOwned<ClientConnection, TcpStream>,
    payloads: &Payloads,
    sent: &mut u64,
    n: u64,
) -> Result<(), String> {
    let mut pending = 0usize;
    for _ in 0..n {
        let rec = &payloads.pool[(*sent % POOL as u64) as usize];
        *sent += 1;
        s.conn.writer().write_all(rec).map_err(io_err("write"))?;
        pending += rec.len();
        if pending >= 16 << 10 {
            while s.conn.wants_write() {
                s.conn.write_tls(&mut s.sock).map_err(io_err("send"))?;
            }
            pending = 0;
        }
    }
    while s.conn.wants_write() {
        s.conn.write_tls(&mut s.sock).map_err(io_err("send"))?;
    }
    Ok(())
}

/// One client: handshake, the flow's first record, then per round the barrier and
/// `records_per_flow` records; close. It reaches every barrier whatever fails, so that no
/// one waits forever.
fn client(
    index: u64,
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    cfg: &PassConfig,
    barrier: &Barrier,
) -> Result<(), String> {
    let mut failed = None;
    let mut conn = match connect(addr, config, cfg.timeout).and_then(|mut s| {
        s.write_all(&flow_hello(index))
            .and_then(|()| s.flush())
            .map_err(io_err("first record"))?;
        Ok(s)
    }) {
        Ok(s) => Some(s),
        Err(e) => {
            failed = Some(e);
            None
        }
    };
    let payloads = Payloads::new(index, cfg.record_size, cfg.plant_every);
    let mut sent = 0u64;
    for _ in 0..cfg.rounds {
        barrier.wait();
        let Some(s) = conn.as_mut() else { continue };
        if let Err(e) = send_round(s, &payloads, &mut sent, cfg.records_per_flow) {
            failed = Some(e);
            conn = None;
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let Some(mut s) = conn else { return Ok(()) };
    s.conn.send_close_notify();
    while s.conn.wants_write() {
        s.conn.write_tls(&mut s.sock).map_err(io_err("send"))?;
    }
    let _ = s.sock.shutdown(Shutdown::Write);
    // Drain until the server closes (its close_notify), bounded by the read timeout.
    let mut sink = [0u8; 4096];
    loop {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Runs one pass: `cfg.flows` flows of `cfg.rounds` rounds, through `middlebox` if given
/// (else client to server directly). `share` replaces the normal key-share function
/// (bad-input tests).
pub fn run_pass(
    cfg: &PassConfig,
    pki: &Pki,
    middlebox: Option<&Middlebox<'_>>,
    share: Option<Arc<ShareFn>>,
) -> Result<PassResult, ScenarioError> {
    let cfg = &PassConfig {
        rounds: cfg.rounds.max(1),
        ..cfg.clone()
    };
    if cfg.record_size == 0 || cfg.record_size > 1 << 14 || cfg.flows == 0 {
        return Err(ScenarioError::Option(format!(
            "{} flows of {}-byte records: need at least one flow and 1 .. 16384 bytes per record",
            cfg.flows, cfg.record_size
        )));
    }
    let server_cfg = server_config(pki)?;
    let server = TcpListener::bind("127.0.0.1:0").at("binding the server")?;
    let server_addr = server.local_addr().at("server address")?;
    let mb_listener = match middlebox {
        Some(_) => Some(TcpListener::bind("127.0.0.1:0").at("binding the middlebox")?),
        None => None,
    };
    let connect_to = match &mb_listener {
        Some(l) => l.local_addr().at("middlebox address")?,
        None => server_addr,
    };
    let (channel, rx) = match middlebox {
        Some(m) => {
            let (c, rx) = ShareChannel::new(m.engine().clone());
            (Some(c), Some(rx))
        }
        None => (None, None),
    };
    let share_fn: Arc<ShareFn> = match (share, &channel) {
        (Some(f), _) => f,
        (None, Some(c)) => c.share_fn(),
        (None, None) => Arc::new(|_, _| {}),
    };
    let client_cfg = client_config(pki, Arc::new(ShareLog(share_fn)))?;
    // The key logs hold the share channel's senders: once every client is done with its
    // config, the middlebox's share listener sees the channel close and ends.
    let configs: Vec<Arc<ClientConfig>> = (0..cfg.flows).map(|_| client_cfg.clone()).collect();
    drop(client_cfg);
    drop(channel);
    let deadline = Instant::now() + cfg.timeout + Duration::from_secs(5);
    let barrier = Barrier::new(cfg.flows + 1);
    let rounds = Rounds {
        start: Mutex::new(Vec::new()),
        done: (0..cfg.rounds).map(|_| AtomicU64::new(0)).collect(),
    };
    let servers = Mutex::new(Vec::new());
    let flows = Mutex::new(Vec::new());
    let client_errors = Mutex::new(Vec::new());
    let shares = Mutex::new((0, 0));

    std::thread::scope(|s| {
        if let (Some(m), Some(rx)) = (middlebox, rx) {
            let shares = &shares;
            s.spawn(move || {
                *shares.lock().unwrap_or_else(PoisonError::into_inner) = m.serve_shares(rx);
            });
        }
        s.spawn(|| {
            accept_n(&server, cfg.flows, deadline, |conn| {
                let (config, servers, rounds) = (server_cfg.clone(), &servers, &rounds);
                s.spawn(move || push(servers, serve(conn, config, cfg, rounds)));
            })
        });
        if let (Some(m), Some(l)) = (middlebox, &mb_listener) {
            let flows = &flows;
            s.spawn(move || {
                accept_n(l, cfg.flows, deadline, |down| {
                    s.spawn(
                        move || match TcpStream::connect_timeout(&server_addr, cfg.timeout) {
                            Ok(up) => {
                                let _ = up.set_nodelay(true);
                                push(flows, m.relay(down, up))
                            }
                            Err(e) => {
                                let _ = down.shutdown(Shutdown::Both);
                                push(
                                    flows,
                                    FlowReport {
                                        dirs: [
                                            DirReport {
                                                enclave_errors: vec![format!(
                                                    "connecting upstream: {e}"
                                                )],
                                                ..DirReport::default()
                                            },
                                            DirReport::default(),
                                        ],
                                        ..FlowReport::default()
                                    },
                                )
                            }
                        },
                    );
                })
            });
        }
        for (index, config) in (0u64..).zip(configs) {
            let (barrier, errors) = (&barrier, &client_errors);
            s.spawn(move || {
                if let Err(e) = client(index, connect_to, config, cfg, barrier) {
                    push(errors, format!("flow {index}: {e}"));
                }
            });
        }
        for k in 0..cfg.rounds {
            if k > 0 {
                // A round is over when every server has all of it, or when the timeout
                // says one never will.
                let until = Instant::now() + cfg.timeout;
                while rounds.done[k - 1].load(Ordering::Acquire) < cfg.flows as u64
                    && Instant::now() < until
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            rounds
                .start
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Instant::now());
            barrier.wait();
        }
    });

    let servers = servers.into_inner().unwrap_or_else(PoisonError::into_inner);
    let wall_ns = (0..cfg.rounds)
        .map(|k| {
            let done: Vec<u64> = servers
                .iter()
                .filter_map(|s| s.done_ns.get(k).copied().flatten())
                .collect();
            if done.len() == cfg.flows {
                done.into_iter().max().unwrap_or(0)
            } else {
                0
            }
        })
        .collect();
    let per_flow = cfg.records_per_flow * cfg.rounds as u64;
    let planted = (0..cfg.flows as u64)
        .map(|i| Payloads::new(i, cfg.record_size, cfg.plant_every).planted_in(per_flow))
        .sum();
    Ok(PassResult {
        wall_ns,
        servers,
        flows: flows.into_inner().unwrap_or_else(PoisonError::into_inner),
        client_errors: client_errors
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner),
        planted,
        records_sent: cfg.flows as u64 * (per_flow + 1),
        shares: shares.into_inner().unwrap_or_else(PoisonError::into_inner),
    })
}
