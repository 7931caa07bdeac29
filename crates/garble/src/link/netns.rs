//! The kernel's emulated link: two anonymous network namespaces joined by a veth pair, each
//! end shaped by `tc` (`tbf` for the rate; `netem` for the delay, with its own rate, where
//! the kernel has it).
//!
//! The namespaces are anonymous. A short-lived thread unshares its network namespace, opens
//! `/proc/thread-self/ns/net` and exits: the open file keeps the namespace alive, and so
//! does every socket made in it and every process started from a thread that entered it.
//! Nothing is named in `/run/netns`, and the veth pair is created inside the first
//! namespace with its peer placed straight into the second, so it never appears in the
//! machine's own namespace. When the last reference goes (the [`Pair`] dropped, its sockets
//! closed, its processes ended, or this process killed, SIGKILL included) the kernel
//! removes the namespaces, the veth pair and their qdiscs by itself: no path leaves one
//! behind, and there is no clean-up step that a crash could skip.
//!
//! The interfaces, addresses and qdiscs are set up by running the `ip` and `tc` binaries
//! (iproute2) inside a namespace, not by speaking netlink, which would need a large
//! dependency. A missing binary or a refused command is a typed error with the command and
//! its words. All of it needs `CAP_SYS_ADMIN` and `CAP_NET_ADMIN` (root).
//!
//! Work inside a namespace runs on a fresh thread that enters it ([`Netns::run`]): sockets
//! it makes stay in the namespace after the thread has gone, threads it starts are in the
//! namespace too, and so are child processes it spawns.

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::thread::{LinkNameSpaceType, UnshareFlags};
use thiserror::Error;

/// The address of the first namespace's end of the veth pair (the server's side).
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 254, 0, 1);
/// The address of the second namespace's end (the client's side).
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 254, 0, 2);
/// The names of the two ends (each lives in its own namespace, so they cannot clash with
/// another run's).
const DEV_A: &str = "ccbench-a";
const DEV_B: &str = "ccbench-b";

/// The payload of a full TCP segment on the veth pair (MTU 1500, less 20 bytes of IP and
/// 32 of TCP header with timestamps, which Linux sends).
const SEGMENT_PAYLOAD: u64 = 1448;

/// The bytes a qdisc counts for that segment: the payload, the TCP/IP headers and the
/// 14-byte Ethernet header.
const FRAME_BYTES: u64 = 1514;

/// Why the kernel link could not be set up or used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KernelError {
    /// `unshare(CLONE_NEWNET)` or opening the namespace failed (not root, or no network
    /// namespaces in this kernel or container).
    #[error("creating a network namespace: {0} (needs root and network namespaces)")]
    Namespace(String),
    /// `setns` into a namespace of ours failed.
    #[error("entering a network namespace: {0}")]
    Enter(String),
    /// A thread could not start, or panicked.
    #[error("a network namespace's thread: {0}")]
    Thread(String),
    /// An `ip` or `tc` command failed: the command and what it said.
    #[error("`{command}`: {why}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and error output, or why it did not start.
        why: String,
    },
}

/// An anonymous network namespace, alive while this handle, a socket made in it or a
/// process started in it lives.
#[derive(Debug)]
pub struct Netns {
    file: File,
}

/// Runs `f` on a new thread of this process and returns its result.
fn on_new_thread<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, KernelError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("netns".into())
            .spawn_scoped(s, f)
            .map_err(|e| KernelError::Thread(e.to_string()))?
            .join()
            .map_err(|_| KernelError::Thread("panicked".into()))
    })
}

