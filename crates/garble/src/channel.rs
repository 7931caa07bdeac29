//! Byte channels between the two parties: TCP (large buffered writes, byte
//! counters, timeouts) and an in-memory pair for tests.
//!
//! A peer that closes gives [`ChannelError::Closed`], one that stalls past
//! the timeout [`ChannelError::Timeout`]; neither hangs nor panics. Malformed
//! content is detected by the protocol layer above.

use std::collections::VecDeque;
use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use thiserror::Error;

/// A channel failed.
#[derive(Debug, Error)]
pub enum ChannelError {
    /// The peer closed the connection (or went away) mid-stream.
    #[error("the peer closed the connection")]
    Closed,
    /// The peer sent nothing (or accepted nothing) for longer than the timeout.
    #[error("the peer did not respond within {0:?}")]
    Timeout(Duration),
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
}

/// A socket that counts the bytes the kernel hands it: what crossed the wire inwards.
#[derive(Debug)]
struct CountingReader {
    inner: TcpStream,
    read: u64,
}

impl Read for CountingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Write buffer size of [`TcpChannel`].
pub const TCP_BUFFER: usize = 1 << 20;

/// Default timeout: how long a peer may stay silent.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A TCP connection with a 1 MiB write buffer, byte counters and timeouts.
#[derive(Debug)]
pub struct TcpChannel {
    writer: TcpStream,
    reader: BufReader<CountingReader>,
    wbuf: Vec<u8>,
    sent: u64,
    received: u64,
    /// Bytes the socket accepted (`write_all` returned).
    written: u64,
    timeout: Duration,
}

fn map_io(e: io::Error, timeout: Duration) -> ChannelError {
    match e.kind() {
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::NotConnected => ChannelError::Closed,
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ChannelError::Timeout(timeout),
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
        let reader = stream.try_clone().map_err(ChannelError::Io)?;
        Ok(TcpChannel {
            writer: stream,
            reader: BufReader::with_capacity(
                TCP_BUFFER,
                CountingReader {
                    inner: reader,
                    read: 0,
                },
            ),
            wbuf: Vec::with_capacity(TCP_BUFFER),
            sent: 0,
            received: 0,
            written: 0,
            timeout,
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
}

impl Channel for TcpChannel {
    fn send(&mut self, data: &[u8]) -> Result<(), ChannelError> {
        self.sent += data.len() as u64;
        if self.wbuf.len() + data.len() > TCP_BUFFER {
            self.flush()?;
        }
        if data.len() >= TCP_BUFFER {
            self.writer
                .write_all(data)
                .map_err(|e| map_io(e, self.timeout))?;
            self.written += data.len() as u64;
            Ok(())
        } else {
            self.wbuf.extend_from_slice(data);
            Ok(())
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        self.reader
            .read_exact(buf)
            .map_err(|e| map_io(e, self.timeout))?;
        self.received += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ChannelError> {
        if !self.wbuf.is_empty() {
            let r = self.writer.write_all(&self.wbuf);
            let n = self.wbuf.len() as u64;
            self.wbuf.clear();
            r.map_err(|e| map_io(e, self.timeout))?;
            self.written += n;
        }
        Ok(())
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
        self.reader.get_ref().read
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
        self.sent += data.len() as u64;
        self.wbuf.extend_from_slice(data);
        if self.wbuf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<(), ChannelError> {
        while self.rbuf.len() < buf.len() {
            match self.rx.recv_timeout(self.timeout) {
                Ok(v) => self.rbuf.extend(v),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(ChannelError::Timeout(self.timeout));
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
        s.reader
            .get_ref()
            .inner
            .set_read_timeout(Some(s.timeout))
            .unwrap();
        let mut buf = vec![0u8; 3 * TCP_BUFFER + 6];
        s.recv(&mut buf).unwrap();
        assert_eq!(buf[buf.len() - 1], b'x');
        assert_eq!(s.bytes_received(), buf.len() as u64);
        let mut one = [0u8; 1];
        assert!(matches!(s.recv(&mut one), Err(ChannelError::Timeout(_))));
        t.join().unwrap();
        s.reader
            .get_ref()
            .inner
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert!(matches!(s.recv(&mut one), Err(ChannelError::Closed)));
    }
}
