//! Links between the two parties: named profiles (`loopback`, `lan10g`, `lan`, `wan`,
//! `intercontinental`, or `rate=..,rtt=..`) and a user-space link that makes real traffic
//! cross an emulated link of that rate and round-trip time.
//!
//! Every 2PC figure over loopback has free bandwidth and no latency; two parties on two
//! machines have neither. A [`Link`] sits between the parties as a TCP proxy on loopback:
//! a party connects to [`Link::addr`], the link connects to the other party, and each
//! direction runs its bytes through
//!
//! * a token bucket at the profile's rate (depth [`Shape::burst_bytes`]: about a millisecond of
//!   the link's bytes, at least one read's worth), which gives each chunk of bytes the time
//!   at which it has left the sender's end of the link, and
//! * a delay line of half the round-trip time: the chunk is written to the receiver that
//!   long after it left.
//!
//! A chunk that finds the bucket full of tokens is written exactly RTT/2 after it was read,
//! so a message and its answer take at least the RTT; a long transfer of `N` bytes takes
//! `N / rate`, less the bucket's depth. The bytes in flight in one direction (read from
//! the sender, not yet written to the receiver) are bounded by `rate × RTT/2` plus
//! [`BUFFER_BYTES`] and the bucket's depth: past that, the link stops reading and TCP's
//! own flow control holds the sender back, as a real bottleneck's queue would.
//!
//! What it does not emulate: TCP's congestion control over the long path (each leg is a
//! loopback connection, so the window never limits), loss, and the delay of the connection
//! set-up.
//!
//! The kernel's link ([`netns`]: two anonymous network namespaces joined by a veth pair,
//! `tc`'s `tbf` for the rate and `netem` for the delay, or this module's delay line in
//! series where the kernel has no `netem`) carries a profile where this process may set it
//! up (root); [`emulator`] chooses between the two ([`Choice`]), and a run's records say
//! which one carried them ([`Net::params`]'s `link_emulator`).
//!
//! Each connection runs four threads (a reader and a writer per direction), all blocking
//! I/O with short timeouts so that every wait is bounded and the link stops promptly when
//! it is dropped. Closing either end (or an error on it) ends the other: the end of one
//! direction is delivered, after the delay, as a shutdown of the peer's writing half.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thiserror::Error;

pub mod emulator;
pub mod netns;

pub use emulator::{Choice, Crossing, Net};

/// The named profiles: name, rate in bits per second, round-trip time in µs. `loopback` has
/// no link at all.
const PRESETS: [(&str, u64, u64); 4] = [
    ("lan10g", 10_000_000_000, 200),
    ("lan", 1_000_000_000, 1_000),
    ("wan", 200_000_000, 20_000),
    ("intercontinental", 100_000_000, 100_000),
];

/// The profile without an emulated link.
pub const LOOPBACK: &str = "loopback";

/// The names [`Profile::from_str`] knows, for messages.
pub const NAMES: [&str; 5] = [LOOPBACK, "lan10g", "lan", "wan", "intercontinental"];

/// The name of a profile given as `rate=..,rtt=..`.
pub const CUSTOM: &str = "custom";

/// The slowest rate a profile may have, in bits per second: a run measures its link with a
/// transfer of at least 1 MiB (17 s at this rate) within a minute, which failed below about
/// 140 kbit/s, and one AES-128 session's 200 KB take 3 s here.
pub const MIN_RATE: u64 = 500_000;
/// The fastest rate a profile may have, in bits per second.
pub const MAX_RATE: u64 = 1_000_000_000_000;
/// The longest round-trip time a profile may have.
pub const MAX_RTT: Duration = Duration::from_secs(10);

/// A link between the two parties: its name, and the rate and round-trip time it emulates
/// (`rate: None` for `loopback`, which has no link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `loopback`, a preset's name, or [`CUSTOM`].
    pub name: String,
    /// Bits per second each way; `None`: not shaped (loopback).
    pub rate_bits_per_s: Option<u64>,
    /// Round-trip time (twice the one-way delay).
    pub rtt: Duration,
}

/// Why a `--net` value is not a profile. Each names the part that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProfileError {
    /// Neither a known name nor `rate=..,rtt=..`.
    #[error(
        "--net {0:?}: not a link profile; known: {known}, or rate=RATE,rtt=TIME (e.g. rate=50mbit,rtt=30ms)",
        known = NAMES.join(", ")
    )]
    UnknownName(String),
    /// A `key=value` part that is wrong: which part, and why.
    #[error("--net: {part:?}: {why}")]
    BadPart {
        /// The part as given.
        part: String,
        /// What is wrong with it.
        why: String,
    },
    /// `rate=` or `rtt=` is missing.
    #[error("--net {given:?}: missing {missing}= (a custom link needs both rate= and rtt=)")]
    Missing {
        /// The whole value.
        given: String,
        /// `rate` or `rtt`.
        missing: &'static str,
    },
}

impl FromStr for Profile {
    type Err = ProfileError;

    /// A preset's name (see [`NAMES`]) or `rate=RATE,rtt=TIME`: RATE a number with a unit
    /// of bits per second (`bit`, `kbit`, `mbit`, `gbit`; also `bps`, `kbps`, `mbps`,
    /// `gbps`; case does not matter), TIME a number with `s`, `ms` or `us`.
    fn from_str(s: &str) -> Result<Profile, ProfileError> {
        let t = s.trim();
        if t == LOOPBACK {
            return Ok(Profile::loopback());
        }
        if let Some(&(name, rate, rtt_us)) = PRESETS.iter().find(|p| p.0 == t) {
            return Ok(Profile {
                name: name.to_owned(),
                rate_bits_per_s: Some(rate),
                rtt: Duration::from_micros(rtt_us),
            });
        }
        if !t.contains('=') {
            return Err(ProfileError::UnknownName(t.to_owned()));
        }
        let (mut rate, mut rtt) = (None, None);
        for part in t.split(',') {
            let bad = |why: String| ProfileError::BadPart {
                part: part.to_owned(),
                why,
            };
            let Some((key, value)) = part.split_once('=') else {
                return Err(bad("expected key=value (rate=.. or rtt=..)".into()));
            };
            match key.trim() {
                "rate" if rate.is_some() => return Err(bad("rate= given twice".into())),
                "rtt" if rtt.is_some() => return Err(bad("rtt= given twice".into())),
                "rate" => rate = Some(parse_rate(value.trim()).map_err(bad)?),
                "rtt" => rtt = Some(parse_rtt(value.trim()).map_err(bad)?),
                other => {
                    return Err(bad(format!(
                        "unknown key {other:?}; a custom link has rate= and rtt="
                    )));
                }
            }
        }
        let missing = |missing| ProfileError::Missing {
            given: t.to_owned(),
            missing,
        };
        Ok(Profile {
            name: CUSTOM.to_owned(),
            rate_bits_per_s: Some(rate.ok_or_else(|| missing("rate"))?),
            rtt: rtt.ok_or_else(|| missing("rtt"))?,
        })
    }
}

