//! The host-side error type.

use thiserror::Error;

use crate::wire::WireError;

/// Why an ecall (or starting an enclave) failed.
#[derive(Debug, Error)]
pub enum Error {
    /// The enclave process is gone (crashed, killed, or killed by its seccomp filter); every
    /// in-flight and later call fails with this.
    #[error("enclave lost: {reason}")]
    EnclaveLost {
        /// What the host knows about the exit (signal, exit status).
        reason: String,
    },
    /// The service returned an error for this call.
    #[error("ecall {call_id} failed in the enclave: {message}")]
    Service {
        /// The call id.
        call_id: u32,
        /// The service's message.
        message: String,
    },
    /// The service panicked during this call; the enclave lives on.
    #[error("ecall {call_id} panicked in the enclave: {message}")]
    Panicked {
        /// The call id.
        call_id: u32,
        /// The panic message.
        message: String,
    },
    /// The call did not return within the enclave's call time limit
    /// ([`crate::EnclaveBuilder::call_timeout`]); the host ended the enclave, so every later
    /// call fails with [`Error::EnclaveLost`].
    #[error("ecall {call_id} did not return within {limit:?}; the enclave was ended")]
    CallTimeout {
        /// The call id.
        call_id: u32,
        /// The limit.
        limit: std::time::Duration,
    },
    /// The service does not know this call id.
    #[error("the enclave has no ecall {0}")]
    UnknownCall(u32),
    /// The enclave broke the message protocol; the host killed it.
    #[error("protocol violation by the enclave: {0}")]
    Protocol(#[from] WireError),
    /// No service of this name in the registry.
    #[error("no enclave service named {0:?}")]
    UnknownService(String),
    /// The service's constructor (or the enclave's start-up) failed.
    #[error("enclave start-up failed: {0}")]
    Startup(String),
    /// An invalid configuration.
    #[error("invalid enclave configuration: {0}")]
    Config(String),
    /// An operating-system error on the host.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}
