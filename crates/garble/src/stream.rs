//! Garbling and evaluating a generated circuit ([`crate::generator`]) gate
//! by gate as the generator emits it, and the two-party session around it.
//! (The streaming Bristol Fashion writer is [`crate::generator::write_bristol`].)
//!
//! # Memory
//!
//! Nothing is proportional to the gate count: the garbler's backend holds
//! the global offset, the AND counter and one 64 KiB table buffer; labels
//! live in the generator's own words (`Vec`s of 16-byte labels) and are
//! freed when the Rust code drops them, so memory is the live values of the
//! generator at its widest point (for the Ed25519 signature: a few hundred
//! field elements, plus the public tables of [`crate::ed25519::point`]).
//!
//! # Agreement between the parties
//!
//! Both parties run the same generator; constant folding happens in
//! [`Gen`]'s provided methods before a backend sees a gate, so the two see
//! the same gates in the same order and their AND counters (the hash
//! tweaks) agree. A structural digest of that stream ([`generator::stats`])
//! is exchanged at Init: a peer with a different circuit is refused.
//!
//! # Protocol
//!
//! As [`crate::session`] with one evaluation: Init (magic, digest, the
//! garbling hash, the garbling scheme and MITCCRH's seed), OT Init (base
//! OTs), Peer Inputs (the evaluator's labels by OT extension, the garbler's
//! sent directly), Garble ([`Scheme::table_bytes`] per AND gate: 32 with
//! half-gates, 25 with three-halves, streamed while the generator runs),
//! Result (decoding bits and the output check to the evaluator, outputs back
//! to the garbler). The Load stage is the counting pass that computes the
//! digest and the table-byte total.
//!
//! # Schemes
//!
//! Both schemes of [`Scheme`] garble here: a gate emitted alone goes to the
//! scheme's one-gate code (half-gates: the fused VAES kernel for independent
//! gates, or the formulas of [`crate::gc`]; three-halves: [`crate::threehalves`]'s
//! fused kernel on a run of one gate, or its generic formulas), a compiled
//! sub-circuit to the scheme's [`Scheme::garble_to`] (its tables written into the
//! channel's send buffer) / [`Scheme::evaluate`] with their fused per-run
//! kernels. The scheme is chosen once per session: the backends test it once
//! per gate (half-gates' path is otherwise unchanged) and once per sub-circuit
//! call. Three-halves' secret coins come from the
//! garbler's own [`Prg`] (the session's, seeded from the OS).

use std::time::{Duration, Instant};

use crate::channel::{Channel, ChannelError, RoundTrips};
use crate::circuit::{GateKind, InputLengthError, Party, bits_from_bytes, bytes_from_bits};
use crate::gc::{CHUNK_BYTES, TABLE_BYTES};
use crate::generator::{self, Gen, GenStats, Generator, Refused, Sub, W, Word};
use crate::hash::{Block, Hasher, Prg};
use crate::ot::{IknpReceiver, IknpSender};
use crate::scheme::Scheme;
use crate::session::{
    Clocks, Counters, HashParams, Role, SessionError, SessionOptions, SessionOutput, SessionReport,
    Stage, Stages, apply_deadline, check_hash_scheme, new_hash_params,
};
use crate::threehalves::{self, GateGarbler};

/// Protocol magic of generated-circuit sessions (version 2: the header names
/// the garbling hash and carries MITCCRH's seed, and the Result stage has the
/// output check; 3: the header names the garbling scheme too, in the high 4
/// bytes of the hash's id, as [`crate::session`]'s header does; 4: the base
/// OTs go in bundles of four, [`crate::ot`]; 5: their pads hash a bundle's
/// common block first, and the digests of the generated circuit's pieces
/// hash wire ids in fewer bytes; 6: the base OTs run on Edwards points,
/// not Ristretto).
pub const MAGIC: [u8; 8] = *b"CCGS\x00\x06\x00\x00";

#[inline(always)]
fn put(buf: &mut [u8], b: Block) {
    buf.copy_from_slice(&b.0.to_le_bytes());
}

#[inline(always)]
fn get(buf: &[u8]) -> Block {
    let mut a = [0u8; 16];
    a.copy_from_slice(buf);
    Block(u128::from_le_bytes(a))
}

/// The XOR of the labels each mask selects, by the method of four Russians: for each 8
/// labels, a table of the XORs of all 256 subsets of them (255 XORs); each output then XORs
/// one entry per 8 labels, picked by its mask's byte. A lookup of 8,192 labels into 768
/// outputs takes about a million 16-byte XORs, where the folds of its gates take three
/// million. `bits` are [`Gen::xor_select`]'s (`init` is ignored here); an output is `None`
/// when its mask selects no label. Mask bits past the labels select nothing.
pub fn xor_select_blocks(labels: &[Block], bits: &[(bool, Vec<u64>)]) -> Vec<Option<Block>> {
    let words = labels.len().div_ceil(64);
    let tail = match labels.len() % 64 {
        0 => u64::MAX,
        r => (1u64 << r) - 1,
    };
    let mut padded;
    let labels = if labels.len().is_multiple_of(64) {
        labels
    } else {
        padded = labels.to_vec();
        padded.resize(words * 64, Block::ZERO);
        &padded[..]
    };
    let word_of = |mask: &[u64], wi: usize| {
        let w = mask.get(wi).copied().unwrap_or(0);
        if wi + 1 == words { w & tail } else { w }
    };
    let mut acc = vec![Block::ZERO; bits.len()];
    let mut any = vec![false; bits.len()];
    let mut table = vec![Block::ZERO; 8 * 256];
    for (wi, group) in labels.chunks_exact(64).enumerate() {
        for (t, l8) in table.chunks_exact_mut(256).zip(group.chunks_exact(8)) {
            for m in 1..256usize {
                t[m] = t[m & (m - 1)] ^ l8[m.trailing_zeros() as usize];
            }
        }
        for ((a, seen), (_, mask)) in acc.iter_mut().zip(&mut any).zip(bits) {
            let w = word_of(mask, wi);
            *seen |= w != 0;
            let mut x = *a;
            for (byte, t) in w.to_le_bytes().into_iter().zip(table.chunks_exact(256)) {
                x ^= t[usize::from(byte)];
            }
            *a = x;
        }
    }
    acc.into_iter()
        .zip(any)
        .map(|(l, seen)| seen.then_some(l))
        .collect()
}

/// [`Gen::xor_select`] for the label backends: [`xor_select_blocks`], then `init`. The
/// labels equal those of [`generator::xor_select_fold`]: XOR is associative and
/// commutative, and both parties' `not_raw` is an XOR with a constant (the offset, or
/// nothing). A selector with constant items takes the folds.
fn xor_select_labels<G: Gen<L = Block>>(
    g: &mut G,
    items: &[W<Block>],
    bits: &[(bool, Vec<u64>)],
) -> Word<Block> {
    let mut labels = Vec::with_capacity(items.len());
    for w in items {
        match *w {
            W::V(l) => labels.push(l),
            W::C(_) => return generator::xor_select_fold(g, items, bits),
        }
    }
    xor_select_blocks(&labels, bits)
        .into_iter()
        .zip(bits)
        .map(|(l, &(init, _))| match (l, init) {
            (None, c) => W::C(c),
            (Some(l), false) => W::V(l),
            (Some(l), true) => W::V(g.not_raw(l)),
        })
        .collect()
}

/// Garbles gates as they are emitted: wires are zero labels; AND tables go
/// to the peer in chunks of at most [`CHUNK_BYTES`] (whole tables of the
/// session's scheme). After a channel error or a refused reveal, gates are no
/// longer hashed or sent (the generator runs to its end cheaply) and the error
/// is returned by [`StreamGarbler::finish`].
pub struct StreamGarbler<'a> {
    hasher: &'a Hasher,
    delta: Block,
    counter: u64,
    buf: Vec<u8>,
    fill: usize,
    ch: &'a mut dyn Channel,
    err: Option<SessionError>,
    fused: bool,
    scratch: Vec<Block>,
    /// Three-halves' one-gate garbler and the PRG of its secret coins; `None`
    /// under half-gates. Tested once per AND gate and once per sub-circuit.
    three: Option<(GateGarbler, &'a mut Prg)>,
}

