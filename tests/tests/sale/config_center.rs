//! The config center: every change of an event's configuration is a version (who, when, what
//! changed) and one call rolls back to any of them; the gray release's share of users, raised
//! live; the global bucket across events; a limit in shadow mode, counted and not enforced.

use anyhow::Result;
use reqwest::Method;
use seckill_domain::ids::gray_bucket;
use seckill_testkit::{OPERATOR, TestApp, VIEWER_TOKEN};
use serde_json::{Value, json};

use seckill_testkit::{PgServer, RedisServer};

use crate::{assert_sold_exactly, code, snapshot};

/// The app over a migrated database: versions and the audit have their tables.
async fn start() -> Result<(RedisServer, PgServer, TestApp)> {
    let (redis, pg, app) = crate::start().await?;
    pg.migrate().await?;
    Ok((redis, pg, app))
}

/// The event's versions, newest first.
async fn versions(app: &TestApp, event: &str) -> Result<Vec<Value>> {
    let (status, body) = app
        .admin(
            Method::GET,
            &format!("/admin/events/{event}/versions"),
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "versions: {status} {body}");
    Ok(body["versions"].as_array().cloned().unwrap_or_default())
}

/// The change of `field` a version lists, as (before, after).
fn changed(version: &Value, field: &str) -> Option<(Value, Value)> {
    version["changes"]
        .as_array()?
        .iter()
        .find(|c| c["field"] == field)
        .map(|c| (c["before"].clone(), c["after"].clone()))
}

