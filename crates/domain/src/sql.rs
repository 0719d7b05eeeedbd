//! The orders database port: what the domain needs from Postgres, and nothing about how it is
//! reached. Spin's `pg4` interface implements it in the guests (`seckill-spin-edge`), the
//! `postgres` crate natively (`seckill-native`); each statement lives with the operation that
//! runs it, and the helpers they share (parameters, typed columns, a transaction) here.

/// A value bound to a statement parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// `bigint`.
    Int64(i64),
    /// `text`.
    Str(String),
    /// `text[]`.
    ArrayStr(Vec<String>),
    /// `bigint[]`.
    ArrayInt64(Vec<i64>),
}

/// A column value read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// `bigint`.
    Int64(i64),
    /// `integer`.
    Int32(i32),
    /// `text`.
    Str(String),
    /// `boolean`.
    Bool(bool),
    /// SQL `NULL`.
    Null,
    /// A type the domain does not read.
    Other,
}

/// The rows a query returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rows {
    /// One `Vec` of cells per row, in the statement's column order.
    pub rows: Vec<Vec<Cell>>,
}

/// A Postgres failure: `connection` when the database could not be reached (retry later),
/// otherwise the statement failed (the data is at fault).
#[derive(Debug, Clone, thiserror::Error)]
#[error("postgres: {message}")]
pub struct DbError {
    /// Whether the database was unreachable.
    pub connection: bool,
    /// What happened.
    pub message: String,
}

impl DbError {
    /// The database answered with what the statement's caller does not expect.
    pub fn unexpected(message: impl Into<String>) -> Self {
        DbError {
            connection: false,
            message: message.into(),
        }
    }
}

/// A connection to the orders database.
pub trait Sql {
    /// Runs a statement; returns the rows it changed.
    fn execute(&self, statement: &str, params: &[Param]) -> Result<u64, DbError>;
    /// Runs a query; returns its rows.
    fn query(&self, statement: &str, params: &[Param]) -> Result<Rows, DbError>;
}

/// A text parameter.
pub(crate) fn s(v: &str) -> Param {
    Param::Str(v.to_owned())
}

/// Column `i` of `row`, an integer; any other value is an error, never a silent 0 (as the
/// Redis reader refuses a reply of the wrong shape).
pub(crate) fn int(row: &[Cell], i: usize) -> Result<i64, DbError> {
    match row.get(i) {
        Some(Cell::Int64(v)) => Ok(*v),
        Some(Cell::Int32(v)) => Ok(i64::from(*v)),
        other => Err(DbError::unexpected(format!(
            "column {i} is not an integer: {other:?}"
        ))),
    }
}

/// Column `i` of `row`, text; any other value is an error.
pub(crate) fn text(row: &[Cell], i: usize) -> Result<String, DbError> {
    match row.get(i) {
        Some(Cell::Str(v)) => Ok(v.clone()),
        other => Err(DbError::unexpected(format!(
            "column {i} is not text: {other:?}"
        ))),
    }
}

/// Column `i` of `row`, an integer or `NULL`.
pub(crate) fn optional_int(row: &[Cell], i: usize) -> Result<Option<i64>, DbError> {
    match row.get(i) {
        Some(Cell::Null) => Ok(None),
        _ => int(row, i).map(Some),
    }
}

/// Column `i` of `row`, text or `NULL`.
pub(crate) fn optional_text(row: &[Cell], i: usize) -> Result<Option<String>, DbError> {
    match row.get(i) {
        Some(Cell::Null) => Ok(None),
        _ => text(row, i).map(Some),
    }
}

/// Runs `f` inside BEGIN … COMMIT; rolls back when it fails. `Ok` means committed: a COMMIT
/// that fails is an error.
pub(crate) fn transaction<T, E: From<DbError>>(
    db: &impl Sql,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    db.execute("BEGIN", &[])?;
    match f() {
        Ok(v) => {
            db.execute("COMMIT", &[])?;
            Ok(v)
        }
        Err(e) => {
            let _ = db.execute("ROLLBACK", &[]);
            Err(e)
        }
    }
}
