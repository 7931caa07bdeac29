//! The environment fingerprint: what machine and build a result came from, captured once per
//! run and written as the first record, so that no number travels without its context.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::record::env::{BuildInfo, Env};

/// CPU flags that matter to confidential computing and to the engines' speed.
pub const RELEVANT_CPU_FLAGS: &[&str] = &[
    "aes",
    "vaes",
    "pclmulqdq",
    "avx2",
    "avx512f",
    // The base OTs' curve arithmetic runs on it where present (docs/gc-2pc.md).
    "avx512ifma",
    "sha_ni",
    "rdrand",
    "sgx",
    "sgx_lc",
    "sev",
    "sev_es",
    "sev_snp",
    "tdx_guest",
    "hypervisor",
];

/// Device nodes whose presence says trusted hardware is usable from this machine.
pub const TRUSTED_DEVICES: &[(&str, &str)] = &[
    ("sgx", "/dev/sgx_enclave"),
    ("sgx_provision", "/dev/sgx_provision"),
    ("sev_guest", "/dev/sev-guest"),
    ("tdx_guest", "/dev/tdx_guest"),
];

/// Logical cores available to this process.
pub fn available_cores() -> u64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
}

/// Parses the 1-minute load average from `/proc/loadavg` text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
        .filter(|l| l.is_finite() && *l >= 0.0)
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Parses `/proc/cpuinfo` text: the first model name and the relevant flags of the first CPU.
pub fn parse_cpuinfo(text: &str) -> (String, Vec<String>) {
    let field = |key: &str| {
        text.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
    };
    let model = field("model name")
        .or_else(|| field("Model"))
        .unwrap_or_else(|| "unknown".to_owned());
    let flags_line = field("flags")
        .or_else(|| field("Features"))
        .unwrap_or_default();
    let present: Vec<&str> = flags_line.split_whitespace().collect();
    let flags = RELEVANT_CPU_FLAGS
        .iter()
        .filter(|f| present.contains(f))
        .map(|f| (*f).to_owned())
        .collect();
    (model, flags)
}

fn os_name() -> String {
    let text = read("/etc/os-release");
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_else(|| std::env::consts::OS.to_owned())
}

fn memory_bytes() -> u64 {
    read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

impl Env {
    /// Captures the environment now.
    pub fn capture(build: BuildInfo) -> Env {
        let (cpu_model, cpu_flags) = parse_cpuinfo(&read("/proc/cpuinfo"));
        let trusted_hardware = TRUSTED_DEVICES
            .iter()
            .filter(|(_, dev)| Path::new(dev).exists())
            .map(|(name, _)| (*name).to_owned())
            .collect();
        let kernel = read("/proc/sys/kernel/osrelease").trim().to_owned();
        Env {
            cpu_model,
            cores: available_cores(),
            cpu_flags,
            trusted_hardware,
            memory_bytes: memory_bytes(),
            kernel: if kernel.is_empty() {
                "unknown".to_owned()
            } else {
                kernel
            },
            os: os_name(),
            build,
            time_utc: rfc3339_utc(SystemTime::now()),
            harness_overhead_ns: None,
            load_avg_1m: parse_loadavg(&read("/proc/loadavg")),
        }
    }
}

/// Formats a time as RFC 3339 in UTC, to the second.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3661); // 2000-02-29 01:01:01
        assert_eq!(rfc3339_utc(t), "2000-02-29T01:01:01Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_305_600); // 2026-11-22
        assert_eq!(rfc3339_utc(t), "2026-11-22T00:00:00Z");
    }

    #[test]
    fn parses_loadavg_and_judges_busy() {
        assert_eq!(parse_loadavg("1.72 0.94 0.59 3/412 10226\n"), Some(1.72));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("nan 1 1"), None);
        assert_eq!(parse_loadavg("-1 1 1"), None);
        let mut env = Env::capture(BuildInfo {
            version: "0".into(),
            git_commit: "x".into(),
            profile: "release".into(),
            rustc: "r".into(),
        });
        env.cores = 2;
        env.load_avg_1m = Some(0.3);
        assert!(!env.busy());
        env.load_avg_1m = Some(0.5);
        assert!(env.busy());
        env.cores = 16;
        env.load_avg_1m = Some(3.9);
        assert!(!env.busy());
        env.load_avg_1m = Some(4.0);
        assert!(env.busy());
        env.load_avg_1m = None;
        assert!(!env.busy());
    }

    #[test]
    fn parses_cpuinfo() {
        let text = "processor\t: 0\nmodel name\t: Test CPU @ 3GHz\nflags\t\t: fpu aes avx2 sgx hypervisor xyz\n\nprocessor\t: 1\n";
        let (model, flags) = parse_cpuinfo(text);
        assert_eq!(model, "Test CPU @ 3GHz");
        assert_eq!(flags, ["aes", "avx2", "sgx", "hypervisor"]);
        assert_eq!(parse_cpuinfo("").0, "unknown");
    }

    #[test]
    fn captures_this_machine() {
        let e = Env::capture(BuildInfo {
            version: "0".into(),
            git_commit: "unknown".into(),
            profile: "debug".into(),
            rustc: "rustc".into(),
        });
        assert!(e.cores >= 1);
        assert!(e.time_utc.ends_with('Z') && e.time_utc.len() == 20);
    }
}
