//! `seckill-dev provider`: the kit's Stripe sandbox on a fixed address, as the local stack's
//! payment provider (`scripts/up.sh`), the way Stripe's test mode stands in for live: the API
//! the pay route and the jobs call, the hosted checkout a buyer pays on, and signed events to
//! the app's webhook with Stripe's retries. It charges nobody.

use std::net::SocketAddr;

use anyhow::Result;
use seckill_testkit::StripeSandbox;
use seckill_testkit::stripe::{RESTRICTED_KEY, SandboxConfig};

/// `provider` flags.
#[derive(clap::Args)]
pub struct ProviderArgs {
    /// Where to serve the API and the hosted checkout.
    #[arg(long, default_value = "127.0.0.1:3100")]
    listen: SocketAddr,
    /// The app's webhook (`…/api/payments/webhook`).
    #[arg(long, required_unless_present = "print_key")]
    webhook: Option<String>,
    /// The webhook signing secret (the app's `payment_webhook_secrets` holds it).
    #[arg(long, required_unless_present = "print_key")]
    secret: Option<String>,
    /// Print the sandbox's restricted key (the app's `payment_api_key`) and exit.
    #[arg(long)]
    print_key: bool,
}

/// Serves the sandbox until killed.
pub async fn serve(args: ProviderArgs) -> Result<()> {
    if args.print_key {
        println!("{RESTRICTED_KEY}");
        return Ok(());
    }
    let (Some(webhook), Some(secret)) = (args.webhook, args.secret) else {
        anyhow::bail!("--webhook and --secret are required");
    };
    let sandbox = StripeSandbox::start_on(args.listen, SandboxConfig::default()).await?;
    sandbox.add_webhook_endpoint(&webhook, &[&secret], &["*"]);
    eprintln!(
        "[seckill] Stripe sandbox on {} (events to {webhook})",
        sandbox.url()
    );
    std::future::pending::<()>().await;
    Ok(())
}
