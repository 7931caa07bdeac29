//! Garbling + evaluation equals plain evaluation; two parties over memory and
//! real TCP; failures (disconnect, garbage, mismatch) are typed errors.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use garble::channel::{Channel, ChannelError, Deadline, TcpChannel, mem_pair};
use garble::circuit::bits_from_bytes;
use garble::gc;
use garble::hash::{Backend, GcHash, Hasher, Prg};
use garble::program::Program;
use garble::scheme::Scheme;
use garble::session::{
    EvaluatorSession, GarblerSession, HEADER_BYTES, SessionError, SessionOptions, Stage,
    expected_wire_bytes_with, run_evaluator, run_garbler,
};
use garble::{Bit, Builder, Circuit, Party, library};
use proptest::prelude::*;

fn random_bits(prg: &mut Prg, n: usize) -> Vec<bool> {
    let mut b = vec![0u8; n.div_ceil(8)];
    prg.bytes(&mut b);
    bits_from_bytes(&b, n)
}

fn two_party(
    c: &Circuit,
    g: Vec<Vec<bool>>,
    e: Vec<Vec<bool>>,
    opts: SessionOptions,
) -> (
    garble::session::SessionOutput,
    garble::session::SessionOutput,
) {
    let (mut a, mut b) = mem_pair(Duration::from_secs(20));
    let c2 = c.clone();
    let t = std::thread::spawn(move || run_evaluator(&mut b, &c2, &e, &opts).unwrap());
    let go = run_garbler(&mut a, c, &g, &opts).unwrap();
    (go, t.join().unwrap())
}

#[test]
fn library_circuits_two_party() {
    let mut prg = Prg::from_seed([11; 16]);
    for (c, be, hash) in [
        (library::aes128(), Backend::detect(), GcHash::Mitccrh),
        (library::aes128(), Backend::detect(), GcHash::FixedKey),
        (library::aes128(), Backend::Portable, GcHash::Mitccrh),
        (library::aes128(), Backend::Portable, GcHash::FixedKey),
        (
            library::sha256_compress(),
            Backend::detect(),
            GcHash::Mitccrh,
        ),
        (library::mul(256), Backend::detect(), GcHash::Mitccrh),
        (library::mul(256), Backend::detect(), GcHash::FixedKey),
    ] {
        let n = 3;
        let g: Vec<Vec<bool>> = (0..n)
            .map(|_| random_bits(&mut prg, c.garbler_input_bits()))
            .collect();
        let e: Vec<Vec<bool>> = (0..n)
            .map(|_| random_bits(&mut prg, c.evaluator_input_bits()))
            .collect();
        let opts = SessionOptions {
            backend: be,
            hash,
            ..SessionOptions::default()
        };
        let (go, eo) = two_party(&c, g.clone(), e.clone(), opts);
        for i in 0..n {
            let want = c.eval(&g[i], &e[i]).unwrap();
            assert_eq!(go.outputs[i], want);
            assert_eq!(eo.outputs[i], want);
        }
        let r = &go.report;
        assert_eq!((r.hash, eo.report.hash), (hash, hash));
        assert_eq!(r.evaluations, n as u64);
        assert_eq!(r.table_bytes, 32 * c.stats().and_gates() * n as u64);
        // Exactly the tables are sent during Garble.
        assert_eq!(r.stage(Stage::Garble).bytes_sent, r.table_bytes);
        assert_eq!(eo.report.stage(Stage::Garble).bytes_received, r.table_bytes);
        assert_eq!(r.bytes_sent, eo.report.bytes_received);
        // Every byte either party sent is one the protocol's messages account for.
        assert_eq!(
            (r.bytes_sent, eo.report.bytes_sent),
            garble::session::expected_wire_bytes(&c, n as u64)
        );
    }
}

#[test]
fn fips197_through_two_party() {
    let c = library::aes128();
    let key: Vec<u8> = (0..16).collect();
    let pt: Vec<u8> = (0..16).map(|i| i * 0x11).collect();
    let (go, eo) = two_party(
        &c,
        vec![bits_from_bytes(&key, 128)],
        vec![bits_from_bytes(&pt, 128)],
        SessionOptions::default(),
    );
    let want = [
        0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5,
        0x5a,
    ];
    assert_eq!(go.output_bytes()[0], want);
    assert_eq!(eo.output_bytes()[0], want);
}

