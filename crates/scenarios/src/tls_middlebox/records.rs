//! TLS record framing and reassembly on the host: pure, no I/O, no secrets.
//!
//! A relay reads whatever the socket gives it: half a record, or several records at once.
//! [`Reassembler`] buffers the bytes of one direction and hands out whole records
//! (`type(1) version(2) length(2) fragment(length)`), refusing framing it cannot follow: a
//! length beyond `2^14 + 2048` (RFC 5246 §6.2.3's bound on a `TLSCiphertext`), a content
//! type that is not change-cipher-spec, alert, handshake or application data, a version
//! whose major byte is not 3, and, at the end of the stream, a record cut short. After a
//! framing error the stream cannot be followed any more: the relay closes the flow.
//!
//! The clear-text hellos are parsed here too ([`hello_random`]): the middlebox needs the
//! client and server randoms for the key block, and they travel in the open.

use std::ops::Range;

/// Bytes of a record header.
pub const HEADER_LEN: usize = 5;
/// The largest fragment of a `TLSCiphertext` (RFC 5246 §6.2.3): `2^14 + 2048`.
pub const MAX_FRAGMENT: usize = (1 << 14) + 2048;

/// A record's content type (RFC 5246 §6.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentType {
    /// 20: the switch to the negotiated keys.
    ChangeCipherSpec,
    /// 21.
    Alert,
    /// 22.
    Handshake,
    /// 23.
    ApplicationData,
}

impl ContentType {
    /// The type of a header byte, if it is one of the four.
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            20 => ContentType::ChangeCipherSpec,
            21 => ContentType::Alert,
            22 => ContentType::Handshake,
            23 => ContentType::ApplicationData,
            _ => return None,
        })
    }

    /// The header byte.
    pub fn byte(self) -> u8 {
        match self {
            ContentType::ChangeCipherSpec => 20,
            ContentType::Alert => 21,
            ContentType::Handshake => 22,
            ContentType::ApplicationData => 23,
        }
    }
}

/// Framing the relay cannot follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A length field beyond [`MAX_FRAGMENT`].
    #[error("record length {len} exceeds the TLS maximum of {MAX_FRAGMENT}")]
    TooLong {
        /// The length field.
        len: usize,
    },
    /// A content type outside 20..=23.
    #[error("unknown record content type {0}")]
    UnknownType(u8),
    /// A version whose major byte is not 3.
    #[error("record version {0:#06x} is not TLS")]
    BadVersion(u16),
    /// The stream ended inside a record.
    #[error("the stream ended {have} byte(s) into a record (header says {want})")]
    Truncated {
        /// Bytes of the record received.
        have: usize,
        /// Bytes the record should have had (header included; 5 while the header is short).
        want: usize,
    },
}

/// One whole record, borrowed from the reassembler's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Content type.
    pub content_type: ContentType,
    /// The version field.
    pub version: u16,
    /// Header and fragment, as on the wire.
    pub bytes: &'a [u8],
}

impl Record<'_> {
    /// The fragment (the bytes after the header).
    pub fn fragment(&self) -> &[u8] {
        &self.bytes[HEADER_LEN..]
    }
}

/// Parses the header at the front of `buf`: `Ok(None)` while fewer than five bytes are
/// there, the record's total length (header included) otherwise.
pub fn header(buf: &[u8]) -> Result<Option<(ContentType, u16, usize)>, FrameError> {
    let Some(h) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let ct = ContentType::from_byte(h[0]).ok_or(FrameError::UnknownType(h[0]))?;
    let version = u16::from_be_bytes([h[1], h[2]]);
    if h[1] != 3 {
        return Err(FrameError::BadVersion(version));
    }
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    if len > MAX_FRAGMENT {
        return Err(FrameError::TooLong { len });
    }
    Ok(Some((ct, version, HEADER_LEN + len)))
}

