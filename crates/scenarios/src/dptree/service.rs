//! The tree mechanism as an enclave service, and the host's typed client for it.
//!
//! One tree per enclave, behind one lock: every ecall (`init`, `add`, `sum`, `add_batch`)
//! takes it for its whole duration, as the original's `synchronized` Java service did. So
//! the tree's own work never runs in parallel; what threads can overlap is everything
//! outside the lock (the crossing, the copies, the host's encoding and decoding).
//!
//! # Wire format
//!
//! Inputs: `init` a little-endian `u64` capacity and `f64` sigma; `add` one `f64`; `sum`
//! nothing; `add_batch` `k` `f64`s. Every reply starts with a status byte: 0 and the payload
//! (`init`: nothing; `add`, `sum`: one `f64`; `add_batch`: `k` `f64`s), or a [`TreeError`]
//! code and its fields, so the host gets the same typed error the tree raised. A malformed
//! input is a service error (the host's client never sends one).

use std::sync::{Arc, Mutex, PoisonError};

use enclave::{Ctx, Enclave, Registry, Service, ServiceError};

use super::tree::{Tree, TreeError};

/// The enclave service's name.
pub const SERVICE: &str = "ccbench.dp-tree";

/// Ecall ids of the service.
pub mod id {
    /// `init(n, sigma)`: a new tree, fresh noise.
    pub const INIT: u32 = 0;
    /// `add(v)`: the private prefix sum after adding `v`.
    pub const ADD: u32 = 1;
    /// `sum()`: the private prefix sum of everything added.
    pub const SUM: u32 = 2;
    /// `add_batch([v...])`: the `k` private prefix sums.
    pub const ADD_BATCH: u32 = 3;
}

const OK: u8 = 0;

/// A [`TreeError`] as a status code and three 8-byte fields (and a message for `Entropy`).
fn encode_error(e: &TreeError) -> Vec<u8> {
    let (code, a, b, c): (u8, u64, u64, u64) = match e {
        TreeError::ZeroCapacity => (1, 0, 0, 0),
        TreeError::CapacityTooLarge { n, max } => (2, *n, *max, 0),
        TreeError::BadSigma { sigma } => (3, sigma.to_bits(), 0, 0),
        TreeError::CapacityExceeded {
            capacity,
            added,
            requested,
        } => (4, *capacity, *added, *requested),
        TreeError::NonFinite { index } => (5, *index, 0, 0),
        TreeError::NotInitialized => (6, 0, 0, 0),
        TreeError::Entropy(_) => (7, 0, 0, 0),
    };
    let mut out = Vec::with_capacity(25);
    out.push(code);
    for x in [a, b, c] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    if let TreeError::Entropy(m) = e {
        out.extend_from_slice(m.as_bytes());
    }
    out
}

/// Decodes a reply: the payload on status 0, the tree's error otherwise.
fn decode_reply<'r>(what: &'static str, reply: &'r [u8]) -> Result<&'r [u8], ClientError> {
    let bad = |detail: String| ClientError::Reply { what, detail };
    let (&status, rest) = reply
        .split_first()
        .ok_or_else(|| bad("empty reply".into()))?;
    if status == OK {
        return Ok(rest);
    }
    let field = |i: usize| -> Result<u64, ClientError> {
        rest.get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| bad(format!("error code {status} without its fields")))
    };
    let (a, b, c) = (field(0)?, field(1)?, field(2)?);
    Err(ClientError::Tree(match status {
        1 => TreeError::ZeroCapacity,
        2 => TreeError::CapacityTooLarge { n: a, max: b },
        3 => TreeError::BadSigma {
            sigma: f64::from_bits(a),
        },
        4 => TreeError::CapacityExceeded {
            capacity: a,
            added: b,
            requested: c,
        },
        5 => TreeError::NonFinite { index: a },
        6 => TreeError::NotInitialized,
        7 => TreeError::Entropy(String::from_utf8_lossy(&rest[24..]).into_owned()),
        other => return Err(bad(format!("unknown status {other}"))),
    }))
}

fn ok_f64(x: f64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(OK);
    out.extend_from_slice(&x.to_le_bytes());
    out
}

fn read_f64s(input: &[u8], out: &mut Vec<f64>) -> Result<(), ServiceError> {
    if !input.len().is_multiple_of(8) {
        return Err(format!(
            "add_batch input of {} bytes is not a whole number of f64s",
            input.len()
        )
        .into());
    }
    out.extend(
        input
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
    );
    Ok(())
}

/// The service: one optional tree behind one lock.
#[derive(Default)]
pub struct DpTreeService {
    tree: Mutex<Option<Tree>>,
}