/// A random circuit over `gi + ei` inputs with `n` random gates.
fn random_circuit(seed: u64, gi: usize, ei: usize, n: usize, nout: usize) -> Circuit {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut b = Builder::new();
    let mut pool: Vec<Bit> = vec![Bit::ZERO, Bit::ONE];
    pool.extend(b.input(Party::Garbler, gi));
    pool.extend(b.input(Party::Evaluator, ei));
    for _ in 0..n {
        let x = pool[next() as usize % pool.len()];
        let y = pool[next() as usize % pool.len()];
        let o = match next() % 4 {
            0 => b.xor(x, y),
            1 | 2 => b.and(x, y),
            _ => b.not(x),
        };
        pool.push(o);
    }
    let outs: Vec<Bit> = (0..nout)
        .map(|_| pool[next() as usize % pool.len()])
        .collect();
    b.finish(&[outs]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_circuits_garble_like_plain(seed in any::<u64>(), gi in 0usize..6, ei in 0usize..6,
                                         n in 0usize..300, nout in 1usize..12, portable in any::<bool>()) {
        let c = random_circuit(seed, gi, ei, n, nout);
        let p = Program::compile(&c);
        let be = if portable { Backend::Portable } else { Backend::detect() };
        let h = Hasher::with_backend(be).unwrap();
        let mut prg = Prg::from_seed(seed.to_le_bytes().repeat(2).try_into().unwrap());
        for _ in 0..4 {
            let g = random_bits(&mut prg, c.garbler_input_bits());
            let e = random_bits(&mut prg, c.evaluator_input_bits());
            let want = c.eval(&g, &e).unwrap();
            prop_assert_eq!(&p.eval_plain(&g, &e), &want);
            let (got, _) = gc::simulate(&p, &h, &mut prg, &g, &e);
            prop_assert_eq!(got, want);
        }
    }
}

#[test]
fn random_circuits_two_party_bulk() {
    for seed in 1..6u64 {
        let c = random_circuit(seed * 7919, 5, 4, 400, 9);
        let mut prg = Prg::from_seed([seed as u8; 16]);
        let g: Vec<Vec<bool>> = (0..4)
            .map(|_| random_bits(&mut prg, c.garbler_input_bits()))
            .collect();
        let e: Vec<Vec<bool>> = (0..4)
            .map(|_| random_bits(&mut prg, c.evaluator_input_bits()))
            .collect();
        let (go, eo) = two_party(&c, g.clone(), e.clone(), SessionOptions::default());
        for i in 0..4 {
            let want = c.eval(&g[i], &e[i]).unwrap();
            assert_eq!(go.outputs[i], want);
            assert_eq!(eo.outputs[i], want);
        }
    }
}

#[test]
fn tcp_loopback_bulk() {
    let c = library::aes128();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let mut prg = Prg::from_seed([5; 16]);
    let g: Vec<Vec<bool>> = (0..5).map(|_| random_bits(&mut prg, 128)).collect();
    let e: Vec<Vec<bool>> = (0..5).map(|_| random_bits(&mut prg, 128)).collect();
    let (c2, e2) = (c.clone(), e.clone());
    let t = std::thread::spawn(move || {
        let mut ch = TcpChannel::connect(&addr, Duration::from_secs(10)).unwrap();
        run_evaluator(&mut ch, &c2, &e2, &SessionOptions::default()).unwrap()
    });
    let mut ch = TcpChannel::accept(&l, Duration::from_secs(10)).unwrap();
    let go = run_garbler(&mut ch, &c, &g, &SessionOptions::default()).unwrap();
    let eo = t.join().unwrap();
    for i in 0..5 {
        let want = c.eval(&g[i], &e[i]).unwrap();
        assert_eq!(go.outputs[i], want);
        assert_eq!(eo.outputs[i], want);
    }
    assert_eq!(go.report.bytes_sent, eo.report.bytes_received);
    assert_eq!(go.report.bytes_received, eo.report.bytes_sent);
}

/// Over real TCP, exactly 32 bytes per AND gate cross the wire while
/// garbling; besides them only the input labels (16 bytes per garbler bit,
/// 16 + 16 per evaluator bit by OT extension), the base OTs, the header, the
/// output bits and the output check.
#[test]
fn tcp_wire_bytes_are_exact() {
    for (c, n) in [(library::aes128(), 3u64), (library::sha256_compress(), 2)] {
        let r =
            garble::microbench::loopback_2pc(&c, n as usize, &SessionOptions::default()).unwrap();
        let (g, e) = (&r.garbler, &r.evaluator);
        let and = c.stats().and_gates();
        let (gb, eb) = (
            c.garbler_input_bits() as u64,
            c.evaluator_input_bits() as u64,
        );
        // Decoding bits, then two 8-byte tags per output.
        let out = c.output_bits().div_ceil(8) as u64;
        let check = 16 * c.output_bits() as u64;
        assert_eq!(r.table_bytes_per_and(), 32.0);
        // The sockets' own counters: everything the protocol sent crossed the wire, and
        // exactly what its messages predict.
        let (want_g, want_e) = garble::session::expected_wire_bytes(&c, n);
        assert_eq!((g.wire_bytes_sent, g.bytes_sent), (want_g, want_g));
        assert_eq!((e.wire_bytes_sent, e.bytes_sent), (want_e, want_e));
        assert_eq!(e.wire_bytes_received, g.wire_bytes_sent);
        assert_eq!(g.wire_bytes_received, e.wire_bytes_sent);
        let per_stage: u64 = g.stages.iter().map(|s| s.wire_sent).sum();
        assert_eq!(per_stage, g.wire_bytes_sent);
        assert_eq!(g.stage(Stage::Garble).bytes_sent, 32 * and * n);
        assert_eq!(g.stage(Stage::Garble).bytes_received, 0);
        assert_eq!(e.stage(Stage::Garble).bytes_received, 32 * and * n);
        assert_eq!(e.stage(Stage::Garble).bytes_sent, 0);
        assert_eq!(g.stage(Stage::Init).bytes_sent, HEADER_BYTES as u64);
        assert_eq!(g.stage(Stage::PeerInputs).bytes_sent, n * 16 * (gb + eb));
        assert_eq!(g.stage(Stage::PeerInputs).bytes_received, n * 16 * eb);
        assert_eq!(g.stage(Stage::Result).bytes_sent, n * (out + check));
        assert_eq!(g.stage(Stage::Result).bytes_received, n * out);
        let ot = g.stage(Stage::OtInit).bytes_sent;
        assert_eq!(
            g.bytes_sent,
            HEADER_BYTES as u64 + ot + n * (16 * (gb + eb) + 32 * and + out + check),
            "nothing else is sent"
        );
        assert_eq!(g.bytes_sent, e.bytes_received);
        assert_eq!(g.bytes_received, e.bytes_sent);
    }
}

/// A channel that dies (closing the socket) once it has sent `limit` bytes.
struct CutAfter {
    inner: Option<TcpChannel>,
    limit: u64,
    sent: u64,
}

impl Channel for CutAfter {
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        self.sent += data.len() as u64;
        if self.sent > self.limit {
            if let Some(mut c) = self.inner.take() {
                let _ = c.flush();
            }
            return Err(ChannelError::Closed);
        }
        self.inner.as_mut().ok_or(ChannelError::Closed)?.send(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        self.inner.as_mut().ok_or(ChannelError::Closed)?.recv(buf)
    }
    fn flush(&mut self) -> Result<(), ChannelError> {
        self.inner.as_mut().ok_or(ChannelError::Closed)?.flush()
    }
    fn bytes_sent(&self) -> u64 {
        self.sent
    }
    fn bytes_received(&self) -> u64 {
        self.inner.as_ref().map_or(0, |c| c.bytes_received())
    }
}

#[test]
fn disconnect_mid_stream_is_an_error_on_both_sides() {
    let c = library::mul(256);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let c2 = c.clone();
    let t = std::thread::spawn(move || {
        let mut ch = TcpChannel::connect(&addr, Duration::from_secs(10)).unwrap();
        run_evaluator(&mut ch, &c2, &[vec![true; 256]], &SessionOptions::default())
    });
    let ch = TcpChannel::accept(&l, Duration::from_secs(10)).unwrap();
    // Past handshake, OT and inputs, in the middle of the tables.
    let mut cut = CutAfter {
        inner: Some(ch),
        limit: 200_000,
        sent: 0,
    };
    let g = run_garbler(
        &mut cut,
        &c,
        &[vec![false; 256]],
        &SessionOptions::default(),
    );
    assert!(
        matches!(g, Err(SessionError::Channel(ChannelError::Closed))),
        "{g:?}"
    );
    let e = t.join().unwrap();
    assert!(
        matches!(e, Err(SessionError::Channel(ChannelError::Closed))),
        "{e:?}"
    );
}

#[test]
fn garbage_and_mismatch_are_typed_errors() {
    // Garbage instead of a header.
    let (mut a, mut b) = mem_pair(Duration::from_secs(5));
    a.send(&[0x42; HEADER_BYTES]).unwrap();
    a.flush().unwrap();
    let r = run_evaluator(
        &mut b,
        &library::aes128(),
        &[vec![false; 128]],
        &SessionOptions::default(),
    );
    assert!(matches!(r, Err(SessionError::Protocol(_))), "{r:?}");
    // A different circuit.
    let (mut a, mut b) = mem_pair(Duration::from_secs(5));
    let t = std::thread::spawn(move || {
        run_evaluator(
            &mut b,
            &library::mul(8),
            &[vec![false; 8]],
            &SessionOptions::default(),
        )
    });
    let g = run_garbler(
        &mut a,
        &library::mul(9),
        &[vec![false; 9]],
        &SessionOptions::default(),
    );
    assert!(g.is_err());
    assert!(matches!(
        t.join().unwrap(),
        Err(SessionError::CircuitMismatch)
    ));
    // A stalled peer times out.
    let (_a, mut b) = mem_pair(Duration::from_millis(100));
    let r = run_evaluator(
        &mut b,
        &library::mul(8),
        &[vec![false; 8]],
        &SessionOptions::default(),
    );
    assert!(
        matches!(r, Err(SessionError::Channel(ChannelError::Timeout(_)))),
        "{r:?}"
    );
    // Wrong input length.
    let (mut a, _b) = mem_pair(Duration::from_millis(100));
    let r = run_garbler(
        &mut a,
        &library::mul(8),
        &[vec![false; 7]],
        &SessionOptions::default(),
    );
    assert!(matches!(r, Err(SessionError::Input { .. })), "{r:?}");
}

/// One session, three computations (two circuits, one of them in bulk): the
/// base OTs run once, every output matches plain evaluation on both sides,
/// and later computations move no base-OT byte.
#[test]
fn a_session_reuses_its_ot_set_up() {
    let aes = library::aes128();
    let mul = library::mul(12);
    let mut prg = Prg::from_seed([0x51; 16]);
    type Job = (Circuit, Vec<Vec<bool>>, Vec<Vec<bool>>);
    let jobs: Vec<Job> = [(&aes, 1), (&mul, 3), (&aes, 2)]
        .iter()
        .map(|&(c, n)| {
            let g = (0..n)
                .map(|_| random_bits(&mut prg, c.garbler_input_bits()))
                .collect();
            let e = (0..n)
                .map(|_| random_bits(&mut prg, c.evaluator_input_bits()))
                .collect();
            (c.clone(), g, e)
        })
        .collect();
    let (mut a, mut b) = mem_pair(Duration::from_secs(20));
    let ejobs = jobs.clone();
    let t = std::thread::spawn(move || {
        let mut s = EvaluatorSession::new(&SessionOptions::default()).unwrap();
        let outs: Vec<_> = ejobs
            .iter()
            .map(|(c, _, e)| s.run(&mut b, c, e).unwrap())
            .collect();
        assert_eq!(s.computations(), 3);
        outs
    });
    let mut s = GarblerSession::new(&SessionOptions::default()).unwrap();
    let gouts: Vec<_> = jobs
        .iter()
        .map(|(c, g, _)| s.run(&mut a, c, g).unwrap())
        .collect();
    let eouts = t.join().unwrap();
    for (k, ((c, g, e), (go, eo))) in jobs.iter().zip(gouts.iter().zip(&eouts)).enumerate() {
        for i in 0..g.len() {
            let want = c.eval(&g[i], &e[i]).unwrap();
            assert_eq!(go.outputs[i], want, "computation {k}, evaluation {i}");
            assert_eq!(eo.outputs[i], want, "computation {k}, evaluation {i}");
        }
        let ot = go.report.stage(Stage::OtInit);
        if k == 0 {
            assert_eq!(
                (ot.bytes_sent, ot.bytes_received),
                garble::ot::base_ot_bytes(garble::ot::KAPPA)
            );
        } else {
            assert_eq!((ot.bytes_sent, ot.bytes_received), (0, 0));
            assert_eq!(eo.report.stage(Stage::OtInit).bytes_sent, 0);
        }
    }
}

/// A circuit compiled before the session runs as the circuit itself does: the same
/// outputs and bytes, computation after computation, mixed with computations that
/// compile their circuit, and no Load stage; inputs of the wrong length are still
/// refused before anything is sent.
#[test]
fn a_program_compiled_before_the_session_runs_like_its_circuit() {
    let aes = library::aes128();
    let prog = Program::compile(&aes);
    let mut prg = Prg::from_seed([0x52; 16]);
    let g: Vec<Vec<bool>> = (0..2).map(|_| random_bits(&mut prg, 128)).collect();
    let e: Vec<Vec<bool>> = (0..2).map(|_| random_bits(&mut prg, 128)).collect();
    let (mut a, mut b) = mem_pair(Duration::from_secs(20));
    let (e2, eprog) = (e.clone(), prog.clone());
    let t = std::thread::spawn(move || {
        let mut s = EvaluatorSession::new(&SessionOptions::default()).unwrap();
        let first = s.run_program(&mut b, &eprog, &e2).unwrap();
        // The other side compiles its circuit in this computation: the same digest.
        let second = s.run_program(&mut b, &eprog, &e2).unwrap();
        let third = s.run(&mut b, &library::aes128(), &e2).unwrap();
        (first, second, third)
    });
    let mut s = GarblerSession::new(&SessionOptions::default()).unwrap();
    let bad = s.run_program(&mut a, &prog, &[vec![true; 127]]);
    assert!(
        matches!(bad, Err(SessionError::Input { evaluation: 0, .. })),
        "{bad:?}"
    );
    assert_eq!(a.bytes_sent(), 0, "a refused input sends nothing");
    // A refused input fails the computation, and the session with it: start anew.
    let mut s = GarblerSession::new(&SessionOptions::default()).unwrap();
    let outs = [
        s.run_program(&mut a, &prog, &g).unwrap(),
        s.run(&mut a, &aes, &g).unwrap(),
        s.run_program(&mut a, &prog, &g).unwrap(),
    ];
    let (e1, e2, e3) = t.join().unwrap();
    for (k, (go, eo)) in outs.iter().zip([&e1, &e2, &e3]).enumerate() {
        for i in 0..2 {
            let want = aes.eval(&g[i], &e[i]).unwrap();
            assert_eq!(go.outputs[i], want, "computation {k}, evaluation {i}");
            assert_eq!(eo.outputs[i], want, "computation {k}, evaluation {i}");
        }
    }
    for (r, compiled_in_session) in [
        (&outs[0].report, false),
        (&outs[1].report, true),
        (&outs[2].report, false),
        (&e1.report, false),
        (&e2.report, false),
        (&e3.report, true),
    ] {
        let load = r.stage(Stage::Load).time;
        assert_eq!(load > Duration::ZERO, compiled_in_session, "{r:?}");
        assert_eq!(r.compile > Duration::ZERO, compiled_in_session, "{r:?}");
        assert_eq!(r.label_slots, prog.num_slots());
    }
    // Both later computations (no base OTs) move the same bytes, compiled or not.
    assert_eq!(outs[1].report.bytes_sent, outs[2].report.bytes_sent);
    assert_eq!(e2.report.bytes_sent, e3.report.bytes_sent);
}

/// A garbler that reuses its session against an evaluator that started a
/// new one: a typed error on both sides, no hang.
#[test]
fn reuse_on_one_side_only_is_a_typed_error() {
    let c = library::mul(8);
    let (mut a, mut b) = mem_pair(Duration::from_secs(5));
    let t = std::thread::spawn(move || {
        let opts = SessionOptions::default();
        let first =
            EvaluatorSession::new(&opts)
                .unwrap()
                .run(&mut b, &library::mul(8), &[vec![true; 8]]);
        assert!(first.is_ok(), "{first:?}");
        // A fresh session where the garbler continues its old one.
        EvaluatorSession::new(&opts)
            .unwrap()
            .run(&mut b, &library::mul(8), &[vec![true; 8]])
    });
    let mut s = GarblerSession::new(&SessionOptions::default()).unwrap();
    s.run(&mut a, &c, &[vec![false; 8]]).unwrap();
    let g = s.run(&mut a, &c, &[vec![false; 8]]);
    let e = t.join().unwrap();
    // The evaluator checks first and hangs up: the garbler sees it close.
    assert!(matches!(e, Err(SessionError::Protocol(_))), "{e:?}");
    assert!(
        matches!(
            g,
            Err(SessionError::Protocol(_) | SessionError::Channel(ChannelError::Closed))
        ),
        "{g:?}"
    );
    // And a failed session stays failed.
    let g = s.run(&mut a, &c, &[vec![false; 8]]);
    assert!(matches!(g, Err(SessionError::Protocol(_))), "{g:?}");
}

/// A proxy for one connection that forwards one byte every `pace`, each way: a peer slow
/// enough to take forever, never silent for long enough to time out.
fn trickling_proxy(
    listener: TcpListener,
    upstream: SocketAddr,
    pace: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (down, _) = listener.accept().unwrap();
        let up = TcpStream::connect(upstream).unwrap();
        let pipe = |mut from: TcpStream, mut to: TcpStream| {
            std::thread::spawn(move || {
                let mut b = [0u8; 1];
                while let Ok(1) = from.read(&mut b) {
                    if to.write_all(&b).is_err() {
                        break;
                    }
                    std::thread::sleep(pace);
                }
                let _ = to.shutdown(Shutdown::Both);
            })
        };
        let a = pipe(down.try_clone().unwrap(), up.try_clone().unwrap());
        let b = pipe(up, down);
        a.join().unwrap();
        b.join().unwrap();
    })
}

