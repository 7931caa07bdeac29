//! Emulated attestation: quotes in the shape of an SGX DCAP quote, signed by the emulated
//! platform's attestation key.
//!
//! **Emulated.** No hardware signs these quotes. The platform's attestation key is derived
//! from the same platform root key that sealing uses ([`crate::seal::RootKey`]), a file that
//! any process of the user can read. A quote therefore proves what it claims only against
//! a host that does not read that file: it catches a host that substitutes messages (a key
//! of its own for the enclave's), which is what the scenarios exercise, but not one that
//! signs quotes itself. On SGX the key sits in the Quoting Enclave and is certified by
//! Intel's PCK chain; here the platform's public key ([`PlatformIdentity`]) is the whole
//! chain, and a verifier must get it from somewhere the host cannot rewrite.
//!
//! # Keys
//!
//! * The **attestation key** is an Ed25519 key whose seed is
//!   HKDF-SHA256(salt = `"ccbench-attestation-key-v1"`, IKM = root key, info =
//!   `"ed25519 seed"`): one per platform, stable across runs, and never on disk itself.
//! * Its public half is the **platform identity** ([`PlatformIdentity`]), exportable as 32
//!   bytes or 64 hex digits, and computable from the key directory
//!   ([`PlatformIdentity::load`]).
//!
//! # Who chooses the report data
//!
//! As SGX's EREPORT, quoting is done *inside* the enclave: a service calls
//! [`crate::Ctx::quote`] with report data it computed itself (typically the hash of a public
//! key it generated), and hands the quote out through an ecall of its own. The host handle
//! deliberately has no call that quotes data of the host's choosing: with one, a host could
//! obtain a genuine quote over its own key, the exact substitution attestation exists to
//! catch. The host may learn the platform identity ([`crate::Enclave::platform_identity`]).
//!
//! # Format (version 1, little-endian, 240 bytes)
//!
//! ```text
//! 0    magic "CCQUOTE\0"                      8
//! 8    version = 1 (u16)                      2
//! 10   attestation key type = 1 Ed25519 (u16) 2
//! 12   TEE type = 1 emulated (u32)            4
//! 16   measurement (MRENCLAVE analogue)       32
//! 48   signer (MRSIGNER analogue)             32
//! 80   report data                            64
//! 144  attestation public key                 32
//! 176  Ed25519 signature over bytes 0..176    64
//! ```
//!
//! The shape follows a DCAP quote (header, the report body's MRENCLAVE, MRSIGNER and
//! REPORTDATA, then the attestation key and the signature over everything before it),
//! without the fields an emulation has no value for (SVNs, attributes, the certification
//! chain).
//!
//! # Verifying
//!
//! [`verify`] checks, in order: the length, the magic, version, key type and TEE type
//! (structure); that the quote's attestation key is the expected platform's
//! ([`QuoteError::WrongPlatform`]); the signature ([`QuoteError::BadSignature`]: any changed
//! byte of a signed field); and finally the measurement
//! ([`QuoteError::WrongMeasurement`]: a genuine quote of another enclave). Only then is the
//! report data returned.

use std::path::Path;

use aws_lc_rs::hkdf;
use aws_lc_rs::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use thiserror::Error;

use crate::seal::{Identity, RootKey, Sealer};

/// The quote format's magic.
pub const MAGIC: &[u8; 8] = b"CCQUOTE\0";
/// The quote format's version.
pub const VERSION: u16 = 1;
/// Attestation key type: Ed25519.
pub const KEY_TYPE_ED25519: u16 = 1;
/// TEE type: an emulated platform (ccbench's `native` or `sandbox` backend), no hardware.
pub const TEE_EMULATED: u32 = 1;
/// Bytes of report data in a quote (SGX's REPORTDATA).
pub const REPORT_DATA_LEN: usize = 64;
/// Bytes of a platform identity (an Ed25519 public key).
pub const IDENTITY_LEN: usize = 32;
/// Bytes of the signature.
pub const SIGNATURE_LEN: usize = 64;
/// Bytes covered by the signature: everything before it.
pub const SIGNED_LEN: usize = 176;
/// Bytes of a quote.
pub const QUOTE_LEN: usize = SIGNED_LEN + SIGNATURE_LEN;

