//! The host against Spin 3.6's behaviour: every implemented host function, routing and headers,
//! traps, cron — through the real `.wasm` test components, real Redis and real Postgres.

use std::time::Duration;

use anyhow::Result;
use seckill_testkit::{PgServer, RedisServer, TestApp};
use serde_json::Value;

async fn conformance_app(redis: &RedisServer, pg: &PgServer) -> Result<TestApp> {
    TestApp::start(
        "tests/manifests/conformance.toml",
        &conformance_vars(redis, pg),
    )
    .await
}

/// The conformance app's variables: its Redis and Postgres, and one the environment sets.
fn conformance_vars(redis: &RedisServer, pg: &PgServer) -> [(&'static str, String); 3] {
    [
        ("redis_host", redis.host()),
        ("pg_host", pg.host()),
        ("present", "from-env".into()),
    ]
}

fn field<'a>(report: &'a Value, name: &str) -> &'a str {
    report[name]
        .as_str()
        .unwrap_or_else(|| panic!("report has no string `{name}`: {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_interface_matches_spin() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let (status, r) = app.get_json("/conformance/redis").await?;
    assert_eq!(status, 200, "{r}");
    assert_eq!(field(&r, "open"), "ok");
    assert_eq!(field(&r, "set"), "Ok(())");
    assert_eq!(field(&r, "get"), r#"Ok(Some("v"))"#);
    assert_eq!(field(&r, "get_missing"), "Ok(None)");
    assert_eq!(field(&r, "incr_1"), "Ok(1)");
    assert_eq!(field(&r, "incr_2"), "Ok(2)");
    assert!(
        field(&r, "incr_text").starts_with("Err(Error::Other("),
        "{r}"
    );
    assert_eq!(field(&r, "sadd"), "Ok(2)");
    assert_eq!(field(&r, "smembers"), r#"Ok(["a", "b"])"#);
    assert_eq!(field(&r, "srem"), "Ok(1)");
    // A server-side WRONGTYPE is `other` in Spin too (only client-side type errors map to type-error).
    assert!(
        field(&r, "sadd_wrong_type").starts_with(r#"Err(Error::Other("WRONGTYPE"#),
        "{r}"
    );
    assert_eq!(field(&r, "publish"), "Ok(())");
    assert_eq!(
        field(&r, "execute_set"),
        r#"Ok([RedisResult::Status("OK")])"#
    );
    assert_eq!(field(&r, "execute_get"), "Ok([RedisResult::Binary([53])])");
    // Nested arrays come back flattened, false → nil, a status reply → status.
    assert_eq!(
        field(&r, "execute_nested"),
        r#"Ok([RedisResult::Int64(1), RedisResult::Binary([116, 119, 111]), RedisResult::Int64(3), RedisResult::Nil, RedisResult::Status("OK")])"#
    );
    assert_eq!(
        field(&r, "execute_hash"),
        "Ok([RedisResult::Binary([102]), RedisResult::Binary([49])])"
    );
    assert_eq!(field(&r, "script_sha").len(), 40, "{r}");
    assert_eq!(
        field(&r, "evalsha"),
        "Ok([RedisResult::Binary([107, 101, 121, 49]), RedisResult::Binary([97, 114, 103, 49])])"
    );
    // redis-rs (Spin uses the same 0.32) renders NOSCRIPT as its own error kind.
    assert!(
        field(&r, "evalsha_unknown").contains("NoScriptError"),
        "{r}"
    );
    assert_eq!(field(&r, "del"), "Ok(2)");
    assert_eq!(field(&r, "open_denied"), "Err(Error::InvalidAddress)");

    // What the guest wrote is really in Redis.
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let members: Vec<String> = redis::cmd("SMEMBERS")
        .arg("set")
        .query_async(&mut conn)
        .await?;
    assert_eq!(members, vec!["b".to_string()]);
    let x: String = redis::cmd("GET").arg("x").query_async(&mut conn).await?;
    assert_eq!(x, "5");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_resolve_like_spin() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let (status, r) = app.get_json("/conformance/variables").await?;
    assert_eq!(status, 200, "{r}");
    assert_eq!(field(&r, "present"), r#"Ok("from-env")"#);
    assert_eq!(field(&r, "defaulted"), r#"Ok("the-default")"#);
    // Spin's texts: `crates/expressions/src/lib.rs` (`get_template`, `Key::validate`).
    assert_eq!(
        field(&r, "missing"),
        r#"Err(Error::Undefined("no variable for \"conformance\".\"not_declared\""))"#
    );
    assert_eq!(
        field(&r, "invalid_name"),
        r#"Err(Error::InvalidName("\"Bad-Name\": invalid character 'B'. Variable names may contain only lower-case letters, numbers, and underscores."))"#
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_variable_without_value_fails_startup() -> Result<()> {
    let err = TestApp::start(
        "tests/manifests/conformance.toml",
        &[("redis_host", "127.0.0.1:1".into())],
    )
    .await
    .err()
    .expect("pg_host is required");
    assert!(err.to_string().contains("SPIN_VARIABLE_PG_HOST"), "{err}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_http_to_a_denied_host_gets_spins_error() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let (status, r) = app.get_json("/conformance/outbound-http").await?;
    assert_eq!(status, 200, "{r}");
    assert!(field(&r, "denied").contains("HttpRequestDenied"), "{r}");
    Ok(())
}

/// Expected values: `test_default_headers*` in Spin's `crates/trigger-http/src/headers.rs` and the
/// route tests in `crates/http/src/routes.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_and_spin_headers() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let (status, h) = app.get_json("/conformance/headers?x=1").await?;
    assert_eq!(status, 200, "{h}");
    assert_eq!(
        field(&h, "spin-full-url"),
        format!("{}/conformance/headers?x=1", app.base_url)
    );
    assert_eq!(field(&h, "spin-path-info"), "/headers");
    assert_eq!(field(&h, "spin-matched-route"), "/conformance/...");
    assert_eq!(field(&h, "spin-component-route"), "/conformance");
    assert_eq!(field(&h, "spin-raw-component-route"), "/conformance/...");
    assert_eq!(field(&h, "spin-base-path"), "/");
    assert!(
        field(&h, "spin-client-addr").starts_with("127.0.0.1:"),
        "{h}"
    );

    // Captures (one with `_` in its name: `_` becomes `-`) and a wildcard after them.
    let (status, h) = app.get_json("/routes/a/fixed/b/rest/of/it").await?;
    assert_eq!(status, 200, "{h}");
    assert_eq!(field(&h, "spin-path-match-first-name"), "a");
    assert_eq!(field(&h, "spin-path-match-second"), "b");
    assert!(h.get("spin-path-match-first_name").is_none(), "{h}");
    assert_eq!(field(&h, "spin-path-info"), "/rest/of/it");
    assert_eq!(
        field(&h, "spin-component-route"),
        "/routes/:first_name/fixed/:second"
    );
    assert_eq!(
        field(&h, "spin-matched-route"),
        "/routes/:first_name/fixed/:second/..."
    );
    // Trailing slashes are kept in the path info; an empty wildcard is "".
    for (path, info) in [
        ("/routes/a/fixed/b", ""),
        ("/routes/a/fixed/b/", "/"),
        ("/routes/a/fixed/b/c/", "/c/"),
    ] {
        let (status, h) = app.get_json(path).await?;
        assert_eq!((status, field(&h, "spin-path-info")), (200, info), "{path}");
    }
    let (status, _) = app.get("/routes/a/other/b").await?;
    assert_eq!(status, 404, "a literal segment that differs does not match");
    let (status, body) = app.get("/hello").await?;
    assert_eq!((status, body.as_str()), (200, "hello"));
    Ok(())
}

/// Spin answers an unmatched route (`server.rs`, `not_found`) and a failed guest
/// (`internal_error(None, …)`) with a status and an empty body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_routes_and_traps_get_empty_bodies() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    for path in ["/nothing-here", "/hello/x", "/.well-known/spin/other"] {
        let (status, body) = app.get(path).await?;
        assert_eq!((status, body.as_str()), (404, ""), "{path}");
    }
    let (status, body) = app.get("/conformance/trap").await?;
    assert_eq!((status, body.as_str()), (500, ""));
    Ok(())
}

/// `server.rs`: `/.well-known/spin/health` is `200 OK`, `/.well-known/spin/info` is the app's
/// `AppInfo` (`crates/http/src/app_info.rs`), answered by the runtime before routing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn well_known_routes_are_answered_by_the_host() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let (status, body) = app.get("/.well-known/spin/health").await?;
    assert_eq!((status, body.as_str()), (200, "OK"));
    let resp = reqwest::get(format!("{}/.well-known/spin/info", app.base_url)).await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let info: Value = resp.json().await?;
    assert_eq!(
        info,
        serde_json::json!({ "name": "conformance", "version": "0.1.0" })
    );
    Ok(())
}

/// `wasi.rs` (`prepare_request`) keeps the client's headers and appends Spin's after them;
/// spin-sdk's `Request` keeps the last value of a name, so a client cannot forge Spin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoofed_spin_headers_change_nothing() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let resp = reqwest::Client::new()
        .get(format!("{}/routes/a/fixed/b/x", app.base_url))
        .header("spin-client-addr", "6.6.6.6:1")
        .header("spin-path-match-first-name", "forged")
        .header("spin-path-info", "/forged")
        .header("spin-full-url", "http://evil.example/")
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    let h: Value = resp.json().await?;
    assert!(
        field(&h, "spin-client-addr").starts_with("127.0.0.1:"),
        "{h}"
    );
    assert_eq!(field(&h, "spin-path-match-first-name"), "a");
    assert_eq!(field(&h, "spin-path-info"), "/x");
    assert!(
        field(&h, "spin-full-url").starts_with("http://127.0.0.1:"),
        "{h}"
    );
    Ok(())
}

/// Raw HTTP/1 exchanges: what a client without `Host` (Spin's `set_req_uri` fails, and its
/// service returns an error, so hyper closes the connection unanswered) or with a header value
/// that is not UTF-8 (`prepare_request_headers` fails inside the executor: 500) gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_spin_cannot_read_are_refused_like_spin() -> Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let exchange = |request: Vec<u8>| {
        let addr = addr.clone();
        async move {
            let mut s = tokio::net::TcpStream::connect(addr).await?;
            s.write_all(&request).await?;
            let mut out = Vec::new();
            tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await??;
            anyhow::Ok(String::from_utf8_lossy(&out).into_owned())
        }
    };
    let no_host = exchange(b"GET /hello HTTP/1.0\r\n\r\n".to_vec()).await?;
    assert_eq!(no_host, "", "the connection is closed without a response");
    let mut latin1 = b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Name: caf".to_vec();
    latin1.extend_from_slice(b"\xe9\r\n\r\n");
    let answer = exchange(latin1).await?;
    assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
    let ok = exchange(b"GET /hello HTTP/1.0\r\nHost: x\r\n\r\n".to_vec()).await?;
    assert!(
        ok.starts_with("HTTP/1.0 200") && ok.ends_with("hello"),
        "{ok}"
    );
    Ok(())
}

/// Spin spawns a `wasi:http@0.2` guest in a task of its own (`wasi.rs`): a client that gives up
/// does not cancel it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_does_not_cancel_the_guest() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(150))
        .build()?;
    for _ in 0..3 {
        let gave_up = client
            .get(format!("{}/conformance/slow-incr", app.base_url))
            .send()
            .await;
        assert!(gave_up.is_err(), "the client timed out first");
    }
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let mut done = 0;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        done = redis::cmd("GET")
            .arg("slow-incr:done")
            .query_async::<Option<i64>>(&mut conn)
            .await?
            .unwrap_or(0);
        if done == 3 {
            break;
        }
    }
    assert_eq!(done, 3, "every abandoned guest ran to its end");
    Ok(())
}

