//! [`Aes128`]: AES-128 encryption with a backend chosen at run time
//! ([`Backend`]), and the hash's tweakable form [`Aes128::tccr`].

use std::fmt;

use thiserror::Error;

use super::{Block, portable};
#[cfg(test)]
use crate::sbox::sbox_byte;

/// Which AES implementation to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// AES-NI through `core::arch` (x86-64 only), with 256-bit VAES when
    /// the CPU has it.
    AesNi,
    /// Portable, constant-time fixsliced AES (RustCrypto's software AES,
    /// four blocks per 64-bit word).
    Portable,
}

/// The requested backend is not supported by this CPU.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("AES backend {0:?} is not available on this CPU")]
pub struct BackendUnavailable(pub Backend);

impl Backend {
    /// The fastest backend this CPU supports (checked at run time).
    pub fn detect() -> Backend {
        if Backend::AesNi.available() {
            Backend::AesNi
        } else {
            Backend::Portable
        }
    }

    /// Whether this backend can run here.
    pub fn available(self) -> bool {
        match self {
            Backend::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Backend::AesNi => {
                std::arch::is_x86_feature_detected!("aes")
                    && std::arch::is_x86_feature_detected!("sse2")
                    && std::arch::is_x86_feature_detected!("ssse3")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Backend::AesNi => false,
        }
    }
}

/// The expanded key of one backend.
#[derive(Clone)]
pub(super) enum Keys {
    /// AES-NI (with SSSE3, which every AES-NI CPU has): the 11 round keys as
    /// bytes, and whether 256-bit VAES (with AVX2) is present.
    Ni {
        /// Round keys, FIPS-197 byte order.
        rk: [[u8; 16]; 11],
        /// VAES and AVX2 were detected at run time.
        vaes: bool,
    },
    /// Portable: the fixsliced round keys (704 bytes, boxed so that an
    /// `Aes128` stays small).
    Portable(Box<portable::Keys>),
}

/// AES-128 encryption with an expanded key (no decryption: nothing here
/// needs it).
#[derive(Clone)]
pub struct Aes128 {
    pub(super) keys: Keys,
}

impl fmt::Debug for Aes128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Aes128")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

/// The public key of the fixed-key permutation `pi`: the first 16 bytes of
/// the binary expansion of pi (any public constant works).
pub const FIXED_KEY: [u8; 16] = [
    0x24, 0x3f, 0x6a, 0x88, 0x85, 0xa3, 0x08, 0xd3, 0x13, 0x19, 0x8a, 0x2e, 0x03, 0x70, 0x73, 0x44,
];

/// The FIPS-197 key expansion, bytewise: the tests' reference for the AES-NI
/// one, which the AES-NI backend uses.
#[cfg(test)]
pub(super) fn expand_key(key: [u8; 16]) -> [[u8; 16]; 11] {
    let mut rk = [[0u8; 16]; 11];
    rk[0] = key;
    let mut rcon = 1u8;
    for r in 1..11 {
        let p = rk[r - 1];
        let mut t = [p[13], p[14], p[15], p[12]];
        for x in t.iter_mut() {
            *x = sbox_byte(*x);
        }
        t[0] ^= rcon;
        rcon = (rcon << 1) ^ (((rcon >> 7) & 1) * 0x1b);
        for c in 0..4 {
            for j in 0..4 {
                let v = p[4 * c + j] ^ if c == 0 { t[j] } else { rk[r][4 * (c - 1) + j] };
                rk[r][4 * c + j] = v;
            }
        }
    }
    rk
}

fn vaes_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("vaes")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl Aes128 {
    /// AES-128 under `key` with the detected backend.
    pub fn new(key: [u8; 16]) -> Aes128 {
        match Aes128::with_backend(key, Backend::detect()) {
            Ok(a) => a,
            // `detect` returns an available backend, and `Portable` always is.
            Err(_) => Aes128::portable(key),
        }
    }

    fn portable(key: [u8; 16]) -> Aes128 {
        Aes128 {
            keys: Keys::Portable(Box::new(portable::key_schedule(&key))),
        }
    }

    /// AES-128 under `key` with a chosen backend.
    pub fn with_backend(key: [u8; 16], backend: Backend) -> Result<Aes128, BackendUnavailable> {
        if !backend.available() {
            return Err(BackendUnavailable(backend));
        }
        Ok(match backend {
            #[cfg(target_arch = "x86_64")]
            Backend::AesNi => Aes128 {
                keys: Keys::Ni {
                    // SAFETY: `backend.available()` confirmed AES-NI, SSE2 and
                    // SSSE3 at run time, the features `expand_key_ni` enables.
                    rk: unsafe { super::ni::expand_key_ni(key) },
                    vaes: vaes_available(),
                },
            },
            #[cfg(not(target_arch = "x86_64"))]
            Backend::AesNi => unreachable!("AES-NI is never available off x86-64"),
            Backend::Portable => Aes128::portable(key),
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        match self.keys {
            Keys::Ni { .. } => Backend::AesNi,
            Keys::Portable(_) => Backend::Portable,
        }
    }

    /// The AES-NI round keys when 256-bit VAES is present too.
    #[inline(always)]
    pub(super) fn vaes_keys(&self) -> Option<&[[u8; 16]; 11]> {
        match &self.keys {
            Keys::Ni { rk, vaes: true } => Some(rk),
            _ => None,
        }
    }

    /// Encrypts every block in place.
    pub fn encrypt_blocks(&self, blocks: &mut [Block]) {
        match &self.keys {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Keys::Ni` is only constructed after
            // `Backend::available` confirmed AES-NI and SSE2 at run time.
            Keys::Ni { rk, .. } => unsafe { super::ni::encrypt(rk, blocks) },
            #[cfg(not(target_arch = "x86_64"))]
            Keys::Ni { .. } => unreachable!("AES-NI is never available off x86-64"),
            Keys::Portable(k) => portable::encrypt(k, blocks),
        }
    }

    /// `xs[i] = pi(sigma(xs[i]) ^ t[i]) ^ sigma(xs[i]) ^ t[i]` for every `i`
    /// (the hash of the module documentation, with this cipher as `pi`).
    /// `tweaks` must be at least as long as `xs`.
    #[inline]
    pub fn tccr(&self, xs: &mut [Block], tweaks: &[Block]) {
        let tweaks = &tweaks[..xs.len()];
        match &self.keys {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `vaes` is set only when AES-NI, AVX2 and VAES were
            // detected at run time.
            Keys::Ni { rk, vaes: true } => unsafe { super::ni::tccr_vaes(rk, xs, tweaks) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `encrypt_blocks`.
            Keys::Ni { rk, .. } => unsafe { super::ni::tccr(rk, xs, tweaks) },
            #[cfg(not(target_arch = "x86_64"))]
            Keys::Ni { .. } => unreachable!("AES-NI is never available off x86-64"),
            Keys::Portable(k) => portable::tccr(k, xs, tweaks),
        }
    }

    /// Turns VAES off (AES-NI only): tests run the 128-bit AES-NI code on a
    /// CPU with VAES.
    #[cfg(test)]
    pub(super) fn no_vaes(&mut self) {
        if let Keys::Ni { vaes, .. } = &mut self.keys {
            *vaes = false;
        }
    }
}