const OFF_MEASUREMENT: usize = 16;
const OFF_SIGNER: usize = 48;
const OFF_REPORT_DATA: usize = 80;
const OFF_KEY: usize = 144;

const KEY_SALT: &[u8] = b"ccbench-attestation-key-v1";
const KEY_INFO: &[u8] = b"ed25519 seed";

/// Why a quote could not be made or was refused. Every refusal names what did not match.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuoteError {
    /// Shorter than a quote.
    #[error("quote truncated: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Bytes after the signature.
    #[error("{0} trailing bytes after the quote")]
    Trailing(usize),
    /// Not a quote.
    #[error("not a quote (bad magic)")]
    BadMagic,
    /// A format version this build does not read.
    #[error("unsupported quote version {0}")]
    UnsupportedVersion(u16),
    /// An attestation key type this build does not verify.
    #[error("unsupported attestation key type {0}")]
    UnsupportedKeyType(u16),
    /// A TEE type this build does not know.
    #[error("unsupported TEE type {0} (this build verifies emulated quotes only)")]
    UnsupportedTee(u32),
    /// Signed by another platform's attestation key.
    #[error("quote from another platform: signed by {got}, expected {expected}")]
    WrongPlatform {
        /// The expected platform identity.
        expected: PlatformIdentity,
        /// The quote's attestation key.
        got: PlatformIdentity,
    },
    /// The signature does not verify: some signed byte was changed.
    #[error("quote signature does not verify (a signed field was changed)")]
    BadSignature,
    /// A genuine quote of another enclave.
    #[error("quote of another enclave: measurement {got}, expected {expected}")]
    WrongMeasurement {
        /// The expected measurement, hex.
        expected: String,
        /// The quote's measurement, hex.
        got: String,
    },
    /// More report data than a quote holds.
    #[error("report data of {0} bytes: a quote holds at most {REPORT_DATA_LEN}")]
    ReportDataTooLong(usize),
    /// The enclave was started without platform keys (see
    /// [`crate::EnclaveBuilder::sealing`]), so it cannot quote.
    #[error("the enclave has no platform keys: start it with sealing enabled to quote")]
    NotEnabled,
    /// The platform key could not be read or the attestation key derived.
    #[error("platform attestation key: {0}")]
    Key(String),
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A platform's identity: the public half of its attestation key (Ed25519, 32 bytes). What a
/// verifier must know in advance, as it knows Intel's root certificate for SGX.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlatformIdentity(pub [u8; IDENTITY_LEN]);

impl std::fmt::Debug for PlatformIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlatformIdentity({})", hex(&self.0))
    }
}

impl std::fmt::Display for PlatformIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl PlatformIdentity {
    /// The identity of the platform whose root key is `root`.
    pub fn of_root_key(root: &RootKey) -> Result<Self, QuoteError> {
        Ok(AttestationKey::derive(root)?.identity())
    }

    /// The identity of the platform whose root key lives in `dir` (created there if
    /// missing, as an enclave with sealing would).
    pub fn load(dir: &Path) -> Result<Self, QuoteError> {
        let root = RootKey::load_or_create(dir).map_err(|e| QuoteError::Key(e.to_string()))?;
        Self::of_root_key(&root)
    }

    /// The 64 hex digits of the key.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Parses 64 hex digits (either case, surrounding white space ignored).
    pub fn from_hex(s: &str) -> Result<Self, QuoteError> {
        let s = s.trim();
        let bad = || QuoteError::Key(format!("a platform identity is 64 hex digits, got {s:?}"));
        if s.len() != 2 * IDENTITY_LEN || !s.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; IDENTITY_LEN];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(PlatformIdentity(out))
    }
}

