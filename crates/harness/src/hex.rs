//! Hex text for byte strings: inputs on the command line, fingerprints and outputs in records.

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses hex (upper or lower case, no separators, an optional `0x`).
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    if !s.len().is_multiple_of(2) {
        return Err(format!(
            "hex input has an odd number of digits ({})",
            s.len()
        ));
    }
    let digit = |c: u8| -> Result<u8, String> {
        (c as char)
            .to_digit(16)
            .map(|d| d as u8)
            .ok_or_else(|| format!("{:?} is not a hex digit", c as char))
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_garbage() {
        assert_eq!(unhex("00ff10Ab").unwrap(), [0x00, 0xff, 0x10, 0xab]);
        assert_eq!(unhex("0x0102").unwrap(), [1, 2]);
        assert_eq!(hex(&[0xde, 0xad]), "dead");
        assert!(unhex("abc").unwrap_err().contains("odd"));
        assert!(unhex("zz").unwrap_err().contains("not a hex digit"));
    }
}
