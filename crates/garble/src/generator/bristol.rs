//! Writing a generated circuit as Bristol Fashion, streaming: the generator runs twice (to
//! count, then to write), so nothing proportional to the gate count is held. The Ed25519
//! signature's file is 4.46 GB.

use std::io::{self, Write};

use super::{Gen, GenStats, Generator, W, Word};

/// Counts bytes written through it.
struct Counting<Wr> {
    inner: Wr,
    n: u64,
}

impl<Wr: Write> Write for Counting<Wr> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(b)?;
        self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes gates as Bristol Fashion lines; wires are ids.
struct BristolGen<Wr> {
    w: Wr,
    next: u32,
    err: Option<io::Error>,
}

impl<Wr: Write> BristolGen<Wr> {
    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if self.err.is_none()
            && let Err(e) = self.w.write_fmt(args)
        {
            self.err = Some(e);
        }
    }
    fn fresh(&mut self) -> u32 {
        let id = self.next;
        self.next += 1;
        id
    }
}

impl<Wr: Write> Gen for BristolGen<Wr> {
    type L = u32;
    fn xor_raw(&mut self, a: u32, b: u32) -> u32 {
        let o = self.fresh();
        self.line(format_args!("2 1 {a} {b} {o} XOR\n"));
        o
    }
    fn and_raw(&mut self, a: u32, b: u32) -> u32 {
        let o = self.fresh();
        self.line(format_args!("2 1 {a} {b} {o} AND\n"));
        o
    }
    fn not_raw(&mut self, a: u32) -> u32 {
        let o = self.fresh();
        self.line(format_args!("1 1 {a} {o} INV\n"));
        o
    }
    fn reveal(&mut self, _w: &[W<u32>]) -> Option<Vec<bool>> {
        None
    }
    fn public(&mut self, bits: &[bool]) -> Word<u32> {
        bits.iter().map(|_| W::V(self.fresh())).collect()
    }
    fn refuse(&mut self, _why: super::Refused) {}
}

/// Writes `c` as a Bristol Fashion circuit, streaming (two passes of the
/// generator: one to count, one to write; nothing is held). Inputs: the
/// garbler's value, then the evaluator's; one output value. Every output
/// is copied (`EQW`, or `EQ` for a constant) to the last wires, as the
/// format requires. Returns the bytes written and the statistics. A circuit
/// with a mid-circuit reveal has no Bristol form: an error before anything
/// is written.
pub fn write_bristol<G: Generator, Wr: Write>(c: &G, w: Wr) -> io::Result<(u64, GenStats)> {
    let stats = super::stats_expanded(c);
    if !stats.reveals.is_empty() {
        return Err(io::Error::other(crate::circuit::CircuitError::Reveal));
    }
    let nout = c.output_bits() as u64;
    let gates = stats.stats.gates + nout;
    let wires = stats.stats.wires + nout;
    if wires > u64::from(u32::MAX) {
        return Err(io::Error::other("the circuit has more than 2^32 wires"));
    }
    let mut cw = Counting { inner: w, n: 0 };
    write!(
        cw,
        "{gates} {wires}\n2 {} {}\n1 {nout}\n\n",
        c.garbler_input_bits(),
        c.evaluator_input_bits()
    )?;
    let gbits = c.garbler_input_bits() as u32;
    let ebits = c.evaluator_input_bits() as u32;
    let mut b = BristolGen {
        w: &mut cw,
        next: gbits + ebits,
        err: None,
    };
    let gi: Word<u32> = (0..gbits).map(W::V).collect();
    let ei: Word<u32> = (gbits..gbits + ebits).map(W::V).collect();
    let out = c.generate(&mut b, &gi, &ei);
    if let Some(e) = b.err.take() {
        return Err(e);
    }
    let first = b.next;
    for (i, o) in out.iter().enumerate() {
        let dst = first + i as u32;
        match *o {
            W::C(v) => b.line(format_args!("1 1 {} {dst} EQ\n", u8::from(v))),
            W::V(a) => b.line(format_args!("1 1 {a} {dst} EQW\n")),
        }
    }
    if let Some(e) = b.err.take() {
        return Err(e);
    }
    cw.flush()?;
    Ok((cw.n, stats))
}
