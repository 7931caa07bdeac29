//! [`Prg`]: AES-128 in counter mode, and the operating system's randomness.

use std::fmt;

use thiserror::Error;

use super::{Aes128, Backend, BackendUnavailable, Block};

/// A pseudorandom generator: AES-128 in counter mode under a secret seed.
pub struct Prg {
    aes: Aes128,
    counter: u128,
    buf: [Block; 8],
    used: usize,
}

impl fmt::Debug for Prg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Prg(..)")
    }
}

/// The operating system's random source failed.
#[derive(Debug, Error)]
#[error("operating system randomness unavailable: {0}")]
pub struct RandomnessError(pub String);

/// Fills `buf` from the operating system's random source.
pub fn os_random(buf: &mut [u8]) -> Result<(), RandomnessError> {
    getrandom::fill(buf).map_err(|e| RandomnessError(e.to_string()))
}

impl Prg {
    /// A PRG seeded from the operating system.
    pub fn from_os() -> Result<Prg, RandomnessError> {
        let mut seed = [0u8; 16];
        os_random(&mut seed)?;
        Ok(Prg::from_seed(seed))
    }

    /// A PRG from a 16-byte seed (deterministic).
    pub fn from_seed(seed: [u8; 16]) -> Prg {
        Prg::from_aes(Aes128::new(seed))
    }

    /// A PRG from a seed with a chosen backend.
    pub fn from_seed_with(seed: [u8; 16], backend: Backend) -> Result<Prg, BackendUnavailable> {
        Ok(Prg::from_aes(Aes128::with_backend(seed, backend)?))
    }

    fn from_aes(aes: Aes128) -> Prg {
        Prg {
            aes,
            counter: 0,
            buf: [Block::ZERO; 8],
            used: 8,
        }
    }

    /// Fills `out` with pseudorandom blocks.
    pub fn fill(&mut self, out: &mut [Block]) {
        let mut rest = out;
        // Drain the buffer first, then generate directly into `out`.
        while self.used < 8 && !rest.is_empty() {
            rest[0] = self.buf[self.used];
            self.used += 1;
            rest = &mut rest[1..];
        }
        for b in rest.iter_mut() {
            *b = Block(self.counter);
            self.counter += 1;
        }
        self.aes.encrypt_blocks(rest);
    }

    /// One pseudorandom block.
    pub fn block(&mut self) -> Block {
        if self.used == 8 {
            for (i, b) in self.buf.iter_mut().enumerate() {
                *b = Block(self.counter + i as u128);
            }
            self.counter += 8;
            self.aes.encrypt_blocks(&mut self.buf);
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }

    /// Pseudorandom bytes.
    pub fn bytes(&mut self, out: &mut [u8]) {
        for c in out.chunks_mut(16) {
            let b = self.block().to_bytes();
            c.copy_from_slice(&b[..c.len()]);
        }
    }
}
