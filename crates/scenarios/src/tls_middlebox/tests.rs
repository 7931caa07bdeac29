//! Known-answer tests against rustls's own traffic, the service's ecalls, the relay on
//! sockets, and every bad input of the issue.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use enclave::{Backend, Enclave, Registry};
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, ConnectionTrafficSecrets, ServerConnection};

use super::keys::{Direction, KeyBlock, MasterSecret};
use super::pki::{self, Pki, SERVER_NAME, ShareLog, client_config, server_config};
use super::records::{ContentType, FrameError, Hello, Reassembler, hello_random};
use super::relay::{FlowReport, Middlebox};
use super::service::{
    Client, ClientError, EngineLimits, FlowInfo, MiddleboxError, RecordIn, StartTls, TlsRandoms,
    register, seal_share,
};
use super::workload::{self, PATTERNS, PassConfig};

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
    let ccfg = client_config(pki(), Arc::new(log)).unwrap();
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

/// Our key schedule against rustls's: the same keys and IVs, from the key log's master
/// secret and the randoms read off the wire; and every record rustls wrote opens.
#[test]
fn key_block_and_records_match_rustls_traffic() {
    let cap = capture(&messages(), b"200 OK");
    assert_eq!(cap.received, cap.sent.concat());
    let (cr, sr) = randoms(&cap);
    assert_eq!(cr, cap.client_random);
    let kb = KeyBlock::derive(&MasterSecret(cap.master), &cr, &sr);
    assert_eq!(kb.key(Direction::ClientToServer).to_vec(), cap.client_key);
    assert_eq!(kb.salt(Direction::ClientToServer).to_vec(), cap.client_salt);
    assert_eq!(kb.key(Direction::ServerToClient).to_vec(), cap.server_key);
    assert_eq!(kb.salt(Direction::ServerToClient).to_vec(), cap.server_salt);

    for (dir, stream, want_app) in [
        (Direction::ClientToServer, &cap.c2s, cap.sent.clone()),
        (
            Direction::ServerToClient,
            &cap.s2c,
            vec![b"200 OK".to_vec()],
        ),
    ] {
        let mut opener = None;
        let mut app = Vec::new();
        let mut finished = false;
        let mut buf = Vec::new();
        for (ct, v, bytes) in records_of(stream) {
            match (&mut opener, ct) {
                (None, ContentType::ChangeCipherSpec) => opener = Some(kb.opener(dir).unwrap()),
                (None, _) => {}
                (Some(o), _) => {
                    let plain = o.open(ct, v, &bytes[5..], &mut buf).unwrap().to_vec();
                    match ct {
                        // Finished: handshake type 20, 12 bytes of verify data.
                        ContentType::Handshake => {
                            assert_eq!(plain[..4], [20, 0, 0, 12]);
                            finished = true;
                        }
                        ContentType::ApplicationData => app.push(plain),
                        _ => {}
                    }
                }
            }
        }
        assert!(finished, "{dir:?}: the encrypted Finished opened");
        assert_eq!(app, want_app, "{dir:?}");
    }
}

fn native() -> Enclave {
    Enclave::builder(super::service::SERVICE)
        .backend(Backend::Native)
        .start(&register(Registry::new()))
        .unwrap()
}

fn limits() -> EngineLimits {
    EngineLimits {
        max_flows: 8,
        max_pending_shares: 8,
    }
}