/// A rate with its unit, in bits per second, within [`MIN_RATE`]..=[`MAX_RATE`].
fn parse_rate(v: &str) -> Result<u64, String> {
    let lower = v.to_ascii_lowercase();
    let lower = lower.strip_suffix("/s").unwrap_or(&lower);
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| {
            "the rate needs a unit: bit, kbit, mbit or gbit (per second), e.g. 200mbit".to_owned()
        })?;
    let (num, unit) = lower.split_at(split);
    let scale = match unit {
        "bit" | "bps" => 1.0,
        "kbit" | "kbps" => 1e3,
        "mbit" | "mbps" => 1e6,
        "gbit" | "gbps" => 1e9,
        _ => {
            return Err(format!(
                "unknown rate unit {unit:?}; use bit, kbit, mbit or gbit (per second)"
            ));
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{num:?} is not a number"))?;
    let bits = n * scale;
    if !(bits >= MIN_RATE as f64 && bits <= MAX_RATE as f64) {
        return Err(format!(
            "the rate must be between {} kbit/s and {} Gbit/s",
            MIN_RATE / 1_000,
            MAX_RATE / 1_000_000_000
        ));
    }
    Ok(bits.round() as u64)
}

/// A round-trip time with its unit, at most [`MAX_RTT`].
fn parse_rtt(v: &str) -> Result<Duration, String> {
    let lower = v.to_ascii_lowercase();
    let (num, scale) = if let Some(n) = lower.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = lower.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = lower.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err("the round-trip time needs a unit: s, ms or us, e.g. 20ms".into());
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{num:?} is not a number"))?;
    let secs = n * scale;
    if !(0.0..=MAX_RTT.as_secs_f64()).contains(&secs) {
        return Err(format!(
            "the round-trip time must be between 0 and {} s",
            MAX_RTT.as_secs()
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl Profile {
    /// No link: the parties talk over loopback directly.
    pub fn loopback() -> Profile {
        Profile {
            name: LOOPBACK.to_owned(),
            rate_bits_per_s: None,
            rtt: Duration::ZERO,
        }
    }

    /// The profile as `--net` text that parses back to it: the name of a preset, or
    /// `rate=..bit,rtt=..us` for a custom link.
    pub fn spec(&self) -> String {
        match self.rate_bits_per_s {
            Some(r) if self.name == CUSTOM => {
                format!("rate={r}bit,rtt={}us", self.rtt.as_micros())
            }
            _ => self.name.clone(),
        }
    }

    /// Whether this profile has no emulated link.
    pub fn is_loopback(&self) -> bool {
        self.rate_bits_per_s.is_none()
    }

    /// The rate in bytes per second, if shaped.
    pub fn rate_bytes_per_s(&self) -> Option<f64> {
        self.rate_bits_per_s.map(|r| r as f64 / 8.0)
    }

    /// The emulator that carries this profile: `none` for loopback, else `userspace` (the
    /// only one built, see the module documentation).
    pub fn emulator(&self) -> &'static str {
        if self.is_loopback() {
            "none"
        } else {
            "userspace"
        }
    }

    /// The parameters every record made over this profile carries: `net` (the name),
    /// `link_emulator`, and for a shaped link its `rate_bits_per_s` and `rtt_ms` (loopback
    /// has neither: it is not shaped, and a 0 would read as a measured rate).
    pub fn params(&self) -> Vec<(&'static str, ParamValue)> {
        let mut p = vec![("net", ParamValue::Str(self.name.clone()))];
        if let Some(rate) = self.rate_bits_per_s {
            p.push(("rate_bits_per_s", ParamValue::Int(rate)));
            p.push(("rtt_ms", ParamValue::Float(self.rtt.as_secs_f64() * 1e3)));
        }
        p.push(("link_emulator", ParamValue::Str(self.emulator().to_owned())));
        p
    }

    /// The user-space link's shape for this profile: its rate, paced, and half its RTT;
    /// `None` for loopback.
    pub fn shape(&self) -> Option<Shape> {
        self.rate_bytes_per_s().map(|rate| Shape {
            rate_bytes_per_s: rate,
            one_way: self.rtt / 2,
            paced: true,
        })
    }

    /// Starts a user-space link with this profile's rate and delay in front of `upstream`
    /// (see [`Link`]); `None` for loopback, which has no link.
    pub fn start(&self, upstream: SocketAddr) -> Result<Option<Link>, LinkError> {
        self.shape()
            .map(|shape| Link::start(shape, upstream))
            .transpose()
    }
}

/// What a link delivered, measured on its own (see
/// [`measure`]): the emulator's accuracy, against the profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Bytes per second of the one-way transfers: their bytes over their times, each from
    /// the first write to the answer that the last byte arrived, less the round-trip time.
    pub rate_bytes_per_s: f64,
    /// Bytes of each transfer.
    pub bytes: u64,
    /// How many transfers, each on a connection of its own.
    pub transfers: usize,
    /// The shortest of the one-byte round trips.
    pub rtt_min: Duration,
    /// The median of the one-byte round trips.
    pub rtt_median: Duration,
    /// The median over the transfers of how long the last byte arrived after the sender's
    /// last write had returned: the one-way delay plus the time the bytes queued in the
    /// socket buffers and the emulator took to drain. A sender that streams faster than the
    /// link finishes this much before its peer has its bytes. It is not one number but a
    /// draw: where TCP's window and buffers stand when the sender stops differs from one
    /// connection to the next (on the 2-vCPU dev VM's kernel link at `lan`, 54-66 ms in
    /// thirty transfers and one stall of 110; 35-59 before the link's own sockets had fixed
    /// buffers), so one transfer's would be a guess.
    pub lead: Duration,
    /// The shortest lead of the transfers.
    pub lead_min: Duration,
    /// The longest lead of the transfers.
    pub lead_max: Duration,
}

/// Measures the link `net` (its emulator, whichever it is): `pings` one-byte round trips,
/// then `transfers` one-way transfers of `bytes` each from the listening side to the
/// connecting one, each on a new connection (as each session's is), between two threads of
/// this process through the link. `None` for loopback (no link). Every wait is bounded by
/// `timeout`.
pub fn measure(
    net: &Net,
    bytes: usize,
    transfers: usize,
    pings: usize,
    timeout: Duration,
) -> Result<Option<Measured>, LinkError> {
    let io = |what| move |source| LinkError::Io { what, source };
    if net.is_loopback() {
        return Ok(None);
    }
    let profile = net.profile();
    let crossing = net.crossing()?;
    // The transfers go the way a session's tables go: from the listening side (the
    // garbler's) to the connecting one. Over the kernel's link the two directions differ:
    // the delay line sits on the listening side, before the shaper for this direction.
    let (mut c, s) = connect(&crossing, timeout)?;
    let (mut rtts, s) = round_trips(&mut c, s, pings).map_err(io("measuring the link"))?;
    drop((c, s));
    let (mut took, mut got, mut leads) = (Duration::ZERO, 0u64, Vec::new());
    for _ in 0..transfers.max(1) {
        let (c, s) = connect(&crossing, timeout)?;
        let t = transfer(c, s, bytes, profile.rtt).map_err(io("measuring the link"))?;
        took += t.took;
        got += t.got as u64;
        leads.push(t.lead);
    }
    drop(crossing);
    rtts.sort();
    leads.sort();
    Ok(Some(Measured {
        rate_bytes_per_s: got as f64 / took.as_secs_f64().max(1e-9),
        bytes: got / leads.len() as u64,
        transfers: leads.len(),
        rtt_min: rtts.first().copied().unwrap_or_default(),
        rtt_median: rtts.get(rtts.len() / 2).copied().unwrap_or_default(),
        lead: median(&leads),
        lead_min: leads[0],
        lead_max: leads[leads.len() - 1],
    }))
}

/// The middle of `sorted` (the mean of the two middle ones of an even count); zero if empty.
fn median(sorted: &[Duration]) -> Duration {
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// One one-way transfer's measurements.
struct Transfer {
    /// From the first write to the last byte's arrival, less the profile's one-way delay.
    took: Duration,
    /// From the last write's return to the last byte's arrival.
    lead: Duration,
    /// The bytes that arrived.
    got: usize,
}

/// Writes `bytes` from `c` to `s` (read on a thread of its own, which answers one byte
/// when all of them arrived) and times it: the last byte arrived one delay (`rtt / 2`)
/// before the answer did.
fn transfer(
    mut c: TcpStream,
    mut s: TcpStream,
    bytes: usize,
    rtt: Duration,
) -> std::io::Result<Transfer> {
    let echo = std::thread::Builder::new()
        .name("link-measure".into())
        .spawn(move || -> std::io::Result<usize> {
            let mut buf = vec![0u8; CHUNK];
            let mut got = 0;
            while got < bytes {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            s.write_all(&[1])?;
            Ok(got)
        })?;
    let mut b = [0u8; 1];
    let run = (|| -> std::io::Result<(Duration, Duration)> {
        let data = vec![0x5au8; CHUNK];
        let t = Instant::now();
        let mut left = bytes;
        while left > 0 {
            let n = left.min(CHUNK);
            c.write_all(&data[..n])?;
            left -= n;
        }
        let written = t.elapsed();
        c.read_exact(&mut b)?;
        let answered = t.elapsed();
        let arrived = answered.saturating_sub(rtt / 2);
        Ok((
            answered.saturating_sub(rtt),
            arrived.saturating_sub(written),
        ))
    })();
    if run.is_err() {
        // Unblock the echo thread (its reads time out too, but need not wait for it).
        let _ = c.shutdown(Shutdown::Both);
    }
    let got = echo
        .join()
        .map_err(|_| std::io::Error::other("the echo thread panicked"))?;
    let (took, lead) = run?;
    Ok(Transfer {
        took,
        lead,
        got: got?,
    })
}

/// One connection across `crossing`, both ends in this process: the listening side's end
/// first, then the connecting side's, with `timeout` on every read and write and Nagle off.
fn connect(
    crossing: &Crossing<'_>,
    timeout: Duration,
) -> Result<(TcpStream, TcpStream), LinkError> {
    let io = |what| move |source| LinkError::Io { what, source };
    let addr = crossing.addr();
    let c = crossing
        .client_side(|| TcpStream::connect_timeout(&addr, timeout))?
        .map_err(io("connecting through the link"))?;
    let listener = crossing.listener();
    listener
        .set_nonblocking(false)
        .map_err(io("blocking accept"))?;
    let (s, _) = listener
        .accept()
        .map_err(io("accepting through the link"))?;
    for x in [&c, &s] {
        x.set_read_timeout(Some(timeout))
            .and_then(|()| x.set_write_timeout(Some(timeout)))
            .and_then(|()| x.set_nodelay(true))
            .map_err(io("socket options"))?;
    }
    Ok((s, c))
}

/// `n` one-byte round trips from `a` to `b` and back (`b` answers on a thread of its own,
/// and is given back): their times, in order.
fn round_trips(
    a: &mut TcpStream,
    mut b: TcpStream,
    n: usize,
) -> std::io::Result<(Vec<Duration>, TcpStream)> {
    let echo = std::thread::Builder::new().name("link-echo".into()).spawn(
        move || -> std::io::Result<TcpStream> {
            let mut x = [0u8; 1];
            for _ in 0..n {
                b.read_exact(&mut x)?;
                b.write_all(&x)?;
            }
            Ok(b)
        },
    )?;
    let mut rtts = Vec::with_capacity(n);
    let mut x = [0u8; 1];
    let mut run = || -> std::io::Result<()> {
        for i in 0..n {
            let t = Instant::now();
            a.write_all(&[i as u8])?;
            a.read_exact(&mut x)?;
            rtts.push(t.elapsed());
        }
        Ok(())
    };
    let ran = run();
    if ran.is_err() {
        // Unblock the echo thread (its reads time out too, but need not wait for it).
        let _ = a.shutdown(Shutdown::Both);
    }
    let b = echo
        .join()
        .map_err(|_| std::io::Error::other("the echo thread panicked"))??;
    ran.map(|()| (rtts, b))
}

/// The lower quartile of `n` one-byte round trips across `crossing`: a typical round
/// trip, little moved by the few that another process preempted.
fn typical_round_trip(
    crossing: &Crossing<'_>,
    n: usize,
    timeout: Duration,
) -> Result<Duration, LinkError> {
    let (mut a, b) = connect(crossing, timeout)?;
    let (mut rtts, _) = round_trips(&mut a, b, n).map_err(|source| LinkError::Io {
        what: "timing round trips through the link",
        source,
    })?;
    rtts.sort();
    Ok(rtts.get(rtts.len() / 4).copied().unwrap_or_default())
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.rate_bits_per_s {
            None => f.write_str(&self.name),
            Some(r) => write!(
                f,
                "{} ({} Mbit/s, {} ms RTT)",
                self.name,
                r as f64 / 1e6,
                self.rtt.as_secs_f64() * 1e3
            ),
        }
    }
}

/// A parameter's value, without depending on the record types (`garble` knows nothing of
/// `measure`): the scenarios map these into record parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// A name.
    Str(String),
    /// A count.
    Int(u64),
    /// A measure.
    Float(f64),
}

/// What a user-space link emulates in each direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Bytes per second (the token bucket's rate; without `paced`, it only sizes the line).
    pub rate_bytes_per_s: f64,
    /// The delay line: half the round-trip time.
    pub one_way: Duration,
    /// Whether the token bucket paces the bytes; `false`: a delay line only, in series with
    /// a shaper of that rate elsewhere (the kernel's `tbf`).
    pub paced: bool,
}

/// Bytes read from a socket at once.
const CHUNK: usize = 64 * 1024;

/// Bytes a direction may hold beyond `rate × delay` and the bucket's depth.
pub const BUFFER_BYTES: usize = 256 * 1024;

/// The send and receive buffer of each of the link's own sockets (the kernel doubles it for
/// its bookkeeping), fixed instead of left to the kernel's autotuning. What a streaming
/// sender fills before its writes block (the queue the stage predictions carry into the
/// next stage, measured on the link) includes these sockets' buffers; autotuned, they grew
/// by different amounts in a session than in the link table's transfers (`ss` inside the
/// namespaces during a quick `lan` run, 2026-11-29: the delay line's receive queue up to 2.2
/// MB and its send queue up to 3.3 MB in the bulk sessions, against 0.8 and 1.7 MB in the
/// transfers), so the bulk sessions drained up to a third more than predicted. Fixed,
/// the transfers' leads at `lan` spread 57-66 ms (one of twenty 110) instead of 38-63, and
/// the bulk sessions' Result came within 15% of its prediction in all twelve of four quick
/// runs instead of eight (`docs/gc-2pc.md`). A mebibyte is ten milliseconds of `lan`'s rate
/// and forty of `wan`'s, far more than the delay line's writer is late here (its own round
/// trip is about 0.1 ms), so the rate holds.
const SOCKET_BUFFER_BYTES: usize = 1 << 20;

/// Connections a link forwards in its life (more are refused): a session needs one, and a
/// local process that connects first must not exhaust the machine's threads.
const MAX_CONNECTIONS: usize = 16;

/// How long a blocked read, write or wait sleeps before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(100);

/// The nice value of a delay line's threads: the highest priority of the normal scheduler.
const LINE_NICE: i32 = -20;

/// Puts the calling thread, one of a delay line's, ahead of the parties' threads; returns
/// whether it could (it needs `CAP_SYS_NICE`, or an `RLIMIT_NICE` that allows it).
///
/// Why: the two parties of a run share this machine's cores with the line, and in their
/// base OTs both compute at once. A line's thread woken for a due chunk then waited for a
/// scheduler slice before it could forward it: on the 2-vCPU VM the evaluator's first
/// base-OT points arrived 3.2-5.9 ms after it sent its own over `lan` (1 ms RTT) in four of
/// five sessions, against 0.5-0.6 ms over loopback, and the garbler's Peer Inputs stage,
/// which waits for the evaluator's base OTs, came in at 1.35-2.7x its prediction. The kernel's
/// own link (`netem`, in softirq context) preempts the parties the same way.
fn run_ahead() -> bool {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), LINE_NICE).is_ok()
}

