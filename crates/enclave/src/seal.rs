//! Sealing: data bound to an enclave's identity under a platform root key.
//!
//! # Keys
//!
//! * The **platform root key** (32 random bytes) plays the CPU's fused seal secret. It is
//!   created once, with mode 0600, in `$CCBENCH_PLATFORM_KEY_DIR` if set, else
//!   `$XDG_DATA_HOME/ccbench` (absolute paths only, per the XDG spec), else
//!   `~/.local/share/ccbench` — never in the working tree. Creation writes a temporary file
//!   and hard-links it into place, so two processes racing to create it agree on one key.
//!   The sandboxed enclave reads it at start-up, before its seccomp filter is installed (as
//!   EGETKEY needs no system call, the enclave needs no file access afterwards).
//! * The **identity**: `measurement` = SHA-256 over the code identity (domain tag, the
//!   executable's bytes, the service name), SGX's MRENCLAVE; `signer` = SHA-256 of the signer
//!   name, SGX's MRSIGNER.
//! * The **seal key** for a blob = HKDF-SHA256(salt = the blob's random 32-byte key id,
//!   IKM = root key, info = `"ccbench-seal-v1" || policy || identity value`). A fresh key id
//!   per blob, like SGX's KEYID, so no key ever encrypts two blobs and random 96-bit GCM
//!   nonces cannot collide under one key.
//!
//! # Format (version 1, little-endian)
//!
//! ```text
//! 0    magic "CCSEALED"            8
//! 8    version = 1                 1
//! 9    policy (1 measurement, 2 signer)  1
//! 10   reserved = 0                2
//! 12   aad_len: u32                4
//! 16   plaintext_len: u64          8
//! 24   identity value bound to     32
//! 56   key id                      32
//! 88   nonce                       12
//! 100  aad                         aad_len
//! ..   ciphertext                  plaintext_len
//! ..   GCM tag                     16
//! ```
//!
//! The GCM additional data is everything before the ciphertext (header and aad), so any
//! flipped bit anywhere is detected. The errors are typed: a wrong magic, version or
//! policy; truncation; a blob bound to another identity ([`SealError::WrongEnclave`],
//! detected before decryption by comparing the identity field, which is public in SGX too);
//! and [`SealError::Tampered`] when authentication fails.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::digest;
use aws_lc_rs::hkdf;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use thiserror::Error;

/// The sealed format's magic.
pub const MAGIC: &[u8; 8] = b"CCSEALED";
/// The sealed format's version.
pub const VERSION: u8 = 1;
/// Header length before the aad.
pub const HEADER_LEN: usize = 100;
/// GCM tag length.
pub const TAG_LEN: usize = 16;
/// Environment variable overriding the platform key directory.
pub const ENV_KEY_DIR: &str = "CCBENCH_PLATFORM_KEY_DIR";
/// The root key's file name.
pub const ROOT_KEY_FILE: &str = "platform-root.key";

/// Errors from sealing and unsealing.
#[derive(Debug, Error)]
pub enum SealError {
    /// Shorter than the format requires.
    #[error("sealed blob truncated: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Bytes after the tag.
    #[error("{0} trailing bytes after the sealed blob")]
    Trailing(usize),
    /// Not a sealed blob.
    #[error("not a sealed blob (bad magic)")]
    BadMagic,
    /// A format version this build does not read.
    #[error("unsupported sealed-blob version {0}")]
    UnsupportedVersion(u8),
    /// An unknown policy byte.
    #[error("unknown seal policy {0}")]
    UnknownPolicy(u8),
    /// Reserved bytes are not zero.
    #[error("malformed sealed blob: {0}")]
    Malformed(&'static str),
    /// Sealed to another enclave (measurement) or another signer.
    #[error("sealed by another enclave (policy {policy:?})")]
    WrongEnclave {
        /// The blob's policy.
        policy: Policy,
    },
    /// Authentication failed: the blob was modified.
    #[error("sealed blob failed authentication (tampered)")]
    Tampered,
    /// The root key could not be read or created.
    #[error("platform root key: {0}")]
    RootKey(String),
    /// A crypto-library failure (e.g. no randomness).
    #[error("crypto failure: {0}")]
    Crypto(&'static str),
    /// File I/O.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// What a blob is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The enclave's measurement (only the same code and service can unseal: MRENCLAVE).
    Measurement,
    /// The signer (any enclave of the same signer can unseal: MRSIGNER).
    Signer,
}

impl Policy {
    fn code(self) -> u8 {
        match self {
            Policy::Measurement => 1,
            Policy::Signer => 2,
        }
    }
    fn from_code(c: u8) -> Result<Self, SealError> {
        match c {
            1 => Ok(Policy::Measurement),
            2 => Ok(Policy::Signer),
            other => Err(SealError::UnknownPolicy(other)),
        }
    }
}

/// An enclave's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// SHA-256 over the code identity (MRENCLAVE analogue).
    pub measurement: [u8; 32],
    /// SHA-256 of the signer name (MRSIGNER analogue).
    pub signer: [u8; 32],
}

const MEASUREMENT_TAG: &[u8] = b"ccbench-measurement-v1\0";
const SIGNER_TAG: &[u8] = b"ccbench-signer-v1\0";

/// The signer name used when none is configured.
pub const DEFAULT_SIGNER: &str = "ccbench";

impl Identity {
    /// From code bytes in memory.
    pub fn from_code(code: &[u8], service: &str, signer: &str) -> Self {
        let mut ctx = Self::measurement_ctx(code.len() as u64);
        ctx.update(code);
        Self::finish(ctx, service, signer)
    }

