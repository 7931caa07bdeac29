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
//!
//! # XOR sums
//!
//! Free XOR is linear, so a tree of free gates whose inner wires are read once
//! needs no label for those wires: before slots are given, each run of free
//! gates becomes XOR sums `l[out] = l[i1] ^ ... ^ l[ik]` of up to
//! four inputs (a gate absorbs the gate of an input wire that it alone
//! reads, in the same run; a wire twice in a sum cancels). A sum's inner wires
//! are never stored nor loaded, and its record (`[i1, .., ik, out]`) is
//! fewer words than its gates' triples: AES-128's 24,744 free gates become
//! 16,756 sums (`ccbench gc circuit stats`). The sums of a run are ordered by
//! their depth within the run and, within a depth, by how many inputs they
//! have, so that each arity is one branch-free loop of its own (`XorRun`);
//! a run that would split into short loops keeps its gates. The AND gates and
//! their order (the hash tweaks) do not change, and the tables and labels are
//! those of the gates, so the parties need not compile alike.

use std::mem::discriminant;

use sha2::{Digest, Sha256};

use crate::circuit::{Circuit, Gate, GateKind, Party, Stats};

/// The slot that holds constant 0: the zero block for both parties.
pub(crate) const ZERO_SLOT: u32 = 0;

/// The slot that holds constant 1: the garbler's zero label is `R`, so the
/// evaluator's (active) label is the zero block.
pub(crate) const ONE_SLOT: u32 = 1;

/// Slots reserved for the constants before any wire gets one.
const RESERVED_SLOTS: u32 = 2;

/// The most inputs of one XOR sum (see the module documentation): four keeps
/// a record at five words and three loops, and takes in most of AES-128's
/// trees (measured in `docs/gc-2pc.md`, "XOR sums").
pub(crate) const MAX_SUM: usize = 4;

/// The fewest XOR sums a loop of one arity has on average for a run to be
/// kept as sums (see `fuse_xors`): with fewer, each loop's start costs about
/// what its sums save (SHA-256, six sums a loop: no faster; AES-128, about 45:
/// `docs/gc-2pc.md`, "XOR sums").
const MIN_LOOP: usize = 16;

/// A run of the schedule: the next `n` records are AND gates, or XOR sums of
/// 2, 3 or 4 inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    Ands(u32),
    Xors(u32),
    Xors3(u32),
    Xors4(u32),
}

impl Segment {
    /// Records in the segment, and words a record (inputs, then the output).
    fn shape(self) -> (usize, usize) {
        match self {
            Segment::Ands(n) | Segment::Xors(n) => (n as usize, 3),
            Segment::Xors3(n) => (n as usize, 4),
            Segment::Xors4(n) => (n as usize, 5),
        }
    }

    /// A free segment of `n` sums of `k` inputs.
    fn xors(k: usize, n: u32) -> Segment {
        match k {
            2 => Segment::Xors(n),
            3 => Segment::Xors3(n),
            _ => Segment::Xors4(n),
        }
    }

    /// Adds `n` records to a segment of the same kind.
    fn grow(&mut self, n: u32) {
        match self {
            Segment::Ands(m) | Segment::Xors(m) | Segment::Xors3(m) | Segment::Xors4(m) => *m += n,
        }
    }
}

