//! Dates and times in UTC from Unix time, for what openmax prints (session lists, checkpoint
//! lists, the prompt's date when the local zone cannot be read): one home for the calendar
//! arithmetic (Howard Hinnant's civil-from-days).

/// The UTC date of Unix second `unix_s`: year, month (1–12), day (1–31).
pub fn date(unix_s: i64) -> (i64, u32, u32) {
    let z = unix_s.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

/// `YYYY-MM-DD`.
pub fn ymd(unix_s: i64) -> String {
    let (y, m, d) = date(unix_s);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DD HH:MM` of Unix milliseconds.
pub fn minutes(ms: u64) -> String {
    let s = (ms / 1000) as i64;
    let rem = s.rem_euclid(86_400);
    format!("{} {:02}:{:02}", ymd(s), rem / 3600, rem % 3600 / 60)
}

/// `YYYY-MM-DD HH:MM:SS` of Unix milliseconds.
pub fn seconds(ms: u64) -> String {
    let s = (ms / 1000) as i64;
    let rem = s.rem_euclid(86_400);
    format!("{}:{:02}", minutes(ms), rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates_and_the_leap_days_around_them() {
        assert_eq!(ymd(0), "1970-01-01");
        assert_eq!(ymd(-1), "1969-12-31");
        assert_eq!(ymd(951_782_400), "2000-02-29");
        assert_eq!(ymd(4_107_542_400), "2100-03-01");
        assert_eq!(ymd(4_107_542_399), "2100-02-28");
        assert_eq!(seconds(1_796_526_451_384), "2026-12-06 03:07:31");
        assert_eq!(minutes(1_796_526_451_384), "2026-12-06 03:07");
        // Every day of 1600 years maps to a valid, strictly increasing date.
        let mut last = (i64::MIN, 0, 0);
        for day in (-200_000i64..384_000).step_by(7) {
            let d = date(day * 86_400);
            assert!((1..=12).contains(&d.1) && (1..=31).contains(&d.2), "{d:?}");
            assert!(d > last);
            last = d;
        }
    }
}
