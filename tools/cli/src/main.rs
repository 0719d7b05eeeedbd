//! `seckill-admin`: the operators' command line, over the admin HTTP API.
//!
//! It talks HTTP to `/admin/...` with the admin token rather than to Redis and Postgres
//! directly: the API is what an operator of a managed platform can reach, it works against any
//! deployment (local host, Spin, SpinKube, Fermyon Cloud), and every rule the API enforces
//! (validation, frozen stock, the registry) holds for the CLI too.

mod api;
mod render;

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{Map, Value, json};

use api::{Api, Failure};

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

Environment: SECKILL_URL and SECKILL_ADMIN_TOKEN stand in for --url and --token.
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
        /// Keep running it this long (drain and timeout-release; at most 60s).
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
        /// Refresh until interrupted (one GET per refresh: one read-only script in Redis).
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
}

/// `create` flags.
#[derive(Args)]
struct Create {
    /// The event id (1-64 of A-Z a-z 0-9 _ -).
    event: String,
    /// The item on sale.
    #[arg(long)]
    sku: String,
    /// The price of one unit, in the currency's smallest unit (1999 for 19.99).
    #[arg(long)]
    price: u64,
    /// The price's currency, lowercase ISO 4217 (eur).
    #[arg(long)]
    currency: String,
    /// Units for sale.
    #[arg(long)]
    stock: u64,
    /// Stock shards (1-256; default 8).
    #[arg(long)]
    shards: Option<u32>,
    /// Opens this long from now, on the server's clock (e.g. 90s, 5m).
    #[arg(long, value_parser = parse_duration, conflicts_with = "start_ms", required_unless_present = "start_ms")]
    start_in: Option<Duration>,
    /// Opens at this instant (Unix ms).
    #[arg(long)]
    start_ms: Option<u64>,
    /// Lasts this long (default 1h).
    #[arg(long, value_parser = parse_duration, conflicts_with = "end_ms")]
    duration: Option<Duration>,
    /// Closes at this instant (Unix ms).
    #[arg(long)]
    end_ms: Option<u64>,
    /// First come, first served, or a lottery.
    #[arg(long, value_enum)]
    admission: Option<Admission>,
    /// Admission tokens per unit (1-1000; default 10).
    #[arg(long)]
    multiplier: Option<u32>,
    /// Unpaid orders are released after this long (default 15m).
    #[arg(long, value_parser = parse_duration)]
    payment_timeout: Option<Duration>,
    /// Prechecks per second per user (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    user_limit: Option<(f64, u64)>,
    /// Buys per second for the whole event (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    buy_limit: Option<(f64, u64)>,
    /// Leading zero bits of the admission's proof of work (0-24; default 18, 0 = none).
    #[arg(long)]
    pow_difficulty: Option<u32>,
    /// Create it paused.
    #[arg(long)]
    paused: bool,
    /// Warm it up right after.
    #[arg(long)]
    warmup: bool,
}

/// `patch` flags: at least one change.
#[derive(Args)]
struct Patch {
    /// The event id.
    event: String,
    /// Pause the sale (precheck and buy answer sale_paused).
    #[arg(long, conflicts_with = "resume")]
    pause: bool,
    /// Resume the sale.
    #[arg(long)]
    resume: bool,
    /// Move the end to this long from now (server clock).
    #[arg(long, value_parser = parse_duration)]
    end_in: Option<Duration>,
    /// Prechecks per second per user (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    user_limit: Option<(f64, u64)>,
    /// Buys per second for the whole event (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    buy_limit: Option<(f64, u64)>,
    /// Lifetime of purchase tokens handed out from now on.
    #[arg(long, value_parser = parse_duration)]
    purchase_token_ttl: Option<Duration>,
    /// Expected drain throughput (orders/s), for the buyers' wait estimates.
    #[arg(long)]
    drain_rate: Option<u64>,
    /// Gray release: the share of users (0-100 %) who may pass precheck.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    gray: Option<u32>,
    /// Limits counted but not enforced: gray, user, global (comma-separated; "" for none).
    #[arg(long, value_delimiter = ',', num_args = 0..)]
    shadow: Option<Vec<String>>,
}