/// A run of the schedule's gates over slots ([`Program::runs`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Run<'a> {
    /// AND gates of one AND depth, `[a, b, out]`: independent of each other.
    Ands(&'a [[u32; 3]]),
    /// Free gates as XOR sums (see [`Program`]), in order.
    Xors(XorRun<'a>),
}

/// XOR sums of one arity, `[i1, .., ik, out]`: `l[out] = l[i1] ^ .. ^ l[ik]`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum XorRun<'a> {
    Two(&'a [[u32; 3]]),
    Three(&'a [[u32; 4]]),
    Four(&'a [[u32; 5]]),
}

/// The record's output is never read (and is no circuit output).
const DEAD: u8 = 1;
/// The read of input `i` is the last read of its wire (its slot is free after
/// it): bit `FREE << i`.
const FREE: u8 = 2;

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
    /// Every record over slots, in schedule order, one after the other: AND
    /// gates `[a, b, out]`, and the free gates as XOR sums `[i1, .., ik, out]`
    /// (INV is XOR with [`ONE_SLOT`], EQ 0/1 is XOR of [`ZERO_SLOT`] with
    /// itself/[`ONE_SLOT`], EQW is XOR with [`ZERO_SLOT`]), so free gates need
    /// no dispatch.
    code: Vec<u32>,
    /// The runs of `code`, in order.
    segments: Vec<Segment>,
    pub(crate) num_slots: u32,
    pub(crate) garbler_inputs: Vec<u32>,
    pub(crate) evaluator_inputs: Vec<u32>,
    pub(crate) outputs: Vec<u32>,
    stats: Stats,
    digest: [u8; 32],
}

impl Program {
    /// Compiles a circuit, its free gates as XOR sums (the form for a program
    /// that runs many times; [`Program::compile_with`] chooses).
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
    ///    the wire records in place (after pass 2, the free gates' runs may
    ///    become XOR sums: `fuse_xors`).
    ///
    /// Then the digest. The result is identical to the first, gather-based
    /// compiler's (a test keeps that one as the reference). The memory is
    /// what a party's first session pays for in page faults: besides the
    /// program (12 bytes a gate), five bytes a wire (depths, then slots, and
    /// the marks of pass 3) and one byte a gate. Timings in `docs/gc-2pc.md` ("Compilation").
    pub fn compile(c: &Circuit) -> Program {
        Program::compile_with(c, true)
    }

    /// [`Program::compile`], with the free gates as XOR sums (`sums`) or as
    /// the circuit's own gates. The sums make each evaluation's free gates
    /// cheaper and the compilation dearer (AES-128: about 7% less garbling
    /// time, 1.7 times the compilation's), so a program compiled for one
    /// evaluation is better without them ([`crate::session::SUMS_FROM`]).
    /// Both forms garble to the same tables and labels: the parties need not
    /// agree on it.
    pub fn compile_with(c: &Circuit, sums: bool) -> Program {
        Program::compile_impl(c, sums.then_some(MIN_LOOP))
    }

    /// The compiler, with XOR sums where a run's loops of one arity have at
    /// least `min_loop` sums on average (tests pass 0 to make sums of every
    /// run), or none.
    pub(crate) fn compile_impl(c: &Circuit, min_loop: Option<usize>) -> Program {
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
        // 2b. The free gates as XOR sums.
        let (mut code, segments) = match min_loop {
            Some(m) => fuse_xors(c, &sched, &segments, zero, m),
            None => (sched.into_flattened(), segments),
        };
        let records: usize = segments.iter().map(|s| s.shape().0).sum();
        // 3. Last reads and dead outputs, backwards; outputs live forever.
        // The constant wires are marked like the others and never freed.
        let mut flags = vec![0u8; records];
        let mut seen = vec![0u8; nw + 2];
        let mut mark = |w: u32| -> u8 {
            let first = 1 - seen[w as usize];
            seen[w as usize] = 1;
            first
        };
        for w in c.output_wires() {
            mark(w);
        }
        let (mut end, mut r) = (code.len(), records);
        for seg in segments.iter().rev() {
            let (n, st) = seg.shape();
            for _ in 0..n {
                end -= st;
                r -= 1;
                let rec = &code[end..end + st];
                let mut f = mark(rec[st - 1]) * DEAD;
                for (i, &w) in rec[..st - 1].iter().enumerate() {
                    f |= (mark(w) & u8::from(w < zero)) * (FREE << i);
                }
                flags[r] = f;
            }
        }
        drop(seen);
        // 4. Slots, in the depths' memory, and the records over slots in the
        // wire records' place.
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
        let (mut at, mut r) = (0usize, 0usize);
        for seg in &segments {
            let (n, st) = seg.shape();
            for _ in 0..n {
                let rec = &mut code[at..at + st];
                let f = flags[r];
                for (i, w) in rec[..st - 1].iter_mut().enumerate() {
                    *w = slot[*w as usize];
                    if f & (FREE << i) != 0 {
                        free_slots.push(*w);
                    }
                }
                let out = alloc(&mut free_slots);
                slot[rec[st - 1] as usize] = out;
                if f & DEAD != 0 {
                    free_slots.push(out);
                }
                rec[st - 1] = out;
                at += st;
                r += 1;
            }
        }
        drop(flags);
        let outputs = c.output_wires().map(|w| slot[w as usize]).collect();
        Program {
            code,
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
            let (n, st) = seg.shape();
            let words = &self.code[at..at + n * st];
            at += n * st;
            match seg {
                Segment::Ands(_) => Run::Ands(words.as_chunks().0),
                Segment::Xors(_) => Run::Xors(XorRun::Two(words.as_chunks().0)),
                Segment::Xors3(_) => Run::Xors(XorRun::Three(words.as_chunks().0)),
                Segment::Xors4(_) => Run::Xors(XorRun::Four(words.as_chunks().0)),
            }
        })
    }

    /// Free-gate records of the compiled program: the XOR sums that stand for
    /// the circuit's free gates (fewer than those where sums absorbed gates;
    /// see the module documentation).
    pub fn xor_sums(&self) -> u64 {
        let sums = |seg: &Segment| match *seg {
            Segment::Ands(_) => 0,
            Segment::Xors(n) | Segment::Xors3(n) | Segment::Xors4(n) => u64::from(n),
        };
        self.segments.iter().map(sums).sum()
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
                    let mut sum = |rec: &[u32]| {
                        let (o, ins) = rec.split_last().unwrap();
                        v[*o as usize] = ins.iter().fold(false, |x, &i| x ^ v[i as usize]);
                    };
                    match run {
                        XorRun::Two(r) => r.iter().for_each(|t| sum(t)),
                        XorRun::Three(r) => r.iter().for_each(|t| sum(t)),
                        XorRun::Four(r) => r.iter().for_each(|t| sum(t)),
                    }
                }
            }
        }
        self.outputs.iter().map(|&s| v[s as usize]).collect()
    }
}

