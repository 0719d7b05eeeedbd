//! `seckill-admin` against the real stack (the seckill-tests kit: real redis-server, real
//! PostgreSQL, the host serving `spin.toml`): human output, `--json`, and the exit codes.

use std::process::{Command, Output};

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{
    ADMIN_TOKEN, JWT_SECRET, OPERATOR, PgServer, RedisServer, TestApp, VIEWER_TOKEN, app_vars,
    free_port, product_manifest,
};
use serde_json::{Value, json};

/// Runs the CLI with `args` against `url` (no SECKILL_* from the outer environment).
fn cli(url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seckill-admin"));
    cmd.env_remove("SECKILL_URL")
        .env_remove("SECKILL_ADMIN_TOKEN")
        .arg("--url")
        .arg(url);
    if let Some(t) = token {
        cmd.arg("--token").arg(t);
    }
    cmd.args(args).output().expect("the CLI runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit code and stdout, for assertions that show both.
fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(o)
}

fn json_of(o: &Output) -> Value {
    serde_json::from_str(ok(o).trim()).expect("one JSON document")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_run_from_the_command_line() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = TestApp::start(product_manifest(), &app_vars(&redis, &pg)).await?;
    let url = app.base_url.clone();
    let run = |args: &[&str]| cli(&url, Some(ADMIN_TOKEN), args);

    assert_eq!(ok(&run(&["events"])).trim(), "no events");
    let created = ok(&run(&[
        "create",
        "e1",
        "--price",
        "1999",
        "--currency",
        "eur",
        "--pow-difficulty",
        "0",
        "--sku",
        "phone",
        "--stock",
        "20",
        "--shards",
        "4",
        "--start-in",
        "0s",
        "--duration",
        "1h",
        "--user-limit",
        "0,0",
        "--warmup",
    ]));
    assert!(
        created.contains("created e1: phone, 20 units, open now, lasts 1h00m"),
        "{created}"
    );
    assert!(
        created.contains("warmed up: 20 units over 4 shards"),
        "{created}"
    );
    let listed = json_of(&run(&["events", "--json"]));
    assert_eq!(
        (
            &listed["events"][0]["event_id"],
            &listed["events"][0]["sku"]
        ),
        (&json!("e1"), &json!("phone")),
        "{listed}"
    );
    // The same list through the kit, so the OpenAPI check sees the route.
    assert_eq!(
        app.admin(Method::GET, "/admin/events", None).await?,
        (200, listed)
    );

    // Three buyers: accepted and queued, then drained by the job.
    for user in ["u1", "u2", "u3"] {
        let token = app.admit_and_precheck("e1", user).await?.expect("admitted");
        assert_eq!(app.buy("e1", user, &token).await?.0, 202);
    }
    let status = json_of(&run(&["status", "e1", "--json"]));
    assert_eq!(
        (
            status["stock_left"].as_i64(),
            status["sold"].as_i64(),
            status["queued"].as_i64()
        ),
        (Some(17), Some(3), Some(3))
    );
    let human = ok(&run(&["status", "e1"]));
    assert!(
        human.contains("units left") && human.contains("17 / 20"),
        "{human}"
    );
    assert!(human.contains("on sale, ends in"), "{human}");
    let drained = ok(&run(&["job", "drain"]));
    assert!(
        drained.starts_with("drain: 3 inserted, 3 confirmed, 0 failed"),
        "{drained}"
    );
    let status = json_of(&run(&["status", "e1", "--json"]));
    assert_eq!(
        (status["drained"].as_i64(), status["queued"].as_i64()),
        (Some(3), Some(0))
    );
    let books = json_of(&run(&["job", "reconcile", "--event", "e1", "--json"]));
    assert_eq!(books["events"][0]["drift"], 0, "{books}");
    let line = ok(&run(&["job", "reconcile", "--event", "e1"]));
    assert!(line.starts_with("ok  e1: stock 20, in Redis "), "{line}");
    assert!(line.contains(", in transit 0, in flight "), "{line}");
    // No endpoint registered yet: the delivery job runs, and sends nothing.
    let delivered = ok(&run(&["job", "deliver-events"]));
    assert!(
        delivered.starts_with("deliver-events: 0 delivered, 0 failed, 0 endpoints disabled"),
        "{delivered}"
    );

    // Switches: paused, buyers meet it; resumed.
    assert!(ok(&run(&["patch", "e1", "--pause"])).contains("updated e1: enabled=false"));
    assert!(ok(&run(&["status", "e1"])).contains("PAUSED"));
    // Who paused it, newest first.
    let audit = ok(&run(&["audit", "--event", "e1", "--limit", "1"]));
    assert!(
        audit.contains(&format!(
            "{OPERATOR} (operator) · PATCH /admin/events/e1 → 200"
        )) && audit.contains("enabled: 1 → 0"),
        "{audit}"
    );
    let records = json_of(&run(&["audit", "--event", "e1", "--json"]));
    let methods: Vec<&str> = records["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| r["method"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(methods, ["PATCH", "POST", "PUT"], "newest first: {records}");
    let refused = app
        .admit_and_precheck("e1", "u4")
        .await?
        .expect_err("paused");
    assert_eq!(refused.1["error"]["code"], "sale_paused");
    let patched = json_of(&run(&[
        "patch",
        "e1",
        "--resume",
        "--buy-limit",
        "100,10",
        "--json",
    ]));
    assert_eq!(
        patched["updated"],
        json!({ "enabled": true, "buy_rate": 100.0, "buy_burst": 10 })
    );
    let cfg = json_of(&run(&["status", "e1", "--json"]))["config"].clone();
    assert_eq!(
        (cfg["enabled"].as_str(), cfg["buy_burst"].as_str()),
        (Some("1"), Some("10"))
    );

    // One refresh of the live view is one script call per slot of the event (status.lua,
    // inside Redis): the master's `{sk:e1}`, then each of the 4 shards' `{sk:e1/s}`, once.
    let monitor = redis.monitor()?;
    ok(&run(&["status", "e1", "--json"]));
    let sent = monitor.stop()?;
    let slots: Vec<&str> = [
        "{sk:e1}:",
        "{sk:e1/0}:",
        "{sk:e1/1}:",
        "{sk:e1/2}:",
        "{sk:e1/3}:",
    ]
    .into();
    assert_eq!(sent.len(), slots.len(), "{sent:#?}");
    for (call, slot) in sent.iter().zip(slots) {
        assert!(
            call.to_ascii_uppercase().contains("\"EVALSHA\""),
            "{sent:#?}"
        );
        assert!(
            call.contains(&format!("\"{slot}cfg\"")),
            "{slot} in {sent:#?}"
        );
    }

    // Deny lists.
    assert_eq!(
        json_of(&run(&[
            "deny", "e1", "--user", "bob", "--addr", "10.0.0.9", "--json"
        ])),
        json!({ "denied": 2 })
    );
    let refused = app
        .admit_and_precheck("e1", "bob")
        .await?
        .expect_err("denied");
    assert_eq!(refused.1["error"]["code"], "denied");
    // Refusals are counted by code where they are decided: the paused and the denied precheck.
    let status = json_of(&run(&["status", "e1", "--json"]));
    assert_eq!(
        status["refusals"],
        json!({ "sale_paused": 1, "denied": 1 }),
        "{status}"
    );
    let human = ok(&run(&["status", "e1"]));
    assert!(
        human.contains("1  denied") && human.contains("1  sale_paused"),
        "{human}"
    );

    // The live view: frames on a pipe, rates from the second frame on; JSON one line each.
    let watched = ok(&run(&[
        "status",
        "e1",
        "--watch",
        "--count",
        "2",
        "--interval",
        "100ms",
    ]));
    assert_eq!(watched.matches("units left").count(), 2, "{watched}");
    assert!(watched.contains("+0/s"), "{watched}");
    let lines = ok(&run(&[
        "status",
        "e1",
        "--watch",
        "--json",
        "--count",
        "3",
        "--interval",
        "50ms",
    ]));
    let frames: Vec<Value> = lines
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(frames.len(), 3);
    assert!(frames.iter().all(|f| f["sold"] == 3));

    // A lottery: registrants, then the draw.
    ok(&run(&[
        "create",
        "e2",
        "--price",
        "1999",
        "--currency",
        "eur",
        "--pow-difficulty",
        "0",
        "--sku",
        "ticket",
        "--stock",
        "1",
        "--start-in",
        "1h",
        "--admission",
        "lottery",
        "--multiplier",
        "2",
        "--warmup",
    ]));
    for user in ["l1", "l2", "l3"] {
        let (status, _) = app
            .call(
                Method::POST,
                "/api/events/e2/admission",
                Some(&seckill_testkit::jwt_for(user)),
                None,
            )
            .await?;
        assert_eq!(status, 202);
    }
    assert_eq!(ok(&run(&["draw", "e2"])).trim(), "drawn e2: 2 admitted");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_scripts_can_rely_on() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = TestApp::start(product_manifest(), &app_vars(&redis, &pg)).await?;
    let url = app.base_url.clone();
    app.open_event("e1", json!({})).await?;
    let code = |o: &Output| o.status.code();

    // 0, with the target and the token from the environment.
    let from_env = Command::new(env!("CARGO_BIN_EXE_seckill-admin"))
        .env("SECKILL_URL", &url)
        .env("SECKILL_ADMIN_TOKEN", ADMIN_TOKEN)
        .args(["events"])
        .output()?;
    let line = ok(&from_env);
    assert!(line.starts_with("e1  sku-e1  live, ends in "), "{line}");
    // Who a token is, in words and in JSON.
    assert_eq!(
        ok(&cli(&url, Some(VIEWER_TOKEN), &["whoami"])).trim(),
        "test-viewer (viewer)"
    );
    assert_eq!(
        json_of(&cli(&url, Some(ADMIN_TOKEN), &["whoami", "--json"])),
        json!({ "operator": OPERATOR, "role": "operator" })
    );
    // 3: a viewer's token asks for a change.
    assert_eq!(
        code(&cli(&url, Some(VIEWER_TOKEN), &["patch", "e1", "--pause"])),
        Some(3)
    );
    // 2: usage; nothing is sent.
    assert_eq!(code(&cli(&url, None, &["events"])), Some(2));
    assert_eq!(
        code(&cli(&url, Some(ADMIN_TOKEN), &["patch", "e1"])),
        Some(2)
    );
    assert_eq!(
        code(&cli(&url, Some(ADMIN_TOKEN), &["deny", "e1"])),
        Some(2)
    );
    assert_eq!(
        code(&cli(
            &url,
            Some(ADMIN_TOKEN),
            &[
                "create",
                "e9",
                "--price",
                "1999",
                "--currency",
                "eur",
                "--pow-difficulty",
                "0",
                "--sku",
                "x",
                "--stock",
                "1",
                "--start-in",
                "soon"
            ]
        )),
        Some(2)
    );
    // 3: the token.
    let wrong = cli(&url, Some("wrong"), &["status", "e1"]);
    assert_eq!(code(&wrong), Some(3));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("unauthorized (401)"));
    // 4: no such event, in text and in JSON.
    assert_eq!(
        code(&cli(&url, Some(ADMIN_TOKEN), &["status", "nope"])),
        Some(4)
    );
    let missing = cli(&url, Some(ADMIN_TOKEN), &["warmup", "nope", "--json"]);
    assert_eq!(code(&missing), Some(4));
    let body: Value = serde_json::from_str(stdout(&missing).trim())?;
    assert_eq!(body["error"]["code"], "event_not_found");
    // 5: refused by the server.
    let invalid = cli(
        &url,
        Some(ADMIN_TOKEN),
        &[
            "create",
            "e2",
            "--price",
            "1999",
            "--currency",
            "eur",
            "--pow-difficulty",
            "0",
            "--sku",
            "x",
            "--stock",
            "1",
            "--shards",
            "0",
            "--start-in",
            "0s",
        ],
    );
    assert_eq!(
        code(&invalid),
        Some(5),
        "{}",
        String::from_utf8_lossy(&invalid.stderr)
    );
    assert!(String::from_utf8_lossy(&invalid.stderr).contains("invalid_config"));
    assert_eq!(
        code(&cli(&url, Some(ADMIN_TOKEN), &["draw", "e1"])),
        Some(5),
        "not a lottery: conflict"
    );
    // 6: nobody there.
    let down = cli(
        &format!("http://127.0.0.1:{}", free_port()),
        Some(ADMIN_TOKEN),
        &["events", "--json"],
    );
    assert_eq!(code(&down), Some(6));
    let body: Value = serde_json::from_str(stdout(&down).trim())?;
    assert_eq!(body["error"]["code"], "unreachable");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_event_is_archived_out_of_the_list_and_back() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = TestApp::start(product_manifest(), &app_vars(&redis, &pg)).await?;
    let url = app.base_url.clone();
    let run = |args: &[&str]| cli(&url, Some(ADMIN_TOKEN), args);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    app.open_event("live", json!({})).await?;
    app.open_event(
        "old",
        json!({ "start_ms": now - 600_000, "end_ms": now - 300_000 }),
    )
    .await?;
    let lines = |o: &Output| -> Vec<String> { ok(o).lines().map(str::to_owned).collect() };
    let all = lines(&run(&["events"]));
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        all[0].starts_with("live  sku-live  live, ends in "),
        "{all:?}"
    );
    assert!(all[1].starts_with("old  sku-old  ended 5m"), "{all:?}");

    // A live sale is not archived (5: refused); a viewer may not (3); an unknown event (4).
    let live = run(&["archive", "live"]);
    assert_eq!(live.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&live.stderr).contains("conflict"));
    let viewer = cli(&url, Some(VIEWER_TOKEN), &["archive", "old"]);
    assert_eq!(viewer.status.code(), Some(3));
    assert_eq!(run(&["archive", "nope"]).status.code(), Some(4));
    assert_eq!(lines(&run(&["events"])).len(), 2, "nothing archived");

    assert_eq!(ok(&run(&["archive", "old"])).trim(), "archived old");
    let shown = lines(&run(&["events"]));
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with("live  "), "{shown:?}");
    let archived = lines(&run(&["events", "--archived"]));
    assert_eq!(archived.len(), 1, "{archived:?}");
    assert!(archived[0].starts_with("old  sku-old  ended ") && archived[0].ends_with(", archived"));
    let json = json_of(&run(&["events", "--archived", "--json"]));
    assert_eq!(
        json["events"],
        json!([{ "event_id": "old", "archived": true, "sku": "sku-old",
                 "start_ms": now - 600_000, "end_ms": now - 300_000 }])
    );
    assert_eq!(
        json_of(&run(&["unarchive", "old", "--json"])),
        json!({ "event_id": "old", "archived": false })
    );
    assert_eq!(lines(&run(&["events"])).len(), 2);
    assert_eq!(ok(&run(&["events", "--archived"])).trim(), "no events");
    Ok(())
}

