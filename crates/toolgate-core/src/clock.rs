//! Time, injectable: approvals expire and errors state today's date, so tests need a clock they
//! can move.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync {
    fn now(&self) -> SystemTime;

    /// Today's date (UTC) written `YYYY-MM-DD`.
    fn today(&self) -> String {
        let secs = self
            .now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let (y, m, d) = civil_from_unix_days((secs / 86_400) as i64);
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    pub fn at_unix(secs: u64) -> Self {
        ManualClock(Mutex::new(UNIX_EPOCH + Duration::from_secs(secs)))
    }

    pub fn advance(&self, by: Duration) {
        if let Ok(mut t) = self.0.lock() {
            *t += by;
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        self.0.lock().map(|t| *t).unwrap_or(UNIX_EPOCH)
    }
}

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day).
pub fn civil_from_unix_days(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Seconds since the Unix epoch (0 before it).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_table() {
        for (days, expected) in [
            (0, (1970, 1, 1)),
            (-1, (1969, 12, 31)),
            (11_016, (2000, 2, 29)),
            (20_786, (2026, 11, 29)),
            (19_782, (2024, 2, 29)),
        ] {
            assert_eq!(civil_from_unix_days(days), expected, "{days}");
        }
    }

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::at_unix(20_786 * 86_400);
        assert_eq!(clock.today(), "2026-11-29");
        clock.advance(Duration::from_secs(86_400));
        assert_eq!(clock.today(), "2026-11-30");
    }
}
