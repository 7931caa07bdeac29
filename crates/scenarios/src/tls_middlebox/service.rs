//! The middlebox's enclave side: seven ecalls named and scoped after SGXBox's, and the
//! host's typed client for them.
//!
//! | ecall | when the host makes it | what it does inside |
//! |---|---|---|
//! | `init_decryption_engine` | once, at start-up | sets the limits (flows, pending key shares), makes a fresh X25519 key pair for key shares and returns its public half with a quote that binds it (emulated attestation) |
//! | `load_ruleset` | once, at start-up | builds the multi-pattern matcher (Aho-Corasick) over the rule set's byte patterns |
//! | `init_out_of_band_key_share` | when an endpoint shares a session | opens the HPKE-sealed master secret (bound to its client random) and keeps it until a flow claims it |
//! | `set_info_flow` | when a connection opens and closes | registers a flow (its endpoints) and, at close, returns its counts and forgets its keys |
//! | `init_tls_process` | once the two hellos were seen | binds the client and server randoms read from the clear-text hellos to the flow |
//! | `start_tls_process` | at each direction's ChangeCipherSpec | finds the flow's key share, derives the key block (TLS 1.2 PRF, HMAC-SHA384) once, and starts that direction's decrypter at sequence number 0 |
//! | `reproduce_ssl_context` | per encrypted record | checks the framing, decrypts with AES-256-GCM, and for application data counts the rule set's matches |
//! | `reproduce_ssl_context_batch` | per batch of encrypted records, across flows (the `batched` configuration) | the same for each record of the batch, in order, one verdict or refusal each; a batch over [`MAX_BATCH_RECORDS`] or [`MAX_BATCH_BYTES`] is refused whole |
//!
//! The master secret reaches the enclave sealed to the engine's key (HPKE base mode,
//! X25519, HKDF-SHA256, AES-128-GCM, the client random as additional data): the host relays
//! it but cannot read it.
//!
//! # Key shares only to an attested enclave
//!
//! The engine's public key reaches endpoints through the host, which could hand out a key of
//! its own, open every share and re-seal it. So the enclave quotes its key
//! ([`enclave::Ctx::quote`]): the report data's first 32 bytes are
//! [`engine_key_hash`] (SHA-256 over a domain tag and the key), the rest zero. An endpoint
//! seals only to an [`AttestedEngine`], which [`verify_engine`] makes from the host's
//! [`EngineKey`] and the endpoint's own [`Trust`] (the platform identity and the measurement
//! it expects) after checking the quote's platform, signature and measurement and that the
//! quote binds exactly that key; otherwise it refuses with an [`AttestError`] saying why,
//! and sends nothing. The attestation is **emulated** (`enclave::attest`): it catches a
//! host that substitutes the key, not one that reads the platform's key file. No reply, error or log line carries a secret or plaintext; a
//! record's reply is its content type, plaintext length and match count.
//!
//! State: flows in a map behind a read-write lock, each flow's two directions behind their
//! own locks, so the relay threads of different flows and of the two directions of one
//! flow decrypt in parallel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use aho_corasick::AhoCorasick;
use aws_lc_rs::digest;
use enclave::attest::{self, PlatformIdentity, QuoteError, ReportData};
use enclave::seal::{DEFAULT_SIGNER, Identity};
use enclave::{Ctx, Enclave, Registry, Service, ServiceError};
use hpke::aead::AesGcm128;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem, OpModeR, OpModeS, Serializable};

use super::keys::{Direction, KeyBlock, MASTER_SECRET_LEN, MasterSecret, OpenError, Opener, clear};
use super::records::{self, ContentType};
use harness::codec::{self, Decode, Encode};

/// The enclave service's name.
pub const SERVICE: &str = "ccbench.tls-middlebox";

/// HPKE's `info` for key shares.
pub const SHARE_INFO: &[u8] = b"ccbench tls-middlebox key share v1";

