//! Lenient serde visitors for the Chrome trace-event vocabulary (`ph`, `ts`, `dur`,
//! `args`) shared by the PyTorch profiler and other Chrome-trace writers.
//!
//! Profilers disagree on types (a size may be a number or a string, a timestamp an
//! integer or a float), so every visitor accepts what it can interpret and skips the
//! rest instead of failing the whole file.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::model::time::{us_to_ns, Ns};

/// Drains a nested sequence or map the caller is not interested in.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements the "anything else" arms of a lenient visitor: they yield `None`.
macro_rules! lenient_rest {
    () => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            drain_seq(seq).map(|()| None)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            drain_map(map).map(|()| None)
        }
    };
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

/// A number given as integer, float or numeric string; anything else is `None`.
pub struct LenientF64;

impl<'de> DeserializeSeed<'de> for LenientF64 {
    type Value = Option<f64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LenientF64 {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.is_finite().then_some(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
    }
    lenient_rest!();
}

/// A non-negative integer given as integer, whole float or numeric string.
pub struct LenientU64;

impl<'de> DeserializeSeed<'de> for LenientU64 {
    type Value = Option<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LenientU64 {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a non-negative integer")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(u64::try_from(v).ok())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok((v.is_finite() && v >= 0.0).then_some(v.round() as u64))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.trim().parse().ok())
    }
    lenient_rest!();
}

/// A timestamp or duration in microseconds (integer, float or string), as nanoseconds.
/// Integers are converted exactly; floats are rounded to the nearest nanosecond.
pub struct MicrosAsNs;

impl<'de> DeserializeSeed<'de> for MicrosAsNs {
    type Value = Option<Ns>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MicrosAsNs {
    type Value = Option<Ns>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a time in microseconds")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(v).ok().and_then(|v| v.checked_mul(1_000)))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.checked_mul(1_000))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok((v.is_finite() && v.abs() < 9e15).then(|| us_to_ns(v)))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<f64>() {
            Ok(x) => self.visit_f64(x),
            Err(_) => Ok(None),
        }
    }
    lenient_rest!();
}

/// Copies a string value into a reusable buffer (no allocation per event);
/// returns whether the value was a string.
pub struct StrInto<'a>(pub &'a mut String);

impl<'de> DeserializeSeed<'de> for StrInto<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrInto<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.0.clear();
        self.0.push_str(v);
        Ok(true)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(false)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(false)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq).map(|()| false)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| false)
    }
}

/// The product of a numeric array such as `grid: [8, 1, 1]`.
pub struct Product;

impl<'de> DeserializeSeed<'de> for Product {
    type Value = Option<f64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Product {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of numbers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut product = 1.0;
        let mut any = false;
        while let Some(v) = seq.next_element_seed(LenientF64)? {
            match v {
                Some(v) => {
                    product *= v;
                    any = true;
                }
                None => return drain_seq(seq).map(|()| None),
            }
        }
        Ok(any.then_some(product))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| None)
    }
}

/// Map keys matched against a fixed vocabulary without allocating: `K` maps the
/// key text to an enum (with a catch-all for unknown keys).
pub struct KeyOf<K>(pub fn(&str) -> K);

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

    fn parse<V, S>(seed: S, json: &str) -> V
    where
        S: for<'de> DeserializeSeed<'de, Value = V>,
    {
        let mut de = serde_json::Deserializer::from_str(json);
        seed.deserialize(&mut de).unwrap()
    }

    #[test]
    fn lenient_numbers() {
        assert_eq!(parse(LenientU64, "42"), Some(42));
        assert_eq!(parse(LenientU64, "\"42\""), Some(42));
        assert_eq!(parse(LenientU64, "-1"), None);
        assert_eq!(parse(LenientU64, "[1,2]"), None);
        assert_eq!(parse(LenientF64, "0.5"), Some(0.5));
        assert_eq!(parse(LenientF64, "{\"a\":1}"), None);
    }

    #[test]
    fn micros_to_nanos() {
        assert_eq!(
            parse(MicrosAsNs, "1694128201429795"),
            Some(1_694_128_201_429_795_000)
        );
        assert_eq!(parse(MicrosAsNs, "2636.669"), Some(2_636_669));
        assert_eq!(parse(MicrosAsNs, "\"12.5\""), Some(12_500));
        assert_eq!(parse(MicrosAsNs, "null"), None);
    }

    #[test]
    fn grid_product() {
        assert_eq!(parse(Product, "[8, 1, 1]"), Some(8.0));
        assert_eq!(parse(Product, "[128, 4, 2]"), Some(1024.0));
        assert_eq!(parse(Product, "[]"), None);
        assert_eq!(parse(Product, "[1, \"x\", 3]"), None);
    }
}
