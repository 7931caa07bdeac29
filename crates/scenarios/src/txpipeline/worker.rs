//! The worker enclave: a [`Service`] that processes encrypted transactions against a sealed
//! state. Every key lives sealed (to the enclave's measurement) in the run folder and every
//! file is reached by ocall, as in an SGX enclave; each transaction re-reads the keys it
//! needs, as the original worker did.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der, PublicKeyX509Der};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::rsa::{
    KeySize, OAEP_SHA256_MGF1SHA256, OaepPrivateDecryptingKey, PrivateDecryptingKey,
};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use enclave::seal::Policy;
use enclave::{Ctx, Registry, Service, ServiceError};
use hpke::aead::AesGcm128;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem, OpModeR, Serializable};
use measure::sampler::black_box;
use parity_scale_codec::{Compact, Encode};

use harness::codec::decode;

use super::proto::{
    CALL_WORKER, Call, Era, Extrinsic, Payload, PublicKeys, SetupRequest, State, Step, StepRequest,
    TxFault, TxOk, TxRequest, WORKER_PALLET, WRITE_STATE_OCALL, blake2_256, ecall, sha256,
    signed_payload,
};

/// The enclave service's name.
pub const SERVICE: &str = "ccbench.tx-pipeline";

/// The state file in the run folder.
pub const STATE_FILE: &str = "state.bin";
/// Additional data bound into the state's AES-GCM encryption.
pub const STATE_AAD: &[u8] = b"ccbench tx-pipeline state v1";
/// HPKE `info`, binding payloads to this application.
pub const HPKE_INFO: &[u8] = b"ccbench tx-pipeline payload v1";

/// The HPKE private key type of the suite (DHKEM(X25519, HKDF-SHA256)).
pub type HpkePrivateKey = <X25519HkdfSha256 as Kem>::PrivateKey;
/// The HPKE public key type of the suite.
pub type HpkePublicKey = <X25519HkdfSha256 as Kem>::PublicKey;
/// The HPKE encapsulated key type of the suite.
pub type HpkeEncapped = <X25519HkdfSha256 as Kem>::EncappedKey;

/// The sealed keys, each in its own file and sealed with its own purpose as additional data
/// (so that one blob cannot be passed off as another).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The RSA key pair (PKCS#8 DER).
    Rsa,
    /// The HPKE X25519 private key (32 bytes).
    Hpke,
    /// The AES-256-GCM state key (32 bytes).
    State,
    /// The Ed25519 signing key (PKCS#8 v2 DER).
    Signer,
}

