//! Fuzzes the relay's record reassembly (`tls_middlebox::records::Reassembler`), the way
//! the relay drives it: bytes arrive in reads of any size (here cut where the fuzzer says),
//! whole records are taken, the consumed bytes forwarded and the buffer compacted. No input
//! may panic; the records and the first framing error must be exactly those of the whole
//! stream parsed at once (a plain reference below); the bytes forwarded must be the
//! stream's prefix, unchanged; and at the end, `finish` must say truncated exactly when a
//! record was cut short.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scenarios::tls_middlebox::records::{
    ContentType, FrameError, HEADER_LEN, MAX_FRAGMENT, Reassembler, hello_random,
};

/// The reference: records and the first error of a whole stream, from the RFC's framing.
fn reference(stream: &[u8]) -> (Vec<(u8, Vec<u8>)>, Option<FrameError>, usize) {
    let mut out = Vec::new();
    let mut pos = 0;
    while stream.len() - pos >= HEADER_LEN {
        let h = &stream[pos..pos + HEADER_LEN];
        if ContentType::from_byte(h[0]).is_none() {
            return (out, Some(FrameError::UnknownType(h[0])), pos);
        }
        if h[1] != 3 {
            return (out, Some(FrameError::BadVersion(u16::from_be_bytes([h[1], h[2]]))), pos);
        }
        let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
        if len > MAX_FRAGMENT {
            return (out, Some(FrameError::TooLong { len }), pos);
        }
        if stream.len() - pos < HEADER_LEN + len {
            break;
        }
        out.push((h[0], stream[pos..pos + HEADER_LEN + len].to_vec()));
        pos += HEADER_LEN + len;
    }
    (out, None, pos)
}

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the read sizes (1..=256, repeating), the rest is the stream.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 8) + 1;
    if rest.len() < n {
        return;
    }
    let (cuts, stream) = rest.split_at(n);
    let (want, want_err, want_pos) = reference(stream);

    let mut asm = Reassembler::new();
    let mut got = Vec::new();
    let mut forwarded = Vec::new();
    let mut err = None;
    let mut at = 0;
    let mut i = 0;
    'reads: while at < stream.len() {
        let size = (usize::from(cuts[i % cuts.len()]) + 1).min(stream.len() - at);
        i += 1;
        // Half the reads through the relay's own path (spare/commit), half through push.
        if i % 2 == 0 {
            let buf = asm.spare(size + 7);
            buf[..size].copy_from_slice(&stream[at..at + size]);
            asm.commit(size + 7, size);
        } else {
            asm.push(&stream[at..at + size]);
        }
        at += size;
        loop {
            match asm.next_record() {
                Ok(Some(r)) => {
                    if r.content_type == ContentType::Handshake {
                        let _ = hello_random(r.fragment());
                    }
                    got.push((r.content_type.byte(), r.bytes.to_vec()));
                }
                Ok(None) => break,
                Err(e) => {
                    err = Some(e);
                    forwarded.extend_from_slice(asm.consumed());
                    break 'reads;
                }
            }
        }
        forwarded.extend_from_slice(asm.consumed());
        asm.compact();
    }
    assert_eq!(got, want, "records differ from the whole stream's");
    assert_eq!(err, want_err, "framing errors differ");
    assert_eq!(forwarded, stream[..want_pos], "forwarded bytes are not the stream's prefix");
    if err.is_none() {
        assert_eq!(asm.finish().is_err(), want_pos < stream.len());
        assert_eq!(asm.pending(), stream.len() - want_pos);
    }
});
