//! Every Redis command a Lua script runs touches only keys the script was given in KEYS.
//!
//! Redis documents that a script must access only the keys passed as KEYS (so that the server
//! can tell, before running it, which keys and which slot it uses). Redis itself does not check
//! this on a single node, but others do: Dragonfly refuses a script that touches an undeclared
//! key, and Upstash then runs it under a global lock. A key built inside the script (from ARGV,
//! say) works here and breaks there, so this test proves there is none.
//!
//! How: MONITOR records every command while a sale runs through the real app (real host, real
//! `.wasm`, real Redis and PostgreSQL) along every path that reaches Redis, so that every script
//! in `crates/domain/lua/` runs at least once. MONITOR shows the commands a script runs right after
//! the EVALSHA/EVAL that ran it (scripts are atomic: nothing interleaves), as `[0 lua]` lines.
//! For each of those, `COMMAND GETKEYS` asks Redis which of its arguments are keys, and each
//! such key must be one of the KEYS of the enclosing call. A probe script with one undeclared
//! key runs too, and must be caught: the check cannot pass by seeing nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use reqwest::Method;
use seckill_domain::scripts;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars, jwt_for, repo_root};
use serde_json::{Value, json};

/// The user whose order Postgres refuses for good (a CHECK constraint added by the test): the
/// drain records the failure (`drain_failed`), retries it, then dead-letters it, and the drift
/// this leaves makes reconcile page through the orders (`reconcile_orders`).
const REFUSED_USER: &str = "keys-u1";

/// A script the test itself runs under MONITOR, as a positive control: it declares one key and
/// reads another, which the check must report (then it is set aside), or the check is blind.
const PROBE_SOURCE: &str =
    "redis.call('SET', KEYS[1], '1') return redis.call('GET', KEYS[1] .. ':undeclared')";

/// The one key the probe declares.
const PROBE_KEY: &str = "{sk:probe}:declared";

/// The name the probe's calls get.
const PROBE: &str = "<probe>";

/// `redis-cli MONITOR` writing to a file, keeping every line: unlike
/// `seckill_testkit::Monitor`, also the `[0 lua]` lines of commands run by scripts.
struct FullMonitor {
    /// The `redis-cli` process.
    child: Child,
    /// Where it writes.
    path: PathBuf,
    /// Holds the file's directory until the monitor is dropped.
    _dir: tempfile::TempDir,
}

impl FullMonitor {
    /// Starts monitoring `redis` and waits until MONITOR answered OK.
    fn start(redis: &RedisServer) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("monitor.log");
        let mut child = Command::new("redis-cli")
            .args(["-p", &redis.port.to_string(), "monitor"])
            .stdout(std::fs::File::create(&path)?)
            .spawn()
            .context("starting `redis-cli monitor` (is redis-cli on PATH? run scripts/setup.sh)")?;
        let started = Instant::now();
        while !std::fs::read_to_string(&path).is_ok_and(|s| s.starts_with("OK")) {
            if started.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                let _ = child.wait();
                bail!("redis-cli monitor did not answer OK within 5 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(FullMonitor {
            child,
            path,
            _dir: dir,
        })
    }

    /// Stops monitoring and returns the lines recorded after the OK.
    fn stop(mut self) -> Result<Vec<String>> {
        // redis-cli flushes every line; give the last ones time to arrive.
        std::thread::sleep(Duration::from_millis(300));
        let _ = self.child.kill();
        let _ = self.child.wait();
        let bytes = std::fs::read(&self.path).context("reading the MONITOR log")?;
        // MONITOR escapes every byte that is not printable ASCII: the log is ASCII.
        let text = String::from_utf8_lossy(&bytes);
        Ok(text
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect())
    }
}

