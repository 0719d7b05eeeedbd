//! What a request costs Redis: one command for each buy, poll, admission and precheck (at the
//! buyer's home shard, the caller sending the event's shard count as the storefront does), and
//! no disk writes for a refused buy.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars, jwt_for};
use serde_json::json;

use crate::{assert_sold_exactly, code, start};

/// The console's refusal counts cost a sold-out storm no disk writes: with `appendfsync always`,
/// refused buys leave the AOF as it was (the count is kept out of it), and are still counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_counted_without_writing_the_aof() -> Result<()> {
    let redis = RedisServer::start_durable()?;
    let pg = PgServer::start()?;
    let app = TestApp::start(seckill_testkit::product_manifest(), &app_vars(&redis, &pg)).await?;
    let event = "storm";
    app.open_event(
        event,
        json!({ "stock": 1, "shards": 1, "admission_multiplier": 30 }),
    )
    .await?;
    let mut tokens = Vec::new();
    for i in 0..21 {
        let user = format!("storm{i}");
        let token = app.admit_and_precheck(event, &user).await?.expect("token");
        tokens.push((user, token));
    }
    let (winner, token) = &tokens[0];
    assert_eq!(app.buy(event, winner, token).await?.0, 202);
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let aof_size = |info: String| {
        info.lines()
            .find_map(|l| l.strip_prefix("aof_current_size:"))
            .map(|v| v.trim().to_owned())
    };
    let before = aof_size(
        redis::cmd("INFO")
            .arg("persistence")
            .query_async(&mut conn)
            .await?,
    );
    assert!(before.is_some(), "the AOF is on");
    for (user, token) in &tokens[1..] {
        let (status, body) = app.buy(event, user, token).await?;
        assert_eq!((status, code(&body)), (410, "sold_out"));
    }
    let after = aof_size(
        redis::cmd("INFO")
            .arg("persistence")
            .query_async(&mut conn)
            .await?,
    );
    assert_eq!(after, before, "20 refused buys wrote nothing to the AOF");
    assert_eq!(
        app.status(event).await?["refusals"],
        json!({ "sold_out": 20 })
    );
    assert_sold_exactly(&app, event, 1, 1).await
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_redis_command_per_buy_poll_and_precheck() -> Result<()> {
        let (redis, _pg, app) = start().await?;
        app.open_event("count", json!({ "stock": 100 })).await?;
        // Load every script once (the very first call per script is EVALSHA → NOSCRIPT → EVAL).
        let warm = app
            .admit_and_precheck("count", "warm")
            .await?
            .expect("token");
        app.buy("count", "warm", &warm).await?;
        app.call(
            Method::GET,
            &app.sale_path("count", "orders/me"),
            Some(&jwt_for("warm")),
            None,
        )
        .await?;
        let mut tokens = Vec::new();
        for i in 0..20 {
            let user = format!("c{i}");
            tokens.push((
                user.clone(),
                app.admit_and_precheck("count", &user)
                    .await?
                    .expect("token"),
            ));
        }
        // MONITOR lists every command a client sends (a script's own calls are marked `lua`).
        let monitor = redis.monitor()?;
        for (user, token) in &tokens {
            assert_eq!(app.buy("count", user, token).await?.0, 202);
        }
        let sent = monitor.stop()?;
        assert_eq!(
            sent.len(),
            tokens.len(),
            "exactly one command per buy: {sent:#?}"
        );
        assert!(
            sent.iter().all(|l| l.contains("\"EVALSHA\"")),
            "and it is EVALSHA: {sent:#?}"
        );

        let monitor = redis.monitor()?;
        for (user, _) in &tokens {
            let (status, body) = app
                .call(
                    Method::GET,
                    &app.sale_path("count", "orders/me"),
                    Some(&jwt_for(user)),
                    None,
                )
                .await?;
            assert_eq!(
                (status, body["status"].as_str()),
                (200, Some("queued")),
                "{body}"
            );
            assert!(
                body["position"].as_u64().unwrap() >= 1 && body["estimated_wait_ms"].is_u64(),
                "{body}"
            );
        }
        assert_eq!(monitor.stop()?.len(), tokens.len(), "one command per poll");

        let monitor = redis.monitor()?;
        let fresh = app
            .admit_and_precheck("count", "latecomer")
            .await?
            .expect("token");
        assert!(!fresh.is_empty());
        assert_eq!(
            monitor.stop()?.len(),
            3,
            "one command for the admission challenge, one for admission, one for precheck"
        );
        assert_sold_exactly(&app, "count", 100, 21).await
    }
}
