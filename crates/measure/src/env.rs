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
    meminfo_bytes(&read("/proc/meminfo"), "MemTotal:").unwrap_or(0)
}

/// The memory the kernel estimates is available for new work now (`MemAvailable` in
/// `/proc/meminfo`), in bytes; `None` where it does not say.
pub fn available_memory_bytes() -> Option<u64> {
    meminfo_bytes(&read("/proc/meminfo"), "MemAvailable:")
}

/// A `/proc/meminfo` field (`key` with its colon), in bytes.
fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
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

/// The whole machine's CPU time so far, in clock ticks, from `/proc/stat`'s first line.
///
/// Two readings bracket a measurement: [`idle_cores_since`](Self::idle_cores_since) says
/// how much of the machine it left unused, and [`steal_since`](Self::steal_since) how much
/// of the time its virtual CPUs wanted to run the hypervisor gave to other guests. On a
/// shared cloud VM the latter is the largest source of run-to-run noise: a run that lost a
/// third of its CPU time to steal is slower for reasons no code change explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineTicks {
    /// Idle, counting iowait.
    pub idle: u64,
    /// Steal: time a virtual CPU was ready to run and the hypervisor ran something else.
    pub steal: u64,
    /// All of it: user, nice, system, idle, iowait, irq, softirq and steal (guest time is
    /// already counted in user).
    pub total: u64,
    /// The CPUs the line sums over.
    pub cpus: u64,
}

/// The steal over an interval between two [`MachineTicks`] readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steal {
    /// Ticks stolen.
    pub stolen: u64,
    /// Ticks the machine's CPUs were wanted: busy or stolen (all but idle).
    pub wanted: u64,
}

impl Steal {
    /// The share of the wanted CPU time that was stolen (0 when nothing was wanted).
    pub fn share(&self) -> f64 {
        if self.wanted == 0 {
            0.0
        } else {
            self.stolen as f64 / self.wanted as f64
        }
    }

    /// Whether the steal is enough to move timings beyond their usual noise: at least 5%
    /// of the wanted CPU time.
    pub fn notable(&self) -> bool {
        self.share() >= 0.05
    }
}

impl MachineTicks {
    /// Reads `/proc/stat`; `None` where it cannot be read or parsed.
    pub fn read() -> Option<MachineTicks> {
        MachineTicks::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Parses `/proc/stat` text: the aggregate `cpu` line (at least user, nice, system and
    /// idle; kernels before 2.6.11 had no steal field, counted as 0) and the per-CPU lines
    /// after it.
    pub fn parse(stat: &str) -> Option<MachineTicks> {
        let mut lines = stat.lines();
        let mut f = lines.next()?.split_whitespace();
        if f.next()? != "cpu" {
            return None;
        }
        // user nice system idle iowait irq softirq steal (guest, guest_nice follow).
        let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 4 {
            return None;
        }
        let field = |i: usize| v.get(i).copied().unwrap_or(0);
        let cpus = lines
            .take_while(|l| l.starts_with("cpu"))
            .filter(|l| l[3..].starts_with(|c: char| c.is_ascii_digit()))
            .count() as u64;
        Some(MachineTicks {
            idle: field(3) + field(4),
            steal: field(7),
            total: v.iter().sum(),
            cpus,
        })
    }

    /// Cores left idle on average since `earlier`; `None` when no tick passed.
    pub fn idle_cores_since(&self, earlier: &MachineTicks) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total).filter(|&t| t > 0)?;
        let idle = self.idle.saturating_sub(earlier.idle);
        Some(idle as f64 / total as f64 * self.cpus as f64)
    }

    /// The steal since `earlier`; `None` when the counters went backwards (another boot, or
    /// readings swapped).
    pub fn steal_since(&self, earlier: &MachineTicks) -> Option<Steal> {
        let total = self.total.checked_sub(earlier.total)?;
        let idle = self.idle.checked_sub(earlier.idle)?;
        let stolen = self.steal.checked_sub(earlier.steal)?;
        Some(Steal {
            stolen,
            wanted: total.saturating_sub(idle),
        })
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
    fn reads_meminfo_fields_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(meminfo_bytes(text, "MemTotal:"), Some(24_576_000 * 1024));
        assert_eq!(
            meminfo_bytes(text, "MemAvailable:"),
            Some(20_000_000 * 1024)
        );
        assert_eq!(meminfo_bytes(text, "SwapTotal:"), None);
        assert_eq!(
            meminfo_bytes("MemAvailable: lots kB\n", "MemAvailable:"),
            None
        );
        assert!(available_memory_bytes().is_some_and(|b| b > 0));
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

    /// `/proc/stat` of a 2-CPU VM (kernel 6.18), two readings taken around a busy run.
    const STAT0: &str = "cpu  6301926 457164 776931 3618513 33477 0 66243 126361 0 0\n\
        cpu0 3150000 228000 388000 1809000 16700 0 33100 63100 0 0\n\
        cpu1 3151926 229164 388931 1809513 16777 0 33143 63261 0 0\n\
        intr 1 2 3\nctxt 99\n";
    const STAT1: &str = "cpu  6302456 457164 777031 3618900 33477 0 66275 126711 0 0\n\
        cpu0 1 1 1 1 1 0 1 1 0 0\ncpu1 1 1 1 1 1 0 1 1 0 0\n";

    #[test]
    fn parses_proc_stat() {
        let t = MachineTicks::parse(STAT0).unwrap();
        assert_eq!(t.idle, 3618513 + 33477);
        assert_eq!(t.steal, 126361);
        assert_eq!(
            t.total,
            6301926 + 457164 + 776931 + 3618513 + 33477 + 66243 + 126361
        );
        assert_eq!(t.cpus, 2);
        // An old kernel without iowait .. steal: idle alone, no steal.
        let old = MachineTicks::parse("cpu 10 0 5 85\ncpu0 10 0 5 85\n").unwrap();
        assert_eq!((old.idle, old.steal, old.total, old.cpus), (85, 0, 100, 1));
        for bad in [
            "",
            "intr 1 2\n",
            "cpu 1 2 3\n",
            "cpu 1 x 3 4\n",
            "cpu0 1 2 3 4\n",
        ] {
            assert_eq!(MachineTicks::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn steal_and_idle_between_readings() {
        let (a, b) = (
            MachineTicks::parse(STAT0).unwrap(),
            MachineTicks::parse(STAT1).unwrap(),
        );
        // 530 user + 100 system + 32 softirq busy, 387 idle, 350 stolen: 1399 ticks.
        let s = b.steal_since(&a).unwrap();
        assert_eq!(
            s,
            Steal {
                stolen: 350,
                wanted: 1012
            }
        );
        assert!((s.share() - 350.0 / 1012.0).abs() < 1e-12);
        assert!(s.notable());
        let idle = b.idle_cores_since(&a).unwrap();
        assert!((idle - 387.0 / 1399.0 * 2.0).abs() < 1e-12);
        // Backwards counters are no interval; an interval without ticks has no idle share.
        assert_eq!(a.steal_since(&b), None);
        assert_eq!(a.idle_cores_since(&a), None);
        assert_eq!(a.steal_since(&a).unwrap().share(), 0.0);
        let calm = Steal {
            stolen: 4,
            wanted: 100,
        };
        assert!(!calm.notable());
        assert!(
            Steal {
                stolen: 5,
                wanted: 100
            }
            .notable()
        );
    }

    #[test]
    fn reads_this_machine() {
        // Linux always has /proc/stat with at least one CPU line.
        let t = MachineTicks::read().unwrap();
        assert!(t.cpus >= 1 && t.total >= t.idle + t.steal);
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
