//! Fuzzes the two-party garbled-circuit session with a peer whose messages after the header
//! are not what the protocol sends.
//!
//! One party (the fuzzed one) runs against an honest peer in a second thread over an
//! in-memory channel; every byte the fuzzed party receives after the peer's (valid) header
//! passes through [`Tampered`], which from some offset on either replaces the peer's bytes
//! with the fuzzer's bytes (arbitrary messages; the peer closes when they run out) or XORs
//! the fuzzer's bytes onto them (the right lengths with any content). An offset past the OT
//! set-up reaches the garbled tables, labels and decoding bits. Either party can be the
//! fuzzed one, in the compiled-circuit session (`garble::session`: one or two evaluations,
//! one or two computations on one connection) and in the generated-circuit session
//! (`garble::stream`). No input may panic or hang: errors are the expected outcome. With
//! nothing tampered, the session must succeed with the plain evaluation's outputs.
#![no_main]

use std::time::Duration;

use garble::channel::{Channel, ChannelError, MemChannel, mem_pair};
use garble::circuit::{Circuit, Party};
use garble::generator::{Gen, Generator, W, Word};
use garble::scheme::Scheme;
use garble::session::{
    EvaluatorSession, GarblerSession, HEADER_BYTES, SessionError, SessionOptions, SessionOutput,
};
use garble::{Builder, stream};
use libfuzzer_sys::fuzz_target;

/// How the fuzzer's bytes change what the fuzzed party receives after the header, from
/// `from` bytes after it on (the bytes before arrive untouched).
#[derive(Clone, Copy)]
enum Mode {
    /// The fuzzer's bytes replace the peer's; when they run out, the peer has closed.
    Replace { from: u64 },
    /// The fuzzer's bytes are XORed onto the peer's; after them the peer's bytes pass.
    Xor { from: u64 },
}

/// The fuzzed party's end of the channel: the honest peer's bytes, tampered with after the
/// first `clean` bytes (the header, so that the session gets past Init).
struct Tampered<'a> {
    inner: MemChannel,
    clean: u64,
    received: u64,
    mode: Mode,
    data: &'a [u8],
}

