//! A circuit compiled for garbling: gates rescheduled so that AND gates of
//! equal AND depth are adjacent (and can be hashed together), and wires mapped
//! to a small set of reusable label slots.
//!
//! # Scheduling
//!
//! Every gate gets a key: `2d` for an AND gate of AND depth `d`, `2d + 1` for
//! any other gate whose inputs have AND depth at most `d`. A stable sort by key
//! is a valid topological order (an AND gate's inputs have depth `< d`, so
//! smaller keys; a free gate's inputs have keys `<= 2d + 1`, and equal keys
//! keep their original, topological, order), and all AND gates of one depth
//! form one run of mutually independent gates. The garbler and the evaluator
//! compile the same circuit the same way, so their gate orders (and the hash
//! tweaks) agree.
//!
//! # Memory: bounded by the live wires
//!
//! A liveness pass over the scheduled order gives each wire a slot from a free
//! list when it is assigned and returns the slot after the wire's last read
//! (outputs stay live to the end). Label memory during garbling is therefore
//! `16 bytes x` the largest number of simultaneously live wires of the
//! schedule ([`Program::num_slots`], plus two slots for the constants),
//! rounded up to a power of two ([`Program::label_capacity`]: a slot masked
//! with `capacity - 1` needs no bounds check), not the number of wires or
//! gates. The garbled tables are never stored: they stream to the channel in
//! fixed-size chunks. (The compiled gate list itself is, like the circuit, in
//! memory: 12 bytes a gate.)
//!
//! # Gates
//!
//! AND gates are `[a, b, out]` slot triples; every other gate becomes an XOR
//! triple too (INV is XOR with the constant-1 slot, whose garbler label is
//! `R` and evaluator label zero; EQ and EQW use the constant slots), so a run
//! of free gates is one branch-free loop of `l[out] = l[a] ^ l[b]`.

use sha2::{Digest, Sha256};

use crate::circuit::{Circuit, Gate, GateKind, Party, Stats};

/// The slot that holds constant 0: the zero block for both parties.
pub(crate) const ZERO_SLOT: u32 = 0;

/// The slot that holds constant 1: the garbler's zero label is `R`, so the
/// evaluator's (active) label is the zero block.
pub(crate) const ONE_SLOT: u32 = 1;

/// Slots reserved for the constants before any wire gets one.
const RESERVED_SLOTS: u32 = 2;

/// A run of the schedule: the next `n` gates are AND gates, or XOR gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    Ands(u32),
    Xors(u32),
}

