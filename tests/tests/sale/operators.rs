//! The operators' side: who they are (named secrets, roles, a rotation), what they changed (the
//! audit), and bad input (the admin token, an event configuration that cannot be, changes a
//! warmed-up event must refuse). Refused, they change nothing.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{
    ADMIN_TOKEN, OPERATOR, PgServer, ROTATED_ADMIN_TOKEN, RedisServer, TestApp, VIEWER,
    VIEWER_TOKEN,
};
use serde_json::{Value, json};

use crate::{code, epoch_ms, snapshot, start};

/// A running app with the warmed-up event `open` and its snapshot before any bad input.
async fn with_open_event() -> Result<(RedisServer, PgServer, TestApp, Value)> {
    let (redis, pg, app) = start().await?;
    app.open_event("open", json!({})).await?;
    let before = snapshot(&app, "open").await?;
    Ok((redis, pg, app, before))
}

/// No token: 401 with `WWW-Authenticate: Bearer`; a wrong one: 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_without_the_admin_token_are_401_and_change_nothing() -> Result<()> {
    let (_redis, _pg, app, before) = with_open_event().await?;
    let resp = app
        .http
        .get(format!("{}/admin/events/open", app.base_url))
        .send()
        .await?;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let (status, _) = app
        .call(Method::GET, "/admin/events/open", Some("wrong"), None)
        .await?;
    assert_eq!(status, 401);
    assert_eq!(
        snapshot(&app, "open").await?,
        before,
        "bad input changed nothing"
    );
    Ok(())
}

/// An end before the start, or a sku Postgres cannot store: 400 `invalid_config`, and the
/// event is not created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_event_config_is_400_invalid_config() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let now = epoch_ms()?;
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/bad",
            Some(&json!({ "sku": "x", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 1, "start_ms": 5, "end_ms": 1 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "invalid_config"));
    // Postgres cannot store NUL: such a sku would make every order a dead letter.
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/nul",
            Some(&json!({ "sku": "a\u{0}b", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 1, "start_ms": 1, "end_ms": now + 10_000 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "invalid_config"), "{resp}");
    let (status, _) = app.admin(Method::GET, "/admin/events/nul", None).await?;
    assert_eq!(status, 404, "a refused event is not created");
    // A time the Lua scripts cannot hold exactly (beyond 2^53): refused here, never a 500 at
    // admission; nor may a switch move an end there.
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/far",
            Some(&json!({ "sku": "x", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 1, "start_ms": 1, "end_ms": 9_223_372_036_854_775_807u64 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "invalid_config"), "{resp}");
    let (status, _) = app.admin(Method::GET, "/admin/events/far", None).await?;
    assert_eq!(status, 404, "a refused event is not created");
    app.open_event("near", json!({ "stock": 1 })).await?;
    let (status, resp) = app
        .admin(
            Method::PATCH,
            "/admin/events/near",
            Some(&json!({ "end_ms": 9_007_199_254_740_993u64 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "invalid_config"), "{resp}");
    let (status, body) = app.admission("near", "alice").await?;
    assert_eq!(status, 200, "{body}");
    Ok(())
}

/// The stock is loaded once: a second warm-up, or a new stock after warm-up, is 409 `conflict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_happens_once_and_freezes_the_stock() -> Result<()> {
    let (_redis, _pg, app, before) = with_open_event().await?;
    let now = epoch_ms()?;
    let (status, resp) = app
        .admin(Method::POST, "/admin/events/open/warmup", None)
        .await?;
    assert_eq!(
        (status, code(&resp)),
        (409, "conflict"),
        "warm-up happens once"
    );
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/open",
            Some(&json!({ "sku": "x", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 99, "start_ms": 1, "end_ms": now + 10_000 })),
        )
        .await?;
    assert_eq!(
        (status, code(&resp)),
        (409, "conflict"),
        "stock is frozen after warm-up"
    );
    assert_eq!(
        snapshot(&app, "open").await?,
        before,
        "bad input changed nothing"
    );
    Ok(())
}

/// [`with_open_event`] over a migrated database: the audit has its table from the start.
async fn with_audit() -> Result<(RedisServer, PgServer, TestApp, Value)> {
    let (redis, pg, app) = start().await?;
    pg.migrate().await?;
    app.open_event("open", json!({})).await?;
    let before = snapshot(&app, "open").await?;
    Ok((redis, pg, app, before))
}

/// The newest audit records of `event`, read with `token`.
async fn audit(app: &TestApp, token: &str, event: &str) -> Result<Vec<Value>> {
    let (status, body) = app
        .call(
            Method::GET,
            &format!("/admin/audit?event={event}&limit=10"),
            Some(token),
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "audit: {status} {body}");
    Ok(body["records"].as_array().cloned().unwrap_or_default())
}

/// The bearer secret names its operator and role (the console disables a viewer's controls by
/// it); a wrong one is 401, a write method 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoami_names_the_operator_and_role_of_the_secret() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    for (token, name, role) in [
        (ADMIN_TOKEN, OPERATOR, "operator"),
        (VIEWER_TOKEN, VIEWER, "viewer"),
    ] {
        let (status, body) = app
            .call(Method::GET, "/admin/whoami", Some(token), None)
            .await?;
        assert_eq!(
            (status, body),
            (200, json!({ "operator": name, "role": role }))
        );
    }
    let (status, body) = app
        .call(Method::GET, "/admin/whoami", Some("wrong"), None)
        .await?;
    assert_eq!((status, code(&body)), (401, "unauthorized"));
    let (status, body) = app
        .call(Method::POST, "/admin/whoami", Some(ADMIN_TOKEN), None)
        .await?;
    assert_eq!((status, code(&body)), (405, "method_not_allowed"));
    Ok(())
}