harness::calls! {
    /// The seven ecalls, after SGXBox's.
    pub enum Call {
        /// Limits and the key-share key pair.
        InitDecryptionEngine = 0 => "init_decryption_engine",
        /// The inspection patterns.
        LoadRuleset = 1 => "load_ruleset",
        /// A sealed master secret from an endpoint.
        InitOutOfBandKeyShare = 2 => "init_out_of_band_key_share",
        /// A flow opens or closes.
        SetInfoFlow = 3 => "set_info_flow",
        /// A flow's hello randoms.
        InitTlsProcess = 4 => "init_tls_process",
        /// A direction switches to its keys.
        StartTlsProcess = 5 => "start_tls_process",
        /// One encrypted record: decrypt and inspect.
        ReproduceSslContext = 6 => "reproduce_ssl_context",
        /// Encrypted records of any flows: decrypt and inspect each (one crossing for all).
        ReproduceSslContextBatch = 7 => "reproduce_ssl_context_batch",
    }
}

/// The most records one `reproduce_ssl_context_batch` may carry.
pub const MAX_BATCH_RECORDS: usize = 1024;
/// The most record bytes (headers and fragments) one `reproduce_ssl_context_batch` may
/// carry: 4 MiB, 250 maximal records.
pub const MAX_BATCH_BYTES: usize = 4 << 20;

/// `init_decryption_engine`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct EngineLimits {
    /// Flows open at once.
    pub max_flows: u32,
    /// Key shares kept before a flow claims them.
    pub max_pending_shares: u32,
}

/// `init_decryption_engine`'s reply: the key shares' HPKE public key and the enclave's
/// quote binding it. Untrusted until [`verify_engine`] says otherwise: it comes through the
/// host.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct EngineKey {
    /// X25519 public key, 32 bytes.
    pub public: Vec<u8>,
    /// An emulated quote ([`enclave::attest`]) whose report data is
    /// [`engine_key_hash`]`(public)` followed by 32 zero bytes.
    pub quote: Vec<u8>,
}

/// The domain tag of [`engine_key_hash`].
pub const ENGINE_KEY_TAG: &[u8] = b"ccbench tls-middlebox engine key v1\0";

/// SHA-256 over [`ENGINE_KEY_TAG`] and an engine public key: what the enclave's quote binds.
pub fn engine_key_hash(public: &[u8]) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(ENGINE_KEY_TAG);
    ctx.update(public);
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The report data that binds the engine key `public`.
fn engine_report_data(public: &[u8]) -> ReportData {
    let mut d = [0u8; attest::REPORT_DATA_LEN];
    d[..32].copy_from_slice(&engine_key_hash(public));
    ReportData(d)
}

/// What an endpoint trusts before it seals a key share: the platform's identity and the
/// middlebox enclave's measurement, known to it, not learned from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trust {
    /// The platform's attestation public key.
    pub platform: PlatformIdentity,
    /// The measurement of the middlebox enclave ([`SERVICE`] of this executable).
    pub measurement: [u8; 32],
}

impl Trust {
    /// The trust of an endpoint on this machine running this executable: the platform
    /// identity from the platform key directory `key_dir` (else the default one, as
    /// [`enclave::EnclaveBuilder::sealing`] uses), and the measurement of [`SERVICE`] in this
    /// executable under the default signer.
    pub fn of_this_binary(key_dir: Option<&std::path::Path>) -> Result<Trust, AttestError> {
        let dir = match key_dir {
            Some(d) => d.to_path_buf(),
            None => enclave::seal::RootKey::default_dir().ok_or_else(|| {
                AttestError::Trust(
                    "no platform key directory (set HOME or CCBENCH_PLATFORM_KEY_DIR)".into(),
                )
            })?,
        };
        let platform = PlatformIdentity::load(&dir)
            .map_err(|e| AttestError::Trust(format!("platform identity: {e}")))?;
        let measurement = Identity::of_current_exe(SERVICE, DEFAULT_SIGNER)
            .map_err(|e| AttestError::Trust(format!("measuring this executable: {e}")))?
            .measurement;
        Ok(Trust {
            platform,
            measurement,
        })
    }
}

/// Why an endpoint refused the middlebox's key: it sends no share.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttestError {
    /// The quote itself was refused (another platform, another enclave, a changed byte,
    /// not a quote).
    #[error("the middlebox's quote was refused: {0}")]
    Quote(#[from] QuoteError),
    /// A genuine quote, but of another key: the host substituted the engine key.
    #[error(
        "the quote does not bind the engine key the host handed over (quoted key hash {quoted}, \
         handed-over key hash {handed}): the host substituted the key"
    )]
    KeyNotBound {
        /// The key hash in the quote's report data, hex.
        quoted: String,
        /// The hash of the key the host handed over, hex.
        handed: String,
    },
    /// The endpoint's own trust anchors could not be established.
    #[error("trust anchors: {0}")]
    Trust(String),
}

