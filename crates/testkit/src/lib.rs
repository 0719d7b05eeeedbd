//! The test harness: real `redis-server` and real PostgreSQL, each started on a free loopback
//! port in a temp dir and stopped when dropped, and the real host serving real `.wasm` files.
//! No mocks: what passes here runs the same way under `scripts/up.sh` and, for the guests, Spin.

pub mod rest_facade;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use seckill_host::variables::Providers;
use seckill_host::{App, ConnectionMode, Options};

/// The repository root (where `spin.toml` lives).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit is two levels down")
        .to_owned()
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind :0")
}

fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<()> {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > timeout {
            bail!("{what} did not become ready within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Finds a server binary on PATH or in the usual Debian places.
fn find_binary(name: &str) -> Result<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(name)).collect())
        .unwrap_or_default();
    if let Ok(dirs) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = dirs
            .flatten()
            .map(|d| d.path().join("bin").join(name))
            .collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev());
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .with_context(|| format!("`{name}` not found: run scripts/setup.sh"))
}

/// A `redis-server` of this test alone.
pub struct RedisServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its data directory.
    pub dir: tempfile::TempDir,
    extra: Vec<String>,
    /// Its TLS port on 127.0.0.1, when started with [`RedisServer::start_tls`].
    pub tls_port: Option<u16>,
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> Result<Self> {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(args: &[&str]) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let extra: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (child, port) = spawn_redis(dir.path(), free_port(), &extra)?;
        Ok(RedisServer {
            child,
            port,
            dir,
            extra,
            tls_port: None,
        })
    }

    /// A server that also listens with TLS (certificate from `ca`, no client certificates),
    /// as managed Redis does. The plain port stays open for the tests' own assertions.
    pub fn start_tls(ca: &TestCa) -> Result<Self> {
        let tls_port = free_port();
        let (cert, key, ca_file) = (
            ca.path("server.pem"),
            ca.path("server.key"),
            ca.path("ca.pem"),
        );
        let mut server = Self::start_with(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca_file,
            "--tls-auth-clients",
            "no",
        ])?;
        server.tls_port = Some(tls_port);
        Ok(server)
    }

    /// `rediss://<name>:<tls port>` (`name` as the certificate must match it).
    pub fn tls_url(&self, name: &str) -> String {
        format!(
            "rediss://{name}:{}",
            self.tls_port.expect("started with TLS")
        )
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A native client, for assertions.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid url")
    }

    /// The EVALSHA and EVAL calls since the last take (or the server's start), from `INFO
    /// commandstats`; the counts start again from zero (`CONFIG RESETSTAT`).
    pub fn take_script_calls(&self) -> Result<(u64, u64)> {
        let mut conn = self.client().get_connection()?;
        let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn)?;
        let calls = |name: &str| {
            info.lines()
                .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
                .and_then(|l| l.split("calls=").nth(1)?.split(',').next()?.parse().ok())
                .unwrap_or(0)
        };
        redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut conn)?;
        Ok((calls("evalsha"), calls("eval")))
    }

    /// Starts `redis-cli MONITOR`: every command clients send from now on, until [`Monitor::stop`].
    pub fn monitor(&self) -> Result<Monitor> {
        let path = self.dir.path().join(format!("monitor-{}.log", free_port()));
        let mut child = Command::new(find_binary("redis-cli")?)
            .args(["-p", &self.port.to_string(), "monitor"])
            .stdout(std::fs::File::create(&path)?)
            .spawn()?;
        // MONITOR answers OK once it is listening.
        let ready = wait_for("redis-cli monitor", Duration::from_secs(5), || {
            std::fs::read_to_string(&path).is_ok_and(|s| s.starts_with("OK"))
        });
        if let Err(e) = ready {
            let _ = child.kill();
            return Err(e);
        }
        Ok(Monitor { child, path })
    }

    /// Kills the server (SIGKILL: as a crash) and starts it again on the same port and data dir.
    pub fn crash_and_restart(&mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        let (child, _) = spawn_redis(self.dir.path(), self.port, &self.extra)?;
        self.child = child;
        Ok(())
    }
}