impl Key {
    /// The sealed blob's file name in the run folder.
    pub fn file(self) -> &'static str {
        match self {
            Key::Rsa => "rsa-key.sealed",
            Key::Hpke => "hpke-key.sealed",
            Key::State => "state-key.sealed",
            Key::Signer => "signer-key.sealed",
        }
    }

    fn aad(self) -> &'static [u8] {
        match self {
            Key::Rsa => b"ccbench tx-pipeline rsa key v1",
            Key::Hpke => b"ccbench tx-pipeline hpke key v1",
            Key::State => b"ccbench tx-pipeline state key v1",
            Key::Signer => b"ccbench tx-pipeline signer key v1",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Key::Rsa => "rsa",
            Key::Hpke => "hpke",
            Key::State => "state",
            Key::Signer => "signer",
        }
    }

    fn fault(self, reason: impl std::fmt::Display) -> TxFault {
        TxFault::SealedKey {
            which: self.name().to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// Where the worker keeps its files and which chain it signs for.
struct Session {
    dir: String,
    genesis: [u8; 32],
}

/// The worker service.
pub struct Worker {
    /// Held for the whole of a transaction: there is one state, so transactions are
    /// serialized (as in the original worker).
    session: Mutex<Option<Session>>,
    engine: wasmi::Engine,
    /// Compiled modules by the SHA-256 of their bytes, computed in here.
    modules: RwLock<BTreeMap<[u8; 32], wasmi::Module>>,
}

/// Registers the service.
pub fn register(r: Registry) -> Registry {
    r.with(SERVICE, |_| Ok(Arc::new(Worker::new())))
}

impl Default for Worker {
    fn default() -> Self {
        Self::new()
    }
}

/// Accumulates the time of each step, in execution order.
struct Timer {
    steps: Vec<(Step, u64)>,
    last: Instant,
}

impl Timer {
    fn new() -> Self {
        Timer {
            steps: Vec::with_capacity(12),
            last: Instant::now(),
        }
    }

    /// Charges the time since the last lap to `step`.
    fn lap(&mut self, step: Step) {
        // One clock read per lap: consecutive steps share their boundary.
        let now = Instant::now();
        let ns = u64::try_from((now - self.last).as_nanos()).unwrap_or(u64::MAX);
        self.last = now;
        match self.steps.iter_mut().find(|(s, _)| *s == step) {
            Some(e) => e.1 += ns,
            None => self.steps.push((step, ns)),
        }
    }
}

fn path(dir: &str, file: &str) -> String {
    format!("{dir}/{file}")
}

fn bad_request(e: impl std::fmt::Display) -> TxFault {
    TxFault::BadRequest(e.to_string())
}

/// Reads a sealed blob by ocall and unseals it, checking its purpose.
fn sealed_read(ctx: &mut Ctx<'_>, dir: &str, key: Key) -> Result<Vec<u8>, TxFault> {
    let blob = ctx
        .read_file(&path(dir, key.file()))
        .map_err(|e| key.fault(e))?;
    let sealer = ctx.sealer().ok_or(TxFault::NoSealing)?;
    let u = sealer.unseal(&blob).map_err(|e| key.fault(e))?;
    if u.aad != key.aad() {
        return Err(key.fault("sealed for another purpose"));
    }
    Ok(u.plaintext)
}

/// Seals `plaintext` to the enclave's measurement and writes it by ocall (durably).
fn seal_write(ctx: &mut Ctx<'_>, dir: &str, key: Key, plaintext: &[u8]) -> Result<(), TxFault> {
    let sealer = ctx.sealer().ok_or(TxFault::NoSealing)?;
    let blob = sealer
        .seal(Policy::Measurement, key.aad(), plaintext)
        .map_err(|e| key.fault(e))?;
    ctx.write_file(&path(dir, key.file()), &blob)
        .map_err(|e| key.fault(e))
}

fn rsa_key(ctx: &mut Ctx<'_>, dir: &str) -> Result<OaepPrivateDecryptingKey, TxFault> {
    let der = sealed_read(ctx, dir, Key::Rsa)?;
    let key = PrivateDecryptingKey::from_pkcs8(&der).map_err(|e| Key::Rsa.fault(e))?;
    OaepPrivateDecryptingKey::new(key).map_err(|_| Key::Rsa.fault("not usable for OAEP"))
}

fn rsa_decrypt(key: &OaepPrivateDecryptingKey, ciphertext: &[u8]) -> Result<Vec<u8>, TxFault> {
    let mut out = vec![0u8; key.min_output_size()];
    let pt = key
        .decrypt(&OAEP_SHA256_MGF1SHA256, ciphertext, &mut out, None)
        .map_err(|_| TxFault::PayloadDecryption)?;
    Ok(pt.to_vec())
}

fn hpke_key(ctx: &mut Ctx<'_>, dir: &str) -> Result<HpkePrivateKey, TxFault> {
    let bytes = sealed_read(ctx, dir, Key::Hpke)?;
    HpkePrivateKey::from_bytes(&bytes).map_err(|e| Key::Hpke.fault(e))
}

/// Opens an HPKE payload: the 32-byte encapsulated key, then the AES-128-GCM ciphertext.
fn hpke_decrypt(sk: &HpkePrivateKey, payload: &[u8]) -> Result<Vec<u8>, TxFault> {
    let (enc, ct) = payload
        .split_first_chunk::<32>()
        .ok_or(TxFault::PayloadDecryption)?;
    let enc = HpkeEncapped::from_bytes(enc).map_err(|_| TxFault::PayloadDecryption)?;
    hpke::single_shot_open::<AesGcm128, HkdfSha256, X25519HkdfSha256>(
        &OpModeR::Base,
        sk,
        &enc,
        HPKE_INFO,
        ct,
        &[],
    )
    .map_err(|_| TxFault::PayloadDecryption)
}

fn decode_payload(bytes: &[u8]) -> Result<Payload, TxFault> {
    decode::<Payload>("payload", bytes).map_err(|_| TxFault::PayloadMalformed)
}

fn state_read(ctx: &mut Ctx<'_>, dir: &str) -> Result<Vec<u8>, TxFault> {
    ctx.read_file(&path(dir, STATE_FILE))
        .map_err(|e| TxFault::StateRead(e.to_string()))
}

fn state_key(ctx: &mut Ctx<'_>, dir: &str) -> Result<LessSafeKey, TxFault> {
    let bytes = sealed_read(ctx, dir, Key::State)?;
    let key = UnboundKey::new(&AES_256_GCM, &bytes)
        .map_err(|_| Key::State.fault("not an AES-256 key"))?;
    Ok(LessSafeKey::new(key))
}

/// The state file: a random 96-bit nonce, then AES-256-GCM over the SCALE-encoded state.
pub fn state_decrypt(key: &LessSafeKey, file: &[u8]) -> Result<State, TxFault> {
    let (nonce, ct) = file
        .split_first_chunk::<NONCE_LEN>()
        .ok_or(TxFault::StateTampered)?;
    let mut buf = ct.to_vec();
    let pt = key
        .open_in_place(
            Nonce::assume_unique_for_key(*nonce),
            Aad::from(STATE_AAD),
            &mut buf,
        )
        .map_err(|_| TxFault::StateTampered)?;
    decode::<State>("state", pt).map_err(|_| TxFault::StateMalformed)
}

/// Encrypts the state under a fresh random nonce (see [`state_decrypt`]).
pub fn state_encrypt(key: &LessSafeKey, state: &State) -> Result<Vec<u8>, TxFault> {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| TxFault::StateWrite("no randomness for the nonce".into()))?;
    let mut out = nonce.to_vec();
    let body_start = out.len();
    state.encode_to(&mut out);
    let mut body = out.split_off(body_start);
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(STATE_AAD),
            &mut body,
        )
        .map_err(|_| TxFault::StateWrite("encryption failed".into()))?;
    out.extend_from_slice(&body);
    out.extend_from_slice(tag.as_ref());
    Ok(out)
}

