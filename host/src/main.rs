//! `seckill-host`: the command line of the local Spin-compatible host.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use seckill_host::manifest::expressions::Providers;
use seckill_host::runtime::overload::QueueControl;
use seckill_host::trigger::http::HttpTrigger;
use seckill_host::trigger::metrics::Metrics;
use seckill_host::trigger::serve::ServeOptions;
use seckill_host::{App, ConnectionMode, Options};
use tokio_util::sync::CancellationToken;

/// glibc malloc is a large share of the host's CPU on the buy path (perf): every request allocates
/// and frees a store, WASI resources and header maps on whichever worker thread runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs seckill's Spin app locally, like `spin up`.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// How the host logs to stderr: `text`, or `json` (one object per line).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
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
        #[command(flatten)]
        serve: ServeArgs,
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
    /// Largest request body passed to a guest, in bytes (default: the largest the app takes);
    /// larger ones get a 413.
    #[arg(long, default_value_t = seckill_host::app::DEFAULT_MAX_REQUEST_BODY)]
    max_request_body: u64,
    /// A request body must arrive whole within this of its request head, or the request gets a
    /// 408; it is read before the request takes an instance.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    body_timeout: Duration,
    /// Request instances alive at once (the pooling allocator's slots; default: 64 per core,
    /// where Spin's `SPIN_MAX_INSTANCE_COUNT` is 1,000 on any machine).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_instances: Option<u32>,
    /// Queue control: once a request class's queue has stood for `--queue-interval`, a request
    /// of that class waits at most this for an instance before it is answered `503` with
    /// `Retry-After` (default: `QueueControl::DEFAULT`'s target).
    #[arg(long, value_parser = parse_duration)]
    queue_target: Option<Duration>,
    /// Queue control: how long a queue may stand before the host counts itself overloaded, and
    /// the longest a request waits for an instance until then, a burst (default:
    /// `QueueControl::DEFAULT`'s interval).
    #[arg(long, value_parser = parse_duration)]
    queue_interval: Option<Duration>,
    /// A PEM bundle of CA certificates to trust for `rediss://` and Postgres TLS, besides the
    /// system's (e.g. Amazon's RDS bundle). Real Spin 3.x reads only the system's store.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// A directory to keep compiled components in, keyed by their bytes and the engine's
    /// settings, so a restart skips compiling what it compiled before.
    #[arg(long)]
    compile_cache: Option<PathBuf>,
    /// Spin's runtime configuration file (`spin up --runtime-config-file`). The host reads its
    /// `[outbound_networking] block_networks` and `[[client_tls]]`; any other table is refused,
    /// not ignored.
    #[arg(long)]
    runtime_config_file: Option<PathBuf>,
    /// `NAME:ADDRESS`: outbound HTTP to NAME connects to ADDRESS instead of looking it up, as
    /// curl's --resolve (the local stand-in for a DNS record: a test's server on loopback
    /// reached by a public name). The blocked networks still apply. Repeatable.
    #[arg(long, value_name = "NAME:ADDRESS", value_parser = parse_resolve)]
    resolve: Vec<(String, std::net::IpAddr)>,
}

