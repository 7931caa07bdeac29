//! Fuzzes the decoding of the scenarios' typed ecall messages through their one codec
//! (`scenarios::codec::decode`): no input may panic, and whatever decodes re-encodes to the
//! very bytes it came from (no trailing bytes ignored, no two encodings of one message).
#![no_main]

use libfuzzer_sys::fuzz_target;
use scenarios::codec::{Decode, Encode, decode};
use scenarios::dptree::service::InitRequest;
use scenarios::dptree::tree::TreeError;
use scenarios::txpipeline::proto::{SetupRequest, StepRequest, TxFault, TxOk, TxRequest};
use scenarios::x509::{LoadRequest, LoopRequest};

fn round_trip<T: Decode + Encode>(what: &'static str, data: &[u8]) {
    if let Ok(v) = decode::<T>(what, data) {
        assert_eq!(v.encode(), data, "{what} re-encodes differently");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 9 {
        0 => round_trip::<InitRequest>("init", rest),
        1 => round_trip::<Result<Vec<f64>, TreeError>>("add_batch reply", rest),
        2 => round_trip::<LoadRequest>("load", rest),
        3 => round_trip::<LoopRequest>("loop", rest),
        4 => round_trip::<SetupRequest>("setup", rest),
        5 => round_trip::<TxRequest>("tx", rest),
        6 => round_trip::<StepRequest>("step", rest),
        7 => round_trip::<Result<TxOk, TxFault>>("tx reply", rest),
        _ => {
            let _ = scenarios::x509::AllocReport::decode(rest);
        }
    }
});
