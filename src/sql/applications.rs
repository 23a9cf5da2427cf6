//! IDs in applications, the SQL surface: the short text form, masked public IDs, the JSON
//! string form and the `snowflake` type (sql/id/snowflake_type.sql), and `convert_column`
//! (sql/installer/convert.sql). The work is in the pure modules `id::text_form` and `id::mask`. What
//! each function does for its caller is its `COMMENT` in sql/id/applications.sql.

use crate::id::layouts::LayoutError;
use crate::id::text_form::TextError;
use crate::id::{mask, text_form};
use crate::pg::error::{IdError, OrReport};
use crate::pg::mask_key_file;
use crate::pg::text_arg::{self, Text};
use pgrx::prelude::*;

fn non_negative(id: i64) -> i64 {
    if id < 0 {
        IdError::from(LayoutError::NegativeId(id)).report()
    }
    id
}

fn key_of(hex: Text) -> mask::Key {
    mask::Key::parse(hex.bytes()).unwrap_or_else(|e| IdError::BadMaskKey(e).report())
}

#[pg_extern(immutable, parallel_safe)]
fn id_to_text(id: i64) -> String {
    let t = text_form::encode(non_negative(id));
    // The alphabet is ASCII, so this never replaces anything.
    String::from_utf8_lossy(&t).into_owned()
}

#[pg_extern(immutable, parallel_safe)]
fn id_from_text(id_text: Text) -> i64 {
    let bytes = id_text.bytes();
    text_form::decode(bytes)
        .map_err(|error| IdError::BadText {
            text: text_arg::shown(bytes, 40),
            character: match error {
                TextError::BadChar { position } => text_arg::char_at(bytes, position - 1),
                _ => String::new(),
            },
            error,
        })
        .or_report()
}

/// `id_to_json(id)`, the cast from snowflake to json: declared in sql/id/snowflake_type.sql as
/// RETURNS json, since json's datum is text's and pgrx 0.18 has no plain json return type
/// without serde.
#[pg_extern(sql = false)]
fn id_to_json(id: i64) -> String {
    format!("\"{id}\"")
}

#[pg_extern(immutable, parallel_safe, name = "id_mask")]
fn id_mask_key(id: i64, key: Text) -> i64 {
    mask::mask(non_negative(id), &key_of(key))
}

#[pg_extern(immutable, parallel_safe, name = "id_unmask")]
fn id_unmask_key(masked: i64, key: Text) -> i64 {
    mask::unmask(non_negative(masked), &key_of(key))
}

#[pg_extern(stable, parallel_restricted)]
fn id_mask(id: i64) -> i64 {
    mask::mask(non_negative(id), &mask_key_file::key())
}

#[pg_extern(stable, parallel_restricted)]
fn id_unmask(masked: i64) -> i64 {
    mask::unmask(non_negative(masked), &mask_key_file::key())
}
