//! What a buyer's poll says: nothing yet, queued once bought, sold out for those without an
//! order once the stock is gone (every shard knows it once the drain has seen every shard empty,
//! within its period; a buyer's own failed tail teaches their home shard sooner).

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::jwt_for;
use serde_json::json;

use crate::{assert_sold_exactly, snapshot, start};

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn poll_says_none_before_a_buy_queued_after_it_and_sold_out_to_the_rest() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        app.open_event("tiny", json!({ "stock": 1 })).await?;
        let app = &app;
        let poll = move |user: &str| {
            let jwt = jwt_for(user);
            async move {
                app.call(
                    Method::GET,
                    &app.sale_path("tiny", "orders/me"),
                    Some(&jwt),
                    None,
                )
                .await
            }
        };
        assert_eq!(poll("erin").await?.1["status"], "none");
        let token = app
            .admit_and_precheck("tiny", "erin")
            .await?
            .expect("token");
        assert_eq!(app.buy("tiny", "erin", &token).await?.0, 202);
        assert_eq!(poll("erin").await?.1["status"], "queued");
        assert_sold_exactly(app, "tiny", 1, 1).await?;
        let (status, _) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
        assert_eq!(status, 200);
        let drained = snapshot(app, "tiny").await?;
        assert_eq!(poll("frank").await?.1["status"], "sold_out");
        assert_eq!(
            snapshot(app, "tiny").await?,
            drained,
            "a poll changes nothing"
        );
        Ok(())
    }
}
