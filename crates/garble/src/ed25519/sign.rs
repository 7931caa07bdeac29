//! RFC 8032 Ed25519 signing as one generated circuit, on a key XOR-shared
//! between the garbler and the evaluator, and a plain reference.
//!
//! Inputs: the garbler's 64-byte share of the key `seed || A` (the common
//! layout: 32-byte seed, then the encoded public key) followed by the
//! message (a fixed length per circuit); the evaluator's 64-byte share. The
//! [`Variant::Reveal`] circuit takes one more input from each party: its
//! 32-byte blinding share ([`super::reveal::blinding_share`]), after the rest.
//! Outputs (to both parties): the 64-byte signature `enc(R) || S`, then the
//! 32-byte public key `A` (public by definition; with it each party checks
//! the signature it receives).
//!
//! ```text
//! h = SHA-512(seed)           a = clamp(h[0..32])      prefix = h[32..64]
//! r = SHA-512(prefix || M) mod L                       R = r B
//! k = SHA-512(enc(R) || A || M) mod L                  S = (r + k a) mod L
//! ```
//!
//! Two circuits compute it. [`Variant::OnePass`] computes `enc(R)` inside the
//! circuit (a field inversion, 8.9 M AND gates). [`Variant::Reveal`] reveals
//! `R` blinded in projective form, `(λX : λY : λZ)`, encodes it in the clear
//! and continues with `enc(R)` as public wires ([`super::reveal`]): about
//! half the AND gates, one round trip more.

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest, Sha512};

use super::reveal::{self, SHARE_BYTES};
use super::{field, point, scalar, sha512};
use crate::generator::{Gen, Generator, W, Word};

/// Key bytes (`seed || A`), per share.
pub const KEY_BYTES: usize = 64;

/// Output bytes: signature (64) and public key (32).
pub const OUTPUT_BYTES: usize = 96;

/// How the circuit gets `enc(R)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Inside the circuit: a field inversion and the encoding (`ed25519-sign`).
    OnePass,
    /// `R` revealed blinded, `(λX : λY : λZ)`, and encoded in the clear
    /// (`ed25519-sign-reveal`): each party adds a blinding share to its input.
    Reveal,
}

impl Variant {
    /// The circuit's name on the command line: `ed25519-sign` or `ed25519-sign-reveal`.
    pub fn circuit_name(self) -> &'static str {
        match self {
            Variant::OnePass => "ed25519-sign",
            Variant::Reveal => "ed25519-sign-reveal",
        }
    }

    /// Blinding-share bytes each party adds to its input (0 or [`SHARE_BYTES`]).
    pub fn share_bytes(self) -> usize {
        match self {
            Variant::OnePass => 0,
            Variant::Reveal => SHARE_BYTES,
        }
    }
}

/// The signing circuit for messages of exactly `msg_len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ed25519Sign {
    /// Message length in bytes.
    pub msg_len: usize,
    /// How `enc(R)` is computed.
    pub variant: Variant,
}

impl Ed25519Sign {
    /// The circuit of the published run: a 64-byte message, all in one pass.
    pub const PUBLISHED: Ed25519Sign = Ed25519Sign {
        msg_len: 64,
        variant: Variant::OnePass,
    };

    /// A 64-byte message, `R` revealed blinded.
    pub const REVEAL: Ed25519Sign = Ed25519Sign {
        msg_len: 64,
        variant: Variant::Reveal,
    };

    /// Computes what every signature of this process shares and no input changes: the
    /// fixed-base tables ([`point::tables`]) and the compiled field sub-circuits
    /// ([`field::mul_sub`], [`field::square_sub`]). A party that signs repeatedly pays this
    /// once, as a plain signer precomputes its base-point tables; the first call takes about
    /// a tenth of a second, later ones nothing. Generating the circuit does it on first
    /// use, so calling this is only a way to pay it before a session's clock starts.
    pub fn prepare() {
        point::tables();
        field::mul_sub();
        field::square_sub();
    }
}

