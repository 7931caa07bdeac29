//! Scenario `transitions`: what one crossing of the boundary costs (SGXBox, Applied Sciences
//! 2021, Table 1). Empty ecall, empty ocall, an ocall that reads 1 KiB from a file, and
//! payload sweeps in, out and both ways, each on the `native` backend (a direct call), the
//! `sandbox` (a separate process behind shared memory) and the sandbox with switchless
//! workers (1 and 2), with switchless hits and misses counted. The published SGX figures are
//! shown beside ours, labelled as theirs.

use std::sync::Arc;

use enclave::ocall::builtin;
use enclave::{Backend, Ctx, Direction, Registry, Service, ServiceError};
use measure::record::{Body, Check, Measurement, Table, Value, Verdict};
use measure::sampler::{Samples, try_sample};

use harness::boundary::{self, Config};
use harness::codec::{Decode, Encode, decode};
use harness::{At, Context, Preset, Scenario, ScenarioError};

const NAME: &str = "transitions";
/// The enclave service's name.
pub const SERVICE: &str = "ccbench.transitions";

harness::calls! {
    /// The service's ecalls.
    pub(crate) enum Call {
        /// Returns nothing.
        Empty = 0 => "empty",
        /// Copies the input in and ignores it.
        In = 1 => "in",
        /// Input: a `u64` `n`; returns `n` bytes.
        Out = 2 => "out",
        /// Returns its input.
        InOut = 3 => "in/out",
        /// Input: a `u32` `k`; makes `k` empty ocalls.
        Ocalls = 4 => "ocall loop",
        /// Input: [`Reads`]; reads the file `k` times by ocall, returns the bytes read (`u64`).
        Reads = 5 => "read loop",
    }
}

/// The input of [`Call::Reads`].
#[derive(Debug, Clone, PartialEq, Encode, Decode)]
pub(crate) struct Reads {
    /// How many read ocalls.
    pub(crate) count: u32,
    /// The file each reads.
    pub(crate) path: String,
}

/// Ocalls made per measured ecall in the ocall measurements: the ecall that carries them
/// costs 1/`OCALLS_PER_ECALL` of itself per ocall.
pub const OCALLS_PER_ECALL: u32 = 100;

/// Size of the file the read ocall reads.
pub const READ_SIZE: usize = 1024;

/// The service behind the boundary.
struct Transitions;

impl Service for Transitions {
    fn ecall(
        &self,
        call_id: u32,
        input: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<Vec<u8>, ServiceError> {
        // An empty ecall measures the crossing, so the service's own share must be nil: the
        // empty calls return before the dispatch, which lives in a function of its own, so
        // this one needs no stack frame (no saved registers, no jump table).
        if call_id == Call::Empty as u32 || call_id == Call::In as u32 {
            return Ok(Vec::new());
        }
        dispatch(call_id, input, ctx)
    }
}

/// The calls with a body.
#[inline(never)]
fn dispatch(call_id: u32, input: &[u8], ctx: &mut Ctx<'_>) -> Result<Vec<u8>, ServiceError> {
    match Call::try_from(call_id)? {
        Call::Empty | Call::In => Ok(Vec::new()),
        Call::Out => {
            let n: u64 = decode("out request", input)?;
            let n = usize::try_from(n).map_err(|_| "length too large")?;
            Ok(vec![0x5a; n])
        }
        Call::InOut => Ok(input.to_vec()),
        Call::Ocalls => {
            let k: u32 = decode("ocalls request", input)?;
            for _ in 0..k {
                ctx.noop()?;
            }
            Ok(Vec::new())
        }
        Call::Reads => {
            let r: Reads = decode("reads request", input)?;
            let mut total = 0u64;
            for _ in 0..r.count {
                total += ctx.read_file(&r.path)?.len() as u64;
            }
            Ok(total.encode())
        }
    }
}

/// Registers the service.
pub fn register(r: Registry) -> Registry {
    r.with(SERVICE, |_| Ok(Arc::new(Transitions)))
}

fn call_name(d: Direction, call: u32) -> String {
    match (d, call) {
        (Direction::Ecall, id) => Call::try_from(id).map_or(id.to_string(), |c| c.name().into()),
        (Direction::Ocall, builtin::NOOP) => "empty".into(),
        (Direction::Ocall, builtin::READ_FILE) => "read file".into(),
        (_, other) => other.to_string(),
    }
}

/// Payload sizes of the sweeps, in bytes.
pub fn payload_sizes(preset: Preset) -> &'static [usize] {
    match preset {
        Preset::Quick => &[0, 1024, 64 << 10, 1 << 20],
        Preset::Full => &[
            0,
            64,
            256,
            1024,
            4096,
            16 << 10,
            64 << 10,
            256 << 10,
            1 << 20,
        ],
    }
}

