//! 128-bit blocks, AES-128 with two backends, the garbling hashes and a PRG.
//!
//! # The hashes
//!
//! Half-gates needs a hash `H(x, t)` of a wire label `x` under a tweak `t`
//! (for AND gate `g`, `t = 2g` and `2g + 1`) that stays pseudorandom when its
//! inputs are correlated by the free-XOR offset `R`. Two are implemented,
//! chosen per session ([`GcHash`]); both parties must run the same one.
//!
//! ## MITCCRH (the default)
//!
//! ```text
//! H_s(x, t) = AES_{k(t)}(x) ^ x,    k(t) = s ^ swap(t)
//! ```
//!
//! where `s` is a 128-bit session seed the garbler draws and sends in the
//! session's header, and `swap` exchanges the two 64-bit halves, so gate
//! tweak `t = j < 2^64` gives `k = s ^ (j << 64)`. This is the hash of Guo,
//! Katz, Wang, Weng and Yu, "Better Concrete Security for Half-Gates Garbling
//! (in the Multi-Instance Setting)" (CRYPTO 2020, ePrint 2019/1168), built as
//! emp-toolkit's `MITCCRH<BatchSize>` builds it (`emp-tool/utils/mitccrh.h`:
//! `keys[i] = start_point ^ makeBlock(gid++, 0)`, the garbler's random
//! `start_point` sent to the evaluator): one key per tweak, each key used on
//! exactly two inputs when garbling (`x` and `x ^ R`) and one when
//! evaluating, and the key schedules of a batch of keys computed together.
//! For the same seed, tweak and label the output equals emp's (a known-answer
//! test pins the derivation).
//!
//! Why it keeps its bound in the multi-instance setting (the paper's MITCCR
//! notion, in the ideal-cipher model): an adversary's offline cipher query
//! `(k, x)` tells it something only if `k` is a key some session used and `x`
//! one of the at most two inputs hashed under that key. Because every key
//! serves at most two inputs, each query hits with probability at most about
//! `2 / 2^128`, however many gates were garbled: the advantage grows with the
//! adversary's work, not with the number of gates `C` across all the sessions
//! it watches. With one fixed key, one query is tested against all `C` inputs
//! hashed under that key at once, so `2^128 / C` work suffices (the paper's
//! attack). The per-session random seed keeps the key sets of different
//! sessions apart (they overlap with probability about `(C_total)^2 / 2^128`),
//! so keys, and the precomputation against them, are not shared across
//! sessions; within a session the tweak, and so the key, never repeats
//! because the gate counter runs on across evaluations and computations.
//! How many keys are expanded together (the "batch": eight with AES-NI, eight
//! gates' sixteen keys in the fused VAES kernels (four gates' eight with AVX2
//! only), sixteen consecutive tweaks for the OT extension and the output check
//! on 512-bit registers, four in the portable cipher) is a matter of speed only:
//! it is not an input of the derivation, so two parties that batch
//! differently still agree (tested).
//!
//! The cost: a key schedule per tweak. With AES-NI it is computed next to
//! the rounds that use it, one round key at a time with AESENCLAST and a byte
//! shuffle (AESKEYGENASSIST takes its round constant as an immediate); the
//! fused VAES kernels expand eight keys at once in word-sliced form (each
//! register holds one word of four keys per lane: no shifts, one AESENCLAST for
//! four keys) and transpose each round's keys back; the portable cipher
//! computes four keys' schedules in one fixsliced schedule, one key per block
//! slot.
//!
//! ## The fixed-key hash
//!
//! ```text
//! H(x, t) = pi(sigma(x) ^ t) ^ sigma(x) ^ t
//! ```
//!
//! where `pi` is AES-128 under a fixed, public key and `sigma(xL || xR) =
//! (xL ^ xR) || xL` is a linear orthomorphism. This is the "MMO with an
//! orthomorphism" hash of Bellare, Hoang, Keelveedhi and Rogaway, "Efficient
//! Garbling from a Fixed-Key Blockcipher" (IEEE S&P 2013, with doubling as
//! the orthomorphism), the one used by Zahur, Rosulek and Evans' half-gates
//! implementation, with the orthomorphism and the correlation-robustness
//! analysis of Guo, Katz, Wang and Yu, "Efficient and Secure Multiparty
//! Computation from Fixed-Key Block Ciphers" (IEEE S&P 2020, sections 3 and
//! 7). One AES call per hash and no key schedule. It is weaker: its security
//! bound degrades with the number of hash queries, across every session an
//! attacker sees (an attacker who sees `q` ciphertexts needs about
//! `2^128 / q` work), which is what MITCCRH fixes. It stays available to
//! measure what the stronger bound costs.
//!
//! The same hash also serves the correlated OT extension (tweaks in a range
//! of their own) and the output check of the session (another range), so a
//! session under MITCCRH hashes nothing under a fixed key.
//!
//! # Backends
//!
//! [`Backend::AesNi`] uses `core::arch` AES-NI with eight blocks in flight,
//! or 256-bit VAES with sixteen, and fused half-gates kernels that run a
//! whole AND run in vector registers (`Hasher::garble_run`; on 512-bit
//! registers, four blocks each, where the CPU has AVX-512F/BW/DQ, in
//! `ni::zmm`), and the same for three-halves (`Hasher::garble_run_3h`,
//! `Hasher::eval_run_3h`, in `ni::threehalves`, their MITCCRH hash on
//! 512-bit registers where the half-gates kernels are);
//! [`Backend::Portable`] is RustCrypto's constant-time fixsliced AES
//! (four blocks per 64-bit word, no table, no secret-dependent branch),
//! vendored in `fixslice` because the `aes` crate selects its software
//! backend only per build. [`Backend::detect`] picks AES-NI when the CPU
//! has it; tests force the portable backend and check that both produce
//! the same bytes.
//!
//! # Modules
//!
//! `block` ([`Block`]), `aes` ([`Aes128`], [`Backend`]), `ni` (AES-NI and
//! VAES kernels), `portable` and `fixslice` (the software cipher), `hasher`
//! ([`Hasher`]), `prg` ([`Prg`], [`os_random`]).

