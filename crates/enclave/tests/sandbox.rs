//! Integration tests of both backends.
//!
//! This test has its own `main` (`harness = false`) because the sandbox backend re-executes
//! the running binary as the enclave: `main` must call `enclave::child::run_if_enclave`
//! first, exactly as the `ccbench` binary does, so these tests exercise the real path
//! (`/proc/self/exe`, fd passing, seccomp) rather than a stand-in helper binary.
//! Run one test with `cargo test -p enclave --test sandbox -- <name substring>`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use enclave::attest::{self, PlatformIdentity, QuoteError, ReportData};
use enclave::seal::{DEFAULT_SIGNER, Identity, Policy, SealError};
use enclave::{
    Backend, Ctx, Direction, Enclave, Error, Level, Registry, SeccompMode, Service, ServiceError,
    SwitchlessConfig,
};

struct TestService;

const EMPTY: u32 = 0;
const ECHO: u32 = 1;
const OCALLS: u32 = 2;
const OPEN: u32 = 3;
const SOCKET: u32 = 4;
const PANIC: u32 = 5;
const SLEEP_ECHO: u32 = 6;
const USER_OCALL: u32 = 7;
const REVERSE: u32 = 8;
const SEAL: u32 = 9;
const UNSEAL: u32 = 10;
const ABORT: u32 = 11;
const NOOP_OCALL: u32 = 12;
const QUOTE: u32 = 13;
const USER_OCALL_ID: u32 = 100;

impl Service for TestService {
    fn ecall(&self, id: u32, input: &[u8], ctx: &mut Ctx<'_>) -> Result<Vec<u8>, ServiceError> {
        match id {
            EMPTY => Ok(Vec::new()),
            ECHO => Ok(input.to_vec()),
            OCALLS => {
                let dir = std::str::from_utf8(input).map_err(|_| "path")?;
                ctx.noop()?;
                let path = format!("{dir}/out.bin");
                ctx.write_file(&path, b"written from inside")?;
                let back = ctx.read_file(&path)?;
                let now = ctx.clock()?;
                ctx.log(Level::Info, "hello from the enclave")?;
                let mut out = back;
                out.extend_from_slice(&now.to_le_bytes());
                Ok(out)
            }
            OPEN => match std::fs::File::open("/etc/hostname") {
                Ok(_) => Ok(b"opened".to_vec()),
                Err(e) => Err(format!("open denied: {e}").into()),
            },
            SOCKET => match std::net::UdpSocket::bind("127.0.0.1:0") {
                Ok(_) => Ok(b"socket".to_vec()),
                Err(e) => Err(format!("socket denied: {e}").into()),
            },
            PANIC => panic!("boom in the enclave"),
            SLEEP_ECHO => {
                let ms = input.first().copied().unwrap_or(0);
                std::thread::sleep(Duration::from_millis(u64::from(ms) * 10));
                Ok(input.to_vec())
            }
            USER_OCALL => Ok(ctx.ocall(USER_OCALL_ID, input)?),
            REVERSE => Ok(input.iter().rev().copied().collect()),
            SEAL => {
                let s = ctx.sealer().ok_or("no sealer")?;
                s.seal(Policy::Measurement, b"aad", input)
                    .map_err(|e| e.to_string().into())
            }
            UNSEAL => {
                let s = ctx.sealer().ok_or("no sealer")?;
                match s.unseal(input) {
                    Ok(u) => Ok(u.plaintext),
                    Err(SealError::WrongEnclave { .. }) => Err("wrong enclave".into()),
                    Err(e) => Err(e.to_string().into()),
                }
            }
            ABORT => std::process::abort(),
            NOOP_OCALL => {
                ctx.noop()?;
                Ok(Vec::new())
            }
            QUOTE => {
                let data = ReportData::from_prefix(input).map_err(|e| e.to_string())?;
                ctx.quote(&data).map_err(|e| e.to_string().into())
            }
            other => Err(ServiceError::UnknownCall(other)),
        }
    }
}

fn registry() -> Registry {
    Registry::new()
        .with("test", |_| Ok(Arc::new(TestService)))
        .with("test-other", |_| Ok(Arc::new(TestService)))
        .with("broken", |init| {
            Err(format!("constructor refused {} bytes", init.len()))
        })
}

