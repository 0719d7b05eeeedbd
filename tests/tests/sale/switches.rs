//! The operators' switches: pausing and resuming a sale, and deny lists by user and by address.

use anyhow::Result;
use reqwest::Method;
use serde_json::json;

use crate::{code, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_sale_is_503_sale_paused_until_resumed() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("switch", json!({ "stock": 5 })).await?;
    assert_eq!(
        app.admin(
            Method::PATCH,
            "/admin/events/switch",
            Some(&json!({ "enabled": false }))
        )
        .await?
        .0,
        200
    );
    let (status, resp) = app
        .admit_and_precheck("switch", "gina")
        .await?
        .expect_err("paused");
    assert_eq!((status, code(&resp)), (503, "sale_paused"));
    assert_eq!(
        app.admin(
            Method::PATCH,
            "/admin/events/switch",
            Some(&json!({ "enabled": true }))
        )
        .await?
        .0,
        200
    );
    assert!(app.admit_and_precheck("switch", "gina").await?.is_ok());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_user_is_403_denied() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("switch", json!({ "stock": 5 })).await?;
    assert_eq!(
        app.admin(
            Method::POST,
            "/admin/events/switch/deny",
            Some(&json!({ "users": ["hank"] }))
        )
        .await?
        .0,
        200
    );
    let (status, resp) = app
        .admit_and_precheck("switch", "hank")
        .await?
        .expect_err("denied user");
    assert_eq!((status, code(&resp)), (403, "denied"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_address_is_403_denied() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("switch", json!({ "stock": 5 })).await?;
    assert_eq!(
        app.admin(
            Method::POST,
            "/admin/events/switch/deny",
            Some(&json!({ "addrs": ["127.0.0.1"] }))
        )
        .await?
        .0,
        200
    );
    let (status, resp) = app
        .admit_and_precheck("switch", "ivan")
        .await?
        .expect_err("denied address");
    assert_eq!((status, code(&resp)), (403, "denied"));
    Ok(())
}
