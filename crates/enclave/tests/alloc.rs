//! The switchable enclave allocator as a real global allocator: switching, the heap's
//! counters, exhaustion falling back to the system allocator (and counted), switching back,
//! and aws-lc's C allocations routed through it.
//!
//! The mode is process-wide, so these steps run in order on one thread, in their own test
//! binary (`harness = false`), with `EnclaveAlloc` installed as the global allocator.

use enclave::alloc::{self, EnclaveAlloc, Mode};

#[global_allocator]
static ALLOC: EnclaveAlloc = EnclaveAlloc;

fn routes_aws_lc_before_first_use() {
    // Must come first: aws-lc takes its hooks only before its first allocation.
    assert!(alloc::route_aws_lc());
    assert!(alloc::aws_lc_routed());
    // A second attempt is refused by aws-lc, and harmless.
    assert!(!alloc::route_aws_lc());
}

fn system_mode_serves_from_the_system() {
    assert_eq!(alloc::mode(), Mode::System);
    let before = alloc::stats();
    let v: Vec<u8> = (0..=255).collect();
    assert_eq!(v.iter().map(|&b| u32::from(b)).sum::<u32>(), 255 * 128);
    assert_eq!(alloc::stats(), before);
}

fn single_lock_serves_rust_and_c_from_the_heap() {
    let held_from_system = vec![7u8; 1000];
    // Replaces the empty 16 KiB heap of the previous step, over the same region.
    alloc::use_single_lock(1 << 20).unwrap();
    assert_eq!(alloc::mode(), Mode::SingleLock);
    let s0 = alloc::stats();
    let over = alloc::over_budget_events();
    assert_eq!(s0.capacity, 1 << 20);
    let v = vec![1u64; 1000];
    let s1 = alloc::stats();
    assert!(s1.rust_allocs > s0.rust_allocs);
    assert!(s1.in_use >= s0.in_use + 8000);
    // Growing a system block while switched moves it into the heap, contents intact.
    let mut grown = held_from_system;
    grown.resize(5000, 9);
    assert_eq!(&grown[..1000], &[7u8; 1000][..]);
    assert_eq!(&grown[1000..], &[9u8; 4000][..]);
    // aws-lc's C code now allocates from the heap too (RSA key parsing mallocs).
    let key =
        aws_lc_rs::rsa::PrivateDecryptingKey::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    drop(key);
    let s2 = alloc::stats();
    assert!(s2.c_allocs > s1.c_allocs, "{s2:?}");
    drop(v);
    drop(grown);
    assert_eq!(alloc::over_budget_events(), over);
    alloc::use_system();
    assert_eq!(alloc::mode(), Mode::System);
}

fn exhaustion_falls_back_and_counts() {
    // The first switch reserves the region for the life of the process (1 MiB); later heaps
    // may be smaller, not larger.
    alloc::use_single_lock(1 << 20).unwrap();
    alloc::use_system();
    assert!(matches!(
        alloc::use_single_lock(2 << 20),
        Err(alloc::AllocError::Reserved { .. })
    ));
    // Nothing lives in the heap yet (aws-lc's global state, allocated in a later step, will
    // stay there for the life of the process), so a tiny heap can replace it.
    alloc::use_single_lock(8192).unwrap();
    let before = alloc::over_budget_events();
    let big = vec![3u8; 64 << 10];
    assert!(alloc::over_budget_events() > before);
    assert!(big.iter().all(|&b| b == 3));
    let small = Box::new(5u32);
    alloc::use_system();
    // Memory of either origin is freed correctly after switching back.
    drop(big);
    drop(small);
    assert_eq!(alloc::stats().in_use, 0);
    // A heap that still holds something cannot be resized under it.
    alloc::use_single_lock(8192).unwrap();
    let held = Box::new([0u8; 64]);
    alloc::use_system();
    assert!(matches!(
        alloc::use_single_lock(16384),
        Err(alloc::AllocError::Busy { .. })
    ));
    drop(held);
    alloc::use_single_lock(16384).unwrap();
    alloc::use_system();
}

fn threads_share_the_heap() {
    alloc::use_single_lock(1 << 20).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let mut keep = Vec::new();
                for i in 0..2000u64 {
                    keep.push(vec![t ^ i; (i % 17) as usize + 1]);
                    if keep.len() > 20 {
                        let v = keep.remove(0);
                        assert!(v.iter().all(|&x| x == v[0]));
                    }
                }
            });
        }
    });
    alloc::use_system();
}

fn main() {
    let tests: [(&str, fn()); 5] = [
        (
            "routes_aws_lc_before_first_use",
            routes_aws_lc_before_first_use,
        ),
        (
            "system_mode_serves_from_the_system",
            system_mode_serves_from_the_system,
        ),
        (
            "exhaustion_falls_back_and_counts",
            exhaustion_falls_back_and_counts,
        ),
        (
            "single_lock_serves_rust_and_c_from_the_heap",
            single_lock_serves_rust_and_c_from_the_heap,
        ),
        ("threads_share_the_heap", threads_share_the_heap),
    ];
    enclave::testing::run(&tests);
}