/// An engine key whose quote verified: the only key [`seal_share`] seals to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttestedEngine {
    public: Vec<u8>,
    trust: Trust,
}

impl AttestedEngine {
    /// The X25519 public key.
    pub fn public(&self) -> &[u8] {
        &self.public
    }

    /// The platform and measurement it was verified against.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }
}

/// Verifies the quote that came with `engine` against `trust`, and that it binds
/// `engine.public`: the endpoint's check before it seals any share.
pub fn verify_engine(engine: &EngineKey, trust: &Trust) -> Result<AttestedEngine, AttestError> {
    let data = attest::verify(&engine.quote, &trust.platform, &trust.measurement)?;
    let want = engine_report_data(&engine.public);
    if data != want {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        return Err(AttestError::KeyNotBound {
            quoted: hex(&data.0[..32]),
            handed: hex(&want.0[..32]),
        });
    }
    Ok(AttestedEngine {
        public: engine.public.clone(),
        trust: *trust,
    })
}

/// `load_ruleset`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct Ruleset {
    /// Byte patterns; matches are counted without overlaps, leftmost-first.
    pub patterns: Vec<Vec<u8>>,
}

/// `init_out_of_band_key_share`'s request: a master secret sealed to the engine.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct KeyShare {
    /// The session's client random (the additional data of the sealing).
    pub client_random: [u8; 32],
    /// HPKE encapsulated key.
    pub enc: Vec<u8>,
    /// HPKE ciphertext of the 48-byte master secret.
    pub ciphertext: Vec<u8>,
}

/// `set_info_flow`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub enum FlowInfo {
    /// A connection was accepted: its id and endpoints.
    Open {
        /// The host's id for the flow.
        flow: u64,
        /// The client's address.
        client: String,
        /// The server's address.
        server: String,
    },
    /// The connection ended: return its counts and forget it.
    Close {
        /// The flow.
        flow: u64,
    },
}

/// What the enclave counted for one direction of a flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Encode, Decode)]
pub struct DirectionCounts {
    /// Records decrypted (every content type).
    pub decrypted: u64,
    /// Application-data records decrypted.
    pub app_records: u64,
    /// Application-data plaintext bytes.
    pub app_bytes: u64,
    /// Records that failed authentication.
    pub auth_failures: u64,
    /// Rule-set matches in application data.
    pub matches: u64,
}

/// `set_info_flow`'s reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Encode, Decode)]
pub struct FlowReply {
    /// At close: the flow's counts, client to server then server to client.
    pub counts: Option<[DirectionCounts; 2]>,
    /// Key shares held that no open flow has claimed.
    pub shares_pending: u32,
}

/// `init_tls_process`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct TlsRandoms {
    /// The flow.
    pub flow: u64,
    /// From the ClientHello.
    pub client_random: [u8; 32],
    /// From the ServerHello.
    pub server_random: [u8; 32],
}

/// `start_tls_process`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct StartTls {
    /// The flow.
    pub flow: u64,
    /// The direction whose ChangeCipherSpec was seen.
    pub direction: Direction,
}

/// `reproduce_ssl_context`'s request: one whole record as on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct RecordIn {
    /// The flow.
    pub flow: u64,
    /// Its direction.
    pub direction: Direction,
    /// Header and fragment.
    pub record: Vec<u8>,
}

/// `reproduce_ssl_context_batch`'s request: records of any flows and directions; those of one
/// flow and direction in the order they were sent.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct RecordBatch {
    /// The records.
    pub records: Vec<RecordIn>,
}

