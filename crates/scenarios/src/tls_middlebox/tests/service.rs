//! Our key schedule and the enclave's seven ecalls against rustls's own traffic.

use super::*;

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
        c.load_ruleset(&super::super::service::Ruleset {
            patterns: PATTERNS.iter().map(|p| p.to_vec()).collect(),
        })
        .unwrap(),
        4
    );
    let share = seal_share(&attested(&engine), cr, &cap.master).unwrap();
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
    // The native backend decrypted on this thread: its buffer holds no plaintext now.
    let (len, zeros) = super::super::service::decryption_buffer();
    assert!(len > 0 && zeros, "{len} bytes, all zero: {zeros}");
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
    let stray = seal_share(&attested(&engine), [3; 32], &[9; 48]).unwrap();
    assert_eq!(c.init_out_of_band_key_share(&stray).unwrap(), 1);
    assert_eq!(
        refused(c.start_tls_process(&StartTls {
            flow: 1,
            direction: Direction::ClientToServer
        })),
        MiddleboxError::NoKeyShare(1)
    );
    // The share limit holds.
    let another = seal_share(&attested(&engine), [4; 32], &[9; 48]).unwrap();
    assert_eq!(
        refused(c.init_out_of_band_key_share(&another)),
        MiddleboxError::TooManyShares(1)
    );
    // A share sealed for a different client random, or tampered, or not 48 bytes.
    let mut moved = seal_share(&attested(&engine), [1; 32], &[9; 48]).unwrap();
    moved.client_random = [5; 32];
    assert_eq!(
        refused(c.init_out_of_band_key_share(&moved)),
        MiddleboxError::BadKeyShare
    );
    let mut flipped = seal_share(&attested(&engine), [1; 32], &[9; 48]).unwrap();
    flipped.ciphertext[0] ^= 1;
    assert_eq!(
        refused(c.init_out_of_band_key_share(&flipped)),
        MiddleboxError::BadKeyShare
    );
    let short = seal_share(&attested(&engine), [1; 32], &[9; 47]).unwrap();
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
    let mut bad = seal_share(&attested(&engine), [1; 32], &master).unwrap();
    bad.ciphertext[3] ^= 0x40;
    let err = c.init_out_of_band_key_share(&bad).unwrap_err().to_string();
    assert!(!err.to_lowercase().contains("a7a7"), "{err}");
    assert!(!format!("{:?}", MasterSecret(master)).contains("167"));
}

/// The endpoints' configurations do not export their traffic secrets: the workload's key
/// share goes through the key log, and only the capture above turns extraction on.
#[test]
fn endpoint_configs_keep_secret_extraction_off() {
    let log = ShareLog(Arc::new(|_, _| {}));
    assert!(
        !client_config(pki(), Arc::new(log))
            .unwrap()
            .enable_secret_extraction
    );
    assert!(!server_config(pki()).unwrap().enable_secret_extraction);
}

/// A key pair of the host's own, to substitute for the enclave's.
fn host_key() -> Vec<u8> {
    use hpke::{Kem, Serializable};
    let (_, public) = hpke::kem::X25519HkdfSha256::derive_keypair(&[0x42; 32]);
    public.to_bytes().to_vec()
}

#[test]
fn the_engine_key_comes_with_a_quote_that_binds_it() {
    let e = native();
    let engine = Client::new(&e).init_decryption_engine(&limits()).unwrap();
    let a = verify_engine(&engine, trust()).unwrap();
    assert_eq!(a.public(), engine.public.as_slice());
    assert_eq!(a.trust(), trust());
    let data =
        enclave::attest::verify(&engine.quote, &trust().platform, &trust().measurement).unwrap();
    assert_eq!(
        data.0[..32],
        super::super::service::engine_key_hash(&engine.public)
    );
    assert_eq!(data.0[32..], [0; 32]);
    // Each engine has a fresh key, and a quote of it.
    let again = Client::new(&e).init_decryption_engine(&limits()).unwrap();
    assert_ne!(again.public, engine.public);
    assert!(verify_engine(&again, trust()).is_ok());
}

