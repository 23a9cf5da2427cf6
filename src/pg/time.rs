//! Time as PostgreSQL keeps it, and as IDs count it: PostgreSQL's epoch, its clock, and
//! `timestamptz` to and from Unix milliseconds. The one copy of each conversion.

use super::error::IdError;
use super::mirror::unguarded;
use crate::id::layouts::LayoutError;
use pgrx::prelude::*;

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
