//! Oblivious transfer for the evaluator's input labels (semi-honest).
//!
//! * Base OT: Chou and Orlandi, "The Simplest Protocol for Oblivious
//!   Transfer" (LATINCRYPT 2015), over the Ristretto group of Curve25519
//!   (curve25519-dalek). The sender publishes `A = aG`; for choice `c` the
//!   receiver sends `B = bG + cA` and keys `k_c = H(bA)`; the sender derives
//!   `k_0 = H(aB)`, `k_1 = H(a(B - A))`. `H` is SHA-256 over the instance
//!   index, `A`, `B` and the point, truncated to 128 bits. One `A` serves all
//!   instances (fine against semi-honest parties). The receiver's choice is
//!   selected in constant time. The receiver's points go out in chunks of 16,
//!   so the sender's variable-base multiplications overlap the receiver's
//!   fixed-base ones; every point is computed halved and encoded with a batch
//!   compression (one inversion per batch), and the receiver multiplies by
//!   `A` with curve25519-dalek's AVX-512 IFMA backend where the CPU has it,
//!   through a precomputed table elsewhere. These change no byte on the wire
//!   and no key (a known-answer test pins them). Known caveats of this protocol: its
//!   original UC proof against malicious parties is flawed (Genc, Iovino,
//!   Rial, "'The Simplest Protocol for Oblivious Transfer' Revisited", 2017;
//!   Hauck and Loss, "Efficient and Universally Composable Protocols for
//!   Oblivious Transfer from the CDH Assumption", 2017); we rely on it only
//!   against semi-honest parties, for which the CDH argument of CO15 holds,
//!   and hash `A` and `B` into every key.
//! * Extension: Ishai, Kilian, Nissim, Petrank, "Extending Oblivious
//!   Transfers Efficiently" (CRYPTO 2003), in its correlated form: 128 base
//!   OTs with the roles reversed seed 128 column PRGs (AES-CTR); per batch of
//!   `m` OTs the receiver sends `u_j = G(k0_j) ^ G(k1_j) ^ r` (16 bytes per
//!   OT) and the sender, after transposing, holds `q_i = t_i ^ r_i s`. The
//!   sender's zero label is `L0_i = H(q_i, i)` and it sends `y_i = H(q_i ^ s,
//!   i) ^ L0_i ^ R` (16 bytes); the receiver's label is `H(t_i, i) ^ r_i
//!   y_i`, i.e. `L0_i ^ r_i R`. `H` is the garbling hash (a tweakable
//!   correlation-robust hash), with tweaks disjoint from the gate tweaks.

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoBasepointTable, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable};
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

fn kdf(
    i: usize,
    a: &CompressedRistretto,
    b: &CompressedRistretto,
    p: &CompressedRistretto,
) -> Block {
    let mut h = Sha256::new();
    h.update(b"ccbench-garble-co15");
    h.update((i as u64).to_le_bytes());
    h.update(a.as_bytes());
    h.update(b.as_bytes());
    h.update(p.as_bytes());
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    Block::from_bytes(k)
}

fn decompress(bytes: &[u8]) -> Result<(CompressedRistretto, RistrettoPoint), OtError> {
    let c = CompressedRistretto::from_slice(bytes).map_err(|_| OtError::Malformed("point size"))?;
    let p = c
        .decompress()
        .ok_or(OtError::Malformed("not a Ristretto point"))?;
    Ok((c, p))
}

/// Base OTs per message of the receiver: the sender starts on the first
/// points while the receiver still computes the rest.
const BASE_CHUNK: usize = 16;

/// `1/2` modulo the group order. Every point this module hashes or sends is
/// computed as half of itself and encoded by
/// [`RistrettoPoint::double_and_compress_batch`]: one field inversion per
/// batch instead of one inverse square root per point (5 us each on the dev
/// VM), with exactly the bytes that `compress` gives for the whole point.
fn half() -> Scalar {
    Scalar::from(2u64).invert()
}

