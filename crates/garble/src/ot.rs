//! Oblivious transfer for the evaluator's input labels (semi-honest).
//!
//! * Base OT: Chou and Orlandi, "The Simplest Protocol for Oblivious
//!   Transfer" (LATINCRYPT 2015), over the prime-order subgroup of the
//!   Edwards curve of Ed25519 (curve25519-dalek), in its 1-out-of-`n` form
//!   (the paper's section 3), `n = 2^t` with `t = 4`: each 1-out-of-16 OT
//!   carries four 1-out-of-2 OTs (a "bundle"). The sender publishes
//!   `A = aG`; for index `j` (the bundle's four choice bits) the receiver
//!   sends `B = bG + jA` and gets the pad `H(bA)`; the sender derives the
//!   pads `p_i = H(a(B - iA))` for every `i < 16`, draws the bundle's eight
//!   keys and sends `E_i = p_i ^ (k_{0, i_0} || k_{1, i_1} || k_{2, i_2} ||
//!   k_{3, i_3})` (`i_m` the bits of `i`), so the receiver decrypts `E_j`
//!   into the keys of its choices and learns nothing of the others. `H` is
//!   SHA-512 over a label, the bundle's number, `A`, `B`, `i` and the point
//!   (the first four fill one block, hashed once per bundle). Semi-honest
//!   security: `B` is uniform whatever `j` is; for `i != j`, `a(B - iA) =
//!   bA + (j - i) a^2 G`, which the receiver cannot compute from `A = aG`
//!   (CDH, in the random-oracle model, as for `n = 2`), so the other pads
//!   are random to it. Why bundles: every Diffie-Hellman base OT costs its
//!   sender one variable-base multiplication per instance (by its secret
//!   `a`), and the receiver two multiplications; a bundle pays them once
//!   for four OTs, at sixteen batch-compressed points and pads for the
//!   sender and `16 t` bytes per message (32 KiB from the sender for the
//!   128 base OTs of the extension, which sent 32 bytes before bundles; the
//!   receiver's points went from 4 KiB to 1 KiB). Measured in
//!   `docs/gc-2pc.md` ("Base OTs in bundles"). One `A` serves all instances
//!   (fine against semi-honest parties, and hashed into every pad as
//!   McQuoid, Rosulek and Roy, "Batching Base Oblivious Transfers",
//!   ASIACRYPT 2021, ask of a batch). The receiver's index is selected in
//!   constant time, both in its point and among the sender's messages. The
//!   receiver's points go out in chunks (one bundle first, then eight), so
//!   the sender's work overlaps the receiver's; every point is encoded with
//!   a batch compression (one inversion per batch). A known-answer test and
//!   a plain reference implementation pin the keys.
//!
//!   The group is the prime-order subgroup of the Edwards curve, not
//!   Ristretto, for speed: a Ristretto encoding costs an inverse square root
//!   per point even in a batch, an Edwards encoding one inversion per batch,
//!   and the sender encodes sixteen points a bundle on the base OTs'
//!   critical path (measured in `docs/gc-2pc.md`, "Base OTs on Edwards
//!   points"). The price is the cofactor 8, which each party clears from the
//!   point it receives: the protocol above runs with `A' = 8A` in place of
//!   `A` (the sender's secret is then `8a`, and `H` still hashes the `A` that
//!   was sent) and with `8B` where the sender multiplies `B`: the sender's
//!   points are `a 8B - i 8a A'`, the receiver's `bA'`, and a point of small
//!   order is refused. For honest parties this is the protocol above with
//!   the uniform secret `8a`. Against a dishonest one it keeps every point
//!   that is multiplied in the prime-order subgroup: an `A` with a torsion
//!   part would otherwise make the torsion part of `B = bG + jA` reveal `j`
//!   modulo its order. An Edwards point has one encoding (a non-canonical
//!   `y` is refused on the wire), so both parties hash the same bytes.
//!
//!   Known caveats of CO15: its original UC proof against malicious parties
//!   is flawed (Genc, Iovino, Rial, "'The Simplest Protocol for Oblivious
//!   Transfer' Revisited", 2017; Hauck and Loss, "Efficient and Universally
//!   Composable Protocols for Oblivious Transfer from the CDH Assumption",
//!   2017); we rely on it only against semi-honest parties, for which the
//!   CDH argument of CO15 holds.
//! * Extension: Ishai, Kilian, Nissim, Petrank, "Extending Oblivious
//!   Transfers Efficiently" (CRYPTO 2003), in its correlated form: 128 base
//!   OTs with the roles reversed seed 128 column PRGs (AES-CTR); per batch of
//!   `m` OTs the receiver sends `u_j = G(k0_j) ^ G(k1_j) ^ r` (16 bytes per
//!   OT) and the sender, after transposing, holds `q_i = t_i ^ r_i s`. The
//!   sender's zero label is `L0_i = H(q_i, i)` and it sends `y_i = H(q_i ^ s,
//!   i) ^ L0_i ^ R` (16 bytes); the receiver's label is `H(t_i, i) ^ r_i
//!   y_i`, i.e. `L0_i ^ r_i R`. `H` is the garbling hash (a tweakable
//!   correlation-robust hash), with tweaks disjoint from the gate tweaks.

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsBasepointTable, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{BasepointTable, Identity, IsIdentity};
use sha2::{Digest, Sha512};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use thiserror::Error;

use crate::channel::{Channel, ChannelError};
use crate::hash::{Block, Hasher, Prg};

/// Base OTs run to seed the extension.
pub const KAPPA: usize = 128;