/// The seven ecalls in order over captured traffic: every record decrypts, the patterns
/// are counted, the counts come back at close.
#[test]
fn the_service_decrypts_and_inspects_captured_traffic() {
    let cap = capture(&messages(), b"ok");
    let (cr, sr) = randoms(&cap);
    let e = native();
    let c = Client::new(&e);
    let engine = c.init_decryption_engine(&limits()).unwrap();
    assert_eq!(
        c.load_ruleset(&super::service::Ruleset {
            patterns: PATTERNS.iter().map(|p| p.to_vec()).collect(),
        })
        .unwrap(),
        4
    );
    let share = seal_share(&engine, cr, &cap.master).unwrap();
    assert_eq!(c.init_out_of_band_key_share(&share).unwrap(), 1);
    c.set_info_flow(&FlowInfo::Open {
        flow: 7,
        client: "c".into(),
        server: "s".into(),
    })
    .unwrap();
    c.init_tls_process(&TlsRandoms {
        flow: 7,
        client_random: cr,
        server_random: sr,
    })
    .unwrap();
    let mut matches = 0;
    let mut app = 0;
    for (dir, stream) in [
        (Direction::ClientToServer, &cap.c2s),
        (Direction::ServerToClient, &cap.s2c),
    ] {
        let mut started = false;
        for (ct, _, bytes) in records_of(stream) {
            if !started {
                if ct == ContentType::ChangeCipherSpec {
                    c.start_tls_process(&StartTls {
                        flow: 7,
                        direction: dir,
                    })
                    .unwrap();
                    started = true;
                }
                continue;
            }
            let v = c
                .reproduce_ssl_context(&RecordIn {
                    flow: 7,
                    direction: dir,
                    record: bytes,
                })
                .unwrap();
            matches += v.matches;
            app += u32::from(v.content_type == 23);
        }
    }
    assert_eq!(matches, 3);
    assert_eq!(app, 5);
    let r = c.set_info_flow(&FlowInfo::Close { flow: 7 }).unwrap();
    let counts = r.counts.unwrap();
    assert_eq!(counts[0].app_records, 4);
    assert_eq!(counts[0].matches, 3);
    assert_eq!(
        counts[0].app_bytes,
        cap.sent.iter().map(|m| m.len() as u64).sum::<u64>()
    );
    assert_eq!(counts[1].app_records, 1);
    assert_eq!(
        counts[0].decrypted, 5,
        "the Finished and four application records"
    );
    assert_eq!(r.shares_pending, 0, "the flow's share went with it");
}

#[test]
fn the_service_refuses_bad_calls_without_panicking() {
    let e = native();
    let c = Client::new(&e);
    fn refused<T>(r: Result<T, ClientError>) -> MiddleboxError {
        match r {
            Err(ClientError::Middlebox(m)) => m,
            Err(other) => panic!("expected a refusal, got {other}"),
            Ok(_) => panic!("expected a refusal, got a reply"),
        }
    }
    // Before the engine exists.
    assert_eq!(
        refused(c.set_info_flow(&FlowInfo::Close { flow: 1 })),
        MiddleboxError::NotInitialized
    );
    let engine = c
        .init_decryption_engine(&EngineLimits {
            max_flows: 1,
            max_pending_shares: 1,
        })
        .unwrap();
    assert_eq!(
        refused(c.start_tls_process(&StartTls {
            flow: 9,
            direction: Direction::ClientToServer
        })),
        MiddleboxError::UnknownFlow(9)
    );
    c.set_info_flow(&FlowInfo::Open {
        flow: 1,
        client: String::new(),
        server: String::new(),
    })
    .unwrap();
    assert_eq!(
        refused(c.set_info_flow(&FlowInfo::Open {
            flow: 1,
            client: String::new(),
            server: String::new()
        })),
        MiddleboxError::DuplicateFlow(1)
    );
    assert_eq!(
        refused(c.set_info_flow(&FlowInfo::Open {
            flow: 2,
            client: String::new(),
            server: String::new()
        })),
        MiddleboxError::TooManyFlows(1)
    );
    assert_eq!(
        refused(c.start_tls_process(&StartTls {
            flow: 1,
            direction: Direction::ClientToServer
        })),
        MiddleboxError::NoRandoms(1)
    );
    c.init_tls_process(&TlsRandoms {
        flow: 1,
        client_random: [1; 32],
        server_random: [2; 32],
    })
    .unwrap();
    // A key share for an unknown client random: held, and it does not unlock flow 1.
    let stray = seal_share(&engine, [3; 32], &[9; 48]).unwrap();
    assert_eq!(c.init_out_of_band_key_share(&stray).unwrap(), 1);
    assert_eq!(
        refused(c.start_tls_process(&StartTls {
            flow: 1,
            direction: Direction::ClientToServer
        })),
        MiddleboxError::NoKeyShare(1)
    );
    // The share limit holds.
    let another = seal_share(&engine, [4; 32], &[9; 48]).unwrap();
    assert_eq!(
        refused(c.init_out_of_band_key_share(&another)),
        MiddleboxError::TooManyShares(1)
    );
    // A share sealed for a different client random, or tampered, or not 48 bytes.
    let mut moved = seal_share(&engine, [1; 32], &[9; 48]).unwrap();
    moved.client_random = [5; 32];
    assert_eq!(
        refused(c.init_out_of_band_key_share(&moved)),
        MiddleboxError::BadKeyShare
    );
    let mut flipped = seal_share(&engine, [1; 32], &[9; 48]).unwrap();
    flipped.ciphertext[0] ^= 1;
    assert_eq!(
        refused(c.init_out_of_band_key_share(&flipped)),
        MiddleboxError::BadKeyShare
    );
    let short = seal_share(&engine, [1; 32], &[9; 47]).unwrap();
    assert_eq!(
        refused(c.init_out_of_band_key_share(&short)),
        MiddleboxError::BadKeyShare
    );
    // Records before the direction started, and records that are not one whole record.
    let rec = |record: Vec<u8>| RecordIn {
        flow: 1,
        direction: Direction::ServerToClient,
        record,
    };
    assert!(matches!(
        refused(c.reproduce_ssl_context(&rec(vec![23, 3, 3, 0, 30]))),
        MiddleboxError::BadRecord(_)
    ));
    assert!(matches!(
        refused(c.reproduce_ssl_context(&rec(vec![99, 3, 3, 0, 0]))),
        MiddleboxError::BadRecord(_)
    ));
    assert!(matches!(
        refused(c.reproduce_ssl_context(&rec(vec![23, 3, 3, 0, 1, 0]))),
        MiddleboxError::NotStarted { .. }
    ));
    // A close returns the stray share as still pending.
    let r = c.set_info_flow(&FlowInfo::Close { flow: 1 }).unwrap();
    assert_eq!(r.shares_pending, 1);
    // Garbage that does not decode, and an unknown call id: errors, not panics.
    assert!(e.ecall(6, &[0xff; 3]).is_err());
    assert!(e.ecall(6, &[]).is_err());
    assert!(e.ecall(42, &[]).is_err());
}