    /// From an executable file (streamed).
    pub fn of_executable(path: &Path, service: &str, signer: &str) -> std::io::Result<Self> {
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        let mut ctx = Self::measurement_ctx(len);
        let mut buf = vec![0u8; 1 << 20];
        let mut seen = 0u64;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            seen += n as u64;
            ctx.update(&buf[..n]);
        }
        if seen != len {
            return Err(std::io::Error::other(
                "executable changed while being measured",
            ));
        }
        Ok(Self::finish(ctx, service, signer))
    }

    /// Of the running executable (`/proc/self/exe`).
    pub fn of_current_exe(service: &str, signer: &str) -> std::io::Result<Self> {
        Self::of_executable(Path::new("/proc/self/exe"), service, signer)
    }

    fn measurement_ctx(code_len: u64) -> digest::Context {
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(MEASUREMENT_TAG);
        ctx.update(&code_len.to_le_bytes());
        ctx
    }

    fn finish(mut ctx: digest::Context, service: &str, signer: &str) -> Self {
        ctx.update(&(service.len() as u64).to_le_bytes());
        ctx.update(service.as_bytes());
        Identity {
            measurement: to32(ctx.finish().as_ref()),
            signer: signer_hash(signer),
        }
    }

    fn value(&self, p: Policy) -> &[u8; 32] {
        match p {
            Policy::Measurement => &self.measurement,
            Policy::Signer => &self.signer,
        }
    }
}

/// SHA-256 of a signer name, domain-separated.
pub fn signer_hash(signer: &str) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(SIGNER_TAG);
    ctx.update(signer.as_bytes());
    to32(ctx.finish().as_ref())
}

fn to32(b: &[u8]) -> [u8; 32] {
    let mut a = [0u8; 32];
    a.copy_from_slice(&b[..32]);
    a
}

/// The platform root key. Its bytes never appear in `Debug` output.
#[derive(Clone)]
pub struct RootKey([u8; 32]);

impl std::fmt::Debug for RootKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RootKey(..)")
    }
}

impl Drop for RootKey {
    fn drop(&mut self) {
        self.0.fill(0);
        std::hint::black_box(&self.0);
    }
}

impl RootKey {
    /// Wraps key bytes (tests, or keys from elsewhere).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        RootKey(bytes)
    }

    /// The key's bytes, for the platform's other keys (the attestation key is derived from
    /// them, [`crate::attest`]).
    pub(crate) fn secret_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A fresh random key (not persisted).
    pub fn generate() -> Result<Self, SealError> {
        let mut k = [0u8; 32];
        SystemRandom::new()
            .fill(&mut k)
            .map_err(|_| SealError::Crypto("random"))?;
        Ok(RootKey(k))
    }

    /// The default directory: `$CCBENCH_PLATFORM_KEY_DIR`, `$XDG_DATA_HOME/ccbench`, or
    /// `~/.local/share/ccbench`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os(ENV_KEY_DIR).filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(d));
        }
        if let Some(d) = std::env::var_os("XDG_DATA_HOME").map(PathBuf::from)
            && d.is_absolute()
        {
            return Some(d.join("ccbench"));
        }
        let home = std::env::var_os("HOME").map(PathBuf::from)?;
        home.is_absolute()
            .then(|| home.join(".local").join("share").join("ccbench"))
    }

    /// Loads the key from `dir`, creating it (mode 0600, once) if absent.
    pub fn load_or_create(dir: &Path) -> Result<Self, SealError> {
        let path = dir.join(ROOT_KEY_FILE);
        match Self::load(&path) {
            Ok(k) => return Ok(k),
            Err(SealError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| SealError::RootKey(format!("create {}: {e}", dir.display())))?;
        let key = Self::generate()?;
        // tempfile creates the file with mode 0600.
        let mut tmp = tempfile::Builder::new()
            .prefix(".platform-root.")
            .tempfile_in(dir)
            .map_err(|e| SealError::RootKey(format!("temp file in {}: {e}", dir.display())))?;
        tmp.write_all(&key.0)?;
        tmp.as_file().sync_all()?;
        match tmp.persist_noclobber(&path) {
            Ok(_) => Ok(key),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Self::load(&path),
            Err(e) => Err(SealError::RootKey(format!(
                "install {}: {}",
                path.display(),
                e.error
            ))),
        }
    }

    fn load(path: &Path) -> Result<Self, SealError> {
        let bytes = std::fs::read(path)?;
        let arr: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| SealError::RootKey(format!("{} is not a 32-byte key", path.display())))?;
        Ok(RootKey(arr))
    }
}

