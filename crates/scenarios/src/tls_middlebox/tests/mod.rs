//! Tests of the middlebox, by side: `service` holds the known-answer tests against rustls's
//! own traffic and the enclave's ecalls, `relay` the host side on real sockets, whole passes
//! and every bad input of the issue. This module holds their fixtures: captured TLS 1.2
//! sessions, a native enclave, a relay.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use enclave::{Backend, Enclave, Registry};
use measure::env::MachineTicks;
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, ConnectionTrafficSecrets, ServerConnection};

use super::keys::{Direction, KeyBlock, MasterSecret};
use super::pki::{self, Pki, SERVER_NAME, ShareLog, client_config, server_config};
use super::records::{ContentType, FrameError, Hello, Reassembler, hello_random};
use super::relay::{FlowReport, Middlebox};
use super::service::{
    AttestedEngine, Client, ClientError, EngineKey, EngineLimits, FlowInfo, MiddleboxError,
    RecordIn, StartTls, TlsRandoms, Trust, register, seal_share, verify_engine,
};
use super::workload::{self, PATTERNS, PassConfig};

mod live;
mod relay;
mod service;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::generate().unwrap())
}

/// A TLS 1.2 session between rustls endpoints in memory, every byte captured.
struct Capture {
    c2s: Vec<u8>,
    s2c: Vec<u8>,
    master: [u8; 48],
    client_random: [u8; 32],
    /// The application data the client sent, one record each.
    sent: Vec<Vec<u8>>,
    /// What the server read.
    received: Vec<u8>,
    /// rustls's own client write key and implicit IV.
    client_key: Vec<u8>,
    client_salt: Vec<u8>,
    /// rustls's own server write key and implicit IV.
    server_key: Vec<u8>,
    server_salt: Vec<u8>,
}

fn move_tls(
    from: &mut dyn FnMut(&mut Vec<u8>) -> usize,
    to: &mut dyn FnMut(&[u8]),
    log: &mut Vec<u8>,
) {
    let mut buf = Vec::new();
    while from(&mut buf) > 0 {}
    log.extend_from_slice(&buf);
    to(&buf);
}

fn capture(messages: &[Vec<u8>], server_says: &[u8]) -> Capture {
    type Logged = Option<([u8; 32], Vec<u8>)>;
    let secrets: Arc<Mutex<Logged>> = Arc::default();
    let s2 = secrets.clone();
    let log = ShareLog(Arc::new(move |cr, secret| {
        *s2.lock().unwrap() = Some((cr, secret.to_vec()));
    }));
    // Only this capture reads rustls's own traffic keys, to check ours against them.
    let mut ccfg = (*client_config(pki(), Arc::new(log)).unwrap()).clone();
    ccfg.enable_secret_extraction = true;
    let ccfg = Arc::new(ccfg);
    let scfg = server_config(pki()).unwrap();
    let mut c = ClientConnection::new(ccfg, ServerName::try_from(SERVER_NAME).unwrap()).unwrap();
    let mut s = ServerConnection::new(scfg).unwrap();
    let (mut c2s, mut s2c) = (Vec::new(), Vec::new());
    let c_to_s = |c: &mut ClientConnection, s: &mut ServerConnection, log: &mut Vec<u8>| {
        move_tls(
            &mut |b| c.write_tls(b).unwrap(),
            &mut |bytes| {
                let mut rd = bytes;
                while !rd.is_empty() {
                    s.read_tls(&mut rd).unwrap();
                }
                s.process_new_packets().unwrap();
            },
            log,
        )
    };
    let s_to_c = |s: &mut ServerConnection, c: &mut ClientConnection, log: &mut Vec<u8>| {
        move_tls(
            &mut |b| s.write_tls(b).unwrap(),
            &mut |bytes| {
                let mut rd = bytes;
                while !rd.is_empty() {
                    c.read_tls(&mut rd).unwrap();
                }
                c.process_new_packets().unwrap();
            },
            log,
        )
    };
    for _ in 0..10 {
        if !c.is_handshaking() && !s.is_handshaking() {
            break;
        }
        c_to_s(&mut c, &mut s, &mut c2s);
        s_to_c(&mut s, &mut c, &mut s2c);
    }
    assert!(!c.is_handshaking() && !s.is_handshaking());
    for m in messages {
        c.writer().write_all(m).unwrap();
    }
    c_to_s(&mut c, &mut s, &mut c2s);
    s.writer().write_all(server_says).unwrap();
    s_to_c(&mut s, &mut c, &mut s2c);
    let mut received = Vec::new();
    let _ = s.reader().read_to_end(&mut received);
    let (cr, master) = secrets
        .lock()
        .unwrap()
        .clone()
        .expect("the key log saw the session");
    let key_iv = |x: ConnectionTrafficSecrets| match x {
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            (key.as_ref().to_vec(), iv.as_ref()[..4].to_vec())
        }
        _ => panic!("not AES-256-GCM"),
    };
    let ex = c.dangerous_extract_secrets().unwrap();
    let (client_key, client_salt) = key_iv(ex.tx.1);
    let (server_key, server_salt) = key_iv(ex.rx.1);
    Capture {
        c2s,
        s2c,
        master: master.try_into().unwrap(),
        client_random: cr,
        sent: messages.to_vec(),
        received,
        client_key,
        client_salt,
        server_key,
        server_salt,
    }
}