impl Netns {
    /// A new, empty network namespace (its loopback interface down).
    pub fn new() -> Result<Netns, KernelError> {
        on_new_thread(|| {
            // SAFETY: `unshare_unsafe` is unsafe because of `UnshareFlags::FILES`, which
            // would give this thread a file table of its own and so invalidate descriptors
            // that other threads hand it. Only `NEWNET` is asked for: the file table stays
            // shared, and the only thing that changes is the network namespace of this
            // short-lived thread, which opens the namespace's file and exits.
            unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }
                .map_err(|e| KernelError::Namespace(io::Error::from(e).to_string()))?;
            File::open("/proc/thread-self/ns/net")
                .map(|file| Netns { file })
                .map_err(|e| KernelError::Namespace(format!("/proc/thread-self/ns/net: {e}")))
        })?
    }

    /// Runs `f` on a new thread that has entered this namespace: the sockets `f` makes, the
    /// threads it starts and the processes it spawns are in the namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, KernelError> {
        let fd = self.file.as_fd();
        on_new_thread(move || {
            rustix::thread::move_into_link_name_space(fd, Some(LinkNameSpaceType::Network))
                .map_err(|e| KernelError::Enter(io::Error::from(e).to_string()))?;
            Ok(f())
        })?
    }

    /// The namespace's inode number, as `/proc/PID/ns/net` shows it (`net:[INODE]`).
    pub fn inode(&self) -> Result<u64, KernelError> {
        self.file
            .metadata()
            .map(|m| m.ino())
            .map_err(|e| KernelError::Namespace(e.to_string()))
    }

    /// A path through which another process (`ip`) opens this namespace.
    fn path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.file.as_raw_fd())
    }

    /// Runs `program args` inside the namespace; an error unless it exits with success.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<(), KernelError> {
        let command = format!("{program} {}", args.join(" "));
        let out = self.run(|| {
            Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .output()
        })?;
        match out {
            Err(e) => Err(KernelError::Command {
                command,
                why: e.to_string(),
            }),
            Ok(o) if !o.status.success() => Err(KernelError::Command {
                command,
                why: format!(
                    "{}: {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            }),
            Ok(_) => Ok(()),
        }
    }
}

/// What the kernel of this machine offers for a link: namespaces with veth and `tbf`
/// (needed), and `netem` (optional: without it the delay is left to a user-space line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Whether a `netem` qdisc can be added.
    pub netem: bool,
}

/// Probes, once per process, whether this process can set up the kernel link: a throwaway
/// namespace with a veth pair, a `tbf` qdisc on one end and a `netem` qdisc on the other.
/// The namespace goes when the probe returns. The error says what failed.
pub fn probe() -> Result<Support, KernelError> {
    static PROBE: OnceLock<Result<Support, KernelError>> = OnceLock::new();
    PROBE.get_or_init(probe_now).clone()
}

fn probe_now() -> Result<Support, KernelError> {
    let ns = Netns::new()?;
    ns.exec(
        "ip",
        &[
            "link", "add", "name", "probe-a", "type", "veth", "peer", "name", "probe-b",
        ],
    )?;
    ns.exec(
        "tc",
        &[
            "qdisc", "add", "dev", "probe-a", "root", "tbf", "rate", "1gbit", "burst", "65536",
            "limit", "1000000",
        ],
    )?;
    let netem = ns
        .exec(
            "tc",
            &[
                "qdisc", "add", "dev", "probe-b", "root", "netem", "delay", "1ms",
            ],
        )
        .is_ok();
    Ok(Support { netem })
}

/// Two namespaces joined by a veth pair ([`ADDR_A`] in [`Pair::a`], [`ADDR_B`] in
/// [`Pair::b`]), both ends shaped: each direction at `rate`, and, with `netem`, delayed by
/// the one-way time. Dropping it releases the namespaces (see the module documentation).
#[derive(Debug)]
pub struct Pair {
    a: Netns,
    b: Netns,
    netem: bool,
}