/// A viewer reads everything an operator reads; every write (each admin write and a job) is
/// `403 forbidden`, changes nothing, and is recorded refused under the viewer's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_but_every_write_is_403_and_changes_nothing() -> Result<()> {
    let (_redis, _pg, app, before) = with_audit().await?;
    for path in [
        "/admin/events",
        "/admin/events/open",
        "/admin/health",
        "/admin/audit",
    ] {
        let (status, body) = app
            .call(Method::GET, path, Some(VIEWER_TOKEN), None)
            .await?;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let config = app.status("open").await?["config"].clone();
    let now = epoch_ms()?;
    let writes = [
        (
            Method::PUT,
            "/admin/events/open",
            Some(
                json!({ "sku": "x", "stock": 10, "shards": 4, "start_ms": 1, "end_ms": now + 10_000 }),
            ),
        ),
        (
            Method::PATCH,
            "/admin/events/open",
            Some(json!({ "enabled": false })),
        ),
        (Method::POST, "/admin/events/open/warmup", None),
        (
            Method::POST,
            "/admin/events/open/deny",
            Some(json!({ "users": ["u1"] })),
        ),
        (Method::POST, "/admin/events/open/draw", None),
        (Method::POST, "/admin/jobs/drain", None),
    ];
    for (method, path, body) in &writes {
        let (status, resp) = app
            .call(method.clone(), path, Some(VIEWER_TOKEN), body.as_ref())
            .await?;
        assert_eq!((status, code(&resp)), (403, "forbidden"), "{method} {path}");
    }
    assert_eq!(snapshot(&app, "open").await?, before, "nothing changed");
    assert_eq!(
        app.status("open").await?["config"],
        config,
        "nor the configuration"
    );
    let records = audit(&app, VIEWER_TOKEN, "open").await?;
    let refused: Vec<(&str, &str, i64)> = records
        .iter()
        .filter(|r| r["operator"] == VIEWER)
        .map(|r| {
            (
                r["method"].as_str().unwrap_or("?"),
                r["path"].as_str().unwrap_or("?"),
                r["status"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            ("POST", "/admin/events/open/draw", 403),
            ("POST", "/admin/events/open/deny", 403),
            ("POST", "/admin/events/open/warmup", 403),
            ("PATCH", "/admin/events/open", 403),
            ("PUT", "/admin/events/open", 403),
        ],
        "each refused write of an event, newest first (jobs are not recorded)"
    );
    assert!(
        records
            .iter()
            .all(|r| r["operator"] != VIEWER || r["role"] == "viewer")
    );
    Ok(())
}

/// During a rotation one operator holds two secrets: both are accepted, and both are the same
/// name in the audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_secrets_of_an_operator_being_rotated_work() -> Result<()> {
    let (_redis, _pg, app, _) = with_audit().await?;
    for (token, enabled) in [(ADMIN_TOKEN, false), (ROTATED_ADMIN_TOKEN, true)] {
        let (status, body) = app
            .call(
                Method::PATCH,
                "/admin/events/open",
                Some(token),
                Some(&json!({ "enabled": enabled })),
            )
            .await?;
        assert_eq!(status, 200, "{body}");
        let (status, _) = app
            .call(Method::GET, "/admin/events/open", Some(token), None)
            .await?;
        assert_eq!(status, 200);
    }
    let records = audit(&app, ROTATED_ADMIN_TOKEN, "open").await?;
    let patches: Vec<(&Value, &Value)> = records
        .iter()
        .filter(|r| r["method"] == "PATCH")
        .map(|r| (&r["operator"], &r["after"]["enabled"]))
        .collect();
    assert_eq!(
        patches,
        [
            (&json!(OPERATOR), &json!("1")),
            (&json!(OPERATOR), &json!("0"))
        ],
        "one operator, whichever secret; newest first"
    );
    Ok(())
}

/// An operator's PATCH leaves a record: who, when, which route, and the configuration before
/// and after, readable at `GET /admin/audit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_patch_is_recorded_with_who_and_before_and_after() -> Result<()> {
    let (_redis, _pg, app, _) = with_audit().await?;
    let started = epoch_ms()?;
    let (status, body) = app
        .admin(
            Method::PATCH,
            "/admin/events/open",
            Some(&json!({ "enabled": false, "user_rate": 2, "user_burst": 5 })),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    let records = audit(&app, ADMIN_TOKEN, "open").await?;
    let newest = &records[0];
    assert_eq!(
        (
            &newest["operator"],
            &newest["role"],
            &newest["method"],
            &newest["path"],
            &newest["event_id"],
            &newest["status"],
        ),
        (
            &json!(OPERATOR),
            &json!("operator"),
            &json!("PATCH"),
            &json!("/admin/events/open"),
            &json!("open"),
            &json!(200),
        ),
        "{newest}"
    );
    assert!(newest["at_ms"].as_u64().unwrap_or(0) >= started, "{newest}");
    assert_eq!(
        (&newest["before"]["enabled"], &newest["after"]["enabled"]),
        (&json!("1"), &json!("0"))
    );
    assert_eq!(newest["after"]["user_rate"], "2");
    assert_eq!(
        newest["before"]["sku"], newest["after"]["sku"],
        "the rest kept"
    );
    assert_ne!(newest["before"]["version"], newest["after"]["version"]);
    assert_eq!(
        newest["after"],
        app.status("open").await?["config"],
        "after is what the event now holds"
    );
    // Before it, the event's creation and warm-up, newest first.
    let older: Vec<&Value> = records[1..].iter().map(|r| &r["path"]).collect();
    assert_eq!(
        older,
        [
            &json!("/admin/events/open/warmup"),
            &json!("/admin/events/open")
        ]
    );
    assert!(records[2]["before"].is_null() && records[2]["status"] == 201);
    Ok(())
}

/// With no audit table (the database not migrated), a write still happens: it is answered as
/// done, with `Seckill-Audit: not-recorded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_record_cannot_be_stored_still_happens_and_says_so() -> Result<()> {
    let (_redis, _pg, app, _) = with_open_event().await?;
    let resp = app
        .http
        .patch(format!("{}/admin/events/open", app.base_url))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "enabled": false }))
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["seckill-audit"], "not-recorded");
    assert_eq!(app.status("open").await?["config"]["enabled"], "0");
    Ok(())
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn moving_the_end_before_the_start_is_409_and_changes_nothing() -> Result<()> {
        let (_redis, _pg, app, before) = with_open_event().await?;
        let (status, resp) = app
            .admin(
                Method::PATCH,
                "/admin/events/open",
                Some(&json!({ "end_ms": 1 })),
            )
            .await?;
        assert_eq!((status, code(&resp)), (409, "conflict"), "{resp}");
        assert_eq!(
            snapshot(&app, "open").await?,
            before,
            "bad input changed nothing"
        );
        Ok(())
    }
}

