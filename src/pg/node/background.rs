//! The router's background worker: a dynamic background worker (no shared_preload_libraries
//! needed) that runs a router operation without the session that started it.
//!
//! It connects to the starter's database as the starter's current role (never more rights
//! than the role that asked), pins the settings its statements depend on, then calls
//! `snowflake_id_router.background_step(job, arg)` in a transaction of its own, again
//! and again, sleeping the seconds each call returns, until one returns NULL. Every decision
//! is in that SQL function (router/sql/42_background.sql); this file only drives it.
//! SIGTERM (pg_terminate_backend, a shutdown) ends it as it ends a session (`die`: the
//! running step is rolled back); SIGINT (pg_cancel_backend) cancels the running step.

use crate::pg::node::home;
use pgrx::bgworkers::{BackgroundWorkerBuilder, BackgroundWorkerStatus, BgWorkerStartTime};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::ffi::CString;
use std::time::Duration;

/// bgw_type, as pg_stat_activity.backend_type shows it: how the router's SQL knows a
/// session is one of these workers (a client cannot claim a backend type).
const TYPE: &str = "snowflake_id_router background";

fn raise(code: PgSqlErrorCode, message: String) -> ! {
    crate::pg::node::libpq::raise(code, message)
}

/// Starts a worker for `job` (its `arg`) as the current role in this database, waits until
/// it runs, and returns its pid. 53400 when no worker slot is free (max_worker_processes).
pub fn start(job: i32, arg: i32) -> i32 {
    // SAFETY: backend globals, read in a backend.
    let (db, role, me) = unsafe {
        (
            pg_sys::MyDatabaseId.to_u32(),
            pg_sys::GetUserId().to_u32(),
            pg_sys::MyProcPid,
        )
    };
    let worker = BackgroundWorkerBuilder::new(&format!("snowflake_id_router job {job} ({arg})"))
        .set_type(TYPE)
        .set_library("snowflake_id")
        .set_function("snowflake_id_background_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
        .set_extra(&format!("{db} {role} {job} {arg}"))
        .set_notify_pid(me)
        .load_dynamic()
        .unwrap_or_else(|_| {
            raise(
                PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                "no background worker slot is free: raise max_worker_processes".to_string(),
            )
        });
    match worker.wait_for_startup() {
        Ok(pid) => pid,
        Err(BackgroundWorkerStatus::PostmasterDied) => raise(
            PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN,
            "the server is shutting down".to_string(),
        ),
        Err(_) => raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the background worker stopped before it started: see the server log".to_string(),
        ),
    }
}

// PostgreSQL's SIGTERM handler of a session (postgres.c), by its own symbol: pg_sys's is a
// Rust wrapper, not a signal handler.
#[cfg(not(feature = "pg19"))]
unsafe extern "C-unwind" {
    fn die(signal: std::ffi::c_int);
}
#[cfg(feature = "pg19")]
unsafe extern "C-unwind" {
    fn die(signal: std::ffi::c_int, info: *const pg_sys::pg_signal_info);
}

