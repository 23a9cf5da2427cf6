//! The time inside 128- and 96-bit IDs: UUID versions 1, 6 and 7 (RFC 9562), ULID text and
//! MongoDB ObjectID text. Plain arithmetic and parsing, no PostgreSQL here.
//!
//! ```text
//!  UUID v1   time_low 32 | time_mid 16 | ver 4 | time_high 12 | var ...   100 ns since 1582-10-15
//!  UUID v6   time_high 32 | time_mid 16 | ver 4 | time_low 12 | var ...   100 ns since 1582-10-15
//!  UUID v7   unix_ts_ms 48 | ver 4 | ...                                 ms since 1970
//!  ULID      26 Crockford base32 characters: 48-bit ms since 1970 | 80 random bits
//!  ObjectID  24 hex characters: 4-byte big-endian seconds since 1970 | 8 other bytes
//! ```
//!
//! Times come out as Unix microseconds, PostgreSQL's resolution. 100 ns ticks are truncated
//! to their microsecond (the tick count divided by 10, rounding down), which is what
//! PostgreSQL 18's `uuid_extract_timestamp` does for v1.

/// 1582-10-15 00:00:00 UTC (the Gregorian reform, RFC 9562's v1/v6 epoch) in Unix seconds.
pub const GREGORIAN_EPOCH_UNIX_S: i64 = -12_219_292_800;

/// What can be wrong with a UUID, a ULID or an ObjectID. Each says what is valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WideIdError {
    /// A UUID whose version holds no time (or whose variant is not RFC 9562's).
    UuidWithoutTime { version: u8, rfc_variant: bool },
    /// `kind` text of the wrong length (in characters: all are in the alphabet, so ASCII).
    BadLength {
        kind: &'static str,
        length: usize,
        expected: usize,
    },
    /// `kind` text with a character outside its alphabet, at `position` (1-based: the
    /// characters before it are in the alphabet, so ASCII, and bytes count as characters).
    BadCharacter { kind: &'static str, position: usize },
    /// A ULID whose first character exceeds '7': more than 128 bits.
    UlidOverflow { character: char },
}

/// The Unix microsecond a UUID v1, v6 or v7 was made.
pub fn uuid_unix_us(uuid: &[u8; 16]) -> Result<i64, WideIdError> {
    let version = uuid[6] >> 4;
    // RFC 9562 variant: the top two bits of octet 8 are 10.
    let rfc_variant = uuid[8] >> 6 == 0b10;
    let be = |range: std::ops::Range<usize>| {
        uuid[range]
            .iter()
            .fold(0_u64, |acc, &b| acc << 8 | u64::from(b))
    };
    let ticks = match version {
        _ if !rfc_variant => None,
        1 => Some((be(6..8) & 0x0fff) << 48 | be(4..6) << 32 | be(0..4)),
        6 => Some(be(0..6) << 12 | (be(6..8) & 0x0fff)),
        7 => return Ok(be(0..6) as i64 * 1000),
        _ => None,
    };
    match ticks {
        // 60 bits of ticks / 10 fit in i64 comfortably.
        Some(ticks) => Ok((ticks / 10) as i64 + GREGORIAN_EPOCH_UNIX_S * 1_000_000),
        None => Err(WideIdError::UuidWithoutTime {
            version,
            rfc_variant,
        }),
    }
}

/// Crockford's base32 value of a byte, case-insensitive; I, L, O and U are not in the
/// alphabet (the ULID spec and its reference implementation refuse them).
fn crockford(c: u8) -> Option<u64> {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let upper = c.to_ascii_uppercase();
    ALPHABET.iter().position(|&a| a == upper).map(|v| v as u64)
}

fn hex(c: u8) -> Option<u64> {
    (c as char).to_digit(16).map(u64::from)
}

/// The first `take` digits of `text` (`bits` each) as one number, once every byte of it is a
/// digit (else the first that is not is named) and it is `expected` long. Reads the bytes
/// in place: nothing grows with the input.
fn leading_digits(
    kind: &'static str,
    text: &[u8],
    expected: usize,
    value_of: fn(u8) -> Option<u64>,
    take: usize,
    bits: u32,
) -> Result<u64, WideIdError> {
    let mut acc = 0;
    for (i, &c) in text.iter().enumerate() {
        let v = value_of(c).ok_or(WideIdError::BadCharacter {
            kind,
            position: i + 1,
        })?;
        if i < take {
            acc = acc << bits | v;
        }
    }
    if text.len() != expected {
        return Err(WideIdError::BadLength {
            kind,
            length: text.len(),
            expected,
        });
    }
    Ok(acc)
}

