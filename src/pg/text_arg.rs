//! Text arguments read in place, as the bytes PostgreSQL holds, and shown safely in messages.
//!
//! pgrx's `&str` argument checks that the text is UTF-8 and panics (XX000) when it is not,
//! which any byte above 127 in a `SQL_ASCII` database is; its `String` copies the text onto
//! Rust's heap. A failed Rust allocation aborts the backend (Rust's out-of-memory handling is
//! an abort, not a panic, on stable Rust, whatever the global allocator: an allocator must not
//! unwind), and the postmaster then restarts every session; a 250 MB argument on a server
//! with a limited address space was enough. So every text argument is [`Text`]: the detoasted
//! bytes, in PostgreSQL's memory, borrowed for the call. The parsers (`text_form`, `wide_ids`,
//! `mask`, `layouts`) take bytes, name the first byte that cannot belong to their form, and
//! allocate nothing whose size follows the input; a message shows at most a short prefix of
//! it ([`shown`]).
//!
//! Every server encoding is a superset of ASCII, and every form read here is ASCII: a
//! parser stops at the first byte outside its alphabet, so all bytes before it are ASCII
//! and its 1-based byte position is also its character position.

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// A `text` argument: its bytes, in the database's encoding, neither copied nor checked.
#[derive(Clone, Copy)]
pub struct Text<'a>(&'a [u8]);

impl<'a> Text<'a> {
    pub fn bytes(self) -> &'a [u8] {
        self.0
    }
}

impl FromDatum for Text<'_> {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        typoid: pg_sys::Oid,
    ) -> Option<Self> {
        // SAFETY: a text datum is a varlena, which `&[u8]`'s FromDatum detoasts (into the
        // call's memory context) and borrows without copying.
        unsafe { <&[u8]>::from_polymorphic_datum(datum, is_null, typoid) }.map(Text)
    }
}

// SAFETY: a text argument is a varlena datum, exactly what FromDatum reads.
unsafe impl<'fcx> ArgAbi<'fcx> for Text<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }
}

pgrx::impl_sql_translatable!(Text<'_>, arg_only = "text");

/// Whether the database's encoding is UTF-8 (else its text is shown byte by byte).
fn database_is_utf8() -> bool {
    // SAFETY: reads the backend's database encoding, set at connection.
    unsafe { pg_sys::GetDatabaseEncoding() == pg_sys::pg_enc::PG_UTF8 as i32 }
}

/// At most `max_chars` characters of `text` for a message, then "..." (see [`render`]).
pub fn shown(text: &[u8], max_chars: usize) -> String {
    render(text, database_is_utf8(), max_chars)
}

/// The character starting at byte `at` of `text` (the offending one a parser names).
pub fn char_at(text: &[u8], at: usize) -> String {
    render_one(text.get(at..).unwrap_or_default(), database_is_utf8())
}

/// Up to `max_chars` characters of `text` as message text in any server encoding: ASCII
/// as it is (control characters as `\xNN`), other characters as they are in a UTF-8 database
/// (the bytes are valid there) and as `\xNN` per byte in any other (a character cut from
/// text of another encoding could be invalid in the message). Bounded: at most `max_chars`
/// characters are read, whatever the input's size.
pub fn render(text: &[u8], utf8: bool, max_chars: usize) -> String {
    let mut out = String::new();
    let mut rest = text;
    for _ in 0..max_chars {
        if rest.is_empty() {
            return out;
        }
        let len = char_len(rest, utf8);
        push_char(&mut out, &rest[..len]);
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        out.push_str("...");
    }
    out
}

/// The first character of `text`, as [`render`] shows it.
pub fn render_one(text: &[u8], utf8: bool) -> String {
    let mut out = String::new();
    if !text.is_empty() {
        push_char(&mut out, &text[..char_len(text, utf8)]);
    }
    out
}

/// Bytes of the character at the start of `text` (non-empty): one, unless it starts a
/// valid UTF-8 sequence in a UTF-8 database.
fn char_len(text: &[u8], utf8: bool) -> usize {
    if utf8 && !text[0].is_ascii() {
        let head = &text[..text.len().min(4)];
        let valid = match std::str::from_utf8(head) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
        };
        if let Some(c) = valid.chars().next() {
            return c.len_utf8();
        }
    }
    1
}

/// One character (`bytes`, as `char_len` cut it) onto `out`: printable ASCII and (in a
/// UTF-8 database, where `char_len` takes them whole) printable non-ASCII characters as they
/// are, anything else as `\xNN` per byte.
fn push_char(out: &mut String, bytes: &[u8]) {
    use std::fmt::Write;
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.chars().any(char::is_control) => out.push_str(s),
        _ => bytes.iter().for_each(|b| {
            let _ = write!(out, "\\x{b:02x}");
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_ascii_as_it_is_controls_escaped() {
        assert_eq!(render(b"3F0P-STE", true, 40), "3F0P-STE");
        assert_eq!(render(b"a\"b'c\\d", false, 40), "a\"b'c\\d");
        assert_eq!(render(b"a\nb\x01\x7f", true, 40), "a\\x0ab\\x01\\x7f");
        assert_eq!(render("\u{85}".as_bytes(), true, 40), "\\xc2\\x85");
    }

    #[test]
    fn utf8_characters_in_a_utf8_database_bytes_elsewhere() {
        assert_eq!(render("é✓".as_bytes(), true, 40), "é✓");
        assert_eq!(render("é".as_bytes(), false, 40), "\\xc3\\xa9");
        // SQL_ASCII or LATIN1: é is one byte, never valid UTF-8 alone.
        assert_eq!(render(b"\xe9", false, 40), "\\xe9");
        assert_eq!(render(b"\xe9", true, 40), "\\xe9");
        assert_eq!(render_one("✓x".as_bytes(), true), "✓");
        assert_eq!(render_one(b"\xe2\x9c", true), "\\xe2");
        assert_eq!(render_one(b"", true), "");
        assert_eq!(render_one(b"....", true), ".");
    }

    #[test]
    fn bounded_whatever_the_input() {
        let huge = vec![b'x'; 1 << 20];
        assert_eq!(render(&huge, true, 3), "xxx...");
        assert_eq!(render(b"xxx", true, 3), "xxx");
        let multibyte = "é".repeat(100);
        assert_eq!(render(multibyte.as_bytes(), true, 2), "éé...");
        assert_eq!(render(multibyte.as_bytes(), false, 2), "\\xc3\\xa9...");
    }
}