/// A [`RecordIn`] read in place from a request's bytes: the enclave's copy of the request
/// (the boundary's `[in]` copy) is the only one it makes of a record; the decryption reads
/// the ciphertext from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The flow.
    pub flow: u64,
    /// Its direction.
    pub direction: Direction,
    /// Header and fragment, where the request holds them.
    pub record: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// Reads one record as [`RecordIn`] encodes it.
    fn read(input: &mut &'a [u8]) -> Result<Self, parity_scale_codec::Error> {
        Ok(RecordView {
            flow: u64::decode(input)?,
            direction: Direction::decode(input)?,
            record: codec::bytes_in_place(input)?,
        })
    }

    /// `reproduce_ssl_context`'s request, as [`RecordIn`] would decode.
    pub fn decode(what: &'static str, bytes: &'a [u8]) -> Result<Self, codec::CodecError> {
        codec::decode_in_place(what, bytes, Self::read)
    }

    /// `reproduce_ssl_context_batch`'s request, as [`RecordBatch`] would decode.
    pub fn decode_batch(
        what: &'static str,
        bytes: &'a [u8],
    ) -> Result<Vec<Self>, codec::CodecError> {
        codec::decode_in_place(what, bytes, |input| {
            let n = parity_scale_codec::Compact::<u32>::decode(input)?.0 as usize;
            // Every record takes at least 10 bytes: no count reserves more than the input.
            let mut records = Vec::with_capacity(n.min(input.len() / 10));
            for _ in 0..n {
                records.push(Self::read(input)?);
            }
            Ok(records)
        })
    }
}

impl<'a> From<&'a RecordIn> for RecordView<'a> {
    /// The view an encoding of `r` reads as (tests and fuzzing compare the two readings).
    fn from(r: &'a RecordIn) -> Self {
        RecordView {
            flow: r.flow,
            direction: r.direction,
            record: &r.record,
        }
    }
}

/// `reproduce_ssl_context_batch`'s reply: one outcome per record, in the batch's order.
pub type BatchVerdicts = Vec<Result<Verdict, MiddleboxError>>;

/// `reproduce_ssl_context`'s reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Encode, Decode)]
pub struct Verdict {
    /// The record's content type byte.
    pub content_type: u8,
    /// Plaintext bytes.
    pub plaintext_len: u32,
    /// Rule-set matches in it (application data only).
    pub matches: u32,
}

/// What the middlebox's enclave refuses, typed across the boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Encode, Decode)]
pub enum MiddleboxError {
    /// An ecall before `init_decryption_engine`.
    #[error("the decryption engine is not initialised")]
    NotInitialized,
    /// The flow limit was reached.
    #[error("too many flows (limit {0})")]
    TooManyFlows(u32),
    /// The pending key-share limit was reached.
    #[error("too many pending key shares (limit {0})")]
    TooManyShares(u32),
    /// A flow id that is not open.
    #[error("unknown flow {0}")]
    UnknownFlow(u64),
    /// A flow id opened twice.
    #[error("flow {0} is already open")]
    DuplicateFlow(u64),
    /// A key share that does not open (wrong key, tampered, or not 48 bytes).
    #[error("a key share did not open")]
    BadKeyShare,
    /// `start_tls_process` before `init_tls_process`.
    #[error("flow {0}: no hello randoms yet")]
    NoRandoms(u64),
    /// No key share for the flow's client random.
    #[error("flow {0}: no key share for its client random")]
    NoKeyShare(u64),
    /// A record in a direction that has not started.
    #[error("flow {flow}: {direction:?} has not seen its ChangeCipherSpec")]
    NotStarted {
        /// The flow.
        flow: u64,
        /// The direction.
        direction: Direction,
    },
    /// Bytes that are not one whole record.
    #[error("malformed record: {0}")]
    BadRecord(String),
    /// The record did not decrypt.
    #[error("flow {flow}: {error}")]
    Open {
        /// The flow.
        flow: u64,
        /// Why.
        error: OpenError,
    },
    /// The rule set could not be built.
    #[error("rule set: {0}")]
    BadRuleset(String),
    /// The enclave could not quote its key (it was started without platform keys).
    #[error("quoting the engine key: {0}")]
    Attestation(String),
    /// A batch over the bounds ([`MAX_BATCH_RECORDS`], [`MAX_BATCH_BYTES`]).
    #[error("a batch of {records} records and {bytes} bytes is over the bounds")]
    BatchTooLarge {
        /// Records in it.
        records: u64,
        /// Record bytes in it.
        bytes: u64,
    },
}

