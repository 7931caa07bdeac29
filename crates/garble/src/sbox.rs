//! The AES S-box as a Boolean circuit with 32 AND gates and 81 XOR/XNOR gates:
//! Boyar and Peralta's 113-gate circuit (J. Boyar, R. Peralta, "A new
//! combinational logic minimization technique with applications to
//! cryptology", SEA 2010; circuit listing of the Yale Circuit Minimization
//! Team). It is written once, generically over a Boolean algebra, and used
//! by the circuit library (`Builder` wires) and, in tests, by the bytewise
//! reference key expansion of `hash` (single bits); the portable cipher
//! itself is the fixsliced one in `hash::fixslice`.

/// A Boolean algebra over `Self::T` (gates in a builder, or operations on
/// bits).
pub(crate) trait BoolOps {
    type T: Copy;
    fn xor(&mut self, a: Self::T, b: Self::T) -> Self::T;
    fn and(&mut self, a: Self::T, b: Self::T) -> Self::T;
    fn not(&mut self, a: Self::T) -> Self::T;
}

/// Boolean operations on single bits, for the S-box on one byte ([`sbox_byte`]).
#[cfg(test)]
struct Bits;

#[cfg(test)]
impl BoolOps for Bits {
    type T = bool;
    fn xor(&mut self, a: bool, b: bool) -> bool {
        a ^ b
    }
    fn and(&mut self, a: bool, b: bool) -> bool {
        a & b
    }
    fn not(&mut self, a: bool) -> bool {
        !a
    }
}

/// The forward AES S-box. `u[0]` is the most significant bit of the input
/// byte, `u[7]` the least; the output uses the same order.
#[allow(clippy::many_single_char_names)]
pub(crate) fn sbox<O: BoolOps>(o: &mut O, u: [O::T; 8]) -> [O::T; 8] {
    let [u0, u1, u2, u3, u4, u5, u6, u7] = u;
    // Top linear layer.
    let y14 = o.xor(u3, u5);
    let y13 = o.xor(u0, u6);
    let y9 = o.xor(u0, u3);
    let y8 = o.xor(u0, u5);
    let t0 = o.xor(u1, u2);
    let y1 = o.xor(t0, u7);
    let y4 = o.xor(y1, u3);
    let y12 = o.xor(y13, y14);
    let y2 = o.xor(y1, u0);
    let y5 = o.xor(y1, u6);
    let y3 = o.xor(y5, y8);
    let t1 = o.xor(u4, y12);
    let y15 = o.xor(t1, u5);
    let y20 = o.xor(t1, u1);
    let y6 = o.xor(y15, u7);
    let y10 = o.xor(y15, t0);
    let y11 = o.xor(y20, y9);
    let y7 = o.xor(u7, y11);
    let y17 = o.xor(y10, y11);
    let y19 = o.xor(y10, y8);
    let y16 = o.xor(t0, y11);
    let y21 = o.xor(y13, y16);
    let y18 = o.xor(u0, y16);
    // Shared non-linear middle (inversion in GF(2^4)^2).
    let t2 = o.and(y12, y15);
    let t3 = o.and(y3, y6);
    let t4 = o.xor(t3, t2);
    let t5 = o.and(y4, u7);
    let t6 = o.xor(t5, t2);
    let t7 = o.and(y13, y16);
    let t8 = o.and(y5, y1);
    let t9 = o.xor(t8, t7);
    let t10 = o.and(y2, y7);
    let t11 = o.xor(t10, t7);
    let t12 = o.and(y9, y11);
    let t13 = o.and(y14, y17);
    let t14 = o.xor(t13, t12);
    let t15 = o.and(y8, y10);
    let t16 = o.xor(t15, t12);
    let t17 = o.xor(t4, y20);
    let t18 = o.xor(t6, t16);
    let t19 = o.xor(t9, t14);
    let t20 = o.xor(t11, t16);
    let t21 = o.xor(t17, t14);
    let t22 = o.xor(t18, y19);
    let t23 = o.xor(t19, y21);
    let t24 = o.xor(t20, y18);
    let t25 = o.xor(t21, t22);
    let t26 = o.and(t21, t23);
    let t27 = o.xor(t24, t26);
    let t28 = o.and(t25, t27);
    let t29 = o.xor(t28, t22);
    let t30 = o.xor(t23, t24);
    let t31 = o.xor(t22, t26);
    let t32 = o.and(t31, t30);
    let t33 = o.xor(t32, t24);
    let t34 = o.xor(t23, t33);
    let t35 = o.xor(t27, t33);
    let t36 = o.and(t24, t35);
    let t37 = o.xor(t36, t34);
    let t38 = o.xor(t27, t36);
    let t39 = o.and(t29, t38);
    let t40 = o.xor(t25, t39);
    let t41 = o.xor(t40, t37);
    let t42 = o.xor(t29, t33);
    let t43 = o.xor(t29, t40);
    let t44 = o.xor(t33, t37);
    let t45 = o.xor(t42, t41);
    // Output multiplications.
    let z0 = o.and(t44, y15);
    let z1 = o.and(t37, y6);
    let z2 = o.and(t33, u7);
    let z3 = o.and(t43, y16);
    let z4 = o.and(t40, y1);
    let z5 = o.and(t29, y7);
    let z6 = o.and(t42, y11);
    let z7 = o.and(t45, y17);
    let z8 = o.and(t41, y10);
    let z9 = o.and(t44, y12);
    let z10 = o.and(t37, y3);
    let z11 = o.and(t33, y4);
    let z12 = o.and(t43, y13);
    let z13 = o.and(t40, y5);
    let z14 = o.and(t29, y2);
    let z15 = o.and(t42, y9);
    let z16 = o.and(t45, y14);
    let z17 = o.and(t41, y8);
    // Bottom linear layer.
    let tc1 = o.xor(z15, z16);
    let tc2 = o.xor(z10, tc1);
    let tc3 = o.xor(z9, tc2);
    let tc4 = o.xor(z0, z2);
    let tc5 = o.xor(z1, z0);
    let tc6 = o.xor(z3, z4);
    let tc7 = o.xor(z12, tc4);
    let tc8 = o.xor(z7, tc6);
    let tc9 = o.xor(z8, tc7);
    let tc10 = o.xor(tc8, tc9);
    let tc11 = o.xor(tc6, tc5);
    let tc12 = o.xor(z3, z5);
    let tc13 = o.xor(z13, tc1);
    let tc14 = o.xor(tc4, tc12);
    let s3 = o.xor(tc3, tc11);
    let tc16 = o.xor(z6, tc8);
    let tc17 = o.xor(z14, tc10);
    let tc18 = o.xor(tc13, tc14);
    let x = o.xor(z12, tc18);
    let s7 = o.not(x);
    let tc20 = o.xor(z15, tc16);
    let tc21 = o.xor(tc2, z11);
    let s0 = o.xor(tc3, tc16);
    let x = o.xor(tc10, tc18);
    let s6 = o.not(x);
    let s4 = o.xor(tc14, s3);
    let x = o.xor(s3, tc16);
    let s1 = o.not(x);
    let tc26 = o.xor(tc17, tc20);
    let x = o.xor(tc26, z17);
    let s2 = o.not(x);
    let s5 = o.xor(tc21, tc17);
    [s0, s1, s2, s3, s4, s5, s6, s7]
}

