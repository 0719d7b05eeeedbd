//! When a buyer gets in: admission before the start, but precheck only from it (425 with the
//! time to come back); nothing after the end (410 `sale_ended`) nor once sold out (410
//! `sold_out`).

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::jwt_for;
use serde_json::json;

use crate::{code, epoch_ms, start};

/// Admission before the sale is the point of admission; precheck before the start is 425
/// `too_early`, with `Retry-After` saying when to come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_start_admission_is_granted_and_precheck_is_425_with_retry_after() -> Result<()>
{
    let (_redis, _pg, app) = start().await?;
    let now = epoch_ms()?;
    app.open_event(
        "later",
        json!({ "start_ms": now + 3_600_000, "end_ms": now + 7_200_000 }),
    )
    .await?;
    let jwt = jwt_for("carol");
    let (status, later) = app
        .call(
            Method::POST,
            "/api/events/later/admission",
            Some(&jwt),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{later}");
    let (status, resp) = app
        .call(
            Method::POST,
            "/api/events/later/precheck",
            Some(&jwt),
            Some(&json!({ "admission_token": later["admission_token"] })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (425, "too_early"), "{resp}");
    // The client is told when to come back: about an hour, in whole seconds.
    let resp = app
        .http
        .post(format!("{}/api/events/later/precheck", app.base_url))
        .header("authorization", format!("bearer {jwt}")) // the scheme is case-insensitive
        .json(&json!({ "admission_token": later["admission_token"] }))
        .send()
        .await?;
    assert_eq!(resp.status(), 425);
    let retry: u64 = resp.headers()["retry-after"].to_str()?.parse()?;
    assert!((3_590..=3_600).contains(&retry), "Retry-After {retry}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_end_admission_is_410_sale_ended() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let now = epoch_ms()?;
    app.open_event(
        "over",
        json!({ "start_ms": now - 7_200_000, "end_ms": now - 3_600_000 }),
    )
    .await?;
    let (status, resp) = app
        .call(
            Method::POST,
            "/api/events/over/admission",
            Some(&jwt_for("carol")),
            None,
        )
        .await?;
    assert_eq!((status, code(&resp)), (410, "sale_ended"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_sold_out_admission_is_410_sold_out() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("tiny", json!({ "stock": 1 })).await?;
    let token = app
        .admit_and_precheck("tiny", "erin")
        .await?
        .expect("token");
    assert_eq!(app.buy("tiny", "erin", &token).await?.0, 202);
    // Every shard knows once the drain has seen every shard empty (within its period).
    assert_eq!(
        app.admin(Method::POST, "/admin/jobs/drain", None).await?.0,
        200
    );
    let (status, resp) = app
        .call(
            Method::POST,
            &app.sale_path("tiny", "admission"),
            Some(&jwt_for("frank")),
            None,
        )
        .await?;
    assert_eq!(
        (status, code(&resp)),
        (410, "sold_out"),
        "no admission once sold out"
    );
    Ok(())
}
