//! The command line, as clap parses it. Value checks that clap can do happen here, so that a
//! bad value is a usage error (exit 2) with clap's message.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use garble::hash::GcHash;
use garble::link::{Choice, Profile};
use garble::scheme::Scheme;
use scenarios::TransitionModel;

/// ccbench: what does confidentiality cost? Runs workloads natively and behind a trust
/// boundary (an emulated enclave, a garbled-circuit protocol) and reports the difference.
#[derive(Debug, Parser)]
#[command(name = "ccbench", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the scenarios with a one-line description.
    List,
    /// Run scenarios and write results, a report and plots.
    Run(RunArgs),
    /// Make the report (markdown, HTML, plots) from a results file.
    Report(ReportArgs),
    /// Compare two results files, or several runs per side: ratios of medians with confidence
    /// intervals and significance.
    Compare(CompareArgs),
    /// Interleave runs of two ccbench builds on this machine (A, B, B, A, ...), then compare.
    Ab(AbArgs),
    /// Show the environment fingerprint recorded with every run.
    Env,
    /// The garbled-circuit engine by hand: circuits, and one party of a 2PC session.
    #[command(subcommand)]
    Gc(GcCommand),
    /// The results history: every run, over time and across machines.
    History(HistoryArgs),
    /// A TLS 1.2 middlebox that real clients go through: relays each connection to the
    /// upstream server unchanged, decrypts and inspects it inside the enclave with the key
    /// shares that `ccbench middlebox share` hands in; on exit (Ctrl-C or --duration)
    /// writes records and a report.
    Middlebox(MiddleboxArgs),
}

#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Example (three terminals):\n  \
    ccbench middlebox --listen 127.0.0.1:8443 --upstream 127.0.0.1:4433 --share-listen 127.0.0.1:8444\n  \
    ccbench middlebox share --keylog /tmp/keys.log --to 127.0.0.1:8444\n  \
    openssl s_client -tls1_2 -keylogfile /tmp/keys.log -connect 127.0.0.1:8443"
)]
pub struct MiddleboxArgs {
    #[command(subcommand)]
    pub command: Option<MiddleboxCommand>,
    #[command(flatten)]
    pub relay: RelayArgs,
}