/// A parsed (not yet authenticated) sealed blob.
#[derive(Debug, Clone, Copy)]
pub struct SealedView<'a> {
    /// The policy.
    pub policy: Policy,
    /// The identity value the blob is bound to.
    pub identity: &'a [u8; 32],
    /// The key id.
    pub key_id: &'a [u8; 32],
    /// The nonce.
    pub nonce: &'a [u8; NONCE_LEN],
    /// The additional authenticated data (readable without the key, like SGX's).
    pub aad: &'a [u8],
    /// Ciphertext followed by the tag.
    pub ciphertext_and_tag: &'a [u8],
    /// Header and aad: the GCM additional data.
    pub authenticated: &'a [u8],
}

/// Parses the sealed format without any key. Never panics on any input.
pub fn parse(blob: &[u8]) -> Result<SealedView<'_>, SealError> {
    let Some(h) = blob.get(..HEADER_LEN) else {
        return Err(SealError::Truncated {
            needed: HEADER_LEN,
            got: blob.len(),
        });
    };
    if &h[0..8] != MAGIC {
        return Err(SealError::BadMagic);
    }
    if h[8] != VERSION {
        return Err(SealError::UnsupportedVersion(h[8]));
    }
    let policy = Policy::from_code(h[9])?;
    if h[10] != 0 || h[11] != 0 {
        return Err(SealError::Malformed("reserved bytes are not zero"));
    }
    let aad_len = u32::from_le_bytes([h[12], h[13], h[14], h[15]]) as u64;
    let mut pl = [0u8; 8];
    pl.copy_from_slice(&h[16..24]);
    let pt_len = u64::from_le_bytes(pl);
    let needed = (HEADER_LEN as u64)
        .checked_add(aad_len)
        .and_then(|n| n.checked_add(pt_len))
        .and_then(|n| n.checked_add(TAG_LEN as u64))
        .ok_or(SealError::Malformed("lengths overflow"))?;
    if (blob.len() as u64) < needed {
        return Err(SealError::Truncated {
            needed: usize::try_from(needed).unwrap_or(usize::MAX),
            got: blob.len(),
        });
    }
    if (blob.len() as u64) > needed {
        return Err(SealError::Trailing(blob.len() - needed as usize));
    }
    let aad_end = HEADER_LEN + aad_len as usize;
    let arr32 = |r: std::ops::Range<usize>| -> Result<&[u8; 32], SealError> {
        h[r].try_into().map_err(|_| SealError::Malformed("header"))
    };
    Ok(SealedView {
        policy,
        identity: arr32(24..56)?,
        key_id: arr32(56..88)?,
        nonce: h[88..100]
            .try_into()
            .map_err(|_| SealError::Malformed("header"))?,
        aad: &blob[HEADER_LEN..aad_end],
        ciphertext_and_tag: &blob[aad_end..],
        authenticated: &blob[..aad_end],
    })
}

/// Unsealed contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsealed {
    /// The policy the blob was sealed under.
    pub policy: Policy,
    /// The additional authenticated data.
    pub aad: Vec<u8>,
    /// The plaintext.
    pub plaintext: Vec<u8>,
}

/// Seals and unseals for one identity under one root key.
pub struct Sealer {
    root: RootKey,
    identity: Identity,
    rng: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

struct KeyLen;
impl hkdf::KeyType for KeyLen {
    fn len(&self) -> usize {
        32
    }
}

impl Sealer {
    /// A sealer for `identity` under `root`.
    pub fn new(root: RootKey, identity: Identity) -> Self {
        Sealer {
            root,
            identity,
            rng: SystemRandom::new(),
        }
    }

