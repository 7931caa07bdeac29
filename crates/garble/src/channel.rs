//! Byte channels between the two parties: TCP (large buffered writes, byte
//! counters, timeouts, a deadline) and an in-memory pair for tests.
//!
//! A peer that closes gives [`ChannelError::Closed`], one that stalls past
//! the timeout [`ChannelError::Timeout`]; neither hangs nor panics. The
//! timeout bounds each wait, so a peer that sends a byte now and then resets
//! it every time: a [`Deadline`] bounds the whole exchange, however the peer
//! paces its bytes ([`ChannelError::Deadline`]). Malformed content is
//! detected by the protocol layer above.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::trace::{Step, StepLog};

/// A channel failed.
#[derive(Debug, Error)]
pub enum ChannelError {
    /// The peer closed the connection (or went away) mid-stream.
    #[error("the peer closed the connection")]
    Closed,
    /// The peer sent nothing (or accepted nothing) for longer than the timeout.
    #[error("the peer did not respond within {0:?}")]
    Timeout(Duration),
    /// The deadline passed (its limit): the exchange as a whole took too long, however
    /// the peer paced its bytes.
    #[error("the deadline of {0:?} for the whole exchange passed")]
    Deadline(Duration),
    /// Connecting or accepting failed.
    #[error("could not connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: String,
        /// The cause.
        source: io::Error,
    },
    /// Another I/O error.
    #[error("channel i/o error: {0}")]
    Io(io::Error),
}

impl ChannelError {
    /// The same error again, for reporting a failure more than once (an I/O error's kind
    /// and message are kept).
    fn again(&self) -> ChannelError {
        let io = |e: &io::Error| io::Error::new(e.kind(), e.to_string());
        match self {
            ChannelError::Closed => ChannelError::Closed,
            ChannelError::Timeout(t) => ChannelError::Timeout(*t),
            ChannelError::Deadline(d) => ChannelError::Deadline(*d),
            ChannelError::Connect { addr, source } => ChannelError::Connect {
                addr: addr.clone(),
                source: io(source),
            },
            ChannelError::Io(e) => ChannelError::Io(io(e)),
        }
    }
}

/// A point in time by which an exchange must be over, with the limit it was set from (for
/// the error). Unlike the per-read timeout, nothing the peer does moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
}

/// The longest limit a [`Deadline`] keeps (about a century; longer ones are cut to it, far
/// inside the clock's range).
const LONGEST_LIMIT: Duration = Duration::from_secs(100 * 365 * 86_400);

impl Deadline {
    /// The deadline `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        let limit = limit.min(LONGEST_LIMIT);
        Deadline {
            at: Instant::now() + limit,
            limit,
        }
    }

    /// When it passes.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// The limit it was made with.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Time left (zero once passed).
    pub fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        self.left().is_zero()
    }
}

/// How long one blocking wait may last: `timeout`, cut to what is left before `deadline`;
/// [`ChannelError::Deadline`] once it has passed.
fn wait_for(timeout: Duration, deadline: Option<Deadline>) -> Result<Duration, ChannelError> {
    match deadline {
        None => Ok(timeout),
        Some(d) => match d.left() {
            left if left.is_zero() => Err(ChannelError::Deadline(d.limit)),
            left => Ok(timeout.min(left)),
        },
    }
}

/// A reliable, ordered byte stream to the other party.
pub trait Channel {
    /// Queues `data` for sending (it may be buffered until [`Channel::flush`]).
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError>;
    /// Receives exactly `buf.len()` bytes.
    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError>;
    /// Sends everything buffered.
    fn flush(&mut self) -> Result<(), ChannelError>;
    /// Bytes passed to `send` so far.
    fn bytes_sent(&self) -> u64;
    /// Bytes returned by `recv` so far.
    fn bytes_received(&self) -> u64;
    /// Bytes that have crossed the transport outwards so far (written to the socket), as
    /// opposed to handed to [`Channel::send`]: buffered bytes count once flushed.
    fn wire_bytes_sent(&self) -> u64 {
        self.bytes_sent()
    }
    /// Bytes that have crossed the transport inwards so far (read from the socket,
    /// including read-ahead not yet returned by [`Channel::recv`]).
    fn wire_bytes_received(&self) -> u64 {
        self.bytes_received()
    }
    /// Bytes that [`Channel::send_in_place`] takes now without starting a
    /// new buffer (at least [`MIN_SEND_ROOM`]): producers of bulk data size
    /// their pieces to it.
    fn send_room(&self) -> usize {
        CHUNK_ROOM
    }
    /// Sends `n` bytes that `fill` writes into the buffer it is lent: the
    /// channel's own send buffer where it has one, so that bulk data (the
    /// garbler's tables) is written once instead of built elsewhere and
    /// copied by [`Channel::send`]. `fill` must write all `n` bytes (the
    /// buffer holds earlier ones). The default lends a temporary buffer.
    fn send_in_place(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), ChannelError> {
        send_copied(self, n, fill)
    }
    /// Sets (or, with `None`, clears) a deadline for everything the channel does from now
    /// on: no wait outlasts it, and once it has passed every read and write fails with
    /// [`ChannelError::Deadline`]. The default ignores it (a test double without clocks);
    /// [`TcpChannel`] and [`MemChannel`] keep it.
    fn set_deadline(&mut self, deadline: Option<Deadline>) {
        let _ = deadline;
    }
    /// Round trips so far: the times this party received after it had sent since its last
    /// receive, that is, waited for an answer (counted by [`RoundTrips`]; channels that do
    /// not count say 0).
    fn round_trips(&self) -> u64 {
        0
    }
    /// [`Channel::bytes_sent`] at the last round trip ([`Channel::round_trips`]): the
    /// bytes sent after it were not waited for, and may still be on their way when the
    /// party moves on. Channels that do not count round trips say 0.
    fn sent_at_last_round_trip(&self) -> u64 {
        0
    }
    /// When the answer of the last round trip ([`Channel::round_trips`]) had arrived: the
    /// end of the last receive after it with no send between. What the party did from then
    /// on (the tables garbled after a mid-circuit reveal) no answer waited for. Channels
    /// that do not count round trips say `None`.
    fn answered_at(&self) -> Option<Instant> {
        None
    }
}