#[derive(Debug, Subcommand)]
pub enum MiddleboxCommand {
    /// Follow an NSS key log (SSLKEYLOGFILE, openssl -keylogfile) and hand each new
    /// CLIENT_RANDOM session's master secret to the middlebox's enclave, sealed to its
    /// engine key after its quote verified against this machine's platform and this
    /// executable's middlebox enclave. A quote that does not verify: nothing is sent, exit 1.
    Share(ShareArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MiddleboxBackend {
    Native,
    Sandbox,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SwitchlessMode {
    /// Regular ecalls.
    None,
    /// Every ecall switchless (one worker each side).
    All,
    /// What the advisor recommends from a profile of synthetic 1 KiB flows through this
    /// enclave taken at start-up (a few seconds): switchless ecalls, batching, or neither.
    Advisor,
}

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Where clients connect (e.g. 127.0.0.1:8443; port 0 picks one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The TLS server each connection is relayed to.
    #[arg(long, value_name = "ADDR")]
    pub upstream: Option<String>,
    /// Where share agents connect.
    #[arg(long, value_name = "ADDR")]
    pub share_listen: Option<String>,
    /// Where the enclave runs.
    #[arg(long, value_enum, default_value_t = MiddleboxBackend::Sandbox)]
    pub backend: MiddleboxBackend,
    /// Switchless ecalls (sandbox only; `advisor` may choose batching instead).
    #[arg(long, value_enum, default_value_t = SwitchlessMode::None)]
    pub switchless: SwitchlessMode,
    /// Inspect off the forwarding path: records of all flows are queued and carried into the
    /// enclave in batches, one ecall each (reproduce_ssl_context_batch), while the relay
    /// forwards at once.
    #[arg(long)]
    pub batch: bool,
    /// Patterns to count in the decrypted traffic: one a line, `#` comments, `hex:` for
    /// bytes given in hex.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Stop after this many seconds (else at Ctrl-C).
    #[arg(long, value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Output folder for results.jsonl and the report [default: results/<UTC timestamp>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seconds a flow whose key share has not come by its ChangeCipherSpec waits for it
    /// (its records forwarded at once, copies queued for inspection meanwhile).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_seconds)]
    pub share_wait: f64,
    /// Flows open at once (the enclave refuses more).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_flows: u32,
    /// The platform key directory (attestation and sealing keys) [default:
    /// $CCBENCH_PLATFORM_KEY_DIR, else the user's data directory].
    #[arg(long, value_name = "DIR")]
    pub platform_key_dir: Option<PathBuf>,
    /// Seconds between status lines on stderr (0: none).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub status_every: f64,
    /// No status lines.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ShareArgs {
    /// The NSS key log to follow (it may not exist yet).
    #[arg(long, value_name = "FILE")]
    pub keylog: PathBuf,
    /// The middlebox's share port (its --share-listen).
    #[arg(long, value_name = "ADDR")]
    pub to: String,
    /// Only sessions written to the key log after the agent started (default: every line
    /// in it too).
    #[arg(long)]
    pub from_end: bool,
    /// Seconds between looks at the key log.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.05, value_parser = parse_seconds)]
    pub poll: f64,
    /// The platform key directory whose attestation key the middlebox's quote must be
    /// signed by [default: $CCBENCH_PLATFORM_KEY_DIR, else the user's data directory].
    #[arg(long, value_name = "DIR")]
    pub platform_key_dir: Option<PathBuf>,
    /// Stop after this many seconds (else at Ctrl-C).
    #[arg(long, value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Seconds to wait for the middlebox to connect and to answer.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    pub timeout: f64,
}

/// Where the history lives, for `run` and `history`.
#[derive(Debug, Args)]
pub struct HistoryLocation {
    /// The history database: an SQLite file, or a PostgreSQL server as
    /// postgres://USER@HOST:PORT/DATABASE (no TLS) [default: $CCBENCH_HISTORY, else
    /// $XDG_DATA_HOME/ccbench/history.sqlite].
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub history: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub location: HistoryLocation,
    #[command(subcommand)]
    pub command: HistoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Runs, newest first: number, time, machine, commit, status, scenarios, verdicts, tags.
    List {
        /// Only this machine (fingerprint or name).
        #[arg(long)]
        machine: Option<String>,
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// One run's report on the terminal (RUN: a number, a tag, last or last~N).
    Show {
        /// The run.
        run: String,
    },
    /// Name a run (a baseline for compare).
    Tag {
        /// The run.
        run: String,
        /// The name.
        name: String,
    },
    /// Compare two sides, each a run, a tag, last~N, or a range A..B of runs; or the latest
    /// runs of two machines (--machine A --machine B).
    #[command(after_help = "Examples:\n  ccbench history compare baseline last\n  \
        ccbench history compare 10..14 15..19          between runs\n  \
        ccbench history compare --machine plain-vm --machine sev-vm")]
    Compare {
        /// The baseline side.
        base: Option<String>,
        /// The candidate side.
        cand: Option<String>,
        /// Two machines (fingerprint or name): each side is that machine's latest runs.
        #[arg(long, num_args = 1, value_name = "MACHINE")]
        machine: Vec<String>,
        /// With --machine: runs per machine, the newest.
        #[arg(long, default_value_t = 1)]
        runs: usize,
        #[command(flatten)]
        opts: CompareOpts,
    },
    /// One measurement over runs: median and 95% interval per run, and its change points.
    Trend {
        /// scenario/name[@backend], e.g. sealing/seal@native.
        measurement: String,
        /// Parameters that pick one record of each run, e.g. size_bytes=4096.
        params: Vec<String>,
        /// Only this machine (fingerprint or name).
        #[arg(long)]
        machine: Option<String>,
        /// Significance level of the change-point test.
        #[arg(long, default_value_t = 0.01, value_parser = parse_alpha)]
        alpha: f64,
        /// Exit 1 when the series has a change point (for CI).
        #[arg(long)]
        fail_on_change: bool,
        /// Also draw the trend into this file (.svg or .png).
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
    /// An HTML (and markdown) page of every measurement over runs: the change points first,
    /// with their plots, then every measurement in a table.
    Report {
        /// Output folder (report.html, report.md, plots/).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Only this machine (fingerprint or name).
        #[arg(long)]
        machine: Option<String>,
        /// Only the newest N runs.
        #[arg(long, value_name = "N")]
        last: Option<usize>,
        /// Significance level of the change-point test.
        #[arg(long, default_value_t = 0.01, value_parser = parse_alpha)]
        alpha: f64,
        /// Plot every measurement with two runs or more, not only those that changed.
        #[arg(long)]
        plot_all: bool,
        /// Exit 1 when any measurement has a change point (for CI).
        #[arg(long)]
        fail_on_change: bool,
    },
    /// The machines seen: fingerprint, name, CPU, cores, memory, kernel, TEE.
    Machines,
    /// Store results files written before the history existed (files, run folders, or
    /// folders of run folders).
    Import {
        /// Results files or folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The machine's name, for these runs.
        #[arg(long)]
        machine_name: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum GcCommand {
    /// Garble: wait for the evaluator on ADDR, run the session, print the output (hex).
    Garble(GarbleArgs),
    /// Evaluate: connect to the garbler at ADDR, run the session, print the output (hex).
    Evaluate(EvaluateArgs),
    /// Build or inspect circuits.
    #[command(subcommand)]
    Circuit(GcCircuitCommand),
}

#[derive(Debug, Subcommand)]
pub enum GcCircuitCommand {
    /// Write a library circuit as a Bristol Fashion file (generated circuits such as
    /// ed25519-sign are streamed to the file, never held in memory).
    Build {
        /// aes128, sha256, mul1024 (or mulN, N in 1..=4096), ed25519-sign (64-byte
        /// message) or ed25519-sign:LEN (a LEN-byte message).
        name: String,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Gate counts, depth and input/output widths of a circuit.
    Stats {
        /// A Bristol file, a library circuit name, ed25519-sign[:LEN] (the signature in one
        /// pass) or ed25519-sign-reveal[:LEN] (R revealed blinded, about half the AND gates).
        circuit: String,
    },
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input_source").required(true).args(["input", "input_file"])))]
pub struct PartyArgs {
    /// A Bristol (Fashion or old) file, a library circuit name (aes128, sha256, mul1024),
    /// or ed25519-sign[:LEN]: RFC 8032 signing on a key XOR-shared between the parties
    /// (the garbler's input is its 64-byte share of `seed || public key` followed by the
    /// LEN-byte message, default 64; the evaluator's is its 64-byte share), or
    /// ed25519-sign-reveal[:LEN], the same signature with R revealed blinded by a factor
    /// neither party knows (same inputs; each party adds its own random blinding share).
    #[arg(long)]
    pub circuit: String,
    /// This party's input as hex, least significant bit of the first byte first; exactly
    /// as many bytes as the circuit's input for this party (see `ccbench gc circuit stats`).
    /// `-` reads the hex from stdin. A value written here is visible to every local user
    /// (`ps`, /proc/PID/cmdline): give a secret, such as a key share, with --input-file or
    /// `--input -`.
    #[arg(long, value_name = "HEX|-")]
    pub input: Option<String>,
    /// A file that holds this party's input as hex (surrounding whitespace ignored).
    #[arg(long, value_name = "PATH")]
    pub input_file: Option<PathBuf>,
    /// Evaluations of the circuit in this session (the same input each time): bulk mode. The
    /// OT extension for all of them runs at once, at about 32 bytes per evaluator input bit
    /// of every evaluation (AES-128: 4.4 KB an evaluation); a count that needs more than half
    /// the memory available now is refused.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub evaluations: u32,
    /// Seconds to wait for the peer each time: to connect, or to send its next bytes.
    #[arg(long, default_value_t = 60.0, value_parser = parse_seconds)]
    pub timeout: f64,
    /// The garbling hash: mitccrh (multi-instance secure: AES re-keyed per gate from a
    /// session seed) or fixed-key (faster, with a bound that degrades with the gates garbled
    /// across sessions). Both parties must choose the same: the session header carries it.
    #[arg(long, value_name = "mitccrh|fixed-key", default_value = "mitccrh", value_parser = parse_hash)]
    pub hash: GcHash,
    /// The garbling scheme of the AND gates: half-gates (32 bytes per AND) or three-halves
    /// (Rosulek-Roy: 25 bytes per AND, more hashing), for stored and generated circuits
    /// (ed25519-sign) alike. Both parties must choose the same: the session header carries
    /// it.
    #[arg(long, value_name = "half-gates|three-halves", default_value = "half-gates", value_parser = parse_scheme)]
    pub scheme: Scheme,
    /// Also write the session's records (`results.jsonl`) and report (`report.md`,
    /// `report.html`) into this folder, as `ccbench run` does.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seconds the whole session may take, connecting included: a peer that keeps sending
    /// a byte now and then, each within --timeout, still cannot keep it going longer.
    #[arg(long, default_value_t = 3600.0, value_parser = parse_seconds)]
    pub deadline: f64,
    /// The link between the parties: loopback (none), lan10g (10 Gbit/s, 0.2 ms RTT), lan
    /// (1 Gbit/s, 1 ms), wan (200 Mbit/s, 20 ms), intercontinental (100 Mbit/s, 100 ms), or
    /// rate=RATE,rtt=TIME (e.g. rate=50mbit,rtt=30ms). The evaluator's process runs the
    /// emulated link (a user-space proxy in front of the garbler's address); the garbler's
    /// --net only labels its records, so give both parties the same.
    #[arg(long, value_name = "PROFILE", default_value = "loopback", value_parser = parse_net)]
    pub net: Profile,
}

#[derive(Debug, Args)]
pub struct GarbleArgs {
    #[command(flatten)]
    pub party: PartyArgs,
    /// Address to listen on for the evaluator.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7766")]
    pub listen: String,
}

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    #[command(flatten)]
    pub party: PartyArgs,
    /// The garbler's address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7766")]
    pub connect: String,
    /// ed25519-sign only: the message (hex), if the evaluator knows it; the signature
    /// is then verified on this side too (the garbler always verifies it).
    #[arg(long, value_name = "HEX")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scaling {
    Weak,
    Strong,
    Both,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenarios to run (see `ccbench list`), or `all`.
    #[arg(required = true, value_name = "SCENARIO")]
    pub scenarios: Vec<String>,
    /// Short warm-ups and few samples: a smoke run with indicative numbers.
    #[arg(long)]
    pub quick: bool,
    /// Thread counts for scenarios that sweep threads, e.g. 1,2,4.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<Vec<u32>>,
    /// Scaling modes for scenarios that sweep threads.
    #[arg(long, value_enum, default_value_t = Scaling::Both)]
    pub scaling: Scaling,
    /// Seconds per fixed-duration pass (x509), or the calibration target (dp-tree), e.g. 0.5.
    #[arg(long, value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Add SGX-sized transition costs to every enclave crossing: a number of cycles per
    /// transition, or a preset (hotcalls-ecall-warm, hotcalls-ecall-cold, hotcalls-ocall-warm,
    /// hotcalls-ocall-cold, sgxbox-ecall). Records made under it carry its name.
    #[arg(long, value_name = "CYCLES|PRESET", value_parser = parse_model)]
    pub transition_cycles: Option<TransitionModel>,
    /// Seconds one ecall into a sandboxed enclave may take before it fails and that enclave
    /// is ended (a service that never returns does not hang the run).
    #[arg(long, value_name = "SECONDS", default_value_t = harness::context::DEFAULT_CALL_TIMEOUT.as_secs_f64(),
          value_parser = parse_seconds)]
    pub call_timeout: f64,
    /// Output folder [default: results/<UTC timestamp>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress bars (they are also off when stderr is not a terminal).
    #[arg(long, short)]
    pub quiet: bool,
    /// A `warn` from a check of this run's data fails the run too (exit 3), as a `fail` does:
    /// for CI.
    #[arg(long)]
    pub strict: bool,
    /// Do not record this run in the history.
    #[arg(long)]
    pub no_history: bool,
    #[command(flatten)]
    pub history: HistoryLocation,
    /// A name for this machine in the history (the fingerprint identifies it either way).
    #[arg(long, value_name = "NAME")]
    pub machine_name: Option<String>,
    /// gc-2pc: measure this circuit instead of the built-in three: a Bristol Fashion (or old
    /// Bristol) file, or a library name (aes128, sha256, mulN). Repeatable.
    #[arg(long, value_name = "FILE|NAME")]
    pub circuit: Vec<String>,
    /// gc-2pc with --circuit: the garbler's input as hex (least significant bit of the first
    /// byte first) for every --circuit [default: deterministic bytes of the right width].
    /// A benchmark input, visible in `ps`: not for secrets.
    #[arg(long, value_name = "HEX", requires = "circuit")]
    pub garbler_input: Option<String>,
    /// gc-2pc with --circuit: the evaluator's input as hex, as --garbler-input.
    #[arg(long, value_name = "HEX", requires = "circuit")]
    pub evaluator_input: Option<String>,
    /// gc-2pc and ed25519-2pc: the garbling hash of the sessions, mitccrh or fixed-key
    /// [default: mitccrh, and gc-2pc then also runs its bulk sessions under fixed-key, and
    /// ed25519-2pc signs under both in alternated pairs, to show the difference]. gc-2pc's
    /// per-gate and no-network figures always cover both.
    #[arg(long, value_name = "mitccrh|fixed-key", value_parser = parse_hash)]
    pub hash: Option<GcHash>,
    /// gc-2pc, ed25519-2pc: the garbling scheme of the sessions, half-gates (32 bytes per
    /// AND) or three-halves (25 bytes per AND) [default: half-gates, and gc-2pc then also
    /// measures three-halves beside it: the schemes table; ed25519-2pc measures the chosen
    /// scheme only].
    #[arg(long, value_name = "half-gates|three-halves", value_parser = parse_scheme)]
    pub scheme: Option<Scheme>,
    /// gc-2pc and ed25519-2pc: the link between the two parties [default: loopback, no
    /// link]: lan10g (10 Gbit/s, 0.2 ms RTT), lan (1 Gbit/s, 1 ms), wan (200 Mbit/s,
    /// 20 ms), intercontinental (100 Mbit/s, 100 ms), or rate=RATE,rtt=TIME (e.g.
    /// rate=50mbit,rtt=30ms). The sessions run through an emulated link of that rate and
    /// delay (see --link-emulator); each stage gets its predicted time beside the measured
    /// one.
    #[arg(long, value_name = "PROFILE", value_parser = parse_net)]
    pub net: Option<Profile>,
    /// ed25519-2pc: the signature circuit, reveal (R = rB revealed blinded by a factor
    /// neither party knows and encoded in the clear: about half the AND gates, one round
    /// trip more) or one-pass (the whole signature in one circuit) [default: reveal].
    #[arg(long, value_name = "reveal|one-pass", value_parser = ["reveal", "one-pass"])]
    pub variant: Option<String>,
    /// What carries --net: kernel (two network namespaces joined by a veth pair, tc's tbf
    /// for the rate, netem for the delay where the kernel has it, else a user-space delay
    /// line in series; needs root), user (a user-space proxy on loopback: token bucket and
    /// delay line), or auto (kernel where it can be set up, else user, with a notice). A
    /// kernel link that cannot be set up is a usage error (exit 2) with the reason.
    #[arg(long, value_name = "auto|kernel|user", default_value = "auto", value_parser = parse_emulator)]
    pub link_emulator: Choice,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results file written by `ccbench run`, or the run folder that holds it.
    pub results: PathBuf,
    /// Output folder [default: the results file's folder].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// When `compare` (and `ab`) mark a change, and what they print.
#[derive(Debug, Args)]
pub struct CompareOpts {
    /// Smallest relative change (in percent) reported as a change.
    #[arg(long, default_value_t = 5.0, value_parser = parse_percent)]
    pub threshold: f64,
    /// Significance level of the Mann-Whitney U test.
    #[arg(long, default_value_t = 0.05, value_parser = parse_alpha)]
    pub alpha: f64,
    /// Ratio B/A beyond which a record the test cannot decide (not enough samples, or a single
    /// figure per side) still counts as a regression for --fail-on-regression.
    #[arg(long, value_name = "RATIO", default_value_t = report::compare::DEFAULT_GROSS_RATIO,
          value_parser = parse_gross)]
    pub gross_threshold: f64,
    /// Exit with status 1 when a regression is found: a significant slowdown beyond the
    /// threshold, or a slowdown beyond the gross threshold that the test cannot decide. Between
    /// runs, either must hold run for run; a record whose runs spread more than its change is
    /// unstable and never counts.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Print markdown instead of a terminal table.
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Two forms:\n  ccbench compare A.jsonl B.jsonl            one run per side\n  \
    ccbench compare A1 A2 A3 -- B1 B2 B3       several runs per side, tested between runs\n\
    A path may be a results file, a run folder (holding results.jsonl), or a folder of run \
    folders (as `ccbench ab` writes)."
)]
pub struct CompareArgs {
    /// The baseline's runs; without `--`, exactly two paths: the baseline and the candidate.
    #[arg(required = true, value_name = "A")]
    pub baseline: Vec<PathBuf>,
    /// After `--`: the candidate's runs.
    #[arg(last = true, value_name = "B")]
    pub candidate: Vec<PathBuf>,
    #[command(flatten)]
    pub opts: CompareOpts,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  ccbench ab --a ./ccbench-old --b ./ccbench-new --runs 5 -- run crypto --quick\n\
    Runs are interleaved A B B A A B ... so that slow drift of the machine hits both sides \
    alike; each run writes <out>/a/run-NN or <out>/b/run-NN, and the two sides are then \
    compared between runs."
)]
pub struct AbArgs {
    /// The baseline binary (a ccbench build).
    #[arg(long, value_name = "BIN")]
    pub a: PathBuf,
    /// The candidate binary (a ccbench build).
    #[arg(long, value_name = "BIN")]
    pub b: PathBuf,
    /// Runs per side (at least 4 for the between-run test to be able to mark a change at
    /// alpha 0.05).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Output folder [default: results/ab-<UTC timestamp>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub opts: CompareOpts,
    /// The command each binary runs, after `--` (`run SCENARIO... [options]`, without `--out`).
    #[arg(last = true, required = true, value_name = "RUN ARGS")]
    pub command: Vec<String>,
}

fn parse_model(s: &str) -> Result<TransitionModel, String> {
    TransitionModel::parse(s).map_err(|e| e.to_string())
}

fn parse_positive(s: &str, what: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{what} must be a number, got {s:?}"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("{what} must be positive and finite, got {s}"));
    }
    Ok(v)
}

fn parse_net(s: &str) -> Result<Profile, String> {
    s.parse()
        .map_err(|e: garble::link::ProfileError| e.to_string())
}

fn parse_emulator(s: &str) -> Result<Choice, String> {
    s.parse()
}

fn parse_hash(s: &str) -> Result<GcHash, String> {
    s.parse()
        .map_err(|e: garble::hash::UnknownHash| e.to_string())
}

fn parse_scheme(s: &str) -> Result<Scheme, String> {
    s.parse()
        .map_err(|e: garble::scheme::UnknownScheme| e.to_string())
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v = parse_positive(s, "the duration")?;
    if v > 86_400.0 {
        return Err(format!(
            "the duration is in seconds, at most one day; got {s}"
        ));
    }
    Ok(v)
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v = parse_positive(s, "the threshold")?;
    if v >= 100.0 {
        return Err(format!("the threshold is a percentage below 100, got {s}"));
    }
    Ok(v)
}

fn parse_gross(s: &str) -> Result<f64, String> {
    let v = parse_positive(s, "the gross threshold")?;
    if v <= 1.0 {
        return Err(format!(
            "the gross threshold is a ratio B/A above 1 (e.g. 1.5), got {s}"
        ));
    }
    Ok(v)
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    let v = parse_positive(s, "alpha")?;
    if v >= 1.0 {
        return Err(format!("alpha must be below 1, got {s}"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_run() {
        let cli = Cli::try_parse_from([
            "ccbench",
            "run",
            "crypto",
            "--quick",
            "--threads",
            "1,2,4",
            "--scaling",
            "weak",
        ])
        .unwrap();
        let Command::Run(r) = cli.command else {
            panic!()
        };
        assert_eq!(r.scenarios, ["crypto"]);
        assert!(r.quick);
        assert_eq!(r.threads, Some(vec![1, 2, 4]));
        assert_eq!(r.scaling, Scaling::Weak);
    }

    #[test]
    fn parses_the_middlebox_and_its_share_agent() {
        let cli = Cli::try_parse_from([
            "ccbench",
            "middlebox",
            "--listen",
            "127.0.0.1:8443",
            "--upstream",
            "127.0.0.1:4433",
            "--share-listen",
            "127.0.0.1:8444",
            "--backend",
            "native",
            "--batch",
        ])
        .unwrap();
        let Command::Middlebox(m) = cli.command else {
            panic!()
        };
        assert!(m.command.is_none());
        assert_eq!(m.relay.upstream.as_deref(), Some("127.0.0.1:4433"));
        assert_eq!(m.relay.backend, MiddleboxBackend::Native);
        assert!(m.relay.batch);
        assert_eq!(m.relay.switchless, SwitchlessMode::None);

        let cli = Cli::try_parse_from([
            "ccbench",
            "middlebox",
            "share",
            "--keylog",
            "k.log",
            "--to",
            "127.0.0.1:8444",
        ])
        .unwrap();
        let Command::Middlebox(m) = cli.command else {
            panic!()
        };
        let Some(MiddleboxCommand::Share(s)) = m.command else {
            panic!()
        };
        assert_eq!(s.to, "127.0.0.1:8444");
        assert!(!s.from_end);

        for argv in [
            &["ccbench", "middlebox", "share", "--to", "127.0.0.1:1"][..],
            &[
                "ccbench",
                "middlebox",
                "--listen",
                "a",
                "share",
                "--keylog",
                "k",
                "--to",
                "b",
            ],
            &["ccbench", "middlebox", "--switchless", "some"],
            &["ccbench", "middlebox", "--share-wait", "0"],
        ] {
            let err = Cli::try_parse_from(argv).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
    }

    #[test]
    fn rejects_bad_values_as_usage_errors() {
        for argv in [
            &["ccbench", "run", "crypto", "--threads", "0"][..],
            &["ccbench", "run", "crypto", "--threads", "1,-2"],
            &["ccbench", "run", "crypto", "--duration", "-1"],
            &["ccbench", "run", "crypto", "--duration", "nan"],
            &["ccbench", "run"],
            &["ccbench", "compare", "a", "b", "--alpha", "2"],
        ] {
            let err = Cli::try_parse_from(argv).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
    }
}
