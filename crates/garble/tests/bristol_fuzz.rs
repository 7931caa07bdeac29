//! The Bristol reader must return errors, never panic, on garbage and on
//! mutations of valid files.

use garble::bristol;
use proptest::prelude::*;

const VALID: &str = "6 9\n2 2 1\n1 2\n\n2 1 0 1 3 AND\n1 1 3 4 INV\n2 1 4 2 5 XOR\n1 1 1 6 EQ\n2 1 5 6 7 XOR\n1 1 5 8 EQW\n";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = bristol::parse(&text);
        let _ = bristol::parse_old(&text);
    }

    #[test]
    fn token_soup_never_panics(toks in proptest::collection::vec(
        prop_oneof![
            Just("XOR".to_string()), Just("AND".to_string()), Just("INV".to_string()),
            Just("EQ".to_string()), Just("EQW".to_string()), Just("MAND".to_string()),
            Just("\n".to_string()), (0u64..12).prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
        ], 0..60)) {
        let text = toks.join(" ");
        let _ = bristol::parse(&text);
        let _ = bristol::parse_fashion(&text);
    }

    #[test]
    fn mutations_never_panic(pos in 0usize..VALID.len(), byte in any::<u8>(), del in any::<bool>()) {
        let mut b = VALID.as_bytes().to_vec();
        if del { b.remove(pos); } else { b[pos] = byte; }
        let text = String::from_utf8_lossy(&b);
        if let Ok(c) = bristol::parse(&text) {
            // Whatever parses must validate and evaluate.
            prop_assert!(c.validate().is_ok());
            let g = vec![false; c.garbler_input_bits()];
            let e = vec![true; c.evaluator_input_bits()];
            prop_assert!(c.eval(&g, &e).is_ok());
        }
    }
}

#[test]
fn valid_sample_parses() {
    let c = bristol::parse(VALID).unwrap();
    assert_eq!(c.output_bits(), 2);
}

#[test]
fn library_circuits_round_trip_through_bristol() {
    for name in ["aes128", "sha256", "mul64"] {
        let c = garble::library::by_name(name).unwrap();
        let text = bristol::to_fashion_string(&c);
        let back = bristol::parse(&text).unwrap();
        assert_eq!(back.gates(), c.gates());
        assert_eq!(back.stats(), c.stats());
    }
}
