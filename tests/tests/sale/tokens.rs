//! Who may buy: a bad identity is 401; a purchase token is its owner's alone; an admission token
//! is for its user and event alone; a used purchase token is spent; an expired one is refused;
//! repeated clicks buy once. Every refusal changes nothing.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;
use futures::{StreamExt, stream};
use reqwest::Method;
use seckill_testkit::jwt_for;
use serde_json::json;

use crate::{assert_sold_exactly, code, snapshot, start};

/// A forged, expired, never-expiring, garbage or missing bearer token is 401 `unauthorized`,
/// however good the purchase token, and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_identity_is_401_and_changes_nothing() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "tokens";
    app.open_event(event, json!({ "stock": 10 })).await?;
    let buy = format!("/api/events/{event}/buy");
    let alice = app
        .admit_and_precheck(event, "alice")
        .await?
        .expect("alice gets a purchase token");
    let before = snapshot(&app, event).await?;

    let forged_jwt = seckill_domain::auth::sign_jwt(
        &seckill_domain::auth::Claims {
            sub: "alice".into(),
            exp: Some(4_000_000_000),
            nbf: None,
        },
        b"not-the-shop-key",
    );
    let expired_jwt = seckill_domain::auth::sign_jwt(
        &seckill_domain::auth::Claims {
            sub: "alice".into(),
            exp: Some(1),
            nbf: None,
        },
        seckill_testkit::JWT_SECRET.as_bytes(),
    );
    let eternal_jwt = seckill_domain::auth::sign_jwt(
        &seckill_domain::auth::Claims {
            sub: "alice".into(),
            exp: None,
            nbf: None,
        },
        seckill_testkit::JWT_SECRET.as_bytes(),
    );
    let body = json!({ "purchase_token": alice });
    for (bearer, why) in [
        (Some(forged_jwt.as_str()), "forged"),
        (Some(expired_jwt.as_str()), "expired"),
        (Some(eternal_jwt.as_str()), "never-expiring"),
        (Some("not.a.jwt"), "garbage"),
        (None, "missing"),
    ] {
        let (status, resp) = app.call(Method::POST, &buy, bearer, Some(&body)).await?;
        assert_eq!(
            (status, code(&resp)),
            (401, "unauthorized"),
            "{why} identity"
        );
    }
    assert_eq!(
        snapshot(&app, event).await?,
        before,
        "refusals changed nothing"
    );
    Ok(())
}

