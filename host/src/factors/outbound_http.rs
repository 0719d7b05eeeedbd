//! The outbound HTTP factor: `wasi:http` (its types, which the HTTP trigger's incoming requests
//! use too, and `outgoing-handler`), linked as Spin's `crates/factor-outbound-http/src/wasi.rs`
//! links it. Outgoing requests are restricted by `allowed_outbound_hosts` as in Spin: a request
//! to a host the manifest does not allow fails with `HttpRequestDenied` before any connection is
//! made.
//!
//! Connections are pooled and shared by every instance, per origin, as Spin does from v3.4
//! (PRs #3229, #3240): a request to an origin reuses an idle kept-alive connection. HTTP/1.1,
//! TLS trusting the host's roots (`tls.rs`) or, for the component and host a `[[client_tls]]`
//! entry names, that entry's (`client_tls.rs`), at most [`MAX_IDLE_PER_ORIGIN`] idle connections
//! per origin, closed after [`IDLE_TIMEOUT`]. A destination whose every address the runtime
//! configuration blocks (`block_networks.rs`) fails with `destination-ip-prohibited`, its name
//! resolved once, by the connector that then connects to what remains.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;
use rustls::ClientConfig;
use tracing::Instrument;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi_http::p2::bindings::LinkOptions;
use wasmtime_wasi_http::p2::bindings::http::{outgoing_handler, types};
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiBody, WasiHttp, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
};

use crate::factors::allowed_hosts::default_port;
use crate::factors::blocked_networks::{BlockedNetworks, Prohibited};
use crate::factors::client_tls::ClientTls;
use crate::factors::component::ComponentConfig;
use crate::factors::spin_costs::InstanceMeter;
use crate::factors::tls::TlsTrust;
use crate::telemetry::{self, client_span};

/// Idle connections kept per origin.
pub const MAX_IDLE_PER_ORIGIN: usize = 64;
/// An idle connection is closed after this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Default connect and first-byte timeouts, when the guest sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Outbound HTTP's part of the runtime configuration.
#[derive(Clone, Default)]
pub struct RuntimeConfig {
    /// The roots outbound HTTPS trusts.
    pub tls: TlsTrust,
    /// Other roots for some components' requests to some hosts (`[[client_tls]]`).
    pub client_tls: ClientTls,
    /// Where no request may go.
    pub blocked: BlockedNetworks,
    /// Addresses given for names, in place of looking them up (`seckill-host up --resolve`).
    pub resolve: NameOverrides,
}

/// Addresses given for names, as curl's `--resolve` gives them: the local host's stand-in for a
/// DNS record, so that a test's server on loopback can have the public name it is registered by.
/// The blocked networks apply to them as to any address.
pub type NameOverrides = Arc<HashMap<String, IpAddr>>;

type PooledClient = Client<HttpsConnector<HttpConnector<Resolver>>, WasiBody>;

/// The app-wide outbound HTTP clients: kept-alive connections, shared across instances.
#[derive(Clone)]
pub struct HttpPool {
    /// With the default roots.
    client: PooledClient,
    /// One per `[[client_tls]]` entry, in its order.
    client_tls: Vec<PooledClient>,
    /// Which of those a component uses for a host.
    which: ClientTls,
    blocked: BlockedNetworks,
}

/// Resolves a destination's name, leaving out the blocked addresses; fails when it leaves none.
#[derive(Clone)]
struct Resolver {
    blocked: BlockedNetworks,
    overrides: NameOverrides,
}

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let (blocked, overrides) = (self.blocked.clone(), self.overrides.clone());
        Box::pin(async move {
            let all: Vec<SocketAddr> = match overrides.get(name.as_str()) {
                Some(ip) => vec![SocketAddr::new(*ip, 0)],
                None => tokio::net::lookup_host((name.as_str(), 0)).await?.collect(),
            };
            let allowed: Vec<SocketAddr> = all
                .iter()
                .copied()
                .filter(|a| !blocked.is_blocked(a.ip()))
                .collect();
            if allowed.is_empty() && !all.is_empty() {
                tracing::error!(
                    name = name.as_str(),
                    "every address of the destination is blocked by the runtime config"
                );
                return Err(std::io::Error::other(Prohibited));
            }
            Ok(allowed.into_iter())
        })
    }
}