/// Runs `seckill-admin buyer-token` with `args`, in `dir`, with `key` (if any) as
/// SPIN_VARIABLE_JWT_SECRET and no admin token or URL from the outer environment.
fn buyer_token(dir: &std::path::Path, key: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seckill-admin"));
    cmd.current_dir(dir)
        .env_remove("SECKILL_URL")
        .env_remove("SECKILL_ADMIN_TOKEN")
        .env_remove("SPIN_VARIABLE_JWT_SECRET");
    if let Some(key) = key {
        cmd.env("SPIN_VARIABLE_JWT_SECRET", key);
    }
    cmd.arg("buyer-token")
        .args(args)
        .output()
        .expect("the CLI runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buyer_token_mints_a_token_the_sale_accepts_from_the_local_key() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = TestApp::start(product_manifest(), &app_vars(&redis, &pg)).await?;
    app.open_event("bt1", json!({})).await?;
    // The local stack's layout: the key in .data/secrets.env, as scripts/up.sh writes it.
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join(".data"))?;
    std::fs::write(
        dir.path().join(".data/secrets.env"),
        format!(
            "SPIN_VARIABLE_JWT_SECRET={JWT_SECRET}\nSPIN_VARIABLE_OPERATORS=local:operator:x\n"
        ),
    )?;
    let poll = |token: String| {
        let app = &app;
        async move {
            app.call(Method::GET, "/api/events/bt1/orders/me", Some(&token), None)
                .await
        }
    };

    // From the local stack's file, with no admin token: the poll route takes it as alice's.
    let token = ok(&buyer_token(dir.path(), None, &["alice"]))
        .trim()
        .to_owned();
    let (status, body) = poll(token).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "none", "{body}");
    // From the environment, as JSON; and a whole admission with it.
    let minted = json_of(&buyer_token(
        dir.path(),
        Some(JWT_SECRET),
        &["bob", "--json", "--valid-for", "5m"],
    ));
    assert_eq!(minted["user"], "bob", "{minted}");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let left = minted["expires_at_ms"].as_i64().unwrap_or(0) - now_ms;
    assert!((290_000..=300_000).contains(&left), "expires in {left} ms");
    let token = minted["token"].as_str().unwrap_or_default();
    let (status, adm) = app
        .call(Method::POST, "/api/events/bt1/admission", Some(token), None)
        .await?;
    assert_eq!(status, 200, "{adm}");

    // Another key's token is no buyer's.
    let wrong = ok(&buyer_token(dir.path(), Some("another-key"), &["mallory"]))
        .trim()
        .to_owned();
    let (status, body) = poll(wrong).await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );

    // Usage errors (exit 2), nothing printed to stdout: a bad user id, a token for ever, no key.
    let elsewhere = tempfile::tempdir()?;
    for (dir, args) in [
        (dir.path(), &["two words"][..]),
        (dir.path(), &["carol", "--valid-for", "25h"][..]),
        (elsewhere.path(), &["carol"][..]),
    ] {
        let out = buyer_token(dir, None, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert_eq!(stdout(&out), "", "{args:?}");
    }
    Ok(())
}