/// Why an OT failed.
#[derive(Debug, Error)]
pub enum OtError {
    /// The channel failed.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// The peer sent something that is not a valid protocol message.
    #[error("malformed OT message from the peer: {0}")]
    Malformed(&'static str),
}

fn random_scalar(rng: &mut Prg) -> Scalar {
    let mut b = [0u8; 64];
    rng.bytes(&mut b);
    Scalar::from_bytes_mod_order_wide(&b)
}

/// A peer's point: its encoding, which must be canonical (`y < p`, so that
/// a point has one encoding on the wire, as it has in the hashes), and the
/// point times the cofactor 8, which must not be the identity (see the
/// module documentation); `small_order` is the error that says whose point
/// was of small order.
fn peer_point(
    bytes: &[u8],
    small_order: &'static str,
) -> Result<(CompressedEdwardsY, EdwardsPoint), OtError> {
    let c = CompressedEdwardsY::from_slice(bytes).map_err(|_| OtError::Malformed("point size"))?;
    // y >= p = 2^255 - 19 (little endian: 0xed, then 0xff, then 0x7f with the sign bit).
    let y = c.as_bytes();
    if y[0] >= 0xed && y[1..31].iter().all(|&b| b == 0xff) && y[31] & 0x7f == 0x7f {
        return Err(OtError::Malformed("a non-canonical point encoding"));
    }
    let p = c
        .decompress()
        .ok_or(OtError::Malformed("not a point of the curve"))?
        .mul_by_cofactor();
    if p.is_identity() {
        return Err(OtError::Malformed(small_order));
    }
    Ok((c, p))
}

/// Base OTs carried by one 1-out-of-`2^BUNDLE_BITS` OT (a "bundle"; see the
/// module documentation): the sender's variable-base multiplication, the
/// one cost no Diffie-Hellman base OT avoids, is paid once per bundle.
const BUNDLE_BITS: usize = 4;
// A pad is one SHA-512 output: at most four keys of 16 bytes.
const _: () = assert!(BUNDLE_BITS >= 1 && BUNDLE_BITS <= 4);

/// Bundles per message of the receiver: the sender starts on the first
/// points while the receiver still computes the rest.
const BASE_CHUNK: usize = 8;

/// Bundles in the receiver's first message: one, so that the sender, whose
/// work per bundle is several times the receiver's, starts as soon as it can
/// (`cargo bench -p garble --bench gc -- baseot`, alternated four times on the
/// dev VM: receiver wall 2.73-3.02 ms against 3.08-3.25 with two bundles
/// first and 3.21-4.43 with eight).
const FIRST_CHUNK: usize = 1;

/// The receiver's messages as ranges of bundle numbers, for `bundles` bundles:
/// [`FIRST_CHUNK`], then [`BASE_CHUNK`] each (the last perhaps fewer).
fn chunks(bundles: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let size = if at == 0 { FIRST_CHUNK } else { BASE_CHUNK };
        let end = (at + size).min(bundles);
        (at < bundles).then(|| {
            let r = at..end;
            at = end;
            r
        })
    })
}

/// The bundles of `n` base OTs: `(first OT, OTs in it)` for each, every one
/// full but perhaps the last.
fn bundles(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n)
        .step_by(BUNDLE_BITS)
        .map(move |f| (f, BUNDLE_BITS.min(n - f)))
}

/// Bytes that `n` base OTs put on the wire: `(receiver, sender)`. The
/// receiver sends one point per bundle; the sender its point `A` and, for a
/// bundle of `t` OTs, `2^t` encrypted messages of `t` keys each.
pub fn base_ot_bytes(n: usize) -> (u64, u64) {
    let receiver = 32 * bundles(n).count() as u64;
    (receiver, 32 + sender_messages_bytes(n) as u64)
}

/// Bytes of the sender's encrypted keys for `n` base OTs (all it sends after `A`): `2^t`
/// messages of `t` keys per bundle of `t` OTs.
fn sender_messages_bytes(n: usize) -> usize {
    bundles(n).map(|(_, t)| 16 * (t << t)).sum()
}

/// The domain label that opens every pad's hash input, zero-padded so that the label,
/// the bundle's number, `A` and `B` fill SHA-512's first 128-byte block exactly.
const PAD_LABEL: [u8; 56] = {
    let name = b"ccbench-garble-co15-1ofn-ed-v3";
    let mut l = [0u8; 56];
    let mut i = 0;
    while i < name.len() {
        l[i] = name[i];
        i += 1;
    }
    l
};

/// The pads of one bundle: SHA-512 over [`PAD_LABEL`], the bundle's number, `A`, `B`,
/// then the message's index `j` and the shared point (the receiver's `bA`, the
/// sender's `a(B - jA)`), of which the first `16 t` bytes are used. The first four
/// fields are one whole block, hashed once per bundle: each of the sender's `2^t` pads
/// then costs one more block, not two.
#[derive(Clone)]
struct BundlePads(Sha512);

impl BundlePads {
    fn new(bundle: usize, a: &CompressedEdwardsY, b: &CompressedEdwardsY) -> BundlePads {
        let mut h = Sha512::new();
        h.update(PAD_LABEL);
        h.update((bundle as u64).to_le_bytes());
        h.update(a.as_bytes());
        h.update(b.as_bytes());
        BundlePads(h)
    }

    /// The pad of index `j` with shared point `p`.
    fn pad(&self, j: usize, p: &CompressedEdwardsY) -> [u8; 64] {
        let mut h = self.0.clone();
        h.update((j as u64).to_le_bytes());
        h.update(p.as_bytes());
        h.finalize().into()
    }
}

fn xor16(a: &[u8], b: &[u8]) -> Block {
    let mut k = [0u8; 16];
    for (k, (x, y)) in k.iter_mut().zip(a.iter().zip(b)) {
        *k = x ^ y;
    }
    Block::from_bytes(k)
}

/// `j P` for `j < 2^BUNDLE_BITS`.
fn multiples(p: &EdwardsPoint) -> Vec<EdwardsPoint> {
    std::iter::successors(Some(EdwardsPoint::identity()), |q| Some(q + p))
        .take(1 << BUNDLE_BITS)
        .collect()
}