impl Drop for FullMonitor {
    /// Never leaves a `redis-cli` behind when the test fails before [`FullMonitor::stop`].
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One MONITOR line: `<time> [<db> <client>] "arg" "arg" ...`.
struct MonitorLine {
    /// Whether a script ran it (`[0 lua]`) rather than a client.
    from_script: bool,
    /// The command and its arguments, unescaped.
    args: Vec<Vec<u8>>,
}

/// Parses one MONITOR line, for example
/// `1700000000.123456 [0 127.0.0.1:54321] "EVALSHA" "ab12..." "1" "{sk:e}:cfg" "x"`.
fn parse_monitor_line(line: &str) -> Result<MonitorLine> {
    let open = line
        .find(" [")
        .with_context(|| format!("no client in MONITOR line {line:?}"))?;
    let rest = &line[open + 2..];
    let close = rest
        .find("] \"")
        .with_context(|| format!("no arguments in MONITOR line {line:?}"))?;
    let client = rest[..close]
        .split_once(' ')
        .map(|(_db, client)| client)
        .with_context(|| format!("no db and client in MONITOR line {line:?}"))?;
    let args = unquote_args(&rest[close + 2..])
        .with_context(|| format!("arguments of MONITOR line {line:?}"))?;
    ensure!(!args.is_empty(), "no command in MONITOR line {line:?}");
    Ok(MonitorLine {
        from_script: client == "lua",
        args,
    })
}

/// Splits `"a" "b\"c" "\x01"` into its arguments, undoing MONITOR's escapes (`\\`, `\"`, `\n`,
/// `\r`, `\t`, `\a`, `\b`, `\xHH`).
fn unquote_args(text: &str) -> Result<Vec<Vec<u8>>> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut args = Vec::new();
    while at < bytes.len() {
        if bytes[at] == b' ' {
            at += 1;
            continue;
        }
        ensure!(bytes[at] == b'"', "expected a quote at byte {at}");
        at += 1;
        let mut arg = Vec::new();
        loop {
            let byte = *bytes.get(at).context("unterminated argument")?;
            at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let escaped = *bytes.get(at).context("dangling backslash")?;
                    at += 1;
                    arg.push(match escaped {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'a' => 0x07,
                        b'b' => 0x08,
                        b'x' => {
                            let hex = text.get(at..at + 2).context("short \\x escape")?;
                            at += 2;
                            u8::from_str_radix(hex, 16)
                                .with_context(|| format!("bad \\x escape {hex:?}"))?
                        }
                        other => other,
                    });
                }
                other => arg.push(other),
            }
        }
        args.push(arg);
    }
    Ok(args)
}

/// One EVALSHA/EVAL a client sent, and the commands the script ran.
struct ScriptCall {
    /// The script's name (its file in `crates/domain/lua/`), or a description of an unknown one.
    script: String,
    /// The KEYS it was given.
    keys: BTreeSet<Vec<u8>>,
    /// The commands it ran, each with its arguments.
    commands: Vec<Vec<Vec<u8>>>,
}

/// Names the script of an `EVALSHA <sha>` or `EVAL <source>` call.
fn script_name(command: &str, sha_or_source: &[u8]) -> String {
    let by_sha = command.starts_with("EVALSHA");
    let known = scripts::ALL.iter().find(|s| {
        if by_sha {
            s.sha.as_bytes().eq_ignore_ascii_case(sha_or_source)
        } else {
            s.source.as_bytes() == sha_or_source
        }
    });
    match known {
        Some(script) => script.name.to_owned(),
        None if !by_sha && sha_or_source == PROBE_SOURCE.as_bytes() => PROBE.to_owned(),
        None if by_sha => format!(
            "<unknown script sha {}>",
            String::from_utf8_lossy(sha_or_source)
        ),
        None => "<unknown script source>".to_owned(),
    }
}

