//! Times in messages: Unix milliseconds as PostgreSQL writes a `timestamptz` in UTC, with
//! no time zone lookup, so an error can name a time wherever it is raised.

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
    // Year 0 is 1 BC, as PostgreSQL writes it.
    let (year, era) = if year > 0 {
        (year, "")
    } else {
        (1 - year, " BC")
    };
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{ms:03}+00{era}")
}

#[cfg(test)]
mod tests {
    use super::utc;
    use crate::id::layouts::INSTAGRAM;

    #[test]
    fn renders_the_epoch_and_the_horizon() {
        let epoch = INSTAGRAM.epoch_unix_ms;
        assert_eq!(utc(epoch), "2011-08-24 21:07:01.721+00");
        assert_eq!(
            utc(epoch + INSTAGRAM.max_time()),
            "2046-06-27 17:00:49.496+00"
        );
        assert_eq!(utc(0), "1970-01-01 00:00:00.000+00");
        assert_eq!(utc(-1), "1969-12-31 23:59:59.999+00");
        assert_eq!(utc(i64::MAX), "infinity");
        assert_eq!(utc(i64::MIN), "-infinity");
        // PostgreSQL's first day, and the last day before year 1.
        assert_eq!(utc(-210_866_803_200_000), "4714-11-24 00:00:00.000+00 BC");
        assert_eq!(utc(-62_135_596_800_001), "0001-12-31 23:59:59.999+00 BC");
        assert_eq!(utc(-62_135_596_800_000), "0001-01-01 00:00:00.000+00");
    }
}
