//! Half-gates garbling (Zahur, Rosulek, Evans, "Two Halves Make a Whole",
//! EUROCRYPT 2015) with free-XOR (Kolesnikov-Schneider 2008) and
//! point-and-permute.
//!
//! The garbler holds the zero label `W0` of every live wire and a global
//! offset `R` (`lsb(R) = 1`); the one label is `W0 ^ R` and a label's colour is
//! its least significant bit. XOR: `C0 = A0 ^ B0`. INV: `C0 = A0 ^ R` (the
//! evaluator keeps its label). EQ (public constant `v`): `C0 = v R`, so the
//! evaluator's label is the zero block, which reveals nothing about `R`. AND
//! with tweaks `j = 2g`, `j' = 2g + 1` (`g` counts AND gates over the whole
//! session) and `pa = lsb(A0)`, `pb = lsb(B0)`:
//!
//! ```text
//! TG = H(A0, j) ^ H(A1, j) ^ pb R        WG0 = H(A0, j) ^ pa TG
//! TE = H(B0, j') ^ H(B1, j') ^ A0        WE0 = H(B0, j') ^ pb (TE ^ A0)
//! C0 = WG0 ^ WE0,  table = TG || TE  (exactly 32 bytes)
//! ```
//!
//! The evaluator with labels `Wa`, `Wb` computes `WG = H(Wa, j) ^ sa TG`,
//! `WE = H(Wb, j') ^ sb (TE ^ Wa)` and `Wc = WG ^ WE`.
//!
//! Gates of one AND run are independent (see [`crate::program`]). With VAES
//! the whole run goes to one kernel call per piece of the table buffer
//! (`Hasher::garble_run`/`eval_run`): round keys loaded once, labels
//! gathered and scattered in the kernel, hash inputs, the hash, the
//! half-gates formulas and the table in vector registers, 16 AES blocks in
//! flight (four gates garbling, eight evaluating). Otherwise the generic
//! code below processes [`BATCH`] gates at a time over [`Hasher::hash`]:
//! the garbler hashes 4 x 8 = 32 blocks, the evaluator 16. Tests keep the
//! two, and the portable hash, byte-identical.
//! Tables are written in place into the sink's buffer (a channel's send
//! buffer, in a session): no per-gate allocation, no copy, and the garbled
//! circuit is never held.

use crate::channel::{Channel, ChannelError};
use crate::hash::{Block, Hasher};
use crate::program::{ONE_SLOT, Program, Run, XorRun, ZERO_SLOT};

/// AND gates hashed together.
pub const BATCH: usize = 8;

/// Bytes of garbled table per AND gate.
pub const TABLE_BYTES: usize = 32;

/// Size of the table buffer handed to the sink (2048 AND gates).
pub const CHUNK_BYTES: usize = 64 * 1024;

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

/// The label array of one garbling or evaluation: a power-of-two number of
/// blocks, indexed by slot masked with `len - 1`. Every slot of a compiled
/// [`Program`] is below [`Program::num_slots`], so the mask never changes an
/// index; it lets the compiler see that every index is in bounds, which
/// removes a compare and branch from every wire access.
pub(crate) struct Slots<'a> {
    pub(crate) l: &'a mut [Block],
    mask: usize,
}

impl<'a> Slots<'a> {
    /// The first [`Program::label_capacity`] blocks of `labels`.
    ///
    /// # Panics
    ///
    /// If `labels` is shorter than that.
    #[inline(always)]
    pub(crate) fn new(prog: &Program, labels: &'a mut [Block]) -> Slots<'a> {
        let cap = prog.label_capacity();
        assert!(
            labels.len() >= cap,
            "label array of {} blocks, the program needs {cap}",
            labels.len()
        );
        let l = &mut labels[..cap];
        assert!(l.len().is_power_of_two());
        let mask = l.len() - 1;
        Slots { l, mask }
    }

    #[inline(always)]
    pub(crate) fn get(&self, s: u32) -> Block {
        self.l[s as usize & self.mask]
    }

    #[inline(always)]
    pub(crate) fn set(&mut self, s: u32, v: Block) {
        self.l[s as usize & self.mask] = v;
    }

    /// A run of free gates as XOR sums over slots (garbler and evaluator
    /// alike: the constant slots make INV and EQ plain XORs), one loop for
    /// each arity.
    #[inline(always)]
    pub(crate) fn xor_run(&mut self, run: XorRun<'_>) {
        match run {
            XorRun::Two(r) => self.xor_triples(r),
            XorRun::Three(r) => self.sum_run(r),
            XorRun::Four(r) => self.sum_run(r),
        }
    }

    /// Sums of two inputs, records `[a, b, out]` (the circuit's own XOR gates).
    /// About 16 instructions a gate (three gate-list loads, three masks,
    /// three scalings, two label loads, a XOR, a store, the loop control).
    /// The slice is taken as `..=mask` here so that LLVM sees every masked
    /// index in bounds wherever this is inlined: through `get`/`set` it kept
    /// three compares and branches a gate in the garbler's session code,
    /// where the slice length had gone to the stack. Unrolling it by hand
    /// made LLVM split every other gate's 128-bit XOR into 64-bit halves
    /// (more instructions, split stores), so it stays a plain loop.
    #[inline(always)]
    fn xor_triples(&mut self, run: &[[u32; 3]]) {
        let m = self.mask;
        let l = &mut self.l[..=m];
        for &[a, b, o] in run {
            l[o as usize & m] = l[a as usize & m] ^ l[b as usize & m];
        }
    }

    /// Sums of `N - 1` inputs, records `[i1, .., out]`; masked as
    /// [`Slots::xor_triples`] is.
    #[inline(always)]
    fn sum_run<const N: usize>(&mut self, run: &[[u32; N]]) {
        let m = self.mask;
        let l = &mut self.l[..=m];
        for rec in run {
            let mut acc = l[rec[0] as usize & m];
            for &i in &rec[1..N - 1] {
                acc ^= l[i as usize & m];
            }
            l[rec[N - 1] as usize & m] = acc;
        }
    }
}

/// Where [`garble_to`] writes the garbled tables: pieces of whole tables,
/// each written in place by the garbler.
pub trait TableSink {
    /// Why a write failed.
    type Error;
    /// Bytes the next piece may take (at least [`TABLE_BYTES`]`*`[`BATCH`]).
    fn room(&self) -> usize;
    /// Appends `n <= room()` bytes that `fill` writes (all of them).
    fn put(&mut self, n: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), Self::Error>;
}

/// A channel takes the tables into its send buffer: they are written once,
/// where the socket reads them.
impl<C: Channel + ?Sized> TableSink for C {
    type Error = ChannelError;
    fn room(&self) -> usize {
        self.send_room()
    }
    fn put(&mut self, n: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), ChannelError> {
        self.send_in_place(n, fill)
    }
}

/// Tables gathered in a buffer of [`CHUNK_BYTES`] that goes to a closure
/// whenever it fills ([`Chunks::finish`] passes on the rest).
pub(crate) struct Chunks<'a, E> {
    pub(crate) buf: Vec<u8>,
    pub(crate) fill: usize,
    pub(crate) to: &'a mut dyn FnMut(&[u8]) -> Result<(), E>,
}

