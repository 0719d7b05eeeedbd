//! The host binary as a child process (`target/release/seckill-host up`), for what only a
//! process shows: its command line, signals, its exit status and its log lines. The binary is
//! the one `cargo build --release -p seckill-host` (or a test run that includes
//! `-p seckill-host`, as scripts/test.sh's does) left in `target/release/`.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::machine::{free_port, repo_root, wait_for};

/// A `seckill-host up` of this test alone, killed when dropped.
pub struct HostProcess {
    child: Child,
    /// Where it serves the app.
    pub addr: SocketAddr,
    /// Its stderr (its log), line by line, as far as it has written.
    log: Arc<Mutex<Vec<String>>>,
}

/// The host binary.
pub fn host_binary() -> Result<PathBuf> {
    let path = repo_root().join("target/release/seckill-host");
    if !path.is_file() {
        bail!(
            "{} is missing: cargo build --release -p seckill-host",
            path.display()
        );
    }
    Ok(path)
}

impl HostProcess {
    /// Runs `seckill-host up` on a free port with `manifest` (relative to the repo root),
    /// `vars` as `SPIN_VARIABLE_*` values and `args` after the host's own, and waits until it
    /// answers `/.well-known/spin/health`.
    pub fn start(manifest: &str, vars: &[(&str, String)], args: &[&str]) -> Result<Self> {
        Self::start_binary(&host_binary()?, manifest, vars, args)
    }

    /// [`HostProcess::start`] with `env` added to its environment (`OTEL_*`, …).
    pub fn start_with_env(
        manifest: &str,
        vars: &[(&str, String)],
        args: &[&str],
        env: &[(&str, String)],
    ) -> Result<Self> {
        Self::launch(&host_binary()?, manifest, vars, args, env)
    }

    /// [`HostProcess::start`] with the host binary at `binary` (e.g. an unpacked release).
    pub fn start_binary(
        binary: &Path,
        manifest: &str,
        vars: &[(&str, String)],
        args: &[&str],
    ) -> Result<Self> {
        Self::launch(binary, manifest, vars, args, &[])
    }

    fn launch(
        binary: &Path,
        manifest: &str,
        vars: &[(&str, String)],
        args: &[&str],
        env: &[(&str, String)],
    ) -> Result<Self> {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let mut command = Command::new(binary);
        command
            .arg("up")
            .arg("--manifest")
            .arg(repo_root().join(manifest))
            .args(["--env-file", "/dev/null", "--listen", &addr.to_string()])
            .arg("--compile-cache")
            .arg(repo_root().join("target/host-compile-cache"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in vars {
            command.env(
                format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()),
                value,
            );
        }
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = command.spawn().context("starting seckill-host")?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped");
        let reader = std::thread::spawn({
            let log = log.clone();
            move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    // Still shown in a failing test's output.
                    eprintln!("[host] {line}");
                    log.lock().unwrap().push(line);
                }
            }
        });
        let mut host = HostProcess { child, addr, log };
        // Ready, or gone: a host that refused its configuration exits at once.
        let settled = wait_for("seckill-host", Duration::from_secs(60), || {
            host.child.try_wait().ok().flatten().is_some()
                || get(addr, "/.well-known/spin/health")
                    .is_ok_and(|r| r.starts_with("HTTP/1.1 200"))
        });
        let exited = host.child.try_wait().ok().flatten();
        if let Some(status) = exited {
            // Its log is whole once its stderr has ended.
            let _ = reader.join();
            bail!("seckill-host exited ({status}):\n{}", host.log().join("\n"));
        }
        if let Err(e) = settled {
            let _ = host.child.kill();
            return Err(e.context(host.log().join("\n")));
        }
        Ok(host)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it `signal` (`TERM`, `INT`, …).
    pub fn signal(&self, signal: &str) -> Result<()> {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()?;
        anyhow::ensure!(status.success(), "kill -{signal} failed");
        Ok(())
    }

    /// Waits up to `timeout` for it to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if start.elapsed() > timeout {
                bail!("seckill-host still running after {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its log lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `GET path` on a connection of its own (`Connection: close`): the whole response, as text.
pub fn get(addr: SocketAddr, path: &str) -> Result<String> {
    use std::io::Read;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    Ok(String::from_utf8_lossy(&response).into_owned())
}
