//! [`Block`]: 128 bits, the unit of labels, hash outputs and AES blocks.

use std::fmt;

/// A 128-bit block: a wire label, a hash output, an AES block. The bytes of
/// the block as AES sees them are `to_le_bytes()`.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(transparent)]
pub struct Block(pub u128);

impl fmt::Debug for Block {
    /// Blocks are usually secret labels: never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Block(..)")
    }
}

impl Block {
    /// The all-zero block.
    pub const ZERO: Block = Block(0);

    /// The least significant bit (the point-and-permute colour of a label).
    #[inline(always)]
    pub fn lsb(self) -> bool {
        self.0 & 1 == 1
    }

    /// The block from 16 bytes.
    pub fn from_bytes(b: [u8; 16]) -> Block {
        Block(u128::from_le_bytes(b))
    }

    /// The 16 bytes of the block.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }

    /// `self` if `bit`, else zero (branch free).
    #[inline(always)]
    pub fn select(self, bit: bool) -> Block {
        Block(self.0 & (u128::from(bit)).wrapping_neg())
    }

    /// The orthomorphism `sigma(xL || xR) = (xL ^ xR) || xL` (xL the high half).
    #[inline(always)]
    pub fn sigma(self) -> Block {
        let hi = self.0 >> 64;
        let lo = self.0 & u128::from(u64::MAX);
        Block(((hi ^ lo) << 64) | hi)
    }
}

impl std::ops::BitXor for Block {
    type Output = Block;
    #[inline(always)]
    fn bitxor(self, r: Block) -> Block {
        Block(self.0 ^ r.0)
    }
}

impl std::ops::BitXorAssign for Block {
    #[inline(always)]
    fn bitxor_assign(&mut self, r: Block) {
        self.0 ^= r.0;
    }
}
