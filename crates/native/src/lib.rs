//! Native adapters of the domain's two ports, so the domain runs outside WASM exactly as the
//! guests run it: [`NativeStore`] (redis-rs, single node or cluster) and [`NativePg`] (the
//! `postgres` crate, blocking, like Spin's interface). The benchmark's native baseline and the
//! tests that drive the domain without the host use them.

use std::sync::Mutex;

use seckill_domain::sql::{Cell, DbError, Param, Rows, Sql};
use seckill_domain::store::{Replies, Store, StoreError, StoreErrorKind};

/// The Redis port over any redis-rs connection (single node or cluster).
pub struct NativeStore<C>(pub Mutex<C>);

impl<C: redis::ConnectionLike> NativeStore<C> {
    /// Wraps a connection.
    pub fn new(conn: C) -> Self {
        NativeStore(Mutex::new(conn))
    }
}

impl<C: redis::ConnectionLike> NativeStore<C> {
    fn eval_command(
        &self,
        command: &str,
        first: &str,
        keys: &[String],
        args: &[String],
    ) -> Result<Replies, StoreError> {
        let mut cmd = redis::cmd(command);
        cmd.arg(first).arg(keys.len()).arg(keys).arg(args);
        let mut conn = self.0.lock().expect("no panic holds the connection");
        let value = cmd.query::<redis::Value>(&mut *conn).map_err(store_error)?;
        seckill_redis_reply::flatten(value)
            .map(Replies)
            .map_err(|e| StoreError::new(StoreErrorKind::Failed, e))
    }
}

impl<C: redis::ConnectionLike> Store for NativeStore<C> {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        self.eval_command("EVALSHA", sha, keys, args)
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        self.eval_command("EVAL", source, keys, args)
    }
}

/// A redis-rs error, by kind: the transport's failures, else Redis's error code.
fn store_error(e: redis::RedisError) -> StoreError {
    let kind = if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        StoreErrorKind::Unavailable
    } else {
        e.code()
            .map_or(StoreErrorKind::Failed, StoreErrorKind::of_redis_code)
    };
    StoreError::new(kind, e.to_string())
}

/// The orders database over the `postgres` crate. Blocking: call it outside an async runtime
/// (or from `spawn_blocking`).
pub struct NativePg(Mutex<postgres::Client>);

impl NativePg {
    /// Connects to `url` (a `postgres://` URL; no TLS: tests and tools on loopback).
    pub fn connect(url: &str) -> Result<Self, DbError> {
        let client = postgres::Client::connect(url, postgres::NoTls).map_err(db_error)?;
        Ok(NativePg(Mutex::new(client)))
    }
}

/// An error of the `postgres` crate, sorted like the Spin adapter sorts Spin's.
fn db_error(e: postgres::Error) -> DbError {
    DbError {
        connection: e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()),
        message: e.to_string(),
    }
}

fn params(params: &[Param]) -> Vec<Box<dyn postgres::types::ToSql + Sync>> {
    params
        .iter()
        .map(|p| -> Box<dyn postgres::types::ToSql + Sync> {
            match p {
                Param::Int64(v) => Box::new(*v),
                Param::Str(v) => Box::new(v.clone()),
                Param::ArrayStr(v) => Box::new(v.clone()),
                Param::ArrayInt64(v) => Box::new(v.clone()),
            }
        })
        .collect()
}

fn cell(row: &postgres::Row, i: usize) -> Cell {
    use postgres::types::Type;
    let ty = row.columns()[i].type_().clone();
    let read = |r: Result<Option<Cell>, postgres::Error>| r.ok().flatten().unwrap_or(Cell::Null);
    match ty {
        Type::INT8 => read(row.try_get::<_, Option<i64>>(i).map(|v| v.map(Cell::Int64))),
        Type::INT4 => read(row.try_get::<_, Option<i32>>(i).map(|v| v.map(Cell::Int32))),
        Type::TEXT | Type::VARCHAR => read(
            row.try_get::<_, Option<String>>(i)
                .map(|v| v.map(Cell::Str)),
        ),
        Type::BOOL => read(row.try_get::<_, Option<bool>>(i).map(|v| v.map(Cell::Bool))),
        _ => Cell::Other,
    }
}

impl Sql for NativePg {
    fn execute(&self, statement: &str, p: &[Param]) -> Result<u64, DbError> {
        let owned = params(p);
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            owned.iter().map(|b| b.as_ref()).collect();
        let mut client = self.0.lock().expect("no panic holds the client");
        client.execute(statement, &refs).map_err(db_error)
    }

    fn query(&self, statement: &str, p: &[Param]) -> Result<Rows, DbError> {
        let owned = params(p);
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            owned.iter().map(|b| b.as_ref()).collect();
        let mut client = self.0.lock().expect("no panic holds the client");
        let rows = client.query(statement, &refs).map_err(db_error)?;
        Ok(Rows {
            rows: rows
                .iter()
                .map(|row| (0..row.len()).map(|i| cell(row, i)).collect())
                .collect(),
        })
    }
}
