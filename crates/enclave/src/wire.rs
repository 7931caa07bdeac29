//! The messages that cross the boundary, and their decoder.
//!
//! Every message in a channel's mailbox is a fixed 32-byte header followed by up to one
//! slot area of payload bytes (a *chunk*). A payload larger than the area is streamed: the
//! first chunk carries the payload's total length, the receiver answers each non-final chunk
//! with an [`Kind::Ack`], and the sender continues with [`Kind::Chunk`] messages.
//!
//! The header is written by the other side of the boundary, so nothing in it is trusted:
//! [`RawHeader::validate`] checks the kind, the chunk length against the area, the total
//! length against the configured maximum, and [`Assembler`] checks that chunks add up to the
//! announced total. Any inconsistency is a [`WireError`], never a panic and never an
//! allocation sized by the peer beyond a fixed cap (`fuzz/fuzz_targets/enclave_message.rs`
//! and the property tests below drive this module with arbitrary bytes).
//!
//! Header layout (little-endian, 32 bytes): `kind: u32, id: u32, status: u32, chunk_len: u32,
//! total_len: u64, t_ns: u64`. `id` is the call or ocall id; `status` is a [`Status`] on
//! returns; `t_ns` is the time spent inside the callee (returns) or 0.

use thiserror::Error;

/// Size of an encoded [`RawHeader`].
pub const HEADER_LEN: usize = 32;

/// An error in a message that came across the boundary.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The kind field is not a known message kind.
    #[error("unknown message kind {0}")]
    UnknownKind(u32),
    /// A message of this kind was not expected at this point of the conversation.
    #[error("unexpected message kind {got:?} (expected {expected})")]
    Unexpected {
        /// What arrived.
        got: Kind,
        /// What the protocol allows here.
        expected: &'static str,
    },
    /// The chunk is longer than the slot area.
    #[error("chunk of {chunk} bytes exceeds the {area}-byte area")]
    ChunkTooLarge {
        /// Announced chunk length.
        chunk: u64,
        /// Area capacity.
        area: u64,
    },
    /// The payload is longer than the configured maximum.
    #[error("payload of {total} bytes exceeds the {max}-byte limit")]
    PayloadTooLarge {
        /// Announced total length.
        total: u64,
        /// Configured maximum.
        max: u64,
    },
    /// Chunk lengths do not add up to the announced total.
    #[error("chunk of {chunk} bytes does not fit the {remaining} bytes expected")]
    LengthMismatch {
        /// Announced chunk length.
        chunk: u64,
        /// Bytes expected.
        remaining: u64,
    },
    /// An empty continuation chunk (would never finish).
    #[error("empty continuation chunk")]
    EmptyChunk,
    /// The status field is not a known status.
    #[error("unknown status {0}")]
    UnknownStatus(u32),
    /// The buffer is shorter than the encoding needs.
    #[error("truncated: {needed} bytes needed, {got} available")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// A string argument is not UTF-8.
    #[error("argument is not valid UTF-8")]
    NotUtf8,
    /// Trailing bytes after a complete encoding.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Message kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// First chunk of an ecall's input (`id` = call id).
    Ecall,
    /// First chunk of an ocall's input (`id` = ocall id).
    Ocall,
    /// First chunk of a call's result (`status`, `t_ns`).
    Return,
    /// A continuation chunk.
    Chunk,
    /// "Chunk received, send the next one."
    Ack,
}

impl Kind {
    /// The wire value.
    pub const fn code(self) -> u32 {
        match self {
            Kind::Ecall => 1,
            Kind::Ocall => 2,
            Kind::Return => 3,
            Kind::Chunk => 4,
            Kind::Ack => 5,
        }
    }

    /// Decodes a wire value.
    pub fn from_code(code: u32) -> Result<Self, WireError> {
        Ok(match code {
            1 => Kind::Ecall,
            2 => Kind::Ocall,
            3 => Kind::Return,
            4 => Kind::Chunk,
            5 => Kind::Ack,
            other => return Err(WireError::UnknownKind(other)),
        })
    }
}