mod aes;
mod block;
mod fixslice;
mod hasher;
#[cfg(target_arch = "x86_64")]
mod ni;
mod portable;
mod prg;

pub use aes::{Aes128, Backend, BackendUnavailable, FIXED_KEY};
pub use block::Block;
pub use hasher::Hasher;
pub use prg::{Prg, RandomnessError, os_random};

use std::fmt;
use std::str::FromStr;

/// Which garbling hash a session uses (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GcHash {
    /// MITCCRH (Guo, Katz, Wang, Weng, Yu, CRYPTO 2020): AES re-keyed per
    /// tweak from a session seed. The default.
    #[default]
    Mitccrh,
    /// Fixed-key AES (`pi(sigma(x) ^ t) ^ sigma(x) ^ t`): faster, with a
    /// bound that degrades with the number of gates across sessions.
    FixedKey,
}

impl GcHash {
    /// Both hashes, the default first.
    pub const ALL: [GcHash; 2] = [GcHash::Mitccrh, GcHash::FixedKey];

    /// The name on the command line and in records: `mitccrh`, `fixed-key`.
    pub fn name(self) -> &'static str {
        match self {
            GcHash::Mitccrh => "mitccrh",
            GcHash::FixedKey => "fixed-key",
        }
    }

    /// The number that names the hash in a session header.
    pub fn id(self) -> u64 {
        match self {
            GcHash::FixedKey => 1,
            GcHash::Mitccrh => 2,
        }
    }

    /// The hash a header's number names, if any.
    pub fn from_id(id: u64) -> Option<GcHash> {
        GcHash::ALL.into_iter().find(|h| h.id() == id)
    }
}

impl fmt::Display for GcHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A hash name that is neither `mitccrh` nor `fixed-key`.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("unknown garbling hash {0:?} (known: mitccrh, fixed-key)")]
pub struct UnknownHash(pub String);

impl FromStr for GcHash {
    type Err = UnknownHash;
    fn from_str(s: &str) -> Result<GcHash, UnknownHash> {
        GcHash::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| UnknownHash(s.to_string()))
    }
}