/// Base OT, sender side: `n` random OTs, returns the key pairs.
///
/// Costs per bundle of `BUNDLE_BITS` OTs: one decompression, three
/// doublings (the cofactor), one variable-base multiplication (constant
/// time; `a` is secret), `2^t` points of two batch compressions and `2^t`
/// SHA-512 pads.
pub fn base_send<C: Channel>(
    ch: &mut C,
    n: usize,
    rng: &mut Prg,
) -> Result<Vec<[Block; 2]>, OtError> {
    let a = random_scalar(rng);
    let big_a = EdwardsPoint::mul_base(&a);
    let ca = big_a.compress();
    ch.send(ca.as_bytes())?;
    ch.flush()?;
    // The keys to transfer, drawn now, in OT order.
    let keys: Vec<[Block; 2]> = (0..n).map(|_| [rng.block(), rng.block()]).collect();
    // Index j's point a 8B - j 8a A' with A' = 8A (see the module
    // documentation): the cofactor cleared from both points.
    let offsets = multiples(&EdwardsPoint::mul_base(&(Scalar::from(64u64) * a * a)));
    let all: Vec<(usize, usize)> = bundles(n).collect();
    let mut bs = vec![0u8; 32 * BASE_CHUNK];
    let mut points = Vec::with_capacity(BASE_CHUNK << BUNDLE_BITS);
    let mut cbs = Vec::with_capacity(BASE_CHUNK);
    // All messages go out together at the end: sent chunk by chunk, each
    // chunk of points after the first would look like the answer to the
    // messages before it (`channel::RoundTrips` would count a round trip per
    // chunk, and a link's model would wait for them), while the receiver
    // reads them only once its own multiplications are done.
    let mut msg = Vec::with_capacity(sender_messages_bytes(n));
    for range in chunks(all.len()) {
        let chunk = &all[range.clone()];
        let k = chunk.len();
        ch.recv(&mut bs[..32 * k])?;
        points.clear();
        cbs.clear();
        for (j, &(_, t)) in chunk.iter().enumerate() {
            let (cb, cleared) = peer_point(
                &bs[32 * j..32 * j + 32],
                "a point of small order from the receiver",
            )?;
            let h = a * cleared;
            points.extend(offsets[..1 << t].iter().map(|o| h - o));
            cbs.push(cb);
        }
        let enc = EdwardsPoint::compress_batch_alloc(&points);
        let mut encoded = enc.iter();
        for (j, (&(first, t), cb)) in chunk.iter().zip(&cbs).enumerate() {
            let bundle = range.start + j;
            let pads = BundlePads::new(bundle, &ca, cb);
            for (idx, p) in (0..1usize << t).zip(&mut encoded) {
                let pad = pads.pad(idx, p);
                for m in 0..t {
                    let key = keys[first + m][(idx >> m) & 1];
                    let e = xor16(&pad[16 * m..16 * m + 16], &key.to_bytes());
                    msg.extend_from_slice(&e.to_bytes());
                }
            }
        }
    }
    ch.send(&msg)?;
    ch.flush()?;
    Ok(keys)
}

/// Base OT, receiver side: one key per choice bit.
///
/// Costs per bundle: a fixed-base multiplication by `G`, a multiplication
/// by the sender's `A` (both constant time), a share of two batch
/// compressions and one SHA-512 pad. The points go out in chunks of
/// `BASE_CHUNK` bundles, so that the sender's work overlaps ours; the
/// multiplications by `A` come after the last chunk. (On a second thread
/// they would finish sooner on a machine of our own, but where both parties
/// share two cores that thread takes the core the sender needs, which is on
/// the critical path: 4.0 -> 4.9-5.3 ms of wall time for 128 base OTs of
/// one bundle each on the dev VM.) Last, the sender's messages: the one of
/// each bundle's index is selected in constant time (the index is the
/// choice bits) and decrypted.
pub fn base_receive<C: Channel>(
    ch: &mut C,
    choices: &[bool],
    rng: &mut Prg,
) -> Result<Vec<Block>, OtError> {
    let mut abuf = [0u8; 32];
    ch.recv(&mut abuf)?;
    // A' = 8A: the cofactor cleared (see the module documentation).
    let (ca, big_a) = peer_point(&abuf, "a point of small order as the sender's point")?;
    let all: Vec<(usize, usize)> = bundles(choices.len()).collect();
    // Each bundle's index: its choice bits, the first the lowest.
    let index: Vec<usize> = all
        .iter()
        .map(|&(f, t)| (0..t).map(|m| usize::from(choices[f + m]) << m).sum())
        .collect();
    let bs: Vec<Scalar> = all.iter().map(|_| random_scalar(rng)).collect();
    let cbs = send_points(ch, &index, &bs, &multiples(&big_a))?;
    let shared = times_point(&bs, &big_a);
    let enc = EdwardsPoint::compress_batch_alloc(&shared);
    let mut msgs = vec![0u8; sender_messages_bytes(choices.len())];
    ch.recv(&mut msgs)?;
    let mut out = Vec::with_capacity(choices.len());
    let mut at = 0;
    for (b, &(_, t)) in all.iter().enumerate() {
        let len = 16 * t;
        let mut mine = [0u8; 16 * BUNDLE_BITS];
        for idx in 0..1usize << t {
            let hit = (idx as u64).ct_eq(&(index[b] as u64));
            for (m, e) in mine
                .iter_mut()
                .zip(&msgs[at + idx * len..at + idx * len + len])
            {
                m.conditional_assign(e, hit);
            }
        }
        at += len << t;
        let pad = BundlePads::new(b, &ca, &cbs[b]).pad(index[b], &enc[b]);
        out.extend((0..t).map(|m| xor16(&pad[16 * m..16 * m + 16], &mine[16 * m..16 * m + 16])));
    }
    Ok(out)
}

/// The receiver's points `B = bG + jA'` (`ja[j]` is `jA'`, selected in
/// constant time), sent in the messages of [`chunks`]; returns their
/// encodings.
fn send_points<C: Channel>(
    ch: &mut C,
    index: &[usize],
    bs: &[Scalar],
    ja: &[EdwardsPoint],
) -> Result<Vec<CompressedEdwardsY>, OtError> {
    let mut cbs = Vec::with_capacity(index.len());
    let mut pts = Vec::with_capacity(BASE_CHUNK);
    let mut msg = Vec::with_capacity(32 * BASE_CHUNK);
    for range in chunks(index.len()) {
        let (chunk, b) = (&index[range.clone()], &bs[range]);
        pts.clear();
        for (&j, b) in chunk.iter().zip(b) {
            let mut off = EdwardsPoint::identity();
            for (i, p) in ja.iter().enumerate() {
                off.conditional_assign(p, (i as u64).ct_eq(&(j as u64)));
            }
            pts.push(EdwardsPoint::mul_base(b) + off);
        }
        let enc = EdwardsPoint::compress_batch_alloc(&pts);
        msg.clear();
        for cb in &enc {
            msg.extend_from_slice(cb.as_bytes());
        }
        ch.send(&msg)?;
        ch.flush()?;
        cbs.extend(enc);
    }
    Ok(cbs)
}

/// `s P` for every scalar `s`, in constant time: through a table for `P`
/// where that pays, otherwise plain variable-base multiplications. On the
/// 2-vCPU dev VM with AVX2 (2026-11-27) a table took 1.2-1.5 ms to build and
/// then 15-20 us a multiplication against 34-49 us without, so it pays from
/// about 50 multiplications on; curve25519-dalek's AVX-512 IFMA backend
/// (15 us a multiplication where the CPU has it) never needs one.
fn times_point(scalars: &[Scalar], p: &EdwardsPoint) -> Vec<EdwardsPoint> {
    times_point_by(scalars, p, scalars.len() >= TABLE_FROM && !ifma_backend())
}