/// A session through a proxy that passes a byte every 10 ms: no read ever waits the 5 s
/// timeout, yet both parties fail by the session's 800 ms deadline, and not much after.
#[test]
fn a_trickling_peer_cannot_stretch_a_session_past_its_deadline() {
    let c = library::aes128();
    let garbler = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let paddr = proxy.local_addr().unwrap().to_string();
    let forward = trickling_proxy(
        proxy,
        garbler.local_addr().unwrap(),
        Duration::from_millis(10),
    );
    let limit = Duration::from_millis(800);
    let opts = SessionOptions {
        deadline: Some(Deadline::after(limit)),
        ..SessionOptions::default()
    };
    let start = Instant::now();
    let c2 = c.clone();
    let e = std::thread::spawn(move || {
        let mut ch = TcpChannel::connect(&paddr, Duration::from_secs(5)).unwrap();
        let r = run_evaluator(&mut ch, &c2, &[vec![false; 128]], &opts);
        // The channel lives on until both have failed: whichever party reaches the deadline
        // first must not hang up on the other, which would then fail with "closed" instead.
        (r.map(|_| ()), start.elapsed(), ch)
    });
    let mut ch = TcpChannel::accept(&garbler, Duration::from_secs(5)).unwrap();
    let g = run_garbler(&mut ch, &c, &[vec![true; 128]], &opts);
    let g_took = start.elapsed();
    let (e, e_took, e_ch) = e.join().unwrap();
    drop((ch, e_ch));
    for (who, r, took) in [("garbler", g.map(|_| ()), g_took), ("evaluator", e, e_took)] {
        let err = r.expect_err(who).to_string();
        assert!(err.contains("deadline of 800ms"), "{who}: {err}");
        assert!(
            took >= limit && took < limit + Duration::from_millis(700),
            "{who}: {took:?}"
        );
    }
    forward.join().unwrap();
}

