//! What a scenario gets to run with: options, a place to emit records, a progress handle and a
//! cancellation flag. Scenarios never print; the cli renders progress and results.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use enclave::TransitionModel;
use measure::record::{Body, Cost, CostFigure, Measurement, Params, Record, ScalingMode, Value};
use measure::sampler::{SamplerConfig, Samples};

use crate::ScenarioError;

/// How thorough a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// A smoke run: short warm-ups and few samples; numbers are indicative.
    Quick,
    /// Publishable numbers: the defaults documented in docs/methodology.md.
    Full,
}

/// Which thread-scaling modes to run, where a scenario sweeps threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalingSelection {
    /// Work per thread fixed.
    Weak,
    /// Total work fixed.
    Strong,
    /// Both, weak first.
    Both,
}

impl ScalingSelection {
    /// The modes selected, in run order.
    pub fn modes(self) -> &'static [ScalingMode] {
        match self {
            ScalingSelection::Weak => &[ScalingMode::Weak],
            ScalingSelection::Strong => &[ScalingMode::Strong],
            ScalingSelection::Both => &[ScalingMode::Weak, ScalingMode::Strong],
        }
    }
}

/// Options common to all scenarios, resolved by the cli.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Quick or full.
    pub preset: Preset,
    /// Thread counts to sweep, when the user chose them (else each scenario's default).
    pub threads: Option<Vec<usize>>,
    /// Scaling modes for sweeping scenarios.
    pub scaling: ScalingSelection,
    /// Duration of fixed-duration passes, when the user chose it.
    pub duration: Option<Duration>,
    /// The run's output folder (scenarios may write artefacts there, e.g. generated inputs).
    pub out_dir: PathBuf,
    /// The transition-cost model applied to every enclave (off by default); records made
    /// under it carry its name in `params.transition_model`.
    pub transition_model: Option<TransitionModel>,
    /// Overrides the preset's sampler (tests, custom tools).
    pub sampler: Option<SamplerConfig>,
    /// Where sealing keeps the platform root key (default: `$CCBENCH_PLATFORM_KEY_DIR`, else
    /// the user's data directory; created with mode 0600 on first use).
    pub platform_key_dir: Option<PathBuf>,
    /// Circuits of the user's (`--circuit`) that `gc-2pc` measures instead of its own.
    pub circuits: Vec<CircuitChoice>,
    /// The garbling hash of the two-party scenarios (`--hash`: `mitccrh` or `fixed-key`, by
    /// name; the scenarios map and check it). `None`: each scenario's default (MITCCRH for the
    /// sessions, and `gc-2pc` also measures the other hash beside it).
    pub gc_hash: Option<String>,
    /// The garbling scheme of the two-party scenarios' sessions (`gc-2pc`, `ed25519-2pc`;
    /// `--scheme`: `half-gates` or `three-halves`, by name; the scenarios map and check it).
    /// `None`: half-gates for the sessions, and `gc-2pc` also measures three-halves beside
    /// it.
    pub gc_scheme: Option<String>,
    /// The link between the two parties of the two-party scenarios (`--net`: a profile's
    /// name, `loopback`, `lan10g`, `lan`, `wan`, `intercontinental`, or `rate=..,rtt=..`;
    /// the scenarios parse it with `garble::link::Profile`, the cli checks it first).
    /// `None`: loopback.
    pub net: Option<String>,
    /// The circuit of `ed25519-2pc` (`--variant`: `reveal`, R revealed blinded, or
    /// `one-pass`, the whole signature in one circuit). `None`: `reveal`.
    pub ed25519_variant: Option<String>,
    /// Which emulator carries `net` (`--link-emulator`: `auto`, `kernel` or `user`; the
    /// scenarios parse it with `garble::link::Choice`, the cli checks it first). `None`:
    /// `auto`, the kernel's link where this process can set it up, else the user-space one.
    pub link_emulator: Option<String>,
    /// How long one ecall into a sandboxed enclave started through
    /// [`crate::boundary::Config::builder`] may take before the call fails and the enclave
    /// is ended (a service that never returns must not hang the run); `None`: no limit.
    pub call_timeout: Option<Duration>,
}

