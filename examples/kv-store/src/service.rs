//! The enclave side: a key-value store whose values never leave the enclave unsealed.
//!
//! Each value is sealed to the enclave's measurement (AES-256-GCM under a key derived from
//! the platform root key) together with a version number, with the key as additional data,
//! and persisted by the host as one file per key through three ocalls (read, write, remove).
//! The host sees only sealed blobs and key names. The enclave keeps, per key, the latest
//! version it wrote: a blob the host hands back that is older (a rollback), was modified,
//! was sealed for another key, or by another enclave, is refused with a typed error.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use harness::codec::{self, Decode, Encode};
use harness::enclave::seal::Policy;
use harness::enclave::{Ctx, OcallError, Registry, Service, ServiceError, ocall};
use harness::hex::hex;

/// The service's name in the enclave registry.
pub const SERVICE: &str = "kv-store.example";

harness::calls! {
    /// The ecalls. Requests and replies are SCALE-encoded with `harness::codec`.
    pub enum Call {
        /// [`Put`] -> `Result<u64, KvError>` (the value's new version).
        Put = 0 => "put",
        /// [`Get`] -> `Result<Option<Vec<u8>>, KvError>`.
        Get = 1 => "get",
        /// [`Delete`] -> `Result<bool, KvError>` (whether the key was there).
        Delete = 2 => "delete",
    }
}

harness::calls! {
    /// The host's storage ocalls: one file per key in the store's folder, named by the
    /// key's hex. The host never sees a plaintext value.
    pub enum Ocall {
        /// Name -> `Option<Vec<u8>>`: the blob, or `None` when there is none.
        Read = 64 => "store-read",
        /// `(name, blob)` -> `()`: written to a temporary file, then renamed over the old.
        Write = 65 => "store-write",
        /// Name -> `bool`: whether a blob was removed.
        Remove = 66 => "store-remove",
    }
}

/// Longest key, in bytes (a file name is twice as long).
pub const MAX_KEY: usize = 100;

/// Writes `key` -> `value`.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct Put {
    /// 1..=[`MAX_KEY`] bytes.
    pub key: Vec<u8>,
    /// Any bytes.
    pub value: Vec<u8>,
}

/// Reads `key`.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct Get {
    /// The key.
    pub key: Vec<u8>,
}

/// Removes `key`.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct Delete {
    /// The key.
    pub key: Vec<u8>,
}

/// Why the store refused a call: what the host gets back, typed.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode, thiserror::Error)]
pub enum KvError {
    /// The key is empty or longer than [`MAX_KEY`].
    #[error("keys are 1 to {MAX_KEY} bytes, got {len}")]
    BadKey {
        /// Its length.
        len: u32,
    },
    /// The blob on the host's disk does not unseal: modified, truncated, sealed by another
    /// enclave, or sealed for another key.
    #[error("the stored blob of key {key} was refused: {reason}")]
    Tampered {
        /// The key (hex).
        key: String,
        /// What unsealing said.
        reason: String,
    },
    /// The blob unseals, but is older than the last one this enclave wrote for the key:
    /// the host replayed an old value.
    #[error(
        "the stored blob of key {key} is version {found}, older than {expected}: the host \
         replayed an old value"
    )]
    Rollback {
        /// The key (hex).
        key: String,
        /// The blob's version.
        found: u64,
        /// The version the enclave expects at least.
        expected: u64,
    },
    /// A storage ocall failed on the host.
    #[error("storage: {0}")]
    Storage(String),
    /// The enclave was started without sealing keys.
    #[error("the enclave was started without sealing")]
    NoSealing,
}

/// What one key's blob holds once unsealed.
#[derive(Encode, Decode)]
struct Sealed {
    version: u64,
    value: Vec<u8>,
}

/// Latest version written, per key; `deleted` marks a tombstone (a blob of that version or
/// older must not come back).
#[derive(Clone, Copy)]
struct Entry {
    version: u64,
    deleted: bool,
}

/// Shards of the version index: puts of one key serialize on their shard's lock (so blobs of
/// a key reach the disk in version order), puts of different shards run in parallel.
const SHARDS: usize = 64;

struct KvStore {
    index: Vec<Mutex<HashMap<Vec<u8>, Entry>>>,
}

fn shard_of(key: &[u8]) -> usize {
    // FNV-1a: cheap and well spread over short keys; not a security boundary.
    let h = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h % SHARDS as u64) as usize
}

/// The additional data sealed with a value: it binds the blob to its key.
fn aad(key: &[u8]) -> Vec<u8> {
    let mut a = b"ccbench kv-store v1\0".to_vec();
    a.extend_from_slice(key);
    a
}

fn check_key(key: &[u8]) -> Result<(), KvError> {
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(KvError::BadKey {
            len: key.len() as u32,
        });
    }
    Ok(())
}

fn storage(e: OcallError) -> KvError {
    KvError::Storage(e.to_string())
}

