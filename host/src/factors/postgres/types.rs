//! Parameter and column conversions between the WIT's values and Postgres's types.

use anyhow::{Context as _, anyhow};
use bytes::{BufMut as _, BytesMut};
use chrono::{Datelike as _, NaiveDate, NaiveDateTime, NaiveTime, Timelike as _};
use postgres_range::Range;
use rust_decimal::Decimal;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use super::bindings::spin::postgres::postgres::{
    self as pg, Column, DbDataType, DbValue, ParameterValue,
};
use super::errors::BoxError;
use super::range::{Bound, RangeDecimal, range_pg_to_wit, range_wit_to_pg};

/// A parameter ready to bind: a value of the exact Rust type its WIT variant stands for.
pub(super) type SqlParam = Box<dyn ToSql + Send + Sync>;

/// Converts every parameter, failing on the first that cannot be converted.
pub(super) fn to_sql_parameters(params: Vec<ParameterValue>) -> anyhow::Result<Vec<SqlParam>> {
    params.into_iter().map(to_sql_parameter).collect()
}

/// Borrows converted parameters the way tokio-postgres takes them.
pub(super) fn param_refs(params: &[SqlParam]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| param.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// Converts one parameter to a value of the exact Rust type of its variant, so that
/// tokio-postgres rejects it when the statement wants another type (as in Spin).
fn to_sql_parameter(value: ParameterValue) -> anyhow::Result<SqlParam> {
    let param: SqlParam = match value {
        ParameterValue::Boolean(v) => Box::new(v),
        // `i8` binds to Postgres's one-byte `"char"` type only.
        ParameterValue::Int8(v) => Box::new(v),
        ParameterValue::Int16(v) => Box::new(v),
        ParameterValue::Int32(v) => Box::new(v),
        ParameterValue::Int64(v) => Box::new(v),
        ParameterValue::Floating32(v) => Box::new(v),
        ParameterValue::Floating64(v) => Box::new(v),
        ParameterValue::Str(v) => Box::new(v),
        ParameterValue::Binary(v) => Box::new(v),
        ParameterValue::Date(v) => Box::new(date_wit_to_pg(v)?),
        ParameterValue::Time(v) => Box::new(time_wit_to_pg(v)?),
        ParameterValue::Datetime(v) => Box::new(datetime_wit_to_pg(v)?),
        ParameterValue::Timestamp(v) => Box::new(timestamp_wit_to_pg(v)?),
        ParameterValue::Uuid(v) => {
            Box::new(super::errors::uuid_1_11(&v).with_context(|| format!("invalid UUID {v}"))?)
        }
        ParameterValue::Jsonb(v) => Box::new(
            serde_json::from_slice::<serde_json::Value>(&v)
                .with_context(|| format!("invalid JSON {}", String::from_utf8_lossy(&v)))?,
        ),
        ParameterValue::Decimal(v) => Box::new(decimal_wit_to_pg(&v)?),
        ParameterValue::RangeInt32((lower, upper)) => Box::new(range_wit_to_pg(lower, upper)?),
        ParameterValue::RangeInt64((lower, upper)) => Box::new(range_wit_to_pg(lower, upper)?),
        ParameterValue::RangeDecimal((lower, upper)) => Box::new(range_wit_to_pg(
            decimal_bound_wit_to_pg(lower)?,
            decimal_bound_wit_to_pg(upper)?,
        )?),
        ParameterValue::ArrayInt32(v) => Box::new(v),
        ParameterValue::ArrayInt64(v) => Box::new(v),
        ParameterValue::ArrayDecimal(v) => Box::new(
            v.iter()
                .map(|d| d.as_deref().map(decimal_wit_to_pg).transpose())
                .collect::<anyhow::Result<Vec<_>>>()?,
        ),
        ParameterValue::ArrayStr(v) => Box::new(v),
        ParameterValue::Interval(v) => Box::new(Interval(v)),
        ParameterValue::DbNull => Box::new(PgNull),
    };
    Ok(param)
}

/// The WIT type of a column, as Spin reports it.
fn convert_data_type(pg_type: &Type) -> DbDataType {
    match *pg_type {
        Type::BOOL => DbDataType::Boolean,
        Type::BYTEA => DbDataType::Binary,
        Type::FLOAT4 => DbDataType::Floating32,
        Type::FLOAT8 => DbDataType::Floating64,
        Type::INT2 => DbDataType::Int16,
        Type::INT4 => DbDataType::Int32,
        Type::INT8 => DbDataType::Int64,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => DbDataType::Str,
        Type::TIMESTAMP | Type::TIMESTAMPTZ => DbDataType::Datetime,
        Type::DATE => DbDataType::Date,
        Type::TIME => DbDataType::Time,
        Type::UUID => DbDataType::Uuid,
        Type::JSONB => DbDataType::Jsonb,
        Type::NUMERIC => DbDataType::Decimal,
        Type::INT4_RANGE => DbDataType::RangeInt32,
        Type::INT8_RANGE => DbDataType::RangeInt64,
        Type::NUM_RANGE => DbDataType::RangeDecimal,
        Type::INT4_ARRAY => DbDataType::ArrayInt32,
        Type::INT8_ARRAY => DbDataType::ArrayInt64,
        Type::NUMERIC_ARRAY => DbDataType::ArrayDecimal,
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::BPCHAR_ARRAY => DbDataType::ArrayStr,
        Type::INTERVAL => DbDataType::Interval,
        _ => DbDataType::Other(pg_type.name().to_owned()),
    }
}

/// The name and WIT type of every column of `row`.
pub(super) fn infer_columns(row: &Row) -> Vec<Column> {
    row.columns()
        .iter()
        .map(|column| Column {
            name: column.name().to_owned(),
            data_type: convert_data_type(column.type_()),
        })
        .collect()
}

/// Every value of `row`, converted.
pub(super) fn convert_row(row: &Row) -> anyhow::Result<Vec<DbValue>> {
    (0..row.len())
        .map(|index| convert_entry(row, index))
        .collect()
}

/// Converts one value as Spin does: NULL is `db-null`, and a type with no WIT counterpart comes
/// back as `unsupported` with its raw binary encoding.
///
/// Spin's quirk, reproduced: a `timestamptz` column is reported as `datetime` but read as a
/// timestamp *without* time zone, which tokio-postgres refuses, so any query returning a
/// `timestamptz` column (even a NULL one) fails with `query-failed(text(..))`.
fn convert_entry(row: &Row, index: usize) -> anyhow::Result<DbValue> {
    let column = &row.columns()[index];
    match *column.type_() {
        Type::BOOL => read(row, index, DbValue::Boolean),
        Type::BYTEA => read(row, index, DbValue::Binary),
        Type::FLOAT4 => read(row, index, DbValue::Floating32),
        Type::FLOAT8 => read(row, index, DbValue::Floating64),
        Type::INT2 => read(row, index, DbValue::Int16),
        Type::INT4 => read(row, index, DbValue::Int32),
        Type::INT8 => read(row, index, DbValue::Int64),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => read(row, index, DbValue::Str),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => try_read(row, index, |v: NaiveDateTime| {
            Ok(DbValue::Datetime(datetime_pg_to_wit(v)?))
        }),
        Type::DATE => try_read(row, index, |v: NaiveDate| {
            Ok(DbValue::Date(date_pg_to_wit(v)?))
        }),
        Type::TIME => try_read(row, index, |v: NaiveTime| {
            Ok(DbValue::Time(time_pg_to_wit(v)?))
        }),
        Type::UUID => read(row, index, |v: uuid::Uuid| DbValue::Uuid(v.to_string())),
        Type::JSONB => try_read(row, index, |v: serde_json::Value| {
            Ok(DbValue::Jsonb(
                serde_json::to_vec(&v).context("invalid JSON from database")?,
            ))
        }),
        Type::NUMERIC => read(row, index, |v: Decimal| DbValue::Decimal(v.to_string())),
        Type::INT4_RANGE => read(row, index, |v: Range<i32>| {
            DbValue::RangeInt32(range_pg_to_wit(&v, |v| v))
        }),
        Type::INT8_RANGE => read(row, index, |v: Range<i64>| {
            DbValue::RangeInt64(range_pg_to_wit(&v, |v| v))
        }),
        Type::NUM_RANGE => read(row, index, |v: Range<RangeDecimal>| {
            DbValue::RangeDecimal(range_pg_to_wit(&v, |d| d.0.to_string()))
        }),
        Type::INT4_ARRAY => read(row, index, DbValue::ArrayInt32),
        Type::INT8_ARRAY => read(row, index, DbValue::ArrayInt64),
        Type::NUMERIC_ARRAY => read(row, index, |v: Vec<Option<Decimal>>| {
            DbValue::ArrayDecimal(v.iter().map(|d| d.map(|d| d.to_string())).collect())
        }),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::BPCHAR_ARRAY => {
            read(row, index, DbValue::ArrayStr)
        }
        Type::INTERVAL => read(row, index, |v: Interval| DbValue::Interval(v.0)),
        _ => {
            tracing::debug!(
                "no WIT type for Postgres type {} in column {}",
                column.type_().name(),
                column.name()
            );
            read(row, index, |v: Other| DbValue::Unsupported(v.0))
        }
    }
}

/// Reads a value as `T`, NULL as `db-null`.
fn read<'a, T: FromSql<'a>>(
    row: &'a Row,
    index: usize,
    convert: impl FnOnce(T) -> DbValue,
) -> anyhow::Result<DbValue> {
    Ok(row
        .try_get::<_, Option<T>>(index)?
        .map_or(DbValue::DbNull, convert))
}

/// Reads a value as `T`, NULL as `db-null`, with a conversion that may fail.
fn try_read<'a, T: FromSql<'a>>(
    row: &'a Row,
    index: usize,
    convert: impl FnOnce(T) -> anyhow::Result<DbValue>,
) -> anyhow::Result<DbValue> {
    row.try_get::<_, Option<T>>(index)?
        .map_or(Ok(DbValue::DbNull), convert)
}

/// `date(year, month, day)` to a Postgres `date`.
fn date_wit_to_pg((y, mon, d): (i32, u8, u8)) -> anyhow::Result<NaiveDate> {
    NaiveDate::from_ymd_opt(y, mon.into(), d.into())
        .ok_or_else(|| anyhow!("invalid date y={y}, m={mon}, d={d}"))
}

/// A Postgres `date` to `date(year, month, day)`.
fn date_pg_to_wit(value: NaiveDate) -> anyhow::Result<(i32, u8, u8)> {
    Ok((
        value.year(),
        value.month().try_into()?,
        value.day().try_into()?,
    ))
}

/// `time(hour, minute, second, nanosecond)` to a Postgres `time` (which keeps microseconds).
fn time_wit_to_pg((h, min, s, ns): (u8, u8, u8, u32)) -> anyhow::Result<NaiveTime> {
    NaiveTime::from_hms_nano_opt(h.into(), min.into(), s.into(), ns)
        .ok_or_else(|| anyhow!("invalid time {h}:{min}:{s}:{ns}"))
}

/// A Postgres `time` to `time(hour, minute, second, nanosecond)`.
fn time_pg_to_wit(value: NaiveTime) -> anyhow::Result<(u8, u8, u8, u32)> {
    Ok((
        value.hour().try_into()?,
        value.minute().try_into()?,
        value.second().try_into()?,
        value.nanosecond(),
    ))
}

/// `datetime(..)` to a Postgres `timestamp` (without time zone).
fn datetime_wit_to_pg(
    (y, mon, d, h, min, s, ns): (i32, u8, u8, u8, u8, u8, u32),
) -> anyhow::Result<NaiveDateTime> {
    Ok(NaiveDateTime::new(
        date_wit_to_pg((y, mon, d))?,
        time_wit_to_pg((h, min, s, ns))?,
    ))
}

/// A Postgres `timestamp` to `datetime(..)`.
fn datetime_pg_to_wit(value: NaiveDateTime) -> anyhow::Result<(i32, u8, u8, u8, u8, u8, u32)> {
    let (y, mon, d) = date_pg_to_wit(value.date())?;
    let (h, min, s, ns) = time_pg_to_wit(value.time())?;
    Ok((y, mon, d, h, min, s, ns))
}

/// `timestamp(seconds since the epoch)` to a Postgres `timestamptz` (the only type it binds to).
fn timestamp_wit_to_pg(value: i64) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(value, 0)
        .ok_or_else(|| anyhow!("invalid epoch timestamp {value}"))
}