fn start(backend: Backend) -> Enclave {
    Enclave::builder("test")
        .backend(backend)
        .ocall(USER_OCALL_ID, |i| {
            Ok(i.iter().map(|b| b.wrapping_add(1)).collect())
        })
        .start(&registry())
        .unwrap()
}

fn round_trips() {
    for backend in [Backend::Native, Backend::Sandbox] {
        let e = start(backend);
        assert_eq!(e.ecall(EMPTY, b"").unwrap(), b"");
        assert_eq!(e.ecall(ECHO, b"abc").unwrap(), b"abc");
        assert_eq!(e.ecall(USER_OCALL, &[1, 2, 255]).unwrap(), vec![2, 3, 0]);
        let dir = tempdir();
        let out = e.ecall(OCALLS, dir.as_bytes()).unwrap();
        assert_eq!(&out[..19], b"written from inside");
        let ns = u64::from_le_bytes(out[19..27].try_into().unwrap());
        assert!(ns > 1_600_000_000_000_000_000, "clock ocall returned {ns}");
        let (logs, dropped) = e.take_logs();
        assert_eq!(dropped, 0);
        assert_eq!(logs.len(), 1);
        assert_eq!(logs[0].message, "hello from the enclave");
        assert!(matches!(e.ecall(999, b""), Err(Error::UnknownCall(999))));
        let t = e.trace();
        assert_eq!(t.backend, backend.name());
        assert_eq!(t.get(Direction::Ecall, ECHO).unwrap().count, 1);
        assert_eq!(t.get(Direction::Ocall, USER_OCALL_ID).unwrap().count, 1);
        assert_eq!(
            t.get(Direction::Ocall, enclave::ocall::builtin::NOOP)
                .unwrap()
                .count,
            1
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}

fn chunked_payloads() {
    // A 64 KiB slot area: 1 MB + 3 bytes in and out crosses in 17 chunks each way.
    let e = Enclave::builder("test")
        .slot_area(64 << 10)
        .ocall(USER_OCALL_ID, |i| Ok(i.iter().rev().copied().collect()))
        .start(&registry())
        .unwrap();
    let input: Vec<u8> = (0..(1 << 20) + 3)
        .map(|i: u32| (i * 7 % 251) as u8)
        .collect();
    let want: Vec<u8> = input.iter().rev().copied().collect();
    assert_eq!(e.ecall(REVERSE, &input).unwrap(), want);
    // Big ocall payloads stream too, both ways.
    assert_eq!(e.ecall(USER_OCALL, &input).unwrap(), want);
    for n in [0, 1, 65535, 65536, 65537, 131072] {
        let v = vec![0xa5u8; n];
        assert_eq!(e.ecall(ECHO, &v).unwrap(), v, "size {n}");
    }
}

/// An input in pieces arrives as their concatenation, whatever the pieces' sizes against
/// the area (pieces cut across chunks, empty pieces, a piece larger than the area), on
/// both backends and through a switchless slot.
fn pieces_arrive_as_their_concatenation() {
    let whole: Vec<u8> = (0..(200 << 10) + 7)
        .map(|i: u32| (i * 13 % 251) as u8)
        .collect();
    // Cut points: inside the first chunk, at a chunk boundary (64 KiB), one byte either
    // side of it, twice at the same place (an empty piece), and a piece of two chunks.
    let cuts = [
        0,
        5,
        5,
        65535,
        65536,
        65537,
        70000,
        70000,
        200000,
        whole.len(),
    ];
    let pieces: Vec<&[u8]> = cuts.windows(2).map(|w| &whole[w[0]..w[1]]).collect();
    let sandbox = Enclave::builder("test")
        .slot_area(64 << 10)
        .start(&registry())
        .unwrap();
    let switchless = Enclave::builder("test")
        .switchless(SwitchlessConfig {
            // Generous, so that a worker woken from its futex still counts as a hit.
            retries_before_fallback: 50_000_000,
            ecalls: vec![REVERSE, ECHO],
            ..SwitchlessConfig::default()
        })
        .pool_area(64 << 10)
        .start(&registry())
        .unwrap();
    let want: Vec<u8> = whole.iter().rev().copied().collect();
    for e in [&start(Backend::Native), &sandbox, &switchless] {
        assert_eq!(e.ecall_pieces(REVERSE, &pieces).unwrap(), want);
        assert_eq!(e.ecall_pieces(ECHO, &[]).unwrap(), b"");
        assert_eq!(
            e.ecall_pieces(ECHO, &[b"", b"a", b"", b"bc"]).unwrap(),
            b"abc"
        );
    }
    // The switchless enclave's calls went through its pool's slots.
    let t = switchless.trace();
    let hits = |id| {
        let c = t.get(Direction::Ecall, id).unwrap();
        (c.switchless_hits, c.switchless_misses)
    };
    assert_eq!((hits(REVERSE), hits(ECHO)), ((1, 0), (2, 0)));
}

fn hammer_8_threads_4_tcs() {
    let e = Enclave::builder("test").tcs(4).start(&registry()).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let e = &e;
            s.spawn(move || {
                for i in 0..300u32 {
                    let msg = [t, (i % 256) as u8, (i / 256) as u8, 7];
                    let out = e
                        .ecall(if i % 3 == 0 { REVERSE } else { ECHO }, &msg)
                        .unwrap();
                    if i % 3 == 0 {
                        let mut r = msg;
                        r.reverse();
                        assert_eq!(out, r);
                    } else {
                        assert_eq!(out, msg);
                    }
                }
            });
        }
    });
    let t = e.trace();
    let n: u64 = t
        .calls
        .iter()
        .filter(|c| c.direction == Direction::Ecall)
        .map(|c| c.count)
        .sum();
    assert_eq!(n, 2400);
}

