//! Bristol Fashion reader and writer, and a reader for the older Bristol
//! format.
//!
//! Bristol Fashion (Archer, Bogdanov, Lindell, Nigel Smart et al.):
//!
//! ```text
//! <gates> <wires>
//! <n input values> <width> ...
//! <n output values> <width> ...
//!
//! 2 1 <a> <b> <out> XOR|AND
//! 1 1 <a> <out> INV|EQW
//! 1 1 <0|1> <out> EQ
//! 2k k <a1..ak> <b1..bk> <out1..outk> MAND
//! ```
//!
//! The old format has `<garbler bits> <evaluator bits> <output bits>` on its
//! second line and only `XOR`, `AND` and `INV` gates. `MAND` is expanded into
//! `k` AND gates; `NOT` is read as `INV`.
//!
//! Every error names the 1-based line it was found on. The reader never
//! panics and never allocates more than the text itself justifies (the wire
//! count must be covered by inputs and gate outputs, and inputs are capped at
//! [`MAX_INPUT_BITS`]).

use std::io::{self, Write};

use thiserror::Error;

use crate::circuit::{Circuit, CircuitError, Gate};

/// Largest total input width the reader accepts.
pub const MAX_INPUT_BITS: u64 = 1 << 24;

/// A malformed Bristol file. `line` is 1-based.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("line {line}: {kind}")]
pub struct BristolError {
    /// The line where the problem was found (1-based; the last line plus one
    /// when the file ends too early).
    pub line: usize,
    /// What is wrong.
    pub kind: BristolErrorKind,
}

/// What is wrong with a Bristol file.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BristolErrorKind {
    /// The file ends before the header or the gate list is complete.
    #[error("unexpected end of file: {0}")]
    Truncated(&'static str),
    /// A token is not a number, or too large.
    #[error("bad number {0:?}")]
    BadNumber(String),
    /// A header line has the wrong number of fields.
    #[error("malformed header: {0}")]
    Header(String),
    /// An unknown gate name.
    #[error("unknown gate {0:?}")]
    UnknownGate(String),
    /// A gate line with the wrong number of wires for its type.
    #[error("gate {name} has {nin} inputs, {nout} outputs and {tokens} fields")]
    Arity {
        /// The gate name.
        name: String,
        /// Declared inputs.
        nin: u64,
        /// Declared outputs.
        nout: u64,
        /// Fields on the line.
        tokens: usize,
    },
    /// `EQ` with a literal other than 0 or 1.
    #[error("EQ literal must be 0 or 1, got {0}")]
    BadLiteral(u64),
    /// More or fewer gates than the header says.
    #[error("header declares {declared} gates, the file has {found}")]
    GateCount {
        /// From the header.
        declared: u64,
        /// Gate lines present.
        found: u64,
    },
    /// The wire count is larger than inputs plus gate outputs can fill, or
    /// the inputs are too wide.
    #[error("{0}")]
    Size(String),
    /// The circuit is not well formed (undefined wire, reassignment, ...).
    #[error(transparent)]
    Circuit(#[from] CircuitError),
}

/// Which Bristol dialect a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Bristol Fashion (input and output values with widths, EQ/EQW/MAND).
    Fashion,
    /// The older format (garbler, evaluator and output bit counts).
    Old,
}

struct Lines<'a> {
    it: std::iter::Enumerate<std::str::Lines<'a>>,
    last: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines {
            it: text.lines().enumerate(),
            last: 0,
        }
    }

    /// The next non-blank line, as (1-based line number, tokens).
    fn next_tokens(&mut self) -> Option<(usize, Vec<&'a str>)> {
        for (i, l) in self.it.by_ref() {
            self.last = i + 1;
            let t: Vec<&str> = l.split_ascii_whitespace().collect();
            if !t.is_empty() {
                return Some((i + 1, t));
            }
        }
        None
    }
}

fn err(line: usize, kind: BristolErrorKind) -> BristolError {
    BristolError { line, kind }
}

fn num(line: usize, tok: &str) -> Result<u64, BristolError> {
    tok.parse::<u64>().map_err(|_| {
        err(
            line,
            BristolErrorKind::BadNumber(tok.chars().take(32).collect()),
        )
    })
}

