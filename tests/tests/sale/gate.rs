//! The admission gate: a proof of work nobody can skip, forge, weaken or use twice; an opening
//! time; a per-address bucket; admission tokens that die with their event's admission. Every
//! refusal changes nothing.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{TestApp, jwt_for, pow};
use serde_json::{Value, json};

use crate::{assert_sold_exactly, code, epoch_ms, snapshot, start};

/// POSTs `body` to `event`'s admission route as `user`.
async fn admit(
    app: &TestApp,
    event: &str,
    user: &str,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    app.call(
        Method::POST,
        &app.sale_path(event, "admission"),
        Some(&jwt_for(user)),
        body,
    )
    .await
}

/// A challenge for `user`.
async fn challenge(app: &TestApp, event: &str, user: &str) -> Result<(u16, Value)> {
    app.call(
        Method::POST,
        &app.sale_path(event, "admission/challenge"),
        Some(&jwt_for(user)),
        None,
    )
    .await
}

/// A script that does not solve gets no admission: no proof, a guessed nonce, a forged or
/// weakened challenge, someone else's; a solved one admits once and is then spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_solved_challenge_admits_and_only_once() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "gate";
    app.open_event(event, json!({ "stock": 10, "pow_difficulty": 12 }))
        .await?;
    let before = snapshot(&app, event).await?;
    let (status, body) = admit(&app, event, "bot", None).await?;
    assert_eq!((status, code(&body)), (428, "challenge_required"), "{body}");

    let (status, c) = challenge(&app, event, "bot").await?;
    assert_eq!((status, &c["difficulty"]), (200, &json!(12)), "{c}");
    let text = c["challenge"].as_str().unwrap_or_default().to_owned();
    let unsolved = (0u64..)
        .map(|n| n.to_string())
        .find(|n| !pow::solves(&text, n, 12))
        .unwrap_or_default();
    let (status, body) = admit(
        &app,
        event,
        "bot",
        Some(&json!({ "challenge": text, "nonce": unsolved })),
    )
    .await?;
    assert_eq!(
        (status, code(&body)),
        (400, "bad_challenge"),
        "a guessed nonce"
    );
    // The difficulty written down to 0 in the challenge: the signature no longer holds.
    let weakened = {
        let mut parts: Vec<String> = text.split('.').map(str::to_owned).collect();
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let payload = String::from_utf8(b64.decode(&parts[1])?)?;
        parts[1] = b64.encode(payload.replace("\n12\n", "\n0\n"));
        parts.join(".")
    };
    let (status, body) = admit(
        &app,
        event,
        "bot",
        Some(&json!({ "challenge": weakened, "nonce": "0" })),
    )
    .await?;
    assert_eq!(
        (status, code(&body)),
        (400, "bad_challenge"),
        "a weakened challenge"
    );
    let nonce = pow::solve(&text, 12);
    let solved = json!({ "challenge": text, "nonce": nonce });
    let (status, body) = admit(&app, event, "mallory", Some(&solved)).await?;
    assert_eq!(
        (status, code(&body)),
        (400, "bad_challenge"),
        "someone else's"
    );
    assert_eq!(
        snapshot(&app, event).await?,
        before,
        "the refusals changed nothing"
    );

    let (status, body) = admit(&app, event, "bot", Some(&solved)).await?;
    assert_eq!(status, 200, "{body}");
    let (status, body) = admit(&app, event, "bot", Some(&solved)).await?;
    assert_eq!((status, code(&body)), (409, "challenge_used"), "{body}");
    Ok(())
}