/// A run of the schedule's gates, `[a, b, out]` over slots ([`Program::runs`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Run<'a> {
    /// AND gates of one AND depth: independent of each other.
    Ands(&'a [[u32; 3]]),
    /// Free gates, each an XOR (see [`Program`]), in order.
    Xors(&'a [[u32; 3]]),
}

/// The read of `a` is the last read of its wire: its slot is free after it.
const FREE_A: u8 = 1;
/// The read of `b` is the last read of its wire.
const FREE_B: u8 = 2;
/// The gate's output is never read (and is no circuit output).
const DEAD: u8 = 4;

/// A gate as the wire triple `[a, b, out]` of an XOR (or an AND, which its kind
/// tells): an operand that the gate does not read is one of two constant wires
/// past the circuit's, numbered `zero` (slot [`ZERO_SLOT`]) and `one` (slot
/// [`ONE_SLOT`]), so that INV is `a ^ 1`, EQ is `0 ^ 0` or `0 ^ 1` and EQW is
/// `a ^ 0`, and no pass of the compiler branches on the kind of gate.
#[inline(always)]
fn triple(g: &Gate, zero: u32, one: u32) -> ([u32; 3], GateKind) {
    match *g {
        Gate::Xor { a, b, out } => ([a, b, out], GateKind::Xor),
        Gate::And { a, b, out } => ([a, b, out], GateKind::And),
        Gate::Inv { a, out } => ([a, one, out], GateKind::Inv),
        Gate::Eq { value, out } => ([zero, if value { one } else { zero }, out], GateKind::Eq),
        Gate::Eqw { a, out } => ([a, zero, out], GateKind::Eqw),
    }
}

/// The schedule key of a gate of `kind` whose output has AND depth `d` (see the
/// module documentation): `2d` for an AND gate, `2d + 1` for any other.
#[inline(always)]
fn schedule_key(d: u32, kind: GateKind) -> usize {
    (2 * d + u32::from(kind != GateKind::And)) as usize
}

/// A compiled circuit (see the module documentation).
#[derive(Clone, Debug)]
pub struct Program {
    /// Every gate `[a, b, out]` over slots, in schedule order: AND gates, and
    /// every other gate as an XOR (INV is XOR with [`ONE_SLOT`], EQ 0/1 is XOR
    /// of [`ZERO_SLOT`] with itself/[`ONE_SLOT`], EQW is XOR with
    /// [`ZERO_SLOT`]), so free gates need no dispatch.
    gates: Vec<[u32; 3]>,
    /// The runs of `gates`, in order.
    segments: Vec<Segment>,
    pub(crate) num_slots: u32,
    pub(crate) garbler_inputs: Vec<u32>,
    pub(crate) evaluator_inputs: Vec<u32>,
    pub(crate) outputs: Vec<u32>,
    stats: Stats,
    digest: [u8; 32],
}

impl Program {
    /// Compiles a circuit.
    ///
    /// Four linear passes, each streaming over one array and touching the
    /// wire-indexed ones only where it must (see the module documentation
    /// for what they compute):
    ///
    /// 1. in circuit order: AND depth per wire and the gates per key;
    /// 2. a counting sort that scatters each gate, as a wire triple, straight
    ///    to its place in the schedule (the circuit is read once more, in
    ///    order, and the later passes never gather from it);
    /// 3. backwards over the schedule: which read of each wire is its last,
    ///    and which gates assign a wire that is never read, from one byte a
    ///    wire (a bitset made each mark wait for the one before it in the same
    ///    word: nearby wires share one);
    /// 4. forwards over the schedule: slots from the free list, written over
    ///    the wire triples in place.
    ///
    /// Then the digest. The result is identical to the first, gather-based
    /// compiler's (a test keeps that one as the reference). The memory is
    /// what a party's first session pays for in page faults: besides the
    /// program (12 bytes a gate), five bytes a wire (depths, then slots, and
    /// the marks of pass 3) and one byte a gate. Timings in `docs/gc-2pc.md` ("Compilation").
    pub fn compile(c: &Circuit) -> Program {
        let gates = c.gates();
        let nw = c.num_wires() as usize;
        let input_bits = c.input_bits();
        // The constant wires (see `triple`).
        let (zero, one) = (nw as u32, nw as u32 + 1);
        // 1. AND depth per wire, gates per key, the statistics. A wire is
        // assigned once (`Circuit` checks), so its depth gives its gate's key
        // again in pass 2 and no array of keys is kept.
        let mut depth = vec![0u32; nw + 2];
        let mut per_key: Vec<u32> = Vec::new();
        let mut by_kind = [0u64; 5];
        for g in gates {
            let ([a, b, out], kind) = triple(g, zero, one);
            by_kind[kind as usize] += 1;
            let and = u32::from(kind == GateKind::And);
            let d = depth[a as usize].max(depth[b as usize]) + and;
            depth[out as usize] = d;
            let key = schedule_key(d, kind);
            if key >= per_key.len() {
                per_key.resize(key + 1, 0);
            }
            per_key[key] += 1;
        }
        let max_key = per_key.len().saturating_sub(1) as u32;
        let stats = Stats {
            gates: gates.len() as u64,
            wires: nw as u64,
            by_kind,
            and_depth: max_key / 2,
            garbler_input_bits: c.garbler_input_bits() as u64,
            evaluator_input_bits: c.evaluator_input_bits() as u64,
            output_bits: c.output_bits() as u64,
        };
        // 2. Stable counting sort by key, scattering wire triples. A key's
        // gates are all AND gates (even keys) or all free gates (odd keys):
        // the runs follow from the counts. Free gates of consecutive odd keys
        // form one run; AND gates of two keys never do.
        let mut segments: Vec<Segment> = Vec::new();
        let mut next = Vec::with_capacity(per_key.len());
        let mut at = 0u32;
        for (key, &n) in per_key.iter().enumerate() {
            next.push(at);
            at += n;
            match (segments.last_mut(), key % 2 == 0) {
                _ if n == 0 => {}
                (_, true) => segments.push(Segment::Ands(n)),
                (Some(Segment::Xors(m)), false) => *m += n,
                (_, false) => segments.push(Segment::Xors(n)),
            }
        }
        drop(per_key);
        let mut sched = vec![[0u32; 3]; gates.len()];
        for g in gates {
            let (t, kind) = triple(g, zero, one);
            let key = schedule_key(depth[t[2] as usize], kind);
            sched[next[key] as usize] = t;
            next[key] += 1;
        }
        drop(next);
        // 3. Last reads and dead outputs, backwards; outputs live forever.
        // The constant wires are marked like the others and never freed.
        let mut flags = vec![0u8; gates.len()];
        let mut seen = vec![0u8; nw + 2];
        let mut mark = |w: u32| -> u8 {
            let first = 1 - seen[w as usize];
            seen[w as usize] = 1;
            first
        };
        for w in c.output_wires() {
            mark(w);
        }
        for (&[a, b, out], f) in sched.iter().zip(flags.iter_mut()).rev() {
            let dead = mark(out);
            let free_a = mark(a) & u8::from(a < zero);
            let free_b = mark(b) & u8::from(b < zero);
            *f = (dead * DEAD) | (free_a * FREE_A) | (free_b * FREE_B);
        }
        drop(seen);
        // 4. Slots, in the depths' memory, and the triples over slots in the
        // wire triples' place.
        let mut slot = depth;
        slot.fill(u32::MAX);
        slot[zero as usize] = ZERO_SLOT;
        slot[one as usize] = ONE_SLOT;
        let mut free_slots: Vec<u32> = Vec::new();
        let mut num_slots = RESERVED_SLOTS;
        let mut alloc = |free_slots: &mut Vec<u32>| {
            free_slots.pop().unwrap_or_else(|| {
                num_slots += 1;
                num_slots - 1
            })
        };
        for s in slot.iter_mut().take(input_bits) {
            *s = alloc(&mut free_slots);
        }
        let gbits = c.garbler_input_bits();
        let garbler_inputs = slot[..gbits].to_vec();
        let evaluator_inputs = slot[gbits..input_bits].to_vec();
        for (t, &f) in sched.iter_mut().zip(&flags) {
            let (ra, rb) = (slot[t[0] as usize], slot[t[1] as usize]);
            if f & FREE_A != 0 {
                free_slots.push(ra);
            }
            if f & FREE_B != 0 {
                free_slots.push(rb);
            }
            let out = alloc(&mut free_slots);
            slot[t[2] as usize] = out;
            if f & DEAD != 0 {
                free_slots.push(out);
            }
            *t = [ra, rb, out];
        }
        drop(flags);
        let outputs = c.output_wires().map(|w| slot[w as usize]).collect();
        Program {
            gates: sched,
            segments,
            num_slots,
            garbler_inputs,
            evaluator_inputs,
            outputs,
            stats,
            digest: digest(c),
        }
    }

    /// Label slots used: the peak number of live wires in the schedule (plus
    /// two for the constants).
    pub fn num_slots(&self) -> u32 {
        self.num_slots
    }

    /// Length of the label array that [`crate::gc::garble`] and
    /// [`crate::gc::evaluate`] need: [`Program::num_slots`] rounded up to a
    /// power of two, so that a slot index masked with `capacity - 1` is in
    /// bounds by construction (no bounds check per gate).
    pub fn label_capacity(&self) -> usize {
        (self.num_slots as usize).next_power_of_two()
    }

    /// Statistics of the source circuit.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// SHA-256 of the circuit (layout, parties and gates): both parties
    /// check that they run the same circuit.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// Garbler input bits.
    pub fn garbler_input_bits(&self) -> usize {
        self.garbler_inputs.len()
    }

    /// Evaluator input bits.
    pub fn evaluator_input_bits(&self) -> usize {
        self.evaluator_inputs.len()
    }

    /// Input bits of one party (as [`Circuit::party_input_bits`]).
    pub fn party_input_bits(&self, party: Party) -> usize {
        match party {
            Party::Garbler => self.garbler_input_bits(),
            Party::Evaluator => self.evaluator_input_bits(),
        }
    }

    /// Output bits.
    pub fn output_bits(&self) -> usize {
        self.outputs.len()
    }

    /// AND gates per evaluation.
    pub fn and_gates(&self) -> u64 {
        self.stats.by_kind[GateKind::And as usize]
    }

    /// The schedule's runs, in order.
    pub(crate) fn runs(&self) -> impl Iterator<Item = Run<'_>> {
        let mut at = 0usize;
        self.segments.iter().map(move |&seg| {
            let (n, ands) = match seg {
                Segment::Ands(n) => (n as usize, true),
                Segment::Xors(n) => (n as usize, false),
            };
            let run = &self.gates[at..at + n];
            at += n;
            if ands { Run::Ands(run) } else { Run::Xors(run) }
        })
    }

    /// Plain evaluation over slots (checks the schedule; tests use it).
    pub fn eval_plain(&self, garbler: &[bool], evaluator: &[bool]) -> Vec<bool> {
        let mut v = vec![false; self.num_slots as usize];
        v[ONE_SLOT as usize] = true;
        for (&s, &b) in self.garbler_inputs.iter().zip(garbler) {
            v[s as usize] = b;
        }
        for (&s, &b) in self.evaluator_inputs.iter().zip(evaluator) {
            v[s as usize] = b;
        }
        for run in self.runs() {
            match run {
                Run::Ands(run) => {
                    let vals: Vec<bool> = run
                        .iter()
                        .map(|&[a, b, _]| v[a as usize] & v[b as usize])
                        .collect();
                    for (&[_, _, o], x) in run.iter().zip(vals) {
                        v[o as usize] = x;
                    }
                }
                Run::Xors(run) => {
                    for &[a, b, o] in run {
                        v[o as usize] = v[a as usize] ^ v[b as usize];
                    }
                }
            }
        }
        self.outputs.iter().map(|&s| v[s as usize]).collect()
    }
}

