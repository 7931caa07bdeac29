//! The flows: TLS 1.2 endpoints on loopback, client and server, and one pass of them, directly
//! or through the middlebox's relay ([`super::relay`]).
//!
//! A flow: the client connects to the middlebox, which connects to the server and relays
//! both directions, one thread each. The client's key log seals the session's master secret
//! to the enclave's key and hands it over an out-of-band channel before the client sends its
//! ChangeCipherSpec, so the share is in the enclave before the first encrypted record. The
//! client first sends a small record naming its flow (so the server knows which stream to
//! expect), waits at a barrier until every flow is up, then sends its records from a
//! per-flow pool in which known patterns are planted at a known rate, and closes once the
//! last round is over for every flow. The server checks every byte against the stream it
//! expects.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};

use super::pki::{Pki, SERVER_NAME, ShareChannel, ShareFn, ShareLog, client_config, server_config};
use super::relay::{DirReport, FlowReport, Middlebox};
use super::service::{AttestError, Trust, verify_engine};
use harness::At;
use harness::ScenarioError;

/// The inspection patterns: upper case, digits and dashes, so the lower-case filler of the
/// payloads never contains one by chance.
pub const PATTERNS: [&[u8]; 4] = [
    b"CCBENCH-RULE-ALPHA",
    b"EXFIL-TOKEN-7731",
    b"DROP-TABLE-USERS",
    b"X-MALWARE-SIG-42",
];

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

    /// Where `got`, received from byte `offset` of the stream of records sent, first
    /// differs from what was sent; `None` where it is the same. Compares in place, a
    /// record's piece at a time, so that the check costs the servers little beside the
    /// TLS work that is measured.
    fn mismatch(&self, offset: u64, got: &[u8]) -> Option<usize> {
        let size = self.pool[0].len() as u64;
        let mut off = offset;
        let mut i = 0;
        while i < got.len() {
            let rec = ((off / size) % POOL as u64) as usize;
            let at = (off % size) as usize;
            let n = (got.len() - i).min(size as usize - at);
            let (sent, seen) = (&self.pool[rec][at..at + n], &got[i..i + n]);
            if sent != seen {
                return sent
                    .iter()
                    .zip(seen)
                    .position(|(a, b)| a != b)
                    .map(|p| i + p);
            }
            i += n;
            off += n as u64;
        }
        None
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
    /// With a target, round 0 (the warm-up) sends `records_per_flow` records a flow and
    /// every later round as many as round 0's pace says fill the target time (never fewer
    /// than `records_per_flow`, at most [`MAX_ROUND_SCALE`] times as many): each
    /// configuration is measured over about the same time, however fast it is. `None`:
    /// every round sends `records_per_flow`.
    pub round_target: Option<Duration>,
}

/// Rounds of `cfg` that warm up: two with a round target and at least three rounds (the
/// first round's pace, ramp-up and all, undersizes the rounds after it: the quick preset's
/// rounds sized from it alone lasted 29-118 ms of a 150 ms target, most 30-70), else one.
pub fn warm_up_rounds(cfg: &PassConfig) -> usize {
    if cfg.round_target.is_some() && cfg.rounds >= 3 {
        2
    } else {
        1
    }
}

/// How many times `records_per_flow` a calibrated round sends at the most.
pub const MAX_ROUND_SCALE: u64 = 256;

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
    /// Per round: from its barrier until the last server had all of it, ns; `None` when
    /// some server never did (the round's time is unknown).
    pub wall_ns: Vec<Option<u64>>,
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
    /// Records each flow sent in each round (the first [`warm_up_rounds`](Self::warm_up_rounds)
    /// warm up).
    pub records_per_round: Vec<u64>,
    /// Rounds that warm up before the measured ones (which are all the same size): one, or
    /// two with a round target (the first sized by the configuration, the second from the
    /// first's pace to about the target; the measured rounds from the second's).
    pub warm_up_rounds: usize,
    /// Key shares handed to the enclave, and refused by it.
    pub shares: (u64, u64),
    /// What the clients made of the middlebox's key before sealing any share.
    pub attestation: Attestation,
    /// Key shares the clients' key logs withheld because the attestation was refused.
    pub shares_withheld: u64,
}

/// The clients' check of the middlebox's engine key (emulated attestation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Attestation {
    /// No middlebox: nothing to attest.
    #[default]
    NotNeeded,
    /// The quote verified against this trust and binds the key: shares were sealed to it.
    Verified(Trust),
    /// The quote was refused: no share was sealed or sent, for this reason.
    Refused(AttestError),
}

