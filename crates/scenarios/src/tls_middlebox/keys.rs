//! The TLS 1.2 key schedule the middlebox needs, and record decryption: pure functions
//! that run inside the enclave.
//!
//! From the master secret (shared out of band by the client) and the two hello randoms,
//! the PRF of RFC 5246 §5 with HMAC-SHA384 (the hash of `AES_256_GCM_SHA384`) expands the
//! key block (§6.3): `PRF(master_secret, "key expansion", server_random + client_random)`,
//! cut into `client_write_key[32] server_write_key[32] client_write_IV[4]
//! server_write_IV[4]` (GCM suites have no MAC keys). A record is opened with AES-256-GCM
//! (RFC 5288): nonce = the 4-byte implicit IV and the record's 8-byte explicit nonce;
//! additional data = `seq_num(8) type(1) version(2) length(2)`, the length of the
//! plaintext.
//!
//! Secrets live in types whose `Debug` prints no key material and which clear their bytes
//! when dropped.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::hmac;

use super::records::{ContentType, HEADER_LEN};
use harness::codec::{Decode, Encode};

/// Bytes of a TLS 1.2 master secret.
pub const MASTER_SECRET_LEN: usize = 48;
/// Bytes of a hello random.
pub const RANDOM_LEN: usize = 32;
/// AES-256 key bytes.
pub const KEY_LEN: usize = 32;
/// GCM implicit IV ("salt") bytes.
pub const SALT_LEN: usize = 4;
/// GCM explicit nonce bytes at the front of each record's fragment.
pub const EXPLICIT_NONCE_LEN: usize = 8;
/// GCM tag bytes at the end of each record's fragment.
pub const TAG_LEN: usize = 16;
/// Bytes of the key block of `AES_256_GCM_SHA384`.
pub const KEY_BLOCK_LEN: usize = 2 * KEY_LEN + 2 * SALT_LEN;

/// A master secret. Its `Debug` shows no bytes; it clears itself when dropped.
pub struct MasterSecret(pub [u8; MASTER_SECRET_LEN]);

impl std::fmt::Debug for MasterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterSecret(..)")
    }
}

impl Drop for MasterSecret {
    fn drop(&mut self) {
        clear(&mut self.0);
    }
}

/// Overwrites `bytes` with zeros in a way the optimiser keeps (the write is observed).
pub(crate) fn clear(bytes: &mut [u8]) {
    bytes.fill(0);
    std::hint::black_box(&*bytes);
}

/// Clears a buffer that held secrets or plaintext: its bytes are overwritten, then it is
/// emptied (its allocation stays, for the next use).
pub(crate) fn wipe(buf: &mut Vec<u8>) {
    clear(buf);
    buf.clear();
}

/// The TLS 1.2 PRF with HMAC-SHA384 (RFC 5246 §5): `P_SHA384(secret, label + seed)`,
/// filling `out`.
pub fn prf_sha384(secret: &[u8], label: &[u8], seed: &[u8], out: &mut [u8]) {
    let key = hmac::Key::new(hmac::HMAC_SHA384, secret);
    let mut label_seed = Vec::with_capacity(label.len() + seed.len());
    label_seed.extend_from_slice(label);
    label_seed.extend_from_slice(seed);
    // A(1) = HMAC(secret, label + seed); A(i) = HMAC(secret, A(i-1)).
    let mut a = hmac::sign(&key, &label_seed);
    let mut filled = 0;
    while filled < out.len() {
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(a.as_ref());
        ctx.update(&label_seed);
        let block = ctx.sign();
        let n = (out.len() - filled).min(block.as_ref().len());
        out[filled..filled + n].copy_from_slice(&block.as_ref()[..n]);
        filled += n;
        a = hmac::sign(&key, a.as_ref());
    }
}

/// A direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Encode, Decode)]
pub enum Direction {
    /// Client to server: the client's write keys.
    ClientToServer,
    /// Server to client: the server's write keys.
    ServerToClient,
}

impl Direction {
    /// Both, client to server first.
    pub const BOTH: [Direction; 2] = [Direction::ClientToServer, Direction::ServerToClient];

    /// 0 or 1, for arrays indexed by direction.
    pub fn index(self) -> usize {
        match self {
            Direction::ClientToServer => 0,
            Direction::ServerToClient => 1,
        }
    }

    /// `"c2s"` or `"s2c"`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::ClientToServer => "c2s",
            Direction::ServerToClient => "s2c",
        }
    }
}

/// The key block of `AES_256_GCM_SHA384`. `Debug` shows no bytes; cleared when dropped.
pub struct KeyBlock([u8; KEY_BLOCK_LEN]);

impl std::fmt::Debug for KeyBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyBlock(..)")
    }
}

impl Drop for KeyBlock {
    fn drop(&mut self) {
        clear(&mut self.0);
    }
}