fn records_of(stream: &[u8]) -> Vec<(ContentType, u16, Vec<u8>)> {
    let mut r = Reassembler::new();
    r.push(stream);
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push((rec.content_type, rec.version, rec.bytes.to_vec()));
    }
    r.finish().unwrap();
    out
}

fn randoms(cap: &Capture) -> ([u8; 32], [u8; 32]) {
    let cr = records_of(&cap.c2s)
        .iter()
        .find_map(|(_, _, b)| match hello_random(&b[5..]) {
            Some(Hello::Client(r)) => Some(r),
            _ => None,
        })
        .unwrap();
    let sr = records_of(&cap.s2c)
        .iter()
        .find_map(|(_, _, b)| match hello_random(&b[5..]) {
            Some(Hello::Server(r)) => Some(r),
            _ => None,
        })
        .unwrap();
    (cr, sr)
}

fn messages() -> Vec<Vec<u8>> {
    vec![
        b"GET / HTTP/1.1\r\nHost: middlebox.ccbench.test\r\n\r\n".to_vec(),
        [
            b"lead ".as_slice(),
            PATTERNS[0],
            b" and ",
            PATTERNS[1],
            b" tail",
        ]
        .concat(),
        vec![b'q'; 1024],
        [vec![b'z'; 16000], PATTERNS[2].to_vec()].concat(),
    ]
}

/// The platform key directory of this test process (a fresh emulated platform).
fn key_dir() -> &'static std::path::Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// What the tests' endpoints trust: this test platform and the middlebox's measurement in
/// this test binary.
fn trust() -> &'static Trust {
    static TRUST: OnceLock<Trust> = OnceLock::new();
    TRUST.get_or_init(|| Trust::of_this_binary(Some(key_dir())).unwrap())
}

/// The engine key, verified as an endpoint verifies it.
fn attested(engine: &EngineKey) -> AttestedEngine {
    verify_engine(engine, trust()).unwrap()
}

/// The middlebox service on the native backend, with this test platform's keys (it quotes
/// its engine key with them).
fn native() -> Enclave {
    Enclave::builder(super::service::SERVICE)
        .backend(Backend::Native)
        .sealing_key_dir(key_dir())
        .start(&register(Registry::new()))
        .unwrap()
}

fn limits() -> EngineLimits {
    EngineLimits {
        max_flows: 8,
        max_pending_shares: 8,
    }
}

/// A scripted replay of captured traffic through the relay on real sockets: the client
/// side sends its first record, waits for the server's whole flight, then sends the rest;
/// the server side waits for the client's first record, then sends its flight.
fn replay(
    mb: &Middlebox<'_>,
    c2s: Vec<u8>,
    s2c: Vec<u8>,
    cut_client_at: Option<usize>,
) -> FlowReport {
    let first = super::records::header(&c2s).unwrap().unwrap().2;
    let down_l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up_l = TcpListener::bind("127.0.0.1:0").unwrap();
    let (down_a, up_a) = (down_l.local_addr().unwrap(), up_l.local_addr().unwrap());
    let s2c_len = s2c.len();
    std::thread::scope(|s| {
        let server = s.spawn(move || {
            let (mut sock, _) = up_l.accept().unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut got = vec![0u8; first];
            sock.read_exact(&mut got).unwrap();
            sock.write_all(&s2c).unwrap();
            let mut rest = Vec::new();
            let _ = sock.read_to_end(&mut rest);
            let _ = sock.shutdown(Shutdown::Both);
            [got, rest].concat()
        });
        let client = s.spawn(move || {
            let mut sock = TcpStream::connect(down_a).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let end = cut_client_at.unwrap_or(c2s.len());
            sock.write_all(&c2s[..first]).unwrap();
            let mut flight = vec![0u8; s2c_len];
            let _ = sock.read_exact(&mut flight);
            sock.write_all(&c2s[first..end]).unwrap();
            let _ = sock.shutdown(Shutdown::Write);
            let mut rest = Vec::new();
            let _ = sock.read_to_end(&mut rest);
        });
        let (down, _) = down_l.accept().unwrap();
        let up = TcpStream::connect(up_a).unwrap();
        let report = mb.relay(down, up);
        client.join().unwrap();
        let at_server = server.join().unwrap();
        assert!(at_server.len() <= cut_client_at.unwrap_or(usize::MAX).max(first));
        report
    })
}

