//! Connection pools and the `connection` resource, with transaction tracking and rollback on drop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::config::SslMode;
use tokio_postgres::{Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::factors::tls::TlsTrust;

/// Maximum connections in one connection string's pool (Spin's `CONNECTION_POOL_SIZE`).
const CONNECTION_POOL_SIZE: usize = 64;

/// The app-wide Postgres connection pools, one per connection string, created on first `open`
/// (Spin keeps them the same way, per app, across requests).
pub struct PgPools {
    /// Pools by connection string, exactly as the guest passed it.
    pools: Mutex<HashMap<String, Pool>>,
    /// TLS for every `sslmode` but `disable`.
    tls: Arc<rustls::ClientConfig>,
}

impl Default for PgPools {
    fn default() -> Self {
        Self::new(&TlsTrust::default())
    }
}

impl PgPools {
    /// Pools whose TLS connections verify against `trust`.
    pub fn new(trust: &TlsTrust) -> Self {
        PgPools {
            pools: Mutex::default(),
            tls: trust.client_config(),
        }
    }

    /// Takes a client from `address`'s pool, creating the pool first if needed.
    pub(super) async fn get_client(
        &self,
        address: &str,
        config: &Config,
    ) -> anyhow::Result<Object> {
        let pool = self
            .pool(address, config)
            .context("establishing PostgreSQL connection pool")?;
        Ok(pool.get().await?)
    }

    /// Connections checked out and connections idle, over every pool (for the metrics: a
    /// pool's key is a connection string, which may hold a password).
    pub fn connections(&self) -> (usize, usize) {
        let pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        pools
            .values()
            .map(Pool::status)
            .fold((0, 0), |(busy, idle), s| {
                (
                    busy + s.size.saturating_sub(s.available),
                    idle + s.available,
                )
            })
    }

    /// `address`'s pool. The lock is only held here, never across an `.await`.
    fn pool(&self, address: &str, config: &Config) -> anyhow::Result<Pool> {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pool) = pools.get(address) {
            return Ok(pool.clone());
        }
        let pool = create_connection_pool(config.clone(), &self.tls)?;
        pools.insert(address.to_owned(), pool.clone());
        Ok(pool)
    }
}

/// Builds a pool for one connection string, configured as Spin configures it
/// (`crates/factor-outbound-pg/src/client.rs`, `create_connection_pool`): no TLS for
/// `sslmode=disable`, otherwise a connector that verifies the certificate chain and host name,
/// whatever the mode says (`require` included, unlike libpq).
fn create_connection_pool(config: Config, tls: &Arc<rustls::ClientConfig>) -> anyhow::Result<Pool> {
    tracing::debug!("creating a Postgres connection pool");
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Clean,
    };
    let manager = if config.get_ssl_mode() == SslMode::Disable {
        Manager::from_config(config, NoTls, manager_config)
    } else {
        let connect = MakeRustlsConnect::new((**tls).clone());
        Manager::from_config(config, connect, manager_config)
    };
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
    /// A connection around a client just taken from its pool.
    pub(super) fn new(client: Object) -> Self {
        PgConnection {
            client: Some(client),
            transaction: TransactionState::Idle,
        }
    }

    /// The pooled client.
    pub(super) fn client(&self) -> &Object {
        self.client.as_ref().expect("present until dropped")
    }

    /// Notes that `statement` is about to run on this connection.
    pub(super) fn will_run(&mut self, statement: &str) {
        self.transaction = self.transaction.after(statement);
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

/// Transaction tracking and TLS checks, which need no server.
#[cfg(test)]
mod tests {
    use super::*;

    /// `BEGIN` and friends open a block; only a statement that surely ends it closes it.
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
}
