//! The circuit library: AES-128, the SHA-256 compression function and
//! unsigned multiplication, built with the [`Builder`].
//!
//! Byte conventions (all values are byte strings, bit `i` of a value is bit
//! `i % 8` of byte `i / 8`, see [`crate::circuit`]):
//!
//! * [`aes128`]: garbler input = the 16-byte key, evaluator input = the
//!   16-byte plaintext, output = the 16-byte ciphertext, all in FIPS-197 byte
//!   order. 6,400 AND gates: 200 S-boxes (160 in the rounds, 40 in the key
//!   schedule) of Boyar-Peralta's 32-AND circuit.
//! * [`sha256_compress`]: garbler input = one 64-byte message block (already
//!   padded), evaluator input = the 32-byte chaining value as a digest is
//!   written (eight big-endian words), output = the new chaining value in the
//!   same form. For a one-block message with the standard IV the output is
//!   the SHA-256 digest. Additions are ripple-carry with one AND per bit and
//!   no top carry; the round constants are folded, so adding `K[t]` is free
//!   up to its lowest set bit.
//! * [`mul`]: garbler input `a`, evaluator input `b` (n-bit little-endian
//!   integers), output the full `2n`-bit product. [`mul1024`] is the
//!   1024-bit instance. markkurossi/mpc's 1024-bit multiplication
//!   (480,149 AND) multiplies two `uint1024`s; we produce the full 2048-bit
//!   product, which contains the 1024-bit truncated product as its low half,
//!   so our AND count is an upper bound for either reading of theirs:
//!   473,064 AND (Karatsuba down to 11-16-bit operands, schoolbook below;
//!   the count is flat for thresholds 11..=16 and grows outside).

use crate::builder::{Bit, Builder};
use crate::circuit::{Circuit, Party};
use crate::sbox::sbox;

/// Names accepted by [`by_name`].
pub const NAMES: [&str; 3] = ["aes128", "sha256", "mul1024"];

/// A library circuit by name: `aes128`, `sha256` (compression function) or
/// `mul1024`; `mulN` for any other width `N` in `1..=4096`.
pub fn by_name(name: &str) -> Option<Circuit> {
    match name {
        "aes128" | "aes-128" | "aes_128" => Some(aes128()),
        "sha256" | "sha-256" | "sha256-compress" => Some(sha256_compress()),
        _ => {
            let n: usize = name.strip_prefix("mul")?.parse().ok()?;
            (1..=4096).contains(&n).then(|| mul(n))
        }
    }
}

type Byte = [Bit; 8];

fn sub_byte(b: &mut Builder, x: Byte) -> Byte {
    // The S-box circuit takes the most significant bit first.
    let u: [Bit; 8] = core::array::from_fn(|i| x[7 - i]);
    let s = sbox(b, u);
    core::array::from_fn(|i| s[7 - i])
}

fn xor_byte(b: &mut Builder, x: Byte, y: Byte) -> Byte {
    core::array::from_fn(|i| b.xor(x[i], y[i]))
}

fn xtime(b: &mut Builder, x: Byte) -> Byte {
    let hi = x[7];
    let mut o = [Bit::ZERO; 8];
    o[0] = hi;
    o[1..8].copy_from_slice(&x[..7]);
    for i in [1, 3, 4] {
        o[i] = b.xor(o[i], hi);
    }
    o
}

fn to_bytes(bits: &[Bit]) -> Vec<Byte> {
    bits.chunks(8)
        .map(|c| core::array::from_fn(|i| c[i]))
        .collect()
}

fn const_byte(v: u8) -> Byte {
    core::array::from_fn(|i| Bit::constant((v >> i) & 1 == 1))
}