/// `(a, r)`: the clamped secret scalar and the nonce `r = SHA-512(prefix || M) mod L`.
fn scalars<G: Gen>(g: &mut G, seed: &[W<G::L>], msg: &[W<G::L>]) -> (Word<G::L>, Word<G::L>) {
    let h = sha512::sha512(g, seed);
    // clamp: clear bits 0, 1, 2 and 255, set 254.
    let mut a: Word<G::L> = h[..255].to_vec();
    a[0] = W::ZERO;
    a[1] = W::ZERO;
    a[2] = W::ZERO;
    a[254] = W::ONE;
    let prefix = &h[256..512];
    let rh = sha512::sha512(g, &[prefix, msg].concat());
    let r = scalar::reduce512(g, &rh);
    (a, r)
}

/// The signature circuit's body: `enc(R) || S || A` from the key bits and
/// the message bits, `enc(R)` computed in the circuit.
pub fn sign<G: Gen>(g: &mut G, key: &[W<G::L>], msg: &[W<G::L>]) -> Word<G::L> {
    let (seed, pk) = key.split_at(256);
    let (a, r) = scalars(g, seed, msg);
    let big_r = point::mul_base(g, &r);
    let enc_r = point::encode(g, &big_r);
    finish(g, enc_r, pk, msg, &r, &a)
}

/// [`sign`] with `R` revealed blinded by `λ = λ_g λ_e` (the parties' shares) and
/// encoded in the clear ([`super::reveal`]); `enc(R)` continues as public wires.
pub fn sign_reveal<G: Gen>(
    g: &mut G,
    key: &[W<G::L>],
    msg: &[W<G::L>],
    lam_g: &[W<G::L>],
    lam_e: &[W<G::L>],
) -> Word<G::L> {
    let (seed, pk) = key.split_at(256);
    let (a, r) = scalars(g, seed, msg);
    let big_r = point::mul_base(g, &r);
    let blinded = reveal::blind(g, &big_r, lam_g, lam_e);
    let enc_r = reveal::reveal_encoding(g, &blinded);
    finish(g, enc_r, pk, msg, &r, &a)
}

/// `enc(R) || S || A` with `k = SHA-512(enc(R) || A || M) mod L`, `S = r + k a`.
fn finish<G: Gen>(
    g: &mut G,
    enc_r: Word<G::L>,
    pk: &[W<G::L>],
    msg: &[W<G::L>],
    r: &[W<G::L>],
    a: &[W<G::L>],
) -> Word<G::L> {
    let kh = sha512::sha512(g, &[&enc_r[..], pk, msg].concat());
    let k = scalar::reduce512(g, &kh);
    let mut s = scalar::mul_add(g, r, &k, a);
    s.resize(256, W::ZERO);
    let mut out = enc_r;
    out.extend(s);
    out.extend_from_slice(pk);
    out
}

impl Generator for Ed25519Sign {
    fn name(&self) -> String {
        format!("{}/msg{}", self.variant.circuit_name(), self.msg_len)
    }
    fn garbler_input_bits(&self) -> usize {
        8 * (KEY_BYTES + self.msg_len + self.variant.share_bytes())
    }
    fn evaluator_input_bits(&self) -> usize {
        8 * (KEY_BYTES + self.variant.share_bytes())
    }
    fn output_bits(&self) -> usize {
        8 * OUTPUT_BYTES
    }
    fn generate<G: Gen>(
        &self,
        g: &mut G,
        garbler: &[W<G::L>],
        evaluator: &[W<G::L>],
    ) -> Word<G::L> {
        let key = g.xor_w(&garbler[..8 * KEY_BYTES], &evaluator[..8 * KEY_BYTES]);
        let msg = &garbler[8 * KEY_BYTES..8 * (KEY_BYTES + self.msg_len)];
        match self.variant {
            Variant::OnePass => sign(g, &key, msg),
            Variant::Reveal => {
                let lam_g = &garbler[8 * (KEY_BYTES + self.msg_len)..];
                let lam_e = &evaluator[8 * KEY_BYTES..];
                sign_reveal(g, &key, msg, lam_g, lam_e)
            }
        }
    }
}