    /// The identity sealed to.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    fn key(
        &self,
        policy: Policy,
        identity: &[u8; 32],
        key_id: &[u8; 32],
    ) -> Result<LessSafeKey, SealError> {
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, key_id);
        let prk = salt.extract(&self.root.0);
        let pol = [policy.code()];
        let info: [&[u8]; 3] = [b"ccbench-seal-v1", &pol, identity];
        let okm = prk
            .expand(&info, KeyLen)
            .map_err(|_| SealError::Crypto("hkdf"))?;
        let mut k = [0u8; 32];
        okm.fill(&mut k).map_err(|_| SealError::Crypto("hkdf"))?;
        let key = UnboundKey::new(&AES_256_GCM, &k).map_err(|_| SealError::Crypto("aes key"));
        k.fill(0);
        Ok(LessSafeKey::new(key?))
    }

    /// Seals `plaintext` (and authenticates `aad`, which stays readable) under `policy`.
    pub fn seal(&self, policy: Policy, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let aad_len = u32::try_from(aad.len()).map_err(|_| SealError::Malformed("aad too long"))?;
        let mut key_id = [0u8; 32];
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut key_id)
            .map_err(|_| SealError::Crypto("random"))?;
        self.rng
            .fill(&mut nonce)
            .map_err(|_| SealError::Crypto("random"))?;
        let identity = *self.identity.value(policy);
        let mut out = Vec::with_capacity(HEADER_LEN + aad.len() + plaintext.len() + TAG_LEN);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(policy.code());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&aad_len.to_le_bytes());
        out.extend_from_slice(&(plaintext.len() as u64).to_le_bytes());
        out.extend_from_slice(&identity);
        out.extend_from_slice(&key_id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(aad);
        let auth_len = out.len();
        out.extend_from_slice(plaintext);
        let key = self.key(policy, &identity, &key_id)?;
        let (authenticated, body) = out.split_at_mut(auth_len);
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&*authenticated),
                body,
            )
            .map_err(|_| SealError::Crypto("seal"))?;
        out.extend_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Unseals a blob sealed by this identity (per its policy).
    pub fn unseal(&self, blob: &[u8]) -> Result<Unsealed, SealError> {
        let v = parse(blob)?;
        let mine = self.identity.value(v.policy);
        if v.identity != mine {
            return Err(SealError::WrongEnclave { policy: v.policy });
        }
        let key = self.key(v.policy, mine, v.key_id)?;
        let mut buf = v.ciphertext_and_tag.to_vec();
        let pt_len = key
            .open_in_place(
                Nonce::assume_unique_for_key(*v.nonce),
                Aad::from(v.authenticated),
                &mut buf,
            )
            .map_err(|_| SealError::Tampered)?
            .len();
        buf.truncate(pt_len);
        Ok(Unsealed {
            policy: v.policy,
            aad: v.aad.to_vec(),
            plaintext: buf,
        })
    }

    /// Seals into a file, atomically.
    pub fn seal_to_file(
        &self,
        path: &Path,
        policy: Policy,
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<(), SealError> {
        let blob = self.seal(policy, aad, plaintext)?;
        write_atomic(path, &blob)?;
        Ok(())
    }

    /// Unseals a file.
    pub fn unseal_file(&self, path: &Path) -> Result<Unsealed, SealError> {
        self.unseal(&std::fs::read(path)?)
    }
}

