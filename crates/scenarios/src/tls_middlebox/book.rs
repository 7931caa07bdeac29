//! The host's book of key shares that arrive on their own schedule: which open flow a
//! client random belongs to, shares held for flows not seen yet, and client randoms of
//! flows that closed.
//!
//! A real client's share comes from its key log, some time after its handshake, while its
//! flow is already running. So a share for a client random no open flow has is held (at
//! most [`BookLimits::max_held`], each for [`BookLimits::hold`]) until the flow's
//! ClientHello shows up; a share for a flow that already closed is refused (a replay, or
//! too late to matter), as is a second share for a flow that has one. Shares stay sealed
//! here: the host holds them, it cannot read them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use harness::codec::{Decode, Encode};

use super::service::KeyShare;

/// A flow's wait for its key share.
#[derive(Debug, Default)]
pub struct ShareSignal {
    state: Mutex<SignalState>,
    cv: Condvar,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum SignalState {
    #[default]
    Waiting,
    Arrived,
    Stopped,
}

impl ShareSignal {
    fn lock(&self) -> MutexGuard<'_, SignalState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The share reached the enclave.
    pub fn arrive(&self) {
        *self.lock() = SignalState::Arrived;
        self.cv.notify_all();
    }

    /// The middlebox is stopping: waiters give up.
    pub fn stop(&self) {
        let mut s = self.lock();
        if *s == SignalState::Waiting {
            *s = SignalState::Stopped;
        }
        self.cv.notify_all();
    }

    /// Whether the share has reached the enclave.
    pub fn arrived(&self) -> bool {
        *self.lock() == SignalState::Arrived
    }

    /// Waits until the share arrives, the middlebox stops, or `deadline`; true if it arrived.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut s = self.lock();
        while *s == SignalState::Waiting {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = self
                .cv
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *s == SignalState::Arrived
    }
}

/// How much the book holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookLimits {
    /// Shares held for flows not seen yet.
    pub max_held: usize,
    /// How long a held share waits for its flow.
    pub hold: Duration,
    /// Client randoms of closed flows remembered (to refuse replays).
    pub max_closed: usize,
}

impl Default for BookLimits {
    /// 1,024 shares held for 30 s each; 16,384 closed flows remembered.
    fn default() -> Self {
        BookLimits {
            max_held: 1024,
            hold: Duration::from_secs(30),
            max_closed: 16 << 10,
        }
    }
}

/// Why a share was not taken.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode, thiserror::Error)]
pub enum ShareRefusal {
    /// The flow of this client random has closed: a replay, or too late.
    #[error("its flow has closed")]
    ClosedFlow,
    /// The flow already has its share.
    #[error("its flow already has a share")]
    Duplicate,
    /// Too many shares are held for flows not seen yet.
    #[error("too many shares are waiting for their flows")]
    TooManyHeld,
    /// The enclave refused it (it did not open, or the enclave's share limit).
    #[error("the enclave refused it: {0}")]
    Enclave(String),
}

/// What became of a share offered to the middlebox: the share agent's acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub enum ShareStatus {
    /// The enclave has it; its flow is open.
    Delivered,
    /// No flow has its client random yet: held for [`BookLimits::hold`].
    Held,
    /// Refused, and why.
    Refused(ShareRefusal),
}

/// What the book says of a share offered to it.
#[derive(Debug)]
pub enum Offer {
    /// Its flow is open and waiting: hand it to the enclave, then [`ShareSignal::arrive`].
    Deliver(KeyShare, Arc<ShareSignal>),
    /// No flow has its client random yet: held.
    Held,
    /// Refused.
    Refused(ShareRefusal),
}

/// What happened to shares, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BookCounts {
    /// Shares handed to the enclave for an open flow (directly or after being held).
    pub delivered: u64,
    /// Shares that arrived before their flow and were held.
    pub held: u64,
    /// Held shares whose flow never came within the hold time.
    pub expired: u64,
    /// Shares for a flow that had closed.
    pub refused_closed: u64,
    /// Second shares for one flow.
    pub refused_duplicate: u64,
    /// Shares refused because too many were held.
    pub refused_full: u64,
    /// Shares the enclave refused.
    pub refused_enclave: u64,
}

