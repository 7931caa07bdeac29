//! Fuzzes the sealed-blob parser and unsealing: arbitrary bytes must yield a typed error
//! (or, for a genuine blob, its contents), never a panic.
#![no_main]

use enclave::seal::{self, Identity, RootKey, Sealer, DEFAULT_SIGNER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = seal::parse(data) {
        assert_eq!(
            seal::HEADER_LEN + v.aad.len() + v.ciphertext_and_tag.len(),
            data.len()
        );
        assert!(v.ciphertext_and_tag.len() >= seal::TAG_LEN);
    }
    let sealer = Sealer::new(
        RootKey::from_bytes([0x42; 32]),
        Identity::from_code(b"fuzz", "fuzz", DEFAULT_SIGNER),
    );
    // Garbage must not unseal (forging a GCM tag by chance is out of reach).
    assert!(sealer.unseal(data).is_err());
});
