//! The blinded reveal of `R = r B` (the `ed25519-sign-reveal` circuit): `R` is public in
//! the signature, so instead of inverting `Z` in the circuit (8.9 M AND gates), the
//! circuit reveals `(λX : λY : λZ)` for a random `λ = λ_g λ_e` that neither party
//! controls alone, and both parties compute `enc(R)` from it in the clear.
//!
//! * [`blind`]: in the circuit, `λ = λ_g λ_e` and the three canonical products (4 field
//!   multiplications and 3 canonical reductions);
//! * [`encoding`]: in the clear, `x = λX / λZ`, `y = λY / λZ`, the curve check and the
//!   encoding; a revealed triple that is not a curve point (`λZ = 0`: a party's share
//!   was 0) is refused;
//! * [`blinding_share`]: a party's share, uniform over the non-zero field elements.
//!
//! Why the revealed triple tells a party nothing beyond `R`: `docs/ed25519-2pc.md`.

use super::field;
use super::plain::{D2, Fe};
use super::point::Point;
use crate::circuit::bits_from_bytes;
use crate::generator::{Gen, Refused, W, Word};
use crate::hash::{RandomnessError, os_random};

/// Bytes of a party's blinding share (a field element, little-endian).
pub const SHARE_BYTES: usize = 32;

/// Bits revealed: the canonical `λX`, `λY`, `λZ`, 256 bits each.
pub const REVEALED_BITS: usize = 3 * field::BITS;

/// `λZ = 0`: no point (a party's blinding share was 0 modulo p).
pub const ZERO_Z: Refused = Refused("the blinded Z of R is 0 (a blinding share was 0)");
/// A revealed coordinate is not below p (the circuit reveals canonical values only).
pub const NOT_CANONICAL: Refused = Refused("a revealed coordinate of R is not below p");
/// `(λX / λZ, λY / λZ)` is not on the curve.
pub const NOT_ON_CURVE: Refused = Refused("the revealed R is not a point of the curve");

/// `(λX, λY, λZ)`, each canonical (below p: a representative above p would tell which
/// representative the circuit held), least significant bit first, for [`Gen::reveal`].
/// `p` is `r B` as [`super::point::mul_base`] returns it; `lam_g`, `lam_e` are the
/// parties' shares.
pub fn blind<G: Gen>(
    g: &mut G,
    p: &Point<G::L>,
    lam_g: &[W<G::L>],
    lam_e: &[W<G::L>],
) -> Word<G::L> {
    let lam = field::mul(g, lam_g, lam_e);
    let mut out = Vec::with_capacity(REVEALED_BITS);
    for c in [&p.x, &p.y, &p.z] {
        let v = field::mul(g, &lam, c);
        out.extend(field::freeze(g, &v));
    }
    out
}

/// Whether `b` (little-endian) is below p.
fn canonical(b: &[u8; 32]) -> bool {
    Fe::from_bytes(b).to_bytes() == *b
}

/// The encoding of `R` from the revealed bits of [`blind`]: `y = λY / λZ` with the low
/// bit of `x = λX / λZ` in bit 255. Public values, so plain arithmetic (its timing
/// reveals nothing that is not public).
pub fn encoding(revealed: &[bool]) -> Result<[u8; 32], Refused> {
    if revealed.len() != REVEALED_BITS {
        return Err(NOT_CANONICAL);
    }
    let bytes = crate::circuit::bytes_from_bits(revealed);
    let coord = |i: usize| {
        let mut b = [0u8; 32];
        b.copy_from_slice(&bytes[32 * i..32 * i + 32]);
        b
    };
    let (xb, yb, zb) = (coord(0), coord(1), coord(2));
    if !(canonical(&xb) && canonical(&yb) && canonical(&zb)) {
        return Err(NOT_CANONICAL);
    }
    if zb == [0u8; 32] {
        return Err(ZERO_Z);
    }
    let zi = Fe::from_bytes(&zb).invert();
    let x = Fe::from_bytes(&xb).mul(zi);
    let y = Fe::from_bytes(&yb).mul(zi);
    // -x^2 + y^2 = 1 + d x^2 y^2, with d = 2d / 2.
    let d = Fe::from_bytes(&D2).mul(Fe([2, 0, 0, 0]).invert());
    let (xx, yy) = (x.square(), y.square());
    let lhs = yy.sub(xx);
    let rhs = Fe::ONE.add(d.mul(xx).mul(yy));
    if lhs.to_bytes() != rhs.to_bytes() {
        return Err(NOT_ON_CURVE);
    }
    let mut enc = y.to_bytes();
    enc[31] |= (x.to_bytes()[0] & 1) << 7;
    Ok(enc)
}

