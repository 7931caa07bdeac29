//! What crosses the boundary and what goes on chain, all SCALE-encoded
//! (`parity-scale-codec`): the configurations and steps of the pipeline, the ecall requests
//! and replies, the client's payload, the typed faults, and the extrinsic the worker signs.

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};
use parity_scale_codec::{Compact, Decode, Encode};

/// Ecall ids of the worker service.
pub mod ecall {
    /// Generates and seals the keys, writes the initial state; replies with the public keys.
    pub const SETUP: u32 = 0;
    /// Opens the sealed keys of an earlier set-up (another enclave of the same identity).
    pub const OPEN: u32 = 1;
    /// Compiles a wasm module inside the enclave; replies with its SHA-256.
    pub const LOAD_MODULE: u32 = 2;
    /// One transaction, as a [`super::TxRequest`].
    pub const TX: u32 = 3;
    /// One step repeated alone, as a [`super::StepRequest`].
    pub const STEP_ALONE: u32 = 4;
    /// Does nothing (the bare ecall, measured alone).
    pub const NOOP: u32 = 5;
}

/// The host ocall that writes the state file: atomic (temporary file and rename), not
/// synced to disk (see the module documentation).
pub const WRITE_STATE_OCALL: u32 = enclave::ocall::builtin::FIRST_USER;

/// A configuration of the pipeline: one column of the ablation table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Encode, Decode)]
pub enum ConfigId {
    /// Every step.
    Full,
    /// The counter update in native Rust instead of the wasm interpreter.
    NativeStf,
    /// Every step but the extrinsic.
    NoCompose,
    /// Ecall, sealed RSA key read, RSA decryption.
    DecryptOnly,
    /// Ecall, state read, AES-GCM, (native) update, write.
    StateUpdate,
    /// Ecall and one sealed read.
    SealedRead,
    /// `state-update` plus an empty ocall.
    StateUpdateOcall,
    /// `full` with HPKE in place of RSA-OAEP.
    Hpke,
}

impl ConfigId {
    /// Every configuration, in table order.
    pub const ALL: [ConfigId; 8] = [
        ConfigId::Full,
        ConfigId::NativeStf,
        ConfigId::NoCompose,
        ConfigId::DecryptOnly,
        ConfigId::StateUpdate,
        ConfigId::SealedRead,
        ConfigId::StateUpdateOcall,
        ConfigId::Hpke,
    ];

    /// The name used in records and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ConfigId::Full => "full",
            ConfigId::NativeStf => "native-stf",
            ConfigId::NoCompose => "no-compose",
            ConfigId::DecryptOnly => "decrypt-only",
            ConfigId::StateUpdate => "state-update",
            ConfigId::SealedRead => "sealed-read",
            ConfigId::StateUpdateOcall => "state-update+ocall",
            ConfigId::Hpke => "hpke",
        }
    }

    /// Looks a configuration up by name.
    pub fn parse(name: &str) -> Option<ConfigId> {
        ConfigId::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The steps this configuration runs, in table order.
    pub fn steps(self) -> &'static [Step] {
        use Step::*;
        match self {
            ConfigId::Full => &[
                Ecall,
                WasmHash,
                SealedRsaKey,
                RsaDecrypt,
                HashCheck,
                StateRead,
                SealedStateKey,
                StateDecrypt,
                WasmStf,
                StateWrite,
                Compose,
            ],
            ConfigId::NativeStf => &[
                Ecall,
                WasmHash,
                SealedRsaKey,
                RsaDecrypt,
                HashCheck,
                StateRead,
                SealedStateKey,
                StateDecrypt,
                NativeStf,
                StateWrite,
                Compose,
            ],
            ConfigId::NoCompose => &[
                Ecall,
                WasmHash,
                SealedRsaKey,
                RsaDecrypt,
                HashCheck,
                StateRead,
                SealedStateKey,
                StateDecrypt,
                WasmStf,
                StateWrite,
            ],
            ConfigId::DecryptOnly => &[Ecall, SealedRsaKey, RsaDecrypt],
            ConfigId::StateUpdate => &[
                Ecall,
                StateRead,
                SealedStateKey,
                StateDecrypt,
                NativeStf,
                StateWrite,
            ],
            ConfigId::SealedRead => &[Ecall, SealedRsaKey],
            ConfigId::StateUpdateOcall => &[
                Ecall,
                StateRead,
                SealedStateKey,
                StateDecrypt,
                NativeStf,
                StateWrite,
                EmptyOcall,
            ],
            ConfigId::Hpke => &[
                Ecall,
                WasmHash,
                SealedHpkeKey,
                HpkeDecrypt,
                HashCheck,
                StateRead,
                SealedStateKey,
                StateDecrypt,
                WasmStf,
                StateWrite,
                Compose,
            ],
        }
    }

    /// Whether the configuration runs `step`.
    pub fn runs(self, step: Step) -> bool {
        self.steps().contains(&step)
    }

    /// The original's invocations/s on an i3-8109U (substraTEE worker, 2019), where it
    /// measured this configuration.
    pub fn published_ops_per_s(self) -> Option<f64> {
        match self {
            ConfigId::Full => Some(332.0),
            ConfigId::NativeStf => Some(342.0),
            ConfigId::NoCompose => Some(365.0),
            ConfigId::DecryptOnly => Some(400.0),
            ConfigId::StateUpdate => Some(5000.0),
            ConfigId::SealedRead => Some(8196.0),
            ConfigId::StateUpdateOcall => Some(4587.0),
            ConfigId::Hpke => None,
        }
    }
}