fn spawn_redis(dir: &Path, port: u16, extra: &[String]) -> Result<(Child, u16)> {
    let child = Command::new(find_binary("redis-server")?)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .context("starting redis-server")?;
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    wait_for("redis-server", Duration::from_secs(10), || {
        client
            .get_connection()
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    })?;
    Ok((child, port))
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `redis-cli MONITOR`.
pub struct Monitor {
    child: Child,
    path: PathBuf,
}

impl Monitor {
    /// Stops monitoring and returns the commands that clients sent (commands that scripts ran
    /// inside Redis, shown as `[0 lua]`, are left out).
    pub fn stop(mut self) -> Result<Vec<String>> {
        std::thread::sleep(Duration::from_millis(200));
        let _ = self.child.kill();
        let _ = self.child.wait();
        Ok(std::fs::read_to_string(&self.path)?
            .lines()
            .skip(1)
            .filter(|l| !l.contains(" lua] ") && !l.trim().is_empty())
            .map(str::to_owned)
            .collect())
    }
}

/// A PostgreSQL cluster of this test alone (`initdb` in a temp dir, trust auth, no fsync).
pub struct PgServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
}

/// Uid/gid to run PostgreSQL as: it refuses to run as root.
fn postgres_user() -> Option<(u32, u32)> {
    if current_uid() != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&"postgres")).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

fn current_uid() -> u32 {
    // Read from /proc: no unsafe libc call for one number.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn as_postgres(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = postgres_user() {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

impl PgServer {
    /// Runs `initdb` and starts the server.
    pub fn start() -> Result<Self> {
        Self::launch(None)
    }

    /// A server with `ssl = on` and a certificate from `ca` (plain connections still work, for
    /// the tests' own assertions; `pg_stat_ssl` tells which the app used).
    pub fn start_tls(ca: &TestCa) -> Result<Self> {
        Self::launch(Some(ca))
    }

    fn launch(tls: Option<&TestCa>) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        if let Some((uid, gid)) = postgres_user() {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let data = dir.path().join("data");
        let out = as_postgres(&mut Command::new(find_binary("initdb")?))
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale",
                "C",
                "-D",
            ])
            .arg(&data)
            .output()
            .context("running initdb")?;
        if !out.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        if let Some(ca) = tls {
            use std::io::Write as _;
            use std::os::unix::fs::PermissionsExt as _;
            for (from, to) in [("server.pem", "server.crt"), ("server.key", "server.key")] {
                let target = data.join(to);
                std::fs::copy(ca.path(from), &target)?;
                // Postgres refuses a key others can read, and runs as `postgres`.
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))?;
                if let Some((uid, gid)) = postgres_user() {
                    std::os::unix::fs::chown(&target, Some(uid), Some(gid))?;
                }
            }
            let mut conf = std::fs::OpenOptions::new()
                .append(true)
                .open(data.join("postgresql.conf"))?;
            writeln!(
                conf,
                "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'"
            )?;
        }
        let port = free_port();
        let child = spawn_postgres(&data, port, dir.path())?;
        let server = PgServer { child, port, dir };
        server.wait_ready()?;
        Ok(server)
    }

    /// Waits until the server accepts connections.
    fn wait_ready(&self) -> Result<()> {
        let pg_isready = find_binary("pg_isready")?;
        let port = self.port;
        wait_for("postgres", Duration::from_secs(30), || {
            Command::new(&pg_isready)
                .args([
                    "-q",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-U",
                    "postgres",
                ])
                .status()
                .is_ok_and(|s| s.success())
        })
    }

    /// Stops the server (immediate shutdown, like a crash) and starts it again on the same
    /// port and data.
    pub fn crash_and_restart(&mut self) -> Result<()> {
        self.stop();
        self.restart()
    }

    /// Stops the server (immediate shutdown).
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-QUIT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }

    /// Starts a stopped server again, same port and data.
    pub fn restart(&mut self) -> Result<()> {
        self.child = spawn_postgres(&self.dir.path().join("data"), self.port, self.dir.path())?;
        self.wait_ready()
    }

    /// Applies `migrations/*.sql` with `scripts/migrate.sh`, the same runner the local stack uses.
    pub async fn migrate(&self) -> Result<()> {
        let url = self.url();
        let status = tokio::task::spawn_blocking(move || {
            Command::new("bash")
                .arg(repo_root().join("scripts/migrate.sh"))
                .arg(url)
                .stdout(Stdio::null())
                .status()
        })
        .await??;
        anyhow::ensure!(status.success(), "scripts/migrate.sh failed: {status}");
        Ok(())
    }
}