/// The 64 bytes an enclave binds into its quote (SGX's REPORTDATA).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReportData(pub [u8; REPORT_DATA_LEN]);

impl std::fmt::Debug for ReportData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReportData({})", hex(&self.0))
    }
}

impl ReportData {
    /// `bytes` (at most 64) followed by zeros: a 32-byte hash takes the first half, as SGX
    /// applications commonly place a SHA-256 there.
    pub fn from_prefix(bytes: &[u8]) -> Result<Self, QuoteError> {
        if bytes.len() > REPORT_DATA_LEN {
            return Err(QuoteError::ReportDataTooLong(bytes.len()));
        }
        let mut d = [0u8; REPORT_DATA_LEN];
        d[..bytes.len()].copy_from_slice(bytes);
        Ok(ReportData(d))
    }
}

/// The platform's attestation key. Its private half never appears in `Debug` output.
pub struct AttestationKey {
    pair: Ed25519KeyPair,
    identity: PlatformIdentity,
}

impl std::fmt::Debug for AttestationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttestationKey")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

struct SeedLen;
impl hkdf::KeyType for SeedLen {
    fn len(&self) -> usize {
        32
    }
}

impl AttestationKey {
    /// Derives the platform's attestation key from its root key (see the module docs).
    pub fn derive(root: &RootKey) -> Result<Self, QuoteError> {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, KEY_SALT).extract(root.secret_bytes());
        let okm = prk
            .expand(&[KEY_INFO], SeedLen)
            .map_err(|_| QuoteError::Key("HKDF expand failed".into()))?;
        let mut seed = [0u8; 32];
        okm.fill(&mut seed)
            .map_err(|_| QuoteError::Key("HKDF fill failed".into()))?;
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed);
        seed.fill(0);
        std::hint::black_box(&seed);
        let pair = pair.map_err(|e| QuoteError::Key(format!("Ed25519 key: {e}")))?;
        let public: [u8; IDENTITY_LEN] = pair
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| QuoteError::Key("Ed25519 public key is not 32 bytes".into()))?;
        Ok(AttestationKey {
            pair,
            identity: PlatformIdentity(public),
        })
    }

    /// The platform identity (the public half).
    pub fn identity(&self) -> PlatformIdentity {
        self.identity
    }
}

/// Quotes for one enclave identity under one platform's attestation key: what
/// [`crate::Ctx::quote`] uses inside the enclave.
#[derive(Debug)]
pub struct Quoter {
    key: AttestationKey,
    enclave: Identity,
}

impl Quoter {
    /// A quoter for the enclave `identity` on the platform whose root key is `root`.
    pub fn new(root: &RootKey, identity: Identity) -> Result<Self, QuoteError> {
        Ok(Quoter {
            key: AttestationKey::derive(root)?,
            enclave: identity,
        })
    }

    /// The platform identity quotes verify against.
    pub fn platform(&self) -> PlatformIdentity {
        self.key.identity()
    }

    /// The enclave identity quoted.
    pub fn enclave(&self) -> &Identity {
        &self.enclave
    }

    /// A signed quote of this enclave with `report_data`.
    pub fn quote(&self, report_data: &ReportData) -> Vec<u8> {
        let q = Quote {
            measurement: self.enclave.measurement,
            signer: self.enclave.signer,
            report_data: *report_data,
            platform: self.key.identity(),
            signature: [0; SIGNATURE_LEN],
        };
        let mut out = q.signed_bytes();
        let sig = self.key.pair.sign(&out);
        out.extend_from_slice(sig.as_ref());
        out
    }
}

/// The keys an enclave gets from its platform: sealing and quoting, both under one root key
/// and bound to one enclave identity.
#[derive(Debug)]
pub(crate) struct PlatformKeys {
    pub(crate) sealer: Sealer,
    pub(crate) quoter: Quoter,
}