/// Outcome of a call, carried by [`Kind::Return`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The payload is the output.
    Ok,
    /// The callee returned an error; the payload is its message.
    Error,
    /// The callee panicked; the payload is the panic message.
    Panic,
    /// The callee does not know this id.
    UnknownId,
}

impl Status {
    /// The wire value.
    pub const fn code(self) -> u32 {
        match self {
            Status::Ok => 0,
            Status::Error => 1,
            Status::Panic => 2,
            Status::UnknownId => 3,
        }
    }

    /// Decodes a wire value.
    pub fn from_code(code: u32) -> Result<Self, WireError> {
        Ok(match code {
            0 => Status::Ok,
            1 => Status::Error,
            2 => Status::Panic,
            3 => Status::UnknownId,
            other => return Err(WireError::UnknownStatus(other)),
        })
    }
}

/// A header exactly as read from the peer, before validation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawHeader {
    /// Message kind code.
    pub kind: u32,
    /// Call or ocall id.
    pub id: u32,
    /// Status code (returns).
    pub status: u32,
    /// Bytes of payload in this message.
    pub chunk_len: u32,
    /// Bytes of payload in the whole (possibly chunked) message.
    pub total_len: u64,
    /// Time inside the callee, for returns.
    pub t_ns: u64,
}

impl RawHeader {
    /// Encodes to the 32-byte wire form.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.kind.to_le_bytes());
        b[4..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..12].copy_from_slice(&self.status.to_le_bytes());
        b[12..16].copy_from_slice(&self.chunk_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.total_len.to_le_bytes());
        b[24..32].copy_from_slice(&self.t_ns.to_le_bytes());
        b
    }

    /// Decodes the 32-byte wire form (any bytes are a valid *raw* header).
    pub fn from_bytes(b: &[u8; HEADER_LEN]) -> Self {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        RawHeader {
            kind: u32_at(0),
            id: u32_at(4),
            status: u32_at(8),
            chunk_len: u32_at(12),
            total_len: u64_at(16),
            t_ns: u64_at(24),
        }
    }

    /// Checks the header against the channel's limits.
    pub fn validate(&self, limits: &Limits) -> Result<Header, WireError> {
        let kind = Kind::from_code(self.kind)?;
        let status = if kind == Kind::Return {
            Status::from_code(self.status)?
        } else {
            Status::Ok
        };
        let chunk = u64::from(self.chunk_len);
        if chunk > limits.area {
            return Err(WireError::ChunkTooLarge {
                chunk,
                area: limits.area,
            });
        }
        match kind {
            Kind::Ecall | Kind::Ocall | Kind::Return => {
                if self.total_len > limits.max_payload {
                    return Err(WireError::PayloadTooLarge {
                        total: self.total_len,
                        max: limits.max_payload,
                    });
                }
                // The first chunk is the whole payload, or a full area of it: the only
                // chunking a sender produces, so both sides agree on the message count.
                if chunk > self.total_len || (chunk < self.total_len && chunk != limits.area) {
                    return Err(WireError::LengthMismatch {
                        chunk,
                        remaining: self.total_len,
                    });
                }
            }
            Kind::Chunk => {
                if self.chunk_len == 0 {
                    return Err(WireError::EmptyChunk);
                }
            }
            Kind::Ack => {
                if self.chunk_len != 0 {
                    return Err(WireError::LengthMismatch {
                        chunk,
                        remaining: 0,
                    });
                }
            }
        }
        Ok(Header {
            kind,
            id: self.id,
            status,
            chunk_len: self.chunk_len as usize,
            total_len: self.total_len,
            t_ns: self.t_ns,
        })
    }
}

/// The limits a header is validated against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Capacity of the slot area (largest chunk).
    pub area: u64,
    /// Largest whole payload accepted.
    pub max_payload: u64,
}

/// A validated header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Message kind.
    pub kind: Kind,
    /// Call or ocall id.
    pub id: u32,
    /// Outcome (meaningful for [`Kind::Return`]).
    pub status: Status,
    /// Bytes of payload in this message (<= area).
    pub chunk_len: usize,
    /// Bytes of payload in the whole message (<= max payload).
    pub total_len: u64,
    /// Time inside the callee, for returns.
    pub t_ns: u64,
}