/// Groups the MONITOR lines into script calls. Lines of commands run by a script that follow
/// no script call (which cannot happen if MONITOR works as assumed) are returned apart.
fn script_calls(lines: &[String]) -> Result<(Vec<ScriptCall>, Vec<String>)> {
    let mut calls: Vec<ScriptCall> = Vec::new();
    let mut orphans = Vec::new();
    // Whether the last client command was a script call, whose commands follow.
    let mut in_call = false;
    for line in lines {
        let parsed = parse_monitor_line(line)?;
        if parsed.from_script {
            match calls.last_mut() {
                Some(call) if in_call => call.commands.push(parsed.args),
                _ => orphans.push(line.clone()),
            }
            continue;
        }
        let command = String::from_utf8_lossy(&parsed.args[0]).to_ascii_uppercase();
        in_call = matches!(
            command.as_str(),
            "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO"
        );
        if !in_call {
            continue;
        }
        let args = &parsed.args;
        ensure!(args.len() >= 3, "a script call without numkeys: {line:?}");
        let numkeys: usize = String::from_utf8_lossy(&args[2])
            .parse()
            .with_context(|| format!("numkeys of {line:?}"))?;
        ensure!(
            args.len() >= 3 + numkeys,
            "fewer keys than numkeys: {line:?}"
        );
        calls.push(ScriptCall {
            script: script_name(&command, &args[1]),
            keys: args[3..3 + numkeys].iter().cloned().collect(),
            commands: Vec::new(),
        });
    }
    Ok((calls, orphans))
}

/// The keys a command touches, as Redis itself finds them (`COMMAND GETKEYS`).
async fn keys_of(
    conn: &mut redis::aio::MultiplexedConnection,
    command: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>> {
    // A command without arguments (TIME) has no keys; GETKEYS refuses to look at it.
    if command.len() < 2 {
        return Ok(Vec::new());
    }
    let mut getkeys = redis::cmd("COMMAND");
    getkeys.arg("GETKEYS");
    for arg in command {
        getkeys.arg(arg.as_slice());
    }
    match getkeys.query_async::<Vec<Vec<u8>>>(conn).await {
        Ok(keys) => Ok(keys),
        Err(e) if e.to_string().contains("no key arguments") => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| {
            format!(
                "COMMAND GETKEYS {}",
                String::from_utf8_lossy(&command.join(&b' '))
            )
        }),
    }
}

/// Fails with the body when a step does not answer one of `expected`.
fn expect(what: &str, (status, body): (u16, Value), expected: &[u16]) -> Result<Value> {
    ensure!(
        expected.contains(&status),
        "{what}: {status} {body} (expected {expected:?})"
    );
    Ok(body)
}

/// Milliseconds since the epoch.
fn now_ms() -> Result<u64> {
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64)
}

/// A buyer's call with their JWT.
async fn as_user(
    app: &TestApp,
    user: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    app.call(method, path, Some(&jwt_for(user)), body).await
}

/// Polls `user`'s result for `event`, which must answer 200.
async fn poll(app: &TestApp, event: &str, user: &str, what: &str) -> Result<Value> {
    let path = format!("/api/events/{event}/orders/me");
    expect(
        what,
        as_user(app, user, Method::GET, &path, None).await?,
        &[200],
    )
}

/// Runs a job (`drain`, `timeout-release`, `reconcile`) and returns its report.
async fn job(app: &TestApp, name: &str) -> Result<Value> {
    let answer = app
        .admin(Method::POST, &format!("/admin/jobs/{name}"), None)
        .await?;
    expect(&format!("job {name}"), answer, &[200])
}

/// A buyer's purchase token (admission, then precheck), or why there is none.
async fn purchase_token(app: &TestApp, event: &str, user: &str) -> Result<String> {
    app.admit_and_precheck(event, user)
        .await?
        .map_err(|(status, body)| anyhow::anyhow!("{user} on {event}: {status} {body}"))
}

/// The order id of an accepted buy.
fn order_id(body: &Value) -> Result<String> {
    body["order_id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no order_id in {body}"))
}