/// Buffers one direction of a stream and splits it into records.
///
/// Use: [`push`](Self::push) what was read, take records with
/// [`next_record`](Self::next_record) until it returns `Ok(None)`, forward
/// [`consumed`](Self::consumed) bytes and [`compact`](Self::compact); at the end of the
/// stream, [`finish`](Self::finish) says whether a record was cut short.
#[derive(Debug, Default)]
pub struct Reassembler {
    /// Bytes read live in `buf[..end]`; the rest is room for the next read, zeroed once
    /// when the buffer grows (not on every read: a relay reads up to 64 KiB at a time,
    /// and zeroing that much per read cost more than most reads bring).
    buf: Vec<u8>,
    /// End of the bytes read.
    end: usize,
    /// Start of the first byte not yet handed out as part of a record.
    pos: usize,
    /// Records handed out.
    records: u64,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.spare(bytes.len()).copy_from_slice(bytes);
        self.commit(bytes.len(), bytes.len());
    }

    /// The buffer to read into: `n` spare bytes at the end; call
    /// [`commit`](Self::commit) with what was read.
    pub fn spare(&mut self, n: usize) -> &mut [u8] {
        let want = self.end + n;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        &mut self.buf[self.end..want]
    }

    /// Keeps `read` of the bytes of the last [`spare`](Self::spare) and drops the rest.
    pub fn commit(&mut self, spare: usize, read: usize) {
        self.end += read.min(spare);
    }

    /// The range of the next whole record in the buffer, advancing past it; `Ok(None)` when
    /// the buffer holds only part of one.
    pub fn next_range(&mut self) -> Result<Option<(ContentType, u16, Range<usize>)>, FrameError> {
        let rest = &self.buf[self.pos..self.end];
        match header(rest)? {
            Some((ct, v, total)) if rest.len() >= total => {
                let r = self.pos..self.pos + total;
                self.pos += total;
                self.records += 1;
                Ok(Some((ct, v, r)))
            }
            _ => Ok(None),
        }
    }

    /// The next whole record, if the buffer holds one.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, FrameError> {
        Ok(self.next_range()?.map(|(content_type, version, r)| Record {
            content_type,
            version,
            bytes: &self.buf[r],
        }))
    }

    /// The bytes of a range handed out by [`next_range`](Self::next_range) (valid until
    /// the next [`compact`](Self::compact)).
    pub fn bytes(&self, r: Range<usize>) -> &[u8] {
        &self.buf[r]
    }

    /// The whole records handed out since the last compaction, as on the wire.
    pub fn consumed(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// Drops the records handed out, keeping the partial one.
    pub fn compact(&mut self) {
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
    }

    /// Bytes buffered that are not yet part of a whole record.
    pub fn pending(&self) -> usize {
        self.end - self.pos
    }

    /// Records handed out so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// At the end of the stream: an error if it ended inside a record.
    pub fn finish(&self) -> Result<(), FrameError> {
        let rest = &self.buf[self.pos..self.end];
        if rest.is_empty() {
            return Ok(());
        }
        let want = match header(rest)? {
            Some((_, _, total)) => total,
            None => HEADER_LEN,
        };
        Err(FrameError::Truncated {
            have: rest.len(),
            want,
        })
    }
}

/// Handshake message types whose body starts with a version and a 32-byte random.
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;

/// Which hello a random came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hello {
    /// The client's random.
    Client([u8; 32]),
    /// The server's random.
    Server([u8; 32]),
}

/// The random of a ClientHello or ServerHello that starts a clear-text handshake fragment
/// (RFC 5246 §7.4.1: `type(1) length(3) version(2) random(32) ...`); `None` for any other
/// message or a fragment too short to hold one. rustls sends each hello whole in its first
/// record, which is all the middlebox relies on.
pub fn hello_random(fragment: &[u8]) -> Option<Hello> {
    let msg_type = *fragment.first()?;
    let random: [u8; 32] = fragment.get(6..38)?.try_into().ok()?;
    match msg_type {
        CLIENT_HELLO => Some(Hello::Client(random)),
        SERVER_HELLO => Some(Hello::Server(random)),
        _ => None,
    }
}

