//! The real host serving an app from a manifest on a free loopback port, and the calls the
//! tests make to it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use seckill_host::factors::tls::TlsTrust;
use seckill_host::manifest::expressions::Providers;
use seckill_host::runtime::overload::QueueControl;
use seckill_host::trigger::http::HttpTrigger;
use seckill_host::trigger::metrics::Metrics;
use seckill_host::trigger::serve::ServeOptions;
use seckill_host::{App, ConnectionMode, Options};
use serde_json::Value;

use crate::auth::ADMIN_TOKEN;
use crate::machine::repo_root;
use crate::manifests::{fold_settings, is_product};
use crate::record::{Exchange, record_exchange};
use crate::rest_facade::RestFacade;
use crate::tls::TestCa;
use crate::transport::{over_rest, rest_transport};
use crate::walk::{Buyer, Client, Reply, Request};

/// Guest instances a test app may have alive at once: fewer than the sale tests' 512 buyers in
/// flight, so a spike queues for instances as it would on a busy host.
const INSTANCES: u32 = 200;

/// The host serving an app on a free loopback port.
pub struct TestApp {
    /// The loaded app (for measurements and cron runs).
    pub app: Arc<App>,
    /// The host's metrics of the requests served, as `--metrics-listen` serves them.
    pub metrics: Arc<Metrics>,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// A client with keep-alive.
    pub http: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
    /// The REST facades in front of the Redis nodes (`SECKILL_TRANSPORT=rest`), with the CA the
    /// host trusts for them; empty otherwise.
    pub facades: Vec<RestFacade>,
    facade_ca: Option<TestCa>,
    /// Whether this is a product manifest, whose exchanges `api/openapi.yaml` describes (the
    /// test manifests' components are not part of the API).
    records: bool,
    /// The shard count of each event [`TestApp::open_event`] created: buyers send it
    /// (`?shards=`), as the storefront does, so each request goes straight home.
    shards: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// The Redis nodes as `redis_url` lists them to the host (REST facades included), and the
    /// `redis://` address of the `redis-server` behind each: where a shard's keys are.
    placement: Vec<String>,
    servers: Vec<String>,
    /// The extra nodes of `SECKILL_REDIS_NODES` (kept alive as long as the app).
    _extra_nodes: Vec<crate::redis_server::RedisServer>,
}

/// How to start a [`TestApp`]: `TestApp::builder(manifest)`, any of the settings, then
/// [`start`](TestAppBuilder::start). Unset, a setting is what [`TestApp::start`] uses.
#[must_use = "nothing starts until `.start().await`"]
pub struct TestAppBuilder<'a> {
    manifest: &'a str,
    vars: Vec<(&'a str, String)>,
    mode: ConnectionMode,
    trust: Option<TlsTrust>,
    rest: bool,
    max_instances: u32,
    queue_control: QueueControl,
    runtime_config: Option<std::path::PathBuf>,
    resolve: Vec<(String, std::net::IpAddr)>,
}

/// The proof of work the test events ask by default: none, so a test may ask for admission
/// without solving; the gate's own tests set a difficulty.
pub const TEST_POW_DIFFICULTY: u32 = 0;

/// How long a test app's requests may wait for an instance slot by default: far beyond any
/// test's queue, so that a test's outcome never depends on the machine's speed. Shedding has
/// tests of its own ([`TestAppBuilder::instance_wait`], [`TestAppBuilder::queue_control`]).
const TEST_INSTANCE_WAIT: Duration = Duration::from_secs(60);