fn spawn_postgres(data: &Path, port: u16, socket_dir: &Path) -> Result<Child> {
    {
        let child = as_postgres(&mut Command::new(find_binary("postgres")?))
            .arg("-D")
            .arg(data)
            .args([
                "-p",
                &port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
                // No fsync (speed; survives a process crash, not an OS crash), but commits
                // are written before they return: the fault tests kill Postgres mid-drain.
                "-c",
                "fsync=off",
            ])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            .arg("-k")
            .arg(socket_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting postgres")?;
        Ok(child)
    }
}

impl PgServer {
    /// `postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable`.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A native client, for assertions.
    pub async fn client(&self) -> Result<tokio_postgres::Client> {
        let (client, conn) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        Ok(client)
    }

    /// Where the cluster lives.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // SIGQUIT: immediate shutdown, so backends go away with the postmaster.
        let _ = Command::new("kill")
            .args(["-QUIT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Guest instances a test app may have alive at once: fewer than the sale tests' 512 buyers in
/// flight, so a spike queues for instances as it would on a busy host.
const INSTANCES: u32 = 200;

/// The host serving an app on a free loopback port.
pub struct TestApp {
    /// The loaded app (for measurements and cron runs).
    pub app: Arc<App>,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// A client with keep-alive.
    pub http: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
    /// The REST facades in front of the Redis nodes (`SECKILL_TRANSPORT=rest`), with the CA the
    /// host trusts for them; empty otherwise.
    pub facades: Vec<rest_facade::RestFacade>,
    facade_ca: Option<TestCa>,
    /// Whether this is a product manifest, whose exchanges `api/openapi.yaml` describes (the
    /// test manifests' components are not part of the API).
    records: bool,
}

impl TestApp {
    /// Loads `manifest` (relative to the repo root) with `vars` as `SPIN_VARIABLE_*` values.
    pub async fn start(manifest: &str, vars: &[(&str, String)]) -> Result<Self> {
        Self::start_with(manifest, vars, ConnectionMode::Pooled).await
    }

    /// Like [`TestApp::start`], choosing the Redis connection mode.
    pub async fn start_with(
        manifest: &str,
        vars: &[(&str, String)],
        mode: ConnectionMode,
    ) -> Result<Self> {
        let tls = seckill_host::tls::TlsTrust::system();
        Self::launch(manifest, vars, mode, tls, rest_transport(), INSTANCES).await
    }

    /// Like [`TestApp::start`], with at most `max_instances` guest instances alive at once.
    pub async fn start_sized(
        manifest: &str,
        vars: &[(&str, String)],
        max_instances: u32,
    ) -> Result<Self> {
        let tls = seckill_host::tls::TlsTrust::system();
        Self::launch(
            manifest,
            vars,
            ConnectionMode::Pooled,
            tls,
            rest_transport(),
            max_instances,
        )
        .await
    }

    /// Like [`TestApp::start`], with every Redis node reached through a REST facade whatever
    /// `SECKILL_TRANSPORT` says.
    pub async fn start_rest(manifest: &str, vars: &[(&str, String)]) -> Result<Self> {
        let tls = seckill_host::tls::TlsTrust::system();
        Self::launch(manifest, vars, ConnectionMode::Pooled, tls, true, INSTANCES).await
    }

    /// Like [`TestApp::start_with`], trusting `trust` for outbound TLS.
    pub async fn start_trusting(
        manifest: &str,
        vars: &[(&str, String)],
        mode: ConnectionMode,
        trust: seckill_host::tls::TlsTrust,
    ) -> Result<Self> {
        Self::launch(manifest, vars, mode, trust, rest_transport(), INSTANCES).await
    }

    async fn launch(
        manifest: &str,
        vars: &[(&str, String)],
        mode: ConnectionMode,
        tls: seckill_host::tls::TlsTrust,
        rest: bool,
        max_instances: u32,
    ) -> Result<Self> {
        // Over REST (`SECKILL_TRANSPORT=rest`), a product manifest's Redis nodes are reached
        // through facades; the test components keep Spin's Redis interface.
        let mut vars = vars.to_vec();
        let product = manifest == "spin.toml" || manifest == "spin.http.toml";
        let (facades, tls) = match rest && product {
            true => over_rest(&mut vars).await?,
            false => ((Vec::new(), None), tls),
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
            tls,
            ..Options::default()
        };
        let path = repo_root().join(manifest);
        let app = Arc::new(tokio::task::spawn_blocking(move || App::load(&path, options)).await??);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr: SocketAddr = listener.local_addr()?;
        let server = tokio::spawn({
            let app = app.clone();
            async move {
                let _ = seckill_host::http_trigger::serve(app, listener).await;
            }
        });
        Ok(TestApp {
            app,
            base_url: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()?,
            server,
            records: manifest == "spin.toml" || manifest == "spin.http.toml",
            facades: facades.0,
            facade_ca: facades.1,
        })
    }

    /// Sends `method path` with an optional bearer token and JSON body; returns status and the
    /// body as JSON (a JSON string holding the text when it is not JSON).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, serde_json::Value)> {
        let method_name = method.as_str().to_owned();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base_url));
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = resp.bytes().await?;
        self.record(&Exchange {
            method: method_name,
            path,
            request: body,
            status,
            content_type: content_type.as_deref(),
            response: &String::from_utf8_lossy(&bytes),
        });
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
        ))
    }

    /// The trust a host needs for this app's REST facades (their CA), when it has any.
    pub fn facade_trust(&self) -> Option<seckill_host::tls::TlsTrust> {
        self.facade_ca.as_ref().and_then(|ca| ca.trust().ok())
    }

    /// An operator call (`/admin/...`) with the test admin token.
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, serde_json::Value)> {
        self.call(method, path, Some(ADMIN_TOKEN), body).await
    }

    /// Creates and warms up an event; `config` overrides the defaults of an open 1-hour sale.
    pub async fn open_event(&self, id: &str, config: serde_json::Value) -> Result<()> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as u64;
        let mut body = serde_json::json!({
            "sku": format!("sku-{id}"), "stock": 10, "shards": 4,
            "start_ms": now - 1_000, "end_ms": now + 3_600_000, "user_rate": 0,
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

    /// The operator's view of an event.
    pub async fn status(&self, id: &str) -> Result<serde_json::Value> {
        let (status, resp) = self
            .admin(reqwest::Method::GET, &format!("/admin/events/{id}"), None)
            .await?;
        anyhow::ensure!(status == 200, "status {id}: {status} {resp}");
        Ok(resp)
    }

    /// A buyer's whole way in: admission token, then precheck. Returns the purchase token, or
    /// the failing step's status and body.
    pub async fn admit_and_precheck(
        &self,
        event: &str,
        user: &str,
    ) -> Result<Result<String, (u16, serde_json::Value)>> {
        let jwt = jwt_for(user);
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &format!("/api/events/{event}/admission"),
                Some(&jwt),
                None,
            )
            .await?;
        if status != 200 {
            return Ok(Err((status, body)));
        }
        let admission = serde_json::json!({ "admission_token": body["admission_token"] });
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &format!("/api/events/{event}/precheck"),
                Some(&jwt),
                Some(&admission),
            )
            .await?;
        if status != 200 {
            return Ok(Err((status, body)));
        }
        Ok(Ok(body["purchase_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned()))
    }

    /// A buy with a purchase token.
    pub async fn buy(
        &self,
        event: &str,
        user: &str,
        purchase_token: &str,
    ) -> Result<(u16, serde_json::Value)> {
        let body = serde_json::json!({ "purchase_token": purchase_token });
        self.call(
            reqwest::Method::POST,
            &format!("/api/events/{event}/buy"),
            Some(&jwt_for(user)),
            Some(&body),
        )
        .await
    }

    /// `GET path`, returning status and body text.
    pub async fn get(&self, path: &str) -> Result<(u16, String)> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base_url))
            .send()
            .await?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = resp.text().await?;
        self.record(&Exchange {
            method: "GET".into(),
            path,
            request: None,
            status,
            content_type: content_type.as_deref(),
            response: &text,
        });
        Ok((status, text))
    }

    /// Records an exchange with the product's API for the OpenAPI check.
    fn record(&self, exchange: &Exchange) {
        if self.records {
            record_exchange(exchange);
        }
    }

    /// `GET path` whose body must be JSON.
    pub async fn get_json(&self, path: &str) -> Result<(u16, serde_json::Value)> {
        let (status, body) = self.get(path).await?;
        let json =
            serde_json::from_str(&body).with_context(|| format!("GET {path}: not JSON: {body}"))?;
        Ok((status, json))
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// One request and its response, as `scripts/check-openapi.py` validates them against
/// `api/openapi.yaml`.
#[derive(serde::Serialize)]
struct Exchange<'a> {
    method: String,
    path: &'a str,
    request: Option<&'a serde_json::Value>,
    status: u16,
    content_type: Option<&'a str>,
    response: &'a str,
}