fn state_write(ctx: &mut Ctx<'_>, dir: &str, file: &[u8]) -> Result<(), TxFault> {
    let input = enclave::wire::encode_write_file(&path(dir, STATE_FILE), file);
    ctx.ocall(WRITE_STATE_OCALL, &input)
        .map(drop)
        .map_err(|e| TxFault::StateWrite(e.to_string()))
}

/// Runs the counter update in the interpreter: a fresh store and instance per call.
fn wasm_apply(
    engine: &wasmi::Engine,
    module: &wasmi::Module,
    function: &str,
    old: u64,
    amount: u64,
) -> Result<u64, TxFault> {
    let stf = |e: wasmi::Error| TxFault::Stf(e.to_string());
    let mut store = wasmi::Store::new(engine, ());
    let linker = wasmi::Linker::<()>::new(engine);
    let instance = linker
        .instantiate(&mut store, module)
        .and_then(|pre| pre.start(&mut store))
        .map_err(stf)?;
    let f = instance
        .get_typed_func::<(i64, i64), i64>(&store, function)
        .map_err(stf)?;
    // wasm has no unsigned integer types: the bits are reinterpreted both ways, and the
    // module compares unsigned.
    let new = f
        .call(&mut store, (old as i64, amount as i64))
        .map_err(stf)?;
    Ok(new as u64)
}

fn native_apply(old: u64, amount: u64) -> Result<u64, TxFault> {
    old.checked_add(amount)
        .ok_or_else(|| TxFault::Stf("counter overflow".into()))
}

/// Composes and signs the extrinsic confirming the request `request` (its bytes as the
/// chain saw them).
fn compose(
    ctx: &mut Ctx<'_>,
    dir: &str,
    genesis: &[u8; 32],
    nonce: u64,
    request: &[u8],
) -> Result<Vec<u8>, TxFault> {
    let pkcs8 = sealed_read(ctx, dir, Key::Signer)?;
    let kp = Ed25519KeyPair::from_pkcs8(&pkcs8).map_err(|e| Key::Signer.fault(e))?;
    let call = Call {
        pallet: WORKER_PALLET,
        call: CALL_WORKER,
        request_hash: blake2_256(request),
    };
    let era = Era::Immortal;
    let sig = kp.sign(&signed_payload(&call, &era, nonce, genesis));
    let signature: [u8; 64] = sig
        .as_ref()
        .try_into()
        .map_err(|_| Key::Signer.fault("signature is not 64 bytes"))?;
    let signer: [u8; 32] = kp
        .public_key()
        .as_ref()
        .try_into()
        .map_err(|_| Key::Signer.fault("public key is not 32 bytes"))?;
    Ok(Extrinsic {
        signer,
        signature,
        era,
        nonce: Compact(nonce),
        call,
    }
    .encode())
}