/// Pass 2b of [`Program::compile`]: each run of free gates of the schedule
/// `sched` (wire triples, runs `segments`) as XOR sums (see the module
/// documentation). Returns the records, one after the other, and their runs.
///
/// A gate is absorbed by the gate that reads its output when that is the
/// output's only read (no other gate, no circuit output) and both are in the
/// same run: walking the run backwards, each gate not yet absorbed starts a
/// sum and replaces an input by the two inputs of the gate it absorbs while
/// the sum has room. Every gate a sum reads from its own run is then a sum
/// itself, earlier in the run, so a sum's depth (one more than the deepest sum
/// it reads, zero if none) orders the run topologically.
fn fuse_xors(
    c: &Circuit,
    sched: &[[u32; 3]],
    segments: &[Segment],
    zero: u32,
    min_loop: usize,
) -> (Vec<u32>, Vec<Segment>) {
    // Per wire: one more than the schedule position of the gate that assigns
    // it (0: an input or a constant) in the low 30 bits, and its reads,
    // saturating at 2, in the high 2 (a circuit output counts as two reads).
    // One array, so that a look-up is one access.
    const POS: u32 = (1 << 30) - 1;
    const READ: u32 = 1 << 30;
    if sched.len() >= POS as usize {
        return (sched.as_flattened().to_vec(), segments.to_vec());
    }
    let mut info = vec![0u32; zero as usize + 2];
    for (p, &[a, b, out]) in sched.iter().enumerate() {
        for w in [a, b] {
            let x = &mut info[w as usize];
            *x += READ * u32::from(*x < 2 * READ);
        }
        info[out as usize] |= p as u32 + 1;
    }
    for w in c.output_wires() {
        info[w as usize] |= 2 * READ;
    }
    let mut code = Vec::with_capacity(sched.len() * 3);
    let mut out_segments: Vec<Segment> = Vec::with_capacity(segments.len());
    let mut absorbed: Vec<bool> = Vec::new();
    let mut depth: Vec<u32> = Vec::new();
    let mut sums: Vec<([u32; MAX_SUM], usize, u32, u32)> = Vec::new();
    let (mut slots, mut order): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    let mut s = 0usize;
    for &seg in segments {
        let (n, _) = seg.shape();
        let run = &sched[s..s + n];
        if let Segment::Ands(_) = seg {
            code.extend_from_slice(run.as_flattened());
            out_segments.push(seg);
            s += n;
            continue;
        }
        // The run's position of the gate that assigns `w`, if in this run (a
        // wire a gate of the run reads is assigned before it), and whether
        // that gate's only reader is the one asking.
        let local = |w: u32| -> Option<(usize, bool)> {
            let x = info[w as usize];
            let p = (x & POS) as usize;
            (p > s).then(|| (p - 1 - s, x >> 30 == 1))
        };
        absorbed.clear();
        absorbed.resize(n, false);
        sums.clear();
        for i in (0..n).rev() {
            if absorbed[i] {
                continue;
            }
            let [a, b, out] = run[i];
            let mut ins = [zero; MAX_SUM];
            (ins[0], ins[1]) = (a, b);
            let (mut k, mut j) = (2usize, 0usize);
            while j < k {
                match local(ins[j]) {
                    Some((p, true)) if k < MAX_SUM => {
                        absorbed[p] = true;
                        [ins[j], ins[k]] = [run[p][0], run[p][1]];
                        k += 1;
                    }
                    _ => j += 1,
                }
            }
            // A wire twice in a sum cancels (rare: compared pairwise).
            let mut x = 0;
            while x < k {
                match (x + 1..k).find(|&y| ins[y] == ins[x]) {
                    Some(y) => {
                        ins.copy_within(y + 1..k, y);
                        ins.copy_within(x + 1..k - 1, x);
                        k -= 2;
                    }
                    None => x += 1,
                }
            }
            ins[k..].fill(zero);
            sums.push((ins, k.max(2), out, i as u32));
        }
        sums.reverse();
        // Depths within the run, indexed by the run position of the sum's
        // gate; then a counting sort by depth and arity, the sort key.
        depth.clear();
        depth.resize(n, 0);
        let mut keys = 0usize;
        for e in sums.iter_mut() {
            let d = e.0[..e.1]
                .iter()
                .filter_map(|&w| local(w).map(|(p, _)| p))
                .inspect(|&p| debug_assert!(!absorbed[p], "a sum reads an absorbed gate"))
                .map(|p| depth[p] + 1)
                .max()
                .unwrap_or(0);
            depth[e.3 as usize] = d;
            e.3 = d * (MAX_SUM as u32 - 1) + (e.1 as u32 - 2);
            keys = keys.max(e.3 as usize + 1);
        }
        slots.clear();
        slots.resize(keys + 1, 0);
        for e in &sums {
            slots[e.3 as usize + 1] += 1;
        }
        for i in 1..=keys {
            slots[i] += slots[i - 1];
        }
        order.clear();
        order.resize(sums.len(), 0);
        for (j, e) in sums.iter().enumerate() {
            order[slots[e.3 as usize] as usize] = j as u32;
            slots[e.3 as usize] += 1;
        }
        // A run whose sums would split into short loops (fewer than
        // `min_loop` sums an arity change on average: SHA-256's chains) stays
        // as its gates; a loop's start costs about what a short run saves.
        let arity = |j: &u32| sums[*j as usize].1;
        let loops = 1 + order
            .windows(2)
            .filter(|w| arity(&w[0]) != arity(&w[1]))
            .count();
        if sums.len() < min_loop * loops {
            code.extend_from_slice(run.as_flattened());
            out_segments.push(seg);
            s += n;
            continue;
        }
        for &j in &order {
            let (ins, k, out, _) = sums[j as usize];
            code.extend_from_slice(&ins[..k]);
            code.push(out);
            match out_segments.last_mut() {
                Some(last) if discriminant(last) == discriminant(&Segment::xors(k, 0)) => {
                    last.grow(1)
                }
                _ => out_segments.push(Segment::xors(k, 1)),
            }
        }
        s += n;
    }
    (code, out_segments)
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
                code: triples.into_flattened(),
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
        let (p, r) = (
            Program::compile_with(c, false),
            Program::compile_reference(c),
        );
        assert_eq!(p.code, r.code);
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

    /// Two gates that only one gate reads become one sum with it, and the
    /// wire both read cancels: `(a ^ b) ^ (a ^ c)` is one record `[b, c, out]`.
    #[test]
    fn a_tree_of_single_reads_is_one_sum_and_a_wire_twice_cancels() {
        let gates = vec![
            Gate::Xor { a: 0, b: 1, out: 3 },
            Gate::Xor { a: 0, b: 2, out: 4 },
            Gate::Xor { a: 3, b: 4, out: 5 },
        ];
        let c = Circuit::new(6, vec![3], vec![1], gates).unwrap();
        let p = Program::compile_impl(&c, Some(0));
        assert_eq!(p.segments, [Segment::Xors(1)]);
        let [b, cc] = [p.garbler_inputs[1], p.garbler_inputs[2]];
        assert_eq!(p.code, [b, cc, p.outputs[0]]);
        for x in 0..8u8 {
            let bits: Vec<bool> = (0..3).map(|i| x >> i & 1 == 1).collect();
            assert_eq!(p.eval_plain(&bits, &[]), c.eval(&bits, &[]).unwrap());
        }
        // Without sums: the three gates.
        assert_eq!(Program::compile_with(&c, false).xor_sums(), 3);
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
            let want = c.eval(&g, &e).unwrap();
            prop_assert_eq!(&Program::compile(&c).eval_plain(&g, &e), &want);
            // XOR sums in every run, however short.
            prop_assert_eq!(&Program::compile_impl(&c, Some(0)).eval_plain(&g, &e), &want);
            let _ = Party::Garbler;
        }
    }
}
