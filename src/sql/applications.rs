//! IDs in applications, the SQL surface: the short text form, masked public IDs, the JSON
//! string form and the `snowflake` type (sql/snowflake_type.sql), and `convert_column`
//! (sql/convert.sql). The work is in the pure modules `id::text_form` and `id::mask`.

use crate::id::layouts::LayoutError;
use crate::id::{mask, text_form};
use crate::pg::error::{IdError, OrReport};
use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::{c_char, c_void, CStr, CString};

/// The default mask key (32 hexadecimal digits); superuser-only: not shown to others by
/// SHOW, current_setting or pg_settings once the library is loaded.
pub static MASK_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

pub fn init() {
    // SAFETY: the check hook is guarded and only parses its argument.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"snowflake_id.mask_key",
            c"Key (32 hexadecimal digits) id_mask(id) and id_unmask(masked) use when given no key.",
            c"Only superusers can set or read it; other roles can use it through id_mask and \
              id_unmask. Load the library at session start (session_preload_libraries) so that \
              the setting is never an unprotected placeholder. An empty string means unset.",
            &MASK_KEY,
            GucContext::Suset,
            GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL | GucFlags::NO_RESET_ALL,
            Some(check_mask_key),
            None,
            None,
        );
    }
}

/// Refuses a malformed key when it is set (22023, with the same message `id_mask` gives and
/// without repeating the key), so that a typo fails at `SET`/reload rather than at the next
/// `id_mask`. An empty string is accepted and means unset.
#[pg_guard]
unsafe extern "C-unwind" fn check_mask_key(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL passes a pointer to the proposed value, NULL or NUL-terminated.
    let value = unsafe { (*newval).as_ref().map(|v| CStr::from_ptr(v)) };
    let Some(Err(e)) = key_in_setting(value) else {
        return true;
    };
    let (message, hint) = IdError::BadMaskKey(e).message_and_hint();
    let hint = hint.unwrap_or_default();
    // SAFETY: as GUC_check_errmsg()/GUC_check_errhint() do: strings in ErrorContext, read by
    // the GUC machinery's ereport right after this returns (its SQLSTATE is 22023 already).
    unsafe {
        for (slot, text) in [
            (&raw mut pg_sys::GUC_check_errmsg_string, message),
            (&raw mut pg_sys::GUC_check_errhint_string, hint),
        ] {
            let text = CString::new(text).unwrap_or_default();
            *slot = pg_sys::MemoryContextStrdup(pg_sys::ErrorContext, text.as_ptr());
        }
    }
    false
}

fn non_negative(id: i64) -> i64 {
    if id < 0 {
        IdError::from(LayoutError::NegativeId(id)).report()
    }
    id
}

fn key_of(hex: &str) -> mask::Key {
    mask::Key::parse(hex).unwrap_or_else(|e| IdError::BadMaskKey(e).report())
}

/// What a value of `snowflake_id.mask_key` says: `None` when unset (NULL or empty), else
/// the key it spells, or why it spells none. The one reading of the setting, for the check
/// hook and for `id_mask(id)`.
fn key_in_setting(value: Option<&CStr>) -> Option<Result<mask::Key, mask::KeyError>> {
    let text = value.filter(|v| !v.is_empty())?;
    Some(mask::Key::parse(text.to_str().unwrap_or("?")))
}

fn setting_key() -> mask::Key {
    match key_in_setting(MASK_KEY.get().as_deref()) {
        Some(Ok(key)) => key,
        Some(Err(e)) => IdError::BadMaskKey(e).report(),
        None => IdError::MaskKeyUnset.report(),
    }
}

/// The 13-character Crockford base32 text form of an ID (TSID's alphabet); sorts like the ID.
#[pg_extern(immutable, parallel_safe)]
fn id_to_text(id: i64) -> String {
    let t = text_form::encode(non_negative(id));
    // The alphabet is ASCII, so this never replaces anything.
    String::from_utf8_lossy(&t).into_owned()
}