impl KvStore {
    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Entry>> {
        // A panic while holding a shard's lock fails only that call; the index stays usable.
        self.index[shard_of(key)]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn put(&self, ctx: &mut Ctx<'_>, req: Put) -> Result<u64, KvError> {
        check_key(&req.key)?;
        let sealer = ctx.sealer().ok_or(KvError::NoSealing)?;
        let mut shard = self.shard(&req.key);
        let version = shard.get(&req.key).map_or(1, |e| e.version + 1);
        let plain = Sealed {
            version,
            value: req.value,
        }
        .encode();
        let blob = sealer
            .seal(Policy::Measurement, &aad(&req.key), &plain)
            .map_err(|e| KvError::Storage(format!("sealing: {e}")))?;
        let name = hex(&req.key);
        ctx.ocall(Ocall::Write.into(), &(name, blob).encode())
            .map_err(storage)?;
        shard.insert(
            req.key,
            Entry {
                version,
                deleted: false,
            },
        );
        Ok(version)
    }

    fn get(&self, ctx: &mut Ctx<'_>, req: Get) -> Result<Option<Vec<u8>>, KvError> {
        check_key(&req.key)?;
        let sealer = ctx.sealer().ok_or(KvError::NoSealing)?;
        // Blobs of a key only get newer while we read (puts are ordered by the shard lock and
        // replace files atomically): anything older than what we knew before reading is a
        // rollback.
        let known = self.shard(&req.key).get(&req.key).copied();
        let name = hex(&req.key);
        let reply = ctx
            .ocall(Ocall::Read.into(), &name.encode())
            .map_err(storage)?;
        let blob: Option<Vec<u8>> = codec::decode("store-read reply", &reply)
            .map_err(|e| KvError::Storage(e.to_string()))?;
        let Some(blob) = blob else {
            return match known {
                Some(e) if !e.deleted => Err(KvError::Rollback {
                    key: name,
                    found: 0,
                    expected: e.version,
                }),
                _ => Ok(None),
            };
        };
        let tampered = |reason: String| KvError::Tampered {
            key: name.clone(),
            reason,
        };
        let unsealed = sealer.unseal(&blob).map_err(|e| tampered(e.to_string()))?;
        if unsealed.aad != aad(&req.key) {
            return Err(tampered("sealed for another key".into()));
        }
        let sealed: Sealed = codec::decode("sealed value", &unsealed.plaintext)
            .map_err(|e| tampered(e.to_string()))?;
        match known {
            Some(e) if sealed.version < e.version || (e.deleted && sealed.version == e.version) => {
                Err(KvError::Rollback {
                    key: name,
                    found: sealed.version,
                    expected: e.version + u64::from(e.deleted),
                })
            }
            // A blob this enclave never saw (a store left by an earlier enclave of the same
            // measurement) is accepted, and its version becomes the floor.
            None => {
                self.shard(&req.key).entry(req.key).or_insert(Entry {
                    version: sealed.version,
                    deleted: false,
                });
                Ok(Some(sealed.value))
            }
            _ => Ok(Some(sealed.value)),
        }
    }

    fn delete(&self, ctx: &mut Ctx<'_>, req: Delete) -> Result<bool, KvError> {
        check_key(&req.key)?;
        let mut shard = self.shard(&req.key);
        let reply = ctx
            .ocall(Ocall::Remove.into(), &hex(&req.key).encode())
            .map_err(storage)?;
        let removed: bool = codec::decode("store-remove reply", &reply)
            .map_err(|e| KvError::Storage(e.to_string()))?;
        let version = shard.get(&req.key).map_or(0, |e| e.version);
        shard.insert(
            req.key,
            Entry {
                version,
                deleted: true,
            },
        );
        Ok(removed)
    }
}

impl Service for KvStore {
    fn ecall(
        &self,
        call_id: u32,
        input: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<Vec<u8>, ServiceError> {
        Ok(match Call::try_from(call_id)? {
            Call::Put => self.put(ctx, codec::decode("put request", input)?).encode(),
            Call::Get => self.get(ctx, codec::decode("get request", input)?).encode(),
            Call::Delete => self
                .delete(ctx, codec::decode("delete request", input)?)
                .encode(),
        })
    }
}

/// Registers the service (for `ccbench::main!` and for starting an enclave).
pub fn register(r: Registry) -> Registry {
    r.with(SERVICE, |_| {
        Ok(Arc::new(KvStore {
            index: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }))
    })
}

// ---------------------------------------------------------------------------------------
// The host side of the storage ocalls.

/// A name the enclave may use: the hex of a key, nothing that walks out of the folder.
fn checked_name(name: &str) -> Result<&str, String> {
    let ok = !name.is_empty()
        && name.len() <= 2 * MAX_KEY
        && name.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some(name)
        .ok_or_else(|| format!("refused store name {name:?}: not a key's hex"))
}

/// The host's storage: one file per key in `dir`. Writes go to a temporary file that is then
/// renamed over the old one, so a reader sees a whole blob; they are not fsync'ed (the
/// benchmark measures the boundary and the sealing, not the disk's flush).
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store in `dir` (created if missing).
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<Store> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(Store { dir })
    }