/// The configurations measured, in order.
pub fn configs() -> Vec<Config> {
    vec![
        Config::regular(Backend::Native),
        Config::regular(Backend::Sandbox),
        Config::switchless(1),
        Config::switchless(2),
    ]
}

/// The `transitions` scenario.
pub struct TransitionsScenario;

/// Medians of the three headline calls of one configuration, in ns.
struct Headline {
    config: Config,
    ecall: f64,
    ocall: f64,
    read: f64,
    /// The measurements behind `ecall` and `read`, for the cost summary.
    measured: Option<(Measurement, Measurement)>,
}

impl TransitionsScenario {
    fn measure(
        &self,
        ctx: &Context<'_>,
        config: &Config,
        read_path: &str,
    ) -> Result<Headline, ScenarioError> {
        let registry = register(Registry::new());
        let builder = config.builder(
            ctx,
            SERVICE,
            &[Call::Empty, Call::In, Call::Out, Call::InOut].map(u32::from),
            &[builtin::NOOP, builtin::READ_FILE],
        );
        let e = boundary::start(builder, &registry)?;
        let cfg = ctx.options.sampler();
        let emit = |name: &str, extra: &[(&str, Value)], s: Samples, bytes: Option<u64>| {
            let mut p = config.params();
            for (k, v) in extra {
                p.insert((*k).to_owned(), v.clone());
            }
            let m = ctx.emit_measurement(NAME, config.label(), p, name, s, bytes)?;
            ctx.progress().advance(1);
            Ok::<Measurement, ScenarioError>(m)
        };

        ctx.check_cancel()?;
        // The output is consumed by its length: handing the whole `Vec` to `black_box`
        // spills it and reloads it wider, a store-forwarding stall (~5 ns here) that belongs
        // to the harness, not to the call.
        let s = try_sample(&cfg, || {
            e.ecall(Call::Empty.into(), &[]).map(|out| out.len())
        })
        .at("empty ecall")?;
        let ecall_m = emit("ecall-empty", &[], s, None)?;

        ctx.check_cancel()?;
        let k = OCALLS_PER_ECALL.encode();
        let s = try_sample(&cfg, || e.ecall(Call::Ocalls.into(), &k)).at("empty ocall")?;
        let ocall = emit(
            "ocall-empty",
            &[],
            s.per_op(u64::from(OCALLS_PER_ECALL)),
            None,
        )?
        .summary
        .median_ns;

        ctx.check_cancel()?;
        let input = Reads {
            count: OCALLS_PER_ECALL,
            path: read_path.to_owned(),
        }
        .encode();
        let want = (u64::from(OCALLS_PER_ECALL) * READ_SIZE as u64).encode();
        let s = try_sample(&cfg, || {
            let out = e.ecall(Call::Reads.into(), &input)?;
            if out != want {
                return Err(enclave::Error::Config(format!(
                    "the read ocalls returned {out:?} bytes in total, not {want:?}"
                )));
            }
            Ok(out)
        })
        .at("read ocall")?;
        let read_m = emit(
            "ocall-read",
            &[("size_bytes", Value::from(READ_SIZE))],
            s.per_op(u64::from(OCALLS_PER_ECALL)),
            Some(READ_SIZE as u64),
        )?;

        for &size in payload_sizes(ctx.options.preset) {
            let size_p = [("size_bytes", Value::from(size))];
            ctx.check_cancel()?;
            let buf = vec![0xa5u8; size];
            let s = try_sample(&cfg, || e.ecall(Call::In.into(), &buf).map(|out| out.len()))
                .at("ecall in")?;
            emit("ecall-in", &size_p, s, Some(size as u64))?;

            ctx.check_cancel()?;
            let n = (size as u64).encode();
            let s = try_sample(&cfg, || {
                let out = e.ecall(Call::Out.into(), &n)?;
                check_len(&out, size)
            })
            .at("ecall out")?;
            emit("ecall-out", &size_p, s, Some(size as u64))?;

            ctx.check_cancel()?;
            let s = try_sample(&cfg, || {
                let out = e.ecall(Call::InOut.into(), &buf)?;
                check_len(&out, size)
            })
            .at("ecall in/out")?;
            // Payload both ways: `size` in and `size` out.
            emit("ecall-inout", &size_p, s, Some(2 * size as u64))?;
        }

        let trace = e.trace();
        boundary::emit_trace(ctx, NAME, config, &trace, &call_name)?;
        if config.backend == Backend::Sandbox && config.workers == 0 {
            boundary::emit_advice(ctx, NAME, config, &trace, &Default::default(), &call_name)?;
        }
        if config.workers > 0 {
            self.check_hits(ctx, config, &trace)?;
        }
        Ok(Headline {
            config: config.clone(),
            ecall: ecall_m.summary.median_ns,
            ocall,
            read: read_m.summary.median_ns,
            measured: Some((ecall_m, read_m)),
        })
    }

