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

use crate::circuit::{Circuit, Gate, Stats};

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
    pub fn compile(c: &Circuit) -> Program {
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
    let mut buf = Vec::with_capacity(1 << 16);
    for g in c.gates() {
        let (t, a, b, o) = match *g {
            Gate::Xor { a, b, out } => (0u8, a, b, out),
            Gate::And { a, b, out } => (1, a, b, out),
            Gate::Inv { a, out } => (2, a, 0, out),
            Gate::Eq { value, out } => (3, u32::from(value), 0, out),
            Gate::Eqw { a, out } => (4, a, 0, out),
        };
        buf.push(t);
        buf.extend_from_slice(&a.to_le_bytes());
        buf.extend_from_slice(&b.to_le_bytes());
        buf.extend_from_slice(&o.to_le_bytes());
        if buf.len() >= 1 << 16 {
            h.update(&buf);
            buf.clear();
        }
    }
    h.update(&buf);
    h.finalize().into()
}