impl KeyBlock {
    /// RFC 5246 §6.3: `PRF(master_secret, "key expansion", server_random + client_random)`.
    pub fn derive(
        master: &MasterSecret,
        client_random: &[u8; RANDOM_LEN],
        server_random: &[u8; RANDOM_LEN],
    ) -> Self {
        let mut seed = [0u8; 2 * RANDOM_LEN];
        seed[..RANDOM_LEN].copy_from_slice(server_random);
        seed[RANDOM_LEN..].copy_from_slice(client_random);
        let mut block = [0u8; KEY_BLOCK_LEN];
        prf_sha384(&master.0, b"key expansion", &seed, &mut block);
        KeyBlock(block)
    }

    /// The write key of `dir`'s sender.
    pub fn key(&self, dir: Direction) -> &[u8; KEY_LEN] {
        let at = dir.index() * KEY_LEN;
        self.0[at..at + KEY_LEN]
            .first_chunk()
            .unwrap_or(&[0; KEY_LEN])
    }

    /// The implicit IV of `dir`'s sender.
    pub fn salt(&self, dir: Direction) -> &[u8; SALT_LEN] {
        let at = 2 * KEY_LEN + dir.index() * SALT_LEN;
        self.0[at..at + SALT_LEN]
            .first_chunk()
            .unwrap_or(&[0; SALT_LEN])
    }

    /// The record decrypter of `dir`, at sequence number 0.
    pub fn opener(&self, dir: Direction) -> Result<Opener, OpenError> {
        let key = UnboundKey::new(&AES_256_GCM, self.key(dir)).map_err(|_| OpenError::Key)?;
        Ok(Opener {
            key: LessSafeKey::new(key),
            salt: *self.salt(dir),
            seq: 0,
        })
    }
}

/// Why a record did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Encode, Decode)]
pub enum OpenError {
    /// The fragment is shorter than the explicit nonce and the tag.
    #[error("a fragment of {0} bytes cannot hold a GCM nonce and tag")]
    Short(u32),
    /// The tag did not verify: a changed byte, or the wrong keys.
    #[error("the record failed authentication")]
    Authentication,
    /// The key could not be set up.
    #[error("AES-256-GCM key setup failed")]
    Key,
}

/// Decrypts the records of one direction, in order.
pub struct Opener {
    key: LessSafeKey,
    salt: [u8; SALT_LEN],
    seq: u64,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl Opener {
    /// The sequence number of the next record.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Decrypts a record's `fragment` (explicit nonce, ciphertext, tag) into `buf`,
    /// returning the plaintext: the first bytes of `buf`, which keeps the length of the
    /// largest plaintext so far (grown with zeros), so that the ciphertext is read once, by
    /// the decryption, and not copied first. The sequence number advances whether or not it
    /// authenticates: the sender's did.
    pub fn open<'b>(
        &mut self,
        content_type: ContentType,
        version: u16,
        fragment: &[u8],
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8], OpenError> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let Some(plain_len) = fragment.len().checked_sub(EXPLICIT_NONCE_LEN + TAG_LEN) else {
            return Err(OpenError::Short(
                u32::try_from(fragment.len()).unwrap_or(u32::MAX),
            ));
        };
        let mut nonce = [0u8; 12];
        nonce[..SALT_LEN].copy_from_slice(&self.salt);
        nonce[SALT_LEN..].copy_from_slice(&fragment[..EXPLICIT_NONCE_LEN]);
        let mut aad = [0u8; 13];
        aad[..8].copy_from_slice(&seq.to_be_bytes());
        aad[8] = content_type.byte();
        aad[9..11].copy_from_slice(&version.to_be_bytes());
        aad[11..13].copy_from_slice(&u16::try_from(plain_len).unwrap_or(u16::MAX).to_be_bytes());
        if buf.len() < plain_len {
            buf.resize(plain_len, 0);
        }
        let (ciphertext, tag) = fragment[EXPLICIT_NONCE_LEN..].split_at(plain_len);
        let plain = &mut buf[..plain_len];
        self.key
            .open_separate_gather(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                ciphertext,
                tag,
                plain,
            )
            .map_err(|_| OpenError::Authentication)?;
        Ok(plain)
    }
}