/// A channel that counts round trips: a receive of data that follows a send of data (with
/// no receive between) is a point where this party waits for the peer's answer, and counts
/// one. A party's first receive, before it sent anything, is not a round trip (it waits
/// for the peer to start, half a trip), and receives in a row count once.
///
/// The count is an upper bound of the protocol's dependent round trips: it would also count
/// a receive of bytes the peer sent without waiting for ours. The session's protocol has
/// none such (each of its turns answers the bytes before it; `garble::session`'s
/// documentation lists them), and its tests check the counts against the protocol's own.
pub struct RoundTrips<'a, C: Channel + ?Sized> {
    inner: &'a mut C,
    /// Data sent since the last receive.
    sent: bool,
    count: u64,
    /// The inner channel's bytes sent at the last round trip.
    sent_at_last: u64,
    /// The end of the last receive of the last round trip's answer.
    answered_at: Option<Instant>,
    /// The flushes and receives, for the session's start trace.
    log: StepLog,
    /// The inner channel's byte counts when this one started (sent, received): the log
    /// counts from there.
    base: (u64, u64),
}

impl<'a, C: Channel + ?Sized> RoundTrips<'a, C> {
    /// Counts the round trips of `inner` from now.
    pub fn new(inner: &'a mut C) -> Self {
        let base = (inner.bytes_sent(), inner.bytes_received());
        RoundTrips {
            inner,
            sent: false,
            count: 0,
            sent_at_last: 0,
            answered_at: None,
            log: StepLog::default(),
            base,
        }
    }

    /// The flushes and receives so far (the first [`crate::trace::MAX_STEPS`]).
    pub(crate) fn log(&self) -> &StepLog {
        &self.log
    }
}

impl<C: Channel + ?Sized> Channel for RoundTrips<'_, C> {
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        self.sent |= !data.is_empty();
        self.inner.send(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        if !buf.is_empty() && self.sent {
            self.sent = false;
            self.count += 1;
            self.sent_at_last = self.inner.bytes_sent();
        }
        // The clock only while the log keeps steps: a session's tables are read in many
        // receives after it is full.
        let start = self.log.has_room().then(Instant::now);
        self.inner.recv(buf)?;
        if let Some(start) = start.filter(|_| !buf.is_empty()) {
            let upto = self.inner.bytes_received() - self.base.1;
            self.log.push(Step::Recv { upto }, start);
        }
        // An answer's receives: the round trip's, and those in a row after it.
        if !buf.is_empty() && self.count > 0 && !self.sent {
            self.answered_at = Some(Instant::now());
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ChannelError> {
        let start = self.log.has_room().then(Instant::now);
        self.inner.flush()?;
        if let Some(start) = start {
            let sent = self.inner.bytes_sent() - self.base.0;
            self.log.push(Step::Flush { sent }, start);
        }
        Ok(())
    }
    fn bytes_sent(&self) -> u64 {
        self.inner.bytes_sent()
    }
    fn bytes_received(&self) -> u64 {
        self.inner.bytes_received()
    }
    fn wire_bytes_sent(&self) -> u64 {
        self.inner.wire_bytes_sent()
    }
    fn wire_bytes_received(&self) -> u64 {
        self.inner.wire_bytes_received()
    }
    fn send_room(&self) -> usize {
        self.inner.send_room()
    }
    fn send_in_place(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), ChannelError> {
        self.sent |= n > 0;
        self.inner.send_in_place(n, fill)
    }
    fn set_deadline(&mut self, deadline: Option<Deadline>) {
        self.inner.set_deadline(deadline);
    }
    fn round_trips(&self) -> u64 {
        self.count
    }
    fn sent_at_last_round_trip(&self) -> u64 {
        self.sent_at_last
    }
    fn answered_at(&self) -> Option<Instant> {
        self.answered_at
    }
}

/// [`Channel::send_in_place`] through a temporary buffer and [`Channel::send`].
fn send_copied<C: Channel + ?Sized>(
    ch: &mut C,
    n: usize,
    fill: &mut dyn FnMut(&mut [u8]),
) -> Result<(), ChannelError> {
    let mut tmp = vec![0u8; n];
    fill(&mut tmp);
    ch.send(&tmp)
}

/// The least [`Channel::send_room`] of any channel.
pub const MIN_SEND_ROOM: usize = 4096;

/// [`Channel::send_room`] of a channel without a send buffer of its own.
const CHUNK_ROOM: usize = 1 << 16;

/// CPU time of the calling thread so far.
pub fn thread_cpu() -> Duration {
    clock(rustix::time::ClockId::ThreadCPUTime)
}

/// The clock `id` now.
pub(crate) fn clock(id: rustix::time::ClockId) -> Duration {
    let t = rustix::time::clock_gettime(id);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

impl<C: Channel + ?Sized> Channel for &mut C {
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        (**self).send(data)
    }
    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        (**self).recv(buf)
    }
    fn flush(&mut self) -> Result<(), ChannelError> {
        (**self).flush()
    }
    fn bytes_sent(&self) -> u64 {
        (**self).bytes_sent()
    }
    fn bytes_received(&self) -> u64 {
        (**self).bytes_received()
    }
    fn wire_bytes_sent(&self) -> u64 {
        (**self).wire_bytes_sent()
    }
    fn wire_bytes_received(&self) -> u64 {
        (**self).wire_bytes_received()
    }
    fn send_room(&self) -> usize {
        (**self).send_room()
    }
    fn send_in_place(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), ChannelError> {
        (**self).send_in_place(n, fill)
    }
    fn set_deadline(&mut self, deadline: Option<Deadline>) {
        (**self).set_deadline(deadline)
    }
}