fn wire(line: usize, tok: &str) -> Result<u32, BristolError> {
    let n = num(line, tok)?;
    u32::try_from(n).map_err(|_| err(line, BristolErrorKind::BadNumber(tok.to_string())))
}

/// Guesses the dialect: in the old format the third non-blank line is
/// already a gate (it ends in a gate name).
pub fn detect(text: &str) -> Format {
    let mut l = Lines::new(text);
    let _ = l.next_tokens();
    let _ = l.next_tokens();
    match l.next_tokens() {
        Some((_, t)) if t.last().is_some_and(|s| s.parse::<u64>().is_err()) => Format::Old,
        _ => Format::Fashion,
    }
}

/// Reads a circuit in either dialect (see [`detect`]).
pub fn parse(text: &str) -> Result<Circuit, BristolError> {
    match detect(text) {
        Format::Fashion => parse_fashion(text),
        Format::Old => parse_old(text),
    }
}

/// Reads a Bristol Fashion circuit.
pub fn parse_fashion(text: &str) -> Result<Circuit, BristolError> {
    let mut lines = Lines::new(text);
    let (l1, h1) = lines
        .next_tokens()
        .ok_or(err(1, BristolErrorKind::Truncated("missing header")))?;
    let (ngates, nwires) = header_counts(l1, &h1)?;
    let (l2, h2) = lines.next_tokens().ok_or(err(
        l1 + 1,
        BristolErrorKind::Truncated("missing input line"),
    ))?;
    let inputs = widths(l2, &h2)?;
    let (l3, h3) = lines.next_tokens().ok_or(err(
        l2 + 1,
        BristolErrorKind::Truncated("missing output line"),
    ))?;
    let outputs = widths(l3, &h3)?;
    finish(lines, l3, ngates, nwires, inputs, outputs, None)
}

/// Reads a circuit in the old Bristol format. The garbler owns the first
/// input value, the evaluator the second (omitted when it has no bits).
pub fn parse_old(text: &str) -> Result<Circuit, BristolError> {
    let mut lines = Lines::new(text);
    let (l1, h1) = lines
        .next_tokens()
        .ok_or(err(1, BristolErrorKind::Truncated("missing header")))?;
    let (ngates, nwires) = header_counts(l1, &h1)?;
    let (l2, h2) = lines.next_tokens().ok_or(err(
        l1 + 1,
        BristolErrorKind::Truncated("missing input/output line"),
    ))?;
    if h2.len() != 3 {
        return Err(err(
            l2,
            BristolErrorKind::Header(format!("expected 3 numbers, found {}", h2.len())),
        ));
    }
    let g = num_u32(l2, h2[0])?;
    let e = num_u32(l2, h2[1])?;
    let o = num_u32(l2, h2[2])?;
    let mut inputs = vec![g];
    if e > 0 {
        inputs.push(e);
    }
    finish(lines, l2, ngates, nwires, inputs, vec![o], Some(1))
}

fn num_u32(line: usize, tok: &str) -> Result<u32, BristolError> {
    wire(line, tok)
}

fn header_counts(line: usize, t: &[&str]) -> Result<(u64, u32), BristolError> {
    if t.len() != 2 {
        return Err(err(
            line,
            BristolErrorKind::Header(format!(
                "expected <gates> <wires>, found {} fields",
                t.len()
            )),
        ));
    }
    Ok((num(line, t[0])?, wire(line, t[1])?))
}

fn widths(line: usize, t: &[&str]) -> Result<Vec<u32>, BristolError> {
    let n = num(line, t[0])?;
    if n != (t.len() - 1) as u64 {
        return Err(err(
            line,
            BristolErrorKind::Header(format!("declares {n} values but lists {}", t.len() - 1)),
        ));
    }
    t[1..].iter().map(|s| num_u32(line, s)).collect()
}