impl<'a> StreamGarbler<'a> {
    /// A half-gates garbler with offset `delta` (odd) whose AND counter starts
    /// at `counter`, sending its tables (and a reveal's decoding bits) to `ch`.
    pub fn new(hasher: &'a Hasher, delta: Block, counter: u64, ch: &'a mut dyn Channel) -> Self {
        StreamGarbler {
            hasher,
            delta,
            counter,
            buf: vec![0u8; CHUNK_BYTES],
            fill: 0,
            ch,
            err: None,
            fused: hasher.fused(),
            scratch: Vec::new(),
            three: None,
        }
    }

    /// A garbler as [`StreamGarbler::new`] under `scheme`. `prg` is the
    /// garbler's secret randomness: three-halves draws its coins from it (two
    /// bits per AND gate), half-gates draws nothing. It must not be seeded
    /// from anything the evaluator knows (a session's comes from the OS).
    pub fn with_scheme(
        hasher: &'a Hasher,
        delta: Block,
        counter: u64,
        ch: &'a mut dyn Channel,
        scheme: Scheme,
        prg: &'a mut Prg,
    ) -> Self {
        let mut g = StreamGarbler::new(hasher, delta, counter, ch);
        if scheme == Scheme::ThreeHalves {
            g.three = Some((GateGarbler::new(hasher, delta), prg));
        }
        g
    }

    /// Where the next table of `tb` bytes goes in the buffer (the buffer is
    /// sent first when it has no room for it); `None` after an error.
    #[inline(always)]
    fn table_at(&mut self, tb: usize) -> Option<usize> {
        if self.err.is_some() {
            return None;
        }
        if self.fill + tb > CHUNK_BYTES {
            self.drain();
            if self.err.is_some() {
                return None;
            }
        }
        let at = self.fill;
        self.fill += tb;
        Some(at)
    }

    /// A three-halves AND gate ([`StreamGarbler::and_raw`] under three-halves).
    #[inline]
    fn and_three_halves(&mut self, a0: Block, b0: Block) -> Block {
        const TB: usize = threehalves::TABLE_BYTES;
        let Some(at) = self.table_at(TB) else {
            return Block::ZERO;
        };
        let j = self.counter;
        self.counter += 1;
        let t = &mut self.buf[at..at + TB];
        match self.three.as_mut() {
            Some((gg, prg)) => gg.garble(self.hasher, prg, (a0, b0), j, t),
            // Not reached: `and_raw` comes here under three-halves only.
            None => Block::ZERO,
        }
    }

    /// Sends the buffered tables (they go out in gate order).
    fn drain(&mut self) {
        if self.err.is_none() && self.fill > 0 {
            match self.ch.send(&self.buf[..self.fill]) {
                Ok(()) => self.fill = 0,
                Err(e) => self.err = Some(e.into()),
            }
        }
    }

    /// Flushes the last tables; returns the AND counter, or the first channel
    /// error or refusal.
    pub fn finish(mut self) -> Result<u64, SessionError> {
        self.drain();
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(self.counter),
        }
    }
}

impl Gen for StreamGarbler<'_> {
    type L = Block;
    #[inline]
    fn xor_raw(&mut self, a: Block, b: Block) -> Block {
        a ^ b
    }
    #[inline]
    fn not_raw(&mut self, a: Block) -> Block {
        a ^ self.delta
    }
    fn and_raw(&mut self, a0: Block, b0: Block) -> Block {
        if self.three.is_some() {
            return self.and_three_halves(a0, b0);
        }
        let Some(at) = self.table_at(TABLE_BYTES) else {
            return Block::ZERO;
        };
        let t = &mut self.buf[at..at + TABLE_BYTES];
        let j = self.counter;
        self.counter += 1;
        let delta = self.delta;
        if self.fused {
            let mut out = [Block::ZERO];
            self.hasher.garble_ands(delta, &[a0], &[b0], j, t, &mut out);
            return out[0];
        }
        let tw = Block(u128::from(j) << 1);
        let tw1 = Block(tw.0 | 1);
        let mut h = [a0, a0 ^ delta, b0, b0 ^ delta];
        self.hasher.hash(&mut h, &[tw, tw, tw1, tw1]);
        let (pa, pb) = (a0.lsb(), b0.lsb());
        let tg = h[0] ^ h[1] ^ delta.select(pb);
        let wg0 = h[0] ^ tg.select(pa);
        let te = h[2] ^ h[3] ^ a0;
        let we0 = h[2] ^ (te ^ a0).select(pb);
        put(&mut t[..16], tg);
        put(&mut t[16..], te);
        wg0 ^ we0
    }

    /// Sends every table so far and the decoding bits of `w`, and receives the values
    /// from the evaluator.
    fn reveal(&mut self, w: &[W<Block>]) -> Option<Vec<bool>> {
        self.drain();
        if self.err.is_some() {
            return None;
        }
        let mut back = vec![0u8; w.len().div_ceil(8)];
        let sent = self
            .ch
            .send(&bytes_from_bits(&decode_bits(w)))
            .and_then(|()| self.ch.flush())
            .and_then(|()| self.ch.recv(&mut back));
        if let Err(e) = sent {
            self.err = Some(e.into());
            return None;
        }
        // Constants are known to both; the evaluator's bits are taken for the others.
        Some(
            w.iter()
                .zip(bits_from_bytes(&back, w.len()))
                .map(|(x, v)| match *x {
                    W::C(b) => b,
                    W::V(_) => v,
                })
                .collect(),
        )
    }

    fn public(&mut self, bits: &[bool]) -> Word<Block> {
        bits.iter().map(|&b| W::V(self.delta.select(b))).collect()
    }

    fn xor_select(&mut self, items: &[W<Block>], bits: &[(bool, Vec<u64>)]) -> Word<Block> {
        xor_select_labels(self, items, bits)
    }

    fn refuse(&mut self, why: Refused) {
        self.err.get_or_insert(why.into());
    }

    fn call<F>(&mut self, sub: &Sub, a: &[W<Block>], b: &[W<Block>], _f: F) -> Word<Block>
    where
        F: FnOnce(&mut Self, &[W<Block>], &[W<Block>]) -> Word<Block>,
    {
        let p = sub.program();
        // Keep the tables in gate order on the wire.
        self.drain();
        if self.err.is_some() {
            return vec![W::V(Block::ZERO); sub.output_bits()];
        }
        let delta = self.delta;
        // A constant's zero label: 0 for 0, R for 1 (its active label is 0).
        let label = |w: &W<Block>| match *w {
            W::C(v) => delta.select(v),
            W::V(l) => l,
        };
        let l = &mut self.scratch;
        l.clear();
        l.resize(p.label_capacity(), Block::ZERO);
        for (&s, w) in p.garbler_inputs.iter().zip(a) {
            l[s as usize] = label(w);
        }
        for (&s, w) in p.evaluator_inputs.iter().zip(b) {
            l[s as usize] = label(w);
        }
        // The scheme's garbling of a compiled program, fused per-run kernels included,
        // its tables written straight into the channel's send buffer (as a session's).
        let ch: &mut dyn Channel = &mut *self.ch;
        let (hasher, counter) = (self.hasher, &mut self.counter);
        let done = match self.three.as_mut() {
            None => crate::gc::garble_to(p, hasher, delta, l, counter, ch),
            Some((_, prg)) => Scheme::ThreeHalves.garble_to(p, hasher, delta, prg, l, counter, ch),
        };
        if let Err(e) = done {
            self.err = Some(e.into());
        }
        p.outputs.iter().map(|&s| W::V(l[s as usize])).collect()
    }
}

/// Evaluates gates as they are emitted: wires are active labels; tables
/// come from the peer, exactly as many before each reveal and in total as
/// the circuit's count says (so that a table read never takes a reveal's
/// bytes or asks for bytes beyond the tables). After a channel error, an
/// overrun or a refused reveal, gates are no longer evaluated and the error is
/// returned by [`StreamEvaluator::finish`].
pub struct StreamEvaluator<'a> {
    hasher: &'a Hasher,
    counter: u64,
    buf: Vec<u8>,
    pos: usize,
    avail: usize,
    /// Table bytes still to read before the next reveal (or the end).
    remaining: u64,
    /// The counted reveals: AND gates before each, and its width.
    reveals: Vec<(u64, usize)>,
    /// The next reveal's index in `reveals`.
    next: usize,
    /// AND gates of the whole circuit.
    and_gates: u64,
    /// The AND counter at the start (reveal positions count from it).
    start: u64,
    ch: &'a mut dyn Channel,
    err: Option<SessionError>,
    fused: bool,
    scratch: Vec<Block>,
    /// The session's garbling scheme (tested once per AND gate and once per
    /// sub-circuit).
    scheme: Scheme,
}

