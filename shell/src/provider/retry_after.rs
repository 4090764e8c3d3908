//! The `Retry-After` header: delta-seconds or an HTTP-date (RFC 9110 §10.2.3), converted to
//! whole seconds from a given "now" (the caller passes the system clock; this module is pure).
//!
//! HTTP-date accepts the three forms RFC 9110 §5.6.7 requires recipients to parse:
//! IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`
//! (a two-digit year below 70 is 20xx, else 19xx) and asctime `Sun Nov  6 08:49:37 1994`.
//! The weekday is not checked. A date in the past gives 0. Anything else gives `None`.

/// Seconds to wait per a `Retry-After` value, given the current Unix time in seconds.
pub fn parse_retry_after(value: &str, now_unix_s: u64) -> Option<u64> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit()) {
        // Absurdly long digit strings saturate rather than fail: the server means "long".
        return Some(v.parse().unwrap_or(u64::MAX));
    }
    let at = parse_http_date(v)?;
    Some(at.saturating_sub(now_unix_s))
}

/// An HTTP-date as Unix seconds.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some((_, rest)) = s.split_once(',') {
        let parts: Vec<&str> = rest.split_whitespace().collect();
        match parts.as_slice() {
            // IMF-fixdate: 06 Nov 1994 08:49:37 GMT
            [day, mon, year, time, "GMT"] => {
                let year = parse_num(year, 4, 4)?;
                build(year, month(mon)?, parse_num(day, 2, 2)?, time)
            }
            // RFC 850: 06-Nov-94 08:49:37 GMT
            [date, time, "GMT"] => {
                let mut it = date.split('-');
                let (day, mon, yy) = (it.next()?, it.next()?, it.next()?);
                if it.next().is_some() {
                    return None;
                }
                let yy = parse_num(yy, 2, 2)?;
                let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
                build(year, month(mon)?, parse_num(day, 2, 2)?, time)
            }
            _ => None,
        }
    } else {
        // asctime: Sun Nov  6 08:49:37 1994
        let parts: Vec<&str> = s.split_whitespace().collect();
        match parts.as_slice() {
            [_wday, mon, day, time, year] => build(
                parse_num(year, 4, 4)?,
                month(mon)?,
                parse_num(day, 1, 2)?,
                time,
            ),
            _ => None,
        }
    }
}

fn parse_num(s: &str, min_len: usize, max_len: usize) -> Option<u64> {
    if s.len() < min_len || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn month(s: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS.iter().position(|m| *m == s).map(|i| i as u64 + 1)
}

fn build(year: u64, month: u64, day: u64, time: &str) -> Option<u64> {
    let mut t = time.split(':');
    let (h, m, sec) = (t.next()?, t.next()?, t.next()?);
    if t.next().is_some() {
        return None;
    }
    let (h, m, sec) = (
        parse_num(h, 2, 2)?,
        parse_num(m, 2, 2)?,
        parse_num(sec, 2, 2)?,
    );
    if !(1970..=9999).contains(&year) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

fn is_leap(y: u64) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (year >= 1970).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let mut days = 0;
    for year in 1970..y {
        days += if is_leap(year) { 366 } else { 365 };
    }
    for month in 1..m {
        days += days_in_month(y, month);
    }
    days + d - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT

    #[test]
    fn the_three_date_forms() {
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(T));
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(T));
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(T));
        // RFC 850's two-digit years: 00 to 69 are 2000 to 2069, 70 to 99 the 1900s.
        assert_eq!(
            parse_http_date("Thursday, 01-Jan-26 00:00:00 GMT"),
            Some(1_767_225_600)
        );
        assert_eq!(
            parse_http_date("Tuesday, 31-Dec-69 23:59:59 GMT"),
            Some(3_155_759_999)
        );
        assert_eq!(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2028 12:00:00 GMT"),
            Some(1_835_438_400)
        );
    }

    #[test]
    fn malformed_dates_are_rejected() {
        for bad in [
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 29 Feb 2027 00:00:00 GMT",
            "tomorrow",
            "-5",
            "1.5",
        ] {
            assert_eq!(parse_retry_after(bad, 0), None, "{bad}");
        }
    }

    #[test]
    fn every_field_is_taken_up_to_its_bound_and_refused_past_it() {
        let at = |d: &str, mon: &str, y: &str, time: &str| {
            parse_http_date(&format!("Mon, {d} {mon} {y} {time} GMT"))
        };
        // Each month's last day is a date in a leap year and in a common year; the next is not.
        let months = [
            ("Jan", 31, 31),
            ("Feb", 29, 28),
            ("Mar", 31, 31),
            ("Apr", 30, 30),
            ("May", 31, 31),
            ("Jun", 30, 30),
            ("Jul", 31, 31),
            ("Aug", 31, 31),
            ("Sep", 30, 30),
            ("Oct", 31, 31),
            ("Nov", 30, 30),
            ("Dec", 31, 31),
        ];
        for (mon, leap, common) in months {
            for (year, last) in [
                ("2024", leap),
                ("2023", common),
                ("2000", leap),
                ("2100", common),
            ] {
                assert!(at("01", mon, year, "00:00:00").is_some(), "{mon} {year}");
                assert!(
                    at(&format!("{last}"), mon, year, "00:00:00").is_some(),
                    "{mon} {year}"
                );
                assert_eq!(at(&format!("{}", last + 1), mon, year, "00:00:00"), None);
            }
            assert_eq!(at("00", mon, "2024", "00:00:00"), None, "{mon}");
        }
        // Years from 1970 (Unix time 0) to 9999.
        assert_eq!(at("31", "Dec", "1969", "23:59:59"), None);
        assert_eq!(at("01", "Jan", "1970", "00:00:00"), Some(0));
        assert_eq!(at("31", "Dec", "9999", "23:59:59"), Some(253_402_300_799));
        // Hours to 23, minutes to 59, seconds to 60 (a leap second).
        assert_eq!(at("01", "Jan", "1970", "23:59:60"), Some(86_400));
        for bad in ["24:00:00", "00:60:00", "00:00:61"] {
            assert_eq!(at("01", "Jan", "1970", bad), None, "{bad}");
        }
    }

    #[test]
    fn delta_seconds_and_dates_relative_to_now() {
        assert_eq!(parse_retry_after("120", T), Some(120));
        assert_eq!(parse_retry_after(" 0 ", T), Some(0));
        assert_eq!(
            parse_retry_after("99999999999999999999999", T),
            Some(u64::MAX)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", T),
            Some(30)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", T),
            Some(0)
        );
    }
}