impl PlatformKeys {
    /// The keys of enclave `identity` on the platform whose root key is `root`.
    pub(crate) fn new(root: RootKey, identity: Identity) -> Result<Self, QuoteError> {
        let quoter = Quoter::new(&root, identity)?;
        Ok(PlatformKeys {
            sealer: Sealer::new(root, identity),
            quoter,
        })
    }
}

/// A parsed quote. [`Quote::parse`] checks only its structure; [`verify`] checks the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    /// The enclave's measurement (MRENCLAVE analogue).
    pub measurement: [u8; 32],
    /// The enclave's signer (MRSIGNER analogue).
    pub signer: [u8; 32],
    /// The report data the enclave bound.
    pub report_data: ReportData,
    /// The attestation key that signed it.
    pub platform: PlatformIdentity,
    /// The Ed25519 signature over the first [`SIGNED_LEN`] bytes.
    pub signature: [u8; SIGNATURE_LEN],
}

impl Quote {
    fn signed_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(QUOTE_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&KEY_TYPE_ED25519.to_le_bytes());
        out.extend_from_slice(&TEE_EMULATED.to_le_bytes());
        out.extend_from_slice(&self.measurement);
        out.extend_from_slice(&self.signer);
        out.extend_from_slice(&self.report_data.0);
        out.extend_from_slice(&self.platform.0);
        out
    }

    /// The quote's bytes (the format in the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.signed_bytes();
        out.extend_from_slice(&self.signature);
        out
    }

    /// Parses the format without checking the signature. Never panics on any input.
    pub fn parse(bytes: &[u8]) -> Result<Quote, QuoteError> {
        if bytes.len() < QUOTE_LEN {
            // A wrong magic in what is there says more than its length.
            if bytes.len() >= MAGIC.len() && &bytes[..MAGIC.len()] != MAGIC {
                return Err(QuoteError::BadMagic);
            }
            return Err(QuoteError::Truncated {
                needed: QUOTE_LEN,
                got: bytes.len(),
            });
        }
        if &bytes[..8] != MAGIC {
            return Err(QuoteError::BadMagic);
        }
        if bytes.len() > QUOTE_LEN {
            return Err(QuoteError::Trailing(bytes.len() - QUOTE_LEN));
        }
        let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
        let version = u16_at(8);
        if version != VERSION {
            return Err(QuoteError::UnsupportedVersion(version));
        }
        let key_type = u16_at(10);
        if key_type != KEY_TYPE_ED25519 {
            return Err(QuoteError::UnsupportedKeyType(key_type));
        }
        let tee = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
        if tee != TEE_EMULATED {
            return Err(QuoteError::UnsupportedTee(tee));
        }
        let mut q = Quote {
            measurement: [0; 32],
            signer: [0; 32],
            report_data: ReportData([0; REPORT_DATA_LEN]),
            platform: PlatformIdentity([0; IDENTITY_LEN]),
            signature: [0; SIGNATURE_LEN],
        };
        q.measurement
            .copy_from_slice(&bytes[OFF_MEASUREMENT..OFF_SIGNER]);
        q.signer
            .copy_from_slice(&bytes[OFF_SIGNER..OFF_REPORT_DATA]);
        q.report_data
            .0
            .copy_from_slice(&bytes[OFF_REPORT_DATA..OFF_KEY]);
        q.platform.0.copy_from_slice(&bytes[OFF_KEY..SIGNED_LEN]);
        q.signature.copy_from_slice(&bytes[SIGNED_LEN..QUOTE_LEN]);
        Ok(q)
    }
}

/// Verifies a quote against the platform the verifier trusts and the enclave it expects;
/// returns the whole quote. See the module docs for the order of the checks.
pub fn verify_quote(
    quote: &[u8],
    platform: &PlatformIdentity,
    expected_measurement: &[u8; 32],
) -> Result<Quote, QuoteError> {
    let q = Quote::parse(quote)?;
    if q.platform != *platform {
        return Err(QuoteError::WrongPlatform {
            expected: *platform,
            got: q.platform,
        });
    }
    UnparsedPublicKey::new(&ED25519, &platform.0)
        .verify(&quote[..SIGNED_LEN], &q.signature)
        .map_err(|_| QuoteError::BadSignature)?;
    if q.measurement != *expected_measurement {
        return Err(QuoteError::WrongMeasurement {
            expected: hex(expected_measurement),
            got: hex(&q.measurement),
        });
    }
    Ok(q)
}