impl Worker {
    /// A worker that has not been set up.
    pub fn new() -> Self {
        Worker {
            session: Mutex::new(None),
            engine: wasmi::Engine::default(),
            modules: RwLock::new(BTreeMap::new()),
        }
    }

    fn session(&self) -> MutexGuard<'_, Option<Session>> {
        // A panic in an earlier call (caught at the boundary) leaves nothing half-done in
        // the session itself: it only holds the folder and the genesis hash.
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn module(&self, hash: &[u8; 32]) -> Result<wasmi::Module, TxFault> {
        let modules = self.modules.read().unwrap_or_else(|p| p.into_inner());
        modules.get(hash).cloned().ok_or(TxFault::UnknownModule)
    }

    /// `SETUP` (`generate`) or `OPEN`.
    fn setup(
        &self,
        input: &[u8],
        ctx: &mut Ctx<'_>,
        generate: bool,
    ) -> Result<PublicKeys, TxFault> {
        let req = decode::<SetupRequest>("setup request", input).map_err(bad_request)?;
        let dir = req.dir.as_str();
        if ctx.sealer().is_none() {
            return Err(TxFault::NoSealing);
        }
        if generate {
            let rng = SystemRandom::new();
            let size = match req.rsa_bits {
                2048 => KeySize::Rsa2048,
                3072 => KeySize::Rsa3072,
                4096 => KeySize::Rsa4096,
                other => return Err(TxFault::BadRequest(format!("RSA-{other} not supported"))),
            };
            let rsa = PrivateDecryptingKey::generate(size)
                .map_err(|_| TxFault::Setup("RSA key generation failed".into()))?;
            let der = AsDer::<Pkcs8V1Der>::as_der(&rsa)
                .map_err(|_| TxFault::Setup("RSA key encoding failed".into()))?;
            seal_write(ctx, dir, Key::Rsa, der.as_ref())?;

            let mut ikm = [0u8; 32];
            rng.fill(&mut ikm)
                .map_err(|_| TxFault::Setup("no randomness".into()))?;
            let (sk, _) = X25519HkdfSha256::derive_keypair(&ikm);
            seal_write(ctx, dir, Key::Hpke, &sk.to_bytes())?;

            let mut state_key = [0u8; 32];
            rng.fill(&mut state_key)
                .map_err(|_| TxFault::Setup("no randomness".into()))?;
            seal_write(ctx, dir, Key::State, &state_key)?;

            let signer = Ed25519KeyPair::generate_pkcs8(&rng)
                .map_err(|_| TxFault::Setup("Ed25519 key generation failed".into()))?;
            seal_write(ctx, dir, Key::Signer, signer.as_ref())?;

            let state = State {
                accounts: req.accounts.iter().map(|a| (*a, 0)).collect(),
            };
            let key = UnboundKey::new(&AES_256_GCM, &state_key)
                .map_err(|_| TxFault::Setup("state key".into()))?;
            let file = state_encrypt(&LessSafeKey::new(key), &state)?;
            ctx.write_file(&path(dir, STATE_FILE), &file)
                .map_err(|e| TxFault::StateWrite(e.to_string()))?;
        }

        // Open (and so check) everything an earlier set-up left in the folder.
        let der = sealed_read(ctx, dir, Key::Rsa)?;
        let rsa = PrivateDecryptingKey::from_pkcs8(&der).map_err(|e| Key::Rsa.fault(e))?;
        let rsa_spki = AsDer::<PublicKeyX509Der>::as_der(&rsa.public_key())
            .map_err(|_| Key::Rsa.fault("public key encoding failed"))?
            .as_ref()
            .to_vec();
        let hpke_sk = hpke_key(ctx, dir)?;
        let hpke: [u8; 32] = X25519HkdfSha256::sk_to_pk(&hpke_sk).to_bytes().into();
        let pkcs8 = sealed_read(ctx, dir, Key::Signer)?;
        let kp = Ed25519KeyPair::from_pkcs8(&pkcs8).map_err(|e| Key::Signer.fault(e))?;
        let signer: [u8; 32] = kp
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| Key::Signer.fault("public key is not 32 bytes"))?;
        let key = state_key(ctx, dir)?;
        state_decrypt(&key, &state_read(ctx, dir)?)?;