/// Whether this process's delay lines run ahead of the parties' threads (see `run_ahead`):
/// tried once, on a thread of its own.
pub fn line_runs_ahead() -> bool {
    static AHEAD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AHEAD.get_or_init(|| std::thread::spawn(run_ahead).join().unwrap_or(false))
}

/// How long the link waits to connect to the upstream party.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Shape {
    /// The token bucket's depth in bytes: a millisecond of the link's bytes, at least one
    /// read (`CHUNK`).
    pub fn burst_bytes(&self) -> usize {
        Shape::burst_bytes_of(self.rate_bytes_per_s)
    }

    /// The bucket's depth at `rate_bytes_per_s`.
    fn burst_bytes_of(rate_bytes_per_s: f64) -> usize {
        ((rate_bytes_per_s * 1e-3) as usize).max(CHUNK)
    }

    /// The most bytes one direction holds at once: `rate × delay`, the bucket's depth and
    /// [`BUFFER_BYTES`].
    pub fn capacity(&self) -> usize {
        let in_flight = self.rate_bytes_per_s * self.one_way.as_secs_f64();
        in_flight as usize + self.burst_bytes() + BUFFER_BYTES
    }
}

/// Why a link could not start.
#[derive(Debug, Error)]
pub enum LinkError {
    /// A step of the kernel's link (namespaces, veth, qdiscs).
    #[error("the kernel link: {what}: {source}")]
    Kernel {
        /// The step.
        what: &'static str,
        /// The error.
        source: netns::KernelError,
    },
    /// A delay line asked of a profile without a rate (loopback).
    #[error("loopback has no link to delay")]
    Unshaped,
    /// Binding the link's listening socket, or starting its thread.
    #[error("starting the user-space link: {what}: {source}")]
    Io {
        /// The step.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

/// A running user-space link: connections to [`Link::addr`] are forwarded to the upstream
/// address through the emulated link. Dropping it closes every connection and joins every
/// thread.
pub struct Link {
    addr: SocketAddr,
    shape: Shape,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("addr", &self.addr)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

/// What the link's threads share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Every socket the link opened (to shut them down when it stops) and every thread.
    sockets: Mutex<Vec<TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Bytes delivered: towards upstream, and back.
    up: AtomicU64,
    down: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding the lock left plain data behind: go on with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Link {
    /// Listens on a free loopback port and forwards each connection to `upstream` through
    /// a link of `shape`.
    pub fn start(shape: Shape, upstream: SocketAddr) -> Result<Link, LinkError> {
        Link::start_at(shape, SocketAddr::from(([127, 0, 0, 1], 0)), upstream)
    }

    /// [`Link::start`], listening on `at` (an address and port, or port 0 for a free one).
    /// The link's threads and sockets are in the network namespace of the calling thread.
    pub fn start_at(shape: Shape, at: SocketAddr, upstream: SocketAddr) -> Result<Link, LinkError> {
        let io = |what| move |source| LinkError::Io { what, source };
        let listener = TcpListener::bind(at).map_err(io("binding the link's address"))?;
        let addr = listener.local_addr().map_err(io("local address"))?;
        listener
            .set_nonblocking(true)
            .map_err(io("non-blocking accept"))?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("link-accept".into())
            .spawn(move || accept_loop(listener, upstream, shape, s))
            .map_err(io("starting the accept thread"))?;
        Ok(Link {
            addr,
            shape,
            shared,
            accept: Some(accept),
        })
    }

    /// The address a party connects to instead of `upstream`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The emulated rate and delay.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Bytes delivered so far: `(towards upstream, back from upstream)`.
    pub fn bytes_delivered(&self) -> (u64, u64) {
        (
            self.shared.up.load(Ordering::Relaxed),
            self.shared.down.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for s in lock(&self.shared.sockets).iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Accepts connections until the link stops, each forwarded to `upstream`.
fn accept_loop(listener: TcpListener, upstream: SocketAddr, shape: Shape, shared: Arc<Shared>) {
    let mut accepted = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                accepted += 1;
                if accepted > MAX_CONNECTIONS {
                    continue; // dropped: closes the connection
                }
                let _ = forward(client, upstream, shape, &shared);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait_for_connection(&listener),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Out of descriptors and the like: wait, then try again (the session's own
            // timeouts end a run that never connects).
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// The longest the accept loop sleeps before it looks at the stop flag again.
const ACCEPT_WAIT: Duration = Duration::from_millis(20);

/// Sleeps until `listener` has a connection, or [`ACCEPT_WAIT`] has passed: a connection is
/// accepted as soon as it arrives, not at the next tick of a polling loop (with a loop that
/// slept 2 ms between tries, the garbler of a `gc-2pc` session over `lan` started a median
/// 2.5 ms after the evaluator, 0.9-4.1 ms in eleven sessions; with this wait a median 0.9 ms,
/// 0.6-4.2). An error of `poll` ends the wait early; the loop looks again.
fn wait_for_connection(listener: &TcpListener) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let timeout = Timespec {
        tv_sec: ACCEPT_WAIT.as_secs() as i64,
        tv_nsec: i64::from(ACCEPT_WAIT.subsec_nanos()),
    };
    let _ = poll(&mut [PollFd::new(listener, PollFlags::IN)], Some(&timeout));
}

/// Connects to `upstream`, which may not be listening yet: a party started before its peer
/// waits for it through the link as it would without one (a refused connection is tried
/// again every 10 ms, for up to [`crate::channel::DEFAULT_TIMEOUT`], until the link stops).
fn connect_upstream(upstream: SocketAddr, stop: &AtomicBool) -> std::io::Result<TcpStream> {
    let start = Instant::now();
    loop {
        match TcpStream::connect_timeout(&upstream, CONNECT_TIMEOUT) {
            Err(e)
                if e.kind() == ErrorKind::ConnectionRefused
                    && start.elapsed() < crate::channel::DEFAULT_TIMEOUT
                    && !stop.load(Ordering::SeqCst) =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// Connects to `upstream` and starts both directions between it and `client`.
fn forward(
    client: TcpStream,
    upstream: SocketAddr,
    shape: Shape,
    shared: &Arc<Shared>,
) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    let server = connect_upstream(upstream, &shared.stop)?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(POLL))?;
        s.set_write_timeout(Some(POLL))?;
        rustix::net::sockopt::set_socket_send_buffer_size(s, SOCKET_BUFFER_BYTES)?;
        rustix::net::sockopt::set_socket_recv_buffer_size(s, SOCKET_BUFFER_BYTES)?;
    }
    {
        let mut socks = lock(&shared.sockets);
        socks.push(client.try_clone()?);
        socks.push(server.try_clone()?);
    }
    let mut handles = Vec::with_capacity(4);
    for (src, dst, up) in [
        (client.try_clone()?, server.try_clone()?, true),
        (server, client, false),
    ] {
        let q = Arc::new(Direction::new(shape));
        let (rq, rs, rsrc) = (q.clone(), shared.clone(), src.try_clone()?);
        handles.push(
            std::thread::Builder::new()
                .name("link-read".into())
                .spawn(move || read_side(rsrc, &rq, &rs))?,
        );
        let ws = shared.clone();
        handles.push(
            std::thread::Builder::new()
                .name("link-write".into())
                .spawn(move || write_side(src, dst, &q, &ws, up))?,
        );
    }
    lock(&shared.threads).extend(handles);
    Ok(())
}

/// One direction of a connection: the chunks in the delay line, each with the time at
/// which it is due at the receiver.
struct Direction {
    shape: Shape,
    state: Mutex<Line>,
    changed: Condvar,
}

struct Line {
    /// The chunks in the line: when each is due, and its bytes (the first `len` of its
    /// buffer: a [`CHUNK`]-long one the read went into, or a copy of a small read).
    chunks: VecDeque<Chunk>,
    /// [`CHUNK`]-long buffers the writer has emptied, for the reader's next reads: a large
    /// read goes straight into one and stays there until it is written, so it is neither
    /// allocated nor copied on its way through the line (a fresh 64 KiB allocation a read,
    /// freed by the other thread, cost the reader page faults). The line's memory is at most
    /// twice its bytes, and these.
    spare: Vec<Vec<u8>>,
    /// Bytes in `chunks`.
    bytes: usize,
    /// The sender closed (or failed): deliver the end after the chunks.
    end: bool,
    /// The receiver is gone: the reader must stop.
    closed: bool,
    /// The token bucket as a virtual clock (GCRA): the time at which the bytes admitted so
    /// far have all left at the link's rate.
    tat: Option<Instant>,
}

/// Bytes in the delay line: due at `at`, the first `len` bytes of `buf`.
struct Chunk {
    at: Instant,
    buf: Vec<u8>,
    len: usize,
}

/// The most emptied buffers a direction keeps for reuse: what a line holds at once when the
/// reads fill their buffers, a few for reads that do not.
fn spares_kept(shape: &Shape) -> usize {
    shape.capacity().div_ceil(CHUNK) + 4
}

impl Direction {
    fn new(shape: Shape) -> Direction {
        Direction {
            shape,
            state: Mutex::new(Line {
                chunks: VecDeque::new(),
                spare: Vec::new(),
                bytes: 0,
                end: false,
                closed: false,
                tat: None,
            }),
            changed: Condvar::new(),
        }
    }
}

/// When a chunk of `len` bytes that arrived at `now` is due at the receiver: it leaves the
/// token bucket (rate `shape.rate_bytes_per_s`, depth [`Shape::burst_bytes`]) once the
/// bytes before it and itself fit in the bucket, then crosses the delay line. Updates the
/// bucket's clock `tat`.
fn due(shape: &Shape, tat: &mut Option<Instant>, now: Instant, len: usize) -> Instant {
    if !shape.paced {
        return now + shape.one_way;
    }
    let tau = Duration::from_secs_f64(shape.burst_bytes() as f64 / shape.rate_bytes_per_s);
    let start = match *tat {
        Some(t) if t > now => t,
        _ => now,
    };
    let next = start + Duration::from_secs_f64(len as f64 / shape.rate_bytes_per_s);
    *tat = Some(next);
    let leaves = next.checked_sub(tau).map_or(now, |t| t.max(now));
    leaves + shape.one_way
}

/// Reads `src` into the delay line until it ends, the receiver is gone, or the link stops;
/// never holds more than the direction's capacity.
fn read_side(mut src: TcpStream, q: &Direction, shared: &Shared) {
    // Without the privilege the line keeps its priority; `Net` says so in its notice.
    let _ = run_ahead();
    let cap = q.shape.capacity();
    let mut buf = vec![0u8; CHUNK];
    loop {
        // Wait for room (bounded: the writer frees it, or the link stops).
        let room = {
            let mut st = lock(&q.state);
            loop {
                if st.closed || shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                if st.bytes < cap {
                    break (cap - st.bytes).min(CHUNK);
                }
                st = q
                    .changed
                    .wait_timeout(st, POLL)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        };
        let got = match src.read(&mut buf[..room]) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => 0, // reset: the sender is gone, as after a close
        };
        let now = Instant::now();
        if got == 0 {
            let mut st = lock(&q.state);
            st.end = true;
            q.changed.notify_all();
            return;
        }
        // A read of less than half a buffer is copied out and the buffer kept for the next
        // read: many small messages in a long line must not hold a whole buffer each (the
        // line bounds its bytes, not its chunks).
        let small = (got < CHUNK / 2).then(|| buf[..got].to_vec());
        let mut st = lock(&q.state);
        let at = due(&q.shape, &mut st.tat, now, got);
        // The writer waits for the first chunk's time, which a chunk behind it does not
        // change (the times do not decrease): only a chunk into an empty line wakes it.
        let wake = st.chunks.is_empty();
        let (bytes, spare) = match small {
            Some(copy) => (copy, None),
            None => (std::mem::take(&mut buf), st.spare.pop()),
        };
        st.chunks.push_back(Chunk {
            at,
            buf: bytes,
            len: got,
        });
        st.bytes += got;
        if wake {
            q.changed.notify_all();
        }
        drop(st);
        if buf.is_empty() {
            buf = spare.unwrap_or_else(|| vec![0u8; CHUNK]);
        }
    }
}

/// Writes the delay line's chunks to `dst`, each when it is due; delivers the end of the
/// stream as a shutdown of `dst`'s writing half. When `dst` fails, closes both ends of this
/// direction, which ends the other direction too.
fn write_side(src: TcpStream, mut dst: TcpStream, q: &Direction, shared: &Shared, up: bool) {
    // The timed waits below are the delay line: with the kernel's default slack (50 µs) each
    // one wakes late by up to that much, which a 1 ms round trip shows as 5-10% too long.
    // A failure leaves the default (the link stays correct, only less exact).
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    let _ = run_ahead();
    let counter = if up { &shared.up } else { &shared.down };
    let (cap, keep) = (q.shape.capacity(), spares_kept(&q.shape));
    loop {
        let next = {
            let mut st = lock(&q.state);
            loop {
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                match st.chunks.front().map(|c| c.at) {
                    Some(at) => {
                        let now = Instant::now();
                        if at <= now {
                            break st.chunks.pop_front();
                        }
                        let wait = (at - now).min(POLL);
                        st = q
                            .changed
                            .wait_timeout(st, wait)
                            .map(|(g, _)| g)
                            .unwrap_or_else(|e| e.into_inner().0);
                    }
                    None if st.end => break None,
                    None => {
                        st = q
                            .changed
                            .wait_timeout(st, POLL)
                            .map(|(g, _)| g)
                            .unwrap_or_else(|e| e.into_inner().0);
                    }
                }
            }
        };
        let Some(chunk) = next else {
            // The sender closed: so does its peer's view of it.
            let _ = dst.shutdown(Shutdown::Write);
            return;
        };
        if write_all(&mut dst, &chunk.buf[..chunk.len], &shared.stop).is_err() {
            let mut st = lock(&q.state);
            st.closed = true;
            q.changed.notify_all();
            drop(st);
            let _ = dst.shutdown(Shutdown::Both);
            let _ = src.shutdown(Shutdown::Both);
            return;
        }
        counter.fetch_add(chunk.len as u64, Ordering::Relaxed);
        let mut st = lock(&q.state);
        // The reader waits for room only in a full line.
        let wake = st.bytes >= cap;
        st.bytes -= chunk.len;
        if chunk.buf.len() == CHUNK && st.spare.len() < keep {
            st.spare.push(chunk.buf);
        }
        if wake {
            q.changed.notify_all();
        }
    }
}

/// Writes all of `buf`, waiting as long as the receiver reads, until the link stops.
fn write_all(dst: &mut TcpStream, mut buf: &[u8], stop: &AtomicBool) -> std::io::Result<()> {
    while !buf.is_empty() {
        if stop.load(Ordering::SeqCst) {
            return Err(ErrorKind::Interrupted.into());
        }
        match dst.write(buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(s: &str) -> Profile {
        s.parse().unwrap()
    }

    /// A party that connects through the link before its peer listens is carried over once
    /// the peer is up, as a direct connection would wait for it (it was dropped at once).
    #[test]
    fn a_peer_that_listens_late_is_reached_through_the_link() {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap();
        let shape = profile("rate=100mbit,rtt=2ms").shape().unwrap();
        let link = Link::start(shape, port).unwrap();
        let mut client = TcpStream::connect(link.addr()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let listener = TcpListener::bind(port).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        });
        client.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        client.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"hello");
        server.join().unwrap();
    }

    /// The link's own two sockets of a connection keep fixed buffers, not autotuned ones
    /// (Linux reports twice the size set: its bookkeeping), however much has crossed.
    #[test]
    fn the_links_own_sockets_have_fixed_buffers() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let shape = profile("rate=200mbit,rtt=2ms").shape().unwrap();
        let link = Link::start(shape, listener.local_addr().unwrap()).unwrap();
        let mut client = TcpStream::connect(link.addr()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let data = vec![7u8; 4 << 20];
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 4 << 20];
            server.read_exact(&mut got).unwrap();
            got
        });
        client.write_all(&data).unwrap();
        assert!(reader.join().unwrap() == data);
        let socks = lock(&link.shared.sockets);
        assert_eq!(socks.len(), 2);
        for s in socks.iter() {
            let snd = rustix::net::sockopt::socket_send_buffer_size(s).unwrap();
            let rcv = rustix::net::sockopt::socket_recv_buffer_size(s).unwrap();
            assert_eq!(
                (snd, rcv),
                (2 * SOCKET_BUFFER_BYTES, 2 * SOCKET_BUFFER_BYTES)
            );
        }
    }

    #[test]
    fn presets_parse_to_their_rates_and_delays() {
        assert_eq!(profile("loopback"), Profile::loopback());
        assert!(profile("loopback").is_loopback());
        let lan = profile("lan");
        assert_eq!(lan.rate_bits_per_s, Some(1_000_000_000));
        assert_eq!(lan.rtt, Duration::from_millis(1));
        let wan = profile("wan");
        assert_eq!(
            (wan.rate_bits_per_s, wan.rtt),
            (Some(200_000_000), Duration::from_millis(20))
        );
        let g = profile("lan10g");
        assert_eq!(
            (g.rate_bits_per_s, g.rtt),
            (Some(10_000_000_000), Duration::from_micros(200))
        );
        let ic = profile("intercontinental");
        assert_eq!(
            (ic.rate_bits_per_s, ic.rtt),
            (Some(100_000_000), Duration::from_millis(100))
        );
        for n in NAMES {
            assert_eq!(profile(n).name, n);
        }
    }

    #[test]
    fn custom_profiles_parse_with_units() {
        let p = profile("rate=50mbit,rtt=30ms");
        assert_eq!(p.name, CUSTOM);
        assert_eq!(p.rate_bits_per_s, Some(50_000_000));
        assert_eq!(p.rtt, Duration::from_millis(30));
        let p = profile("rtt=250us, rate=2.5Gbit/s");
        assert_eq!(p.rate_bits_per_s, Some(2_500_000_000));
        assert_eq!(p.rtt, Duration::from_micros(250));
        let p = profile("rate=800kbps,rtt=1s");
        assert_eq!(p.rate_bits_per_s, Some(800_000));
        assert_eq!(p.rtt, Duration::from_secs(1));
        assert_eq!(profile("rate=1gbit,rtt=0ms").rtt, Duration::ZERO);
        // Every profile's spec parses back to it.
        for s in [
            "rate=50mbit,rtt=30ms",
            "rate=2.5gbit,rtt=250us",
            "wan",
            "loopback",
        ] {
            let p = profile(s);
            assert_eq!(profile(&p.spec()), p, "{s}");
        }
    }

    /// Each bad value is an error that names the bad part.
    #[test]
    fn bad_profiles_name_the_bad_part() {
        let err = |s: &str| s.parse::<Profile>().unwrap_err();
        assert!(matches!(err("lan2"), ProfileError::UnknownName(n) if n == "lan2"));
        assert!(err("lan2").to_string().contains("intercontinental"));
        let bad = |s: &str, part: &str, why: &str| match err(s) {
            ProfileError::BadPart { part: p, why: w } => {
                assert_eq!(p, part, "{s}");
                assert!(w.contains(why), "{s}: {w}");
            }
            other => panic!("{s}: {other:?}"),
        };
        bad("rate=100,rtt=1ms", "rate=100", "unit");
        bad(
            "rate=100furlongs,rtt=1ms",
            "rate=100furlongs",
            "unknown rate unit",
        );
        bad("rate=x1mbit,rtt=1ms", "rate=x1mbit", "unit");
        bad("rate=1.2.3mbit,rtt=1ms", "rate=1.2.3mbit", "not a number");
        bad("rate=0mbit,rtt=1ms", "rate=0mbit", "between");
        bad("rate=499kbit,rtt=1ms", "rate=499kbit", "between 500 kbit/s");
        assert_eq!(
            profile("rate=500kbit,rtt=1ms").rate_bits_per_s,
            Some(MIN_RATE)
        );
        bad("rate=5tbit,rtt=1ms", "rate=5tbit", "unknown rate unit");
        bad("rate=1mbit,rtt=20", "rtt=20", "unit");
        bad("rate=1mbit,rtt=-2ms", "rtt=-2ms", "between");
        bad("rate=1mbit,rtt=11s", "rtt=11s", "between");
        bad("rate=1mbit,rtt=abcms", "rtt=abcms", "not a number");
        bad("rate=1mbit,rtt=1ms,loss=1", "loss=1", "unknown key");
        bad("rate=1mbit,rate=2mbit,rtt=1ms", "rate=2mbit", "twice");
        bad("rate=1mbit,rtt=1ms,x", "x", "key=value");
        assert!(matches!(
            err("rate=1mbit"),
            ProfileError::Missing { missing: "rtt", .. }
        ));
        assert!(matches!(
            err("rtt=1ms"),
            ProfileError::Missing {
                missing: "rate",
                ..
            }
        ));
    }

    #[test]
    fn the_bucket_paces_and_the_line_delays() {
        let shape = Shape {
            rate_bytes_per_s: 1e6,
            one_way: Duration::from_millis(10),
            paced: true,
        };
        let t0 = Instant::now();
        let mut tat = None;
        // The first chunk finds the bucket full: due one delay after it arrived.
        assert_eq!(due(&shape, &mut tat, t0, 1000), t0 + shape.one_way);
        // A long burst: the last of 1.001 MB (with the first chunk) leaves 1.001 s, less the
        // bucket, after the start.
        let mut last = t0;
        for _ in 0..1000 {
            last = due(&shape, &mut tat, t0, 1000);
        }
        let took = (last - t0).as_secs_f64();
        let burst = shape.burst_bytes() as f64 / 1e6;
        assert!((took - (1.001 - burst + 0.01)).abs() < 1e-3, "{took}");
        // The capacity holds the bytes in flight plus the buffer.
        assert_eq!(
            shape.capacity(),
            10_000 + shape.burst_bytes() + BUFFER_BYTES
        );
    }

    /// A server at `addr` that runs `f` on its one connection.
    fn server<T: Send + 'static>(
        f: impl FnOnce(TcpStream) -> T + Send + 'static,
    ) -> (SocketAddr, JoinHandle<T>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            f(s)
        });
        (addr, h)
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(seed).wrapping_add((i >> 9) as u8))
            .collect()
    }