/// Plain RFC 8032 signing with curve25519-dalek and sha2 (the reference the
/// circuit is checked against): the signature of `msg` under the key
/// `seed || A` (`A` is used as given, as in the circuit).
pub fn reference_sign(key: &[u8; 64], msg: &[u8]) -> [u8; 64] {
    let h = Sha512::digest(&key[..32]);
    let mut a = [0u8; 32];
    a.copy_from_slice(&h[..32]);
    a[0] &= 248;
    a[31] &= 127;
    a[31] |= 64;
    let r = Scalar::from_bytes_mod_order_wide(
        &Sha512::new()
            .chain_update(&h[32..])
            .chain_update(msg)
            .finalize()
            .into(),
    );
    let big_r = EdwardsPoint::mul_base(&r).compress();
    let k = Scalar::from_bytes_mod_order_wide(
        &Sha512::new()
            .chain_update(big_r.as_bytes())
            .chain_update(&key[32..])
            .chain_update(msg)
            .finalize()
            .into(),
    );
    let s = r + k * Scalar::from_bytes_mod_order(a);
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(big_r.as_bytes());
    sig[32..].copy_from_slice(s.as_bytes());
    sig
}

/// The public key `A = a B` of a seed.
pub fn public_key(seed: &[u8; 32]) -> [u8; 32] {
    let h = Sha512::digest(seed);
    let mut a = [0u8; 32];
    a.copy_from_slice(&h[..32]);
    EdwardsPoint::mul_base_clamped(a).compress().0
}