impl<'a> TestAppBuilder<'a> {
    /// The `SPIN_VARIABLE_*` values (default: none).
    pub fn vars(mut self, vars: &[(&'a str, String)]) -> Self {
        self.vars = vars.to_vec();
        self
    }

    /// The Redis connection mode (default: pooled).
    pub fn mode(mut self, mode: ConnectionMode) -> Self {
        self.mode = mode;
        self
    }

    /// Trusts `trust` for outbound TLS (default: the system's roots). Over REST, a product
    /// manifest trusts its facades' CA instead.
    pub fn trusting(mut self, trust: TlsTrust) -> Self {
        self.trust = Some(trust);
        self
    }

    /// Reaches every Redis node of a product manifest through a REST facade, whatever
    /// `SECKILL_TRANSPORT` says.
    pub fn over_rest(mut self) -> Self {
        self.rest = true;
        self
    }

    /// At most `max_instances` guest instances alive at once (default: 200).
    pub fn max_instances(mut self, max_instances: u32) -> Self {
        self.max_instances = max_instances;
        self
    }

    /// A request that finds no instance slot free for this long is shed: `503` with
    /// `Retry-After` (default: a minute).
    pub fn instance_wait(mut self, wait: Duration) -> Self {
        self.queue_control = QueueControl::fixed(wait);
        self
    }

    /// The host's queue control, as it runs in production ([`QueueControl::DEFAULT`]) or
    /// otherwise (default: [`Self::instance_wait`] of a minute).
    pub fn queue_control(mut self, control: QueueControl) -> Self {
        self.queue_control = control;
        self
    }

    /// Spin's runtime configuration file at `path`, as `spin up --runtime-config-file` reads
    /// it (default: none).
    pub fn runtime_config_file(mut self, path: &std::path::Path) -> Self {
        self.runtime_config = Some(path.to_owned());
        self
    }

    /// Outbound HTTP to `name` connects to `address` (the host's `--resolve`; default: none).
    pub fn resolve(mut self, name: &str, address: std::net::IpAddr) -> Self {
        self.resolve.push((name.to_owned(), address));
        self
    }

    /// Loads the manifest (relative to the repo root) and serves it.
    pub async fn start(self) -> Result<TestApp> {
        let TestAppBuilder {
            manifest,
            mut vars,
            mode,
            trust,
            rest,
            max_instances,
            queue_control,
            runtime_config,
            resolve,
        } = self;
        fold_settings(manifest, &mut vars)?;
        let extra_nodes = match is_product(manifest) {
            true => spread_over_env_nodes(&mut vars)?,
            false => Vec::new(),
        };
        let servers = redis_urls(&vars);
        // Over REST, a product manifest's Redis nodes are reached through facades; the test
        // components keep Spin's Redis interface.
        let (facades, facade_ca) = match rest && is_product(manifest) {
            true => {
                let (facades, ca) = over_rest(&mut vars).await?;
                (facades, Some(ca))
            }
            false => (Vec::new(), None),
        };
        let placement = redis_urls(&vars);
        let tls = match &facade_ca {
            Some(ca) => ca.trust()?,
            None => trust.unwrap_or_else(TlsTrust::system),
        };
        // The host's warnings and errors show up in a failing test's output.
        let _ = tracing_subscriber::fmt()
            .with_env_filter("warn")
            .with_writer(std::io::stderr)
            .try_init();
        let mut providers = Providers::default();
        for (name, value) in &vars {
            providers.overrides.insert(
                format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()),
                value.clone(),
            );
        }
        let options = Options {
            connection_mode: mode,
            providers,
            max_instances: Some(max_instances),
            queue_control,
            tls,
            // Every test starts a host: compile each component once per build, not per test.
            compile_cache: Some(repo_root().join("target/host-compile-cache")),
            resolve: Arc::new(resolve.into_iter().collect()),
            ..Options::default()
        };
        let options = match &runtime_config {
            Some(path) => options.with_runtime_config_file(path)?,
            None => options,
        };
        let path = repo_root().join(manifest);
        let app = Arc::new(tokio::task::spawn_blocking(move || App::load(&path, options)).await??);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr: SocketAddr = listener.local_addr()?;
        let trigger: &HttpTrigger = (*app).as_ref();
        let metrics = Arc::new(Metrics::new(trigger.runtime().clone()));
        let server = tokio::spawn({
            let app = app.clone();
            let options = ServeOptions {
                metrics: Some(metrics.clone()),
                ..ServeOptions::default()
            };
            async move {
                let forever = tokio_util::sync::CancellationToken::new();
                let _ = seckill_host::trigger::serve::serve(app, listener, options, forever).await;
            }
        });
        Ok(TestApp {
            metrics,
            shards: Default::default(),
            placement,
            servers,
            _extra_nodes: extra_nodes,
            app,
            base_url: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()?,
            server,
            records: is_product(manifest),
            facades,
            facade_ca,
        })
    }
}

impl TestApp {
    /// A builder for `manifest` (relative to the repo root), for the settings the `start_*`
    /// shorthands do not combine.
    pub fn builder(manifest: &str) -> TestAppBuilder<'_> {
        TestAppBuilder {
            manifest,
            vars: Vec::new(),
            mode: ConnectionMode::Pooled,
            trust: None,
            rest: rest_transport(),
            max_instances: INSTANCES,
            queue_control: QueueControl::fixed(TEST_INSTANCE_WAIT),
            runtime_config: None,
            resolve: Vec::new(),
        }
    }

