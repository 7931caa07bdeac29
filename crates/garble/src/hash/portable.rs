//! The portable backend: constant-time fixsliced AES-128 ([`super::fixslice`])
//! over groups of four blocks, and the hash on top of it.

use super::Block;
use super::fixslice::{self, Batch};

pub(super) use fixslice::Keys;

/// The fixsliced round keys of `key`.
pub(super) fn key_schedule(key: &[u8; 16]) -> Keys {
    fixslice::aes128_key_schedule(key)
}

/// Four blocks as AES sees them (`to_bytes`), zero-padded.
#[inline(always)]
fn batch(blocks: &[Block]) -> Batch {
    let mut b = [[0u8; 16]; 4];
    for (d, s) in b.iter_mut().zip(blocks) {
        *d = s.to_bytes();
    }
    b
}

/// Encrypts every block in place, four at a time (a last group of fewer
/// is padded; padding costs time, never correctness).
pub(super) fn encrypt(k: &Keys, blocks: &mut [Block]) {
    for c in blocks.chunks_mut(4) {
        let out = fixslice::aes128_encrypt(k, &batch(c));
        for (d, s) in c.iter_mut().zip(out) {
            *d = Block::from_bytes(s);
        }
    }
}

/// `xs[i] = pi(sigma(xs[i]) ^ t[i]) ^ sigma(xs[i]) ^ t[i]`, four at a time.
/// `tweaks` is as long as `xs`.
pub(super) fn tccr(k: &Keys, xs: &mut [Block], tweaks: &[Block]) {
    for (c, t) in xs.chunks_mut(4).zip(tweaks.chunks(4)) {
        let mut pre = [Block::ZERO; 4];
        for ((p, x), t) in pre.iter_mut().zip(c.iter()).zip(t) {
            *p = x.sigma() ^ *t;
        }
        let out = fixslice::aes128_encrypt(k, &batch(&pre));
        for ((d, e), p) in c.iter_mut().zip(out).zip(pre) {
            *d = Block::from_bytes(e) ^ p;
        }
    }
}

/// The MITCCRH key of tweak `t` under session seed `s` (see [`super::mitccrh_key`]), as AES
/// sees it.
#[inline(always)]
fn key_bytes(seed: Block, t: Block) -> [u8; 16] {
    super::mitccrh_key(seed, t).to_bytes()
}

/// `xs[i] = AES_{k(t[i])}(xs[i]) ^ xs[i]` (MITCCRH, keys from `seed`), four blocks and
/// their four key schedules at a time (one fixsliced schedule holds four keys). `tweaks`
/// is as long as `xs`.
pub(super) fn mitccrh(seed: Block, xs: &mut [Block], tweaks: &[Block]) {
    for (c, t) in xs.chunks_mut(4).zip(tweaks.chunks(4)) {
        let mut keys = [[0u8; 16]; 4];
        for (k, t) in keys.iter_mut().zip(t) {
            *k = key_bytes(seed, *t);
        }
        let rk = fixslice::aes128_key_schedule4(&keys);
        let out = fixslice::aes128_encrypt(&rk, &batch(c));
        for (d, e) in c.iter_mut().zip(out) {
            *d = Block::from_bytes(e) ^ *d;
        }
    }
}
