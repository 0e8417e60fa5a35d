//! What a metric evaluates to: a value with its unit (and per-rank values and a
//! breakdown when it has them), or the reason it does not apply to this trace.

use crate::model::time::ns_to_s;
use crate::model::Ns;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// 0-100.
    Percent,
    /// 0-1 (or ≥ 1 for max/min ratios).
    Ratio,
    Seconds,
    Count,
    /// 1e9 bytes per second.
    GBps,
    /// 1e9 bytes.
    GB,
    Flop,
    FlopPerS,
    FlopPerToken,
    Tokens,
    TokensPerS,
    SecondsPerByte,
    BytesPerS,
    /// A rank number.
    Rank,
}

impl Unit {
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Percent => "%",
            Self::Ratio => "ratio",
            Self::Seconds => "s",
            Self::Count => "count",
            Self::GBps => "GB/s",
            Self::GB => "GB",
            Self::Flop => "FLOP",
            Self::FlopPerS => "FLOP/s",
            Self::FlopPerToken => "FLOP/token",
            Self::Tokens => "tokens",
            Self::TokensPerS => "tokens/s",
            Self::SecondsPerByte => "s/B",
            Self::BytesPerS => "B/s",
            Self::Rank => "rank",
        }
    }

    /// The bare number printed by `--metric`: counts as integers, the rest in full
    /// precision so scripts lose nothing.
    pub fn bare(self, v: f64) -> String {
        match self {
            Self::Count | Self::Rank => format!("{}", v.round() as i64),
            _ => format!("{v}"),
        }
    }

    /// A short human rendering for tables.
    pub fn human(self, v: f64) -> String {
        match self {
            Self::Count | Self::Rank => format!("{}", v.round() as i64),
            _ if v != 0.0 && (v.abs() >= 1e6 || v.abs() < 1e-3) => format!("{v:.3e}"),
            Self::Seconds => format!("{v:.6}"),
            Self::Ratio => format!("{v:.4}"),
            _ => format!("{v:.3}"),
        }
    }
}

impl Unit {
    /// A value as a person reads it: times in ns/µs/ms/s, volumes in
    /// B/kB/MB/GB and slow bandwidths in MB/s (those carry their unit, see
    /// [`Unit::people_unit`]), counts with thousands separators (`29.3 ms`,
    /// `16.4 kB`, `717.0 MB/s`, `12,093`). Views for people use it; `bare`
    /// stays the script format.
    pub fn people(self, v: f64) -> String {
        if !v.is_finite() {
            return format!("{v}");
        }
        let sign = if v < 0.0 { "-" } else { "" };
        let a = v.abs();
        match self {
            Self::Seconds => crate::model::time::human(Ns::rounded(v * 1e9)),
            Self::GB => format!("{sign}{}", crate::human::bytes((a * 1e9).round() as u64)),
            Self::GBps if a > 0.0 && a < 1.0 => format!("{:.1} MB/s", v * 1e3),
            Self::GBps => format!("{} GB/s", self.human(v)),
            Self::Count | Self::Tokens | Self::TokensPerS if a < 1e15 => {
                format!("{sign}{}", crate::human::count(a.round() as u64))
            }
            _ => self.human(v),
        }
    }

    /// The unit to print beside [`Unit::people`]'s value: none where the
    /// value carries its own.
    pub fn people_unit(self) -> &'static str {
        match self {
            Self::Seconds | Self::GB | Self::GBps => "",
            u => u.symbol(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub value: f64,
    /// The value on each rank, for metrics computed per rank and then averaged.
    pub per_rank: Vec<(u32, f64)>,
    /// A breakdown (label, value in the metric's unit), e.g. per kernel class.
    pub parts: Vec<(String, f64)>,
    /// One line of context, e.g. which kernel dominates.
    pub note: Option<String>,
    /// For shares: the numerator and denominator on one rank, so the number can
    /// be checked at a glance ("rank 0: comm 60 µs / kernels 145 µs = 41.4 %").
    pub fraction: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Value(Measured),
    NotApplicable(Why),
}

/// What a trace lacks that a metric needs, where what to do about it
/// depends on the profiler that wrote the trace (see `reasons`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    /// Per-op FLOPs.
    Flops,
    /// A CUDA memory snapshot beside the traces.
    MemorySnapshot,
    /// Collective message sizes.
    CollSizes,
    /// Kernel-launch runtime calls.
    LaunchCalls,
    /// Launch grids with a known SM count.
    LaunchGrids,
    /// Step markers.
    Steps,
}

/// Why a metric does not apply.
#[derive(Debug, Clone)]
pub enum Why {
    /// A reason of the metric's own.
    Said(String),
    /// Something the trace lacks, in the words for a PyTorch profiler
    /// trace; `reasons::for_format` words it for the trace's profiler.
    Lacks(Lack, &'static str),
}

impl Why {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Said(s) => s,
            Self::Lacks(_, s) => s,
        }
    }
}

impl std::ops::Deref for Why {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reasons are what they say, however they were made.
impl PartialEq for Why {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<String> for Why {
    fn from(s: String) -> Self {
        Self::Said(s)
    }
}

impl From<&str> for Why {
    fn from(s: &str) -> Self {
        Self::Said(s.to_owned())
    }
}

impl From<&String> for Why {
    fn from(s: &String) -> Self {
        Self::Said(s.clone())
    }
}

impl From<Why> for String {
    fn from(w: Why) -> Self {
        match w {
            Why::Said(s) => s,
            Why::Lacks(_, s) => s.to_owned(),
        }
    }
}

impl Outcome {
    pub fn value(value: f64) -> Self {
        Self::Value(Measured {
            value,
            per_rank: Vec::new(),
            parts: Vec::new(),
            note: None,
            fraction: None,
        })
    }

