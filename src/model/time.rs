//! Time is integer nanoseconds everywhere inside the model; microseconds and
//! seconds appear only at the edges (readers and reports).

/// A point in time or a duration, in nanoseconds.
pub type Ns = i64;

/// The bound on every time the model holds: ±2^61 ns (±73 years from the
/// trace's epoch). Within it, the difference or sum of two times cannot
/// overflow, so interval math needs no checks of its own; an event beyond
/// it is damaged and skipped (and counted) by the timeline builder.
pub const TIME_LIMIT: Ns = 1 << 61;

/// Whether `t` is within [`TIME_LIMIT`].
pub fn in_range(t: Ns) -> bool {
    (-TIME_LIMIT..=TIME_LIMIT).contains(&t)
}

/// A time or duration in microseconds, as Chrome-trace JSON writes them. A
/// type of its own so that it cannot be taken for nanoseconds: [`Micros::ns`]
/// is the only way into the model, and it bounds the value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Micros {
    /// Whole microseconds, converted exactly.
    Whole(i64),
    /// Fractional microseconds, rounded to the nearest nanosecond.
    Frac(f64),
}

impl Micros {
    /// In nanoseconds, when finite and within [`TIME_LIMIT`].
    pub fn ns(self) -> Option<Ns> {
        let ns = match self {
            Self::Whole(us) => us.checked_mul(1_000)?,
            Self::Frac(us) if us.is_finite() && us.abs() <= (TIME_LIMIT / 1_000) as f64 => {
                us_to_ns(us)
            }
            Self::Frac(_) => return None,
        };
        in_range(ns).then_some(ns)
    }
}

/// Kineto and Chrome traces give microseconds, sometimes with a nanosecond fraction.
/// The whole and fractional microseconds are converted separately: multiplying a
/// large timestamp by 1000 first would add a rounding error of its own. For
/// values already bounded (see [`Micros::ns`]).
fn us_to_ns(us: f64) -> Ns {
    let whole = us.trunc();
    whole as Ns * 1_000 + ((us - whole) * 1_000.0).round() as Ns
}

pub fn ns_to_s(ns: Ns) -> f64 {
    ns as f64 / 1e9
}

/// Median of durations or times; for an even count the mean of the middle two;
/// 0 for none.
pub fn median(mut v: Vec<Ns>) -> Ns {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2
    }
}

/// A duration for people: three significant digits in the largest unit that keeps
/// the number ≥ 1 (`850 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`).
pub fn human(ns: Ns) -> String {
    let a = ns.unsigned_abs() as f64;
    let (v, unit) = if a >= 1e9 {
        (ns as f64 / 1e9, "s")
    } else if a >= 1e6 {
        (ns as f64 / 1e6, "ms")
    } else if a >= 1e3 {
        (ns as f64 / 1e3, "µs")
    } else {
        return format!("{ns} ns");
    };
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// `ns` as a ruler label, precise enough to tell apart ticks `step` ns apart:
/// in the unit `human` would pick for `ns`, with as many decimals as `step`
/// needs (`4.820001 s` and `4.820002 s`, not `4.82 s` twice).
pub fn human_tick(ns: Ns, step: Ns) -> String {
    let a = ns.unsigned_abs();
    let unit: (u64, &str) = if a >= 1_000_000_000 {
        (1_000_000_000, "s")
    } else if a >= 1_000_000 {
        (1_000_000, "ms")
    } else if a >= 1_000 {
        (1_000, "µs")
    } else {
        (1, "ns")
    };
    let step = step.unsigned_abs().max(1);
    // Decimals so that one step is at least one unit of the last digit.
    let mut decimals = 0usize;
    let mut scale = unit.0;
    while scale > step && scale > 1 {
        scale /= 10;
        decimals += 1;
    }
    let whole = ns / unit.0 as Ns;
    let frac = (ns % unit.0 as Ns).unsigned_abs();
    if decimals == 0 {
        let v = ns as f64 / unit.0 as f64;
        return format!("{v:.0} {}", unit.1);
    }
    let digits = format!("{frac:0width$}", width = unit.0.ilog10() as usize);
    let sign = if ns < 0 && whole == 0 { "-" } else { "" };
    format!("{sign}{whole}.{} {}", &digits[..decimals], unit.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_stay_distinct_when_zoomed() {
        // 1 µs ticks 4.82 s into a trace.
        let t = 4_820_001_000;
        assert_eq!(human_tick(t, 1_000), "4.820001 s");
        assert_eq!(human_tick(t + 1_000, 1_000), "4.820002 s");
        assert_eq!(human_tick(20_000_000, 10_000_000), "20 ms");
        assert_eq!(human_tick(25_000_000, 5_000_000), "25 ms");
        assert_eq!(human_tick(2_500_000, 500_000), "2.5 ms");
        assert_eq!(human_tick(0, 1_000), "0 ns");
        assert_eq!(human_tick(1_500, 100), "1.5 µs");
        assert_eq!(human_tick(3_000_000_000, 1_000_000_000), "3 s");
    }

    #[test]
    fn micros_enter_the_model_bounded() {
        assert_eq!(Micros::Whole(3).ns(), Some(3_000));
        assert_eq!(Micros::Frac(2.5).ns(), Some(2_500));
        // ±2^61 ns is the edge: 2,305,843,009,213,693.952 µs.
        assert_eq!(
            Micros::Whole(2_305_843_009_213_693).ns(),
            Some(2_305_843_009_213_693_000)
        );
        assert_eq!(Micros::Whole(2_305_843_009_213_694).ns(), None);
        assert_eq!(Micros::Frac(8.9e15).ns(), None);
        assert_eq!(Micros::Frac(-8.9e15).ns(), None);
        assert_eq!(Micros::Whole(i64::MAX).ns(), None);
        assert_eq!(Micros::Frac(f64::NAN).ns(), None);
        assert_eq!(Micros::Frac(f64::INFINITY).ns(), None);
        assert!(in_range(TIME_LIMIT) && !in_range(TIME_LIMIT + 1));
    }

    #[test]
    fn converts_fractional_microseconds() {
        assert_eq!(us_to_ns(2636.669), 2_636_669);
        assert_eq!(us_to_ns(4_458_677_009_853.422), 4_458_677_009_853_422);
        assert_eq!(us_to_ns(4_458_677_052_057.143), 4_458_677_052_057_143);
        assert_eq!(us_to_ns(-1.5), -1_500);
        assert_eq!(ns_to_s(1_500_000_000), 1.5);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3, 1, 2]), 2);
        assert_eq!(median(vec![4, 1, 2, 3]), 2);
        assert_eq!(median(vec![]), 0);
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(850), "850 ns");
        assert_eq!(human(12_345), "12.3 µs");
        assert_eq!(human(4_560_000), "4.56 ms");
        assert_eq!(human(1_200_000_000), "1.20 s");
        assert_eq!(human(250_000_000), "250 ms");
        assert_eq!(human(-2_000), "-2.00 µs");
    }
}
