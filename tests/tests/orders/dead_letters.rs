//! What the drain does with entries it cannot simply land: the same intent delivered twice lands
//! once; a malformed entry, and one Postgres refuses (a NUL byte in a text column, retried up
//! to `drain_max_deliveries`), go to the dead letters with the reason; nothing is left
//! unacknowledged and the books of the sale still balance.

use std::time::Duration;

use anyhow::Result;
use seckill_testkit::{PgServer, RedisServer, TestApp};
use serde_json::json;

use crate::{assert_books, drain_all, job, sell, start};

/// `poison` has one shard: its one order stream and dead letters.
const QUEUE: &str = "{sk:poison/0}:queue";

/// A sale of `poison` (30 units, 30 buyers), then `entry` added to its queue as the drain would
/// read it; returns the servers and the accepted orders.
async fn sale_with_extra_entry(
    entry: impl FnOnce(Vec<String>) -> Vec<String>,
) -> Result<(RedisServer, PgServer, TestApp, Vec<(String, String)>)> {
    let (redis, pg, app) = start(&[]).await?;
    let accepted = sell(&app, "poison", 30, 30, json!({ "shards": 1 })).await?;
    let mut conn = app
        .shard_client("poison", 0)
        .get_multiplexed_async_connection()
        .await?;
    let first: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(QUEUE)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut conn)
        .await?;
    let fields = entry(first[0].1.clone());
    let _: String = redis::cmd("XADD")
        .arg(QUEUE)
        .arg("*")
        .arg(&fields)
        .query_async(&mut conn)
        .await?;
    Ok((redis, pg, app, accepted))
}

/// Runs the drain past every redelivery (each waits for the failed entry's reclaim), then until
/// it settles.
async fn drain_past_redeliveries(app: &TestApp) -> Result<()> {
    for _ in 0..4 {
        job(app, "drain").await?;
        tokio::time::sleep(Duration::from_millis(600)).await; // reclaim the failed entry again
    }
    drain_all(app).await
}

/// The `reason` of every dead letter of `poison`.
async fn dead_letter_reasons(app: &TestApp) -> Result<Vec<String>> {
    let mut conn = app
        .shard_client("poison", 0)
        .get_multiplexed_async_connection()
        .await?;
    let dead: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("{sk:poison/0}:dead")
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await?;
    Ok(dead
        .iter()
        .map(|(_, f)| {
            f.chunks(2)
                .find(|kv| kv[0] == "reason")
                .map(|kv| kv[1].clone())
                .unwrap_or_default()
        })
        .collect())
}

/// Checks that the drain's consumer group has nothing pending.
async fn assert_nothing_pending(app: &TestApp) -> Result<()> {
    let mut conn = app
        .shard_client("poison", 0)
        .get_multiplexed_async_connection()
        .await?;
    let pending: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg(QUEUE)
        .arg("drain")
        .query_async(&mut conn)
        .await?;
    assert_eq!(
        pending.first(),
        Some(&redis::Value::Int(0)),
        "nothing left unacknowledged"
    );
    Ok(())
}

/// The same intent delivered twice (a copy of the first entry) lands once and is no dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_delivery_lands_once() -> Result<()> {
    let (_redis, pg, app, accepted) = sale_with_extra_entry(|first| first).await?;
    drain_all(&app).await?;
    assert_books(&app, &pg, "poison", 30, &accepted).await?;
    let reasons = dead_letter_reasons(&app).await?;
    assert!(reasons.is_empty(), "{reasons:?}");
    assert_nothing_pending(&app).await
}

/// An entry Postgres refuses (a NUL byte in a text column) is retried, then dead-lettered with
/// the last error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_postgres_refuses_goes_to_the_dead_letters_with_its_last_error() -> Result<()> {
    let (_redis, pg, app, accepted) = sale_with_extra_entry(|_| {
        [
            "order",
            "feed",
            "user",
            "nul\0user",
            "shard",
            "0",
            "seq",
            "999",
            "created_ms",
            "1",
        ]
        .map(str::to_owned)
        .to_vec()
    })
    .await?;
    drain_past_redeliveries(&app).await?;
    assert_books(&app, &pg, "poison", 30, &accepted).await?;
    let reasons = dead_letter_reasons(&app).await?;
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("delivered") && r.contains("0x00")),
        "the last error is kept: {reasons:?}"
    );
    assert_nothing_pending(&app).await
}

/// Run again over three Redis nodes (`scripts/test.sh`): what the layout of the shards over
/// the nodes can change.
mod over_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_malformed_entry_goes_to_the_dead_letters() -> Result<()> {
        let (_redis, pg, app, accepted) = sale_with_extra_entry(|_| {
            ["order", "bad", "user", "x", "shard", "not-a-number"]
                .map(str::to_owned)
                .to_vec()
        })
        .await?;
        drain_past_redeliveries(&app).await?;
        assert_books(&app, &pg, "poison", 30, &accepted).await?;
        let reasons = dead_letter_reasons(&app).await?;
        assert_eq!(reasons, ["malformed entry"], "{reasons:?}");
        assert_nothing_pending(&app).await
    }
}
