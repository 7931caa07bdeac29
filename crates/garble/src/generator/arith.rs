//! Multiplication and squaring over any [`Gen`]: schoolbook below
//! [`super::KARATSUBA_THRESHOLD`] bits, Karatsuba above; and the non-adjacent form of a
//! scalar (for the windowed point multiplication).

use super::{Gen, W, Word};

/// The non-adjacent form of a little-endian byte string: digits in
/// `{-1, 0, 1}`, least significant first, no two adjacent non-zero.
pub fn naf(c: &[u8]) -> Vec<i8> {
    // Work on bits with a carry: standard right-to-left recoding.
    let bits: Vec<u8> = (0..c.len() * 8)
        .map(|i| (c[i / 8] >> (i % 8)) & 1)
        .collect();
    let mut out = Vec::with_capacity(bits.len() + 1);
    let mut carry = 0u8;
    let mut i = 0;
    while i < bits.len() || carry != 0 {
        let b = bits.get(i).copied().unwrap_or(0) + carry;
        let next = bits.get(i + 1).copied().unwrap_or(0);
        match b {
            0 => {
                out.push(0);
                carry = 0;
            }
            1 => {
                if next == 1 {
                    // ...11 -> -1 with a carry.
                    out.push(-1);
                    carry = 1;
                } else {
                    out.push(1);
                    carry = 0;
                }
            }
            _ => {
                out.push(0);
                carry = 1;
            }
        }
        i += 1;
    }
    out
}

pub(super) fn mul_rec<G: Gen + ?Sized>(
    g: &mut G,
    a: &[W<G::L>],
    b: &[W<G::L>],
    threshold: usize,
) -> Word<G::L> {
    if a.is_empty() || b.is_empty() {
        return vec![W::ZERO; a.len() + b.len()];
    }
    let (a, b) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    if b.len() < threshold {
        return mul_schoolbook(g, a, b);
    }
    let h = a.len().div_ceil(2);
    if b.len() <= h {
        let lo = mul_rec(g, &a[..h], b, threshold);
        let hi = mul_rec(g, &a[h..], b, threshold);
        return combine(g, lo, h, &hi, a.len() + b.len());
    }
    let (a0, a1) = a.split_at(h);
    let (b0, b1) = b.split_at(h);
    let z0 = mul_rec(g, a0, b0, threshold);
    let z2 = mul_rec(g, a1, b1, threshold);
    let sa = g.add_wide(a0, a1);
    let sb = g.add_wide(b0, b1);
    let mut z1 = mul_rec(g, &sa, &sb, threshold);
    z1.truncate(2 * h + 1);
    let z1 = g.sub(&z1, &z0);
    let z1 = g.sub(&z1, &z2);
    karatsuba_join(g, z0, z2, &z1, h, a.len() + b.len())
}

pub(super) fn karatsuba_join<G: Gen + ?Sized>(
    g: &mut G,
    z0: Word<G::L>,
    z2: Word<G::L>,
    z1: &[W<G::L>],
    h: usize,
    width: usize,
) -> Word<G::L> {
    let mut r = z0;
    r.resize(2 * h, W::ZERO);
    r.extend_from_slice(&z2);
    r.resize(width, W::ZERO);
    r.truncate(width);
    let hi = g.add(&r[h..], z1);
    r.truncate(h);
    r.extend(hi);
    r
}

pub(super) fn combine<G: Gen + ?Sized>(
    g: &mut G,
    mut lo: Word<G::L>,
    shift: usize,
    hi: &[W<G::L>],
    width: usize,
) -> Word<G::L> {
    lo.resize(width, W::ZERO);
    let top = g.add(&lo[shift..], hi);
    lo.truncate(shift);
    lo.extend(top);
    lo
}

pub(super) fn mul_schoolbook<G: Gen + ?Sized>(
    g: &mut G,
    a: &[W<G::L>],
    b: &[W<G::L>],
) -> Word<G::L> {
    let n = a.len();
    let mut out = Vec::with_capacity(n + b.len());
    let mut acc: Word<G::L> = a.iter().map(|&x| g.and(x, b[0])).collect();
    acc.push(W::ZERO);
    for &y in &b[1..] {
        out.push(acc[0]);
        let row: Word<G::L> = a.iter().map(|&x| g.and(x, y)).collect();
        let (mut s, c) = g.add_carry(&acc[1..], &row, W::ZERO);
        s.push(c);
        acc = s;
    }
    out.extend(acc);
    out.resize(n + b.len(), W::ZERO);
    out
}

pub(super) fn square_rec<G: Gen + ?Sized>(
    g: &mut G,
    a: &[W<G::L>],
    threshold: usize,
) -> Word<G::L> {
    let n = a.len();
    if n < threshold {
        return square_schoolbook(g, a);
    }
    let h = n.div_ceil(2);
    let (a0, a1) = a.split_at(h);
    let z0 = square_rec(g, a0, threshold);
    let z2 = square_rec(g, a1, threshold);
    let s = g.add_wide(a0, a1);
    let mut z1 = square_rec(g, &s, threshold);
    z1.truncate(2 * h + 1);
    let z1 = g.sub(&z1, &z0);
    let z1 = g.sub(&z1, &z2);
    karatsuba_join(g, z0, z2, &z1, h, 2 * n)
}

/// `a^2 = sum_i 4^i row_i` with `row_i = a_i + sum_{j>i} a_i a_j 2^(j-i+1)`:
/// `n (n - 1) / 2` cross products and one row addition per bit.
pub(super) fn square_schoolbook<G: Gen + ?Sized>(g: &mut G, a: &[W<G::L>]) -> Word<G::L> {
    let n = a.len();
    let mut out: Word<G::L> = Vec::with_capacity(2 * n);
    let mut acc: Word<G::L> = Vec::new();
    for i in 0..n {
        let mut row: Word<G::L> = vec![a[i], W::ZERO];
        for j in i + 1..n {
            row.push(g.and(a[i], a[j]));
        }
        let w = row.len().max(acc.len());
        row.resize(w, W::ZERO);
        let (mut s, c) = g.add_carry(&row, &acc, W::ZERO);
        s.push(c);
        out.push(s[0]);
        out.push(s[1]);
        acc = s.split_off(2);
    }
    out.extend(acc);
    out.resize(2 * n, W::ZERO);
    out
}
