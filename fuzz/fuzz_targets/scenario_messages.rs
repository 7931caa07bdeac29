//! Fuzzes the decoding of the scenarios' typed ecall messages through their one codec
//! (`harness::codec::decode`): no input may panic, and whatever decodes re-encodes to the
//! very bytes it came from (no trailing bytes ignored, no two encodings of one message).
//! The middlebox enclave reads its records in place (`RecordView`): that reading must
//! accept exactly what the owned decoding accepts, with the same records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use harness::codec::{Decode, Encode, decode};
use scenarios::dptree::service::InitRequest;
use scenarios::dptree::tree::TreeError;
use scenarios::tls_middlebox::service::{
    BatchVerdicts, EngineKey, EngineLimits, FlowInfo, FlowReply, KeyShare, MiddleboxError,
    RecordBatch, RecordIn, RecordView, Ruleset, StartTls, TlsRandoms, Verdict,
};
use scenarios::txpipeline::proto::{SetupRequest, StepRequest, TxFault, TxOk, TxRequest};
use scenarios::x509::{LoadRequest, LoopRequest};

fn round_trip<T: Decode + Encode>(what: &'static str, data: &[u8]) {
    if let Ok(v) = decode::<T>(what, data) {
        assert_eq!(v.encode(), data, "{what} re-encodes differently");
    }
}

fn same_record(data: &[u8]) {
    let owned = decode::<RecordIn>("record", data);
    let placed = RecordView::decode("record", data);
    match (&owned, &placed) {
        (Ok(o), Ok(p)) => assert_eq!(RecordView::from(o), *p),
        (Err(_), Err(_)) => {}
        _ => panic!("record: owned {owned:?}, in place {placed:?}"),
    }
}

fn same_batch(data: &[u8]) {
    let owned = decode::<RecordBatch>("record batch", data);
    let placed = RecordView::decode_batch("record batch", data);
    match (&owned, &placed) {
        (Ok(o), Ok(p)) => assert_eq!(o.records.iter().map(RecordView::from).collect::<Vec<_>>(), *p),
        (Err(_), Err(_)) => {}
        _ => panic!("batch: owned {owned:?}, in place {placed:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 21 {
        0 => round_trip::<InitRequest>("init", rest),
        1 => round_trip::<Result<Vec<f64>, TreeError>>("add_batch reply", rest),
        2 => round_trip::<LoadRequest>("load", rest),
        3 => round_trip::<LoopRequest>("loop", rest),
        4 => round_trip::<SetupRequest>("setup", rest),
        5 => round_trip::<TxRequest>("tx", rest),
        6 => round_trip::<StepRequest>("step", rest),
        7 => round_trip::<Result<TxOk, TxFault>>("tx reply", rest),
        9 => round_trip::<EngineLimits>("engine limits", rest),
        10 => round_trip::<Ruleset>("rule set", rest),
        11 => round_trip::<KeyShare>("key share", rest),
        12 => round_trip::<FlowInfo>("flow info", rest),
        13 => round_trip::<TlsRandoms>("hello randoms", rest),
        14 => round_trip::<StartTls>("start tls", rest),
        15 => {
            round_trip::<RecordIn>("record", rest);
            same_record(rest);
        }
        16 => round_trip::<Result<Verdict, MiddleboxError>>("record reply", rest),
        17 => round_trip::<Result<FlowReply, MiddleboxError>>("flow reply", rest),
        18 => round_trip::<Result<EngineKey, MiddleboxError>>("engine reply", rest),
        19 => {
            round_trip::<RecordBatch>("record batch", rest);
            same_batch(rest);
        }
        20 => round_trip::<Result<BatchVerdicts, MiddleboxError>>("batch reply", rest),
        _ => {
            let _ = scenarios::x509::AllocReport::decode(rest);
        }
    }
});