impl<E> Chunks<'_, E> {
    pub(crate) fn finish(mut self) -> Result<(), E> {
        if self.fill > 0 {
            (self.to)(&self.buf[..self.fill])?;
            self.fill = 0;
        }
        Ok(())
    }
}

impl<E> TableSink for Chunks<'_, E> {
    type Error = E;
    fn room(&self) -> usize {
        // A full buffer goes out in `put`, so the room is never zero.
        CHUNK_BYTES - self.fill
    }
    fn put(&mut self, n: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), E> {
        fill(&mut self.buf[self.fill..self.fill + n]);
        self.fill += n;
        if CHUNK_BYTES - self.fill < TABLE_BYTES * BATCH {
            (self.to)(&self.buf[..self.fill])?;
            self.fill = 0;
        }
        Ok(())
    }
}

/// Garbles `prog` once, handing the tables to `sink` in chunks of at most
/// [`CHUNK_BYTES`]; otherwise as [`garble_to`].
pub fn garble<E>(
    prog: &Program,
    hasher: &Hasher,
    delta: Block,
    labels: &mut [Block],
    gate_counter: &mut u64,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut chunks = Chunks {
        buf: vec![0u8; CHUNK_BYTES],
        fill: 0,
        to: sink,
    };
    garble_to(prog, hasher, delta, labels, gate_counter, &mut chunks)?;
    chunks.finish()
}

/// Garbles `prog` once. `labels` (at least [`Program::label_capacity`]
/// long) holds the zero labels of the input slots on entry and of every slot
/// on return; `gate_counter` is the session-wide AND counter (the tweak
/// source), advanced by the number of AND gates. The tables go to `sink` in
/// circuit order.
pub fn garble_to<S: TableSink + ?Sized>(
    prog: &Program,
    hasher: &Hasher,
    delta: Block,
    labels: &mut [Block],
    gate_counter: &mut u64,
    sink: &mut S,
) -> Result<(), S::Error> {
    let mut l = Slots::new(prog, labels);
    l.set(ZERO_SLOT, Block::ZERO);
    l.set(ONE_SLOT, delta);
    let mut h = [Block::ZERO; 4 * BATCH];
    let mut tw = [Block::ZERO; 4 * BATCH];
    let mut a0s = [Block::ZERO; BATCH];
    let mut pbs = [false; BATCH];
    let mut outs = [0u32; BATCH];
    let fused = hasher.fused();
    for run in prog.runs() {
        match run {
            Run::Ands(run) => {
                if fused {
                    // The whole run in the fused kernel, one piece per
                    // stretch of room in the sink.
                    let mut rest = run;
                    while !rest.is_empty() {
                        let k = rest.len().min(sink.room() / TABLE_BYTES);
                        let (now, later) = rest.split_at(k);
                        let ctr = *gate_counter;
                        sink.put(k * TABLE_BYTES, &mut |tables| {
                            hasher.garble_run(delta, l.l, now, ctr, tables);
                        })?;
                        *gate_counter += k as u64;
                        rest = later;
                    }
                    continue;
                }
                for chunk in run.chunks(BATCH) {
                    let k = chunk.len();
                    for (i, &[a, b, o]) in chunk.iter().enumerate() {
                        let a0 = l.get(a);
                        let b0 = l.get(b);
                        a0s[i] = a0;
                        pbs[i] = b0.lsb();
                        outs[i] = o;
                        h[4 * i] = a0;
                        h[4 * i + 1] = a0 ^ delta;
                        h[4 * i + 2] = b0;
                        h[4 * i + 3] = b0 ^ delta;
                        let j = Block(u128::from(*gate_counter + i as u64) << 1);
                        let j1 = Block(j.0 | 1);
                        tw[4 * i] = j;
                        tw[4 * i + 1] = j;
                        tw[4 * i + 2] = j1;
                        tw[4 * i + 3] = j1;
                    }
                    hasher.hash(&mut h[..4 * k], &tw[..4 * k]);
                    sink.put(k * TABLE_BYTES, &mut |tables| {
                        for (i, t) in tables.chunks_exact_mut(TABLE_BYTES).enumerate() {
                            let a0 = a0s[i];
                            let pa = a0.lsb();
                            let pb = pbs[i];
                            let tg = h[4 * i] ^ h[4 * i + 1] ^ delta.select(pb);
                            let wg0 = h[4 * i] ^ tg.select(pa);
                            let te = h[4 * i + 2] ^ h[4 * i + 3] ^ a0;
                            let we0 = h[4 * i + 2] ^ (te ^ a0).select(pb);
                            put(&mut t[..16], tg);
                            put(&mut t[16..], te);
                            l.set(outs[i], wg0 ^ we0);
                        }
                    })?;
                    *gate_counter += k as u64;
                }
            }
            Run::Xors(run) => l.xor_run(run),
        }
    }
    Ok(())
}