/// Whether `user` passes precheck (admission first); otherwise the refusal's status and code.
async fn passes(app: &TestApp, event: &str, user: &str) -> Result<Result<(), (u16, String)>> {
    Ok(match app.admit_and_precheck(event, user).await? {
        Ok(_) => Ok(()),
        Err((status, body)) => Err((status, code(&body).to_owned())),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_a_version_and_a_rollback_applies_one_again() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("cc", json!({})).await?;
    let (status, resp) = app
        .admin(
            Method::PATCH,
            "/admin/events/cc",
            Some(&json!({ "gray_percent": 30, "user_rate": 2.0, "user_burst": 4 })),
        )
        .await?;
    assert_eq!(status, 200, "{resp}");
    let listed = versions(&app, "cc").await?;
    assert_eq!(listed.len(), 2, "create, switches: {listed:?}");
    let (created, switched) = (&listed[1], &listed[0]);
    assert_eq!(
        (created["change"].as_str(), switched["change"].as_str()),
        (Some("create"), Some("switches"))
    );
    assert_eq!(switched["operator"], OPERATOR);
    assert_eq!(
        changed(switched, "gray_percent"),
        Some((json!(100), json!(30)))
    );
    assert_eq!(changed(switched, "user_burst"), Some((json!(5), json!(4))));
    assert_eq!(
        switched["changes"].as_array().map(Vec::len),
        Some(3),
        "{switched}"
    );
    assert!(
        changed(created, "sku").is_some(),
        "a first version changes every field"
    );

    let first = created["version"].as_i64().unwrap();
    let (status, resp) = app
        .admin(
            Method::POST,
            "/admin/events/cc/rollback",
            Some(&json!({ "version": first })),
        )
        .await?;
    assert_eq!(status, 200, "{resp}");
    let config = &app.status("cc").await?["config"];
    assert_eq!(
        (
            config["gray_percent"].as_str(),
            config["user_burst"].as_str()
        ),
        (Some("100"), Some("5"))
    );
    let listed = versions(&app, "cc").await?;
    let rollback = &listed[0];
    assert_eq!(listed.len(), 3);
    assert_eq!(rollback["change"], "rollback");
    assert_eq!(rollback["rolled_back_to"], first);
    assert_eq!(
        changed(rollback, "gray_percent"),
        Some((json!(30), json!(100)))
    );
    assert_eq!(
        rollback["config"], created["config"],
        "the version's configuration, again"
    );
    assert_sold_exactly(&app, "cc", 10, 0).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_that_cannot_be_is_refused_and_changes_nothing() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    // Version 1 holds 10 units; the warmed-up event holds 20, which a warm event cannot change.
    let now = crate::epoch_ms()?;
    let base = json!({ "sku": "s", "unit_amount": 100, "currency": "eur", "stock": 10, "shards": 2,
        "start_ms": now - 1_000, "end_ms": now + 3_600_000, "pow_difficulty": 0, "admission_addr_rate": 0 });
    assert_eq!(
        app.admin(Method::PUT, "/admin/events/rb", Some(&base))
            .await?
            .0,
        201
    );
    let first = versions(&app, "rb").await?[0]["version"].as_i64().unwrap();
    app.open_event("rb", json!({ "stock": 20, "shards": 2 }))
        .await?;
    let before = snapshot(&app, "rb").await?;
    let versions_before = versions(&app, "rb").await?.len();
    for (token, body, want) in [
        (None, json!({ "version": first }), (409, "conflict")),
        (None, json!({ "version": first + 1000 }), (404, "not_found")),
        (None, json!({ "version": "one" }), (400, "malformed_json")),
        (
            Some(VIEWER_TOKEN),
            json!({ "version": first }),
            (403, "forbidden"),
        ),
    ] {
        let (status, resp) = match token {
            None => {
                app.admin(Method::POST, "/admin/events/rb/rollback", Some(&body))
                    .await?
            }
            Some(t) => {
                app.call(
                    Method::POST,
                    "/admin/events/rb/rollback",
                    Some(t),
                    Some(&body),
                )
                .await?
            }
        };
        assert_eq!((status, code(&resp)), want, "{body}: {resp}");
    }
    assert_eq!(
        snapshot(&app, "rb").await?,
        before,
        "refused rollbacks change nothing"
    );
    assert_eq!(
        versions(&app, "rb").await?.len(),
        versions_before,
        "and make no version"
    );
    assert_eq!(app.status("rb").await?["config"]["stock"], "20");
    assert_sold_exactly(&app, "rb", 20, 0).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gray_release_lets_in_its_share_and_more_when_raised() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("gray", json!({ "stock": 100, "gray_percent": 0 }))
        .await?;
    let users: Vec<String> = (0..40).map(|i| format!("gray-user-{i}")).collect();
    for user in &users {
        assert_eq!(
            passes(&app, "gray", user).await?,
            Err((403, "not_released".into()))
        );
    }
    for share in [50, 100] {
        let (status, resp) = app
            .admin(
                Method::PATCH,
                "/admin/events/gray",
                Some(&json!({ "gray_percent": share })),
            )
            .await?;
        assert_eq!(status, 200, "{resp}");
        let mut passed = 0;
        for user in &users {
            let inside = gray_bucket("gray", user) < share;
            let got = passes(&app, "gray", user).await?;
            assert_eq!(got.is_ok(), inside, "{user} at {share} %: {got:?}");
            passed += usize::from(got.is_ok());
        }
        assert!(share < 100 || passed == users.len());
        assert!(
            share == 100 || (5..35).contains(&passed),
            "{passed} of 40 at {share} %"
        );
    }
    let status = app.status("gray").await?;
    assert!(
        status["refusals"]["not_released"].as_i64().unwrap_or(0) >= 40,
        "{status}"
    );
    let (status, resp) = app
        .admin(
            Method::PATCH,
            "/admin/events/gray",
            Some(&json!({ "gray_percent": 101 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "invalid_config"));
    assert_sold_exactly(&app, "gray", 100, 0).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_in_shadow_mode_is_counted_and_not_enforced() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event(
        "shadow",
        json!({ "user_rate": 0.01, "user_burst": 1, "shadow": ["user"], "shards": 1 }),
    )
    .await?;
    for i in 0..3 {
        assert_eq!(passes(&app, "shadow", "sam").await?, Ok(()), "precheck {i}");
    }
    let status = app.status("shadow").await?;
    assert_eq!(status["shadowed"]["user"], 2, "{status}");
    assert_eq!(status["refusals"]["rate_limited"].as_i64().unwrap_or(0), 0);
    // Enforced once out of the shadow.
    let (status, resp) = app
        .admin(
            Method::PATCH,
            "/admin/events/shadow",
            Some(&json!({ "shadow": [] })),
        )
        .await?;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(
        passes(&app, "shadow", "sam").await?,
        Err((429, "rate_limited".into()))
    );
    let (status, resp) = app
        .admin(
            Method::PATCH,
            "/admin/events/shadow",
            Some(&json!({ "shadow": ["nope"] })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "malformed_json"), "{resp}");
    assert_sold_exactly(&app, "shadow", 10, 0).await
}

/// Two live events of one shard each under a global limit of burst 2: each shard holds a
/// burst of one and a trickle of the rate.
async fn two_events_under_a_global_burst_of_two(app: &TestApp) -> Result<()> {
    for event in ["g1", "g2"] {
        app.open_event(event, json!({ "shards": 1, "stock": 50 }))
            .await?;
    }
    let (status, spread) = app
        .admin(
            Method::PUT,
            "/admin/limits/global",
            Some(&json!({ "rate": 0.001, "burst": 2 })),
        )
        .await?;
    assert_eq!(status, 200, "{spread}");
    assert_eq!(
        (spread["events"].as_u64(), spread["shards"].as_u64()),
        (Some(2), Some(2))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_bucket_spans_every_live_event() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    two_events_under_a_global_burst_of_two(&app).await?;
    for event in ["g1", "g2"] {
        assert_eq!(passes(&app, event, &format!("{event}-a")).await?, Ok(()));
        assert_eq!(
            passes(&app, event, &format!("{event}-b")).await?,
            Err((429, "rate_limited".into())),
            "{event}: the global bucket's part is spent"
        );
    }
    // Off again: everybody passes.
    let (status, _) = app
        .admin(
            Method::PUT,
            "/admin/limits/global",
            Some(&json!({ "rate": 0, "burst": 0 })),
        )
        .await?;
    assert_eq!(status, 200);
    assert_eq!(passes(&app, "g2", "g2-d").await?, Ok(()));
    let (_, limit) = app.admin(Method::GET, "/admin/limits/global", None).await?;
    assert_eq!(limit, json!({ "rate": 0.0, "burst": 0 }));
    for event in ["g1", "g2"] {
        assert_sold_exactly(&app, event, 50, 0).await?;
    }
    Ok(())
}

/// An event that lists `global` in its shadow limits counts what the global bucket would
/// refuse and lets it through; another event still enforces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_bucket_in_shadow_counts_and_lets_through_on_that_event_only() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    two_events_under_a_global_burst_of_two(&app).await?;
    for event in ["g1", "g2"] {
        assert_eq!(passes(&app, event, &format!("{event}-a")).await?, Ok(()));
    }
    app.admin(
        Method::PATCH,
        "/admin/events/g1",
        Some(&json!({ "shadow": ["global"] })),
    )
    .await?;
    assert_eq!(passes(&app, "g1", "g1-c").await?, Ok(()));
    assert_eq!(app.status("g1").await?["shadowed"]["global"], 1);
    assert_eq!(
        passes(&app, "g2", "g2-c").await?,
        Err((429, "rate_limited".into()))
    );
    for event in ["g1", "g2"] {
        assert_sold_exactly(&app, event, 50, 0).await?;
    }
    Ok(())
}

/// A viewer may read the global limit, not set it (403, nothing changes); every setting an
/// operator makes, and the viewer's refused attempt, is in the audit, for every event (`*`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_the_global_limit_and_every_setting_is_audited() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    two_events_under_a_global_burst_of_two(&app).await?;
    let (status, resp) = app
        .call(
            Method::PUT,
            "/admin/limits/global",
            Some(VIEWER_TOKEN),
            Some(&json!({ "rate": 5, "burst": 5 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (403, "forbidden"));
    let (status, limit) = app
        .call(
            Method::GET,
            "/admin/limits/global",
            Some(VIEWER_TOKEN),
            None,
        )
        .await?;
    assert_eq!((status, limit), (200, json!({ "rate": 0.001, "burst": 2 })));
    let (status, _) = app
        .admin(
            Method::PUT,
            "/admin/limits/global",
            Some(&json!({ "rate": 0, "burst": 0 })),
        )
        .await?;
    assert_eq!(status, 200);
    let (_, audit) = app.admin(Method::GET, "/admin/audit", None).await?;
    let global: Vec<&Value> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["path"] == "/admin/limits/global")
        .collect();
    // Newest first: each setting, and the viewer's refused attempt.
    let seen: Vec<(&Value, &Value, &Value)> = global
        .iter()
        .map(|r| (&r["operator"], &r["status"], &r["event_id"]))
        .collect();
    assert_eq!(
        seen,
        [
            (&json!("test-operator"), &json!(200), &json!("*")),
            (&json!("test-viewer"), &json!(403), &json!("*")),
            (&json!("test-operator"), &json!(200), &json!("*")),
        ],
        "{audit}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_give_every_live_events_counters_to_prometheus() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event(
        "metered",
        json!({ "stock": 3, "shards": 1, "gray_percent": 100 }),
    )
    .await?;
    for user in ["m1", "m2"] {
        let token = app
            .admit_and_precheck("metered", user)
            .await?
            .expect("admitted");
        assert_eq!(app.buy("metered", user, &token).await?.0, 202);
    }
    let resp = app
        .http
        .get(format!("{}/admin/metrics", app.base_url))
        .bearer_auth(VIEWER_TOKEN)
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()?
            .starts_with("application/openmetrics-text")
    );
    let text = resp.text().await?;
    for line in [
        "seckill_event_sold_total{event=\"metered\"} 2",
        "seckill_event_queued{event=\"metered\"} 2",
        "seckill_event_stock_left{event=\"metered\"} 1",
        "seckill_event_gray_percent{event=\"metered\"} 100",
        "seckill_event_dead_letters_total{event=\"metered\"} 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from:\n{text}"
        );
    }
    assert!(text.trim_end().ends_with("# EOF"));
    assert_sold_exactly(&app, "metered", 3, 2).await
}