#[test]
fn secrets_stay_out_of_errors() {
    let e = native();
    let c = Client::new(&e);
    let engine = c.init_decryption_engine(&limits()).unwrap();
    let master = [0xa7u8; 48];
    let mut bad = seal_share(&engine, [1; 32], &master).unwrap();
    bad.ciphertext[3] ^= 0x40;
    let err = c.init_out_of_band_key_share(&bad).unwrap_err().to_string();
    assert!(!err.to_lowercase().contains("a7a7"), "{err}");
    assert!(!format!("{:?}", MasterSecret(master)).contains("167"));
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

#[test]
fn the_relay_inspects_a_replayed_session() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    mb.client()
        .init_out_of_band_key_share(
            &seal_share(mb.engine(), cap.client_random, &cap.master).unwrap(),
        )
        .unwrap();
    let r = replay(&mb, cap.c2s.clone(), cap.s2c.clone(), None);
    assert_eq!(r.dirs[0].app_records, 4, "{r:?}");
    assert_eq!(r.dirs[0].matches, 3);
    assert_eq!(r.dirs[1].app_records, 1);
    assert_eq!(r.dirs[0].auth_failures + r.dirs[1].auth_failures, 0);
    assert!(
        r.dirs
            .iter()
            .all(|d| d.malformed.is_none() && d.truncated.is_none() && d.enclave_errors.is_empty()),
        "{r:?}"
    );
    assert_eq!(r.enclave.unwrap()[0].matches, 3);
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

#[test]
fn a_tampered_record_is_counted_and_forwarded_and_the_rest_still_open() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    mb.client()
        .init_out_of_band_key_share(
            &seal_share(mb.engine(), cap.client_random, &cap.master).unwrap(),
        )
        .unwrap();
    let mut c2s = cap.c2s.clone();
    let (at, len) = app_record(&c2s, 1);
    c2s[at + len / 2] ^= 0x01;
    let r = replay(&mb, c2s, cap.s2c.clone(), None);
    assert_eq!(r.dirs[0].auth_failures, 1, "{r:?}");
    assert_eq!(r.dirs[0].app_records, 3);
    assert_eq!(
        r.dirs[0].matches, 1,
        "the tampered record held two of the three patterns"
    );
    assert_eq!(r.enclave.unwrap()[0].auth_failures, 1);
}