impl Pair {
    /// Sets up the pair: loopback up in both namespaces, the veth pair with its addresses,
    /// and on each end `tbf` at `rate_bytes_per_s` (bucket: a millisecond of bytes, at least
    /// 64 KiB) or, when `netem` is asked for, `netem` with `one_way` delay and the rate.
    pub fn new(rate_bytes_per_s: f64, one_way: Duration, netem: bool) -> Result<Pair, KernelError> {
        let (a, b) = (Netns::new()?, Netns::new()?);
        let peer = b.path();
        a.exec("ip", &["link", "set", "lo", "up"])?;
        a.exec(
            "ip",
            &[
                "link", "add", "name", DEV_A, "type", "veth", "peer", "name", DEV_B, "netns", &peer,
            ],
        )?;
        b.exec("ip", &["link", "set", "lo", "up"])?;
        for (ns, dev, addr) in [(&a, DEV_A, ADDR_A), (&b, DEV_B, ADDR_B)] {
            ns.exec("ip", &["addr", "add", &format!("{addr}/30"), "dev", dev])?;
            ns.exec("ip", &["link", "set", dev, "up"])?;
            let qdisc = qdisc_args(rate_bytes_per_s, one_way, netem);
            let mut args = vec!["qdisc", "add", "dev", dev, "root"];
            args.extend(qdisc.iter().map(String::as_str));
            ns.exec("tc", &args)?;
        }
        Ok(Pair { a, b, netem })
    }

    /// The server's namespace (its end has [`ADDR_A`]).
    pub fn a(&self) -> &Netns {
        &self.a
    }

    /// The client's namespace (its end has [`ADDR_B`]).
    pub fn b(&self) -> &Netns {
        &self.b
    }

    /// Whether `netem` delays the packets (else only `tbf` shapes them).
    pub fn has_netem(&self) -> bool {
        self.netem
    }
}

/// The qdisc of one end: `tbf rate R burst B limit L`, or `netem delay D rate R limit N`.
/// The `tbf` queue holds a bucket's depth and 4 ms of the rate (at least 256 KiB) before it
/// drops: enough that TCP's own pacing of the short veth hop does not lose packets.
///
/// The qdiscs count whole frames (Ethernet, IP and TCP headers), the profile's rate is the
/// parties' bytes (as the user-space link counts them, and as the predictions divide by it):
/// the qdisc's rate is the profile's times [`FRAME_BYTES`] / [`SEGMENT_PAYLOAD`]. Without
/// it the kernel link carried 89-94% of the profile's rate in payload on the 2-vCPU VM.
fn qdisc_args(rate_bytes_per_s: f64, one_way: Duration, netem: bool) -> Vec<String> {
    let wire = rate_bytes_per_s * FRAME_BYTES as f64 / SEGMENT_PAYLOAD as f64;
    let bits = format!("{}bit", (wire * 8.0).round() as u64);
    let burst = ((rate_bytes_per_s * 1e-3) as u64).max(64 * 1024);
    if netem {
        // netem's limit counts packets: the bytes in flight over the delay, twice, in
        // full-size frames, at least its default of 1000.
        let in_flight = rate_bytes_per_s * one_way.as_secs_f64();
        let packets = ((2.0 * in_flight / 1500.0) as u64).max(1000);
        vec![
            "netem".into(),
            "delay".into(),
            format!("{}us", one_way.as_micros()),
            "rate".into(),
            bits,
            "limit".into(),
            packets.to_string(),
        ]
    } else {
        let limit = burst + ((rate_bytes_per_s * 4e-3) as u64).max(256 * 1024);
        vec![
            "tbf".into(),
            "rate".into(),
            bits,
            "burst".into(),
            burst.to_string(),
            "limit".into(),
            limit.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qdiscs_carry_the_rate_and_delay() {
        let tbf = qdisc_args(125e6, Duration::from_micros(500), false);
        assert_eq!(
            tbf,
            [
                "tbf",
                "rate",
                "1045580110bit",
                "burst",
                "125000",
                "limit",
                "625000"
            ]
        );
        let netem = qdisc_args(25e6, Duration::from_millis(10), true);
        assert_eq!(
            netem,
            [
                "netem",
                "delay",
                "10000us",
                "rate",
                "209116022bit",
                "limit",
                "1000"
            ]
        );
    }
}