/// SHA-256 over the circuit's layout, parties and gates. Each gate is its kind
/// and three wire ids (`a`, `b`, `out`; an EQ's value as `a`, what a gate does
/// not read as zero) of `W` bytes, the fewest that hold every wire id of the
/// circuit: the width follows from the number of wires, which is hashed first,
/// so the records have one length and the encoding is unambiguous. Below 65,536
/// wires (AES-128, SHA-256) a gate is 7 bytes to hash instead of 13.
fn digest(c: &Circuit) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"ccbench-garble-circuit-v2");
    h.update(c.num_wires().to_le_bytes());
    h.update((c.garbler_values() as u64).to_le_bytes());
    for list in [c.inputs(), c.outputs()] {
        h.update((list.len() as u64).to_le_bytes());
        for w in list {
            h.update(w.to_le_bytes());
        }
    }
    match c.num_wires().saturating_sub(1) {
        0..=0xff => gate_records::<1>(c, &mut h),
        0x100..=0xffff => gate_records::<2>(c, &mut h),
        0x1_0000..=0xff_ffff => gate_records::<3>(c, &mut h),
        _ => gate_records::<4>(c, &mut h),
    }
    h.finalize().into()
}

/// Hashes the gates as records of a kind byte and three `W`-byte wire ids, 4096
/// gates at a time: fixed-size stores, and SHA-256 (SHA-NI where present) over
/// whole buffers.
fn gate_records<const W: usize>(c: &Circuit, h: &mut Sha256) {
    const GATES: usize = 4096;
    let per = 1 + 3 * W;
    let mut buf = vec![0u8; per * GATES];
    for chunk in c.gates().chunks(GATES) {
        for (g, rec) in chunk.iter().zip(buf.chunks_exact_mut(per)) {
            let (t, a, b, o) = match *g {
                Gate::Xor { a, b, out } => (0u8, a, b, out),
                Gate::And { a, b, out } => (1, a, b, out),
                Gate::Inv { a, out } => (2, a, 0, out),
                Gate::Eq { value, out } => (3, u32::from(value), 0, out),
                Gate::Eqw { a, out } => (4, a, 0, out),
            };
            rec[0] = t;
            rec[1..1 + W].copy_from_slice(&a.to_le_bytes()[..W]);
            rec[1 + W..1 + 2 * W].copy_from_slice(&b.to_le_bytes()[..W]);
            rec[1 + 2 * W..1 + 3 * W].copy_from_slice(&o.to_le_bytes()[..W]);
        }
        h.update(&buf[..per * chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::Party;
    use proptest::prelude::*;

    impl Program {
        /// The first compiler (gathers from the circuit in schedule order):
        /// the reference that [`Program::compile`] must match exactly.
        fn compile_reference(c: &Circuit) -> Program {
            let gates = c.gates();
            let nw = c.num_wires() as usize;
            // 1. Keys from AND depth.
            let mut depth = vec![0u32; nw];
            let mut keys = Vec::with_capacity(gates.len());
            let mut max_key = 0u32;
            for g in gates {
                let d = g.inputs().map(|w| depth[w as usize]).max().unwrap_or(0);
                let (d, key) = match g {
                    Gate::And { .. } => (d + 1, 2 * (d + 1)),
                    _ => (d, 2 * d + 1),
                };
                depth[g.output() as usize] = d;
                keys.push(key);
                max_key = max_key.max(key);
            }
            drop(depth);
            // 2. Stable counting sort by key.
            let mut start = vec![0u32; max_key as usize + 2];
            for &k in &keys {
                start[k as usize + 1] += 1;
            }
            for i in 1..start.len() {
                start[i] += start[i - 1];
            }
            let mut order = vec![0u32; gates.len()];
            for (i, &k) in keys.iter().enumerate() {
                order[start[k as usize] as usize] = i as u32;
                start[k as usize] += 1;
            }
            drop(start);
            // 3. Last reads in the scheduled order; outputs live forever.
            const FOREVER: u32 = u32::MAX;
            const NEVER: u32 = u32::MAX - 1;
            let mut last = vec![NEVER; nw];
            for (pos, &gi) in order.iter().enumerate() {
                for w in gates[gi as usize].inputs() {
                    last[w as usize] = pos as u32;
                }
            }
            for w in c.output_wires() {
                last[w as usize] = FOREVER;
            }
            // 4. Slots.
            let mut slot = vec![u32::MAX; nw];
            let mut free_slots: Vec<u32> = Vec::new();
            let mut num_slots = RESERVED_SLOTS;
            let mut alloc = |free_slots: &mut Vec<u32>| {
                free_slots.pop().unwrap_or_else(|| {
                    num_slots += 1;
                    num_slots - 1
                })
            };
            let input_bits = c.input_bits();
            for s in slot.iter_mut().take(input_bits) {
                *s = alloc(&mut free_slots);
            }
            let gbits = c.garbler_input_bits();
            let garbler_inputs = slot[..gbits].to_vec();
            let evaluator_inputs = slot[gbits..input_bits].to_vec();
            let mut triples = Vec::with_capacity(gates.len());
            let mut segments = Vec::new();
            let mut prev_key = u32::MAX;
            for (pos, &gi) in order.iter().enumerate() {
                let g = gates[gi as usize];
                let key = keys[gi as usize];
                let pos = pos as u32;
                let mut read = [u32::MAX; 2];
                for (k, w) in g.inputs().enumerate() {
                    read[k] = slot[w as usize];
                    if last[w as usize] == pos {
                        // Free once even if both inputs are the same wire.
                        last[w as usize] = NEVER;
                        free_slots.push(slot[w as usize]);
                    }
                }
                let o = g.output() as usize;
                let out = alloc(&mut free_slots);
                slot[o] = out;
                if last[o] == NEVER {
                    free_slots.push(out);
                }
                let is_and = matches!(g, Gate::And { .. });
                match g {
                    Gate::And { .. } => triples.push([read[0], read[1], out]),
                    Gate::Xor { .. } => triples.push([read[0], read[1], out]),
                    Gate::Inv { .. } => triples.push([read[0], ONE_SLOT, out]),
                    Gate::Eq { value, .. } => {
                        triples.push([ZERO_SLOT, if value { ONE_SLOT } else { ZERO_SLOT }, out])
                    }
                    Gate::Eqw { .. } => triples.push([read[0], ZERO_SLOT, out]),
                }
                match segments.last_mut() {
                    Some(Segment::Ands(n)) if is_and && key == prev_key => *n += 1,
                    Some(Segment::Xors(n)) if !is_and => *n += 1,
                    _ => segments.push(if is_and {
                        Segment::Ands(1)
                    } else {
                        Segment::Xors(1)
                    }),
                }
                prev_key = key;
            }
            let outputs = c.output_wires().map(|w| slot[w as usize]).collect();
            Program {
                gates: triples,
                segments,
                num_slots,
                garbler_inputs,
                evaluator_inputs,
                outputs,
                stats: c.stats(),
                digest: digest_reference(c),
            }
        }
    }

    /// The digest as `digest`'s documentation defines it, the whole message
    /// built first: the width is the byte length of the largest wire id.
    fn digest_reference(c: &Circuit) -> [u8; 32] {
        let mut m = b"ccbench-garble-circuit-v2".to_vec();
        m.extend(c.num_wires().to_le_bytes());
        m.extend((c.garbler_values() as u64).to_le_bytes());
        for list in [c.inputs(), c.outputs()] {
            m.extend((list.len() as u64).to_le_bytes());
            for w in list {
                m.extend(w.to_le_bytes());
            }
        }
        let largest = c.num_wires().saturating_sub(1);
        let width = (1..=4)
            .find(|&w| u64::from(largest) < 1u64 << (8 * w))
            .unwrap();
        for g in c.gates() {
            let (kind, a, b) = match *g {
                Gate::Xor { a, b, .. } => (0u8, a, b),
                Gate::And { a, b, .. } => (1, a, b),
                Gate::Inv { a, .. } => (2, a, 0),
                Gate::Eq { value, .. } => (3, u32::from(value), 0),
                Gate::Eqw { a, .. } => (4, a, 0),
            };
            m.push(kind);
            for w in [a, b, g.output()] {
                m.extend(&w.to_le_bytes()[..width]);
            }
        }
        Sha256::digest(&m).into()
    }

    fn same(c: &Circuit) {
        let (p, r) = (Program::compile(c), Program::compile_reference(c));
        assert_eq!(p.gates, r.gates);
        assert_eq!(p.segments, r.segments);
        assert_eq!(p.num_slots, r.num_slots);
        assert_eq!(p.garbler_inputs, r.garbler_inputs);
        assert_eq!(p.evaluator_inputs, r.evaluator_inputs);
        assert_eq!(p.outputs, r.outputs);
        assert_eq!(p.stats, r.stats);
        assert_eq!(p.stats, c.stats());
        assert_eq!(p.digest, r.digest);
    }

    /// The digest at each width the library and tests reach (1, 2 and 3 bytes a
    /// wire id: fewer than 256, 65,536 and more wires), against the reference,
    /// and changed when one gate changes.
    #[test]
    fn digest_matches_the_reference_at_every_width_and_sees_changes() {
        for (n, widths) in [(40, 1), (400, 2), (70_000, 3)] {
            let c = random_circuit(7, 3, 3, n, 4);
            let largest = c.num_wires() - 1;
            assert_eq!(
                (1..=4).find(|&w| u64::from(largest) < 1u64 << (8 * w)),
                Some(widths)
            );
            assert_eq!(digest(&c), digest_reference(&c), "{n} gates");
            let mut gates = c.gates().to_vec();
            let k = gates.len() - 5;
            gates[k] = match gates[k] {
                Gate::Eqw { a, out } => Gate::Inv { a, out },
                g => Gate::Eqw {
                    a: 0,
                    out: g.output(),
                },
            };
            let other = Circuit::new(c.num_wires(), vec![3, 3], vec![4], gates).unwrap();
            assert_ne!(digest(&other), digest(&c), "{n} gates, one changed");
        }
    }

    #[test]
    fn library_circuits_compile_as_the_reference_does() {
        for name in ["aes128", "sha256", "mul64"] {
            let c = crate::library::by_name(name).unwrap();
            same(&c);
        }
    }

    /// A random SSA circuit with every gate kind, repeated inputs (`a ==
    /// b`), dead gates and outputs that are inputs or read elsewhere.
    fn random_circuit(seed: u64, gi: u32, ei: u32, n: usize, nout: u32) -> Circuit {
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let inputs = gi + ei;
        let mut gates = Vec::with_capacity(n);
        let mut w = inputs;
        for _ in 0..n {
            let pick = |r: u64| (r % u64::from(w.max(1))) as u32;
            let a = pick(next());
            let b = if next() % 5 == 0 { a } else { pick(next()) };
            let out = w;
            gates.push(match next() % 8 {
                0 | 1 => Gate::Xor { a, b, out },
                2..=4 => Gate::And { a, b, out },
                5 => Gate::Inv { a, out },
                6 => Gate::Eq {
                    value: next() % 2 == 0,
                    out,
                },
                _ => Gate::Eqw { a, out },
            });
            w += 1;
        }
        // Outputs: copies of random wires, so that they are the last wires.
        for _ in 0..nout {
            let a = (next() % u64::from(w)) as u32;
            gates.push(Gate::Eqw { a, out: w });
            w += 1;
        }
        Circuit::new(w, vec![gi, ei], vec![nout], gates).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn random_circuits_compile_as_the_reference_does(
            seed in any::<u64>(), gi in 1u32..6, ei in 1u32..6, n in 0usize..300, nout in 1u32..8,
        ) {
            let c = random_circuit(seed, gi, ei, n, nout);
            same(&c);
            // And the schedule computes what the circuit does.
            let mut x = seed;
            let mut bits = |k: u32| -> Vec<bool> {
                (0..k).map(|_| { x = x.rotate_left(7) ^ 0x9e37; x & 1 == 1 }).collect()
            };
            let (g, e) = (bits(gi), bits(ei));
            prop_assert_eq!(Program::compile(&c).eval_plain(&g, &e), c.eval(&g, &e).unwrap());
            let _ = Party::Garbler;
        }
    }
}
