//! Fuzzes the decoding of messages that cross the enclave boundary: header validation,
//! chunk reassembly, and the built-in ocalls' argument decoders. None may panic; a decoded
//! payload must have exactly the announced length.
#![no_main]

use enclave::wire::{self, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the area size (small areas exercise chunking).
    let Some((&a, rest)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        area: u64::from(a) + 1,
        max_payload: 1 << 20,
    };
    if let Ok((header, payload)) = wire::decode_stream(rest, &limits) {
        assert_eq!(payload.len() as u64, header.total_len);
        // Re-encoding the decoded payload decodes to the same thing.
        let again = wire::encode_stream(header.kind, header.id, header.status, &payload, limits.area as usize);
        let (h2, p2) = wire::decode_stream(&again, &limits).expect("canonical stream decodes");
        assert_eq!((h2.kind, h2.id, h2.status), (header.kind, header.id, header.status));
        assert_eq!(p2, payload);
    }
    let _ = wire::decode_write_file(rest);
    let _ = wire::decode_log(rest);
    let _ = wire::decode_clock(rest);
    let _ = wire::decode_path(rest);
});