/// How `up` serves: limits, timeouts, shutdown, metrics. Durations are `500ms`, `30s`, `2m` or
/// a number of seconds.
#[derive(Args)]
struct ServeArgs {
    /// A request head must arrive whole within this of its first byte.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,
    /// A keep-alive connection with no request for this long is closed (above a load
    /// balancer's own idle timeout: AWS's ALB keeps 60 s).
    #[arg(long, default_value = "75s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Connections open at once; more wait in the listen backlog while idle keep-alive
    /// connections are closed to make room.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Connections open at once from one peer address (but a trusted peer); more are closed as
    /// they arrive.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_peer: u32,
    /// The peers exempt from --max-connections-per-peer, as CIDR ranges separated by commas:
    /// the proxies in front (a load balancer is one peer for all its clients). Loopback by
    /// default (a proxy on the same machine); `none` for no exemption.
    #[arg(long, default_value = "127.0.0.0/8,::1/128", value_parser = parse_peers)]
    trusted_peers: Peers,
    /// The most a request head may take, in bytes (request line and headers): past it, `431`.
    #[arg(long, default_value_t = 32 << 10, value_parser = clap::value_parser!(u64).range(8192..))]
    max_head_bytes: u64,
    /// A response write that makes no progress for this long (the client stopped reading)
    /// ends the connection.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    write_timeout: Duration,
    /// On SIGTERM or SIGINT, how long requests and cron runs in progress may take to finish.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (off unless given).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Say on every answer where its time at the host went (`Server-Timing: queue;dur=…,
    /// host;dur=…`, and `accept;dur=…` on a connection's first), not only on shed ones. Off by
    /// default: Spin sends no such header.
    #[arg(long)]
    server_timing: bool,
}

/// CIDR ranges.
#[derive(Clone)]
struct Peers(Vec<ipnet::IpNet>);

/// `a.b.c.d/n,v6/n,…`, or `none`.
fn parse_peers(text: &str) -> Result<Peers, String> {
    if text == "none" {
        return Ok(Peers(Vec::new()));
    }
    text.split(',')
        .map(|n| n.trim().parse().map_err(|e| format!("`{n}`: {e}")))
        .collect::<Result<_, _>>()
        .map(Peers)
}

/// `500ms`, `30s`, `2m`, or a number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |i| text.split_at(i));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (500ms, 30s, 2m)"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("`{text}`: the unit is ms, s or m")),
    }
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
            max_instances: self.max_instances,
            max_request_body: Some(self.max_request_body),
            body_timeout: Some(self.body_timeout),
            queue_control: QueueControl {
                target: self.queue_target.unwrap_or(QueueControl::DEFAULT.target),
                interval: self
                    .queue_interval
                    .unwrap_or(QueueControl::DEFAULT.interval),
            },
            tls: match &self.tls_ca {
                Some(path) => seckill_host::factors::tls::TlsTrust::with_extra_ca(path)?,
                None => seckill_host::factors::tls::TlsTrust::system(),
            },
            compile_cache: self.compile_cache.clone(),
            resolve: std::sync::Arc::new(self.resolve.iter().cloned().collect()),
            ..Options::default()
        };
        let options = match &self.runtime_config_file {
            Some(path) => options.with_runtime_config_file(path)?,
            None => options,
        };
        App::load(&self.manifest, options)
    }
}

/// `NAME:ADDRESS` of `--resolve` (an IPv6 address in brackets or not).
fn parse_resolve(raw: &str) -> Result<(String, std::net::IpAddr), String> {
    let (name, address) = raw
        .split_once(':')
        .ok_or_else(|| format!("{raw:?} is not NAME:ADDRESS"))?;
    let address = address.trim_start_matches('[').trim_end_matches(']');
    let ip = address
        .parse()
        .map_err(|e| format!("{address:?} is not an IP address: {e}"))?;
    if name.is_empty() {
        return Err(format!("{raw:?} names no host"));
    }
    Ok((name.to_ascii_lowercase(), ip))
}