/// A spike far beyond the instance pool queues for instances: every request is answered, none
/// gets a 500 because the pool ran out (the pool keeps headroom over the permits, `app.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_spike_beyond_the_instance_pool_waits_for_instances() -> Result<()> {
    use futures::stream::{self, StreamExt};
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let vars = conformance_vars(&redis, &pg);
    let app = TestApp::start_sized("tests/manifests/conformance.toml", &vars, 4).await?;
    // The most requests seen waiting for a slot at once while the spike ran.
    let done = std::sync::atomic::AtomicBool::new(false);
    let most_waiting = async {
        let mut most = 0;
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            most = most.max(app.app.requests_waiting());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        most
    };
    let spike = async {
        let statuses: Result<Vec<u16>> = stream::iter(0..20_000)
            .map(|_| async { app.get("/hello").await.map(|(status, _)| status) })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        statuses
    };
    let (statuses, most_waiting) = tokio::join!(spike, most_waiting);
    let statuses = statuses?;
    let failed = statuses.iter().filter(|s| **s != 200).count();
    assert_eq!(failed, 0, "of {} requests", statuses.len());
    assert!(
        most_waiting > 0,
        "64 clients on 4 instances: requests waited for a slot"
    );
    Ok(())
}

/// A request that finds every instance slot taken for longer than the instance wait is shed:
/// answered at once `503` with `Retry-After` in the host's own words, never run; once a slot is
/// free again, requests are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_finds_no_instance_in_time_is_shed_with_retry_after() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let vars = conformance_vars(&redis, &pg);
    let app = TestApp::builder("tests/manifests/conformance.toml")
        .vars(&vars)
        .max_instances(1)
        .instance_wait(Duration::from_millis(100))
        .start()
        .await?;
    // The one slot is held by a guest that sleeps 700 ms; meanwhile /hello is shed.
    let slow = tokio::spawn({
        let url = format!("{}/conformance/slow-incr", app.base_url);
        async move { reqwest::get(url).await.map(|r| r.status().as_u16()) }
    });
    // A 503 can only come from the wait running out: once the slot is free, /hello is served.
    let mut shed = None;
    while shed.is_none() && !slow.is_finished() {
        let resp = reqwest::get(format!("{}/hello", app.base_url)).await?;
        if resp.status().as_u16() == 503 {
            shed = Some(resp);
        }
    }
    let shed = shed.expect("a request was shed while the slot was held");
    assert_eq!(
        shed.headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap_or("")),
        Some("1")
    );
    let body = shed.text().await?;
    assert_eq!(body, seckill_host::trigger::http::SHED_MESSAGE);
    assert_eq!(slow.await??, 200, "the guest holding the slot finished");
    let (status, body) = app.get("/hello").await?;
    assert_eq!((status, body.as_str()), (200, "hello"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_guest_gives_500_and_the_next_request_succeeds() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    for _ in 0..3 {
        let (status, _) = app.get("/conformance/trap").await?;
        assert_eq!(status, 500);
        let (status, body) = app.get("/hello").await?;
        assert_eq!((status, body.as_str()), (200, "hello"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_triggers_fire_on_schedule() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let schedules = tokio::spawn(seckill_host::trigger::cron::run_schedules(app.app.clone()));
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let mut runs = 0i64;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        runs = redis::cmd("GET")
            .arg("cron-probe:runs")
            .query_async::<Option<i64>>(&mut conn)
            .await?
            .unwrap_or(0);
        if runs >= 2 {
            break;
        }
    }
    schedules.abort();
    assert!(runs >= 2, "a */1 s schedule ran {runs} times in 6 s");
    let ts: u64 = redis::cmd("GET")
        .arg("cron-probe:last-timestamp")
        .query_async::<String>(&mut conn)
        .await?
        .parse()?;
    assert!(
        ts >= before && ts <= before + 10,
        "timestamp {ts} is the firing time (started at {before})"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_faithful_mode_opens_a_connection_per_request() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let vars = [("redis_host", redis.host()), ("pg_host", pg.host())];
    let faithful = TestApp::start_with(
        "tests/manifests/conformance.toml",
        &vars,
        seckill_host::ConnectionMode::SpinFaithful,
    )
    .await?;
    let pooled = TestApp::start("tests/manifests/conformance.toml", &vars).await?;
    for _ in 0..5 {
        assert_eq!(faithful.get("/conformance/redis").await?.0, 200);
        assert_eq!(pooled.get("/conformance/redis").await?.0, 200);
    }
    assert_eq!(faithful.app.services().redis.connections_opened(), 5);
    assert_eq!(pooled.app.services().redis.connections_opened(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_interface_matches_spin() -> Result<()> {
    use serde_json::json;
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = conformance_app(&redis, &pg).await?;
    let (status, r) = app.get_json("/conformance/pg").await?;
    assert_eq!(status, 200, "{r}");
    for (name, expected) in [
        ("open", json!("ok")),
        ("drop_existing", json!(0)),
        ("create_table", json!(0)),
        ("insert_rows", json!(1)),
        ("insert_null_rows", json!(1)),
        ("row_count", json!(1)),
        ("null_row_count", json!(1)),
        ("delete_rows", json!(2)),
        ("drop_table", json!(0)),
        (
            "param_query",
            json!({"columns": [["c_str", "str"]], "rows": [[{"str": "héllo ✓"}]]}),
        ),
        ("empty_query", json!({"columns": [], "rows": []})),
        (
            "second_connection",
            json!({"columns": [["one", "int32"]], "rows": [[{"int32": 1}]]}),
        ),
    ] {
        assert_eq!(r[name], expected, "{name} in {r}");
    }
    let columns: Vec<(String, String)> = serde_json::from_value(r["columns"].clone())?;
    let expected_types = [
        ("c_bool", "boolean"),
        ("c_int8", "other(char)"),
        ("c_int16", "int16"),
        ("c_int32", "int32"),
        ("c_int64", "int64"),
        ("c_float32", "floating32"),
        ("c_float64", "floating64"),
        ("c_str", "str"),
        ("c_binary", "binary"),
        ("c_date", "date"),
        ("c_time", "time"),
        ("c_datetime", "datetime"),
        ("c_uuid", "uuid"),
        ("c_jsonb", "jsonb"),
        ("c_decimal", "decimal"),
        ("c_range_int32", "range-int32"),
        ("c_range_int64", "range-int64"),
        ("c_range_decimal", "range-decimal"),
        ("c_array_int32", "array-int32"),
        ("c_array_int64", "array-int64"),
        ("c_array_decimal", "array-decimal"),
        ("c_array_str", "array-str"),
        ("c_interval", "interval"),
        ("c_null", "str"),
        ("c_timestamp_epoch", "int64"),
    ];
    assert_eq!(columns.len(), expected_types.len(), "{r}");
    for ((name, ty), (en, et)) in columns.iter().zip(expected_types) {
        assert_eq!((name.as_str(), ty.as_str()), (en, et));
    }
    let row = &r["row"];
    let expected_row = [
        ("c_bool", json!({"boolean": true})),
        ("c_int8", json!({"unsupported": [251]})),
        ("c_int16", json!({"int16": -300})),
        ("c_int32", json!({"int32": 2000000000})),
        ("c_int64", json!({"int64": -9000000000000i64})),
        ("c_float32", json!({"floating32": 1.5})),
        ("c_float64", json!({"floating64": -2.25})),
        ("c_str", json!({"str": "héllo ✓"})),
        ("c_binary", json!({"binary": [0, 1, 2, 255]})),
        ("c_date", json!({"date": [2024, 2, 29]})),
        ("c_time", json!({"time": [23, 59, 58, 123456000]})),
        (
            "c_datetime",
            json!({"datetime": [1999, 12, 31, 23, 59, 59, 999999000]}),
        ),
        (
            "c_uuid",
            json!({"uuid": "67e55044-10b1-426f-9247-bb680e5fe0c8"}),
        ),
        ("c_jsonb", json!({"jsonb": "{\"a\":\"x\",\"b\":[1,2]}"})),
        ("c_decimal", json!({"decimal": "-12345.6789"})),
        (
            "c_range_int32",
            json!({"range-int32": [[1, "inclusive"], [11, "exclusive"]]}),
        ),
        (
            "c_range_int64",
            json!({"range-int64": [[5000000001i64, "inclusive"], null]}),
        ),
        (
            "c_range_decimal",
            json!({"range-decimal": [["1.5", "inclusive"], ["2.25", "exclusive"]]}),
        ),
        ("c_array_int32", json!({"array-int32": [1, null, -3]})),
        (
            "c_array_int64",
            json!({"array-int64": [1099511627776i64, null]}),
        ),
        ("c_array_decimal", json!({"array-decimal": ["0.10", null]})),
        ("c_array_str", json!({"array-str": ["a", null, ""]})),
        (
            "c_interval",
            json!({"interval": {"micros": 3723000001i64, "days": -4, "months": 14}}),
        ),
        ("c_null", json!({"db-null": null})),
        ("c_timestamp_epoch", json!({"int64": 1700000000})),
    ];
    for (name, expected) in expected_row {
        assert_eq!(row[name], expected, "row.{name} in {row}");
        assert_eq!(
            r["null_row"][name],
            json!({"db-null": null}),
            "null_row.{name}"
        );
    }
    let err = |name: &str| r[name].clone();
    let tz = err("timestamptz_error");
    assert_eq!(
        (tz["variant"].as_str(), tz["kind"].as_str()),
        (Some("query-failed"), Some("text"))
    );
    assert!(
        tz["message"]
            .as_str()
            .unwrap()
            .contains("the Postgres type `timestamptz`"),
        "{tz}"
    );
    let wrong = err("wrong_type_error");
    assert_eq!(wrong["variant"], "query-failed");
    assert_eq!(
        wrong["message"],
        r#"Error { kind: ToSql(0), cause: Some(WrongType { postgres: Int8, rust: "i32" }) }"#
    );
    let bad_q = err("bad_parameter_query_error");
    assert_eq!(bad_q["variant"], "bad-parameter");
    assert!(
        bad_q["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid UUID not-a-uuid"),
        "{bad_q}"
    );
    let bad_e = err("bad_parameter_execute_error");
    assert_eq!(bad_e["variant"], "value-conversion-failed");
    assert!(
        bad_e["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid UUID not-a-uuid"),
        "{bad_e}"
    );
    let failed = err("failed_statement_error");
    assert_eq!(
        (
            failed["variant"].as_str(),
            failed["kind"].as_str(),
            failed["severity"].as_str(),
            failed["code"].as_str()
        ),
        (
            Some("query-failed"),
            Some("db-error"),
            Some("ERROR"),
            Some("42P01")
        )
    );
    assert_eq!(
        failed["message"],
        r#"relation "no_such_table" does not exist"#
    );
    assert!(failed["detail"].is_null());
    assert!(
        failed["as_text"].as_str().unwrap().contains("E42P01"),
        "{failed}"
    );
    assert!(failed["extras"].get("file").is_some(), "{failed}");
    let denied = err("denied_error");
    assert_eq!(denied["variant"], "connection-failed");
    assert_eq!(
        denied["message"],
        "address postgres://127.0.0.2:5432 is not permitted"
    );
    Ok(())
}