/// AES-128 encryption of one block (see the module documentation).
pub fn aes128() -> Circuit {
    let mut b = Builder::new();
    let key = b.input(Party::Garbler, 128);
    let pt = b.input(Party::Evaluator, 128);
    let key = to_bytes(&key);
    // Key expansion: 44 words of 4 bytes.
    let mut w: Vec<[Byte; 4]> = (0..4)
        .map(|i| core::array::from_fn(|j| key[4 * i + j]))
        .collect();
    let mut rcon = 1u8;
    for i in 4..44 {
        let mut t = w[i - 1];
        if i % 4 == 0 {
            t = [t[1], t[2], t[3], t[0]];
            for x in t.iter_mut() {
                *x = sub_byte(&mut b, *x);
            }
            t[0] = xor_byte(&mut b, t[0], const_byte(rcon));
            rcon = (rcon << 1) ^ if rcon & 0x80 != 0 { 0x1b } else { 0 };
        }
        let prev = w[i - 4];
        let n: [Byte; 4] = core::array::from_fn(|j| xor_byte(&mut b, prev[j], t[j]));
        w.push(n);
    }
    let round_key = |r: usize, i: usize| w[4 * r + i / 4][i % 4];
    let mut s: Vec<Byte> = to_bytes(&pt);
    for (i, x) in s.iter_mut().enumerate() {
        *x = xor_byte(&mut b, *x, round_key(0, i));
    }
    for round in 1..=10 {
        let sub: Vec<Byte> = s.iter().map(|&x| sub_byte(&mut b, x)).collect();
        // ShiftRows: row r rotates left by r; byte index r + 4c.
        let shifted: Vec<Byte> = (0..16)
            .map(|i| {
                let (r, c) = (i % 4, i / 4);
                sub[r + 4 * ((c + r) % 4)]
            })
            .collect();
        s = if round < 10 {
            let mut m = Vec::with_capacity(16);
            for c in 0..4 {
                let a: [Byte; 4] = core::array::from_fn(|r| shifted[4 * c + r]);
                let x2: [Byte; 4] = core::array::from_fn(|r| xtime(&mut b, a[r]));
                for r in 0..4 {
                    // 2 a_r + 3 a_{r+1} + a_{r+2} + a_{r+3}
                    let t = xor_byte(&mut b, x2[r], x2[(r + 1) % 4]);
                    let t = xor_byte(&mut b, t, a[(r + 1) % 4]);
                    let t = xor_byte(&mut b, t, a[(r + 2) % 4]);
                    m.push(xor_byte(&mut b, t, a[(r + 3) % 4]));
                }
            }
            m
        } else {
            shifted
        };
        for (i, x) in s.iter_mut().enumerate() {
            *x = xor_byte(&mut b, *x, round_key(round, i));
        }
    }
    let out: Vec<Bit> = s.iter().flat_map(|x| x.iter().copied()).collect();
    finish(b, &[out])
}

fn finish(b: Builder, outputs: &[Vec<Bit>]) -> Circuit {
    match b.finish(outputs) {
        Ok(c) => c,
        // The builder only produces well-formed circuits; a failure here is
        // a bug in this module, caught by its tests.
        Err(e) => unreachable!("library circuit is malformed: {e}"),
    }
}

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// The SHA-256 initial chaining value as the 32 bytes [`sha256_compress`]
/// takes from the evaluator.
pub fn sha256_iv() -> [u8; 32] {
    const H: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut out = [0u8; 32];
    for (i, h) in H.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&h.to_be_bytes());
    }
    out
}

type Word = Vec<Bit>;

/// Big-endian 32-bit words from little-endian-bit byte strings.
fn words_be(bits: &[Bit]) -> Vec<Word> {
    bits.chunks(32)
        .map(|c| (0..32).map(|j| c[8 * (3 - j / 8) + j % 8]).collect())
        .collect()
}

fn rotr(x: &[Bit], n: usize) -> Word {
    (0..32).map(|i| x[(i + n) % 32]).collect()
}

fn shr(x: &[Bit], n: usize) -> Word {
    (0..32)
        .map(|i| if i + n < 32 { x[i + n] } else { Bit::ZERO })
        .collect()
}

fn xor3(b: &mut Builder, x: &[Bit], y: &[Bit], z: &[Bit]) -> Word {
    let t = b.xor_words(x, y);
    b.xor_words(&t, z)
}