/// One direction's decrypter and counts.
#[derive(Debug, Default)]
struct DirState {
    opener: Option<Opener>,
    counts: DirectionCounts,
}

/// A flow's randoms and keys.
#[derive(Debug, Default)]
struct FlowKeys {
    randoms: Option<([u8; 32], [u8; 32])>,
    block: Option<KeyBlock>,
}

#[derive(Debug, Default)]
struct Flow {
    keys: Mutex<FlowKeys>,
    dirs: [Mutex<DirState>; 2],
}

struct Engine {
    limits: EngineLimits,
    secret: <X25519HkdfSha256 as Kem>::PrivateKey,
}

/// The service.
#[derive(Default)]
pub struct MiddleboxService {
    engine: RwLock<Option<Engine>>,
    rules: RwLock<Option<Arc<AhoCorasick>>>,
    shares: Mutex<HashMap<[u8; 32], MasterSecret>>,
    flows: RwLock<HashMap<u64, Arc<Flow>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update below is checked before it changes anything, so a panic elsewhere
    // cannot leave half-done state behind a poisoned lock.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// Each enclave thread's decryption buffer: all zeros between calls (see [`Wiped`]), so
    /// no plaintext outlives the record it came from. It keeps its length, so that the next
    /// record is decrypted into it without zeroing it first.
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The decryption buffer while one record uses it: its first `upto` bytes (all a record's
/// plaintext can take) are overwritten with zeros when dropped, on every path out (a
/// refused record and a panic included).
struct Wiped<'a> {
    buf: &'a mut Vec<u8>,
    upto: usize,
}

impl Drop for Wiped<'_> {
    fn drop(&mut self) {
        let n = self.upto.min(self.buf.len());
        clear(&mut self.buf[..n]);
    }
}

/// This thread's decryption buffer: its length and whether it holds nothing but zeros (for
/// tests that it was used and that no plaintext is left after a call).
#[cfg(test)]
pub(super) fn decryption_buffer() -> (usize, bool) {
    BUF.with_borrow(|b| (b.len(), b.iter().all(|&x| x == 0)))
}

type Reply<T> = Result<T, MiddleboxError>;

impl MiddleboxService {
    fn limits(&self) -> Reply<(u32, u32)> {
        let g = self.engine.read().unwrap_or_else(PoisonError::into_inner);
        let e = g.as_ref().ok_or(MiddleboxError::NotInitialized)?;
        Ok((e.limits.max_flows, e.limits.max_pending_shares))
    }

    fn flow(&self, id: u64) -> Reply<Arc<Flow>> {
        self.flows
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
            .ok_or(MiddleboxError::UnknownFlow(id))
    }

    fn init(&self, limits: EngineLimits, ctx: &Ctx<'_>) -> Reply<EngineKey> {
        let mut ikm = [0u8; 32];
        // getrandom(2) is on the sandbox's allow-list.
        aws_lc_rs::rand::fill(&mut ikm).map_err(|_| MiddleboxError::NotInitialized)?;
        let (secret, public) = X25519HkdfSha256::derive_keypair(&ikm);
        ikm.fill(0);
        let public = public.to_bytes().to_vec();
        // The report data is computed here, inside: the host cannot choose it.
        let quote = ctx
            .quote(&engine_report_data(&public))
            .map_err(|e| MiddleboxError::Attestation(e.to_string()))?;
        *self.engine.write().unwrap_or_else(PoisonError::into_inner) =
            Some(Engine { limits, secret });
        Ok(EngineKey { public, quote })
    }