/// Writes a file atomically: a temporary file in the same directory, flushed, then renamed
/// over the target. A reader sees the old contents or the new, never a mix.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".ccbench-tmp.")
        .tempfile_in(dir)?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sealer(code: &[u8]) -> Sealer {
        Sealer::new(
            RootKey::from_bytes([7; 32]),
            Identity::from_code(code, "svc", DEFAULT_SIGNER),
        )
    }

    #[test]
    fn round_trip_both_policies() {
        let s = sealer(b"code");
        for p in [Policy::Measurement, Policy::Signer] {
            let b = s.seal(p, b"hdr", b"secret").unwrap();
            assert_eq!(b.len(), HEADER_LEN + 3 + 6 + TAG_LEN);
            let u = s.unseal(&b).unwrap();
            assert_eq!(u.plaintext, b"secret");
            assert_eq!(u.aad, b"hdr");
            assert_eq!(u.policy, p);
        }
        let empty = s.seal(Policy::Measurement, b"", b"").unwrap();
        assert_eq!(s.unseal(&empty).unwrap().plaintext, b"");
    }

    #[test]
    fn every_flipped_bit_is_refused() {
        let s = sealer(b"code");
        let b = s.seal(Policy::Measurement, b"ad", b"0123456789").unwrap();
        for i in 0..b.len() * 8 {
            let mut t = b.clone();
            t[i / 8] ^= 1 << (i % 8);
            assert!(s.unseal(&t).is_err(), "bit {i} flip accepted");
        }
        let mut t = b.clone();
        let last = t.len() - 1;
        t[last] ^= 1;
        assert!(matches!(s.unseal(&t), Err(SealError::Tampered)));
        let mut t = b.clone();
        t[0] ^= 1;
        assert!(matches!(s.unseal(&t), Err(SealError::BadMagic)));
    }

    #[test]
    fn truncation_is_refused() {
        let s = sealer(b"code");
        let b = s.seal(Policy::Signer, b"ad", b"0123456789").unwrap();
        for n in 0..b.len() {
            assert!(
                matches!(s.unseal(&b[..n]), Err(SealError::Truncated { .. })),
                "len {n}"
            );
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(matches!(s.unseal(&longer), Err(SealError::Trailing(1))));
    }

    #[test]
    fn other_measurement_is_refused_but_same_signer_is_not() {
        let a = sealer(b"code A");
        let b = sealer(b"code B");
        let blob = a.seal(Policy::Measurement, b"", b"x").unwrap();
        assert!(matches!(
            b.unseal(&blob),
            Err(SealError::WrongEnclave {
                policy: Policy::Measurement
            })
        ));
        let blob = a.seal(Policy::Signer, b"", b"x").unwrap();
        assert_eq!(b.unseal(&blob).unwrap().plaintext, b"x");
        // Another service name in the same code is another measurement.
        let c = Sealer::new(
            RootKey::from_bytes([7; 32]),
            Identity::from_code(b"code A", "other", DEFAULT_SIGNER),
        );
        let blob = a.seal(Policy::Measurement, b"", b"x").unwrap();
        assert!(c.unseal(&blob).is_err());
        // Another platform: same identity, different root key.
        let d = Sealer::new(RootKey::from_bytes([8; 32]), *a.identity());
        assert!(matches!(d.unseal(&blob), Err(SealError::Tampered)));
    }

    #[test]
    fn identity_known_answer() {
        // measurement = SHA-256(tag || le64(4) || "code" || le64(3) || "svc")
        let mut pre = Vec::new();
        pre.extend_from_slice(MEASUREMENT_TAG);
        pre.extend_from_slice(&4u64.to_le_bytes());
        pre.extend_from_slice(b"code");
        pre.extend_from_slice(&3u64.to_le_bytes());
        pre.extend_from_slice(b"svc");
        let want = digest::digest(&digest::SHA256, &pre);
        assert_eq!(
            Identity::from_code(b"code", "svc", "x").measurement,
            to32(want.as_ref())
        );
        // SHA-256("abc") sanity check of the digest in use.
        let abc = digest::digest(&digest::SHA256, b"abc");
        assert_eq!(abc.as_ref()[..4], [0xba, 0x78, 0x16, 0xbf]);
    }

    #[test]
    fn root_key_created_once_with_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let kdir = dir.path().join("nested");
        let a = RootKey::load_or_create(&kdir).unwrap();
        let b = RootKey::load_or_create(&kdir).unwrap();
        assert_eq!(a.0, b.0);
        let mode = std::fs::metadata(kdir.join(ROOT_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(format!("{a:?}"), "RootKey(..)");
        std::fs::write(kdir.join(ROOT_KEY_FILE), b"short").unwrap();
        assert!(matches!(
            RootKey::load_or_create(&kdir),
            Err(SealError::RootKey(_))
        ));
    }

    #[test]
    fn files_are_written_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("blob");
        let s = sealer(b"code");
        s.seal_to_file(&p, Policy::Measurement, b"a", b"one")
            .unwrap();
        s.seal_to_file(&p, Policy::Measurement, b"a", b"two")
            .unwrap();
        assert_eq!(s.unseal_file(&p).unwrap().plaintext, b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "temporary files left behind: {names:?}");
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse(&bytes);
            let _ = sealer(b"c").unseal(&bytes);
        }

        #[test]
        fn round_trip_any(aad in proptest::collection::vec(any::<u8>(), 0..64), pt in proptest::collection::vec(any::<u8>(), 0..512)) {
            let s = sealer(b"c");
            let b = s.seal(Policy::Measurement, &aad, &pt).unwrap();
            let u = s.unseal(&b).unwrap();
            prop_assert_eq!(u.aad, aad);
            prop_assert_eq!(u.plaintext, pt);
        }
    }
}
