//! Lenient serde visitors for the Chrome trace-event vocabulary (`ph`, `ts`, `dur`,
//! `args`) shared by the PyTorch profiler and other Chrome-trace writers.
//!
//! Profilers disagree on types (a size may be a number or a string, a timestamp an
//! integer or a float), so every visitor accepts what it can interpret and skips the
//! rest instead of failing the whole file.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::model::time::Micros;

/// Drains a nested sequence or map the caller is not interested in.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements every arm except `visit_map` of a visitor that wants an object:
/// anything else is skipped and yields `$value`.
macro_rules! non_map_arms {
    ($value:expr) => {
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok($value)
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}
pub(crate) use non_map_arms;

/// A timestamp or duration in microseconds from its JSON text: a plain
/// decimal, or a string holding one, exactly to the nanosecond (see
/// `Micros::from_decimal`); another number (an exponent) as a float;
/// anything else (`null`, an object) is `None`.
pub(crate) fn micros_of(raw: &str) -> Option<Micros> {
    let text = raw.trim();
    let text = match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) => inner.trim(),
        None => text,
    };
    Micros::from_decimal(text).or_else(|| text.parse::<f64>().ok().map(Micros::Frac))
}

/// A `ts` or `dur` field read from its text with [`micros_of`]: the JSON
/// must be parsed from a slice (the readers parse each event from its own).
pub(crate) struct TimeText(pub Option<Micros>);

impl<'de> serde::Deserialize<'de> for TimeText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de serde_json::value::RawValue>::deserialize(d)?;
        Ok(TimeText(micros_of(raw.get())))
    }
}

/// One field value of a trace event, as the lenient readers below need it.
///
/// Every field goes through this one visitor rather than a visitor per field
/// type: each visitor is a separate copy of serde_json's value dispatch in the
/// binary, and with one copy per field type the event loop no longer fit the
/// instruction cache (cachegrind: 2.7 M I-cache misses per 31 MB rank, against
/// 2 thousand for a plain scan). Strings are borrowed from the input when they
/// hold no escapes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar<'de> {
    U64(u64),
    I64(i64),
    F64(f64),
    Str(Cow<'de, str>),
    /// An array: the product of its elements when all are numbers
    /// (`grid: [8, 1, 1]`), else `None`.
    Array(Option<f64>),
    /// `true`, `false`, `null` or an object (skipped).
    Other,
}

impl Scalar<'_> {
    /// A number given as integer, float or numeric string; anything else is `None`.
    pub(crate) fn f64(&self) -> Option<f64> {
        match self {
            Scalar::U64(v) => Some(*v as f64),
            Scalar::I64(v) => Some(*v as f64),
            Scalar::F64(v) => v.is_finite().then_some(*v),
            Scalar::Str(s) => s.trim().parse::<f64>().ok().filter(|x| x.is_finite()),
            Scalar::Array(_) | Scalar::Other => None,
        }
    }

    /// A non-negative integer given as integer, whole float or numeric string.
    pub(crate) fn u64(&self) -> Option<u64> {
        match self {
            Scalar::U64(v) => Some(*v),
            Scalar::I64(v) => u64::try_from(*v).ok(),
            // 2^64 and beyond would saturate to u64::MAX, a made-up number.
            Scalar::F64(v) => {
                (*v >= 0.0 && *v < 18_446_744_073_709_551_616.0).then(|| v.round() as u64)
            }
            Scalar::Str(s) => s.trim().parse().ok(),
            Scalar::Array(_) | Scalar::Other => None,
        }
    }

    /// The product of a numeric array such as `grid: [8, 1, 1]` (a bare number
    /// is itself).
    pub(crate) fn product(&self) -> Option<f64> {
        match self {
            Scalar::Array(p) => *p,
            Scalar::U64(v) => Some(*v as f64),
            Scalar::I64(v) => Some(*v as f64),
            Scalar::F64(v) => Some(*v),
            Scalar::Str(_) | Scalar::Other => None,
        }
    }

    /// Text: a string as it is, an integer written out (an id used as a name);
    /// anything else is `None`.
    pub(crate) fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            Scalar::Str(s) => Some(Cow::Borrowed(s)),
            Scalar::U64(v) => Some(Cow::Owned(v.to_string())),
            Scalar::I64(v) => Some(Cow::Owned(v.to_string())),
            Scalar::F64(_) | Scalar::Array(_) | Scalar::Other => None,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::I64(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::F64(v))
    }
    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Other)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut product = 1.0;
        let mut any = false;
        while let Some(v) = seq.next_element::<Scalar>()? {
            match v.f64() {
                Some(v) => {
                    product *= v;
                    any = true;
                }
                None => return drain_seq(seq).map(|()| Scalar::Array(None)),
            }
        }
        Ok(Scalar::Array(any.then_some(product)))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| Scalar::Other)
    }
}

