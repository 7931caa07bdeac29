//! Numbers for humans: durations, rates, sizes, percentages and ratios, formatted the same way
//! everywhere in a report (tables, plots, comparisons) with three significant digits.
//!
//! Durations use ns/µs/ms/s, rates k/M/G per second, sizes binary prefixes (B/KiB/MiB/GiB).
//! Non-finite inputs (which a valid record never holds) print as `n/a`.

/// Formats `x` (≥ 0, below 1000 after scaling) with three significant digits.
fn sig3(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    if x >= 99.95 {
        format!("{x:.0}")
    } else if x >= 9.995 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Scales `value` (≥ 0) through `units` (each `step` times the previous) and formats it.
fn scaled(value: f64, step: f64, units: &[&str], sep: &str) -> String {
    if !value.is_finite() {
        return "n/a".to_owned();
    }
    if value < 0.0 {
        return format!("-{}", scaled(-value, step, units, sep));
    }
    let mut i = 0;
    let mut m = value;
    while i + 1 < units.len() && m >= step {
        m /= step;
        i += 1;
    }
    // 999.7 rounds to "1000" (and 1023.7 KiB to "1024"): move to the next unit instead.
    if m >= step - 0.5 && i + 1 < units.len() {
        m /= step;
        i += 1;
    }
    format!("{}{sep}{}", sig3(m), units[i])
}

/// A duration given in nanoseconds: `850 ns`, `1.23 µs`, `45.6 ms`, `2.00 s`.
pub fn duration_ns(ns: f64) -> String {
    scaled(ns, 1000.0, &["ns", "µs", "ms", "s"], " ")
}

/// Events per second: `456/s`, `1.23 k/s`, `45.6 M/s`, `1.00 G/s`.
pub fn rate(per_s: f64) -> String {
    let s = scaled(per_s, 1000.0, &["", "k", "M", "G", "T"], " ");
    // No prefix: "456 " -> "456/s".
    match s.strip_suffix(' ') {
        Some(bare) => format!("{bare}/s"),
        None => format!("{s}/s"),
    }
}

/// A size in bytes, with binary prefixes: `512 B`, `1.50 KiB`, `16.0 MiB`.
pub fn bytes(n: f64) -> String {
    if n.is_finite() && n.abs() < 1024.0 && n.fract() == 0.0 {
        return format!("{n} B");
    }
    scaled(n, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB"], " ")
}

/// Bytes per second, with binary prefixes: `1.23 GiB/s`.
pub fn bytes_rate(per_s: f64) -> String {
    format!("{}/s", bytes(per_s))
}

/// An integer count with thousands separators: `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A percentage given in percent (`12.34` -> `12.3%`).
pub fn percent(p: f64) -> String {
    if !p.is_finite() {
        return "n/a".to_owned();
    }
    format!("{p:.1}%")
}

/// A ratio or speed-up: `1.85×`, `0.500×`.
pub fn ratio(r: f64) -> String {
    if !r.is_finite() {
        return "n/a".to_owned();
    }
    if r < 0.0 {
        return format!("-{}", ratio(-r));
    }
    if r < 0.9995 && r > 0.0 {
        format!("{r:.3}×")
    } else {
        format!("{}×", sig3(r))
    }
}

/// A p-value: `0.012`, `<0.001`.
pub fn p_value(p: f64) -> String {
    if !p.is_finite() {
        "n/a".to_owned()
    } else if p < 0.001 {
        "<0.001".to_owned()
    } else {
        format!("{p:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_ns(0.0), "0 ns");
        assert_eq!(duration_ns(0.512), "0.51 ns");
        assert_eq!(duration_ns(1.0), "1.00 ns");
        assert_eq!(duration_ns(850.0), "850 ns");
        assert_eq!(duration_ns(999.4), "999 ns");
        assert_eq!(duration_ns(999.7), "1.00 µs");
        assert_eq!(duration_ns(1234.0), "1.23 µs");
        assert_eq!(duration_ns(12_345.0), "12.3 µs");
        assert_eq!(duration_ns(123_456.0), "123 µs");
        assert_eq!(duration_ns(45_600_000.0), "45.6 ms");
        assert_eq!(duration_ns(2e9), "2.00 s");
        assert_eq!(duration_ns(1.5e12), "1500 s");
        assert_eq!(duration_ns(-2500.0), "-2.50 µs");
        assert_eq!(duration_ns(f64::NAN), "n/a");
        assert_eq!(duration_ns(9.996), "10.0 ns");
        assert_eq!(duration_ns(99.96), "100 ns");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(456.0), "456/s");
        assert_eq!(rate(1234.0), "1.23 k/s");
        assert_eq!(rate(45.6e6), "45.6 M/s");
        assert_eq!(rate(1e9), "1.00 G/s");
        assert_eq!(rate(0.5), "0.50/s");
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1024.0), "1.00 KiB");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(16384.0), "16.0 KiB");
        assert_eq!(bytes(1023.9 * 1024.0), "1.00 MiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.00 GiB");
        assert_eq!(bytes_rate(2.5 * 1024.0 * 1024.0), "2.50 MiB/s");
    }

    #[test]
    fn counts_percents_ratios() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(percent(12.345), "12.3%");
        assert_eq!(percent(100.0), "100.0%");
        assert_eq!(ratio(1.849), "1.85×");
        assert_eq!(ratio(0.5), "0.500×");
        assert_eq!(ratio(0.998), "0.998×");
        assert_eq!(ratio(0.9999), "1.00×");
        assert_eq!(ratio(12.0), "12.0×");
        assert_eq!(p_value(0.0004), "<0.001");
        assert_eq!(p_value(0.0123), "0.012");
    }

    /// Reads a formatted duration back into nanoseconds.
    fn parse_duration(s: &str) -> f64 {
        let (num, unit) = s.split_once(' ').unwrap();
        let scale = match unit {
            "ns" => 1.0,
            "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            other => panic!("unit {other}"),
        };
        num.parse::<f64>().unwrap() * scale
    }

    proptest::proptest! {
        #[test]
        fn durations_round_trip_within_half_a_percent(x in 0.01f64..1e13) {
            let s = duration_ns(x);
            let back = parse_duration(&s);
            proptest::prop_assert!(((back - x) / x).abs() <= 0.0051, "{x} -> {s}");
            // Three significant digits: at most 4 characters of digits and point.
            let num = s.split(' ').next().unwrap();
            proptest::prop_assert!(num.len() <= 4 || x >= 999.5e9, "{s}");
        }

        #[test]
        fn byte_sizes_round_trip_within_half_a_percent(x in 1.0f64..1e15) {
            let s = bytes(x.round());
            let (num, unit) = s.split_once(' ').unwrap();
            let scale = match unit {
                "B" => 1.0,
                "KiB" => 1024.0,
                "MiB" => 1024.0 * 1024.0,
                "GiB" => 1024.0f64.powi(3),
                "TiB" => 1024.0f64.powi(4),
                other => panic!("unit {other}"),
            };
            let back = num.parse::<f64>().unwrap() * scale;
            proptest::prop_assert!(((back - x.round()) / x.round()).abs() <= 0.0051, "{x} -> {s}");
        }
    }
}
