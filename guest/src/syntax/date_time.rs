//! RFC 3339 §5.6 `date-time`, the shape of an event's `time`.

/// RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` with real field ranges:
/// days per month with Gregorian leap years, and a leap second (`:60`) only where one can
/// fall. `T` and `Z` may be lowercase (RFC 3339 §5.6 note). The compact ISO 8601 form
/// (`20260101T000000Z`) and a missing offset are not RFC 3339, so a reader could not
/// place the instant.
pub(crate) fn is_date_time(text: &str) -> bool {
    let b = text.as_bytes();
    let field = |from: usize, len: usize| b.get(from..from + len).and_then(number);
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        field(0, 4),
        field(5, 2),
        field(8, 2),
        field(11, 2),
        field(14, 2),
        field(17, 2),
    ) else {
        return false;
    };
    let Some(offset) = fraction_and_offset(b.get(19..).unwrap_or_default()) else {
        return false;
    };
    separators.iter().all(|&(at, sep)| b.get(at) == Some(&sep))
        && matches!(b.get(10), Some(b'T' | b't'))
        && (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour <= 23
        && minute <= 59
        && (second <= 59 || (second == 60 && is_last_utc_minute(hour, minute, offset)))
}

/// RFC 3339 §5.7: a leap second is added at the end of a UTC day, and "in time zones
/// other than Z, the leap second point is shifted by the zone offset". So `:60` is only
/// ever seen in the minute that is 23:59 UTC: `23:59:60Z`, `15:59:60-08:00`.
fn is_last_utc_minute(hour: u32, minute: u32, offset_minutes: i32) -> bool {
    let local = (hour * 60 + minute) as i32;
    (local - offset_minutes).rem_euclid(24 * 60) == 23 * 60 + 59
}

/// `time-secfrac time-offset`: `[ "." 1*DIGIT ] ( "Z" / ( "+" / "-" ) HH ":" MM )`, giving
/// the offset east of UTC in minutes.
fn fraction_and_offset(rest: &[u8]) -> Option<i32> {
    let offset = match rest.strip_prefix(b".") {
        Some(fraction) => {
            let digits = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            fraction.get(digits..).unwrap_or_default()
        }
        None => rest,
    };
    match offset {
        [b'Z' | b'z'] => Some(0),
        [sign @ (b'+' | b'-'), h0, h1, b':', m0, m1] => {
            let hours = number(&[*h0, *h1]).filter(|h| *h <= 23)?;
            let minutes = number(&[*m0, *m1]).filter(|m| *m <= 59)?;
            let east = (hours * 60 + minutes) as i32;
            Some(if *sign == b'-' { -east } else { east })
        }
        _ => None,
    }
}

/// The value of an all-ASCII-digit slice (at most four digits here, so no overflow).
fn number(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
    })
}

