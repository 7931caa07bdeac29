//! The host side of the workload: the worker enclave's set-up, the client that prepares
//! encrypted transaction payloads (RSA-OAEP or HPKE), submits them and checks each reply
//! (the signed extrinsic verifies and carries the new counter), and the ocall that writes
//! the state file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use aws_lc_rs::rsa::{OAEP_SHA256_MGF1SHA256, OaepPublicEncryptingKey, PublicEncryptingKey};
use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
use enclave::{Enclave, EnclaveBuilder};
use hpke::aead::AesGcm128;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, OpModeS, Serializable};
use parity_scale_codec::{Decode, Encode};

use harness::codec::decode;

use super::proto::{
    AccountId, CALL_WORKER, Era, Extrinsic, Payload, SetupRequest, WORKER_PALLET,
    WRITE_STATE_OCALL, blake2_256, ecall, sha256, signed_payload,
};
use super::proto::{ConfigId, PublicKeys, Step, TxFault, TxOk, TxRequest};
use super::worker::{HPKE_INFO, HpkePublicKey};

/// The counter-update module, as WAT source; compiled by [`counter_module`].
pub const COUNTER_WAT: &str = include_str!("../../wasm/counter.wat");

/// The module's exported function the requests name.
pub const FUNCTION: &str = "apply";

/// RSA modulus size of the scenario (the original's).
pub const RSA_BITS: u32 = 3072;

/// Accounts in the state.
pub const ACCOUNTS: usize = 64;

/// The chain's genesis hash (the host plays the chain).
pub fn genesis() -> [u8; 32] {
    blake2_256(b"ccbench tx-pipeline genesis")
}

/// The `n` account ids of the state.
pub fn accounts(n: usize) -> Vec<AccountId> {
    (0..n as u64)
        .map(|i| blake2_256(&i.to_le_bytes()))
        .collect()
}

/// Compiles the counter module from its WAT source; SHA-256 of these bytes is the module
/// hash.
pub fn counter_module() -> Result<Vec<u8>, TxError> {
    wat::parse_str(COUNTER_WAT).map_err(|e| TxError::Module(e.to_string()))
}

/// Why a host-side step of the pipeline failed.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// The ecall itself failed (the boundary, or the service refused the call).
    #[error("ecall: {0}")]
    Enclave(#[from] enclave::Error),
    /// The worker refused the request, with its typed reason.
    #[error("the worker refused: {0}")]
    Fault(#[from] TxFault),
    /// The reply could not be decoded.
    #[error("malformed reply to {what}: {reason}")]
    Reply {
        /// The call.
        what: &'static str,
        /// The decoding error.
        reason: String,
    },
    /// The reply decoded but does not check out (signature, counter, nonce, hash).
    #[error("verification failed: {0}")]
    Verify(String),
    /// The client could not build a payload.
    #[error("client: {0}")]
    Client(String),
    /// The wasm module could not be compiled.
    #[error("compiling the counter module: {0}")]
    Module(String),
}

/// Makes an ecall whose reply is a SCALE `Result<T, TxFault>`.
pub(super) fn call<T: Decode>(
    e: &Enclave,
    id: u32,
    input: &[u8],
    what: &'static str,
) -> Result<T, TxError> {
    let out = e.ecall(id, input)?;
    let r = decode::<Result<T, TxFault>>("reply", &out).map_err(|err| TxError::Reply {
        what,
        reason: err.to_string(),
    })?;
    Ok(r?)
}

/// The host's handler of the state-write ocall: writes a temporary file in the target's
/// folder and renames it over the target (atomic; not synced, see the module docs).
pub fn write_state(input: &[u8]) -> Result<Vec<u8>, String> {
    let (path, data) = enclave::wire::decode_write_file(input).map_err(|e| e.to_string())?;
    let target = Path::new(path);
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".ccbench-state.")
        .tempfile_in(dir)
        .map_err(|e| format!("write {path}: {e}"))?;
    tmp.write_all(data)
        .map_err(|e| format!("write {path}: {e}"))?;
    tmp.persist(target)
        .map_err(|e| format!("write {path}: {}", e.error))?;
    Ok(Vec::new())
}

/// Adds the worker's needs to an enclave builder: sealing (with the platform key in
/// `key_dir`, else the default directory) and the state-write ocall.
pub fn worker_builder(b: EnclaveBuilder, key_dir: Option<&Path>) -> EnclaveBuilder {
    let b = b.ocall(WRITE_STATE_OCALL, write_state);
    match key_dir {
        Some(d) => b.sealing_key_dir(d),
        None => b.sealing(),
    }
}