    fn load_ruleset(&self, r: Ruleset) -> Reply<u32> {
        self.limits()?;
        let n = u32::try_from(r.patterns.len()).unwrap_or(u32::MAX);
        let ac =
            AhoCorasick::new(&r.patterns).map_err(|e| MiddleboxError::BadRuleset(e.to_string()))?;
        *self.rules.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(ac));
        Ok(n)
    }

    fn key_share(&self, s: KeyShare) -> Reply<u32> {
        let (_, max_shares) = self.limits()?;
        let master = {
            let g = self.engine.read().unwrap_or_else(PoisonError::into_inner);
            let e = g.as_ref().ok_or(MiddleboxError::NotInitialized)?;
            let enc = <X25519HkdfSha256 as Kem>::EncappedKey::from_bytes(&s.enc)
                .map_err(|_| MiddleboxError::BadKeyShare)?;
            let pt = hpke::single_shot_open::<AesGcm128, HkdfSha256, X25519HkdfSha256>(
                &OpModeR::Base,
                &e.secret,
                &enc,
                SHARE_INFO,
                &s.ciphertext,
                &s.client_random,
            )
            .map_err(|_| MiddleboxError::BadKeyShare)?;
            let bytes: [u8; MASTER_SECRET_LEN] = pt
                .as_slice()
                .try_into()
                .map_err(|_| MiddleboxError::BadKeyShare)?;
            MasterSecret(bytes)
        };
        let mut shares = lock(&self.shares);
        if shares.len() >= max_shares as usize && !shares.contains_key(&s.client_random) {
            return Err(MiddleboxError::TooManyShares(max_shares));
        }
        shares.insert(s.client_random, master);
        Ok(u32::try_from(shares.len()).unwrap_or(u32::MAX))
    }

    fn set_info_flow(&self, info: FlowInfo) -> Reply<FlowReply> {
        let (max_flows, _) = self.limits()?;
        let counts = match info {
            FlowInfo::Open { flow, .. } => {
                let mut flows = self.flows.write().unwrap_or_else(PoisonError::into_inner);
                if flows.contains_key(&flow) {
                    return Err(MiddleboxError::DuplicateFlow(flow));
                }
                if flows.len() >= max_flows as usize {
                    return Err(MiddleboxError::TooManyFlows(max_flows));
                }
                flows.insert(flow, Arc::default());
                None
            }
            FlowInfo::Close { flow } => {
                let f = self
                    .flows
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&flow)
                    .ok_or(MiddleboxError::UnknownFlow(flow))?;
                // The flow's share is used up with it.
                if let Some((client_random, _)) = lock(&f.keys).randoms {
                    lock(&self.shares).remove(&client_random);
                }
                Some([lock(&f.dirs[0]).counts, lock(&f.dirs[1]).counts])
            }
        };
        let shares_pending = u32::try_from(lock(&self.shares).len()).unwrap_or(u32::MAX);
        Ok(FlowReply {
            counts,
            shares_pending,
        })
    }

    fn init_tls(&self, r: TlsRandoms) -> Reply<()> {
        self.limits()?;
        let f = self.flow(r.flow)?;
        lock(&f.keys).randoms = Some((r.client_random, r.server_random));
        Ok(())
    }

    fn start_tls(&self, s: StartTls) -> Reply<()> {
        self.limits()?;
        let f = self.flow(s.flow)?;
        let opener = {
            let mut keys = lock(&f.keys);
            let (client_random, server_random) =
                keys.randoms.ok_or(MiddleboxError::NoRandoms(s.flow))?;
            if keys.block.is_none() {
                let shares = lock(&self.shares);
                let master = shares
                    .get(&client_random)
                    .ok_or(MiddleboxError::NoKeyShare(s.flow))?;
                keys.block = Some(KeyBlock::derive(master, &client_random, &server_random));
            }
            keys.block
                .as_ref()
                .ok_or(MiddleboxError::NoKeyShare(s.flow))?
                .opener(s.direction)
                .map_err(|error| MiddleboxError::Open {
                    flow: s.flow,
                    error,
                })?
        };
        lock(&f.dirs[s.direction.index()]).opener = Some(opener);
        Ok(())
    }

    fn reproduce(&self, r: RecordView<'_>) -> Reply<Verdict> {
        let f = self.flow(r.flow)?;
        // The enclave trusts nothing about the host's framing: one whole record, no more.
        let (ct, version, total) = records::header(r.record)
            .map_err(|e| MiddleboxError::BadRecord(e.to_string()))?
            .ok_or_else(|| MiddleboxError::BadRecord("shorter than a header".into()))?;
        if total != r.record.len() {
            return Err(MiddleboxError::BadRecord(format!(
                "header says {total} bytes, {} given",
                r.record.len()
            )));
        }
        let rules = self
            .rules
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut dir = lock(&f.dirs[r.direction.index()]);
        let dir = &mut *dir;
        let opener = dir.opener.as_mut().ok_or(MiddleboxError::NotStarted {
            flow: r.flow,
            direction: r.direction,
        })?;
        let fragment = &r.record[records::HEADER_LEN..];
        BUF.with_borrow_mut(|buf| {
            let buf = Wiped {
                buf,
                upto: fragment.len(),
            };
            let plain = match opener.open(ct, version, fragment, buf.buf) {
                Ok(p) => p,
                Err(error) => {
                    if error == OpenError::Authentication {
                        dir.counts.auth_failures += 1;
                    }
                    return Err(MiddleboxError::Open {
                        flow: r.flow,
                        error,
                    });
                }
            };
            dir.counts.decrypted += 1;
            let mut matches = 0u32;
            if ct == ContentType::ApplicationData {
                if let Some(ac) = &rules {
                    matches = u32::try_from(ac.find_iter(plain).count()).unwrap_or(u32::MAX);
                }
                dir.counts.app_records += 1;
                dir.counts.app_bytes += plain.len() as u64;
                dir.counts.matches += u64::from(matches);
            }
            Ok(Verdict {
                content_type: ct.byte(),
                plaintext_len: u32::try_from(plain.len()).unwrap_or(u32::MAX),
                matches,
            })
        })
    }

    fn reproduce_batch(&self, records: Vec<RecordView<'_>>) -> Reply<BatchVerdicts> {
        let bytes: usize = records.iter().map(|r| r.record.len()).sum();
        if records.len() > MAX_BATCH_RECORDS || bytes > MAX_BATCH_BYTES {
            return Err(MiddleboxError::BatchTooLarge {
                records: records.len() as u64,
                bytes: bytes as u64,
            });
        }
        Ok(records.into_iter().map(|r| self.reproduce(r)).collect())
    }

    fn call(&self, call: Call, input: &[u8], ctx: &Ctx<'_>) -> Result<Vec<u8>, ServiceError> {
        Ok(match call {
            Call::InitDecryptionEngine => self
                .init(codec::decode("engine limits", input)?, ctx)
                .encode(),
            Call::LoadRuleset => self
                .load_ruleset(codec::decode("rule set", input)?)
                .encode(),
            Call::InitOutOfBandKeyShare => {
                self.key_share(codec::decode("key share", input)?).encode()
            }
            Call::SetInfoFlow => self
                .set_info_flow(codec::decode("flow info", input)?)
                .encode(),
            Call::InitTlsProcess => self
                .init_tls(codec::decode("hello randoms", input)?)
                .encode(),
            Call::StartTlsProcess => self.start_tls(codec::decode("start tls", input)?).encode(),
            Call::ReproduceSslContext => self
                .reproduce(RecordView::decode("record", input)?)
                .encode(),
            Call::ReproduceSslContextBatch => self
                .reproduce_batch(RecordView::decode_batch("record batch", input)?)
                .encode(),
        })
    }
}