fn middlebox(e: &Enclave) -> Middlebox<'_> {
    let mut mb = Middlebox::start(Client::new(e), &limits(), &PATTERNS).unwrap();
    mb.tick = Duration::from_millis(20);
    mb.idle = Duration::from_secs(5);
    mb
}

/// Hands the captured session's key share to the middlebox's enclave, as the client's key
/// log would.
fn share_key(mb: &Middlebox<'_>, cap: &Capture) {
    let share = seal_share(&attested(mb.engine()), cap.client_random, &cap.master).unwrap();
    mb.client().init_out_of_band_key_share(&share).unwrap();
}

/// The byte offset of the `n`-th application record of a stream, and its length.
fn app_record(stream: &[u8], n: usize) -> (usize, usize) {
    let mut off = 0;
    let mut seen = 0;
    for (ct, _, bytes) in records_of(stream) {
        if ct == ContentType::ApplicationData {
            if seen == n {
                return (off, bytes.len());
            }
            seen += 1;
        }
        off += bytes.len();
    }
    panic!("no application record {n}")
}

/// CPU time from a `/proc/PID/stat` line (a command name with spaces and a `)` in it), and
/// nothing where a field is missing: unknown, not 0.
#[test]
fn process_cpu_time_is_read_or_unknown() {
    let stat = "42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1 0";
    assert_eq!(super::cpu_ns_of_stat(stat, 100), Some(2_000_000_000));
    assert_eq!(super::cpu_ns_of_stat("42 (x) S 1 2 3", 100), None);
    assert_eq!(super::cpu_ns_of_stat("no parenthesis", 100), None);
    assert_eq!(super::process_cpu_ns(None), None);
    assert!(super::process_cpu_ns(Some(std::process::id())).is_some());
}

/// The machine's idle cores from two `/proc/stat` readings, and the spare cores the advisor
/// gets: never more than the machine left idle, whatever our own CPU time says (a busy
/// neighbour makes our processes wait, and look light).
#[test]
fn spare_cores_count_the_whole_machine() {
    let at = |idle: u64, busy: u64| {
        let text = format!(
            "cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n\
             cpu1 1 0 0 1 0 0 0 0 0 0\nintr 5\n"
        );
        MachineTicks::parse(&text)
    };
    let (t0, t1) = (at(1000, 1000), at(1030, 1070));
    // 100 ticks pass: 30 idle, 70 busy, over 2 CPUs: 0.6 cores idle.
    let idle = super::idle_cores_between(t0, t1).unwrap();
    assert!((idle - 0.6).abs() < 1e-9, "{idle}");
    assert_eq!(super::idle_cores_between(t0, t0), None);
    assert_eq!(super::idle_cores_between(None, t1), None);
    // Our processes kept 0.2 cores busy: 1.8 would look spare, but the machine had 0.6.
    assert_eq!(super::spare_cores(2, Some(0.2), Some(0.6)), Some(0.6));
    assert_eq!(super::spare_cores(2, Some(1.5), Some(0.9)), Some(0.5));
    assert_eq!(super::spare_cores(2, Some(0.2), None), Some(1.8));
    assert_eq!(super::spare_cores(2, None, Some(0.6)), None);
}

/// The warm-up round is dropped, an unknown round is left out, never timed as 0, and each
/// round is divided by its own records (all flows).
#[test]
fn per_record_times_leave_unknown_rounds_out() {
    let r = workload::PassResult {
        wall_ns: vec![Some(1), Some(100), None, Some(200)],
        records_per_round: vec![1, 5, 5, 5],
        warm_up_rounds: 1,
        ..workload::PassResult::default()
    };
    assert_eq!(super::per_record(&r, 2), [10.0, 20.0]);
    assert_eq!(super::measured_round_records(&r, 2), 10);
    // Two warm-up rounds (a round target): both are dropped.
    let r = workload::PassResult {
        wall_ns: vec![Some(1), Some(50), Some(100), None, Some(300)],
        records_per_round: vec![1, 3, 5, 5, 5],
        warm_up_rounds: 2,
        ..workload::PassResult::default()
    };
    assert_eq!(super::per_record(&r, 2), [10.0, 30.0]);
    assert_eq!(super::measured_round_records(&r, 2), 10);
}