#[test]
fn a_wrong_key_share_fails_every_record_and_no_share_passes_through() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    let mut wrong = cap.master;
    wrong[0] ^= 0x80;
    mb.client()
        .init_out_of_band_key_share(&seal_share(mb.engine(), cap.client_random, &wrong).unwrap())
        .unwrap();
    let r = replay(&mb, cap.c2s.clone(), cap.s2c.clone(), None);
    // Finished and four application records one way, Finished and one the other.
    assert_eq!(r.dirs[0].auth_failures, 5, "{r:?}");
    assert_eq!(r.dirs[1].auth_failures, 2);
    assert_eq!(r.dirs[0].app_records, 0);

    // Another session, whose share never came: passed through uninspected.
    let cap2 = capture(&messages(), b"fine");
    let r = replay(&mb, cap2.c2s.clone(), cap2.s2c.clone(), None);
    assert!(r.dirs[0].no_key_share && r.dirs[1].no_key_share, "{r:?}");
    assert_eq!(r.dirs[0].uninspected, 5);
    assert_eq!(r.dirs[0].inspected, 0);
}

#[test]
fn a_key_share_for_an_unknown_client_random_stays_unclaimed() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    let stray = seal_share(mb.engine(), [0x5a; 32], &[1; 48]).unwrap();
    assert_eq!(mb.client().init_out_of_band_key_share(&stray).unwrap(), 1);
    mb.client()
        .init_out_of_band_key_share(
            &seal_share(mb.engine(), cap.client_random, &cap.master).unwrap(),
        )
        .unwrap();
    let r = replay(&mb, cap.c2s.clone(), cap.s2c.clone(), None);
    assert_eq!(r.dirs[0].app_records, 4, "the other flow is served: {r:?}");
    assert_eq!(
        r.shares_pending, 1,
        "the stray share is reported as unclaimed"
    );
}

#[test]
fn malformed_records_close_the_flow() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    mb.client()
        .init_out_of_band_key_share(
            &seal_share(mb.engine(), cap.client_random, &cap.master).unwrap(),
        )
        .unwrap();
    // A length beyond 2^14 + 2048, after the first application record.
    let (at, len) = app_record(&cap.c2s, 0);
    let mut too_long = cap.c2s[..at + len].to_vec();
    too_long.extend_from_slice(&[23, 3, 3, 0x48, 0x01]);
    too_long.extend_from_slice(&[0; 64]);
    let r = replay(&mb, too_long, cap.s2c.clone(), None);
    assert_eq!(
        r.dirs[0].malformed,
        Some(FrameError::TooLong { len: 0x4801 }),
        "{r:?}"
    );
    assert_eq!(
        r.dirs[0].app_records, 1,
        "records before the bad one were inspected"
    );
    // An unknown content type.
    let cap = capture(&messages(), b"fine");
    mb.client()
        .init_out_of_band_key_share(
            &seal_share(mb.engine(), cap.client_random, &cap.master).unwrap(),
        )
        .unwrap();
    let mut unknown = cap.c2s.clone();
    unknown.extend_from_slice(&[0x42, 3, 3, 0, 2, 0, 0]);
    let r = replay(&mb, unknown, cap.s2c.clone(), None);
    assert_eq!(
        r.dirs[0].malformed,
        Some(FrameError::UnknownType(0x42)),
        "{r:?}"
    );
    assert_eq!(r.dirs[0].app_records, 4);
}

#[test]
fn a_client_that_disconnects_mid_record_is_truncated() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    mb.client()
        .init_out_of_band_key_share(
            &seal_share(mb.engine(), cap.client_random, &cap.master).unwrap(),
        )
        .unwrap();
    // Cut inside the third application record's body.
    let (at, len) = app_record(&cap.c2s, 2);
    let r = replay(&mb, cap.c2s.clone(), cap.s2c.clone(), Some(at + len / 2));
    assert_eq!(r.dirs[0].app_records, 2, "{r:?}");
    assert_eq!(
        r.dirs[0].truncated,
        Some(FrameError::Truncated {
            have: len / 2,
            want: len
        })
    );
    // Cut inside a header.
    let cap = capture(&messages(), b"fine");
    mb.client()
        .init_out_of_band_key_share(
            &seal_share(mb.engine(), cap.client_random, &cap.master).unwrap(),
        )
        .unwrap();
    let (at, _) = app_record(&cap.c2s, 1);
    let r = replay(&mb, cap.c2s.clone(), cap.s2c.clone(), Some(at + 3));
    assert_eq!(
        r.dirs[0].truncated,
        Some(FrameError::Truncated { have: 3, want: 5 }),
        "{r:?}"
    );
}

