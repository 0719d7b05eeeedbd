//! A PostgreSQL cluster of the test's own. (Not `postgres.rs`: that name would shadow the
//! `postgres` crate in the root's paths.)
//!
//! `initdb` runs once per PostgreSQL version and machine, not once per test: its cluster is kept
//! as a template under `target/test-pg-template/`, and each server starts on a copy of it (about
//! a second of CPU less per test; `initdb` is most of what starting PostgreSQL costs).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::machine::{find_binary, free_port, repo_root, wait_for};
use crate::scratch;
use crate::tls::TestCa;

/// A PostgreSQL cluster of this test alone (a copy of the `initdb` template in a temp dir, in
/// memory when there is room: see `scratch`; trust auth, no fsync).
pub struct PgServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
}

impl PgServer {
    /// Copies the template cluster (made by `initdb` on first use) and starts the server.
    pub fn start() -> Result<Self> {
        Self::launch(None)
    }

    /// A server with `ssl = on` and a certificate from `ca` (plain connections still work, for
    /// the tests' own assertions; `pg_stat_ssl` tells which the app used).
    pub fn start_tls(ca: &TestCa) -> Result<Self> {
        Self::launch(Some(ca))
    }

    fn launch(tls: Option<&TestCa>) -> Result<Self> {
        let dir = scratch::tempdir()?;
        if let Some((uid, gid)) = postgres_user() {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let data = dir.path().join("data");
        copy_tree(template()?, &data, postgres_user())?;
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

/// What every cluster is made with: `initdb <INITDB_ARGS> <data dir>`. Part of the template's
/// key, so a change here makes a new template. 1 MiB WAL segments instead of 16: each test
/// copies the template, and its WAL was most of it (a 16 MiB segment of a 39 MiB cluster; 28 MiB
/// in all with 1 MiB segments).
const INITDB_ARGS: [&str; 11] = [
    "-U",
    "postgres",
    "-A",
    "trust",
    "--no-sync",
    "-E",
    "UTF8",
    "--locale",
    "C",
    "--wal-segsize=1",
    "-D",
];

/// The template cluster's data directory, made on first use: `initdb` once per PostgreSQL
/// version (and owner, and [`INITDB_ARGS`]) into `target/test-pg-template/<key>/data`. Test
/// processes run at once, so it is built aside and renamed into place (atomic): a process sees
/// no template or a whole one, and when two build it at once, the first rename wins and the
/// other process uses that one.
fn template() -> Result<&'static Path> {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = TEMPLATE.get() {
        return Ok(path);
    }
    let initdb = find_binary("initdb")?;
    let version = Command::new(&initdb)
        .arg("--version")
        .output()
        .context("running initdb --version")?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &initdb,
            &version,
            INITDB_ARGS,
            postgres_user(),
            current_uid(),
        )
            .hash(&mut h);
        let digits = version
            .split_whitespace()
            .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
            .unwrap_or("unknown");
        format!("pg{digits}-{:016x}", h.finish())
    };
    let home = repo_root().join("target/test-pg-template").join(key);
    let data = home.join("data");
    if !data.join("PG_VERSION").is_file() {
        build_template(&initdb, &home)?;
    }
    Ok(TEMPLATE.get_or_init(|| data))
}

/// Runs `initdb` for the template and moves the result to `home` (see [`template`]).
fn build_template(initdb: &Path, home: &Path) -> Result<()> {
    let parent = home.parent().expect("under target/");
    std::fs::create_dir_all(parent)?;
    // initdb runs as `postgres` when we are root, in a temp dir it may write (the repository may
    // be out of its reach); the copy aside is next to `home`, so the rename stays on one file
    // system.
    let work = scratch::tempdir()?;
    if let Some((uid, gid)) = postgres_user() {
        std::os::unix::fs::chown(work.path(), Some(uid), Some(gid))?;
    }
    let fresh = work.path().join("data");
    let out = as_postgres(&mut Command::new(initdb))
        .args(INITDB_ARGS)
        .arg(&fresh)
        .output()
        .context("running initdb")?;
    if !out.status.success() {
        bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let aside = tempfile::Builder::new()
        .prefix(".building-")
        .tempdir_in(parent)?;
    copy_tree(&fresh, &aside.path().join("data"), None)?;
    let aside = aside.keep();
    match std::fs::rename(&aside, home) {
        Ok(()) => Ok(()),
        // Another process renamed its template into place first: use that one.
        Err(_) if home.join("data/PG_VERSION").is_file() => {
            let _ = std::fs::remove_dir_all(&aside);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&aside);
            Err(e).with_context(|| format!("moving the template to {}", home.display()))
        }
    }
}

/// Copies the directory tree `from` to `to` (which must not exist), keeping every file's and
/// directory's mode (PostgreSQL wants its data directory `0700`) and, when given, making `owner`
/// (uid, gid) own every copy.
fn copy_tree(from: &Path, to: &Path, owner: Option<(u32, u32)>) -> Result<()> {
    let chown = |path: &Path| match owner {
        Some((uid, gid)) => std::os::unix::fs::lchown(path, Some(uid), Some(gid)),
        None => Ok(()),
    };
    std::fs::create_dir(to).with_context(|| format!("creating {}", to.display()))?;
    std::fs::set_permissions(to, std::fs::metadata(from)?.permissions())?;
    chown(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&source, &target, owner)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
            chown(&target)?;
        } else {
            std::fs::copy(&source, &target)
                .with_context(|| format!("copying {}", source.display()))?;
            chown(&target)?;
        }
    }
    Ok(())
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
