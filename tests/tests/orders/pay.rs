//! Paying: idempotent for the buyer, not found for anyone else, refused for an id that is not
//! one; and payment racing timeout release at every deadline, never both.

use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{TestApp, jwt_for};
use serde_json::{Value, json};

use crate::{assert_books, drain_all, job, sell, start};

/// A sale of `land`, 10 units to 10 buyers, drained: every order confirmed in Postgres.
async fn drained_sale(app: &TestApp) -> Result<Vec<(String, String)>> {
    let accepted = sell(app, "land", 10, 10, json!({})).await?;
    assert_eq!(accepted.len(), 10);
    drain_all(app).await?;
    Ok(accepted)
}

/// `user` pays `order` of `land`.
async fn pay(app: &TestApp, user: &str, order: &str) -> Result<(u16, Value)> {
    app.call(
        Method::POST,
        &format!("/api/events/land/orders/{order}/pay"),
        Some(&jwt_for(user)),
        None,
    )
    .await
}

/// What `user`'s poll of `land` says.
async fn poll(app: &TestApp, user: &str) -> Result<Value> {
    let (_, polled) = app
        .call(
            Method::GET,
            "/api/events/land/orders/me",
            Some(&jwt_for(user)),
            None,
        )
        .await?;
    Ok(polled)
}

/// Paying once, then again: `paid` both times, and poll follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paying_is_idempotent_and_poll_shows_paid() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let (user, order) = &accepted[0];
    for _ in 0..2 {
        let (status, body) = pay(&app, user, order).await?;
        assert_eq!(
            (status, body["status"].as_str()),
            (200, Some("paid")),
            "{body}"
        );
    }
    let polled = poll(&app, user).await?;
    assert_eq!(polled["state"], "paid", "{polled}");
    assert_books(&app, &pg, "land", 10, &accepted).await
}

/// Someone else's order is not found for a stranger, before and after its buyer pays it, and
/// the stranger's attempts change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paying_someone_elses_order_is_404_order_not_found() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let (user, order) = &accepted[0];
    let (status, body) = pay(&app, "stranger", order).await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("order_not_found"))
    );
    let polled = poll(&app, user).await?;
    assert_eq!(polled["state"], "confirmed", "still unpaid: {polled}");
    assert_eq!(pay(&app, user, order).await?.0, 200);
    let (status, body) = pay(&app, "stranger", order).await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("order_not_found"))
    );
    assert_books(&app, &pg, "land", 10, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paying_an_order_id_that_is_not_one_is_400_bad_order_id() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let (user, _) = &accepted[0];
    let (status, body) = pay(&app, user, "not-hex").await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_order_id"))
    );
    assert_books(&app, &pg, "land", 10, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payment_racing_timeout_release_never_both() -> Result<()> {
    let (redis, pg, app) = start(&[]).await?;
    let (mut all, mut paid) = (Vec::new(), 0);
    for round in 0..3 {
        let event = format!("race{round}");
        // 3 s to pay: the sale and the drain (on a busy machine) must fit before the deadlines.
        let accepted = sell(&app, &event, 40, 40, json!({ "payment_timeout_s": 3 })).await?;
        drain_all(&app).await?;
        // Each payment is sent right at its order's deadline, half 50 ms before and half 50 ms
        // after, while timeout release runs every 20 ms: both outcomes race at every deadline.
        let db = pg.client().await?;
        let mut deadlines = std::collections::HashMap::new();
        for row in db
            .query(
                "SELECT order_id, pay_deadline_ms FROM orders WHERE event_id = $1",
                &[&event],
            )
            .await?
        {
            deadlines.insert(row.get::<_, String>(0), row.get::<_, i64>(1));
        }
        let epoch_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        };
        let pays =
            futures::future::join_all(accepted.iter().enumerate().map(|(i, (user, order))| {
                let (app, event) = (&app, &event);
                let at = deadlines[order] + if i % 2 == 0 { -50 } else { 50 };
                async move {
                    tokio::time::sleep(Duration::from_millis((at - epoch_ms()).max(0) as u64))
                        .await;
                    app.call(
                        Method::POST,
                        &format!("/api/events/{event}/orders/{order}/pay"),
                        Some(&jwt_for(user)),
                        None,
                    )
                    .await
                }
            }));
        let last = deadlines.values().max().copied().unwrap_or(0) + 300;
        let releases = async {
            while epoch_ms() < last {
                let _ = job(&app, "timeout-release").await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let (pays, ()) = tokio::join!(pays, releases);
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        job(&app, "timeout-release").await?;
        let mut paid_here = 0;
        for ((user, order), pay) in accepted.iter().zip(&pays) {
            let (status, body) = pay.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
            let row = db
                .query_one("SELECT status FROM orders WHERE order_id = $1", &[order])
                .await?;
            let state: String = row.get(0);
            match *status {
                200 => {
                    assert_eq!(state, "paid", "{user}: paid answer, {state} in Postgres");
                    paid_here += 1;
                }
                409 => assert_eq!(
                    (body["error"]["code"].as_str(), state.as_str()),
                    (Some("order_expired"), "expired")
                ),
                other => panic!("{user}: unexpected {other} {body}"),
            }
        }
        paid += paid_here;
        let status = app.status(&event).await?;
        let shards: i64 = status["stock_left"].as_i64().unwrap_or(-1);
        let expired: i64 = db
            .query_one(
                "SELECT count(*) FROM orders WHERE event_id = $1 AND status = 'expired'",
                &[&event],
            )
            .await?
            .get(0);
        assert_eq!(
            shards, expired,
            "exactly the expired units are back in Redis"
        );
        assert_eq!(
            (status["paid"].as_i64(), status["expired"].as_i64()),
            (Some(paid_here), Some(expired)),
            "the console's counts agree with Postgres: {status}"
        );
        assert_books(&app, &pg, &event, 40, &accepted).await?;
        all.push(expired);
    }
    let _ = redis;
    eprintln!("expired per round: {all:?}, paid in all: {paid}");
    assert!(
        paid > 0 && all.iter().sum::<i64>() > 0,
        "the race had both outcomes: {paid} paid, {all:?} expired"
    );
    Ok(())
}