/// RFC 8032 verification (cofactorless, canonical `S`): whether `sig` is a
/// valid signature of `msg` under the encoded public key `pk`.
pub fn verify(pk: &[u8; 32], msg: &[u8], sig: &[u8; 64]) -> bool {
    let Some(a) = CompressedEdwardsY(*pk).decompress() else {
        return false;
    };
    let mut rb = [0u8; 32];
    rb.copy_from_slice(&sig[..32]);
    let mut sb = [0u8; 32];
    sb.copy_from_slice(&sig[32..]);
    let Some(s) = Option::<Scalar>::from(Scalar::from_canonical_bytes(sb)) else {
        return false;
    };
    let k = Scalar::from_bytes_mod_order_wide(
        &Sha512::new()
            .chain_update(rb)
            .chain_update(pk)
            .chain_update(msg)
            .finalize()
            .into(),
    );
    // R' = S B - k A must encode to R.
    let r = EdwardsPoint::vartime_double_scalar_mul_basepoint(&(-k), &a, &s);
    r.compress().0 == rb
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{bits_from_bytes, bytes_from_bits};
    use crate::generator::Counter;
    use crate::scheme::Scheme;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 8032, section 7.1, tests 1-3: (secret, public, message, signature).
    const RFC8032: [(&str, &str, &str, &str); 3] = [
        (
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
        ),
        (
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
            "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
        ),
        (
            "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
            "af82",
            "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
        ),
    ];

    fn key_of(seed: &str, pk: &str) -> [u8; 64] {
        let mut k = [0u8; 64];
        k[..32].copy_from_slice(&unhex(seed));
        k[32..].copy_from_slice(&unhex(pk));
        k
    }

    #[test]
    fn reference_matches_rfc8032() {
        for (seed, pk, msg, sig) in RFC8032 {
            let key = key_of(seed, pk);
            let mut s = [0u8; 32];
            s.copy_from_slice(&key[..32]);
            assert_eq!(public_key(&s).to_vec(), unhex(pk));
            let got = reference_sign(&key, &unhex(msg));
            assert_eq!(got.to_vec(), unhex(sig));
            let mut p = [0u8; 32];
            p.copy_from_slice(&key[32..]);
            assert!(verify(&p, &unhex(msg), &got));
            let mut bad = got;
            bad[5] ^= 1;
            assert!(!verify(&p, &unhex(msg), &bad));
        }
    }

    fn xorshift(state: &mut u64, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                *state as u8
            })
            .collect()
    }

    /// The parties' input bits for `key` (shared with `mask`) and `msg`: blinding shares
    /// appended for the reveal circuit.
    fn party_inputs(
        c: &Ed25519Sign,
        key: &[u8; 64],
        mask: &[u8],
        msg: &[u8],
        shares: Option<([u8; 32], [u8; 32])>,
    ) -> (Vec<bool>, Vec<bool>) {
        let mut gin: Vec<u8> = key.iter().zip(mask).map(|(k, m)| k ^ m).collect();
        gin.extend_from_slice(msg);
        let mut ein = mask.to_vec();
        if c.variant == Variant::Reveal {
            let (lg, le) = match shares {
                Some(s) => s,
                None => (
                    reveal::blinding_share().unwrap(),
                    reveal::blinding_share().unwrap(),
                ),
            };
            gin.extend_from_slice(&lg);
            ein.extend_from_slice(&le);
        }
        (
            bits_from_bytes(&gin, c.garbler_input_bits()),
            bits_from_bytes(&ein, c.evaluator_input_bits()),
        )
    }

    /// Both circuits, evaluated in plain on XOR-shared keys, give RFC 8032's
    /// signatures.
    #[test]
    fn circuit_signs_rfc8032_vectors_on_shared_keys() {
        let mut state = 0x243f_6a88_85a3_08d3u64;
        for variant in [Variant::OnePass, Variant::Reveal] {
            for (seed, pk, msg, sig) in RFC8032 {
                let key = key_of(seed, pk);
                let msg = unhex(msg);
                let mask = xorshift(&mut state, 64);
                let c = Ed25519Sign {
                    msg_len: msg.len(),
                    variant,
                };
                let (g, e) = party_inputs(&c, &key, &mask, &msg, None);
                let out = bytes_from_bits(&crate::generator::try_eval_plain(&c, &g, &e).unwrap());
                assert_eq!(out[..64].to_vec(), unhex(sig), "{variant:?}");
                assert_eq!(out[64..].to_vec(), key[32..].to_vec());
            }
        }
    }

    type Party = Result<crate::session::SessionOutput, crate::session::SessionError>;

    /// Both parties of a session over memory (OT included), each with its own output.
    fn two_party(c: &Ed25519Sign, g: &[bool], e: &[bool]) -> (Party, Party) {
        two_party_with(c, g, e, Scheme::HalfGates)
    }

    /// [`two_party`] garbled with `scheme`.
    fn two_party_with(c: &Ed25519Sign, g: &[bool], e: &[bool], scheme: Scheme) -> (Party, Party) {
        use crate::channel::mem_pair;
        use crate::session::SessionOptions;
        use crate::stream::{run_evaluator, run_garbler};
        let (mut x, mut y) = mem_pair(std::time::Duration::from_secs(60));
        let opts = SessionOptions {
            scheme,
            ..SessionOptions::default()
        };
        std::thread::scope(|s| {
            let ev = s.spawn(|| run_evaluator(&mut y, c, e, &opts));
            let gr = run_garbler(&mut x, c, g, &opts);
            (gr, ev.join().unwrap())
        })
    }

    /// The whole signature garbled and evaluated by two parties over an
    /// in-memory channel (OT included), on RFC 8032's third vector.
    #[test]
    fn two_party_signature_matches_rfc8032() {
        let (seed, pk, msg, sig) = RFC8032[2];
        let key = key_of(seed, pk);
        let msg = unhex(msg);
        let mask: Vec<u8> = (0..64u8)
            .map(|i| i.wrapping_mul(151).wrapping_add(7))
            .collect();
        let c = Ed25519Sign {
            msg_len: msg.len(),
            variant: Variant::OnePass,
        };
        let (gbits, ebits) = party_inputs(&c, &key, &mask, &msg, None);
        let (g, e) = two_party(&c, &gbits, &ebits);
        let (g, e) = (g.unwrap(), e.unwrap());
        for out in [&g.outputs[0], &e.outputs[0]] {
            let b = bytes_from_bits(out);
            assert_eq!(b[..64].to_vec(), unhex(sig));
        }
    }

    /// The reveal circuit in two parties, on random keys and messages: both parties'
    /// signatures equal the plain one and verify, and every byte on the wire (32 per AND
    /// gate counted, the reveal's 96 each way) is predicted exactly, so the garbled AND
    /// count is the counted one.
    #[test]
    fn two_party_reveal_signature_equals_the_reference_on_random_keys() {
        let mut state = 0x1357_9bdf_2468_ace0u64;
        for len in [0usize, 64] {
            let mut seed = [0u8; 32];
            crate::hash::os_random(&mut seed).unwrap();
            let mut key = [0u8; 64];
            key[..32].copy_from_slice(&seed);
            key[32..].copy_from_slice(&public_key(&seed));
            let msg = xorshift(&mut state, len);
            let mask = xorshift(&mut state, 64);
            let c = Ed25519Sign {
                msg_len: len,
                variant: Variant::Reveal,
            };
            let (gbits, ebits) = party_inputs(&c, &key, &mask, &msg, None);
            let (g, e) = two_party(&c, &gbits, &ebits);
            let (g, e) = (g.unwrap(), e.unwrap());
            let want = reference_sign(&key, &msg);
            for out in [&g.outputs[0], &e.outputs[0]] {
                let b = bytes_from_bits(out);
                assert_eq!(b[..64], want[..]);
                let sig: [u8; 64] = b[..64].try_into().unwrap();
                assert!(verify(&public_key(&seed), &msg, &sig));
            }
            let st = crate::generator::stats(&c);
            assert_eq!(st.reveals, vec![(st.reveals[0].0, reveal::REVEALED_BITS)]);
            let want = crate::stream::expected_wire_bytes(&c, &st, Scheme::HalfGates);
            assert_eq!((g.report.wire_bytes_sent, e.report.wire_bytes_sent), want);
            assert_eq!(
                (g.report.wire_bytes_sent, g.report.wire_bytes_received),
                want
            );
        }
    }

    /// The reveal circuit garbled with three-halves (its field sub-circuits in the fused
    /// per-run kernels, the other gates one at a time): both parties' signatures equal the
    /// reference, and the wire carries exactly 25 bytes per AND gate counted besides the
    /// rest of the protocol.
    #[test]
    fn two_party_reveal_signature_with_three_halves_equals_the_reference() {
        let (seed, pk, _, _) = RFC8032[2];
        let key = key_of(seed, pk);
        let mut state = 0x2468_ace0_1357_9bdfu64;
        let msg = xorshift(&mut state, 64);
        let mask = xorshift(&mut state, 64);
        let c = Ed25519Sign {
            msg_len: msg.len(),
            variant: Variant::Reveal,
        };
        let (gbits, ebits) = party_inputs(&c, &key, &mask, &msg, None);
        let (g, e) = two_party_with(&c, &gbits, &ebits, Scheme::ThreeHalves);
        let (g, e) = (g.unwrap(), e.unwrap());
        let want = reference_sign(&key, &msg);
        for out in [&g.outputs[0], &e.outputs[0]] {
            assert_eq!(bytes_from_bits(out)[..64], want[..]);
        }
        let st = crate::generator::stats(&c);
        let predicted = crate::stream::expected_wire_bytes(&c, &st, Scheme::ThreeHalves);
        assert_eq!(g.report.table_bytes, 25 * st.stats.and_gates());
        assert_eq!(
            (g.report.wire_bytes_sent, g.report.wire_bytes_received),
            predicted
        );
        assert_eq!(e.report.wire_bytes_sent, predicted.1);
    }

    /// A blinding share of 0 (or p) makes the revealed Z zero: both parties stop with a
    /// typed error at the reveal, in plain evaluation and in two parties, and no
    /// signature comes out.
    #[test]
    fn a_zero_blinding_share_is_a_typed_error_not_a_signature() {
        let (seed, pk, msg, _) = RFC8032[1];
        let key = key_of(seed, pk);
        let msg = unhex(msg);
        let mask = [0x3cu8; 64];
        let c = Ed25519Sign {
            msg_len: msg.len(),
            variant: Variant::Reveal,
        };
        let ok = reveal::blinding_share().unwrap();
        for shares in [([0u8; 32], ok), (ok, [0u8; 32])] {
            let (gbits, ebits) = party_inputs(&c, &key, &mask, &msg, Some(shares));
            assert_eq!(
                crate::generator::try_eval_plain(&c, &gbits, &ebits),
                Err(reveal::ZERO_Z)
            );
            let (g, e) = two_party(&c, &gbits, &ebits);
            for r in [g, e] {
                assert!(
                    matches!(
                        r,
                        Err(crate::session::SessionError::Refused(w)) if w == reveal::ZERO_Z
                    ),
                    "{:?}",
                    r.map(|o| o.outputs)
                );
            }
        }
    }

    #[test]
    fn and_count_is_within_target() {
        let s = crate::generator::stats(&Ed25519Sign::PUBLISHED);
        eprintln!("ed25519-sign/msg64: {:?}", s.stats);
        assert!(s.stats.and_gates() <= 40_000_000);
        // The reveal circuit: at most 8.5 M AND (issue 24), one reveal of 768 bits.
        let r = crate::generator::stats(&Ed25519Sign::REVEAL);
        eprintln!("ed25519-sign-reveal/msg64: {:?} {:?}", r.stats, r.reveals);
        assert!(r.stats.and_gates() <= 8_500_000);
        assert_eq!(r.reveals.len(), 1);
        assert!(s.reveals.is_empty());
        assert_ne!(r.digest, s.digest);
        // No flat or Bristol form for a circuit that reveals.
        assert!(crate::generator::write_bristol(&Ed25519Sign::REVEAL, std::io::sink()).is_err());
        let _ = Counter::new();
    }
}

