//! The short text form of an ID: 13 characters of Crockford base32, TSID's alphabet.
//!
//! 13 × 5 = 65 bits hold the 63 bits of a non-negative ID, most significant character first
//! and always 13 characters, so the text sorts (byte-wise, e.g. in `COLLATE "C"` or any
//! ASCII order) exactly like the number. The first character is therefore `0`-`7`.
//! Reading is case-insensitive and forgiving as Crockford specifies: `I`/`L` read as `1`,
//! `O` as `0`; `U` and anything else are refused with the offending character.

/// Crockford's alphabet: digits and letters less I, L, O and U.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Characters in every text form.
pub const LEN: usize = 13;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextError {
    /// Not 13 characters long (every character being in the alphabet, so ASCII).
    Length { chars: usize },
    /// A character outside the alphabet, at a 1-based position (the characters before it
    /// are in the alphabet, so ASCII: the position counts bytes and characters alike).
    BadChar { position: usize },
    /// A first character above `7`: the value would not fit in 63 bits.
    TooLarge { ch: char },
}

/// The value of one byte, or `None` when it is not in the (forgiving) alphabet.
fn value_of(c: u8) -> Option<u64> {
    let v = match c.to_ascii_uppercase() {
        c @ b'0'..=b'9' => c - b'0',
        b'O' => 0,
        b'I' | b'L' => 1,
        c @ b'A'..=b'Z' => ALPHABET.iter().position(|&a| a == c)? as u8,
        _ => return None,
    };
    Some(v as u64)
}

/// The 13-character text form of a non-negative ID. Negative IDs are refused by the caller
/// (`layout::decompose`'s rule); here they are taken as their 64-bit pattern's low 63 bits.
pub fn encode(id: i64) -> [u8; LEN] {
    let mut v = id as u64 & (u64::MAX >> 1);
    let mut out = [b'0'; LEN];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(v & 31) as usize];
        v >>= 5;
    }
    out
}

/// The ID a text form stands for, from its bytes in any ASCII-compatible encoding. The
/// first byte outside the alphabet is named; then the length; nothing is allocated.
pub fn decode(text: &[u8]) -> Result<i64, TextError> {
    let mut v: u64 = 0;
    for (i, &b) in text.iter().enumerate() {
        let d = value_of(b).ok_or(TextError::BadChar { position: i + 1 })?;
        if i < LEN {
            v = v << 5 | d;
        }
    }
    if text.len() != LEN {
        return Err(TextError::Length { chars: text.len() });
    }
    if value_of(text[0]).is_some_and(|d| d > 7) {
        return Err(TextError::TooLarge {
            ch: text[0] as char,
        });
    }
    Ok(v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(id: i64) -> String {
        String::from_utf8(encode(id).to_vec()).unwrap()
    }

    #[test]
    fn known_values() {
        assert_eq!(text(0), "0000000000000");
        assert_eq!(text(1), "0000000000001");
        assert_eq!(text(31), "000000000000Z");
        assert_eq!(text(32), "0000000000010");
        assert_eq!(text(i64::MAX), "7ZZZZZZZZZZZZ");
        assert_eq!(decode(b"7ZZZZZZZZZZZZ"), Ok(i64::MAX));
        assert_eq!(decode(b"7zzzzzzzzzzzz"), Ok(i64::MAX));
    }

    #[test]
    fn forgiving_reading() {
        assert_eq!(decode(b"0000000000001"), decode(b"000000000000I"));
        assert_eq!(decode(b"0000000000001"), decode(b"000000000000l"));
        assert_eq!(decode(b"0000000000000"), decode(b"OOOOOOOOOOOOo"));
    }

    #[test]
    fn refusals_name_the_character() {
        let bad = |position| Err(TextError::BadChar { position });
        assert_eq!(decode(b"000000000000U"), bad(13));
        assert_eq!(decode(b"00000-0000000"), bad(6));
        // A multibyte character (UTF-8 or any other encoding) at the 11th character.
        assert_eq!(decode("0000000000é00".as_bytes()), bad(11));
        assert_eq!(decode(b"0000000000\xe900"), bad(11));
        assert_eq!(decode("é".as_bytes()), bad(1));
        // The first bad character is named before the length.
        assert_eq!(decode(b"00000-00000000000"), bad(6));
        assert_eq!(
            decode(b"8000000000000"),
            Err(TextError::TooLarge { ch: '8' })
        );
        assert_eq!(
            decode(b"Z000000000000"),
            Err(TextError::TooLarge { ch: 'Z' })
        );
        assert_eq!(decode(b""), Err(TextError::Length { chars: 0 }));
        assert_eq!(
            decode(b"00000000000000"),
            Err(TextError::Length { chars: 14 })
        );
        assert_eq!(
            decode(b"000000000000"),
            Err(TextError::Length { chars: 12 })
        );
        assert_eq!(decode(b"8"), Err(TextError::Length { chars: 1 }));
    }

    #[test]
    fn huge_text_is_refused_in_place() {
        let huge = vec![b'0'; 50 << 20];
        assert_eq!(decode(&huge), Err(TextError::Length { chars: 50 << 20 }));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Over the whole non-negative range: exact round trip, lower case too.
        #[test]
        fn round_trips(id in 0..=i64::MAX) {
            let t = text(id);
            prop_assert_eq!(t.len(), LEN);
            prop_assert_eq!(decode(t.as_bytes()), Ok(id));
            prop_assert_eq!(decode(t.to_ascii_lowercase().as_bytes()), Ok(id));
        }

        /// Text order is number order, for any two IDs and for neighbours.
        #[test]
        fn sorts_like_the_number(a in 0..=i64::MAX, b in 0..=i64::MAX, near in 0..=i64::MAX - 1) {
            prop_assert_eq!(encode(a).cmp(&encode(b)), a.cmp(&b));
            prop_assert!(encode(near) < encode(near + 1));
        }

        /// Every 13-character string over the alphabet decodes, or is refused for its first
        /// character; never a panic, never a wrong value for a canonical string.
        #[test]
        fn any_text_is_read_or_refused(s in "[0-9A-Za-z]{13}") {
            match decode(s.as_bytes()) {
                Ok(id) => prop_assert!(id >= 0),
                Err(TextError::TooLarge { .. }) => prop_assert!(!"01234567oOiIlL".contains(&s[..1])),
                Err(TextError::BadChar { position }) => prop_assert!("Uu".contains(&s[position - 1..position])),
                Err(e) => prop_assert!(false, "{:?}", e),
            }
        }

        /// Any bytes at all: a value, or an error whose position is that of a byte outside
        /// the alphabet with only alphabet bytes before it.
        #[test]
        fn any_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            match decode(&bytes) {
                Ok(_) => prop_assert_eq!(bytes.len(), LEN),
                Err(TextError::BadChar { position }) => {
                    prop_assert!(value_of(bytes[position - 1]).is_none());
                    prop_assert!(bytes[..position - 1].iter().all(|&b| value_of(b).is_some()));
                }
                Err(TextError::Length { chars }) => prop_assert!(chars == bytes.len() && chars != LEN),
                Err(TextError::TooLarge { .. }) => prop_assert!(value_of(bytes[0]).unwrap() > 7),
            }
        }
    }
}
