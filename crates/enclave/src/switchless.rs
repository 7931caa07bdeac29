//! Switchless calls, with the Intel SGX SDK's semantics.
//!
//! A switchless call does not cross by itself: the caller posts the request into a free
//! slot of a pool and a *worker* on the other side, which polls the pool, serves it —
//! enclave workers (`num_tworkers`) serve ecalls, host workers (`num_uworkers`) serve
//! ocalls. Following the SDK (`sgx_uswitchless_config_t`):
//!
//! * the caller spins up to `retries_before_fallback` pause iterations for a worker to take
//!   its request; if none does (all busy or asleep), it withdraws the request and makes a
//!   regular call instead: a **miss**. A request taken by a worker is a **hit**. No free
//!   slot in the pool is a miss too.
//! * an idle worker rescans the pool up to `retries_before_sleep` times, then sleeps on a
//!   futex; a caller that posts while workers sleep wakes one (the caller still counts its
//!   retries while the worker wakes up, so a sleeping pool mostly yields misses, as in the
//!   SDK).
//! * only the call ids listed in the configuration are switchless; others are regular.
//!
//! A pool slot is a full channel (`crate::shm`): once a worker has taken a request, the
//! conversation (chunked payloads, ocalls made by a switchless ecall) proceeds exactly as on
//! a TCS channel, so switchless calls have no size limit. The slot's `claim` word moves
//! FREE → BUSY (caller writing) → POSTED → TAKEN (worker) → FREE (caller, after the reply);
//! a withdrawal moves POSTED → BUSY → FREE.

use std::sync::atomic::{AtomicU32, Ordering};

use rustix::thread::futex;

use crate::shm::{
    CLAIM_BUSY, CLAIM_FREE, CLAIM_POSTED, CLAIM_TAKEN, Channel, Layout, Payload, Shm, Side,
    wake_all,
};
use crate::wire::{Kind, Status};

/// Switchless configuration (defaults are the Intel SDK's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchlessConfig {
    /// Enclave ("trusted") workers serving switchless ecalls.
    pub num_tworkers: u32,
    /// Host ("untrusted") workers serving switchless ocalls.
    pub num_uworkers: u32,
    /// Pause iterations a caller waits for a worker before falling back (SDK default 20,000).
    pub retries_before_fallback: u32,
    /// Idle pool scans before a worker sleeps (SDK default 20,000).
    pub retries_before_sleep: u32,
    /// Request slots per pool (each direction).
    pub pool_slots: u32,
    /// Ecall ids made switchless (ids must be < 256).
    pub ecalls: Vec<u32>,
    /// Ocall ids made switchless (ids must be < 256).
    pub ocalls: Vec<u32>,
}

impl Default for SwitchlessConfig {
    fn default() -> Self {
        SwitchlessConfig {
            num_tworkers: 1,
            num_uworkers: 1,
            retries_before_fallback: 20_000,
            retries_before_sleep: 20_000,
            pool_slots: 8,
            ecalls: Vec::new(),
            ocalls: Vec::new(),
        }
    }
}

/// Largest id that can be switchless.
pub const MAX_SWITCHLESS_ID: u32 = 255;

/// A 256-bit set of ids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IdSet(pub [u64; 4]);

impl IdSet {
    pub fn from_ids(ids: &[u32]) -> Self {
        let mut s = IdSet::default();
        for &id in ids {
            if id <= MAX_SWITCHLESS_ID {
                s.0[(id / 64) as usize] |= 1 << (id % 64);
            }
        }
        s
    }
    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        id <= MAX_SWITCHLESS_ID && self.0[(id / 64) as usize] & (1 << (id % 64)) != 0
    }
}

/// A pool of channels in the mapping.
#[derive(Clone, Copy)]
pub(crate) struct Pool<'a> {
    pub shm: &'a Shm,
    pub layout: &'a Layout,
    pub first: usize,
    pub len: usize,
    pub seq: &'a AtomicU32,
    pub sleepers: &'a AtomicU32,
}