/// The order events' endpoints from the command line: added (the secret printed once),
/// listed, disabled and enabled, rotated, the log read, removed; a private URL is refused (5),
/// a viewer's change is 3, a removed endpoint is 4, and a replay needs a message or a range (2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_event_endpoints_from_the_command_line() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = TestApp::start(product_manifest(), &app_vars(&redis, &pg)).await?;
    let url = app.base_url.clone();
    let run = |args: &[&str]| cli(&url, Some(ADMIN_TOKEN), args);
    let code = |o: &Output| o.status.code();

    assert_eq!(ok(&run(&["webhooks", "list"])).trim(), "no endpoints");
    let private = run(&["webhooks", "add", "https://10.1.2.3/hooks"]);
    assert_eq!(
        code(&private),
        Some(5),
        "{}",
        String::from_utf8_lossy(&private.stderr)
    );
    let viewer = cli(
        &url,
        Some(VIEWER_TOKEN),
        &["webhooks", "add", "https://shop.example.com/h"],
    );
    assert_eq!(code(&viewer), Some(3));

    let added = ok(&run(&[
        "webhooks",
        "add",
        "https://shop.example.com/hooks",
        "--description",
        "fulfilment",
    ]));
    let (line, secret) = added.trim().split_once('\n').expect("two lines");
    assert!(
        line.ends_with("https://shop.example.com/hooks (fulfilment) · delivering"),
        "{line}"
    );
    assert!(secret.contains("whsec_"), "{secret}");
    let id = line.split(' ').next().expect("an id").to_owned();
    assert!(id.starts_with("ep_"), "{id}");

    let off = ok(&run(&["webhooks", "disable", &id]));
    assert!(off.trim().ends_with("disabled: by an operator"), "{off}");
    let on = ok(&run(&["webhooks", "enable", &id]));
    assert!(on.trim().ends_with("· delivering"), "{on}");
    let rotated = json_of(&run(&["webhooks", "rotate", &id, "--json"]));
    assert_ne!(rotated["secret"].as_str(), secret.split(": ").nth(1));
    assert_eq!(
        ok(&run(&["webhooks", "deliveries", &id])).trim(),
        "no deliveries"
    );
    assert_eq!(
        code(&run(&["webhooks", "replay", &id])),
        Some(2),
        "nothing to replay named"
    );
    let listed = json_of(&run(&["webhooks", "list", "--json"]));
    assert_eq!(listed["endpoints"][0]["endpoint_id"], id.as_str());
    assert_eq!(
        ok(&run(&["webhooks", "remove", &id])).trim(),
        format!("removed {id}")
    );
    assert_eq!(code(&run(&["webhooks", "remove", &id])), Some(4));
    Ok(())
}