/// Write buffer size of [`TcpChannel`]: a full block goes to the socket from the sending
/// thread (public for the predictions of a stage over a link: a sender runs this far ahead
/// of its socket). 64 KiB: a block the garbler has just filled is still in its core's L2
/// cache when the kernel copies it, and a single evaluation's tables start across while
/// it is garbled (`docs/gc-2pc.md`, "The garbler's sends on its own thread").
pub const TCP_BUFFER: usize = 1 << 16;

/// Room past [`TCP_BUFFER`] in the write buffer for small messages: one that does not fit
/// in the block is appended there and written with the block by the next send that
/// needs room (or a flush), so that a protocol message between two stretches of tables
/// (a bulk session's input labels, its outputs) never waits for the socket itself. Over a
/// link, whichever send found the block full waited for the backlog of tables before it:
/// the Peer Inputs stage of a 256-evaluation AES-128 bulk session over `lan` wrote a block
/// in about a third of its evaluations and took 52-66 ms against 16 ms.
const SPILL: usize = 1 << 14;

/// Reads of at least this many bytes go straight from the socket into the
/// caller's buffer when nothing is buffered: no second copy.
const DIRECT_READ: usize = 1 << 14;

/// Read buffer size of [`TcpChannel`]: the most a small read pulls in
/// ahead. Kept at [`DIRECT_READ`]: a larger read-ahead (it was 256 KiB)
/// slurped the next garbled tables whenever the garbler was ahead, and they
/// were then copied a second time, out of this buffer.
const READ_BUFFER: usize = DIRECT_READ;