/// Reassembles a chunked payload, checking every chunk against the announced total.
#[derive(Debug)]
pub struct Assembler {
    total: usize,
    buf: Vec<u8>,
}

/// Upper bound on what an [`Assembler`] reserves before the bytes actually arrive.
const RESERVE_CAP: usize = 16 << 20;

impl Assembler {
    /// Starts from a validated first header (`Ecall`, `Ocall` or `Return`) and its chunk.
    pub fn start(first: &Header, chunk: &[u8]) -> Result<Self, WireError> {
        if chunk.len() != first.chunk_len {
            return Err(WireError::LengthMismatch {
                chunk: chunk.len() as u64,
                remaining: first.chunk_len as u64,
            });
        }
        let mut a = Self::begin(first)?;
        a.buf.extend_from_slice(chunk);
        Ok(a)
    }

    /// Checks a first header and reserves a bounded amount of space; the first chunk's
    /// bytes are appended by the caller (at most `first.chunk_len <= total`).
    pub(crate) fn begin(first: &Header) -> Result<Self, WireError> {
        if !matches!(first.kind, Kind::Ecall | Kind::Ocall | Kind::Return) {
            return Err(WireError::Unexpected {
                got: first.kind,
                expected: "ecall, ocall or return",
            });
        }
        let total = usize::try_from(first.total_len).map_err(|_| WireError::PayloadTooLarge {
            total: first.total_len,
            max: usize::MAX as u64,
        })?;
        if first.chunk_len > total {
            return Err(WireError::LengthMismatch {
                chunk: first.chunk_len as u64,
                remaining: first.total_len,
            });
        }
        Ok(Assembler {
            total,
            buf: Vec::with_capacity(total.min(RESERVE_CAP)),
        })
    }

    /// Bytes still expected.
    pub fn remaining(&self) -> usize {
        self.total - self.buf.len()
    }

    /// Whether the whole payload has arrived.
    pub fn is_complete(&self) -> bool {
        self.buf.len() == self.total
    }

    /// Adds a continuation chunk.
    pub fn push(&mut self, header: &Header, chunk: &[u8]) -> Result<(), WireError> {
        if header.kind != Kind::Chunk {
            return Err(WireError::Unexpected {
                got: header.kind,
                expected: "chunk",
            });
        }
        if chunk.len() != header.chunk_len || chunk.is_empty() {
            return Err(WireError::EmptyChunk);
        }
        if chunk.len() > self.remaining() {
            return Err(WireError::LengthMismatch {
                chunk: chunk.len() as u64,
                remaining: self.remaining() as u64,
            });
        }
        self.buf.extend_from_slice(chunk);
        Ok(())
    }

    /// The reassembled payload.
    pub fn finish(self) -> Result<Vec<u8>, WireError> {
        if self.is_complete() {
            Ok(self.buf)
        } else {
            Err(WireError::Truncated {
                needed: self.total,
                got: self.buf.len(),
            })
        }
    }

