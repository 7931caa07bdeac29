//! Plain (not circuit) arithmetic modulo `p = 2^255 - 19` and Edwards point
//! addition, only for precomputing the public tables of fixed-base scalar
//! multiplication. curve25519-dalek, our reference, does not expose affine
//! coordinates, which the tables need; the tests check every result against
//! it through the point encoding.

// Limb arithmetic reads best with the limb index spelled out.
#![allow(clippy::needless_range_loop)]

/// A field element: four little-endian 64-bit limbs, any value below
/// `2^256` (canonical only after [`Fe::to_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fe(pub(crate) [u64; 4]);

const P: [u64; 4] = [
    0xffff_ffff_ffff_ffed,
    0xffff_ffff_ffff_ffff,
    0xffff_ffff_ffff_ffff,
    0x7fff_ffff_ffff_ffff,
];

impl Fe {
    pub(crate) const ZERO: Fe = Fe([0; 4]);
    pub(crate) const ONE: Fe = Fe([1, 0, 0, 0]);

    pub(crate) fn from_bytes(b: &[u8; 32]) -> Fe {
        let mut l = [0u64; 4];
        for (i, x) in l.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * i..8 * i + 8]);
            *x = u64::from_le_bytes(w);
        }
        Fe(l)
    }

    /// `self + 38 c` with folding of any wrap.
    fn add_small(mut self, mut c: u128) -> Fe {
        while c != 0 {
            for x in self.0.iter_mut() {
                let v = u128::from(*x) + c;
                *x = v as u64;
                c = v >> 64;
            }
            c *= 38;
        }
        self
    }

    pub(crate) fn add(self, o: Fe) -> Fe {
        let mut r = [0u64; 4];
        let mut c = 0u128;
        for i in 0..4 {
            let v = u128::from(self.0[i]) + u128::from(o.0[i]) + c;
            r[i] = v as u64;
            c = v >> 64;
        }
        Fe(r).add_small(38 * c)
    }

    pub(crate) fn sub(self, o: Fe) -> Fe {
        // self + 4p - o, which is positive and below 2^258.
        let four_p: [u128; 4] = [
            u128::from(P[0]) << 2,
            u128::from(P[1]) << 2,
            u128::from(P[2]) << 2,
            u128::from(P[3]) << 2,
        ];
        let mut r = [0u64; 4];
        let mut c: i128 = 0;
        for i in 0..4 {
            let v = i128::from(self.0[i]) + four_p[i] as i128 - i128::from(o.0[i]) + c;
            r[i] = v as u64;
            c = v >> 64;
        }
        Fe(r).add_small(38 * c as u128)
    }

    pub(crate) fn mul(self, o: Fe) -> Fe {
        let mut t = [0u128; 8];
        for i in 0..4 {
            let mut c = 0u128;
            for j in 0..4 {
                let v = u128::from(self.0[i]) * u128::from(o.0[j]) + t[i + j] + c;
                t[i + j] = v & 0xffff_ffff_ffff_ffff;
                c = v >> 64;
            }
            t[i + 4] = c;
        }
        let mut r = [0u64; 4];
        let mut c = 0u128;
        for i in 0..4 {
            let v = t[i] + 38 * t[i + 4] + c;
            r[i] = v as u64;
            c = v >> 64;
        }
        Fe(r).add_small(38 * c)
    }

    pub(crate) fn square(self) -> Fe {
        self.mul(self)
    }

    pub(crate) fn invert(self) -> Fe {
        // p - 2 = 2^255 - 21: bits from the top.
        let mut e = P;
        e[0] -= 2;
        let mut r = Fe::ONE;
        for i in (0..256).rev() {
            r = r.square();
            if (e[i / 64] >> (i % 64)) & 1 == 1 {
                r = r.mul(self);
            }
        }
        r
    }

    /// The canonical little-endian encoding.
    pub(crate) fn to_bytes(self) -> [u8; 32] {
        let mut x = self.0;
        for _ in 0..2 {
            // x >= p ? x - p : x
            let mut r = [0u64; 4];
            let mut borrow = 0i128;
            for i in 0..4 {
                let v = i128::from(x[i]) - i128::from(P[i]) + borrow;
                r[i] = v as u64;
                borrow = v >> 64;
            }
            if borrow == 0 {
                x = r;
            }
        }
        let mut out = [0u8; 32];
        for i in 0..4 {
            out[8 * i..8 * i + 8].copy_from_slice(&x[i].to_le_bytes());
        }
        out
    }
}

/// `2d`, with `d = -121665 / 121666` the Edwards curve constant.
pub(crate) const D2: [u8; 32] = [
    0x59, 0xf1, 0xb2, 0x26, 0x94, 0x9b, 0xd6, 0xeb, 0x56, 0xb1, 0x83, 0x82, 0x9a, 0x14, 0xe0, 0x00,
    0x30, 0xd1, 0xf3, 0xee, 0xf2, 0x80, 0x8e, 0x19, 0xe7, 0xfc, 0xdf, 0x56, 0xdc, 0xd9, 0x06, 0x24,
];

