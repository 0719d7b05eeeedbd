//! Lottery admission: buyers register, an operator draws once, the winners get admission tokens
//! and the rest are told they were not selected.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{TestApp, jwt_for};
use serde_json::json;

use crate::{assert_sold_exactly, code, start};

/// Opens `lotto` (2 units, lottery admission) and registers `p0`..`p9`.
async fn ten_registered(app: &TestApp) -> Result<()> {
    app.open_event(
        "lotto",
        json!({ "stock": 2, "admission_mode": "lottery", "admission_multiplier": 1 }),
    )
    .await?;
    for i in 0..10 {
        let (status, body) = ask_admission(app, i).await?;
        assert_eq!((status, body["status"].as_str()), (202, Some("registered")));
    }
    Ok(())
}

/// `p<i>` asks `lotto` for admission.
async fn ask_admission(app: &TestApp, i: usize) -> Result<(u16, serde_json::Value)> {
    let token = jwt_for(&format!("p{i}"));
    app.call(
        Method::POST,
        "/api/events/lotto/admission",
        Some(&token),
        None,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lottery_is_drawn_once() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    ten_registered(&app).await?;
    let (status, drawn) = app
        .admin(Method::POST, "/admin/events/lotto/draw", None)
        .await?;
    assert_eq!((status, drawn["admitted"].as_u64()), (200, Some(2)));
    assert_eq!(
        app.admin(Method::POST, "/admin/events/lotto/draw", None)
            .await?
            .0,
        409,
        "one draw"
    );
    assert_sold_exactly(&app, "lotto", 2, 0).await
}

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lottery_admits_exactly_the_drawn_winners() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        ten_registered(&app).await?;
        let (status, drawn) = app
            .admin(Method::POST, "/admin/events/lotto/draw", None)
            .await?;
        assert_eq!((status, drawn["admitted"].as_u64()), (200, Some(2)));
        let mut winners = 0;
        for i in 0..10 {
            let (status, body) = ask_admission(&app, i).await?;
            match status {
                200 => winners += 1,
                403 => assert_eq!(code(&body), "not_selected"),
                other => panic!("unexpected {other} {body}"),
            }
        }
        assert_eq!(winners, 2);
        assert_sold_exactly(&app, "lotto", 2, 0).await
    }
}