/// Raising the difficulty during admission voids the easier challenges handed out before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_the_difficulty_voids_easier_challenges() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "harder";
    app.open_event(event, json!({ "stock": 10, "pow_difficulty": 4 }))
        .await?;
    let (_, c) = challenge(&app, event, "u1").await?;
    let text = c["challenge"].as_str().unwrap_or_default();
    let solved = json!({ "challenge": text, "nonce": pow::solve(text, 4) });
    let (status, _) = app
        .admin(
            Method::PATCH,
            &format!("/admin/events/{event}"),
            Some(&json!({ "pow_difficulty": 10 })),
        )
        .await?;
    assert_eq!(status, 200);
    let (status, body) = admit(&app, event, "u1", Some(&solved)).await?;
    assert_eq!((status, code(&body)), (428, "challenge_required"), "{body}");
    let (status, body) = app.admission(event, "u1").await?;
    assert_eq!(status, 200, "a new challenge at 10 bits admits: {body}");
    assert_sold_exactly(&app, event, 10, 0).await
}

/// Before its opening time admission hands out neither challenges nor tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_opens_at_its_time() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "opening";
    let opens = epoch_ms()? + 600_000;
    app.open_event(event, json!({ "stock": 10, "admission_opens_ms": opens }))
        .await?;
    let (status, body) = challenge(&app, event, "early").await?;
    assert_eq!((status, code(&body)), (425, "admission_not_open"), "{body}");
    let (status, body) = admit(&app, event, "early", None).await?;
    assert_eq!((status, code(&body)), (425, "admission_not_open"), "{body}");
    assert_eq!(app.status(event).await?["admitted"], 0);
    assert_sold_exactly(&app, event, 10, 0).await
}

/// One address gets `burst` admissions, then 429 with Retry-After, whoever the users are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_gets_its_burst_of_admissions_then_429() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "crowded";
    app.open_event(
        event,
        json!({ "stock": 10, "shards": 1, "admission_addr_rate": 0.001, "admission_addr_burst": 3 }),
    )
    .await?;
    for i in 0..3 {
        let (status, body) = app.admission(event, &format!("nat{i}")).await?;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = app.admission(event, "nat3").await?;
    assert_eq!((status, code(&body)), (429, "rate_limited"), "{body}");
    assert_eq!(app.status(event).await?["admitted"], 3);
    assert_sold_exactly(&app, event, 10, 0).await
}

/// A replayed challenge is refused before the address's bucket is touched: replays spend
/// none of an honest address's tokens. A client refused for its address's bucket keeps its
/// solved challenge for the next try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_challenge_spends_no_tokens_and_a_limited_one_stays_unused() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "replayed";
    app.open_event(
        event,
        json!({ "stock": 10, "shards": 1, "pow_difficulty": 4,
                "admission_addr_rate": 0.001, "admission_addr_burst": 2 }),
    )
    .await?;
    let solved = match app.solved_challenge(event, "first").await? {
        Ok(body) => body,
        Err((status, body)) => anyhow::bail!("challenge: {status} {body}"),
    };
    let (status, body) = admit(&app, event, "first", Some(&solved)).await?;
    assert_eq!(status, 200, "{body}");
    for _ in 0..5 {
        let (status, body) = admit(&app, event, "first", Some(&solved)).await?;
        assert_eq!((status, code(&body)), (409, "challenge_used"), "{body}");
    }
    // The address's second token is still there for another user behind it.
    let (status, body) = app.admission(event, "second").await?;
    assert_eq!(status, 200, "{body}");
    // Now the bucket is empty: the third user is limited, and their solution stays unused.
    let third = match app.solved_challenge(event, "third").await? {
        Ok(body) => body,
        Err((status, body)) => anyhow::bail!("challenge: {status} {body}"),
    };
    let (status, body) = admit(&app, event, "third", Some(&third)).await?;
    assert_eq!((status, code(&body)), (429, "rate_limited"), "{body}");
    let (status, body) = admit(&app, event, "third", Some(&third)).await?;
    assert_eq!((status, code(&body)), (429, "rate_limited"), "{body}");
    assert_eq!(app.status(event).await?["admitted"], 2);
    assert_sold_exactly(&app, event, 10, 0).await
}

