//! When a buyer gets in: admission before the start, but precheck only from it (425 with the
//! time to come back); nothing after the end (410 `sale_ended`) nor once sold out (410
//! `sold_out`); first come, first served up to the home shard's part of the admission cap.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::jwt_for;
use serde_json::{Value, json};

use crate::{assert_sold_exactly, code, epoch_ms, snapshot, start};

/// First come, first served admission as `api/openapi.yaml` (issueAdmission) promises it: each
/// home shard hands out its part of the cap (`multiplier × stock`, parts differing by at most
/// one), a user is refused `admission_closed` only when their home shard's part is full, and
/// the cap is never passed. 1.1 × cap distinct users ask at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_come_admission_refuses_only_past_the_home_shards_part_of_the_cap() -> Result<()> {
    use futures::{StreamExt, stream};
    let (_redis, _pg, app) = start().await?;
    let (event, shards, cap) = ("crowd", 8u32, 1_000usize);
    app.open_event(
        event,
        json!({ "stock": 100, "shards": shards, "admission_multiplier": 10 }),
    )
    .await?;
    let users: Vec<String> = (0..cap * 11 / 10).map(|i| format!("crowd-{i}")).collect();
    let answers: Vec<(String, u16, Value)> = stream::iter(users)
        .map(|user| {
            let app = &app;
            async move {
                let path = app.sale_path(event, "admission");
                let (status, body) = app
                    .call(Method::POST, &path, Some(&jwt_for(&user)), None)
                    .await?;
                anyhow::Ok((user, status, body))
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let part = |s: u32| cap / shards as usize + usize::from((s as usize) < cap % shards as usize);
    let mut homed = vec![0usize; shards as usize];
    let mut admitted = vec![0usize; shards as usize];
    let mut refused = vec![0usize; shards as usize];
    for (user, status, body) in &answers {
        let home = seckill_domain::ids::home_shard(event, user, shards) as usize;
        homed[home] += 1;
        match (*status, code(body)) {
            (200, _) => admitted[home] += 1,
            (410, "admission_closed") => refused[home] += 1,
            other => panic!("{user}: {other:?} {body}"),
        }
    }
    for s in 0..shards {
        let i = s as usize;
        assert_eq!(
            admitted[i],
            homed[i].min(part(s)),
            "shard {s}: every user homed on it admitted up to its part ({})",
            part(s)
        );
        if refused[i] > 0 {
            assert_eq!(admitted[i], part(s), "shard {s} refused while it had room");
        }
    }
    let total: usize = admitted.iter().sum();
    assert!(total <= cap, "the cap is never passed: {total}");
    assert!(
        refused.iter().sum::<usize>() >= answers.len() - cap,
        "past the cap, users are refused"
    );
    assert_sold_exactly(&app, event, 100, 0).await
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    /// Admission before the sale is the point of admission; precheck before the start is 425
    /// `too_early`, with `Retry-After` saying when to come back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn before_the_start_admission_is_granted_and_precheck_is_425_with_retry_after()
    -> Result<()> {
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
        assert_sold_exactly(&app, "later", 10, 0).await
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
        assert_sold_exactly(&app, "over", 10, 0).await
    }
}

/// Run again over three Redis nodes (`scripts/test.sh`): what the layout of the shards over
/// the nodes can change.
mod over_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn once_sold_out_admission_is_410_sold_out() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        app.open_event("tiny", json!({ "stock": 1 })).await?;
        let token = app
            .admit_and_precheck("tiny", "erin")
            .await?
            .expect("token");
        assert_eq!(app.buy("tiny", "erin", &token).await?.0, 202);
        assert_sold_exactly(&app, "tiny", 1, 1).await?;
        // Every shard knows once the drain has seen every shard empty (within its period).
        assert_eq!(
            app.admin(Method::POST, "/admin/jobs/drain", None).await?.0,
            200
        );
        let drained = snapshot(&app, "tiny").await?;
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
        assert_eq!(
            snapshot(&app, "tiny").await?,
            drained,
            "the refusal changed nothing"
        );
        Ok(())
    }
}
