//! `seckill-admin`: the operators' command line, over the admin HTTP API.
//!
//! It talks HTTP to `/admin/...` with the admin token rather than to Redis and Postgres
//! directly: the API is what an operator of a managed platform can reach, it works against any
//! deployment (local host, Spin, SpinKube, Fermyon Cloud), and every rule the API enforces
//! (validation, frozen stock, the registry) holds for the CLI too. One command makes no call:
//! `buyer-token` signs a buyer's sign-in token with a key held on this machine (a local or test
//! stack's), to try a sale by hand.

mod api;
mod commands;
mod render;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::json;

use api::{Api, Failure};
use commands::controls::{Deny, Patch};
use commands::create::Create;
use commands::long_running::Job;
use commands::webhooks::Webhooks;
use commands::{
    Output, buyer_token, controls, create, events, history, long_running, parse_duration, payments,
    status, webhooks, whoami,
};

/// Exit codes, documented in `--help`.
const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  unexpected: the server failed (500) or answered something this tool does not understand
  2  usage: bad flags or arguments (nothing was sent)
  3  unauthorized: wrong or missing admin token, or a viewer's token for a change
  4  not found: no such event (or route)
  5  refused: the server refused the change (invalid config, conflict, bad deny list, ...)
  6  unavailable: the server or its Redis/Postgres cannot be reached now; try again later

Environment: SECKILL_URL and SECKILL_ADMIN_TOKEN stand in for --url and --token;
buyer-token reads SPIN_VARIABLE_JWT_SECRET (or .data/secrets.env, or --secrets FILE).
With --json, results (and errors, as {\"error\":{\"code\",\"message\"}}) go to stdout as JSON,
one document per line; `status --watch --json` prints one line per refresh.";

/// Run a flash sale from the terminal: create and warm up events, flip switches, deny users,
/// draw the lottery, run the jobs, watch an event live, and read who changed what.
#[derive(Parser)]
#[command(name = "seckill-admin", version, after_help = EXIT_CODES)]
struct Cli {
    /// Base URL of the deployment.
    #[arg(
        long,
        env = "SECKILL_URL",
        default_value = "http://127.0.0.1:3000",
        global = true,
        help_heading = "Connection"
    )]
    url: String,
    /// An operator's secret (an entry of the `operators` variable; a viewer's reads only).
    #[arg(
        long,
        env = "SECKILL_ADMIN_TOKEN",
        hide_env_values = true,
        global = true,
        help_heading = "Connection"
    )]
    token: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true, help_heading = "Output")]
    json: bool,
    /// How long one request may take (e.g. 500ms, 10s, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration, global = true, help_heading = "Connection")]
    timeout: Duration,
    #[command(subcommand)]
    command: Command,
}