fn finish(
    mut lines: Lines<'_>,
    header_line: usize,
    ngates: u64,
    nwires: u32,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    garbler_values: Option<usize>,
) -> Result<Circuit, BristolError> {
    let input_bits: u64 = inputs.iter().map(|&w| u64::from(w)).sum();
    if input_bits > MAX_INPUT_BITS {
        return Err(err(
            header_line,
            BristolErrorKind::Size(format!(
                "{input_bits} input bits (at most {MAX_INPUT_BITS})"
            )),
        ));
    }
    let mut gates = Vec::new();
    let mut gate_lines = Vec::new();
    let mut found = 0u64;
    while let Some((ln, t)) = lines.next_tokens() {
        found += 1;
        parse_gate(ln, &t, &mut gates)?;
        gate_lines.resize(gates.len(), ln);
    }
    if found != ngates {
        let line = if found < ngates {
            lines.last + 1
        } else {
            lines.last
        };
        return Err(err(
            line,
            BristolErrorKind::GateCount {
                declared: ngates,
                found,
            },
        ));
    }
    if u64::from(nwires) > input_bits + gates.len() as u64 {
        return Err(err(
            1,
            BristolErrorKind::Size(format!(
                "{nwires} wires but only {input_bits} inputs and {} gate outputs",
                gates.len()
            )),
        ));
    }
    let mut c = Circuit::new(nwires, inputs, outputs, gates).map_err(|e| {
        let line = match &e {
            CircuitError::WireOutOfRange { gate, .. }
            | CircuitError::Undefined { gate, .. }
            | CircuitError::Reassigned { gate, .. } => {
                gate_lines.get(*gate).copied().unwrap_or(header_line)
            }
            _ => header_line,
        };
        err(line, BristolErrorKind::Circuit(e))
    })?;
    if let Some(g) = garbler_values {
        let g = g.min(c.inputs().len());
        c.set_garbler_values(g)
            .map_err(|e| err(header_line, BristolErrorKind::Circuit(e)))?;
    }
    Ok(c)
}

fn parse_gate(ln: usize, t: &[&str], gates: &mut Vec<Gate>) -> Result<(), BristolError> {
    if t.len() < 3 {
        return Err(err(ln, BristolErrorKind::Truncated("gate line too short")));
    }
    let nin = num(ln, t[0])?;
    let nout = num(ln, t[1])?;
    let name = t[t.len() - 1];
    let arity = |ok: bool| -> Result<(), BristolError> {
        let expected = nin.checked_add(nout).and_then(|x| x.checked_add(3));
        if ok && expected == Some(t.len() as u64) {
            Ok(())
        } else {
            Err(err(
                ln,
                BristolErrorKind::Arity {
                    name: name.chars().take(16).collect(),
                    nin,
                    nout,
                    tokens: t.len(),
                },
            ))
        }
    };
    match name {
        "XOR" | "AND" => {
            arity(nin == 2 && nout == 1)?;
            let (a, b, out) = (wire(ln, t[2])?, wire(ln, t[3])?, wire(ln, t[4])?);
            gates.push(if name == "XOR" {
                Gate::Xor { a, b, out }
            } else {
                Gate::And { a, b, out }
            });
        }
        "INV" | "NOT" | "EQW" => {
            arity(nin == 1 && nout == 1)?;
            let (a, out) = (wire(ln, t[2])?, wire(ln, t[3])?);
            gates.push(if name == "EQW" {
                Gate::Eqw { a, out }
            } else {
                Gate::Inv { a, out }
            });
        }
        "EQ" => {
            arity(nin == 1 && nout == 1)?;
            let v = num(ln, t[2])?;
            if v > 1 {
                return Err(err(ln, BristolErrorKind::BadLiteral(v)));
            }
            gates.push(Gate::Eq {
                value: v == 1,
                out: wire(ln, t[3])?,
            });
        }
        "MAND" => {
            arity(nin == 2 * nout && nout > 0)?;
            let k = nout as usize;
            for i in 0..k {
                gates.push(Gate::And {
                    a: wire(ln, t[2 + i])?,
                    b: wire(ln, t[2 + k + i])?,
                    out: wire(ln, t[2 + 2 * k + i])?,
                });
            }
        }
        other => {
            return Err(err(
                ln,
                BristolErrorKind::UnknownGate(other.chars().take(16).collect()),
            ));
        }
    }
    Ok(())
}

