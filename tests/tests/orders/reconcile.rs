//! Reconcile: a drift is reported with the orders behind it, and a dead-lettered order is drift
//! for an operator, not balanced books.

use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use serde_json::json;

use crate::{assert_books, drain_all, job, sell, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_names_the_orders_behind_a_drift() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = sell(&app, "books", 20, 20, json!({})).await?;
    drain_all(&app).await?;
    assert_books(&app, &pg, "books", 20, &accepted).await?;
    // Postgres loses one row (as with synchronous_commit = off and a crash).
    let db = pg.client().await?;
    let lost = &accepted[0].1;
    db.execute("DELETE FROM orders WHERE order_id = $1", &[lost])
        .await?;
    let (status, books) = app
        .admin(Method::POST, "/admin/jobs/reconcile?event=books", None)
        .await?;
    assert_eq!(status, 200, "{books}");
    let b = &books["events"][0];
    assert_eq!(b["drift"], 1, "{b}");
    assert_eq!(b["missing_in_postgres"], json!([lost]), "{b}");
    assert_eq!(b["unknown_to_redis"], json!([]), "{b}");
    Ok(())
}

/// An event never warmed up has no stock in Redis and nothing sold: nothing to reconcile, so
/// no drift and no alarm, until it is warmed; then its books are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_never_warmed_up_has_no_drift() -> Result<()> {
    let (_redis, _pg, app) = start(&[]).await?;
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/cold",
            Some(
                &json!({ "sku": "x", "unit_amount": 100, "currency": "eur", "stock": 7,
                          "start_ms": 1, "end_ms": 4_000_000_000_000u64 }),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{resp}");
    let reconcile = || app.admin(Method::POST, "/admin/jobs/reconcile?event=cold", None);
    let (status, books) = reconcile().await?;
    assert_eq!(status, 200, "{books}");
    let b = &books["events"][0];
    assert_eq!(
        (&b["warmed"], &b["drift"]),
        (&json!(false), &json!(0)),
        "{b}"
    );
    let (status, resp) = app
        .admin(Method::POST, "/admin/events/cold/warmup", None)
        .await?;
    assert_eq!(status, 200, "{resp}");
    let (_, books) = reconcile().await?;
    let b = &books["events"][0];
    assert_eq!(
        (&b["warmed"], &b["drift"], &b["remaining_in_redis"]),
        (&json!(true), &json!(0), &json!(7)),
        "{b}"
    );
    Ok(())
}

/// Run again over three Redis nodes (`scripts/test.sh`): what the layout of the shards over
/// the nodes can change.
mod over_nodes {
    use super::*;

    /// A sold order that Postgres refuses for good ends in the dead letters; reconcile reports it
    /// as drift for an operator instead of calling the books balanced.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_lettered_order_is_drift_for_an_operator() -> Result<()> {
        let (_redis, pg, app) = start(&[]).await?;
        let db = pg.client().await?;
        db.batch_execute(
            "ALTER TABLE orders ADD CONSTRAINT refuse_one CHECK (user_id <> 'dead-u3')",
        )
        .await?;
        let accepted = sell(&app, "dead", 10, 10, json!({})).await?;
        assert_eq!(accepted.len(), 10);
        for _ in 0..4 {
            job(&app, "drain").await?;
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        drain_all(&app).await?;
        let (status, books) = app
            .admin(Method::POST, "/admin/jobs/reconcile?event=dead", None)
            .await?;
        assert_eq!(status, 200, "{books}");
        let b = &books["events"][0];
        assert_eq!(
            (
                b["dead_letters"].as_i64(),
                b["dead_orders"].as_i64(),
                b["drift"].as_i64()
            ),
            (Some(1), Some(1), Some(1)),
            "{b}"
        );
        let status = app.status("dead").await?;
        assert_eq!(
            (status["queued"].as_i64(), status["dead_letters"].as_i64()),
            (Some(0), Some(1))
        );
        Ok(())
    }
}
