//! The tree mechanism as an enclave service, and the host's typed client for it.
//!
//! One tree per enclave, behind one lock: every ecall (`init`, `add`, `sum`, `add_batch`)
//! takes it for its whole duration, as the original's `synchronized` Java service did. So
//! the tree's own work never runs in parallel; what threads can overlap is everything
//! outside the lock (the crossing, the copies, the host's encoding and decoding).
//!
//! # Messages
//!
//! Through the crate's codec ([`harness::codec`]): `init` an [`InitRequest`]; `add` one `f64`;
//! `sum` nothing; `add_batch` a `Vec<f64>`. Every reply is a `Result` of the payload
//! (`init`: nothing; `add`, `sum`: one `f64`; `add_batch`: the prefix sums) and a
//! [`TreeError`], so the host gets the same typed error the tree raised. A malformed input
//! is a service error (the host's client never sends one).

use std::sync::{Arc, Mutex, PoisonError};

use enclave::{Ctx, Enclave, Registry, Service, ServiceError};

use super::tree::{Tree, TreeError};
use harness::codec::{CodecError, Decode, Encode, decode};

/// The enclave service's name.
pub const SERVICE: &str = "ccbench.dp-tree";

harness::calls! {
    /// The service's ecalls.
    pub enum Call {
        /// `init(n, sigma)`: a new tree, fresh noise.
        Init = 0 => "init",
        /// `add(v)`: the private prefix sum after adding `v`.
        Add = 1 => "add",
        /// `sum()`: the private prefix sum of everything added.
        Sum = 2 => "sum",
        /// `add_batch([v...])`: the `k` private prefix sums.
        AddBatch = 3 => "add_batch",
    }
}

/// The input of [`Call::Init`].
#[derive(Debug, Clone, Copy, PartialEq, Encode, Decode)]
pub struct InitRequest {
    /// Capacity: how many adds the tree takes.
    pub capacity: u64,
    /// Standard deviation of each node's Gaussian noise.
    pub sigma: f64,
}

/// The service: one optional tree behind one lock.
#[derive(Default)]
pub struct DpTreeService {
    tree: Mutex<Option<Tree>>,
}

impl DpTreeService {
    fn call(&self, call: Call, input: &[u8]) -> Result<Vec<u8>, ServiceError> {
        // A panic while the lock was held cannot leave a half-done update: every operation
        // checks before it changes anything. So a poisoned lock's tree is still whole.
        let mut guard = self.tree.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match call {
            Call::Init => {
                let r: InitRequest = decode("init request", input)?;
                // Invalid parameters leave the old tree in place; valid ones drop it first,
                // so that two large trees never coexist.
                let reply = super::tree::validate(r.capacity, r.sigma).and_then(|()| {
                    *guard = None;
                    *guard = Some(Tree::new(r.capacity, r.sigma)?);
                    Ok(())
                });
                reply.encode()
            }
            Call::Add => {
                let v: f64 = decode("add request", input)?;
                let reply = match guard.as_mut() {
                    Some(t) => t.add(v),
                    None => Err(TreeError::NotInitialized),
                };
                reply.encode()
            }
            Call::Sum => {
                decode::<()>("sum request", input)?;
                let reply = guard.as_ref().map(Tree::sum);
                reply.ok_or(TreeError::NotInitialized).encode()
            }
            Call::AddBatch => {
                let values: Vec<f64> = decode("add_batch request", input)?;
                let reply = match guard.as_mut() {
                    Some(t) => {
                        let mut sums = Vec::with_capacity(values.len());
                        t.add_batch(&values, &mut sums).map(|()| sums)
                    }
                    None => Err(TreeError::NotInitialized),
                };
                reply.encode()
            }
        })
    }
}

impl Service for DpTreeService {
    fn ecall(
        &self,
        call_id: u32,
        input: &[u8],
        _ctx: &mut Ctx<'_>,
    ) -> Result<Vec<u8>, ServiceError> {
        self.call(Call::try_from(call_id)?, input)
    }
}

/// Registers the service (it takes no init bytes: each tree is made by the `init` ecall).
pub fn register(r: Registry) -> Registry {
    r.with(SERVICE, |_| Ok(Arc::new(DpTreeService::default())))
}

/// Why a call through [`Client`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The tree refused the operation.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// The call did not complete (the enclave is gone, the input was refused, ...).
    #[error("{what}: {source}")]
    Enclave {
        /// The operation.
        what: &'static str,
        /// The boundary's error.
        source: enclave::Error,
    },
    /// The enclave's reply does not have the shape the operation's output has.
    #[error(transparent)]
    Reply(#[from] CodecError),
}

/// The host's typed view of a [`DpTreeService`] enclave.
#[derive(Clone, Copy)]
pub struct Client<'e> {
    enclave: &'e Enclave,
}

/// `values` as the `add_batch` input, encoded once so that a benchmark can reuse it.
pub fn encode_values(values: &[f64]) -> Vec<u8> {
    values.encode()
}

impl<'e> Client<'e> {
    /// A client of an enclave running [`SERVICE`].
    pub fn new(enclave: &'e Enclave) -> Self {
        Client { enclave }
    }

    /// One call: `input` already encoded, the reply decoded as `Result<T, TreeError>`.
    fn call<T: Decode>(
        &self,
        what: &'static str,
        call: Call,
        input: &[u8],
    ) -> Result<T, ClientError> {
        let reply = self
            .enclave
            .ecall(call.into(), input)
            .map_err(|source| ClientError::Enclave { what, source })?;
        Ok(decode::<Result<T, TreeError>>(what, &reply)??)
    }