/// Drives a sale along every path that reaches Redis, so that every script runs at least once:
/// events created, updated, warmed up (twice), switched, deny-listed; admission, precheck and
/// buy with their refusals; poll; drain with a refused order (retried, then dead-lettered);
/// pay; an unpaid order expired and released; status, reconcile (with a drift); a lottery
/// registered, drawn (twice); unknown events; a drain with nothing to do.
async fn drive_the_sale(app: &TestApp) -> Result<()> {
    let now = now_ms()?;
    let config = json!({
        "sku": "sku-keys", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 3, "shards": 2,
        "start_ms": now - 1_000, "end_ms": now + 3_600_000,
    });

    // An event: created, updated, warmed up, warmed up again (refused), switched.
    let answer = app
        .admin(Method::PUT, "/admin/events/keys", Some(&config))
        .await?;
    expect("create keys", answer, &[201])?;
    let answer = app
        .admin(Method::PUT, "/admin/events/keys", Some(&config))
        .await?;
    expect("update keys", answer, &[200])?;
    let answer = app
        .admin(Method::POST, "/admin/events/keys/warmup", None)
        .await?;
    expect("warm up keys", answer, &[200])?;
    let answer = app
        .admin(Method::POST, "/admin/events/keys/warmup", None)
        .await?;
    expect("warm up keys again", answer, &[409])?;
    let answer = app
        .admin(Method::PUT, "/admin/events/keys", Some(&config))
        .await?;
    expect("update keys once warmed up", answer, &[200])?;
    let limits = json!({
        "user_rate": 100, "user_burst": 100, "buy_rate": 100, "buy_burst": 100,
        "end_ms": now + 7_200_000,
    });
    let answer = app
        .admin(Method::PATCH, "/admin/events/keys", Some(&limits))
        .await?;
    expect("limits on keys", answer, &[200])?;
    let answer = app
        .admin(
            Method::PATCH,
            "/admin/events/keys",
            Some(&json!({ "end_ms": now - 5_000 })),
        )
        .await?;
    expect("an end before the start", answer, &[409])?;
    let answer = app
        .admin(
            Method::POST,
            "/admin/events/keys/deny",
            Some(&json!({ "users": ["keys-denied"], "addrs": ["203.0.113.7"] })),
        )
        .await?;
    expect("deny on keys", answer, &[200])?;

    // Paused: admission still works, precheck does not.
    let answer = app
        .admin(
            Method::PATCH,
            "/admin/events/keys",
            Some(&json!({ "enabled": false })),
        )
        .await?;
    expect("pause keys", answer, &[200])?;
    match app.admit_and_precheck("keys", "keys-paused").await? {
        Err((503, _)) => {}
        other => bail!("precheck while paused: {other:?}"),
    }
    let answer = app
        .admin(
            Method::PATCH,
            "/admin/events/keys",
            Some(&json!({ "enabled": true })),
        )
        .await?;
    expect("resume keys", answer, &[200])?;
    match app.admit_and_precheck("keys", "keys-denied").await? {
        Err((403, _)) => {}
        other => bail!("precheck of a denied user: {other:?}"),
    }

    // Five buyers for three units, in order: three accepted (one of them refused later by
    // Postgres), one bad token, one repeat buy, then sold out.
    let mut tokens = Vec::new();
    for i in 0..5 {
        tokens.push(purchase_token(app, "keys", &format!("keys-u{i}")).await?);
    }
    let first = expect(
        "buy keys-u0",
        app.buy("keys", "keys-u0", &tokens[0]).await?,
        &[202],
    )?;
    let paid_order = order_id(&first)?;
    expect(
        "buy keys-u0 again",
        app.buy("keys", "keys-u0", &tokens[0]).await?,
        &[409],
    )?;
    expect(
        "buy keys-u1 with another's token",
        app.buy("keys", "keys-u1", &tokens[2]).await?,
        &[403],
    )?;
    expect(
        "buy keys-u1",
        app.buy("keys", REFUSED_USER, &tokens[1]).await?,
        &[202],
    )?;
    expect(
        "buy keys-u2",
        app.buy("keys", "keys-u2", &tokens[2]).await?,
        &[202],
    )?;
    expect(
        "buy keys-u3 when sold out",
        app.buy("keys", "keys-u3", &tokens[3]).await?,
        &[410],
    )?;
    poll(app, "keys", "keys-u0", "poll keys-u0").await?;
    poll(app, "keys", "keys-u4", "poll keys-u4 (no order)").await?;

    // An event whose one order is left unpaid past a 1 s payment window.
    app.open_event(
        "keys-late",
        json!({ "stock": 2, "shards": 2, "payment_timeout_s": 1 }),
    )
    .await?;
    let token = purchase_token(app, "keys-late", "late-u0").await?;
    let late = expect(
        "buy late-u0",
        app.buy("keys-late", "late-u0", &token).await?,
        &[202],
    )?;
    let late_bought = Instant::now();
    order_id(&late)?;

    // A lottery: registered, drawn, winners admitted, drawn again (refused).
    app.open_event(
        "keys-lottery",
        json!({ "stock": 2, "shards": 2, "admission_mode": "lottery", "admission_multiplier": 1 }),
    )
    .await?;
    for i in 0..3 {
        let registered = as_user(
            app,
            &format!("lot-u{i}"),
            Method::POST,
            "/api/events/keys-lottery/admission",
            None,
        )
        .await?;
        expect("lottery registration", registered, &[202])?;
    }
    let drawn = app
        .admin(Method::POST, "/admin/events/keys-lottery/draw", None)
        .await?;
    expect("draw", drawn, &[200])?;
    let mut winner = None;
    for i in 0..3 {
        let user = format!("lot-u{i}");
        let answer = as_user(
            app,
            &user,
            Method::POST,
            "/api/events/keys-lottery/admission",
            None,
        )
        .await?;
        if expect("lottery admission", answer, &[200, 403])?["admission_token"].is_string() {
            winner = Some(user);
        }
    }
    let winner = winner.context("the draw admitted nobody")?;
    let token = purchase_token(app, "keys-lottery", &winner).await?;
    expect(
        "a lottery winner buys",
        app.buy("keys-lottery", &winner, &token).await?,
        &[202],
    )?;
    let drawn = app
        .admin(Method::POST, "/admin/events/keys-lottery/draw", None)
        .await?;
    expect("a second draw", drawn, &[409])?;

    // Drain until the refused order is dead-lettered (it fails, is retried, then given up).
    let mut dead_lettered = false;
    for _ in 0..10 {
        job(app, "drain").await?;
        if app.status("keys").await?["dead_letters"].as_i64() == Some(1) {
            dead_lettered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(600)).await; // the failed entry idles
    }
    ensure!(
        dead_lettered,
        "the refused order never reached the dead letters"
    );

    // Pay one order; the other event's order expires and its unit goes back.
    let paid = as_user(
        app,
        "keys-u0",
        Method::POST,
        &format!("/api/events/keys/orders/{paid_order}/pay"),
        None,
    )
    .await?;
    let payment = expect("pay keys-u0", paid, &[200])?;
    // The provider takes the payment, and then a second one naming the same order: the order
    // is paid once, the second owes a refund, and the buyer's poll is told so.
    let provider = app.provider();
    for _ in 0..2 {
        let (_, event) = provider.succeeded_event(
            payment["payment_id"].as_str().unwrap_or_default(),
            payment["amount"].as_i64().unwrap_or_default(),
            payment["currency"].as_str().unwrap_or_default(),
        );
        let delivered = provider.deliver(&event).await?;
        ensure!(delivered.status == 200, "webhook: {}", delivered.body);
    }
    poll(app, "keys", "keys-u0", "poll a paid order").await?;
    tokio::time::sleep(Duration::from_millis(1_300).saturating_sub(late_bought.elapsed())).await;
    let released = job(app, "timeout-release").await?;
    ensure!(
        released["released"].as_u64() >= Some(1),
        "nothing released: {released}"
    );
    poll(app, "keys-late", "late-u0", "poll an expired order").await?;
    let told = poll(app, "keys", "keys-u0", "poll a paid order owed a refund").await?;
    ensure!(
        told["refund"]["state"] == "pending",
        "the buyer was not told of the refund owed: {told} / {released}"
    );

    // The books: every event's state, reconcile (the dead order is drift: it names offenders).
    for event in ["keys", "keys-late", "keys-lottery"] {
        app.status(event).await?;
        // The storefront's view of it.
        expect(
            "shop event",
            app.get_json(&format!("/shop/events/{event}")).await?,
            &[200],
        )?;
    }
    let books = job(app, "reconcile").await?;
    let drift: i64 = books["events"]
        .as_array()
        .map(|e| e.iter().filter_map(|b| b["drift"].as_i64()).sum())
        .unwrap_or(0);
    ensure!(
        drift != 0,
        "reconcile found no drift, so it never listed orders: {books}"
    );
    expect(
        "reconcile one event",
        app.admin(Method::POST, "/admin/jobs/reconcile?event=keys-late", None)
            .await?,
        &[200],
    )?;

    // The public health check: probes, then shares its summary.
    expect("health", app.get_json("/api/health").await?, &[200])?;
    expect("health again", app.get_json("/api/health").await?, &[200])?;

    // An event nobody created, on every route that reaches Redis.
    let path = "/admin/events/keys-nowhere";
    expect(
        "status of nothing",
        app.admin(Method::GET, path, None).await?,
        &[404],
    )?;
    expect(
        "switch nothing",
        app.admin(Method::PATCH, path, Some(&json!({ "enabled": true })))
            .await?,
        &[404],
    )?;
    expect(
        "warm up nothing",
        app.admin(Method::POST, &format!("{path}/warmup"), None)
            .await?,
        &[404],
    )?;
    expect(
        "deny on nothing",
        app.admin(
            Method::POST,
            &format!("{path}/deny"),
            Some(&json!({ "users": ["x"] })),
        )
        .await?,
        &[404],
    )?;
    expect(
        "draw nothing",
        app.admin(Method::POST, &format!("{path}/draw"), None)
            .await?,
        &[404],
    )?;
    let admission = as_user(
        app,
        "nobody",
        Method::POST,
        "/api/events/keys-nowhere/admission",
        None,
    )
    .await?;
    expect("admission to nothing", admission, &[404])?;
    let polled = as_user(
        app,
        "nobody",
        Method::GET,
        "/api/events/keys-nowhere/orders/me",
        None,
    )
    .await?;
    expect("poll nothing", polled, &[404])?;

    // An ended event archived (archive_event.lua), listed (list_events.lua), and back.
    let mut ended = config.clone();
    ended["start_ms"] = json!(1);
    ended["end_ms"] = json!(2);
    let answer = app
        .admin(Method::PUT, "/admin/events/keys-old", Some(&ended))
        .await?;
    expect("create keys-old", answer, &[201])?;
    for method in [Method::POST, Method::DELETE] {
        let answer = app
            .admin(method, "/admin/events/keys-old/archive", None)
            .await?;
        expect("archive keys-old and back", answer, &[200])?;
    }

    // Drain until quiet, then once more with nothing pending.
    for _ in 0..20 {
        let report = job(app, "drain").await?;
        if report["inserted"] == 0 && report["confirmed"] == 0 {
            break;
        }
    }
    let report = job(app, "drain").await?;
    ensure!(
        report["inserted"] == 0 && report["confirmed"] == 0,
        "a drain with nothing pending moved orders: {report}"
    );
    Ok(())
}

