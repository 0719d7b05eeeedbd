//! The orders database port: what the domain needs from Postgres, and nothing about how it is
//! reached. Spin's `pg4` interface implements it in the guests (`seckill-spin-edge`), the
//! `postgres` crate natively (`seckill-native`); each statement lives with the operation that
//! runs it.

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
