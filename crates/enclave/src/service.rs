//! The enclave side: [`Service`], the ocall context [`Ctx`], and the [`Registry`].
//!
//! A service is the code that runs inside the boundary. It is constructed once per enclave
//! from its name and init bytes (through the [`Registry`], in the enclave process for the
//! sandbox backend), keeps its own state, and is called concurrently from up to `tcs`
//! threads (hence `&self` and `Sync`, as an SGX enclave's trusted functions are reentrant).
//! Everything it needs from the outside world goes through [`Ctx`]: ocalls to the host's
//! table, and the platform keys (sealing and quoting).

use std::collections::BTreeMap;
use std::sync::Arc;

use thiserror::Error;

use crate::attest::{PlatformIdentity, PlatformKeys, QuoteError, ReportData};
use crate::ocall::{Level, builtin};
use crate::seal::Sealer;
use crate::wire;

/// An error returned by a service for one call.
#[derive(Debug, Error)]
pub enum ServiceError {
    /// The service does not implement this call id.
    #[error("unknown call id {0}")]
    UnknownCall(u32),
    /// The call failed.
    #[error("{0}")]
    Failed(String),
    /// An ocall the call depended on failed.
    #[error("ocall failed: {0}")]
    Ocall(#[from] OcallError),
}

impl From<String> for ServiceError {
    fn from(s: String) -> Self {
        ServiceError::Failed(s)
    }
}

impl From<&str> for ServiceError {
    fn from(s: &str) -> Self {
        ServiceError::Failed(s.to_owned())
    }
}

/// Why an ocall failed, as seen from inside the enclave.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OcallError {
    /// The host handler returned an error.
    #[error("host: {0}")]
    Host(String),
    /// The host has no handler for this id.
    #[error("the host has no ocall {0}")]
    Unknown(u32),
    /// The reply could not be decoded.
    #[error("malformed ocall reply: {0}")]
    Malformed(String),
    /// The host side of the boundary broke down.
    #[error("boundary failure: {0}")]
    Boundary(String),
}

/// The enclave-side code.
pub trait Service: Send + Sync + 'static {
    /// Handles one ecall. `input` is the enclave's own copy of the caller's bytes.
    fn ecall(&self, call_id: u32, input: &[u8], ctx: &mut Ctx<'_>)
    -> Result<Vec<u8>, ServiceError>;
}

/// How a [`Ctx`] reaches the host: a direct call (native) or the shared-memory channel.
pub(crate) trait OcallPort {
    fn ocall(&mut self, ocall_id: u32, input: &[u8]) -> Result<Vec<u8>, OcallError>;
}

/// What a service can reach during an ecall: ocalls, the platform keys (sealing and
/// quoting), its TCS slot.
pub struct Ctx<'a> {
    port: &'a mut dyn OcallPort,
    keys: Option<&'a PlatformKeys>,
    tcs: usize,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        port: &'a mut dyn OcallPort,
        keys: Option<&'a PlatformKeys>,
        tcs: usize,
    ) -> Self {
        Ctx { port, keys, tcs }
    }

    /// Makes an ocall: `input` is copied out to the host's handler for `ocall_id`, whose
    /// output is copied back in. Switchless if the enclave was configured so for this id.
    pub fn ocall(&mut self, ocall_id: u32, input: &[u8]) -> Result<Vec<u8>, OcallError> {
        self.port.ocall(ocall_id, input)
    }

    /// The empty ocall (measures the bare round trip).
    pub fn noop(&mut self) -> Result<(), OcallError> {
        self.ocall(builtin::NOOP, &[]).map(drop)
    }

    /// Reads a whole file through the host.
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>, OcallError> {
        self.ocall(builtin::READ_FILE, path.as_bytes())
    }

    /// Writes a whole file through the host, atomically (temp file + rename).
    pub fn write_file(&mut self, path: &str, data: &[u8]) -> Result<(), OcallError> {
        self.ocall(builtin::WRITE_FILE, &wire::encode_write_file(path, data))
            .map(drop)
    }

    /// The host's wall clock, in nanoseconds since the Unix epoch (untrusted, as in SGX).
    pub fn clock(&mut self) -> Result<u64, OcallError> {
        let out = self.ocall(builtin::CLOCK, &[])?;
        wire::decode_clock(&out).map_err(|e| OcallError::Malformed(e.to_string()))
    }

    /// Appends a message to the host's log buffer.
    pub fn log(&mut self, level: Level, message: &str) -> Result<(), OcallError> {
        self.ocall(builtin::LOG, &wire::encode_log(level as u8, message))
            .map(drop)
    }

    /// The sealing keys, if the enclave was started with sealing enabled. They outlive the
    /// borrow of the context, so a call can hold them across its ocalls.
    pub fn sealer(&self) -> Option<&'a Sealer> {
        self.keys.map(|k| &k.sealer)
    }

    /// A quote of this enclave (its measurement and signer) binding `report_data`, signed by
    /// the emulated platform's attestation key: SGX's EREPORT followed by the Quoting
    /// Enclave, done inside the boundary so that the report data is the service's own
    /// choice (see [`crate::attest`]). Needs the platform keys, which an enclave started with
    /// sealing has ([`QuoteError::NotEnabled`] otherwise).
    pub fn quote(&self, report_data: &ReportData) -> Result<Vec<u8>, QuoteError> {
        let keys = self.keys.ok_or(QuoteError::NotEnabled)?;
        Ok(keys.quoter.quote(report_data))
    }

    /// The identity of the platform this enclave runs on, if it has the platform keys.
    pub fn platform_identity(&self) -> Option<PlatformIdentity> {
        self.keys.map(|k| k.quoter.platform())
    }

    /// Which TCS slot this call runs on (0 for native calls and switchless workers' own
    /// numbering starts after the TCS slots).
    pub fn tcs(&self) -> usize {
        self.tcs
    }
}

/// Builds a service from its init bytes.
pub type Constructor = Arc<dyn Fn(&[u8]) -> Result<Arc<dyn Service>, String> + Send + Sync>;

/// Service names and their constructors. The same registry must be passed to
/// [`crate::child::run_if_enclave`] at the top of `main` (where the enclave process finds
/// its service) and to [`crate::EnclaveBuilder::start`].
#[derive(Clone, Default)]
pub struct Registry {
    map: BTreeMap<String, Constructor>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a service.
    pub fn register(
        &mut self,
        name: &str,
        ctor: impl Fn(&[u8]) -> Result<Arc<dyn Service>, String> + Send + Sync + 'static,
    ) -> &mut Self {
        self.map.insert(name.to_owned(), Arc::new(ctor));
        self
    }

    /// Builder-style [`Registry::register`].
    pub fn with(
        mut self,
        name: &str,
        ctor: impl Fn(&[u8]) -> Result<Arc<dyn Service>, String> + Send + Sync + 'static,
    ) -> Self {
        self.register(name, ctor);
        self
    }

    /// Registered names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub(crate) fn construct(
        &self,
        name: &str,
        init: &[u8],
    ) -> Result<Arc<dyn Service>, crate::Error> {
        let ctor = self
            .map
            .get(name)
            .ok_or_else(|| crate::Error::UnknownService(name.to_owned()))?;
        ctor(init).map_err(crate::Error::Startup)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.map.keys()).finish()
    }
}
