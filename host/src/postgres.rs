//! The host side of `spin:postgres/postgres@4.0.0`, reproducing Spin 3.6's
//! `spin-factor-outbound-pg`: one connection pool per connection string, parameters bound with
//! the exact Rust type of their WIT variant (so Postgres's own type checks apply, e.g. `int32`
//! against a `bigint` column fails), and results mapped column by column the way Spin maps them,
//! quirks included (see [`convert_entry`]).
//!
//! # TLS
//!
//! This host has no TLS stack: it is for local use with `sslmode=disable`. A connection string
//! that *requires* TLS (`sslmode=require`) fails to open with
//! `connection-failed("TLS not supported by this host")`; `sslmode=prefer` (tokio-postgres's
//! default) connects without TLS, as Spin does when the server does not offer it.

// The WIT `error` carries a whole server error report; boxing it would not match the bindings.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt::Display;
use std::sync::{Mutex, PoisonError};

use anyhow::{Context as _, anyhow};
use bytes::{BufMut as _, BytesMut};
use chrono::{Datelike as _, NaiveDate, NaiveDateTime, NaiveTime, Timelike as _};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use rust_decimal::Decimal;
use tokio_postgres::config::{Host as PgHost, SslMode};
use tokio_postgres::types::{FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};
use tokio_postgres::{Config, NoTls, Row};
use wasmtime::component::Resource;

use crate::bindings::spin::spin::postgres::postgres::{
    self as pg, Column, DbDataType, DbValue, ParameterValue, RangeBoundKind, RowSet,
};
use crate::state::Ctx;

/// Maximum connections in one connection string's pool (Spin's `CONNECTION_POOL_SIZE`).
const CONNECTION_POOL_SIZE: usize = 64;

/// The error type `ToSql`/`FromSql` implementations return.
type BoxError = Box<dyn StdError + Sync + Send>;

/// A parameter ready to bind: a value of the exact Rust type its WIT variant stands for.
type SqlParam = Box<dyn ToSql + Send + Sync>;

/// The app-wide Postgres connection pools, one per connection string, created on first `open`
/// (Spin keeps them the same way, per app, across requests).
#[derive(Default)]
pub struct PgPools {
    /// Pools by connection string, exactly as the guest passed it.
    pools: Mutex<HashMap<String, Pool>>,
}

impl PgPools {
    /// Takes a client from `address`'s pool, creating the pool first if needed.
    async fn get_client(&self, address: &str, config: &Config) -> anyhow::Result<Object> {
        let pool = self
            .pool(address, config)
            .context("establishing PostgreSQL connection pool")?;
        Ok(pool.get().await?)
    }

    /// `address`'s pool. The lock is only held here, never across an `.await`.
    fn pool(&self, address: &str, config: &Config) -> anyhow::Result<Pool> {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pool) = pools.get(address) {
            return Ok(pool.clone());
        }
        let pool = create_connection_pool(config.clone())?;
        pools.insert(address.to_owned(), pool.clone());
        Ok(pool)
    }
}

/// Builds a pool for one connection string, configured as Spin configures it.
fn create_connection_pool(config: Config) -> anyhow::Result<Pool> {
    tracing::debug!("creating a Postgres connection pool");
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Clean,
    };
    let manager = Manager::from_config(config, NoTls, manager_config);
    Pool::builder(manager)
        .max_size(CONNECTION_POOL_SIZE)
        .build()
        .context("building Postgres connection pool")
}

/// An open `connection` resource: a client checked out of its pool until the guest drops it.
pub struct PgConnection {
    /// The pooled client; dropping it returns it to the pool. `None` only while dropping.
    client: Option<Object>,
    /// A statement that may have opened a transaction block ran, and none that surely ends it
    /// since (see [`TransactionState`]).
    transaction: TransactionState,
}

impl PgConnection {
    fn client(&self) -> &Object {
        self.client.as_ref().expect("present until dropped")
    }
}

/// What the statements a guest ran say about the session's transaction block. Every statement
/// goes through the extended protocol (one statement per message), so only `BEGIN` / `START
/// TRANSACTION` open a block and only `COMMIT` / `ROLLBACK` / `END` / `ABORT` close it; anything
/// unclear counts as open, which costs at most one needless `ROLLBACK`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum TransactionState {
    /// No transaction block can be open.
    #[default]
    Idle,
    /// One may be open: roll it back before the connection is reused.
    MaybeOpen,
}