    fn shaped(rate_bits: u64, rtt_ms: u64) -> Profile {
        Profile {
            name: CUSTOM.into(),
            rate_bits_per_s: Some(rate_bits),
            rtt: Duration::from_millis(rtt_ms),
        }
    }

    /// `data` from a client through a link of profile `p` to a server that reads to the
    /// end: the link, the bytes the server got, and the time from the client's connection to
    /// the server's last byte.
    fn through(p: &Profile, data: &[u8]) -> (Link, Vec<u8>, Duration) {
        let (addr, srv) = server(|mut s| {
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got
        });
        let link = p.start(addr).unwrap().unwrap();
        let start = Instant::now();
        let mut c = TcpStream::connect(link.addr()).unwrap();
        c.write_all(data).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let got = srv.join().unwrap();
        (link, got, start.elapsed())
    }

    /// Both directions at once, each more than the link holds: every byte arrives
    /// unchanged and in order.
    #[test]
    fn bytes_cross_unchanged_both_ways_at_once() {
        const N: usize = 1_500_000;
        let (addr, srv) = server(|mut s| {
            let mut w = s.try_clone().unwrap();
            let sender = std::thread::spawn(move || {
                w.write_all(&pattern(N, 7)).unwrap();
                w.shutdown(Shutdown::Write).unwrap();
            });
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            sender.join().unwrap();
            got
        });
        let link = shaped(400_000_000, 2).start(addr).unwrap().unwrap();
        let mut c = TcpStream::connect(link.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut w = c.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            w.write_all(&pattern(N, 13)).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        sender.join().unwrap();
        assert!(got == pattern(N, 7), "server to client changed");
        assert!(
            srv.join().unwrap() == pattern(N, 13),
            "client to server changed"
        );
        assert_eq!(link.bytes_delivered(), (N as u64, N as u64));
    }

    /// 1.2 MB at 32 Mbit/s (4 MB/s) take about 0.3 s: at least most of it, where loopback
    /// alone takes a millisecond.
    #[test]
    fn a_transfer_takes_its_bytes_over_the_rate() {
        const N: usize = 1_200_000;
        let p = shaped(32_000_000, 0);
        let (link, got, took) = through(&p, &pattern(N, 3));
        assert_eq!(got.len(), N);
        let took = took.as_secs_f64();
        let rate = p.rate_bytes_per_s().unwrap();
        let floor = (N - link.shape().burst_bytes()) as f64 / rate;
        assert!(
            took >= 0.9 * floor,
            "{took} s for {N} bytes, floor {floor} s"
        );
    }

    /// The line's two threads wake each other only when the other waits (the writer for a
    /// chunk into an empty line, the reader for room in a full one): a wake-up lost there
    /// leaves a thread asleep for its whole poll (`POLL`, 100 ms). A transfer that fills the
    /// line many times over and a run of small round trips finish without such sleeps. (The
    /// bounds are fifteen and twenty-five times what the links need: they catch the poll,
    /// not a slow machine.)
    #[test]
    fn the_line_wakes_its_threads_without_waiting_for_their_poll() {
        // 8 MB at 100 MB/s through a line that holds about 360 KB: the reader finds it
        // full some twenty times.
        const N: usize = 8_000_000;
        let sent = pattern(N, 5);
        let (link, got, took) = through(&shaped(800_000_000, 0), &sent);
        assert!(link.shape().capacity() < N / 20);
        assert!(got == sent, "the bytes changed on the way");
        assert!(
            took < Duration::from_millis(1200),
            "{took:?} for 80 ms of bytes"
        );
        // Twenty one-byte round trips over a 2 ms link: each message goes into an empty
        // line, whose writer must be woken for it.
        let (addr, srv) = server(|mut s| {
            for _ in 0..20 {
                let mut b = [0u8; 1];
                s.read_exact(&mut b).unwrap();
                s.write_all(&b).unwrap();
            }
        });
        let p = shaped(100_000_000, 2);
        let link = p.start(addr).unwrap().unwrap();
        let mut c = TcpStream::connect(link.addr()).unwrap();
        c.set_nodelay(true).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let start = Instant::now();
        for i in 0..20u8 {
            c.write_all(&[i]).unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            assert_eq!(b[0], i);
        }
        srv.join().unwrap();
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(1000),
            "{took:?} for 20 round trips of 2 ms"
        );
    }