/// Parties with different hashes fail at the header, each with a typed error
/// naming both hashes; so do both parties of a generated-circuit session.
#[test]
fn different_hashes_fail_at_the_header_on_both_sides() {
    for (gh, eh) in [
        (GcHash::Mitccrh, GcHash::FixedKey),
        (GcHash::FixedKey, GcHash::Mitccrh),
    ] {
        let (mut a, mut b) = mem_pair(Duration::from_secs(5));
        let t = std::thread::spawn(move || {
            let opts = SessionOptions {
                hash: eh,
                ..SessionOptions::default()
            };
            run_evaluator(&mut b, &library::mul(8), &[vec![true; 8]], &opts)
        });
        let opts = SessionOptions {
            hash: gh,
            ..SessionOptions::default()
        };
        let g = run_garbler(&mut a, &library::mul(8), &[vec![false; 8]], &opts);
        let e = t.join().unwrap();
        assert!(
            matches!(g, Err(SessionError::HashMismatch { ours, peer }) if ours == gh && peer == eh),
            "{g:?}"
        );
        assert!(
            matches!(e, Err(SessionError::HashMismatch { ours, peer }) if ours == eh && peer == gh),
            "{e:?}"
        );
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains(gh.name()) && msg.contains(eh.name()), "{msg}");
    }
}