impl TransactionState {
    /// The state after `statement` ran (successfully or not).
    pub fn after(self, statement: &str) -> Self {
        let s = statement.trim().trim_end_matches(';').to_ascii_lowercase();
        let first = s.split_whitespace().next().unwrap_or("");
        let closes = matches!(first, "commit" | "rollback" | "end" | "abort")
            && !s.contains(" to ")
            && !s.contains("prepared")
            && (s.contains("and no chain") || !s.contains("and chain"));
        if closes {
            TransactionState::Idle
        } else if s.contains("begin") || s.contains("start") || s.contains("chain") {
            TransactionState::MaybeOpen
        } else {
            self
        }
    }
}

/// No connection goes back to the pool inside a transaction (a deliberate difference: Spin's
/// `Clean` recycling ends none, so a guest that stops between `BEGIN` and `COMMIT` would leave
/// its transaction to the next request, whose autocommit statements would then never commit).
/// A connection that may be in one is rolled back first, or discarded if that fails.
impl Drop for PgConnection {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        if self.transaction == TransactionState::Idle {
            return; // back to the pool as is
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = client.batch_execute("ROLLBACK").await {
                        tracing::warn!(
                            "discarding a Postgres connection left in a transaction: {e}"
                        );
                        drop(Object::take(client));
                    }
                });
            }
            Err(_) => drop(Object::take(client)),
        }
    }
}

impl Ctx {
    /// Parses `address` and checks every server it names against `allowed_outbound_hosts`.
    fn ensure_pg_address_allowed(&self, address: &str) -> Result<Config, pg::Error> {
        let config = address
            .parse::<Config>()
            .map_err(|e| pg::Error::ConnectionFailed(e.to_string()))?;
        for url in outbound_urls(&config).map_err(pg::Error::ConnectionFailed)? {
            if !self.allows_url(&url) {
                return Err(pg::Error::ConnectionFailed(format!(
                    "address {url} is not permitted"
                )));
            }
        }
        Ok(config)
    }

    /// The open connection behind `connection`, noting that `statement` is about to run on it.
    fn pg_connection(
        &mut self,
        connection: &Resource<PgConnection>,
        statement: &str,
    ) -> Result<&PgConnection, pg::Error> {
        let connection = self
            .table
            .get_mut(connection)
            .map_err(|_| pg::Error::ConnectionFailed("no connection found".into()))?;
        connection.transaction = connection.transaction.after(statement);
        Ok(connection)
    }
}

/// The `postgres://host[:port]` URL of every server a connection string may connect to, each to
/// be checked against `allowed_outbound_hosts`. Like Spin, a host's port is the one at its index
/// or, if only one is given, that one; with no port the allow-list applies the default (5432).
///
/// Unlike Spin, `hostaddr` addresses are checked too: they are where tokio-postgres actually
/// connects, so skipping them would let a guest reach any address behind an allowed name.
fn outbound_urls(config: &Config) -> Result<Vec<String>, String> {
    let ports = config.get_ports();
    let url = |host: &dyn Display, index: usize| {
        let port = ports
            .get(index)
            .or(if ports.len() == 1 {
                ports.first()
            } else {
                None
            })
            .map(|port| format!(":{port}"))
            .unwrap_or_default();
        let host = host.to_string();
        // An IPv6 literal needs brackets to be read back as a host.
        if host.contains(':') {
            format!("postgres://[{host}]{port}")
        } else {
            format!("postgres://{host}{port}")
        }
    };
    let mut urls = Vec::new();
    for (index, host) in config.get_hosts().iter().enumerate() {
        match host {
            PgHost::Tcp(name) => urls.push(url(name, index)),
            #[cfg(unix)]
            PgHost::Unix(_) => return Err("Unix sockets are not supported on WebAssembly".into()),
        }
    }
    for (index, address) in config.get_hostaddrs().iter().enumerate() {
        urls.push(url(address, index));
    }
    Ok(urls)
}

/// Refuses connection strings that insist on TLS, which this host cannot speak.
fn ensure_tls_not_required(config: &Config) -> Result<(), pg::Error> {
    match config.get_ssl_mode() {
        SslMode::Disable | SslMode::Prefer => Ok(()),
        _ => Err(pg::Error::ConnectionFailed(
            "TLS not supported by this host".into(),
        )),
    }
}

