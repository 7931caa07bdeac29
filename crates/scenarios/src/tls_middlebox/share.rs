//! The key-share channel between a share agent and the middlebox, over TCP.
//!
//! The middlebox speaks first: [`MAGIC`], then a [`ShareHello`] with its engine key and the
//! enclave's quote of it. The agent verifies the quote against trust it computed itself
//! ([`Trust`]) before it seals anything ([`ShareAgent::connect`]); a refusal sends nothing.
//! Then, per session, the agent sends a [`KeyShare`] (the master secret sealed to the
//! attested key, bound to the client random) and the middlebox answers a [`ShareAck`].
//!
//! Every message is a frame: a 4-byte big-endian length, then that many bytes of SCALE
//! (`harness::codec`), at most [`MAX_FRAME`]. A longer length, a frame that does not decode
//! whole, or the wrong magic is a typed error, never a panic or an allocation the peer
//! chose.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use harness::codec::{self, CodecError, Decode, Encode};

use super::book::ShareStatus;
use super::keylog::KeylogEntry;
use super::service::{
    AttestError, AttestedEngine, EngineKey, KeyShare, Trust, seal_share, verify_engine,
};

/// The first bytes the middlebox sends on a share connection: protocol and version.
pub const MAGIC: &[u8; 8] = b"ccbshr01";
/// The largest frame either side accepts (a share is about 120 bytes, a hello about 300).
pub const MAX_FRAME: usize = 4096;

/// The middlebox's greeting: the engine key and the enclave's quote of it.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct ShareHello {
    /// Untrusted until the agent verified it ([`verify_engine`]).
    pub engine: EngineKey,
}

/// The middlebox's answer to one share.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct ShareAck {
    /// The share's client random.
    pub client_random: [u8; 32],
    /// What became of it.
    pub status: ShareStatus,
}

/// A share channel that broke.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed or timed out.
    #[error("share channel: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the channel between frames.
    #[error("share channel: the peer closed it")]
    Closed,
    /// A length beyond [`MAX_FRAME`].
    #[error("share channel: a frame of {0} bytes (at most {MAX_FRAME})")]
    TooLong(usize),
    /// A frame that is not the message expected.
    #[error("share channel: {0}")]
    Codec(#[from] CodecError),
    /// The peer is not a middlebox's share port.
    #[error("share channel: the peer is not a ccbench middlebox share port (wrong greeting)")]
    NotAMiddlebox,
}

/// Writes one frame.
pub fn write_frame(w: &mut impl Write, message: &impl Encode) -> Result<(), WireError> {
    let body = message.encode();
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l as usize <= MAX_FRAME)
        .ok_or(WireError::TooLong(body.len()))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame and decodes it as `T` (`what` names it in errors). End of stream before
/// a frame begins is [`WireError::Closed`].
pub fn read_frame<T: Decode>(r: &mut impl Read, what: &'static str) -> Result<T, WireError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < len.len() {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(WireError::Closed),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLong(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(codec::decode(what, &body)?)
}

/// Why a share agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The middlebox could not be reached.
    #[error("connecting to the middlebox's share port {addr}: {source}")]
    Connect {
        /// The address tried.
        addr: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The channel broke.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The middlebox's quote did not verify: no share was sealed or sent. (Not a `source`:
    /// the message already says it all, and a chain would repeat it.)
    #[error("{0}; no share was sent")]
    Attest(AttestError),
    /// Sealing failed.
    #[error("sealing a share: {0}")]
    Seal(String),
}

impl From<AttestError> for AgentError {
    fn from(e: AttestError) -> Self {
        AgentError::Attest(e)
    }
}

/// A share agent's connection to a middlebox whose engine key verified.
pub struct ShareAgent {
    stream: TcpStream,
    engine: AttestedEngine,
}

impl ShareAgent {
    /// Connects to the middlebox's share port, reads its engine key and quote, and
    /// verifies them against `trust`. Nothing is sent before the quote verified; a refusal
    /// says why. `timeout` bounds the connection and every read and write after it.
    pub fn connect(addr: &str, trust: &Trust, timeout: Duration) -> Result<Self, AgentError> {
        let connect_err = |source| AgentError::Connect {
            addr: addr.to_owned(),
            source,
        };
        let addrs: Vec<_> = addr.to_socket_addrs().map_err(connect_err)?.collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the address resolves to nothing");
        let mut stream = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let mut stream = stream.ok_or_else(|| connect_err(last))?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(WireError::Io)?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(WireError::Io)?;
        stream.set_nodelay(true).map_err(WireError::Io)?;
        let mut magic = [0u8; MAGIC.len()];
        stream.read_exact(&mut magic).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => WireError::NotAMiddlebox,
            _ => WireError::Io(e),
        })?;
        if &magic != MAGIC {
            return Err(WireError::NotAMiddlebox.into());
        }
        let hello: ShareHello = read_frame(&mut stream, "share hello")?;
        let engine = verify_engine(&hello.engine, trust)?;
        Ok(ShareAgent { stream, engine })
    }

    /// The attested engine shares are sealed to.
    pub fn engine(&self) -> &AttestedEngine {
        &self.engine
    }

    /// Seals one key log entry to the attested engine, sends it, and returns the
    /// middlebox's answer.
    pub fn share(&mut self, entry: &KeylogEntry) -> Result<ShareStatus, AgentError> {
        let share = seal_share(&self.engine, entry.client_random, &entry.master.0)
            .map_err(AgentError::Seal)?;
        write_frame(&mut self.stream, &share)?;
        let ack: ShareAck = read_frame(&mut self.stream, "share ack")?;
        if ack.client_random != entry.client_random {
            return Err(WireError::Codec(CodecError {
                what: "share ack",
                reason: "the acknowledgement names another client random".into(),
            })
            .into());
        }
        Ok(ack.status)
    }
}

/// The middlebox's side of one share connection: greets with `engine`, then answers each
/// share with what `offer` made of it, until the agent closes the channel (`Ok`), or the
/// channel breaks or carries something that is not a share (`Err`). `keep_going` is asked
/// between reads (the stream should have a read timeout): false ends the connection.
pub fn serve_agent(
    stream: &mut TcpStream,
    engine: &EngineKey,
    mut offer: impl FnMut(KeyShare) -> ShareStatus,
    keep_going: impl Fn() -> bool,
) -> Result<u64, WireError> {
    stream.write_all(MAGIC)?;
    write_frame(
        stream,
        &ShareHello {
            engine: engine.clone(),
        },
    )?;
    let mut shares = 0;
    loop {
        // Wait for the next frame's first byte without consuming it, so that a read timeout
        // between frames is a tick, not a broken frame.
        let mut first = [0u8; 1];
        match stream.peek(&mut first) {
            Ok(0) => return Ok(shares),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if !keep_going() {
                    return Ok(shares);
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let share: KeyShare = match read_frame(stream, "key share") {
            Ok(s) => s,
            Err(WireError::Closed) => return Ok(shares),
            Err(e) => return Err(e),
        };
        shares += 1;
        let client_random = share.client_random;
        let status = offer(share);
        write_frame(
            stream,
            &ShareAck {
                client_random,
                status,
            },
        )?;
    }
}