/// Map keys matched against a fixed vocabulary without allocating: `K` maps the
/// key text to an enum (with a catch-all for unknown keys).
pub(crate) struct KeyOf<K>(pub fn(&str) -> K);

impl<'de, K> DeserializeSeed<'de> for KeyOf<K> {
    type Value = K;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, K> Visitor<'de> for KeyOf<K> {
    type Value = K;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<K, E> {
        Ok((self.0)(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Ns;

    fn value(json: &str) -> Scalar<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn lenient_numbers() {
        assert_eq!(value("42").u64(), Some(42));
        assert_eq!(value("\"42\"").u64(), Some(42));
        assert_eq!(value("-1").u64(), None);
        assert_eq!(value("2.6").u64(), Some(3));
        assert_eq!(value("[1,2]").u64(), None);
        assert_eq!(value("0.5").f64(), Some(0.5));
        assert_eq!(value("\" 0.25 \"").f64(), Some(0.25));
        assert_eq!(value("{\"a\":1}").f64(), None);
        assert_eq!(value("true").f64(), None);
    }

    #[test]
    fn micros_from_text() {
        let ns = |text: &str| {
            serde_json::from_str::<TimeText>(text)
                .unwrap()
                .0
                .and_then(Micros::ns)
        };
        assert_eq!(
            ns("1694128201429795.123"),
            Some(Ns(1_694_128_201_429_795_123))
        );
        assert_eq!(
            ns("\"1694128201429795.123\""),
            Some(Ns(1_694_128_201_429_795_123))
        );
        assert_eq!(ns("2636.669"), Some(Ns(2_636_669)));
        assert_eq!(ns("-3"), Some(Ns(-3_000)));
        assert_eq!(ns("2.5e3"), Some(Ns(2_500_000)));
        assert_eq!(ns("null"), None);
        assert_eq!(ns("{\"a\": 1}"), None);
        assert_eq!(micros_of("1e300"), Some(Micros::Frac(1e300)));
        assert_eq!(ns("1e300"), None);
        assert_eq!(ns("18446744073709551615"), None);
    }

    #[test]
    fn text_borrows_plain_strings() {
        assert!(matches!(
            value("\"nccl\""),
            Scalar::Str(Cow::Borrowed("nccl"))
        ));
        assert_eq!(value("\"a\\\"b\"").text().as_deref(), Some("a\"b"));
        assert_eq!(value("7").text().as_deref(), Some("7"));
        assert_eq!(value("7.5").text(), None);
    }

    #[test]
    fn grid_product() {
        assert_eq!(value("[8, 1, 1]").product(), Some(8.0));
        assert_eq!(value("[128, 4, 2]").product(), Some(1024.0));
        assert_eq!(value("[128, \"4\", 2]").product(), Some(1024.0));
        assert_eq!(value("[]").product(), None);
        assert_eq!(value("[1, \"x\", 3]").product(), None);
        assert_eq!(value("[1, [2], 3]").product(), None);
        assert_eq!(value("16").product(), Some(16.0));
    }
}