/// A header naming a hash this build does not know: a typed error naming
/// the number and our hash.
#[test]
fn an_unknown_hash_in_the_header_is_a_typed_error() {
    let c = library::mul(8);
    let (mut a, mut b) = mem_pair(Duration::from_secs(5));
    let t = std::thread::spawn(move || {
        run_evaluator(
            &mut b,
            &library::mul(8),
            &[vec![true; 8]],
            &SessionOptions::default(),
        )
    });
    // A real garbler's header with the hash number replaced.
    let (mut x, mut y) = mem_pair(Duration::from_secs(5));
    let g = std::thread::spawn(move || {
        let _ = run_garbler(&mut x, &c, &[vec![false; 8]], &SessionOptions::default());
    });
    let mut hdr = [0u8; HEADER_BYTES];
    y.recv(&mut hdr).unwrap();
    hdr[56..64].copy_from_slice(&77u64.to_le_bytes());
    a.send(&hdr).unwrap();
    a.flush().unwrap();
    let e = t.join().unwrap();
    drop(y);
    let _ = g.join();
    assert!(
        matches!(
            e,
            Err(SessionError::UnknownHash {
                ours: GcHash::Mitccrh,
                peer: 77
            })
        ),
        "{e:?}"
    );
}

/// A channel that changes one byte of what it receives at stream offset
/// `at_recv` and one of what it sends at `at_send` (XOR with 1).
struct Flip<C> {
    inner: C,
    at_recv: u64,
    at_send: u64,
    received: u64,
    sent: u64,
}

