//! `seckill-dev`: what the local stack runs beside the app, from the test kit: the payment
//! provider's sandbox ([`provider`], for `scripts/up.sh`) and the whole stack with a command run
//! against it ([`stack`], for `scripts/browser-tests.sh`). Nothing here measures (the bench) or
//! asserts (the tests).

mod provider;
mod stack;

use anyhow::Result;
use clap::Parser;

/// The local stack's parts that are not the app.
#[derive(Parser)]
enum Cli {
    /// The kit's Stripe sandbox on a fixed address: the local stack's payment provider.
    Provider(provider::ProviderArgs),
    /// The local stack the browser tests run against, and a command run against it.
    Stack(stack::StackArgs),
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse() {
        Cli::Provider(args) => provider::serve(args).await,
        Cli::Stack(args) => stack::run(args).await,
    }
}
