//! `seckill-host`: the command line of the local Spin-compatible host.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use seckill_host::variables::Providers;
use seckill_host::{App, ConnectionMode, Options};

/// glibc malloc took ~18% of the host's CPU on the buy path (perf): every request allocates
/// and frees a store, WASI resources and header maps on whichever worker thread runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs seckill's Spin app locally, like `spin up`.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the app's HTTP routes and run its cron triggers.
    Up {
        #[command(flatten)]
        app: AppArgs,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
        /// Do not run `[[trigger.cron]]` schedules (an operator calls the HTTP routes instead).
        #[arg(long)]
        no_cron: bool,
    },
    /// Load and check the manifest and every component, then exit.
    Check {
        #[command(flatten)]
        app: AppArgs,
    },
    /// Run one component's cron handler once, now.
    Cron {
        #[command(flatten)]
        app: AppArgs,
        /// The component id.
        component: String,
    },
    /// Measure the per-request cost of a fresh instance (store + instantiate), without I/O.
    BenchInstantiate {
        #[command(flatten)]
        app: AppArgs,
        /// The component id (an HTTP component).
        component: String,
        /// Instances to create.
        #[arg(long, default_value_t = 20_000)]
        iterations: u32,
    },
}

#[derive(Args)]
struct AppArgs {
    /// The manifest.
    #[arg(long, default_value = "spin.toml")]
    manifest: PathBuf,
    /// A `.env` file with `SPIN_VARIABLE_*` values (default: `.env` beside the manifest).
    #[arg(long)]
    env_file: Option<PathBuf>,
    /// Open a new Redis connection for every `open`, exactly as Spin does (slower).
    #[arg(long)]
    spin_faithful: bool,
    /// Largest request body passed to a guest, in bytes; larger ones get a JSON 413.
    #[arg(long, default_value_t = seckill_host::app::DEFAULT_MAX_REQUEST_BODY)]
    max_request_body: u64,
    /// A PEM bundle of CA certificates to trust for `rediss://` and Postgres TLS, besides the
    /// system's (e.g. Amazon's RDS bundle). Real Spin 3.x reads only the system's store.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// A directory to keep compiled components in, keyed by their bytes and the engine's
    /// settings, so a restart skips compiling what it compiled before.
    #[arg(long)]
    compile_cache: Option<PathBuf>,
}

impl AppArgs {
    fn load(&self) -> Result<App> {
        let env_file = self.env_file.clone().unwrap_or_else(|| {
            self.manifest
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join(".env")
        });
        let options = Options {
            connection_mode: if self.spin_faithful {
                ConnectionMode::SpinFaithful
            } else {
                ConnectionMode::Pooled
            },
            providers: Providers::default().with_dotenv(&env_file)?,
            max_instances: None,
            max_request_body: Some(self.max_request_body),
            tls: match &self.tls_ca {
                Some(path) => seckill_host::tls::TlsTrust::with_extra_ca(path)?,
                None => seckill_host::tls::TlsTrust::system(),
            },
            compile_cache: self.compile_cache.clone(),
        };
        App::load(&self.manifest, options)
    }
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,wasmtime_cranelift=warn,cranelift=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Up { app, listen, no_cron } => {
                let app = Arc::new(app.load()?);
                let listener = tokio::net::TcpListener::bind(listen).await?;
                tracing::info!("serving {} on http://{}", app.name, listener.local_addr()?);
                let crons = if no_cron {
                    None
                } else {
                    Some(tokio::spawn(seckill_host::cron_trigger::run_schedules(app.clone())))
                };
                tokio::select! {
                    r = seckill_host::http_trigger::serve(app, listener) => r?,
                    _ = tokio::signal::ctrl_c() => tracing::info!("shutting down"),
                }
                if let Some(c) = crons {
                    c.abort();
                }
                Ok(())
            }
            Command::Check { app } => {
                let app = app.load()?;
                println!("ok: {} ({})", app.name, app.component_ids().collect::<Vec<_>>().join(", "));
                Ok(())
            }
            Command::Cron { app, component } => {
                let app = app.load()?;
                seckill_host::cron_trigger::run_once(&app, &component).await
            }
            Command::BenchInstantiate { app, component, iterations } => {
                let app = app.load()?;
                let per = seckill_host::bench::instantiate(&app, &component, iterations).await?;
                println!(
                    "instantiate {component}: {:.1} µs per fresh instance ({iterations} iterations, store + pre-instantiated component)",
                    per.as_secs_f64() * 1e6
                );
                Ok(())
            }
        }
    })
}
