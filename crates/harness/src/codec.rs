//! The one codec for the typed messages that scenarios send across the enclave boundary.
//!
//! Requests and replies are Rust types with `#[derive(Encode, Decode)]` in SCALE (the
//! encoding substrate's runtime uses, already a dependency of `tx-pipeline`'s extrinsic):
//! compact, little-endian, length-prefixed, no schema to keep in sync by hand. Every decode
//! goes through [`decode`], the one place that rejects a truncated message and trailing
//! bytes, so a service never acts on half a message or ignores what it did not understand.
//! Replies that can fail carry a `Result<T, E>` (SCALE encodes it as a tag byte and the
//! variant), so the host gets the same typed error the service raised.
//!
//! Call ids are enums declared with [`calls!`](crate::calls), so a service matches on names,
//! not numbers, and an unknown id is an error in one place.

pub use parity_scale_codec::{Decode, Encode};

/// A message that does not decode as the type it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {what}: {reason}")]
pub struct CodecError {
    /// The message that was expected (`"add request"`, `"verify reply"`, ...).
    pub what: &'static str,
    /// Why it does not decode.
    pub reason: String,
}

/// Decodes exactly one `T` from `bytes`: truncated input and trailing bytes are errors.
pub fn decode<T: Decode>(what: &'static str, bytes: &[u8]) -> Result<T, CodecError> {
    decode_in_place(what, bytes, |input| T::decode(input))
}

/// Decodes exactly one value from `bytes` with `read`, which may borrow from them: a
/// service that only reads a large payload (records to decrypt, a blob to hash) reads it
/// where the request lies instead of copying it into a `Vec` first. Truncated input and
/// trailing bytes are errors, as in [`decode`].
pub fn decode_in_place<'a, T>(
    what: &'static str,
    bytes: &'a [u8],
    read: impl FnOnce(&mut &'a [u8]) -> Result<T, parity_scale_codec::Error>,
) -> Result<T, CodecError> {
    let mut rest = bytes;
    let value = read(&mut rest).map_err(|e| CodecError {
        what,
        reason: e.to_string(),
    })?;
    if !rest.is_empty() {
        return Err(CodecError {
            what,
            reason: format!("{} trailing byte(s)", rest.len()),
        });
    }
    Ok(value)
}

/// Reads what a `Vec<u8>` encodes to (a compact length, then the bytes) from `input`,
/// borrowing the bytes: for [`decode_in_place`].
pub fn bytes_in_place<'a>(input: &mut &'a [u8]) -> Result<&'a [u8], parity_scale_codec::Error> {
    let len = parity_scale_codec::Compact::<u32>::decode(input)?.0 as usize;
    if input.len() < len {
        return Err("Not enough data to fill buffer".into());
    }
    let (bytes, rest) = input.split_at(len);
    *input = rest;
    Ok(bytes)
}

impl From<CodecError> for enclave::ServiceError {
    fn from(e: CodecError) -> Self {
        enclave::ServiceError::Failed(e.to_string())
    }
}

/// An id that names no call of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown {service} call id {id}")]
pub struct UnknownCall {
    /// The service's call enum.
    pub service: &'static str,
    /// The id received.
    pub id: u32,
}

impl From<UnknownCall> for enclave::ServiceError {
    fn from(e: UnknownCall) -> Self {
        enclave::ServiceError::UnknownCall(e.id)
    }
}

/// Declares a service's call ids as an enum: `#[repr(u32)]`, with [`Into<u32>`] for the
/// host's `ecall` and `TryFrom<u32>` (failing with [`UnknownCall`]) for the service's
/// dispatch, plus `ALL` and `name()` for traces and tables.
///
/// ```
/// harness::calls! {
///     /// The calls of a counter service.
///     pub enum Call {
///         /// Adds one.
///         Incr = 0 => "incr",
///         /// Reads the count.
///         Get = 1 => "get",
///     }
/// }
/// assert_eq!(u32::from(Call::Get), 1);
/// assert_eq!(Call::try_from(0u32), Ok(Call::Incr));
/// assert!(Call::try_from(7u32).is_err());
/// assert_eq!(Call::Incr.name(), "incr");
/// ```
#[macro_export]
macro_rules! calls {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $id:literal => $label:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(u32)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $id ),*
        }

        impl $name {
            /// Every call, in id order of declaration.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The call's name, for traces and tables.
            #[allow(dead_code)]
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $label),*
                }
            }
        }

        impl ::core::convert::From<$name> for u32 {
            fn from(c: $name) -> u32 {
                c as u32
            }
        }

        impl ::core::convert::TryFrom<u32> for $name {
            type Error = $crate::codec::UnknownCall;
            fn try_from(id: u32) -> ::core::result::Result<Self, Self::Error> {
                match id {
                    $($id => Ok($name::$variant),)*
                    _ => Err($crate::codec::UnknownCall {
                        service: stringify!($name),
                        id,
                    }),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Encode, Decode)]
    struct Req {
        n: u64,
        xs: Vec<f64>,
        name: String,
    }

    /// A payload read in place is the one `Vec<u8>` decoding would copy, and fails where it
    /// fails.
    #[test]
    fn bytes_read_in_place_agree_with_decoding_a_vec() {
        let read = |b: &[u8]| {
            decode_in_place("pair", b, |i| {
                let n = u64::decode(i)?;
                Ok((n, bytes_in_place(i)?.to_vec()))
            })
        };
        for len in [0usize, 1, 63, 64, 16_383, 16_384, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let bytes = (9u64, payload.clone()).encode();
            assert_eq!(read(&bytes), Ok((9, payload)));
            assert_eq!(read(&bytes), decode::<(u64, Vec<u8>)>("pair", &bytes));
            for cut in [0, 1, 8, 9, bytes.len() / 2, bytes.len() - 1] {
                if cut < bytes.len() {
                    let (a, b) = (
                        read(&bytes[..cut]),
                        decode::<(u64, Vec<u8>)>("pair", &bytes[..cut]),
                    );
                    assert!(a.is_err() && b.is_err(), "cut at {cut} of {len}");
                }
            }
            let mut long = bytes.clone();
            long.push(1);
            assert_eq!(read(&long).unwrap_err().reason, "1 trailing byte(s)");
        }
        // A length past the end (here 2^30 - 1, in compact's four-byte mode) is an error,
        // not a panic or an allocation.
        let mut huge = 9u64.encode();
        huge.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 1, 2, 3]);
        assert!(read(&huge).is_err());
    }

    #[test]
    fn round_trips_and_rejects_truncation_and_trailing_bytes() {
        let r = Req {
            n: 7,
            xs: vec![1.5, -2.0],
            name: "abc".into(),
        };
        let bytes = r.encode();
        assert_eq!(decode::<Req>("req", &bytes), Ok(r));
        for cut in 0..bytes.len() {
            let e = decode::<Req>("req", &bytes[..cut]).unwrap_err();
            assert_eq!(e.what, "req");
        }
        let mut long = bytes.clone();
        long.push(0);
        let e = decode::<Req>("req", &long).unwrap_err();
        assert_eq!(e.reason, "1 trailing byte(s)");
    }

    #[test]
    fn results_carry_typed_errors() {
        #[derive(Debug, PartialEq, Encode, Decode)]
        enum Fault {
            Full { capacity: u64 },
        }
        let reply: Result<f64, Fault> = Err(Fault::Full { capacity: 9 });
        let back: Result<f64, Fault> = decode("reply", &reply.encode()).unwrap();
        assert_eq!(back, Err(Fault::Full { capacity: 9 }));
    }
}
