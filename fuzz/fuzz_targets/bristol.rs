//! Fuzz the Bristol readers: any input must give a circuit or an error,
//! never a panic, and whatever parses must validate, evaluate and survive a
//! write/read round trip; small circuits must also compile, and their
//! compiled and garbled evaluations must equal the plain one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = garble::bristol::parse_old(&text);
    if let Ok(c) = garble::bristol::parse(&text) {
        assert!(c.validate().is_ok());
        if c.num_wires() <= 1 << 16 {
            let g = vec![false; c.garbler_input_bits()];
            let e = vec![true; c.evaluator_input_bits()];
            assert!(c.eval(&g, &e).is_ok());
            let again = garble::bristol::parse_fashion(&garble::bristol::to_fashion_string(&c));
            assert!(again.is_ok());
            if c.gates().len() <= 1 << 12 {
                let want = c.eval(&g, &e).expect("lengths match");
                let p = garble::program::Program::compile(&c);
                assert_eq!(p.eval_plain(&g, &e), want);
                let h = garble::hash::Hasher::new();
                let mut prg = garble::hash::Prg::from_seed([9; 16]);
                let (got, bytes) = garble::gc::simulate(&p, &h, &mut prg, &g, &e);
                assert_eq!(got, want);
                assert_eq!(bytes as u64, 32 * c.stats().and_gates());
            }
        }
    }
});
