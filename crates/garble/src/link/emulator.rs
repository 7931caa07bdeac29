//! Which emulator carries a link profile between the two parties of a run, and one
//! session's crossing of it.
//!
//! Three emulators, by what the machine allows ([`netns::probe`]):
//!
//! * `netns-tbf-netem`: the parties in two network namespaces joined by a veth pair, each
//!   end with `netem` (delay and rate): all of the link in the kernel.
//! * `netns-tbf+userspace-delay`: the same namespaces and veth pair, each end shaped by
//!   `tbf` for the rate, and the delay added by a user-space delay line in series (a
//!   [`Link`] that does not pace) in the server's namespace: for kernels without `netem`.
//! * `userspace`: the user-space link on loopback ([`Link`]: token bucket and delay line).
//!
//! [`Choice::Auto`] takes the kernel's where it can be set up, else the user-space link
//! with a notice that says why; [`Choice::Kernel`] fails instead.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::str::FromStr;
use std::time::Duration;

use super::netns::{self, KernelError, Pair};
use super::{Link, LinkError, ParamValue, Profile, Shape};

/// Round trips that measure a delay line's own latency at a profile's `rtt`
/// ([`Net::own_rtt`]): about 0.3 s of them, 8 to 60, in all three rounds.
pub fn calibration_pings(rtt: Duration) -> usize {
    let n = Duration::from_millis(300).as_secs_f64() / rtt.as_secs_f64().max(1e-6);
    (n as usize).clamp(8, 60)
}

/// The emulator the user asks for (`--link-emulator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// The kernel's where this process can set it up, else the user-space link.
    #[default]
    Auto,
    /// The kernel's, or an error.
    Kernel,
    /// The user-space link.
    User,
}

impl Choice {
    /// The name `FromStr` takes.
    pub fn name(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::Kernel => "kernel",
            Choice::User => "user",
        }
    }
}

impl FromStr for Choice {
    type Err = String;

    fn from_str(s: &str) -> Result<Choice, String> {
        match s.trim() {
            "auto" => Ok(Choice::Auto),
            "kernel" => Ok(Choice::Kernel),
            "user" => Ok(Choice::User),
            other => Err(format!(
                "{other:?} is not a link emulator: auto, kernel or user"
            )),
        }
    }
}

/// A profile with the emulator that carries it, set up once for a run's sessions.
#[derive(Debug)]
pub struct Net {
    profile: Profile,
    carrier: Carrier,
    notice: Option<String>,
    /// The round trip the emulator adds of its own (see [`Net::own_rtt`]).
    own_rtt: Duration,
}

#[derive(Debug)]
enum Carrier {
    /// Loopback: no link.
    Direct,
    /// The user-space link, one per session.
    User,
    /// The namespaces, the veth pair and its qdiscs.
    Kernel(Pair),
}

impl Net {
    /// No link: both parties on loopback.
    pub fn loopback() -> Net {
        Net {
            profile: Profile::loopback(),
            carrier: Carrier::Direct,
            notice: None,
            own_rtt: Duration::ZERO,
        }
    }

    /// `profile` carried by the emulator `choice` names (loopback has none, whatever the
    /// choice). [`Choice::Auto`] falls back to the user-space link when the kernel's cannot
    /// be set up, and says why in [`Net::notice`]; [`Choice::Kernel`] returns the error.
    ///
    /// A user-space delay line (the `userspace` and `netns-tbf+userspace-delay` emulators)
    /// is then calibrated: see [`Net::own_rtt`].
    pub fn open(profile: Profile, choice: Choice) -> Result<Net, KernelError> {
        let user = |notice| Net {
            profile: profile.clone(),
            carrier: Carrier::User,
            notice,
            own_rtt: Duration::ZERO,
        };
        let mut net = match (profile.rate_bytes_per_s(), choice) {
            (None, _) => return Ok(Net::loopback()),
            (Some(_), Choice::User) => user(None),
            (Some(rate), Choice::Kernel) => Net::kernel(&profile, rate)?,
            (Some(rate), Choice::Auto) => match Net::kernel(&profile, rate) {
                Ok(n) => n,
                Err(e) => user(Some(format!(
                    "the kernel link is not available ({e}): the user-space link carries {profile}"
                ))),
            },
        };
        net.calibrate();
        Ok(net)
    }

    fn kernel(profile: &Profile, rate: f64) -> Result<Net, KernelError> {
        let support = netns::probe()?;
        let pair = Pair::new(rate, profile.rtt / 2, support.netem)?;
        Ok(Net {
            profile: profile.clone(),
            carrier: Carrier::Kernel(pair),
            notice: None,
            own_rtt: Duration::ZERO,
        })
    }