/// Another user's admission token, and one for another event, are 403 `not_admitted` at
/// precheck, nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_token_not_issued_for_this_user_and_event_is_403_and_changes_nothing()
-> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "tokens";
    app.open_event(event, json!({ "stock": 10 })).await?;
    let precheck = format!("/api/events/{event}/precheck");
    let (_, bob) = app.admission(event, "bob").await?;
    let bobs_admission = bob["admission_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let before = snapshot(&app, event).await?;
    let (status, resp) = app
        .call(
            Method::POST,
            &precheck,
            Some(&jwt_for("mallory")),
            Some(&json!({ "admission_token": bobs_admission })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (403, "not_admitted"));
    let terms = seckill_domain::auth::AdmissionTerms {
        version: String::new(),
        expires_s: 4_000_000_000,
    };
    let other_event = seckill_domain::auth::admission_token(
        seckill_testkit::ADMISSION_SECRET.as_bytes(),
        "other",
        "alice",
        &terms,
    );
    let (status, resp) = app
        .call(
            Method::POST,
            &precheck,
            Some(&jwt_for("alice")),
            Some(&json!({ "admission_token": other_event })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (403, "not_admitted"));
    assert_eq!(
        snapshot(&app, event).await?,
        before,
        "refusals changed nothing"
    );
    Ok(())
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    /// Bob's purchase token is not Alice's, and a made-up one is nobody's: 403
    /// `bad_purchase_token`, nothing changed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_purchase_token_not_issued_to_the_buyer_is_403_and_changes_nothing() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        let event = "tokens";
        app.open_event(event, json!({ "stock": 10 })).await?;
        let bob = app
            .admit_and_precheck(event, "bob")
            .await?
            .expect("bob gets a purchase token");
        let before = snapshot(&app, event).await?;
        let (status, resp) = app.buy(event, "alice", &bob).await?;
        assert_eq!((status, code(&resp)), (403, "bad_purchase_token"));
        let (status, resp) = app
            .buy(event, "alice", "00000000000000000000000000000000")
            .await?;
        assert_eq!((status, code(&resp)), (403, "bad_purchase_token"));
        assert_eq!(
            snapshot(&app, event).await?,
            before,
            "refusals changed nothing"
        );
        Ok(())
    }

    /// Bob's purchase token expires (1 s TTL) before he uses it: 403 `bad_purchase_token`, nothing
    /// changed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_expired_purchase_token_is_403_and_changes_nothing() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        let event = "tokens";
        app.open_event(
            event,
            json!({ "stock": 10, "purchase_token_ttl_ms": 1_000 }),
        )
        .await?;
        let bob = app
            .admit_and_precheck(event, "bob")
            .await?
            .expect("bob gets a purchase token");
        let before = snapshot(&app, event).await?;
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let (status, resp) = app.buy(event, "bob", &bob).await?;
        assert_eq!(
            (status, code(&resp)),
            (403, "bad_purchase_token"),
            "expired purchase token"
        );
        assert_eq!(snapshot(&app, event).await?, before);
        Ok(())
    }
}

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    /// Alice buys once; replaying her purchase token is 409 (already bought) and changes nothing
    /// more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replayed_purchase_token_is_409_and_changes_nothing() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        let event = "tokens";
        app.open_event(event, json!({ "stock": 10 })).await?;
        let alice = app
            .admit_and_precheck(event, "alice")
            .await?
            .expect("alice gets a purchase token");
        assert_eq!(app.buy(event, "alice", &alice).await?.0, 202);
        let after_buy = snapshot(&app, event).await?;
        let (status, _) = app.buy(event, "alice", &alice).await?;
        assert_eq!(status, 409, "replayed purchase token: already bought");
        assert_eq!(snapshot(&app, event).await?, after_buy);
        Ok(())
    }
}

/// Run again over three Redis nodes (`scripts/test.sh`): what the layout of the shards over
/// the nodes can change.
mod over_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn repeat_clicks_buy_at_most_once() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        let (event, stock) = ("clicks", 100i64);
        app.open_event(event, json!({ "stock": stock, "shards": 8 }))
            .await?;
        let users: Vec<String> = (0..50).map(|i| format!("clicker{i}")).collect();
        // Each user clicks 10× at once: 10 whole precheck → buy chains racing each other.
        let results: Vec<(String, u16)> = stream::iter(
            users
                .iter()
                .flat_map(|u| std::iter::repeat_n(u.clone(), 10)),
        )
        .map(|user| {
            let app = &app;
            async move {
                let status = match app.admit_and_precheck(event, &user).await? {
                    Ok(token) => app.buy(event, &user, &token).await?.0,
                    Err((status, _)) => status,
                };
                anyhow::Ok((user, status))
            }
        })
        .buffer_unordered(200)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
        let mut per_user: HashMap<&str, usize> = HashMap::new();
        for (user, status) in &results {
            if *status == 202 {
                *per_user.entry(user).or_default() += 1;
            } else {
                assert!(
                    [403, 409].contains(status),
                    "a repeat click is refused as used-token or already-bought, got {status}"
                );
            }
        }
        assert!(per_user.values().all(|n| *n == 1), "{per_user:?}");
        assert_eq!(per_user.len(), users.len(), "every clicker got exactly one");
        assert_sold_exactly(&app, event, stock, users.len() as i64).await
    }
}
