//! Fuzzes what a middlebox reads from a share agent and an agent from a middlebox: the
//! share channel's frames (`tls_middlebox::share::read_frame`) as a stream of any bytes,
//! and key log lines (`tls_middlebox::keylog::parse_line`). No input may panic or allocate
//! beyond the frame bound; a frame that decodes re-encodes to the very bytes it came from;
//! a key log line that parses as a share re-formats to a line that parses to the same
//! bytes, and an error never carries the line's bytes.
#![no_main]

use std::io::Cursor;

use harness::codec::{Decode, Encode};
use libfuzzer_sys::fuzz_target;
use scenarios::tls_middlebox::keylog::{Line, parse_line};
use scenarios::tls_middlebox::service::KeyShare;
use scenarios::tls_middlebox::share::{MAX_FRAME, ShareAck, ShareHello, WireError, read_frame};

fn frames<T: Decode + Encode>(what: &'static str, data: &[u8]) {
    let mut r = Cursor::new(data);
    loop {
        let start = r.position() as usize;
        match read_frame::<T>(&mut r, what) {
            Ok(v) => {
                let body = &data[start + 4..r.position() as usize];
                assert!(body.len() <= MAX_FRAME);
                assert_eq!(v.encode(), body, "{what} re-encodes differently");
            }
            Err(WireError::TooLong(n)) => {
                assert!(n > MAX_FRAME);
                return;
            }
            Err(_) => return,
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => frames::<KeyShare>("key share", rest),
        1 => frames::<ShareHello>("share hello", rest),
        2 => frames::<ShareAck>("share ack", rest),
        _ => match parse_line(rest, 1) {
            Ok(Line::Share(e)) => {
                let again = format!("CLIENT_RANDOM {} {}", hex(&e.client_random), hex(&e.master.0));
                let Ok(Line::Share(f)) = parse_line(again.as_bytes(), 1) else {
                    panic!("a share line does not re-parse");
                };
                assert_eq!(f.client_random, e.client_random);
                assert_eq!(f.master.0, e.master.0);
            }
            Ok(_) => {}
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.is_ascii() && msg.len() < 120, "{msg}");
                assert_eq!(e.line, 1);
            }
        },
    }
});
