//! The rate limits: a user's precheck bucket (capacity 5, refill 2/s) and the event-wide buy
//! bucket (3 at once, then 1/s). Both refuse a burst with 429 `rate_limited` and refill; a
//! limited buy keeps its purchase token.

use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{TestApp, jwt_for};
use serde_json::json;

use crate::{assert_sold_exactly, code, snapshot, start};

/// Opens `limited` with both buckets.
/// One shard: the event-wide buy bucket is then one bucket (with more shards each holds its
/// part, `admin::shard_fields`, unit-tested there).
async fn open_limited(app: &TestApp) -> Result<()> {
    app.open_event(
        "limited",
        json!({ "user_rate": 2.0, "user_burst": 5, "buy_rate": 1.0, "buy_burst": 3, "shards": 1 }),
    )
    .await
}

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    /// Capacity 5, refill 2/s: a burst of 5 passes, the 6th is refused, 0.6 s refill one more; a
    /// refused precheck says when to retry.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_user_rate_limit_refuses_a_burst_and_refills() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        open_limited(&app).await?;
        let jwt = jwt_for("dave");
        let (_, adm) = app
            .call(
                Method::POST,
                "/api/events/limited/admission",
                Some(&jwt),
                None,
            )
            .await?;
        let body = json!({ "admission_token": adm["admission_token"] });
        let precheck = || {
            app.call(
                Method::POST,
                "/api/events/limited/precheck",
                Some(&jwt),
                Some(&body),
            )
        };
        for i in 0..5 {
            assert_eq!(precheck().await?.0, 200, "burst request {i}");
        }
        let (status, resp) = precheck().await?;
        assert_eq!((status, code(&resp)), (429, "rate_limited"));
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(precheck().await?.0, 200, "refilled at 2/s");
        let resp = app
            .http
            .post(format!("{}/api/events/limited/precheck", app.base_url))
            .bearer_auth(&jwt)
            .json(&body)
            .send()
            .await?;
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "1");
        Ok(())
    }
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    /// The event-wide buy bucket: 3 at once, then 1/s. A limited buy burns nothing and its token
    /// works after the refill.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_event_buy_rate_limit_refuses_a_burst_and_the_refused_token_works_after_refill()
    -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        open_limited(&app).await?;
        let mut tokens = Vec::new();
        for i in 0..4 {
            let user = format!("buyer{i}");
            tokens.push((
                user.clone(),
                app.admit_and_precheck("limited", &user)
                    .await?
                    .expect("token"),
            ));
        }
        for (user, token) in &tokens[..3] {
            assert_eq!(app.buy("limited", user, token).await?.0, 202);
        }
        let before = snapshot(&app, "limited").await?;
        let (user, token) = &tokens[3];
        let (status, resp) = app.buy("limited", user, token).await?;
        assert_eq!((status, code(&resp)), (429, "rate_limited"));
        assert_eq!(
            snapshot(&app, "limited").await?,
            before,
            "a limited buy burns nothing"
        );
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        assert_eq!(
            app.buy("limited", user, token).await?.0,
            202,
            "same token works after refill"
        );
        assert_sold_exactly(&app, "limited", 10, 4).await
    }
}
