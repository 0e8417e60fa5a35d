//! Time is integer nanoseconds everywhere inside the model; microseconds and
//! seconds appear only at the edges (readers and reports).

use serde::{Deserialize, Serialize};

/// A point in time or a duration, in nanoseconds. A type of its own so that
/// microseconds, counts and bytes cannot be taken for it silently: a raw
/// integer enters as `Ns(n)`, and leaves as `.get()` or `.as_f64()`.
///
/// ```compile_fail
/// // A bare integer (microseconds? a count?) is not a time.
/// let t: ccl_bench::model::Ns = 1_500;
/// ```
///
/// ```compile_fail
/// // Nor is a time a number of bytes.
/// let bytes: u64 = 4096;
/// let per_ns = bytes as f64 / ccl_bench::model::Ns(1_000) as f64;
/// ```
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Ns(pub i64);

impl Ns {
    pub const ZERO: Self = Self(0);
    pub const MAX: Self = Self(i64::MAX);
    pub const MIN: Self = Self(i64::MIN);

    /// The nearest whole nanosecond to `ns` (saturating, as `as` casts do).
    #[inline]
    pub fn rounded(ns: f64) -> Self {
        Self(ns.round() as i64)
    }

    /// The count of nanoseconds.
    #[inline]
    pub const fn get(self) -> i64 {
        self.0
    }

    #[inline]
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }

    #[inline]
    pub fn abs(self) -> Self {
        Self(self.0.abs())
    }

    #[inline]
    pub(crate) fn unsigned_abs(self) -> u64 {
        self.0.unsigned_abs()
    }

    #[inline]
    pub fn checked_add(self, o: Self) -> Option<Self> {
        self.0.checked_add(o.0).map(Self)
    }

    #[inline]
    pub fn checked_mul(self, k: i64) -> Option<Self> {
        self.0.checked_mul(k).map(Self)
    }

    /// How many whole `o` fit below `self`, rounding towards −∞.
    #[inline]
    pub fn div_euclid(self, o: Self) -> i64 {
        self.0.div_euclid(o.0)
    }

    #[inline]
    pub fn saturating_add(self, o: Self) -> Self {
        Self(self.0.saturating_add(o.0))
    }

    #[inline]
    pub fn saturating_sub(self, o: Self) -> Self {
        Self(self.0.saturating_sub(o.0))
    }
}

impl std::fmt::Display for Ns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Add for Ns {
    type Output = Self;
    #[inline]
    fn add(self, o: Self) -> Self {
        Self(self.0 + o.0)
    }
}

impl std::ops::Sub for Ns {
    type Output = Self;
    #[inline]
    fn sub(self, o: Self) -> Self {
        Self(self.0 - o.0)
    }
}

impl std::ops::Neg for Ns {
    type Output = Self;
    #[inline]
    fn neg(self) -> Self {
        Self(-self.0)
    }
}

impl std::ops::AddAssign for Ns {
    #[inline]
    fn add_assign(&mut self, o: Self) {
        self.0 += o.0;
    }
}

impl std::ops::SubAssign for Ns {
    #[inline]
    fn sub_assign(&mut self, o: Self) {
        self.0 -= o.0;
    }
}

/// A duration scaled by a count (`n` steps of `d` each).
impl std::ops::Mul<i64> for Ns {
    type Output = Self;
    #[inline]
    fn mul(self, k: i64) -> Self {
        Self(self.0 * k)
    }
}

/// A duration split `k` ways.
impl std::ops::Div<i64> for Ns {
    type Output = Self;
    #[inline]
    fn div(self, k: i64) -> Self {
        Self(self.0 / k)
    }
}

/// How many times one duration fits in another: a count, not a time.
impl std::ops::Div for Ns {
    type Output = i64;
    #[inline]
    fn div(self, o: Self) -> i64 {
        self.0 / o.0
    }
}

impl std::ops::Rem for Ns {
    type Output = Self;
    #[inline]
    fn rem(self, o: Self) -> Self {
        Self(self.0 % o.0)
    }
}

impl std::iter::Sum for Ns {
    fn sum<I: Iterator<Item = Self>>(it: I) -> Self {
        Self(it.map(|n| n.0).sum())
    }
}

