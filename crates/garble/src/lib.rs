//! `garble`: ccbench's garbled-circuit engine.
//!
//! * [`circuit`]: the circuit model (flat gate list over `u32` wires), plain
//!   evaluation and statistics; [`bristol`]: Bristol Fashion I/O.
//! * [`builder`]: build circuits from Rust; [`library`]: AES-128, SHA-256,
//!   multiplication.
//! * [`program`]: scheduling and slot allocation; [`gc`]: half-gates.
//! * [`hash`]: blocks, AES-128 (AES-NI or portable), the garbling hash, PRG.
//! * [`ot`]: base OT (Chou-Orlandi over Ristretto) and IKNP extension.
//! * [`channel`]: TCP and in-memory channels.
//! * [`session`]: the two-party protocol with stage reports.

pub mod bristol;
pub mod builder;
pub mod channel;
pub mod circuit;
pub mod gc;
pub mod hash;
pub mod library;
pub mod microbench;
pub mod ot;
pub mod program;
mod sbox;
pub mod session;

pub use builder::{Bit, Builder};
pub use circuit::{Circuit, CircuitError, Gate, GateKind, Party, Stats};
