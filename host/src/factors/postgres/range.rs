//! `int4range`, `int8range` and `numrange`, through the `postgres_range` crate Spin uses.

use anyhow::bail;
use bytes::BytesMut;
use postgres_range::{BoundSided, BoundType, Normalizable, Range, RangeBound};
use rust_decimal::Decimal;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use super::bindings::spin::postgres::postgres::RangeBoundKind;
use super::errors::BoxError;

/// A range's bound as the WIT has it: its value and kind; `None` is unbounded.
pub(super) type Bound<T> = Option<(T, RangeBoundKind)>;

/// A range element type.
pub(super) trait RangeElement: PartialOrd + Normalizable {
    /// Fails if canonicalising this bound would overflow, where `postgres_range` would panic.
    fn check_bound(&self, kind: RangeBoundKind, upper: bool) -> anyhow::Result<()>;
}

/// Integers: canonical form is `[lower, upper)`, so an inclusive upper or exclusive lower bound
/// moves up by one, which `MAX` cannot.
macro_rules! integer_range_element {
    ($t:ty) => {
        impl RangeElement for $t {
            fn check_bound(&self, kind: RangeBoundKind, upper: bool) -> anyhow::Result<()> {
                let moves_up = upper == (kind == RangeBoundKind::Inclusive);
                if moves_up && *self == <$t>::MAX {
                    bail!("range bound {self} is out of range");
                }
                Ok(())
            }
        }
    };
}

integer_range_element!(i32);
integer_range_element!(i64);

/// A `numeric` range element. `postgres_range` implements its `Normalizable` only for its own
/// types, and the orphan rule forbids implementing it for `rust_decimal::Decimal` here, so this
/// newtype does (as a no-op: `numrange` keeps its bounds as given), like Spin's own wrapper.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(super) struct RangeDecimal(pub(super) Decimal);

impl Normalizable for RangeDecimal {
    fn normalize<S: BoundSided>(bound: RangeBound<S, Self>) -> RangeBound<S, Self> {
        bound
    }
}

impl RangeElement for RangeDecimal {
    fn check_bound(&self, _: RangeBoundKind, _: bool) -> anyhow::Result<()> {
        Ok(())
    }
}

impl ToSql for RangeDecimal {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        self.0.to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <Decimal as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

impl FromSql<'_> for RangeDecimal {
    fn from_sql(ty: &Type, raw: &[u8]) -> Result<Self, BoxError> {
        Decimal::from_sql(ty, raw).map(Self)
    }

    fn accepts(ty: &Type) -> bool {
        <Decimal as FromSql>::accepts(ty)
    }
}

/// A range with these WIT bounds, canonicalised like Postgres; bounds that cross make the empty
/// range.
pub(super) fn range_wit_to_pg<T: RangeElement>(
    lower: Bound<T>,
    upper: Bound<T>,
) -> anyhow::Result<Range<T>> {
    /// One bound, checked, in `postgres_range`'s form.
    fn bound<S: BoundSided, T: RangeElement>(
        bound: Bound<T>,
        upper: bool,
    ) -> anyhow::Result<Option<RangeBound<S, T>>> {
        bound
            .map(|(value, kind)| {
                value.check_bound(kind, upper)?;
                let kind = match kind {
                    RangeBoundKind::Inclusive => BoundType::Inclusive,
                    RangeBoundKind::Exclusive => BoundType::Exclusive,
                };
                Ok(RangeBound::new(value, kind))
            })
            .transpose()
    }
    Ok(Range::new(bound(lower, false)?, bound(upper, true)?))
}

/// The WIT `(lower, upper)` pair of `range`, each value mapped by `f`; the empty range, which
/// the WIT cannot express, is `(none, none)`.
pub(super) fn range_pg_to_wit<T: Clone + PartialOrd + Normalizable, U>(
    range: &Range<T>,
    f: impl Fn(T) -> U,
) -> (Bound<U>, Bound<U>) {
    /// One bound in the WIT's form.
    fn bound<S: BoundSided, T: Clone, U>(
        bound: Option<&RangeBound<S, T>>,
        f: &impl Fn(T) -> U,
    ) -> Bound<U> {
        bound.map(|bound| {
            let kind = match bound.type_ {
                BoundType::Inclusive => RangeBoundKind::Inclusive,
                BoundType::Exclusive => RangeBoundKind::Exclusive,
            };
            (f(bound.value.clone()), kind)
        })
    }
    (bound(range.lower(), &f), bound(range.upper(), &f))
}

/// Conversions that need no server.
#[cfg(test)]
mod tests {
    use RangeBoundKind::{Exclusive, Inclusive};

    use super::*;

    /// The WIT pair after a trip through `postgres_range`.
    fn canonical<T: RangeElement + Clone>(
        lower: Bound<T>,
        upper: Bound<T>,
    ) -> (Bound<T>, Bound<T>) {
        range_pg_to_wit(&range_wit_to_pg(lower, upper).unwrap(), |v| v)
    }

    /// Integer ranges become `[lower, upper)`; decimal ranges keep their bounds.
    #[test]
    fn integer_ranges_are_canonicalised_like_postgres() {
        assert_eq!(
            canonical(Some((1, Inclusive)), Some((10, Inclusive))),
            (Some((1, Inclusive)), Some((11, Exclusive)))
        );
        assert_eq!(
            canonical(Some((5i64, Exclusive)), None),
            (Some((6, Inclusive)), None)
        );
        assert!(
            range_wit_to_pg(Some((3, Inclusive)), Some((3, Exclusive)))
                .unwrap()
                .is_empty()
        );
        assert!(
            range_wit_to_pg(Some((4, Inclusive)), Some((2, Inclusive)))
                .unwrap()
                .is_empty()
        );
        let err = range_wit_to_pg(None, Some((i32::MAX, Inclusive))).unwrap_err();
        assert_eq!(err.to_string(), "range bound 2147483647 is out of range");
        assert!(range_wit_to_pg(Some((i64::MAX, Exclusive)), None).is_err());
        assert!(range_wit_to_pg(Some((i64::MAX, Inclusive)), None).is_ok());

        // Decimal ranges keep their bounds as given.
        let one = RangeDecimal(Decimal::ONE);
        let range = range_wit_to_pg(Some((one, Exclusive)), Some((one, Inclusive))).unwrap();
        assert!(range.is_empty());
        let two = RangeDecimal(Decimal::TWO);
        assert_eq!(
            canonical(Some((one, Exclusive)), Some((two, Inclusive))),
            (Some((one, Exclusive)), Some((two, Inclusive)))
        );
    }

    /// Ranges decode from Postgres's binary format; the empty range reads as `(none, none)`.
    #[test]
    fn ranges_decode_from_the_postgres_binary_format() {
        let bytes = [0x02, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 10];
        let decoded = Range::<i32>::from_sql(&Type::INT4_RANGE, &bytes).unwrap();
        assert_eq!(
            range_pg_to_wit(&decoded, |v| v),
            (Some((1, Inclusive)), Some((10, Exclusive)))
        );
        let decoded = Range::<i32>::from_sql(&Type::INT4_RANGE, &[0x01]).unwrap();
        assert_eq!(range_pg_to_wit(&decoded, |v| v), (None, None));
        assert!(Range::<i32>::from_sql(&Type::INT4_RANGE, &[0x00, 0, 0]).is_err());
        assert!(!<Range<i32> as FromSql>::accepts(&Type::INT8_RANGE));
        assert!(<Range<RangeDecimal> as FromSql>::accepts(&Type::NUM_RANGE));
    }
}