/// The base point's affine x.
pub(crate) const BX: [u8; 32] = [
    0x1a, 0xd5, 0x25, 0x8f, 0x60, 0x2d, 0x56, 0xc9, 0xb2, 0xa7, 0x25, 0x95, 0x60, 0xc7, 0x2c, 0x69,
    0x5c, 0xdc, 0xd6, 0xfd, 0x31, 0xe2, 0xa4, 0xc0, 0xfe, 0x53, 0x6e, 0xcd, 0xd3, 0x36, 0x69, 0x21,
];

/// The base point's affine y (4/5).
pub(crate) const BY: [u8; 32] = [
    0x58, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
    0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
];

/// A point in extended coordinates `(X : Y : Z : T)`, `x = X/Z`, `y = Y/Z`,
/// `xy = T/Z`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ext {
    pub(crate) x: Fe,
    pub(crate) y: Fe,
    pub(crate) z: Fe,
    pub(crate) t: Fe,
}

impl Ext {
    pub(crate) const IDENTITY: Ext = Ext {
        x: Fe::ZERO,
        y: Fe::ONE,
        z: Fe::ONE,
        t: Fe::ZERO,
    };

    pub(crate) fn base() -> Ext {
        let x = Fe::from_bytes(&BX);
        let y = Fe::from_bytes(&BY);
        Ext {
            x,
            y,
            z: Fe::ONE,
            t: x.mul(y),
        }
    }

    /// Unified addition (add-2008-hwcd-3, `a = -1`): complete on Ed25519.
    pub(crate) fn add(&self, q: &Ext) -> Ext {
        let d2 = Fe::from_bytes(&D2);
        let a = self.y.sub(self.x).mul(q.y.sub(q.x));
        let b = self.y.add(self.x).mul(q.y.add(q.x));
        let c = self.t.mul(d2).mul(q.t);
        let d = self.z.add(self.z).mul(q.z);
        let e = b.sub(a);
        let f = d.sub(c);
        let g = d.add(c);
        let h = b.add(a);
        Ext {
            x: e.mul(f),
            y: g.mul(h),
            z: f.mul(g),
            t: e.mul(h),
        }
    }
}

/// Affine coordinates of many points with one inversion (Montgomery's
/// trick): `(x, y)` canonical.
pub(crate) fn batch_affine(pts: &[Ext]) -> Vec<([u8; 32], [u8; 32])> {
    let mut prefix = Vec::with_capacity(pts.len());
    let mut acc = Fe::ONE;
    for p in pts {
        prefix.push(acc);
        acc = acc.mul(p.z);
    }
    let mut inv = acc.invert();
    let mut out = vec![([0u8; 32], [0u8; 32]); pts.len()];
    for i in (0..pts.len()).rev() {
        let zi = inv.mul(prefix[i]);
        inv = inv.mul(pts[i].z);
        out[i] = (pts[i].x.mul(zi).to_bytes(), pts[i].y.mul(zi).to_bytes());
    }
    out
}

/// The standard encoding of an affine point: `y` with the low bit of `x` in
/// bit 255.
#[cfg(test)]
pub(crate) fn encode(x: &[u8; 32], y: &[u8; 32]) -> [u8; 32] {
    let mut e = *y;
    e[31] |= (x[0] & 1) << 7;
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::constants::ED25519_BASEPOINT_COMPRESSED;
    use curve25519_dalek::edwards::EdwardsPoint;
    use curve25519_dalek::scalar::Scalar;

    #[test]
    fn base_point_and_multiples_match_dalek() {
        let b = Ext::base();
        let a = batch_affine(&[b]);
        assert_eq!(encode(&a[0].0, &a[0].1), ED25519_BASEPOINT_COMPRESSED.0);
        let mut p = Ext::IDENTITY;
        let mut pts = Vec::new();
        for _ in 0..40 {
            p = p.add(&b);
            pts.push(p);
        }
        let aff = batch_affine(&pts);
        for (k, (x, y)) in aff.iter().enumerate() {
            let want = EdwardsPoint::mul_base(&Scalar::from(k as u64 + 1)).compress();
            assert_eq!(encode(x, y), want.0, "{}B", k + 1);
        }
    }

    #[test]
    fn invert_and_sub() {
        let x = Fe::from_bytes(&BX);
        assert_eq!(x.mul(x.invert()).to_bytes(), Fe::ONE.to_bytes());
        assert_eq!(x.sub(x).to_bytes(), [0u8; 32]);
        assert_eq!(Fe::ZERO.sub(Fe::ONE).add(Fe::ONE).to_bytes(), [0u8; 32]);
    }
}