/// A step of the pipeline: one row of the ablation table and one stage of the breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Encode, Decode)]
pub enum Step {
    /// The ecall itself: what the host measures around the call minus the steps inside
    /// (transitions, copies in and out, encoding).
    Ecall,
    /// (host) SHA-256 of the wasm module the request names.
    WasmHash,
    /// Read the sealed RSA key pair by ocall, unseal it, parse it.
    SealedRsaKey,
    /// RSA-OAEP (SHA-256) decryption of the client's payload.
    RsaDecrypt,
    /// Read the sealed HPKE (X25519) key by ocall, unseal it, parse it.
    SealedHpkeKey,
    /// HPKE decryption of the client's payload.
    HpkeDecrypt,
    /// The payload's expected wasm hash against the module the request names.
    HashCheck,
    /// Read the encrypted state file by ocall.
    StateRead,
    /// Read the sealed state key by ocall and unseal it.
    SealedStateKey,
    /// AES-256-GCM decryption of the state and SCALE decoding of the account map.
    StateDecrypt,
    /// The counter update, executed by the wasm module in the wasmi interpreter.
    WasmStf,
    /// The counter update in native Rust.
    NativeStf,
    /// SCALE encoding, AES-256-GCM encryption and the atomic write by ocall.
    StateWrite,
    /// The extrinsic: sealed Ed25519 key read, blake2 of the request, SCALE, signature.
    Compose,
    /// An empty ocall.
    EmptyOcall,
}

impl Step {
    /// Every step, in table order.
    pub const ALL: [Step; 15] = [
        Step::Ecall,
        Step::WasmHash,
        Step::SealedRsaKey,
        Step::RsaDecrypt,
        Step::SealedHpkeKey,
        Step::HpkeDecrypt,
        Step::HashCheck,
        Step::StateRead,
        Step::SealedStateKey,
        Step::StateDecrypt,
        Step::WasmStf,
        Step::NativeStf,
        Step::StateWrite,
        Step::Compose,
        Step::EmptyOcall,
    ];

    /// A short stable name (records' `params.step`).
    pub fn name(self) -> &'static str {
        match self {
            Step::Ecall => "ecall",
            Step::WasmHash => "wasm-hash",
            Step::SealedRsaKey => "sealed-rsa-key",
            Step::RsaDecrypt => "rsa-decrypt",
            Step::SealedHpkeKey => "sealed-hpke-key",
            Step::HpkeDecrypt => "hpke-decrypt",
            Step::HashCheck => "hash-check",
            Step::StateRead => "state-read",
            Step::SealedStateKey => "sealed-state-key",
            Step::StateDecrypt => "state-decrypt",
            Step::WasmStf => "wasm-stf",
            Step::NativeStf => "native-stf",
            Step::StateWrite => "state-write",
            Step::Compose => "compose",
            Step::EmptyOcall => "empty-ocall",
        }
    }

    /// The row label of the ablation table and the stage name of the breakdown.
    pub fn label(self) -> &'static str {
        match self {
            Step::Ecall => "ecall (transitions, copies)",
            Step::WasmHash => "wasm hash on the host (SHA-256)",
            Step::SealedRsaKey => "sealed RSA key read",
            Step::RsaDecrypt => "payload decryption, RSA-OAEP-SHA256",
            Step::SealedHpkeKey => "sealed HPKE key read",
            Step::HpkeDecrypt => "payload decryption, HPKE",
            Step::HashCheck => "wasm hash check",
            Step::StateRead => "state read (ocall)",
            Step::SealedStateKey => "sealed state-key read",
            Step::StateDecrypt => "state decryption (AES-256-GCM), decode",
            Step::WasmStf => "counter update in wasmi",
            Step::NativeStf => "counter update, native",
            Step::StateWrite => "state encryption, atomic write (ocall)",
            Step::Compose => "extrinsic: sealed Ed25519 read, SCALE, sign",
            Step::EmptyOcall => "empty ocall",
        }
    }

    /// Whether the step runs inside the enclave (and can be measured alone there).
    pub fn in_enclave(self) -> bool {
        !matches!(self, Step::Ecall | Step::WasmHash)
    }
}