impl pg::Host for Ctx {}

impl pg::HostConnection for Ctx {
    /// Checks `address` against `allowed_outbound_hosts`, then takes a client from its pool.
    async fn open(&mut self, address: String) -> Result<Resource<PgConnection>, pg::Error> {
        let config = self.ensure_pg_address_allowed(&address)?;
        ensure_tls_not_required(&config)?;
        let client = self
            .services
            .pg
            .get_client(&address, &config)
            .await
            .map_err(|e| pg::Error::ConnectionFailed(error_report(&e)))?;
        self.table
            .push(PgConnection {
                client: Some(client),
                transaction: TransactionState::Idle,
            })
            .map_err(|_| pg::Error::ConnectionFailed("too many connections".into()))
    }

    /// Runs a query and returns every row, converted.
    async fn query(
        &mut self,
        connection: Resource<PgConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Result<RowSet, pg::Error> {
        let connection = self.pg_connection(&connection, &statement)?;
        // Spin reports a parameter that cannot be converted as `bad-parameter` here but as
        // `value-conversion-failed` from `execute`.
        let params =
            to_sql_parameters(params).map_err(|e| pg::Error::BadParameter(error_report(&e)))?;
        let rows = connection
            .client()
            .query(&statement, &param_refs(&params))
            .await
            .map_err(query_failed)?;
        // Spin infers the columns from the first row, so an empty result has no columns.
        let columns = rows.first().map(infer_columns).unwrap_or_default();
        let rows = rows
            .iter()
            .map(convert_row)
            .collect::<anyhow::Result<Vec<_>>>()
            .map_err(|e| pg::Error::QueryFailed(pg::QueryError::Text(error_report(&e))))?;
        Ok(RowSet { columns, rows })
    }

    /// Runs a statement and returns the number of rows it affected.
    async fn execute(
        &mut self,
        connection: Resource<PgConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Result<u64, pg::Error> {
        let connection = self.pg_connection(&connection, &statement)?;
        let params = to_sql_parameters(params)
            .map_err(|e| pg::Error::ValueConversionFailed(error_report(&e)))?;
        connection
            .client()
            .execute(&statement, &param_refs(&params))
            .await
            .map_err(query_failed)
    }

    /// Closes the connection, returning its client to the pool (rolled back first if it may be
    /// inside a transaction: see [`PgConnection`]'s `Drop`).
    async fn drop(&mut self, connection: Resource<PgConnection>) -> wasmtime::Result<()> {
        // Like Spin, a handle that is already gone is not an error. The client goes back to its
        // pool when dropped.
        let _ = self.table.delete(connection);
        Ok(())
    }
}

/// Formats an error the way Spin does (`{:?}` of an `anyhow::Error`: the message, then its
/// causes), but never with a backtrace: `RUST_BACKTRACE` must not change what the guest sees.
fn error_report(e: &anyhow::Error) -> String {
    let mut report = e.to_string();
    let causes: Vec<_> = e.chain().skip(1).collect();
    if !causes.is_empty() {
        report.push_str("\n\nCaused by:");
    }
    let numbered = causes.len() > 1;
    for (n, cause) in causes.iter().enumerate() {
        let (first, rest) = if numbered {
            (format!("{n: >5}: "), "       ")
        } else {
            ("    ".to_owned(), "    ")
        };
        report.push('\n');
        report.push_str(&first);
        report.push_str(&cause.to_string().replace('\n', &format!("\n{rest}")));
    }
    report
}

/// Converts every parameter, failing on the first that cannot be converted.
fn to_sql_parameters(params: Vec<ParameterValue>) -> anyhow::Result<Vec<SqlParam>> {
    params.into_iter().map(to_sql_parameter).collect()
}

/// Borrows converted parameters the way tokio-postgres takes them.
fn param_refs(params: &[SqlParam]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| param.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// Maps a tokio-postgres error to `query-failed`, structured when the server sent the error.
fn query_failed(e: tokio_postgres::Error) -> pg::Error {
    let as_text = format!("{e:?}");
    let query_error = match e.as_db_error() {
        None => pg::QueryError::Text(as_text),
        Some(db_error) => pg::QueryError::DbError(pg::DbError {
            as_text,
            severity: db_error.severity().to_owned(),
            code: db_error.code().code().to_owned(),
            message: db_error.message().to_owned(),
            detail: db_error.detail().map(str::to_owned),
            extras: db_error_extras(db_error),
        }),
    };
    pg::Error::QueryFailed(query_error)
}

/// The fields of a server error that `db-error` has no field for, named as in Spin.
fn db_error_extras(e: &tokio_postgres::error::DbError) -> Vec<(String, String)> {
    let line = e.line().map(|line| line.to_string());
    [
        ("column", e.column()),
        ("constraint", e.constraint()),
        ("routine", e.routine()),
        ("hint", e.hint()),
        ("table", e.table()),
        ("datatype", e.datatype()),
        ("schema", e.schema()),
        ("file", e.file()),
        ("line", line.as_deref()),
        ("where_", e.where_()),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.to_owned(), value?.to_owned())))
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
            Box::new(uuid::Uuid::parse_str(&v).with_context(|| format!("invalid UUID {v}"))?)
        }
        ParameterValue::Jsonb(v) => Box::new(
            serde_json::from_slice::<serde_json::Value>(&v)
                .with_context(|| format!("invalid JSON {}", String::from_utf8_lossy(&v)))?,
        ),
        ParameterValue::Decimal(v) => Box::new(decimal_wit_to_pg(&v)?),
        ParameterValue::RangeInt32((lower, upper)) => Box::new(PgRange::new(lower, upper)?),
        ParameterValue::RangeInt64((lower, upper)) => Box::new(PgRange::new(lower, upper)?),
        ParameterValue::RangeDecimal((lower, upper)) => Box::new(PgRange::new(
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
fn infer_columns(row: &Row) -> Vec<Column> {
    row.columns()
        .iter()
        .map(|column| Column {
            name: column.name().to_owned(),
            data_type: convert_data_type(column.type_()),
        })
        .collect()
}

/// Every value of `row`, converted.
fn convert_row(row: &Row) -> anyhow::Result<Vec<DbValue>> {
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
        Type::INT4_RANGE => read(row, index, |v: PgRange<i32>| {
            DbValue::RangeInt32(v.into_wit())
        }),
        Type::INT8_RANGE => read(row, index, |v: PgRange<i64>| {
            DbValue::RangeInt64(v.into_wit())
        }),
        Type::NUM_RANGE => read(row, index, |v: PgRange<Decimal>| {
            DbValue::RangeDecimal(v.map(|d| d.to_string()).into_wit())
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
fn decimal_bound_wit_to_pg(
    bound: Option<(String, RangeBoundKind)>,
) -> anyhow::Result<Option<(Decimal, RangeBoundKind)>> {
    bound
        .map(|(value, kind)| Ok((decimal_wit_to_pg(&value)?, kind)))
        .transpose()
}

/// A range's bound: its value and whether it is inclusive; `None` is unbounded.
type Bound<T> = Option<(T, RangeBoundKind)>;

/// A Postgres range of `T` (`int4range`, `int8range` or `numrange`), encoded and decoded in
/// Postgres's binary format as the `postgres_range` crate Spin uses does.
#[derive(Debug, Clone, PartialEq)]
enum PgRange<T> {
    /// The empty range; the WIT has no way to say so and reads it as `(none, none)`.
    Empty,
    /// A range with these bounds.
    Bounds(Bound<T>, Bound<T>),
}

/// Which end of a range a bound is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The lower bound.
    Lower,
    /// The upper bound.
    Upper,
}

/// A range element type, with its canonical bound form.
trait RangeElement: PartialOrd + Sized {
    /// Rewrites a bound into canonical form: discrete types use `[lower, upper)` like Postgres.
    fn normalize(
        value: Self,
        kind: RangeBoundKind,
        side: Side,
    ) -> anyhow::Result<(Self, RangeBoundKind)>;
}

/// Canonicalises an integer bound: an inclusive upper or exclusive lower bound moves up by one.
macro_rules! discrete_range_element {
    ($t:ty) => {
        impl RangeElement for $t {
            fn normalize(
                value: Self,
                kind: RangeBoundKind,
                side: Side,
            ) -> anyhow::Result<(Self, RangeBoundKind)> {
                let next = || {
                    value
                        .checked_add(1)
                        .ok_or_else(|| anyhow!("range bound {value} is out of range"))
                };
                Ok(match (side, kind) {
                    (Side::Upper, RangeBoundKind::Inclusive) => {
                        (next()?, RangeBoundKind::Exclusive)
                    }
                    (Side::Lower, RangeBoundKind::Exclusive) => {
                        (next()?, RangeBoundKind::Inclusive)
                    }
                    _ => (value, kind),
                })
            }
        }
    };
}

discrete_range_element!(i32);
discrete_range_element!(i64);

impl RangeElement for Decimal {
    fn normalize(
        value: Self,
        kind: RangeBoundKind,
        _: Side,
    ) -> anyhow::Result<(Self, RangeBoundKind)> {
        Ok((value, kind))
    }
}

impl<T: RangeElement> PgRange<T> {
    /// A range with these bounds, canonicalised; bounds that cross make the empty range.
    fn new(lower: Bound<T>, upper: Bound<T>) -> anyhow::Result<Self> {
        let lower = lower
            .map(|(value, kind)| T::normalize(value, kind, Side::Lower))
            .transpose()?;
        let upper = upper
            .map(|(value, kind)| T::normalize(value, kind, Side::Upper))
            .transpose()?;
        if let (Some((low, low_kind)), Some((high, high_kind))) = (&lower, &upper) {
            let empty = match (low_kind, high_kind) {
                (RangeBoundKind::Inclusive, RangeBoundKind::Inclusive) => low > high,
                _ => low >= high,
            };
            if empty {
                return Ok(Self::Empty);
            }
        }
        Ok(Self::Bounds(lower, upper))
    }
}

impl<T> PgRange<T> {
    /// The same range with every bound's value mapped.
    fn map<U>(self, f: impl Fn(T) -> U) -> PgRange<U> {
        match self {
            Self::Empty => PgRange::Empty,
            Self::Bounds(lower, upper) => PgRange::Bounds(
                lower.map(|(value, kind)| (f(value), kind)),
                upper.map(|(value, kind)| (f(value), kind)),
            ),
        }
    }

    /// The WIT `(lower, upper)` pair.
    fn into_wit(self) -> (Bound<T>, Bound<T>) {
        match self {
            Self::Empty => (None, None),
            Self::Bounds(lower, upper) => (lower, upper),
        }
    }
}

/// Range flag: the range is empty.
const RANGE_EMPTY: u8 = 0x01;
/// Range flag: the lower bound is inclusive.
const RANGE_LOWER_INCLUSIVE: u8 = 0x02;
/// Range flag: the upper bound is inclusive.
const RANGE_UPPER_INCLUSIVE: u8 = 0x04;
/// Range flag: there is no lower bound.
const RANGE_LOWER_UNBOUNDED: u8 = 0x08;
/// Range flag: there is no upper bound.
const RANGE_UPPER_UNBOUNDED: u8 = 0x10;

/// The element type of a range type.
fn range_element(ty: &Type) -> Result<&Type, BoxError> {
    match ty.kind() {
        Kind::Range(element) => Ok(element),
        _ => Err(format!("{ty} is not a range type").into()),
    }
}

impl<T: ToSql> ToSql for PgRange<T> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let element = range_element(ty)?;
        let Self::Bounds(lower, upper) = self else {
            out.put_u8(RANGE_EMPTY);
            return Ok(IsNull::No);
        };
        let flags_at = out.len();
        out.put_u8(0);
        let lower_flags = write_bound(
            lower,
            element,
            out,
            RANGE_LOWER_INCLUSIVE,
            RANGE_LOWER_UNBOUNDED,
        )?;
        let upper_flags = write_bound(
            upper,
            element,
            out,
            RANGE_UPPER_INCLUSIVE,
            RANGE_UPPER_UNBOUNDED,
        )?;
        out[flags_at] = lower_flags | upper_flags;
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(ty.kind(), Kind::Range(element) if T::accepts(element))
    }

    to_sql_checked!();
}

/// Writes one bound (length-prefixed value) and returns its flags.
fn write_bound<T: ToSql>(
    bound: &Bound<T>,
    element: &Type,
    out: &mut BytesMut,
    inclusive: u8,
    unbounded: u8,
) -> Result<u8, BoxError> {
    let Some((value, kind)) = bound else {
        return Ok(unbounded);
    };
    let length_at = out.len();
    out.put_i32(0);
    let length = match value.to_sql(element, out)? {
        IsNull::No => i32::try_from(out.len() - length_at - 4)?,
        IsNull::Yes => -1,
    };
    out[length_at..length_at + 4].copy_from_slice(&length.to_be_bytes());
    Ok(match kind {
        RangeBoundKind::Inclusive => inclusive,
        RangeBoundKind::Exclusive => 0,
    })
}

impl<'a, T: FromSql<'a>> FromSql<'a> for PgRange<T> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        let element = range_element(ty)?;
        let (&flags, mut rest) = raw.split_first().ok_or("invalid range: no flags")?;
        if flags & RANGE_EMPTY != 0 {
            return match rest {
                [] => Ok(Self::Empty),
                _ => Err("invalid range: empty range with bounds".into()),
            };
        }
        let lower = read_bound(
            &mut rest,
            element,
            flags,
            RANGE_LOWER_INCLUSIVE,
            RANGE_LOWER_UNBOUNDED,
        )?;
        let upper = read_bound(
            &mut rest,
            element,
            flags,
            RANGE_UPPER_INCLUSIVE,
            RANGE_UPPER_UNBOUNDED,
        )?;
        if !rest.is_empty() {
            return Err("invalid range: trailing bytes".into());
        }
        Ok(Self::Bounds(lower, upper))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(ty.kind(), Kind::Range(element) if T::accepts(element))
    }
}

/// Reads one bound from the front of `buf`, advancing it.
fn read_bound<'a, T: FromSql<'a>>(
    buf: &mut &'a [u8],
    element: &Type,
    flags: u8,
    inclusive: u8,
    unbounded: u8,
) -> Result<Bound<T>, BoxError> {
    if flags & unbounded != 0 {
        return Ok(None);
    }
    let (length, rest) = buf
        .split_first_chunk::<4>()
        .ok_or("invalid range: truncated bound")?;
    let value = match usize::try_from(i32::from_be_bytes(*length)) {
        Err(_) => {
            *buf = rest;
            T::from_sql_null(element)?
        }
        Ok(length) if length <= rest.len() => {
            let (value, rest) = rest.split_at(length);
            *buf = rest;
            T::from_sql(element, value)?
        }
        Ok(_) => return Err("invalid range: truncated bound".into()),
    };
    let kind = if flags & inclusive != 0 {
        RangeBoundKind::Inclusive
    } else {
        RangeBoundKind::Exclusive
    };
    Ok(Some((value, kind)))
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
    fn transaction_state_follows_the_statements() {
        use TransactionState::*;
        let run = |stmts: &[&str]| stmts.iter().fold(Idle, |t, s| t.after(s));
        assert_eq!(run(&["SELECT 1", "UPDATE t SET a = 1"]), Idle);
        assert_eq!(run(&["BEGIN", "UPDATE t SET a = 1"]), MaybeOpen);
        assert_eq!(run(&["  begin isolation level serializable"]), MaybeOpen);
        assert_eq!(run(&["START TRANSACTION", "SELECT 1", "COMMIT"]), Idle);
        assert_eq!(run(&["BEGIN", "ROLLBACK;"]), Idle);
        assert_eq!(
            run(&["BEGIN", "SAVEPOINT a", "ROLLBACK TO SAVEPOINT a"]),
            MaybeOpen
        );
        assert_eq!(run(&["BEGIN", "COMMIT AND CHAIN"]), MaybeOpen);
        assert_eq!(run(&["BEGIN", "COMMIT AND NO CHAIN"]), Idle);
        assert_eq!(run(&["/* x */ BEGIN"]), MaybeOpen);
    }

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

    /// Error reports are anyhow's `{:?}` layout, minus any backtrace.
    #[test]
    fn error_reports_match_anyhow_debug_without_backtrace() {
        let one = anyhow!("root").context("outer");
        assert_eq!(error_report(&one), "outer\n\nCaused by:\n    root");
        let two = anyhow!("root\nsecond line")
            .context("middle")
            .context("outer");
        assert_eq!(
            error_report(&two),
            "outer\n\nCaused by:\n    0: middle\n    1: root\n       second line"
        );
        assert_eq!(error_report(&anyhow!("alone")), "alone");
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

    /// Integer ranges become `[lower, upper)`; decimal ranges keep their bounds.
    #[test]
    fn integer_ranges_are_canonicalised_like_postgres() {
        use RangeBoundKind::{Exclusive, Inclusive};
        let range = PgRange::new(Some((1, Inclusive)), Some((10, Inclusive))).unwrap();
        assert_eq!(
            range,
            PgRange::Bounds(Some((1, Inclusive)), Some((11, Exclusive)))
        );
        let range = PgRange::new(Some((5i64, Exclusive)), None).unwrap();
        assert_eq!(range, PgRange::Bounds(Some((6, Inclusive)), None));
        assert_eq!(
            PgRange::new(Some((3, Inclusive)), Some((3, Exclusive))).unwrap(),
            PgRange::Empty
        );
        assert_eq!(
            PgRange::new(Some((4, Inclusive)), Some((2, Inclusive))).unwrap(),
            PgRange::Empty
        );
        assert!(PgRange::new(None, Some((i32::MAX, Inclusive))).is_err());

        // Decimal ranges keep their bounds as given.
        let one = Decimal::ONE;
        let range = PgRange::new(Some((one, Exclusive)), Some((one, Inclusive))).unwrap();
        assert_eq!(range, PgRange::Empty);
        let two = Decimal::TWO;
        let range = PgRange::new(Some((one, Exclusive)), Some((two, Inclusive))).unwrap();
        assert_eq!(
            range,
            PgRange::Bounds(Some((one, Exclusive)), Some((two, Inclusive)))
        );
    }

    /// Ranges encode and decode in Postgres's binary format.
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

        let decoded = PgRange::<i32>::from_sql(&Type::INT4_RANGE, &bytes).unwrap();
        assert_eq!(
            decoded,
            PgRange::Bounds(Some((1, Inclusive)), Some((10, Exclusive)))
        );
        let decoded = PgRange::<i32>::from_sql(&Type::INT4_RANGE, &[0x01]).unwrap();
        assert_eq!(decoded.into_wit(), (None, None));
        assert!(PgRange::<i32>::from_sql(&Type::INT4_RANGE, &[0x00, 0, 0]).is_err());
        assert!(!<PgRange<i32> as FromSql>::accepts(&Type::INT8_RANGE));
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
        assert_eq!(bytes[0], RANGE_LOWER_INCLUSIVE);
        let decoded = PgRange::<Decimal>::from_sql(&Type::NUM_RANGE, &bytes).unwrap();
        let (lower, upper) = decoded.map(|d| d.to_string()).into_wit();
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

    /// Every host (and `hostaddr`) of a connection string is checked.
    #[test]
    fn every_server_of_a_connection_string_is_checked() {
        let urls = |address: &str| outbound_urls(&address.parse().unwrap());
        assert_eq!(
            urls("host=db.example port=5433 user=u").unwrap(),
            ["postgres://db.example:5433"]
        );
        assert_eq!(
            urls("postgres://u:p@localhost/app").unwrap(),
            ["postgres://localhost:5432"]
        );
        assert_eq!(
            urls("host=a,b port=6000 user=u").unwrap(),
            ["postgres://a:6000", "postgres://b:6000"]
        );
        assert_eq!(
            urls("host=a,b port=1,2 user=u").unwrap(),
            ["postgres://a:1", "postgres://b:2"]
        );
        assert_eq!(
            urls("host=allowed hostaddr=10.1.2.3 user=u").unwrap(),
            ["postgres://allowed", "postgres://10.1.2.3"]
        );
        assert_eq!(
            urls("host=::1 port=5432 user=u").unwrap(),
            ["postgres://[::1]:5432"]
        );
        assert!(urls("host=/var/run/postgresql user=u").is_err());
    }

    /// Only a connection string that requires TLS is refused.
    #[test]
    fn tls_is_refused_only_when_required() {
        let check = |address: &str| ensure_tls_not_required(&address.parse().unwrap());
        assert!(check("host=h user=u sslmode=disable").is_ok());
        assert!(check("host=h user=u").is_ok());
        let err = check("host=h user=u sslmode=require").unwrap_err();
        assert_eq!(
            format!("{err:?}"),
            r#"Error::ConnectionFailed("TLS not supported by this host")"#
        );
    }
}
