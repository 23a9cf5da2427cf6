//! Everything that can go wrong, and the one place it becomes a PostgreSQL error.
//!
//! Each variant maps to one SQLSTATE; each message says what was wrong and what is valid.
//! `error!` (XX000) is left for what cannot happen.

use crate::layout::{self, LayoutError, MAX_SEQ, MAX_SHARD};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

#[derive(Debug)]
pub enum IdError {
    Layout(LayoutError),
    /// The sequence has issued IDs up to the horizon.
    Exhausted {
        sequence: String,
    },
    NotASequence {
        relation: String,
    },
    PermissionDenied {
        sequence: String,
    },
    /// Another session's temporary sequence: its pages are in that backend's memory.
    OtherSessionsTemporary {
        sequence: String,
    },
    /// The sequence's MINVALUE/MAXVALUE cannot hold the ID (e.g. `AS integer`).
    SequenceTooSmall {
        sequence: String,
        id: i64,
        min: i64,
        max: i64,
    },
}

impl From<LayoutError> for IdError {
    fn from(e: LayoutError) -> Self {
        IdError::Layout(e)
    }
}

/// Renders Unix milliseconds as an ISO timestamp in UTC, e.g. `2046-06-27 ...`; i64::MAX
/// and i64::MIN stand for PostgreSQL's infinity and -infinity.
pub fn utc(unix_ms: i64) -> String {
    match unix_ms {
        i64::MAX => return "infinity".into(),
        i64::MIN => return "-infinity".into(),
        _ => {}
    }
    // Civil-from-days (Howard Hinnant's algorithm), so messages need no time zone lookups.
    let days = unix_ms.div_euclid(86_400_000);
    let ms_of_day = unix_ms.rem_euclid(86_400_000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{ms:03}+00")
}

fn valid_times() -> String {
    format!(
        "IDs hold times from {} (the epoch) to {} (the horizon)",
        utc(layout::EPOCH_UNIX_MS),
        utc(layout::MAX_UNIX_MS)
    )
}

impl IdError {
    fn parts(&self) -> (PgSqlErrorCode, String, Option<String>, Option<String>) {
        use PgSqlErrorCode::*;
        match self {
            IdError::Layout(e) => {
                let msg = match *e {
                    LayoutError::NegativeId(id) => {
                        format!("snowflake ID {id} is negative: valid IDs are 0 to 9223372036854775807")
                    }
                    LayoutError::ShardOutOfRange(s) => {
                        format!("shard {s} is out of range: valid shards are 0 to {MAX_SHARD}")
                    }
                    LayoutError::SeqOutOfRange(s) => {
                        format!("sequence number {s} is out of range: valid counters are 0 to {MAX_SEQ}")
                    }
                    LayoutError::BeforeEpoch(ms) => {
                        format!("time {} is before the snowflake ID epoch: {}", utc(ms), valid_times())
                    }
                    LayoutError::PastHorizon(ms) => {
                        format!("time {} is past the snowflake ID horizon: {}", utc(ms), valid_times())
                    }
                };
                (ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, msg, None, None)
            }
            IdError::Exhausted { sequence } => (
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "sequence \"{sequence}\" has no snowflake IDs left: the next one would be past the horizon {}",
                    utc(layout::MAX_UNIX_MS)
                ),
                None,
                None,
            ),
            IdError::NotASequence { relation } => (
                ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{relation}\" is not a sequence"),
                None,
                None,
            ),
            IdError::PermissionDenied { sequence } => (
                ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("permission denied for sequence {sequence}"),
                None,
                None,
            ),
            IdError::OtherSessionsTemporary { sequence } => (
                ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("cannot use sequence \"{sequence}\": it is a temporary sequence of another session"),
                None,
                None,
            ),
            IdError::SequenceTooSmall { sequence, id, min, max } => (
                ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                format!("sequence \"{sequence}\" cannot hold snowflake IDs: its range is {min} to {max}"),
                Some(format!("The next ID would be {id}.")),
                Some(format!("ALTER SEQUENCE {sequence} AS bigint MINVALUE 1 MAXVALUE 9223372036854775807")),
            ),
        }
    }

    /// Raises this error in PostgreSQL; does not return.
    pub fn report(self) -> ! {
        let (code, message, detail, hint) = self.parts();
        let mut report = ErrorReport::new(code, message, "snowflake_id");
        if let Some(detail) = detail {
            report = report.set_detail(detail);
        }
        if let Some(hint) = hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ERROR does not return")
    }
}

/// Unwraps a result or raises its error.
pub trait OrReport<T> {
    fn or_report(self) -> T;
}

impl<T, E: Into<IdError>> OrReport<T> for Result<T, E> {
    fn or_report(self) -> T {
        self.unwrap_or_else(|e| e.into().report())
    }
}

#[cfg(test)]
mod tests {
    use super::utc;
    use crate::layout::{EPOCH_UNIX_MS, MAX_UNIX_MS};

    #[test]
    fn renders_the_epoch_and_the_horizon() {
        assert_eq!(utc(EPOCH_UNIX_MS), "2011-08-24 21:07:01.721+00");
        assert_eq!(utc(MAX_UNIX_MS), "2046-06-27 17:00:49.496+00");
        assert_eq!(utc(0), "1970-01-01 00:00:00.000+00");
        assert_eq!(utc(-1), "1969-12-31 23:59:59.999+00");
        assert_eq!(utc(i64::MAX), "infinity");
        assert_eq!(utc(i64::MIN), "-infinity");
    }
}