/// Appends an exchange to `$SECKILL_API_RECORD/<pid>.jsonl` when that variable is set (the
/// test command sets it): every response the suite sees is later checked against the OpenAPI
/// document. One file per test process, one line per exchange.
fn record_exchange(exchange: &Exchange) {
    use std::io::Write;
    let Some(dir) = std::env::var_os("SECKILL_API_RECORD") else {
        return;
    };
    let path = Path::new(&dir).join(format!("{}.jsonl", std::process::id()));
    let line = serde_json::to_string(exchange).expect("an exchange serializes");
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        writeln!(f, "{line}")
    });
    if let Err(e) = written {
        panic!("recording an API exchange in {}: {e}", path.display());
    }
}

/// Test secrets: the shop's JWT key, the admission HMAC key, the operators' token.
pub const JWT_SECRET: &str = "test-jwt-secret";
/// See [`JWT_SECRET`].
pub const ADMISSION_SECRET: &str = "test-admission-secret";
/// See [`JWT_SECRET`].
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// The product manifest the sale tests serve: `spin.toml` (self-hosted Spin, cron plugin), or
/// the one `SECKILL_MANIFEST` names. The test command runs the manifest-bound tests a second
/// time over `spin.http.toml`, the manifest every platform accepts.
pub fn product_manifest() -> &'static str {
    static MANIFEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MANIFEST.get_or_init(|| {
        let m = std::env::var("SECKILL_MANIFEST").unwrap_or_else(|_| "spin.toml".into());
        assert!(
            m == "spin.toml" || m == "spin.http.toml",
            "SECKILL_MANIFEST must be spin.toml or spin.http.toml, not {m}"
        );
        m
    })
}

