//! The orders database port over Spin's Postgres interface (`spin:postgres/postgres@4.0.0`).

use seckill_domain::sql::{Cell, DbError, Param, Rows, Sql};
use spin_sdk::pg4::{self as pg, DbValue, ParameterValue};

/// A Spin Postgres connection, as the domain's [`Sql`].
pub struct SpinPg(pub pg::Connection);

impl SpinPg {
    /// Opens the orders database, in a clean session: a pooled connection may come back from
    /// an earlier request still inside its transaction (Spin's pool ends none), and an
    /// autocommit statement run inside it would never commit. `ROLLBACK` outside a transaction
    /// only warns.
    pub fn open(url: &str) -> Result<Self, DbError> {
        let db = SpinPg(pg::Connection::open(url).map_err(db_error)?);
        db.execute("ROLLBACK", &[])?;
        Ok(db)
    }
}

/// Spin's error, sorted: a connection that failed or closed is worth a retry; anything else is
/// the statement's (or the data's) fault.
fn db_error(e: pg::PgError) -> DbError {
    // Spin words a lost connection in the text of a query failure (`Error { kind: Closed, .. }`,
    // "error communicating with the server", …): match it without regard to case.
    const LOST: [&str; 6] = [
        "connection",
        "closed",
        "communicating",
        "refused",
        "timed out",
        "reset",
    ];
    let connection = matches!(e, pg::PgError::ConnectionFailed(_))
        || matches!(&e, pg::PgError::QueryFailed(pg::QueryError::Text(t))
            if LOST.iter().any(|w| t.to_ascii_lowercase().contains(w)));
    DbError {
        connection,
        message: format!("{e:?}"),
    }
}

fn param(p: &Param) -> ParameterValue {
    match p {
        Param::Int64(v) => ParameterValue::Int64(*v),
        Param::Str(v) => ParameterValue::Str(v.clone()),
        Param::ArrayStr(v) => ParameterValue::ArrayStr(v.iter().cloned().map(Some).collect()),
        Param::ArrayInt64(v) => ParameterValue::ArrayInt64(v.iter().copied().map(Some).collect()),
    }
}

fn cell(v: DbValue) -> Cell {
    match v {
        DbValue::Int64(v) => Cell::Int64(v),
        DbValue::Int32(v) => Cell::Int32(v),
        DbValue::Str(v) => Cell::Str(v),
        DbValue::Boolean(v) => Cell::Bool(v),
        DbValue::DbNull => Cell::Null,
        _ => Cell::Other,
    }
}

impl Sql for SpinPg {
    fn execute(&self, statement: &str, params: &[Param]) -> Result<u64, DbError> {
        let params: Vec<ParameterValue> = params.iter().map(param).collect();
        self.0.execute(statement, &params).map_err(db_error)
    }

    fn query(&self, statement: &str, params: &[Param]) -> Result<Rows, DbError> {
        let params: Vec<ParameterValue> = params.iter().map(param).collect();
        let set = self.0.query(statement, &params).map_err(db_error)?;
        Ok(Rows {
            rows: set
                .rows
                .into_iter()
                .map(|row| row.into_iter().map(cell).collect())
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_connection_is_worth_a_retry_whatever_spin_calls_it() {
        let text = |t: &str| pg::PgError::QueryFailed(pg::QueryError::Text(t.to_owned()));
        for lost in [
            "Error { kind: Closed, cause: None }",
            "error communicating with the server: Connection reset by peer (os error 104)",
            "Connection refused (os error 111)",
        ] {
            assert!(db_error(text(lost)).connection, "{lost}");
        }
        let data =
            text("db error: ERROR: null value in column \"sku\" violates not-null constraint");
        assert!(!db_error(data).connection);
    }
}