/// Admissions from `users`, each solving a challenge, sent through the trusted proxy as
/// coming from `addr(i)`: how many were admitted and how many refused `rate_limited`.
async fn admit_from(
    app: &TestApp,
    event: &str,
    users: std::ops::Range<u32>,
    addr: impl Fn(u32) -> String,
) -> Result<(usize, usize)> {
    let (mut admitted, mut limited) = (0, 0);
    for i in users {
        let user = format!("crowd{i}");
        let solved = match app.solved_challenge(event, &user).await? {
            Ok(body) => body,
            Err((status, body)) => anyhow::bail!("challenge: {status} {body}"),
        };
        let (status, body) = app
            .call_with_headers(
                Method::POST,
                &app.sale_path(event, "admission"),
                Some(&jwt_for(&user)),
                Some(&solved),
                &[("x-forwarded-for", &addr(i))],
            )
            .await?;
        match (status, code(&body)) {
            (200, _) => admitted += 1,
            (429, "rate_limited") => limited += 1,
            _ => anyhow::bail!("{user}: {status} {body}"),
        }
    }
    Ok((admitted, limited))
}

/// One address's admission bucket holds for the event, whichever shards its users home on
/// (each shard holds its part), and an IPv6 client's bucket is its /64's: rotating through
/// it gains nothing, while another /64 has its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_bucket_holds_per_event_and_an_ipv6_client_shares_its_64() -> Result<()> {
    let (_redis, _pg, app) = crate::pause_and_deny::start_behind_a_proxy().await?;
    let config = json!({ "stock": 40, "shards": 4, "pow_difficulty": 4,
                         "admission_addr_rate": 0.001, "admission_addr_burst": 4 });
    app.open_event("v4", config.clone()).await?;
    let (admitted, limited) = admit_from(&app, "v4", 0..16, |_| "198.51.100.7".into()).await?;
    assert!(
        (1..=4).contains(&admitted) && admitted + limited == 16,
        "{admitted} admitted, {limited} limited"
    );
    app.open_event("v6", config).await?;
    let (admitted, limited) =
        admit_from(&app, "v6", 0..16, |i| format!("2001:db8:1:2::{:x}", i + 1)).await?;
    assert!(
        (1..=4).contains(&admitted) && admitted + limited == 16,
        "{admitted} admitted, {limited} limited"
    );
    let (admitted, _) = admit_from(&app, "v6", 16..17, |_| "2001:db8:1:3::1".into()).await?;
    assert_eq!(admitted, 1, "another /64 has a bucket of its own");
    assert_sold_exactly(&app, "v4", 40, 0).await
}

/// An admission token names its event's admission version: switching the admission mode (or
/// re-creating the event) voids the tokens handed out before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_of_admission_mode_voids_earlier_admission_tokens() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let event = "switched";
    app.open_event(event, json!({ "stock": 10 })).await?;
    let (_, admitted) = app.admission(event, "early").await?;
    let token = admitted["admission_token"].clone();
    let status = app.status(event).await?;
    let mut config: Value = json!({});
    for field in [
        "sku",
        "unit_amount",
        "currency",
        "stock",
        "shards",
        "start_ms",
        "end_ms",
    ] {
        let raw = status["config"][field].as_str().unwrap_or_default();
        config[field] = raw.parse::<u64>().map_or(json!(raw), |n| json!(n));
    }
    for mode in ["lottery", "fcfs"] {
        config["admission_mode"] = json!(mode);
        let (s, body) = app
            .admin(
                Method::PUT,
                &format!("/admin/events/{event}"),
                Some(&config),
            )
            .await?;
        assert_eq!(s, 200, "{body}");
    }
    let (status, body) = app
        .call(
            Method::POST,
            &app.sale_path(event, "precheck"),
            Some(&jwt_for("early")),
            Some(&json!({ "admission_token": token })),
        )
        .await?;
    assert_eq!((status, code(&body)), (403, "not_admitted"), "{body}");
    assert_sold_exactly(&app, event, 10, 0).await
}
