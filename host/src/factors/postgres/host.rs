//! The per-instance state and the WIT `connection` interface: address checks, `open`, `query`,
//! `execute` and `drop` (Spin's `crates/factor-outbound-pg/src/{lib,host}.rs`).

use std::fmt::Display;
use std::sync::Arc;

use tokio_postgres::Config;
use tokio_postgres::config::Host as PgHost;
use tracing::Instrument;
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};

use super::bindings::spin::postgres::postgres::{self as pg, ParameterValue, RowSet};
use super::client::{PgConnection, PgPools};
use super::errors::{error_report, query_failed};
use super::types::{convert_row, infer_columns, param_refs, to_sql_parameters};
use crate::factors::component::ComponentConfig;
use crate::factors::spin_costs::InstanceMeter;
use crate::factors::tls::TlsTrust;
use crate::factors::{ConfigureAppContext, Factor, PrepareContext};
use crate::manifest::ManifestError;
use crate::telemetry::{client_span, sql_verb};

/// One instance's Postgres state: its component's allowed hosts, its open connections (a table
/// of its own, as Spin's `InstanceState` keeps one) and the app-wide pools.
pub struct InstanceState {
    pools: Arc<PgPools>,
    component: Arc<ComponentConfig>,
    connections: ResourceTable,
    /// What Spin would pay for this instance.
    meter: Arc<InstanceMeter>,
}

/// How this factor connects: the runtime configuration it owns.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// The roots a TLS connection (`sslmode` other than `disable`) trusts.
    pub tls: TlsTrust,
}

impl Factor for InstanceState {
    type RuntimeConfig = RuntimeConfig;
    type AppState = Arc<PgPools>;

    /// Nothing of the manifest is this factor's to check: the addresses a component may open
    /// are its allowed hosts, checked when it is resolved (Spin's `configure_app` checks
    /// nothing either: `crates/factor-outbound-pg/src/lib.rs`).
    fn configure_app(
        config: RuntimeConfig,
        _: &ConfigureAppContext<'_>,
    ) -> Result<Arc<PgPools>, ManifestError> {
        Ok(Arc::new(PgPools::new(&config.tls)))
    }

    fn prepare(ctx: PrepareContext<'_, Arc<PgPools>>) -> Self {
        InstanceState {
            pools: ctx.app_state.clone(),
            component: ctx.component.clone(),
            connections: ResourceTable::new(),
            meter: ctx.meter.clone(),
        }
    }

    fn add_to_linker<T: Send + 'static>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut Self,
    ) -> wasmtime::Result<()> {
        pg::add_to_linker::<T, HasSelf<InstanceState>>(linker, get)
    }
}

impl InstanceState {
    /// Parses `address` and checks every server it names against `allowed_outbound_hosts`.
    fn ensure_pg_address_allowed(&self, address: &str) -> Result<Config, pg::Error> {
        let config = address
            .parse::<Config>()
            .map_err(|e| pg::Error::ConnectionFailed(e.to_string()))?;
        for url in outbound_urls(&config).map_err(pg::Error::ConnectionFailed)? {
            if !self.component.allowed_hosts.allows_url(&url) {
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
            .connections
            .get_mut(connection)
            .map_err(|_| pg::Error::ConnectionFailed("no connection found".into()))?;
        connection.will_run(statement);
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

impl pg::Host for InstanceState {}

impl pg::HostConnection for InstanceState {
    /// Checks `address` against `allowed_outbound_hosts`, then takes a client from its pool.
    async fn open(&mut self, address: String) -> Result<Resource<PgConnection>, pg::Error> {
        // Spin: `ensure_address_allowed` (`factor-outbound-pg/src/allowed_hosts.rs`), then a
        // client from the connection string's pool.
        self.meter.outbound_open();
        let config = self.ensure_pg_address_allowed(&address)?;
        let span = client_span!("spin_outbound_pg.open", "db.system" = "postgresql", "open");
        let client = self
            .pools
            .get_client(&address, &config)
            .instrument(span)
            .await
            .map_err(|e| pg::Error::ConnectionFailed(error_report(&e)))?;
        self.connections
            .push(PgConnection::new(client))
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
        let span = client_span!(
            "spin_outbound_pg.query",
            "db.system" = "postgresql",
            sql_verb(&statement)
        );
        let rows = connection
            .client()
            .query(&statement, &param_refs(&params))
            .instrument(span)
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
        let span = client_span!(
            "spin_outbound_pg.execute",
            "db.system" = "postgresql",
            sql_verb(&statement)
        );
        connection
            .client()
            .execute(&statement, &param_refs(&params))
            .instrument(span)
            .await
            .map_err(query_failed)
    }

    /// Closes the connection, returning its client to the pool (rolled back first if it may be
    /// inside a transaction: see [`PgConnection`]'s `Drop`).
    async fn drop(&mut self, connection: Resource<PgConnection>) -> wasmtime::Result<()> {
        // Like Spin, a handle that is already gone is not an error. The client goes back to its
        // pool when dropped.
        let _ = self.connections.delete(connection);
        Ok(())
    }
}

/// Address checks, which need no server.
#[cfg(test)]
mod tests {
    use super::*;

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
}