    pub(crate) fn seconds(ns: Ns) -> Self {
        Self::value(ns_to_s(ns))
    }

    pub fn na(reason: impl Into<Why>) -> Self {
        Self::NotApplicable(reason.into())
    }

    /// Not applicable: the trace lacks `lack`; `pytorch` says so for a
    /// PyTorch profiler trace.
    pub(crate) fn lacks(lack: Lack, pytorch: &'static str) -> Self {
        Self::NotApplicable(Why::Lacks(lack, pytorch))
    }

    #[must_use]
    pub(crate) fn with_per_rank(mut self, per_rank: Vec<(u32, f64)>) -> Self {
        if let Self::Value(m) = &mut self {
            m.per_rank = per_rank;
        }
        self
    }

    #[must_use]
    pub(crate) fn with_parts(mut self, parts: Vec<(String, f64)>) -> Self {
        if let Self::Value(m) = &mut self {
            m.parts = parts;
        }
        self
    }

    #[must_use]
    pub(crate) fn with_note(mut self, note: impl Into<String>) -> Self {
        if let Self::Value(m) = &mut self {
            m.note = Some(note.into());
        }
        self
    }

    /// Mean over ranks of `num / den` (× 100 for percentages); ranks whose
    /// denominator is zero are left out. The first rank's terms are kept as the
    /// readable `fraction` line.
    pub(crate) fn share_mean(
        parts: impl IntoIterator<Item = (u32, Ns, Ns)>,
        (num, den): (&str, &str),
        unit: Unit,
        why: impl Into<Why>,
    ) -> Self {
        let scale = if unit == Unit::Percent { 100.0 } else { 1.0 };
        let parts: Vec<(u32, Ns, Ns)> = parts.into_iter().filter(|p| p.2 > Ns::ZERO).collect();
        let shown = parts.first().map(|&(r, n, d)| {
            let v = n.as_f64() / d.as_f64() * scale;
            format!(
                "rank {r}: {num} {} / {den} {} = {} {}",
                crate::model::time::human(n),
                crate::model::time::human(d),
                unit.human(v),
                unit.symbol()
            )
        });
        let out = Self::rank_mean(
            parts
                .iter()
                .map(|&(r, n, d)| (r, Some(n.as_f64() / d.as_f64() * scale))),
            why,
        );
        match (out, shown) {
            (Self::Value(mut m), Some(f)) => {
                m.fraction = Some(f);
                Self::Value(m)
            }
            (o, _) => o,
        }
    }

    pub fn as_value(&self) -> Option<f64> {
        match self {
            Self::Value(m) => Some(m.value),
            Self::NotApplicable(_) => None,
        }
    }

    /// Mean of per-rank values (ranks where `value` is `None` are left out), or
    /// not applicable with `why` when no rank has a value.
    pub(crate) fn rank_mean(
        values: impl IntoIterator<Item = (u32, Option<f64>)>,
        why: impl Into<Why>,
    ) -> Self {
        let per_rank: Vec<(u32, f64)> = values
            .into_iter()
            .filter_map(|(r, v)| Some((r, v?)))
            .collect();
        if per_rank.is_empty() {
            return Self::na(why);
        }
        let mean = per_rank.iter().map(|(_, v)| v).sum::<f64>() / per_rank.len() as f64;
        Self::value(mean).with_per_rank(per_rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_people_write_them() {
        assert_eq!(Unit::Seconds.people(0.029281), "29.3 ms");
        assert_eq!(Unit::Seconds.people(-0.006618), "-6.62 ms");
        assert_eq!(Unit::GB.people(1.638e-5), "16.4 kB");
        assert_eq!(Unit::GB.people(0.034), "34.0 MB");
        assert_eq!(Unit::GBps.people(0.717), "717.0 MB/s");
        assert_eq!(Unit::GBps.people(42.893), "42.893 GB/s");
        assert_eq!(Unit::Count.people(26538.0), "26,538");
        assert_eq!(Unit::TokensPerS.people(279770.337), "279,770");
        assert_eq!(Unit::TokensPerS.people_unit(), "tokens/s");
        assert_eq!(Unit::Seconds.people_unit(), "");
        assert_eq!(Unit::Percent.people(47.216), "47.216");
        assert_eq!(Unit::Rank.people(7.0), "7");
    }

    #[test]
    fn rank_mean_skips_missing_ranks() {
        let o = Outcome::rank_mean([(0, Some(10.0)), (1, None), (2, Some(20.0))], "none");
        assert_eq!(o.as_value(), Some(15.0));
        let Outcome::Value(m) = o else { unreachable!() };
        assert_eq!(m.per_rank, vec![(0, 10.0), (2, 20.0)]);
        assert_eq!(
            Outcome::rank_mean([(0, None)], "no data"),
            Outcome::NotApplicable("no data".into())
        );
    }

    #[test]
    fn bare_numbers() {
        assert_eq!(Unit::Count.bare(8.0), "8");
        assert_eq!(Unit::Percent.bare(12.5), "12.5");
    }
}