/// Writes `c` in Bristol Fashion.
pub fn write_fashion<W: Write>(c: &Circuit, mut w: W) -> io::Result<()> {
    writeln!(w, "{} {}", c.gates().len(), c.num_wires())?;
    write_widths(&mut w, c.inputs())?;
    write_widths(&mut w, c.outputs())?;
    writeln!(w)?;
    for g in c.gates() {
        match *g {
            Gate::Xor { a, b, out } => writeln!(w, "2 1 {a} {b} {out} XOR")?,
            Gate::And { a, b, out } => writeln!(w, "2 1 {a} {b} {out} AND")?,
            Gate::Inv { a, out } => writeln!(w, "1 1 {a} {out} INV")?,
            Gate::Eq { value, out } => writeln!(w, "1 1 {} {out} EQ", u8::from(value))?,
            Gate::Eqw { a, out } => writeln!(w, "1 1 {a} {out} EQW")?,
        }
    }
    w.flush()
}

/// [`write_fashion`] into a string.
pub fn to_fashion_string(c: &Circuit) -> String {
    let mut v = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_fashion(c, &mut v);
    String::from_utf8_lossy(&v).into_owned()
}

fn write_widths<W: Write>(w: &mut W, ws: &[u32]) -> io::Result<()> {
    write!(w, "{}", ws.len())?;
    for x in ws {
        write!(w, " {x}")?;
    }
    writeln!(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD2: &str = "4 6\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n1 1 2 3 INV\n1 1 1 4 EQ\n2 1 3 4 5 XOR\n";

    #[test]
    fn round_trip() {
        let c = parse_fashion(ADD2).unwrap();
        assert_eq!(c.stats().gates, 4);
        let text = to_fashion_string(&c);
        assert_eq!(parse(&text).unwrap(), c);
        // !(a & b) ^ 1 == a & b
        assert_eq!(c.eval(&[true], &[true]).unwrap(), vec![true]);
        assert_eq!(c.eval(&[true], &[false]).unwrap(), vec![false]);
    }

    #[test]
    fn old_format() {
        let text = "2 4\n1 1 1\n\n2 1 0 1 2 AND\n1 1 2 3 INV\n";
        assert_eq!(detect(text), Format::Old);
        let c = parse(text).unwrap();
        assert_eq!(c.inputs(), &[1, 1]);
        assert_eq!(c.eval(&[true], &[true]).unwrap(), vec![false]);
    }

    #[test]
    fn mand_expands() {
        let text = "1 6\n2 2 2\n1 2\n\n4 2 0 1 2 3 4 5 MAND\n";
        let c = parse_fashion(text).unwrap();
        assert_eq!(c.stats().and_gates(), 2);
        assert_eq!(
            c.eval(&[true, true], &[true, false]).unwrap(),
            vec![true, false]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let bad = ADD2.replace("2 3 INV", "9 3 INV");
        let e = parse_fashion(&bad).unwrap_err();
        assert_eq!(e.line, 6);
        assert!(matches!(
            e.kind,
            BristolErrorKind::Circuit(CircuitError::WireOutOfRange { .. })
        ));
        let e = parse_fashion(&ADD2.replace("XOR", "NAND")).unwrap_err();
        assert_eq!(
            (e.line, e.kind),
            (8, BristolErrorKind::UnknownGate("NAND".into()))
        );
        let e = parse_fashion(&ADD2.replace("4 6\n", "5 6\n")).unwrap_err();
        assert!(matches!(
            e.kind,
            BristolErrorKind::GateCount {
                declared: 5,
                found: 4
            }
        ));
        let e = parse_fashion(&ADD2.replace("1 1 2 3 INV", "1 1 5 3 INV")).unwrap_err();
        assert_eq!(e.line, 6);
        assert!(matches!(
            e.kind,
            BristolErrorKind::Circuit(CircuitError::Undefined { .. })
        ));
        let e = parse_fashion("4 7\n2 1 1\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse_fashion("4 7\n2 1 x\n1 1\n").unwrap_err();
        assert_eq!(
            (e.line, e.kind),
            (2, BristolErrorKind::BadNumber("x".into()))
        );
        let e = parse_fashion("1 4000000000\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n").unwrap_err();
        assert!(matches!(e.kind, BristolErrorKind::Size(_)));
    }
}