/// The worker's entry point (bgw_function_name).
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn snowflake_id_background_main(_arg: pg_sys::Datum) {
    // SAFETY: a background worker's start-up, as worker_spi does it: signals first (SIGTERM
    // ends it at the next interrupt check, as a session), then the connection.
    unsafe {
        #[cfg(any(feature = "pg15", feature = "pg17"))]
        pg_sys::pqsignal(pg_sys::SIGTERM as i32, Some(die));
        #[cfg(any(feature = "pg18", feature = "pg19"))]
        pg_sys::pqsignal_be(pg_sys::SIGTERM as i32, Some(die));
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    let extra = pgrx::bgworkers::BackgroundWorker::get_extra().to_string();
    let v: Vec<i64> = extra.split(' ').filter_map(|x| x.parse().ok()).collect();
    let [db, role, job, arg] = v[..] else {
        panic!("snowflake_id background worker: bad bgw_extra {extra:?}")
    };
    // A role the starter runs as may have no LOGIN (SET ROLE): it still has only its rights.
    #[cfg(feature = "pg15")]
    let flags = 0;
    #[cfg(not(feature = "pg15"))]
    let flags = pg_sys::BGWORKER_BYPASS_ROLELOGINCHECK;
    // SAFETY: once, before any transaction, as the API requires.
    unsafe {
        pg_sys::BackgroundWorkerInitializeConnectionByOid(
            pg_sys::Oid::from(db as u32),
            pg_sys::Oid::from(role as u32),
            flags,
        )
    };
    // Settings pinned: what the role's or database's defaults (applied at connect) would
    // change under the router's functions. No statement_timeout is armed in a worker. This
    // statement is parsed under the role's search_path: every name in it is qualified.
    let pinned = step::<f64>(&format!(
        "SELECT pg_catalog.length(pg_catalog.concat(
                    pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),
                    pg_catalog.set_config('lock_timeout', '0', false),
                    pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false),
                    pg_catalog.set_config('default_transaction_isolation', 'read committed', false),
                    pg_catalog.set_config('default_transaction_read_only', 'off', false),
                    pg_catalog.set_config('synchronous_commit', 'on', false),
                    pg_catalog.set_config('application_name', 'snowflake_id_router job {job}', false)))::pg_catalog.float8",
        job = job as i32
    ))
    .err();
    let (job, arg) = (job as i32, arg as i32);
    if let Some((code, message)) = pinned {
        warning!("snowflake_id_router background job {job} ({arg}) ends: {message} ({code})");
        return;
    }
    // Nothing of this database is called before it passes (src/pg/node/home.rs).
    let verdict = match step::<String>(home::CHECK) {
        Ok(v) => v,
        Err((code, message)) => Some(format!("{message} ({code})")),
    };
    if let Some((message, detail, _)) = home::refusal("this database", verdict.as_deref()) {
        warning!("snowflake_id_router background job {job} ({arg}) ends: {message}: {detail}");
        return;
    }
    let call = format!("SELECT snowflake_id_router.background_step({job}, {arg})");
    // One statement for the worker's whole life, as pg_stat_activity shows it (active since
    // its start, query_start fixed): a rebalance is held by the call that runs it
    // (call_alive: pid, session start, statement start), and the worker is that call. Its
    // steps' transactions keep this statement start (statement_timestamp()).
    let text = CString::new(call.as_str()).expect("no NUL in the step's SQL");
    // SAFETY: this backend's statement start and activity, as a backend reports its query.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_RUNNING, text.as_ptr());
    }
    loop {
        // A step that fails is reported to background_failed, in a transaction of its own
        // (its SQL handles no error: a subtransaction would make the router's steps refuse
        // to run, src/pg/xact.rs); it says whether to go on.
        let next = match step::<f64>(&call) {
            Ok(next) => next,
            Err((code, message)) => step::<f64>(&format!(
                "SELECT snowflake_id_router.background_failed({job}, {arg}, {}, {})",
                quote(&code),
                quote(&message)
            ))
            .unwrap_or_else(|(code, message)| {
                warning!(
                    "snowflake_id_router background job {job} ({arg}) ends: {message} ({code})"
                );
                None
            }),
        };
        match next {
            Some(wait) if wait > 0.0 => sleep(wait),
            Some(_) => {}
            None => break,
        }
    }
}

/// `s` as an SQL string literal (E'' form: every backslash and quote escaped).
fn quote(s: &str) -> String {
    format!("E'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Runs `sql` (one value or NULL) in a transaction of its own; an error it raises rolls the
/// transaction back and is returned (SQLSTATE, message).
fn step<T: FromDatum + IntoDatum>(sql: &str) -> Result<Option<T>, (String, String)> {
    // SAFETY: the worker's own transaction around one SPI statement, as
    // BackgroundWorker::transaction does; ended below on both paths.
    unsafe {
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let result = PgTryBuilder::new(|| Ok(Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{e}"))))
        .catch_others(|e| match e {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => {
                Err((sqlstate(r.sql_error_code()), r.message().to_string()))
            }
            CaughtError::RustPanic { ereport, .. } => {
                Err(("XX000".to_string(), ereport.message().to_string()))
            }
        })
        .execute();
    // SAFETY: ends the transaction begun above (an aborted one is rolled back, its snapshots
    // and SPI state released with it).
    unsafe {
        if result.is_ok() {
            pg_sys::PopActiveSnapshot();
            pg_sys::CommitTransactionCommand();
        } else {
            pg_sys::AbortCurrentTransaction();
        }
    }
    result
}

/// An error code's five characters (PostgreSQL's unpack_sql_state).
fn sqlstate(code: PgSqlErrorCode) -> String {
    let code = code as i32;
    (0..5)
        .map(|i| char::from(((code >> (6 * i)) & 0x3F) as u8 + b'0'))
        .collect()
}

/// Waits `seconds`, woken early (and ended, for SIGTERM) by an interrupt; ends the worker if
/// the postmaster dies.
fn sleep(seconds: f64) {
    let ms = Duration::from_secs_f64(seconds.min(86_400.0)).as_millis() as std::ffi::c_long;
    // SAFETY: this process's latch, as every backend waits on it.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            ms,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
        pg_sys::check_for_interrupts!();
    }
}
