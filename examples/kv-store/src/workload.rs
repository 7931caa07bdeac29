//! The host side of the workload: a typed client over any enclave, the keys and values, and
//! the mixed operation stream, the same code on every backend.

use std::sync::atomic::{AtomicU64, Ordering};

use harness::codec::{self, Decode, Encode};
use harness::enclave::Enclave;
use harness::{At, ScenarioError, boundary};

use crate::service::{Call, Delete, Get, KvError, Put};

/// A typed client of the store: encodes requests, decodes replies, and keeps the two kinds
/// of failure apart (the boundary's, as a scenario error; the store's, as a [`KvError`]).
#[derive(Clone, Copy)]
pub struct Client<'a> {
    enclave: &'a Enclave,
}

impl<'a> Client<'a> {
    /// A client of `enclave` (which runs the store's service).
    pub fn new(enclave: &'a Enclave) -> Self {
        Client { enclave }
    }

    fn call<R: Decode>(
        &self,
        call: Call,
        request: &impl Encode,
    ) -> Result<Result<R, KvError>, ScenarioError> {
        let reply = boundary::ecall(self.enclave, call.into(), call.name(), &request.encode())?;
        codec::decode(call.name(), &reply).at(call.name())
    }

    /// Writes `key` -> `value`; returns the new version.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<Result<u64, KvError>, ScenarioError> {
        let req = Put {
            key: key.to_vec(),
            value: value.to_vec(),
        };
        self.call(Call::Put, &req)
    }

    /// Reads `key`.
    pub fn get(&self, key: &[u8]) -> Result<Result<Option<Vec<u8>>, KvError>, ScenarioError> {
        self.call(Call::Get, &Get { key: key.to_vec() })
    }

    /// Removes `key`; whether it was there.
    pub fn delete(&self, key: &[u8]) -> Result<Result<bool, KvError>, ScenarioError> {
        self.call(Call::Delete, &Delete { key: key.to_vec() })
    }
}

/// Turns the store's refusal into a scenario error: in the measured workload every call is
/// one that must succeed.
pub fn must<T>(step: &str, r: Result<T, KvError>) -> Result<T, ScenarioError> {
    r.at(step)
}

/// The key of item `i`.
pub fn key(i: u64) -> Vec<u8> {
    format!("user:{i:08}").into_bytes()
}

/// splitmix64: the values' and the operation stream's generator (deterministic, so that
/// runs are comparable; a benchmark's data is not secret).
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The value of item `i` at generation `generation`, `len` bytes.
pub fn value(i: u64, generation: u64, len: usize) -> Vec<u8> {
    let seed = mix(i ^ generation.rotate_left(32));
    (0..len)
        .map(|j| (mix(seed ^ (j as u64 / 8)) >> ((j % 8) * 8)) as u8)
        .collect()
}

/// The store's items as the host expects them: the generation of each item's current
/// value, and a count of gets that returned something else.
pub struct Expected {
    generations: Vec<AtomicU64>,
    value_len: usize,
    /// Gets whose value was checked.
    pub checked: AtomicU64,
    /// Gets whose value was not the last one put.
    pub mismatches: AtomicU64,
}

impl Expected {
    /// `items` items of `value_len` bytes, all at generation 0.
    pub fn new(items: u64, value_len: usize) -> Self {
        Expected {
            generations: (0..items).map(|_| AtomicU64::new(0)).collect(),
            value_len,
            checked: AtomicU64::new(0),
            mismatches: AtomicU64::new(0),
        }
    }

    /// Items in the store.
    pub fn items(&self) -> u64 {
        self.generations.len() as u64
    }

    /// Puts item `i` at its current generation (one step of the load phase).
    pub fn load(&self, client: Client<'_>, i: u64) -> Result<(), ScenarioError> {
        let g = self.generations[i as usize].load(Ordering::Relaxed);
        must("load", client.put(&key(i), &value(i, g, self.value_len))?).map(drop)
    }

    /// One operation of the mixed workload on item `i`: a put of its next value when `put`,
    /// else a get whose value is checked against the last put. Items are partitioned between
    /// the threads of a run, so no two threads touch one item at once.
    pub fn op(&self, client: Client<'_>, i: u64, put: bool) -> Result<(), ScenarioError> {
        let slot = &self.generations[i as usize];
        if put {
            let g = slot.load(Ordering::Relaxed) + 1;
            must("put", client.put(&key(i), &value(i, g, self.value_len))?)?;
            slot.store(g, Ordering::Relaxed);
        } else {
            let got = must("get", client.get(&key(i))?)?;
            let want = value(i, slot.load(Ordering::Relaxed), self.value_len);
            self.checked.fetch_add(1, Ordering::Relaxed);
            if got.as_deref() != Some(&want[..]) {
                self.mismatches.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Thread `thread`'s `ops` operations of a run of `threads`: items of its own partition
    /// (`i % threads == thread`) in a pseudo-random order, one put in `put_every`.
    pub fn mixed(
        &self,
        client: Client<'_>,
        thread: usize,
        threads: usize,
        ops: u64,
        put_every: u64,
    ) -> Result<(), ScenarioError> {
        for n in 0..ops {
            let (i, r) = item_for(thread, threads, self.items(), n);
            self.op(client, i, (r >> 32) % put_every == 0)?;
        }
        Ok(())
    }
}

/// The item of operation `n` of thread `thread` in a run of `threads` over `items` items
/// (`items >= threads`), and the random word it was drawn from.
pub fn item_for(thread: usize, threads: usize, items: u64, n: u64) -> (u64, u64) {
    let (t, threads) = (thread as u64, threads as u64);
    // Items t, t + threads, t + 2 threads, ... below `items`.
    let per = (items - t).div_ceil(threads);
    let r = mix(t << 40 ^ n);
    ((r % per) * threads + t, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_differ_by_item_and_generation_and_have_their_length() {
        assert_eq!(value(3, 0, 64).len(), 64);
        assert_eq!(value(3, 0, 64), value(3, 0, 64));
        assert_ne!(value(3, 0, 64), value(3, 1, 64));
        assert_ne!(value(3, 0, 64), value(4, 0, 64));
    }

    #[test]
    fn threads_touch_only_their_own_items_and_reach_all_of_them() {
        for (threads, items) in [(1, 10), (3, 100), (4, 7), (2, 2)] {
            let mut seen = vec![false; items as usize];
            for t in 0..threads {
                for n in 0..2000 {
                    let (i, _) = item_for(t, threads, items, n);
                    assert!(i < items, "{threads} threads, {items} items: item {i}");
                    assert_eq!(i % threads as u64, t as u64);
                    seen[i as usize] = true;
                }
            }
            assert!(seen.iter().all(|&s| s), "{threads} threads, {items} items");
        }
    }
}