    /// The round trip that the emulator adds of its own, which its delay line takes off
    /// the profile's delay so that a typical round trip across the link takes the
    /// profile's RTT. A user-space delay line is a proxy: the hops through it (a read, a
    /// hand-over between threads, a write, each direction) and the late wake-up of its
    /// timed waits (20-150 µs on the 2-vCPU VM, more when the VM is idle) added 0.12-0.2 ms
    /// to `lan`'s 1 ms round trip and 0.15-0.2 ms to `lan10g`'s 0.2 ms. Measured when the
    /// link is opened: the lower quartile of one-byte round trips across the link with the
    /// profile's delay, less the profile's RTT and less the lower quartile across the path
    /// without the line (loopback, or the bare veth pair), in three alternated rounds of
    /// a third of [`calibration_pings`] round trips each (about 0.3 s of them in all), the
    /// least of the three; at most the profile's RTT. Zero where
    /// there is no delay line (loopback, `netem`) or where it could not be measured (the
    /// notice says so).
    pub fn own_rtt(&self) -> Duration {
        self.own_rtt
    }

    /// Measures [`Net::own_rtt`].
    fn calibrate(&mut self) {
        let line = match &self.carrier {
            Carrier::User => true,
            Carrier::Kernel(p) => !p.has_netem(),
            Carrier::Direct => false,
        };
        if !line {
            return;
        }
        if !super::line_runs_ahead() {
            self.say(
                "the delay line's threads could not be put ahead of the parties' (raising \
                 their priority needs CAP_SYS_NICE): where the parties keep every core busy, \
                 a chunk that is due can wait for a scheduler slice, milliseconds added to \
                 its crossing"
                    .to_owned(),
            );
        }
        let timeout = Duration::from_secs(5) + 2 * self.profile.rtt;
        let per_round = calibration_pings(self.profile.rtt).div_ceil(3);
        // Three alternated rounds, and the least of their estimates: a round that another
        // process slowed must not make the line take off more than it adds.
        let measured = (|| -> Result<Duration, LinkError> {
            let mut least = Duration::MAX;
            for _ in 0..3 {
                let through = super::typical_round_trip(
                    &self.crossing_with(self.profile.rtt / 2)?,
                    per_round,
                    timeout,
                )?;
                let bare = super::typical_round_trip(&self.bare()?, per_round, timeout)?;
                least = least.min(through.saturating_sub(self.profile.rtt + bare));
            }
            Ok(least)
        })();
        match measured {
            Ok(own) => self.own_rtt = own.min(self.profile.rtt),
            Err(e) => self.say(format!(
                "the delay line's own latency could not be measured ({e}): its round \
                 trips are that much longer than the profile's"
            )),
        }
    }

    /// Adds `said` to the notice.
    fn say(&mut self, said: String) {
        self.notice = Some(match self.notice.take() {
            Some(n) => format!("{n}; {said}"),
            None => said,
        });
    }