fn main() -> Result<()> {
    use tracing_subscriber::prelude::*;
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,wasmtime_cranelift=warn,cranelift=warn".into());
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log = match cli.log_format {
        LogFormat::Text => log.with_ansi(std::io::stderr().is_terminal()).boxed(),
        // One object per line: timestamp, level, message, the event's fields, target.
        LogFormat::Json => log.json().flatten_event(true).boxed(),
    };
    // The guests' runtime (connections are served on a front runtime of their own:
    // `seckill_host::trigger::serve`). Admitted requests arrive from the front through the shared queue,
    // which a busy worker looks at only every `global_queue_interval` tasks of its own (61 by
    // default): looking more often starts a request that got its slot sooner.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .global_queue_interval(8)
        .build()?;
    // The traces' batch processor runs on it.
    let traces = {
        let _in = runtime.enter();
        seckill_host::telemetry::layer()?
    };
    tracing_subscriber::registry()
        .with(log.with_filter(filter))
        .with(traces)
        .init();
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Up {
                app,
                listen,
                no_cron,
                serve,
            } => up(app.load()?, listen, no_cron, serve).await,
            Command::Check { app } => {
                let app = app.load()?;
                println!("ok: {} ({})", app.name, app.component_ids().collect::<Vec<_>>().join(", "));
                Ok(())
            }
            Command::Cron { app, component } => {
                let app = app.load()?;
                seckill_host::trigger::cron::run_once(&app, &component).await
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
    });
    seckill_host::telemetry::shutdown();
    // A task the grace period cut off must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Connections the kernel completes and holds for `accept` (capped by `net.core.somaxconn`):
/// a spike's connections arrive faster than any accept loop takes them, and a full queue drops
/// a client's handshake (it retries after a second or more). tokio's default is 1,024.
const LISTEN_BACKLOG: u32 = 4096;

/// The HTTP listener on `addr`, with [`LISTEN_BACKLOG`].
fn listen_on(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket.listen(LISTEN_BACKLOG)?)
}

/// `up`: serves until SIGTERM or SIGINT, then stops accepting, lets requests and cron runs in
/// progress finish within the grace period, and returns.
async fn up(app: App, listen: SocketAddr, no_cron: bool, args: ServeArgs) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let app = Arc::new(app);
    let trigger: &HttpTrigger = (*app).as_ref();
    let instances = trigger.runtime().clone();
    let listener = listen_on(listen)?;
    let metrics = match args.metrics_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            tracing::info!("metrics on http://{}/metrics", listener.local_addr()?);
            let metrics = Arc::new(Metrics::new(instances.clone()));
            tokio::spawn(seckill_host::trigger::metrics::serve(
                metrics.clone(),
                listener,
            ));
            Some(metrics)
        }
        None => None,
    };
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let shutdown = CancellationToken::new();
    let crons = (!no_cron).then(|| {
        tokio::spawn(seckill_host::trigger::cron::run_schedules_until(
            app.clone(),
            shutdown.clone(),
            metrics.clone(),
        ))
    });
    let options = ServeOptions {
        header_timeout: args.header_timeout,
        idle_timeout: args.idle_timeout,
        max_connections: args.max_connections,
        max_connections_per_peer: args.max_connections_per_peer,
        trusted_peers: args.trusted_peers.0,
        max_head_bytes: usize::try_from(args.max_head_bytes).unwrap_or(usize::MAX),
        write_timeout: args.write_timeout,
        server_timing: args.server_timing,
        metrics,
    };
    tracing::info!("serving {} on http://{}", app.name, listener.local_addr()?);
    let mut server = tokio::spawn(seckill_host::trigger::serve::serve(
        app.clone(),
        listener,
        options,
        shutdown.clone(),
    ));
    let signal = tokio::select! {
        _ = sigterm.recv() => "SIGTERM",
        _ = sigint.recv() => "SIGINT",
        ended = &mut server => return ended?,
    };
    let grace = args.shutdown_grace;
    tracing::info!(
        "{signal}: shutting down, up to {grace:?} for the requests and cron runs in progress"
    );
    shutdown.cancel();
    let drained = async {
        server.await??;
        if let Some(crons) = crons {
            crons.await?;
        }
        // A guest whose client went away, or whose response is still streaming, holds an
        // instance until it returns.
        seckill_host::trigger::serve::instances_done(&instances).await;
        anyhow::Ok(())
    };
    match tokio::time::timeout(grace, drained).await {
        Ok(drained) => {
            drained?;
            tracing::info!("shut down cleanly");
        }
        Err(_) => tracing::warn!("grace period over: cutting off what is still in progress"),
    }
    Ok(())
}
