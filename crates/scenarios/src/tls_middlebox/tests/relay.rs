//! The relay on real sockets: a replayed session, every bad input of the issue, whole
//! passes.

use super::*;

#[test]
fn the_relay_inspects_a_replayed_session() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    share_key(&mb, &cap);
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

#[test]
fn a_tampered_record_is_counted_and_forwarded_and_the_rest_still_open() {
    let cap = capture(&messages(), b"fine");
    let e = native();
    let mb = middlebox(&e);
    share_key(&mb, &cap);
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
        .init_out_of_band_key_share(
            &seal_share(&attested(mb.engine()), cap.client_random, &wrong).unwrap(),
        )
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
    let stray = seal_share(&attested(mb.engine()), [0x5a; 32], &[1; 48]).unwrap();
    assert_eq!(mb.client().init_out_of_band_key_share(&stray).unwrap(), 1);
    share_key(&mb, &cap);
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
    share_key(&mb, &cap);
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
    share_key(&mb, &cap);
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
    share_key(&mb, &cap);
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
    share_key(&mb, &cap);
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

/// Rounds sized from the warm-ups' pace: the second warm-up is sized from the first's
/// pace, the measured rounds from the second's, all as many; every byte arrives and is
/// counted in the right round, and the native middlebox finds every pattern of the larger
/// pass.
#[test]
fn calibrated_rounds_are_sized_from_the_warm_up_and_checked_whole() {
    let cfg = PassConfig {
        flows: 3,
        record_size: 512,
        records_per_flow: 2,
        rounds: 4,
        plant_every: 4,
        timeout: Duration::from_secs(10),
        round_target: Some(Duration::from_millis(40)),
    };
    let e = native();
    let mb = middlebox(&e);
    let pass = workload::run_pass(&cfg, pki(), Some((&mb, trust())), None).unwrap();
    let p = super::super::analysis::problems(&pass, 3, true);
    assert!(p.is_empty(), "{p:?}");
    let n = &pass.records_per_round;
    assert_eq!(n.len(), 4);
    assert_eq!(pass.warm_up_rounds, 2);
    assert_eq!(n[0], 2);
    assert!(n[1] > 2 && n[2] >= n[1] && n[2] == n[3], "{n:?}");
    assert!(n[2] <= 2 * workload::MAX_ROUND_SCALE.pow(2), "{n:?}");
    let per_flow: u64 = n.iter().sum();
    assert_eq!(pass.records_sent, 3 * (per_flow + 1));
    for s in &pass.servers {
        assert_eq!(s.bytes, per_flow * 512);
    }
    assert!(pass.wall_ns.iter().all(|w| w.is_some_and(|w| w > 0)));
    assert_eq!(
        pass.flows.iter().map(|f| f.dirs[0].matches).sum::<u64>(),
        pass.planted
    );
}

#[test]
fn calibration_scales_within_its_bounds() {
    use workload::{MAX_ROUND_SCALE, calibrated_records};
    let ms = Duration::from_millis;
    assert_eq!(calibrated_records(10, ms(10), ms(100)), 100);
    // Never fewer than the warm-up's records, never more than the scale allows.
    assert_eq!(calibrated_records(10, ms(500), ms(100)), 10);
    assert_eq!(
        calibrated_records(10, Duration::ZERO, ms(100)),
        10 * MAX_ROUND_SCALE
    );
    assert_eq!(
        calibrated_records(10, Duration::from_micros(100), ms(100)),
        10 * MAX_ROUND_SCALE
    );
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
        round_target: None,
    };
    let direct = workload::run_pass(&cfg, pki(), None, None).unwrap();
    assert!(super::super::analysis::problems(&direct, 4, false).is_empty());
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
        let pass = workload::run_pass(&cfg, pki(), Some((&mb, trust())), None).unwrap();
        assert!(bad.join().unwrap().dirs[0].malformed.is_some());
        pass
    });
    let p = super::super::analysis::problems(&pass, 4, true);
    assert!(p.is_empty(), "{p:?}");
    assert_eq!(pass.planted, 4 * 10);
    assert_eq!(
        pass.flows.iter().map(|f| f.dirs[0].matches).sum::<u64>(),
        40
    );
    assert_eq!(pass.shares, (4, 0));
    assert_eq!(pass.wall_ns.len(), 2);
    assert!(pass.wall_ns.iter().all(|w| w.is_some_and(|w| w > 0)));
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
        round_target: None,
    };
    let e = native();
    let mb = middlebox(&e);
    let (chan, rx) = pki::ShareChannel::new(attested(mb.engine()));
    let wrong: Arc<pki::ShareFn> = Arc::new(move |cr, secret: &[u8]| {
        let mut s = secret.to_vec();
        s[5] ^= 1;
        chan.send(cr, &s);
    });
    let pass = std::thread::scope(|s| {
        s.spawn(|| mb.serve_shares(rx));
        workload::run_pass(&cfg, pki(), Some((&mb, trust())), Some(wrong)).unwrap()
    });
    // The bytes still arrive (the relay forwards what fails authentication) ...
    assert!(
        pass.servers
            .iter()
            .all(|s| s.bytes == s.expected && s.mismatch_at.is_none())
    );
    // ... but the check sees nothing decrypted.
    let p = super::super::analysis::problems(&pass, 2, true);
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
        round_target: None,
    };
    assert!(workload::run_pass(&cfg, pki(), None, None).is_err());
    let too_big = PassConfig {
        record_size: (1 << 14) + 1,
        ..cfg
    };
    assert!(workload::run_pass(&too_big, pki(), None, None).is_err());
}

