//! Postgres conformance: calls every function of `spin:postgres/postgres@4.0.0`, binding every
//! `parameter-value` variant and reading every `db-value` variant back, and reports what came
//! back as JSON.
//!
//! # Report
//!
//! Query results are `{"columns": [[name, type], ..], "rows": [[value, ..], ..]}`; a type is its
//! WIT case name (`"int32"`, `"other(char)"`), a value a one-key object `{case: payload}`
//! (`{"int32": 7}`, `{"db-null": null}`, ranges as `[lower, upper]` with each bound `null` or
//! `[value, "inclusive"|"exclusive"]`, `jsonb` as its UTF-8 text). An error is
//! `{"variant": case, "message": text, "debug": Debug text}`, plus for `query-failed`
//! `"kind": "text"|"db-error"` and, for `db-error`, `as_text`, `severity`, `code`, `detail` and
//! `extras` (an object); `message` is then the server's message.
//!
//! # Assertions for the native test (Spin 3.6 behaviour)
//!
//! - `open` == `"ok"`
//! - `drop_existing` == `0`, `create_table` == `0`
//! - `insert_rows` == `1`, `insert_null_rows` == `1`
//! - `columns` == `[["c_bool","boolean"], ["c_int8","other(char)"], ["c_int16","int16"],
//!   ["c_int32","int32"], ["c_int64","int64"], ["c_float32","floating32"],
//!   ["c_float64","floating64"], ["c_str","str"], ["c_binary","binary"], ["c_date","date"],
//!   ["c_time","time"], ["c_datetime","datetime"], ["c_uuid","uuid"], ["c_jsonb","jsonb"],
//!   ["c_decimal","decimal"], ["c_range_int32","range-int32"], ["c_range_int64","range-int64"],
//!   ["c_range_decimal","range-decimal"], ["c_array_int32","array-int32"],
//!   ["c_array_int64","array-int64"], ["c_array_decimal","array-decimal"],
//!   ["c_array_str","array-str"], ["c_interval","interval"], ["c_null","str"],
//!   ["c_timestamp_epoch","int64"]]`
//! - `row_count` == `1`, and `row` (values by column name) ==
//!   - `c_bool` `{"boolean":true}`; `c_int8` `{"unsupported":[251]}` (`"char"` has no WIT
//!     type: raw bytes); `c_int16` `{"int16":-300}`; `c_int32` `{"int32":2000000000}`;
//!     `c_int64` `{"int64":-9000000000000}`; `c_float32` `{"floating32":1.5}`;
//!     `c_float64` `{"floating64":-2.25}`; `c_str` `{"str":"héllo ✓"}`;
//!     `c_binary` `{"binary":[0,1,2,255]}`; `c_date` `{"date":[2024,2,29]}`;
//!     `c_time` `{"time":[23,59,58,123456000]}`;
//!     `c_datetime` `{"datetime":[1999,12,31,23,59,59,999999000]}`;
//!     `c_uuid` `{"uuid":"67e55044-10b1-426f-9247-bb680e5fe0c8"}` (lower-cased);
//!     `c_jsonb` `{"jsonb":"{\"a\":\"x\",\"b\":[1,2]}"}`; `c_decimal` `{"decimal":"-12345.6789"}`
//!   - `c_range_int32` `{"range-int32":[[1,"inclusive"],[11,"exclusive"]]}` (`[1,10]`
//!     canonicalised); `c_range_int64` `{"range-int64":[[5000000001,"inclusive"],null]}`
//!     (`(5000000000,)` canonicalised); `c_range_decimal`
//!     `{"range-decimal":[["1.5","inclusive"],["2.25","exclusive"]]}`
//!   - `c_array_int32` `{"array-int32":[1,null,-3]}`;
//!     `c_array_int64` `{"array-int64":[1099511627776,null]}`;
//!     `c_array_decimal` `{"array-decimal":["0.10",null]}` (scale kept);
//!     `c_array_str` `{"array-str":["a",null,""]}`
//!   - `c_interval` `{"interval":{"micros":3723000001,"days":-4,"months":14}}`;
//!     `c_null` `{"db-null":null}`; `c_timestamp_epoch` `{"int64":1700000000}` (the `timestamp`
//!     parameter is seconds since the epoch)
//! - `null_row_count` == `1`, and every value of `null_row` == `{"db-null":null}` (25 of them:
//!   `db-null` binds to every column type and NULL reads back as `db-null`, even for `"char"`)
//! - `timestamptz_error`: `variant` == `"query-failed"`, `kind` == `"text"`, `message` contains
//!   `` the Postgres type `timestamptz` `` (Spin's quirk: a `timestamptz` column cannot be read)
//! - `param_query` == `{"columns":[["c_str","str"]],"rows":[[{"str":"héllo ✓"}]]}`
//! - `empty_query` == `{"columns":[],"rows":[]}` (no rows means no columns either, as in Spin)
//! - `wrong_type_error`: `variant` == `"query-failed"`, `kind` == `"text"`, `message` ==
//!   `Error { kind: ToSql(0), cause: Some(WrongType { postgres: Int8, rust: "i32" }) }`
//! - `bad_parameter_query_error`: `variant` == `"bad-parameter"`, `message` starts with
//!   `"invalid UUID not-a-uuid"`
//! - `bad_parameter_execute_error`: `variant` == `"value-conversion-failed"`, `message` starts
//!   with `"invalid UUID not-a-uuid"` (Spin's `execute` and `query` differ here)
//! - `failed_statement_error`: `variant` == `"query-failed"`, `kind` == `"db-error"`,
//!   `severity` == `"ERROR"`, `code` == `"42P01"`,
//!   `message` == `relation "no_such_table" does not exist`, `detail` == `null`, `as_text`
//!   contains `E42P01`, `extras` has a `"file"` key
//! - `second_connection` == `{"columns":[["one","int32"]],"rows":[[{"int32":1}]]}` (a second
//!   connection open at the same time as the first)
//! - `delete_rows` == `2` (the connection still works after the errors above), `drop_table` ==
//!   `0`
//! - `denied_error`: `variant` == `"connection-failed"`, `message` ==
//!   `"address postgres://{host}:{port} is not permitted"` for the denied address's host and port
//!   (a URL without a port gets `5432`; a key/value string without `port` gets no `:{port}`)