/// The variables the product manifests need, pointing at these servers. The tests drive the
/// drain themselves, so the poll-carried drain is off (`poll_drain_ms` 0) unless a test turns
/// it on.
pub fn app_vars(redis: &RedisServer, pg: &PgServer) -> Vec<(&'static str, String)> {
    vec![
        ("redis_url", redis.url()),
        ("redis_host", redis.host()),
        ("pg_url", pg.url()),
        ("pg_host", pg.host()),
        ("jwt_secret", JWT_SECRET.into()),
        ("admission_secret", ADMISSION_SECRET.into()),
        ("admin_token", ADMIN_TOKEN.into()),
        ("poll_drain_ms", "0".into()),
    ]
}

/// Points `vars` (from [`app_vars`]) at several Redis nodes: `redis_url` lists them all and
/// `redis_host` lets the functions reach any loopback port.
pub fn over_nodes(vars: &mut [(&str, String)], nodes: &[&RedisServer]) {
    for (k, v) in vars.iter_mut() {
        match *k {
            "redis_url" => *v = nodes.iter().map(|n| n.url()).collect::<Vec<_>>().join(","),
            "redis_host" => *v = "127.0.0.1:*".into(),
            _ => {}
        }
    }
}

/// `per_node` event ids for each of `nodes`, as `crates/domain/src/nodes.rs` places them: element `i`
/// holds the events that live on node `i` (names are `prefix0`, `prefix1`, …).
pub fn events_per_node(prefix: &str, nodes: &[&RedisServer], per_node: usize) -> Vec<Vec<String>> {
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut placed = vec![Vec::new(); nodes.len()];
    for i in 0.. {
        if placed.iter().all(|p: &Vec<String>| p.len() == per_node) {
            break;
        }
        let name = format!("{prefix}{i}");
        let event = seckill_domain::event::EventId::parse(&name).expect("a valid event id");
        let at = seckill_domain::nodes::index_for(&event, &urls);
        if placed[at].len() < per_node {
            placed[at].push(name);
        }
    }
    placed
}

/// A buyer's bearer token, as the shop's login would mint it.
pub fn jwt_for(user: &str) -> String {
    let claims = seckill_domain::auth::Claims {
        sub: user.into(),
        exp: Some(4_000_000_000),
        nbf: None,
    };
    seckill_domain::auth::sign_jwt(&claims, JWT_SECRET.as_bytes())
}