/// Verifies a quote (see [`verify_quote`]) and returns its report data: what the enclave
/// whose measurement is `expected_measurement`, on the platform `platform`, vouched for.
pub fn verify(
    quote: &[u8],
    platform: &PlatformIdentity,
    expected_measurement: &[u8; 32],
) -> Result<ReportData, QuoteError> {
    verify_quote(quote, platform, expected_measurement).map(|q| q.report_data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::DEFAULT_SIGNER;
    use proptest::prelude::*;

    fn quoter(root: u8, code: &[u8]) -> Quoter {
        Quoter::new(
            &RootKey::from_bytes([root; 32]),
            Identity::from_code(code, "svc", DEFAULT_SIGNER),
        )
        .unwrap()
    }

    fn data() -> ReportData {
        ReportData(core::array::from_fn(|i| i as u8 ^ 0x5a))
    }

    #[test]
    fn a_good_quote_verifies_and_round_trips() {
        let q = quoter(7, b"code A");
        let bytes = q.quote(&data());
        assert_eq!(bytes.len(), QUOTE_LEN);
        let m = q.enclave().measurement;
        assert_eq!(verify(&bytes, &q.platform(), &m).unwrap(), data());
        let parsed = verify_quote(&bytes, &q.platform(), &m).unwrap();
        assert_eq!(parsed.signer, q.enclave().signer);
        assert_eq!(parsed.to_bytes(), bytes);
        assert_eq!(&bytes[..8], MAGIC);
        assert_eq!(&bytes[OFF_MEASUREMENT..OFF_SIGNER], &m);
        assert_eq!(&bytes[OFF_REPORT_DATA..OFF_KEY], &data().0);
        // The same platform key every time from the same root key; another root, another key.
        assert_eq!(q.platform(), quoter(7, b"code B").platform());
        assert_ne!(q.platform(), quoter(8, b"code A").platform());
    }

    #[test]
    fn a_quote_of_another_enclave_is_refused() {
        let a = quoter(7, b"code A");
        let b = quoter(7, b"code B");
        let bytes = b.quote(&data());
        match verify(&bytes, &a.platform(), &a.enclave().measurement) {
            Err(QuoteError::WrongMeasurement { expected, got }) => {
                assert_eq!(expected, hex(&a.enclave().measurement));
                assert_eq!(got, hex(&b.enclave().measurement));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn another_platforms_key_is_refused() {
        let a = quoter(7, b"code");
        let other = quoter(8, b"code");
        let bytes = other.quote(&data());
        let m = a.enclave().measurement;
        assert_eq!(
            verify(&bytes, &a.platform(), &m),
            Err(QuoteError::WrongPlatform {
                expected: a.platform(),
                got: other.platform()
            })
        );
        // The other platform's quote relabelled with our key: its signature does not verify.
        let mut relabelled = bytes.clone();
        relabelled[OFF_KEY..SIGNED_LEN].copy_from_slice(&a.platform().0);
        assert_eq!(
            verify(&relabelled, &a.platform(), &m),
            Err(QuoteError::BadSignature)
        );
    }

    #[test]
    fn every_changed_byte_is_refused_with_its_error() {
        let q = quoter(7, b"code");
        let bytes = q.quote(&data());
        let m = q.enclave().measurement;
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80] {
                let mut t = bytes.clone();
                t[i] ^= flip;
                let e = verify(&t, &q.platform(), &m).unwrap_err();
                let ok = match i {
                    0..8 => e == QuoteError::BadMagic,
                    8..10 => matches!(e, QuoteError::UnsupportedVersion(_)),
                    10..12 => matches!(e, QuoteError::UnsupportedKeyType(_)),
                    12..16 => matches!(e, QuoteError::UnsupportedTee(_)),
                    OFF_KEY..SIGNED_LEN => matches!(e, QuoteError::WrongPlatform { .. }),
                    _ => e == QuoteError::BadSignature,
                };
                assert!(ok, "byte {i} ^ {flip:#x}: {e:?}");
            }
        }
    }

    #[test]
    fn truncated_longer_and_garbage_bytes_are_refused() {
        let q = quoter(7, b"code");
        let bytes = q.quote(&data());
        let (p, m) = (q.platform(), q.enclave().measurement);
        for n in 0..bytes.len() {
            assert_eq!(
                verify(&bytes[..n], &p, &m),
                Err(QuoteError::Truncated {
                    needed: QUOTE_LEN,
                    got: n
                }),
                "length {n}"
            );
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0, 0]);
        assert_eq!(verify(&longer, &p, &m), Err(QuoteError::Trailing(2)));
        assert_eq!(
            verify(&[0xa5; QUOTE_LEN], &p, &m),
            Err(QuoteError::BadMagic)
        );
        assert_eq!(
            verify(b"garbage!garbage!", &p, &m),
            Err(QuoteError::BadMagic)
        );
    }

    #[test]
    fn the_private_key_does_not_print() {
        let root = RootKey::from_bytes([9; 32]);
        let key = AttestationKey::derive(&root).unwrap();
        let shown = format!("{key:?} {:?}", quoter(9, b"c"));
        assert!(shown.contains(&key.identity().to_hex()), "{shown}");
        // The derived seed, as hex or as a byte list, is nowhere in it.
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, KEY_SALT).extract(&[9; 32]);
        let mut seed = [0u8; 32];
        prk.expand(&[KEY_INFO], SeedLen)
            .unwrap()
            .fill(&mut seed)
            .unwrap();
        assert!(!shown.contains(&hex(&seed[..4])), "{shown}");
        assert!(!shown.contains(format!("{:?}", &seed[..4]).trim_matches(['[', ']'])));
        // The seed is the one the key was made from.
        let again = Ed25519KeyPair::from_seed_unchecked(&seed).unwrap();
        assert_eq!(again.public_key().as_ref(), &key.identity().0);
    }

    #[test]
    fn identities_and_report_data_convert() {
        let p = quoter(7, b"c").platform();
        assert_eq!(PlatformIdentity::from_hex(&p.to_hex()).unwrap(), p);
        assert_eq!(
            PlatformIdentity::from_hex(&format!(" {}\n", p.to_hex().to_uppercase())).unwrap(),
            p
        );
        assert!(PlatformIdentity::from_hex("abc").is_err());
        assert!(PlatformIdentity::from_hex(&"zz".repeat(32)).is_err());
        assert!(PlatformIdentity::from_hex(&"é".repeat(32)).is_err());
        let d = ReportData::from_prefix(&[1, 2, 3]).unwrap();
        assert_eq!(&d.0[..4], &[1, 2, 3, 0]);
        assert_eq!(
            ReportData::from_prefix(&[0; 65]),
            Err(QuoteError::ReportDataTooLong(65))
        );
        let dir = tempfile::tempdir().unwrap();
        let a = PlatformIdentity::load(dir.path()).unwrap();
        assert_eq!(PlatformIdentity::load(dir.path()).unwrap(), a);
        let root = RootKey::load_or_create(dir.path()).unwrap();
        assert_eq!(PlatformIdentity::of_root_key(&root).unwrap(), a);
    }

    proptest! {
        #[test]
        fn parsing_and_verifying_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let q = quoter(7, b"c");
            let _ = Quote::parse(&bytes);
            prop_assert!(verify(&bytes, &q.platform(), &q.enclave().measurement).is_err());
        }
    }
}