/// The default of [`RunOptions::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// A circuit given on the command line (`--circuit`): a Bristol Fashion file or a library
/// name, with the parties' inputs when the user gave them (else the scenario makes inputs of
/// the right widths). Benchmark inputs, not secrets: they appear in `ps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitChoice {
    /// The file's path or the library circuit's name.
    pub spec: String,
    /// The garbler's input bytes, least significant bit of the first byte first.
    pub garbler_input: Option<Vec<u8>>,
    /// The evaluator's input bytes.
    pub evaluator_input: Option<Vec<u8>>,
}

impl RunOptions {
    /// Options for a quick run writing into `out_dir`.
    pub fn quick(out_dir: PathBuf) -> Self {
        RunOptions {
            preset: Preset::Quick,
            threads: None,
            scaling: ScalingSelection::Both,
            duration: None,
            out_dir,
            transition_model: None,
            sampler: None,
            platform_key_dir: None,
            circuits: Vec::new(),
            gc_hash: None,
            gc_scheme: None,
            net: None,
            ed25519_variant: None,
            link_emulator: None,
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
        }
    }

    /// The sampler configuration of the preset.
    pub fn sampler(&self) -> SamplerConfig {
        if let Some(s) = &self.sampler {
            return s.clone();
        }
        match self.preset {
            Preset::Quick => SamplerConfig::quick(),
            Preset::Full => SamplerConfig::full(),
        }
    }
}

/// Receives the records a scenario emits (the cli writes them to the results file).
pub trait Emit: Sync {
    /// Takes one record; an error stops the scenario.
    fn emit(&self, record: &Record) -> Result<(), ScenarioError>;
}

/// Shows progress of long work. Implementations must be cheap and must not fail.
pub trait Progress: Sync {
    /// A new phase with `total` steps begins.
    fn begin(&self, label: &str, total: u64);
    /// `n` more steps are done.
    fn advance(&self, n: u64);
}

/// Progress that shows nothing (tests, `--quiet`).
pub struct NoProgress;

impl Progress for NoProgress {
    fn begin(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
}

/// The handle a scenario runs with.
pub struct Context<'a> {
    /// The run's options.
    pub options: &'a RunOptions,
    emit: &'a dyn Emit,
    progress: &'a dyn Progress,
    cancel: &'a AtomicBool,
    /// Parameters a scenario stamps on every record it emits through this context (see
    /// [`Context::with_params`]).
    stamped: Params,
}

impl<'a> Context<'a> {
    /// A context over the cli's sink, progress display and Ctrl-C flag.
    pub fn new(
        options: &'a RunOptions,
        emit: &'a dyn Emit,
        progress: &'a dyn Progress,
        cancel: &'a AtomicBool,
    ) -> Self {
        Context {
            options,
            emit,
            progress,
            cancel,
            stamped: Params::new(),
        }
    }