/// A source of garbled tables for [`evaluate`]: fills the buffer completely
/// or fails.
pub type TableSource<'a, E> = dyn FnMut(&mut [u8]) -> Result<(), E> + 'a;

/// Evaluates `prog` once. `labels` (at least [`Program::label_capacity`]
/// long) holds the active labels of the input slots on entry and of every
/// slot on return; `gate_counter` must match the garbler's. Tables are
/// pulled from `source` in chunks of at most [`CHUNK_BYTES`].
pub fn evaluate<E>(
    prog: &Program,
    hasher: &Hasher,
    labels: &mut [Block],
    gate_counter: &mut u64,
    source: &mut TableSource<'_, E>,
) -> Result<(), E> {
    let mut l = Slots::new(prog, labels);
    l.set(ZERO_SLOT, Block::ZERO);
    l.set(ONE_SLOT, Block::ZERO);
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut remaining = prog.and_gates() as usize * TABLE_BYTES;
    let mut pos = CHUNK_BYTES;
    let mut avail = 0usize;
    let mut h = [Block::ZERO; 2 * BATCH];
    let mut tw = [Block::ZERO; 2 * BATCH];
    let mut was = [Block::ZERO; BATCH];
    let mut sbs = [false; BATCH];
    let mut outs = [0u32; BATCH];
    let fused = hasher.fused();
    for run in prog.runs() {
        match run {
            Run::Ands(run) => {
                if fused {
                    let mut reader = TableReader {
                        buf: &mut buf,
                        pos: &mut pos,
                        avail: &mut avail,
                        remaining: &mut remaining,
                        source,
                    };
                    reader.in_pieces(run, TABLE_BYTES, gate_counter, |now, g, tables| {
                        hasher.eval_run(l.l, now, g, tables);
                    })?;
                    continue;
                }
                for chunk in run.chunks(BATCH) {
                    let k = chunk.len();
                    if pos + k * TABLE_BYTES > avail {
                        refill(&mut buf, &mut pos, &mut avail, &mut remaining, source)?;
                    }
                    let tables = &buf[pos..pos + k * TABLE_BYTES];
                    pos += k * TABLE_BYTES;
                    for (i, &[a, b, o]) in chunk.iter().enumerate() {
                        let wa = l.get(a);
                        let wb = l.get(b);
                        was[i] = wa;
                        sbs[i] = wb.lsb();
                        outs[i] = o;
                        h[2 * i] = wa;
                        h[2 * i + 1] = wb;
                        let j = Block(u128::from(*gate_counter + i as u64) << 1);
                        tw[2 * i] = j;
                        tw[2 * i + 1] = Block(j.0 | 1);
                    }
                    hasher.hash(&mut h[..2 * k], &tw[..2 * k]);
                    for (i, t) in tables.chunks_exact(TABLE_BYTES).enumerate() {
                        let tg = get(&t[..16]);
                        let te = get(&t[16..]);
                        let wa = was[i];
                        let wg = h[2 * i] ^ tg.select(wa.lsb());
                        let we = h[2 * i + 1] ^ (te ^ wa).select(sbs[i]);
                        l.set(outs[i], wg ^ we);
                    }
                    *gate_counter += k as u64;
                }
            }
            Run::Xors(run) => l.xor_run(run),
        }
    }
    Ok(())
}

/// The evaluator's table buffer over a [`TableSource`], for handing a run of AND gates to a
/// fused kernel piece by piece with their tables.
pub(crate) struct TableReader<'a, 's, E> {
    pub(crate) buf: &'a mut [u8],
    pub(crate) pos: &'a mut usize,
    pub(crate) avail: &'a mut usize,
    pub(crate) remaining: &'a mut usize,
    pub(crate) source: &'a mut TableSource<'s, E>,
}

impl<E> TableReader<'_, '_, E> {
    /// Hands `run` to `kernel` in pieces of as many gates as the buffer holds tables for
    /// (`table_bytes` each), with the session's gate counter at each piece's first gate,
    /// which it then advances.
    pub(crate) fn in_pieces(
        &mut self,
        run: &[[u32; 3]],
        table_bytes: usize,
        gate_counter: &mut u64,
        mut kernel: impl FnMut(&[[u32; 3]], u64, &[u8]),
    ) -> Result<(), E> {
        let mut rest = run;
        while !rest.is_empty() {
            if *self.pos + table_bytes > *self.avail {
                refill(self.buf, self.pos, self.avail, self.remaining, self.source)?;
            }
            let k = rest.len().min((*self.avail - *self.pos) / table_bytes);
            // `remaining` counts the program's tables: never 0 here.
            assert!(k > 0, "fewer tables than AND gates");
            let (now, later) = rest.split_at(k);
            kernel(
                now,
                *gate_counter,
                &self.buf[*self.pos..*self.pos + k * table_bytes],
            );
            *self.pos += k * table_bytes;
            *gate_counter += k as u64;
            rest = later;
        }
        Ok(())
    }
}