/// The S-box on one byte (constant time: no table).
#[cfg(test)]
pub(crate) fn sbox_byte(x: u8) -> u8 {
    let u: [bool; 8] = core::array::from_fn(|i| (x >> (7 - i)) & 1 == 1);
    let s = sbox(&mut Bits, u);
    s.iter().fold(0u8, |acc, &b| (acc << 1) | u8::from(b))
}

#[cfg(test)]
mod tests {
    /// The S-box from its definition: inversion in GF(2^8) followed by the
    /// affine map.
    fn reference(x: u8) -> u8 {
        fn mul(mut a: u8, mut b: u8) -> u8 {
            let mut p = 0u8;
            while b != 0 {
                if b & 1 == 1 {
                    p ^= a;
                }
                let hi = a & 0x80;
                a <<= 1;
                if hi != 0 {
                    a ^= 0x1b;
                }
                b >>= 1;
            }
            p
        }
        let inv = (1..=255u8).find(|&y| mul(x, y) == 1).unwrap_or(0);
        inv ^ inv.rotate_left(1)
            ^ inv.rotate_left(2)
            ^ inv.rotate_left(3)
            ^ inv.rotate_left(4)
            ^ 0x63
    }

    #[test]
    fn all_256_values() {
        assert_eq!(super::sbox_byte(0x00), 0x63);
        assert_eq!(super::sbox_byte(0x53), 0xed);
        for x in 0..=255u8 {
            assert_eq!(super::sbox_byte(x), reference(x), "x = {x:#04x}");
        }
    }

    #[test]
    fn and_count_is_32() {
        struct Count(usize);
        impl super::BoolOps for Count {
            type T = ();
            fn xor(&mut self, _: (), _: ()) {}
            fn and(&mut self, _: (), _: ()) {
                self.0 += 1;
            }
            fn not(&mut self, _: ()) {}
        }
        let mut c = Count(0);
        super::sbox(&mut c, [(); 8]);
        assert_eq!(c.0, 32);
    }
}