#[cfg(test)]
mod timing {
    //! Not a benchmark (numbers come from `ccbench run ed25519-2pc`): a
    //! by-hand breakdown, `cargo test -p garble --release -- --ignored timing`.
    use super::*;
    use std::time::Instant;

    #[test]
    #[ignore]
    fn timing_breakdown() {
        let t = Instant::now();
        let _ = point::tables();
        eprintln!("tables {:?}", t.elapsed());
        let c = Ed25519Sign::PUBLISHED;
        let t = Instant::now();
        let s = crate::generator::stats(&c);
        eprintln!("stats {:?} {}", t.elapsed(), s.stats.and_gates());
        let g = vec![false; c.garbler_input_bits()];
        let e = vec![true; c.evaluator_input_bits()];
        let t = Instant::now();
        let _ = crate::generator::eval_plain(&c, &g, &e);
        eprintln!("plain {:?}", t.elapsed());
        let h = crate::hash::Hasher::new();
        let mut prg = crate::hash::Prg::from_seed([1; 16]);
        let t = Instant::now();
        // Tables are written into a lent buffer, as a session's channel takes them, and
        // dropped. (Until 2026-11-26 they went to a memory channel that copied them into a
        // growing vector for a thread that drained them 32 bytes at a time: that harness
        // took a third of the samples and added reallocations to the garbler's.)
        let mut tx = Discard::default();
        let mut gg = crate::stream::StreamGarbler::new(&h, crate::hash::Block(3), 0, &mut tx);
        let gi: Vec<_> = (0..c.garbler_input_bits())
            .map(|_| W::V(prg.block()))
            .collect();
        let ei: Vec<_> = (0..c.evaluator_input_bits())
            .map(|_| W::V(prg.block()))
            .collect();
        let _ = c.generate(&mut gg, &gi, &ei);
        let _ = gg.finish();
        eprintln!("garble alone {:?} ({} bytes)", t.elapsed(), tx.sent);
    }

