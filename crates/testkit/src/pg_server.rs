//! A PostgreSQL cluster of the test's own. (Not `postgres.rs`: that name would shadow the
//! `postgres` crate in the root's paths.)

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::support::{find_binary, free_port, repo_root, wait_for};
use crate::tls::TestCa;

/// A PostgreSQL cluster of this test alone (`initdb` in a temp dir, trust auth, no fsync).
pub struct PgServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
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
            enable_ssl(&data, ca)?;
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
        // SIGQUIT: immediate shutdown, so backends go away with the postmaster.
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
        self.stop();
    }
}

/// Gives the cluster in `data` the CA's `localhost` certificate and turns `ssl` on.
fn enable_ssl(data: &Path, ca: &TestCa) -> Result<()> {
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
    Ok(())
}

fn spawn_postgres(data: &Path, port: u16, socket_dir: &Path) -> Result<Child> {
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