    /// The buffer, for the channel to append a chunk straight from shared memory after
    /// checking it against [`Assembler::remaining`].
    pub(crate) fn buf_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

/// Decodes a message sequence from bytes: each message is a 32-byte header followed by
/// `chunk_len` bytes. Returns the first complete payload message. This is what a channel
/// does with shared memory, minus the shared memory; the fuzz target and the property tests
/// drive it with arbitrary bytes.
pub fn decode_stream(mut bytes: &[u8], limits: &Limits) -> Result<(Header, Vec<u8>), WireError> {
    let next = |bytes: &mut &[u8]| -> Result<(Header, Vec<u8>), WireError> {
        let Some((h, rest)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            return Err(WireError::Truncated {
                needed: HEADER_LEN,
                got: bytes.len(),
            });
        };
        let header = RawHeader::from_bytes(h).validate(limits)?;
        if rest.len() < header.chunk_len {
            return Err(WireError::Truncated {
                needed: header.chunk_len,
                got: rest.len(),
            });
        }
        let (chunk, rest) = rest.split_at(header.chunk_len);
        *bytes = rest;
        Ok((header, chunk.to_vec()))
    };
    let (first, chunk) = next(&mut bytes)?;
    let mut asm = Assembler::start(&first, &chunk)?;
    while !asm.is_complete() {
        let (h, c) = next(&mut bytes)?;
        asm.push(&h, &c)?;
    }
    Ok((first, asm.finish()?))
}

/// Encodes a payload as the message sequence a sender produces (acks omitted).
pub fn encode_stream(kind: Kind, id: u32, status: Status, payload: &[u8], area: usize) -> Vec<u8> {
    let area = area.max(1);
    let mut out = Vec::with_capacity(payload.len() + HEADER_LEN * (1 + payload.len() / area));
    let mut first = true;
    let mut off = 0;
    loop {
        let n = (payload.len() - off).min(area);
        let h = RawHeader {
            kind: if first {
                kind.code()
            } else {
                Kind::Chunk.code()
            },
            id,
            status: status.code(),
            chunk_len: n as u32,
            total_len: payload.len() as u64,
            t_ns: 0,
        };
        out.extend_from_slice(&h.to_bytes());
        out.extend_from_slice(&payload[off..off + n]);
        off += n;
        first = false;
        if off >= payload.len() {
            return out;
        }
    }
}

// ---- arguments of the built-in ocalls ----

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], WireError> {
    if b.len() < n {
        return Err(WireError::Truncated {
            needed: n,
            got: b.len(),
        });
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn take_u32(b: &mut &[u8]) -> Result<u32, WireError> {
    let h = take(b, 4)?;
    Ok(u32::from_le_bytes([h[0], h[1], h[2], h[3]]))
}

/// Encodes the write-file ocall's argument: `path_len: u32 LE, path, data`.
pub fn encode_write_file(path: &str, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + path.len() + data.len());
    v.extend_from_slice(&(path.len() as u32).to_le_bytes());
    v.extend_from_slice(path.as_bytes());
    v.extend_from_slice(data);
    v
}

/// Decodes the write-file ocall's argument.
pub fn decode_write_file(mut b: &[u8]) -> Result<(&str, &[u8]), WireError> {
    let n = take_u32(&mut b)? as usize;
    let path = std::str::from_utf8(take(&mut b, n)?).map_err(|_| WireError::NotUtf8)?;
    Ok((path, b))
}

/// Encodes the log ocall's argument: `level: u8, message`.
pub fn encode_log(level: u8, msg: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + msg.len());
    v.push(level);
    v.extend_from_slice(msg.as_bytes());
    v
}

/// Decodes the log ocall's argument.
pub fn decode_log(mut b: &[u8]) -> Result<(u8, &str), WireError> {
    let level = take(&mut b, 1)?[0];
    let msg = std::str::from_utf8(b).map_err(|_| WireError::NotUtf8)?;
    Ok((level, msg))
}

/// Decodes the clock ocall's result: nanoseconds since the Unix epoch, `u64` LE.
pub fn decode_clock(b: &[u8]) -> Result<u64, WireError> {
    match <[u8; 8]>::try_from(b) {
        Ok(a) => Ok(u64::from_le_bytes(a)),
        Err(_) if b.len() < 8 => Err(WireError::Truncated {
            needed: 8,
            got: b.len(),
        }),
        Err(_) => Err(WireError::Trailing(b.len() - 8)),
    }
}