    /// A crossing of the path without a delay line or shaper of ours: loopback, or over
    /// the kernel's link the bare veth pair.
    fn bare(&self) -> Result<Crossing<'_>, LinkError> {
        match &self.carrier {
            Carrier::Kernel(pair) => Net::veth(pair),
            _ => Net::direct(),
        }
    }

    fn direct<'a>() -> Result<Crossing<'a>, LinkError> {
        let io = |what| move |source| LinkError::Io { what, source };
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let listener = TcpListener::bind(loopback).map_err(io("binding 127.0.0.1:0"))?;
        let addr = listener.local_addr().map_err(io("local address"))?;
        Ok(Crossing {
            listener,
            addr,
            client: None,
            _link: None,
        })
    }

    /// A listener on the veth address in the server's namespace, reached from the client's.
    fn veth(pair: &Pair) -> Result<Crossing<'_>, LinkError> {
        let io = |what| move |source| LinkError::Io { what, source };
        let kernel = |what| move |e: KernelError| LinkError::Kernel { what, source: e };
        let at = SocketAddr::V4(SocketAddrV4::new(netns::ADDR_A, 0));
        let listener = pair
            .a()
            .run(|| TcpListener::bind(at))
            .map_err(kernel("binding in the server's namespace"))?
            .map_err(io("binding the veth address"))?;
        let addr = listener.local_addr().map_err(io("local address"))?;
        Ok(Crossing {
            listener,
            addr,
            client: Some(pair),
            _link: None,
        })
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Whether the parties talk over loopback, with no link.
    pub fn is_loopback(&self) -> bool {
        matches!(self.carrier, Carrier::Direct)
    }

    /// The emulator's name, as records carry it in `link_emulator`: `none`, `userspace`,
    /// `netns-tbf+userspace-delay` or `netns-tbf-netem`.
    pub fn emulator(&self) -> &'static str {
        match &self.carrier {
            Carrier::Direct => "none",
            Carrier::User => "userspace",
            Carrier::Kernel(p) if p.has_netem() => "netns-tbf-netem",
            Carrier::Kernel(_) => "netns-tbf+userspace-delay",
        }
    }

    /// The inodes of the kernel link's two namespaces (as `/proc/PID/ns/net` shows them),
    /// none for the other emulators: what to look for to see that none outlives the link.
    pub fn namespace_inodes(&self) -> Result<Vec<u64>, KernelError> {
        match &self.carrier {
            Carrier::Kernel(p) => Ok(vec![p.a().inode()?, p.b().inode()?]),
            _ => Ok(Vec::new()),
        }
    }

    /// Why [`Choice::Auto`] fell back to the user-space link, if it did.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// The record parameters: [`Profile::params`] with this emulator's name.
    pub fn params(&self) -> Vec<(&'static str, ParamValue)> {
        let mut p = self.profile.params();
        for (k, v) in &mut p {
            if *k == "link_emulator" {
                *v = ParamValue::Str(self.emulator().to_owned());
            }
        }
        p
    }

    /// A crossing for one session: a listener on the server's side, and the address the
    /// client connects to from its side ([`Crossing::client_side`]).
    pub fn crossing(&self) -> Result<Crossing<'_>, LinkError> {
        let one_way = self.profile.rtt.saturating_sub(self.own_rtt) / 2;
        self.crossing_with(one_way)
    }

    /// A crossing whose delay line (if the emulator has one) delays each direction by
    /// `one_way`.
    fn crossing_with(&self, one_way: Duration) -> Result<Crossing<'_>, LinkError> {
        let io = |what| move |source| LinkError::Io { what, source };
        let kernel = |what| move |e: KernelError| LinkError::Kernel { what, source: e };
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let shape = || -> Result<Shape, LinkError> {
            Ok(Shape {
                one_way,
                ..self.profile.shape().ok_or(LinkError::Unshaped)?
            })
        };
        match &self.carrier {
            Carrier::Direct => Net::direct(),
            Carrier::User => {
                let listener = TcpListener::bind(loopback).map_err(io("binding 127.0.0.1:0"))?;
                let upstream = listener.local_addr().map_err(io("local address"))?;
                let link = Link::start(shape()?, upstream)?;
                Ok(Crossing {
                    listener,
                    addr: link.addr(),
                    client: None,
                    _link: Some(link),
                })
            }
            Carrier::Kernel(pair) if pair.has_netem() => Net::veth(pair),
            Carrier::Kernel(pair) => {
                // The server listens on the namespace's loopback; the delay line listens
                // on the veth address and forwards to it, so that the client's bytes cross
                // the shaped veth pair, then the line.
                let (listener, link) = pair
                    .a()
                    .run(|| -> Result<_, LinkError> {
                        let l = TcpListener::bind(loopback).map_err(io("binding 127.0.0.1:0"))?;
                        let up = l.local_addr().map_err(io("local address"))?;
                        let shape = Shape {
                            paced: false,
                            ..shape()?
                        };
                        let at = SocketAddr::V4(SocketAddrV4::new(netns::ADDR_A, 0));
                        Ok((l, Link::start_at(shape, at, up)?))
                    })
                    .map_err(kernel("starting the delay line in the server's namespace"))??;
                Ok(Crossing {
                    listener,
                    addr: link.addr(),
                    client: Some(pair),
                    _link: Some(link),
                })
            }
        }
    }
}

impl std::fmt::Display for Net {
    /// The profile, and over a link the emulator: `wan (200 Mbit/s, 20 ms RTT) by userspace`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.carrier {
            Carrier::Direct => write!(f, "{}", self.profile),
            _ => write!(f, "{} by {}", self.profile, self.emulator()),
        }
    }
}

/// One session's way across a [`Net`]: the server accepts on [`Crossing::listener`], the
/// client connects to [`Crossing::addr`] from [`Crossing::client_side`]. Dropping it stops
/// the session's user-space link or delay line, if any.
#[derive(Debug)]
pub struct Crossing<'a> {
    listener: TcpListener,
    addr: SocketAddr,
    client: Option<&'a Pair>,
    _link: Option<Link>,
}

impl Crossing<'_> {
    /// The server's listening socket.
    pub fn listener(&self) -> &TcpListener {
        &self.listener
    }

    /// The address the client connects to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Runs `f` where the client lives: in the client's namespace over the kernel's link
    /// (sockets made and processes spawned by `f` are there), else on this thread.
    pub fn client_side<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, LinkError> {
        match self.client {
            None => Ok(f()),
            Some(pair) => pair.b().run(f).map_err(|source| LinkError::Kernel {
                what: "entering the client's namespace",
                source,
            }),
        }
    }
}