/// `SETUP` (`generate`: new keys and a fresh state in `dir`) or `OPEN` (the keys an earlier
/// set-up sealed in `dir`, for an enclave of the same identity).
pub fn setup(
    e: &Enclave,
    dir: &str,
    rsa_bits: u32,
    accounts: &[AccountId],
    generate: bool,
) -> Result<PublicKeys, TxError> {
    let req = SetupRequest {
        dir: dir.to_owned(),
        rsa_bits,
        genesis: genesis(),
        accounts: accounts.to_vec(),
    };
    if generate {
        call(e, ecall::SETUP, &req.encode(), "setup")
    } else {
        call(e, ecall::OPEN, &req.encode(), "open")
    }
}

/// Loads a wasm module into the worker; returns the hash the worker computed.
pub fn load_module(e: &Enclave, wasm: &[u8]) -> Result<[u8; 32], TxError> {
    call(e, ecall::LOAD_MODULE, wasm, "load module")
}

/// Sends a transaction request as is and returns the worker's reply, unverified.
pub fn submit(e: &Enclave, req: &TxRequest) -> Result<TxOk, TxError> {
    call(e, ecall::TX, &req.encode(), "transaction")
}

/// A transaction ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The request (its module hash is filled in when sent, by the host's step 1).
    pub request: TxRequest,
    /// The payload inside it.
    pub payload: Payload,
}

/// What one counted transaction cost, as the host measured it and as the worker reported.
#[derive(Debug, Clone)]
pub struct Done {
    /// Host time from the module hash to the reply, in ns.
    pub timed_ns: u64,
    /// Host time of the module hash, in ns (0 when the configuration has none).
    pub hash_ns: u64,
    /// The worker's own step times.
    pub steps: Vec<(Step, u64)>,
}

/// The host as client and chain: it encrypts payloads to the worker, keeps the plain
/// reference of every counter and the worker's nonce, and verifies every reply.
pub struct Client {
    keys: PublicKeys,
    rsa: OaepPublicEncryptingKey,
    hpke: HpkePublicKey,
    genesis: [u8; 32],
    module: Vec<u8>,
    module_hash: [u8; 32],
    accounts: Vec<AccountId>,
    expected: BTreeMap<AccountId, u64>,
    nonce: u64,
    next: usize,
}

impl Client {
    /// A client of a worker with `keys`, whose state holds `accounts` at zero, running
    /// `module`.
    pub fn new(
        keys: PublicKeys,
        module: Vec<u8>,
        accounts: Vec<AccountId>,
    ) -> Result<Self, TxError> {
        let rsa = PublicEncryptingKey::from_der(&keys.rsa_spki)
            .map_err(|e| TxError::Client(format!("worker RSA key: {e}")))?;
        let rsa = OaepPublicEncryptingKey::new(rsa)
            .map_err(|_| TxError::Client("worker RSA key unusable for OAEP".into()))?;
        let hpke = HpkePublicKey::from_bytes(&keys.hpke)
            .map_err(|e| TxError::Client(format!("worker HPKE key: {e}")))?;
        if accounts.is_empty() {
            return Err(TxError::Client("a state needs at least one account".into()));
        }
        let module_hash = sha256(&module);
        Ok(Client {
            keys,
            rsa,
            hpke,
            genesis: genesis(),
            module,
            module_hash,
            expected: accounts.iter().map(|a| (*a, 0)).collect(),
            accounts,
            nonce: 0,
            next: 0,
        })
    }

    /// The worker's public keys.
    pub fn keys(&self) -> &PublicKeys {
        &self.keys
    }

    /// SHA-256 of the module the client expects to run.
    pub fn module_hash(&self) -> [u8; 32] {
        self.module_hash
    }

    /// The counter the client expects for `account`.
    pub fn expected(&self, account: &AccountId) -> Option<u64> {
        self.expected.get(account).copied()
    }

    /// The next payload: accounts round robin, amounts 1..=7.
    pub fn next_payload(&mut self) -> Payload {
        let i = self.next;
        self.next = self.next.wrapping_add(1);
        Payload {
            account: self.accounts[i % self.accounts.len()],
            amount: 1 + (i % 7) as u64,
            wasm_hash: self.module_hash,
        }
    }

    /// Encrypts `plain` as `config` expects its payload: RSA-OAEP-SHA256, HPKE, or the
    /// clear SCALE bytes for the configurations without payload decryption.
    pub fn encrypt(&self, config: ConfigId, plain: &[u8]) -> Result<Vec<u8>, TxError> {
        if config.runs(Step::SealedRsaKey) {
            let mut ct = vec![0u8; self.rsa.ciphertext_size()];
            let out = self
                .rsa
                .encrypt(&OAEP_SHA256_MGF1SHA256, plain, &mut ct, None)
                .map_err(|_| TxError::Client("RSA-OAEP encryption failed".into()))?;
            Ok(out.to_vec())
        } else if config.runs(Step::HpkeDecrypt) {
            let (enc, ct) = hpke::single_shot_seal::<AesGcm128, HkdfSha256, X25519HkdfSha256, _>(
                &OpModeS::Base,
                &self.hpke,
                HPKE_INFO,
                plain,
                &[],
                // The OS generator; a failure of getrandom(2) panics: no payload can be
                // made without randomness.
                &mut rand_core::TryRngCore::unwrap_err(rand_core::OsRng),
            )
            .map_err(|e| TxError::Client(format!("HPKE encryption failed: {e}")))?;
            let mut out = enc.to_bytes().to_vec();
            out.extend_from_slice(&ct);
            Ok(out)
        } else {
            Ok(plain.to_vec())
        }
    }