/// A record header for `content_type` and a fragment of `len` bytes (TLS 1.2).
pub fn make_header(content_type: ContentType, len: usize) -> [u8; HEADER_LEN] {
    let l = u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes();
    [content_type.byte(), 3, 3, l[0], l[1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ct: ContentType, body: &[u8]) -> Vec<u8> {
        let mut v = make_header(ct, body.len()).to_vec();
        v.extend_from_slice(body);
        v
    }

    fn drain(r: &mut Reassembler) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut out = Vec::new();
        while let Some(rec) = r.next_record()? {
            out.push(rec.bytes.to_vec());
        }
        r.compact();
        Ok(out)
    }

    #[test]
    fn several_records_in_one_read_are_split() {
        let a = rec(ContentType::Handshake, b"hello");
        let b = rec(ContentType::ApplicationData, &[7; 300]);
        let c = rec(ContentType::Alert, &[1, 0]);
        let mut r = Reassembler::new();
        r.push(&[a.clone(), b.clone(), c.clone()].concat());
        assert_eq!(drain(&mut r).unwrap(), vec![a, b, c]);
        assert_eq!(r.pending(), 0);
        assert_eq!(r.records(), 3);
        r.finish().unwrap();
    }

    #[test]
    fn records_split_across_reads_are_reassembled_at_every_cut() {
        let stream = [
            rec(ContentType::ApplicationData, &[1; 1000]),
            rec(ContentType::ApplicationData, &[2; 17]),
            rec(ContentType::ChangeCipherSpec, &[1]),
        ]
        .concat();
        for chunk in [1, 2, 3, 4, 5, 6, 7, 100, 1004, 1005, 1006] {
            let mut r = Reassembler::new();
            let mut got = Vec::new();
            for piece in stream.chunks(chunk) {
                r.push(piece);
                got.extend(drain(&mut r).unwrap());
            }
            assert_eq!(got.concat(), stream, "chunk {chunk}");
            assert_eq!(got.len(), 3, "chunk {chunk}");
            r.finish().unwrap();
        }
    }

    #[test]
    fn the_read_buffer_keeps_only_what_was_read() {
        let a = rec(ContentType::ApplicationData, &[9; 10]);
        let mut r = Reassembler::new();
        let buf = r.spare(64);
        buf[..a.len()].copy_from_slice(&a);
        r.commit(64, a.len());
        assert_eq!(drain(&mut r).unwrap(), vec![a]);
        assert_eq!(r.pending(), 0);
    }

    /// Reads as the relay makes them: a large spare area, filled only in part, with what an
    /// earlier, longer read left behind it. Only committed bytes may ever form a record.
    #[test]
    fn short_reads_into_a_reused_buffer_see_only_what_they_read() {
        let stream = [
            rec(ContentType::ApplicationData, &[3; 700]),
            rec(ContentType::ApplicationData, &[4; 5]),
            rec(ContentType::Alert, &[1, 0]),
            rec(ContentType::ApplicationData, &[5; 1500]),
        ]
        .concat();
        // A stale record in the area after the first read: if the reassembler looked past
        // what was committed, it would hand this one out.
        let stale = rec(ContentType::Handshake, &[0xee; 40]);
        for chunk in [1, 3, 5, 64, 701, 1000, stream.len()] {
            let mut r = Reassembler::new();
            let mut got = Vec::new();
            for (i, piece) in stream.chunks(chunk).enumerate() {
                let area = r.spare(4096);
                area.fill(0xee);
                if i == 0 {
                    area[piece.len()..piece.len() + stale.len()].copy_from_slice(&stale);
                }
                area[..piece.len()].copy_from_slice(piece);
                r.commit(4096, piece.len());
                got.extend(drain(&mut r).unwrap());
            }
            assert_eq!(got.concat(), stream, "chunk {chunk}");
            assert_eq!(got.len(), 4, "chunk {chunk}");
            assert_eq!(r.pending(), 0, "chunk {chunk}");
            r.finish().unwrap();
        }
    }

    #[test]
    fn a_maximal_record_passes_and_one_byte_more_does_not() {
        let ok = rec(ContentType::ApplicationData, &vec![0; MAX_FRAGMENT]);
        let mut r = Reassembler::new();
        r.push(&ok);
        assert_eq!(drain(&mut r).unwrap().len(), 1);
        let mut r = Reassembler::new();
        r.push(&[23, 3, 3, 0x48, 0x01]);
        assert_eq!(
            r.next_record(),
            Err(FrameError::TooLong {
                len: MAX_FRAGMENT + 1
            })
        );
        // The error is sticky: the same bytes are still at the front.
        assert!(r.next_record().is_err());
    }

    #[test]
    fn unknown_types_and_versions_are_refused() {
        let mut r = Reassembler::new();
        r.push(&[24, 3, 3, 0, 1, 0]);
        assert_eq!(r.next_record(), Err(FrameError::UnknownType(24)));
        let mut r = Reassembler::new();
        r.push(&[23, 0x47, 0x45, 0x54, 0x20]); // "GET " after a 23: not TLS
        assert_eq!(r.next_record(), Err(FrameError::BadVersion(0x4745)));
    }

    #[test]
    fn a_stream_cut_inside_a_record_is_truncated() {
        let a = rec(ContentType::ApplicationData, &[5; 40]);
        let mut r = Reassembler::new();
        r.push(&a[..20]);
        assert_eq!(r.next_record(), Ok(None));
        assert_eq!(
            r.finish(),
            Err(FrameError::Truncated { have: 20, want: 45 })
        );
        let mut r = Reassembler::new();
        r.push(&a[..3]);
        assert_eq!(r.next_record(), Ok(None));
        assert_eq!(r.finish(), Err(FrameError::Truncated { have: 3, want: 5 }));
    }

    #[test]
    fn hellos_give_their_randoms() {
        let mut ch = vec![1, 0, 0, 40, 3, 3];
        ch.extend_from_slice(&[0xab; 32]);
        ch.extend_from_slice(&[0, 0]);
        assert_eq!(hello_random(&ch), Some(Hello::Client([0xab; 32])));
        ch[0] = 2;
        assert_eq!(hello_random(&ch), Some(Hello::Server([0xab; 32])));
        ch[0] = 11;
        assert_eq!(hello_random(&ch), None);
        assert_eq!(hello_random(&[1, 0, 0]), None);
        assert_eq!(hello_random(&[]), None);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut r = Reassembler::new();
            let mut bytes = Vec::new();
            for _ in 0..(x % 64) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bytes.push(x as u8);
            }
            r.push(&bytes);
            while let Ok(Some(_)) = r.next_record() {}
            let _ = r.finish();
        }
    }
}