/// The generator emitted more AND gates than counted (before a reveal, or in total).
const OVERRUN: &str = "the circuit emitted more AND gates than it counted";
/// A reveal came where the count did not put one (another width, fewer AND gates before it).
const MISPLACED: &str = "the circuit revealed where its count did not put a reveal";

impl<'a> StreamEvaluator<'a> {
    /// A half-gates evaluator of a circuit counted as `stats` (its AND gates and its
    /// reveals) whose AND counter starts at `counter`, reading tables from `ch`.
    pub fn new(
        hasher: &'a Hasher,
        counter: u64,
        stats: &GenStats,
        ch: &'a mut dyn Channel,
    ) -> Self {
        StreamEvaluator::with_scheme(hasher, counter, stats, ch, Scheme::HalfGates)
    }

    /// An evaluator as [`StreamEvaluator::new`] of tables garbled under `scheme`
    /// ([`Scheme::table_bytes`] per AND gate).
    pub fn with_scheme(
        hasher: &'a Hasher,
        counter: u64,
        stats: &GenStats,
        ch: &'a mut dyn Channel,
        scheme: Scheme,
    ) -> Self {
        let and_gates = stats.stats.and_gates();
        let mut e = StreamEvaluator {
            hasher,
            counter,
            buf: vec![0u8; CHUNK_BYTES],
            pos: 0,
            avail: 0,
            remaining: 0,
            reveals: stats.reveals.clone(),
            next: 0,
            and_gates,
            start: counter,
            ch,
            err: None,
            fused: hasher.fused(),
            scratch: Vec::new(),
            scheme,
        };
        e.remaining = e.segment_tables(0) * scheme.table_bytes() as u64;
        e
    }

    /// Where the next table of `TB` bytes is in the buffer, read from the channel when
    /// the buffer has none left; `None` after an error, or when the count has no table
    /// left before the next reveal or the end (an overrun, which is the error then).
    ///
    /// The buffer holds whole tables only: `remaining` counts whole tables, and each
    /// read takes the most whole tables that fit in [`CHUNK_BYTES`] (all of it for
    /// half-gates' 32-byte tables, 2,621 three-halves tables), so when fewer than `TB`
    /// bytes are left in the buffer, none are.
    #[inline(always)]
    fn table_at<const TB: usize>(&mut self) -> Option<usize> {
        if self.err.is_some() {
            return None;
        }
        if self.pos + TB > self.avail {
            let want = ((CHUNK_BYTES / TB * TB) as u64).min(self.remaining) as usize;
            if want < TB {
                self.err = Some(SessionError::Protocol(OVERRUN));
                return None;
            }
            if let Err(e) = self.ch.recv(&mut self.buf[..want]) {
                self.err = Some(e.into());
                return None;
            }
            self.remaining -= want as u64;
            self.avail = want;
            self.pos = 0;
        }
        let at = self.pos;
        self.pos += TB;
        Some(at)
    }

    /// A three-halves AND gate ([`StreamEvaluator::and_raw`] under three-halves).
    #[inline]
    fn and_three_halves(&mut self, wa: Block, wb: Block) -> Block {
        const TB: usize = threehalves::TABLE_BYTES;
        let Some(at) = self.table_at::<TB>() else {
            return Block::ZERO;
        };
        let j = self.counter;
        self.counter += 1;
        threehalves::eval_one(self.hasher, wa, wb, j, &self.buf[at..at + TB])
    }

    /// AND gates between the reveal before segment `i` (or the start) and the next (or
    /// the end).
    fn segment_tables(&self, i: usize) -> u64 {
        let start = if i == 0 { 0 } else { self.reveals[i - 1].0 };
        let end = self.reveals.get(i).map_or(self.and_gates, |r| r.0);
        end.saturating_sub(start)
    }

    /// The AND counter, or the first channel error, overrun or refusal.
    pub fn finish(mut self) -> Result<u64, SessionError> {
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(self.counter),
        }
    }
}

impl Gen for StreamEvaluator<'_> {
    type L = Block;
    #[inline]
    fn xor_raw(&mut self, a: Block, b: Block) -> Block {
        a ^ b
    }
    #[inline]
    fn not_raw(&mut self, a: Block) -> Block {
        a
    }
    fn and_raw(&mut self, wa: Block, wb: Block) -> Block {
        if self.scheme == Scheme::ThreeHalves {
            return self.and_three_halves(wa, wb);
        }
        let Some(at) = self.table_at::<TABLE_BYTES>() else {
            return Block::ZERO;
        };
        let t = &self.buf[at..at + TABLE_BYTES];
        let j = self.counter;
        self.counter += 1;
        if self.fused {
            let mut out = [Block::ZERO];
            self.hasher.eval_ands(&[wa], &[wb], j, t, &mut out);
            return out[0];
        }
        let tw = Block(u128::from(j) << 1);
        let mut h = [wa, wb];
        self.hasher.hash(&mut h, &[tw, Block(tw.0 | 1)]);
        let tg = get(&t[..16]);
        let te = get(&t[16..]);
        let wg = h[0] ^ tg.select(wa.lsb());
        let we = h[1] ^ (te ^ wa).select(wb.lsb());
        wg ^ we
    }

    /// Receives the decoding bits of `w` (every table before it has been read), decodes,
    /// and sends the values back to the garbler.
    fn reveal(&mut self, w: &[W<Block>]) -> Option<Vec<bool>> {
        if self.err.is_some() {
            return None;
        }
        let here = self.reveals.get(self.next).copied();
        let done = self.counter - self.start;
        if here != Some((done, w.len())) || self.remaining > 0 || self.pos != self.avail {
            self.err = Some(SessionError::Protocol(MISPLACED));
            return None;
        }
        self.next += 1;
        self.remaining = self.segment_tables(self.next) * self.scheme.table_bytes() as u64;
        let mut d = vec![0u8; w.len().div_ceil(8)];
        if let Err(e) = self.ch.recv(&mut d) {
            self.err = Some(e.into());
            return None;
        }
        let values: Vec<bool> = w
            .iter()
            .zip(bits_from_bytes(&d, w.len()))
            .map(|(x, db)| match *x {
                W::C(b) => b,
                W::V(l) => l.lsb() ^ db,
            })
            .collect();
        let sent = self
            .ch
            .send(&bytes_from_bits(&values))
            .and_then(|()| self.ch.flush());
        if let Err(e) = sent {
            self.err = Some(e.into());
            return None;
        }
        Some(values)
    }

    fn public(&mut self, bits: &[bool]) -> Word<Block> {
        vec![W::V(Block::ZERO); bits.len()]
    }

    fn xor_select(&mut self, items: &[W<Block>], bits: &[(bool, Vec<u64>)]) -> Word<Block> {
        xor_select_labels(self, items, bits)
    }

    fn refuse(&mut self, why: Refused) {
        self.err.get_or_insert(why.into());
    }

    fn call<F>(&mut self, sub: &Sub, a: &[W<Block>], b: &[W<Block>], _f: F) -> Word<Block>
    where
        F: FnOnce(&mut Self, &[W<Block>], &[W<Block>]) -> Word<Block>,
    {
        let p = sub.program();
        let need = p.and_gates() * self.scheme.table_bytes() as u64;
        let buffered = (self.avail - self.pos) as u64;
        if self.err.is_none() && need > buffered + self.remaining {
            self.err = Some(SessionError::Protocol(OVERRUN));
        }
        if self.err.is_some() {
            return vec![W::V(Block::ZERO); sub.output_bits()];
        }
        let l = &mut self.scratch;
        l.clear();
        l.resize(p.label_capacity(), Block::ZERO);
        // A constant's active label is 0 (see the garbler).
        let label = |w: &W<Block>| match *w {
            W::C(_) => Block::ZERO,
            W::V(l) => l,
        };
        for (&s, w) in p.garbler_inputs.iter().zip(a) {
            l[s as usize] = label(w);
        }
        for (&s, w) in p.evaluator_inputs.iter().zip(b) {
            l[s as usize] = label(w);
        }
        // Tables: what is buffered first, then the channel.
        let (buf, pos, avail, remaining, ch) = (
            &self.buf,
            &mut self.pos,
            self.avail,
            &mut self.remaining,
            &mut self.ch,
        );
        let mut src = |out: &mut [u8]| {
            let t = (avail - *pos).min(out.len());
            out[..t].copy_from_slice(&buf[*pos..*pos + t]);
            *pos += t;
            if t < out.len() {
                ch.recv(&mut out[t..])?;
                *remaining -= (out.len() - t) as u64;
            }
            Ok(())
        };
        // The scheme's evaluation of a compiled program, fused per-run kernels included.
        if let Err(e) = self
            .scheme
            .evaluate(p, self.hasher, l, &mut self.counter, &mut src)
        {
            self.err = Some(SessionError::Channel(e));
        }
        p.outputs.iter().map(|&s| W::V(l[s as usize])).collect()
    }
}

