//! Failures and what the client hears: a script that fails on the data is our problem, 500
//! `internal` with no retry advice and no detail; Redis that cannot be reached is 503
//! `unavailable` with `Retry-After`.

use anyhow::Result;
use seckill_testkit::jwt_for;
use serde_json::{Value, json};

use crate::{assert_sold_exactly, code, start};

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_script_failing_on_the_data_is_500_internal_without_retry_advice_or_detail()
    -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        app.open_event("corrupt", json!({ "stock": 10, "shards": 4 }))
            .await?;
        let token = app
            .admit_and_precheck("corrupt", "victim")
            .await?
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        // The victim's home shard's one-per-user hash, made something else.
        let home = seckill_domain::ids::home_shard("corrupt", "victim", 4);
        let bought = format!("{{sk:corrupt/{home}}}:bought");
        let mut conn = app
            .shard_client("corrupt", home)
            .get_multiplexed_async_connection()
            .await?;
        redis::pipe()
            .cmd("DEL")
            .arg(&bought)
            .cmd("SET")
            .arg(&bought)
            .arg("not a hash")
            .query_async::<()>(&mut conn)
            .await?;
        let resp = app
            .http
            .post(format!(
                "{}{}",
                app.base_url,
                app.sale_path("corrupt", "buy")
            ))
            .bearer_auth(jwt_for("victim"))
            .json(&json!({ "purchase_token": token }))
            .send()
            .await?;
        assert_eq!(resp.status(), 500);
        assert!(resp.headers().get("retry-after").is_none());
        let body: Value = resp.json().await?;
        assert_eq!(
            body,
            json!({ "error": { "code": "internal", "message": "internal error" } })
        );
        // With the hash put back (empty, as nobody bought), the failed buy took no unit.
        redis::cmd("DEL")
            .arg(&bought)
            .query_async::<()>(&mut conn)
            .await?;
        assert_sold_exactly(&app, "corrupt", 10, 0).await
    }
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_redis_is_503_unavailable_with_retry_after() -> Result<()> {
        let (redis, _pg, app) = start().await?;
        app.open_event("down", json!({ "stock": 10 })).await?;
        let token = app
            .admit_and_precheck("down", "stranded")
            .await?
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        drop(redis);
        let resp = app
            .http
            .post(format!("{}/api/events/down/buy", app.base_url))
            .bearer_auth(jwt_for("stranded"))
            .json(&json!({ "purchase_token": token }))
            .send()
            .await?;
        assert_eq!(resp.status(), 503);
        assert_eq!(
            resp.headers().get("retry-after").map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let body: Value = resp.json().await?;
        assert_eq!(code(&body), "unavailable");
        // The invariants cannot be read back: the Redis that holds them is gone.
        Ok(())
    }
}