    /// Replaces the enclave's tree by a new one of capacity `n`, noise `N(0, sigma^2)`.
    pub fn init(&self, n: u64, sigma: f64) -> Result<(), ClientError> {
        let req = InitRequest { capacity: n, sigma };
        self.call("init", Call::Init, &req.encode())
    }

    /// Adds `v`; returns the private prefix sum of everything added.
    pub fn add(&self, v: f64) -> Result<f64, ClientError> {
        self.call("add", Call::Add, &v.encode())
    }

    /// The private prefix sum of everything added.
    pub fn sum(&self) -> Result<f64, ClientError> {
        self.call("sum", Call::Sum, &[])
    }

    /// Adds `values` in one ecall; returns their private prefix sums.
    pub fn add_batch(&self, values: &[f64]) -> Result<Vec<f64>, ClientError> {
        self.add_batch_encoded(&encode_values(values), values.len())
    }

    /// [`Client::add_batch`] of `count` values already encoded by [`encode_values`] (the
    /// benchmark encodes its batch once).
    pub fn add_batch_encoded(&self, input: &[u8], count: usize) -> Result<Vec<f64>, ClientError> {
        let what = "add_batch";
        let sums: Vec<f64> = self.call(what, Call::AddBatch, input)?;
        if sums.len() != count {
            return Err(CodecError {
                what,
                reason: format!("{} prefix sums for {count} values", sums.len()),
            }
            .into());
        }
        Ok(sums)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enclave::Backend;

    fn native() -> Enclave {
        Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .start(&register(Registry::new()))
            .unwrap()
    }

    #[test]
    fn every_call_and_every_error_crosses_typed() {
        let e = native();
        let c = Client::new(&e);
        assert!(matches!(
            c.add(1.0),
            Err(ClientError::Tree(TreeError::NotInitialized))
        ));
        assert!(matches!(
            c.sum(),
            Err(ClientError::Tree(TreeError::NotInitialized))
        ));
        assert!(matches!(
            c.init(0, 0.5),
            Err(ClientError::Tree(TreeError::ZeroCapacity))
        ));
        for sigma in [0.0, -0.5, f64::INFINITY] {
            assert!(matches!(
                c.init(4, sigma),
                Err(ClientError::Tree(TreeError::BadSigma { sigma: s })) if s == sigma
            ));
        }
        assert!(matches!(
            c.init(u64::MAX, 0.5),
            Err(ClientError::Tree(TreeError::CapacityTooLarge {
                n: u64::MAX,
                ..
            }))
        ));
        c.init(4, 0.5).unwrap();
        let first = c.add(1.0).unwrap();
        assert!(first.is_finite());
        let sums = c.add_batch(&[2.0, 3.0]).unwrap();
        assert_eq!(sums.len(), 2);
        assert_eq!(c.sum().unwrap(), sums[1], "the same prefix, the same noise");
        assert!(matches!(
            c.add_batch(&[1.0, f64::NAN]),
            Err(ClientError::Tree(TreeError::NonFinite { index: 1 }))
        ));
        assert!(matches!(
            c.add_batch(&[1.0; 2]),
            Err(ClientError::Tree(TreeError::CapacityExceeded {
                capacity: 4,
                added: 3,
                requested: 2
            }))
        ));
        c.add(4.0).unwrap();
        assert!(matches!(
            c.add(5.0),
            Err(ClientError::Tree(TreeError::CapacityExceeded {
                added: 4,
                ..
            }))
        ));
        // Malformed inputs are the service's errors, named by the boundary.
        assert!(matches!(
            c.call::<f64>("add", Call::Add, b"short"),
            Err(ClientError::Enclave {
                source: enclave::Error::Service { call_id: 1, .. },
                ..
            })
        ));
        assert!(
            c.call::<Vec<f64>>("add_batch", Call::AddBatch, &[0; 9])
                .is_err()
        );
        assert!(c.call::<()>("init", Call::Init, &[0; 15]).is_err());
        // Trailing bytes are refused, not ignored.
        let mut long = 1.0f64.encode();
        long.push(0);
        assert!(c.call::<f64>("add", Call::Add, &long).is_err());
        assert!(matches!(
            e.ecall(9, &[]),
            Err(enclave::Error::UnknownCall(9))
        ));
        // A refused init keeps the tree; a new one starts over.
        assert!(c.init(2, f64::NAN).is_err());
        assert_eq!(c.sum().unwrap(), c.sum().unwrap());
        assert!(matches!(
            c.add(1.0),
            Err(ClientError::Tree(TreeError::CapacityExceeded {
                added: 4,
                ..
            }))
        ));
        c.init(2, 0.5).unwrap();
        assert_eq!(c.add_batch(&[1.0, 1.0]).unwrap().len(), 2);
    }

    #[test]
    fn errors_round_trip_and_garbage_is_refused() {
        let all = [
            TreeError::ZeroCapacity,
            TreeError::CapacityTooLarge { n: 9, max: 8 },
            TreeError::BadSigma { sigma: -2.5 },
            TreeError::CapacityExceeded {
                capacity: 3,
                added: 2,
                requested: 5,
            },
            TreeError::NonFinite { index: 7 },
            TreeError::NotInitialized,
            TreeError::Entropy("no entropy".into()),
        ];
        for e in all {
            let reply: Result<f64, TreeError> = Err(e.clone());
            assert_eq!(
                decode::<Result<f64, TreeError>>("x", &reply.encode()),
                Ok(Err(e))
            );
        }
        assert!(decode::<Result<f64, TreeError>>("x", &[]).is_err());
        assert!(decode::<Result<f64, TreeError>>("x", &[1, 4, 1, 2]).is_err());
        assert!(decode::<Result<f64, TreeError>>("x", &[1, 99]).is_err());
        assert!(decode::<Result<f64, TreeError>>("x", &[0, 1, 2]).is_err());
    }
}