#[test]
fn a_host_that_substitutes_the_engine_key_is_caught() {
    use super::super::service::{AttestError, engine_key_hash};
    use enclave::attest::{QuoteError, Quoter, ReportData};
    use enclave::seal::{DEFAULT_SIGNER, Identity, RootKey};
    let e = native();
    let genuine = Client::new(&e).init_decryption_engine(&limits()).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    // The host's key with the enclave's genuine quote: the quote binds another key.
    let swapped = EngineKey {
        public: host_key(),
        quote: genuine.quote.clone(),
    };
    assert_eq!(
        verify_engine(&swapped, trust()),
        Err(AttestError::KeyNotBound {
            quoted: hex(&engine_key_hash(&genuine.public)),
            handed: hex(&engine_key_hash(&host_key())),
        })
    );
    let why = verify_engine(&swapped, trust()).unwrap_err().to_string();
    assert!(why.contains("the host substituted the key"), "{why}");
    // The host's key quoted by an enclave of its own on this platform: another measurement.
    let mut data = [0u8; 64];
    data[..32].copy_from_slice(&engine_key_hash(&host_key()));
    let root = RootKey::load_or_create(key_dir()).unwrap();
    let own = Quoter::new(
        &root,
        Identity::from_code(
            b"the host's own enclave",
            super::super::service::SERVICE,
            DEFAULT_SIGNER,
        ),
    )
    .unwrap();
    let forged = EngineKey {
        public: host_key(),
        quote: own.quote(&ReportData(data)),
    };
    assert!(matches!(
        verify_engine(&forged, trust()),
        Err(AttestError::Quote(QuoteError::WrongMeasurement { .. }))
    ));
    // Quoted with the right measurement on a platform of the host's own: another platform.
    // (A host that reads this platform's key file could sign it here too: the emulation's
    // limit, documented in `enclave::attest`.)
    let elsewhere = Quoter::new(
        &RootKey::generate().unwrap(),
        Identity {
            measurement: trust().measurement,
            signer: enclave::seal::signer_hash(DEFAULT_SIGNER),
        },
    )
    .unwrap();
    let forged = EngineKey {
        public: host_key(),
        quote: elsewhere.quote(&ReportData(data)),
    };
    assert!(matches!(
        verify_engine(&forged, trust()),
        Err(AttestError::Quote(QuoteError::WrongPlatform { .. }))
    ));
    // A changed byte of the genuine quote, and bytes that are no quote at all.
    let mut tampered = genuine.clone();
    tampered.quote[100] ^= 1;
    assert_eq!(
        verify_engine(&tampered, trust()),
        Err(AttestError::Quote(QuoteError::BadSignature))
    );
    let mut empty = genuine.clone();
    empty.quote.clear();
    assert!(matches!(
        verify_engine(&empty, trust()),
        Err(AttestError::Quote(QuoteError::Truncated { .. }))
    ));
    // The genuine key and quote still verify.
    assert!(verify_engine(&genuine, trust()).is_ok());
}