/// Bytes of the header each party sends at Init: [`MAGIC`], the circuit's digest, the
/// hash's id ([`crate::hash::GcHash::id`], 4 bytes), the scheme's id ([`Scheme::id`], 4
/// bytes) and the seed (zero for the fixed-key hash).
pub const HEADER_BYTES: usize = 64;

/// What each party of a session over `c` garbled with `scheme` must write to its
/// transport, in bytes, from the protocol's messages alone: `(garbler, evaluator)`, with
/// `stats` the generator's count of `c` ([`generator::stats`]: its AND gates, and the
/// outputs that folded to constants, which carry no check). The same messages as
/// [`crate::session::expected_wire_bytes_with`] for one evaluation ([`Scheme::table_bytes`]
/// per AND gate), with this protocol's 64-byte header. A session's socket counters are
/// checked against it.
pub fn expected_wire_bytes<G: Generator>(
    c: &G,
    stats: &generator::GenStats,
    scheme: Scheme,
) -> (u64, u64) {
    // Each reveal: the decoding bits to the evaluator, the values back.
    let reveal: u64 = stats.reveals.iter().map(|r| r.1.div_ceil(8) as u64).sum();
    let (g, e) = crate::session::wire_bytes(
        HEADER_BYTES as u64,
        c.garbler_input_bits(),
        c.evaluator_input_bits(),
        c.output_bits(),
        c.output_bits() - stats.constant_outputs as usize,
        stats.stats.and_gates() * scheme.table_bytes() as u64,
        1,
    );
    (g + reveal, e + reveal)
}

/// Our header: the hash's bytes ([`HashParams::bytes`]) with the scheme's id in the high
/// 4 bytes of the hash's 8 (as [`crate::session`]'s header).
fn header(digest: &[u8; 32], hp: HashParams, scheme: Scheme) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..8].copy_from_slice(&MAGIC);
    h[8..40].copy_from_slice(digest);
    h[40..].copy_from_slice(&hp.bytes());
    h[44..48].copy_from_slice(&scheme.id().to_le_bytes());
    h
}

const BAD_MAGIC: &str =
    "bad magic: the peer is not a ccbench generated-circuit peer of this version";

/// Checks a peer's header against ours (hash and scheme `ours`): the hash, then the
/// scheme, then the circuit. Returns the peer's seed.
fn check_header(
    digest: &[u8; 32],
    ours: (crate::hash::GcHash, Scheme),
    got: &[u8; HEADER_BYTES],
) -> Result<Block, SessionError> {
    if got[..8] != MAGIC {
        return Err(SessionError::Protocol(BAD_MAGIC));
    }
    let seed = check_hash_scheme(ours, &got[40..])?;
    if got[8..40] != digest[..] {
        return Err(SessionError::CircuitMismatch);
    }
    Ok(seed)
}

/// The zero labels of the outputs that are not constants (only those are checked).
fn output_labels(out: &[W<Block>]) -> Vec<Block> {
    out.iter()
        .filter_map(|w| match *w {
            W::C(_) => None,
            W::V(l) => Some(l),
        })
        .collect()
}

fn check_input(bits: &[bool], party: Party, expected: usize) -> Result<(), SessionError> {
    if bits.len() != expected {
        return Err(SessionError::Input {
            evaluation: 0,
            source: InputLengthError {
                party,
                got: bits.len(),
                expected,
            },
        });
    }
    Ok(())
}

/// Decoding bit of each output: the colour of its zero label (constants:
/// their value, which the evaluator knows too).
fn decode_bits(out: &[W<Block>]) -> Vec<bool> {
    out.iter()
        .map(|w| match *w {
            W::C(b) => b,
            W::V(l) => l.lsb(),
        })
        .collect()
}

fn report(
    role: Role,
    stats: &GenStats,
    (hasher, scheme): (&Hasher, Scheme),
    st: Stages,
    t0: Instant,
    moved: Counters,
    busy: Duration,
) -> SessionReport {
    SessionReport {
        role,
        evaluations: 1,
        backend: hasher.backend(),
        hash: hasher.kind(),
        scheme,
        stages: st.acc,
        circuit: stats.stats.clone(),
        // Labels live in the generator's values; no slot array.
        label_slots: 0,
        table_bytes: stats.stats.count(GateKind::And) * scheme.table_bytes() as u64,
        total: t0.elapsed(),
        busy,
        compile: Duration::ZERO,
        bytes_sent: moved.sent,
        bytes_received: moved.received,
        wire_bytes_sent: moved.wire_sent,
        wire_bytes_received: moved.wire_received,
        round_trips: moved.round_trips,
        start: st.start,
    }
}

/// Runs the garbler of a generated circuit once (the Load stage counts its
/// gates with [`generator::stats`] for the digest exchanged at Init).
pub fn run_garbler<C: Channel, G: Generator>(
    ch: &mut C,
    c: &G,
    input: &[bool],
    opts: &SessionOptions,
) -> Result<SessionOutput, SessionError> {
    apply_deadline(opts.deadline, ch);
    let ch = &mut RoundTrips::new(ch);
    let clocks = Clocks::start();
    let t0 = clocks.wall;
    let c0 = Counters::of(ch);
    let mut st = Stages::new(true);
    st.enter(Stage::Load, ch);
    let mut prg = Prg::from_os()?;
    let mut delta = prg.block();
    delta.0 |= 1;
    let hp = new_hash_params(opts.hash, &mut prg);
    let hasher = hp.hasher(opts.backend)?;
    check_input(input, Party::Garbler, c.garbler_input_bits())?;
    let stats = generator::stats(c);

    st.enter(Stage::Init, ch);
    ch.send(&header(&stats.digest, hp, opts.scheme))?;
    ch.flush()?;
    let mut ack = [0u8; HEADER_BYTES];
    ch.recv(&mut ack)?;
    if check_header(&stats.digest, (hp.hash, opts.scheme), &ack)? != hp.seed {
        return Err(SessionError::Protocol(
            "the peer echoed another hash seed than ours",
        ));
    }

    st.enter(Stage::OtInit, ch);
    let mut ot = IknpSender::setup(ch, &mut prg)?;

    st.enter(Stage::PeerInputs, ch);
    let elabels = ot.send_correlated(ch, &hasher, delta, c.evaluator_input_bits())?;
    let mut glabels = Vec::with_capacity(input.len());
    let mut msg = Vec::with_capacity(16 * input.len());
    for &bit in input {
        let l0 = prg.block();
        glabels.push(W::V(l0));
        msg.extend_from_slice(&(l0 ^ delta.select(bit)).to_bytes());
    }
    ch.send(&msg)?;
    let elabels: Word<Block> = elabels.into_iter().map(W::V).collect();

    st.enter(Stage::Garble, ch);
    // Three-halves' coins come from this session's PRG, seeded from the OS.
    let mut g = StreamGarbler::with_scheme(&hasher, delta, 0, ch, opts.scheme, &mut prg);
    let out = c.generate(&mut g, &glabels, &elabels);
    drop((glabels, elabels));
    g.finish()?;

    st.enter(Stage::Result, ch);
    let mut msg = bytes_from_bits(&decode_bits(&out));
    crate::gc::output_check(&hasher, &output_labels(&out), delta, 0, &mut msg);
    ch.send(&msg)?;
    ch.flush()?;
    let mut back = vec![0u8; out.len().div_ceil(8)];
    ch.recv(&mut back)?;
    let outputs = bits_from_bytes(&back, out.len());
    st.close(ch);
    st.trace_start(ch.log(), t0);
    let moved = Counters::of(ch).since(c0);
    Ok(SessionOutput {
        outputs: vec![outputs],
        report: report(
            Role::Garbler,
            &stats,
            (&hasher, opts.scheme),
            st,
            t0,
            moved,
            clocks.busy(),
        ),
    })
}

