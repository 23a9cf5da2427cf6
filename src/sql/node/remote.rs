//! The router's private connections, locks and clock, for SQL: thin skins over
//! `src/pg/node/remote.rs`, `src/pg/own_lock.rs`, `src/pg/as_owner.rs`, `src/pg/hold_cancel.rs`,
//! `src/pg/time.rs` and `src/pg/xact.rs`, declared in sql/node/remote.sql (schema snowflake_id_node, closed to
//! PUBLIC).

use crate::pg::node::background;
use crate::pg::node::remote::{self, Outcome};
use crate::pg::{as_owner, hold_cancel, own_lock, row_count, time, xact};
use pgrx::prelude::*;
use std::time::Duration;

/// A timeout in seconds as a Duration (negative or NaN: none left; huge: a day).
fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(if s.is_nan() {
        0.0
    } else {
        s.clamp(0.0, 86_400.0)
    })
}

#[pg_extern(sql = false)]
fn remote_open(name: &str, connstr: &str, options: Option<&str>, peer: &str, timeout: f64) -> i32 {
    remote::open(name, connstr, options, peer.to_string(), seconds(timeout))
}

#[pg_extern(sql = false)]
fn background_start(job: i32, arg: i32) -> i32 {
    background::start(job, arg)
}

#[pg_extern(sql = false)]
fn remote_close(name: &str) -> bool {
    remote::close(name)
}

#[pg_extern(sql = false)]
fn remote_close_prefixed(prefix: &str) -> i32 {
    remote::close_prefixed(prefix)
}

#[pg_extern(sql = false)]
fn remote_names() -> Vec<String> {
    remote::names()
}

#[pg_extern(sql = false)]
fn remote_connstr(name: &str) -> Option<String> {
    remote::connstr(name)
}

#[pg_extern(sql = false)]
fn remote_pid(name: &str) -> i32 {
    remote::pid(name)
}

#[pg_extern(sql = false)]
fn remote_keep(name: &str, keep: bool) {
    remote::keep(name, keep)
}

#[pg_extern(sql = false)]
fn remote_send(name: &str, sql: &str) {
    remote::send(name, sql)
}

#[pg_extern(sql = false)]
fn remote_busy(name: &str) -> bool {
    remote::busy(name)
}

#[pg_extern(sql = false)]
fn remote_cancel(name: &str) -> bool {
    remote::cancel(name)
}

/// What was sent, or its error raised again (its message after `what: `, if given).
#[pg_extern(sql = false)]
fn remote_receive(name: &str, timeout: f64, what: Option<&str>) -> Option<String> {
    let label = what.unwrap_or("a query");
    match remote::receive(name, seconds(timeout), label) {
        Outcome::Value(v) => v,
        Outcome::Failed(e) => e.raise(what),
    }
}

/// What was sent, as {value, sqlstate, message}: a remote error is returned, not raised.
#[pg_extern(sql = false)]
fn remote_result(name: &str, timeout: f64, what: &str) -> Vec<Option<String>> {
    match remote::receive(name, seconds(timeout), what) {
        Outcome::Value(v) => vec![v, None, None],
        Outcome::Failed(e) => vec![None, Some(e.sqlstate), Some(e.message)],
    }
}

#[pg_extern(sql = false)]
fn own_lock(class: i32, key: i32, session: bool, shared: bool, wait: bool) -> bool {
    own_lock::acquire(class, key, session, shared, wait)
}

#[pg_extern(sql = false)]
fn own_unlock(class: i32, key: i32, session: bool, shared: bool) -> bool {
    own_lock::release(class, key, session, shared)
}

/// NULL for an array holding a NULL (no key there is held).
#[pg_extern(sql = false)]
fn own_locks_held(class: i32, keys: pgrx::Array<'_, i32>) -> Option<bool> {
    let keys: Option<Vec<i32>> = keys.iter().collect();
    keys.map(|keys| own_lock::all_held(class, keys))
}

#[pg_extern(sql = false)]
fn monotonic() -> TimestampWithTimeZone {
    time::monotonic_now()
}

#[pg_extern(sql = false)]
fn sleep(seconds_: f64) {
    time::sleep_until(std::time::Instant::now() + seconds(seconds_))
}

#[pg_extern(sql = false)]
fn as_owner(role: pg_sys::Oid, query: &str) -> Option<String> {
    as_owner::query(role, query)
}

#[pg_extern(sql = false)]
fn count_rows(rel: pg_sys::Oid) -> i64 {
    row_count::rows(rel)
}

#[pg_extern(sql = false)]
fn hold_cancel(query: &str) -> Option<String> {
    hold_cancel::query(query)
}

#[pg_extern(sql = false)]
fn in_transaction_block() -> bool {
    xact::in_transaction_block()
}