/// RFC 3339 Appendix C: February has 29 days in years divisible by 4, except centuries
/// not divisible by 400.
fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The date-time `text` plus `ms` milliseconds, in UTC to the millisecond
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`): how the component, which has no wall clock, dates what
/// happens during a hook call from the harness's own `time`. A fraction finer than a
/// millisecond is rounded up, so that what happened after `text` is never dated before
/// it, and a leap second counts as the start of the next one. `None`
/// when `text` is not a date-time or the result falls outside years 0000 to 9999.
pub(crate) fn later(text: &str, ms: u64) -> Option<String> {
    if !is_date_time(text) {
        return None;
    }
    let b = text.as_bytes();
    let field = |from: usize, len: usize| b.get(from..from + len).and_then(number).map(i64::from);
    let (year, month, day) = (field(0, 4)?, field(5, 2)?, field(8, 2)?);
    let (hour, minute, second) = (field(11, 2)?, field(14, 2)?, field(17, 2)?);
    let rest = b.get(19..).unwrap_or_default();
    let millis = match rest.strip_prefix(b".") {
        // Up to three digits, read as thousandths: ".5" is 500; any finer one that is not
        // zero adds a thousandth.
        Some(fraction) => {
            let digits = fraction.iter().take_while(|d| d.is_ascii_digit());
            let finer = digits.clone().skip(3).any(|d| *d != b'0');
            // Only the fraction's own digits: what follows a short one is the offset.
            let thousandths = digits
                .chain(std::iter::repeat(&b'0'))
                .take(3)
                .fold(0, |n, d| n * 10 + i64::from(d - b'0'));
            thousandths + i64::from(finer)
        }
        None => 0,
    };
    let east = i64::from(fraction_and_offset(rest)?);
    let utc_minutes = (days_from_civil(year, month, day) * 24 + hour) * 60 + minute - east;
    let total =
        ((utc_minutes * 60 + second) * 1000 + millis).checked_add(i64::try_from(ms).ok()?)?;
    const DAY_MS: i64 = 86_400_000;
    let (year, month, day) = civil_from_days(total.div_euclid(DAY_MS));
    let in_day = total.rem_euclid(DAY_MS);
    (0..=9999).contains(&year).then(|| {
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            in_day / 3_600_000,
            in_day / 60_000 % 60,
            in_day / 1000 % 60,
            in_day % 1000
        )
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (eras of 400 years, each
/// 146,097 days, counted from March so that a leap day ends its year).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day counted as [`days_from_civil`] counts it.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * from_march + 2) / 5 + 1;
    let month = if from_march < 10 {
        from_march + 3
    } else {
        from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
pub(crate) mod examples {
    pub(crate) const DATE_TIMES: &[&str] = &[
        "2026-09-01T10:00:00Z",
        "2024-02-29T23:59:60z",
        "2026-09-01t10:00:00.123456-07:30",
        "2026-12-31T23:59:59+14:00",
        // Boundaries: Feb 29 in a year divisible by 400 and in year 0, the last day of
        // 30- and 31-day months, zero and extreme offsets, a one-digit fraction.
        "2000-02-29T00:00:00Z",
        "0000-02-29T00:00:00Z",
        "2026-04-30T00:00:00Z",
        "2026-01-31T00:00:00Z",
        "2026-01-01T00:00:00+00:00",
        "2026-01-01T00:00:00-00:00",
        "2026-01-01T00:00:00+23:59",
        "2026-01-01T00:00:00.0Z",
        // Leap seconds, in the minute that is 23:59 UTC wherever the offset puts it
        // (RFC 3339 §5.8's own example, and one that is local tomorrow).
        "2016-12-31T23:59:60.5Z",
        "1990-12-31T15:59:60-08:00",
        "2017-01-01T01:29:60+01:30",
    ];

    pub(crate) const NOT_DATE_TIMES: &[&str] = &[
        "20260101T000000Z",
        "2026-01-01",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00:00",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00+0100",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-01-01T00:00:61Z",
        // A leap second outside the last UTC minute of a day.
        "2026-01-01T10:00:60Z",
        "2026-06-30T23:58:60Z",
        "1990-12-31T23:59:60-08:00",
        "2016-12-31T23:59:60+00:01",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00-01:60",
        "+026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Zjunk",
        // Boundaries: Feb 29 in centuries not divisible by 400, day 00, a 31st in a
        // 30-day month, a fraction without an offset, a truncated offset, a two-digit
        // year, non-ASCII digits.
        "1900-02-29T00:00:00Z",
        "2100-02-29T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-06-31T00:00:00Z",
        "2026-01-01T00:00:00.123",
        "2026-01-01T00:00:00+01:0",
        "26-01-01T00:00:00Z",
        "２026-01-01T00:00:00Z",
    ];
}

#[cfg(test)]
mod tests {
    use super::examples::{DATE_TIMES, NOT_DATE_TIMES};
    use super::*;
    use crate::syntax::assert_shape;

    #[test]
    fn date_times_follow_rfc_3339_with_real_field_ranges() {
        assert_shape(is_date_time, DATE_TIMES, NOT_DATE_TIMES);
    }

    #[test]
    fn a_later_time_is_in_utc_to_the_millisecond() {
        for (time, ms, expected) in [
            ("2026-09-01T10:00:00Z", 0, "2026-09-01T10:00:00.000Z"),
            (
                "2026-09-01t10:00:00.123456-07:30",
                1,
                "2026-09-01T17:30:00.125Z",
            ),
            (
                "2026-12-31T23:59:59.999+14:00",
                1,
                "2026-12-31T10:00:00.000Z",
            ),
            ("2024-02-28T23:59:59.5Z", 500, "2024-02-29T00:00:00.000Z"),
            (
                "2100-02-28T23:00:00Z",
                3_600_000,
                "2100-03-01T00:00:00.000Z",
            ),
            (
                "2000-02-28T23:00:00Z",
                3_600_000,
                "2000-02-29T00:00:00.000Z",
            ),
            ("2016-12-31T23:59:60.5Z", 0, "2017-01-01T00:00:00.500Z"),
            ("2026-01-01T00:00:00.1231Z", 0, "2026-01-01T00:00:00.124Z"),
            ("2026-01-01T00:00:00.123000Z", 0, "2026-01-01T00:00:00.123Z"),
            ("2026-01-01T00:00:59.9999Z", 0, "2026-01-01T00:01:00.000Z"),
            (
                "2026-01-01T00:00:00.000000001Z",
                2,
                "2026-01-01T00:00:00.003Z",
            ),
            ("1969-12-31T23:59:59.9Z", 100, "1970-01-01T00:00:00.000Z"),
            (
                "0000-03-01T00:00:00Z",
                86_400_000,
                "0000-03-02T00:00:00.000Z",
            ),
            (
                "2026-01-01T00:00:00Z",
                40 * 86_400_000,
                "2026-02-10T00:00:00.000Z",
            ),
        ] {
            assert_eq!(later(time, ms).as_deref(), Some(expected), "{time} + {ms}");
        }
        for time in DATE_TIMES {
            let later = later(time, 1234).unwrap_or_else(|| panic!("{time}"));
            assert!(is_date_time(&later), "{time} gave {later}");
        }
    }

    #[test]
    fn a_short_fraction_ends_at_its_last_digit_not_in_the_offset() {
        for (time, expected) in [
            ("2026-01-01T00:00:00.5+10:00", "2025-12-31T14:00:00.500Z"),
            ("2026-01-01T00:00:00.25-01:00", "2026-01-01T01:00:00.250Z"),
            ("2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00.500Z"),
        ] {
            assert_eq!(later(time, 0).as_deref(), Some(expected), "{time}");
        }
    }

    #[test]
    fn no_later_time_outside_the_four_digit_years_or_from_a_non_date_time() {
        assert_eq!(later("9999-12-31T23:59:59.999Z", 1), None);
        assert_eq!(later("0000-01-01T00:30:00+01:00", 0), None);
        assert_eq!(later("2026-01-01T00:00:00Z", u64::MAX), None);
        for text in NOT_DATE_TIMES {
            assert_eq!(later(text, 0), None, "{text}");
        }
    }

    #[test]
    fn february_follows_the_gregorian_leap_year_rule() {
        for (year, days) in [(2024, 29), (2025, 28), (1900, 28), (2000, 29), (2100, 28)] {
            assert_eq!(days_in_month(year, 2), days, "{year}");
        }
    }
}
