//! `seckill-bench stack -- COMMAND…`: the local stack the browser tests run against, started
//! from the test kit like every test's — a Redis and a migrated PostgreSQL of its own, the host
//! serving `spin.toml` (the demo login on, the cron triggers off: the tests drain by hand) and
//! a payment provider's sandbox checkout confirming payments to the host's webhook — then
//! COMMAND, told where everything is (`SECKILL_URL`, `SECKILL_ADMIN_TOKEN`,
//! `SECKILL_VIEWER_TOKEN`, `SECKILL_PROVIDER_URL`, `SECKILL_REDIS_URL`). Everything stops with
//! it, and its exit status is the stack's.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use seckill_testkit::{ADMIN_TOKEN, PAYMENT_WEBHOOK_SECRET, PgServer, RedisServer, VIEWER_TOKEN};

use crate::provider;
use crate::server::HostProcess;

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
    let checkout = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let provider_url = format!("http://{}", checkout.local_addr()?);
    let mut vars = seckill_testkit::app_vars(&redis, &pg);
    vars.retain(|(name, _)| *name != "operators");
    vars.push(("operators", operators()));
    vars.push((
        "settings",
        format!("demo_login=true,payment_checkout_url={provider_url}/checkout"),
    ));
    let (mut cmd, addr) = HostProcess::command("spin.toml", &vars, false, false, &[])?;
    if let Some(dir) = args.host_log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    cmd.stderr(std::fs::File::create(&args.host_log)?);
    let host = HostProcess::spawn(cmd, addr)?;
    let webhook = format!("http://{addr}/api/payments/webhook");
    let checkout =
        tokio::spawn(
            async move { provider::serve_on(checkout, webhook, PAYMENT_WEBHOOK_SECRET).await },
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
        .env("SECKILL_REDIS_URL", redis.url());
    let status = tokio::task::spawn_blocking(move || command.status())
        .await?
        .with_context(|| format!("running {program}"))?;
    checkout.abort();
    drop(host);
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
