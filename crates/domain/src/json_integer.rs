//! Integer fields of request bodies take any JSON number whose value is a whole number in the
//! field's range: `5`, `5.0` and `5e0` alike, as JSON Schema's `type: integer`
//! (api/openapi.yaml) does. `5.5`, a negative number or one beyond the field's type is refused
//! (`400 malformed_json` or the route's own code, like any other wrong type). Used as
//! `#[serde(deserialize_with = "json_integer::number")]` (or `optional` for a nullable one).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Unexpected, Visitor};

/// An integer type a field holds (from 0).
pub(crate) trait Whole: Sized + TryFrom<u64> {
    /// Its largest value.
    const MAX: u64;
}

impl Whole for u32 {
    const MAX: u64 = u32::MAX as u64;
}

impl Whole for u64 {
    const MAX: u64 = u64::MAX;
}

impl Whole for i64 {
    const MAX: u64 = i64::MAX as u64;
}

/// 2^64, the smallest `f64` beyond `u64::MAX` (which an `f64` cannot hold exactly).
const TWO_TO_THE_64: f64 = 18_446_744_073_709_551_616.0;

struct WholeVisitor<T>(PhantomData<T>);

impl<T: Whole> WholeVisitor<T> {
    fn fit<E: de::Error>(&self, v: u64, as_read: Unexpected<'_>) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(as_read, self))
    }
}

impl<T: Whole> Visitor<'_> for WholeVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number from 0 to {}", T::MAX)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.fit(v, Unexpected::Unsigned(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(u) => self.fit(u, Unexpected::Signed(v)),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // NaN and infinities have no whole value (their `fract` is NaN); -0.0 is 0.
        if v.fract() == 0.0 && (0.0..TWO_TO_THE_64).contains(&v) {
            self.fit(v as u64, Unexpected::Float(v))
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }
}

/// A required (or defaulted) integer field.
pub(crate) fn number<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(WholeVisitor(PhantomData))
}

/// An optional integer field: `null` is `None` (absent is `None` through
/// `#[serde(default)]`).
pub(crate) fn optional<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<Option<T>, D::Error> {
    struct Present<T>(T);
    impl<'de, T: Whole> de::Deserialize<'de> for Present<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            number(d).map(Present)
        }
    }
    Ok(<Option<Present<T>> as de::Deserialize>::deserialize(d)?.map(|p| p.0))
}
