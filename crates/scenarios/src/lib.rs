//! ccbench's experiments: one module each, their presets, and the registry the cli resolves
//! names against. A scenario wires the engines (`enclave`, `garble`) to the harness
//! (`measure`) through the public scenario layer (`harness`), exactly as a user's own
//! scenario does, and emits records through its context; it never parses a command line and
//! never prints.

pub mod crypto;
pub mod dptree;
pub mod ed25519_2pc;
pub mod gc2pc;
pub mod sealing;
pub mod tls_middlebox;
pub mod transitions;
pub mod txpipeline;
pub mod x509;

use harness::{Catalog, Scenario};

/// The transition-cost model the enclave scenarios accept (`--transition-cycles`).
pub use enclave::TransitionModel;
/// The enclave allocator: binaries that run scenarios install it as their global allocator
/// (`x509` switches its enclave process to a single-lock heap through it).
pub use enclave::alloc::EnclaveAlloc;

/// Every scenario, in the order `all` runs them.
pub fn registry() -> &'static [&'static dyn Scenario] {
    &[
        &crypto::Crypto,
        &transitions::TransitionsScenario,
        &sealing::SealingScenario,
        &gc2pc::Gc2pc,
        &ed25519_2pc::Ed25519Pc,
        &txpipeline::TxPipeline,
        &x509::X509,
        &dptree::DpTree,
        &tls_middlebox::TlsMiddlebox,
    ]
}

/// The enclave services of every scenario. The sandbox backend re-executes the running
/// binary as the enclave, which looks its service up here.
pub fn enclave_services() -> enclave::Registry {
    let r = enclave::Registry::new();
    let r = transitions::register(r);
    let r = txpipeline::register(r);
    let r = dptree::register(r);
    let r = sealing::register(r);
    let r = tls_middlebox::register(r);
    x509::register(r)
}

/// Becomes the enclave (constructing its service from `services`: the built-in ones of
/// [`enclave_services`], plus a user's), or the evaluator party of a `gc-2pc` session or an
/// `ed25519-2pc` signature, and never returns when this process was started as one; returns
/// at once otherwise. A binary that runs scenarios calls this first thing in `main`: those
/// scenarios re-execute it.
pub fn run_if_child(services: &enclave::Registry) {
    enclave::child::run_if_enclave(services);
    gc2pc::run_if_evaluator();
    ed25519_2pc::run_if_evaluator();
}

/// The built-in scenarios as a [`Catalog`] (their names are unique by construction).
pub fn catalog() -> Catalog {
    Catalog::new(registry().iter().copied()).unwrap_or_else(|e| unreachable!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_names_are_unique() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cat = Catalog::new(registry().iter().copied()).unwrap();
        assert_eq!(
            cat.resolve(&names(&["all"])).unwrap().len(),
            registry().len()
        );
        let Err(err) = cat.resolve(&names(&["crypto", "nope"])) else {
            panic!("an unknown name resolved")
        };
        assert!(
            err.to_string()
                .contains("known scenarios: crypto, transitions")
        );
    }
}
