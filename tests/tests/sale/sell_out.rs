//! Spikes of buyers sell exactly the stock: 10,000 buyers for 1,000 units over 1, 8 and 32
//! shards, users whose home shards are all alike, and each buy starting at the home shard the
//! tests compute.

use std::collections::{HashMap, HashSet};

use anyhow::Result;
use futures::{StreamExt, stream};
use seckill_testkit::TestApp;
use serde_json::{Value, json};

use crate::{assert_sold_exactly, code, start};

/// `users` buyers for `stock` units over `shards`: everyone gets a purchase token first, then
/// all buys go at once. Exactly `stock` are accepted; everyone else hears `sold_out`. A buy
/// answered 503 (its tail found no unit yet, other shards unknown) is sent again with the same
/// token, as a client does. The admission cap is above the crowd: admission is not what is
/// tested here (each shard admits its exact part of the cap; see `operators`).
async fn sell_out(
    app: &TestApp,
    event: &str,
    shards: u32,
    stock: i64,
    users: usize,
    seed: u64,
) -> Result<()> {
    app.open_event(
        event,
        json!({ "stock": stock, "shards": shards, "admission_multiplier": 20 }),
    )
    .await?;
    // A seeded shuffle of arrival order.
    let mut ids: Vec<String> = (0..users).map(|i| format!("u{seed}-{i}")).collect();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for i in (1..ids.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ids.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let tokens: Vec<(String, String)> = stream::iter(ids)
        .map(|user| async move {
            let token = app
                .admit_and_precheck(event, &user)
                .await?
                .map_err(|e| anyhow::anyhow!("{user}: {e:?}"))?;
            anyhow::Ok((user, token))
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let results: Vec<(String, u16, Value)> = stream::iter(tokens)
        .map(|(user, token)| async move {
            let (status, body) = app.buy_until_answered(event, &user, &token).await?;
            anyhow::Ok((user, status, body))
        })
        .buffer_unordered(512)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let accepted: Vec<&(String, u16, Value)> = results.iter().filter(|r| r.1 == 202).collect();
    let sold_out = results
        .iter()
        .filter(|r| r.1 == 410 && code(&r.2) == "sold_out")
        .count();
    assert_eq!(accepted.len() as i64, stock, "{shards} shards, seed {seed}");
    let mut outcomes: HashMap<(u16, String), usize> = HashMap::new();
    for r in &results {
        *outcomes.entry((r.1, code(&r.2).to_owned())).or_default() += 1;
    }
    assert_eq!(
        sold_out,
        users - stock as usize,
        "everyone else hears sold_out: {outcomes:?}"
    );
    let buyers: HashSet<&String> = accepted.iter().map(|r| &r.0).collect();
    assert_eq!(buyers.len() as i64, stock, "no user twice");
    let status = app.status(event).await?;
    assert_eq!(
        status["refusals"],
        json!({ "sold_out": sold_out }),
        "the console counts every refusal by its code"
    );
    assert_sold_exactly(app, event, stock, stock).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_buyers_one_shard() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    for seed in [1, 2] {
        sell_out(&app, &format!("one-{seed}"), 1, 1_000, 10_000, seed).await?;
    }
    Ok(())
}

/// The tail finds a shard that holds stock on its first probe: with 2 units left over 8
/// shards, spread by the drain's summary (each slot's picture of the shards that hold stock),
/// the first two buyers homed on empty shards each buy on their first click, never told "try
/// again"; the 18 after them hear sold out at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_units_left_over_eight_shards_the_first_two_buy_on_their_first_click() -> Result<()>
{
    let (_redis, _pg, app) = start().await?;
    let (event, shards) = ("last-two", 8u32);
    app.open_event(
        event,
        json!({ "stock": 8, "shards": shards, "admission_multiplier": 50 }),
    )
    .await?;
    let homed_on = |shard: u32| {
        (0..)
            .map(move |i| format!("lt{shard}-{i}"))
            .filter(move |u| seckill_domain::ids::home_shard(event, u, shards) == shard)
    };
    // Shards 0–5 sell their unit at home; 6 and 7 keep one each.
    for shard in 0..6 {
        let user = homed_on(shard).next().expect("users exist");
        let token = app
            .admit_and_precheck(event, &user)
            .await?
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        assert_eq!(app.buy(event, &user, &token).await?.0, 202, "{user}");
    }
    let (status, _) = app
        .admin(reqwest::Method::POST, "/admin/jobs/drain", None)
        .await?;
    assert_eq!(status, 200, "the drain summarizes the shards");
    // 20 buyers homed on the empty shards, one after the other.
    let late: Vec<String> = (0..20)
        .map(|i| {
            homed_on(i % 6)
                .nth(1 + i as usize / 6)
                .expect("users exist")
        })
        .collect();
    let mut answers = Vec::new();
    for user in &late {
        let token = match app.admit_and_precheck(event, user).await? {
            Ok(token) => token,
            Err(refused) => {
                answers.push(refused);
                continue;
            }
        };
        answers.push(app.buy(event, user, &token).await?);
    }
    assert_eq!(answers[0].0, 202, "{:?}", answers[0]);
    assert_eq!(answers[1].0, 202, "{:?}", answers[1]);
    for (user, (status, body)) in late.iter().zip(&answers).skip(2) {
        assert_eq!(
            (*status, code(body)),
            (410, "sold_out"),
            "{user}: sold out once every shard is empty"
        );
    }
    assert_sold_exactly(&app, event, 8, 8).await
}

/// An event gets at most one shard per unit of stock: asked for 8 shards with 3 units, it has
/// 3, each warmed up with a unit (none starts empty), and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_has_at_most_one_shard_per_unit() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let now = crate::epoch_ms()?;
    let config = json!({
        "sku": "few", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 3, "shards": 8, "start_ms": now, "end_ms": now + 60_000,
    });
    let (status, body) = app
        .admin(reqwest::Method::PUT, "/admin/events/few", Some(&config))
        .await?;
    assert_eq!((status, &body["shards"]), (201, &json!(3)), "{body}");
    let (status, _) = app
        .admin(reqwest::Method::POST, "/admin/events/few/warmup", None)
        .await?;
    assert_eq!(status, 200);
    let status = app.status("few").await?;
    assert_eq!(status["stock_by_shard"], json!([1, 1, 1]), "{status}");
    Ok(())
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ten_thousand_buyers_eight_shards() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        for seed in [3, 4] {
            sell_out(&app, &format!("eight-{seed}"), 8, 1_000, 10_000, seed).await?;
        }
        Ok(())
    }
}

/// Run again over three Redis nodes (`scripts/test.sh`): what the layout of the shards over
/// the nodes can change.
mod over_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ten_thousand_buyers_thirty_two_shards() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        for seed in [5, 6] {
            sell_out(&app, &format!("tt-{seed}"), 32, 1_000, 10_000, seed).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn skewed_users_still_sell_out_exactly() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        let (event, shards, stock) = ("skewed", 32u32, 320i64);
        // Each shard admits its part of multiplier × stock: a crowd on two shards needs a
        // multiplier that lets enough of them in (16 × 320 / 32 = 160 per shard).
        app.open_event(
            event,
            json!({ "stock": stock, "shards": shards, "admission_multiplier": 16 }),
        )
        .await?;
        // Users whose home shard is 0 or 1: the other 30 shards' stock must still be sold.
        let users: Vec<String> = (0..)
            .map(|i| format!("skew{i}"))
            .filter(|u| seckill_domain::ids::home_shard(event, u, shards) < 2)
            .take(1_000)
            .collect();
        let results: Vec<(u16, Value)> = stream::iter(users)
            .map(|user| {
                let app = &app;
                async move {
                    match app.admit_and_precheck(event, &user).await? {
                        Ok(token) => app.buy_until_answered(event, &user, &token).await,
                        // Late arrivals may already hear sold_out at admission or precheck.
                        Err(refused) => Ok(refused),
                    }
                }
            })
            .buffer_unordered(128)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_>>()?;
        assert_eq!(results.iter().filter(|r| r.0 == 202).count() as i64, stock);
        assert!(
            results
                .iter()
                .all(|r| r.0 == 202 || ["sold_out", "admission_closed"].contains(&code(&r.1))),
            "only sold_out (or, past the two shards' admission parts, admission_closed) refusals"
        );
        // Every shard's stock was sold (assert_sold_exactly: each shard at 0), to buyers of the two
        // home shards: the other 30 shards lent their units to them, one tail at a time.
        assert_sold_exactly(&app, event, stock, stock).await?;
        let status = app.status(event).await?;
        let id = seckill_domain::event::EventId::parse(event)?;
        let shard_sold = |s: u32| -> Result<i64> {
            let seq = seckill_domain::keys::ShardKeys::new(&id, s).seq();
            let mut conn = app.shard_client(event, s).get_connection()?;
            let sold: Option<i64> = redis::cmd("GET").arg(seq).query(&mut conn)?;
            Ok(sold.unwrap_or(0))
        };
        assert_eq!(shard_sold(0)? + shard_sold(1)?, stock, "{status}");
        Ok(())
    }

    /// A buy takes its unit from the home shard the test kit computes (`ids::home_shard`), for a
    /// shard count that is not a power of two too: the tests' formula is production's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn buys_start_at_the_home_shard_tests_compute() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        let (event, shards) = ("seven", 7u32);
        app.open_event(event, json!({ "stock": 70, "shards": shards }))
            .await?;
        for i in 0..12 {
            let user = format!("seven-{i}");
            let before: Vec<i64> =
                serde_json::from_value(app.status(event).await?["stock_by_shard"].clone())?;
            let token = app
                .admit_and_precheck(event, &user)
                .await?
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let (status, body) = app.buy(event, &user, &token).await?;
            assert_eq!(status, 202, "{body}");
            let after: Vec<i64> =
                serde_json::from_value(app.status(event).await?["stock_by_shard"].clone())?;
            let home = seckill_domain::ids::home_shard(event, &user, shards) as usize;
            assert_eq!(after[home], before[home] - 1, "{user}: home shard {home}");
        }
        Ok(())
    }
}