#[test]
fn an_idle_flow_is_closed() {
    let e = native();
    let mut mb = middlebox(&e);
    mb.idle = Duration::from_millis(300);
    let down_l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up_l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _client = TcpStream::connect(down_l.local_addr().unwrap()).unwrap();
    let (down, _) = down_l.accept().unwrap();
    let up = TcpStream::connect(up_l.local_addr().unwrap()).unwrap();
    let _server = up_l.accept().unwrap();
    let start = std::time::Instant::now();
    let r = mb.relay(down, up);
    assert!(r.dirs.iter().any(|d| d.idle_timeout), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// Whole passes over sockets: direct, and through the native middlebox, with a bad flow
/// (garbage) in the middle of good ones.
#[test]
fn passes_deliver_every_byte_and_find_every_pattern() {
    let cfg = PassConfig {
        flows: 4,
        record_size: 1024,
        records_per_flow: 20,
        rounds: 2,
        plant_every: 4,
        timeout: Duration::from_secs(10),
    };
    let direct = workload::run_pass(&cfg, pki(), None, None).unwrap();
    assert!(super::analysis::problems(&direct, 4, false).is_empty());
    let e = native();
    let mb = middlebox(&e);
    let pass = std::thread::scope(|s| {
        // A garbage flow alongside.
        let bad = s.spawn(|| {
            let down_l = TcpListener::bind("127.0.0.1:0").unwrap();
            let up_l = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut c = TcpStream::connect(down_l.local_addr().unwrap()).unwrap();
            let (down, _) = down_l.accept().unwrap();
            let up = TcpStream::connect(up_l.local_addr().unwrap()).unwrap();
            c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            mb.relay(down, up)
        });
        let pass = workload::run_pass(&cfg, pki(), Some(&mb), None).unwrap();
        assert!(bad.join().unwrap().dirs[0].malformed.is_some());
        pass
    });
    let p = super::analysis::problems(&pass, 4, true);
    assert!(p.is_empty(), "{p:?}");
    assert_eq!(pass.planted, 4 * 10);
    assert_eq!(
        pass.flows.iter().map(|f| f.dirs[0].matches).sum::<u64>(),
        40
    );
    assert_eq!(pass.shares, (4, 0));
    assert_eq!(pass.wall_ns.len(), 2);
    assert!(pass.wall_ns.iter().all(|&w| w > 0));
}

#[test]
fn a_pass_with_a_wrong_key_share_is_caught_by_the_checks() {
    let cfg = PassConfig {
        flows: 2,
        record_size: 256,
        records_per_flow: 8,
        rounds: 1,
        plant_every: 4,
        timeout: Duration::from_secs(10),
    };
    let e = native();
    let mb = middlebox(&e);
    let (chan, rx) = pki::ShareChannel::new(mb.engine().clone());
    let wrong: Arc<pki::ShareFn> = Arc::new(move |cr, secret: &[u8]| {
        let mut s = secret.to_vec();
        s[5] ^= 1;
        chan.send(cr, &s);
    });
    let pass = std::thread::scope(|s| {
        s.spawn(|| mb.serve_shares(rx));
        workload::run_pass(&cfg, pki(), Some(&mb), Some(wrong)).unwrap()
    });
    // The bytes still arrive (the relay forwards what fails authentication) ...
    assert!(
        pass.servers
            .iter()
            .all(|s| s.bytes == s.expected && s.mismatch_at.is_none())
    );
    // ... but the check sees nothing decrypted.
    let p = super::analysis::problems(&pass, 2, true);
    assert!(
        p.iter().any(|m| m.contains("authentication failures")),
        "{p:?}"
    );
}

#[test]
fn a_pass_refuses_sizes_it_cannot_send() {
    let cfg = PassConfig {
        flows: 1,
        record_size: 0,
        records_per_flow: 1,
        rounds: 1,
        plant_every: 4,
        timeout: Duration::from_secs(5),
    };
    assert!(workload::run_pass(&cfg, pki(), None, None).is_err());
    let too_big = PassConfig {
        record_size: (1 << 14) + 1,
        ..cfg
    };
    assert!(workload::run_pass(&too_big, pki(), None, None).is_err());
}