/// Default timeout: how long a peer may stay silent.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes all of `data`, each write waiting at most `timeout` and none past `deadline`
/// (a peer that takes a byte now and then cannot stretch the whole beyond it); `wrote`
/// counts each write's bytes. The socket's write timeout is cut to the time left when the
/// deadline is nearer than `timeout` ([`TcpChannel::set_deadline`] restores it).
fn write_all_within(
    stream: &mut TcpStream,
    mut data: &[u8],
    timeout: Duration,
    deadline: Option<Deadline>,
    mut wrote: impl FnMut(usize),
) -> Result<(), ChannelError> {
    while !data.is_empty() {
        let wait = wait_for(timeout, deadline)?;
        if wait < timeout {
            stream
                .set_write_timeout(Some(wait))
                .map_err(ChannelError::Io)?;
        }
        match stream.write(data) {
            Ok(0) => return Err(ChannelError::Closed),
            Ok(n) => {
                wrote(n);
                data = &data[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(map_io(e, timeout, deadline.filter(|_| wait < timeout))),
        }
    }
    Ok(())
}

/// A TCP connection with byte counters and timeouts.
///
/// Writes: `send` appends to a 64 KiB block, and a full block goes to the socket
/// from the calling thread; a small message that does not fit waits in a spill
/// room for the next write, so that it never waits for the socket itself
/// (`SPILL`); `flush` writes the rest. No writer thread: on the
/// two cores the parties share, a thread that took the blocks over did not let
/// the garbler compute more (both cores are busy either way) but cost two
/// context switches a block and a colder copy (measured, `docs/gc-2pc.md`).
/// The sender runs ahead of its peer by what the socket buffers hold (the
/// kernel autotunes them). After `flush` the socket's byte counter is exact.
/// Reads: a 16 KiB read-ahead buffer, bypassed for reads of 16 KiB or more
/// when it is empty (the garbled tables land in the evaluator's buffer with one
/// copy). `TCP_NODELAY` is set: every flush is a segment now, not after
/// Nagle's wait for the peer's (delayed) ACK.
///
/// Time: each blocking read or write waits at most the timeout; with a
/// [`Deadline`] ([`Channel::set_deadline`]), none waits past it, and every
/// read and write fails once it has passed.
#[derive(Debug)]
pub struct TcpChannel {
    stream: TcpStream,
    /// The block being filled: [`TCP_BUFFER`] long and [`SPILL`] more, `wlen` bytes of it
    /// used.
    wbuf: Vec<u8>,
    wlen: usize,
    rbuf: Box<[u8]>,
    rpos: usize,
    rlen: usize,
    sent: u64,
    received: u64,
    /// Bytes the socket accepted (`write` returned).
    written: u64,
    /// The first failed write: the stream has a hole from there on, so every later
    /// send and flush fails with it.
    broken: Option<ChannelError>,
    /// Bytes read from the socket.
    read: u64,
    timeout: Duration,
    deadline: Option<Deadline>,
}

/// A socket error as a channel error; a wait that ran out is the deadline's when `cut_by`
/// had cut it short, the timeout's otherwise.
fn map_io(e: io::Error, timeout: Duration, cut_by: Option<Deadline>) -> ChannelError {
    match e.kind() {
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::NotConnected => ChannelError::Closed,
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => match cut_by {
            Some(d) => ChannelError::Deadline(d.limit),
            None => ChannelError::Timeout(timeout),
        },
        _ => ChannelError::Io(e),
    }
}

impl TcpChannel {
    /// Wraps a connected stream; `timeout` bounds every blocking read and
    /// write.
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<TcpChannel, ChannelError> {
        let setup = |s: &TcpStream| -> io::Result<()> {
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))
        };
        setup(&stream).map_err(ChannelError::Io)?;
        Ok(TcpChannel {
            stream,
            wbuf: vec![0u8; TCP_BUFFER + SPILL],
            wlen: 0,
            rbuf: vec![0u8; READ_BUFFER].into_boxed_slice(),
            rpos: 0,
            rlen: 0,
            sent: 0,
            received: 0,
            written: 0,
            broken: None,
            read: 0,
            timeout,
            deadline: None,
        })
    }

    /// Connects to `addr`, retrying until `timeout` has passed (so the
    /// evaluator may start before the garbler listens).
    pub fn connect(addr: &str, timeout: Duration) -> Result<TcpChannel, ChannelError> {
        let deadline = Instant::now() + timeout;
        let err = |source| ChannelError::Connect {
            addr: addr.to_string(),
            source,
        };
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(err)?.collect();
        loop {
            let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
            for a in &addrs {
                let left = deadline.saturating_duration_since(Instant::now());
                match TcpStream::connect_timeout(a, left.max(Duration::from_millis(10))) {
                    Ok(s) => return TcpChannel::new(s, timeout),
                    Err(e) => last = e,
                }
            }
            if Instant::now() >= deadline {
                return Err(err(last));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Accepts one connection on `listener`, waiting at most `timeout`.
    pub fn accept(listener: &TcpListener, timeout: Duration) -> Result<TcpChannel, ChannelError> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(50);
        listener.set_nonblocking(true).map_err(ChannelError::Io)?;
        loop {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).map_err(ChannelError::Io)?;
                    return TcpChannel::new(s, timeout);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(ChannelError::Timeout(timeout));
                    }
                    // Poll quickly at first (a peer that is already
                    // connecting is not kept waiting), then back off.
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                Err(e) => return Err(ChannelError::Io(e)),
            }
        }
    }

    /// Binds `addr` and accepts one connection.
    pub fn listen(addr: &str, timeout: Duration) -> Result<TcpChannel, ChannelError> {
        let l = TcpListener::bind(addr).map_err(|source| ChannelError::Connect {
            addr: addr.to_string(),
            source,
        })?;
        TcpChannel::accept(&l, timeout)
    }

    /// Writes the filled part of the write buffer (full, or as full as a piece for
    /// [`Channel::send_in_place`] allows) and empties it; fails once the deadline has
    /// passed, with or without bytes to write, and after a write that failed.
    fn write_block(&mut self) -> Result<(), ChannelError> {
        // Consumed either way: after a failure nothing more goes out.
        let len = std::mem::take(&mut self.wlen);
        if let Some(e) = &self.broken {
            return Err(e.again());
        }
        let written = &mut self.written;
        let r = wait_for(self.timeout, self.deadline).and_then(|_| {
            write_all_within(
                &mut self.stream,
                &self.wbuf[..len],
                self.timeout,
                self.deadline,
                |n| *written += n as u64,
            )
        });
        // A failure with bytes to write leaves a hole in the stream.
        if let Err(e) = &r
            && len > 0
        {
            self.broken = Some(e.again());
        }
        r
    }

    /// One read from the socket: at most the timeout, never past the deadline.
    fn fill_from_socket(&mut self, buf: &mut [u8]) -> Result<usize, ChannelError> {
        loop {
            let wait = wait_for(self.timeout, self.deadline)?;
            if wait < self.timeout {
                self.stream
                    .set_read_timeout(Some(wait))
                    .map_err(ChannelError::Io)?;
            }
            match self.stream.read(buf) {
                Ok(0) => return Err(ChannelError::Closed),
                Ok(n) => {
                    self.read += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let cut_by = self.deadline.filter(|_| wait < self.timeout);
                    return Err(map_io(e, self.timeout, cut_by));
                }
            }
        }
    }
}