impl Service for MiddleboxService {
    fn ecall(
        &self,
        call_id: u32,
        input: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<Vec<u8>, ServiceError> {
        self.call(Call::try_from(call_id)?, input, ctx)
    }
}

/// Registers the service.
pub fn register(r: Registry) -> Registry {
    r.with(SERVICE, |_| Ok(Arc::new(MiddleboxService::default())))
}

/// Why a call through the [`Client`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The boundary failed (the enclave died, a payload was refused).
    #[error("{call}: {source}")]
    Boundary {
        /// The ecall.
        call: &'static str,
        /// The boundary's error.
        #[source]
        source: enclave::Error,
    },
    /// The reply did not decode.
    #[error(transparent)]
    Reply(#[from] codec::CodecError),
    /// The enclave refused.
    #[error(transparent)]
    Middlebox(#[from] MiddleboxError),
}

/// Seals a master secret to the attested engine's public key, as an endpoint does before it
/// hands the share to the middlebox. Only an [`AttestedEngine`] is accepted: a key the
/// host handed over must pass [`verify_engine`] first.
pub fn seal_share(
    engine: &AttestedEngine,
    client_random: [u8; 32],
    master: &[u8],
) -> Result<KeyShare, String> {
    let pk = <X25519HkdfSha256 as Kem>::PublicKey::from_bytes(&engine.public)
        .map_err(|e| format!("engine public key: {e}"))?;
    let mut seed = [0u8; 32];
    aws_lc_rs::rand::fill(&mut seed).map_err(|_| "no randomness for HPKE".to_owned())?;
    let mut rng = <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::from_seed(seed);
    let (enc, ciphertext) = hpke::single_shot_seal::<AesGcm128, HkdfSha256, X25519HkdfSha256, _>(
        &OpModeS::Base,
        &pk,
        SHARE_INFO,
        master,
        &client_random,
        &mut rng,
    )
    .map_err(|e| format!("HPKE seal: {e}"))?;
    Ok(KeyShare {
        client_random,
        enc: enc.to_bytes().to_vec(),
        ciphertext,
    })
}

/// The host's typed handle on the middlebox enclave.
#[derive(Clone, Copy)]
pub struct Client<'e> {
    enclave: &'e Enclave,
}

impl<'e> Client<'e> {
    /// A client of `enclave`, which must run [`SERVICE`].
    pub fn new(enclave: &'e Enclave) -> Self {
        Client { enclave }
    }