#[derive(Default)]
struct Inner {
    open: HashMap<[u8; 32], Arc<ShareSignal>>,
    held: HashMap<[u8; 32], (KeyShare, Instant)>,
    closed: HashSet<[u8; 32]>,
    closed_order: VecDeque<[u8; 32]>,
    counts: BookCounts,
    stopping: bool,
}

/// The book (see the module's documentation).
#[derive(Default)]
pub struct ShareBook {
    limits: BookLimits,
    inner: Mutex<Inner>,
}

impl ShareBook {
    /// An empty book with `limits`.
    pub fn new(limits: BookLimits) -> Self {
        ShareBook {
            limits,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update below is whole before the lock is released.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops held shares older than the hold time, counting them.
    fn expire(&self, inner: &mut Inner, now: Instant) {
        let hold = self.limits.hold;
        let before = inner.held.len();
        inner
            .held
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < hold);
        inner.counts.expired += (before - inner.held.len()) as u64;
    }

    /// A share arrived for `share.client_random`: deliver it, hold it, or refuse it.
    pub fn offer(&self, share: KeyShare) -> Offer {
        let now = Instant::now();
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        let cr = share.client_random;
        if inner.closed.contains(&cr) {
            inner.counts.refused_closed += 1;
            return Offer::Refused(ShareRefusal::ClosedFlow);
        }
        if let Some(signal) = inner.open.get(&cr).cloned() {
            if signal.arrived() {
                inner.counts.refused_duplicate += 1;
                return Offer::Refused(ShareRefusal::Duplicate);
            }
            return Offer::Deliver(share, signal);
        }
        if inner.held.contains_key(&cr) {
            inner.counts.refused_duplicate += 1;
            return Offer::Refused(ShareRefusal::Duplicate);
        }
        if inner.held.len() >= self.limits.max_held {
            inner.counts.refused_full += 1;
            return Offer::Refused(ShareRefusal::TooManyHeld);
        }
        inner.held.insert(cr, (share, now));
        inner.counts.held += 1;
        Offer::Held
    }

    /// Counts the outcome of a [`Offer::Deliver`]: the enclave took the share or refused it.
    pub fn delivered(&self, ok: bool) {
        let mut inner = self.lock();
        if ok {
            inner.counts.delivered += 1;
        } else {
            inner.counts.refused_enclave += 1;
        }
    }

    /// A flow saw its ClientHello: `signal` is told when its share arrives. Returns a share
    /// held for it, to hand to the enclave now. A client random seen on two open flows
    /// keeps the first.
    pub fn open(&self, client_random: [u8; 32], signal: Arc<ShareSignal>) -> Option<KeyShare> {
        let now = Instant::now();
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        if inner.stopping {
            signal.stop();
        }
        inner.open.entry(client_random).or_insert(signal);
        inner.held.remove(&client_random).map(|(s, _)| s)
    }

    /// The flow of `client_random` closed: later shares for it are refused.
    pub fn close(&self, client_random: [u8; 32]) {
        let mut inner = self.lock();
        inner.open.remove(&client_random);
        if inner.closed.insert(client_random) {
            inner.closed_order.push_back(client_random);
        }
        while inner.closed_order.len() > self.limits.max_closed {
            if let Some(old) = inner.closed_order.pop_front() {
                inner.closed.remove(&old);
            }
        }
    }

    /// The middlebox stops: every flow waiting for a share stops waiting.
    pub fn stop(&self) {
        let mut inner = self.lock();
        inner.stopping = true;
        for s in inner.open.values() {
            s.stop();
        }
    }

    /// The counts so far; held shares past their time are counted as expired first.
    pub fn counts(&self) -> BookCounts {
        let mut inner = self.lock();
        self.expire(&mut inner, Instant::now());
        inner.counts
    }

    /// Shares held now, waiting for their flows.
    pub fn held_now(&self) -> usize {
        self.lock().held.len()
    }
}