#[test]
fn a_round_some_server_did_not_finish_has_no_time() {
    let server = |done: Vec<Option<u64>>| workload::ServerReport {
        done_ns: done,
        ..workload::ServerReport::default()
    };
    let servers = [
        server(vec![Some(10), Some(20), Some(30)]),
        server(vec![Some(15), None, Some(25)]),
    ];
    assert_eq!(
        workload::round_walls(&servers, 2, 3),
        [Some(15), None, Some(30)]
    );
    // A server that never reported: no round is known.
    assert_eq!(workload::round_walls(&servers[..1], 2, 2), [None, None]);
    // The correctness check names the unknown round.
    let pass = workload::PassResult {
        wall_ns: vec![Some(15), None],
        ..workload::PassResult::default()
    };
    let p = super::super::analysis::problems(&pass, 0, false);
    assert!(
        p.iter().any(|m| m.contains("round(s) 1 not measured")),
        "{p:?}"
    );
}

#[test]
fn clients_send_no_share_to_a_key_the_host_substituted_and_say_why() {
    use super::super::service::AttestError;
    use super::super::workload::Attestation;
    use hpke::{Kem, Serializable};
    let cfg = PassConfig {
        flows: 2,
        record_size: 256,
        records_per_flow: 8,
        rounds: 1,
        plant_every: 4,
        timeout: Duration::from_secs(10),
        round_target: None,
    };
    let e = native();
    let mut mb = middlebox(&e);
    // The host hands out its own key with the enclave's genuine quote.
    let (_, host_public) = hpke::kem::X25519HkdfSha256::derive_keypair(&[0x42; 32]);
    let genuine_quote = mb.engine().quote.clone();
    mb.substitute_engine_key(EngineKey {
        public: host_public.to_bytes().to_vec(),
        quote: genuine_quote,
    });
    let pass = workload::run_pass(&cfg, pki(), Some((&mb, trust())), None).unwrap();
    assert!(
        matches!(
            pass.attestation,
            Attestation::Refused(AttestError::KeyNotBound { .. })
        ),
        "{:?}",
        pass.attestation
    );
    // No share was sealed or sent: each client's key log withheld its one share, the
    // middlebox received none, and the enclave holds none.
    assert_eq!(pass.shares, (0, 0));
    assert_eq!(pass.shares_withheld, 2);
    assert_eq!(pass.flows.len(), 2);
    for f in &pass.flows {
        assert!(f.dirs.iter().all(|d| d.no_key_share && d.app_records == 0));
        assert_eq!(f.shares_pending, 0);
    }
    // The endpoints still talk (the relay forwards what it cannot inspect) ...
    assert!(
        pass.servers
            .iter()
            .all(|s| s.bytes == s.expected && s.mismatch_at.is_none())
    );
    // ... and the pass's check says why nothing was inspected.
    let p = super::super::analysis::problems(&pass, 2, true);
    assert!(
        p.iter().any(|m| m
            .contains("refused the middlebox's key and sent no key share (2 withheld)")
            && m.contains("the host substituted the key")),
        "{p:?}"
    );
    let check = super::super::analysis::attestation_check(trust(), [&pass.attestation]);
    assert_eq!(check.verdict, measure::record::Verdict::Fail);
}

