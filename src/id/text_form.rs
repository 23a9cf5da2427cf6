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
    /// Not 13 characters long (counted in characters, not bytes).
    Length { chars: usize },
    /// A character outside the alphabet, at a 1-based position.
    BadChar { ch: char, position: usize },
    /// A first character above `7`: the value would not fit in 63 bits.
    TooLarge { ch: char },
}

/// The value of one character, or `None` when it is not in the (forgiving) alphabet.
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

/// The ID a text form stands for.
pub fn decode(text: &str) -> Result<i64, TextError> {
    let chars = text.chars().count();
    if chars != LEN {
        return Err(TextError::Length { chars });
    }
    let mut v: u64 = 0;
    for (i, ch) in text.chars().enumerate() {
        let d = u8::try_from(ch)
            .ok()
            .filter(u8::is_ascii)
            .and_then(value_of)
            .ok_or(TextError::BadChar {
                ch,
                position: i + 1,
            })?;
        if i == 0 && d > 7 {
            return Err(TextError::TooLarge { ch });
        }
        v = v << 5 | d;
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
        assert_eq!(decode("7ZZZZZZZZZZZZ"), Ok(i64::MAX));
        assert_eq!(decode("7zzzzzzzzzzzz"), Ok(i64::MAX));
    }

    #[test]
    fn forgiving_reading() {
        assert_eq!(decode("0000000000001"), decode("000000000000I"));
        assert_eq!(decode("0000000000001"), decode("000000000000l"));
        assert_eq!(decode("0000000000000"), decode("OOOOOOOOOOOOo"));
    }

    #[test]
    fn refusals_name_the_character() {
        assert_eq!(
            decode("000000000000U"),
            Err(TextError::BadChar {
                ch: 'U',
                position: 13
            })
        );
        assert_eq!(
            decode("00000-0000000"),
            Err(TextError::BadChar {
                ch: '-',
                position: 6
            })
        );
        assert_eq!(
            decode("0000000000é00"),
            Err(TextError::BadChar {
                ch: 'é',
                position: 11
            })
        );
        assert_eq!(
            decode("8000000000000"),
            Err(TextError::TooLarge { ch: '8' })
        );
        assert_eq!(
            decode("Z000000000000"),
            Err(TextError::TooLarge { ch: 'Z' })
        );
        assert_eq!(decode(""), Err(TextError::Length { chars: 0 }));
        assert_eq!(
            decode("00000000000000"),
            Err(TextError::Length { chars: 14 })
        );
        assert_eq!(decode("000000000000"), Err(TextError::Length { chars: 12 }));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Over the whole non-negative range: exact round trip, lower case too.
        #[test]
        fn round_trips(id in 0..=i64::MAX) {
            let t = text(id);
            prop_assert_eq!(t.len(), LEN);
            prop_assert_eq!(decode(&t), Ok(id));
            prop_assert_eq!(decode(&t.to_ascii_lowercase()), Ok(id));
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
            match decode(&s) {
                Ok(id) => prop_assert!(id >= 0),
                Err(TextError::TooLarge { .. }) => prop_assert!(!"01234567oOiIlL".contains(&s[..1])),
                Err(TextError::BadChar { ch, .. }) => prop_assert!("Uu".contains(ch)),
                Err(e) => prop_assert!(false, "{:?}", e),
            }
        }
    }
}
