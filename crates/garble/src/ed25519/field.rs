//! Arithmetic modulo `p = 2^255 - 19` as a generated circuit.
//!
//! An element is a 256-bit word holding any representative below `2^256`
//! (not necessarily below `p`); only [`freeze`] makes it canonical, once, for
//! the encoding. Products are folded with `2^256 = 38 (mod p)`:
//!
//! * [`mul`]: a Karatsuba product of two 256-bit words (512 bits), then
//!   `lo + 38 hi` (263 bits), `lo + 38 hi` again (257 bits: the high part
//!   has 7 bits), and a last `+ 38` for the carry, which cannot overflow
//!   (when the carry is set the low part is below `38 * 128`);
//! * [`square`]: the same with Karatsuba squaring (three half-size squares,
//!   each cross product once at the base);
//! * [`add`], [`sub`], [`mul2`]: one 256-bit addition or subtraction and two
//!   short folds of `38` (a wrap of `2^256` is `38 (mod p)`);
//! * [`invert`]: `z^(p-2)` by the addition chain of ref10's `fe_invert`
//!   (254 squarings, 11 multiplications).
//!
//! The AND counts per operation are pinned by the tests and listed in
//! `docs/ed25519-2pc.md`.

use std::sync::OnceLock;

use crate::generator::{Gen, Sub, W, Word, const_bytes};

/// Bits of a field element.
pub const BITS: usize = 256;

/// `p = 2^255 - 19`, little-endian.
pub const P_BYTES: [u8; 32] = {
    let mut b = [0xffu8; 32];
    b[0] = 0xed;
    b[31] = 0x7f;
    b
};

/// A field element as a constant word.
pub fn constant<L: Copy>(le: &[u8; 32]) -> Word<L> {
    const_bytes(le)
}

/// `38 * c` for one bit `c` (bits 1, 2 and 5).
fn thirty_eight<L: Copy>(c: W<L>) -> Word<L> {
    vec![W::ZERO, c, c, W::ZERO, W::ZERO, c]
}

/// Reduces `x < 2^512` to 256 bits: three folds of `2^256 = 38`.
pub fn reduce_product<G: Gen>(g: &mut G, x: &[W<G::L>]) -> Word<G::L> {
    debug_assert!(x.len() <= 512);
    let (lo, hi) = x.split_at(BITS.min(x.len()));
    if hi.is_empty() {
        let mut v = lo.to_vec();
        v.resize(BITS, W::ZERO);
        return v;
    }
    // 38 hi < 2^262: 262 bits.
    let m = g.mul_const(hi, &[38], hi.len() + 6);
    let x1 = g.add_wide(lo, &m); // < 39 * 2^256 < 2^262 (+1 bit of headroom)
    let (lo, hi) = x1.split_at(BITS);
    let m = g.mul_const(hi, &[38], hi.len() + 6);
    let x2 = g.add_wide(lo, &m); // < 2^256 + 38 * 2^7
    let (lo, hi) = x2.split_at(BITS);
    // hi is one bit (the rest are provably zero); with it set, lo < 4864.
    g.add(lo, &thirty_eight(hi[0]))
}

/// `a + b (mod p)`.
pub fn add<G: Gen>(g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
    let (s, c) = g.add_carry(a, b, W::ZERO);
    fold_carry(g, &s, c)
}

/// `s + 38 c`, where `s < 2^256`: at most two short folds.
fn fold_carry<G: Gen>(g: &mut G, s: &[W<G::L>], c: W<G::L>) -> Word<G::L> {
    let (s, c2) = g.add_carry(s, &thirty_eight(c), W::ZERO);
    // With c2 set, s < 38: one more + 38 cannot wrap.
    g.add(&s, &thirty_eight(c2))
}

/// `2 a (mod p)`.
pub fn mul2<G: Gen>(g: &mut G, a: &[W<G::L>]) -> Word<G::L> {
    let mut s = vec![W::ZERO];
    s.extend_from_slice(&a[..BITS - 1]);
    fold_carry(g, &s, a[BITS - 1])
}

/// `a - b (mod p)`.
pub fn sub<G: Gen>(g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
    // A borrow means we computed d + 2^256 = d + 38: subtract 38, and once
    // more if that borrows too (then d >= 2^256 - 38, no third time).
    let (d, bo) = g.sub_borrow(a, b, W::ZERO);
    let (d, bo2) = g.sub_borrow(&d, &thirty_eight(bo), W::ZERO);
    g.sub(&d, &thirty_eight(bo2))
}

fn mul_gates<G: Gen>(g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
    let x = g.mul(a, b);
    reduce_product(g, &x)
}

fn square_gates<G: Gen>(g: &mut G, a: &[W<G::L>]) -> Word<G::L> {
    let x = g.square(a);
    reduce_product(g, &x)
}

/// The multiplication as a sub-circuit (compiled once per process).
pub fn mul_sub() -> &'static Sub {
    static S: OnceLock<Sub> = OnceLock::new();
    S.get_or_init(|| {
        Sub::compile("fe-mul", BITS, BITS, mul_gates)
            .unwrap_or_else(|e| unreachable!("the builder's circuits are well formed: {e}"))
    })
}

/// The squaring as a sub-circuit (compiled once per process).
pub fn square_sub() -> &'static Sub {
    static S: OnceLock<Sub> = OnceLock::new();
    S.get_or_init(|| {
        Sub::compile("fe-square", BITS, 0, |g, a, _| square_gates(g, a))
            .unwrap_or_else(|e| unreachable!("the builder's circuits are well formed: {e}"))
    })
}

/// `a * b (mod p)` (a [`Sub`] call).
pub fn mul<G: Gen>(g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
    g.call(mul_sub(), a, b, |g, a, b| mul_gates(g, a, b))
}