/// Refills the table buffer: moves the unread tail `buf[*pos..*avail]`
/// (whole tables, fewer than a batch) to the front and fills the rest from
/// `source`, at most `remaining` bytes.
#[inline(never)]
pub(crate) fn refill<E>(
    buf: &mut [u8],
    pos: &mut usize,
    avail: &mut usize,
    remaining: &mut usize,
    source: &mut TableSource<'_, E>,
) -> Result<(), E> {
    let from = (*pos).min(*avail);
    let tail = *avail - from;
    buf.copy_within(from..*avail, 0);
    let want = (buf.len() - tail).min(*remaining);
    source(&mut buf[tail..tail + want])?;
    *remaining -= want;
    *avail = tail + want;
    *pos = 0;
    Ok(())
}

/// The output decoding bits: the colour of each output's zero label.
pub fn decode_bits(prog: &Program, labels: &[Block]) -> Vec<bool> {
    prog.outputs
        .iter()
        .map(|&s| labels[s as usize].lsb())
        .collect()
}

/// The tweak range of the output check: disjoint from the gate tweaks
/// (`< 2^64`) and from the OT extension's (`2^127 | i`).
pub const CHECK_TWEAK: u128 = 1 << 126;

/// Bytes of output check per output wire: an 8-byte tag for each of its two
/// labels.
pub const CHECK_BYTES: usize = 16;

/// Bytes of one tag (a truncated hash).
const TAG_BYTES: usize = 8;

/// The output check: for output `i` (zero label `W0`, tweak
/// `t = CHECK_TWEAK | (first + i)`), the first 8 bytes of `H(W0, t)` and of
/// `H(W0 ^ R, t)`, the tag of the label whose colour is 0 first. Appended to
/// `out`, [`CHECK_BYTES`] per output.
///
/// Half-gates by itself lets the evaluator decode whatever label it ends up
/// with: two parties whose hashes differ (another seed, another derivation, a
/// bug) would accept a wrong output. With these tags the evaluator checks that
/// each output label is one of the two the garbler made ([`verify_check`]); a
/// wrong label passes with probability `2^-64` per output. The tag of the
/// label the evaluator does not hold is a hash of `W ^ R` for a `W` it knows,
/// which the hash's correlation robustness covers, as it covers the garbled
/// tables (and the output's value is revealed to it anyway).
pub fn output_check(
    hasher: &Hasher,
    zero_labels: &[Block],
    delta: Block,
    first: u64,
    out: &mut Vec<u8>,
) {
    // Output i's tweak is CHECK_TWEAK | (first + i); h0 = H(W0), h1 = H(W0 ^ R).
    let mut h0 = zero_labels.to_vec();
    let mut h1 = vec![Block::ZERO; h0.len()];
    let tweak = Block(CHECK_TWEAK | u128::from(first));
    hasher.hash_consecutive_with_offset(&mut h0, delta, &mut h1, tweak);
    for (i, &w0) in zero_labels.iter().enumerate() {
        let (t0, t1) = (h0[i].to_bytes(), h1[i].to_bytes());
        // `W0 ^ R` has the other colour (`lsb(R) = 1`).
        let (c0, c1) = if w0.lsb() { (t1, t0) } else { (t0, t1) };
        out.extend_from_slice(&c0[..TAG_BYTES]);
        out.extend_from_slice(&c1[..TAG_BYTES]);
    }
}

/// An output label is neither of the two the garbler made.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
#[error(
    "output {output} fails the garbler's check: the parties garbled under different hashes or keys, or the tables were corrupted"
)]
pub struct CheckFailed {
    /// The first failing output (index into the outputs checked).
    pub output: usize,
}

/// Checks the evaluator's output `labels` against the garbler's
/// [`output_check`] bytes (`check.len() == CHECK_BYTES * labels.len()`).
///
/// # Panics
///
/// If `check` has the wrong length (callers receive exactly that many bytes).
pub fn verify_check(
    hasher: &Hasher,
    labels: &[Block],
    first: u64,
    check: &[u8],
) -> Result<(), CheckFailed> {
    assert_eq!(check.len(), CHECK_BYTES * labels.len());
    let mut h = labels.to_vec();
    hasher.hash_consecutive(&mut h, Block(CHECK_TWEAK | u128::from(first)));
    for (i, (w, c)) in labels
        .iter()
        .zip(check.chunks_exact(CHECK_BYTES))
        .enumerate()
    {
        let at = if w.lsb() { TAG_BYTES } else { 0 };
        if h[i].to_bytes()[..TAG_BYTES] != c[at..at + TAG_BYTES] {
            return Err(CheckFailed { output: i });
        }
    }
    Ok(())
}

/// Output values from the evaluator's labels and the garbler's decoding bits.
pub fn decode(prog: &Program, labels: &[Block], decode: &[bool]) -> Vec<bool> {
    prog.outputs
        .iter()
        .zip(decode)
        .map(|(&s, &d)| labels[s as usize].lsb() ^ d)
        .collect()
}

