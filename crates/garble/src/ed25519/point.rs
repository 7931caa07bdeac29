//! Fixed-base scalar multiplication `r B` with public precomputed tables,
//! and the point encoding, as a generated circuit.
//!
//! # Method
//!
//! The 253-bit scalar is cut into windows of [`WINDOW`] bits. Window `i`
//! has a public table of `j 2^(WINDOW i) B` for every digit `j`, computed
//! in plain code (see [`tables`]). A secret digit selects its entry with no
//! multiplication: the digit's one-hot vector costs `2^WINDOW - 2` AND
//! gates (a product tree), and each output bit of the lookup is then the
//! XOR of the one-hot bits of the entries whose bit is set (or 1 minus the
//! XOR over the entries whose bit is clear, whichever set is smaller):
//! only free gates, because the table is public. The first window's entry
//! is the affine point `(x, y, xy)`, which is already in extended
//! coordinates with `Z = 1`; every further window adds its entry, stored
//! as `(y + x, y - x, 2 d x y)` ("Niels" form), with the mixed unified
//! addition of ref10's `ge_madd` (7 field multiplications, complete on
//! Ed25519, so digit 0, the identity, needs no special case). The last
//! addition skips `T` (6 multiplications).
//!
//! Unsigned digits: with lookups this cheap, signed digits (half the table,
//! plus a conditional negation) would save about `2^(WINDOW-1)` AND gates
//! per window, under 1% of the total, and cost a recoding carry chain.
//!
//! # Encoding
//!
//! One inversion of `Z` (ref10's addition chain), two multiplications,
//! canonical reduction, and the low bit of `x` into bit 255 of `y`.

use std::sync::OnceLock;

use super::field;
use super::plain::{D2, Ext, Fe, batch_affine};
use crate::generator::{Gen, W, Word};

/// Window width in bits.
pub const WINDOW: usize = 13;

/// Scalar bits (scalars below `L < 2^253`).
pub const SCALAR_BITS: usize = 253;

/// Number of windows.
pub const WINDOWS: usize = SCALAR_BITS.div_ceil(WINDOW);

/// The public tables: per window, per digit, three canonical field
/// elements (`x, y, xy` for window 0; `y + x, y - x, 2dxy` after), stored
/// transposed: for each of the 768 output bits, the set of digits whose
/// entry has that bit set, as a bit set.
pub struct Tables {
    windows: Vec<Window>,
}

/// One window's table, transposed (see [`Tables`]).
pub struct Window {
    /// Number of digits (entries).
    pub entries: usize,
    words: usize,
    cols: Vec<u64>,
}

impl Window {
    fn new(entries: &[[[u8; 32]; 3]]) -> Window {
        let n = entries.len();
        let words = n.div_ceil(64);
        let mut cols = vec![0u64; 768 * words];
        // Each byte position of 64 entries at a time: eight entries' bytes in a word,
        // transposed as an 8x8 bit matrix, give eight bits of each of the eight columns.
        // (Bit by bit, one entry at a time, this took more than half of the tables' 150-210 ms.)
        for (wi, group) in entries.chunks(64).enumerate() {
            for k in 0..3 {
                for byte in 0..32 {
                    let mut col = [0u64; 8];
                    for (j, eight) in group.chunks(8).enumerate() {
                        let x = eight
                            .iter()
                            .enumerate()
                            .fold(0u64, |x, (i, e)| x | u64::from(e[k][byte]) << (8 * i));
                        let y = transpose8(x);
                        for (bit, c) in col.iter_mut().enumerate() {
                            *c |= ((y >> (8 * bit)) & 0xff) << (8 * j);
                        }
                    }
                    for (bit, c) in col.into_iter().enumerate() {
                        cols[(k * 256 + byte * 8 + bit) * words + wi] = c;
                    }
                }
            }
        }
        Window {
            entries: n,
            words,
            cols,
        }
    }

    /// The digits whose entry has output bit `k` (`0..768`: field element
    /// `k / 256`, bit `k % 256`) set.
    pub fn column(&self, k: usize) -> &[u64] {
        &self.cols[k * self.words..(k + 1) * self.words]
    }
}

/// The 8x8 bit matrix in `x` (row `r` its byte `r`, column `c` bit `c` of a byte)
/// transposed: bit `r` of byte `c` of the result is bit `c` of byte `r` of `x` (Hacker's
/// Delight, 2nd ed., section 7-3: swap 1x1, 2x2 then 4x4 blocks).
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