/// The encoding of `R` as public wires, from the bits that [`blind`] gave: revealed,
/// checked and encoded in the clear. A backend that does not know the values (counting)
/// gets wires all the same; a refused value ends the run ([`Gen::refuse`]).
pub fn reveal_encoding<G: Gen>(g: &mut G, blinded: &[W<G::L>]) -> Word<G::L> {
    let enc = match g.reveal(blinded).map(|v| encoding(&v)) {
        Some(Ok(e)) => e,
        Some(Err(why)) => {
            g.refuse(why);
            [0u8; 32]
        }
        None => [0u8; 32],
    };
    g.public(&bits_from_bytes(&enc, 256))
}

/// A blinding share: uniform over the field elements `1..p`, from the operating
/// system's random source (rejection sampling of 255-bit values).
pub fn blinding_share() -> Result<[u8; SHARE_BYTES], RandomnessError> {
    loop {
        let mut b = [0u8; SHARE_BYTES];
        os_random(&mut b)?;
        b[31] &= 0x7f;
        if canonical(&b) && b != [0u8; SHARE_BYTES] {
            return Ok(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::bits_from_bytes;
    use crate::generator::{Counter, Plain, plain_bits, plain_word};
    use curve25519_dalek::edwards::EdwardsPoint;
    use curve25519_dalek::scalar::Scalar;

    fn word(b: &[u8]) -> Word<bool> {
        plain_word(&bits_from_bytes(b, 8 * b.len()))
    }

    /// `r B` blinded in plain, with the shares given.
    fn revealed(s: &Scalar, lg: &[u8; 32], le: &[u8; 32]) -> Vec<bool> {
        let mut g = Plain::default();
        let r = word(s.as_bytes());
        let p = super::super::point::mul_base(&mut g, &r[..253]);
        plain_bits(&blind(&mut g, &p, &word(lg), &word(le)))
    }

    #[test]
    fn blinded_r_encodes_as_dalek_and_the_blinding_varies() {
        let lg = blinding_share().unwrap();
        let le = blinding_share().unwrap();
        for s in [Scalar::ONE, Scalar::from(12345u64), -Scalar::ONE] {
            let want = EdwardsPoint::mul_base(&s).compress().0;
            let v = revealed(&s, &lg, &le);
            assert_eq!(encoding(&v).unwrap(), want);
            // Other shares: another triple, the same point.
            let v2 = revealed(&s, &blinding_share().unwrap(), &le);
            assert_ne!(v, v2);
            assert_eq!(encoding(&v2).unwrap(), want);
        }
    }

    #[test]
    fn a_zero_share_or_a_point_off_the_curve_is_refused() {
        let s = Scalar::from(7u64);
        let zero = [0u8; 32];
        let one = Fe::ONE.to_bytes();
        assert_eq!(encoding(&revealed(&s, &zero, &one)), Err(ZERO_Z));
        // p itself is 0 modulo p, and the circuit reveals it as 0.
        let mut p = [0xffu8; 32];
        p[0] = 0xed;
        p[31] = 0x7f;
        assert_eq!(encoding(&revealed(&s, &one, &p)), Err(ZERO_Z));
        // (1 : 1 : 1) is not on the curve; a coordinate of p or above is refused.
        let mut b = [0u8; 96];
        b[0] = 1;
        b[32] = 1;
        b[64] = 1;
        assert_eq!(
            encoding(&bits_from_bytes(&b, REVEALED_BITS)),
            Err(NOT_ON_CURVE)
        );
        b[..32].copy_from_slice(&p);
        assert_eq!(
            encoding(&bits_from_bytes(&b, REVEALED_BITS)),
            Err(NOT_CANONICAL)
        );
        assert_eq!(encoding(&[true; 5]), Err(NOT_CANONICAL));
        // The identity (0 : 1 : 1) is a point: its encoding is y = 1.
        let mut id = [0u8; 96];
        id[32] = 1;
        id[64] = 1;
        assert_eq!(
            encoding(&bits_from_bytes(&id, REVEALED_BITS)).unwrap(),
            EdwardsPoint::mul_base(&Scalar::ZERO).compress().0
        );
    }

    #[test]
    fn shares_are_canonical_and_nonzero() {
        for _ in 0..64 {
            let b = blinding_share().unwrap();
            assert!(canonical(&b) && b != [0u8; 32]);
        }
    }

    /// The blinding costs four multiplications and three canonical reductions.
    #[test]
    fn blind_and_count() {
        let mut k = Counter::new();
        let p = Point {
            x: k.inputs(256),
            y: k.inputs(256),
            z: k.inputs(256),
            t: Vec::new(),
        };
        let (lg, le) = (k.inputs(256), k.inputs(256));
        let out = blind(&mut k, &p, &lg, &le);
        assert_eq!(out.len(), REVEALED_BITS);
        let mut f = Counter::new();
        let a = f.inputs(256);
        let _ = field::freeze(&mut f, &a);
        assert_eq!(k.and, 4 * 55_099 + 3 * f.and);
    }
}
