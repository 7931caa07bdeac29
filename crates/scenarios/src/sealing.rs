//! Scenario `sealing`: what sealing and unsealing enclave data costs, by size. The service
//! seals its input to its own measurement (AES-256-GCM under a key derived from the platform
//! root key and the enclave's identity) and unseals a blob; measured as a direct call
//! (`native`: the cryptography alone) and behind the sandbox boundary (plus the copies in
//! and out).

use std::sync::Arc;

use enclave::seal::Policy;
use enclave::{Backend, Ctx, Registry, Service, ServiceError};
use measure::sampler::try_sample;

use crate::boundary::{self, Config, call_failed};
use crate::{Context, Preset, Scenario, ScenarioError};

const NAME: &str = "sealing";
/// The enclave service's name.
pub const SERVICE: &str = "ccbench.sealing";

const SEAL: u32 = 0;
const UNSEAL: u32 = 1;
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
        match call_id {
            SEAL => sealer
                .seal(Policy::Measurement, AAD, input)
                .map_err(|e| ServiceError::from(e.to_string())),
            UNSEAL => sealer
                .unseal(input)
                .map(|u| u.plaintext)
                .map_err(|e| ServiceError::from(e.to_string())),
            other => Err(ServiceError::UnknownCall(other)),
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
        for config in &configs {
            let b = config.builder(ctx, SERVICE, &[], &[]);
            let b = match &ctx.options.platform_key_dir {
                Some(dir) => b.sealing_key_dir(dir),
                None => b.sealing(),
            };
            let e = boundary::start(b, &registry)?;
            for &size in sizes {
                let mut p = config.params();
                p.insert("size_bytes".into(), size.into());
                let plain = vec![0x3cu8; size];

                ctx.check_cancel()?;
                let s = try_sample(&cfg, || e.ecall(SEAL, &plain)).map_err(call_failed("seal"))?;
                ctx.emit_samples(
                    NAME,
                    config.label(),
                    p.clone(),
                    "seal",
                    s,
                    Some(size as u64),
                )?;
                ctx.progress().advance(1);

                ctx.check_cancel()?;
                let blob = e.ecall(SEAL, &plain).map_err(call_failed("seal"))?;
                let s = try_sample(&cfg, || {
                    let out = e.ecall(UNSEAL, &blob)?;
                    if out != plain {
                        return Err(enclave::Error::Config(
                            "unsealing did not give back the plaintext".into(),
                        ));
                    }
                    Ok(out.len())
                })
                .map_err(call_failed("unseal"))?;
                ctx.emit_samples(NAME, config.label(), p, "unseal", s, Some(size as u64))?;
                ctx.progress().advance(1);
            }
        }
        Ok(())
    }
}

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
        let mut blob = e.ecall(SEAL, b"state").unwrap();
        assert!(blob.len() > 5 + AAD.len());
        assert_eq!(e.ecall(UNSEAL, &blob).unwrap(), b"state");
        let last = blob.len() - 1;
        blob[last] ^= 1;
        assert!(e.ecall(UNSEAL, &blob).is_err());

        let unsealed = Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .start(&register(Registry::new()))
            .unwrap();
        assert!(unsealed.ecall(SEAL, b"x").is_err(), "sealing needs a key");
    }
}