/// A base-10 string to a `numeric`, refusing anything `Decimal` would have to round.
fn decimal_wit_to_pg(value: &str) -> anyhow::Result<Decimal> {
    Decimal::from_str_exact(value).with_context(|| format!("invalid decimal {value}"))
}

/// One bound of a `range-decimal`, its value parsed.
fn decimal_bound_wit_to_pg(bound: Bound<String>) -> anyhow::Result<Bound<RangeDecimal>> {
    bound
        .map(|(value, kind)| Ok((RangeDecimal(decimal_wit_to_pg(&value)?), kind)))
        .transpose()
}

/// A Postgres `interval`: microseconds, days and months, kept apart as Postgres keeps them.
#[derive(Debug)]
struct Interval(pg::Interval);

impl ToSql for Interval {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_i64(self.0.micros);
        out.put_i32(self.0.days);
        out.put_i32(self.0.months);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }

    to_sql_checked!();
}

impl FromSql<'_> for Interval {
    fn from_sql(_: &Type, raw: &[u8]) -> Result<Self, BoxError> {
        let (micros, rest) = raw.split_first_chunk::<8>().ok_or(INTERVAL_FORMAT)?;
        let (days, months) = rest.split_first_chunk::<4>().ok_or(INTERVAL_FORMAT)?;
        let months: [u8; 4] = months.try_into().map_err(|_| INTERVAL_FORMAT)?;
        Ok(Self(pg::Interval {
            micros: i64::from_be_bytes(*micros),
            days: i32::from_be_bytes(*days),
            months: i32::from_be_bytes(months),
        }))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }
}