impl DpTreeService {
    fn call(&self, call_id: u32, input: &[u8]) -> Result<Result<Vec<u8>, TreeError>, ServiceError> {
        // A panic while the lock was held cannot leave a half-done update: every operation
        // checks before it changes anything. So a poisoned lock's tree is still whole.
        let mut guard = self.tree.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match call_id {
            id::INIT => {
                let (n, sigma) = input
                    .split_first_chunk::<8>()
                    .and_then(|(n, rest)| Some((n, rest.first_chunk::<8>()?)))
                    .map(|(n, s)| (u64::from_le_bytes(*n), f64::from_le_bytes(*s)))
                    .ok_or("init input is not a u64 capacity and an f64 sigma")?;
                // Invalid parameters leave the old tree in place; valid ones drop it first,
                // so that two large trees never coexist.
                match super::tree::validate(n, sigma) {
                    Err(e) => Err(e),
                    Ok(()) => {
                        *guard = None;
                        Tree::new(n, sigma).map(|t| {
                            *guard = Some(t);
                            vec![OK]
                        })
                    }
                }
            }
            id::ADD => {
                let v = input
                    .first_chunk::<8>()
                    .map(|b| f64::from_le_bytes(*b))
                    .ok_or("add input is not an f64")?;
                match guard.as_mut() {
                    Some(t) => t.add(v).map(ok_f64),
                    None => Err(TreeError::NotInitialized),
                }
            }
            id::SUM => match guard.as_ref() {
                Some(t) => Ok(ok_f64(t.sum())),
                None => Err(TreeError::NotInitialized),
            },
            id::ADD_BATCH => {
                let mut values = Vec::with_capacity(input.len() / 8);
                read_f64s(input, &mut values)?;
                match guard.as_mut() {
                    Some(t) => {
                        let mut sums = Vec::with_capacity(values.len());
                        t.add_batch(&values, &mut sums).map(|()| {
                            let mut out = Vec::with_capacity(1 + 8 * sums.len());
                            out.push(OK);
                            for s in sums {
                                out.extend_from_slice(&s.to_le_bytes());
                            }
                            out
                        })
                    }
                    None => Err(TreeError::NotInitialized),
                }
            }
            other => return Err(ServiceError::UnknownCall(other)),
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
        Ok(self
            .call(call_id, input)?
            .unwrap_or_else(|e| encode_error(&e)))
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
    #[error("malformed reply to {what}: {detail}")]
    Reply {
        /// The operation.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
}

/// The host's typed view of a [`DpTreeService`] enclave.
#[derive(Clone, Copy)]
pub struct Client<'e> {
    enclave: &'e Enclave,
}

/// `values` as the `add_batch` input (little-endian `f64`s).
pub fn encode_values(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

impl<'e> Client<'e> {
    /// A client of an enclave running [`SERVICE`].
    pub fn new(enclave: &'e Enclave) -> Self {
        Client { enclave }
    }

    fn call(&self, what: &'static str, call_id: u32, input: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.enclave
            .ecall(call_id, input)
            .map_err(|source| ClientError::Enclave { what, source })
    }

    fn one_f64(what: &'static str, reply: &[u8]) -> Result<f64, ClientError> {
        let payload = decode_reply(what, reply)?;
        payload
            .try_into()
            .map(f64::from_le_bytes)
            .map_err(|_| ClientError::Reply {
                what,
                detail: format!("{} bytes where one f64 was expected", payload.len()),
            })
    }

    /// Replaces the enclave's tree by a new one of capacity `n`, noise `N(0, sigma^2)`.
    pub fn init(&self, n: u64, sigma: f64) -> Result<(), ClientError> {
        let mut input = [0u8; 16];
        input[..8].copy_from_slice(&n.to_le_bytes());
        input[8..].copy_from_slice(&sigma.to_le_bytes());
        let reply = self.call("init", id::INIT, &input)?;
        match decode_reply("init", &reply)? {
            [] => Ok(()),
            p => Err(ClientError::Reply {
                what: "init",
                detail: format!("{} unexpected bytes", p.len()),
            }),
        }
    }

    /// Adds `v`; returns the private prefix sum of everything added.
    pub fn add(&self, v: f64) -> Result<f64, ClientError> {
        let reply = self.call("add", id::ADD, &v.to_le_bytes())?;
        Self::one_f64("add", &reply)
    }

    /// The private prefix sum of everything added.
    pub fn sum(&self) -> Result<f64, ClientError> {
        let reply = self.call("sum", id::SUM, &[])?;
        Self::one_f64("sum", &reply)
    }

    /// Adds `values` in one ecall; returns their private prefix sums.
    pub fn add_batch(&self, values: &[f64]) -> Result<Vec<f64>, ClientError> {
        let mut out = Vec::with_capacity(values.len());
        self.add_batch_encoded(&encode_values(values), &mut out)?;
        Ok(out)
    }

    /// [`Client::add_batch`] of values already encoded by [`encode_values`], the prefix
    /// sums appended to `out` (the benchmark reuses both buffers).
    pub fn add_batch_encoded(&self, input: &[u8], out: &mut Vec<f64>) -> Result<(), ClientError> {
        let what = "add_batch";
        let reply = self.call(what, id::ADD_BATCH, input)?;
        let payload = decode_reply(what, &reply)?;
        if payload.len() != input.len() {
            return Err(ClientError::Reply {
                what,
                detail: format!(
                    "{} bytes of prefix sums for {} bytes of values",
                    payload.len(),
                    input.len()
                ),
            });
        }
        out.extend(
            payload
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
        );
        Ok(())
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
            c.call("add", id::ADD, b"short"),
            Err(ClientError::Enclave {
                source: enclave::Error::Service { call_id: 1, .. },
                ..
            })
        ));
        assert!(c.call("add_batch", id::ADD_BATCH, &[0; 9]).is_err());
        assert!(c.call("init", id::INIT, &[0; 15]).is_err());
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
    fn error_codes_round_trip_and_garbage_is_refused() {
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
            match decode_reply("x", &encode_error(&e)) {
                Err(ClientError::Tree(got)) => assert_eq!(got, e),
                other => panic!("{e:?} came back as {other:?}"),
            }
        }
        assert!(matches!(
            decode_reply("x", &[]),
            Err(ClientError::Reply { .. })
        ));
        assert!(matches!(
            decode_reply("x", &[4, 1, 2]),
            Err(ClientError::Reply { .. })
        ));
        assert!(matches!(
            decode_reply("x", &[99; 25]),
            Err(ClientError::Reply { .. })
        ));
        assert_eq!(decode_reply("x", &[0, 1, 2]).unwrap(), [1, 2]);
    }
}