/// Multiplications by one point from which [`times_point`] builds a table.
const TABLE_FROM: usize = 56;

fn times_point_by(scalars: &[Scalar], p: &EdwardsPoint, table: bool) -> Vec<EdwardsPoint> {
    if table {
        let table = EdwardsBasepointTable::create(p);
        scalars.iter().map(|s| table.mul_base(s)).collect()
    } else {
        scalars.iter().map(|s| s * p).collect()
    }
}

/// Whether curve25519-dalek multiplies with its AVX-512 IFMA backend in this
/// process: the backend is compiled in (the `curve25519_dalek_backend` cfg of
/// `.cargo/config.toml` reaches this crate too) and the CPU has the
/// instructions that dalek's own run-time test asks for.
fn ifma_backend() -> bool {
    #[cfg(all(target_arch = "x86_64", curve25519_dalek_backend = "avx512"))]
    {
        std::arch::is_x86_feature_detected!("avx512ifma")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(all(target_arch = "x86_64", curve25519_dalek_backend = "avx512")))]
    {
        false
    }
}

/// Transposes a 128 x 128 bit matrix in place (`a[r]` bit `c` <-> `a[c]`
/// bit `r`).
pub(crate) fn transpose128(a: &mut [u128; 128]) {
    let mut j = 64usize;
    let mut m: u128 = u128::from(u64::MAX);
    while j != 0 {
        let mut k = 0usize;
        while k < 128 {
            let t = ((a[k] >> j) ^ a[k + j]) & m;
            a[k] ^= t << j;
            a[k + j] ^= t;
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        m ^= m << j;
    }
}

/// Blocks of each of the 128 columns that the extension transposes and hashes at a time
/// (4,096 OTs): its scratch is at most 256 KiB whatever the count of OTs, so a bulk
/// session's extension for thousands of evaluations holds, besides its output, only the
/// received or kept matrix (16 bytes an OT each) and not three or four more copies of it.
const CHUNK_BLOCKS: usize = 32;

/// The `rows.len() / 128` blocks of rows from block `first` on of the matrix whose column
/// `j` is `cols[j * stride .. (j + 1) * stride]`, into `rows`.
fn columns_to_rows(cols: &[Block], stride: usize, first: usize, rows: &mut [Block]) {
    debug_assert!(cols.len() == KAPPA * stride && first + rows.len() / KAPPA <= stride);
    let mut m = [0u128; 128];
    for (rb, out) in rows.chunks_exact_mut(KAPPA).enumerate() {
        for (j, x) in m.iter_mut().enumerate() {
            *x = cols[j * stride + first + rb].0;
        }
        transpose128(&mut m);
        for (o, &x) in out.iter_mut().zip(&m) {
            *o = Block(x);
        }
    }
}

const OT_TWEAK: u128 = 1 << 127;

/// The OT-extension sender (the garbler): after [`IknpSender::setup`], each
/// [`IknpSender::send_correlated`] gives zero labels whose one labels
/// (`L0 ^ delta`) the receiver obtains by its choice bits.
pub struct IknpSender {
    s: Block,
    prgs: Vec<Prg>,
    counter: u64,
}

impl std::fmt::Debug for IknpSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IknpSender(..)")
    }
}

/// The OT-extension receiver (the evaluator).
pub struct IknpReceiver {
    prgs: Vec<[Prg; 2]>,
    counter: u64,
}

impl std::fmt::Debug for IknpReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IknpReceiver(..)")
    }
}

/// The sender's memory at the peak of [`IknpSender::send_correlated`], in bytes per OT:
/// two 16-byte values of each OT are held at once (the receiver's matrix and the zero
/// labels), besides a scratch of at most 256 KiB (`CHUNK_BLOCKS`). A session's OT extension
/// covers every evaluation's evaluator inputs at once (`crate::session::bulk_memory_bytes`).
pub const SENDER_BYTES_PER_OT: u64 = 2 * 16;

/// The receiver's memory at the peak of [`IknpReceiver::receive_correlated`], in bytes per
/// OT: two 16-byte values (its matrix's columns and the labels), besides a scratch of at
/// most 128 KiB.
pub const RECEIVER_BYTES_PER_OT: u64 = 2 * 16;

impl IknpSender {
    /// Runs the 128 base OTs (as their receiver).
    pub fn setup<C: Channel>(ch: &mut C, rng: &mut Prg) -> Result<IknpSender, OtError> {
        let s = rng.block();
        let bits: Vec<bool> = (0..KAPPA).map(|j| (s.0 >> j) & 1 == 1).collect();
        let keys = base_receive(ch, &bits, rng)?;
        Ok(IknpSender {
            s,
            prgs: keys.iter().map(|k| Prg::from_seed(k.to_bytes())).collect(),
            counter: 0,
        })
    }

    /// `m` correlated OTs with offset `delta`: returns the zero labels.
    pub fn send_correlated<C: Channel>(
        &mut self,
        ch: &mut C,
        hasher: &Hasher,
        delta: Block,
        m: usize,
    ) -> Result<Vec<Block>, OtError> {
        self.send_correlated_in(ch, hasher, delta, m, CHUNK_BLOCKS)
    }

