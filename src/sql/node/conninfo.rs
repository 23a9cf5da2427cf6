//! libpq's own reading of a connect string, for SQL: `snowflake_id_node.conninfo(text)`.
//!
//! The router stores the connect strings of its nodes and hands them to PL/Proxy, dblink
//! and the nodes' subscriptions, each of which appends options of its own. It must know what
//! libpq will read from a string — which keywords, which values, whether a secret is among
//! them — in every syntax libpq accepts (`key=value` with quotes and escapes, URIs with
//! percent-encoding and `?key=value` parameters). Rather than guess with patterns, it asks
//! libpq: `PQconninfoParse`, the parser `PQconnectdb` itself uses. Each option libpq read
//! comes back as a row (keyword, value, and whether libpq marks the field secret, its
//! `dispchar` `*`: `password`, `sslpassword`, and whatever later versions add).
//!
//! The input is handed to libpq as PostgreSQL's own NUL-terminated copy (`text_to_cstring`,
//! in the call's memory context), after a length check: nothing here allocates in Rust in
//! proportion to the input, and libpq's own allocations fail with a message, not an abort.

use crate::pg::node::libpq::{PQconninfoFree, PQconninfoParse, PQfreemem};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::ffi::{c_char, CStr};

/// Longer connect strings are refused before libpq sees them (no real one comes close).
const MAX_CONNSTR_BYTES: usize = 64 * 1024;

fn refuse(message: String) -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        message,
        "conninfo",
    )
    .report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

crate::pg::fmgr::pg_function_info_v1!(pg_finfo_conninfo_wrapper);
/// `snowflake_id_node.conninfo(connstr text) RETURNS TABLE (keyword text, value text,
/// secret boolean)`, declared in `sql/node/node.sql`: the options libpq reads from `connstr`.
///
/// # Safety
/// Called by PostgreSQL's fmgr as that function: STRICT, one `text` argument, in a
/// context that accepts a materialized set (`InitMaterializedSRF` checks it).
#[pgrx::pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn conninfo_wrapper(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fmgr's contract: argument 0 is a non-null text datum.
    let (input, len) = unsafe {
        let text =
            pg_sys::pg_detoast_datum_packed((*fcinfo).args.as_slice(1)[0].value.cast_mut_ptr());
        (text, pgrx::varlena::varsize_any_exhdr(text))
    };
    if len > MAX_CONNSTR_BYTES {
        refuse(format!(
            "connect string of {len} bytes is too long: at most {MAX_CONNSTR_BYTES}"
        ));
    }
    // SAFETY: a detoasted text; the copy is palloc'd, NUL-terminated, freed with the context.
    let cstr = unsafe { pg_sys::text_to_cstring(input) };
    let mut errmsg: *mut c_char = std::ptr::null_mut();
    // SAFETY: cstr is NUL-terminated; errmsg receives a malloc'd message or stays null.
    let options = unsafe { PQconninfoParse(cstr, &mut errmsg) };
    if options.is_null() {
        let why = if errmsg.is_null() {
            "out of memory".to_string()
        } else {
            // SAFETY: libpq's NUL-terminated message, freed right after the copy.
            let why = unsafe { CStr::from_ptr(errmsg) }
                .to_string_lossy()
                .trim_end()
                .to_string();
            unsafe { PQfreemem(errmsg.cast()) };
            why
        };
        refuse(format!("invalid connect string: {why}"));
    }
    // SAFETY: fcinfo is a set-returning call's (checked by InitMaterializedSRF itself).
    unsafe {
        pg_sys::InitMaterializedSRF(fcinfo, 0);
        let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
        let mut option = options;
        // The array ends with an option whose keyword is null.
        while !(*option).keyword.is_null() {
            if !(*option).val.is_null() {
                let secret = !(*option).dispchar.is_null() && *(*option).dispchar == b'*' as c_char;
                let mut values = [
                    pg_sys::Datum::from(pg_sys::cstring_to_text((*option).keyword)),
                    pg_sys::Datum::from(pg_sys::cstring_to_text((*option).val)),
                    pg_sys::Datum::from(secret),
                ];
                let mut nulls = [false; 3];
                pg_sys::tuplestore_putvalues(
                    (*rsinfo).setResult,
                    (*rsinfo).setDesc,
                    values.as_mut_ptr(),
                    nulls.as_mut_ptr(),
                );
            }
            option = option.add(1);
        }
        // (An ERROR above, out of memory, would leak the array: libpq's malloc, not ours.)
        PQconninfoFree(options);
    }
    pg_sys::Datum::from(0)
}