impl Channel for TcpChannel {
    /// A message of at most `SPILL` bytes that fits in the block's spill room is
    /// appended without a write: it goes out with the next block or flush.
    fn send(&mut self, mut data: &[u8]) -> Result<(), ChannelError> {
        self.sent += data.len() as u64;
        if data.len() <= SPILL && self.wlen + data.len() <= self.wbuf.len() {
            self.wbuf[self.wlen..self.wlen + data.len()].copy_from_slice(data);
            self.wlen += data.len();
            return Ok(());
        }
        while !data.is_empty() {
            if self.wlen >= TCP_BUFFER {
                self.write_block()?;
            }
            let k = (TCP_BUFFER - self.wlen).min(data.len());
            self.wbuf[self.wlen..self.wlen + k].copy_from_slice(&data[..k]);
            self.wlen += k;
            data = &data[k..];
        }
        if self.wlen == TCP_BUFFER {
            self.write_block()?;
        }
        Ok(())
    }

    /// What is left of the block, or a whole block if less than
    /// [`MIN_SEND_ROOM`] is left (the next piece starts a new one).
    fn send_room(&self) -> usize {
        match TCP_BUFFER.saturating_sub(self.wlen) {
            left if left >= MIN_SEND_ROOM => left,
            _ => TCP_BUFFER,
        }
    }

    fn send_in_place(
        &mut self,
        n: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), ChannelError> {
        if n > TCP_BUFFER {
            return send_copied(self, n, fill);
        }
        if n > TCP_BUFFER.saturating_sub(self.wlen) {
            self.write_block()?;
        }
        fill(&mut self.wbuf[self.wlen..self.wlen + n]);
        self.wlen += n;
        self.sent += n as u64;
        if self.wlen == TCP_BUFFER {
            self.write_block()?;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        let mut done = 0;
        while done < buf.len() {
            if self.rpos < self.rlen {
                let k = (self.rlen - self.rpos).min(buf.len() - done);
                buf[done..done + k].copy_from_slice(&self.rbuf[self.rpos..self.rpos + k]);
                self.rpos += k;
                done += k;
            } else if buf.len() - done >= DIRECT_READ {
                // Nothing buffered and a large read: straight into `buf`.
                done += self.fill_from_socket(&mut buf[done..])?;
            } else {
                let mut rb = std::mem::take(&mut self.rbuf);
                let n = self.fill_from_socket(&mut rb);
                self.rbuf = rb;
                // Consumed either way: a failed read leaves nothing buffered.
                self.rpos = 0;
                self.rlen = 0;
                self.rlen = n?;
            }
        }
        self.received += buf.len() as u64;
        Ok(())
    }

    /// Returns when the socket has accepted every byte sent so far.
    fn flush(&mut self) -> Result<(), ChannelError> {
        self.write_block()
    }

    fn bytes_sent(&self) -> u64 {
        self.sent
    }

    fn bytes_received(&self) -> u64 {
        self.received
    }

    fn wire_bytes_sent(&self) -> u64 {
        self.written
    }

    fn wire_bytes_received(&self) -> u64 {
        self.read
    }

    /// Keeps `deadline` for the reads and writes; the socket's timeouts go back to the full
    /// timeout (a read or write cuts them again when the deadline is nearer).
    fn set_deadline(&mut self, deadline: Option<Deadline>) {
        self.deadline = deadline;
        // Best effort: were these to fail, a cut timeout stays, which is only shorter.
        let _ = self.stream.set_read_timeout(Some(self.timeout));
        let _ = self.stream.set_write_timeout(Some(self.timeout));
    }
}

/// One end of an in-memory channel (see [`mem_pair`]).
#[derive(Debug)]
pub struct MemChannel {
    tx: Option<mpsc::Sender<Vec<u8>>>,
    rx: mpsc::Receiver<Vec<u8>>,
    wbuf: Vec<u8>,
    rbuf: VecDeque<u8>,
    sent: u64,
    received: u64,
    timeout: Duration,
    deadline: Option<Deadline>,
}

/// Two connected in-memory channel ends (unbounded; flushes at 64 KiB).
pub fn mem_pair(timeout: Duration) -> (MemChannel, MemChannel) {
    let (t1, r1) = mpsc::channel();
    let (t2, r2) = mpsc::channel();
    let mk = |tx, rx| MemChannel {
        tx: Some(tx),
        rx,
        wbuf: Vec::new(),
        rbuf: VecDeque::new(),
        sent: 0,
        received: 0,
        timeout,
        deadline: None,
    };
    (mk(t1, r2), mk(t2, r1))
}

impl MemChannel {
    /// Closes the sending direction now (the peer's reads fail with
    /// [`ChannelError::Closed`] once buffered data is consumed).
    pub fn close(&mut self) {
        let _ = self.flush();
        self.tx = None;
    }
}

impl Channel for MemChannel {
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        if self.tx.is_none() {
            return Err(ChannelError::Closed);
        }
        wait_for(self.timeout, self.deadline)?;
        self.sent += data.len() as u64;
        self.wbuf.extend_from_slice(data);
        if self.wbuf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        while self.rbuf.len() < buf.len() {
            let wait = wait_for(self.timeout, self.deadline)?;
            match self.rx.recv_timeout(wait) {
                Ok(v) => self.rbuf.extend(v),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(match self.deadline.filter(|_| wait < self.timeout) {
                        Some(d) => ChannelError::Deadline(d.limit),
                        None => ChannelError::Timeout(self.timeout),
                    });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(ChannelError::Closed),
            }
        }
        let n = buf.len();
        for (d, s) in buf.iter_mut().zip(self.rbuf.drain(..n)) {
            *d = s;
        }
        self.received += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ChannelError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        wait_for(self.timeout, self.deadline)?;
        let tx = self.tx.as_ref().ok_or(ChannelError::Closed)?;
        tx.send(std::mem::take(&mut self.wbuf))
            .map_err(|_| ChannelError::Closed)
    }

