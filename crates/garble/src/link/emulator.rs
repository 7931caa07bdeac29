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

use super::netns::{self, KernelError, Pair};
use super::{Link, LinkError, ParamValue, Profile, Shape};

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
        }
    }

    /// `profile` carried by the emulator `choice` names (loopback has none, whatever the
    /// choice). [`Choice::Auto`] falls back to the user-space link when the kernel's cannot
    /// be set up, and says why in [`Net::notice`]; [`Choice::Kernel`] returns the error.
    pub fn open(profile: Profile, choice: Choice) -> Result<Net, KernelError> {
        let user = |notice| Net {
            profile: profile.clone(),
            carrier: Carrier::User,
            notice,
        };
        match (profile.rate_bytes_per_s(), choice) {
            (None, _) => Ok(Net::loopback()),
            (Some(_), Choice::User) => Ok(user(None)),
            (Some(rate), Choice::Kernel) => Net::kernel(&profile, rate),
            (Some(rate), Choice::Auto) => match Net::kernel(&profile, rate) {
                Ok(n) => Ok(n),
                Err(e) => Ok(user(Some(format!(
                    "the kernel link is not available ({e}): the user-space link carries {profile}"
                )))),
            },
        }
    }

    fn kernel(profile: &Profile, rate: f64) -> Result<Net, KernelError> {
        let support = netns::probe()?;
        let pair = Pair::new(rate, profile.rtt / 2, support.netem)?;
        Ok(Net {
            profile: profile.clone(),
            carrier: Carrier::Kernel(pair),
            notice: None,
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
        let io = |what| move |source| LinkError::Io { what, source };
        let kernel = |what| move |e: KernelError| LinkError::Kernel { what, source: e };
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        match &self.carrier {
            Carrier::Direct => {
                let listener = TcpListener::bind(loopback).map_err(io("binding 127.0.0.1:0"))?;
                let addr = listener.local_addr().map_err(io("local address"))?;
                Ok(Crossing {
                    listener,
                    addr,
                    client: None,
                    _link: None,
                })
            }
            Carrier::User => {
                let listener = TcpListener::bind(loopback).map_err(io("binding 127.0.0.1:0"))?;
                let upstream = listener.local_addr().map_err(io("local address"))?;
                let link = self.profile.start(upstream)?;
                let addr = link.as_ref().map_or(upstream, Link::addr);
                Ok(Crossing {
                    listener,
                    addr,
                    client: None,
                    _link: link,
                })
            }
            Carrier::Kernel(pair) if pair.has_netem() => {
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
                            ..self.profile.shape().ok_or(LinkError::Unshaped)?
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