/// Base OT, sender side: `n` random OTs, returns the key pairs.
///
/// Costs per OT: one decompression and one variable-base multiplication
/// (constant time; `a` is secret), and a share of two batch compressions.
pub fn base_send<C: Channel>(
    ch: &mut C,
    n: usize,
    rng: &mut Prg,
) -> Result<Vec<[Block; 2]>, OtError> {
    let a = random_scalar(rng);
    let big_a = RistrettoPoint::mul_base(&a);
    let ca = big_a.compress();
    ch.send(ca.as_bytes())?;
    ch.flush()?;
    // k0 = H(aB), k1 = H(aB - aA) = H(2 (a/2 B - a/2 aG)).
    let a_half = a * half();
    let a_a_half = RistrettoPoint::mul_base(&(a_half * a));
    let mut out = Vec::with_capacity(n);
    let mut bs = vec![0u8; 32 * BASE_CHUNK];
    let mut halves = Vec::with_capacity(2 * BASE_CHUNK);
    let mut cbs = Vec::with_capacity(BASE_CHUNK);
    let mut done = 0;
    while done < n {
        let k = BASE_CHUNK.min(n - done);
        ch.recv(&mut bs[..32 * k])?;
        halves.clear();
        cbs.clear();
        for j in 0..k {
            let (cb, b) = decompress(&bs[32 * j..32 * j + 32])?;
            halves.push(a_half * b);
            cbs.push(cb);
        }
        for j in 0..k {
            halves.push(halves[j] - a_a_half);
        }
        let enc = RistrettoPoint::double_and_compress_batch(&halves);
        for (j, cb) in cbs.iter().enumerate() {
            let i = done + j;
            out.push([kdf(i, &ca, cb, &enc[j]), kdf(i, &ca, cb, &enc[k + j])]);
        }
        done += k;
    }
    Ok(out)
}

/// Base OT, receiver side: one key per choice bit.
///
/// Costs per OT: a fixed-base multiplication by `G`, a multiplication by
/// the sender's `A` (both constant time) and a share of two batch
/// compressions. The points go out in chunks of `BASE_CHUNK`, so that the
/// sender's work overlaps ours; the multiplications by `A` come after the
/// last chunk. (On a second thread they would finish sooner on a machine
/// of our own, but where both parties share two cores that thread takes
/// the core the sender needs, which is on the critical path: 4.0 -> 4.9-5.3
/// ms of wall time for 128 base OTs on the dev VM.)
pub fn base_receive<C: Channel>(
    ch: &mut C,
    choices: &[bool],
    rng: &mut Prg,
) -> Result<Vec<Block>, OtError> {
    let mut abuf = [0u8; 32];
    ch.recv(&mut abuf)?;
    let (ca, big_a) = decompress(&abuf)?;
    if big_a.is_identity() {
        return Err(OtError::Malformed("the identity as the sender's point"));
    }
    let half = half();
    // Halves throughout: B/2 = (b/2) G + c (A/2), and the keys come from
    // (b/2) A, so that the batch compressions, which double, encode B and bA.
    let a_half = half * big_a;
    let bhs: Vec<Scalar> = choices.iter().map(|_| random_scalar(rng) * half).collect();
    let cbs = send_points(ch, choices, &bhs, &a_half)?;
    let shared = times_point(&bhs, &big_a);
    let enc = RistrettoPoint::double_and_compress_batch(&shared);
    Ok(enc
        .iter()
        .zip(&cbs)
        .enumerate()
        .map(|(i, (p, cb))| kdf(i, &ca, cb, p))
        .collect())
}