    /// A one-byte message and its answer take at least the round-trip time.
    #[test]
    fn a_round_trip_takes_at_least_the_rtt() {
        let (addr, srv) = server(|mut s| {
            for _ in 0..3 {
                let mut b = [0u8; 1];
                s.read_exact(&mut b).unwrap();
                s.write_all(&[b[0] ^ 0xff]).unwrap();
            }
        });
        let p = shaped(100_000_000, 40);
        let link = p.start(addr).unwrap().unwrap();
        let mut c = TcpStream::connect(link.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for i in 0..3u8 {
            let start = Instant::now();
            c.write_all(&[i]).unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            let took = start.elapsed();
            assert_eq!(b[0], i ^ 0xff);
            assert!(took >= p.rtt, "round trip {i}: {took:?}");
        }
        srv.join().unwrap();
    }

    /// Either end closing ends the other's view of the connection.
    #[test]
    fn either_side_closing_ends_the_other() {
        // The client closes: the server reads the end.
        let (addr, srv) = server(|mut s| {
            let mut got = Vec::new();
            s.read_to_end(&mut got).map(|_| got)
        });
        let link = shaped(100_000_000, 10).start(addr).unwrap().unwrap();
        let mut c = TcpStream::connect(link.addr()).unwrap();
        c.write_all(b"bye").unwrap();
        drop(c);
        assert_eq!(srv.join().unwrap().unwrap(), b"bye");
        drop(link);

        // The server closes: the client reads the end (or a reset), within the timeout.
        let (addr, srv) = server(|mut s| {
            s.write_all(b"done").unwrap();
        });
        let link = shaped(100_000_000, 10).start(addr).unwrap().unwrap();
        let mut c = TcpStream::connect(link.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        srv.join().unwrap();
        let mut got = Vec::new();
        let r = c.read_to_end(&mut got);
        assert!(
            r.is_ok()
                || r.as_ref()
                    .is_err_and(|e| e.kind() == ErrorKind::ConnectionReset),
            "{r:?}"
        );
        assert_eq!(got, b"done");
    }

    /// Dropping a link with an idle connection returns promptly and closes it.
    #[test]
    fn dropping_the_link_closes_its_connections() {
        let (addr, srv) = server(|mut s| {
            let mut b = [0u8; 1];
            s.read(&mut b)
        });
        let link = shaped(100_000_000, 10).start(addr).unwrap().unwrap();
        let c = TcpStream::connect(link.addr()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let start = Instant::now();
        drop(link);
        assert!(start.elapsed() < Duration::from_secs(3));
        let r = srv.join().unwrap();
        assert!(matches!(r, Ok(0)) || r.is_err(), "{r:?}");
        drop(c);
    }

    #[test]
    fn the_median_of_the_leads() {
        let ms = Duration::from_millis;
        assert_eq!(median(&[]), Duration::ZERO);
        assert_eq!(median(&[ms(7)]), ms(7));
        assert_eq!(median(&[ms(1), ms(5), ms(100)]), ms(5));
        assert_eq!(median(&[ms(1), ms(4), ms(6), ms(100)]), ms(5));
    }

    /// The link measured on its own: round trips of at least the RTT, and a rate that the
    /// bucket holds down (loopback alone would be a hundred times faster).
    #[test]
    fn the_link_measures_its_own_rate_and_delay() {
        let p = shaped(80_000_000, 20);
        let net = Net::open(p.clone(), Choice::User).unwrap();
        assert_eq!(net.emulator(), "userspace");
        let m = measure(&net, 500_000, 3, 3, Duration::from_secs(10))
            .unwrap()
            .unwrap();
        assert_eq!((m.bytes, m.transfers), (500_000, 3));
        assert!(m.rtt_min >= p.rtt - net.own_rtt(), "{m:?}");
        // 10 MB/s, less what the bucket's depth lets through at once.
        let ceiling = 10e6 * 1e6 / (1e6 - Shape::burst_bytes_of(10e6) as f64);
        assert!(m.rate_bytes_per_s <= 1.1 * ceiling, "{m:?}");
        // The last byte arrives at least one delay after the last write returned.
        assert!(m.lead_min >= p.rtt / 2, "{m:?}");
        assert!(m.lead_min <= m.lead && m.lead <= m.lead_max, "{m:?}");
        assert!(
            measure(&Net::loopback(), 10, 1, 1, Duration::from_secs(1))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_delay_line_is_calibrated_by_what_the_proxy_adds() {
        let p = shaped(80_000_000, 2);
        let net = Net::open(p.clone(), Choice::User).unwrap();
        // Measured (no notice of a failure), and never all of the RTT. (Not asserted above
        // zero: on a busy machine the least of the three estimates can be zero.)
        assert!(net.notice().is_none(), "{:?}", net.notice());
        assert!(net.own_rtt() < p.rtt, "{:?}", net.own_rtt());
        assert_eq!(Net::loopback().own_rtt(), Duration::ZERO);
        // A round trip takes at least what the line delays it by.
        let m = measure(&net, 10_000, 1, 20, Duration::from_secs(10))
            .unwrap()
            .unwrap();
        assert!(m.rtt_min >= p.rtt - net.own_rtt(), "{m:?}");
        assert_eq!(emulator::calibration_pings(Duration::from_micros(200)), 60);
        assert_eq!(emulator::calibration_pings(Duration::from_millis(20)), 15);
        assert_eq!(emulator::calibration_pings(Duration::from_millis(100)), 8);
    }

    #[test]
    fn a_delay_line_thread_runs_ahead_where_the_process_may() {
        // On a thread of its own: the nice value is per thread and must not leak into the
        // test harness's.
        let (ok, nice) = std::thread::spawn(|| {
            let before = rustix::process::getpriority_process(None).unwrap_or(0);
            let ok = run_ahead();
            let after = rustix::process::getpriority_process(None).unwrap_or(0);
            (ok, (before, after))
        })
        .join()
        .unwrap();
        let root = rustix::process::geteuid().is_root();
        if root {
            assert!(ok, "root may raise a thread's priority");
        }
        if ok {
            assert_eq!(
                nice.1, LINE_NICE,
                "the thread runs at the line's nice value"
            );
        } else {
            assert_eq!(
                nice.1, nice.0,
                "a refused raise leaves the priority as it was"
            );
        }
        assert_eq!(line_runs_ahead(), ok);
        // This thread's own priority is untouched.
        assert_ne!(
            rustix::process::getpriority_process(None).ok(),
            Some(LINE_NICE)
        );
    }

    #[test]
    fn loopback_has_no_link() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert!(Profile::loopback().start(addr).unwrap().is_none());
        assert_eq!(Profile::loopback().emulator(), "none");
        assert_eq!(profile("wan").emulator(), "userspace");
    }
}