fn seccomp_denies_open_and_socket() {
    let native = start(Backend::Native);
    assert_eq!(native.ecall(OPEN, b"").unwrap(), b"opened");
    let e = start(Backend::Sandbox);
    match e.ecall(OPEN, b"") {
        Err(Error::Service { message, .. }) => {
            assert!(
                message.contains("open denied") && message.contains("Operation not permitted"),
                "{message}"
            )
        }
        other => panic!("open from inside the enclave: {other:?}"),
    }
    match e.ecall(SOCKET, b"") {
        Err(Error::Service { message, .. }) => {
            assert!(
                message.contains("socket denied") && message.contains("Operation not permitted"),
                "{message}"
            )
        }
        other => panic!("socket from inside the enclave: {other:?}"),
    }
    // The enclave survives the denials.
    assert_eq!(e.ecall(ECHO, b"still here").unwrap(), b"still here");
    // In kill mode the kernel kills the enclave and the host names the reason.
    let k = Enclave::builder("test")
        .seccomp(SeccompMode::Kill)
        .start(&registry())
        .unwrap();
    match k.ecall(OPEN, b"") {
        Err(Error::EnclaveLost { reason }) => assert!(reason.contains("seccomp"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

fn killed_enclave_fails_every_caller_within_a_second() {
    let e = Enclave::builder("test").tcs(4).start(&registry()).unwrap();
    let killed_at = std::sync::Mutex::new(None::<Instant>);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        // 4 calls in flight (sleeping 2.5 s inside) and 2 more waiting for a TCS slot.
        for _ in 0..6 {
            let e = &e;
            let killed_at = &killed_at;
            handles.push(s.spawn(move || {
                let r = e.ecall(SLEEP_ECHO, &[250]);
                let done = Instant::now();
                (r, done, killed_at)
            }));
        }
        std::thread::sleep(Duration::from_millis(200));
        *killed_at.lock().unwrap() = Some(Instant::now());
        e.kill();
        for h in handles {
            let (r, done, killed_at) = h.join().unwrap();
            let k = killed_at.lock().unwrap().unwrap();
            assert!(matches!(r, Err(Error::EnclaveLost { .. })), "{r:?}");
            let waited = done.saturating_duration_since(k);
            assert!(
                waited < Duration::from_secs(1),
                "caller released {waited:?} after the kill"
            );
        }
    });
    assert!(e.is_lost());
    match e.ecall(ECHO, b"x") {
        Err(Error::EnclaveLost { reason }) => assert!(reason.contains("signal 9"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // A crash from inside (abort) is the same.
    let c = start(Backend::Sandbox);
    assert!(matches!(
        c.ecall(ABORT, b""),
        Err(Error::EnclaveLost { .. })
    ));
    assert!(matches!(c.ecall(ECHO, b""), Err(Error::EnclaveLost { .. })));
}

fn panicking_service_is_an_error_for_that_call() {
    for backend in [Backend::Native, Backend::Sandbox] {
        let e = start(backend);
        match e.ecall(PANIC, b"") {
            Err(Error::Panicked { call_id, message }) => {
                assert_eq!(call_id, PANIC);
                assert!(message.contains("boom"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.ecall(ECHO, b"after").unwrap(), b"after");
    }
}

fn switchless_hits_with_idle_workers() {
    let e = Enclave::builder("test")
        .switchless(SwitchlessConfig {
            num_tworkers: 1,
            num_uworkers: 1,
            // Generous, so that a worker woken from its futex still counts as a hit.
            retries_before_fallback: 50_000_000,
            ecalls: vec![EMPTY, ECHO, NOOP_OCALL],
            ocalls: vec![enclave::ocall::builtin::NOOP],
            ..Default::default()
        })
        .start(&registry())
        .unwrap();
    for i in 0..200u32 {
        assert_eq!(e.ecall(ECHO, &i.to_le_bytes()).unwrap(), i.to_le_bytes());
    }
    // A switchless ecall making a switchless ocall.
    for _ in 0..50 {
        e.ecall(NOOP_OCALL, b"").unwrap();
    }
    // Big payloads stream through a switchless slot too.
    let big = vec![3u8; 300_000];
    assert_eq!(e.ecall(ECHO, &big).unwrap(), big);
    let t = e.trace();
    let echo = t.get(Direction::Ecall, ECHO).unwrap();
    assert_eq!((echo.switchless_hits, echo.switchless_misses), (201, 0));
    let noop = t
        .get(Direction::Ocall, enclave::ocall::builtin::NOOP)
        .unwrap();
    assert_eq!(noop.count, 50);
    assert_eq!((noop.switchless_hits, noop.switchless_misses), (50, 0));
    // Not switchless: regular, no hit or miss.
    e.ecall(REVERSE, b"ab").unwrap();
    let t = e.trace();
    let r = t.get(Direction::Ecall, REVERSE).unwrap();
    assert_eq!((r.switchless_hits, r.switchless_misses), (0, 0));
    drop(e);
    // Pool slots sized for the payloads: the same calls, in one chunk each way, and
    // payloads larger than even that slot still stream.
    let e = Enclave::builder("test")
        .switchless(SwitchlessConfig {
            retries_before_fallback: 50_000_000,
            ecalls: vec![ECHO],
            ..Default::default()
        })
        .pool_area(512 << 10)
        .start(&registry())
        .unwrap();
    let bigger = vec![5u8; (512 << 10) + 7];
    for payload in [&big[..], &bigger[..], b"x"] {
        assert_eq!(e.ecall(ECHO, payload).unwrap(), payload);
    }
    let t = e.trace();
    let echo = t.get(Direction::Ecall, ECHO).unwrap();
    assert_eq!((echo.switchless_hits, echo.switchless_misses), (3, 0));
}

fn switchless_misses_when_workers_are_busy() {
    let e = Enclave::builder("test")
        .switchless(SwitchlessConfig {
            num_tworkers: 1,
            // Long enough (some ms of spinning) for the worker to take the long call even
            // when the scheduler first gives its core to the caller for a time slice (with
            // 20,000 one run in twelve missed the long call in all ten attempts); short
            // enough that the five short calls give up well inside the long call's second.
            retries_before_fallback: 1_000_000,
            // The worker never sleeps, so it takes the long call at once.
            retries_before_sleep: u32::MAX,
            ecalls: vec![SLEEP_ECHO],
            ..Default::default()
        })
        .start(&registry())
        .unwrap();
    // The scheduler may still delay the worker past the caller's retries, in which case
    // the long call itself falls back and leaves the worker free; that attempt proves
    // nothing, so the scenario is repeated until the long call got the worker. An
    // implementation that never misses fails every attempt.
    let mut seen = Vec::new();
    for _ in 0..10 {
        let before = e.trace().get(Direction::Ecall, SLEEP_ECHO).cloned();
        std::thread::scope(|s| {
            let e = &e;
            // Occupies the only worker for ~1 s.
            let busy = s.spawn(move || e.ecall(SLEEP_ECHO, &[100]));
            std::thread::sleep(Duration::from_millis(100));
            for _ in 0..5 {
                assert_eq!(e.ecall(SLEEP_ECHO, &[0]).unwrap(), [0]);
            }
            assert_eq!(busy.join().unwrap().unwrap(), [100]);
        });
        let t = e.trace();
        let c = t.get(Direction::Ecall, SLEEP_ECHO).unwrap();
        let (count0, hits0, misses0) = before.map_or((0, 0, 0), |b| {
            (b.count, b.switchless_hits, b.switchless_misses)
        });
        let delta = (
            c.count - count0,
            c.switchless_hits - hits0,
            c.switchless_misses - misses0,
        );
        assert_eq!(delta.0, 6);
        assert_eq!(delta.1 + delta.2, 6, "every call is a hit or a miss");
        if delta == (6, 1, 5) {
            return;
        }
        seen.push(delta);
    }
    panic!("no attempt had 1 hit and 5 misses; (count, hits, misses): {seen:?}");
}

fn sealing_inside_the_enclave() {
    let dir = tempdir();
    let keys = format!("{dir}/keys");
    let start_named = |name: &str| {
        Enclave::builder(name)
            .sealing_key_dir(&keys)
            .start(&registry())
            .unwrap()
    };
    let a = start_named("test");
    let blob = a.ecall(SEAL, b"secret state").unwrap();
    drop(a);
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(format!("{keys}/platform-root.key"))
            .unwrap()
            .permissions()
            .mode()
    };
    assert_eq!(mode & 0o777, 0o600);
    // A fresh enclave with the same measurement unseals it.
    let b = start_named("test");
    assert_eq!(b.ecall(UNSEAL, &blob).unwrap(), b"secret state");
    let mut flipped = blob.clone();
    flipped[120] ^= 0x10;
    assert!(matches!(
        b.ecall(UNSEAL, &flipped),
        Err(Error::Service { .. })
    ));
    assert!(matches!(
        b.ecall(UNSEAL, &blob[..blob.len() - 1]),
        Err(Error::Service { .. })
    ));
    // Another service name is another measurement.
    let c = start_named("test-other");
    match c.ecall(UNSEAL, &blob) {
        Err(Error::Service { message, .. }) => {
            assert!(message.contains("wrong enclave"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The native backend of the same binary and service has the same measurement.
    let n = Enclave::builder("test")
        .backend(Backend::Native)
        .sealing_key_dir(&keys)
        .start(&registry())
        .unwrap();
    assert_eq!(n.ecall(UNSEAL, &blob).unwrap(), b"secret state");
    std::fs::remove_dir_all(dir).unwrap();
}

fn quoting_inside_the_enclave() {
    let dir = tempdir();
    let keys = format!("{dir}/keys");
    let start_named = |name: &str, backend: Backend, keys: &str| {
        Enclave::builder(name)
            .backend(backend)
            .sealing_key_dir(keys)
            .start(&registry())
            .unwrap()
    };
    let expected = Identity::of_current_exe("test", DEFAULT_SIGNER).unwrap();
    let sandbox = start_named("test", Backend::Sandbox, &keys);
    let platform = sandbox.platform_identity().unwrap();
    assert_eq!(
        platform,
        PlatformIdentity::load(std::path::Path::new(&keys)).unwrap()
    );
    let quote = sandbox.ecall(QUOTE, b"a nonce").unwrap();
    let q = attest::verify_quote(&quote, &platform, &expected.measurement).unwrap();
    assert_eq!(q.report_data, ReportData::from_prefix(b"a nonce").unwrap());
    assert_eq!(q.signer, expected.signer);
    // The native backend of the same binary and service quotes the same measurement.
    let native = start_named("test", Backend::Native, &keys);
    assert_eq!(native.platform_identity(), Some(platform));
    let nq = native.ecall(QUOTE, b"another").unwrap();
    assert_eq!(
        attest::verify(&nq, &platform, &expected.measurement).unwrap(),
        ReportData::from_prefix(b"another").unwrap()
    );
    // Another service name is another enclave.
    let other = start_named("test-other", Backend::Sandbox, &keys);
    let oq = other.ecall(QUOTE, b"a nonce").unwrap();
    assert!(matches!(
        attest::verify(&oq, &platform, &expected.measurement),
        Err(QuoteError::WrongMeasurement { .. })
    ));
    // Another platform (another root key): its quotes do not verify against ours.
    let elsewhere = start_named("test", Backend::Sandbox, &format!("{dir}/other-keys"));
    assert_ne!(elsewhere.platform_identity(), Some(platform));
    let eq = elsewhere.ecall(QUOTE, b"a nonce").unwrap();
    assert!(matches!(
        attest::verify(&eq, &platform, &expected.measurement),
        Err(QuoteError::WrongPlatform { .. })
    ));
    // Without platform keys there is no quote, and no platform identity.
    let bare = start(Backend::Sandbox);
    assert_eq!(bare.platform_identity(), None);
    match bare.ecall(QUOTE, b"x") {
        Err(Error::Service { message, .. }) => {
            assert!(message.contains("no platform keys"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(dir).unwrap();
}

fn start_up_errors() {
    let r = registry();
    assert!(matches!(
        Enclave::builder("nope").start(&r),
        Err(Error::UnknownService(_))
    ));
    match Enclave::builder("broken").init(b"xyz").start(&r) {
        Err(Error::Startup(m)) => assert!(m.contains("refused 3 bytes"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Enclave::builder("test").tcs(0).start(&r),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        Enclave::builder("test").tcs(33).start(&r),
        Err(Error::Config(_))
    ));
    for bytes in [0, 63, (1 << 30) + 1] {
        assert!(
            matches!(
                Enclave::builder("test").pool_area(bytes).start(&r),
                Err(Error::Config(_))
            ),
            "{bytes}"
        );
    }
}

fn transition_model_is_named_in_the_trace() {
    let m = enclave::TransitionModel::parse("hotcalls-ecall-warm").unwrap();
    for backend in [Backend::Native, Backend::Sandbox] {
        let e = Enclave::builder("test")
            .backend(backend)
            .transition_model(Some(m.clone()))
            .start(&registry())
            .unwrap();
        for _ in 0..64 {
            e.ecall(EMPTY, b"").unwrap();
        }
        let t = e.trace();
        assert_eq!(t.model.as_deref(), Some("hotcalls-ecall-warm"));
        let c = t.get(Direction::Ecall, EMPTY).unwrap();
        assert!(c.timed >= 1 && c.transition_ns > 0);
    }
}

/// Fastest of `n` calls of `f`, each timed alone: the least disturbed figure, so that a
/// lower bound on it holds on a loaded machine too.
fn fastest(n: usize, mut f: impl FnMut()) -> Duration {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// The least time `cycles` TSC cycles can take: no TSC ticks faster than 6 GHz.
fn at_least(cycles: u64) -> Duration {
    Duration::from_nanos(cycles / 6)
}

fn transition_model_adds_its_cycles_per_ecall() {
    const CYCLES: u64 = 100_000;
    let start = |model: Option<enclave::TransitionModel>| {
        Enclave::builder("test")
            .backend(Backend::Native)
            .transition_model(model)
            .start(&registry())
            .unwrap()
    };
    let plain = start(None);
    let modelled = start(Some(enclave::TransitionModel::cycles(CYCLES)));
    let p = fastest(50, || drop(plain.ecall(EMPTY, b"").unwrap()));
    let m = fastest(50, || drop(modelled.ecall(EMPTY, b"").unwrap()));
    // Two transitions per ecall (enter and exit).
    let added = m.saturating_sub(p);
    assert!(
        added >= at_least(2 * CYCLES),
        "the model added {added:?} per ecall, less than 2 x {CYCLES} cycles ({:?})",
        at_least(2 * CYCLES)
    );
}

fn switchless_hit_pays_no_modelled_transition() {
    // A modelled regular ecall costs at least 2 x 30 M cycles, 10 ms at 6 GHz; a switchless
    // hit crosses no transition and pays none of it.
    const CYCLES: u64 = 30_000_000;
    let e = Enclave::builder("test")
        .transition_model(Some(enclave::TransitionModel::cycles(CYCLES)))
        .switchless(SwitchlessConfig {
            num_tworkers: 1,
            retries_before_fallback: 50_000_000,
            ecalls: vec![EMPTY],
            ..Default::default()
        })
        .start(&registry())
        .unwrap();
    let hit = fastest(20, || drop(e.ecall(EMPTY, b"").unwrap()));
    let c = e.trace();
    let c = c.get(Direction::Ecall, EMPTY).unwrap();
    assert!(c.switchless_hits >= 1, "no switchless hit in 20 calls");
    assert!(
        hit < at_least(2 * CYCLES),
        "the fastest switchless call took {hit:?}, as long as a modelled transition pair"
    );
}

fn tempdir() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "enclave-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d.to_str().unwrap().to_owned()
}

/// A call that does not return within the enclave's call limit fails with `CallTimeout`
/// soon after the limit (not when the service finishes), and the enclave is ended: later
/// calls fail at once with `EnclaveLost`.
fn a_call_past_its_limit_fails_and_ends_the_enclave() {
    let e = Enclave::builder("test")
        .call_timeout(Some(Duration::from_millis(300)))
        .start(&registry())
        .unwrap();
    assert_eq!(e.ecall(SLEEP_ECHO, &[1]).unwrap(), vec![1]);
    let t = std::time::Instant::now();
    // 255 * 10 ms: far past the limit.
    match e.ecall(SLEEP_ECHO, &[255]) {
        Err(Error::CallTimeout { call_id, limit }) => {
            assert_eq!(call_id, SLEEP_ECHO);
            assert_eq!(limit, Duration::from_millis(300));
        }
        other => panic!("expected a call timeout, got {other:?}"),
    }
    let waited = t.elapsed();
    assert!(
        waited < Duration::from_millis(1500),
        "the caller waited {waited:?}"
    );
    assert!(matches!(
        e.ecall(ECHO, b"x"),
        Err(Error::EnclaveLost { .. })
    ));
}

fn main() {
    let reg = registry();
    enclave::child::run_if_enclave(&reg);

    let tests: &[(&str, fn())] = &[
        ("round_trips", round_trips),
        (
            "a_call_past_its_limit_fails_and_ends_the_enclave",
            a_call_past_its_limit_fails_and_ends_the_enclave,
        ),
        ("chunked_payloads", chunked_payloads),
        (
            "pieces_arrive_as_their_concatenation",
            pieces_arrive_as_their_concatenation,
        ),
        ("hammer_8_threads_4_tcs", hammer_8_threads_4_tcs),
        (
            "seccomp_denies_open_and_socket",
            seccomp_denies_open_and_socket,
        ),
        (
            "killed_enclave_fails_every_caller_within_a_second",
            killed_enclave_fails_every_caller_within_a_second,
        ),
        (
            "panicking_service_is_an_error_for_that_call",
            panicking_service_is_an_error_for_that_call,
        ),
        (
            "switchless_hits_with_idle_workers",
            switchless_hits_with_idle_workers,
        ),
        (
            "switchless_misses_when_workers_are_busy",
            switchless_misses_when_workers_are_busy,
        ),
        ("sealing_inside_the_enclave", sealing_inside_the_enclave),
        ("quoting_inside_the_enclave", quoting_inside_the_enclave),
        ("start_up_errors", start_up_errors),
        (
            "transition_model_is_named_in_the_trace",
            transition_model_is_named_in_the_trace,
        ),
        (
            "transition_model_adds_its_cycles_per_ecall",
            transition_model_adds_its_cycles_per_ecall,
        ),
        (
            "switchless_hit_pays_no_modelled_transition",
            switchless_hit_pays_no_modelled_transition,
        ),
    ];
    enclave::testing::run(tests);
}