/// An account id (32 bytes, as Substrate's).
pub type AccountId = [u8; 32];

/// What the client encrypts to the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Encode, Decode)]
pub struct Payload {
    /// The account whose counter to increase.
    pub account: AccountId,
    /// By how much.
    pub amount: u64,
    /// SHA-256 of the state-transition module the client expects to run.
    pub wasm_hash: [u8; 32],
}

/// The worker's state: a counter per account.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode, Default)]
pub struct State {
    /// Counters by account.
    pub accounts: std::collections::BTreeMap<AccountId, u64>,
}

/// Input of [`ecall::SETUP`] and [`ecall::OPEN`].
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct SetupRequest {
    /// The run folder holding the sealed blobs and the state file (reached by ocall).
    pub dir: String,
    /// RSA modulus size (2048, 3072 or 4096); ignored by `OPEN`.
    pub rsa_bits: u32,
    /// The chain's genesis hash, bound into every extrinsic.
    pub genesis: [u8; 32],
    /// The accounts of the initial state (all counters zero); ignored by `OPEN`.
    pub accounts: Vec<AccountId>,
}

/// The worker's public keys, the reply of `SETUP` and `OPEN`.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct PublicKeys {
    /// The RSA public key, X.509 SubjectPublicKeyInfo DER.
    pub rsa_spki: Vec<u8>,
    /// The HPKE (X25519) public key.
    pub hpke: [u8; 32],
    /// The Ed25519 key that signs extrinsics.
    pub signer: [u8; 32],
}

/// Input of [`ecall::TX`].
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct TxRequest {
    /// Which pipeline to run.
    pub config: ConfigId,
    /// The module the request names (its SHA-256, computed by the host).
    pub module_hash: [u8; 32],
    /// The exported function to call.
    pub function: String,
    /// The worker account's nonce on chain (the host plays the chain).
    pub nonce: u64,
    /// The client's payload: RSA-OAEP or HPKE ciphertext, or the SCALE-encoded [`Payload`]
    /// in the clear for the configurations without decryption.
    pub payload: Vec<u8>,
}

/// A successful transaction.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct TxOk {
    /// The account's counter after the update (configurations that update the state).
    pub new_value: Option<u64>,
    /// The decrypted payload (`decrypt-only`, so that the host can check it).
    pub payload: Option<Payload>,
    /// The signed, SCALE-encoded [`Extrinsic`] (configurations that compose one).
    pub extrinsic: Option<Vec<u8>>,
    /// Nanoseconds spent in each step inside the enclave, in execution order.
    pub steps: Vec<(Step, u64)>,
}

/// Why a transaction (or a set-up) failed inside the enclave. Typed across the boundary:
/// the reply is a SCALE-encoded `Result<_, TxFault>`.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode, thiserror::Error)]
pub enum TxFault {
    /// A transaction before `SETUP`/`OPEN`.
    #[error("the worker has not been set up")]
    NotSetUp,
    /// The enclave was started without sealing.
    #[error("the enclave was started without sealing")]
    NoSealing,
    /// The request could not be decoded.
    #[error("malformed request: {0}")]
    BadRequest(String),
    /// A sealed key could not be read, unsealed or parsed.
    #[error("sealed key {which}: {reason}")]
    SealedKey {
        /// Which key.
        which: String,
        /// What went wrong.
        reason: String,
    },
    /// Generating or sealing a key failed at set-up.
    #[error("set-up: {0}")]
    Setup(String),
    /// The payload did not decrypt under the worker's key.
    #[error("the payload failed to decrypt")]
    PayloadDecryption,
    /// The decrypted payload is not a [`Payload`].
    #[error("the decrypted payload is malformed")]
    PayloadMalformed,
    /// The request names a module the worker has not loaded.
    #[error("no module with the requested hash is loaded")]
    UnknownModule,
    /// The payload expects another module than the request names.
    #[error("wasm hash mismatch: the payload expects another module than the request names")]
    WasmHashMismatch,
    /// The state file could not be read.
    #[error("reading the state: {0}")]
    StateRead(String),
    /// The state file failed authentication.
    #[error("the state file failed authentication (tampered)")]
    StateTampered,
    /// The state decrypted but is not an account map.
    #[error("the state is malformed")]
    StateMalformed,
    /// The payload names an account the state does not hold.
    #[error("unknown account")]
    UnknownAccount,
    /// The state-transition function failed (a wasm trap, an overflow).
    #[error("state transition: {0}")]
    Stf(String),
    /// The state could not be written.
    #[error("writing the state: {0}")]
    StateWrite(String),
    /// The empty ocall failed.
    #[error("empty ocall: {0}")]
    Ocall(String),
}