#[test]
fn an_enclave_without_platform_keys_cannot_start_the_engine() {
    let e = Enclave::builder(super::super::service::SERVICE)
        .backend(Backend::Native)
        .start(&register(Registry::new()))
        .unwrap();
    match Client::new(&e).init_decryption_engine(&limits()) {
        Err(ClientError::Middlebox(MiddleboxError::Attestation(m))) => {
            assert!(m.contains("no platform keys"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

/// The batch ecall and the batcher: records of one flow (and a stray one) in batches within
/// the limits, one outcome each in order, the same counts as one ecall per record; a batch
/// over the enclave's bounds is refused whole. Each direction's records go in one segment,
/// as a relay's read does, which the batcher cuts at the limits.
#[test]
fn batches_decrypt_every_record_in_order_within_their_limits() {
    use super::super::batch::{BatchLimits, Batcher, Segment, Tally, TallyCounts};
    use super::super::service::{MAX_BATCH_RECORDS, RecordBatch};
    use std::sync::Arc;
    let cap = capture(&messages(), b"ok");
    let (cr, sr) = randoms(&cap);
    let e = native();
    let c = Client::new(&e);
    let engine = c.init_decryption_engine(&limits()).unwrap();
    c.load_ruleset(&super::super::service::Ruleset {
        patterns: PATTERNS.iter().map(|p| p.to_vec()).collect(),
    })
    .unwrap();
    let share = seal_share(&attested(&engine), cr, &cap.master).unwrap();
    c.init_out_of_band_key_share(&share).unwrap();
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
    let mut records = Vec::new();
    let mut segments = Vec::new();
    for (dir, stream) in [
        (Direction::ClientToServer, &cap.c2s),
        (Direction::ServerToClient, &cap.s2c),
    ] {
        let mut started = false;
        let mut segment = Segment::new(7, dir);
        for (ct, _, bytes) in records_of(stream) {
            if started {
                segment.push(&bytes);
                records.push(RecordIn {
                    flow: 7,
                    direction: dir,
                    record: bytes,
                });
            } else if ct == ContentType::ChangeCipherSpec {
                c.start_tls_process(&StartTls {
                    flow: 7,
                    direction: dir,
                })
                .unwrap();
                started = true;
            }
        }
        segments.push(segment);
    }
    let runs: Vec<usize> = segments.iter().map(Segment::len).collect();
    assert!(runs[0] > 2, "{runs:?}: a segment to cut");
    let b = Batcher::new(BatchLimits {
        max_records: 2,
        max_bytes: usize::MAX,
        max_queued_bytes: usize::MAX,
        shards: 1,
    });
    let (tally, stray_tally) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
    // Nobody serves the queue: the submitter drains it, two records an ecall, in order (a
    // record out of order fails to authenticate: TLS 1.2 sequence numbers are implicit).
    b.submit(c, &tally, &mut segments[0]);
    assert!(segments[0].is_empty(), "handed over");
    // A record of a flow that is not open, between the directions.
    let mut stray = Segment::new(99, Direction::ClientToServer);
    stray.push(&records[1].record);
    b.submit(c, &stray_tally, &mut stray);
    b.submit(c, &tally, &mut segments[1]);
    b.finish(c, 7, &tally);
    b.finish(c, 99, &stray_tally);
    assert_eq!((tally.pending(), stray_tally.pending()), (0, 0));
    let n = records.len();
    assert_eq!(
        b.stats(),
        (
            (runs[0].div_ceil(2) + runs[1].div_ceil(2) + 1) as u64,
            n as u64 + 1
        ),
        "batches of at most 2, the stray one alone"
    );
    let got = tally.take();
    assert_eq!(
        (got.app_records, got.matches, got.auth_failures),
        (5, 3, 0),
        "{got:?}"
    );
    assert!(got.errors.is_empty(), "{:?}", got.errors);
    assert_eq!(stray_tally.take().errors, ["unknown flow 99"]);
    assert_eq!(tally.take(), TallyCounts::default(), "take resets");
    assert!(b.settle(c).is_some());
    let r = c.set_info_flow(&FlowInfo::Close { flow: 7 }).unwrap();
    let counts = r.counts.unwrap();
    assert_eq!((counts[0].app_records, counts[0].matches), (4, 3));
    assert_eq!(counts[1].app_records, 1);
    // The limits are clamped so that any record fits in a batch and in the queue.
    let tiny = Batcher::new(BatchLimits {
        max_records: 0,
        max_bytes: 1,
        max_queued_bytes: 0,
        shards: 0,
    });
    let l = tiny.limits();
    assert_eq!((l.max_records, l.shards), (1, 1));
    assert!(l.max_bytes >= 5 + (1 << 14) + 2048);
    assert!(l.max_queued_bytes >= l.max_bytes);
    // Over the enclave's bounds: refused whole, nothing decrypted.
    let huge = RecordBatch {
        records: vec![records[0].clone(); MAX_BATCH_RECORDS + 1],
    };
    match c.reproduce_ssl_context_batch(&huge) {
        Err(ClientError::Middlebox(MiddleboxError::BatchTooLarge { records, .. })) => {
            assert_eq!(records, MAX_BATCH_RECORDS as u64 + 1)
        }
        other => panic!("{other:?}"),
    }
}

/// Many threads submitting at once into a queue that holds four records: submitters wait
/// for room, hand the drainer's role on, and nobody waits forever (a role left held would
/// strand the queue); every record's outcome reaches its own submitter's tally. Once with
/// nobody serving the queues (the submitters drain them), once with three shards each
/// served by a thread of its own. Records of flows that are not open make each outcome name
/// its flow.
#[test]
fn concurrent_submitters_each_get_their_own_outcomes() {
    use super::super::batch::{BatchLimits, Batcher, Segment, Tally};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let e = native();
    let c = Client::new(&e);
    // Not a valid record (no flow is open): 4 KiB, so that four fill the queue.
    let mut record = vec![23, 3, 3, 0x0f, 0xfb];
    record.resize(4096, 0);
    for served in [false, true] {
        let b = Batcher::new(BatchLimits {
            max_records: 4,
            max_bytes: 0,
            max_queued_bytes: 0,
            shards: if served { 3 } else { 1 },
        });
        assert!(b.limits().max_queued_bytes < 5 * record.len());
        let until = AtomicBool::new(false);
        std::thread::scope(|s| {
            if served {
                for shard in 0..b.shards() {
                    let (b, until) = (&b, &until);
                    s.spawn(move || b.serve(c, shard, until));
                }
            }
            let submitters: Vec<_> = (0..8u64)
                .map(|t| {
                    let (b, record) = (&b, &record);
                    s.spawn(move || {
                        let tally = Arc::new(Tally::default());
                        let mut errors = Vec::new();
                        let mut segment = Segment::new(t, Direction::ClientToServer);
                        for k in 0..40u64 {
                            for _ in 0..1 + (t + k) % 6 {
                                segment.push(record);
                            }
                            b.submit(c, &tally, &mut segment);
                            errors.extend(tally.take().errors);
                        }
                        b.finish(c, t, &tally);
                        assert_eq!(tally.pending(), 0, "thread {t}");
                        errors.extend(tally.take().errors);
                        assert!(!errors.is_empty(), "thread {t}");
                        for e in errors {
                            assert_eq!(e, format!("unknown flow {t}"), "thread {t}");
                        }
                    })
                })
                .collect();
            for h in submitters {
                h.join().unwrap();
            }
            assert!(b.settle(c).is_some());
            until.store(true, Ordering::Release);
        });
        assert_eq!(b.serving_priority().is_some(), served);
        let (batches, records) = b.stats();
        let expected: u64 = (0..8u64)
            .flat_map(|t| (0..40u64).map(move |k| 1 + (t + k) % 6))
            .sum();
        assert_eq!(records, expected, "served: {served}");
        assert!(batches >= expected.div_ceil(4), "{batches}");
    }
}

mod in_place {
    use super::super::super::service::{RecordBatch, RecordView};
    use super::*;
    use harness::codec::{self, Encode};
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = RecordIn> {
        (
            any::<u64>(),
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(flow, s2c, record)| RecordIn {
                flow,
                direction: if s2c {
                    Direction::ServerToClient
                } else {
                    Direction::ClientToServer
                },
                record,
            })
    }

    proptest! {
        /// The enclave reads a batch in place exactly as the owned decoding would: the same
        /// records from an encoding, and an error wherever the owned decoding fails (a cut,
        /// a byte changed, bytes added).
        #[test]
        fn batches_read_in_place_as_they_decode(
            records in prop::collection::vec(record(), 0..12),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
            extra in prop::collection::vec(any::<u8>(), 1..4),
        ) {
            let batch = RecordBatch { records };
            let bytes = batch.encode();
            let read = RecordView::decode_batch("b", &bytes).unwrap();
            prop_assert_eq!(read, batch.records.iter().map(RecordView::from).collect::<Vec<_>>());
            let agree = |b: &[u8]| {
                let owned = codec::decode::<RecordBatch>("b", b);
                let placed = RecordView::decode_batch("b", b);
                match (owned, placed) {
                    (Ok(o), Ok(p)) => o.records.iter().map(RecordView::from).collect::<Vec<_>>() == p,
                    (Err(o), Err(p)) => o.what == p.what,
                    _ => false,
                }
            };
            prop_assert!(agree(&bytes[..cut.index(bytes.len() + 1)]));
            let mut changed = bytes.clone();
            if !changed.is_empty() {
                let i = flip.0.index(changed.len());
                changed[i] ^= flip.1;
            }
            prop_assert!(agree(&changed));
            let mut longer = bytes.clone();
            longer.extend_from_slice(&extra);
            prop_assert!(agree(&longer));
        }

        /// And a single record likewise.
        #[test]
        fn records_read_in_place_as_they_decode(r in record(), cut in any::<prop::sample::Index>()) {
            let bytes = r.encode();
            prop_assert_eq!(RecordView::decode("r", &bytes).unwrap(), RecordView::from(&r));
            let short = &bytes[..cut.index(bytes.len())];
            prop_assert!(RecordView::decode("r", short).is_err());
            prop_assert!(codec::decode::<RecordIn>("r", short).is_err());
        }
    }
}