/// `deny` flags: at least one user or address.
#[derive(Args)]
struct Deny {
    /// The event id.
    event: String,
    /// A user id (repeat for more).
    #[arg(long = "user")]
    users: Vec<String>,
    /// A client IP address or CIDR range, e.g. 203.0.113.0/24 (repeat for more).
    #[arg(long = "addr")]
    addrs: Vec<String>,
}

/// Admission modes.
#[derive(Clone, Copy, ValueEnum)]
enum Admission {
    /// First come, first served.
    Fcfs,
    /// Registration, then a draw.
    Lottery,
}

/// The scheduled jobs.
#[derive(Clone, Copy, ValueEnum)]
enum Job {
    /// Queued orders into Postgres.
    Drain,
    /// Expire unpaid orders past their deadline; their units go back on sale.
    TimeoutRelease,
    /// Check the books across Redis and Postgres, and repair what is safe.
    Reconcile,
}

impl Job {
    fn name(self) -> &'static str {
        match self {
            Job::Drain => "drain",
            Job::TimeoutRelease => "timeout-release",
            Job::Reconcile => "reconcile",
        }
    }
}

/// `90s`, `5m`, `1h`, `250ms`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 90s, 5m, 1h, 250ms"))?;
    let ms = match unit {
        "ms" => n,
        "" | "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        _ => return Err(format!("`{unit}` is not a unit: use ms, s, m or h")),
    };
    Ok(Duration::from_millis(ms))
}