    /// Switchless calls that miss were measured as regular calls: say how many did.
    fn check_hits(
        &self,
        ctx: &Context<'_>,
        config: &Config,
        trace: &enclave::TraceSnapshot,
    ) -> Result<(), ScenarioError> {
        let (hits, misses) = trace.calls.iter().fold((0u64, 0u64), |(h, m), c| {
            (h + c.switchless_hits, m + c.switchless_misses)
        });
        let rate = if hits + misses == 0 {
            0.0
        } else {
            misses as f64 / (hits + misses) as f64
        };
        let cores = measure::sweep::available_cores();
        let verdict = if hits == 0 || rate > 0.05 {
            Verdict::Warn
        } else {
            Verdict::Pass
        };
        let mut message = format!(
            "{hits} hits, {misses} misses ({:.2}% fell back to regular calls)",
            rate * 100.0
        );
        if config.workers as u64 + 1 > cores {
            message.push_str(&format!(
                "; {} workers and the caller share {cores} cores",
                config.workers
            ));
        }
        ctx.emit(
            NAME,
            config.label(),
            config.params(),
            Body::Check(Check {
                subject: measure::record::CheckSubject::Run,
                name: "switchless-hits".into(),
                verdict,
                message,
            }),
        )
    }
}

fn check_len(out: &[u8], want: usize) -> Result<usize, enclave::Error> {
    if out.len() == want {
        Ok(out.len())
    } else {
        Err(enclave::Error::Config(format!(
            "the enclave returned {} bytes, not {want}",
            out.len()
        )))
    }
}

fn us(ns: f64) -> Value {
    Value::from(ns.round() / 1000.0)
}

/// SGXBox's Table 1 with our medians beside it, in µs.
fn table(headlines: &[Headline]) -> Table {
    // SGXBox (Applied Sciences 11, 2021), Table 1, on SGX hardware: switchless calls, 1 M
    // calls each; a regular SGX ecall costs 2-5 µs.
    let theirs: [(&str, &str, &str); 3] = [
        ("empty ecall", "2-5", "0.90-1.05"),
        ("empty ocall", "-", "0.60-0.83"),
        ("ocall reading 1 KiB", "-", "4.9-8.9"),
    ];
    let mut columns = vec![
        "call".to_owned(),
        "SGX regular (published)".to_owned(),
        "SGX switchless (published)".to_owned(),
    ];
    columns.extend(
        headlines
            .iter()
            .map(|h| format!("{} (ours)", h.config.title())),
    );
    let rows = theirs
        .iter()
        .enumerate()
        .map(|(i, (call, regular, switchless))| {
            let mut row = vec![
                Value::from(*call),
                Value::from(*regular),
                Value::from(*switchless),
            ];
            row.extend(headlines.iter().map(|h| us([h.ecall, h.ocall, h.read][i])));
            row
        })
        .collect();
    Table {
        name: "sgxbox-table-1".into(),
        title: "Boundary crossings, µs per call (medians)".into(),
        columns,
        rows,
        source: Some(
            "Published columns: SGXBox, Applied Sciences 11 (2021), Table 1, measured on SGX \
             hardware; ours: this run"
                .into(),
        ),
        notes: vec![format!(
            "Ocall figures are per ocall, {OCALLS_PER_ECALL} ocalls per measured ecall. The \
             sandbox is a process boundary on this machine, not SGX; add \
             --transition-cycles to model SGX's transition cost."
        )],
    }
}