        *self.session() = Some(Session {
            dir: req.dir,
            genesis: req.genesis,
        });
        Ok(PublicKeys {
            rsa_spki,
            hpke,
            signer,
        })
    }

    /// `LOAD_MODULE`: compiles the module and keys it by the SHA-256 of its bytes.
    fn load(&self, wasm: &[u8]) -> Result<[u8; 32], TxFault> {
        let module = wasmi::Module::new(&self.engine, wasm)
            .map_err(|e| TxFault::BadRequest(format!("invalid wasm module: {e}")))?;
        let hash = sha256(wasm);
        self.modules
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(hash, module);
        Ok(hash)
    }

    /// `TX`: one transaction. Everything that can fail runs before the state is written, so
    /// a failed transaction leaves the state file as it was.
    fn tx(&self, input: &[u8], ctx: &mut Ctx<'_>) -> Result<TxOk, TxFault> {
        let mut t = Timer::new();
        let req = decode::<TxRequest>("tx request", input).map_err(bad_request)?;
        let guard = self.session();
        let s = guard.as_ref().ok_or(TxFault::NotSetUp)?;
        let c = req.config;
        let mut done = TxOk {
            new_value: None,
            payload: None,
            extrinsic: None,
            steps: Vec::new(),
        };

        // Step 2: the payload key and the payload.
        let payload = if c.runs(Step::SealedRsaKey) {
            let key = rsa_key(ctx, &s.dir)?;
            t.lap(Step::SealedRsaKey);
            if !c.runs(Step::RsaDecrypt) {
                done.steps = t.steps;
                return Ok(done);
            }
            let pt = rsa_decrypt(&key, &req.payload)?;
            t.lap(Step::RsaDecrypt);
            decode_payload(&pt)?
        } else if c.runs(Step::SealedHpkeKey) {
            let key = hpke_key(ctx, &s.dir)?;
            t.lap(Step::SealedHpkeKey);
            let pt = hpke_decrypt(&key, &req.payload)?;
            t.lap(Step::HpkeDecrypt);
            decode_payload(&pt)?
        } else {
            // The configurations without payload decryption get the payload in the clear.
            decode_payload(&req.payload)?
        };
        if !c.runs(Step::StateRead) {
            done.payload = Some(payload);
            done.steps = t.steps;
            return Ok(done);
        }
        let module = if c.runs(Step::HashCheck) {
            if payload.wasm_hash != req.module_hash {
                return Err(TxFault::WasmHashMismatch);
            }
            let m = self.module(&req.module_hash)?;
            t.lap(Step::HashCheck);
            Some(m)
        } else {
            None
        };

        // Step 3: the state.
        let file = state_read(ctx, &s.dir)?;
        t.lap(Step::StateRead);
        let key = state_key(ctx, &s.dir)?;
        t.lap(Step::SealedStateKey);
        let mut state = state_decrypt(&key, &file)?;
        t.lap(Step::StateDecrypt);

        // Step 4: the state transition.
        let old = *state
            .accounts
            .get(&payload.account)
            .ok_or(TxFault::UnknownAccount)?;
        let new = match &module {
            Some(m) if c.runs(Step::WasmStf) => {
                let new = wasm_apply(&self.engine, m, &req.function, old, payload.amount)?;
                t.lap(Step::WasmStf);
                new
            }
            _ => {
                let new = native_apply(old, payload.amount)?;
                t.lap(Step::NativeStf);
                new
            }
        };
        state.accounts.insert(payload.account, new);

        // Steps 5 and 6: encrypt the new state, sign the extrinsic, then commit the write
        // (the extrinsic leaves the enclave only if the state was written).
        let file = state_encrypt(&key, &state)?;
        t.lap(Step::StateWrite);
        if c.runs(Step::Compose) {
            done.extrinsic = Some(compose(ctx, &s.dir, &s.genesis, req.nonce, &req.payload)?);
            t.lap(Step::Compose);
        }
        if c.runs(Step::EmptyOcall) {
            ctx.noop().map_err(|e| TxFault::Ocall(e.to_string()))?;
            t.lap(Step::EmptyOcall);
        }
        state_write(ctx, &s.dir, &file)?;
        t.lap(Step::StateWrite);
        done.new_value = Some(new);
        done.steps = t.steps;
        Ok(done)
    }

    /// `STEP_ALONE`: one step `iters` times, inputs prepared beforehand; the time of the
    /// loop in ns.
    fn alone(&self, input: &[u8], ctx: &mut Ctx<'_>) -> Result<u64, TxFault> {
        let r = decode::<StepRequest>("step request", input).map_err(bad_request)?;
        let guard = self.session();
        let s = guard.as_ref().ok_or(TxFault::NotSetUp)?;
        let dir = s.dir.as_str();
        let tx = &r.tx;
        let n = r.iters.max(1);
        let start;
        match r.step {
            Step::Ecall | Step::WasmHash => {
                return Err(TxFault::BadRequest(format!(
                    "{} does not run in the enclave",
                    r.step.name()
                )));
            }
            Step::SealedRsaKey => {
                start = Instant::now();
                for _ in 0..n {
                    black_box(rsa_key(ctx, dir)?);
                }
            }
            // As in a transaction, each decryption uses a freshly read key (aws-lc sets up
            // its Montgomery contexts and blinding on a key's first use): the key is read
            // untimed, the decryption timed.
            Step::RsaDecrypt => {
                let mut ns = 0u64;
                for _ in 0..n {
                    let key = rsa_key(ctx, dir)?;
                    let t = Instant::now();
                    black_box(rsa_decrypt(&key, &tx.payload)?);
                    ns += elapsed_ns(t);
                }
                return Ok(ns);
            }
            Step::SealedHpkeKey => {
                start = Instant::now();
                for _ in 0..n {
                    black_box(hpke_key(ctx, dir)?);
                }
            }
            Step::HpkeDecrypt => {
                let mut ns = 0u64;
                for _ in 0..n {
                    let key = hpke_key(ctx, dir)?;
                    let t = Instant::now();
                    black_box(hpke_decrypt(&key, &tx.payload)?);
                    ns += elapsed_ns(t);
                }
                return Ok(ns);
            }
            Step::HashCheck => {
                start = Instant::now();
                for _ in 0..n {
                    let p = decode_payload(&tx.payload)?;
                    if p.wasm_hash != tx.module_hash {
                        return Err(TxFault::WasmHashMismatch);
                    }
                    black_box(self.module(&tx.module_hash)?);
                }
            }
            Step::StateRead => {
                start = Instant::now();
                for _ in 0..n {
                    black_box(state_read(ctx, dir)?);
                }
            }
            Step::SealedStateKey => {
                start = Instant::now();
                for _ in 0..n {
                    black_box(state_key(ctx, dir)?);
                }
            }
            Step::StateDecrypt => {
                let file = state_read(ctx, dir)?;
                let key = state_key(ctx, dir)?;
                start = Instant::now();
                for _ in 0..n {
                    black_box(state_decrypt(&key, &file)?);
                }
            }
            Step::WasmStf => {
                let m = self.module(&tx.module_hash)?;
                start = Instant::now();
                for _ in 0..n {
                    black_box(wasm_apply(
                        &self.engine,
                        &m,
                        &tx.function,
                        black_box(1),
                        black_box(1),
                    )?);
                }
            }
            Step::NativeStf => {
                start = Instant::now();
                for _ in 0..n {
                    black_box(native_apply(black_box(1), black_box(1))?);
                }
            }
            Step::StateWrite => {
                // Writes the current state back, re-encrypted: the same accounts and counters.
                let key = state_key(ctx, dir)?;
                let state = state_decrypt(&key, &state_read(ctx, dir)?)?;
                start = Instant::now();
                for _ in 0..n {
                    let file = state_encrypt(&key, &state)?;
                    state_write(ctx, dir, &file)?;
                }
            }
            Step::Compose => {
                start = Instant::now();
                for _ in 0..n {
                    black_box(compose(ctx, dir, &s.genesis, tx.nonce, &tx.payload)?);
                }
            }
            Step::EmptyOcall => {
                start = Instant::now();
                for _ in 0..n {
                    ctx.noop().map_err(|e| TxFault::Ocall(e.to_string()))?;
                }
            }
        }
        Ok(elapsed_ns(start))
    }
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Service for Worker {
    fn ecall(
        &self,
        call_id: u32,
        input: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<Vec<u8>, ServiceError> {
        // Replies are SCALE `Result<_, TxFault>`: the host gets typed faults.
        Ok(match call_id {
            ecall::SETUP => self.setup(input, ctx, true).encode(),
            ecall::OPEN => self.setup(input, ctx, false).encode(),
            ecall::LOAD_MODULE => self.load(input).encode(),
            ecall::TX => self.tx(input, ctx).encode(),
            ecall::STEP_ALONE => self.alone(input, ctx).encode(),
            ecall::NOOP => Vec::new(),
            other => return Err(ServiceError::UnknownCall(other)),
        })
    }
}