impl Tables {
    fn compute() -> Tables {
        let d2 = Fe::from_bytes(&D2);
        let mut base = Ext::base();
        let mut windows = Vec::with_capacity(WINDOWS);
        for i in 0..WINDOWS {
            let bits = WINDOW.min(SCALAR_BITS - WINDOW * i);
            let n = 1usize << bits;
            let mut pts = Vec::with_capacity(n);
            let mut cur = Ext::IDENTITY;
            for _ in 0..n {
                pts.push(cur);
                cur = cur.add(&base);
            }
            // cur = 2^bits base: the next window's base.
            base = cur;
            let aff = batch_affine(&pts);
            let entries: Vec<[[u8; 32]; 3]> = aff
                .into_iter()
                .map(|(xb, yb)| {
                    let (x, y) = (Fe::from_bytes(&xb), Fe::from_bytes(&yb));
                    let xy = x.mul(y);
                    if i == 0 {
                        [xb, yb, xy.to_bytes()]
                    } else {
                        [
                            y.add(x).to_bytes(),
                            y.sub(x).to_bytes(),
                            xy.mul(d2).to_bytes(),
                        ]
                    }
                })
                .collect();
            windows.push(Window::new(&entries));
        }
        Tables { windows }
    }

    /// Window `i`.
    pub fn window(&self, i: usize) -> &Window {
        &self.windows[i]
    }
}

/// The tables, computed once per process (about 15 MB; 0.09 s on the 2-vCPU dev VM:
/// "The fixed-base tables in half the time" in `docs/ed25519-2pc.md`).
pub fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(Tables::compute)
}

/// The one-hot vector of a digit (`2^bits.len()` entries): entry `j` is 1
/// exactly when the digit is `j`. `2^n - 2` AND gates.
pub fn one_hot<G: Gen>(g: &mut G, bits: &[W<G::L>]) -> Word<G::L> {
    let mut v: Word<G::L> = vec![W::ONE];
    for &b in bits {
        // Bit k of the digit: entries j with bit k set are the upper half.
        let mut next = Vec::with_capacity(2 * v.len());
        let mut hi = Vec::with_capacity(v.len());
        for &e in &v {
            let t = g.and(e, b);
            next.push(g.xor(e, t));
            hi.push(t);
        }
        next.extend(hi);
        v = next;
    }
    v
}

/// Selects the entry of a public table that `onehot` points at: three
/// 256-bit words, with free gates only.
pub fn lookup<G: Gen>(g: &mut G, onehot: &[W<G::L>], table: &Window) -> [Word<G::L>; 3] {
    debug_assert_eq!(onehot.len(), table.entries);
    let n = table.entries;
    // Per output bit: the XOR of the one-hot bits of the entries with the bit set, or its
    // complement over the others (the one-hot bits sum to 1), whichever is shorter.
    let bits: Vec<(bool, Vec<u64>)> = (0..768)
        .map(|k| {
            let col = table.column(k);
            let ones: usize = col.iter().map(|w| w.count_ones() as usize).sum();
            let invert = 2 * ones > n;
            let mask = col
                .iter()
                .enumerate()
                .map(|(wi, &w)| {
                    let m = if invert { !w } else { w };
                    if (wi + 1) * 64 > n {
                        m & (u64::MAX >> (64 * (wi + 1) - n))
                    } else {
                        m
                    }
                })
                .collect();
            (invert, mask)
        })
        .collect();
    let out = g.xor_select(onehot, &bits);
    let mut words = out.chunks_exact(256).map(<[W<G::L>]>::to_vec);
    core::array::from_fn(|_| words.next().unwrap_or_default())
}

/// A point in extended coordinates (field elements as 256-bit words).
#[derive(Clone, Debug)]
pub struct Point<L> {
    /// `X`
    pub x: Word<L>,
    /// `Y`
    pub y: Word<L>,
    /// `Z`
    pub z: Word<L>,
    /// `T = XY/Z` (empty after the last addition, which skips it)
    pub t: Word<L>,
}

/// `p + q` for `q` in Niels form `(y + x, y - x, 2dxy)` (ref10's
/// `ge_madd`); `with_t: false` skips `T` (one multiplication less).
pub fn madd<G: Gen>(g: &mut G, p: &Point<G::L>, q: &[Word<G::L>; 3], with_t: bool) -> Point<G::L> {
    let ypx = field::add(g, &p.y, &p.x);
    let ymx = field::sub(g, &p.y, &p.x);
    let a = field::mul(g, &ymx, &q[1]);
    let b = field::mul(g, &ypx, &q[0]);
    let c = field::mul(g, &p.t, &q[2]);
    let d = field::mul2(g, &p.z);
    let e = field::sub(g, &b, &a);
    let f = field::sub(g, &d, &c);
    let gg = field::add(g, &d, &c);
    let h = field::add(g, &b, &a);
    Point {
        x: field::mul(g, &e, &f),
        y: field::mul(g, &gg, &h),
        z: field::mul(g, &f, &gg),
        t: if with_t {
            field::mul(g, &e, &h)
        } else {
            Vec::new()
        },
    }
}