/// Input of [`ecall::STEP_ALONE`].
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct StepRequest {
    /// The step.
    pub step: Step,
    /// How many times to run it.
    pub iters: u32,
    /// The request whose inputs the step uses (decryption steps need a ciphertext, the hash
    /// check a module hash).
    pub tx: TxRequest,
}

/// The pallet index of the worker's call in the extrinsic.
pub const WORKER_PALLET: u8 = 7;
/// The call index of "call worker" in that pallet.
pub const CALL_WORKER: u8 = 0;

/// The call of the extrinsic: the worker confirms the request whose blake2 hash it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Encode, Decode)]
pub struct Call {
    /// Pallet index.
    pub pallet: u8,
    /// Call index.
    pub call: u8,
    /// BLAKE2b-256 of the client's (encrypted) payload.
    pub request_hash: [u8; 32],
}

/// The extrinsic's era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Encode, Decode)]
pub enum Era {
    /// Valid forever.
    Immortal,
    /// Valid for `period` blocks from `phase`.
    Mortal {
        /// Period.
        period: u64,
        /// Phase.
        phase: u64,
    },
}

/// A signed extrinsic, Substrate-shaped: signer, signature over `(call, era, nonce,
/// genesis hash)`, era, nonce, call.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct Extrinsic {
    /// The worker's Ed25519 public key.
    pub signer: [u8; 32],
    /// Ed25519 signature over [`signed_payload`].
    pub signature: [u8; 64],
    /// The era.
    pub era: Era,
    /// The worker account's nonce.
    pub nonce: Compact<u64>,
    /// The call.
    pub call: Call,
}

/// The bytes an extrinsic's signature covers: SCALE of `(call, era, nonce, genesis)`,
/// replaced by its BLAKE2b-256 when longer than 256 bytes (Substrate's rule).
pub fn signed_payload(call: &Call, era: &Era, nonce: u64, genesis: &[u8; 32]) -> Vec<u8> {
    let raw = (call, era, Compact(nonce), genesis).encode();
    if raw.len() > 256 {
        blake2_256(&raw).to_vec()
    } else {
        raw
    }
}

/// BLAKE2b with a 256-bit output (Substrate's `blake2_256`).
pub fn blake2_256(data: &[u8]) -> [u8; 32] {
    Blake2b::<U32>::digest(data).into()
}

/// SHA-256 (the module hash).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blake2_256_known_answer() {
        // BLAKE2b-256("abc"), RFC 7693's algorithm with a 32-byte digest.
        let hex: String = blake2_256(b"abc")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"
        );
    }

    #[test]
    fn scale_round_trips_and_known_encodings() {
        let ok: Result<TxOk, TxFault> = Ok(TxOk {
            new_value: Some(5),
            payload: None,
            extrinsic: Some(vec![1, 2]),
            steps: vec![(Step::RsaDecrypt, 1000)],
        });
        let bytes = ok.encode();
        assert_eq!(
            Result::<TxOk, TxFault>::decode(&mut &bytes[..]).unwrap(),
            ok
        );
        let err: Result<TxOk, TxFault> = Err(TxFault::WasmHashMismatch);
        let bytes = err.encode();
        assert_eq!(
            Result::<TxOk, TxFault>::decode(&mut &bytes[..]).unwrap(),
            err
        );
        // Immortal era is one zero byte; compact 1 is 0x04 (SCALE's compact integers).
        assert_eq!(Era::Immortal.encode(), [0]);
        assert_eq!(Compact(1u64).encode(), [4]);
        // The signed payload is the plain concatenation while short.
        let call = Call {
            pallet: WORKER_PALLET,
            call: CALL_WORKER,
            request_hash: [9; 32],
        };
        let p = signed_payload(&call, &Era::Immortal, 1, &[3; 32]);
        assert_eq!(p.len(), 2 + 32 + 1 + 1 + 32);
        assert_eq!(&p[..2], &[WORKER_PALLET, CALL_WORKER]);
    }

    #[test]
    fn every_config_runs_the_ecall_and_names_round_trip() {
        for c in ConfigId::ALL {
            assert!(c.runs(Step::Ecall));
            assert_eq!(ConfigId::parse(c.name()), Some(c));
            // Steps are listed in table order.
            let idx: Vec<usize> = c
                .steps()
                .iter()
                .map(|s| Step::ALL.iter().position(|x| x == s).unwrap())
                .collect();
            assert!(idx.windows(2).all(|w| w[0] < w[1]), "{c:?}");
        }
        assert!(ConfigId::Full.runs(Step::RsaDecrypt));
        assert!(!ConfigId::Hpke.runs(Step::RsaDecrypt));
        assert!(!ConfigId::StateUpdateOcall.runs(Step::RsaDecrypt));
    }
}