/// `a^2 (mod p)` (a [`Sub`] call).
pub fn square<G: Gen>(g: &mut G, a: &[W<G::L>]) -> Word<G::L> {
    g.call(square_sub(), a, &[], |g, a, _| square_gates(g, a))
}

/// `a^(2^n)`.
pub fn square_n<G: Gen>(g: &mut G, a: &[W<G::L>], n: usize) -> Word<G::L> {
    let mut x = a.to_vec();
    for _ in 0..n {
        x = square(g, &x);
    }
    x
}

/// `z^(p - 2) = 1 / z` (and 0 for 0): ref10's chain, 254 squarings and 11
/// multiplications.
pub fn invert<G: Gen>(g: &mut G, z: &[W<G::L>]) -> Word<G::L> {
    let z2 = square(g, z);
    let t = square_n(g, &z2, 2);
    let z9 = mul(g, z, &t);
    let z11 = mul(g, &z2, &z9);
    let t = square(g, &z11);
    let z2_5_0 = mul(g, &z9, &t);
    let t = square_n(g, &z2_5_0, 5);
    let z2_10_0 = mul(g, &t, &z2_5_0);
    let t = square_n(g, &z2_10_0, 10);
    let z2_20_0 = mul(g, &t, &z2_10_0);
    let t = square_n(g, &z2_20_0, 20);
    let t = mul(g, &t, &z2_20_0);
    let t = square_n(g, &t, 10);
    let z2_50_0 = mul(g, &t, &z2_10_0);
    let t = square_n(g, &z2_50_0, 50);
    let z2_100_0 = mul(g, &t, &z2_50_0);
    let t = square_n(g, &z2_100_0, 100);
    let t = mul(g, &t, &z2_100_0);
    let t = square_n(g, &t, 50);
    let t = mul(g, &t, &z2_50_0);
    let t = square_n(g, &t, 5);
    mul(g, &t, &z11)
}

/// The canonical representative (below `p`) of `a < 2^256 = 2p + 38`: at
/// most two conditional subtractions of `p`.
pub fn freeze<G: Gen>(g: &mut G, a: &[W<G::L>]) -> Word<G::L> {
    let p = constant::<G::L>(&P_BYTES);
    let x = g.cond_sub(a, &p);
    g.cond_sub(&x, &p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{bits_from_bytes, bytes_from_bits};
    use crate::generator::{Counter, Plain, plain_bits, plain_word};
    use num_bigint::BigUint;
    use proptest::prelude::*;

    fn p() -> BigUint {
        (BigUint::from(1u8) << 255) - BigUint::from(19u8)
    }

    fn w(v: &BigUint) -> Word<bool> {
        plain_word(&bits_from_bytes(&v.to_bytes_le(), 256))
    }

    fn val(x: &[W<bool>]) -> BigUint {
        BigUint::from_bytes_le(&bytes_from_bits(&plain_bits(x)))
    }

    fn any256() -> impl Strategy<Value = BigUint> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 32).prop_map(|b| BigUint::from_bytes_le(&b)),
            // Edge values: near 0, near p, near 2^256.
            (0u64..64).prop_map(BigUint::from),
            (0u64..64).prop_map(|k| p() - BigUint::from(k) - BigUint::from(1u8)),
            (0u64..64)
                .prop_map(|k| (BigUint::from(1u8) << 256) - BigUint::from(k) - BigUint::from(1u8)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn ops_match_bigint(a in any256(), b in any256()) {
            let mut g = Plain::default();
            let (x, y) = (w(&a), w(&b));
            let pp = p();
            let check = |r: &Word<bool>, e: BigUint| {
                assert_eq!(r.len(), 256);
                assert_eq!(val(r) % &pp, e % &pp);
            };
            check(&add(&mut g, &x, &y), &a + &b);
            check(&sub(&mut g, &x, &y), &a + (&pp << 2) - &b);
            check(&mul2(&mut g, &x), &a << 1);
            check(&mul(&mut g, &x, &y), &a * &b);
            check(&square(&mut g, &x), &a * &a);
            let f = freeze(&mut g, &x);
            prop_assert_eq!(val(&f), &a % &pp);
        }
    }

    #[test]
    fn invert_matches_fermat() {
        let mut g = Plain::default();
        for a in [
            BigUint::from(1u8),
            BigUint::from(2u8),
            BigUint::parse_bytes(b"123456789abcdef0123456789abcdef0123456789abcdef", 16).unwrap(),
            p() - BigUint::from(1u8),
        ] {
            let r = invert(&mut g, &w(&a));
            assert_eq!(val(&r) * &a % p(), BigUint::from(1u8));
        }
    }

    #[test]
    fn and_counts() {
        let mut k = Counter::new();
        k.expand = true;
        let (a, b) = (k.inputs(256), k.inputs(256));
        let before = k.and;
        let _ = mul(&mut k, &a, &b);
        let m = k.and - before;
        let before = k.and;
        let _ = square(&mut k, &a);
        let s = k.and - before;
        let before = k.and;
        let _ = add(&mut k, &a, &b);
        let ad = k.and - before;
        let before = k.and;
        let _ = sub(&mut k, &a, &b);
        let sb = k.and - before;
        eprintln!("field mul {m}, square {s}, add {ad}, sub {sb}");
        // The compiled programs have exactly the expanded AND gates.
        assert_eq!(mul_sub().program().and_gates(), m);
        assert_eq!(square_sub().program().and_gates(), s);
        // Pinned, as listed in docs/ed25519-2pc.md.
        assert_eq!([m, s, ad, sb], [55_099, 32_602, 765, 765]);
    }
}