    /// [`IknpSender::send_correlated`], the matrix transposed and hashed `chunk` blocks of
    /// its columns at a time (the same output and bytes for any `chunk`, tested).
    fn send_correlated_in<C: Channel>(
        &mut self,
        ch: &mut C,
        hasher: &Hasher,
        delta: Block,
        m: usize,
        chunk: usize,
    ) -> Result<Vec<Block>, OtError> {
        if m == 0 {
            return Ok(Vec::new());
        }
        let blocks = m.div_ceil(128);
        let mut u = vec![0u8; 16 * blocks * KAPPA];
        ch.recv(&mut u)?;
        // Row i's tweak is OT_TWEAK | (counter + i): L0 = H(q), L1 = H(q ^ s).
        let first = self.counter;
        self.counter += m as u64;
        let mut l0: Vec<Block> = Vec::with_capacity(m);
        let cb_max = chunk.clamp(1, blocks);
        let mut cols = vec![Block::ZERO; KAPPA * cb_max];
        let mut rows = vec![Block::ZERO; KAPPA * cb_max];
        let mut l1 = vec![Block::ZERO; KAPPA * cb_max];
        let mut msg = Vec::with_capacity(16 * KAPPA * cb_max);
        for b0 in (0..blocks).step_by(cb_max) {
            let cb = cb_max.min(blocks - b0);
            // Column j of this chunk: q_j = PRG(k_j) ^ (u_j if s_j), blocks b0 .. b0 + cb.
            for (j, prg) in self.prgs.iter_mut().enumerate() {
                let q = &mut cols[j * cb..(j + 1) * cb];
                prg.fill(q);
                let sj = (self.s.0 >> j) & 1 == 1;
                for (i, x) in q.iter_mut().enumerate() {
                    let off = 16 * (j * blocks + b0 + i);
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&u[off..off + 16]);
                    *x ^= Block::from_bytes(b).select(sj);
                }
            }
            let rows = &mut rows[..KAPPA * cb];
            columns_to_rows(&cols[..KAPPA * cb], cb, 0, rows);
            let n = (m - KAPPA * b0).min(KAPPA * cb);
            let (xs, ys) = (&mut rows[..n], &mut l1[..n]);
            let t0 = Block(OT_TWEAK | u128::from(first + (KAPPA * b0) as u64));
            hasher.hash_consecutive_with_offset(xs, self.s, ys, t0);
            msg.clear();
            for (a, b) in xs.iter().zip(ys.iter()) {
                msg.extend_from_slice(&(*a ^ *b ^ delta).to_bytes());
            }
            ch.send(&msg)?;
            l0.extend_from_slice(xs);
        }
        ch.flush()?;
        Ok(l0)
    }
}

impl IknpReceiver {
    /// Runs the 128 base OTs (as their sender).
    pub fn setup<C: Channel>(ch: &mut C, rng: &mut Prg) -> Result<IknpReceiver, OtError> {
        let keys = base_send(ch, KAPPA, rng)?;
        Ok(IknpReceiver {
            prgs: keys
                .iter()
                .map(|[k0, k1]| [Prg::from_seed(k0.to_bytes()), Prg::from_seed(k1.to_bytes())])
                .collect(),
            counter: 0,
        })
    }

    /// `choices.len()` correlated OTs: returns `L0_i ^ choices[i] delta`.
    pub fn receive_correlated<C: Channel>(
        &mut self,
        ch: &mut C,
        hasher: &Hasher,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        self.receive_correlated_in(ch, hasher, choices, CHUNK_BLOCKS)
    }