#[test]
fn a_pass_through_an_attested_middlebox_records_the_verification() {
    use super::super::workload::Attestation;
    let cfg = PassConfig {
        flows: 1,
        record_size: 512,
        records_per_flow: 4,
        rounds: 1,
        plant_every: 4,
        timeout: Duration::from_secs(10),
        round_target: None,
    };
    let e = native();
    let mb = middlebox(&e);
    let pass = workload::run_pass(&cfg, pki(), Some((&mb, trust())), None).unwrap();
    assert_eq!(pass.attestation, Attestation::Verified(*trust()));
    assert_eq!((pass.shares, pass.shares_withheld), ((1, 0), 0));
    let check = super::super::analysis::attestation_check(trust(), [&pass.attestation]);
    assert_eq!(
        check.verdict,
        measure::record::Verdict::Pass,
        "{}",
        check.message
    );
    assert!(check.message.contains("emulated"), "{}", check.message);
}

#[test]
fn a_batched_middlebox_delivers_every_byte_and_finds_every_pattern() {
    use super::super::batch::BatchLimits;
    let cfg = PassConfig {
        flows: 4,
        record_size: 1024,
        records_per_flow: 20,
        rounds: 2,
        plant_every: 4,
        timeout: Duration::from_secs(10),
        round_target: None,
    };
    let e = native();
    let mb = middlebox(&e).with_batching(BatchLimits {
        max_records: 8,
        max_bytes: 64 << 10,
        ..BatchLimits::default()
    });
    let pass = workload::run_pass(&cfg, pki(), Some((&mb, trust())), None).unwrap();
    let p = super::super::analysis::problems(&pass, 4, true);
    assert!(p.is_empty(), "{p:?}");
    assert_eq!(
        pass.flows.iter().map(|f| f.dirs[0].matches).sum::<u64>(),
        pass.planted
    );
    // Every encrypted record went through the batcher, none through the per-record ecall.
    let inspected: u64 = pass
        .flows
        .iter()
        .flat_map(|f| f.dirs.iter())
        .map(|d| d.inspected)
        .sum();
    let (batches, records) = mb.batcher().unwrap().stats();
    assert_eq!(records, inspected);
    assert!(
        batches >= inspected.div_ceil(8) && batches <= records,
        "{batches} {records}"
    );
    assert_every_record_batched(&e, &mb);
}

/// Every record went into the enclave in a batch ecall, none in a per-record one, and the
/// enclave's trace counts as many batch ecalls as the batcher made.
fn assert_every_record_batched(e: &enclave::Enclave, mb: &Middlebox<'_>) {
    use super::super::service::Call;
    let trace = e.trace();
    let calls = |c: Call| {
        trace
            .get(enclave::Direction::Ecall, c.into())
            .map_or(0, |t| t.count)
    };
    assert_eq!(calls(Call::ReproduceSslContext), 0);
    let (batches, _) = mb.batcher().unwrap().stats();
    assert_eq!(calls(Call::ReproduceSslContextBatch), batches);
}

/// Maximal records through a queue that holds only a few of them: the relay's threads wait
/// for room (back-pressure), nothing goes uninspected, each direction's records are
/// decrypted in order (out of order they would fail to authenticate), every one in a batch,
/// and every round lasts until its records were inspected.
#[test]
fn a_full_queue_holds_the_relay_back_and_loses_nothing() {
    use super::super::batch::BatchLimits;
    let cfg = PassConfig {
        flows: 3,
        record_size: 1 << 14,
        records_per_flow: 12,
        rounds: 2,
        plant_every: 4,
        timeout: Duration::from_secs(10),
        round_target: None,
    };
    let e = native();
    let mb = middlebox(&e).with_batching(BatchLimits {
        max_records: 2,
        max_bytes: 0,
        max_queued_bytes: 0,
        shards: 2,
    });
    let pass = workload::run_pass(&cfg, pki(), Some((&mb, trust())), None).unwrap();
    let p = super::super::analysis::problems(&pass, 3, true);
    assert!(p.is_empty(), "{p:?}");
    assert_eq!(
        pass.flows.iter().map(|f| f.dirs[0].matches).sum::<u64>(),
        pass.planted
    );
    let app: u64 = pass.flows.iter().map(|f| f.dirs[0].app_records).sum();
    assert_eq!(app, 3 * 25, "24 records and the flow's first, per flow");
    let auth: u64 = pass
        .flows
        .iter()
        .flat_map(|f| f.dirs.iter())
        .map(|d| d.auth_failures)
        .sum();
    assert_eq!(auth, 0);
    assert_every_record_batched(&e, &mb);
    let (batches, records) = mb.batcher().unwrap().stats();
    assert!(batches >= records.div_ceil(2), "{batches} {records}");
    // The pass served the queues from threads of their own.
    assert!(mb.batcher().unwrap().serving_priority().is_some());
    assert!(pass.wall_ns.iter().all(|w| w.is_some_and(|w| w > 0)));
}