impl<C: Channel> Channel for Flip<C> {
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        let mut d = data.to_vec();
        let (lo, hi) = (self.sent, self.sent + data.len() as u64);
        if (lo..hi).contains(&self.at_send) {
            d[(self.at_send - lo) as usize] ^= 1;
        }
        self.sent = hi;
        self.inner.send(&d)
    }
    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        self.inner.recv(buf)?;
        let (lo, hi) = (self.received, self.received + buf.len() as u64);
        if (lo..hi).contains(&self.at_recv) {
            buf[(self.at_recv - lo) as usize] ^= 1;
        }
        self.received = hi;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ChannelError> {
        self.inner.flush()
    }
    fn bytes_sent(&self) -> u64 {
        self.inner.bytes_sent()
    }
    fn bytes_received(&self) -> u64 {
        self.inner.bytes_received()
    }
}

/// An evaluator that garbles under another MITCCRH seed than the garbler (its
/// channel changes one bit of the seed in the garbler's header, and changes
/// it back in the echo, as a bug between the header and the hash would):
/// every run ends in a typed output-check error, never in accepted outputs.
#[test]
fn a_seed_that_differs_between_the_parties_is_never_accepted() {
    for c in [
        library::aes128(),
        library::sha256_compress(),
        library::mul(64),
    ] {
        let (a, b) = mem_pair(Duration::from_secs(10));
        let mut b = Flip {
            inner: b,
            at_recv: 64,
            at_send: 64,
            received: 0,
            sent: 0,
        };
        let mut a = a;
        let (gi, ei) = (c.garbler_input_bits(), c.evaluator_input_bits());
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            run_evaluator(&mut b, &c2, &[vec![true; ei]], &SessionOptions::default())
        });
        let g = run_garbler(&mut a, &c, &[vec![false; gi]], &SessionOptions::default());
        let e = t.join().unwrap();
        assert!(
            matches!(e, Err(SessionError::OutputCheck { evaluation: 0, .. })),
            "{e:?}"
        );
        assert!(g.is_err(), "the garbler gets no outputs either: {g:?}");
    }
}

/// Round trips per stage (`Load, Init, OT Init, Peer Inputs, Garble, Result`), counted by
/// hand from the protocol's messages (see `garble::session`'s documentation): the garbler
/// waits for the evaluator's header, for the base-OT messages that answer its points (the
/// evaluator's OT-extension matrix follows them unasked) and for the outputs; the
/// evaluator for the base-OT points that answer its `A` and for the extension's labels
/// that answer its matrix. A second computation of the session has no OT Init, so the
/// evaluator's matrix follows its header unasked; bulk evaluations add no wait; without
/// evaluator inputs there is no extension to wait for, but the base OTs still run.
#[test]
fn round_trips_per_stage_match_the_protocol() {
    let rounds = |r: &garble::session::SessionReport| -> Vec<u64> {
        Stage::ALL.iter().map(|&s| r.stage(s).round_trips).collect()
    };
    let mut prg = Prg::from_seed([0x33; 16]);
    let aes = library::aes128();
    for n in [1usize, 3] {
        let g = (0..n).map(|_| random_bits(&mut prg, 128)).collect();
        let e = (0..n).map(|_| random_bits(&mut prg, 128)).collect();
        let (go, eo) = two_party(&aes, g, e, SessionOptions::default());
        assert_eq!(
            rounds(&go.report),
            [0, 1, 1, 0, 0, 1],
            "garbler, {n} evaluations"
        );
        assert_eq!(
            rounds(&eo.report),
            [0, 0, 1, 1, 0, 0],
            "evaluator, {n} evaluations"
        );
        assert_eq!((go.report.round_trips, eo.report.round_trips), (3, 2));
        // CPU per stage in computations of one evaluation only (see `StageReport::cpu`),
        // within the party's busy time.
        for r in [&go.report, &eo.report] {
            let cpu: Vec<_> = Stage::ALL.iter().map(|&s| r.stage(s).cpu).collect();
            if n == 1 {
                let sum: Duration = cpu.iter().map(|c| c.expect("CPU per stage")).sum();
                assert!(
                    sum <= r.busy,
                    "{:?}: {sum:?} of CPU, busy {:?}",
                    r.role,
                    r.busy
                );
                assert!(r.stage(Stage::Garble).cpu > Some(Duration::ZERO));
            } else {
                assert!(cpu.iter().all(Option::is_none), "{:?}: {cpu:?}", r.role);
            }
        }
    }
    // No evaluator input: no OT extension to wait for.
    let mut b = Builder::new();
    let x = b.input(Party::Garbler, 8);
    let y = b.and(x[0], x[1]);
    let only_g = b.finish(&[vec![y]]).unwrap();
    assert_eq!(only_g.evaluator_input_bits(), 0);
    let g = vec![random_bits(&mut prg, 8)];
    let (go, eo) = two_party(&only_g, g, vec![vec![]], SessionOptions::default());
    // The base OTs still run (a session may compute on with evaluator inputs), and the
    // garbler's input labels follow their end: the evaluator waits for them.
    assert_eq!(rounds(&go.report), [0, 1, 1, 0, 0, 1]);
    assert_eq!(rounds(&eo.report), [0, 0, 1, 1, 0, 0]);

    // Two computations of one session: the second has no OT Init.
    let (mut a, mut bch) = mem_pair(Duration::from_secs(20));
    let (c2, e1) = (aes.clone(), vec![random_bits(&mut prg, 128)]);
    let t = std::thread::spawn(move || {
        let mut s = EvaluatorSession::new(&SessionOptions::default()).unwrap();
        let first = s.run(&mut bch, &c2, &e1).unwrap();
        let second = s.run(&mut bch, &c2, &e1).unwrap();
        (first.report, second.report)
    });
    let g1 = vec![random_bits(&mut prg, 128)];
    let mut s = GarblerSession::new(&SessionOptions::default()).unwrap();
    let first = s.run(&mut a, &aes, &g1).unwrap().report;
    let second = s.run(&mut a, &aes, &g1).unwrap().report;
    let (efirst, esecond) = t.join().unwrap();
    assert_eq!(rounds(&first), [0, 1, 1, 0, 0, 1]);
    assert_eq!(rounds(&second), [0, 1, 0, 0, 0, 1]);
    assert_eq!(rounds(&efirst), [0, 0, 1, 1, 0, 0]);
    assert_eq!(rounds(&esecond), [0, 0, 0, 1, 0, 0]);
}

