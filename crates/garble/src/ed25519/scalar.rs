//! Arithmetic modulo the group order
//! `L = 2^252 + 27742317777372353535851937790883648493` as a generated
//! circuit.
//!
//! [`reduce512`] is Barrett reduction of a 512-bit value `x`: with
//! `mu = floor(2^512 / L)` (260 bits), the estimate
//! `q = floor(floor(x / 2^252) mu / 2^260)` is at most 2 below
//! `floor(x / L)`, so `x - q L < 3 L < 2^255` is computed modulo `2^256` and
//! brought below `L` by two conditional subtractions. Both products are by
//! public constants: one shifted addition or subtraction per non-zero digit
//! of the constant's non-adjacent form, no AND for a partial product.
//! [`mul_add`] is `S = (r + k a) mod L`: one Karatsuba product, one
//! addition, one reduction.

use crate::generator::{Gen, W, Word, const_bytes};

/// `L`, little-endian.
pub const L_BYTES: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
];

/// `floor(2^512 / L)`, little-endian (260 bits).
const MU: [u8; 33] = [
    0x1b, 0x13, 0x2c, 0x0a, 0xa3, 0xe5, 0x9c, 0xed, 0xa7, 0x29, 0x63, 0x08, 0x5d, 0x21, 0x06, 0x21,
    0xeb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x0f,
];

/// Bits of a reduced scalar.
pub const BITS: usize = 253;

/// `x mod L` for `x` of at most 512 bits; 253 bits out.
pub fn reduce512<G: Gen>(g: &mut G, x: &[W<G::L>]) -> Word<G::L> {
    let mut x = x.to_vec();
    assert!(x.len() <= 512, "at most 512 bits");
    x.resize(512, W::ZERO);
    let q1 = &x[252..]; // 260 bits
    let q2 = g.mul_const(q1, &MU, 520);
    let q = &q2[260..]; // at most 260 bits
    let ql = g.mul_const(q, &L_BYTES, 256);
    let r = g.sub(&x[..256], &ql);
    let l = const_bytes::<G::L>(&L_BYTES);
    let r = g.cond_sub(&r, &l);
    let mut r = g.cond_sub(&r, &l);
    r.truncate(BITS);
    r
}

/// `(r + k a) mod L` for `r`, `k` below `L` and `a` below `2^255`.
pub fn mul_add<G: Gen>(g: &mut G, r: &[W<G::L>], k: &[W<G::L>], a: &[W<G::L>]) -> Word<G::L> {
    let ka = g.mul(k, a);
    let s = g.add_wide(&ka, r);
    reduce512(g, &s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{bits_from_bytes, bytes_from_bits};
    use crate::generator::{Counter, Plain, plain_bits, plain_word};
    use curve25519_dalek::scalar::Scalar;
    use proptest::prelude::*;

    fn scalar_of(w: &[W<bool>]) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(&bytes_from_bits(&{
            let mut b = plain_bits(w);
            b.resize(256, false);
            b
        }));
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn reduce_matches_dalek(x in proptest::collection::vec(any::<u8>(), 64)) {
            let mut wide = [0u8; 64];
            wide.copy_from_slice(&x);
            let r = reduce512(&mut Plain::default(), &plain_word(&bits_from_bytes(&x, 512)));
            prop_assert_eq!(r.len(), BITS);
            prop_assert_eq!(scalar_of(&r), Scalar::from_bytes_mod_order_wide(&wide).to_bytes());
        }

        #[test]
        fn mul_add_matches_dalek(
            r in proptest::array::uniform32(any::<u8>()),
            k in proptest::array::uniform32(any::<u8>()),
            a in proptest::array::uniform32(any::<u8>()),
        ) {
            let (r, k) = (Scalar::from_bytes_mod_order(r), Scalar::from_bytes_mod_order(k));
            let mut a = a;
            a[31] &= 0x7f;
            let w = |b: &[u8; 32], n| plain_word(&bits_from_bytes(b, n));
            let s = mul_add(&mut Plain::default(), &w(r.as_bytes(), BITS), &w(k.as_bytes(), BITS), &w(&a, 255));
            // dalek reduces a mod L first; the product is the same mod L.
            let want = r + k * Scalar::from_bytes_mod_order(a);
            prop_assert_eq!(scalar_of(&s), want.to_bytes());
        }
    }

    #[test]
    fn extremes() {
        // 2^512 - 1 and L - 1 + L * (2^259 - 1)-ish values.
        let all = [0xffu8; 64];
        let r = reduce512(
            &mut Plain::default(),
            &plain_word(&bits_from_bytes(&all, 512)),
        );
        assert_eq!(
            scalar_of(&r),
            Scalar::from_bytes_mod_order_wide(&all).to_bytes()
        );
        let mut k = Counter::new();
        let x = k.inputs(512);
        let _ = reduce512(&mut k, &x);
        eprintln!("reduce512: {} AND", k.and);
    }
}
