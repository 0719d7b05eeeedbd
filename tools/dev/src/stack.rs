//! `seckill-dev stack -- COMMAND…`: the local stack the browser tests run against, started
//! from the test kit like every test's — a Redis and a migrated PostgreSQL of its own, the host
//! serving `spin.toml` (the demo login on, the cron triggers off: the tests drain by hand) and
//! the kit's Stripe sandbox as its payment provider (checkout sessions, the hosted page, signed
//! events to the host's webhook) — then
//! COMMAND, told where everything is (`SECKILL_URL`, `SECKILL_ADMIN_TOKEN`,
//! `SECKILL_VIEWER_TOKEN`, `SECKILL_PROVIDER_URL`, `SECKILL_WEBHOOK_SECRET`, `SECKILL_REDIS_URL`). Everything stops with
//! it, and its exit status is the stack's.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use seckill_testkit::host_process::host_binary;
use seckill_testkit::stripe::RESTRICTED_KEY;
use seckill_testkit::{
    ADMIN_TOKEN, PAYMENT_WEBHOOK_SECRET, PgServer, RedisServer, StripeSandbox, VIEWER_TOKEN,
    free_port, repo_root,
};

/// `stack` flags.
#[derive(clap::Args)]
pub struct StackArgs {
    /// The host's log (its tail is printed when COMMAND fails).
    #[arg(long, default_value = "target/browser-artifacts/host.log")]
    host_log: PathBuf,
    /// What to run against the stack.
    #[arg(trailing_var_arg = true, required = true)]
    command: Vec<String>,
}

/// The operators the browser tests sign in as: one who may change things, one who only reads.
fn operators() -> String {
    format!("browser:operator:{ADMIN_TOKEN},watcher:viewer:{VIEWER_TOKEN}")
}

/// Starts the stack, runs the command, stops the stack; exits with the command's status.
pub async fn run(args: StackArgs) -> Result<()> {
    let redis = RedisServer::start()?;
    let pg = PgServer::start()?;
    pg.migrate().await?;
    let sandbox = StripeSandbox::start().await?;
    let provider_url = sandbox.url().to_owned();
    let mut vars = seckill_testkit::app_vars(&redis, &pg);
    vars.retain(|(name, _)| *name != "operators");
    vars.push(("operators", operators()));
    vars.push(("settings", "demo_login=true".to_owned()));
    vars.push(("payment_api_url", provider_url.clone()));
    vars.push(("payment_api_key", RESTRICTED_KEY.to_owned()));
    if let Some(dir) = args.host_log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let (host, addr) = host(&vars, std::fs::File::create(&args.host_log)?)?;
    sandbox.add_webhook_endpoint(
        &format!("http://{addr}/api/payments/webhook"),
        &[PAYMENT_WEBHOOK_SECRET],
        &["*"],
    );

    eprintln!("[seckill] the stack: http://{addr}, checkout {provider_url}");
    let (program, rest) = args.command.split_first().context("a command to run")?;
    let mut command = Command::new(program);
    command
        .args(rest)
        .env("SECKILL_URL", format!("http://{addr}"))
        .env("SECKILL_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("SECKILL_VIEWER_TOKEN", VIEWER_TOKEN)
        .env("SECKILL_PROVIDER_URL", &provider_url)
        .env("SECKILL_WEBHOOK_SECRET", PAYMENT_WEBHOOK_SECRET)
        .env("SECKILL_REDIS_URL", redis.url());
    let status = tokio::task::spawn_blocking(move || command.status())
        .await?
        .with_context(|| format!("running {program}"))?;
    drop((host, sandbox));
    if !status.success() {
        let log = std::fs::read_to_string(&args.host_log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        eprintln!("[seckill] host log (last lines):");
        for line in tail.into_iter().rev() {
            eprintln!("{line}");
        }
    }
    drop((redis, pg));
    std::process::exit(status.code().unwrap_or(1))
}

/// The host serving `spin.toml` with `vars`, its cron triggers off and its log into `log`,
/// once it accepts connections; killed when dropped.
fn host(vars: &[(&str, String)], log: std::fs::File) -> Result<(Host, SocketAddr)> {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let mut cmd = Command::new(host_binary()?);
    cmd.args([
        "up",
        "--no-cron",
        "--listen",
        &addr.to_string(),
        "--manifest",
    ])
    .arg(repo_root().join("spin.toml"))
    .env("RUST_LOG", "error")
    .stdout(Stdio::null())
    .stderr(log);
    for (k, v) in vars {
        cmd.env(format!("SPIN_VARIABLE_{}", k.to_ascii_uppercase()), v);
    }
    let host = Host(cmd.spawn().context("starting seckill-host")?);
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(addr).is_err() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the host did not listen within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((host, addr))
}

/// The host's process, killed when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
