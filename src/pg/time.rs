//! Time as PostgreSQL keeps it, and as IDs count it: PostgreSQL's epoch, its clock, and
//! `timestamptz` to and from Unix milliseconds. The one copy of each conversion.

use super::error::IdError;
use super::mirror::unguarded;
use crate::id::layouts::LayoutError;
use pgrx::prelude::*;
use std::ffi::{c_int, c_long};
use std::time::Instant;

/// Milliseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01 (both UTC).
pub const PG_EPOCH_UNIX_MS: i64 =
    (pg_sys::POSTGRES_EPOCH_JDATE as i64 - pg_sys::UNIX_EPOCH_JDATE as i64) * 86_400_000;

/// PostgreSQL's clock (`gettimeofday`, the one `clock_timestamp()` reads) in Unix ms.
pub fn clock_unix_ms() -> i64 {
    // SAFETY: cannot fail (see `unguarded`).
    let micros_since_2000 = unsafe { unguarded::GetCurrentTimestamp() };
    micros_since_2000.div_euclid(1000) + PG_EPOCH_UNIX_MS
}

/// A timestamptz as Unix milliseconds, truncated to its millisecond. ±infinity become
/// i64::MAX/MIN, which every layout's range check refuses and its message names as infinity.
pub fn unix_ms_of(ts: TimestampWithTimeZone) -> i64 {
    if ts.is_infinity() {
        return i64::MAX;
    }
    if ts.is_neg_infinity() {
        return i64::MIN;
    }
    ts.into_inner()
        .div_euclid(1000)
        .saturating_add(PG_EPOCH_UNIX_MS)
}

/// A timestamptz argument as an epoch in Unix ms: finite and on a whole millisecond.
pub fn epoch_unix_ms(epoch: TimestampWithTimeZone) -> i64 {
    let us = epoch.into_inner();
    if us == i64::MIN || us == i64::MAX || us % 1000 != 0 {
        IdError::from(LayoutError::BadEpoch).report()
    }
    us / 1000 + PG_EPOCH_UNIX_MS
}

/// Microseconds since PostgreSQL's epoch (2000-01-01) as a finite timestamptz, or `None`
/// where its range (4714 BC to 294276 AD) ends.
fn timestamp_of_pg_us(pg_us: i64) -> Option<TimestampWithTimeZone> {
    Some(pg_us)
        .filter(|&us| us != i64::MIN && us != i64::MAX)
        .and_then(|us| TimestampWithTimeZone::try_from(us).ok())
}

/// Unix milliseconds as a timestamptz, or `None` where PostgreSQL's range ends. The epochs'
/// difference is taken first: Unix microseconds of times late in PostgreSQL's range
/// (294276 AD) are past i64, the same time counted from 2000 is not.
pub fn timestamp_of_unix_ms(unix_ms: i64) -> Option<TimestampWithTimeZone> {
    timestamp_of_pg_us(unix_ms.checked_sub(PG_EPOCH_UNIX_MS)?.checked_mul(1000)?)
}

/// Unix microseconds as a timestamptz, or `None` where PostgreSQL's range ends.
pub fn timestamp_of_unix_us(unix_us: i64) -> Option<TimestampWithTimeZone> {
    timestamp_of_pg_us(unix_us.checked_sub(PG_EPOCH_UNIX_MS * 1000)?)
}

/// The host's monotonic clock (`CLOCK_MONOTONIC`, the one `Instant` reads): every backend of
/// a server reads the same one, so a deadline one backend records (a move's fence, in its
/// record) another can compare with. It counts from the host's boot, so it keeps counting
/// across a restart of the server, and starts again after a reboot, which no session outlives.
#[cfg(target_os = "linux")]
const CLOCK_MONOTONIC: c_int = 1;
#[cfg(any(target_os = "macos", target_os = "ios"))]
const CLOCK_MONOTONIC: c_int = 6;
#[cfg(target_os = "freebsd")]
const CLOCK_MONOTONIC: c_int = 4;

/// `struct timespec` of a 64-bit host (pgrx builds for no other).
#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: c_int, tp: *mut Timespec) -> c_int;
}

/// The host's monotonic clock as a timestamptz: PostgreSQL's epoch (2000-01-01) plus the
/// time since the host's boot. Not a time of day: deadlines computed from it and compared
/// with it hold whatever the wall clock does (a clock stepped back stretches no wait), in any
/// backend of the server.
pub fn monotonic_now() -> TimestampWithTimeZone {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the struct it is given; CLOCK_MONOTONIC exists on every supported host.
    let rc = unsafe { clock_gettime(CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    // (Below 0 under libfaketime with an offset larger than the uptime: still monotonic.)
    let micros = ts.tv_sec.saturating_mul(1_000_000) + ts.tv_nsec / 1000;
    TimestampWithTimeZone::try_from(micros.clamp(-(1 << 50), 1 << 50))
        .expect("within timestamptz's range")
}

/// Sleeps (interruptibly: a cancel or terminate ends it at once) until `deadline` of the
/// monotonic clock. `pg_sleep` sleeps to an end read from the wall clock.
pub fn sleep_until(deadline: Instant) {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        // SAFETY: this backend's latch.
        let events = unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as c_int,
                left.as_millis().clamp(1, i32::MAX as u128) as c_long,
                pg_sys::PG_WAIT_EXTENSION,
            )
        };
        if events & pg_sys::WL_LATCH_SET as c_int != 0 {
            // SAFETY: this backend's latch.
            unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            pgrx::check_for_interrupts!();
        }
    }
}