#![allow(clippy::result_large_err)] // pg4 errors carry the server's full report, as in spin-sdk itself.

use serde_json::{Map, Value, json};
use spin_sdk::pg4 as pg;

use pg::{
    Connection, DbDataType, DbValue, Interval, ParameterValue, PgError, QueryError, RangeBoundKind,
    RowSet,
};

/// The table the check creates, fills, and drops again.
const TABLE: &str = "seckill_pg_conformance";

/// One column per `parameter-value` variant: its name, SQL type and the value inserted into it.
fn columns() -> Vec<(&'static str, &'static str, ParameterValue)> {
    use RangeBoundKind::{Exclusive, Inclusive};
    vec![
        ("c_bool", "boolean", ParameterValue::Boolean(true)),
        // `int8` binds to Postgres's one-byte `"char"` type.
        ("c_int8", "\"char\"", ParameterValue::Int8(-5)),
        ("c_int16", "smallint", ParameterValue::Int16(-300)),
        ("c_int32", "integer", ParameterValue::Int32(2_000_000_000)),
        (
            "c_int64",
            "bigint",
            ParameterValue::Int64(-9_000_000_000_000),
        ),
        // Exact binary fractions, so the values compare equal after the round trip.
        ("c_float32", "real", ParameterValue::Floating32(1.5)),
        (
            "c_float64",
            "double precision",
            ParameterValue::Floating64(-2.25),
        ),
        ("c_str", "text", ParameterValue::Str("héllo ✓".into())),
        (
            "c_binary",
            "bytea",
            ParameterValue::Binary(vec![0, 1, 2, 255]),
        ),
        ("c_date", "date", ParameterValue::Date((2024, 2, 29))),
        // Postgres keeps microseconds, so the nanoseconds are whole microseconds.
        (
            "c_time",
            "time",
            ParameterValue::Time((23, 59, 58, 123_456_000)),
        ),
        (
            "c_datetime",
            "timestamp",
            ParameterValue::Datetime((1999, 12, 31, 23, 59, 59, 999_999_000)),
        ),
        // `timestamp` binds to `timestamptz` only.
        (
            "c_timestamp",
            "timestamptz",
            ParameterValue::Timestamp(1_700_000_000),
        ),
        (
            "c_uuid",
            "uuid",
            ParameterValue::Uuid("67E55044-10B1-426F-9247-BB680E5FE0C8".into()),
        ),
        // Keys out of order and spaced: jsonb normalises both.
        (
            "c_jsonb",
            "jsonb",
            ParameterValue::Jsonb(br#"{"b": [1, 2], "a": "x"}"#.to_vec()),
        ),
        (
            "c_decimal",
            "numeric",
            ParameterValue::Decimal("-12345.6789".into()),
        ),
        (
            "c_range_int32",
            "int4range",
            ParameterValue::RangeInt32((Some((1, Inclusive)), Some((10, Inclusive)))),
        ),
        (
            "c_range_int64",
            "int8range",
            ParameterValue::RangeInt64((Some((5_000_000_000, Exclusive)), None)),
        ),
        (
            "c_range_decimal",
            "numrange",
            ParameterValue::RangeDecimal((
                Some(("1.5".into(), Inclusive)),
                Some(("2.25".into(), Exclusive)),
            )),
        ),
        (
            "c_array_int32",
            "integer[]",
            ParameterValue::ArrayInt32(vec![Some(1), None, Some(-3)]),
        ),
        (
            "c_array_int64",
            "bigint[]",
            ParameterValue::ArrayInt64(vec![Some(1 << 40), None]),
        ),
        (
            "c_array_decimal",
            "numeric[]",
            ParameterValue::ArrayDecimal(vec![Some("0.10".into()), None]),
        ),
        (
            "c_array_str",
            "text[]",
            ParameterValue::ArrayStr(vec![Some("a".into()), None, Some(String::new())]),
        ),
        (
            "c_interval",
            "interval",
            ParameterValue::Interval(Interval {
                micros: 3_723_000_001,
                days: -4,
                months: 14,
            }),
        ),
        ("c_null", "text", ParameterValue::DbNull),
    ]
}

/// Runs every Postgres host function against `address` and reports what came back; opening
/// `denied_address`, which `allowed_outbound_hosts` does not allow, must fail.
pub fn run(address: &str, denied_address: &str) -> Value {
    let mut report = Map::new();
    match Connection::open(address) {
        Ok(conn) => {
            report.insert("open".into(), json!("ok"));
            exercise(&conn, address, &mut report);
        }
        Err(e) => {
            report.insert("open".into(), error_json(&e));
        }
    }
    let denied = match Connection::open(denied_address) {
        Ok(_) => json!("ok"),
        Err(e) => error_json(&e),
    };
    report.insert("denied_error".into(), denied);
    Value::Object(report)
}

/// Everything done on the open connection `conn` to `address`, each outcome recorded under its
/// own key.
fn exercise(conn: &Connection, address: &str, report: &mut Map<String, Value>) {
    let columns = columns();
    let names: Vec<_> = columns.iter().map(|(name, _, _)| *name).collect();
    let definitions: Vec<_> = columns
        .iter()
        .map(|(name, sql_type, _)| format!("{name} {sql_type}"))
        .collect();
    let placeholders: Vec<_> = (1..=columns.len()).map(|i| format!("${i}")).collect();
    let values: Vec<_> = columns.iter().map(|(_, _, value)| value.clone()).collect();
    let nulls = vec![ParameterValue::DbNull; columns.len()];
    let insert = format!(
        "INSERT INTO {TABLE} ({}) VALUES ({})",
        names.join(", "),
        placeholders.join(", ")
    );
    // A `timestamptz` column cannot be read back (see `timestamptz_error`), so its value is
    // checked through `extract`.
    let readable: Vec<_> = names
        .iter()
        .filter(|name| **name != "c_timestamp")
        .copied()
        .collect();
    let select = format!(
        "SELECT {}, extract(epoch FROM c_timestamp)::bigint AS c_timestamp_epoch FROM {TABLE}",
        readable.join(", ")
    );

    let mut put = |key: &str, value: Value| {
        report.insert(key.into(), value);
    };
    put(
        "drop_existing",
        execute(conn, &format!("DROP TABLE IF EXISTS {TABLE}"), &[]),
    );
    put(
        "create_table",
        execute(
            conn,
            &format!("CREATE TABLE {TABLE} ({})", definitions.join(", ")),
            &[],
        ),
    );
    put("insert_rows", execute(conn, &insert, &values));
    put("insert_null_rows", execute(conn, &insert, &nulls));

    let rows = |filter: &str| conn.query(&format!("{select} WHERE {filter}"), &[]);
    match rows("c_bool IS NOT NULL") {
        Ok(set) => {
            put("columns", columns_json(&set));
            put("row_count", json!(set.rows.len()));
            put("row", first_row_by_name(&set));
        }
        Err(e) => put("columns", error_json(&e)),
    }
    match rows("c_bool IS NULL") {
        Ok(set) => {
            put("null_row_count", json!(set.rows.len()));
            put("null_row", first_row_by_name(&set));
        }
        Err(e) => put("null_row", error_json(&e)),
    }

    put(
        "timestamptz_error",
        query(conn, &format!("SELECT c_timestamp FROM {TABLE}"), &[]),
    );
    put(
        "param_query",
        query(
            conn,
            &format!("SELECT c_str FROM {TABLE} WHERE c_int32 = $1 AND c_bool = $2"),
            &[
                ParameterValue::Int32(2_000_000_000),
                ParameterValue::Boolean(true),
            ],
        ),
    );
    put(
        "empty_query",
        query(
            conn,
            &format!("SELECT c_int32 FROM {TABLE} WHERE false"),
            &[],
        ),
    );
    put(
        "wrong_type_error",
        execute(
            conn,
            &format!("UPDATE {TABLE} SET c_int64 = $1"),
            &[ParameterValue::Int32(1)],
        ),
    );
    let bad_uuid = [ParameterValue::Uuid("not-a-uuid".into())];
    put(
        "bad_parameter_query_error",
        query(conn, "SELECT $1::uuid", &bad_uuid),
    );
    put(
        "bad_parameter_execute_error",
        execute(conn, &format!("UPDATE {TABLE} SET c_uuid = $1"), &bad_uuid),
    );
    put(
        "failed_statement_error",
        query(conn, "SELECT * FROM no_such_table", &[]),
    );
    // `conn` stays open meanwhile, so this takes a second client from the pool.
    let second = match Connection::open(address) {
        Ok(other) => query(&other, "SELECT 1 AS one", &[]),
        Err(e) => error_json(&e),
    };
    put("second_connection", second);
    put(
        "delete_rows",
        execute(conn, &format!("DELETE FROM {TABLE}"), &[]),
    );
    put(
        "drop_table",
        execute(conn, &format!("DROP TABLE {TABLE}"), &[]),
    );
}

/// `execute`'s rows affected, or its error.
fn execute(conn: &Connection, statement: &str, params: &[ParameterValue]) -> Value {
    match conn.execute(statement, params) {
        Ok(rows) => json!(rows),
        Err(e) => error_json(&e),
    }
}

/// `query`'s columns and rows, or its error.
fn query(conn: &Connection, statement: &str, params: &[ParameterValue]) -> Value {
    match conn.query(statement, params) {
        Ok(set) => json!({
            "columns": columns_json(&set),
            "rows": set
                .rows
                .iter()
                .map(|row| row.iter().map(value_json).collect())
                .collect::<Vec<Vec<_>>>(),
        }),
        Err(e) => error_json(&e),
    }
}

/// `[[name, type], ..]`.
fn columns_json(set: &RowSet) -> Value {
    set.columns
        .iter()
        .map(|column| json!([column.name, data_type_name(&column.data_type)]))
        .collect()
}

/// The first row as an object keyed by column name (`null` if there is no row).
fn first_row_by_name(set: &RowSet) -> Value {
    let Some(row) = set.rows.first() else {
        return Value::Null;
    };
    set.columns
        .iter()
        .zip(row)
        .map(|(column, value)| (column.name.clone(), value_json(value)))
        .collect::<Map<_, _>>()
        .into()
}

/// A column type's WIT case name.
fn data_type_name(data_type: &DbDataType) -> String {
    let name = match data_type {
        DbDataType::Boolean => "boolean",
        DbDataType::Int8 => "int8",
        DbDataType::Int16 => "int16",
        DbDataType::Int32 => "int32",
        DbDataType::Int64 => "int64",
        DbDataType::Floating32 => "floating32",
        DbDataType::Floating64 => "floating64",
        DbDataType::Str => "str",
        DbDataType::Binary => "binary",
        DbDataType::Date => "date",
        DbDataType::Time => "time",
        DbDataType::Datetime => "datetime",
        DbDataType::Timestamp => "timestamp",
        DbDataType::Uuid => "uuid",
        DbDataType::Jsonb => "jsonb",
        DbDataType::Decimal => "decimal",
        DbDataType::RangeInt32 => "range-int32",
        DbDataType::RangeInt64 => "range-int64",
        DbDataType::RangeDecimal => "range-decimal",
        DbDataType::ArrayInt32 => "array-int32",
        DbDataType::ArrayInt64 => "array-int64",
        DbDataType::ArrayDecimal => "array-decimal",
        DbDataType::ArrayStr => "array-str",
        DbDataType::Interval => "interval",
        DbDataType::Other(name) => return format!("other({name})"),
    };
    name.to_owned()
}

/// A value as `{case: payload}`.
fn value_json(value: &DbValue) -> Value {
    let (case, payload) = match value {
        DbValue::Boolean(v) => ("boolean", json!(v)),
        DbValue::Int8(v) => ("int8", json!(v)),
        DbValue::Int16(v) => ("int16", json!(v)),
        DbValue::Int32(v) => ("int32", json!(v)),
        DbValue::Int64(v) => ("int64", json!(v)),
        DbValue::Floating32(v) => ("floating32", json!(f64::from(*v))),
        DbValue::Floating64(v) => ("floating64", json!(v)),
        DbValue::Str(v) => ("str", json!(v)),
        DbValue::Binary(v) => ("binary", json!(v)),
        DbValue::Date((y, mon, d)) => ("date", json!([y, mon, d])),
        DbValue::Time((h, min, s, ns)) => ("time", json!([h, min, s, ns])),
        DbValue::Datetime((y, mon, d, h, min, s, ns)) => {
            ("datetime", json!([y, mon, d, h, min, s, ns]))
        }
        DbValue::Timestamp(v) => ("timestamp", json!(v)),
        DbValue::Uuid(v) => ("uuid", json!(v)),
        DbValue::Jsonb(v) => ("jsonb", json!(String::from_utf8_lossy(v))),
        DbValue::Decimal(v) => ("decimal", json!(v)),
        DbValue::RangeInt32((lower, upper)) => ("range-int32", json!([bound(lower), bound(upper)])),
        DbValue::RangeInt64((lower, upper)) => ("range-int64", json!([bound(lower), bound(upper)])),
        DbValue::RangeDecimal((lower, upper)) => {
            ("range-decimal", json!([bound(lower), bound(upper)]))
        }
        DbValue::ArrayInt32(v) => ("array-int32", json!(v)),
        DbValue::ArrayInt64(v) => ("array-int64", json!(v)),
        DbValue::ArrayDecimal(v) => ("array-decimal", json!(v)),
        DbValue::ArrayStr(v) => ("array-str", json!(v)),
        DbValue::Interval(v) => (
            "interval",
            json!({"micros": v.micros, "days": v.days, "months": v.months}),
        ),
        DbValue::DbNull => ("db-null", Value::Null),
        DbValue::Unsupported(v) => ("unsupported", json!(v)),
    };
    Value::Object(Map::from_iter([(case.to_owned(), payload)]))
}

/// A range bound: `null` when unbounded, else `[value, "inclusive"|"exclusive"]`.
fn bound<T: Clone + Into<Value>>(bound: &Option<(T, RangeBoundKind)>) -> Value {
    match bound {
        None => Value::Null,
        Some((value, RangeBoundKind::Inclusive)) => json!([value.clone().into(), "inclusive"]),
        Some((value, RangeBoundKind::Exclusive)) => json!([value.clone().into(), "exclusive"]),
    }
}

/// An error as `{"variant", "message", "debug", ..}` (see the module docs).
fn error_json(error: &PgError) -> Value {
    let (variant, message) = match error {
        PgError::ConnectionFailed(m) => ("connection-failed", m),
        PgError::BadParameter(m) => ("bad-parameter", m),
        PgError::ValueConversionFailed(m) => ("value-conversion-failed", m),
        PgError::Other(m) => ("other", m),
        PgError::QueryFailed(QueryError::Text(m)) => {
            return json!({
                "variant": "query-failed",
                "kind": "text",
                "message": m,
                "debug": format!("{error:?}"),
            });
        }
        PgError::QueryFailed(QueryError::DbError(e)) => {
            return json!({
                "variant": "query-failed",
                "kind": "db-error",
                "message": e.message,
                "as_text": e.as_text,
                "severity": e.severity,
                "code": e.code,
                "detail": e.detail,
                "extras": e
                    .extras
                    .iter()
                    .map(|(name, value)| (name.clone(), json!(value)))
                    .collect::<Map<_, _>>(),
                "debug": format!("{error:?}"),
            });
        }
    };
    json!({ "variant": variant, "message": message, "debug": format!("{error:?}") })
}
