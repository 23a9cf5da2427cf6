//! The fmgr (version-1 calling convention) pieces for SQL functions written as C writes them,
//! rather than through `#[pg_extern]`: `next_id`'s two column-default forms
//! (`sql/instagram.rs`) and `id_decode` by layout (`sql/other_ids.rs`).

use pgrx::pg_sys;

/// `PG_FUNCTION_INFO_V1(name)`, given the record's own name `pg_finfo_<name>`: it tells
/// PostgreSQL that the function `name` uses the version-1 calling convention.
macro_rules! pg_function_info_v1 {
    ($finfo:ident) => {
        #[no_mangle]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            const V1: ::pgrx::pg_sys::Pg_finfo_record =
                ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }
    };
}
pub(crate) use pg_function_info_v1;

/// `PG_GETARG_DATUM(n)`.
///
/// # Safety
/// `fcinfo` is the call's, with more than `n` arguments, argument `n` not null (a STRICT
/// function's).
#[inline(always)]
unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> pg_sys::Datum {
    // SAFETY: the caller's.
    unsafe { (*fcinfo).args.as_slice(n + 1)[n].value }
}

/// `PG_GETARG_INT32(n)`.
///
/// # Safety
/// As [`arg`], for an `integer` argument.
#[inline(always)]
pub unsafe fn arg_i32(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> i32 {
    // SAFETY: the caller's.
    unsafe { arg(fcinfo, n).value() as i32 }
}

/// `PG_GETARG_OID(n)`, for a `regclass` argument.
///
/// # Safety
/// As [`arg`], for an `oid`-like argument.
#[inline(always)]
pub unsafe fn arg_oid(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> pg_sys::Oid {
    // SAFETY: the caller's.
    pg_sys::Oid::from(unsafe { arg(fcinfo, n).value() } as u32)
}
