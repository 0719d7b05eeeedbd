//! `seckill-bench stack -- COMMAND…`: the local stack the browser tests run against, started
//! from the test kit like every test's — a Redis and a migrated PostgreSQL of its own, the host
//! serving `spin.toml` (the demo login on, the cron triggers off: the tests drain by hand) and
//! the kit's Stripe sandbox as its payment provider (checkout sessions, the hosted page, signed
//! events to the host's webhook) — then
//! COMMAND, told where everything is (`SECKILL_URL`, `SECKILL_ADMIN_TOKEN`,
//! `SECKILL_VIEWER_TOKEN`, `SECKILL_PROVIDER_URL`, `SECKILL_WEBHOOK_SECRET`, `SECKILL_REDIS_URL`). Everything stops with
//! it, and its exit status is the stack's.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use seckill_testkit::stripe::RESTRICTED_KEY;
use seckill_testkit::{
    ADMIN_TOKEN, PAYMENT_WEBHOOK_SECRET, PgServer, RedisServer, StripeSandbox, VIEWER_TOKEN,
};

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
    let sandbox = StripeSandbox::start().await?;
    let provider_url = sandbox.url().to_owned();
    let mut vars = seckill_testkit::app_vars(&redis, &pg);
    vars.retain(|(name, _)| *name != "operators");
    vars.push(("operators", operators()));
    vars.push(("settings", "demo_login=true".to_owned()));
    vars.push(("payment_api_url", provider_url.clone()));
    vars.push(("payment_api_key", RESTRICTED_KEY.to_owned()));
    let (mut cmd, addr) = HostProcess::command("spin.toml", &vars, false, false, &[])?;
    if let Some(dir) = args.host_log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    cmd.stderr(std::fs::File::create(&args.host_log)?);
    let host = HostProcess::spawn(cmd, addr)?;
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