/// Over a link with a 30 ms round trip, the stages of both parties up to each one take at
/// least their round trips times the RTT: a count too high would claim waits that did not
/// happen. (Cumulative, not per stage: a party may compute on after its last message of one
/// stage, so part of the next stage's wait hides under that stage's time.)
#[test]
fn a_stage_over_a_link_takes_at_least_its_round_trips() {
    let p: garble::link::Profile = "rate=1gbit,rtt=30ms".parse().unwrap();
    let c = library::aes128();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let link = p.start(l.local_addr().unwrap()).unwrap().unwrap();
    let addr = link.addr().to_string();
    let mut prg = Prg::from_seed([9; 16]);
    let (g, e) = (random_bits(&mut prg, 128), random_bits(&mut prg, 128));
    let (c2, e2) = (c.clone(), e.clone());
    let t = std::thread::spawn(move || {
        let mut ch = TcpChannel::connect(&addr, Duration::from_secs(10)).unwrap();
        run_evaluator(&mut ch, &c2, &[e2], &SessionOptions::default()).unwrap()
    });
    let mut ch = TcpChannel::accept(&l, Duration::from_secs(10)).unwrap();
    let go = run_garbler(
        &mut ch,
        &c,
        std::slice::from_ref(&g),
        &SessionOptions::default(),
    )
    .unwrap();
    let eo = t.join().unwrap();
    assert_eq!(go.outputs[0], c.eval(&g, &e).unwrap());
    for r in [&go.report, &eo.report] {
        let (mut time, mut rounds) = (Duration::ZERO, 0u32);
        for s in Stage::ALL {
            let st = r.stage(s);
            time += st.time;
            rounds += st.round_trips as u32;
            assert!(
                time >= p.rtt * rounds,
                "{:?} up to {}: {time:?} for {rounds} round trips",
                r.role,
                s.name(),
            );
        }
        assert!(r.total >= p.rtt * r.round_trips as u32);
        // The stages' CPU leaves out the waits: three round trips of 30 ms against a few
        // ms of compute.
        let cpu: Duration = Stage::ALL.iter().filter_map(|&s| r.stage(s).cpu).sum();
        assert!(
            cpu * 2 < r.total,
            "{:?}: {cpu:?} of CPU in {:?}",
            r.role,
            r.total
        );
    }
    assert_eq!(go.report.round_trips, 3);
}

/// Three-halves end to end: the library circuits under both hashes and both backends, three
/// evaluations each, outputs equal to evaluation in the clear, exactly 25 bytes of table per
/// AND, and every byte on the wire accounted for.
#[test]
fn three_halves_two_party() {
    let mut prg = Prg::from_seed([12; 16]);
    for (c, be, hash) in [
        (library::aes128(), Backend::detect(), GcHash::Mitccrh),
        (library::aes128(), Backend::detect(), GcHash::FixedKey),
        (library::aes128(), Backend::Portable, GcHash::Mitccrh),
        (
            library::sha256_compress(),
            Backend::detect(),
            GcHash::Mitccrh,
        ),
        (library::mul(128), Backend::detect(), GcHash::FixedKey),
    ] {
        let n = 3;
        let g: Vec<Vec<bool>> = (0..n)
            .map(|_| random_bits(&mut prg, c.garbler_input_bits()))
            .collect();
        let e: Vec<Vec<bool>> = (0..n)
            .map(|_| random_bits(&mut prg, c.evaluator_input_bits()))
            .collect();
        let opts = SessionOptions {
            backend: be,
            hash,
            scheme: Scheme::ThreeHalves,
            ..SessionOptions::default()
        };
        let (go, eo) = two_party(&c, g.clone(), e.clone(), opts);
        for i in 0..n {
            let want = c.eval(&g[i], &e[i]).unwrap();
            assert_eq!(go.outputs[i], want);
            assert_eq!(eo.outputs[i], want);
        }
        let r = &go.report;
        assert_eq!(
            (r.scheme, eo.report.scheme),
            (Scheme::ThreeHalves, Scheme::ThreeHalves)
        );
        assert_eq!(r.table_bytes, 25 * c.stats().and_gates() * n as u64);
        assert_eq!(r.stage(Stage::Garble).bytes_sent, r.table_bytes);
        assert_eq!(eo.report.stage(Stage::Garble).bytes_received, r.table_bytes);
        assert_eq!(
            (r.bytes_sent, eo.report.bytes_sent),
            expected_wire_bytes_with(&c, n as u64, Scheme::ThreeHalves)
        );
        let (hg, _) = expected_wire_bytes_with(&c, n as u64, Scheme::HalfGates);
        assert_eq!(hg - r.bytes_sent, 7 * c.stats().and_gates() * n as u64);
    }
}