fn push<T>(m: &Mutex<Vec<T>>, v: T) {
    m.lock().unwrap_or_else(PoisonError::into_inner).push(v);
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Each round's wall time: the last of the `flows` servers' finishing times; `None` when
/// fewer than `flows` servers finished it (a time that is not known is not written as 0).
pub fn round_walls(servers: &[ServerReport], flows: usize, rounds: usize) -> Vec<Option<u64>> {
    (0..rounds)
        .map(|k| {
            let done: Vec<u64> = servers
                .iter()
                .filter_map(|s| s.done_ns.get(k).copied().flatten())
                .collect();
            if done.len() == flows {
                done.into_iter().max()
            } else {
                None
            }
        })
        .collect()
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
    /// Records each flow sends in each round; 0 until set, always before the round starts.
    records: Vec<AtomicU64>,
}

impl Rounds {
    /// Plaintext bytes a flow has sent by the end of round `k`; `None` while a round up to
    /// `k` has no size yet.
    fn end_of(&self, k: usize, record_size: usize) -> Option<u64> {
        let mut total = 0u64;
        for r in &self.records[..=k] {
            let n = r.load(Ordering::Acquire);
            if n == 0 {
                return None;
            }
            total += n * record_size as u64;
        }
        Some(total)
    }
}

/// When round `k` started.
fn round_start(rounds: &Rounds, k: usize) -> Option<Instant> {
    rounds
        .start
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(k)
        .copied()
}

/// Records a flow sends in each round after the warm-up that took `warm_up` for
/// `records` records a flow, so that a round lasts about `target`: never fewer than
/// `records`, at most [`MAX_ROUND_SCALE`] times as many.
pub fn calibrated_records(records: u64, warm_up: Duration, target: Duration) -> u64 {
    let scale = target.as_secs_f64() / warm_up.as_secs_f64().max(1e-6);
    let n = (records as f64 * scale).ceil();
    (n as u64).clamp(records, records.saturating_mul(MAX_ROUND_SCALE))
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
    let mut buf = vec![0u8; 64 << 10];
    let mut rounds_seen = 0usize;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if rep.mismatch_at.is_none()
                    && let Some(i) = payloads.mismatch(rep.bytes, &buf[..n])
                {
                    rep.mismatch_at = Some(rep.bytes + i as u64);
                }
                rep.bytes += n as u64;
                while rounds_seen < cfg.rounds
                    && rounds
                        .end_of(rounds_seen, cfg.record_size)
                        .is_some_and(|end| rep.bytes >= end)
                {
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
/// `records_per_flow` records; then one barrier more, passed when the last round is over
/// for every flow, and close. (Closing at once put the first flows' ends, and the
/// middlebox's teardown of them, inside the others' last round: `docs/scenario-tls-middlebox.md`
/// has the passes before and after.) It reaches every barrier whatever fails, so that no one
/// waits forever.
fn client(
    index: u64,
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    cfg: &PassConfig,
    barrier: &Barrier,
    rounds: &Rounds,
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
    for k in 0..cfg.rounds {
        barrier.wait();
        let Some(s) = conn.as_mut() else { continue };
        let n = rounds.records[k].load(Ordering::Acquire);
        if let Err(e) = send_round(s, &payloads, &mut sent, n) {
            failed = Some(e);
            conn = None;
        }
    }
    barrier.wait();
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
/// (else client to server directly), whose engine key the clients verify against their
/// `Trust` before sealing any share (refused: they seal and send none, and the result says
/// why). `share` replaces the normal key-share function (bad-input tests).
pub fn run_pass(
    cfg: &PassConfig,
    pki: &Pki,
    middlebox: Option<(&Middlebox<'_>, &Trust)>,
    share: Option<Arc<ShareFn>>,
) -> Result<PassResult, ScenarioError> {
    let (middlebox, trust) = match middlebox {
        Some((m, t)) => (Some(m), Some(t)),
        None => (None, None),
    };
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
    // The clients' check, once, before any share: the quote the host handed over with the
    // engine key must verify against what the clients trust and bind that very key.
    let (channel, rx, attestation) = match (middlebox, trust) {
        (Some(m), Some(t)) => match verify_engine(m.engine(), t) {
            Ok(engine) => {
                let (c, rx) = ShareChannel::new(engine);
                (Some(c), Some(rx), Attestation::Verified(*t))
            }
            Err(e) => (None, None, Attestation::Refused(e)),
        },
        _ => (None, None, Attestation::NotNeeded),
    };
    let withheld = Arc::new(AtomicU64::new(0));
    let share_fn: Arc<ShareFn> = match (share, &channel) {
        (Some(f), _) => f,
        (None, Some(c)) => c.share_fn(),
        (None, None) => {
            let withheld = withheld.clone();
            Arc::new(move |_, _| {
                withheld.fetch_add(1, Ordering::Relaxed);
            })
        }
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
        records: (0..cfg.rounds)
            .map(|k| {
                AtomicU64::new(if k == 0 {
                    cfg.records_per_flow.max(1)
                } else {
                    0
                })
            })
            .collect(),
    };
    let servers = Mutex::new(Vec::new());
    let flows = Mutex::new(Vec::new());
    let client_errors = Mutex::new(Vec::new());
    let shares = Mutex::new((0, 0));
    // Per round: when the middlebox had inspected all of it, since the round's start (a
    // batching middlebox inspects off the forwarding path, so that may come after the
    // servers have every byte; the round lasts until both).
    let mut inspected_ns: Vec<Option<u64>> = vec![None; cfg.rounds];
    let warm_up_rounds = warm_up_rounds(cfg);

    let pass_over = AtomicBool::new(false);
    std::thread::scope(|s| {
        if let Some(m) = middlebox {
            let pass_over = &pass_over;
            s.spawn(move || m.serve_inspection(pass_over));
        }
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
            let (barrier, errors, rounds) = (&barrier, &client_errors, &rounds);
            s.spawn(move || {
                if let Err(e) = client(index, connect_to, config, cfg, barrier, rounds) {
                    push(errors, format!("flow {index}: {e}"));
                }
            });
        }
        // A round is over when every server has all of it, or when the timeout says one
        // never will, and the middlebox has inspected all of it.
        let round_over = |k: usize, inspected: &mut Option<u64>| {
            let until = Instant::now() + cfg.timeout;
            while rounds.done[k].load(Ordering::Acquire) < cfg.flows as u64
                && Instant::now() < until
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            if let (Some(m), Some(start)) = (middlebox, round_start(&rounds, k))
                && let Some(at) = m.settle_inspection()
            {
                *inspected = Some(at.saturating_duration_since(start).as_nanos() as u64);
            }
        };
        for k in 0..cfg.rounds {
            if k > 0 {
                round_over(k - 1, &mut inspected_ns[k - 1]);
            }
            if k == 1 || (k == 2 && warm_up_rounds == 2) {
                // The pace of the round before sizes this one and the rest (set before they
                // start): the first warm-up's pace sizes the second, whose pace, at about
                // the target length, sizes the measured rounds.
                let before = rounds.records[k - 1].load(Ordering::Acquire);
                let n = match (cfg.round_target, round_start(&rounds, k - 1)) {
                    (Some(target), Some(t0)) => calibrated_records(before, t0.elapsed(), target),
                    _ => before,
                };
                for r in &rounds.records[k..] {
                    r.store(n, Ordering::Release);
                }
            }
            rounds
                .start
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Instant::now());
            barrier.wait();
        }
        let last = cfg.rounds - 1;
        round_over(last, &mut inspected_ns[last]);
        // Only now do the clients close (see `client`).
        barrier.wait();
        // The flows still closing inspect what is left of theirs themselves.
        pass_over.store(true, Ordering::Release);
    });

    let servers = servers.into_inner().unwrap_or_else(PoisonError::into_inner);
    let wall_ns: Vec<Option<u64>> = round_walls(&servers, cfg.flows, cfg.rounds)
        .into_iter()
        .zip(&inspected_ns)
        .map(|(w, i)| Some(w?.max(i.unwrap_or(0))))
        .collect();
    let records_per_round: Vec<u64> = rounds
        .records
        .iter()
        .map(|r| r.load(Ordering::Acquire))
        .collect();
    let per_flow: u64 = records_per_round.iter().sum();
    let mut servers = servers;
    for sv in &mut servers {
        sv.expected = per_flow * cfg.record_size as u64;
    }
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
        records_per_round,
        warm_up_rounds,
        shares: shares.into_inner().unwrap_or_else(PoisonError::into_inner),
        shares_withheld: if matches!(attestation, Attestation::Refused(_)) {
            withheld.load(Ordering::Relaxed)
        } else {
            0
        },
        attestation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check finds no difference in the bytes sent, from any offset across record and
    /// pool boundaries, and the exact first changed byte otherwise.
    #[test]
    fn the_servers_check_finds_the_first_changed_byte() {
        let p = Payloads::new(3, 100, 4);
        let stream: Vec<u8> = p
            .pool
            .iter()
            .cycle()
            .take(2 * POOL)
            .flatten()
            .copied()
            .collect();
        for (off, len) in [(0, 1), (0, 100), (50, 120), (99, 2), (1550, 200), (1, 3000)] {
            let got = &stream[off..off + len];
            assert_eq!(p.mismatch(off as u64, got), None, "{off} {len}");
            for bad in [0, len / 2, len - 1] {
                let mut changed = got.to_vec();
                changed[bad] ^= 0x20;
                assert_eq!(
                    p.mismatch(off as u64, &changed),
                    Some(bad),
                    "{off} {len} {bad}"
                );
            }
        }
    }
}