/// The product manifest with the jobs component swapped for the tests' `faulty-jobs` build
/// (seckill-domain's `fault-injection` feature) and its `fault_injection` variable declared.
/// Generated from `spin.toml` on every call, so the two never drift; returns its path relative
/// to the repo root, for [`TestApp::start`].
pub fn faulty_manifest() -> Result<String> {
    derived_manifest(
        "faults.toml",
        &[
            (
                "[variables]\n",
                "[variables]\nfault_injection = { default = \"\" }\n",
            ),
            ("/release/jobs.wasm\"", "/release/faulty_jobs.wasm\""),
            (
                "[component.jobs.variables]\n",
                "[component.jobs.variables]\nfault_injection = \"{{ fault_injection }}\"\n",
            ),
        ],
    )
}

/// `spin.toml` with `edits` (each `from` must occur), written as
/// `target/test-manifests/<name>` with its sources pointing back at the build; returns that
/// path, relative to the repo root.
pub fn derived_manifest(name: &str, edits: &[(&str, &str)]) -> Result<String> {
    let product = std::fs::read_to_string(repo_root().join("spin.toml"))?;
    let mut text = product.replace("source = \"target/", "source = \"../../target/");
    for (from, to) in edits {
        anyhow::ensure!(text.contains(from), "spin.toml changed: no {from:?}");
        text = text.replace(from, to);
    }
    // Test processes run at once: write aside, then rename (atomic), never a half file.
    let relative = format!("target/test-manifests/{name}");
    let path = repo_root().join(&relative);
    std::fs::create_dir_all(path.parent().expect("a directory"))?;
    let aside = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&aside, text)?;
    std::fs::rename(&aside, &path)?;
    Ok(relative)
}

/// A certificate authority of the test's own and a server certificate it signed, for
/// `localhost` only (so `127.0.0.1` fails the host-name check), written as PEM files.
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// Makes `ca.pem`, `server.pem` and `server.key`.
    pub fn new() -> Result<Self> {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "seckill test CA");
        let ca_cert = ca.self_signed(&ca_key)?;
        let server_key = KeyPair::generate()?;
        let server = CertificateParams::new(vec!["localhost".to_owned()])?.signed_by(
            &server_key,
            &ca_cert,
            &ca_key,
        )?;
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem())?;
        std::fs::write(dir.path().join("server.pem"), server.pem())?;
        std::fs::write(dir.path().join("server.key"), server_key.serialize_pem())?;
        Ok(TestCa { dir })
    }

    /// The path of one of its files, as a string for command lines.
    pub fn path(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }

    /// The host's trust: the system's roots plus this CA, as `--tls-ca` gives it.
    pub fn trust(&self) -> Result<seckill_host::tls::TlsTrust> {
        seckill_host::tls::TlsTrust::with_extra_ca(Path::new(&self.path("ca.pem")))
    }
}

/// Whether the tests reach Redis through the REST facade (`SECKILL_TRANSPORT=rest`); the test
/// command runs the sale and order tests both ways.
pub fn rest_transport() -> bool {
    match std::env::var("SECKILL_TRANSPORT").as_deref() {
        Ok("rest") => true,
        Ok("redis") | Err(_) => false,
        Ok(other) => panic!("SECKILL_TRANSPORT is redis or rest, not {other}"),
    }
}

/// Puts a REST facade in front of every `redis://` node of `vars` and points `redis_url` and
/// `redis_host` at them; returns the facades, their CA and the trust the host needs for them.
async fn over_rest(
    vars: &mut [(&str, String)],
) -> Result<(
    (Vec<rest_facade::RestFacade>, Option<TestCa>),
    seckill_host::tls::TlsTrust,
)> {
    let ca = TestCa::new()?;
    let mut facades = Vec::new();
    for (k, v) in vars.iter_mut() {
        if *k != "redis_url" || !v.starts_with("redis://") {
            continue;
        }
        let mut urls = Vec::new();
        for (i, node) in v.split(',').enumerate() {
            let facade =
                rest_facade::RestFacade::start(node.trim(), &ca, &format!("token{i}")).await?;
            urls.push(facade.url());
            facades.push(facade);
        }
        *v = urls.join(",");
    }
    for (k, v) in vars.iter_mut() {
        if *k == "redis_host" && !facades.is_empty() {
            *v = match facades.as_slice() {
                [one] => one.host(),
                _ => "localhost:*".into(),
            };
        }
    }
    let trust = ca.trust()?;
    Ok(((facades, Some(ca)), trust))
}
