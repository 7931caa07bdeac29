//! `enclave`: ccbench's trust boundary.
//!
//! A [`Service`] is code that runs inside the boundary; an [`Enclave`] is the host's handle
//! to one. The host calls in with [`Enclave::ecall`] (SGX's ECALL); the service calls out
//! through its [`Ctx`] (OCALL) to the host's ocall table. Two backends:
//!
//! * [`Backend::Native`]: the service in this process, a direct call — the baseline.
//! * [`Backend::Sandbox`] (default): the service in a separate, locked-down process (no
//!   core dumps, dies with the host, seccomp allow-list of memory/futex/clock/exit), reached
//!   only through shared memory: a real boundary on any Linux machine, whose costs are
//!   measured rather than assumed. See [`child`] for the enclave process and [`shm`'s
//!   design notes](crate#modules) in the module docs of `shm`, `switchless`, `trace`.
//!
//! Also here: switchless calls ([`SwitchlessConfig`], Intel SDK semantics), always-on
//! tracing ([`TraceSnapshot`]) and its [`advisor`], an optional transition-cost model
//! ([`TransitionModel`]), sealing ([`seal`]) and emulated attestation ([`attest`]): quotes
//! in the shape of SGX DCAP's, signed by a platform key derived from sealing's root key.
//!
//! # Using it
//!
//! ```no_run
//! use std::sync::Arc;
//! use enclave::{Ctx, Enclave, Registry, Service, ServiceError};
//!
//! struct Echo;
//! impl Service for Echo {
//!     fn ecall(&self, _id: u32, input: &[u8], _ctx: &mut Ctx<'_>) -> Result<Vec<u8>, ServiceError> {
//!         Ok(input.to_vec())
//!     }
//! }
//!
//! fn registry() -> Registry {
//!     Registry::new().with("echo", |_init| Ok(Arc::new(Echo)))
//! }
//!
//! fn main() {
//!     let reg = registry();
//!     enclave::child::run_if_enclave(&reg); // first thing: becomes the enclave if asked
//!     let e = Enclave::builder("echo").tcs(2).start(&reg).unwrap();
//!     assert_eq!(e.ecall(1, b"hi").unwrap(), b"hi");
//! }
//! ```
//!
//! The library never prints; errors are values ([`Error`]), traces are data.

pub mod advisor;
pub mod alloc;
pub mod attest;
pub mod child;
mod error;
mod host;
pub mod model;
pub mod ocall;
pub mod seal;
mod service;
mod shm;
pub mod switchless;
pub mod testing;
mod trace;
pub mod wire;

pub use advisor::{Advice, AdvisorConfig, Recommendation, advise};
pub use error::Error;
pub use host::{
    Backend, DEFAULT_AREA, DEFAULT_SPIN, DEFAULT_SPIN_MAX, DEFAULT_TCS, Enclave, EnclaveBuilder,
    MAX_TCS, POOL_AREA, SeccompMode,
};
pub use model::TransitionModel;
pub use ocall::{Level, LogEntry};
pub use service::{Constructor, Ctx, OcallError, Registry, Service, ServiceError};
pub use switchless::SwitchlessConfig;
pub use trace::{CallTrace, Direction, NATIVE_SAMPLE, TraceSnapshot};

/// The message of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}
