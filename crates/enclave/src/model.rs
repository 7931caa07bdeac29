//! The transition-cost model: busy cycles added to every boundary crossing.
//!
//! Off by default. The sandbox backend measures what *this* machine's boundary costs (a
//! process switch through shared memory); SGX's EENTER/EEXIT cost something else. A model
//! adds a fixed number of cycles per transition — two per ecall (enter, exit), two per
//! ocall (exit, re-enter), none for a switchless hit (that is the point of switchless) —
//! so that a run can show "this workload with SGX-sized transitions". It applies to both
//! backends: native + a model is "a direct call that pays SGX's transition price and
//! nothing else". Every trace made under a model carries its name
//! ([`crate::TraceSnapshot::model`]), and so must every record made from it.
//!
//! Cycles are counted with `rdtsc` on x86-64: on the invariant-TSC CPUs this runs on, the
//! TSC ticks at the nominal frequency, so "N cycles" means N nominal-frequency cycles
//! (a core boosting above nominal runs a little more than N core cycles). Elsewhere the
//! spin uses the monotonic clock at an assumed 3 GHz.
//!
//! # Presets
//!
//! Published SGX measurements (round trips halved into per-transition costs):
//!
//! * `hotcalls-ecall-warm`: 8,200 cycles per ecall round trip, warm cache — Weisse,
//!   Bertacco, Austin, "Regaining Lost Cycles with HotCalls: A Fast Interface for SGX Secure
//!   Enclaves", ISCA 2017, §3 (ecall 8,200–17,000 cycles; ocall 8,600–14,000 cycles).
//! * `hotcalls-ecall-cold`: 17,000 cycles per ecall round trip, cold cache (same source).
//! * `hotcalls-ocall-warm`: 8,600 cycles per ocall round trip, warm cache (same source).
//! * `hotcalls-ocall-cold`: 14,000 cycles per ocall round trip, cold cache (same source).
//! * `sgxbox-ecall`: 3.5 µs per regular ecall, the middle of the 2–5 µs SGXBox reports for
//!   a regular SGX ecall (Applied Sciences 11, 2021; the presets table is in `docs/enclave.md`), at
//!   an assumed 3 GHz: 10,500 cycles per round trip.

use crate::Error;

/// A named preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The name used on the command line.
    pub name: &'static str,
    /// Cycles per transition (half a round trip).
    pub cycles_per_transition: u64,
    /// Where the figure comes from.
    pub source: &'static str,
}

/// The presets (see the module documentation for the sources).
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "hotcalls-ecall-warm",
        cycles_per_transition: 4_100,
        source: "Weisse et al., HotCalls, ISCA 2017: ecall 8,200 cycles (warm)",
    },
    Preset {
        name: "hotcalls-ecall-cold",
        cycles_per_transition: 8_500,
        source: "Weisse et al., HotCalls, ISCA 2017: ecall 17,000 cycles (cold)",
    },
    Preset {
        name: "hotcalls-ocall-warm",
        cycles_per_transition: 4_300,
        source: "Weisse et al., HotCalls, ISCA 2017: ocall 8,600 cycles (warm)",
    },
    Preset {
        name: "hotcalls-ocall-cold",
        cycles_per_transition: 7_000,
        source: "Weisse et al., HotCalls, ISCA 2017: ocall 14,000 cycles (cold)",
    },
    Preset {
        name: "sgxbox-ecall",
        cycles_per_transition: 5_250,
        source: "SGXBox, Applied Sciences 2021: regular ecall 2-5 us; 3.5 us at 3 GHz",
    },
];

/// A transition-cost model: `cycles_per_transition` busy cycles per crossing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionModel {
    name: String,
    cycles: u64,
}

impl TransitionModel {
    /// A model of `n` cycles per transition, named `cycles-<n>`.
    pub fn cycles(n: u64) -> Self {
        TransitionModel {
            name: format!("cycles-{n}"),
            cycles: n,
        }
    }

    /// A named preset.
    pub fn preset(name: &str) -> Option<Self> {
        PRESETS
            .iter()
            .find(|p| p.name == name)
            .map(|p| TransitionModel {
                name: p.name.to_owned(),
                cycles: p.cycles_per_transition,
            })
    }

    /// Parses a `--transition-cycles` value: a number of cycles or a preset name.
    pub fn parse(s: &str) -> Result<Self, Error> {
        if let Ok(n) = s.trim().parse::<u64>() {
            return Ok(Self::cycles(n));
        }
        Self::preset(s.trim()).ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            Error::Config(format!(
                "transition model {s:?} is neither a cycle count nor a preset ({})",
                names.join(", ")
            ))
        })
    }

    /// The model's name (carried by every trace and record made under it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Cycles added per transition.
    pub fn cycles_per_transition(&self) -> u64 {
        self.cycles
    }

    /// Spends `transitions` transitions' worth of busy cycles.
    #[inline]
    pub fn charge(&self, transitions: u64) {
        spin_cycles(self.cycles.saturating_mul(transitions));
    }
}

/// Spins for `n` TSC cycles.
pub fn spin_cycles(n: u64) {
    if n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions on x86-64 (it is unprivileged unless the OS
        // sets CR4.TSD, which Linux does not for normal processes).
        let start = unsafe { core::arch::x86_64::_rdtsc() };
        loop {
            std::hint::spin_loop();
            // SAFETY: as above.
            let now = unsafe { core::arch::x86_64::_rdtsc() };
            if now.wrapping_sub(start) >= n {
                return;
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let d = std::time::Duration::from_nanos(n / 3);
        let start = std::time::Instant::now();
        while start.elapsed() < d {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_numbers_and_presets() {
        assert_eq!(
            TransitionModel::parse("1000")
                .unwrap()
                .cycles_per_transition(),
            1000
        );
        assert_eq!(
            TransitionModel::parse("1000").unwrap().name(),
            "cycles-1000"
        );
        let p = TransitionModel::parse("hotcalls-ecall-warm").unwrap();
        assert_eq!(p.cycles_per_transition(), 4_100);
        assert_eq!(p.name(), "hotcalls-ecall-warm");
        assert!(TransitionModel::parse("sgx-fast").is_err());
        for p in PRESETS {
            assert_eq!(
                TransitionModel::preset(p.name)
                    .unwrap()
                    .cycles_per_transition(),
                p.cycles_per_transition
            );
        }
    }

    #[test]
    fn spins_at_least_the_cycles_asked_for() {
        // No TSC ticks faster than 6 GHz: n cycles take at least n / 6 ns. (A lower bound:
        // a loaded machine only makes the spin longer.)
        let t = std::time::Instant::now();
        spin_cycles(0);
        assert!(t.elapsed() < std::time::Duration::from_millis(50));
        let t = std::time::Instant::now();
        spin_cycles(3_000_000);
        assert!(t.elapsed() >= std::time::Duration::from_nanos(500_000));
        let t = std::time::Instant::now();
        TransitionModel::cycles(1_500_000).charge(2);
        assert!(t.elapsed() >= std::time::Duration::from_nanos(500_000));
    }
}
