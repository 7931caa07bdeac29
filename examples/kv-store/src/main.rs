//! The `kv-store` binary: ccbench's whole command line, with the `kv-store` scenario listed
//! beside the built-in ones and its service available to the sandboxed enclave.

ccbench::main!(
    scenarios = [kv_store::KvStore],
    services = kv_store::register
);
