//! The test harness: real `redis-server` and real PostgreSQL, each started on a free loopback
//! port in a temp dir and stopped when dropped, and the real host serving real `.wasm` files.
//! No mocks: what passes here runs the same way under `scripts/up.sh` and, for the guests, Spin.

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
        .parent()
        .expect("tests/ has a parent")
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
        })
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
        let port = free_port();
        let child = as_postgres(&mut Command::new(find_binary("postgres")?))
            .arg("-D")
            .arg(&data)
            .args([
                "-p",
                &port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
            ])
            .args([
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ])
            .arg("-k")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting postgres")?;
        let server = PgServer { child, port, dir };
        let pg_isready = find_binary("pg_isready")?;
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
        })?;
        Ok(server)
    }

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

/// The host serving an app on a free loopback port.
pub struct TestApp {
    /// The loaded app (for measurements and cron runs).
    pub app: Arc<App>,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// A client with keep-alive.
    pub http: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
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
        let mut providers = Providers::default();
        for (name, value) in vars {
            providers.overrides.insert(
                format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()),
                value.clone(),
            );
        }
        let options = Options {
            connection_mode: mode,
            providers,
            max_instances: Some(200),
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
        })
    }

    /// `GET path`, returning status and body text.
    pub async fn get(&self, path: &str) -> Result<(u16, String)> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base_url))
            .send()
            .await?;
        Ok((resp.status().as_u16(), resp.text().await?))
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
