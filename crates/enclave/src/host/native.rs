//! The native backend: the service lives in this process, and an ecall is a direct (dynamic)
//! call wrapped in `catch_unwind`. The baseline of every comparison.

use std::sync::Arc;
use std::time::Instant;

use super::Enclave;
use crate::Error;
use crate::attest::PlatformKeys;
use crate::ocall;
use crate::seal::{Identity, RootKey};
use crate::service::{Ctx, OcallError, OcallPort, Service, ServiceError};
use crate::trace::NATIVE_SAMPLE;

/// The service and its platform keys, in this process.
pub(super) struct NativeImp {
    pub(super) service: Arc<dyn Service>,
    pub(super) keys: Option<PlatformKeys>,
}

/// The platform keys (sealing and quoting) of service `name` of this executable.
pub(super) fn native_keys(
    dir: &std::path::Path,
    name: &str,
    signer: &str,
) -> Result<PlatformKeys, Error> {
    let root = RootKey::load_or_create(dir).map_err(|e| Error::Startup(e.to_string()))?;
    let id = Identity::of_current_exe(name, signer)?;
    PlatformKeys::new(root, id).map_err(|e| Error::Startup(e.to_string()))
}

impl Enclave {
    /// The native fast path: count the call, charge the model if any, call the service.
    /// One call in [`NATIVE_SAMPLE`] per thread takes [`Enclave::native_ecall_timed`].
    /// Inlined into the caller with [`Enclave::ecall`], so that the result need not make
    /// extra trips through memory (see [`Enclave::native_call`]).
    #[inline(always)]
    pub(super) fn native_ecall(
        &self,
        n: &NativeImp,
        call_id: u32,
        input: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let stats = self.trace.ecall(call_id);
        if stats.count().is_multiple_of(NATIVE_SAMPLE) {
            return self.native_ecall_timed(n, &stats, call_id, input);
        }
        if let Some(m) = &self.model {
            m.charge(1);
        }
        let r = self.native_call(n, call_id, input);
        if let Some(m) = &self.model {
            m.charge(1);
        }
        native_output(call_id, r)
    }

    /// A sampled native call: as [`Enclave::native_ecall`], timed.
    #[cold]
    #[inline(never)]
    fn native_ecall_timed(
        &self,
        n: &NativeImp,
        stats: &crate::trace::Stats<'_>,
        call_id: u32,
        input: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let t0 = Instant::now();
        // Without a model nothing runs between the clock reads and the call, so the call's
        // own two reads serve as the total too (two reads fewer per sample; a native call
        // then has no transition time, which is what it is).
        let t1 = match &self.model {
            Some(m) => {
                m.charge(1);
                Instant::now()
            }
            None => t0,
        };
        let r = self.native_call(n, call_id, input);
        let t2 = Instant::now();
        let t3 = match &self.model {
            Some(m) => {
                m.charge(1);
                Instant::now()
            }
            None => t2,
        };
        stats.timed((t3 - t0).as_nanos() as u64, (t2 - t1).as_nanos() as u64);
        native_output(call_id, r)
    }

    /// The service call itself, with panics caught at the boundary.
    ///
    /// The service has just written its result with one store per field; copying the
    /// `Vec` out of it whole makes the compiler use wider loads, each of which stalls until
    /// those stores reach the cache (a load fed by two stores cannot be forwarded), and
    /// those stalls cost more than the rest of a native call. So the common case (an
    /// exact-size output, as `to_vec`, `collect` and `Vec::new` give) leaves as a boxed
    /// slice, read field by field and carried in registers until [`native_output`] turns it
    /// back into the same `Vec`; anything else is passed on unchanged.
    #[inline(always)]
    fn native_call(&self, n: &NativeImp, call_id: u32, input: &[u8]) -> NativeResult {
        let mut port = NativePort { enclave: self };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ctx = Ctx::new(&mut port, n.keys.as_ref(), 0);
            match n.service.ecall(call_id, input, &mut ctx) {
                Ok(v) if v.len() == v.capacity() => Called::Exact(v.into_boxed_slice()),
                r => Called::Other(r),
            }
        }))
    }
}

/// What a native service call returned (see [`Enclave::native_call`]).
enum Called {
    /// An exact-size output.
    Exact(Box<[u8]>),
    /// Anything else.
    Other(Result<Vec<u8>, ServiceError>),
}

type NativeResult = std::thread::Result<Called>;

/// The result of [`Enclave::native_call`].
#[inline(always)]
fn native_output(call_id: u32, r: NativeResult) -> Result<Vec<u8>, Error> {
    match r {
        Ok(Called::Exact(out)) => Ok(Vec::from(out)),
        Ok(Called::Other(Ok(v))) => Ok(v),
        Ok(Called::Other(Err(e))) => Err(native_error(call_id, e)),
        Err(p) => Err(native_panic(call_id, p)),
    }
}

/// The error of a failed native call.
#[cold]
#[inline(never)]
fn native_error(call_id: u32, e: ServiceError) -> Error {
    match e {
        ServiceError::UnknownCall(id) => Error::UnknownCall(id),
        e => Error::Service {
            call_id,
            message: e.to_string(),
        },
    }
}

/// The error of a native call that panicked.
#[cold]
#[inline(never)]
fn native_panic(call_id: u32, p: Box<dyn std::any::Any + Send>) -> Error {
    Error::Panicked {
        call_id,
        message: crate::panic_message(&*p),
    }
}

/// Ocalls of the native backend: a direct call into the table.
struct NativePort<'a> {
    enclave: &'a Enclave,
}

impl OcallPort for NativePort<'_> {
    fn ocall(&mut self, id: u32, input: &[u8]) -> Result<Vec<u8>, OcallError> {
        let e = self.enclave;
        let stats = e.trace.ocall(id);
        let timed = stats.count().is_multiple_of(NATIVE_SAMPLE);
        let t0 = timed.then(Instant::now);
        if let Some(m) = &e.model {
            m.charge(1);
        }
        let t1 = timed.then(Instant::now);
        let (status, out) = e.table.dispatch(id, input);
        let t2 = timed.then(Instant::now);
        if let Some(m) = &e.model {
            m.charge(1);
        }
        if let (Some(t0), Some(t1), Some(t2)) = (t0, t1, t2) {
            stats.timed(t0.elapsed().as_nanos() as u64, (t2 - t1).as_nanos() as u64);
        }
        ocall::to_result(id, status, out)
    }
}