impl HttpPool {
    /// A pool whose TLS connections verify against `config`'s roots (or a `[[client_tls]]`
    /// entry's) and that reaches no blocked network.
    pub fn new(config: &RuntimeConfig) -> Self {
        let client = |tls: &ClientConfig| {
            let resolver = Resolver {
                blocked: config.blocked.clone(),
                overrides: config.resolve.clone(),
            };
            let mut http = HttpConnector::new_with_resolver(resolver);
            http.enforce_http(false);
            http.set_nodelay(true);
            http.set_connect_timeout(Some(DEFAULT_TIMEOUT));
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls.clone())
                .https_or_http()
                .enable_http1()
                .wrap_connector(http);
            Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(MAX_IDLE_PER_ORIGIN)
                .pool_idle_timeout(IDLE_TIMEOUT)
                .build(connector)
        };
        HttpPool {
            client: client(&config.tls.client_config()),
            client_tls: config
                .client_tls
                .configs()
                .iter()
                .map(|c| client(c))
                .collect(),
            which: config.client_tls.clone(),
            blocked: config.blocked.clone(),
        }
    }

    /// The client `component` sends a request to `uri` with.
    fn client_for(&self, component: &str, uri: &http::Uri) -> &PooledClient {
        let host = uri.host().unwrap_or("");
        self.which
            .index(component, host)
            .and_then(|i| self.client_tls.get(i))
            .unwrap_or(&self.client)
    }

    /// Whether `uri` names a blocked address itself (a name is checked once resolved).
    fn names_a_blocked_address(&self, uri: &http::Uri) -> bool {
        let host = uri.host().unwrap_or("");
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        literal
            .parse::<IpAddr>()
            .is_ok_and(|ip| self.blocked.is_blocked(ip))
    }

    /// Sends `component`'s `request` over a pooled connection; the response body streams.
    async fn send(
        &self,
        component: &str,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<http::Response<WasiBody>, Error> {
        let first_byte = options
            .and_then(|o| o.first_byte_timeout)
            .unwrap_or(DEFAULT_TIMEOUT);
        let client = self.client_for(component, request.uri());
        let response = tokio::time::timeout(first_byte, client.request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)?
            .map_err(client_error)?;
        Ok(response.map(|body| body.map_err(Error::from).boxed_unsync()))
    }
}

impl Default for HttpPool {
    fn default() -> Self {
        Self::new(&RuntimeConfig::default())
    }
}

/// What a failed request was, in `wasi:http`'s terms.
fn client_error(e: hyper_util::client::legacy::Error) -> Error {
    use std::error::Error as _;
    let mut source = e.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if io.get_ref().is_some_and(|inner| inner.is::<Prohibited>()) {
                return Error::DestinationIpProhibited;
            }
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused,
                std::io::ErrorKind::TimedOut => Error::ConnectionTimeout,
                _ if e.is_connect() => {
                    Error::Connect(std::io::Error::new(io.kind(), e.to_string()))
                }
                _ => Error::ConnectionTerminated,
            };
        }
        source = cause.source();
    }
    if e.is_connect() {
        Error::ConnectionRefused
    } else {
        Error::ConnectionTerminated
    }
}

/// One instance's `wasi:http` state: its context and the hooks that send its requests.
pub struct InstanceState {
    ctx: WasiHttpCtx,
    hooks: OutboundHttp,
}

