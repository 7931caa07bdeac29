//! Your own circuit with the generator API: the Hamming distance between the garbler's and
//! the evaluator's `n`-bit strings (say, two biometric templates), computed without either
//! party seeing the other's bits.
//!
//! ```text
//! cargo run --release -p garble --example hamming -- 4096 [/tmp/hamming.txt]
//! ```
//!
//! It writes the circuit once as generic Rust over [`Gen`], then uses it four ways:
//! counts its gates without storing it, evaluates it in the clear, runs it as two-party
//! computation between two threads over loopback TCP (streamed gate by gate: memory is the
//! live wires, never the gate list) and prints each party's stage table, and, given a path,
//! writes it as a Bristol Fashion file, which `ccbench run gc-2pc --circuit FILE` measures
//! with the whole method (per-gate costs, single-shot and bulk 2PC, the cost summary).

use std::time::Duration;

use garble::channel::TcpChannel;
use garble::circuit::{bits_from_bytes, bytes_from_bits};
use garble::generator::{self, Gen, Generator, W, Word};
use garble::session::{SessionOptions, SessionReport, Stage};
use garble::stream;

/// The Hamming distance of two `bits`-bit strings, as a `width`-bit count.
struct Hamming {
    bits: usize,
}

impl Hamming {
    /// Bits of the count: enough for `bits` itself.
    fn width(&self) -> usize {
        (usize::BITS - self.bits.leading_zeros()) as usize
    }
}

impl Generator for Hamming {
    fn name(&self) -> String {
        format!("hamming{}", self.bits)
    }

    fn garbler_input_bits(&self) -> usize {
        self.bits
    }

    fn evaluator_input_bits(&self) -> usize {
        self.bits
    }

    fn output_bits(&self) -> usize {
        self.width()
    }

    fn generate<G: Gen>(&self, g: &mut G, a: &[W<G::L>], b: &[W<G::L>]) -> Word<G::L> {
        // The differing bits (free: XOR), then a tree of additions, each a word one bit
        // wider than its operands: about `bits` AND gates in all.
        let mut level: Vec<Word<G::L>> = g.xor_w(a, b).into_iter().map(|d| vec![d]).collect();
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(2));
            for pair in level.chunks(2) {
                next.push(match pair {
                    [x, y] => g.add_wide(x, y),
                    [x] => x.clone(),
                    _ => unreachable!("chunks of two"),
                });
            }
            level = next;
        }
        let mut count = level.pop().unwrap_or_default();
        count.resize(self.width(), W::ZERO);
        count
    }
}

/// One party's stage table: time and bytes sent per stage.
fn print_report(who: &str, r: &SessionReport) {
    println!("{who}: {:.2} ms in all", r.total.as_secs_f64() * 1e3);
    for s in Stage::ALL {
        let st = r.stage(s);
        println!(
            "  {:<12} {:>9.3} ms {:>12} bytes sent",
            s.name(),
            st.time.as_secs_f64() * 1e3,
            st.bytes_sent
        );
    }
}

/// What each party got: its output bytes and its report.
type Party = (Vec<u8>, SessionReport);

/// Runs the circuit as 2PC between two threads; the garbler's and the evaluator's results.
fn two_party(
    c: &Hamming,
    a: &[bool],
    b: &[bool],
) -> Result<(Party, Party), Box<dyn std::error::Error>> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    drop(listener);
    let timeout = Duration::from_secs(30);
    let opts = SessionOptions::default();
    std::thread::scope(|s| {
        let garbler = s.spawn(|| -> Result<_, String> {
            let mut ch = TcpChannel::listen(&addr, timeout).map_err(|e| e.to_string())?;
            stream::run_garbler(&mut ch, c, a, &opts).map_err(|e| e.to_string())
        });
        let mut ch = connect_retrying(&addr, timeout)?;
        let e = stream::run_evaluator(&mut ch, c, b, &opts)?;
        let g = garbler
            .join()
            .map_err(|_| "the garbler thread panicked")??;
        let first = |o: &garble::session::SessionOutput| {
            o.output_bytes().into_iter().next().unwrap_or_default()
        };
        Ok(((first(&g), g.report), (first(&e), e.report)))
    })
}

/// The garbler thread may not be listening yet: retry the connection for a moment.
fn connect_retrying(
    addr: &str,
    timeout: Duration,
) -> Result<TcpChannel, Box<dyn std::error::Error>> {
    let mut last = None;
    for _ in 0..100 {
        match TcpChannel::connect(addr, timeout) {
            Ok(ch) => return Ok(ch),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(last.map_or_else(|| "no connection".into(), |e| e.into()))
}

/// Pseudo-random bytes (splitmix64): example inputs, not secrets.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .map(|i| {
            let mut z = seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

/// Everything the example does, returning the distance both parties computed.
fn run(bits: usize, bristol: Option<&str>) -> Result<u64, Box<dyn std::error::Error>> {
    let c = Hamming { bits };
    let st = generator::stats(&c);
    println!(
        "{}: {} gates, {} AND, AND depth {}",
        c.name(),
        st.stats.gates,
        st.stats.and_gates(),
        st.stats.and_depth
    );
    let (a, b) = (bytes(bits.div_ceil(8), 1), bytes(bits.div_ceil(8), 2));
    let (a, b) = (bits_from_bytes(&a, bits), bits_from_bytes(&b, bits));
    let expected = a.iter().zip(&b).filter(|(x, y)| x != y).count() as u64;
    let plain = bytes_from_bits(&generator::eval_plain(&c, &a, &b));
    let as_u64 = |v: &[u8]| v.iter().rev().fold(0u64, |n, &x| n << 8 | u64::from(x));
    if as_u64(&plain) != expected {
        return Err(format!("plain evaluation gave {}, not {expected}", as_u64(&plain)).into());
    }
    let ((g, gr), (e, er)) = two_party(&c, &a, &b)?;
    print_report("garbler", &gr);
    print_report("evaluator", &er);
    if as_u64(&g) != expected || as_u64(&e) != expected {
        return Err(format!(
            "2PC gave {} (garbler) and {} (evaluator), not {expected}",
            as_u64(&g),
            as_u64(&e)
        )
        .into());
    }
    println!("distance {expected}: 2PC equals the plain evaluation on both sides");
    if let Some(path) = bristol {
        let file = std::fs::File::create(path)?;
        let (n, _) = generator::write_bristol(&c, std::io::BufWriter::new(file))?;
        println!("{path}: {n} bytes; measure it with `ccbench run gc-2pc --circuit {path}`");
    }
    Ok(expected)
}

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let bits = match args.next().map(|s| s.parse::<usize>()) {
        None => 4096,
        Some(Ok(n)) if (1..=1 << 24).contains(&n) => n,
        Some(_) => {
            eprintln!("usage: hamming [BITS (1..=16777216)] [BRISTOL_FILE]");
            return std::process::ExitCode::from(2);
        }
    };
    match run(bits, args.next().as_deref()) {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distance_in_2pc_equals_the_plain_one_and_the_bristol_file_parses() {
        let dir = std::env::temp_dir().join(format!("hamming-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.txt");
        for bits in [1, 7, 300] {
            run(bits, Some(path.to_str().unwrap())).unwrap();
            let c = garble::bristol::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert_eq!(c.garbler_input_bits(), bits);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