/// Runs the evaluator of a generated circuit once.
pub fn run_evaluator<C: Channel, G: Generator>(
    ch: &mut C,
    c: &G,
    input: &[bool],
    opts: &SessionOptions,
) -> Result<SessionOutput, SessionError> {
    apply_deadline(opts.deadline, ch);
    let ch = &mut RoundTrips::new(ch);
    let clocks = Clocks::start();
    let t0 = clocks.wall;
    let c0 = Counters::of(ch);
    let mut st = Stages::new(true);
    st.enter(Stage::Load, ch);
    if !opts.backend.available() {
        return Err(crate::hash::BackendUnavailable(opts.backend).into());
    }
    check_input(input, Party::Evaluator, c.evaluator_input_bits())?;
    let stats = generator::stats(c);

    st.enter(Stage::Init, ch);
    let mut hdr = [0u8; HEADER_BYTES];
    ch.recv(&mut hdr)?;
    if hdr[..8] != MAGIC {
        // Not a ccbench peer: nothing to answer.
        return Err(SessionError::Protocol(BAD_MAGIC));
    }
    // Answer before checking, so that a mismatch (hash, scheme or circuit) is reported on
    // both sides, naming both sides' values; the seed goes back as received.
    let ours = (opts.hash, opts.scheme);
    let seed = check_hash_scheme(ours, &hdr[40..]).unwrap_or(Block::ZERO);
    let hp = HashParams {
        hash: opts.hash,
        seed,
    };
    ch.send(&header(&stats.digest, hp, opts.scheme))?;
    ch.flush()?;
    check_header(&stats.digest, ours, &hdr)?;
    let hasher = hp.hasher(opts.backend)?;
    let mut prg = Prg::from_os()?;

    st.enter(Stage::OtInit, ch);
    let mut ot = IknpReceiver::setup(ch, &mut prg)?;

    st.enter(Stage::PeerInputs, ch);
    let mine = ot.receive_correlated(ch, &hasher, input)?;
    let elabels: Word<Block> = mine.into_iter().map(W::V).collect();
    let gbits = c.garbler_input_bits();
    let mut raw = vec![0u8; 16 * gbits];
    ch.recv(&mut raw)?;
    let glabels: Word<Block> = raw.chunks_exact(16).map(|b| W::V(get(b))).collect();
    drop(raw);

    st.enter(Stage::Garble, ch);
    let mut e = StreamEvaluator::with_scheme(&hasher, 0, &stats, ch, opts.scheme);
    let out = c.generate(&mut e, &glabels, &elabels);
    drop((glabels, elabels));
    e.finish()?;

    st.enter(Stage::Result, ch);
    let labels = output_labels(&out);
    let dlen = out.len().div_ceil(8);
    let mut dbytes = vec![0u8; dlen + crate::gc::CHECK_BYTES * labels.len()];
    ch.recv(&mut dbytes)?;
    crate::gc::verify_check(&hasher, &labels, 0, &dbytes[dlen..]).map_err(|source| {
        SessionError::OutputCheck {
            evaluation: 0,
            source,
        }
    })?;
    let d = bits_from_bytes(&dbytes[..dlen], out.len());
    let outputs: Vec<bool> = out
        .iter()
        .zip(&d)
        .map(|(w, &db)| match *w {
            W::C(b) => b,
            W::V(l) => l.lsb() ^ db,
        })
        .collect();
    ch.send(&bytes_from_bits(&outputs))?;
    ch.flush()?;
    st.close(ch);
    st.trace_start(ch.log(), t0);
    let moved = Counters::of(ch).since(c0);
    Ok(SessionOutput {
        outputs: vec![outputs],
        report: report(
            Role::Evaluator,
            &stats,
            (&hasher, opts.scheme),
            st,
            t0,
            moved,
            clocks.busy(),
        ),
    })
}