impl InstanceState {
    /// The state of an instance of `component`, sending through `pool`, counting Spin's costs
    /// on `meter`.
    pub fn new(component: Arc<ComponentConfig>, pool: HttpPool, meter: Arc<InstanceMeter>) -> Self {
        InstanceState {
            ctx: WasiHttpCtx::new(),
            hooks: OutboundHttp::new(component, pool, meter),
        }
    }

    /// How long this instance has waited on its outbound requests' answers, in all.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.hooks.waited.load(Ordering::Relaxed))
    }

    /// The view wasmtime-wasi-http works on: this state and the store's resource table, which
    /// `wasi:http` shares with WASI (bodies are `wasi:io` streams).
    pub fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView {
            ctx: &mut self.ctx,
            table,
            hooks: &mut self.hooks,
        }
    }
}

/// Adds `wasi:http/types` and `wasi:http/outgoing-handler` to `linker`, served by the view `get`
/// projects to (wasmtime-wasi-http's `add_only_http_to_linker_async`, with a projection instead
/// of its `WasiHttpView` bound).
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> WasiHttpCtxView<'_>,
) -> wasmtime::Result<()> {
    let options = LinkOptions::default();
    outgoing_handler::add_to_linker::<T, WasiHttp>(linker, get)?;
    types::add_to_linker::<T, WasiHttp>(linker, &options.into(), get)?;
    Ok(())
}

/// The outbound HTTP policy of one instance, and the app's pool.
pub struct OutboundHttp {
    component: Arc<ComponentConfig>,
    pool: HttpPool,
    /// What Spin would pay for this instance.
    meter: Arc<InstanceMeter>,
    /// Nanoseconds spent waiting on answers: time in the instance that does not hold a core,
    /// left out of what the adaptive limit measures (`crate::runtime::limit`).
    waited: Arc<AtomicU64>,
}

impl OutboundHttp {
    /// The policy of `component`, sending through `pool`, counting Spin's costs on `meter`.
    pub fn new(component: Arc<ComponentConfig>, pool: HttpPool, meter: Arc<InstanceMeter>) -> Self {
        OutboundHttp {
            component,
            pool,
            meter,
            waited: Arc::default(),
        }
    }

    fn allowed(&self, uri: &http::Uri) -> bool {
        let scheme = uri.scheme_str().unwrap_or("https");
        let Some(host) = uri.host() else { return false };
        let Some(port) = uri.port_u16().or_else(|| default_port(scheme)) else {
            return false;
        };
        self.component.allowed_hosts.allows(scheme, host, port)
    }
}

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl WasiHttpHooks for OutboundHttp {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> ResponseFuture {
        // Spin checks every request (`factor-outbound-http/src/wasi.rs`, `prepare_request`).
        self.meter.outbound_open();
        if !self.allowed(request.uri()) {
            tracing::warn!(component = %self.component.id, uri = %request.uri(), "outbound HTTP denied by allowed_outbound_hosts");
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        _ = fut;
        if self.pool.names_a_blocked_address(request.uri()) {
            tracing::error!(component = %self.component.id, uri = %request.uri(), "destination blocked by the runtime config");
            return Box::new(async { Err(Error::DestinationIpProhibited) });
        }
        let (pool, waited, component) = (
            self.pool.clone(),
            self.waited.clone(),
            self.component.clone(),
        );
        let span = client_span!(
            "spin_outbound_http.send_request",
            "http.request.method" = request.method().as_str(),
            request.method().as_str()
        );
        let mut request = request;
        {
            let _in = span.enter();
            telemetry::inject(request.headers_mut());
        }
        Box::new(
            async move {
                let sent = Instant::now();
                let response = pool.send(&component.id, request, options).await;
                let nanos = sent.elapsed().as_nanos().try_into().unwrap_or(u64::MAX);
                waited.fetch_add(nanos, Ordering::Relaxed);
                let response = response?;
                // The pool drives its connections itself: nothing for the caller to await.
                let io = async { Ok(()) };
                Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
            }
            .instrument(span),
        )
    }
}