    /// A channel that takes what is sent, in place where asked, and keeps only the count.
    #[derive(Default)]
    struct Discard {
        buf: Vec<u8>,
        sent: u64,
    }

    impl crate::channel::Channel for Discard {
        fn send(&mut self, data: &[u8]) -> Result<(), crate::channel::ChannelError> {
            self.sent += data.len() as u64;
            Ok(())
        }
        fn recv(&mut self, _: &mut [u8]) -> Result<(), crate::channel::ChannelError> {
            Err(crate::channel::ChannelError::Closed)
        }
        fn flush(&mut self) -> Result<(), crate::channel::ChannelError> {
            Ok(())
        }
        fn bytes_sent(&self) -> u64 {
            self.sent
        }
        fn bytes_received(&self) -> u64 {
            0
        }
        fn send_in_place(
            &mut self,
            n: usize,
            fill: &mut dyn FnMut(&mut [u8]),
        ) -> Result<(), crate::channel::ChannelError> {
            if self.buf.len() < n {
                self.buf.resize(n, 0);
            }
            fill(&mut self.buf[..n]);
            self.sent += n as u64;
            Ok(())
        }
    }
}

#[cfg(test)]
mod counts {
    //! AND gates per block of the signature, as garbled: pinned, and printed for the docs
    //! with `cargo test -p garble --lib -- block_counts --nocapture`.
    use super::*;
    use crate::ed25519::field;
    use crate::generator::Counter;