/// The overhead a GCM record adds to its plaintext: header, explicit nonce, tag.
pub const RECORD_OVERHEAD: usize = HEADER_LEN + EXPLICIT_NONCE_LEN + TAG_LEN;

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The first block of P_SHA384 computed the long way, with HMAC directly.
    #[test]
    fn prf_is_p_sha384() {
        let secret = b"secret";
        let mut out = [0u8; 100];
        prf_sha384(secret, b"label", b"seed", &mut out);
        let key = hmac::Key::new(hmac::HMAC_SHA384, secret);
        let a1 = hmac::sign(&key, b"labelseed");
        let mut m = a1.as_ref().to_vec();
        m.extend_from_slice(b"labelseed");
        let b1 = hmac::sign(&key, &m);
        assert_eq!(&out[..48], b1.as_ref());
        let a2 = hmac::sign(&key, a1.as_ref());
        let mut m = a2.as_ref().to_vec();
        m.extend_from_slice(b"labelseed");
        let b2 = hmac::sign(&key, &m);
        assert_eq!(&out[48..96], b2.as_ref());
        // A shorter output is a prefix of a longer one.
        let mut short = [0u8; 20];
        prf_sha384(secret, b"label", b"seed", &mut short);
        assert_eq!(short, out[..20]);
    }

    /// The TLS 1.2 PRF test vector for SHA-384 posted to the IETF TLS list (msg03416) and
    /// used by GnuTLS's and others' test suites: all 148 output bytes.
    #[test]
    fn prf_sha384_known_answer() {
        let secret = hex("b80b733d6ceefcdc71566ea48e5567df");
        let seed = hex("cd665cf6a8447dd6ff8b27555edb7465");
        let mut out = [0u8; 148];
        prf_sha384(&secret, b"test label", &seed, &mut out);
        let want = hex(
            "7b0c18e9ced410ed1804f2cfa34a336a1c14dffb4900bb5fd7942107e81c83cd
             e9ca0faa60be9fe34f82b1233c9146a0e534cb400fed2700884f9dc236f80edd
             8bfa961144c9e8d792eca722a7b32fc3d416d473ebc2c5fd4abfdad05d918425
             9b5bf8cd4d90fa0d31e2dec479e4f1a26066f2eea9a69236a3e52655c9e9aee6
             91c8f3a26854308d5eaa3be85e0990703d73e56f",
        );
        assert_eq!(out.to_vec(), want);
    }

    /// How a derived `Debug` or a careless `format!` would print `bytes` (four of them are
    /// enough to recognise): hex either case, and decimal as an array prints.
    fn renderings(bytes: &[u8]) -> Vec<String> {
        let b = &bytes[..4];
        let lower: String = b.iter().map(|x| format!("{x:02x}")).collect();
        vec![
            lower.clone(),
            lower.to_uppercase(),
            format!("{b:?}").trim_matches(['[', ']']).to_owned(),
            format!("{b:#?}").trim_matches(['[', ']']).trim().to_owned(),
        ]
    }

    #[test]
    fn secrets_do_not_print() {
        // A master secret with a pattern no Debug output could hold by chance.
        let m = MasterSecret(core::array::from_fn(|i| 0xa7 ^ (i as u8).wrapping_mul(13)));
        let kb = KeyBlock::derive(&m, &[1; 32], &[2; 32]);
        let mut o = kb.opener(Direction::ClientToServer).unwrap();
        let mut secret = vec![m.0.to_vec()];
        for d in Direction::BOTH {
            secret.push(kb.key(d).to_vec());
            secret.push(kb.salt(d).to_vec());
        }
        let shown = |o: &Opener| {
            [
                format!("{m:?}"),
                format!("{m:#?}"),
                format!("{kb:?}"),
                format!("{kb:#?}"),
                format!("{o:?}"),
            ]
        };
        // Exactly what each shows: a name, and for the opener its sequence number.
        assert_eq!(
            shown(&o),
            [
                "MasterSecret(..)",
                "MasterSecret(..)",
                "KeyBlock(..)",
                "KeyBlock(..)",
                "Opener { seq: 0, .. }"
            ]
        );
        let mut buf = Vec::new();
        let _ = o.open(ContentType::ApplicationData, 0x0303, &[0; 64], &mut buf);
        assert_eq!(format!("{o:?}"), "Opener { seq: 1, .. }");
        for text in shown(&o) {
            for r in secret.iter().flat_map(|s| renderings(s)) {
                assert!(!text.contains(&r), "{text:?} shows {r:?}");
            }
        }
    }

    #[test]
    fn wipe_overwrites_then_empties() {
        let mut buf = b"decrypted plaintext".to_vec();
        let n = buf.len();
        wipe(&mut buf);
        assert!(buf.is_empty());
        assert!(buf.capacity() >= n);
        // SAFETY: the allocation is still `buf`'s and its first `n` bytes were initialised
        // (`clear` neither frees nor de-initialises them).
        let old = unsafe { std::slice::from_raw_parts(buf.as_ptr(), n) };
        assert!(old.iter().all(|&b| b == 0), "{old:?}");
    }

    #[test]
    fn short_and_forged_fragments_are_errors_and_advance_the_sequence() {
        let m = MasterSecret([7; MASTER_SECRET_LEN]);
        let kb = KeyBlock::derive(&m, &[1; 32], &[2; 32]);
        let mut o = kb.opener(Direction::ServerToClient).unwrap();
        let mut buf = Vec::new();
        assert_eq!(
            o.open(ContentType::ApplicationData, 0x0303, &[0; 23], &mut buf),
            Err(OpenError::Short(23))
        );
        assert_eq!(
            o.open(ContentType::ApplicationData, 0x0303, &[0; 64], &mut buf),
            Err(OpenError::Authentication)
        );
        assert_eq!(o.seq(), 2);
    }
}