/// Runs [`PROBE_SOURCE`] once, from the test's own connection.
async fn run_probe(redis: &RedisServer) -> Result<()> {
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let _: Option<String> = redis::cmd("EVAL")
        .arg(PROBE_SOURCE)
        .arg(1)
        .arg(PROBE_KEY)
        .query_async(&mut conn)
        .await
        .context("running the probe script")?;
    Ok(())
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    /// Run again over `spin.http.toml` too (`scripts/test.sh`): a sale's order path and every
    /// script, through the job routes instead of the cron triggers.
    mod over_http_manifest {
        use super::*;

        /// Drives a whole sale under MONITOR and checks that each command every script ran touched
        /// only keys among the KEYS of its call, and that every script in `crates/domain/lua/` ran.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn scripts_touch_only_the_keys_they_are_given() -> Result<()> {
            let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
            pg.migrate().await?;
            pg.client()
                .await?
                .batch_execute(&format!(
                    "ALTER TABLE orders ADD CONSTRAINT refuse_one CHECK (user_id <> '{REFUSED_USER}')"
                ))
                .await
                .context("adding the constraint that refuses one order")?;
            // Small drain tuning, so that a failed entry is retried and dead-lettered within seconds.
            let mut vars = app_vars(&redis, &pg);
            vars.extend([
                ("drain_batch", "50".to_owned()),
                ("drain_lease_ms", "500".to_owned()),
                ("drain_reclaim_idle_ms", "200".to_owned()),
                ("drain_max_deliveries", "2".to_owned()),
            ]);
            let app = TestApp::start(seckill_testkit::product_manifest(), &vars).await?;

            let monitor = FullMonitor::start(&redis)?;
            let mut driven = drive_the_sale(&app).await;
            if driven.is_ok() {
                driven = run_probe(&redis).await;
            }
            let lines = monitor.stop()?;
            driven.context("driving the sale")?;

            let (calls, orphans) = script_calls(&lines)?;
            ensure!(
                orphans.is_empty(),
                "commands of a script that follow no script call (MONITOR not as assumed?):\n{}",
                orphans.join("\n")
            );

            // Each command's keys, as Redis finds them, against its call's KEYS.
            let mut conn = redis
                .client()
                .get_multiplexed_async_connection()
                .await
                .context("a connection for COMMAND GETKEYS")?;
            let mut violations: BTreeSet<(String, String, String)> = BTreeSet::new();
            let mut ran: BTreeMap<String, usize> = BTreeMap::new();
            let mut checked = 0;
            for call in &calls {
                if !call.commands.is_empty() {
                    *ran.entry(call.script.clone()).or_default() += 1;
                }
                for command in &call.commands {
                    checked += 1;
                    for key in keys_of(&mut conn, command).await? {
                        if !call.keys.contains(&key) {
                            violations.insert((
                                call.script.clone(),
                                String::from_utf8_lossy(&command[0]).to_ascii_uppercase(),
                                String::from_utf8_lossy(&key).into_owned(),
                            ));
                        }
                    }
                }
            }
            eprintln!(
                "{} MONITOR lines, {} script calls, {checked} commands run by scripts; calls per script: {ran:?}",
                lines.len(),
                calls.len(),
            );

            // The control: the probe's undeclared key was caught, its declared one was not.
            let caught = violations.remove(&(
                PROBE.to_owned(),
                "GET".to_owned(),
                format!("{PROBE_KEY}:undeclared"),
            ));
            ensure!(
                caught && ran.remove(PROBE) == Some(1),
                "the check missed the probe's undeclared key: it is blind"
            );
            ensure!(
                !violations.iter().any(|(script, ..)| script == PROBE),
                "the probe's declared key was reported: {violations:?}"
            );

            // Every script in crates/domain/lua/ must have run at least once, so that none escaped the check.
            let lua: BTreeSet<String> = std::fs::read_dir(repo_root().join("crates/domain/lua"))?
                .map(|f| Ok(f?.file_name().to_string_lossy().into_owned()))
                .collect::<std::io::Result<Vec<String>>>()?
                .into_iter()
                .filter_map(|f| f.strip_suffix(".lua").map(str::to_owned))
                .filter(|f| f != "common")
                .collect();
            let ran: BTreeSet<String> = ran.into_keys().collect();
            let never_ran: Vec<&String> = lua.difference(&ran).collect();
            let unknown: Vec<&String> = ran.difference(&lua).collect();
            let coverage = if never_ran.is_empty() && unknown.is_empty() {
                "every script in crates/domain/lua/ ran".to_owned()
            } else {
                format!(
                    "also: never ran {never_ran:?}; ran but not in crates/domain/lua/ {unknown:?}"
                )
            };

            let listing: Vec<String> = violations
                .iter()
                .map(|(script, command, key)| {
                    let file = if script.starts_with('<') {
                        script.clone()
                    } else {
                        format!("{script}.lua")
                    };
                    format!("  {file}: {command} {key}")
                })
                .collect();
            assert!(
                violations.is_empty(),
                "{} commands run by scripts touched keys not in their KEYS (script: command key):\n{}\n\
                 ({coverage}; an `<unknown script>` is one not in seckill_domain::scripts::ALL: the \
                 wasm components are stale, rebuild them: `source scripts/lib.sh && build_wasm`)",
                violations.len(),
                listing.join("\n")
            );
            assert_eq!(
                ran, lua,
                "scripts that ran under MONITOR vs crates/domain/lua/"
            );
            Ok(())
        }
    }
}