/// A client-sent `spin-path-match-event-id` (Spin passes it through on routes without that
/// capture) does not steer the admin function: it routes on the route Spin matched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sent_path_match_header_does_not_steer_the_admin_routes() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let (status, body) = app
        .call_with_headers(
            Method::GET,
            "/admin/whoami",
            Some(seckill_testkit::ADMIN_TOKEN),
            None,
            &[("spin-path-match-event-id", "e1")],
        )
        .await?;
    assert_eq!((status, &body["role"]), (200, &json!("operator")), "{body}");
    let (status, body) = app
        .call_with_headers(
            Method::GET,
            "/admin/events",
            Some(seckill_testkit::ADMIN_TOKEN),
            None,
            &[("spin-path-match-event-id", "e1")],
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    assert!(body["events"].is_array(), "{body}");
    Ok(())
}

/// The order events' endpoints as operators manage them: a URL that is not `https` to a public
/// host is `400 invalid_endpoint` and registers nothing, a viewer's write is `403`; registered,
/// the secret is answered once and never recorded; disabled, enabled, rotated (the old secret
/// signs beside the new for a while), its log read, removed. Every write is in the audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_event_endpoints_are_managed_by_operators_and_audited() -> Result<()> {
    let (_redis, _pg, app, _) = with_audit().await?;
    for bad in [
        "http://shop.example.com/hooks",
        "https://10.0.0.8/hooks",
        "https://169.254.169.254/latest",
        "https://localhost/hooks",
    ] {
        let (status, body) = app
            .admin(
                Method::POST,
                "/admin/webhooks",
                Some(&json!({ "url": bad })),
            )
            .await?;
        assert_eq!(
            (status, code(&body)),
            (400, "invalid_endpoint"),
            "{bad}: {body}"
        );
    }
    let hooks = json!({ "url": "https://shop.example.com/hooks", "description": "fulfilment" });
    let (status, body) = app
        .call(
            Method::POST,
            "/admin/webhooks",
            Some(VIEWER_TOKEN),
            Some(&hooks),
        )
        .await?;
    assert_eq!((status, code(&body)), (403, "forbidden"));
    let (_, listed) = app.admin(Method::GET, "/admin/webhooks", None).await?;
    assert_eq!(
        listed,
        json!({ "endpoints": [], "backlog": [] }),
        "nothing registered"
    );

    let (status, made) = app
        .admin(Method::POST, "/admin/webhooks", Some(&hooks))
        .await?;
    assert_eq!(status, 201, "{made}");
    let secret = made["secret"].as_str().expect("a secret").to_owned();
    assert!(secret.starts_with("whsec_"));
    let id = made["endpoint"]["endpoint_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let at = |rest: &str| format!("/admin/webhooks/{id}{rest}");
    let (status, off) = app.admin(Method::POST, &at("/disable"), None).await?;
    assert_eq!((status, &off["enabled"]), (200, &json!(false)), "{off}");
    assert_eq!(off["disabled_by"], "operator");
    let (status, on) = app.admin(Method::POST, &at("/enable"), None).await?;
    assert_eq!((status, &on["enabled"]), (200, &json!(true)), "{on}");
    let (status, rotated) = app.admin(Method::POST, &at("/rotate"), None).await?;
    assert_eq!(status, 200, "{rotated}");
    let new_secret = rotated["secret"].as_str().expect("a secret").to_owned();
    assert_ne!(new_secret, secret);
    assert!(rotated["endpoint"]["previous_secret_until_ms"].as_i64() > Some(0));
    let (status, log) = app.admin(Method::GET, &at("/deliveries"), None).await?;
    assert_eq!((status, log), (200, json!({ "deliveries": [] })));
    // Every list's `limit` is checked alike (one helper): out of range is `400 bad_query`.
    for path in [
        at("/deliveries?limit=0"),
        at("/deliveries?limit=501"),
        "/admin/audit?limit=201".to_owned(),
        "/admin/audit?limit=ten".to_owned(),
    ] {
        let (status, body) = app.admin(Method::GET, &path, None).await?;
        assert_eq!((status, code(&body)), (400, "bad_query"), "{path}: {body}");
    }
    let (status, body) = app
        .admin(
            Method::POST,
            &at("/replay"),
            Some(&json!({ "msg_id": "msg_none" })),
        )
        .await?;
    assert_eq!((status, code(&body)), (404, "not_found"));
    let (status, body) = app
        .admin(
            Method::POST,
            &at("/replay"),
            Some(&json!({ "msg_id": "m", "from_ms": 1 })),
        )
        .await?;
    assert_eq!((status, code(&body)), (400, "malformed_json"));
    let (status, _) = app.admin(Method::DELETE, &at(""), None).await?;
    assert_eq!(status, 200);
    let (status, body) = app.admin(Method::GET, &at(""), None).await?;
    assert_eq!((status, code(&body)), (404, "not_found"));

    let (_, audit) = app
        .admin(Method::GET, "/admin/audit?limit=50", None)
        .await?;
    let records: Vec<(&str, u64)> = audit["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("/admin/webhooks"))
        })
        .map(|r| {
            (
                r["method"].as_str().unwrap_or(""),
                r["status"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        records.len(),
        12,
        "every write, refused ones too: {records:?}"
    );
    assert!(records.contains(&("POST", 201)) && records.contains(&("DELETE", 200)));
    let text = audit.to_string();
    assert!(
        !text.contains(&secret) && !text.contains(&new_secret),
        "no secret recorded"
    );
    Ok(())
}