/// The ID of a 13-character base32 text form; case-insensitive, I and L read as 1, O as 0.
#[pg_extern(immutable, parallel_safe)]
fn id_from_text(id_text: &str) -> i64 {
    text_form::decode(id_text)
        .map_err(|error| IdError::BadText {
            text: id_text.chars().take(40).collect(),
            error,
        })
        .or_report()
}

/// An ID as a JSON string ("4000000000000000000"), exact in JavaScript; the cast from snowflake to json.
///
/// Declared in sql/snowflake_type.sql as RETURNS json: json's datum is text's, and pgrx
/// 0.18 has no plain json return type without serde.
#[pg_extern(sql = false)]
fn id_to_json(id: i64) -> String {
    format!("\"{id}\"")
}

/// The masked public form of an ID under a key (32 hex digits): a keyed permutation of 0 to 2^63-1.
#[pg_extern(immutable, parallel_safe, name = "id_mask")]
fn id_mask_key(id: i64, key: &str) -> i64 {
    mask::mask(non_negative(id), &key_of(key))
}

/// The ID a masked public ID stands for, under the key that masked it.
#[pg_extern(immutable, parallel_safe, name = "id_unmask")]
fn id_unmask_key(masked: i64, key: &str) -> i64 {
    mask::unmask(non_negative(masked), &key_of(key))
}

/// The masked public form of an ID under the key in snowflake_id.mask_key.
#[pg_extern(stable, parallel_safe)]
fn id_mask(id: i64) -> i64 {
    mask::mask(non_negative(id), &setting_key())
}

/// The ID a masked public ID stands for, under the key in snowflake_id.mask_key.
#[pg_extern(stable, parallel_safe)]
fn id_unmask(masked: i64) -> i64 {
    mask::unmask(non_negative(masked), &setting_key())
}

extension_sql_file!("../../sql/snowflake_type.sql", name = "snowflake_type");

// convert_column: a bigserial or identity key adopted in place.
extension_sql_file!(
    "../../sql/convert.sql",
    name = "convert",
    requires = ["installer"]
);

extension_sql!(
    r#"
COMMENT ON FUNCTION id_to_text(bigint) IS 'The 13-character Crockford base32 text form of an ID (TSID''s alphabet); sorts like the ID.';
COMMENT ON FUNCTION id_from_text(text) IS 'The ID of a 13-character base32 text form; case-insensitive, I and L read as 1, O as 0.';
COMMENT ON FUNCTION id_mask(bigint, text) IS 'The masked public form of an ID under a key (32 hex digits): a keyed permutation of 0 to 2^63-1.';
COMMENT ON FUNCTION id_unmask(bigint, text) IS 'The ID a masked public ID stands for, under the key that masked it.';
COMMENT ON FUNCTION id_mask(bigint) IS 'The masked public form of an ID under the key in snowflake_id.mask_key.';
COMMENT ON FUNCTION id_unmask(bigint) IS 'The ID a masked public ID stands for, under the key in snowflake_id.mask_key.';
"#,
    name = "apps_comments",
    requires = [
        id_to_text,
        id_from_text,
        id_mask_key,
        id_unmask_key,
        id_mask,
        id_unmask
    ]
);

/// The upgrade script carries sql/snowflake_type.sql and sql/convert.sql word for word (the
/// upgrade test compares functions and tables, not operators, casts or operator classes).
#[cfg(test)]
mod tests {
    #[test]
    fn upgrade_script_carries_the_sql_files() {
        let upgrade = include_str!("../../sql/snowflake_id--0.1.0--0.2.0.sql");
        for (name, file) in [
            (
                "snowflake_type.sql",
                include_str!("../../sql/snowflake_type.sql"),
            ),
            ("convert.sql", include_str!("../../sql/convert.sql")),
        ] {
            assert!(
                upgrade.contains(file),
                "the upgrade script lacks sql/{name} as it is"
            );
        }
        let src = include_str!("applications.rs");
        let at = src.find("COMMENT ON FUNCTION id_to_text").unwrap();
        let comments = &src[at..at + src[at..].find("\"#,").unwrap()];
        assert!(
            upgrade.contains(comments),
            "the upgrade script lacks sql_apps.rs's comments"
        );
    }
}