impl<'a> std::iter::Sum<&'a Ns> for Ns {
    fn sum<I: Iterator<Item = &'a Self>>(it: I) -> Self {
        Self(it.map(|n| n.0).sum())
    }
}

/// The bound on every time the model holds: ±2^61 ns (±73 years from the
/// trace's epoch). Within it, the difference or sum of two times cannot
/// overflow, so interval math needs no checks of its own; an event beyond
/// it is damaged and skipped (and counted) by the timeline builder.
pub const TIME_LIMIT: Ns = Ns(1 << 61);

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
    /// Microseconds read from their decimal text to the nanosecond (see
    /// [`Micros::from_decimal`]), here in nanoseconds.
    Exact(i64),
}

impl Micros {
    /// In nanoseconds, when finite and within [`TIME_LIMIT`].
    pub fn ns(self) -> Option<Ns> {
        let ns = match self {
            Self::Whole(us) => Ns(us.checked_mul(1_000)?),
            Self::Frac(us) if us.is_finite() && us.abs() <= (TIME_LIMIT.get() / 1_000) as f64 => {
                us_to_ns(us)
            }
            Self::Frac(_) => return None,
            Self::Exact(ns) => Ns(ns),
        };
        in_range(ns).then_some(ns)
    }

    /// Microseconds written as a plain decimal (`-?digits(.digits)?`, as
    /// Kineto writes `ts` and `dur`), exactly to the nanosecond: the fourth
    /// decimal and beyond round it, half away from zero. A double holds
    /// today's epoch microseconds (~1.7e15) only to 0.25 µs, so parsing the
    /// text as one would put every op on a 250 ns grid. `None` for any other
    /// form (an exponent, more than 18 whole digits): read those as a float.
    pub fn from_decimal(text: &str) -> Option<Micros> {
        let (neg, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let all_digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
        if whole.is_empty() || whole.len() > 18 || !all_digits(whole) || !all_digits(frac) {
            return None;
        }
        let f = frac.as_bytes();
        let digit = |k: usize| f.get(k).map_or(0, |c| i64::from(c - b'0'));
        let sub = digit(0) * 100 + digit(1) * 10 + digit(2) + i64::from(digit(3) >= 5);
        let ns = whole
            .parse::<i64>()
            .ok()?
            .checked_mul(1_000)?
            .checked_add(sub)?;
        Some(Micros::Exact(if neg { -ns } else { ns }))
    }
}

/// Kineto and Chrome traces give microseconds, sometimes with a nanosecond fraction.
/// The whole and fractional microseconds are converted separately: multiplying a
/// large timestamp by 1000 first would add a rounding error of its own. For
/// values already bounded (see [`Micros::ns`]).
fn us_to_ns(us: f64) -> Ns {
    let whole = us.trunc();
    Ns(whole as i64 * 1_000 + ((us - whole) * 1_000.0).round() as i64)
}

pub fn ns_to_s(ns: Ns) -> f64 {
    ns.as_f64() / 1e9
}

/// Median of durations or times; for an even count the mean of the middle two;
/// 0 for none.
pub fn median(mut v: Vec<Ns>) -> Ns {
    if v.is_empty() {
        return Ns::ZERO;
    }
    // A selection, not a sort: clock checks take several medians of
    // thousands of samples per rank.
    let (m, even) = (v.len() / 2, v.len().is_multiple_of(2));
    let (lower, &mut hi, _) = v.select_nth_unstable(m);
    match lower.iter().max() {
        Some(&lo) if even => (lo + hi) / 2,
        _ => hi,
    }
}

/// A duration for people: three significant digits in the largest unit that keeps
/// the number ≥ 1 (`850 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`).
pub fn human(ns: Ns) -> String {
    let a = ns.unsigned_abs() as f64;
    let (v, unit) = if a >= 1e9 {
        (ns.as_f64() / 1e9, "s")
    } else if a >= 1e6 {
        (ns.as_f64() / 1e6, "ms")
    } else if a >= 1e3 {
        (ns.as_f64() / 1e3, "µs")
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
    let (ns, step) = (ns.get(), step.get());
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
    let whole = ns / unit.0 as i64;
    let frac = (ns % unit.0 as i64).unsigned_abs();
    if decimals == 0 {
        let v = ns as f64 / unit.0 as f64;
        return format!("{v:.0} {}", unit.1);
    }
    let digits = format!("{frac:0width$}", width = unit.0.ilog10() as usize);
    let sign = if ns < 0 && whole == 0 { "-" } else { "" };
    format!("{sign}{whole}.{} {}", &digits[..decimals], unit.1)
}

/// A point in time precise to a tenth of `dur` (at least 1 ns), so that the
/// start and end of an op `dur` long read apart: `11.4001 ms` and
/// `11.4025 ms` for a 2.4 µs op, not `11.4 ms` twice.
pub fn human_at(ns: Ns, dur: Ns) -> String {
    let mut step = Ns(1);
    while step.get() <= i64::MAX / 1000 && step * 100 <= dur {
        step = step * 10;
    }
    human_tick(ns, step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_read_apart_at_their_op_s_scale() {
        // A 2.4 µs op 11.4 ms in: to 100 ns.
        assert_eq!(human_at(Ns(11_400_120), Ns(2_400)), "11.4001 ms");
        assert_eq!(human_at(Ns(11_402_520), Ns(2_400)), "11.4025 ms");
        // A 3 ms op: to 100 µs.
        assert_eq!(human_at(Ns(11_400_120), Ns(3_000_000)), "11.4 ms");
        // Zero-length: to the nanosecond.
        assert_eq!(human_at(Ns(1_234_567), Ns::ZERO), "1.234567 ms");
    }

    #[test]
    fn tick_labels_stay_distinct_when_zoomed() {
        // 1 µs ticks 4.82 s into a trace.
        let t = 4_820_001_000;
        assert_eq!(human_tick(Ns(t), Ns(1_000)), "4.820001 s");
        assert_eq!(human_tick(Ns(t + 1_000), Ns(1_000)), "4.820002 s");
        assert_eq!(human_tick(Ns(20_000_000), Ns(10_000_000)), "20 ms");
        assert_eq!(human_tick(Ns(25_000_000), Ns(5_000_000)), "25 ms");
        assert_eq!(human_tick(Ns(2_500_000), Ns(500_000)), "2.5 ms");
        assert_eq!(human_tick(Ns::ZERO, Ns(1_000)), "0 ns");
        assert_eq!(human_tick(Ns(1_500), Ns(100)), "1.5 µs");
        assert_eq!(human_tick(Ns(3_000_000_000), Ns(1_000_000_000)), "3 s");
    }

    #[test]
    fn micros_enter_the_model_bounded() {
        assert_eq!(Micros::Whole(3).ns(), Some(Ns(3_000)));
        assert_eq!(Micros::Frac(2.5).ns(), Some(Ns(2_500)));
        // ±2^61 ns is the edge: 2,305,843,009,213,693.952 µs.
        assert_eq!(
            Micros::Whole(2_305_843_009_213_693).ns(),
            Some(Ns(2_305_843_009_213_693_000))
        );
        assert_eq!(Micros::Whole(2_305_843_009_213_694).ns(), None);
        assert_eq!(Micros::Frac(8.9e15).ns(), None);
        assert_eq!(Micros::Frac(-8.9e15).ns(), None);
        assert_eq!(Micros::Whole(i64::MAX).ns(), None);
        assert_eq!(Micros::Frac(f64::NAN).ns(), None);
        assert_eq!(Micros::Frac(f64::INFINITY).ns(), None);
        assert!(in_range(TIME_LIMIT) && !in_range(TIME_LIMIT + Ns(1)));
    }

    /// Epoch microseconds with a nanosecond fraction, as the PyTorch
    /// profiler writes them: a double would round each to 0.25 µs.
    #[test]
    fn decimal_microseconds_are_exact() {
        let ns = |t: &str| Micros::from_decimal(t).and_then(Micros::ns);
        assert_eq!(
            ns("1700000000000000.123"),
            Some(Ns(1_700_000_000_000_000_123))
        );
        assert_eq!(
            Micros::Frac(1_700_000_000_000_000.123).ns(),
            Some(Ns(1_700_000_000_000_000_000))
        );
        assert_eq!(
            ns("1700000000000000.1234"),
            Some(Ns(1_700_000_000_000_000_123))
        );
        assert_eq!(
            ns("1700000000000000.1235"),
            Some(Ns(1_700_000_000_000_000_124))
        );
        assert_eq!(ns("0.9999"), Some(Ns(1_000)));
        assert_eq!(ns("12"), Some(Ns(12_000)));
        assert_eq!(ns("12.5"), Some(Ns(12_500)));
        assert_eq!(ns("-1.5"), Some(Ns(-1_500)));
        assert_eq!(ns("-0.0005"), Some(Ns(-1)));
        assert_eq!(ns("2305843009213693.952"), Some(TIME_LIMIT));
        assert_eq!(ns("2305843009213693.953"), None);
        for other in [
            "1e3",
            "1.5E+2",
            "",
            "-",
            ".5",
            "5.",
            "1.2.3",
            "0x10",
            "999999999999999999999",
        ] {
            let got = Micros::from_decimal(other);
            // "5." is digits and an empty fraction: 5 µs.
            if other == "5." {
                assert_eq!(got, Some(Micros::Exact(5_000)));
            } else {
                assert_eq!(got, None, "{other}");
            }
        }
    }

    proptest::proptest! {
        /// Against a decimal reference in integers: any whole part up to
        /// 15 digits and any fraction up to 9 digits.
        #[test]
        fn decimal_matches_integer_reference(whole in 0i64..1_000_000_000_000_000, frac in 0u64..1_000_000_000, places in 1usize..10, neg: bool) {
            let frac = frac % 10u64.pow(places as u32);
            let text = format!("{}{whole}.{frac:0places$}", if neg { "-" } else { "" });
            // The reference: the fraction scaled to 9 places, rounded at ns.
            let nine = frac * 10u64.pow(9 - places as u32);
            let sub = (nine / 1_000_000) as i64 + i64::from(nine % 1_000_000 >= 500_000);
            let want = whole * 1_000 + sub;
            let want = if neg { -want } else { want };
            proptest::prop_assert_eq!(Micros::from_decimal(&text), Some(Micros::Exact(want)));
        }
    }

    #[test]
    fn converts_fractional_microseconds() {
        assert_eq!(us_to_ns(2636.669), Ns(2_636_669));
        assert_eq!(us_to_ns(4_458_677_009_853.422), Ns(4_458_677_009_853_422));
        assert_eq!(us_to_ns(4_458_677_052_057.143), Ns(4_458_677_052_057_143));
        assert_eq!(us_to_ns(-1.5), Ns(-1_500));
        assert_eq!(ns_to_s(Ns(1_500_000_000)), 1.5);
    }

    #[test]
    fn ns_arithmetic() {
        assert_eq!(Ns(3) + Ns(4), Ns(7));
        assert_eq!(Ns(3) - Ns(4), Ns(-1));
        // A time split k ways is a time; a time over a time is a count.
        assert_eq!(Ns(10) / 2, Ns(5));
        assert_eq!(Ns(10) / Ns(3), 3);
        assert_eq!(Ns(10) * 3, Ns(30));
        assert_eq!(Ns(-7).div_euclid(Ns(5)), -2);
        assert_eq!(Ns::rounded(2.5), Ns(3));
        assert_eq!(Ns::rounded(f64::INFINITY), Ns::MAX);
        assert_eq!([Ns(1), Ns(2)].iter().sum::<Ns>(), Ns(3));
        assert_eq!(Ns(i64::MAX).checked_add(Ns(1)), None);
        assert_eq!(Ns(-5).abs(), Ns(5));
        // Written and read as the bare integer, so JSON and summaries are unchanged.
        assert_eq!(serde_json::to_string(&Ns(42)).unwrap(), "42");
        assert_eq!(serde_json::from_str::<Ns>("-42").unwrap(), Ns(-42));
        assert_eq!(Ns(1_500).to_string(), "1500");
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![Ns(3), Ns(1), Ns(2)]), Ns(2));
        assert_eq!(median(vec![Ns(4), Ns(1), Ns(2), Ns(3)]), Ns(2));
        assert_eq!(median(vec![]), Ns::ZERO);
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(Ns(850)), "850 ns");
        assert_eq!(human(Ns(12_345)), "12.3 µs");
        assert_eq!(human(Ns(4_560_000)), "4.56 ms");
        assert_eq!(human(Ns(1_200_000_000)), "1.20 s");
        assert_eq!(human(Ns(250_000_000)), "250 ms");
        assert_eq!(human(Ns(-2_000)), "-2.00 µs");
    }
}