impl<'a> Pool<'a> {
    /// Posts a request (first chunk); spins for a worker. `Some((channel, bytes sent))` on
    /// a hit; `None` on a miss (request withdrawn, or no free slot).
    pub fn post(
        &self,
        kind: Kind,
        id: u32,
        input: Payload<'_>,
        retries_before_fallback: u32,
        hint: usize,
    ) -> Option<(Channel<'a>, usize)> {
        if self.len == 0 {
            return None;
        }
        let mut claimed = None;
        for k in 0..self.len {
            let ch = self
                .shm
                .channel(self.layout, self.first + (hint + k) % self.len);
            if ch.claim().load(Ordering::Relaxed) == CLAIM_FREE
                && ch
                    .claim()
                    .compare_exchange(CLAIM_FREE, CLAIM_BUSY, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                claimed = Some(ch);
                break;
            }
        }
        let ch = claimed?;
        let sent = ch.write_first(Side::A, kind, id, Status::Ok, 0, input);
        ch.set_turn_quiet(Side::B);
        ch.claim().store(CLAIM_POSTED, Ordering::SeqCst);
        // Dekker with the worker's "sleepers += 1; rescan": either we see it going to sleep
        // (and bump the futex word it sleeps on), or its rescan sees our POSTED. So the
        // doorbell costs nothing while workers are awake.
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.seq.fetch_add(1, Ordering::SeqCst);
            wake_all(self.seq);
        }
        for _ in 0..retries_before_fallback {
            if ch.claim().load(Ordering::Acquire) == CLAIM_TAKEN {
                return Some((ch, sent));
            }
            std::hint::spin_loop();
        }
        match ch.claim().compare_exchange(
            CLAIM_POSTED,
            CLAIM_BUSY,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                ch.set_turn_quiet(Side::A);
                ch.claim().store(CLAIM_FREE, Ordering::Release);
                None
            }
            // A worker took it between our last look and the withdrawal: a hit.
            Err(_) => Some((ch, sent)),
        }
    }

    /// Releases a slot after the caller has read the reply.
    pub fn release(ch: &Channel<'_>) {
        ch.claim().store(CLAIM_FREE, Ordering::Release);
    }

    fn poll(&self, cursor: &mut usize) -> Option<Channel<'a>> {
        for k in 0..self.len {
            let i = (*cursor + k) % self.len;
            let ch = self.shm.channel(self.layout, self.first + i);
            if ch.claim().load(Ordering::Relaxed) == CLAIM_POSTED
                && ch
                    .claim()
                    .compare_exchange(
                        CLAIM_POSTED,
                        CLAIM_TAKEN,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            {
                *cursor = i + 1;
                return Some(ch);
            }
        }
        None
    }

    /// A worker's loop: poll, serve, sleep after `retries_before_sleep` idle scans.
    /// Returns when `stop()` is true (checked at least every `timeout` while asleep).
    pub fn work(
        &self,
        retries_before_sleep: u32,
        timeout: Option<&rustix::time::Timespec>,
        stop: &dyn Fn() -> bool,
        serve: &mut dyn FnMut(Channel<'a>),
    ) {
        let mut cursor = 0usize;
        let mut idle = 0u32;
        while !stop() {
            if let Some(ch) = self.poll(&mut cursor) {
                serve(ch);
                idle = 0;
                continue;
            }
            idle += 1;
            std::hint::spin_loop();
            if idle >= retries_before_sleep {
                self.sleepers.fetch_add(1, Ordering::SeqCst);
                let s = self.seq.load(Ordering::SeqCst);
                if let Some(ch) = self.poll(&mut cursor) {
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                    serve(ch);
                } else {
                    let _ = futex::wait(self.seq, futex::Flags::empty(), s, timeout);
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
                idle = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_sets() {
        let s = IdSet::from_ids(&[0, 63, 64, 255, 256, 1000]);
        assert!(s.contains(0) && s.contains(63) && s.contains(64) && s.contains(255));
        assert!(!s.contains(1) && !s.contains(256) && !s.contains(1000));
    }
}