/// The Unix millisecond in a ULID's text (26 Crockford base32 characters, any case).
pub fn ulid_unix_ms(text: &[u8]) -> Result<i64, WideIdError> {
    // The first 10 characters are the 48-bit time (50 bits, the top 2 being zero).
    let ms = leading_digits("ULID", text, 26, crockford, 10, 5)?;
    // 26 characters carry 130 bits; a ULID is 128, so the first character is at most 7.
    if ms >> 48 != 0 {
        return Err(WideIdError::UlidOverflow {
            character: text[0] as char,
        });
    }
    Ok(ms as i64)
}

/// The Unix second in a MongoDB ObjectID's text (24 hexadecimal characters, any case).
pub fn objectid_unix_s(text: &[u8]) -> Result<i64, WideIdError> {
    Ok(leading_digits("ObjectID", text, 24, hex, 8, 4)? as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn uuid(hex: &str) -> [u8; 16] {
        let hex: String = hex.chars().filter(|c| *c != '-').collect();
        let mut out = [0; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// 2022-02-22 19:22:22 UTC, the instant of RFC 9562's test vectors (Appendix A:
    /// "Tuesday, February 22, 2022 2:22:22.000000 PM GMT-05:00").
    const RFC_9562_VECTOR_UNIX_S: i64 = 1_645_557_742;

    #[test]
    fn rfc_9562_test_vectors() {
        // Appendix A.1 (v1), A.5 (v6), A.6 (v7).
        let us = RFC_9562_VECTOR_UNIX_S * 1_000_000;
        assert_eq!(
            uuid_unix_us(&uuid("C232AB00-9414-11EC-B3C8-9F6BDECED846")),
            Ok(us)
        );
        assert_eq!(
            uuid_unix_us(&uuid("1EC9414C-232A-6B00-B3C8-9F6BDECED846")),
            Ok(us)
        );
        assert_eq!(
            uuid_unix_us(&uuid("017F22E2-79B0-7CC3-98C4-DC0C0C07398F")),
            Ok(us)
        );
    }

    #[test]
    fn versions_without_time_are_refused() {
        // RFC 9562 A.3 (v4), A.4 (v5), the nil and max UUIDs, a v7 with a non-RFC variant.
        let refused = [
            ("919108F7-52D1-4320-9BAC-F847DB4148A8", 4, true),
            ("5DF41881-3AED-5515-88A7-2F4A814CF09E", 5, true),
            ("00000000-0000-0000-0000-000000000000", 0, false),
            ("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", 15, false),
            ("017F22E2-79B0-7CC3-D8C4-DC0C0C07398F", 7, false),
        ];
        for (text, version, rfc_variant) in refused {
            assert_eq!(
                uuid_unix_us(&uuid(text)),
                Err(WideIdError::UuidWithoutTime {
                    version,
                    rfc_variant
                }),
                "{text}"
            );
        }
    }

    #[test]
    fn v1_ticks_truncate_to_the_microsecond() {
        // One tick (100 ns) after the Gregorian epoch, and 9 ticks: still its first µs.
        let mut u = uuid("00000001-0000-1000-8000-000000000000");
        assert_eq!(uuid_unix_us(&u), Ok(GREGORIAN_EPOCH_UNIX_S * 1_000_000));
        u[3] = 9;
        assert_eq!(uuid_unix_us(&u), Ok(GREGORIAN_EPOCH_UNIX_S * 1_000_000));
        u[3] = 10;
        assert_eq!(uuid_unix_us(&u), Ok(GREGORIAN_EPOCH_UNIX_S * 1_000_000 + 1));
    }

    #[test]
    fn ulid_spec_example() {
        // ulid/javascript README, "Seed Time": ulid(1469918176385) // 01ARYZ6S41TSV4RRFFQ69G5FAV
        assert_eq!(
            ulid_unix_ms(b"01ARYZ6S41TSV4RRFFQ69G5FAV"),
            Ok(1_469_918_176_385)
        );
        assert_eq!(
            ulid_unix_ms(b"01aryz6s41tsv4rrffq69g5fav"),
            Ok(1_469_918_176_385)
        );
        // The largest ULID the spec allows, and the smallest.
        assert_eq!(
            ulid_unix_ms(b"7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
            Ok((1 << 48) - 1)
        );
        assert_eq!(ulid_unix_ms(b"00000000000000000000000000"), Ok(0));
    }

    #[test]
    fn bad_ulids_are_refused_naming_the_character() {
        let bad = |position| {
            Err(WideIdError::BadCharacter {
                kind: "ULID",
                position,
            })
        };
        assert_eq!(ulid_unix_ms(b"01ARYZ6S41TSV4RRFFQ69G5FAU"), bad(26));
        for c in ["I", "l", "O", "-", "é", "\u{2713}"] {
            let text = format!("01{c}RYZ6S41TSV4RRFFQ69G5FAV");
            assert_eq!(ulid_unix_ms(text.as_bytes()), bad(3), "{c}");
        }
        // A byte that is no character in UTF-8 (a SQL_ASCII or LATIN1 database's é).
        assert_eq!(ulid_unix_ms(b"01\xe9RYZ6S41TSV4RRFFQ69G5FAV"), bad(3));
        assert_eq!(
            ulid_unix_ms(b"01ARYZ6S41"),
            Err(WideIdError::BadLength {
                kind: "ULID",
                length: 10,
                expected: 26
            })
        );
        assert_eq!(
            ulid_unix_ms(b"8ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
            Err(WideIdError::UlidOverflow { character: '8' })
        );
        assert_eq!(
            ulid_unix_ms(b"zZZZZZZZZZZZZZZZZZZZZZZZZZ"),
            Err(WideIdError::UlidOverflow { character: 'z' })
        );
        // Huge text is read in place: the length, and no allocation that follows it.
        let huge = vec![b'0'; 50 << 20];
        assert_eq!(
            ulid_unix_ms(&huge),
            Err(WideIdError::BadLength {
                kind: "ULID",
                length: 50 << 20,
                expected: 26
            })
        );
    }

    #[test]
    fn objectid_documented_example() {
        // mongodb.com/docs/manual/reference/method/ObjectId.getTimestamp:
        // ObjectId("507c7f79bcf86cd7994f6c0e").getTimestamp() is ISODate("2012-10-15T21:26:17Z").
        assert_eq!(
            objectid_unix_s(b"507c7f79bcf86cd7994f6c0e"),
            Ok(1_350_336_377)
        );
        assert_eq!(
            objectid_unix_s(b"507C7F79BCF86CD7994F6C0E"),
            Ok(1_350_336_377)
        );
        assert_eq!(
            objectid_unix_s(b"ffffffff0000000000000000"),
            Ok(u32::MAX as i64)
        );
        assert_eq!(
            objectid_unix_s(b"507c7f79bcf86cd7994f6c0g"),
            Err(WideIdError::BadCharacter {
                kind: "ObjectID",
                position: 24
            })
        );
        assert_eq!(
            objectid_unix_s(b""),
            Err(WideIdError::BadLength {
                kind: "ObjectID",
                length: 0,
                expected: 24
            })
        );
    }

    proptest! {
        /// Any 48-bit ms encodes (Crockford, as the ULID spec) and decodes back, in either case.
        #[test]
        fn ulid_round_trip(ms in 0_u64..(1 << 48), random in any::<u128>(), lower in any::<bool>()) {
            const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
            let value: u128 = (ms as u128) << 80 | (random & ((1 << 80) - 1));
            let text: String = (0..26).rev().map(|i| ALPHABET[((value >> (5 * i)) & 31) as usize] as char).collect();
            let text = if lower { text.to_lowercase() } else { text };
            prop_assert_eq!(ulid_unix_ms(text.as_bytes()), Ok(ms as i64));
        }

        /// Any v7 and v1/v6 UUID with the RFC variant decodes its time; v1 and v6 holding the
        /// same ticks agree.
        #[test]
        fn uuid_times(ticks in 0_u64..(1 << 60), ms in 0_u64..(1 << 48), rest in any::<u64>()) {
            let mut v7 = [0_u8; 16];
            v7[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
            v7[6] = 0x70;
            v7[8] = 0x80 | (rest as u8 & 0x3f);
            prop_assert_eq!(uuid_unix_us(&v7), Ok(ms as i64 * 1000));
            let mut v1 = [0_u8; 16];
            v1[..4].copy_from_slice(&(ticks as u32).to_be_bytes());
            v1[4..6].copy_from_slice(&((ticks >> 32) as u16).to_be_bytes());
            v1[6..8].copy_from_slice(&(0x1000 | (ticks >> 48) as u16).to_be_bytes());
            v1[8] = 0x80;
            let mut v6 = [0_u8; 16];
            v6[..6].copy_from_slice(&(ticks >> 12).to_be_bytes()[2..]);
            v6[6..8].copy_from_slice(&(0x6000 | (ticks & 0xfff) as u16).to_be_bytes());
            v6[8] = 0x80;
            let expected = (ticks / 10) as i64 + GREGORIAN_EPOCH_UNIX_S * 1_000_000;
            prop_assert_eq!(uuid_unix_us(&v1), Ok(expected));
            prop_assert_eq!(uuid_unix_us(&v6), Ok(expected));
        }

        /// Every version but 1, 6 and 7 is refused.
        #[test]
        fn other_versions_refused(bytes in any::<[u8; 16]>()) {
            let version = bytes[6] >> 4;
            let ok = bytes[8] >> 6 == 0b10 && matches!(version, 1 | 6 | 7);
            prop_assert_eq!(uuid_unix_us(&bytes).is_ok(), ok);
        }
    }
}
