//! `cargo bench -p garble`: per-gate garbling costs, AES-128 garbling rate
//! and two-party runs over loopback TCP, under each garbling hash in turn
//! (`HASH=mitccrh` or `HASH=fixed-key` for one). Prints medians of several
//! runs.

use std::time::Instant;

use garble::hash::{Backend, Block, GcHash};
use garble::microbench;
use garble::program::Program;
use garble::scheme::Scheme;
use garble::{GateKind, library};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The environment variable `name` as a number, or `default` when unset or not one.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Sections to run: every argument that is not a flag names one (`baseot`,
/// `gates`, `schemes`, `onepass`, `aes`, `hash`, `single`, `bulk`); none means
/// all.
fn wanted(section: &str) -> bool {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    args.is_empty() || args.iter().any(|a| a == section)
}

fn main() {
    // `BACKEND=portable` measures the portable AES on any CPU.
    let backend = match std::env::var("BACKEND").as_deref() {
        Ok("portable") => Backend::Portable,
        _ => Backend::detect(),
    };
    println!("backend: {backend:?}");
    if wanted("baseot") {
        base_ots();
    }
    let hashes: Vec<GcHash> = match std::env::var("HASH") {
        Ok(h) => vec![h.parse().expect("HASH: mitccrh or fixed-key")],
        Err(_) => GcHash::ALL.to_vec(),
    };
    for h in hashes {
        println!("garbling hash: {h}");
        if wanted("gates") {
            gates(backend, h);
        }
        if wanted("schemes") {
            schemes(backend, h);
        }
        if wanted("onepass") {
            one_pass(backend, h);
        }
        if wanted("aes") {
            aes_garble(backend, h);
        }
        if wanted("hash") {
            hash(backend, h);
        }
        if wanted("single") {
            single(h);
        }
        if wanted("bulk") {
            bulk(h);
        }
    }
}

fn gates(backend: Backend, h: GcHash) {
    let portable = backend == Backend::Portable;
    for (kind, n) in [
        (GateKind::And, if portable { 1 << 16 } else { 1 << 20 }),
        (GateKind::Xor, 1 << 22),
        (GateKind::Inv, 1 << 22),
    ] {
        let n = env_usize("GATES", n);
        let samples = env_usize("SAMPLES", 7);
        let mut g = Vec::new();
        let mut e = Vec::new();
        for _ in 0..samples {
            let t = microbench::gate_timing(kind, n, backend, h).expect("backend");
            g.push(t.garble_ns());
            e.push(t.evaluate_ns());
        }
        let (gmin, emin) = (min(&g), min(&e));
        let block = n.clamp(1, microbench::GATE_BLOCK);
        println!(
            "{:>4}: garble {:6.2} ns/gate (min {:6.2}), evaluate {:6.2} ns/gate (min {:6.2}); \
             median of {samples} samples of {n} gates, each {} garblings then evaluations \
             of one {block}-gate block (gate list and tables stay in the cache)",
            kind.name(),
            median(g),
            gmin,
            median(e),
            emin,
            n.div_ceil(block),
        );
    }
}

/// Three-halves against half-gates per AND gate: `PAIRS` (default 9) pairs of
/// `gate_timing_with` runs (`GATES` AND gates each, default 2^22: 64 repetitions
/// of one 65,536-gate block), half-gates then three-halves in each pair, in the
/// same process, so that a pair's two figures see about the same load. Prints
/// each scheme's garble and evaluate thread-CPU ns per AND (median and min),
/// the three-halves / half-gates ratio of each pair (min..max and median), and
/// the wall-clock medians (preemption included).
fn schemes(backend: Backend, h: GcHash) {
    let n = env_usize("GATES", 1 << 22);
    let pairs = env_usize("PAIRS", 9);
    let time =
        |s: Scheme| microbench::gate_timing_with(GateKind::And, n, backend, h, s).expect("backend");
    // One untimed pair first: page faults, frequency ramp, cold caches.
    let _ = (time(Scheme::HalfGates), time(Scheme::ThreeHalves));
    let mut t = [Vec::new(), Vec::new()];
    for _ in 0..pairs {
        for (i, s) in [Scheme::HalfGates, Scheme::ThreeHalves]
            .into_iter()
            .enumerate()
        {
            t[i].push(time(s));
        }
    }
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let col = |i: usize, f: fn(&microbench::GateTiming) -> f64| -> Vec<f64> {
        t[i].iter().map(f).collect()
    };
    for (i, name) in ["half-gates", "three-halves"].into_iter().enumerate() {
        let (g, e) = (
            col(i, microbench::GateTiming::garble_cpu_ns),
            col(i, microbench::GateTiming::evaluate_cpu_ns),
        );
        println!(
            "{name:>12} AND: garble {:6.2} ns (min {:6.2}), evaluate {:6.2} ns (min {:6.2}); \
             wall medians {:6.2}, {:6.2}",
            median(g.clone()),
            min(&g),
            median(e.clone()),
            min(&e),
            median(col(i, microbench::GateTiming::garble_ns)),
            median(col(i, microbench::GateTiming::evaluate_ns)),
        );
    }
    for (what, f) in [
        (
            "garble",
            microbench::GateTiming::garble_cpu_ns as fn(&_) -> f64,
        ),
        ("evaluate", microbench::GateTiming::evaluate_cpu_ns),
    ] {
        let r: Vec<f64> = col(1, f)
            .iter()
            .zip(col(0, f))
            .map(|(a, b)| a / b)
            .collect();
        println!(
            "three-halves / half-gates, {what:<8}: {:.3}..{:.3}, median {:.3}",
            min(&r),
            max(&r),
            median(r.clone()),
        );
    }
    println!(
        "    ({pairs} pairs, half-gates then three-halves, {n} AND gates each: blocks of {} \
         gates garbled then evaluated; thread CPU time per AND)",
        n.clamp(1, microbench::GATE_BLOCK)
    );
}

/// Free gates as `gate_timing` measured them before it repeated a
/// cache-resident block: one pass over one program of 4M gates, whose gate
/// list (48 MB) streams from memory.
fn one_pass(backend: Backend, h: GcHash) {
    use garble::gc;
    use garble::hash::{Hasher, Prg};
    let hasher = Hasher::of(h, Block(1), backend).expect("backend");
    for kind in [GateKind::Xor, GateKind::Inv] {
        let n = 1 << 22;
        let prog = microbench::synthetic(kind, n);
        let mut prg = Prg::from_seed([0x5a; 16]);
        let mut delta = prg.block();
        delta.0 |= 1;
        let mut g = vec![Block::ZERO; prog.label_capacity()];
        prg.fill(&mut g);
        let (mut gs, mut es) = (Vec::new(), Vec::new());
        for _ in 0..7 {
            let mut e = g.clone();
            let t0 = Instant::now();
            let _: Result<(), ()> =
                gc::garble(&prog, &hasher, delta, &mut g, &mut 0, &mut |_| Ok(()));
            gs.push(t0.elapsed().as_nanos() as f64 / n as f64);
            let t0 = Instant::now();
            let _: Result<(), ()> = gc::evaluate(&prog, &hasher, &mut e, &mut 0, &mut |_| Ok(()));
            es.push(t0.elapsed().as_nanos() as f64 / n as f64);
        }
        println!(
            "{:>4} one pass over {n} gates: garble {:6.2} ns/gate, evaluate {:6.2} ns/gate (median of 7)",
            kind.name(),
            median(gs),
            median(es)
        );
    }
}

fn aes_garble(backend: Backend, h: GcHash) {
    let aes = Program::compile(&library::aes128());
    let mut rates = Vec::new();
    let reps = if backend == Backend::Portable { 4 } else { 200 };
    for _ in 0..7 {
        let t = microbench::garble_only(&aes, reps, backend, h).expect("backend");
        rates.push((aes.and_gates() as f64 * reps as f64) / t.as_secs_f64() / 1e6);
    }
    let best = rates.iter().copied().fold(0.0, f64::max);
    println!(
        "AES-128 garbling (no network): {:.1} M AND/s (median of 7, best {best:.1}; \
         a sample is {reps} garblings of {} AND gates)",
        median(rates),
        aes.and_gates()
    );
}

fn hash(backend: Backend, kind: GcHash) {
    let h = garble::hash::Hasher::of(kind, Block(1), backend).expect("backend");
    let mut xs = [garble::hash::Block(7); 32];
    let ts = [garble::hash::Block(9); 32];
    let t0 = Instant::now();
    let iters = if backend == Backend::Portable {
        20_000
    } else {
        1_000_000
    };
    for _ in 0..iters {
        h.hash(&mut xs, &ts);
        std::hint::black_box(&mut xs);
    }
    println!(
        "hash: {:.2} ns/block",
        t0.elapsed().as_nanos() as f64 / (iters * 32) as f64
    );
}

fn single(h: GcHash) {
    let aes = library::aes128();
    let mut single = Vec::new();
    for _ in 0..9 {
        let r = loopback(&aes, 1, h);
        single.push(r.total.as_secs_f64() * 1e3);
    }
    println!(
        "AES-128 2PC over loopback TCP, one evaluation incl. OT: {:.2} ms (median of 9)",
        median(single)
    );
    let r = loopback(&aes, 1, h);
    for s in &r.stages {
        println!(
            "    {:<12} {:>9.3} ms  sent {:>8} B  received {:>8} B",
            s.stage.name(),
            s.time.as_secs_f64() * 1e3,
            s.bytes_sent,
            s.bytes_received
        );
    }
}

/// The 128 base OTs of a session's set-up (`garble::ot`), the receiver in this
/// thread and the sender in another, over loopback TCP: `RUNS` (default 15)
/// runs after one to warm up. Prints the medians and minima of the receiver's
/// wall and thread CPU time and of the sender's thread CPU time, and the bytes
/// each side sent. Independent of the garbling hash: run once.
fn base_ots() {
    use garble::channel::{Channel, TcpChannel, thread_cpu};
    use garble::hash::Prg;
    use garble::ot::{KAPPA, base_receive, base_send};
    use std::net::TcpListener;
    use std::time::Duration;
    let runs = env_usize("RUNS", 15);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (mut wall, mut rcpu, mut scpu) = (Vec::new(), Vec::new(), Vec::new());
    let mut bytes = (0, 0);
    for i in 0..=runs {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("address").to_string();
        let seed = [i as u8; 16];
        let sender = std::thread::spawn(move || {
            let mut ch = TcpChannel::connect(&addr, Duration::from_secs(10)).expect("connect");
            let c0 = thread_cpu();
            base_send(&mut ch, KAPPA, &mut Prg::from_seed(seed)).expect("base OTs");
            (thread_cpu() - c0, ch.bytes_sent())
        });
        let mut ch = TcpChannel::accept(&l, Duration::from_secs(10)).expect("accept");
        let choices: Vec<bool> = (0..KAPPA).map(|j| (j * 7 + i) % 3 == 0).collect();
        let (t0, c0) = (Instant::now(), thread_cpu());
        base_receive(&mut ch, &choices, &mut Prg::from_seed([!(i as u8); 16])).expect("base OTs");
        let (w, c) = (t0.elapsed(), thread_cpu() - c0);
        let (s, sent) = sender.join().expect("sender");
        if i > 0 {
            wall.push(ms(w));
            rcpu.push(ms(c));
            scpu.push(ms(s));
        }
        bytes = (ch.bytes_sent(), sent);
    }
    println!(
        "{KAPPA} base OTs over loopback TCP ({runs} runs): receiver wall {:.2} ms (min {:.2}), \
         receiver CPU {:.2} ms (min {:.2}), sender CPU {:.2} ms (min {:.2}); \
         sent {} B by the receiver, {} B by the sender",
        median(wall.clone()),
        min(&wall),
        median(rcpu.clone()),
        min(&rcpu),
        median(scpu.clone()),
        min(&scpu),
        bytes.0,
        bytes.1,
    );
}

fn stage_line(r: &garble::session::SessionReport) -> String {
    let parts: Vec<String> = r
        .stages
        .iter()
        .map(|s| format!("{} {:.1} ms", s.stage.name(), s.time.as_secs_f64() * 1e3))
        .collect();
    parts.join(", ")
}

fn bulk(h: GcHash) {
    let opts = garble::session::SessionOptions {
        hash: h,
        ..Default::default()
    };
    for (name, c, n) in [
        ("AES-128", library::aes128(), 400usize),
        ("SHA-256", library::sha256_compress(), 100),
        ("mul1024", library::mul1024(), 5),
    ] {
        if std::env::var("BULK").is_ok_and(|b| b != name) {
            continue;
        }
        let mut rates = Vec::new();
        let mut stage_rates = Vec::new();
        let mut last = None;
        for _ in 0..3 {
            let r = microbench::loopback_2pc(&c, n, &opts).expect("loopback 2PC");
            assert_eq!(r.table_bytes_per_and(), 32.0);
            rates.push(r.and_per_s() / 1e6);
            stage_rates.push(r.garble_stage_and_per_s() / 1e6);
            last = Some(r);
        }
        println!(
            "{name} bulk 2PC over loopback TCP ({n} evaluations): {:.1} M AND/s (median of 3; \
             Garble stage alone {:.1} M AND/s)",
            median(rates),
            median(stage_rates)
        );
        if let Some(r) = last {
            println!("    garbler:   {}", stage_line(&r.garbler));
            println!("    evaluator: {}", stage_line(&r.evaluator));
        }
    }
}

fn loopback(c: &garble::Circuit, n: u64, h: GcHash) -> garble::session::SessionReport {
    let opts = garble::session::SessionOptions {
        hash: h,
        ..Default::default()
    };
    let r = microbench::loopback_2pc(c, n as usize, &opts).expect("loopback 2PC");
    assert_eq!(r.table_bytes_per_and(), 32.0);
    r.garbler
}