    /// The file that holds `key`'s blob.
    pub fn path_of(&self, key: &[u8]) -> PathBuf {
        self.dir.join(hex(key))
    }

    fn read(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        let name: String = codec::decode("store-read request", input).map_err(|e| e.to_string())?;
        let path = self.dir.join(checked_name(&name)?);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b).encode()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None::<Vec<u8>>.encode()),
            Err(e) => Err(format!("reading {}: {e}", path.display())),
        }
    }

    fn write(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        let (name, blob): (String, Vec<u8>) =
            codec::decode("store-write request", input).map_err(|e| e.to_string())?;
        let path = self.dir.join(checked_name(&name)?);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, &blob)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(Vec::new())
    }

    fn remove(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        let name: String =
            codec::decode("store-remove request", input).map_err(|e| e.to_string())?;
        let path = self.dir.join(checked_name(&name)?);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true.encode()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false.encode()),
            Err(e) => Err(format!("removing {}: {e}", path.display())),
        }
    }

    /// Adds the three storage ocalls to an enclave builder.
    pub fn ocalls(&self, b: harness::enclave::EnclaveBuilder) -> harness::enclave::EnclaveBuilder {
        let (r, w, d) = (self.clone(), self.clone(), self.clone());
        b.ocall(Ocall::Read.into(), move |i| r.read(i))
            .ocall(Ocall::Write.into(), move |i| w.write(i))
            .ocall(Ocall::Remove.into(), move |i| d.remove(i))
    }
}

/// The name of a call in traces: the store's ecalls and ocalls, and the built-in ocalls.
pub fn call_name(direction: harness::enclave::Direction, id: u32) -> String {
    use harness::enclave::Direction;
    let name = match direction {
        Direction::Ecall => Call::try_from(id).ok().map(Call::name),
        Direction::Ocall => Ocall::try_from(id)
            .ok()
            .map(Ocall::name)
            .or((id == ocall::builtin::NOOP).then_some("noop")),
    };
    name.map_or_else(|| format!("#{id}"), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Client;
    use harness::enclave::{Backend, Enclave};

    fn start(dir: &std::path::Path) -> (Enclave, Store) {
        let store = Store::open(dir.join("store")).unwrap();
        let b = Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .sealing_key_dir(dir.join("keys"));
        let e = store.ocalls(b).start(&register(Registry::new())).unwrap();
        (e, store)
    }

    #[test]
    fn round_trips_and_refuses_what_the_host_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (e, store) = start(dir.path());
        let c = Client::new(&e);
        assert_eq!(c.put(b"a", b"one").unwrap(), Ok(1));
        assert_eq!(c.put(b"a", b"two").unwrap(), Ok(2));
        assert_eq!(c.get(b"a").unwrap(), Ok(Some(b"two".to_vec())));
        assert_eq!(c.get(b"missing").unwrap(), Ok(None));
        assert_eq!(c.put(b"", b"x").unwrap(), Err(KvError::BadKey { len: 0 }));
        assert!(
            !std::fs::read(store.path_of(b"a"))
                .unwrap()
                .windows(3)
                .any(|w| w == b"two")
        );

        // Another key's blob under this key's name: sealed for another key.
        c.put(b"b", b"bee").unwrap().unwrap();
        std::fs::copy(store.path_of(b"b"), store.path_of(b"a")).unwrap();
        assert!(matches!(
            c.get(b"a").unwrap(),
            Err(KvError::Tampered { reason, .. }) if reason.contains("another key")
        ));

        // A blob that vanishes from the host's disk is a rollback, not an absent key.
        c.put(b"a", b"three").unwrap().unwrap();
        std::fs::remove_file(store.path_of(b"a")).unwrap();
        assert!(matches!(
            c.get(b"a").unwrap(),
            Err(KvError::Rollback { found: 0, .. })
        ));

        // A deleted key's old blob put back: refused.
        c.put(b"a", b"four").unwrap().unwrap();
        let old = std::fs::read(store.path_of(b"a")).unwrap();
        assert_eq!(c.delete(b"a").unwrap(), Ok(true));
        std::fs::write(store.path_of(b"a"), &old).unwrap();
        assert!(matches!(
            c.get(b"a").unwrap(),
            Err(KvError::Rollback { .. })
        ));
        // ... and a put after the delete continues the versions.
        assert_eq!(c.put(b"a", b"five").unwrap(), Ok(5));
        assert_eq!(c.get(b"a").unwrap(), Ok(Some(b"five".to_vec())));
    }

    #[test]
    fn the_host_refuses_names_that_are_not_a_keys_hex() {
        for bad in ["", "../etc", "a/b", "0g", &"a".repeat(2 * MAX_KEY + 1)] {
            assert!(checked_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(checked_name("00ff"), Ok("00ff"));
    }
}
