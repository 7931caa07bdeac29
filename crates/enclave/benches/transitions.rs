//! Boundary microbenchmarks: `cargo bench -p enclave`.
//!
//! Medians over batches, per call, with `std::time::Instant`. The enclave re-executes this
//! benchmark binary, hence `run_if_enclave` at the top of `main`.

use std::sync::Arc;
use std::time::Instant;

use enclave::{Backend, Ctx, Enclave, Registry, Service, ServiceError, SwitchlessConfig};

struct Bench;

impl Service for Bench {
    fn ecall(&self, id: u32, input: &[u8], ctx: &mut Ctx<'_>) -> Result<Vec<u8>, ServiceError> {
        match id {
            0 => Ok(Vec::new()),
            1 => Ok(input.to_vec()),
            2 => {
                ctx.noop()?;
                Ok(Vec::new())
            }
            other => Err(ServiceError::UnknownCall(other)),
        }
    }
}

fn registry() -> Registry {
    Registry::new().with("bench", |_| Ok(Arc::new(Bench)))
}

/// Median ns per call over `batches` batches of `per_batch` calls.
fn median_ns(batches: usize, per_batch: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..per_batch {
        f();
    }
    let mut v: Vec<f64> = (0..batches)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            t.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let reg = registry();
    enclave::child::run_if_enclave(&reg);
    // `cargo bench -p enclave --bench transitions -- native` runs only the groups whose
    // name contains one of the arguments (native, sandbox, switchless).
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want =
        |group: &str| filters.is_empty() || filters.iter().any(|f| group.contains(f.as_str()));

    if want("native") {
        native_group(&reg);
    }
    if want("sandbox") {
        sandbox_group(&reg);
    }
    if want("switchless") {
        switchless_group(&reg);
    }
}

fn native_group(reg: &Registry) {
    let native = Enclave::builder("bench")
        .backend(Backend::Native)
        .start(reg)
        .unwrap();
    // The output is consumed by its fields: `black_box(vec)` of the whole `Vec` makes the
    // compiler spill the `Result` with 8-byte stores and copy the `Vec` back with a 16-byte
    // load, a store-forwarding stall of several ns in this loop, not in the call. The
    // second line keeps that form for comparison with older numbers.
    let ns = median_ns(21, 1_000_000, || {
        let out = native.ecall(0, std::hint::black_box(&[])).unwrap();
        std::hint::black_box((out.as_ptr(), out.len()));
    });
    println!("native empty ecall:              {ns:9.1} ns");
    let ns = median_ns(21, 1_000_000, || {
        std::hint::black_box(native.ecall(0, std::hint::black_box(&[])).unwrap());
    });
    println!("  (as black_box(ecall().unwrap())) {ns:7.1} ns");
}

fn sandbox_group(reg: &Registry) {
    let sandbox = Enclave::builder("bench").start(reg).unwrap();
    let ns = median_ns(21, 20_000, || {
        sandbox.ecall(0, &[]).unwrap();
    });
    println!("sandbox empty ecall round trip:  {ns:9.1} ns");
    let ns = median_ns(21, 10_000, || {
        sandbox.ecall(2, &[]).unwrap();
    });
    println!("sandbox ecall + empty ocall:     {ns:9.1} ns");

    let input = vec![0x5au8; 1 << 20];
    let ns = median_ns(11, 50, || {
        let out = sandbox.ecall(1, &input).unwrap();
        assert_eq!(out.len(), input.len());
    });
    println!(
        "sandbox 1 MiB in + 1 MiB out:    {:9.1} us  = {:.2} GB/s of payload",
        ns / 1000.0,
        2.0 * input.len() as f64 / ns
    );
}

fn switchless_group(reg: &Registry) {
    for workers in [1u32, 2] {
        let sw = Enclave::builder("bench")
            .switchless(SwitchlessConfig {
                num_tworkers: workers,
                num_uworkers: workers,
                ecalls: vec![0, 2],
                ocalls: vec![enclave::ocall::builtin::NOOP],
                ..Default::default()
            })
            .start(reg)
            .unwrap();
        let ns = median_ns(21, 20_000, || {
            sw.ecall(0, &[]).unwrap();
        });
        let ns2 = median_ns(21, 10_000, || {
            sw.ecall(2, &[]).unwrap();
        });
        let t = sw.trace();
        let c = t.get(enclave::Direction::Ecall, 0).unwrap();
        println!(
            "switchless ({workers} worker(s)) empty ecall: {ns:9.1} ns   (+switchless ocall {ns2:.1} ns)  hits {} misses {}",
            c.switchless_hits, c.switchless_misses
        );
    }
}