    fn ands(k: &mut Counter, f: impl FnOnce(&mut Counter)) -> u64 {
        let before = k.and;
        f(k);
        k.and - before
    }

    #[test]
    fn block_counts() {
        let mut k = Counter::new();
        let x = k.inputs(1024);
        let st: sha512::State<_> = core::array::from_fn(|_| k.inputs(64));
        let sha_block = ands(&mut k, |k| {
            let _ = sha512::compress(k, &st, &x);
        });
        let sha_first = ands(&mut k, |k| {
            let _ = sha512::compress(k, &sha512::iv(), &x);
        });
        let a = k.inputs(256);
        let b = k.inputs(256);
        let fmul = ands(&mut k, |k| {
            let _ = field::mul(k, &a, &b);
        });
        let fsq = ands(&mut k, |k| {
            let _ = field::square(k, &a);
        });
        let finv = ands(&mut k, |k| {
            let _ = field::invert(k, &a);
        });
        let w = k.inputs(512);
        let red = ands(&mut k, |k| {
            let _ = scalar::reduce512(k, &w);
        });
        let r = k.inputs(253);
        let kk = k.inputs(253);
        let aa = k.inputs(255);
        let muladd = ands(&mut k, |k| {
            let _ = scalar::mul_add(k, &r, &kk, &aa);
        });
        let mut p = None;
        let mb = ands(&mut k, |k| {
            p = Some(point::mul_base(k, &r));
        });
        let enc = ands(&mut k, |k| {
            if let Some(p) = &p {
                let _ = point::encode(k, p);
            }
        });
        let q: [Vec<_>; 3] = core::array::from_fn(|_| k.inputs(256));
        let pt = point::Point {
            x: k.inputs(256),
            y: k.inputs(256),
            z: k.inputs(256),
            t: k.inputs(256),
        };
        let madd = ands(&mut k, |k| {
            let _ = point::madd(k, &pt, &q, true);
        });
        let total = crate::generator::stats(&Ed25519Sign::PUBLISHED)
            .stats
            .and_gates();
        let lam: [Vec<_>; 2] = core::array::from_fn(|_| k.inputs(256));
        let blind = ands(&mut k, |k| {
            if let Some(p) = &p {
                let _ = reveal::blind(k, p, &lam[0], &lam[1]);
            }
        });
        let rs = crate::generator::stats(&Ed25519Sign::REVEAL);
        let reveal_total = rs.stats.and_gates();
        eprintln!(
            "blinding {blind}, reveal circuit total {reveal_total}, reveals {:?}",
            rs.reveals
        );
        assert_eq!(
            (blind, reveal_total, rs.reveals.clone()),
            (223_462, 8_111_480, vec![(7_891_859, 768)])
        );
        eprintln!(
            "sha512 block {sha_block}, first block (IV) {sha_first}, field mul {fmul}, square {fsq}, invert {finv}, reduce512 {red}, mul_add {muladd}, madd {madd}, mul_base {mb}, encode {enc}, total {total}"
        );
        // Pinned: the table of docs/ed25519-2pc.md lists these; a change to a block
        // changes both.
        assert_eq!(
            [
                sha_block, sha_first, fmul, fsq, finv, red, muladd, madd, mb, enc, total
            ],
            [
                57_947, 57_412, 55_099, 32_602, 8_886_997, 31_887, 85_788, 390_790, 7_525_073,
                8_999_239, 16_887_257
            ]
        );
    }
}