/// Decodes a path argument (read file).
pub fn decode_path(b: &[u8]) -> Result<&str, WireError> {
    std::str::from_utf8(b).map_err(|_| WireError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIM: Limits = Limits {
        area: 64,
        max_payload: 4096,
    };

    #[test]
    fn header_round_trip() {
        let h = RawHeader {
            kind: 3,
            id: 7,
            status: 1,
            chunk_len: 12,
            total_len: 12,
            t_ns: 99,
        };
        assert_eq!(RawHeader::from_bytes(&h.to_bytes()), h);
        let v = h.validate(&LIM).unwrap();
        assert_eq!(v.kind, Kind::Return);
        assert_eq!(v.status, Status::Error);
    }

    #[test]
    fn rejects_bad_headers() {
        let ok = RawHeader {
            kind: 1,
            chunk_len: 10,
            total_len: 10,
            ..Default::default()
        };
        assert!(ok.validate(&LIM).is_ok());
        let bad = |f: fn(&mut RawHeader)| {
            let mut h = ok;
            f(&mut h);
            h.validate(&LIM).unwrap_err()
        };
        assert_eq!(bad(|h| h.kind = 9), WireError::UnknownKind(9));
        assert!(matches!(
            bad(|h| h.chunk_len = 65),
            WireError::ChunkTooLarge { .. }
        ));
        assert!(matches!(
            bad(|h| h.total_len = 5000),
            WireError::PayloadTooLarge { .. }
        ));
        assert!(matches!(
            bad(|h| h.total_len = 5),
            WireError::LengthMismatch { .. }
        ));
        // non-canonical first chunk (shorter than the area but not the whole payload)
        assert!(matches!(
            bad(|h| h.total_len = 100),
            WireError::LengthMismatch { .. }
        ));
        assert!(matches!(
            bad(|h| {
                h.kind = 3;
                h.status = 77
            }),
            WireError::UnknownStatus(77)
        ));
        assert_eq!(
            bad(|h| {
                h.kind = 4;
                h.chunk_len = 0
            }),
            WireError::EmptyChunk
        );
    }

    #[test]
    fn chunk_overflow_is_rejected() {
        let mut s = encode_stream(Kind::Ecall, 1, Status::Ok, &[7u8; 100], 64);
        // second header: claim 64 bytes where 36 remain
        let second = HEADER_LEN + 64;
        s[second + 12..second + 16].copy_from_slice(&64u32.to_le_bytes());
        s.extend_from_slice(&[0u8; 28]);
        assert!(matches!(
            decode_stream(&s, &LIM),
            Err(WireError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn ocall_args() {
        let e = encode_write_file("a/b", b"xyz");
        assert_eq!(decode_write_file(&e).unwrap(), ("a/b", &b"xyz"[..]));
        assert!(decode_write_file(&e[..5]).is_err());
        assert!(decode_write_file(&[255, 255, 255, 255]).is_err());
        assert_eq!(decode_log(&encode_log(2, "hi")).unwrap(), (2, "hi"));
        assert!(decode_log(&[]).is_err());
        assert!(decode_log(&[1, 0xff]).is_err());
        assert_eq!(decode_clock(&5u64.to_le_bytes()).unwrap(), 5);
        assert!(decode_clock(&[1, 2]).is_err());
        assert!(decode_clock(&[0; 9]).is_err());
    }

    proptest! {
        #[test]
        fn stream_round_trip(payload in proptest::collection::vec(any::<u8>(), 0..600), area in 1usize..100, id: u32) {
            let lim = Limits { area: area as u64, max_payload: 4096 };
            let s = encode_stream(Kind::Ocall, id, Status::Ok, &payload, area);
            let (h, p) = decode_stream(&s, &lim).unwrap();
            prop_assert_eq!(h.id, id);
            prop_assert_eq!(h.kind, Kind::Ocall);
            prop_assert_eq!(p, payload);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400), area in 0u64..80) {
            let lim = Limits { area, max_payload: 1 << 40 };
            if let Ok((h, p)) = decode_stream(&bytes, &lim) {
                prop_assert_eq!(p.len() as u64, h.total_len);
            }
            let _ = decode_write_file(&bytes);
            let _ = decode_log(&bytes);
            let _ = decode_clock(&bytes);
        }

        #[test]
        fn mutated_streams_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..300), pos: usize, val: u8) {
            let mut s = encode_stream(Kind::Return, 3, Status::Ok, &payload, 32);
            let i = pos % s.len();
            s[i] = val;
            let lim = Limits { area: 32, max_payload: 1 << 20 };
            if let Ok((h, p)) = decode_stream(&s, &lim) {
                prop_assert_eq!(p.len() as u64, h.total_len);
            }
        }
    }
}
