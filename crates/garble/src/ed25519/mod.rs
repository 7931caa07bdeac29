//! Ed25519 signing (RFC 8032) as a garbled circuit, built from generated
//! blocks (see [`crate::generator`]): too large to flatten, so it is never stored;
//! each party runs the generator and garbles or evaluates gates as they
//! are emitted (see [`crate::stream`]).
//!
//! * [`sha512`]: SHA-512 compression and fixed-length hashing;
//! * [`field`]: arithmetic modulo `2^255 - 19` (Karatsuba products, folding
//!   reduction, inversion by ref10's addition chain);
//! * [`scalar`]: arithmetic modulo the group order `L` (Barrett reduction
//!   of 512-bit values, the multiply-add for `S`);
//! * [`point`]: fixed-base scalar multiplication with public tables (free
//!   lookups, mixed additions) and the point encoding;
//! * [`reveal`]: `R` revealed blinded in projective form and encoded in the
//!   clear (the `ed25519-sign-reveal` circuit: no inversion in the circuit);
//! * [`sign`]: the whole signature on an XOR-shared key, both circuits, and a
//!   plain reference.
//!
//! `docs/ed25519-2pc.md` lists the AND gates per block.

pub mod field;
mod plain;
pub mod point;
pub mod reveal;
pub mod scalar;
pub mod sha512;
pub mod sign;

pub use reveal::{SHARE_BYTES, blinding_share};
pub use sign::{Ed25519Sign, KEY_BYTES, OUTPUT_BYTES, Variant, public_key, reference_sign, verify};
