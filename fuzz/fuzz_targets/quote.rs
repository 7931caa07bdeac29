//! Fuzzes the (emulated) quote parser and verifier: arbitrary bytes must yield a typed
//! error, never a panic, and never verify (forging an Ed25519 signature is out of reach).
#![no_main]

use enclave::attest::{self, Quote, Quoter};
use enclave::seal::{DEFAULT_SIGNER, Identity, RootKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(q) = Quote::parse(data) {
        assert_eq!(q.to_bytes(), data, "a parsed quote re-encodes to its bytes");
    }
    let quoter = Quoter::new(
        &RootKey::from_bytes([0x42; 32]),
        Identity::from_code(b"fuzz", "fuzz", DEFAULT_SIGNER),
    )
    .expect("the attestation key derives");
    assert!(attest::verify(data, &quoter.platform(), &quoter.enclave().measurement).is_err());
});