impl Scenario for TransitionsScenario {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "cost of one boundary crossing: empty ecall/ocall, 1 KiB read ocall, payload sweeps; native, sandbox, switchless"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let configs = configs();
        let per_config = 3 + 3 * payload_sizes(ctx.options.preset).len();
        ctx.progress()
            .begin(NAME, (configs.len() * per_config) as u64);
        let dir = tempfile::tempdir().at("creating the file the read ocall reads")?;
        let path = dir.path().join("1k.bin");
        std::fs::write(&path, [0x42u8; READ_SIZE]).at("writing the file the read ocall reads")?;
        let path = path
            .to_str()
            .ok_or_else(|| ScenarioError::step("temporary path", "not UTF-8"))?
            .to_owned();
        let mut headlines = Vec::new();
        for config in &configs {
            headlines.push(self.measure(ctx, config, &path)?);
        }
        let params = measure::params! {};
        ctx.emit(NAME, "all", params, Body::Table(table(&headlines)))?;
        emit_costs(ctx, &headlines)
    }
}

/// The cost summary's rows: an empty ecall and a 1 KiB-read ocall, native against each
/// boundary configuration.
fn emit_costs(ctx: &Context<'_>, headlines: &[Headline]) -> Result<(), ScenarioError> {
    let Some((base, rest)) = headlines.split_first() else {
        return Ok(());
    };
    let Some((base_ecall, base_read)) = &base.measured else {
        return Ok(());
    };
    let titles: Vec<String> = rest.iter().map(|h| h.config.title()).collect();
    let pick = |read: bool| -> Vec<(&str, &str, &Measurement)> {
        rest.iter()
            .zip(&titles)
            .filter_map(|(h, title)| {
                let (e, r) = h.measured.as_ref()?;
                Some((title.as_str(), h.config.label(), if read { r } else { e }))
            })
            .collect()
    };
    let base_label = base.config.label();
    ctx.emit_cost(
        NAME,
        "empty ecall",
        "call",
        (base_label, base_label, base_ecall),
        &pick(false),
    )?;
    ctx.emit_cost(
        NAME,
        "ocall reading 1 KiB",
        "call",
        (base_label, base_label, base_read),
        &pick(true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use enclave::Enclave;

    #[test]
    fn service_answers_every_call_natively() {
        let e = Enclave::builder(SERVICE)
            .backend(Backend::Native)
            .start(&register(Registry::new()))
            .unwrap();
        assert_eq!(e.ecall(Call::Empty.into(), b"x").unwrap(), b"");
        assert_eq!(e.ecall(Call::In.into(), &[1; 100]).unwrap(), b"");
        assert_eq!(
            e.ecall(Call::Out.into(), &5u64.to_le_bytes()).unwrap(),
            [0x5a; 5]
        );
        assert_eq!(e.ecall(Call::InOut.into(), b"abc").unwrap(), b"abc");
        assert_eq!(
            e.ecall(Call::Ocalls.into(), &3u32.to_le_bytes()).unwrap(),
            b""
        );
        let t = e.trace();
        assert_eq!(t.get(Direction::Ocall, builtin::NOOP).unwrap().count, 3);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [0u8; READ_SIZE]).unwrap();
        let input = Reads {
            count: 2,
            path: path.to_str().unwrap().to_owned(),
        }
        .encode();
        assert_eq!(
            e.ecall(Call::Reads.into(), &input).unwrap(),
            (2 * READ_SIZE as u64).to_le_bytes()
        );
        assert!(e.ecall(Call::Out.into(), b"short").is_err());
        assert!(e.ecall(Call::Ocalls.into(), b"").is_err());
        // Trailing bytes are refused, not ignored.
        assert!(e.ecall(Call::Ocalls.into(), &[3, 0, 0, 0, 9]).is_err());
        let mut long = input.clone();
        long.push(0);
        assert!(e.ecall(Call::Reads.into(), &long).is_err());
        assert!(matches!(
            e.ecall(77, b""),
            Err(enclave::Error::UnknownCall(77))
        ));
    }

    #[test]
    fn table_puts_ours_beside_theirs() {
        let h = |c: Config| Headline {
            config: c,
            ecall: 400.0,
            ocall: 750.0,
            read: 5_000.0,
            measured: None,
        };
        let t = table(&[
            h(Config::regular(Backend::Sandbox)),
            h(Config::switchless(1)),
        ]);
        assert_eq!(t.columns.len(), 5);
        assert_eq!(t.rows.len(), 3);
        assert!(t.rows.iter().all(|r| r.len() == t.columns.len()));
        assert_eq!(t.rows[0][3], Value::Float(0.4));
        assert_eq!(t.rows[2][4], Value::Float(5.0));
        assert!(t.source.as_deref().unwrap().contains("SGXBox"));
    }
}