    /// Loads `manifest` (relative to the repo root) with `vars` as `SPIN_VARIABLE_*` values.
    pub async fn start(manifest: &str, vars: &[(&str, String)]) -> Result<Self> {
        Self::builder(manifest).vars(vars).start().await
    }

    /// Like [`TestApp::start`], choosing the Redis connection mode.
    pub async fn start_with(
        manifest: &str,
        vars: &[(&str, String)],
        mode: ConnectionMode,
    ) -> Result<Self> {
        Self::builder(manifest).vars(vars).mode(mode).start().await
    }

    /// Like [`TestApp::start`], with at most `max_instances` guest instances alive at once.
    pub async fn start_sized(
        manifest: &str,
        vars: &[(&str, String)],
        max_instances: u32,
    ) -> Result<Self> {
        Self::builder(manifest)
            .vars(vars)
            .max_instances(max_instances)
            .start()
            .await
    }

    /// Like [`TestApp::start`], with every Redis node reached through a REST facade whatever
    /// `SECKILL_TRANSPORT` says.
    pub async fn start_rest(manifest: &str, vars: &[(&str, String)]) -> Result<Self> {
        Self::builder(manifest).vars(vars).over_rest().start().await
    }

    /// Like [`TestApp::start_with`], trusting `trust` for outbound TLS.
    pub async fn start_trusting(
        manifest: &str,
        vars: &[(&str, String)],
        mode: ConnectionMode,
        trust: TlsTrust,
    ) -> Result<Self> {
        Self::builder(manifest)
            .vars(vars)
            .mode(mode)
            .trusting(trust)
            .start()
            .await
    }