/// Garbles and evaluates `c` under `scheme` in one process, without a channel or OT:
/// tables go through a small in-memory queue as they are produced (the
/// evaluator runs in a second thread). For tests and for measuring
/// garbling alone. `prg` gives the offset, the labels and three-halves' coins.
/// Returns the outputs, or the first error (a refused reveal:
/// [`SessionError::Refused`]).
pub fn simulate<G: Generator + Sync>(
    c: &G,
    hasher: &Hasher,
    scheme: Scheme,
    prg: &mut Prg,
    garbler: &[bool],
    evaluator: &[bool],
) -> Result<Vec<bool>, SessionError> {
    let stats = generator::stats(c);
    let mut delta = prg.block();
    delta.0 |= 1;
    let mut g_in = Vec::new();
    let mut e_in = Vec::new();
    for &b in garbler.iter().chain(evaluator) {
        let l0 = prg.block();
        g_in.push(W::V(l0));
        e_in.push(W::V(l0 ^ delta.select(b)));
    }
    let (gb, ge) = g_in.split_at(garbler.len());
    let (eb, ee) = e_in.split_at(garbler.len());
    let (mut tx, mut rx) = crate::channel::mem_pair(crate::channel::DEFAULT_TIMEOUT);
    std::thread::scope(|s| {
        let ev = s.spawn(move || {
            let mut e = StreamEvaluator::with_scheme(hasher, 0, &stats, &mut rx, scheme);
            let out = c.generate(&mut e, eb, ee);
            e.finish()?;
            let mut d = vec![0u8; out.len().div_ceil(8)];
            rx.recv(&mut d)?;
            let d = bits_from_bytes(&d, out.len());
            Ok::<_, SessionError>(
                out.iter()
                    .zip(d)
                    .map(|(w, db)| match *w {
                        W::C(b) => b,
                        W::V(l) => l.lsb() ^ db,
                    })
                    .collect::<Vec<bool>>(),
            )
        });
        let mut g = StreamGarbler::with_scheme(hasher, delta, 0, &mut tx, scheme, prg);
        let out = c.generate(&mut g, gb, ge);
        let done = g.finish().and_then(|_| {
            tx.send(&bytes_from_bits(&decode_bits(&out)))?;
            Ok(tx.flush()?)
        });
        // Hang up on error, so that an evaluator waiting for bytes sees it.
        if done.is_err() {
            tx.close();
        }
        let ev = ev
            .join()
            .unwrap_or(Err(SessionError::Channel(ChannelError::Closed)));
        done.and(ev)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::mem_pair;
    use crate::ed25519::sha512;
    use crate::generator::eval_plain;
    use std::time::Duration;

    /// SHA-512 of a 40-byte message: 20 bytes from each party, XORed.
    struct Sha;
    impl Generator for Sha {
        fn name(&self) -> String {
            "sha512-40".into()
        }
        fn garbler_input_bits(&self) -> usize {
            320
        }
        fn evaluator_input_bits(&self) -> usize {
            320
        }
        fn output_bits(&self) -> usize {
            512
        }
        fn generate<Gg: Gen>(&self, g: &mut Gg, a: &[W<Gg::L>], b: &[W<Gg::L>]) -> Word<Gg::L> {
            let m = g.xor_w(a, b);
            sha512::sha512(g, &m)
        }
    }

    fn inputs() -> (Vec<bool>, Vec<bool>) {
        let a: Vec<u8> = (0..40u8).collect();
        let b: Vec<u8> = (0..40u8).map(|x| x.wrapping_mul(37)).collect();
        (bits_from_bytes(&a, 320), bits_from_bytes(&b, 320))
    }

    /// Every hasher of both garbling hashes: portable, and where the CPU has them AES-NI
    /// with the fused kernels (AVX-512VL and AVX2 instances) and without VAES (the generic
    /// code of both schemes).
    fn every_hasher() -> Vec<Hasher> {
        crate::hash::GcHash::ALL
            .into_iter()
            .flat_map(crate::gc::tests::hashers_of)
            .collect()
    }

    /// `simulate` of `c` under both schemes and every hasher: the outputs of plain
    /// evaluation (or its refusal).
    fn simulate_everywhere<G: Generator + Sync>(c: &G, a: &[bool], b: &[bool]) {
        let want = generator::try_eval_plain(c, a, b);
        for scheme in Scheme::ALL {
            for h in every_hasher() {
                let mut prg = Prg::from_seed([7; 16]);
                let got = simulate(c, &h, scheme, &mut prg, a, b);
                let what = format!("{} {scheme} {:?} fused {}", c.name(), h.kind(), h.fused());
                match &want {
                    Ok(w) => assert_eq!(got.as_ref().ok(), Some(w), "{what}: {got:?}"),
                    Err(w) => assert!(
                        matches!(got, Err(SessionError::Refused(r)) if r == *w),
                        "{what}: {got:?}"
                    ),
                }
            }
        }
    }

    #[test]
    fn simulate_matches_plain_on_every_backend_hash_and_scheme() {
        let (a, b) = inputs();
        simulate_everywhere(&Sha, &a, &b);
    }

    /// Field multiplications and squarings (compiled sub-circuits, [`Gen::call`]) between
    /// gates emitted one at a time, so that a call finds tables of single gates in the
    /// evaluator's buffer and single gates follow it; one multiplication has constant
    /// inputs (the top bits, as the field's top bit is). Out: `((a & b) * b)^2 & a`, then
    /// `a * (b with its top 8 bits cleared)`.
    struct Calls;
    impl Generator for Calls {
        fn name(&self) -> String {
            "calls".into()
        }
        fn garbler_input_bits(&self) -> usize {
            256
        }
        fn evaluator_input_bits(&self) -> usize {
            256
        }
        fn output_bits(&self) -> usize {
            512
        }
        fn generate<Gg: Gen>(&self, g: &mut Gg, a: &[W<Gg::L>], b: &[W<Gg::L>]) -> Word<Gg::L> {
            use crate::ed25519::field;
            let x = g.and_w(a, b);
            let y = field::mul(g, &x, b);
            let z = field::square(g, &y);
            let mut out = g.and_w(&z, a);
            let mut bc = b.to_vec();
            bc[248..].fill(W::C(false));
            out.extend(field::mul(g, a, &bc));
            out
        }
    }

    fn calls_inputs() -> (Vec<bool>, Vec<bool>) {
        let a: Vec<u8> = (0..32u8).map(|x| x.wrapping_mul(91) ^ 0x3c).collect();
        let b: Vec<u8> = (0..32u8)
            .map(|x| x.wrapping_mul(13).wrapping_add(5))
            .collect();
        (bits_from_bytes(&a, 256), bits_from_bytes(&b, 256))
    }

    #[test]
    fn sub_circuit_calls_garble_and_evaluate_as_in_plain() {
        let (a, b) = calls_inputs();
        simulate_everywhere(&Calls, &a, &b);
    }

    /// Lookups in public tables of random bits: the evaluator's 7 bits pick an entry of each
    /// table through their one-hot vector; the garbler's 5 bits pick from a 32-entry table
    /// (a width not a multiple of 64); one mask selects nothing, one only an item past the
    /// end, and every `init` occurs.
    struct Lookups;
    impl Lookups {
        fn bits(items: usize, seed: u8) -> Vec<(bool, Vec<u64>)> {
            let mut prg = Prg::from_seed([seed; 16]);
            let words = items.div_ceil(64);
            let mut bits: Vec<(bool, Vec<u64>)> = (0..40)
                .map(|k| {
                    let m = (0..words).map(|_| prg.block().0 as u64).collect();
                    (k % 3 == 0, m)
                })
                .collect();
            bits.push((false, vec![0; words]));
            bits.push((true, vec![0; words]));
            let mut past = vec![0u64; words + 1];
            past[words] = 1;
            bits.push((false, past));
            bits
        }
    }
    impl Generator for Lookups {
        fn name(&self) -> String {
            "lookups".into()
        }
        fn garbler_input_bits(&self) -> usize {
            5
        }
        fn evaluator_input_bits(&self) -> usize {
            7
        }
        fn output_bits(&self) -> usize {
            2 * 43
        }
        fn generate<Gg: Gen>(&self, g: &mut Gg, a: &[W<Gg::L>], b: &[W<Gg::L>]) -> Word<Gg::L> {
            let oh = crate::ed25519::point::one_hot(g, b);
            let mut out = g.xor_select(&oh, &Lookups::bits(oh.len(), 1));
            let oh = crate::ed25519::point::one_hot(g, a);
            out.extend(g.xor_select(&oh, &Lookups::bits(oh.len(), 2)));
            out
        }
    }

    #[test]
    fn lookups_garble_and_evaluate_as_in_plain() {
        for (x, y) in [(0u8, 0u8), (31, 127), (17, 64), (5, 99)] {
            let a = bits_from_bytes(&[x], 5);
            let b = bits_from_bytes(&[y], 7);
            simulate_everywhere(&Lookups, &a, &b);
        }
    }

    proptest::proptest! {
        /// The four Russians' XORs against one XOR per selected label.
        #[test]
        fn xor_select_blocks_is_the_xor_of_the_selected_labels(
            n in 0usize..300,
            seed in proptest::prelude::any::<[u8; 16]>(),
            outputs in 0usize..20,
        ) {
            let mut prg = Prg::from_seed(seed);
            let labels: Vec<Block> = (0..n).map(|_| prg.block()).collect();
            // One word more than needed: bits past the labels must select nothing.
            let bits: Vec<(bool, Vec<u64>)> = (0..outputs)
                .map(|k| {
                    let density = k % 4;
                    let m = (0..n.div_ceil(64) + 1)
                        .map(|_| match density {
                            0 => 0,
                            1 => prg.block().0 as u64 & prg.block().0 as u64,
                            _ => prg.block().0 as u64,
                        })
                        .collect();
                    (false, m)
                })
                .collect();
            let got = xor_select_blocks(&labels, &bits);
            proptest::prop_assert_eq!(got.len(), outputs);
            for (o, (_, mask)) in got.iter().zip(&bits) {
                let picked: Vec<Block> = (0..n)
                    .filter(|&j| mask[j / 64] >> (j % 64) & 1 == 1)
                    .map(|j| labels[j])
                    .collect();
                let want = (!picked.is_empty())
                    .then(|| picked.iter().fold(Block::ZERO, |x, &l| x ^ l));
                proptest::prop_assert_eq!(*o, want);
            }
        }
    }

    /// Both parties of a session of `c` over memory under `opts`.
    fn session<G: Generator + Sync>(
        c: &G,
        a: &[bool],
        b: &[bool],
        opts: &SessionOptions,
    ) -> (
        Result<SessionOutput, SessionError>,
        Result<SessionOutput, SessionError>,
    ) {
        let (g, e, _) = sessions(c, (a, b), (opts, opts));
        (g, e)
    }

    /// A garbler with options `go` and an evaluator with `eo` over memory: their results and
    /// the bytes each sent.
    fn sessions<G: Generator + Sync>(
        c: &G,
        (a, b): (&[bool], &[bool]),
        (go, eo): (&SessionOptions, &SessionOptions),
    ) -> (
        Result<SessionOutput, SessionError>,
        Result<SessionOutput, SessionError>,
        (u64, u64),
    ) {
        let (mut x, mut y) = mem_pair(Duration::from_secs(10));
        let (g, e) = std::thread::scope(|s| {
            let e = s.spawn(|| run_evaluator(&mut y, c, b, eo));
            let g = run_garbler(&mut x, c, a, go);
            (g, e.join().unwrap())
        });
        (g, e, (x.bytes_sent(), y.bytes_sent()))
    }

    /// A session of `c` under `scheme`: both parties get the plain outputs, report the
    /// scheme and its table bytes, and every byte either party sent is one the protocol's
    /// messages account for ([`expected_wire_bytes`] under `scheme`).
    fn session_is_exact<G: Generator + Sync>(c: &G, a: &[bool], b: &[bool], scheme: Scheme) {
        let want = eval_plain(c, a, b);
        let opts = SessionOptions {
            scheme,
            ..SessionOptions::default()
        };
        let (g, e) = session(c, a, b, &opts);
        let (g, e) = (g.unwrap(), e.unwrap());
        assert_eq!((&g.outputs[0], &e.outputs[0]), (&want, &want), "{scheme}");
        assert_eq!((g.report.scheme, e.report.scheme), (scheme, scheme));
        let gs = generator::stats(c);
        let tables = gs.stats.and_gates() * scheme.table_bytes() as u64;
        assert_eq!(g.report.table_bytes, tables);
        assert!(g.report.stage(Stage::Garble).bytes_sent >= tables);
        let predicted = expected_wire_bytes(c, &gs, scheme);
        assert_eq!((g.report.bytes_sent, e.report.bytes_sent), predicted);
        assert_eq!(
            (g.report.wire_bytes_sent, g.report.wire_bytes_received),
            predicted,
            "{} {scheme}",
            c.name()
        );
    }

    #[test]
    fn two_party_session_over_memory() {
        let (a, b) = inputs();
        for scheme in Scheme::ALL {
            session_is_exact(&Sha, &a, &b, scheme);
        }
        // Three-halves saves exactly 7 bytes per AND gate on the wire, all of them the
        // garbler's.
        let gs = generator::stats(&Sha);
        let (h, t) = (
            expected_wire_bytes(&Sha, &gs, Scheme::HalfGates),
            expected_wire_bytes(&Sha, &gs, Scheme::ThreeHalves),
        );
        assert_eq!((h.0 - t.0, h.1), (7 * gs.stats.and_gates(), t.1));
    }

    /// Sub-circuit calls between single gates, and lookups, in sessions under both schemes.
    #[test]
    fn two_party_sessions_with_calls_and_lookups() {
        let (a, b) = calls_inputs();
        let (x, y) = (bits_from_bytes(&[19], 5), bits_from_bytes(&[101], 7));
        for scheme in Scheme::ALL {
            session_is_exact(&Calls, &a, &b, scheme);
            session_is_exact(&Lookups, &x, &y, scheme);
        }
    }

    /// Outputs that fold to constants carry no check bytes: the prediction counts only the
    /// others, and matches the wire exactly (as the Ed25519 signature's top bits of `S`).
    #[test]
    fn constant_outputs_are_predicted_without_a_check() {
        struct WithConstants;
        impl Generator for WithConstants {
            fn name(&self) -> String {
                "and8-and-three-constants".into()
            }
            fn garbler_input_bits(&self) -> usize {
                8
            }
            fn evaluator_input_bits(&self) -> usize {
                8
            }
            fn output_bits(&self) -> usize {
                11
            }
            fn generate<Gg: Gen>(&self, g: &mut Gg, a: &[W<Gg::L>], b: &[W<Gg::L>]) -> Word<Gg::L> {
                let mut out = g.and_w(a, b);
                out.extend([W::C(false), W::C(true), W::C(false)]);
                out
            }
        }
        let gs = generator::stats(&WithConstants);
        assert_eq!(gs.constant_outputs, 3);
        let (a, b) = (
            vec![true; 8],
            vec![true, false, true, true, false, false, true, true],
        );
        let want = eval_plain(&WithConstants, &a, &b);
        for scheme in Scheme::ALL {
            let opts = SessionOptions {
                scheme,
                ..SessionOptions::default()
            };
            let (g, e) = session(&WithConstants, &a, &b, &opts);
            let (g, e) = (g.unwrap(), e.unwrap());
            assert_eq!((&g.outputs[0], &e.outputs[0]), (&want, &want));
            let predicted = expected_wire_bytes(&WithConstants, &gs, scheme);
            assert_eq!(
                (g.report.wire_bytes_sent, e.report.wire_bytes_sent),
                predicted
            );
        }
    }

    /// A circuit that reveals `a & b` in its middle, refuses an all-zero value, and goes on
    /// with the revealed bits, reversed, as public wires: `(a & b) ^ rev(a & b) & b`.
    struct RevealAnd;
    impl Generator for RevealAnd {
        fn name(&self) -> String {
            "reveal-and8".into()
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
        fn generate<Gg: Gen>(&self, g: &mut Gg, a: &[W<Gg::L>], b: &[W<Gg::L>]) -> Word<Gg::L> {
            let x = g.and_w(a, b);
            let v = match g.reveal(&x) {
                Some(v) if v.iter().all(|&bit| !bit) => {
                    g.refuse(Refused("all zero"));
                    v
                }
                Some(v) => v,
                None => vec![false; 8],
            };
            let rev: Vec<bool> = v.into_iter().rev().collect();
            let p = g.public(&rev);
            let y = g.and_w(&p, b);
            g.xor_w(&x, &y)
        }
    }

    fn reveal_and_plain(a: u8, b: u8) -> Vec<bool> {
        let x = a & b;
        bits_from_bytes(&[x ^ (x.reverse_bits() & b)], 8)
    }

    /// The reveal in a session, under both schemes: both parties get the plain outputs,
    /// the counted position and the wire bytes are exact; a refused value stops both with
    /// the typed error (in `simulate` too, with every hasher).
    #[test]
    fn a_mid_circuit_reveal_round_trips_and_a_refusal_stops_both() {
        let st = generator::stats(&RevealAnd);
        assert_eq!(st.reveals, vec![(8, 8)]);
        assert_eq!(st.stats.and_gates(), 16);
        for (a, b) in [(0xb5u8, 0x6eu8), (0x0f, 0xf0)] {
            simulate_everywhere(
                &RevealAnd,
                &bits_from_bytes(&[a], 8),
                &bits_from_bytes(&[b], 8),
            );
        }
        for (scheme, (a, b, refused)) in Scheme::ALL
            .into_iter()
            .flat_map(|s| [(s, (0xb5u8, 0x6eu8, false)), (s, (0x0f, 0xf0, true))])
        {
            let (ab, bb) = (bits_from_bytes(&[a], 8), bits_from_bytes(&[b], 8));
            let plain = generator::try_eval_plain(&RevealAnd, &ab, &bb);
            let h = Hasher::new();
            let sim = simulate(
                &RevealAnd,
                &h,
                scheme,
                &mut Prg::from_seed([3; 16]),
                &ab,
                &bb,
            );
            let opts = SessionOptions {
                scheme,
                ..SessionOptions::default()
            };
            let (g, e) = session(&RevealAnd, &ab, &bb, &opts);
            if refused {
                let want = Refused("all zero");
                assert_eq!(plain, Err(want));
                assert!(matches!(sim, Err(SessionError::Refused(w)) if w == want));
                assert!(matches!(g, Err(SessionError::Refused(w)) if w == want));
                assert!(matches!(e, Err(SessionError::Refused(w)) if w == want));
                continue;
            }
            let want = reveal_and_plain(a, b);
            assert_eq!(plain.unwrap(), want);
            assert_eq!(sim.unwrap(), want);
            let (g, e) = (g.unwrap(), e.unwrap());
            assert_eq!((&g.outputs[0], &e.outputs[0]), (&want, &want));
            let predicted = expected_wire_bytes(&RevealAnd, &st, scheme);
            assert_eq!(
                (g.report.wire_bytes_sent, e.report.wire_bytes_sent),
                predicted,
                "{scheme}"
            );
            // The garbler's Garble stage waits once, for the reveal; the 8 tables after it
            // are its tail. Its Result stage ends waiting for the outputs: no tail.
            let garble = g.report.stage(Stage::Garble);
            assert_eq!(garble.round_trips, 1);
            assert_eq!(
                garble.tail_sent,
                8 * scheme.table_bytes() as u64,
                "{scheme}"
            );
            assert_eq!(g.report.stage(Stage::Result).tail_sent, 0);
            // Its tail's time is what came after the reveal's answer: part of the stage.
            assert!(garble.tail_time < garble.time, "{scheme}");
            // A stage without a round trip is all tail: the evaluator's Result sends only.
            let res = e.report.stage(Stage::Result);
            assert_eq!((res.round_trips, res.tail_time), (0, res.time), "{scheme}");
            assert!(res.tail_sent > 0, "{scheme}");
        }
        // No flat form.
        assert!(matches!(
            generator::build(&RevealAnd),
            Err(crate::circuit::CircuitError::Reveal)
        ));
    }

    #[test]
    fn different_circuits_are_refused_on_both_sides() {
        struct Other;
        impl Generator for Other {
            fn name(&self) -> String {
                "other".into()
            }
            fn garbler_input_bits(&self) -> usize {
                320
            }
            fn evaluator_input_bits(&self) -> usize {
                320
            }
            fn output_bits(&self) -> usize {
                320
            }
            fn generate<Gg: Gen>(&self, g: &mut Gg, a: &[W<Gg::L>], b: &[W<Gg::L>]) -> Word<Gg::L> {
                g.and_w(a, b)
            }
        }
        let (a, b) = inputs();
        let (mut x, mut y) = mem_pair(Duration::from_secs(5));
        let opts = SessionOptions::default();
        let (g, e) = std::thread::scope(|s| {
            let e = s.spawn(|| run_evaluator(&mut y, &Other, &b, &opts));
            let g = run_garbler(&mut x, &Sha, &a, &opts);
            (g, e.join().unwrap())
        });
        assert!(matches!(g, Err(SessionError::CircuitMismatch)), "{g:?}");
        assert!(matches!(e, Err(SessionError::CircuitMismatch)), "{e:?}");
    }

    /// Different hashes: a typed error on both sides naming both; and both
    /// hashes sign the same (the fixed-key one too).
    #[test]
    fn different_hashes_are_refused_on_both_sides() {
        use crate::hash::GcHash;
        let (a, b) = inputs();
        let want = eval_plain(&Sha, &a, &b);
        for (gh, eh) in [
            (GcHash::Mitccrh, GcHash::FixedKey),
            (GcHash::FixedKey, GcHash::Mitccrh),
            (GcHash::FixedKey, GcHash::FixedKey),
        ] {
            let go = SessionOptions {
                hash: gh,
                ..SessionOptions::default()
            };
            let eo = SessionOptions { hash: eh, ..go };
            let (g, e, _) = sessions(&Sha, (&a, &b), (&go, &eo));
            if gh == eh {
                assert_eq!(g.unwrap().outputs[0], want);
                assert_eq!(e.unwrap().outputs[0], want);
                continue;
            }
            assert!(
                matches!(g, Err(SessionError::HashMismatch { ours, peer }) if ours == gh && peer == eh),
                "{g:?}"
            );
            assert!(
                matches!(e, Err(SessionError::HashMismatch { ours, peer }) if ours == eh && peer == gh),
                "{e:?}"
            );
        }
    }

    /// Different schemes: a typed error on both sides naming both, before any OT; the
    /// same scheme on both sides signs.
    #[test]
    fn different_schemes_are_refused_on_both_sides() {
        let (a, b) = inputs();
        let want = eval_plain(&Sha, &a, &b);
        for (gs, es) in [
            (Scheme::HalfGates, Scheme::ThreeHalves),
            (Scheme::ThreeHalves, Scheme::HalfGates),
            (Scheme::ThreeHalves, Scheme::ThreeHalves),
        ] {
            let go = SessionOptions {
                scheme: gs,
                ..SessionOptions::default()
            };
            let eo = SessionOptions { scheme: es, ..go };
            let (g, e, sent) = sessions(&Sha, (&a, &b), (&go, &eo));
            if gs == es {
                assert_eq!(g.unwrap().outputs[0], want);
                assert_eq!(e.unwrap().outputs[0], want);
                continue;
            }
            assert!(
                matches!(g, Err(SessionError::SchemeMismatch { ours, peer }) if ours == gs && peer == es),
                "{g:?}"
            );
            assert!(
                matches!(e, Err(SessionError::SchemeMismatch { ours, peer }) if ours == es && peer == gs),
                "{e:?}"
            );
            // Only the headers went each way.
            let hb = HEADER_BYTES as u64;
            assert_eq!(sent, (hb, hb));
        }
    }

    /// A header that names a scheme this build does not know: the evaluator answers (so
    /// that the peer learns of it) and stops with the typed error naming the number.
    #[test]
    fn an_unknown_scheme_is_a_typed_error() {
        let (_, b) = inputs();
        let (mut x, mut y) = mem_pair(Duration::from_secs(5));
        let stats = generator::stats(&Sha);
        let hp = HashParams {
            hash: crate::hash::GcHash::FixedKey,
            seed: Block::ZERO,
        };
        let mut hdr = header(&stats.digest, hp, Scheme::ThreeHalves);
        hdr[44..48].copy_from_slice(&9u32.to_le_bytes());
        let opts = SessionOptions {
            hash: crate::hash::GcHash::FixedKey,
            scheme: Scheme::ThreeHalves,
            ..SessionOptions::default()
        };
        let (echo, e) = std::thread::scope(|s| {
            let e = s.spawn(|| run_evaluator(&mut y, &Sha, &b, &opts));
            x.send(&hdr).unwrap();
            x.flush().unwrap();
            let mut echo = [0u8; HEADER_BYTES];
            x.recv(&mut echo).unwrap();
            (echo, e.join().unwrap())
        });
        assert!(
            matches!(
                e,
                Err(SessionError::UnknownScheme {
                    ours: Scheme::ThreeHalves,
                    peer: 9
                })
            ),
            "{e:?}"
        );
        // The answer names the evaluator's scheme: the garbler would refuse it.
        assert!(matches!(
            check_header(&stats.digest, (hp.hash, Scheme::HalfGates), &echo),
            Err(SessionError::SchemeMismatch {
                ours: Scheme::HalfGates,
                peer: Scheme::ThreeHalves
            })
        ));
    }

    /// `n` AND gates of the first input bits, then a reveal of their XOR.
    struct AndsThenReveal(usize);
    impl Generator for AndsThenReveal {
        fn name(&self) -> String {
            format!("ands-then-reveal-{}", self.0)
        }
        fn garbler_input_bits(&self) -> usize {
            8
        }
        fn evaluator_input_bits(&self) -> usize {
            8
        }
        fn output_bits(&self) -> usize {
            1
        }
        fn generate<Gg: Gen>(&self, g: &mut Gg, a: &[W<Gg::L>], b: &[W<Gg::L>]) -> Word<Gg::L> {
            let mut acc = W::C(false);
            for k in 0..self.0 {
                let x = g.and(a[k % 8], b[k % 8]);
                acc = g.xor(acc, x);
            }
            let _ = g.reveal(&[acc]);
            vec![acc]
        }
    }

    /// An evaluator that counted `n` AND gates before a reveal but is handed a circuit with
    /// more (as a peer that garbles more would make it) stops with the overrun error after
    /// reading exactly the counted tables, under both schemes: the reveal's bytes behind
    /// them stay unread, and one gate too many is not accepted.
    #[test]
    fn more_and_gates_than_counted_are_an_overrun_that_reads_no_reveal_bytes() {
        // Tables of 2,700 gates take more than one read of the evaluator's buffer.
        let (n, more) = (2_700usize, 2_701usize);
        let counted = generator::stats(&AndsThenReveal(n));
        assert_eq!(counted.reveals, vec![(n as u64, 1)]);
        for scheme in Scheme::ALL {
            let tables = n * scheme.table_bytes();
            let (mut x, mut y) = mem_pair(Duration::from_secs(5));
            // The counted tables (zeros: wrong, but the count is what is checked), then a
            // reveal's decoding byte.
            let mut bytes = vec![0u8; tables];
            bytes.push(0xa5);
            x.send(&bytes).unwrap();
            x.flush().unwrap();
            let h = Hasher::new();
            let mut e = StreamEvaluator::with_scheme(&h, 0, &counted, &mut y, scheme);
            let labels: Word<Block> = vec![W::V(Block::ZERO); 8];
            let _ = AndsThenReveal(more).generate(&mut e, &labels, &labels);
            let r = e.finish();
            assert!(
                matches!(r, Err(SessionError::Protocol(m)) if m == OVERRUN),
                "{scheme}: {r:?}"
            );
            assert_eq!(y.bytes_received(), tables as u64, "{scheme}");
            let mut rest = [0u8; 1];
            y.recv(&mut rest).unwrap();
            assert_eq!(rest, [0xa5]);
        }
    }

    #[test]
    fn a_peer_that_disconnects_mid_stream_is_an_error() {
        let (a, b) = inputs();
        let (mut x, mut y) = mem_pair(Duration::from_secs(5));
        let opts = SessionOptions::default();
        let g = std::thread::scope(|s| {
            s.spawn(move || {
                // Handshake, then hang up.
                let mut hdr = [0u8; HEADER_BYTES];
                let _ = y.recv(&mut hdr);
                let _ = y.send(&hdr);
                let _ = y.flush();
                y.close();
            });
            run_garbler(&mut x, &Sha, &a, &opts)
        });
        assert!(g.is_err());
        let _ = b;
    }

    #[test]
    fn wrong_input_length_is_an_error() {
        let (mut x, _y) = mem_pair(Duration::from_secs(1));
        let r = run_garbler(&mut x, &Sha, &[true; 3], &SessionOptions::default());
        assert!(matches!(r, Err(SessionError::Input { .. })), "{r:?}");
    }

    #[test]
    fn bristol_output_parses_and_agrees() {
        let mut v = Vec::new();
        let (n, st) = crate::generator::write_bristol(&Sha, &mut v).unwrap();
        assert_eq!(n, v.len() as u64);
        let text = String::from_utf8(v).unwrap();
        let c = crate::bristol::parse(&text).unwrap();
        assert_eq!(c.stats().and_gates(), st.stats.and_gates());
        let (a, b) = inputs();
        assert_eq!(c.eval(&a, &b).unwrap(), eval_plain(&Sha, &a, &b));
    }
}