    /// A context that adds `params` to every record emitted through it, where the record
    /// does not set them itself: a setting of the whole scenario run (the link profile of
    /// a two-party run) that every record must say.
    pub fn with_params(&self, params: Params) -> Context<'a> {
        let mut stamped = self.stamped.clone();
        stamped.extend(params);
        Context {
            options: self.options,
            emit: self.emit,
            progress: self.progress,
            cancel: self.cancel,
            stamped,
        }
    }

    /// The progress display.
    pub fn progress(&self) -> &dyn Progress {
        self.progress
    }

    /// `Err(Cancelled)` once the user has asked to stop; call between units of work.
    pub fn check_cancel(&self) -> Result<(), ScenarioError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(ScenarioError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// The parameters every record of this run carries, whatever the scenario: today the
    /// transition-cost model's name (`transition_model`), when one is active.
    pub fn common_params(&self) -> Params {
        let mut p = Params::new();
        if let Some(m) = &self.options.transition_model {
            p.insert("transition_model".into(), Value::from(m.name()));
        }
        p
    }

    /// Emits a record, with the run's [common parameters](Self::common_params) added.
    pub fn emit(
        &self,
        scenario: &str,
        backend: &str,
        mut params: Params,
        body: Body,
    ) -> Result<(), ScenarioError> {
        for (k, v) in &self.stamped {
            params.entry(k.clone()).or_insert_with(|| v.clone());
        }
        params.extend(self.common_params());
        self.emit
            .emit(&Record::new(scenario, backend, params, body))
    }

    /// Emits the measurement made of `samples` and returns its median, in ns.
    pub fn emit_samples(
        &self,
        scenario: &str,
        backend: &str,
        params: Params,
        name: &str,
        samples: Samples,
        bytes_per_op: Option<u64>,
    ) -> Result<f64, ScenarioError> {
        self.emit_measurement(scenario, backend, params, name, samples, bytes_per_op)
            .map(|m| m.summary.median_ns)
    }

    /// Emits the measurement made of `samples` and returns it (for a [`Cost`] or a check
    /// that needs the samples too).
    pub fn emit_measurement(
        &self,
        scenario: &str,
        backend: &str,
        params: Params,
        name: &str,
        samples: Samples,
        bytes_per_op: Option<u64>,
    ) -> Result<Measurement, ScenarioError> {
        let m = samples.into_measurement(name, bytes_per_op)?;
        self.emit(scenario, backend, params, Body::Measurement(m.clone()))?;
        Ok(m)
    }

    /// Emits what confidentiality costs for one headline workload of `scenario`: the
    /// unprotected measurement and the protected ones, each `(label, backend, measurement)`.
    /// Nothing is emitted when a side has no samples.
    pub fn emit_cost(
        &self,
        scenario: &str,
        name: &str,
        unit: &str,
        baseline: (&str, &str, &Measurement),
        protected: &[(&str, &str, &Measurement)],
    ) -> Result<(), ScenarioError> {
        let figure = |(label, backend, m): (&str, &str, &Measurement)| {
            CostFigure::new(label, backend, m.samples_ns.clone())
        };
        let (Some(baseline), Some(protected)) = (
            figure(baseline),
            protected
                .iter()
                .map(|&p| figure(p))
                .collect::<Option<Vec<_>>>(),
        ) else {
            return Ok(());
        };
        if protected.is_empty() {
            return Ok(());
        }
        self.emit(
            scenario,
            "all",
            Params::new(),
            Body::Cost(Cost {
                name: name.to_owned(),
                unit: unit.to_owned(),
                baseline,
                protected,
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use measure::record::{Check, CheckSubject, Verdict};

    struct Capture(std::sync::Mutex<Vec<Record>>);

    impl Emit for Capture {
        fn emit(&self, record: &Record) -> Result<(), ScenarioError> {
            self.0.lock().unwrap().push(record.clone());
            Ok(())
        }
    }

    /// Stamped parameters reach every record, a record's own value wins, and the parent
    /// context stamps nothing.
    #[test]
    fn stamped_params_reach_every_record_unless_it_sets_them() {
        let options = RunOptions::quick(std::env::temp_dir());
        let sink = Capture(std::sync::Mutex::new(Vec::new()));
        let cancel = AtomicBool::new(false);
        let ctx = Context::new(&options, &sink, &NoProgress, &cancel);
        let mut net = Params::new();
        net.insert("net".into(), Value::from("wan"));
        net.insert("rtt_ms".into(), Value::from(20.0));
        let over = ctx.with_params(net);
        let body = || {
            Body::Check(Check {
                subject: CheckSubject::Run,
                name: "x".into(),
                verdict: Verdict::Pass,
                message: String::new(),
            })
        };
        over.emit("s", "2pc", Params::new(), body()).unwrap();
        let mut own = Params::new();
        own.insert("net".into(), Value::from("loopback"));
        over.emit("s", "2pc", own, body()).unwrap();
        ctx.emit("s", "2pc", Params::new(), body()).unwrap();
        let got = sink.0.lock().unwrap();
        assert_eq!(got[0].params.get("net"), Some(&Value::from("wan")));
        assert_eq!(got[0].params.get("rtt_ms"), Some(&Value::from(20.0)));
        assert_eq!(got[1].params.get("net"), Some(&Value::from("loopback")));
        assert_eq!(got[1].params.get("rtt_ms"), Some(&Value::from(20.0)));
        assert_eq!(got[2].params.get("net"), None);
    }
}