    /// Sends `method path` with an optional bearer token and JSON body; returns status and the
    /// body as JSON. A body that is not JSON comes back as a JSON string holding its text, so
    /// that an assertion's message shows what the server sent.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        self.call_with_headers(method, path, bearer, body, &[])
            .await
    }

    /// [`TestApp::call`] with extra request headers (`X-Forwarded-For`, …).
    pub async fn call_with_headers(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base_url));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let exchanged = self.exchange(req, method.as_str(), path, body).await?;
        Ok((exchanged.status, body_json(&exchanged.body)))
    }

    /// The trust a host needs for this app's REST facades (their CA), when it has any.
    pub fn facade_trust(&self) -> Option<TlsTrust> {
        self.facade_ca.as_ref().and_then(|ca| ca.trust().ok())
    }

    /// An operator call (`/admin/...`) with the test admin token.
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        self.call(method, path, Some(ADMIN_TOKEN), body).await
    }

    /// Creates and warms up an event; `config` overrides the defaults of an open 1-hour sale.
    pub async fn open_event(&self, id: &str, config: Value) -> Result<()> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as u64;
        let mut body = serde_json::json!({
            "sku": format!("sku-{id}"), "unit_amount": 1999, "currency": "eur",
            "stock": 10, "shards": 4,
            "start_ms": now - 1_000, "end_ms": now + 3_600_000, "user_rate": 0,
            // The buyers all come from 127.0.0.1: no per-address limit unless a test asks.
            "pow_difficulty": TEST_POW_DIFFICULTY, "admission_addr_rate": 0,
        });
        for (k, v) in config.as_object().cloned().unwrap_or_default() {
            body[k] = v;
        }
        let (status, resp) = self
            .admin(
                reqwest::Method::PUT,
                &format!("/admin/events/{id}"),
                Some(&body),
            )
            .await?;
        if let Some(n) = body["shards"].as_u64() {
            self.shards.lock().unwrap().insert(id.to_owned(), n);
        }
        anyhow::ensure!(
            status == 201 || status == 200,
            "create {id}: {status} {resp}"
        );
        let (status, resp) = self
            .admin(
                reqwest::Method::POST,
                &format!("/admin/events/{id}/warmup"),
                None,
            )
            .await?;
        anyhow::ensure!(status == 200, "warmup {id}: {status} {resp}");
        Ok(())
    }

    /// A client of the `redis-server` holding shard `shard` of `event` (where the tests look at
    /// its keys), whichever of the app's nodes that is.
    pub fn shard_client(&self, event: &str, shard: u32) -> redis::Client {
        let event = seckill_domain::event::EventId::parse(event).expect("a valid event id");
        let urls: Vec<&str> = self.placement.iter().map(String::as_str).collect();
        let i = seckill_domain::nodes::index_for_shard(&event, shard, &urls);
        redis::Client::open(self.servers[i].as_str()).expect("a redis:// url")
    }

    /// `/api/events/{event}/{route}`, with `?shards=` when this app created the event (as the
    /// storefront sends it).
    pub fn sale_path(&self, event: &str, route: &str) -> String {
        match self.shards.lock().unwrap().get(event) {
            Some(n) => format!("/api/events/{event}/{route}?shards={n}"),
            None => format!("/api/events/{event}/{route}"),
        }
    }

    /// The operator's view of an event.
    pub async fn status(&self, id: &str) -> Result<Value> {
        let (status, resp) = self
            .admin(reqwest::Method::GET, &format!("/admin/events/{id}"), None)
            .await?;
        anyhow::ensure!(status == 200, "status {id}: {status} {resp}");
        Ok(resp)
    }

    /// `user` buying at `event`, with the event's shard count as the storefront sends it when
    /// this app created the event.
    pub fn buyer(&self, event: &str, user: &str) -> Buyer {
        let shards = self.shards.lock().unwrap().get(event).map(|&n| n as u32);
        Buyer::new(event, user, shards)
    }

    /// A proof-of-work challenge for `user`, solved as a client solves it: the challenge's
    /// JSON body (`challenge`, `nonce`) for the admission route, or the refusal.
    pub async fn solved_challenge(
        &self,
        event: &str,
        user: &str,
    ) -> Result<Result<Value, (u16, Value)>> {
        let solved = self.buyer(event, user).solved_challenge(self).await?;
        Ok(solved.map_err(Into::into))
    }

    /// Admission as the storefront asks it ([`Buyer::admission_reply`]).
    pub async fn admission(&self, event: &str, user: &str) -> Result<(u16, Value)> {
        let reply = self.buyer(event, user).admission_reply(self).await?;
        Ok(reply.into())
    }

    /// A buyer's whole way in: admission, then precheck. Returns the purchase token, or the
    /// failing step's status and body.
    pub async fn admit_and_precheck(
        &self,
        event: &str,
        user: &str,
    ) -> Result<Result<String, (u16, Value)>> {
        let token = self.buyer(event, user).admit_and_precheck(self).await?;
        Ok(token.map_err(Into::into))
    }

    /// The payment provider, delivering its webhooks to this app.
    pub fn provider(&self) -> crate::provider::Provider {
        crate::provider::Provider::new(
            self.http.clone(),
            format!("{}/api/payments/webhook", self.base_url),
            crate::provider::PAYMENT_WEBHOOK_SECRET,
        )
    }

    /// `user` pays `order` of `event` as a buyer does ([`Buyer::pay`]).
    pub async fn pay(&self, event: &str, user: &str, order: &str) -> Result<(u16, Value)> {
        let buyer = self.buyer(event, user);
        Ok(buyer.pay(self, &self.provider(), order).await?.into())
    }

    /// A buy with a purchase token.
    pub async fn buy(&self, event: &str, user: &str, purchase_token: &str) -> Result<(u16, Value)> {
        let request = self.buyer(event, user).buy_request(purchase_token);
        Ok(self.send(request).await?.into())
    }

    /// A buy sent again while it is answered 503 (its tail found no unit yet while other
    /// shards may hold some), with the same purchase token, as a client does; at most 64 times.
    pub async fn buy_until_answered(
        &self,
        event: &str,
        user: &str,
        purchase_token: &str,
    ) -> Result<(u16, Value)> {
        for _ in 0..64 {
            let (status, body) = self.buy(event, user, purchase_token).await?;
            if status != 503 {
                return Ok((status, body));
            }
        }
        anyhow::bail!("{user}: buy still 503 after 64 tries")
    }

    /// `GET path`, returning status and body text.
    pub async fn get(&self, path: &str) -> Result<(u16, String)> {
        let req = self.http.get(format!("{}{path}", self.base_url));
        let exchanged = self.exchange(req, "GET", path, None).await?;
        Ok((
            exchanged.status,
            String::from_utf8_lossy(&exchanged.body).into_owned(),
        ))
    }

    /// `GET path` whose body must be JSON.
    pub async fn get_json(&self, path: &str) -> Result<(u16, Value)> {
        let (status, body) = self.get(path).await?;
        let json =
            serde_json::from_str(&body).with_context(|| format!("GET {path}: not JSON: {body}"))?;
        Ok((status, json))
    }

    /// Sends `req` and returns the status and the body, recording the exchange for the
    /// OpenAPI check when this is a product manifest.
    async fn exchange(
        &self,
        req: reqwest::RequestBuilder,
        method: &str,
        path: &str,
        request: Option<&Value>,
    ) -> Result<Exchanged> {
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header(reqwest::header::CONTENT_TYPE);
        let allow = header(reqwest::header::ALLOW);
        let retry_after_s = header(reqwest::header::RETRY_AFTER).and_then(|v| v.parse().ok());
        let bytes = resp.bytes().await?;
        if self.records {
            record_exchange(&Exchange {
                method,
                path,
                request,
                status,
                content_type: content_type.as_deref(),
                allow: allow.as_deref(),
                response: &String::from_utf8_lossy(&bytes),
            });
        }
        Ok(Exchanged {
            status,
            retry_after_s,
            body: bytes,
        })
    }
}