    /// [`IknpReceiver::receive_correlated`], the matrix transposed and the answer read
    /// `chunk` blocks of its columns at a time (the same output and bytes for any `chunk`,
    /// tested).
    fn receive_correlated_in<C: Channel>(
        &mut self,
        ch: &mut C,
        hasher: &Hasher,
        choices: &[bool],
        chunk: usize,
    ) -> Result<Vec<Block>, OtError> {
        let m = choices.len();
        if m == 0 {
            return Ok(Vec::new());
        }
        let blocks = m.div_ceil(128);
        let mut r = vec![Block::ZERO; blocks];
        for (i, &c) in choices.iter().enumerate() {
            r[i / 128].0 |= u128::from(c) << (i % 128);
        }
        // Column j: t_j = PRG(k_j0), kept; u_j = t_j ^ PRG(k_j1) ^ r, sent column by column.
        let mut t = vec![Block::ZERO; KAPPA * blocks];
        let mut g = vec![Block::ZERO; blocks];
        let mut col = Vec::with_capacity(16 * blocks);
        for ([p0, p1], tj) in self.prgs.iter_mut().zip(t.chunks_exact_mut(blocks)) {
            p0.fill(tj);
            p1.fill(&mut g);
            col.clear();
            for ((a, b), c) in tj.iter().zip(&g).zip(&r) {
                col.extend_from_slice(&(*a ^ *b ^ *c).to_bytes());
            }
            ch.send(&col)?;
        }
        ch.flush()?;
        drop((g, col));
        let first = self.counter;
        self.counter += m as u64;
        // Hashed while the sender works on the matrix, before its answer is awaited.
        let mut out: Vec<Block> = Vec::with_capacity(m);
        let cb_max = chunk.clamp(1, blocks);
        let mut rows = vec![Block::ZERO; KAPPA * cb_max];
        for b0 in (0..blocks).step_by(cb_max) {
            let cb = cb_max.min(blocks - b0);
            let rows = &mut rows[..KAPPA * cb];
            columns_to_rows(&t, blocks, b0, rows);
            let n = (m - KAPPA * b0).min(KAPPA * cb);
            let t0 = Block(OT_TWEAK | u128::from(first + (KAPPA * b0) as u64));
            hasher.hash_consecutive(&mut rows[..n], t0);
            out.extend_from_slice(&rows[..n]);
        }
        drop(t);
        let mut y = vec![0u8; 16 * KAPPA * cb_max];
        for (os, cs) in out
            .chunks_mut(KAPPA * cb_max)
            .zip(choices.chunks(KAPPA * cb_max))
        {
            let y = &mut y[..16 * os.len()];
            ch.recv(y)?;
            for ((o, &c), b) in os.iter_mut().zip(cs).zip(y.chunks_exact(16)) {
                let b: [u8; 16] = b.try_into().expect("16-byte chunks");
                *o ^= Block::from_bytes(b).select(c);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::mem_pair;
    use sha2::Sha256;
    use std::time::Duration;

    #[test]
    #[allow(clippy::needless_range_loop)]
    fn transpose_matches_naive() {
        let mut prg = Prg::from_seed([9; 16]);
        let mut a = [0u128; 128];
        for x in a.iter_mut() {
            *x = prg.block().0;
        }
        let orig = a;
        transpose128(&mut a);
        for r in 0..128 {
            for c in 0..128 {
                assert_eq!((a[r] >> c) & 1, (orig[c] >> r) & 1);
            }
        }
    }

    #[test]
    fn base_ot_both_choices() {
        // Full bundles, a short last one, a single OT; then 16 bundles whose indices are
        // 0..16, each one's bits its number's.
        let cases = [1, 3, 16, 17, 30]
            .map(|n| (0..n).map(|i| i % 3 == 0).collect::<Vec<bool>>())
            .into_iter()
            .chain([(0..64).map(|i| ((i / 4) >> (i % 4)) & 1 == 1).collect()]);
        for choices in cases {
            let n = choices.len();
            let (mut s, mut r) = mem_pair(Duration::from_secs(10));
            let ch2 = choices.clone();
            let t = std::thread::spawn(move || {
                base_receive(&mut r, &ch2, &mut Prg::from_seed([1; 16])).unwrap()
            });
            let pairs = base_send(&mut s, n, &mut Prg::from_seed([2; 16])).unwrap();
            let got = t.join().unwrap();
            assert_eq!((got.len(), pairs.len()), (n, n));
            for i in 0..n {
                let c = usize::from(choices[i]);
                assert_eq!(got[i], pairs[i][c], "OT {i} of {n}");
                assert_ne!(got[i], pairs[i][1 - c], "OT {i} of {n}");
            }
            assert_eq!(
                (s.bytes_received(), s.bytes_sent()),
                base_ot_bytes(n),
                "{n} OTs"
            );
        }
    }

    /// A channel that keeps a copy of what it sends.
    struct Tap<C> {
        inner: C,
        sent: Vec<u8>,
    }

    impl<C: Channel> Channel for Tap<C> {
        fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
            self.sent.extend_from_slice(data);
            self.inner.send(data)
        }
        fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
            self.inner.recv(buf)
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

    /// A pad as the module documentation defines it, the whole input hashed at once (the
    /// implementation hashes a bundle's common first block once, `BundlePads`).
    fn bundle_pad(
        bundle: usize,
        j: usize,
        a: &CompressedEdwardsY,
        b: &CompressedEdwardsY,
        p: &CompressedEdwardsY,
    ) -> [u8; 64] {
        let mut m = PAD_LABEL.to_vec();
        m.extend_from_slice(&(bundle as u64).to_le_bytes());
        m.extend_from_slice(a.as_bytes());
        m.extend_from_slice(b.as_bytes());
        m.extend_from_slice(&(j as u64).to_le_bytes());
        m.extend_from_slice(p.as_bytes());
        Sha512::digest(&m).into()
    }

    /// Both transcripts and the receiver's keys of `n` base OTs by the
    /// protocol as the module documentation writes it, with none of the
    /// implementation's speed-ups (batch compressions, a table, chunks,
    /// selection by masks, the multiplications by the cofactor): `A' = 8aG`,
    /// `B = bG + jA'`, the pads from `bA'` and `8a(B - iA')` compressed one
    /// by one. Randomness is drawn in the implementation's order: the
    /// sender's `a`, then its keys in OT order; the receiver's `b` per bundle.
    fn reference(
        choices: &[bool],
        receiver_seed: [u8; 16],
        sender_seed: [u8; 16],
    ) -> (Vec<u8>, Vec<u8>, Vec<Block>, Vec<[Block; 2]>) {
        let n = choices.len();
        let mut rs = Prg::from_seed(sender_seed);
        let a = random_scalar(&mut rs);
        let ca = EdwardsPoint::mul_base(&a).compress();
        // CO15 with the secret 8a and its point A' = 8A.
        let a8 = Scalar::from(8u64) * a;
        let big_a = EdwardsPoint::mul_base(&a8);
        let keys: Vec<[Block; 2]> = (0..n).map(|_| [rs.block(), rs.block()]).collect();
        let mut rr = Prg::from_seed(receiver_seed);
        let (mut to_sender, mut to_receiver) = (Vec::new(), ca.as_bytes().to_vec());
        let mut got = Vec::new();
        let all: Vec<(usize, usize)> = bundles(n).collect();
        let bs: Vec<Scalar> = all.iter().map(|_| random_scalar(&mut rr)).collect();
        let mut cbs = Vec::new();
        for (&(f, t), b) in all.iter().zip(&bs) {
            let j: u64 = (0..t).map(|m| u64::from(choices[f + m]) << m).sum();
            let cb = (EdwardsPoint::mul_base(b) + Scalar::from(j) * big_a).compress();
            to_sender.extend_from_slice(cb.as_bytes());
            cbs.push(cb);
        }
        for (k, ((&(f, t), b), cb)) in all.iter().zip(&bs).zip(&cbs).enumerate() {
            let big_b = cb.decompress().unwrap();
            let j: usize = (0..t).map(|m| usize::from(choices[f + m]) << m).sum();
            for i in 0..1usize << t {
                let p = (a8 * (big_b - Scalar::from(i as u64) * big_a)).compress();
                let pad = bundle_pad(k, i, &ca, cb, &p);
                let mut e = Vec::new();
                for m in 0..t {
                    let key = keys[f + m][(i >> m) & 1].to_bytes();
                    e.extend((0..16).map(|x| key[x] ^ pad[16 * m + x]));
                }
                if i == j {
                    let mine = bundle_pad(k, j, &ca, cb, &(b * big_a).compress());
                    got.extend(
                        (0..t).map(|m| xor16(&mine[16 * m..16 * m + 16], &e[16 * m..16 * m + 16])),
                    );
                }
                to_receiver.extend(e);
            }
        }
        (to_sender, to_receiver, got, keys)
    }

    /// The implementation against the plain reference, byte for byte on
    /// the wire and key for key, and both pinned by a known answer.
    #[test]
    fn base_ot_matches_the_reference_and_a_known_answer() {
        for n in [1, 6, KAPPA] {
            let choices: Vec<bool> = (0..n).map(|i| (i * 5) % 7 < 3).collect();
            let (s, r) = mem_pair(Duration::from_secs(10));
            let (mut s, mut r) = (
                Tap {
                    inner: s,
                    sent: Vec::new(),
                },
                Tap {
                    inner: r,
                    sent: Vec::new(),
                },
            );
            let ch2 = choices.clone();
            let t = std::thread::spawn(move || {
                let got = base_receive(&mut r, &ch2, &mut Prg::from_seed([5; 16])).unwrap();
                (got, r.sent)
            });
            let pairs = base_send(&mut s, n, &mut Prg::from_seed([6; 16])).unwrap();
            let (got, to_sender) = t.join().unwrap();
            let want = reference(&choices, [5; 16], [6; 16]);
            assert_eq!(to_sender, want.0, "the receiver's points, {n} OTs");
            assert_eq!(s.sent, want.1, "the sender's messages, {n} OTs");
            assert_eq!((&got, &pairs), (&want.2, &want.3), "{n} OTs");
            if n == KAPPA {
                let mut h = Sha256::new();
                h.update(&to_sender);
                h.update(&s.sent);
                for (g, p) in got.iter().zip(&pairs) {
                    h.update(g.to_bytes());
                    h.update(p[0].to_bytes());
                    h.update(p[1].to_bytes());
                }
                let d: [u8; 32] = h.finalize().into();
                let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(
                    hex,
                    "ad128a272927fa31cd981a34c702d09d8b56ecede680feb60a536703ae980083"
                );
            }
        }
    }

    /// The receiver's messages cover every bundle once, in order: one bundle first, then
    /// eight a message.
    #[test]
    fn receiver_messages_are_one_bundle_then_eight() {
        let all = |n| chunks(n).collect::<Vec<_>>();
        assert_eq!(all(0), vec![]);
        assert_eq!(all(1), vec![0..1]);
        assert_eq!(all(2), vec![0..1, 1..2]);
        assert_eq!(all(32), vec![0..1, 1..9, 9..17, 17..25, 25..32]);
    }

    /// The tests above run one of the two ways of multiplying by `A` (the
    /// number of bundles and the machine decide which); both must give the
    /// same points.
    #[test]
    fn table_and_plain_multiplication_agree() {
        let mut rng = Prg::from_seed([8; 16]);
        let p = EdwardsPoint::mul_base(&random_scalar(&mut rng));
        let s: Vec<Scalar> = (0..5).map(|_| random_scalar(&mut rng)).collect();
        let (t, v) = (times_point_by(&s, &p, true), times_point_by(&s, &p, false));
        assert_eq!(t, v);
        assert_eq!(v[0], s[0] * p);
        assert_ne!(v[0], v[1]);
    }

    /// The receiver refuses an `A` of small order (the identity among
    /// them), sending nothing in answer, and clears the torsion part of any
    /// other: its `B` is in the prime-order subgroup, where no torsion part
    /// can carry its choices.
    #[test]
    fn base_ot_receiver_clears_the_cofactor_of_the_senders_point() {
        let good = EdwardsPoint::mul_base(&random_scalar(&mut Prg::from_seed([7; 16])));
        let torsion = curve25519_dalek::constants::EIGHT_TORSION[1];
        for a in [EdwardsPoint::identity(), torsion] {
            let (mut s, mut r) = mem_pair(Duration::from_secs(10));
            r.send(a.compress().as_bytes()).unwrap();
            r.flush().unwrap();
            let got = base_receive(&mut s, &[true], &mut Prg::from_seed([1; 16]));
            assert!(
                matches!(got, Err(OtError::Malformed(m)) if m.contains("small order")),
                "{got:?}"
            );
            assert_eq!(s.bytes_sent(), 0);
        }
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        r.send((good + torsion).compress().as_bytes()).unwrap();
        r.flush().unwrap();
        let t = std::thread::spawn(move || {
            base_receive(
                &mut s,
                &[true, false, true, true],
                &mut Prg::from_seed([1; 16]),
            )
        });
        let mut b = [0u8; 32];
        r.recv(&mut b).unwrap();
        let big_b = CompressedEdwardsY(b).decompress().unwrap();
        assert!(big_b.is_torsion_free());
        drop(r);
        assert!(t.join().unwrap().is_err());
    }

    /// The sender refuses a receiver's point of small order, and one with
    /// a torsion part gets the prime-order part's pads: the cofactor is
    /// cleared, the key of the honest index is unchanged.
    #[test]
    fn base_ot_sender_clears_the_cofactor_of_the_receivers_points() {
        let torsion = curve25519_dalek::constants::EIGHT_TORSION[3];
        for shift in [EdwardsPoint::identity(), torsion] {
            let (mut s, mut r) = mem_pair(Duration::from_secs(10));
            let t = std::thread::spawn(move || {
                let mut abuf = [0u8; 32];
                r.recv(&mut abuf).unwrap();
                let ca = CompressedEdwardsY(abuf);
                let big_a = ca.decompress().unwrap().mul_by_cofactor();
                // One bundle, index 5: B = bG + 5A', shifted by a torsion point.
                let b = random_scalar(&mut Prg::from_seed([3; 16]));
                let big_b = EdwardsPoint::mul_base(&b) + Scalar::from(5u64) * big_a + shift;
                r.send(big_b.compress().as_bytes()).unwrap();
                r.flush().unwrap();
                let mut msgs = vec![0u8; sender_messages_bytes(4)];
                r.recv(&mut msgs).unwrap();
                let cb = big_b.compress();
                let pad = BundlePads::new(0, &ca, &cb).pad(5, &(b * big_a).compress());
                let e = &msgs[5 * 64..6 * 64];
                (0..4)
                    .map(|m| xor16(&pad[16 * m..16 * m + 16], &e[16 * m..16 * m + 16]))
                    .collect::<Vec<_>>()
            });
            let pairs = base_send(&mut s, 4, &mut Prg::from_seed([2; 16])).unwrap();
            let got = t.join().unwrap();
            let want: Vec<Block> = (0..4).map(|m| pairs[m][(5 >> m) & 1]).collect();
            assert_eq!(got, want);
        }
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let t = std::thread::spawn(move || {
            let mut abuf = [0u8; 32];
            r.recv(&mut abuf).unwrap();
            r.send(torsion.compress().as_bytes()).unwrap();
            r.flush().unwrap();
            r
        });
        let got = base_send(&mut s, 4, &mut Prg::from_seed([2; 16]));
        assert!(
            matches!(got, Err(OtError::Malformed(m)) if m.contains("small order")),
            "{got:?}"
        );
        drop(t.join().unwrap());
    }

    #[test]
    fn base_ot_rejects_late_garbage() {
        // A receiver whose first chunk is valid and whose second is not.
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let t = std::thread::spawn(move || {
            let mut a = [0u8; 32];
            r.recv(&mut a).unwrap();
            let mut prg = Prg::from_seed([3; 16]);
            for _ in 0..BASE_CHUNK {
                let p = EdwardsPoint::mul_base(&random_scalar(&mut prg));
                r.send(p.compress().as_bytes()).unwrap();
            }
            r.send(&[0xff; 32 * BASE_CHUNK]).unwrap();
            r.flush().unwrap();
            r
        });
        let got = base_send(
            &mut s,
            2 * BASE_CHUNK * BUNDLE_BITS,
            &mut Prg::from_seed([2; 16]),
        );
        assert!(matches!(got, Err(OtError::Malformed(_))), "{got:?}");
        drop(t.join().unwrap());
    }

    #[test]
    fn base_ot_peer_closes_mid_way() {
        // The receiver sends one chunk of points and hangs up.
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let t = std::thread::spawn(move || {
            let mut a = [0u8; 32];
            r.recv(&mut a).unwrap();
            let mut prg = Prg::from_seed([3; 16]);
            for _ in 0..BASE_CHUNK {
                let p = EdwardsPoint::mul_base(&random_scalar(&mut prg));
                r.send(p.compress().as_bytes()).unwrap();
            }
            r.close();
        });
        let got = base_send(&mut s, KAPPA, &mut Prg::from_seed([2; 16]));
        assert!(
            matches!(got, Err(OtError::Channel(ChannelError::Closed))),
            "{got:?}"
        );
        t.join().unwrap();
        // The base-OT sender (the extension's receiver) hangs up after its
        // point: the extension's sender fails with `Closed`, in its base OTs
        // (its points cannot be delivered) or at its first read after them.
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let t = std::thread::spawn(move || {
            let mut prg = Prg::from_seed([2; 16]);
            let big_a = EdwardsPoint::mul_base(&random_scalar(&mut prg));
            r.send(big_a.compress().as_bytes()).unwrap();
            r.close();
            drop(r);
        });
        t.join().unwrap();
        let mut prg = Prg::from_seed([4; 16]);
        let got = IknpSender::setup(&mut s, &mut prg)
            .and_then(|mut tx| tx.send_correlated(&mut s, &Hasher::new(), Block(1), 10));
        assert!(
            matches!(got, Err(OtError::Channel(ChannelError::Closed))),
            "{got:?}"
        );
    }

    #[test]
    fn base_ot_rejects_garbage_points() {
        // y = p and y = 2^255 - 1 (both decode to points, by y mod p), a y
        // that is no point's, and y = p - 1 = -1 (canonical: the point of order 2).
        let mut p = [0xff; 32];
        (p[0], p[31]) = (0xed, 0x7f);
        let no_point = (2u8..)
            .map(|y| {
                let mut b = [0u8; 32];
                b[0] = y;
                b
            })
            .find(|b| CompressedEdwardsY(*b).decompress().is_none())
            .unwrap();
        let mut minus_one = p;
        minus_one[0] = 0xec;
        for (bytes, why) in [
            (p, "non-canonical"),
            ([0xff; 32], "non-canonical"),
            (no_point, "not a point"),
            (minus_one, "small order"),
        ] {
            let (mut s, mut r) = mem_pair(Duration::from_secs(10));
            r.send(&bytes).unwrap();
            r.flush().unwrap();
            let got = base_receive(&mut s, &[true], &mut Prg::from_seed([1; 16]));
            assert!(
                matches!(got, Err(OtError::Malformed(m)) if m.contains(why)),
                "{bytes:02x?}: {got:?}"
            );
        }
    }

    /// One extension of `m` OTs with the sender and the receiver working `cs` and `cr`
    /// blocks of columns at a time, from fixed seeds: the sender's zero labels and the
    /// receiver's labels.
    fn chunked_extension(m: usize, cs: usize, cr: usize) -> (Vec<Block>, Vec<Block>, Block) {
        let (mut s, mut r) = mem_pair(Duration::from_secs(30));
        let choices: Vec<bool> = (0..m).map(|i| (i * 7) % 5 < 2).collect();
        let t = std::thread::spawn(move || {
            let h = Hasher::new();
            let mut rx = IknpReceiver::setup(&mut r, &mut Prg::from_seed([3; 16])).unwrap();
            // A first extension moves the counter (the tweaks) and the PRGs past zero.
            let warm: Vec<bool> = (0..130).map(|i| i % 3 == 0).collect();
            rx.receive_correlated_in(&mut r, &h, &warm, 1).unwrap();
            rx.receive_correlated_in(&mut r, &h, &choices, cr).unwrap()
        });
        let h = Hasher::new();
        let mut prg = Prg::from_seed([4; 16]);
        let mut tx = IknpSender::setup(&mut s, &mut prg).unwrap();
        let mut delta = prg.block();
        delta.0 |= 1;
        tx.send_correlated_in(&mut s, &h, delta, 130, 2).unwrap();
        let l0 = tx.send_correlated_in(&mut s, &h, delta, m, cs).unwrap();
        (l0, t.join().unwrap(), delta)
    }

    #[test]
    fn iknp_chunks_do_not_change_the_extension() {
        // m: within one block, across a chunk boundary of the smallest chunks, a multiple
        // of 128, and more than one default chunk with a partial last block.
        for m in [1usize, 129, 640, 128 * CHUNK_BLOCKS + 300] {
            let choices: Vec<bool> = (0..m).map(|i| (i * 7) % 5 < 2).collect();
            let (l0, got, delta) = chunked_extension(m, usize::MAX, usize::MAX);
            assert_eq!((l0.len(), got.len()), (m, m));
            for i in 0..m {
                assert_eq!(got[i], l0[i] ^ delta.select(choices[i]), "m {m} ot {i}");
            }
            for (cs, cr) in [(1, 1), (1, 3), (2, 1), (3, CHUNK_BLOCKS), (CHUNK_BLOCKS, 2)] {
                let (l0c, gotc, _) = chunked_extension(m, cs, cr);
                assert!(l0c == l0, "m {m}: sender chunks {cs} give other labels");
                assert!(gotc == got, "m {m}: receiver chunks {cr} give other labels");
            }
        }
    }

    #[test]
    fn iknp_correlated_both_choices() {
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let choices: Vec<bool> = (0..300).map(|i| (i * 7) % 5 < 2).collect();
        let ch2 = choices.clone();
        let t = std::thread::spawn(move || {
            let h = Hasher::new();
            let mut rx = IknpReceiver::setup(&mut r, &mut Prg::from_seed([3; 16])).unwrap();
            let a = rx.receive_correlated(&mut r, &h, &ch2).unwrap();
            let b = rx.receive_correlated(&mut r, &h, &ch2[..5]).unwrap();
            (a, b)
        });
        let h = Hasher::new();
        let mut prg = Prg::from_seed([4; 16]);
        let mut tx = IknpSender::setup(&mut s, &mut prg).unwrap();
        let mut delta = prg.block();
        delta.0 |= 1;
        let l0 = tx.send_correlated(&mut s, &h, delta, 300).unwrap();
        let l0b = tx.send_correlated(&mut s, &h, delta, 5).unwrap();
        let (a, b) = t.join().unwrap();
        for i in 0..300 {
            assert_eq!(a[i], l0[i] ^ delta.select(choices[i]), "ot {i}");
        }
        for i in 0..5 {
            assert_eq!(b[i], l0b[i] ^ delta.select(choices[i]));
        }
        assert!(choices.iter().any(|&c| c) && choices.iter().any(|&c| !c));
    }
}
