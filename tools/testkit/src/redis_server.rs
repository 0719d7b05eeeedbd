//! A `redis-server` of the test's own, and `redis-cli MONITOR` on it. (Not `redis.rs`: that
//! name would shadow the `redis` crate in the root's paths.)

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::machine::{find_binary, free_port, repo_root, wait_for};
use crate::scratch;
use crate::tls::TestCa;

/// A `redis-server` of this test alone.
pub struct RedisServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its data directory (in memory when there is room: see `scratch`).
    pub dir: tempfile::TempDir,
    /// The configuration file it starts from, if any (redis-server's first argument).
    config: Option<PathBuf>,
    extra: Vec<String>,
    /// Its TLS port on 127.0.0.1, when started with [`RedisServer::start_tls`].
    pub tls_port: Option<u16>,
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> Result<Self> {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server as the sale runs it: `infra/redis/durable.conf`, which the local stack
    /// (`scripts/lib.sh`) starts from too.
    pub fn start_durable() -> Result<Self> {
        Self::start_from(Some(repo_root().join("infra/redis/durable.conf")), &[])
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(args: &[&str]) -> Result<Self> {
        Self::start_from(None, args)
    }

    fn start_from(config: Option<PathBuf>, args: &[&str]) -> Result<Self> {
        let dir = scratch::tempdir()?;
        let extra: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (child, port) = spawn_redis(dir.path(), free_port(), config.as_deref(), &extra)?;
        Ok(RedisServer {
            child,
            port,
            dir,
            config,
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
        let (child, _) = spawn_redis(
            self.dir.path(),
            self.port,
            self.config.as_deref(),
            &self.extra,
        )?;
        self.child = child;
        Ok(())
    }
}

fn spawn_redis(
    dir: &Path,
    port: u16,
    config: Option<&Path>,
    extra: &[String],
) -> Result<(Child, u16)> {
    let child = Command::new(find_binary("redis-server")?)
        .args(config)
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
