//! Time is integer nanoseconds everywhere inside the model; microseconds and
//! seconds appear only at the edges (readers and reports).

/// A point in time or a duration, in nanoseconds.
pub type Ns = i64;

/// Kineto and Chrome traces give microseconds, sometimes with a nanosecond fraction.
/// The whole and fractional microseconds are converted separately: multiplying a
/// large timestamp by 1000 first would add a rounding error of its own.
pub fn us_to_ns(us: f64) -> Ns {
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

#[cfg(test)]
mod tests {
    use super::*;

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