/// MITCCRH's key for tweak `t` under session seed `seed`: `seed ^ swap(t)`,
/// the 64-bit halves of `t` exchanged, so that a gate tweak `j < 2^64` lands
/// where emp-toolkit puts its gate index (`makeBlock(gid, 0)`). Distinct
/// tweaks give distinct keys.
pub fn mitccrh_key(seed: Block, t: Block) -> Block {
    Block(seed.0 ^ t.0.rotate_left(64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex16(s: &str) -> [u8; 16] {
        core::array::from_fn(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
    }

    fn backends() -> Vec<Backend> {
        [Backend::Portable, Backend::AesNi]
            .into_iter()
            .filter(|b| b.available())
            .collect()
    }

    #[test]
    fn fips197_both_backends() {
        for be in backends() {
            let aes = Aes128::with_backend(hex16("000102030405060708090a0b0c0d0e0f"), be).unwrap();
            let mut v = vec![Block::from_bytes(hex16("00112233445566778899aabbccddeeff")); 11];
            aes.encrypt_blocks(&mut v);
            for b in &v {
                assert_eq!(
                    b.to_bytes(),
                    hex16("69c4e0d86a7b0430d8cdb78070b4c55a"),
                    "{be:?}"
                );
            }
        }
    }

    /// FIPS-197 appendix B and the four ECB-AES128 blocks of NIST SP
    /// 800-38A (F.1.1), at every position of batches of 1 to 19 blocks:
    /// catches a block landing in the wrong lane of a fixsliced group or of
    /// a VAES register, and every remainder length.
    #[test]
    fn known_answers_at_every_position() {
        let key = hex16("2b7e151628aed2a6abf7158809cf4f3c");
        let pairs = [
            (
                "3243f6a8885a308d313198a2e0370734",
                "3925841d02dc09fbdc118597196a0b32",
            ),
            (
                "6bc1bee22e409f96e93d7e117393172a",
                "3ad77bb40d7a3660a89ecaf32466ef97",
            ),
            (
                "ae2d8a571e03ac9c9eb76fac45af8e51",
                "f5d3d58503b9699de785895a96fdbaaf",
            ),
            (
                "30c81c46a35ce411e5fbc1191a0a52ef",
                "43b1cd7f598ece23881b00e3ed030688",
            ),
            (
                "f69f2445df4f9b17ad2b417be66c3710",
                "7b0c785e27e8ad3f8223207104725dd4",
            ),
        ];
        for be in backends() {
            let aes = Aes128::with_backend(key, be).unwrap();
            for n in 1..20 {
                for shift in 0..pairs.len() {
                    let idx = |i: usize| (i + shift) % pairs.len();
                    let mut v: Vec<Block> = (0..n)
                        .map(|i| Block::from_bytes(hex16(pairs[idx(i)].0)))
                        .collect();
                    aes.encrypt_blocks(&mut v);
                    for (i, b) in v.iter().enumerate() {
                        assert_eq!(b.to_bytes(), hex16(pairs[idx(i)].1), "{be:?} n={n} i={i}");
                    }
                }
            }
        }
    }

    /// The hash of every backend (portable, AES-NI, AES-NI without VAES)
    /// over every length from 0 to 40 equals the definition computed one
    /// block at a time with the portable cipher.
    #[test]
    fn hash_backends_agree_at_every_length() {
        let mut hashers = vec![Hasher::with_backend(Backend::Portable).unwrap()];
        if let Ok(h) = Hasher::with_backend(Backend::AesNi) {
            let mut plain = h.clone();
            plain.no_vaes_for_tests();
            hashers.push(h);
            hashers.push(plain);
        }
        let pi = Aes128::with_backend(FIXED_KEY, Backend::Portable).unwrap();
        let mut prg = Prg::from_seed_with([9; 16], Backend::Portable).unwrap();
        for n in 0..=40 {
            let mut xs = vec![Block::ZERO; n];
            let mut ts = vec![Block::ZERO; n];
            prg.fill(&mut xs);
            prg.fill(&mut ts);
            let want: Vec<Block> = xs
                .iter()
                .zip(&ts)
                .map(|(x, t)| {
                    let pre = x.sigma() ^ *t;
                    let mut e = [pre];
                    pi.encrypt_blocks(&mut e);
                    e[0] ^ pre
                })
                .collect();
            for h in &hashers {
                let mut got = xs.clone();
                h.hash(&mut got, &ts);
                assert_eq!(got, want, "{:?} fused={} n={n}", h.backend(), h.fused());
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Random keys and blocks: the fixsliced cipher and AES-NI agree.
        #[test]
        fn portable_aes_equals_aes_ni(key in proptest::prelude::any::<[u8; 16]>(),
                                       blocks in proptest::collection::vec(
                                           proptest::prelude::any::<u128>(), 0..24)) {
            let Ok(ni) = Aes128::with_backend(key, Backend::AesNi) else {
                return Ok(());
            };
            let soft = Aes128::with_backend(key, Backend::Portable).unwrap();
            let mut a: Vec<Block> = blocks.iter().map(|&b| Block(b)).collect();
            let mut b = a.clone();
            ni.encrypt_blocks(&mut a);
            soft.encrypt_blocks(&mut b);
            proptest::prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn backends_agree() {
        let p = Hasher::with_backend(Backend::Portable).unwrap();
        let mut prg = Prg::from_seed_with([7; 16], Backend::Portable).unwrap();
        let mut xs = vec![Block::ZERO; 77];
        let mut ts = vec![Block::ZERO; 77];
        prg.fill(&mut xs);
        prg.fill(&mut ts);
        let mut a = xs.clone();
        p.hash(&mut a, &ts);
        // Reference: the definition, one block at a time.
        for i in 0..xs.len() {
            let pre = xs[i].sigma() ^ ts[i];
            let mut e = [pre];
            Aes128::with_backend(FIXED_KEY, Backend::Portable)
                .unwrap()
                .encrypt_blocks(&mut e);
            assert_eq!(a[i], e[0] ^ pre);
        }
        if Backend::AesNi.available() {
            let n = Hasher::with_backend(Backend::AesNi).unwrap();
            let mut b = xs.clone();
            n.hash(&mut b, &ts);
            assert_eq!(a, b);
            let mut q = Prg::from_seed_with([7; 16], Backend::AesNi).unwrap();
            let mut ys = vec![Block::ZERO; 77];
            q.fill(&mut ys);
            assert_eq!(xs, ys);
        }
    }

    /// The MITCCRH hashers to compare: portable, AES-NI, AES-NI without
    /// VAES (those available here), all under `seed`.
    fn mitccrh_hashers(seed: Block) -> Vec<Hasher> {
        let mut v = vec![Hasher::mitccrh(seed, Backend::Portable).unwrap()];
        if let Ok(h) = Hasher::mitccrh(seed, Backend::AesNi) {
            let mut plain = h.clone();
            plain.no_vaes_for_tests();
            v.push(h);
            v.push(plain);
        }
        v
    }

    /// Fixed vectors computed outside this code (Python's `cryptography`
    /// AES): `H_s(x, j) = AES_{s ^ (j << 64)}(x) ^ x` with `s` the bytes 00..0f
    /// and `x` = 00112233..ff, for gate tweaks 0, 2001 and 2^64 - 1. With
    /// `j = 0` the key is FIPS-197's appendix C.1 key, whose ciphertext of this
    /// `x` is 69c4e0d8..c55a.
    #[test]
    fn mitccrh_known_answers() {
        let seed = Block::from_bytes(hex16("000102030405060708090a0b0c0d0e0f"));
        let x = Block::from_bytes(hex16("00112233445566778899aabbccddeeff"));
        let cases = [
            (
                0u64,
                "000102030405060708090a0b0c0d0e0f",
                "69d5c2eb2e2e624750541d3bbc692ba5",
            ),
            (
                2001,
                "0001020304050607d90e0a0b0c0d0e0f",
                "cf28f655e386e903d955250496e47a55",
            ),
            (
                u64::MAX,
                "0001020304050607f7f6f5f4f3f2f1f0",
                "e8429d2de40e49f81207a5a40937bc1d",
            ),
        ];
        for (j, key, want) in cases {
            let t = Block(u128::from(j));
            assert_eq!(
                mitccrh_key(seed, t).to_bytes(),
                hex16(key),
                "key of tweak {j}"
            );
            for h in mitccrh_hashers(seed) {
                assert_eq!(h.kind(), GcHash::Mitccrh);
                assert_eq!(
                    h.hash_one(x, t).to_bytes(),
                    hex16(want),
                    "{:?} fused={} tweak {j}",
                    h.backend(),
                    h.fused()
                );
            }
        }
    }

    /// The AES-NI key expansion of the MITCCRH kernels (AESENCLAST and a byte
    /// shuffle instead of AESKEYGENASSIST) gives FIPS-197's round keys
    /// (appendix A.1: the last one of 2b7e1516..4f3c is d014f9a8..0ca6) and
    /// the bytewise expansion's for random keys.
    #[test]
    fn key_expansion_matches_fips197() {
        if !Backend::AesNi.available() {
            eprintln!("skipped: no AES-NI on this CPU");
            return;
        }
        let key = hex16("2b7e151628aed2a6abf7158809cf4f3c");
        // SAFETY: AES-NI (with SSE2 and SSSE3) was detected above.
        let rk = unsafe { ni::expand_key_ni(key) };
        assert_eq!(rk[10], hex16("d014f9a8c9ee2589e13f0cc8b6630ca6"));
        assert_eq!(rk, aes::expand_key(key));
        let mut prg = Prg::from_seed([3; 16]);
        for _ in 0..200 {
            let k = prg.block().to_bytes();
            // SAFETY: as above.
            assert_eq!(unsafe { ni::expand_key_ni(k) }, aes::expand_key(k));
        }
    }

    /// The word-sliced key schedule of the fused MITCCRH kernels (eight keys at a time,
    /// their words transposed) gives every key the round keys of the bytewise expansion.
    #[test]
    fn sliced_key_schedule_equals_the_bytewise_expansion() {
        if !Hasher::mitccrh(Block::ZERO, Backend::AesNi).is_ok_and(|h| h.fused()) {
            eprintln!("skipped: no VAES on this CPU");
            return;
        }
        let mut prg = Prg::from_seed([5; 16]);
        for _ in 0..50 {
            let keys: [[u8; 16]; 8] = core::array::from_fn(|_| prg.block().to_bytes());
            // SAFETY: AES-NI, SSSE3, AVX2 and VAES were detected above (`fused`).
            let got = unsafe { ni::expand_keys_sliced(keys) };
            for (k, rk) in keys.iter().zip(got) {
                assert_eq!(rk, aes::expand_key(*k));
            }
        }
    }

    /// MITCCRH of every backend over every length from 0 to 40, with random
    /// and with repeated tweaks (a gate's two inputs share one), equals the
    /// definition computed one block at a time: a portable AES-128 keyed with
    /// `seed ^ swap(t)`. Catches a key or a block in the wrong slot of a
    /// fixsliced group (four keys per schedule) or of the eight in flight.
    #[test]
    fn mitccrh_backends_agree_at_every_length() {
        let mut prg = Prg::from_seed_with([11; 16], Backend::Portable).unwrap();
        let seed = prg.block();
        let hashers = mitccrh_hashers(seed);
        for n in 0..=40 {
            let mut xs = vec![Block::ZERO; n];
            let mut ts = vec![Block::ZERO; n];
            prg.fill(&mut xs);
            prg.fill(&mut ts);
            for (i, t) in ts.iter_mut().enumerate() {
                if i % 3 == 1 {
                    // A gate tweak (< 2^64), shared with the block before.
                    *t = Block(u128::from(i as u64 / 2));
                }
            }
            let want: Vec<Block> = xs
                .iter()
                .zip(&ts)
                .map(|(x, t)| {
                    let k = mitccrh_key(seed, *t).to_bytes();
                    let mut e = [*x];
                    Aes128::with_backend(k, Backend::Portable)
                        .unwrap()
                        .encrypt_blocks(&mut e);
                    e[0] ^ *x
                })
                .collect();
            for h in &hashers {
                let mut got = xs.clone();
                h.hash(&mut got, &ts);
                assert_eq!(got, want, "{:?} fused={} n={n}", h.backend(), h.fused());
            }
        }
    }

    /// A different seed, or the other hash, gives other outputs: the seed is
    /// an input of every key.
    #[test]
    fn mitccrh_depends_on_the_seed() {
        let x = Block(0x1234);
        let t = Block(7);
        let a = Hasher::mitccrh(Block(1), Backend::Portable).unwrap();
        let b = Hasher::mitccrh(Block(2), Backend::Portable).unwrap();
        let f = Hasher::with_backend(Backend::Portable).unwrap();
        assert_ne!(a.hash_one(x, t), b.hash_one(x, t));
        assert_ne!(a.hash_one(x, t), f.hash_one(x, t));
        assert_eq!(f.kind(), GcHash::FixedKey);
    }

    #[test]
    fn hash_names_and_ids_round_trip() {
        for h in GcHash::ALL {
            assert_eq!(h.name().parse::<GcHash>(), Ok(h));
            assert_eq!(GcHash::from_id(h.id()), Some(h));
        }
        assert_eq!(GcHash::default(), GcHash::Mitccrh);
        assert!("fixed".parse::<GcHash>().is_err());
        assert_eq!(GcHash::from_id(0), None);
        assert_eq!(GcHash::from_id(3), None);
    }

    /// A hasher of each hash on each backend this CPU has, with a seed from `prg`.
    fn every_hasher(prg: &mut Prg) -> Vec<(GcHash, Backend, Hasher)> {
        GcHash::ALL
            .into_iter()
            .flat_map(|k| [Backend::Portable, Backend::AesNi].map(|b| (k, b)))
            .filter_map(|(k, b)| Some((k, b, Hasher::of(k, prg.block(), b).ok()?)))
            .collect()
    }

    /// `hash_pairs` is `hash` with each tweak used twice, on every backend and hash, for
    /// every count of pairs (the AES-NI kernel's groups of four and their remainders).
    #[test]
    fn hash_pairs_is_hash_with_each_tweak_twice() {
        let mut prg = Prg::from_seed([0x42; 16]);
        for (kind, be, h) in every_hasher(&mut prg) {
            for n in 0..13 {
                let mut xs = vec![Block::ZERO; 2 * n];
                prg.fill(&mut xs);
                let tw: Vec<Block> = (0..n).map(|_| prg.block()).collect();
                let twice: Vec<Block> = tw.iter().flat_map(|&t| [t, t]).collect();
                let mut want = xs.clone();
                h.hash(&mut want, &twice);
                h.hash_pairs(&mut xs, &tw);
                assert!(xs == want, "{kind:?} {be:?} {n} pairs");
            }
        }
    }

    /// `hash_consecutive` and `hash_consecutive_with_offset` are `hash` under the tweaks
    /// `t0 + i`, on every backend and hash: lengths around the 512-bit kernel's groups of
    /// 16, the OT extension's tweak range, random tweaks, and runs whose low halves reach
    /// 2^64 (which leave the 512-bit kernel).
    #[test]
    fn consecutive_tweaks_hash_as_the_explicit_ones() {
        let mut prg = Prg::from_seed([0x24; 16]);
        for (kind, be, h) in every_hasher(&mut prg) {
            for n in [0, 1, 15, 16, 17, 33, 64, 100] {
                let starts = [
                    Block((1 << 127) | 5),
                    prg.block(),
                    Block(u128::from(u64::MAX - 40)),
                    Block(u128::from(u64::MAX) - n as u128),
                ];
                for t0 in starts {
                    let mut xs = vec![Block::ZERO; n];
                    prg.fill(&mut xs);
                    let off = prg.block();
                    let tw: Vec<Block> = (0..n)
                        .map(|i| Block(t0.0.wrapping_add(i as u128)))
                        .collect();
                    let mut want = xs.clone();
                    h.hash(&mut want, &tw);
                    let mut want_y: Vec<Block> = xs.iter().map(|&x| x ^ off).collect();
                    h.hash(&mut want_y, &tw);
                    let mut got = xs.clone();
                    h.hash_consecutive(&mut got, t0);
                    assert!(got == want, "{kind:?} {be:?} n {n} t0 {t0:?}");
                    let mut got = xs.clone();
                    let mut ys = vec![Block::ZERO; n + 1];
                    h.hash_consecutive_with_offset(&mut got, off, &mut ys, t0);
                    assert!(got == want, "{kind:?} {be:?} n {n} t0 {t0:?}, with offset");
                    assert!(
                        ys[..n] == want_y[..],
                        "{kind:?} {be:?} n {n} t0 {t0:?}, offset"
                    );
                    assert_eq!(ys[n], Block::ZERO, "wrote past xs.len()");
                }
            }
        }
    }

    #[test]
    fn sigma_is_the_orthomorphism() {
        let x = Block((0x1111u128 << 64) | 0x2222);
        assert_eq!(x.sigma(), Block(((0x1111u128 ^ 0x2222) << 64) | 0x1111));
    }

    #[test]
    fn prg_is_a_stream() {
        let mut a = Prg::from_seed([1; 16]);
        let mut b = Prg::from_seed([1; 16]);
        let x: Vec<Block> = (0..20).map(|_| a.block()).collect();
        let mut y = vec![Block::ZERO; 3];
        b.fill(&mut y);
        let mut z = vec![Block::ZERO; 17];
        b.fill(&mut z);
        y.extend(z);
        // `fill` after `block` continues the same stream only when aligned;
        // here both start fresh, so the streams match.
        assert_eq!(x, y);
    }
}