/// `RATE,BURST`, e.g. `1,5` or `0.5,10`.
fn parse_limit(s: &str) -> Result<(f64, u64), String> {
    let (rate, burst) = s.split_once(',').ok_or("give RATE,BURST, e.g. 1,5")?;
    let rate: f64 = rate
        .trim()
        .parse()
        .map_err(|_| format!("`{rate}` is not a rate"))?;
    let burst: u64 = burst
        .trim()
        .parse()
        .map_err(|_| format!("`{burst}` is not a whole number"))?;
    Ok((rate, burst))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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

/// Prints `value` as JSON or as `human` renders it.
fn show(cli: &Cli, value: &Value, human: impl FnOnce(&Value) -> String) {
    if cli.json {
        println!("{value}");
    } else {
        println!("{}", human(value));
    }
}

fn run(cli: &Cli, api: &Api) -> Result<(), Failure> {
    let event_path = |id: &str| format!("/admin/events/{id}");
    match &cli.command {
        Command::Events { archived } => {
            let mut list = api.get("/admin/events")?;
            if let Some(events) = list["events"].as_array_mut() {
                events.retain(|e| e["archived"].as_bool().unwrap_or(false) == *archived);
            }
            show(cli, &list, |v| render::events(v, api.server_now_ms().ok()));
        }
        Command::Archive { event } | Command::Unarchive { event } => {
            let archive = matches!(cli.command, Command::Archive { .. });
            let method = if archive { "POST" } else { "DELETE" };
            let done = api.send(method, &format!("{}/archive", event_path(event)), None)?;
            show(cli, &done, |_| {
                let verb = if archive { "archived" } else { "unarchived" };
                format!("{verb} {event}")
            });
        }
        Command::Create(c) => {
            let now = api.server_now_ms()?;
            let start = c
                .start_ms
                .unwrap_or_else(|| now + ms(c.start_in.unwrap_or_default()));
            let end = c
                .end_ms
                .unwrap_or_else(|| start + ms(c.duration.unwrap_or(Duration::from_secs(3600))));
            let body = create_body(c, start, end);
            let created = api.send("PUT", &event_path(&c.event), Some(&body))?;
            let mut out = json!({ "event_id": c.event, "created": created["created"], "start_ms": start, "end_ms": end });
            if c.warmup {
                out["warmup"] = progress(cli, "warming up", || {
                    api.send("POST", &format!("{}/warmup", event_path(&c.event)), None)
                })?;
            }
            show(cli, &out, |v| render::created(v, &c.sku, c.stock, now));
        }
        Command::Warmup { event } => {
            let warmed = progress(cli, "warming up", || {
                api.send("POST", &format!("{}/warmup", event_path(event)), None)
            })?;
            show(cli, &warmed, |v| {
                format!(
                    "warmed up {event}: {} units over {} shards",
                    render::num(&v["stock"]),
                    v["shards"]
                )
            });
        }
        Command::Patch(p) => {
            let mut body = Map::new();
            if p.pause || p.resume {
                body.insert("enabled".into(), json!(p.resume));
            }
            if let Some(d) = p.end_in {
                body.insert("end_ms".into(), json!(api.server_now_ms()? + ms(d)));
            }
            if let Some((rate, burst)) = p.user_limit {
                body.insert("user_rate".into(), json!(rate));
                body.insert("user_burst".into(), json!(burst));
            }
            if let Some((rate, burst)) = p.buy_limit {
                body.insert("buy_rate".into(), json!(rate));
                body.insert("buy_burst".into(), json!(burst));
            }
            if let Some(d) = p.purchase_token_ttl {
                body.insert("purchase_token_ttl_ms".into(), json!(ms(d)));
            }
            if let Some(r) = p.drain_rate {
                body.insert("drain_rate".into(), json!(r));
            }
            if let Some(g) = p.gray {
                body.insert("gray_percent".into(), json!(g));
            }
            if let Some(limits) = &p.shadow {
                let limits: Vec<&String> = limits.iter().filter(|l| !l.is_empty()).collect();
                body.insert("shadow".into(), json!(limits));
            }
            if body.is_empty() {
                return Err(Failure::Usage(
                    "patch needs a change: --pause, --resume, --end-in, --user-limit, ...".into(),
                ));
            }
            let body = Value::Object(body);
            api.send("PATCH", &event_path(&p.event), Some(&body))?;
            show(cli, &json!({ "event_id": p.event, "updated": body }), |v| {
                format!("updated {}: {}", p.event, render::fields(&v["updated"]))
            });
        }
        Command::Deny(d) => {
            if d.users.is_empty() && d.addrs.is_empty() {
                return Err(Failure::Usage("deny needs --user or --addr".into()));
            }
            let body = json!({ "users": d.users, "addrs": d.addrs });
            let denied = api.send(
                "POST",
                &format!("{}/deny", event_path(&d.event)),
                Some(&body),
            )?;
            show(cli, &denied, |v| {
                format!("denied {} on {}", render::num(&v["denied"]), d.event)
            });
        }
        Command::Draw { event } => {
            let drawn = progress(cli, "drawing", || {
                api.send("POST", &format!("{}/draw", event_path(event)), None)
            })?;
            show(cli, &drawn, |v| {
                format!("drawn {event}: {} admitted", render::num(&v["admitted"]))
            });
        }
        Command::Job { job, for_, event } => {
            let mut query = Vec::new();
            if let Some(d) = for_ {
                query.push(format!("for_ms={}", ms(*d)));
            }
            if let Some(e) = event {
                query.push(format!("event={e}"));
            }
            let mut path = format!("/admin/jobs/{}", job.name());
            if !query.is_empty() {
                path = format!("{path}?{}", query.join("&"));
            }
            let extra = for_.unwrap_or_default();
            let report = progress(cli, job.name(), || api.send_long("POST", &path, extra))?;
            show(cli, &report, |v| render::job(job.name(), v));
        }
        Command::Status {
            event,
            watch,
            interval,
            count,
        } => {
            let path = event_path(event);
            if !watch {
                let status = api.get(&path)?;
                show(cli, &status, |v| {
                    render::status(event, v, None, api.server_now_ms().ok())
                });
                return Ok(());
            }
            watch_status(cli, api, event, &path, *interval, *count)?;
        }
        Command::Audit { event, limit } => {
            let mut path = format!("/admin/audit?limit={limit}");
            if let Some(e) = event {
                path = format!("{path}&event={e}");
            }
            let records = api.get(&path)?;
            show(cli, &records, |v| {
                render::audit(v, api.server_now_ms().ok())
            });
        }
        Command::Versions { event, limit } => {
            let listed = api.get(&format!("{}/versions?limit={limit}", event_path(event)))?;
            show(cli, &listed, |v| {
                render::versions(v, api.server_now_ms().ok())
            });
        }
        Command::Rollback { event, version } => {
            let body = json!({ "version": version });
            let done = api.send(
                "POST",
                &format!("{}/rollback", event_path(event)),
                Some(&body),
            )?;
            show(cli, &done, |_| {
                format!("rolled {event} back to version {version}")
            });
        }
        Command::GlobalLimit { rate, burst } => {
            let limit = match (rate, burst) {
                (Some(rate), Some(burst)) => api.send(
                    "PUT",
                    "/admin/limits/global",
                    Some(&json!({ "rate": rate, "burst": burst })),
                )?,
                _ => api.get("/admin/limits/global")?,
            };
            show(cli, &limit, render::global_limit);
        }
        Command::Payments {
            event,
            refunds,
            limit,
        } => {
            let status = if *refunds { "refund_due" } else { "" };
            let path = format!("/admin/events/{event}/payments?status={status}&limit={limit}");
            let listed = api.get(&path)?;
            show(cli, &listed, render::payments);
        }
    }
    Ok(())
}

/// `status --watch`: one GET per interval; the screen is redrawn on a terminal, frames are
/// appended otherwise. A passing outage is shown and waited out; other failures end it.
fn watch_status(
    cli: &Cli,
    api: &Api,
    event: &str,
    path: &str,
    interval: Duration,
    count: Option<u64>,
) -> Result<(), Failure> {
    let tty = std::io::stdout().is_terminal();
    let mut previous: Option<(std::time::Instant, Value)> = None;
    let mut n = 0;
    loop {
        n += 1;
        match api.get(path) {
            Ok(status) => {
                let now = std::time::Instant::now();
                if cli.json {
                    println!("{status}");
                } else {
                    let rates = previous.as_ref().map(|(t, p)| (now.duration_since(*t), p));
                    let frame = render::status(event, &status, rates, api.server_now_ms().ok());
                    if tty {
                        print!(
                            "\x1b[H\x1b[2J{frame}\n\n(refreshing every {interval:?}; Ctrl-C stops)\n"
                        );
                    } else {
                        println!("{frame}\n");
                    }
                }
                previous = Some((now, status));
            }
            Err(e) if e.exit_code() == 6 => {
                eprintln!("{e} (retrying)");
            }
            Err(e) => return Err(e),
        }
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

/// The `PUT` body of `create`: only the fields given, the server's defaults for the rest.
fn create_body(c: &Create, start: u64, end: u64) -> Value {
    let mut body = json!({
        "sku": c.sku, "unit_amount": c.price, "currency": c.currency,
        "stock": c.stock, "start_ms": start, "end_ms": end,
    });
    let mut set = |k: &str, v: Value| body[k] = v;
    if let Some(s) = c.shards {
        set("shards", json!(s));
    }
    if let Some(a) = c.admission {
        set(
            "admission_mode",
            json!(match a {
                Admission::Fcfs => "fcfs",
                Admission::Lottery => "lottery",
            }),
        );
    }
    if let Some(m) = c.multiplier {
        set("admission_multiplier", json!(m));
    }
    if let Some(d) = c.pow_difficulty {
        set("pow_difficulty", json!(d));
    }
    if let Some(t) = c.payment_timeout {
        set("payment_timeout_s", json!(t.as_secs()));
    }
    if let Some((rate, burst)) = c.user_limit {
        set("user_rate", json!(rate));
        set("user_burst", json!(burst));
    }
    if let Some((rate, burst)) = c.buy_limit {
        set("buy_rate", json!(rate));
        set("buy_burst", json!(burst));
    }
    if c.paused {
        set("enabled", json!(false));
    }
    body
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Runs `f`, showing a spinner with the elapsed time on stderr when it is a terminal.
fn progress<T>(cli: &Cli, label: &str, f: impl FnOnce() -> T) -> T {
    if cli.json || !std::io::stderr().is_terminal() {
        return f();
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let start = std::time::Instant::now();
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let mut i = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                eprint!(
                    "\r{} {label}… {:.1}s ",
                    frames[i % frames.len()],
                    start.elapsed().as_secs_f64()
                );
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            eprint!("\r\x1b[2K");
        });
        let out = f();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_limits_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("5 weeks").is_err());
        assert!(parse_duration("m").is_err());
        assert_eq!(parse_limit("0.5, 10"), Ok((0.5, 10)));
        assert!(parse_limit("1").is_err());
    }

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
