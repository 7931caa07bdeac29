//! Scenario `sealing`: what sealing and unsealing enclave data costs, by size. The service
//! seals its input to its own measurement (AES-256-GCM under a key derived from the platform
//! root key and the enclave's identity) and unseals a blob; measured as a direct call
//! (`native`: the cryptography alone) and behind the sandbox boundary (plus the copies in
//! and out).

use std::sync::Arc;

use enclave::seal::Policy;
use enclave::{Backend, Ctx, Registry, Service, ServiceError};
use measure::sampler::try_sample;

use harness::boundary::{self, Config};
use harness::{At, Context, Preset, Scenario, ScenarioError};

const NAME: &str = "sealing";
/// The enclave service's name.
pub const SERVICE: &str = "ccbench.sealing";

harness::calls! {
    /// The service's ecalls; inputs and outputs are raw bytes (plaintext, sealed blob).
    enum Call {
        /// Seals the input to the enclave's measurement; returns the blob.
        Seal = 0 => "seal",
        /// Unseals a blob; returns the plaintext.
        Unseal = 1 => "unseal",
    }
}
/// Additional data bound into every blob.
const AAD: &[u8] = b"ccbench sealing scenario";

struct Sealing;

impl Service for Sealing {
    fn ecall(
        &self,
        call_id: u32,
        input: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<Vec<u8>, ServiceError> {
        let sealer = ctx
            .sealer()
            .ok_or("the enclave was started without sealing")?;
        match Call::try_from(call_id)? {
            Call::Seal => sealer
                .seal(Policy::Measurement, AAD, input)
                .map_err(|e| ServiceError::from(e.to_string())),
            Call::Unseal => sealer
                .unseal(input)
                .map(|u| u.plaintext)
                .map_err(|e| ServiceError::from(e.to_string())),
        }
    }
}

/// Registers the service.
pub fn register(r: Registry) -> Registry {
    r.with(SERVICE, |_| Ok(Arc::new(Sealing)))
}

/// Plaintext sizes, in bytes.
pub fn sizes(preset: Preset) -> &'static [usize] {
    match preset {
        Preset::Quick => &[64, 4096, 1 << 20],
        Preset::Full => &[64, 256, 1024, 4096, 16 << 10, 64 << 10, 256 << 10, 1 << 20],
    }
}

/// The `sealing` scenario.
pub struct SealingScenario;

impl Scenario for SealingScenario {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "seal and unseal (AES-256-GCM, key bound to the enclave's measurement) by size, native and sandbox"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let configs = [
            Config::regular(Backend::Native),
            Config::regular(Backend::Sandbox),
        ];
        let sizes = sizes(ctx.options.preset);
        ctx.progress()
            .begin(NAME, (configs.len() * sizes.len() * 2) as u64);
        let registry = register(Registry::new());
        let cfg = ctx.options.sampler();
        // Seal and unseal of the headline size per configuration, for the cost summary.
        let mut headline = Vec::new();
        for config in &configs {
            let b = boundary::with_sealing(ctx, config.builder(ctx, SERVICE, &[], &[]));
            let e = boundary::start(b, &registry)?;
            for &size in sizes {
                let mut p = config.params();
                p.insert("size_bytes".into(), size.into());
                let plain = vec![0x3cu8; size];

                ctx.check_cancel()?;
                let s = try_sample(&cfg, || e.ecall(Call::Seal.into(), &plain)).at("seal")?;
                let seal = ctx.emit_measurement(
                    NAME,
                    config.label(),
                    p.clone(),
                    "seal",
                    s,
                    Some(size as u64),
                )?;
                ctx.progress().advance(1);

                ctx.check_cancel()?;
                // Correctness once, outside the timing: the timed loop is the unseal alone
                // (its output is consumed by the sampler, not compared).
                let blob = e.ecall(Call::Seal.into(), &plain).at("seal")?;
                if e.ecall(Call::Unseal.into(), &blob).at("unseal")? != plain {
                    return Err(ScenarioError::step(
                        "unseal",
                        "unsealing did not give back the plaintext",
                    ));
                }
                let s = try_sample(&cfg, || e.ecall(Call::Unseal.into(), &blob)).at("unseal")?;
                let unseal =
                    ctx.emit_measurement(NAME, config.label(), p, "unseal", s, Some(size as u64))?;
                ctx.progress().advance(1);
                if size == HEADLINE_SIZE {
                    headline.push((config.label(), seal, unseal));
                }
            }
        }
        if let [(native, seal_n, unseal_n), (sandbox, seal_s, unseal_s)] = &headline[..] {
            let unit = format!("{} KiB", HEADLINE_SIZE >> 10);
            for (op, n, s) in [("seal", seal_n, seal_s), ("unseal", unseal_n, unseal_s)] {
                ctx.emit_cost(
                    NAME,
                    &format!("{op} {unit}"),
                    &unit,
                    (native, native, n),
                    &[(sandbox, sandbox, s)],
                )?;
            }
        }
        Ok(())
    }
}

/// The size of the cost summary's rows (in both presets).
const HEADLINE_SIZE: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use enclave::Enclave;

    #[test]
    fn seals_and_unseals_natively_and_refuses_a_flipped_bit() {
        let dir = tempfile::tempdir().unwrap();
        let e = Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .sealing_key_dir(dir.path())
            .start(&register(Registry::new()))
            .unwrap();
        let mut blob = e.ecall(Call::Seal.into(), b"state").unwrap();
        assert!(blob.len() > 5 + AAD.len());
        assert_eq!(e.ecall(Call::Unseal.into(), &blob).unwrap(), b"state");
        let last = blob.len() - 1;
        blob[last] ^= 1;
        assert!(e.ecall(Call::Unseal.into(), &blob).is_err());

        let unsealed = Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .start(&register(Registry::new()))
            .unwrap();
        assert!(
            unsealed.ecall(Call::Seal.into(), b"x").is_err(),
            "sealing needs a key"
        );
    }
}
