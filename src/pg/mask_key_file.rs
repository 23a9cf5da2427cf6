//! The server's default mask key, for `id_mask(id)` and `id_unmask(masked)`: read from a file
//! that `snowflake_id.mask_key_file` names, never held in a setting.
//!
//! A setting's value is readable by every member of `pg_read_all_settings` (so `pg_monitor`),
//! even one marked superuser-only; it is a readable placeholder in any session that has not
//! loaded the library; and the statement that sets it lands verbatim in `pg_stat_statements`,
//! `pg_stat_activity` and the server log. So the setting holds only a path (relative to the
//! data directory, or absolute), and the key stays in a file that only the server's operating
//! system user can read (a file readable by its group or others is refused).
//!
//! When the key is read, and why it cannot be stale: the file is read by the setting's check
//! hook, and the key kept as the setting's `extra`, which PostgreSQL's GUC machinery stores
//! with the value and restores with it. The setting is `PGC_SIGHUP`: it comes only from the
//! configuration files, which every backend (and the postmaster) processes again at each
//! reload (`pg_reload_conf()`, SIGHUP), calling the check hook again even when the path is
//! unchanged; a new session reads it when it loads the library. So the key a session uses
//! is the file's content at the last reload, as for `ssl_key_file`: replacing the file
//! changes the key at the next reload, in every session, and a file that fails to read then
//! keeps the key in force (the failure is logged). Parallel workers do not read the file:
//! `id_mask(id)` and `id_unmask(masked)` are PARALLEL RESTRICTED (a worker reading the file
//! afresh could get a newer key than its leader).

use super::error::IdError;
use super::text_arg;
use crate::id::key_file::read_key_file;
use crate::id::mask::Key;
use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The setting: the key file's path; empty means no default key.
static MASK_KEY_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// The key of the setting's current value: its `extra`, alive while it is current (the GUC
/// machinery frees an extra only once no value refers to it, and calls the assign hook with
/// every value it makes current, including on rollback and reset). Null: no key.
static CURRENT: AtomicPtr<Key> = AtomicPtr::new(std::ptr::null_mut());

pub fn init() {
    // SAFETY: the hooks are guarded (check) or cannot fail (assign).
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"snowflake_id.mask_key_file",
            c"File holding the key (32 hexadecimal digits) id_mask(id) and id_unmask(masked) use when given no key.",
            c"A path relative to the data directory, or absolute; the file must be readable by the \
              server's user only. It is read at server start, at each reload and when a session \
              loads the library. An empty string means no key.",
            &MASK_KEY_FILE,
            GucContext::Sighup,
            GucFlags::default(),
            Some(check_mask_key_file),
            Some(assign_mask_key_file),
            None,
        );
    }
}

/// The default key, or 55000 when there is none.
pub fn key() -> Key {
    // SAFETY: null or the current value's extra (see `CURRENT`).
    match unsafe { CURRENT.load(Ordering::Relaxed).as_ref() } {
        Some(key) => *key,
        None => IdError::MaskKeyUnset.report(),
    }
}

/// Reads the key file a proposed value names, into the value's `extra`; refuses the value
/// (with the file's problem, never its content) when the file does not hold a key.
#[pg_guard]
unsafe extern "C-unwind" fn check_mask_key_file(
    newval: *mut *mut c_char,
    extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL passes a pointer to the proposed value, NULL or NUL-terminated.
    let path = unsafe { (*newval).as_ref().map(|v| CStr::from_ptr(v)) };
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        return true;
    };
    // SAFETY: a flag PostgreSQL sets while a parallel worker restores its leader's state.
    if unsafe { pg_sys::InitializingParallelWorker } {
        return true;
    }
    let key = match read_key_file(Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()))) {
        Ok(key) => key,
        Err(error) => {
            let path = text_arg::shown(path.to_bytes(), 200);
            return refuse(IdError::MaskKeyFile { path, error });
        }
    };
    // SAFETY: extra must be allocated as the GUC machinery frees it; written before use.
    unsafe {
        let slot = guc_alloc(std::mem::size_of::<Key>()) as *mut Key;
        if slot.is_null() {
            return false;
        }
        slot.write(key);
        *extra = slot.cast();
    }
    true
}

/// Makes the value's key (its `extra`, null for no key) the one in force.
unsafe extern "C-unwind" fn assign_mask_key_file(_newval: *const c_char, extra: *mut c_void) {
    CURRENT.store(extra.cast(), Ordering::Relaxed);
}

/// Memory for a GUC `extra`: `malloc` before PostgreSQL 16, `guc_malloc` since (each frees
/// it its own way).
#[cfg(feature = "pg15")]
unsafe fn guc_alloc(size: usize) -> *mut c_void {
    extern "C" {
        fn malloc(size: usize) -> *mut c_void;
    }
    // SAFETY: plain malloc; null on failure.
    unsafe { malloc(size) }
}

#[cfg(not(feature = "pg15"))]
unsafe fn guc_alloc(size: usize) -> *mut c_void {
    // SAFETY: returns null on failure at elevel LOG.
    unsafe { pg_sys::guc_malloc(pg_sys::LOG as i32, size) }
}

/// Fails a check hook with `error`'s message, hint and SQLSTATE (as GUC_check_errmsg(),
/// GUC_check_errhint() and GUC_check_errcode() do: strings in ErrorContext, read by the GUC
/// machinery's ereport right after the hook returns).
fn refuse(error: IdError) -> bool {
    let (code, message, hint) = error.for_check_hook();
    // SAFETY: as above.
    unsafe {
        pg_sys::GUC_check_errcode(code as i32);
        for (slot, text) in [
            (&raw mut pg_sys::GUC_check_errmsg_string, Some(message)),
            (&raw mut pg_sys::GUC_check_errhint_string, hint),
        ] {
            if let Some(text) = text {
                let text = CString::new(text).unwrap_or_default();
                *slot = pg_sys::MemoryContextStrdup(pg_sys::ErrorContext, text.as_ptr());
            }
        }
    }
    false
}
