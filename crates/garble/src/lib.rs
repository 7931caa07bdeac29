//! `garble`: ccbench's garbled-circuit engine.
//!
//! * [`circuit`]: the circuit model (flat gate list over `u32` wires), plain
//!   evaluation and statistics; [`bristol`]: Bristol Fashion I/O.
//! * [`builder`]: build circuits from Rust; [`library`]: AES-128, SHA-256,
//!   multiplication.
//! * [`program`]: scheduling and slot allocation; [`gc`]: half-gates;
//!   [`threehalves`]: three-halves (25 bytes per AND); [`scheme`]: the choice
//!   between them.
//! * [`hash`]: blocks, AES-128 (AES-NI or portable), the garbling hash, PRG.
//! * [`ot`]: base OT (Chou-Orlandi over the prime-order subgroup of Ed25519's
//!   curve) and IKNP extension.
//! * [`channel`]: TCP and in-memory channels; [`link`]: link profiles and the
//!   user-space link (rate and delay) between the parties.
//! * [`session`]: the two-party protocol with stage reports.
//! * [`generator`]: circuits as generators (too large to store); [`ed25519`]:
//!   Ed25519 signing as one; [`stream`]: garbling and evaluating a
//!   generator's gates as they are emitted, and its two-party session.

pub mod bristol;
pub mod builder;
pub mod channel;
pub mod circuit;
pub mod ed25519;
pub mod gc;
pub mod generator;
pub mod hash;
pub mod library;
pub mod link;
pub mod microbench;
pub mod ot;
pub mod program;
mod sbox;
pub mod scheme;
pub mod session;
pub mod stream;
pub mod threehalves;
pub mod trace;

pub use builder::{Bit, Builder};
pub use circuit::{Circuit, CircuitError, Gate, GateKind, Party, Stats};
