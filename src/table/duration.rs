//! Relative times as kube-apiserver's printers write them: ages, "(5m ago)"
//! after a restart count, a job's duration. The rules are apimachinery's
//! `duration.HumanDuration` (`staging/src/k8s.io/apimachinery/pkg/util/
//! duration/duration.go`): about two or three significant figures, never
//! more than two units.

use std::fmt::Write;
use std::time::{Duration, SystemTime};

/// `d` (seconds, possibly negative: a clock behind the object's) as
/// `HumanDuration` writes it: `0s` for up to a second into the future (a
/// tolerated skew), `<invalid>` past that, then `45s`, `3m12s`, `17m`,
/// `5h3m`, `30h`, `3d4h`, `90d`, `2y45d`, `9y`.
pub fn human(secs: i64, out: &mut String) {
    if secs < -1 {
        out.push_str("<invalid>");
        return;
    }
    if secs < 0 {
        out.push_str("0s");
        return;
    }
    let _ = match secs {
        s if s < 120 => write!(out, "{s}s"),
        s if s / 60 < 10 => match s % 60 {
            0 => write!(out, "{}m", s / 60),
            r => write!(out, "{}m{r}s", s / 60),
        },
        s if s / 60 < 180 => write!(out, "{}m", s / 60),
        s => {
            let hours = s / 3600;
            match hours {
                h if h < 8 => match (s / 60) % 60 {
                    0 => write!(out, "{h}h"),
                    m => write!(out, "{h}h{m}m"),
                },
                h if h < 48 => write!(out, "{h}h"),
                h if h < 24 * 8 => match h % 24 {
                    0 => write!(out, "{}d", h / 24),
                    r => write!(out, "{}d{r}h", h / 24),
                },
                h if h < 24 * 365 * 2 => write!(out, "{}d", h / 24),
                h if h < 24 * 365 * 8 => match (h / 24) % 365 {
                    0 => write!(out, "{}y", h / 24 / 365),
                    d => write!(out, "{}y{d}d", h / 24 / 365),
                },
                h => write!(out, "{}y", h / 24 / 365),
            }
        }
    };
}

/// Whole seconds from `then` to `now` (negative when `then` is later),
/// truncated toward zero as Go's `int(d.Seconds())` is.
pub fn seconds_between(then: SystemTime, now: SystemTime) -> i64 {
    match now.duration_since(then) {
        Ok(d) => secs(d),
        Err(e) => -secs(e.duration()),
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(secs: i64) -> String {
        let mut s = String::new();
        human(secs, &mut s);
        s
    }

    /// apimachinery's `TestHumanDuration` and `TestHumanDurationBoundaries`
    /// (`duration_test.go`), in whole seconds: a duration a millisecond
    /// short of a boundary is the second before it.
    #[test]
    fn should_write_durations_as_apimachinery_does() {
        let (m, hr, d) = (60, 3600, 86_400);
        let y = 365 * d;
        for (secs, want) in [
            (1, "1s"),
            (70, "70s"),
            (190, "3m10s"),
            (70 * m, "70m"),
            (47 * hr, "47h"),
            (49 * hr, "2d1h"),
            ((8 * 24 + 2) * hr, "8d"),
            (367 * 24 * hr, "367d"),
            ((365 * 2 * 24 + 25) * hr, "2y1d"),
            ((365 * 8 * 24 + 2) * hr, "8y"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (2 * m - 1, "119s"),
            (2 * m, "2m"),
            (2 * m + 1, "2m1s"),
            (10 * m - 1, "9m59s"),
            (10 * m, "10m"),
            (10 * m + 1, "10m"),
            (3 * hr - 1, "179m"),
            (3 * hr, "3h"),
            (3 * hr + m, "3h1m"),
            (8 * hr - 1, "7h59m"),
            (8 * hr, "8h"),
            (8 * hr + 59 * m, "8h"),
            (2 * d - 1, "47h"),
            (2 * d, "2d"),
            (2 * d + hr, "2d1h"),
            (8 * d - 1, "7d23h"),
            (8 * d, "8d"),
            (8 * d + 23 * hr, "8d"),
            (2 * y - 1, "729d"),
            (2 * y, "2y"),
            (2 * y + 23 * hr + 59 * m, "2y"),
            (2 * y + d - 1, "2y"),
            (2 * y + d, "2y1d"),
            (3 * y, "3y"),
            (7 * y, "7y"),
            (8 * y - 1, "7y364d"),
            (8 * y, "8y"),
            (8 * y + 364 * d, "8y"),
            (9 * y, "9y"),
        ] {
            assert_eq!(h(secs), want, "{secs} s");
        }
    }

    #[test]
    fn should_count_whole_seconds_either_way() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(seconds_between(t, t + Duration::from_millis(2_900)), 2);
        assert_eq!(seconds_between(t + Duration::from_millis(1_500), t), -1);
    }
}