/// A three-halves session of several computations (one OT set-up, the gate counter running
/// on) decodes every one.
#[test]
fn a_three_halves_session_runs_several_computations() {
    let aes = library::aes128();
    let mul = library::mul(16);
    let mut prg = Prg::from_seed([0x52; 16]);
    let jobs: Vec<(Circuit, Vec<bool>, Vec<bool>)> = [&aes, &mul, &aes]
        .iter()
        .map(|c| {
            let g = random_bits(&mut prg, c.garbler_input_bits());
            let e = random_bits(&mut prg, c.evaluator_input_bits());
            ((*c).clone(), g, e)
        })
        .collect();
    let opts = SessionOptions {
        scheme: Scheme::ThreeHalves,
        ..SessionOptions::default()
    };
    let (mut a, mut b) = mem_pair(Duration::from_secs(20));
    let ejobs = jobs.clone();
    let t = std::thread::spawn(move || {
        let mut s = EvaluatorSession::new(&opts).unwrap();
        ejobs
            .iter()
            .map(|(c, _, e)| s.run(&mut b, c, std::slice::from_ref(e)).unwrap())
            .collect::<Vec<_>>()
    });
    let mut s = GarblerSession::new(&opts).unwrap();
    for (k, (c, g, e)) in jobs.iter().enumerate() {
        let go = s.run(&mut a, c, std::slice::from_ref(g)).unwrap();
        assert_eq!(go.outputs[0], c.eval(g, e).unwrap(), "computation {k}");
    }
    for (k, ((c, g, e), eo)) in jobs.iter().zip(t.join().unwrap()).enumerate() {
        assert_eq!(eo.outputs[0], c.eval(g, e).unwrap(), "computation {k}");
    }
}

/// Parties with different schemes fail at the header, each with a typed error naming both
/// schemes, under either hash.
#[test]
fn different_schemes_fail_at_the_header_on_both_sides() {
    for (gs, es, hash) in [
        (Scheme::HalfGates, Scheme::ThreeHalves, GcHash::Mitccrh),
        (Scheme::ThreeHalves, Scheme::HalfGates, GcHash::Mitccrh),
        (Scheme::ThreeHalves, Scheme::HalfGates, GcHash::FixedKey),
    ] {
        let (mut a, mut b) = mem_pair(Duration::from_secs(5));
        let t = std::thread::spawn(move || {
            let opts = SessionOptions {
                scheme: es,
                hash,
                ..SessionOptions::default()
            };
            run_evaluator(&mut b, &library::mul(8), &[vec![true; 8]], &opts)
        });
        let opts = SessionOptions {
            scheme: gs,
            hash,
            ..SessionOptions::default()
        };
        let g = run_garbler(&mut a, &library::mul(8), &[vec![false; 8]], &opts);
        let e = t.join().unwrap();
        assert!(
            matches!(g, Err(SessionError::SchemeMismatch { ours, peer }) if ours == gs && peer == es),
            "{g:?}"
        );
        assert!(
            matches!(e, Err(SessionError::SchemeMismatch { ours, peer }) if ours == es && peer == gs),
            "{e:?}"
        );
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains(gs.name()) && msg.contains(es.name()), "{msg}");
    }
}

/// A header naming a scheme this build does not know: a typed error naming the number and
/// our scheme.
#[test]
fn an_unknown_scheme_in_the_header_is_a_typed_error() {
    let c = library::mul(8);
    let (mut a, mut b) = mem_pair(Duration::from_secs(5));
    let t = std::thread::spawn(move || {
        run_evaluator(
            &mut b,
            &library::mul(8),
            &[vec![true; 8]],
            &SessionOptions::default(),
        )
    });
    let (mut x, mut y) = mem_pair(Duration::from_secs(5));
    let g = std::thread::spawn(move || {
        let _ = run_garbler(&mut x, &c, &[vec![false; 8]], &SessionOptions::default());
    });
    let mut hdr = [0u8; HEADER_BYTES];
    y.recv(&mut hdr).unwrap();
    hdr[60..64].copy_from_slice(&9u32.to_le_bytes());
    a.send(&hdr).unwrap();
    a.flush().unwrap();
    let e = t.join().unwrap();
    drop(y);
    let _ = g.join();
    assert!(
        matches!(
            e,
            Err(SessionError::UnknownScheme {
                ours: Scheme::HalfGates,
                peer: 9
            })
        ),
        "{e:?}"
    );
}