/// The SHA-256 compression function (see the module documentation).
pub fn sha256_compress() -> Circuit {
    let mut b = Builder::new();
    let block = b.input(Party::Garbler, 512);
    let state = b.input(Party::Evaluator, 256);
    let mut w = words_be(&block);
    let h0 = words_be(&state);
    for t in 16..64 {
        let s0 = {
            let x = &w[t - 15];
            xor3(&mut b, &rotr(x, 7), &rotr(x, 18), &shr(x, 3))
        };
        let s1 = {
            let x = &w[t - 2];
            xor3(&mut b, &rotr(x, 17), &rotr(x, 19), &shr(x, 10))
        };
        let a = b.add(&s1, &w[t - 7]);
        let a = b.add(&a, &s0);
        let a = b.add(&a, &w[t - 16]);
        w.push(a);
    }
    let mut v = h0.clone();
    for t in 0..64 {
        let [a, bb, c, d, e, f, g, h] = [0, 1, 2, 3, 4, 5, 6, 7].map(|i| v[i].clone());
        let s1 = xor3(&mut b, &rotr(&e, 6), &rotr(&e, 11), &rotr(&e, 25));
        // Ch(e, f, g) = g ^ (e & (f ^ g))
        let fg = b.xor_words(&f, &g);
        let efg = b.and_words(&e, &fg);
        let ch = b.xor_words(&g, &efg);
        let k = b.constant(u128::from(K[t]), 32);
        let t1 = b.add(&w[t], &k);
        let t1 = b.add(&t1, &h);
        let t1 = b.add(&t1, &s1);
        let t1 = b.add(&t1, &ch);
        let s0 = xor3(&mut b, &rotr(&a, 2), &rotr(&a, 13), &rotr(&a, 22));
        // Maj(a, b, c) = b ^ ((a ^ b) & (b ^ c))
        let ab = b.xor_words(&a, &bb);
        let bc = b.xor_words(&bb, &c);
        let m = b.and_words(&ab, &bc);
        let maj = b.xor_words(&bb, &m);
        let t2 = b.add(&s0, &maj);
        let new_a = b.add(&t1, &t2);
        let new_e = b.add(&d, &t1);
        v = vec![new_a, a, bb, c, new_e, e, f, g];
    }
    let mut out = Vec::with_capacity(256);
    let mut words = Vec::with_capacity(8);
    for i in 0..8 {
        words.push(b.add(&h0[i], &v[i]));
    }
    for word in &words {
        for byte in 0..4 {
            // Big-endian: byte 0 holds bits 24..32.
            out.extend_from_slice(&word[8 * (3 - byte)..8 * (3 - byte) + 8]);
        }
    }
    finish(b, &[out])
}

/// `n x n -> 2n`-bit unsigned multiplication (Karatsuba above the builder's
/// default threshold).
pub fn mul(n: usize) -> Circuit {
    let mut b = Builder::new();
    let x = b.input(Party::Garbler, n);
    let y = b.input(Party::Evaluator, n);
    let p = b.mul(&x, &y);
    finish(b, &[p])
}

/// The 1024-bit instance of [`mul`] (2048-bit product).
pub fn mul1024() -> Circuit {
    mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn aes128_fips197() {
        let c = aes128();
        assert_eq!(c.stats().and_gates(), 6400);
        let key = hex("000102030405060708090a0b0c0d0e0f");
        let pt = hex("00112233445566778899aabbccddeeff");
        assert_eq!(
            c.eval_bytes(&key, &pt).unwrap(),
            hex("69c4e0d86a7b0430d8cdb78070b4c55a")
        );
        // FIPS-197 appendix B.
        let key = hex("2b7e151628aed2a6abf7158809cf4f3c");
        let pt = hex("3243f6a8885a308d313198a2e0370734");
        assert_eq!(
            c.eval_bytes(&key, &pt).unwrap(),
            hex("3925841d02dc09fbdc118597196a0b32")
        );
    }

    #[test]
    fn sha256_abc() {
        let c = sha256_compress();
        let ands = c.stats().and_gates();
        assert!(ands <= 22_573, "{ands} AND gates");
        let mut block = [0u8; 64];
        block[..3].copy_from_slice(b"abc");
        block[3] = 0x80;
        block[63] = 24;
        assert_eq!(
            c.eval_bytes(&block, &sha256_iv()).unwrap(),
            hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
    }

    #[test]
    fn mul1024_is_below_mpc() {
        let c = mul1024();
        let ands = c.stats().and_gates();
        assert!(ands < 480_149, "{ands} AND gates");
        assert_eq!(c.output_bits(), 2048);
    }

    #[test]
    fn by_name_works() {
        assert!(by_name("aes128").is_some());
        assert_eq!(by_name("mul8").map(|c| c.output_bits()), Some(16));
        assert!(by_name("mul0").is_none());
        assert!(by_name("nope").is_none());
    }
}
