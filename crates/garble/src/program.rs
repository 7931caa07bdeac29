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

use crate::circuit::{Circuit, Gate, GateKind, Stats};

/// The slot that holds constant 0: the zero block for both parties.
pub(crate) const ZERO_SLOT: u32 = 0;

/// The slot that holds constant 1: the garbler's zero label is `R`, so the
/// evaluator's (active) label is the zero block.
pub(crate) const ONE_SLOT: u32 = 1;

/// Slots reserved for the constants before any wire gets one.
const RESERVED_SLOTS: u32 = 2;

/// A run of the schedule: `n` AND gates from `ands`, or `n` XOR gates from
/// `xors`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    Ands(u32),
    Xors(u32),
}

/// What a scheduled gate does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Op {
    #[default]
    Xor,
    And,
    Inv,
    Eq0,
    Eq1,
    Eqw,
}

/// The read of `a` is the last read of its wire: its slot is free after it.
const FREE_A: u8 = 1;
/// The read of `b` is the last read of its wire.
const FREE_B: u8 = 2;
/// The gate's output is never read (and is no circuit output).
const DEAD: u8 = 4;

/// A gate of the schedule during compilation: 16 bytes, read in order.
#[derive(Clone, Copy, Debug, Default)]
struct Packed {
    a: u32,
    b: u32,
    out: u32,
    /// The schedule key (for the runs of AND gates), less than 2^32.
    key: u32,
    op: Op,
    /// Wires read: 0, 1 (`a`) or 2 (`a`, `b`).
    reads: u8,
    flags: u8,
}

impl Packed {
    fn of(g: &Gate, key: u32) -> Packed {
        let (op, a, b, out, reads) = match *g {
            Gate::Xor { a, b, out } => (Op::Xor, a, b, out, 2),
            Gate::And { a, b, out } => (Op::And, a, b, out, 2),
            Gate::Inv { a, out } => (Op::Inv, a, 0, out, 1),
            Gate::Eq { value, out } => (if value { Op::Eq1 } else { Op::Eq0 }, 0, 0, out, 0),
            Gate::Eqw { a, out } => (Op::Eqw, a, 0, out, 1),
        };
        Packed {
            a,
            b,
            out,
            key,
            op,
            reads,
            flags: 0,
        }
    }
}