/// The receiver's points `B/2 = (b/2) G + c (A/2)`, sent in chunks of
/// `BASE_CHUNK`; returns their encodings (of `B`).
fn send_points<C: Channel>(
    ch: &mut C,
    choices: &[bool],
    bhs: &[Scalar],
    a_half: &RistrettoPoint,
) -> Result<Vec<CompressedRistretto>, OtError> {
    let mut cbs = Vec::with_capacity(choices.len());
    let mut pts = Vec::with_capacity(BASE_CHUNK);
    let mut msg = Vec::with_capacity(32 * BASE_CHUNK);
    for (chunk, bh) in choices.chunks(BASE_CHUNK).zip(bhs.chunks(BASE_CHUNK)) {
        pts.clear();
        for (&c, bh) in chunk.iter().zip(bh) {
            let bg = RistrettoPoint::mul_base(bh);
            let with_a = bg + a_half;
            pts.push(RistrettoPoint::conditional_select(
                &bg,
                &with_a,
                Choice::from(u8::from(c)),
            ));
        }
        let enc = RistrettoPoint::double_and_compress_batch(&pts);
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

/// `s P` for every scalar `s`, in constant time: plain variable-base
/// multiplications where curve25519-dalek runs its AVX-512 IFMA backend
/// (15 us each on the dev VM), otherwise through a table for `P` (built in
/// about 1 ms, then 13 us a multiplication instead of 28 with AVX2).
fn times_point(scalars: &[Scalar], p: &RistrettoPoint) -> Vec<RistrettoPoint> {
    times_point_by(scalars, p, !ifma_backend())
}

fn times_point_by(scalars: &[Scalar], p: &RistrettoPoint, table: bool) -> Vec<RistrettoPoint> {
    if table {
        let table = RistrettoBasepointTable::create(p);
        scalars.iter().map(|s| s * &table).collect()
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

/// Columns (128 of them, `blocks` blocks each) to rows (`128 * blocks` rows).
fn columns_to_rows(cols: &[Vec<Block>], blocks: usize) -> Vec<Block> {
    let mut rows = Vec::with_capacity(128 * blocks);
    let mut m = [0u128; 128];
    for rb in 0..blocks {
        for (j, c) in cols.iter().enumerate() {
            m[j] = c[rb].0;
        }
        transpose128(&mut m);
        rows.extend(m.iter().map(|&x| Block(x)));
    }
    rows
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
        if m == 0 {
            return Ok(Vec::new());
        }
        let blocks = m.div_ceil(128);
        let mut u = vec![0u8; 16 * blocks * KAPPA];
        ch.recv(&mut u)?;
        let mut cols = Vec::with_capacity(KAPPA);
        for (j, prg) in self.prgs.iter_mut().enumerate() {
            let mut q = vec![Block::ZERO; blocks];
            prg.fill(&mut q);
            let sj = (self.s.0 >> j) & 1 == 1;
            for (i, x) in q.iter_mut().enumerate() {
                let off = 16 * (j * blocks + i);
                let mut b = [0u8; 16];
                b.copy_from_slice(&u[off..off + 16]);
                *x ^= Block::from_bytes(b).select(sj);
            }
            cols.push(q);
        }
        let rows = columns_to_rows(&cols, blocks);
        let tweaks: Vec<Block> = (0..m)
            .map(|i| Block(OT_TWEAK | u128::from(self.counter + i as u64)))
            .collect();
        self.counter += m as u64;
        let mut l0: Vec<Block> = rows[..m].to_vec();
        hasher.hash(&mut l0, &tweaks);
        let mut l1: Vec<Block> = rows[..m].iter().map(|&q| q ^ self.s).collect();
        hasher.hash(&mut l1, &tweaks);
        let mut msg = Vec::with_capacity(16 * m);
        for (a, b) in l0.iter().zip(&l1) {
            msg.extend_from_slice(&(*a ^ *b ^ delta).to_bytes());
        }
        ch.send(&msg)?;
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
        let m = choices.len();
        if m == 0 {
            return Ok(Vec::new());
        }
        let blocks = m.div_ceil(128);
        let mut r = vec![Block::ZERO; blocks];
        for (i, &c) in choices.iter().enumerate() {
            r[i / 128].0 |= u128::from(c) << (i % 128);
        }
        let mut cols = Vec::with_capacity(KAPPA);
        let mut msg = Vec::with_capacity(16 * blocks * KAPPA);
        for [p0, p1] in self.prgs.iter_mut() {
            let mut t = vec![Block::ZERO; blocks];
            let mut g = vec![Block::ZERO; blocks];
            p0.fill(&mut t);
            p1.fill(&mut g);
            for i in 0..blocks {
                msg.extend_from_slice(&(t[i] ^ g[i] ^ r[i]).to_bytes());
            }
            cols.push(t);
        }
        ch.send(&msg)?;
        ch.flush()?;
        let rows = columns_to_rows(&cols, blocks);
        let tweaks: Vec<Block> = (0..m)
            .map(|i| Block(OT_TWEAK | u128::from(self.counter + i as u64)))
            .collect();
        self.counter += m as u64;
        let mut y = vec![0u8; 16 * m];
        ch.recv(&mut y)?;
        let mut out: Vec<Block> = rows[..m].to_vec();
        hasher.hash(&mut out, &tweaks);
        for (i, (o, &c)) in out.iter_mut().zip(choices).enumerate() {
            let mut b = [0u8; 16];
            b.copy_from_slice(&y[16 * i..16 * i + 16]);
            *o ^= Block::from_bytes(b).select(c);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::mem_pair;
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
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let choices: Vec<bool> = (0..16).map(|i| i % 3 == 0).collect();
        let ch2 = choices.clone();
        let t = std::thread::spawn(move || {
            base_receive(&mut r, &ch2, &mut Prg::from_seed([1; 16])).unwrap()
        });
        let pairs = base_send(&mut s, 16, &mut Prg::from_seed([2; 16])).unwrap();
        let got = t.join().unwrap();
        for i in 0..16 {
            let c = usize::from(choices[i]);
            assert_eq!(got[i], pairs[i][c]);
            assert_ne!(got[i], pairs[i][1 - c]);
        }
    }

    /// The base OTs' keys for fixed seeds, as the first implementation (one
    /// compression and one variable-base multiplication per point) derived
    /// them: later speed-ups (halved scalars with batch compression, a table
    /// for `A`, chunked messages) must not change a single key.
    #[test]
    fn base_ot_known_answer() {
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let choices: Vec<bool> = (0..KAPPA).map(|i| (i * 5) % 7 < 3).collect();
        let ch2 = choices.clone();
        let t = std::thread::spawn(move || {
            base_receive(&mut r, &ch2, &mut Prg::from_seed([5; 16])).unwrap()
        });
        let pairs = base_send(&mut s, KAPPA, &mut Prg::from_seed([6; 16])).unwrap();
        let got = t.join().unwrap();
        let mut h = Sha256::new();
        for (g, p) in got.iter().zip(&pairs) {
            h.update(g.to_bytes());
            h.update(p[0].to_bytes());
            h.update(p[1].to_bytes());
        }
        let d: [u8; 32] = h.finalize().into();
        let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "41e2951ce2c96b9d6325aaedcfa614254dcdf61e3d1a3ff4383497e8ed687462"
        );
    }

    /// The known-answer test above runs one of the two ways of multiplying
    /// by `A` (the machine decides which); both must give the same points.
    #[test]
    fn table_and_plain_multiplication_agree() {
        let mut rng = Prg::from_seed([8; 16]);
        let p = RistrettoPoint::mul_base(&random_scalar(&mut rng));
        let s: Vec<Scalar> = (0..5).map(|_| random_scalar(&mut rng)).collect();
        let (t, v) = (times_point_by(&s, &p, true), times_point_by(&s, &p, false));
        assert_eq!(t, v);
        assert_eq!(v[0], s[0] * p);
        assert_ne!(v[0], v[1]);
    }

    #[test]
    fn base_ot_rejects_the_identity_and_late_garbage() {
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        r.send(CompressedRistretto::default().as_bytes()).unwrap();
        r.flush().unwrap();
        assert!(matches!(
            base_receive(&mut s, &[true], &mut Prg::from_seed([1; 16])),
            Err(OtError::Malformed(_))
        ));
        // A receiver whose first chunk is valid and whose second is not.
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        let t = std::thread::spawn(move || {
            let mut a = [0u8; 32];
            r.recv(&mut a).unwrap();
            let mut prg = Prg::from_seed([3; 16]);
            for _ in 0..BASE_CHUNK {
                let p = RistrettoPoint::mul_base(&random_scalar(&mut prg));
                r.send(p.compress().as_bytes()).unwrap();
            }
            r.send(&[0xff; 32 * BASE_CHUNK]).unwrap();
            r.flush().unwrap();
            r
        });
        let got = base_send(&mut s, 2 * BASE_CHUNK, &mut Prg::from_seed([2; 16]));
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
                let p = RistrettoPoint::mul_base(&random_scalar(&mut prg));
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
            let big_a = RistrettoPoint::mul_base(&random_scalar(&mut prg));
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
        let (mut s, mut r) = mem_pair(Duration::from_secs(10));
        r.send(&[0xff; 32]).unwrap();
        r.flush().unwrap();
        assert!(matches!(
            base_receive(&mut s, &[true], &mut Prg::from_seed([1; 16])),
            Err(OtError::Malformed(_))
        ));
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