/// What to do.
#[derive(Subcommand)]
enum Command {
    /// List the events (the registry of every Redis node), archived ones left out.
    Events {
        /// List the archived events instead.
        #[arg(long)]
        archived: bool,
    },
    /// Create an event, or update one (stock and shards are frozen once warmed up).
    Create(Create),
    /// Write an event's stock into its shards: once, before the sale opens.
    Warmup {
        /// The event id.
        event: String,
    },
    /// Live switches and limits of an event.
    Patch(Patch),
    /// Keep users or client address ranges out of an event.
    Deny(Deny),
    /// Archive an ended event: it leaves the default lists (console and `events`).
    Archive {
        /// The event id.
        event: String,
    },
    /// Bring an archived event back into the default lists.
    Unarchive {
        /// The event id.
        event: String,
    },
    /// Run the lottery draw of an event (admits multiplier × stock registrants at random).
    Draw {
        /// The event id.
        event: String,
    },
    /// Run a scheduled job now.
    Job {
        /// Which job.
        job: Job,
        /// Keep running it this long (drain, timeout-release and deliver-events; at most 60s).
        #[arg(long = "for", value_parser = parse_duration)]
        for_: Option<Duration>,
        /// reconcile: this event only.
        #[arg(long)]
        event: Option<String>,
    },
    /// An event's state: units left, accepted, queued, drained, released, dead letters, shards.
    Status {
        /// The event id.
        event: String,
        /// Refresh until interrupted (one GET per refresh: a read of the master, then one
        /// read-only script per shard).
        #[arg(long, short)]
        watch: bool,
        /// Time between refreshes.
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        interval: Duration,
        /// Stop after this many refreshes (with --watch).
        #[arg(long)]
        count: Option<u64>,
    },
    /// Who changed what: the latest operators' writes, newest first.
    Audit {
        /// This event's only.
        #[arg(long)]
        event: Option<String>,
        /// How many (1-200).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// The config center: an event's configuration versions, newest first, each with what it
    /// changed (field: before → after), who and when.
    Versions {
        /// The event id.
        event: String,
        /// How many (1-200).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Apply an earlier version of an event's configuration again (a new version).
    Rollback {
        /// The event id.
        event: String,
        /// The version to apply (see `versions`).
        version: i64,
    },
    /// The operator and role the token is (a viewer may only read).
    Whoami,
    /// The shop's endpoints for the order events (landed, paid, expired, refunded), signed as
    /// Standard Webhooks say.
    #[command(subcommand)]
    Webhooks(Webhooks),
    /// The global bucket across events: show it, or set it with --rate and --burst (rate 0
    /// switches it off).
    GlobalLimit {
        /// Prechecks per second across every live event.
        #[arg(long, requires = "burst")]
        rate: Option<f64>,
        /// Its bucket's capacity.
        #[arg(long, requires = "rate")]
        burst: Option<u64>,
    },
    /// An event's payments, newest first: `--refunds` lists those owing a refund (confirmed
    /// after the deadline or for another amount), to refund at the provider.
    Payments {
        /// The event id.
        event: String,
        /// Only the payments owing a refund.
        #[arg(long)]
        refunds: bool,
        /// How many (1-500).
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Sign a buyer's sign-in token (an HS256 JWT) for USER with the deployment's JWT key, for
    /// trying a sale by hand on a local or test stack: prints the token (no request is made,
    /// no admin token needed). The key is --secrets FILE's SPIN_VARIABLE_JWT_SECRET, else that
    /// variable in the environment, else the local stack's .data/secrets.env (scripts/up.sh
    /// writes it). Whoever holds the key can be any buyer: never point this at production's.
    BuyerToken {
        /// The buyer's user id (the token's `sub`: 1-128 printable ASCII, no spaces).
        user: String,
        /// How long the token is valid (at most 24h).
        #[arg(long, default_value = "1h", value_parser = parse_duration)]
        valid_for: Duration,
        /// An env file with a SPIN_VARIABLE_JWT_SECRET=… line.
        #[arg(long, value_name = "FILE")]
        secrets: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Signed here, with no call to the server: no admin token needed.
    if let Command::BuyerToken { .. } = cli.command {
        return match run_offline(&cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&cli, &e),
        };
    }
    let Some(token) = cli.token.clone() else {
        eprintln!("error: no admin token: pass --token or set SECKILL_ADMIN_TOKEN");
        return ExitCode::from(2);
    };
    let api = match Api::new(&cli.url, &token, cli.timeout) {
        Ok(api) => api,
        Err(e) => return fail(&cli, &e),
    };
    match run(&cli, &api) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&cli, &e),
    }
}

/// Reports a failure (stderr, or stdout as JSON with --json) and turns it into the exit code.
fn fail(cli: &Cli, e: &Failure) -> ExitCode {
    if cli.json {
        println!(
            "{}",
            json!({ "error": { "code": e.code(), "message": e.to_string() } })
        );
    } else {
        eprintln!("error: {e}");
    }
    ExitCode::from(e.exit_code())
}

/// The commands that make no call to the server.
fn run_offline(cli: &Cli) -> Result<(), Failure> {
    match &cli.command {
        Command::BuyerToken {
            user,
            valid_for,
            secrets,
        } => buyer_token::buyer_token(
            Output { json: cli.json },
            user,
            *valid_for,
            secrets.as_deref(),
        ),
        _ => Err(Failure::Usage("this command needs the admin API".into())),
    }
}

/// One line per command: each reads its flags, makes its call and prints the answer.
fn run(cli: &Cli, api: &Api) -> Result<(), Failure> {
    let out = Output { json: cli.json };
    match &cli.command {
        Command::Events { archived } => events::list(out, api, *archived),
        Command::Create(c) => create::create(out, api, c),
        Command::Warmup { event } => create::warmup(out, api, event),
        Command::Patch(p) => controls::patch(out, api, p),
        Command::Deny(d) => controls::deny(out, api, d),
        Command::Archive { event } => events::set_archived(out, api, event, true),
        Command::Unarchive { event } => events::set_archived(out, api, event, false),
        Command::Draw { event } => long_running::draw(out, api, event),
        Command::Job { job, for_, event } => {
            long_running::job(out, api, *job, *for_, event.as_deref())
        }
        Command::Status {
            event,
            watch: false,
            ..
        } => status::once(out, api, event),
        Command::Status {
            event,
            watch: true,
            interval,
            count,
        } => status::watch(out, api, event, *interval, *count),
        Command::Audit { event, limit } => history::audit(out, api, event.as_deref(), *limit),
        Command::Versions { event, limit } => history::versions(out, api, event, *limit),
        Command::Rollback { event, version } => history::rollback(out, api, event, *version),
        Command::GlobalLimit { rate, burst } => controls::global_limit(out, api, *rate, *burst),
        Command::Whoami => whoami::whoami(out, api),
        Command::Webhooks(what) => webhooks::run(out, api, what),
        Command::Payments {
            event,
            refunds,
            limit,
        } => payments::list(out, api, event, *refunds, *limit),
        Command::BuyerToken { .. } => run_offline(cli),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_documents_the_exit_codes() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        for code in [
            "0  done",
            "3  unauthorized",
            "4  not found",
            "6  unavailable",
        ] {
            assert!(help.contains(code), "{code}");
        }
        Cli::command().debug_assert();
    }
}
