//! The operators' side of bad input: the admin token, an event configuration that cannot be,
//! and changes a warmed-up event must refuse. Refused, they change nothing.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp};
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
    Ok(())
}

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