impl Channel for Tampered<'_> {
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        self.inner.send(data)
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        // The peer's bytes are read in any case, so that the two stay in step.
        self.inner.recv(buf)?;
        for b in buf.iter_mut() {
            let p = self.received;
            self.received += 1;
            let Some(after) = p.checked_sub(self.clean) else {
                continue;
            };
            let (Mode::Replace { from } | Mode::Xor { from }) = self.mode;
            let Some(i) = after
                .checked_sub(from)
                .and_then(|i| usize::try_from(i).ok())
            else {
                continue;
            };
            match (self.mode, self.data.get(i)) {
                (Mode::Xor { .. }, Some(m)) => *b ^= m,
                (Mode::Xor { .. }, None) => {}
                (Mode::Replace { .. }, Some(&v)) => *b = v,
                (Mode::Replace { .. }, None) => return Err(ChannelError::Closed),
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ChannelError> {
        self.inner.flush()
    }

    fn bytes_sent(&self) -> u64 {
        self.inner.bytes_sent()
    }

    fn bytes_received(&self) -> u64 {
        self.received
    }
}

/// Small compiled circuits: every gate kind, and either party without inputs.
fn circuit(which: u8) -> Circuit {
    match which % 4 {
        0 => garble::library::mul(6),
        1 => {
            let mut b = Builder::new();
            let g = b.input(Party::Garbler, 5);
            let e = b.input(Party::Evaluator, 3);
            let x = b.and(g[0], e[0]);
            let y = b.xor(g[1], e[1]);
            let z = b.not(g[2]);
            let w = b.and(y, z);
            let v = b.and(g[3], e[2]);
            let u = b.xor(v, g[4]);
            b.finish(&[vec![x, y, z, w], vec![u]])
                .expect("a valid circuit")
        }
        2 => {
            let mut b = Builder::new();
            let g = b.input(Party::Garbler, 8);
            let out = b.and_words(&g[..4], &g[4..]);
            b.finish(&[out]).expect("a valid circuit")
        }
        _ => {
            let mut b = Builder::new();
            let e = b.input(Party::Evaluator, 8);
            let out = b.and_words(&e[..4], &e[4..]);
            b.finish(&[out]).expect("a valid circuit")
        }
    }
}

/// A small generated circuit: `(g & e) + (g ^ e)` over 8 bits.
struct Tiny;

impl Generator for Tiny {
    fn name(&self) -> String {
        "fuzz-tiny".into()
    }
    fn garbler_input_bits(&self) -> usize {
        8
    }
    fn evaluator_input_bits(&self) -> usize {
        8
    }
    fn output_bits(&self) -> usize {
        8
    }
    fn generate<G: Gen>(&self, g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
        let x = g.and_w(a, b);
        let y = g.xor_w(a, b);
        g.add(&x, &y)
    }
}

fn bits(n: usize, seed: u8) -> Vec<bool> {
    (0..n).map(|i| (seed >> (i % 8)) & 1 == 1).collect()
}

/// Both parties' inputs for `evaluations` evaluations of `c`, from one seed byte.
fn inputs(c: &Circuit, evaluations: usize, seed: u8) -> (Vec<Vec<bool>>, Vec<Vec<bool>>) {
    let g = (0..evaluations)
        .map(|k| bits(c.garbler_input_bits(), seed.wrapping_add(k as u8)))
        .collect();
    let e = (0..evaluations)
        .map(|k| bits(c.evaluator_input_bits(), seed.rotate_left(3 + k as u32)))
        .collect();
    (g, e)
}

/// The garbler of a compiled-circuit session of `computations` computations.
fn garbler<C: Channel>(
    ch: &mut C,
    c: &Circuit,
    inputs: &[Vec<bool>],
    (computations, opts): (usize, &SessionOptions),
) -> Result<Vec<SessionOutput>, SessionError> {
    let mut s = GarblerSession::new(opts)?;
    (0..computations).map(|_| s.run(ch, c, inputs)).collect()
}

/// The evaluator of such a session.
fn evaluator<C: Channel>(
    ch: &mut C,
    c: &Circuit,
    inputs: &[Vec<bool>],
    (computations, opts): (usize, &SessionOptions),
) -> Result<Vec<SessionOutput>, SessionError> {
    let mut s = EvaluatorSession::new(opts)?;
    (0..computations).map(|_| s.run(ch, c, inputs)).collect()
}

/// Runs the fuzzed party against an honest peer in a second thread; returns the fuzzed
/// party's result. A panic of either is a crash.
fn session<'a, T>(
    clean: u64,
    mode: Mode,
    data: &'a [u8],
    fuzzed: impl FnOnce(&mut Tampered<'a>) -> T,
    honest: impl FnOnce(&mut MemChannel) -> T + Send,
) -> T
where
    T: Send,
{
    // Long enough for the honest peer's base OTs on a busy machine. The two sides stay in
    // step (tampering changes bytes, never lengths), so this is reached only if they wait for
    // each other: the hang this target looks for, which libFuzzer's -timeout reports.
    let (x, mut y) = mem_pair(Duration::from_secs(20));
    let mut t = Tampered {
        inner: x,
        clean,
        received: 0,
        mode,
        data,
    };
    std::thread::scope(|s| {
        let peer = s.spawn(move || {
            let r = honest(&mut y);
            drop(y);
            r
        });
        let r = fuzzed(&mut t);
        // Hanging up lets the honest peer see the end wherever it waits.
        drop(t);
        let _ = peer.join().expect("the honest peer panicked");
        r
    })
}

fuzz_target!(|data: &[u8]| {
    // Byte 0: bit 0 fuzzes the garbler (else the evaluator), bit 1 the generated-circuit
    // session, bit 2 XORs (else replaces), bits 3-4 pick the compiled circuit, bit 5 two
    // evaluations, bit 6 two computations, bit 7 three-halves (else half-gates). Byte 1: the
    // inputs. Bytes 2-3: how many of the
    // peer's bytes after the header arrive untouched. The rest: the fuzzer's bytes.
    let [flags, seed, lo, hi, data @ ..] = data else {
        return;
    };
    let (flags, seed) = (*flags, *seed);
    let fuzz_garbler = flags & 1 != 0;
    let from = u64::from(u16::from_le_bytes([*lo, *hi]));
    let mode = if flags & 4 != 0 {
        Mode::Xor { from }
    } else {
        Mode::Replace { from }
    };
    let untampered = matches!(mode, Mode::Xor { .. }) && data.iter().all(|&b| b == 0);
    let opts = SessionOptions {
        scheme: if flags & 0x80 != 0 {
            Scheme::ThreeHalves
        } else {
            Scheme::HalfGates
        },
        ..SessionOptions::default()
    };

    if flags & 2 != 0 {
        let (g_in, e_in) = (bits(8, seed), bits(8, seed.rotate_left(3)));
        let want = garble::generator::eval_plain(&Tiny, &g_in, &e_in);
        let r = if fuzz_garbler {
            session(
                stream::HEADER_BYTES as u64,
                mode,
                data,
                |ch| stream::run_garbler(ch, &Tiny, &g_in, &opts),
                |ch| stream::run_evaluator(ch, &Tiny, &e_in, &opts),
            )
        } else {
            session(
                stream::HEADER_BYTES as u64,
                mode,
                data,
                |ch| stream::run_evaluator(ch, &Tiny, &e_in, &opts),
                |ch| stream::run_garbler(ch, &Tiny, &g_in, &opts),
            )
        };
        if untampered {
            let out = r.expect("an untampered session succeeds");
            assert_eq!(out.outputs, vec![want]);
        }
        return;
    }

    let c = circuit(flags >> 3);
    let evaluations = 1 + usize::from(flags >> 5 & 1);
    let computations = 1 + usize::from(flags >> 6 & 1);
    let (g_in, e_in) = inputs(&c, evaluations, seed);
    let r = if fuzz_garbler {
        session(
            HEADER_BYTES as u64,
            mode,
            data,
            |ch| garbler(ch, &c, &g_in, (computations, &opts)),
            |ch| evaluator(ch, &c, &e_in, (computations, &opts)),
        )
    } else {
        session(
            HEADER_BYTES as u64,
            mode,
            data,
            |ch| evaluator(ch, &c, &e_in, (computations, &opts)),
            |ch| garbler(ch, &c, &g_in, (computations, &opts)),
        )
    };
    if untampered {
        let out = r.expect("an untampered session succeeds");
        assert_eq!(out.len(), computations);
        for o in out {
            let want: Vec<Vec<bool>> = g_in
                .iter()
                .zip(&e_in)
                .map(|(g, e)| c.eval(g, e).expect("input lengths match"))
                .collect();
            assert_eq!(o.outputs, want);
        }
    }
});