    fn call<T: Decode>(&self, call: Call, input: &impl Encode) -> Result<T, ClientError> {
        Self::reply(call, self.enclave.ecall(call.into(), &input.encode()))
    }

    /// The enclave's reply to `call`, decoded.
    fn reply<T: Decode>(
        call: Call,
        out: Result<Vec<u8>, enclave::Error>,
    ) -> Result<T, ClientError> {
        let out = out.map_err(|source| ClientError::Boundary {
            call: call.name(),
            source,
        })?;
        Ok(codec::decode::<Result<T, MiddleboxError>>(
            call.name(),
            &out,
        )??)
    }

    /// `init_decryption_engine`.
    pub fn init_decryption_engine(&self, limits: &EngineLimits) -> Result<EngineKey, ClientError> {
        self.call(Call::InitDecryptionEngine, limits)
    }

    /// `load_ruleset`: the number of patterns loaded.
    pub fn load_ruleset(&self, rules: &Ruleset) -> Result<u32, ClientError> {
        self.call(Call::LoadRuleset, rules)
    }

    /// `init_out_of_band_key_share`: the number of shares now held.
    pub fn init_out_of_band_key_share(&self, share: &KeyShare) -> Result<u32, ClientError> {
        self.call(Call::InitOutOfBandKeyShare, share)
    }

    /// `set_info_flow`.
    pub fn set_info_flow(&self, info: &FlowInfo) -> Result<FlowReply, ClientError> {
        self.call(Call::SetInfoFlow, info)
    }

    /// `init_tls_process`.
    pub fn init_tls_process(&self, randoms: &TlsRandoms) -> Result<(), ClientError> {
        self.call(Call::InitTlsProcess, randoms)
    }

    /// `start_tls_process`.
    pub fn start_tls_process(&self, start: &StartTls) -> Result<(), ClientError> {
        self.call(Call::StartTlsProcess, start)
    }

    /// `reproduce_ssl_context`: one record in, its verdict out.
    pub fn reproduce_ssl_context(&self, record: &RecordIn) -> Result<Verdict, ClientError> {
        self.call(Call::ReproduceSslContext, record)
    }

    /// `reproduce_ssl_context_batch`: records in, one verdict or refusal each out.
    pub fn reproduce_ssl_context_batch(
        &self,
        batch: &RecordBatch,
    ) -> Result<BatchVerdicts, ClientError> {
        self.call(Call::ReproduceSslContextBatch, batch)
    }

    /// [`reproduce_ssl_context_batch`](Self::reproduce_ssl_context_batch) with the request
    /// already encoded, in pieces whose concatenation is a [`RecordBatch`]'s encoding (the
    /// batcher's count and segments), which go into the enclave as they are
    /// ([`Enclave::ecall_pieces`]).
    pub fn reproduce_ssl_context_batch_pieces(
        &self,
        pieces: &[&[u8]],
    ) -> Result<BatchVerdicts, ClientError> {
        let call = Call::ReproduceSslContextBatch;
        Self::reply(call, self.enclave.ecall_pieces(call.into(), pieces))
    }
}