    fn bytes_sent(&self) -> u64 {
        self.sent
    }

    fn bytes_received(&self) -> u64 {
        self.received
    }

    fn set_deadline(&mut self, deadline: Option<Deadline>) {
        self.deadline = deadline;
    }
}

impl Drop for MemChannel {
    fn drop(&mut self) {
        // Like a socket close: what was sent before is still delivered.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A first receive is no round trip; a receive after a send is one; receives in a row,
    /// sends in a row and empty messages add none.
    #[test]
    fn round_trips_count_each_wait_for_an_answer() {
        let (mut a, mut b) = mem_pair(Duration::from_secs(5));
        b.send(&[0; 8]).unwrap();
        b.flush().unwrap();
        let mut r = RoundTrips::new(&mut a);
        let mut buf = [0u8; 4];
        r.recv(&mut buf).unwrap();
        r.recv(&mut buf).unwrap();
        assert_eq!(r.round_trips(), 0);
        // Waiting for the peer to start is no answer.
        assert_eq!(r.answered_at(), None);
        r.send(&[1; 2]).unwrap();
        r.send(&[]).unwrap();
        r.send_in_place(3, &mut |x| x.fill(2)).unwrap();
        r.flush().unwrap();
        let mut got = [0u8; 5];
        b.recv(&mut got).unwrap();
        assert_eq!(got, [1, 1, 2, 2, 2]);
        b.send(&[3; 8]).unwrap();
        b.flush().unwrap();
        r.recv(&mut buf).unwrap();
        r.recv(&mut []).unwrap();
        r.recv(&mut buf).unwrap();
        assert_eq!(r.round_trips(), 1);
        // The 5 bytes sent before the answer were waited for.
        assert_eq!(r.sent_at_last_round_trip(), 5);
        // The answer ended with its last receive in a row (the empty one is none).
        let answered = r.answered_at().expect("an answer arrived");
        assert!(answered <= Instant::now());
        r.send(&[9; 4]).unwrap();
        r.flush().unwrap();
        b.recv(&mut buf).unwrap();
        assert_eq!(r.sent_at_last_round_trip(), 5);
        r.send(&[]).unwrap();
        r.recv(&mut []).unwrap();
        assert_eq!(r.round_trips(), 1);
        assert_eq!((r.bytes_sent(), r.bytes_received()), (9, 16));
        // Sends after the answer, and an empty receive, leave it where it was.
        assert_eq!(r.answered_at(), Some(answered));
    }

    #[test]
    fn tcp_counts_what_crosses_the_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let mut b = TcpChannel::connect(&addr, Duration::from_secs(5)).unwrap();
            let mut buf = [0u8; 10];
            b.recv(&mut buf).unwrap();
            assert_eq!((b.bytes_received(), b.wire_bytes_received()), (10, 10));
            b.send(&[7; 3]).unwrap();
            b.flush().unwrap();
        });
        let mut a = TcpChannel::accept(&l, Duration::from_secs(5)).unwrap();
        a.send(&[1; 10]).unwrap();
        // Handed to `send`, still in the buffer: not on the wire yet.
        assert_eq!((a.bytes_sent(), a.wire_bytes_sent()), (10, 0));
        a.flush().unwrap();
        assert_eq!(a.wire_bytes_sent(), 10);
        let mut buf = [0u8; 3];
        a.recv(&mut buf).unwrap();
        assert_eq!(a.wire_bytes_received(), 3);
        t.join().unwrap();
    }

    #[test]
    fn mem_round_trip_and_close() {
        let (mut a, mut b) = mem_pair(Duration::from_secs(5));
        a.send(b"hello").unwrap();
        a.flush().unwrap();
        let mut buf = [0u8; 5];
        b.recv(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        assert_eq!((a.bytes_sent(), b.bytes_received()), (5, 5));
        drop(a);
        assert!(matches!(b.recv(&mut buf), Err(ChannelError::Closed)));
    }

    #[test]
    fn mem_timeout() {
        let (_a, mut b) = mem_pair(Duration::from_millis(50));
        let mut buf = [0u8; 1];
        assert!(matches!(b.recv(&mut buf), Err(ChannelError::Timeout(_))));
    }

    #[test]
    fn tcp_round_trip_close_and_stall() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let mut c = TcpChannel::connect(&addr, Duration::from_secs(5)).unwrap();
            let big = vec![7u8; 3 * TCP_BUFFER + 5];
            c.send(&big).unwrap();
            c.send(b"x").unwrap();
            c.flush().unwrap();
            // Stall: say nothing until the peer times out, then close.
            std::thread::sleep(Duration::from_millis(400));
        });
        let mut s = TcpChannel::accept(&l, Duration::from_secs(5)).unwrap();
        s.timeout = Duration::from_millis(200);
        s.stream.set_read_timeout(Some(s.timeout)).unwrap();
        let mut buf = vec![0u8; 3 * TCP_BUFFER + 6];
        s.recv(&mut buf).unwrap();
        assert_eq!(buf[buf.len() - 1], b'x');
        assert_eq!(s.bytes_received(), buf.len() as u64);
        let mut one = [0u8; 1];
        assert!(matches!(s.recv(&mut one), Err(ChannelError::Timeout(_))));
        t.join().unwrap();
        s.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert!(matches!(s.recv(&mut one), Err(ChannelError::Closed)));
    }

    #[test]
    fn mem_deadline_cuts_the_timeout_short() {
        let (_a, mut b) = mem_pair(Duration::from_secs(10));
        b.set_deadline(Some(Deadline::after(Duration::from_millis(100))));
        let t = Instant::now();
        let mut buf = [0u8; 1];
        let r = b.recv(&mut buf);
        assert!(matches!(r, Err(ChannelError::Deadline(_))), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(matches!(b.send(&[1]), Err(ChannelError::Deadline(_))));
    }

    /// A peer that sends one byte every 20 ms never lets a 5 s read timeout run out; the
    /// deadline ends the read when it passes, not after.
    #[test]
    fn tcp_deadline_stops_a_trickling_peer() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let trickler = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            for _ in 0..250 {
                if s.write_all(&[7]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let mut a = TcpChannel::accept(&l, Duration::from_secs(5)).unwrap();
        let limit = Duration::from_millis(400);
        a.set_deadline(Some(Deadline::after(limit)));
        let t = Instant::now();
        let mut buf = [0u8; 1000];
        let r = a.recv(&mut buf);
        let took = t.elapsed();
        assert!(
            matches!(r, Err(ChannelError::Deadline(d)) if d == limit),
            "{r:?}"
        );
        assert!(r.unwrap_err().to_string().contains("deadline"));
        assert!(
            took >= Duration::from_millis(350) && took < Duration::from_millis(1500),
            "{took:?}"
        );
        drop(a);
        trickler.join().unwrap();
    }

    /// A peer that reads nothing: writes of full blocks and flushes alike fail by the
    /// deadline, long before the 10 s write timeout.
    #[test]
    fn tcp_deadline_bounds_writes_to_a_peer_that_does_not_read() {
        let (mut a, b) = tcp_pair(Duration::from_secs(10));
        a.set_deadline(Some(Deadline::after(Duration::from_millis(400))));
        let t = Instant::now();
        let block = vec![1u8; TCP_BUFFER];
        let mut err = None;
        // 128 MiB: far more than the socket buffers hold.
        for _ in 0..(128 << 20) / TCP_BUFFER {
            if let Err(e) = a.send(&block) {
                err = Some(e);
                break;
            }
        }
        let err = err.or_else(|| a.flush().err());
        assert!(matches!(err, Some(ChannelError::Deadline(_))), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        // Later sends and flushes report it too, even without the deadline: the
        // stream has a hole where the failed block was.
        assert!(matches!(a.flush(), Err(ChannelError::Deadline(_))));
        a.set_deadline(None);
        assert!(matches!(a.send(&block), Err(ChannelError::Deadline(_))));
        assert!(matches!(a.flush(), Err(ChannelError::Deadline(_))));
        drop(b);
    }

    /// A TCP pair on loopback: (accepted, connected).
    fn tcp_pair(timeout: Duration) -> (TcpChannel, TcpChannel) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || TcpChannel::connect(&addr, timeout).unwrap());
        let a = TcpChannel::accept(&l, timeout).unwrap();
        (a, t.join().unwrap())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
        /// Messages of any size (through the write buffer, copied or written
        /// in place, whole blocks, the spill room, the read-ahead buffer and
        /// direct reads) arrive whole and in order, with exact counters after
        /// `flush`.
        #[test]
        fn tcp_messages_arrive_in_order(
            sizes in proptest::collection::vec(
                proptest::prop_oneof![1usize..64, 1usize..40_000, 1usize..700_000],
                1..12,
            ),
            flush_every in 1usize..4,
            in_place in proptest::collection::vec(proptest::prelude::any::<bool>(), 12),
        ) {
            let (mut a, mut b) = tcp_pair(Duration::from_secs(10));
            let msgs: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(k, &n)| (0..n).map(|i| (i * 31 + k * 7) as u8).collect())
                .collect();
            let want = msgs.clone();
            let t = std::thread::spawn(move || {
                let mut got = Vec::new();
                for m in &want {
                    let mut buf = vec![0u8; m.len()];
                    b.recv(&mut buf).unwrap();
                    got.push(buf);
                }
                b.send(b"done").unwrap();
                b.flush().unwrap();
                (got == want, b.bytes_received(), b.wire_bytes_received())
            });
            for (k, m) in msgs.iter().enumerate() {
                if in_place[k] {
                    // Written into the send buffer: after what `send` left
                    // there, across block boundaries, larger than a block.
                    a.send_in_place(m.len(), &mut |buf| buf.copy_from_slice(m)).unwrap();
                } else {
                    a.send(m).unwrap();
                }
                proptest::prop_assert!(a.send_room() >= MIN_SEND_ROOM);
                if k % flush_every == 0 {
                    a.flush().unwrap();
                }
            }
            a.flush().unwrap();
            let total: u64 = msgs.iter().map(|m| m.len() as u64).sum();
            proptest::prop_assert_eq!((a.bytes_sent(), a.wire_bytes_sent()), (total, total));
            let mut done = [0u8; 4];
            a.recv(&mut done).unwrap();
            let (same, got, wire) = t.join().unwrap();
            proptest::prop_assert!(same);
            proptest::prop_assert_eq!((got, wire), (total, total));
        }
    }

    /// A small message that does not fit in the block spills past it without a write;
    /// the next piece of tables writes both, and everything arrives in order.
    #[test]
    fn tcp_small_messages_spill_and_wait_for_the_next_write() {
        let (mut a, mut b) = tcp_pair(Duration::from_secs(10));
        let first: Vec<u8> = (0..TCP_BUFFER - 10).map(|i| i as u8).collect();
        a.send(&first).unwrap();
        a.send(&[9u8; 100]).unwrap();
        assert_eq!(a.wire_bytes_sent(), 0, "the small message wrote the block");
        a.send_in_place(4096, &mut |t| t.fill(5)).unwrap();
        assert_eq!(a.wire_bytes_sent(), (TCP_BUFFER + 90) as u64);
        a.flush().unwrap();
        let total = TCP_BUFFER + 90 + 4096;
        assert_eq!(
            (a.bytes_sent(), a.wire_bytes_sent()),
            (total as u64, total as u64)
        );
        let mut got = vec![0u8; total];
        b.recv(&mut got).unwrap();
        assert_eq!(&got[..first.len()], &first[..]);
        assert!(got[first.len()..first.len() + 100].iter().all(|&x| x == 9));
        assert!(got[first.len() + 100..].iter().all(|&x| x == 5));
    }

    #[test]
    fn tcp_sends_report_a_closed_peer() {
        let (mut a, b) = tcp_pair(Duration::from_secs(5));
        drop(b);
        let block = vec![1u8; TCP_BUFFER];
        // The first blocks may fit in the socket buffers; within a few MiB
        // the socket's error (reset or broken pipe) comes back.
        let mut err = None;
        for _ in 0..64 {
            if let Err(e) = a.send(&block).and_then(|()| a.flush()) {
                err = Some(e);
                break;
            }
        }
        assert!(matches!(err, Some(ChannelError::Closed)), "{err:?}");
    }

    /// Without a flush, the error comes back from a send that fills a block;
    /// the sends after it, copied or in place, fail the same way (no panic on
    /// the block that went down with the connection).
    #[test]
    fn tcp_sends_after_a_write_error_fail_cleanly() {
        let (mut a, b) = tcp_pair(Duration::from_secs(5));
        drop(b);
        let block = vec![1u8; TCP_BUFFER];
        let mut failed = false;
        for _ in 0..64 {
            if a.send(&block).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "64 blocks to a closed peer all succeeded");
        for _ in 0..3 {
            assert!(matches!(a.send(&block), Err(ChannelError::Closed)));
            assert!(matches!(
                a.send_in_place(TCP_BUFFER, &mut |t| t.fill(2)),
                Err(ChannelError::Closed)
            ));
        }
    }
}