/// `r B` for a scalar of at most [`SCALAR_BITS`] bits (the result has no
/// `T`).
pub fn mul_base<G: Gen>(g: &mut G, r: &[W<G::L>]) -> Point<G::L> {
    let t = tables();
    let mut acc: Option<Point<G::L>> = None;
    for i in 0..WINDOWS {
        let lo = WINDOW * i;
        let hi = (lo + WINDOW).min(SCALAR_BITS);
        let digit: Word<G::L> = (lo..hi)
            .map(|k| r.get(k).copied().unwrap_or(W::ZERO))
            .collect();
        let oh = one_hot(g, &digit);
        let e = lookup(g, &oh, t.window(i));
        acc = Some(match acc {
            None => {
                let [x, y, xy] = e;
                Point {
                    x,
                    y,
                    z: field::constant(&Fe::ONE.to_bytes()),
                    t: xy,
                }
            }
            Some(p) => madd(g, &p, &e, i + 1 < WINDOWS),
        });
    }
    // WINDOWS >= 1, so acc is set.
    acc.unwrap_or_else(|| Point {
        x: field::constant(&[0; 32]),
        y: field::constant(&Fe::ONE.to_bytes()),
        z: field::constant(&Fe::ONE.to_bytes()),
        t: Vec::new(),
    })
}

/// The 32-byte encoding of `(X : Y : Z)`: `y = Y/Z` canonical, with the low
/// bit of `x = X/Z` in bit 255.
pub fn encode<G: Gen>(g: &mut G, p: &Point<G::L>) -> Word<G::L> {
    let zi = field::invert(g, &p.z);
    let x = field::mul(g, &p.x, &zi);
    let y = field::mul(g, &p.y, &zi);
    let x = field::freeze(g, &x);
    let mut y = field::freeze(g, &y);
    y[255] = x[0];
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{bits_from_bytes, bytes_from_bits};
    use crate::generator::{Counter, Plain, plain_bits, plain_word};
    use curve25519_dalek::edwards::EdwardsPoint;
    use curve25519_dalek::scalar::Scalar;
    use proptest::prelude::*;

    fn plain_mul_base(s: &Scalar) -> [u8; 32] {
        let r = plain_word(&bits_from_bytes(s.as_bytes(), SCALAR_BITS));
        let p = mul_base(&mut Plain::default(), &r);
        let e = encode(&mut Plain::default(), &p);
        let mut out = [0u8; 32];
        out.copy_from_slice(&bytes_from_bits(&plain_bits(&e)));
        out
    }

    #[test]
    fn one_hot_and_lookup() {
        let mut g = Plain::default();
        for d in 0..16u8 {
            let bits = plain_word(&bits_from_bytes(&[d], 4));
            let oh = plain_bits(&one_hot(&mut g, &bits));
            assert_eq!(oh.iter().filter(|&&b| b).count(), 1);
            assert!(oh[d as usize]);
        }
        let mut k = Counter::new();
        let bits = k.inputs(WINDOW);
        let _ = one_hot(&mut k, &bits);
        assert_eq!(k.and, (1 << WINDOW) - 2);
    }

    #[test]
    fn edge_scalars_match_dalek() {
        for s in [
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::from(1u64 << 13),
        ] {
            assert_eq!(plain_mul_base(&s), EdwardsPoint::mul_base(&s).compress().0);
        }
    }

    #[test]
    fn transpose8_moves_every_bit_to_its_transposed_place() {
        for r in 0..8 {
            for c in 0..8 {
                let x = 1u64 << (8 * r + c);
                assert_eq!(transpose8(x), 1u64 << (8 * c + r), "bit {c} of byte {r}");
            }
        }
        let x = 0x0123_4567_89ab_cdefu64;
        assert_eq!(transpose8(transpose8(x)), x);
    }

    /// A window's columns against the definition, one bit at a time: bit `t` of word `w` of
    /// column `k * 256 + 8 * byte + bit` is bit `bit` of byte `byte` of element `k` of entry
    /// `64 w + t`. Sizes with a partial last group of 64 and of 8 entries.
    #[test]
    fn window_columns_are_the_entries_bits() {
        let mut prg = crate::hash::Prg::from_seed([7; 16]);
        for n in [1usize, 7, 8, 64, 65, 131, 256] {
            let entries: Vec<[[u8; 32]; 3]> = (0..n)
                .map(|_| {
                    let mut e = [[0u8; 32]; 3];
                    for part in &mut e {
                        prg.bytes(part);
                    }
                    e
                })
                .collect();
            let w = Window::new(&entries);
            assert_eq!(w.entries, n);
            for k in 0..768 {
                let col = w.column(k);
                assert_eq!(col.len(), n.div_ceil(64));
                for (t, e) in entries.iter().enumerate() {
                    let want = (e[k / 256][(k % 256) / 8] >> (k % 8)) & 1 == 1;
                    assert_eq!(
                        (col[t / 64] >> (t % 64)) & 1 == 1,
                        want,
                        "n {n} column {k} entry {t}"
                    );
                }
                // No bit past the last entry.
                if n % 64 != 0 {
                    assert_eq!(col[n / 64] >> (n % 64), 0, "n {n} column {k}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4))]
        #[test]
        fn random_scalars_match_dalek(b in proptest::array::uniform32(any::<u8>())) {
            let s = Scalar::from_bytes_mod_order(b);
            prop_assert_eq!(plain_mul_base(&s), EdwardsPoint::mul_base(&s).compress().0);
        }
    }
}