/// Runs garbler and evaluator in one process without a channel or OT (the
/// evaluator's input labels are handed over directly): for tests and for
/// measuring garbling alone. Returns the decoded outputs and the number of
/// table bytes produced.
pub fn simulate(
    prog: &Program,
    hasher: &Hasher,
    prg: &mut crate::hash::Prg,
    garbler_inputs: &[bool],
    evaluator_inputs: &[bool],
) -> (Vec<bool>, usize) {
    let mut delta = prg.block();
    delta.0 |= 1;
    let n = prog.label_capacity();
    let mut g = vec![Block::ZERO; n];
    let mut e = vec![Block::ZERO; n];
    for (&s, &x) in prog.garbler_inputs.iter().zip(garbler_inputs) {
        g[s as usize] = prg.block();
        e[s as usize] = g[s as usize] ^ delta.select(x);
    }
    for (&s, &x) in prog.evaluator_inputs.iter().zip(evaluator_inputs) {
        g[s as usize] = prg.block();
        e[s as usize] = g[s as usize] ^ delta.select(x);
    }
    let mut tables = Vec::with_capacity(prog.and_gates() as usize * TABLE_BYTES);
    let mut counter = 0u64;
    let ok: Result<(), ()> = garble(prog, hasher, delta, &mut g, &mut counter, &mut |b| {
        tables.extend_from_slice(b);
        Ok(())
    });
    debug_assert!(ok.is_ok());
    let d = decode_bits(prog, &g);
    let mut counter = 0u64;
    let mut off = 0usize;
    let ok: Result<(), ()> = evaluate(prog, hasher, &mut e, &mut counter, &mut |buf| {
        buf.copy_from_slice(&tables[off..off + buf.len()]);
        off += buf.len();
        Ok(())
    });
    debug_assert!(ok.is_ok());
    (decode(prog, &e, &d), tables.len())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::circuit::{Circuit, Gate, bits_from_bytes};
    use crate::hash::{Backend, GcHash, Prg};
    use crate::library;

    /// A random circuit with every gate kind (EQ and EQW too, which the
    /// builder folds away), wire by wire; the outputs are EQW copies (the first an EQ
    /// constant when there are no inputs and no gates).
    pub(crate) fn all_kinds_circuit(seed: u64, gi: u32, ei: u32, n: u32, nout: u32) -> Circuit {
        let mut s = seed | 1;
        let mut next = move |m: u32| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % u64::from(m)) as u32
        };
        let mut gates = Vec::new();
        let mut w = gi + ei;
        for _ in 0..n {
            let (a, b) = (next(w.max(1)), next(w.max(1)));
            let g = match (next(6), w) {
                (_, 0) | (0, _) => Gate::Eq {
                    value: next(2) == 1,
                    out: w,
                },
                (1, _) => Gate::Xor { a, b, out: w },
                (2 | 3, _) => Gate::And { a, b, out: w },
                (4, _) => Gate::Inv { a, out: w },
                _ => Gate::Eqw { a, out: w },
            };
            gates.push(g);
            w += 1;
        }
        for _ in 0..nout {
            // A copy of an earlier wire; with no wire at all yet (no inputs, no gates), a
            // constant (`next(0)` would divide by zero).
            gates.push(if w == 0 {
                Gate::Eq {
                    value: next(2) == 1,
                    out: w,
                }
            } else {
                Gate::Eqw { a: next(w), out: w }
            });
            w += 1;
        }
        let mut c = Circuit::new(w, vec![gi, ei], vec![nout], gates).unwrap();
        c.set_garbler_values(1).unwrap();
        c
    }

    /// The fixture's corner the property test once hit: no inputs and no gates, so every
    /// output is a constant (it divided by zero here before).
    #[test]
    fn a_circuit_of_constants_only_is_a_valid_fixture() {
        let c = all_kinds_circuit(7, 0, 0, 0, 3);
        assert_eq!(c.output_bits(), 3);
        assert_eq!(c.eval(&[], &[]).unwrap().len(), 3);
        let _ = Program::compile(&c);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn every_gate_kind_garbles_like_plain(seed in proptest::prelude::any::<u64>(),
                                              gi in 0u32..5, ei in 0u32..5,
                                              n in 0u32..200, nout in 1u32..10) {
            let c = all_kinds_circuit(seed, gi, ei, n, nout);
            let mut prg = Prg::from_seed(seed.to_le_bytes().repeat(2).try_into().unwrap());
            let p = Program::compile(&c);
            for (be, kind) in [Backend::Portable, Backend::AesNi]
                .into_iter()
                .flat_map(|b| GcHash::ALL.map(|k| (b, k)))
            {
                let Ok(h) = Hasher::of(kind, Block(u128::from(seed) << 3), be) else {
                    continue;
                };
                for _ in 0..3 {
                    let g: Vec<bool> = (0..gi).map(|_| prg.block().lsb()).collect();
                    let e: Vec<bool> = (0..ei).map(|_| prg.block().lsb()).collect();
                    let want = c.eval(&g, &e).unwrap();
                    proptest::prop_assert_eq!(&p.eval_plain(&g, &e), &want);
                    let (got, bytes) = simulate(&p, &h, &mut prg, &g, &e);
                    proptest::prop_assert_eq!(got, want);
                    proptest::prop_assert_eq!(bytes as u64, 32 * c.stats().and_gates());
                }
            }
        }
    }

    /// Garbles `p` with every hasher from the same labels and counter, then
    /// evaluates the first hasher's tables with every hasher from active
    /// labels with some flipped: tables, garbler labels and evaluator labels
    /// must be byte-identical across hashers.
    fn check_hashers_agree(p: &Program, hashers: &[&Hasher], seed: u8, start: u64) {
        let mut prg = Prg::from_seed([seed; 16]);
        let mut delta = prg.block();
        delta.0 |= 1;
        let mut g0 = vec![Block::ZERO; p.label_capacity()];
        prg.fill(&mut g0);
        let mut e = g0.clone();
        let mut runs = Vec::new();
        for h in hashers {
            let (mut l, mut t, mut ctr) = (g0.clone(), Vec::new(), start);
            let _: Result<(), ()> = garble(p, h, delta, &mut l, &mut ctr, &mut |b| {
                t.extend_from_slice(b);
                Ok(())
            });
            assert_eq!(ctr, start + p.and_gates());
            runs.push((t, l));
        }
        for (i, r) in runs.iter().enumerate().skip(1) {
            assert!(r.0 == runs[0].0, "tables of hasher {i} differ");
            assert!(r.1 == runs[0].1, "garbler labels of hasher {i} differ");
        }
        let t1 = &runs[0].0;
        for x in e.iter_mut().step_by(3) {
            *x ^= delta;
        }
        let mut outs = Vec::new();
        for h in hashers {
            let (mut l, mut ctr, mut off) = (e.clone(), start, 0usize);
            let _: Result<(), ()> = evaluate(p, h, &mut l, &mut ctr, &mut |buf| {
                buf.copy_from_slice(&t1[off..off + buf.len()]);
                off += buf.len();
                Ok(())
            });
            assert_eq!(off, t1.len());
            outs.push(l);
        }
        for (i, o) in outs.iter().enumerate().skip(1) {
            assert!(*o == outs[0], "evaluator labels of hasher {i} differ");
        }
    }

    /// The hashers of one kind to compare: the fused VAES kernels (when the
    /// CPU has them; their 512-bit, AVX-512VL and AVX2 instances), AES-NI through the
    /// generic code, and the portable hash. They batch differently: the 512-bit kernels
    /// take sixteen gates at a time (eight when garbling under the fixed key), the
    /// other fused kernels garble eight (four with AVX2) and evaluate eight
    /// at a time, key schedules word-sliced by fours, the generic code hashes
    /// eight gates at a time with eight keys in flight, the portable cipher
    /// four keys per schedule.
    pub(crate) fn hashers_of(kind: GcHash) -> Vec<Hasher> {
        let seed = Block(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        let mut v = vec![Hasher::of(kind, seed, Backend::Portable).unwrap()];
        if let Ok(fast) = Hasher::of(kind, seed, Backend::AesNi) {
            let mut plain_ni = fast.clone();
            plain_ni.no_vaes_for_tests();
            assert!(!plain_ni.fused() && !v[0].fused());
            if fast.avx512() {
                // The AVX2 instance of the fused kernels too (other group sizes).
                let mut avx2 = fast.clone();
                avx2.no_avx512_for_tests();
                v.push(avx2);
            }
            if fast.zmm() {
                // The 256-bit AVX-512VL kernels beside the 512-bit ones.
                let mut ymm = fast.clone();
                ymm.no_zmm_for_tests();
                v.push(ymm);
            }
            v.push(fast);
            v.push(plain_ni);
        }
        v
    }

    /// Circuits with runs longer than one table buffer (2048 gates) and a
    /// counter that does not start at zero.
    fn long_run_circuits() -> [Circuit; 3] {
        [
            library::aes128(),
            all_kinds_circuit(77, 3, 4, 500, 6),
            library::mul(128),
        ]
    }

    /// The fused VAES kernels produce exactly the tables and labels of the
    /// generic code (portable hash, and AES-NI without VAES): garbled
    /// tables are interchangeable. On a CPU without VAES there is no fused
    /// kernel to compare: the test says so and checks nothing.
    #[test]
    fn fused_kernels_match_the_generic_code_when_vaes() {
        for kind in GcHash::ALL {
            let hs = hashers_of(kind);
            if !hs.iter().any(Hasher::fused) {
                eprintln!("skipped: no VAES on this CPU, so no fused kernel to compare");
                return;
            }
            let refs: Vec<&Hasher> = hs.iter().collect();
            for c in long_run_circuits() {
                check_hashers_agree(&Program::compile(&c), &refs, 5, 5);
            }
        }
    }

    /// The generic code gives the same tables and labels with the portable
    /// hash and with AES-NI (without VAES).
    #[test]
    fn portable_and_aes_ni_generic_code_agree() {
        for kind in GcHash::ALL {
            let hs: Vec<Hasher> = hashers_of(kind)
                .into_iter()
                .filter(|h| !h.fused())
                .collect();
            if hs.len() < 2 {
                eprintln!("skipped: no AES-NI on this CPU, so one generic hasher only");
                return;
            }
            let refs: Vec<&Hasher> = hs.iter().collect();
            for c in long_run_circuits() {
                check_hashers_agree(&Program::compile(&c), &refs, 5, 5);
            }
        }
    }

    /// MITCCRH and the fixed-key hash garble differently (the choice is not
    /// ignored somewhere on the way to the kernels).
    #[test]
    fn the_two_hashes_give_different_tables() {
        let p = Program::compile(&library::aes128());
        let tables = |h: &Hasher| {
            let mut l = vec![Block(5); p.label_capacity()];
            let mut t = Vec::new();
            let _: Result<(), ()> = garble(&p, h, Block(3), &mut l, &mut 0, &mut |b| {
                t.extend_from_slice(b);
                Ok(())
            });
            t
        };
        for (f, m) in hashers_of(GcHash::FixedKey)
            .iter()
            .zip(&hashers_of(GcHash::Mitccrh))
        {
            assert!(tables(f) != tables(m), "{:?}", f.backend());
        }
    }

    /// Garbles `c` with `g`, evaluates with `e`, and decodes with the output
    /// check: the outputs, or the check's failure.
    fn garble_evaluate_checked(
        c: &Circuit,
        g: &Hasher,
        e: &Hasher,
        gi: &[bool],
        ei: &[bool],
    ) -> Result<Vec<bool>, CheckFailed> {
        let p = Program::compile(c);
        let mut prg = Prg::from_seed([0x77; 16]);
        let mut delta = prg.block();
        delta.0 |= 1;
        let mut gl = vec![Block::ZERO; p.label_capacity()];
        let mut el = vec![Block::ZERO; p.label_capacity()];
        for (&s, &x) in p
            .garbler_inputs
            .iter()
            .zip(gi)
            .chain(p.evaluator_inputs.iter().zip(ei))
        {
            gl[s as usize] = prg.block();
            el[s as usize] = gl[s as usize] ^ delta.select(x);
        }
        let mut tables = Vec::new();
        let _: Result<(), ()> = garble(&p, g, delta, &mut gl, &mut 9, &mut |b| {
            tables.extend_from_slice(b);
            Ok(())
        });
        let outs: Vec<Block> = p.outputs.iter().map(|&s| gl[s as usize]).collect();
        let mut check = Vec::new();
        output_check(g, &outs, delta, 4, &mut check);
        let d = decode_bits(&p, &gl);
        let mut off = 0;
        let _: Result<(), ()> = evaluate(&p, e, &mut el, &mut 9, &mut |b| {
            b.copy_from_slice(&tables[off..off + b.len()]);
            off += b.len();
            Ok(())
        });
        let mine: Vec<Block> = p.outputs.iter().map(|&s| el[s as usize]).collect();
        verify_check(e, &mine, 4, &check)?;
        Ok(decode(&p, &el, &d))
    }

    /// Parties that batch MITCCRH's keys differently (the fused kernels' groups
    /// of four or eight gates, the generic code's eight keys in flight, the
    /// portable cipher's four) agree: the batch is not an input of the key
    /// derivation. Every garbler/evaluator pair decodes the right output and
    /// passes the output check.
    #[test]
    fn parties_that_batch_keys_differently_agree() {
        let c = library::aes128();
        let mut prg = Prg::from_seed([0x21; 16]);
        let gi: Vec<bool> = (0..128).map(|_| prg.block().lsb()).collect();
        let ei: Vec<bool> = (0..128).map(|_| prg.block().lsb()).collect();
        let want = c.eval(&gi, &ei).unwrap();
        let hs = hashers_of(GcHash::Mitccrh);
        for g in &hs {
            for e in &hs {
                assert_eq!(
                    garble_evaluate_checked(&c, g, e, &gi, &ei),
                    Ok(want.clone()),
                    "garbler {:?} fused={}, evaluator {:?} fused={}",
                    g.backend(),
                    g.fused(),
                    e.backend(),
                    e.fused()
                );
            }
        }
    }

    /// An evaluator whose MITCCRH seed differs from the garbler's (a bug, not
    /// an attack: the header carries the seed), or who runs the other hash,
    /// gets garbage labels, and the output check refuses them: never a wrong
    /// output accepted. With every backend, on circuits whose outputs all
    /// depend on AND gates and on one whose outputs mix in plain inputs.
    #[test]
    fn a_different_seed_or_hash_fails_the_output_check() {
        let mut prg = Prg::from_seed([0x31; 16]);
        for c in [
            library::aes128(),
            library::mul(32),
            all_kinds_circuit(3, 4, 4, 300, 8),
        ] {
            let gi: Vec<bool> = (0..c.garbler_input_bits())
                .map(|_| prg.block().lsb())
                .collect();
            let ei: Vec<bool> = (0..c.evaluator_input_bits())
                .map(|_| prg.block().lsb())
                .collect();
            for be in [Backend::Portable, Backend::AesNi] {
                let (Ok(g), Ok(other_seed), Ok(fixed)) = (
                    Hasher::mitccrh(Block(1), be),
                    Hasher::mitccrh(Block(1 << 70), be),
                    Hasher::with_backend(be),
                ) else {
                    continue;
                };
                assert_eq!(
                    garble_evaluate_checked(&c, &g, &g, &gi, &ei),
                    Ok(c.eval(&gi, &ei).unwrap())
                );
                for e in [&other_seed, &fixed] {
                    let r = garble_evaluate_checked(&c, &g, e, &gi, &ei);
                    assert!(r.is_err(), "{be:?} {:?}: {r:?}", e.kind());
                }
                let r = garble_evaluate_checked(&c, &fixed, &g, &gi, &ei);
                assert!(r.is_err(), "{be:?}: {r:?}");
            }
        }
    }

    /// A sink that offers a fixed room and records the pieces it gets.
    struct Pieces {
        room: usize,
        bytes: Vec<u8>,
        sizes: Vec<usize>,
    }

    impl TableSink for Pieces {
        type Error = ();
        fn room(&self) -> usize {
            self.room
        }
        fn put(&mut self, n: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), ()> {
            assert!(n <= self.room && n.is_multiple_of(TABLE_BYTES) && n > 0);
            let at = self.bytes.len();
            // Stale bytes, as in a reused send buffer: `fill` must overwrite them.
            self.bytes.resize(at + n, 0xa5);
            fill(&mut self.bytes[at..]);
            self.sizes.push(n);
            Ok(())
        }
    }

    /// Pieces of whatever room a sink offers (down to one batch) make the
    /// same table stream as the chunked closure sink, for every hasher.
    #[test]
    fn tables_are_the_same_in_any_pieces() {
        let c = all_kinds_circuit(5, 4, 4, 3000, 4);
        let p = Program::compile(&c);
        let delta = Block(0x1234_5678_9abc_def1);
        let mut g0 = vec![Block::ZERO; p.label_capacity()];
        Prg::from_seed([4; 16]).fill(&mut g0);
        for h in GcHash::ALL.into_iter().flat_map(hashers_of) {
            let (mut l, mut ctr, mut want) = (g0.clone(), 7, Vec::new());
            let _: Result<(), ()> = garble(&p, &h, delta, &mut l, &mut ctr, &mut |b| {
                want.extend_from_slice(b);
                Ok(())
            });
            assert_eq!(want.len() as u64, p.and_gates() * TABLE_BYTES as u64);
            for room in [TABLE_BYTES * BATCH, 1000, 1 << 20] {
                let mut s = Pieces {
                    room,
                    bytes: Vec::new(),
                    sizes: Vec::new(),
                };
                let (mut l2, mut ctr2) = (g0.clone(), 7);
                garble_to(&p, &h, delta, &mut l2, &mut ctr2, &mut s).unwrap();
                assert!(s.bytes == want, "room {room}: tables differ");
                assert!(l2 == l && ctr2 == ctr);
                assert!(s.sizes.iter().all(|&n| n <= room));
            }
        }
    }

    /// A program with XOR sums garbles to the tables and output labels of the
    /// one without, with every hasher; and its evaluation gives the garbler's
    /// output labels for the evaluator's inputs (AES-128's sums and random
    /// circuits with sums in every run, cancelled wires included).
    #[test]
    fn xor_sums_garble_and_evaluate_as_the_gates_do() {
        let delta = Block(0x0f1e_2d3c_4b5a_6978_8796_a5b4_c3d2_e1f1);
        for c in [library::aes128(), all_kinds_circuit(11, 6, 6, 4000, 8)] {
            let plain = Program::compile_with(&c, false);
            let sums = [Program::compile(&c), Program::compile_impl(&c, Some(0))];
            assert!(sums.iter().all(|p| p.xor_sums() < plain.xor_sums()));
            for h in GcHash::ALL.into_iter().flat_map(hashers_of) {
                let inputs = |p: &Program| {
                    let mut l = vec![Block::ZERO; p.label_capacity()];
                    Prg::from_seed([9; 16]).fill(&mut l[..2 + c.input_bits()]);
                    l
                };
                let garbled = |p: &Program| {
                    let mut l = inputs(p);
                    let (mut ctr, mut t) = (3, Vec::new());
                    let _: Result<(), ()> = garble(p, &h, delta, &mut l, &mut ctr, &mut |b| {
                        t.extend_from_slice(b);
                        Ok(())
                    });
                    let outs: Vec<Block> = p.outputs.iter().map(|&o| l[o as usize]).collect();
                    (t, outs, ctr)
                };
                let want = garbled(&plain);
                for p in &sums {
                    let got = garbled(p);
                    assert!(got.0 == want.0, "{:?}: tables differ", h.kind());
                    assert_eq!(got.1, want.1, "{:?}: output labels differ", h.kind());
                    assert_eq!(got.2, want.2);
                    // The evaluator's labels of all-zero inputs are the garbler's
                    // zero labels: its outputs are the zero labels when the
                    // circuit's outputs are zero there, else those XOR delta.
                    let mut l = inputs(p);
                    let mut ctr = 3;
                    let mut tables = got.0.as_slice();
                    evaluate(p, &h, &mut l, &mut ctr, &mut |buf: &mut [u8]| {
                        let (now, rest) = tables.split_at(buf.len());
                        buf.copy_from_slice(now);
                        tables = rest;
                        Ok::<(), ()>(())
                    })
                    .unwrap();
                    let zeros = [
                        vec![false; c.garbler_input_bits()],
                        vec![false; c.evaluator_input_bits()],
                    ];
                    let bits = c.eval(&zeros[0], &zeros[1]).unwrap();
                    for ((&o, &z), bit) in p.outputs.iter().zip(&got.1).zip(bits) {
                        assert_eq!(l[o as usize], z ^ delta.select(bit), "{:?}", h.kind());
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Random circuits (AND runs of every length, so every remainder of
        /// the kernels' groups) and counters: all hashers agree.
        #[test]
        fn hashers_agree_on_random_circuits(seed in proptest::prelude::any::<u64>(),
                                            n in 0u32..400,
                                            start in proptest::prelude::any::<u32>(),
                                            mitccrh in proptest::prelude::any::<bool>()) {
            let kind = if mitccrh { GcHash::Mitccrh } else { GcHash::FixedKey };
            let hs = hashers_of(kind);
            let refs: Vec<&Hasher> = hs.iter().collect();
            let c = all_kinds_circuit(seed, 4, 4, n, 3);
            check_hashers_agree(&Program::compile(&c), &refs, seed as u8, u64::from(start));
        }
    }

    #[test]
    fn library_circuits_garble_correctly() {
        let mut prg = Prg::from_seed([3; 16]);
        for (be, kind) in [Backend::Portable, Backend::AesNi]
            .into_iter()
            .flat_map(|b| GcHash::ALL.map(|k| (b, k)))
        {
            let Ok(h) = Hasher::of(kind, Block(99), be) else {
                continue;
            };
            for c in [
                library::aes128(),
                library::sha256_compress(),
                library::mul(128),
            ] {
                let p = Program::compile(&c);
                let mut gi = vec![0u8; c.garbler_input_bits().div_ceil(8)];
                let mut ei = vec![0u8; c.evaluator_input_bits().div_ceil(8)];
                prg.bytes(&mut gi);
                prg.bytes(&mut ei);
                let g = bits_from_bytes(&gi, c.garbler_input_bits());
                let e = bits_from_bytes(&ei, c.evaluator_input_bits());
                let want = c.eval(&g, &e).unwrap();
                assert_eq!(p.eval_plain(&g, &e), want);
                let (got, bytes) = simulate(&p, &h, &mut prg, &g, &e);
                assert_eq!(got, want, "{be:?} {kind:?}");
                assert_eq!(bytes as u64, 32 * c.stats().and_gates());
            }
        }
    }
}
