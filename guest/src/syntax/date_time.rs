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
    fn february_follows_the_gregorian_leap_year_rule() {
        for (year, days) in [(2024, 29), (2025, 28), (1900, 28), (2000, 29), (2100, 28)] {
            assert_eq!(days_in_month(year, 2), days, "{year}");
        }
    }
}