/// The error for an `interval` of the wrong length (Spin's message).
const INTERVAL_FORMAT: &str = "unexpected binary format for Postgres INTERVAL";

/// `db-null`: binds as NULL to a parameter of any type, since the WIT value carries none.
#[derive(Debug)]
struct PgNull;

impl ToSql for PgNull {
    fn to_sql(&self, _: &Type, _: &mut BytesMut) -> Result<IsNull, BoxError> {
        Ok(IsNull::Yes)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A value of a type with no WIT counterpart, kept as its raw binary encoding.
struct Other(Vec<u8>);

impl FromSql<'_> for Other {
    fn from_sql(_: &Type, raw: &[u8]) -> Result<Self, BoxError> {
        Ok(Self(raw.to_owned()))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Conversions and checks that need no server.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::factors::postgres::bindings::spin::postgres::postgres::RangeBoundKind;

    /// Encodes `param` for a parameter of type `ty`, with tokio-postgres's type check.
    fn encode(param: &SqlParam, ty: &Type) -> Result<Vec<u8>, String> {
        let mut out = BytesMut::new();
        match param.to_sql_checked(ty, &mut out) {
            Ok(IsNull::No) => Ok(out.to_vec()),
            Ok(IsNull::Yes) => Ok(b"NULL".to_vec()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Converts a parameter that must convert.
    fn param(value: ParameterValue) -> SqlParam {
        to_sql_parameter(value).expect("parameter should convert")
    }

    /// Each variant binds to its own Postgres type and nothing else.
    #[test]
    fn parameters_bind_only_to_their_own_type() {
        let int32 = param(ParameterValue::Int32(7));
        assert_eq!(encode(&int32, &Type::INT4).unwrap(), 7i32.to_be_bytes());
        let err = encode(&int32, &Type::INT8).unwrap_err();
        assert!(err.contains("`i32`") && err.contains("`int8`"), "{err}");

        let int8 = param(ParameterValue::Int8(-1));
        assert_eq!(encode(&int8, &Type::CHAR).unwrap(), [0xff]);
        assert!(encode(&int8, &Type::INT2).is_err());

        let datetime = param(ParameterValue::Datetime((2024, 1, 2, 3, 4, 5, 0)));
        assert!(encode(&datetime, &Type::TIMESTAMP).is_ok());
        assert!(encode(&datetime, &Type::TIMESTAMPTZ).is_err());

        let timestamp = param(ParameterValue::Timestamp(0));
        assert!(encode(&timestamp, &Type::TIMESTAMPTZ).is_ok());
        assert!(encode(&timestamp, &Type::TIMESTAMP).is_err());

        let array = param(ParameterValue::ArrayInt32(vec![Some(1), None]));
        assert!(encode(&array, &Type::INT4_ARRAY).is_ok());
        assert!(encode(&array, &Type::INT8_ARRAY).is_err());

        let jsonb = param(ParameterValue::Jsonb(br#"{"a":1}"#.to_vec()));
        assert!(encode(&jsonb, &Type::JSONB).is_ok());
    }

    /// `db-null` binds as NULL whatever the parameter type.
    #[test]
    fn db_null_binds_to_any_type() {
        let null = param(ParameterValue::DbNull);
        for ty in [Type::INT8, Type::TEXT, Type::INT4_RANGE, Type::JSONB] {
            assert_eq!(encode(&null, &ty).unwrap(), b"NULL");
        }
    }

    /// Values that do not parse fail with Spin's messages.
    #[test]
    fn invalid_values_fail_to_convert() {
        for (value, message) in [
            (ParameterValue::Uuid("nope".into()), "invalid UUID nope"),
            (ParameterValue::Jsonb(b"{".to_vec()), "invalid JSON {"),
            (
                ParameterValue::Decimal("1.2.3".into()),
                "invalid decimal 1.2.3",
            ),
            (
                ParameterValue::Date((2023, 2, 29)),
                "invalid date y=2023, m=2, d=29",
            ),
            (ParameterValue::Time((24, 0, 0, 0)), "invalid time 24:0:0:0"),
            (
                ParameterValue::Timestamp(i64::MAX),
                "invalid epoch timestamp",
            ),
            (
                ParameterValue::ArrayDecimal(vec![None, Some("x".into())]),
                "invalid decimal x",
            ),
        ] {
            let err = to_sql_parameter(value).expect_err("conversion should fail");
            assert!(format!("{err:?}").contains(message), "{err:?}");
        }
    }

    /// `timestamp` counts seconds from the Unix epoch.
    #[test]
    fn timestamp_is_seconds_since_the_epoch() {
        let ts = timestamp_wit_to_pg(3723).unwrap();
        assert_eq!(ts.naive_utc().to_string(), "1970-01-01 01:02:03");
        assert_eq!(
            timestamp_wit_to_pg(-86400)
                .unwrap()
                .date_naive()
                .to_string(),
            "1969-12-31"
        );
    }

    /// Dates and times survive the trip to chrono and back.
    #[test]
    fn dates_and_times_round_trip() {
        let dt = (1999, 12, 31, 23, 59, 58, 123_456_000);
        assert_eq!(
            datetime_pg_to_wit(datetime_wit_to_pg(dt).unwrap()).unwrap(),
            dt
        );
        assert_eq!(
            date_pg_to_wit(date_wit_to_pg((2024, 2, 29)).unwrap()).unwrap(),
            (2024, 2, 29)
        );
        let time = (1, 2, 3, 4);
        assert_eq!(time_pg_to_wit(time_wit_to_pg(time).unwrap()).unwrap(), time);
    }

    /// Ranges encode in Postgres's binary format.
    #[test]
    fn ranges_use_the_postgres_binary_format() {
        use RangeBoundKind::{Exclusive, Inclusive};
        let range = param(ParameterValue::RangeInt32((
            Some((1, Inclusive)),
            Some((10, Exclusive)),
        )));
        let bytes = encode(&range, &Type::INT4_RANGE).unwrap();
        assert_eq!(
            bytes,
            [0x02, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 10]
        );
        assert!(encode(&range, &Type::INT8_RANGE).is_err());

        let unbounded = param(ParameterValue::RangeInt64((None, None)));
        assert_eq!(encode(&unbounded, &Type::INT8_RANGE).unwrap(), [0x18]);
        let empty = param(ParameterValue::RangeInt32((
            Some((2, Inclusive)),
            Some((1, Inclusive)),
        )));
        assert_eq!(encode(&empty, &Type::INT4_RANGE).unwrap(), [0x01]);
        let err = to_sql_parameter(ParameterValue::RangeInt32((
            None,
            Some((i32::MAX, Inclusive)),
        )))
        .err()
        .unwrap();
        assert_eq!(err.to_string(), "range bound 2147483647 is out of range");
    }

    /// A `numrange` survives encoding and decoding, scale included.
    #[test]
    fn decimal_ranges_round_trip() {
        use RangeBoundKind::{Exclusive, Inclusive};
        let range = param(ParameterValue::RangeDecimal((
            Some(("1.5".into(), Inclusive)),
            Some(("2.25".into(), Exclusive)),
        )));
        let bytes = encode(&range, &Type::NUM_RANGE).unwrap();
        assert_eq!(bytes[0], 0x02, "lower bound inclusive");
        let decoded = Range::<RangeDecimal>::from_sql(&Type::NUM_RANGE, &bytes).unwrap();
        let (lower, upper) = range_pg_to_wit(&decoded, |d| d.0.to_string());
        assert_eq!(lower, Some(("1.5".to_owned(), Inclusive)));
        assert_eq!(upper, Some(("2.25".to_owned(), Exclusive)));
    }

    /// An `interval` is micros, days and months, in that order.
    #[test]
    fn intervals_round_trip() {
        let interval = pg::Interval {
            micros: 3_723_000_000,
            days: -4,
            months: 14,
        };
        let bytes = encode(&param(ParameterValue::Interval(interval)), &Type::INTERVAL).unwrap();
        assert_eq!(bytes.len(), 16);
        let decoded = Interval::from_sql(&Type::INTERVAL, &bytes).unwrap().0;
        assert_eq!(
            (decoded.micros, decoded.days, decoded.months),
            (3_723_000_000, -4, 14)
        );
        let err = Interval::from_sql(&Type::INTERVAL, &bytes[..15])
            .err()
            .unwrap();
        assert_eq!(err.to_string(), INTERVAL_FORMAT);
    }

    /// Column types map to the WIT types Spin reports.
    #[test]
    fn column_types_map_like_spin() {
        for (ty, expected) in [
            (Type::TIMESTAMPTZ, "DbDataType::Datetime"),
            (Type::VARCHAR, "DbDataType::Str"),
            (Type::NUM_RANGE, "DbDataType::RangeDecimal"),
            (Type::BPCHAR_ARRAY, "DbDataType::ArrayStr"),
            (Type::CHAR, r#"DbDataType::Other("char")"#),
            (Type::JSON, r#"DbDataType::Other("json")"#),
        ] {
            assert_eq!(format!("{:?}", convert_data_type(&ty)), expected);
        }
    }

    /// A value of an unknown type is kept as raw bytes.
    #[test]
    fn unsupported_values_keep_their_raw_bytes() {
        assert!(<Other as FromSql>::accepts(&Type::POINT));
        assert_eq!(Other::from_sql(&Type::CHAR, &[7]).unwrap().0, [7]);
    }
}