/// What came back for a request.
struct Exchanged {
    status: u16,
    retry_after_s: Option<u64>,
    body: bytes::Bytes,
}

/// The tests' buyers walk over the app's client, recorded as any call is.
impl Client for TestApp {
    async fn send(&self, request: Request) -> Result<Reply> {
        let mut req = self
            .http
            .request(
                request.method.clone(),
                format!("{}{}", self.base_url, request.path),
            )
            .bearer_auth(&request.bearer);
        if let Some(body) = &request.body {
            req = req.json(body);
        }
        let method = request.method.as_str();
        let exchanged = self
            .exchange(req, method, &request.path, request.body.as_ref())
            .await?;
        Ok(Reply {
            status: exchanged.status,
            body: body_json(&exchanged.body),
            retry_after_s: exchanged.retry_after_s,
        })
    }
}

/// The nodes `redis_url` lists in `vars`.
fn redis_urls(vars: &[(&str, String)]) -> Vec<String> {
    vars.iter()
        .filter(|(k, _)| *k == "redis_url")
        .flat_map(|(_, v)| v.split(',').map(|u| u.trim().to_owned()))
        .collect()
}

/// `SECKILL_REDIS_NODES=N` (one of the suite's [`switches`](crate::suite_runs::switches)): a product
/// manifest's one Redis node becomes N — the test's own first, then N − 1 started here — so
/// every event's shards spread over N real `redis-server`s. Returns the started nodes.
fn spread_over_env_nodes(
    vars: &mut [(&str, String)],
) -> Result<Vec<crate::redis_server::RedisServer>> {
    let n = crate::suite_runs::switches().redis_nodes;
    let own = redis_urls(vars);
    if n <= 1 || own.len() != 1 {
        return Ok(Vec::new());
    }
    let extra: Vec<crate::redis_server::RedisServer> = (1..n)
        .map(|_| crate::redis_server::RedisServer::start())
        .collect::<Result<_>>()?;
    let all: Vec<String> = own
        .into_iter()
        .chain(extra.iter().map(|r| r.url()))
        .collect();
    for (k, v) in vars.iter_mut() {
        match *k {
            "redis_url" => *v = all.join(","),
            "redis_origin" => *v = "redis://127.0.0.1:*".into(),
            _ => {}
        }
    }
    Ok(extra)
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A response body as JSON, or as a JSON string of its text when it is not JSON.
fn body_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::body_json;
    use serde_json::json;

    #[test]
    fn a_json_body_is_parsed() {
        assert_eq!(
            body_json(br#"{"error":{"code":"sold_out"}}"#),
            json!({ "error": { "code": "sold_out" } })
        );
    }

    #[test]
    fn a_body_that_is_not_json_comes_back_as_its_text() {
        assert_eq!(body_json(b"Not Found"), json!("Not Found"));
        assert_eq!(body_json(b""), json!(""));
        // Lossy, as `get` reads text: an assertion still shows the rest.
        assert_eq!(body_json(b"bad \xff byte"), json!("bad \u{fffd} byte"));
    }
}
