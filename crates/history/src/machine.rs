//! A machine's identity across runs: what decides its performance, never its host name.

use measure::record::Env;
use sha2::{Digest, Sha256};

/// A machine as the history knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The fingerprint (16 hex digits): the same hardware, kernel and trusted-execution
    /// kind give the same id on every run.
    pub id: String,
    /// The name a user gave it (`--machine-name`), if any.
    pub name: Option<String>,
    /// CPU model name.
    pub cpu_model: String,
    /// Logical cores.
    pub cores: u64,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// Trusted-execution hardware found (`none` if none).
    pub tee: String,
}

impl Machine {
    /// The machine an environment record describes. The fingerprint hashes the CPU model and
    /// flags, cores, memory (in whole GiB, so that a few pages reserved differently do not
    /// make a new machine), kernel and TEE kind.
    pub fn of(env: &Env, name: Option<&str>) -> Machine {
        let mut flags = env.cpu_flags.clone();
        flags.sort();
        let mut tee = env.trusted_hardware.clone();
        tee.sort();
        let tee = if tee.is_empty() {
            "none".to_owned()
        } else {
            tee.join(",")
        };
        let gib = (env.memory_bytes + (1 << 29)) >> 30;
        let mut h = Sha256::new();
        for part in [
            env.cpu_model.as_str(),
            &flags.join(","),
            &env.cores.to_string(),
            &gib.to_string(),
            &env.kernel,
            &tee,
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        let id: String = h.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Machine {
            id,
            name: name.map(str::to_owned),
            cpu_model: env.cpu_model.clone(),
            cores: env.cores,
            memory_bytes: env.memory_bytes,
            kernel: env.kernel.clone(),
            tee,
        }
    }

    /// The name if it has one, else the id.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use measure::record::BuildInfo;

    fn env() -> Env {
        Env {
            cpu_model: "AMD EPYC".into(),
            cores: 2,
            cpu_flags: vec!["aes".into(), "avx2".into()],
            trusted_hardware: vec![],
            memory_bytes: 24 << 30,
            kernel: "6.18".into(),
            os: "Debian".into(),
            build: BuildInfo {
                version: "0.1.0".into(),
                git_commit: "abc".into(),
                profile: "release".into(),
                rustc: "rustc".into(),
            },
            time_utc: "2026-11-24T00:00:00Z".into(),
            harness_overhead_ns: None,
            load_avg_1m: None,
        }
    }

    #[test]
    fn the_id_follows_the_hardware_not_the_run() {
        let a = Machine::of(&env(), None);
        let mut e = env();
        e.time_utc = "2027-01-01T00:00:00Z".into();
        e.build.git_commit = "def".into();
        e.load_avg_1m = Some(3.0);
        e.cpu_flags.reverse();
        e.memory_bytes += 4096;
        assert_eq!(Machine::of(&e, Some("ci")).id, a.id);
        for change in [
            |e: &mut Env| e.cores = 4,
            |e: &mut Env| e.kernel = "6.19".into(),
            |e: &mut Env| e.trusted_hardware = vec!["sgx_enclave".into()],
            |e: &mut Env| e.cpu_flags.push("vaes".into()),
        ] {
            let mut e = env();
            change(&mut e);
            assert_ne!(Machine::of(&e, None).id, a.id);
        }
        assert_eq!(a.id.len(), 16);
        assert_eq!(a.tee, "none");
    }
}