/// A compiled circuit (see the module documentation).
#[derive(Clone, Debug)]
pub struct Program {
    /// AND gates `[a, b, out]` over slots, in schedule order.
    pub(crate) ands: Vec<[u32; 3]>,
    /// Every other gate as an XOR `[a, b, out]` over slots: INV is XOR with
    /// [`ONE_SLOT`], EQ 0/1 is XOR of [`ZERO_SLOT`] with itself/[`ONE_SLOT`],
    /// EQW is XOR with [`ZERO_SLOT`]. Free gates thus need no dispatch.
    pub(crate) xors: Vec<[u32; 3]>,
    pub(crate) segments: Vec<Segment>,
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
    /// 1. in circuit order: AND depth (a key per gate) and the gate counts;
    /// 2. a counting sort that scatters each gate, packed into 16 bytes,
    ///    straight to its place in the schedule (the circuit is read once, in
    ///    order, and the later passes never gather from it);
    /// 3. backwards over the schedule: which read of each wire is its last,
    ///    and which gates assign a wire that is never read, from a bitset of
    ///    one bit a wire (it stays in cache where a `u32` a wire did not);
    /// 4. forwards over the schedule: slots from the free list, the gate
    ///    triples and the runs.
    ///
    /// Then the digest, over the same bytes as before. The result is
    /// identical to the first, gather-based compiler's (a test keeps that
    /// one as the reference); on the dev VM `mul1024` (1.9 M gates) went
    /// from about 205 ms to the figure in `docs/gc-2pc.md`.
    pub fn compile(c: &Circuit) -> Program {
        let gates = c.gates();
        let nw = c.num_wires() as usize;
        let input_bits = c.input_bits();
        // 1. Keys from AND depth, and the statistics.
        let mut depth = vec![0u32; nw];
        let mut keys = Vec::with_capacity(gates.len());
        let mut by_kind = [0u64; 5];
        let mut max_key = 0u32;
        for g in gates {
            by_kind[g.kind() as usize] += 1;
            let d = match *g {
                Gate::Xor { a, b, .. } | Gate::And { a, b, .. } => {
                    depth[a as usize].max(depth[b as usize])
                }
                Gate::Inv { a, .. } | Gate::Eqw { a, .. } => depth[a as usize],
                Gate::Eq { .. } => 0,
            };
            let (d, key) = match g {
                Gate::And { .. } => (d + 1, 2 * (d + 1)),
                _ => (d, 2 * d + 1),
            };
            depth[g.output() as usize] = d;
            keys.push(key);
            max_key = max_key.max(key);
        }
        drop(depth);
        let stats = Stats {
            gates: gates.len() as u64,
            wires: nw as u64,
            by_kind,
            and_depth: max_key / 2,
            garbler_input_bits: c.garbler_input_bits() as u64,
            evaluator_input_bits: c.evaluator_input_bits() as u64,
            output_bits: c.output_bits() as u64,
        };
        // 2. Stable counting sort by key, scattering packed gates.
        let mut start = vec![0u32; max_key as usize + 2];
        for &k in &keys {
            start[k as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut sched = vec![Packed::default(); gates.len()];
        for (g, &k) in gates.iter().zip(&keys) {
            let at = &mut start[k as usize];
            sched[*at as usize] = Packed::of(g, k);
            *at += 1;
        }
        drop(start);
        drop(keys);
        // 3. Last reads and dead outputs, backwards; outputs live forever.
        let mut seen = vec![0u64; nw.div_ceil(64)];
        let mut mark = |w: u32| -> bool {
            let (i, bit) = (w as usize / 64, 1u64 << (w % 64));
            let first = seen[i] & bit == 0;
            seen[i] |= bit;
            first
        };
        for w in c.output_wires() {
            mark(w);
        }
        for p in sched.iter_mut().rev() {
            if !mark(p.out) {
                // Read later (or an output): not dead. `mark` set nothing new.
            } else {
                p.flags |= DEAD;
            }
            if p.reads >= 1 && mark(p.a) {
                p.flags |= FREE_A;
            }
            if p.reads == 2 && mark(p.b) {
                p.flags |= FREE_B;
            }
        }
        drop(seen);
        // 4. Slots, triples and runs.
        let mut slot = vec![u32::MAX; nw];
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
        let mut ands = Vec::with_capacity(by_kind[GateKind::And as usize] as usize);
        let mut xors = Vec::with_capacity(gates.len() - ands.capacity());
        let mut segments = Vec::new();
        let mut prev_key = u32::MAX;
        for p in &sched {
            let ra = if p.reads >= 1 { slot[p.a as usize] } else { 0 };
            let rb = if p.reads == 2 { slot[p.b as usize] } else { 0 };
            if p.flags & FREE_A != 0 {
                free_slots.push(ra);
            }
            if p.flags & FREE_B != 0 {
                free_slots.push(rb);
            }
            let out = alloc(&mut free_slots);
            slot[p.out as usize] = out;
            if p.flags & DEAD != 0 {
                free_slots.push(out);
            }
            let is_and = p.op == Op::And;
            match p.op {
                Op::And => ands.push([ra, rb, out]),
                Op::Xor => xors.push([ra, rb, out]),
                Op::Inv => xors.push([ra, ONE_SLOT, out]),
                Op::Eq0 => xors.push([ZERO_SLOT, ZERO_SLOT, out]),
                Op::Eq1 => xors.push([ZERO_SLOT, ONE_SLOT, out]),
                Op::Eqw => xors.push([ra, ZERO_SLOT, out]),
            }
            match segments.last_mut() {
                Some(Segment::Ands(n)) if is_and && p.key == prev_key => *n += 1,
                Some(Segment::Xors(n)) if !is_and => *n += 1,
                _ => segments.push(if is_and {
                    Segment::Ands(1)
                } else {
                    Segment::Xors(1)
                }),
            }
            prev_key = p.key;
        }
        drop(sched);
        let outputs = c.output_wires().map(|w| slot[w as usize]).collect();
        Program {
            ands,
            xors,
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

    /// Output bits.
    pub fn output_bits(&self) -> usize {
        self.outputs.len()
    }

    /// AND gates per evaluation.
    pub fn and_gates(&self) -> u64 {
        self.ands.len() as u64
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
        let (mut ai, mut fi) = (0usize, 0usize);
        for seg in &self.segments {
            match *seg {
                Segment::Ands(n) => {
                    let run = &self.ands[ai..ai + n as usize];
                    let vals: Vec<bool> = run
                        .iter()
                        .map(|&[a, b, _]| v[a as usize] & v[b as usize])
                        .collect();
                    for (&[_, _, o], x) in run.iter().zip(vals) {
                        v[o as usize] = x;
                    }
                    ai += n as usize;
                }
                Segment::Xors(n) => {
                    for &[a, b, o] in &self.xors[fi..fi + n as usize] {
                        v[o as usize] = v[a as usize] ^ v[b as usize];
                    }
                    fi += n as usize;
                }
            }
        }
        self.outputs.iter().map(|&s| v[s as usize]).collect()
    }
}

fn digest(c: &Circuit) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"ccbench-garble-circuit-v1");
    h.update(c.num_wires().to_le_bytes());
    h.update((c.garbler_values() as u64).to_le_bytes());
    for list in [c.inputs(), c.outputs()] {
        h.update((list.len() as u64).to_le_bytes());
        for w in list {
            h.update(w.to_le_bytes());
        }
    }
    // 13 bytes a gate, 4096 gates a block: fixed-size stores, no capacity
    // checks, and SHA-256 (SHA-NI where present) over 52 KiB at a time.
    const PER: usize = 13;
    const GATES: usize = 4096;
    let mut buf = vec![0u8; PER * GATES];
    for chunk in c.gates().chunks(GATES) {
        for (g, rec) in chunk.iter().zip(buf.chunks_exact_mut(PER)) {
            let (t, a, b, o) = match *g {
                Gate::Xor { a, b, out } => (0u8, a, b, out),
                Gate::And { a, b, out } => (1, a, b, out),
                Gate::Inv { a, out } => (2, a, 0, out),
                Gate::Eq { value, out } => (3, u32::from(value), 0, out),
                Gate::Eqw { a, out } => (4, a, 0, out),
            };
            rec[0] = t;
            rec[1..5].copy_from_slice(&a.to_le_bytes());
            rec[5..9].copy_from_slice(&b.to_le_bytes());
            rec[9..13].copy_from_slice(&o.to_le_bytes());
        }
        h.update(&buf[..PER * chunk.len()]);
    }
    h.finalize().into()
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
            let mut ands = Vec::with_capacity(c.stats().and_gates() as usize);
            let mut xors = Vec::new();
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
                    Gate::And { .. } => ands.push([read[0], read[1], out]),
                    Gate::Xor { .. } => xors.push([read[0], read[1], out]),
                    Gate::Inv { .. } => xors.push([read[0], ONE_SLOT, out]),
                    Gate::Eq { value, .. } => {
                        xors.push([ZERO_SLOT, if value { ONE_SLOT } else { ZERO_SLOT }, out])
                    }
                    Gate::Eqw { .. } => xors.push([read[0], ZERO_SLOT, out]),
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
                ands,
                xors,
                segments,
                num_slots,
                garbler_inputs,
                evaluator_inputs,
                outputs,
                stats: c.stats(),
                digest: digest(c),
            }
        }
    }

    fn same(c: &Circuit) {
        let (p, r) = (Program::compile(c), Program::compile_reference(c));
        assert_eq!(p.ands, r.ands);
        assert_eq!(p.xors, r.xors);
        assert_eq!(p.segments, r.segments);
        assert_eq!(p.num_slots, r.num_slots);
        assert_eq!(p.garbler_inputs, r.garbler_inputs);
        assert_eq!(p.evaluator_inputs, r.evaluator_inputs);
        assert_eq!(p.outputs, r.outputs);
        assert_eq!(p.stats, r.stats);
        assert_eq!(p.stats, c.stats());
        assert_eq!(p.digest, r.digest);
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