    /// A request carrying `payload` (already in the form `config` expects).
    pub fn request(&self, config: ConfigId, payload: Vec<u8>) -> TxRequest {
        TxRequest {
            config,
            module_hash: [0; 32],
            function: FUNCTION.to_owned(),
            nonce: self.nonce,
            payload,
        }
    }

    /// Prepares the next transaction of `config` (the client's work: not timed).
    pub fn prepare(&mut self, config: ConfigId) -> Result<Prepared, TxError> {
        let payload = self.next_payload();
        let bytes = self.encrypt(config, &payload.encode())?;
        Ok(Prepared {
            request: self.request(config, bytes),
            payload,
        })
    }

    /// Sends a prepared transaction, timing the host's module hash and the ecall, then
    /// verifies the reply and advances the reference state.
    pub fn send(&mut self, e: &Enclave, mut p: Prepared) -> Result<Done, TxError> {
        let config = p.request.config;
        let t0 = Instant::now();
        if config.runs(Step::WasmHash) {
            p.request.module_hash = sha256(&self.module);
        }
        let t1 = Instant::now();
        let bytes = p.request.encode();
        let out = e.ecall(ecall::TX, &bytes);
        let t2 = Instant::now();
        let out = out?;
        let ok =
            decode::<Result<TxOk, TxFault>>("reply", &out).map_err(|err| TxError::Reply {
                what: "transaction",
                reason: err.to_string(),
            })??;
        self.verify(&p, &ok)?;
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Ok(Done {
            timed_ns: ns(t2 - t0),
            hash_ns: if config.runs(Step::WasmHash) {
                ns(t1 - t0)
            } else {
                0
            },
            steps: ok.steps,
        })
    }

    /// Prepares, sends and verifies one transaction.
    pub fn transact(&mut self, e: &Enclave, config: ConfigId) -> Result<Done, TxError> {
        let p = self.prepare(config)?;
        self.send(e, p)
    }

    /// Checks a reply against the request: the steps the configuration runs, the new
    /// counter, the extrinsic (signer, signature, call hash, era, nonce).
    pub fn verify(&mut self, p: &Prepared, ok: &TxOk) -> Result<(), TxError> {
        let config = p.request.config;
        let fail = |m: String| Err(TxError::Verify(m));
        if let Some((s, _)) = ok.steps.iter().find(|(s, _)| !config.runs(*s)) {
            return fail(format!("{} ran {}", config.name(), s.name()));
        }
        if config == ConfigId::DecryptOnly && ok.payload != Some(p.payload) {
            return fail("the decrypted payload differs from the one sent".into());
        }
        let new = if config.runs(Step::StateRead) {
            let want = self
                .expected(&p.payload.account)
                .and_then(|v| v.checked_add(p.payload.amount))
                .ok_or_else(|| TxError::Verify("no reference counter".into()))?;
            if ok.new_value != Some(want) {
                return fail(format!("new counter {:?}, expected {want}", ok.new_value));
            }
            Some(want)
        } else {
            None
        };
        if config.runs(Step::Compose) {
            let Some(bytes) = &ok.extrinsic else {
                return fail("no extrinsic".into());
            };
            let x = decode::<Extrinsic>("extrinsic", bytes)
                .map_err(|e| TxError::Verify(format!("extrinsic: {e}")))?;
            if x.signer != self.keys.signer {
                return fail("extrinsic signed by another key".into());
            }
            if x.nonce.0 != self.nonce {
                return fail(format!("nonce {}, expected {}", x.nonce.0, self.nonce));
            }
            if x.era != Era::Immortal
                || x.call.pallet != WORKER_PALLET
                || x.call.call != CALL_WORKER
            {
                return fail("unexpected era or call".into());
            }
            if x.call.request_hash != blake2_256(&p.request.payload) {
                return fail("the call does not carry the request's hash".into());
            }
            let msg = signed_payload(&x.call, &x.era, x.nonce.0, &self.genesis);
            UnparsedPublicKey::new(&ED25519, &self.keys.signer)
                .verify(&msg, &x.signature)
                .map_err(|_| TxError::Verify("bad extrinsic signature".into()))?;
            self.nonce += 1;
        } else if ok.extrinsic.is_some() {
            return fail(format!("{} returned an extrinsic", config.name()));
        }
        if let Some(v) = new {
            self.expected.insert(p.payload.account, v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_compiles_and_its_hash_is_stable() {
        let m = counter_module().unwrap();
        assert_eq!(&m[..4], b"\0asm");
        assert_eq!(sha256(&m), sha256(&counter_module().unwrap()));
    }
}
