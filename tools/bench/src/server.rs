//! Server processes of the bench's own: the host under test (`seckill-host up`), `wasmtime
//! serve` and the native baseline, each killed on drop.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use seckill_testkit::{free_port, repo_root};

use crate::load::{self, per_request};
use crate::table::Row;

/// A server process, killed on drop.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
}

/// The host under test.
pub type HostProcess = ServerProcess;

impl ServerProcess {
    /// Spawns `cmd`, which must listen on `addr`, and waits until it accepts connections (30 s
    /// at most: loading every component, cron included, takes seconds on a busy 2-core machine).
    pub fn spawn(mut cmd: Command, addr: SocketAddr) -> Result<Self> {
        let child = cmd
            .spawn()
            .with_context(|| format!("start {cmd:?} (build it first)"))?;
        let server = ServerProcess { child, addr };
        for _ in 0..1200 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        bail!("{cmd:?} did not start listening on {addr}")
    }

    /// CPU seconds this server has used so far.
    pub fn cpu_seconds(&self) -> f64 {
        load::cpu_seconds_of(&self.child.id().to_string())
    }

    /// Runs `row` against this server; notes the server's CPU per request (what a buy costs
    /// the host itself, whatever else shares the machine) and returns it in µs.
    pub async fn measured(&self, row: impl Future<Output = Result<Row>>) -> Result<(Row, f64)> {
        let before = self.cpu_seconds();
        let mut row = row.await?;
        let per_request = per_request(self.cpu_seconds() - before, row.requests()) * 1e6;
        row.add_note(&format!("host CPU {per_request:.0} µs/req;"));
        Ok((row, per_request))
    }

    /// Starts the host on `manifest`, without its cron triggers.
    pub fn start(manifest: &str, vars: &[(&str, String)], faithful: bool) -> Result<Self> {
        Self::start_app(manifest, vars, faithful, false)
    }

    /// Starts the host trusting the CA in `tls_ca` (`--tls-ca`), for the TLS rows.
    pub fn start_trusting(vars: &[(&str, String)], faithful: bool, tls_ca: &str) -> Result<Self> {
        Self::launch("spin.toml", vars, faithful, false, &["--tls-ca", tls_ca])
    }

    /// Starts `seckill-host up`, with its cron triggers when `cron` is set.
    pub fn start_app(
        manifest: &str,
        vars: &[(&str, String)],
        faithful: bool,
        cron: bool,
    ) -> Result<Self> {
        Self::launch(manifest, vars, faithful, cron, &[])
    }

    /// Starts `seckill-host up` with `extra` arguments; `vars` become `SPIN_VARIABLE_*`.
    pub fn launch(
        manifest: &str,
        vars: &[(&str, String)],
        faithful: bool,
        cron: bool,
        extra: &[&str],
    ) -> Result<Self> {
        let (cmd, addr) = Self::command(manifest, vars, faithful, cron, extra)?;
        Self::spawn(cmd, addr)
    }

    /// The command [`Self::launch`] runs, and the address it will listen on.
    pub fn command(
        manifest: &str,
        vars: &[(&str, String)],
        faithful: bool,
        cron: bool,
        extra: &[&str],
    ) -> Result<(Command, SocketAddr)> {
        let addr = local_addr()?;
        let mut cmd = Command::new(repo_root().join("target/release/seckill-host"));
        cmd.args(["up", "--listen", &addr.to_string(), "--manifest"])
            .arg(repo_root().join(manifest))
            .env("RUST_LOG", "error")
            .stdout(Stdio::null());
        if faithful {
            cmd.arg("--spin-faithful");
        }
        if !cron {
            cmd.arg("--no-cron");
        }
        cmd.args(extra);
        for (k, v) in vars {
            cmd.env(format!("SPIN_VARIABLE_{}", k.to_ascii_uppercase()), v);
        }
        Ok((cmd, addr))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free port on 127.0.0.1, for a server to listen on.
pub fn local_addr() -> Result<SocketAddr> {
    Ok(format!("127.0.0.1:{}", free_port()).parse()?)
}

/// Points the host's variables at another Redis endpoint: `redis_url` (what the functions
/// connect to) and `redis_origin` (what `allowed_outbound_hosts` lets them reach).
pub fn point_redis_at(vars: &mut [(&str, String)], url: String, origin: String) {
    for (k, v) in vars.iter_mut() {
        match *k {
            "redis_url" => *v = url.clone(),
            "redis_origin" => *v = origin.clone(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_redis_at_rewrites_url_and_origin_only() {
        let mut vars = vec![
            ("redis_url", "redis://127.0.0.1:6379".to_owned()),
            ("redis_origin", "redis://127.0.0.1:6379".to_owned()),
            ("pg_host", "127.0.0.1:5432".to_owned()),
        ];
        point_redis_at(
            &mut vars,
            "https://localhost:8443".into(),
            "https://localhost:8443".into(),
        );
        assert_eq!(
            vars,
            [
                ("redis_url", "https://localhost:8443".to_owned()),
                ("redis_origin", "https://localhost:8443".to_owned()),
                ("pg_host", "127.0.0.1:5432".to_owned()),
            ]
        );
    }
}
