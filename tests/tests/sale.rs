//! The sale path end to end: the real functions in the real host over HTTP, real Redis.
//! Every test asserts the invariants afterwards: exactly the stock sold, nobody twice, no shard
//! below zero, refused requests change nothing.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use anyhow::Result;
use futures::{StreamExt, stream};
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars, jwt_for};
use serde_json::{Value, json};

async fn start() -> Result<(RedisServer, PgServer, TestApp)> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = TestApp::start(seckill_testkit::product_manifest(), &app_vars(&redis, &pg)).await?;
    Ok((redis, pg, app))
}

fn code(body: &Value) -> &str {
    body["error"]["code"]
        .as_str()
        .or(body.as_str())
        .unwrap_or("<no error code>")
}

/// What a refused request must leave untouched.
async fn snapshot(app: &TestApp, redis: &RedisServer, event: &str) -> Result<Value> {
    let status = app.status(event).await?;
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let bought: i64 = redis::cmd("HLEN")
        .arg(format!("{{sk:{event}}}:bought"))
        .query_async(&mut conn)
        .await?;
    Ok(
        json!({ "stock": status["stock_by_shard"], "sold": status["sold"], "queued": status["queued"], "bought": bought }),
    )
}

/// Checks the end state of a sale: `sold` units sold exactly once each, shards never negative.
async fn assert_sold_exactly(
    app: &TestApp,
    redis: &RedisServer,
    event: &str,
    stock: i64,
    sold: i64,
) -> Result<()> {
    let status = app.status(event).await?;
    let shards: Vec<i64> = serde_json::from_value(status["stock_by_shard"].clone())?;
    assert!(
        shards.iter().all(|s| *s >= 0),
        "a shard went negative: {shards:?}"
    );
    assert_eq!(shards.iter().sum::<i64>(), stock - sold, "stock left");
    assert_eq!(status["sold"], sold, "{status}");
    assert_eq!(
        status["queued"], sold,
        "every accepted order is in the queue: {status}"
    );
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let bought: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("{{sk:{event}}}:bought"))
        .query_async(&mut conn)
        .await?;
    assert_eq!(bought.len() as i64, sold, "one order per buying user");
    let orders: HashSet<&String> = bought.values().collect();
    assert_eq!(orders.len() as i64, sold, "order ids are unique");
    Ok(())
}

/// `users` buyers for `stock` units over `shards`: everyone gets a purchase token first, then
/// all buys go at once. Exactly `stock` are accepted; everyone else hears `sold_out`.
async fn sell_out(
    app: &TestApp,
    redis: &RedisServer,
    event: &str,
    shards: u32,
    stock: i64,
    users: usize,
    seed: u64,
) -> Result<()> {
    app.open_event(event, json!({ "stock": stock, "shards": shards }))
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
            let (status, body) = app.buy(event, &user, &token).await?;
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
    assert_sold_exactly(app, redis, event, stock, stock).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_buyers_one_shard() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    for seed in [1, 2] {
        sell_out(&app, &redis, &format!("one-{seed}"), 1, 1_000, 10_000, seed).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_buyers_eight_shards() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    for seed in [3, 4] {
        sell_out(
            &app,
            &redis,
            &format!("eight-{seed}"),
            8,
            1_000,
            10_000,
            seed,
        )
        .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_buyers_thirty_two_shards() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    for seed in [5, 6] {
        sell_out(&app, &redis, &format!("tt-{seed}"), 32, 1_000, 10_000, seed).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_users_still_sell_out_exactly() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    let (event, shards, stock) = ("skewed", 32u32, 320i64);
    app.open_event(event, json!({ "stock": stock, "shards": shards }))
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
                    Ok(token) => app.buy(event, &user, &token).await,
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
            .all(|r| r.0 == 202 || code(&r.1) == "sold_out"),
        "only sold_out refusals"
    );
    assert_sold_exactly(&app, &redis, event, stock, stock).await?;
    // Orders came from every shard, not just the two home shards.
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    // XRANGE entries are [id, [field, value, ...]]: collect the `shard` field of each.
    let raw: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("{sk:skewed}:queue")
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await?;
    let shard_of = |fields: &Vec<String>| {
        fields
            .chunks(2)
            .find(|kv| kv[0] == "shard")
            .map(|kv| kv[1].clone())
    };
    let shards_used: HashSet<String> = raw.iter().filter_map(|(_, f)| shard_of(f)).collect();
    assert_eq!(
        shards_used.len(),
        shards as usize,
        "every shard sold its stock"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeat_clicks_buy_at_most_once() -> Result<()> {
    let (redis, _pg, app) = start().await?;
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
    assert_sold_exactly(&app, &redis, event, stock, users.len() as i64).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_expired_replayed_and_foreign_tokens_change_nothing() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    let event = "tokens";
    app.open_event(
        event,
        json!({ "stock": 10, "purchase_token_ttl_ms": 1_000 }),
    )
    .await?;
    let buy = format!("/api/events/{event}/buy");
    let precheck = format!("/api/events/{event}/precheck");
    let alice = app
        .admit_and_precheck(event, "alice")
        .await?
        .expect("alice gets a purchase token");
    let bob = app
        .admit_and_precheck(event, "bob")
        .await?
        .expect("bob gets a purchase token");
    let before = snapshot(&app, &redis, event).await?;

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
    // Bob's purchase token is not Alice's; a made-up one is nobody's.
    let (status, resp) = app.buy(event, "alice", &bob).await?;
    assert_eq!((status, code(&resp)), (403, "bad_purchase_token"));
    let (status, resp) = app
        .buy(event, "alice", "00000000000000000000000000000000")
        .await?;
    assert_eq!((status, code(&resp)), (403, "bad_purchase_token"));
    // Another user's admission token, and one for another event.
    let bobs_admission = seckill_domain::auth::admission_token(
        seckill_testkit::ADMISSION_SECRET.as_bytes(),
        event,
        "bob",
    );
    let (status, resp) = app
        .call(
            Method::POST,
            &precheck,
            Some(&jwt_for("mallory")),
            Some(&json!({ "admission_token": bobs_admission })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (403, "not_admitted"));
    let other_event = seckill_domain::auth::admission_token(
        seckill_testkit::ADMISSION_SECRET.as_bytes(),
        "other",
        "alice",
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
        snapshot(&app, &redis, event).await?,
        before,
        "refusals changed nothing"
    );

    // Alice buys once; replaying her token is refused and changes nothing more.
    assert_eq!(app.buy(event, "alice", &alice).await?.0, 202);
    let after_buy = snapshot(&app, &redis, event).await?;
    let (status, _) = app.buy(event, "alice", &alice).await?;
    assert_eq!(status, 409, "replayed purchase token: already bought");
    assert_eq!(snapshot(&app, &redis, event).await?, after_buy);

    // Bob's token expires (1 s TTL) before he uses it.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (status, resp) = app.buy(event, "bob", &bob).await?;
    assert_eq!(
        (status, code(&resp)),
        (403, "bad_purchase_token"),
        "expired purchase token"
    );
    assert_eq!(snapshot(&app, &redis, event).await?, after_buy);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_and_bad_input_get_the_right_4xx() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    app.open_event(
        "later",
        json!({ "start_ms": now + 3_600_000, "end_ms": now + 7_200_000 }),
    )
    .await?;
    app.open_event(
        "over",
        json!({ "start_ms": now - 7_200_000, "end_ms": now - 3_600_000 }),
    )
    .await?;
    app.open_event("open", json!({})).await?;
    let jwt = jwt_for("carol");
    let before = snapshot(&app, &redis, "open").await?;

    // Admission before the sale is the point of admission; precheck before the start is 425.
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
    let (status, resp) = app
        .call(Method::POST, "/api/events/over/admission", Some(&jwt), None)
        .await?;
    assert_eq!((status, code(&resp)), (410, "sale_ended"));
    let (status, resp) = app
        .call(Method::POST, "/api/events/nope/admission", Some(&jwt), None)
        .await?;
    assert_eq!((status, code(&resp)), (404, "event_not_found"));
    let (status, resp) = app
        .call(
            Method::POST,
            "/api/events/bad%20id/admission",
            Some(&jwt),
            None,
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "bad_event_id"));

    let url = format!("{}/api/events/open/buy", app.base_url);
    let raw = |body: Vec<u8>| {
        app.http
            .post(&url)
            .bearer_auth(&jwt)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let resp = raw(b"{not json".to_vec()).await?;
    assert_eq!(resp.status(), 400);
    assert_eq!(code(&resp.json().await?), "malformed_json");
    let resp = raw(br#"{"purchase_token":"x","extra":1}"#.to_vec()).await?;
    assert_eq!(resp.status(), 400, "unknown fields are malformed");
    let resp = raw(vec![b' '; 20 * 1024]).await?;
    assert_eq!(resp.status(), 413);
    assert_eq!(code(&resp.json().await?), "body_too_large");
    let (status, resp) = app
        .call(Method::GET, "/api/events/open/buy", Some(&jwt), None)
        .await?;
    assert_eq!((status, code(&resp)), (405, "method_not_allowed"));
    let resp = app.http.get(&url).bearer_auth(&jwt).send().await?;
    assert_eq!(resp.headers()["allow"], "POST");

    // Operators: no token, wrong token, bad config.
    let resp = app
        .http
        .get(format!("{}/admin/events/open", app.base_url))
        .send()
        .await?;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let (status, _) = app
        .call(Method::GET, "/admin/events/open", Some("wrong"), None)
        .await?;
    assert_eq!(status, 401);
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/bad",
            Some(&json!({ "sku": "x", "stock": 1, "start_ms": 5, "end_ms": 1 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "invalid_config"));
    // Postgres cannot store NUL: such a sku would make every order a dead letter.
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/nul",
            Some(&json!({ "sku": "a\u{0}b", "stock": 1, "start_ms": 1, "end_ms": now + 10_000 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "invalid_config"), "{resp}");
    let (status, _) = app.admin(Method::GET, "/admin/events/nul", None).await?;
    assert_eq!(status, 404, "a refused event is not created");
    // Moving the end before the start is refused.
    let (status, resp) = app
        .admin(
            Method::PATCH,
            "/admin/events/open",
            Some(&json!({ "end_ms": 1 })),
        )
        .await?;
    assert_eq!((status, code(&resp)), (409, "conflict"), "{resp}");
    let (status, resp) = app
        .admin(Method::POST, "/admin/events/open/warmup", None)
        .await?;
    assert_eq!(
        (status, code(&resp)),
        (409, "conflict"),
        "warm-up happens once"
    );
    let (status, resp) = app
        .admin(
            Method::PUT,
            "/admin/events/open",
            Some(&json!({ "sku": "x", "stock": 99, "start_ms": 1, "end_ms": now + 10_000 })),
        )
        .await?;
    assert_eq!(
        (status, code(&resp)),
        (409, "conflict"),
        "stock is frozen after warm-up"
    );
    assert_eq!(
        snapshot(&app, &redis, "open").await?,
        before,
        "bad input changed nothing"
    );
    Ok(())
}

/// A body far beyond any this API takes never exhausts a guest: a declared one is refused by the
/// host before any guest runs, a streamed one by the guest as soon as it passes its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mb_body_gets_413_and_the_host_keeps_serving() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("big", json!({})).await?;
    // Declared 64 MiB: the host answers from the head alone, before a byte of the body (a raw
    // client: an HTTP library still writing the body may meet the closed socket first).
    let declared = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = app.base_url.trim_start_matches("http://");
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let head = format!(
            "POST /api/events/big/buy HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Length: {}\r\n\r\n",
            jwt_for("bob"),
            64u64 << 20
        );
        s.write_all(head.as_bytes()).await?;
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out)).await??;
        String::from_utf8_lossy(&out).into_owned()
    };
    assert!(declared.starts_with("HTTP/1.1 413"), "{declared}");
    assert!(declared.contains("body_too_large"), "{declared}");
    // No Content-Length (chunked): the guest reads at most 16 KiB of it, then answers.
    let answer = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = app.base_url.trim_start_matches("http://");
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let head = format!(
            "POST /api/events/big/buy HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Transfer-Encoding: chunked\r\n\r\n",
            jwt_for("bob")
        );
        s.write_all(head.as_bytes()).await?;
        let chunk = [
            format!("{:x}\r\n", 1 << 16).into_bytes(),
            vec![b' '; 1 << 16],
            b"\r\n".to_vec(),
        ]
        .concat();
        let (mut rx, mut tx) = s.into_split();
        // Read while writing: the answer comes (and the connection closes) long before 64 MiB.
        let writer = tokio::spawn(async move {
            for _ in 0..(64 << 20) / (1 << 16) {
                if tx.write_all(&chunk).await.is_err() {
                    return;
                }
            }
            let _ = tx.write_all(b"0\r\n\r\n").await;
        });
        let mut out = Vec::new();
        let mut buf = vec![0; 4096];
        while !String::from_utf8_lossy(&out).contains("}}") {
            match tokio::time::timeout(Duration::from_secs(20), rx.read(&mut buf)).await? {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        writer.abort();
        String::from_utf8_lossy(&out).into_owned()
    };
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_too_large"), "{answer}");
    for _ in 0..5 {
        let (status, body) = app.get("/api/time").await?;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(app.status("big").await?["sold"], 0, "nothing was bought");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_refuse_bursts_and_refill() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    // Capacity 5, refill 2/s: a burst of 5 passes, the 6th is refused, 0.6 s refill one more.
    app.open_event(
        "limited",
        json!({ "user_rate": 2.0, "user_burst": 5, "buy_rate": 1.0, "buy_burst": 3 }),
    )
    .await?;
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

    // The event-wide buy bucket: 3 at once, then 1/s. A limited buy keeps its token.
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
    let before = snapshot(&app, &redis, "limited").await?;
    let (user, token) = &tokens[3];
    let (status, resp) = app.buy("limited", user, token).await?;
    assert_eq!((status, code(&resp)), (429, "rate_limited"));
    assert_eq!(
        snapshot(&app, &redis, "limited").await?,
        before,
        "a limited buy burns nothing"
    );
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(
        app.buy("limited", user, token).await?.0,
        202,
        "same token works after refill"
    );
    assert_sold_exactly(&app, &redis, "limited", 10, 4).await
}

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
        "/api/events/count/orders/me",
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
                "/api/events/count/orders/me",
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
        2,
        "one command for admission, one for precheck"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_lottery_switches_and_deny_lists() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    // Poll: nothing yet → none; after sell-out without an order → sold_out.
    app.open_event("tiny", json!({ "stock": 1 })).await?;
    let app = &app;
    let poll = move |user: &str| {
        let jwt = jwt_for(user);
        async move {
            app.call(Method::GET, "/api/events/tiny/orders/me", Some(&jwt), None)
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
    assert_eq!(poll("frank").await?.1["status"], "sold_out");
    let (status, resp) = app
        .call(
            Method::POST,
            "/api/events/tiny/admission",
            Some(&jwt_for("frank")),
            None,
        )
        .await?;
    assert_eq!(
        (status, code(&resp)),
        (410, "sold_out"),
        "no admission once sold out"
    );

    // Lottery: register, draw, winners get tokens, the rest are told so.
    app.open_event(
        "lotto",
        json!({ "stock": 2, "admission_mode": "lottery", "admission_multiplier": 1 }),
    )
    .await?;
    for i in 0..10 {
        let (status, body) = app
            .call(
                Method::POST,
                "/api/events/lotto/admission",
                Some(&jwt_for(&format!("p{i}"))),
                None,
            )
            .await?;
        assert_eq!((status, body["status"].as_str()), (202, Some("registered")));
    }
    let (status, drawn) = app
        .admin(Method::POST, "/admin/events/lotto/draw", None)
        .await?;
    assert_eq!((status, drawn["admitted"].as_u64()), (200, Some(2)));
    let mut winners = 0;
    for i in 0..10 {
        let (status, body) = app
            .call(
                Method::POST,
                "/api/events/lotto/admission",
                Some(&jwt_for(&format!("p{i}"))),
                None,
            )
            .await?;
        match status {
            200 => winners += 1,
            403 => assert_eq!(code(&body), "not_selected"),
            other => panic!("unexpected {other} {body}"),
        }
    }
    assert_eq!(winners, 2);
    assert_eq!(
        app.admin(Method::POST, "/admin/events/lotto/draw", None)
            .await?
            .0,
        409,
        "one draw"
    );

    // Switches: pause and resume; deny lists by user and by address.
    app.open_event("switch", json!({ "stock": 5 })).await?;
    assert_eq!(
        app.admin(
            Method::PATCH,
            "/admin/events/switch",
            Some(&json!({ "enabled": false }))
        )
        .await?
        .0,
        200
    );
    let (status, resp) = app
        .admit_and_precheck("switch", "gina")
        .await?
        .expect_err("paused");
    assert_eq!((status, code(&resp)), (503, "sale_paused"));
    assert_eq!(
        app.admin(
            Method::PATCH,
            "/admin/events/switch",
            Some(&json!({ "enabled": true }))
        )
        .await?
        .0,
        200
    );
    assert!(app.admit_and_precheck("switch", "gina").await?.is_ok());
    assert_eq!(
        app.admin(
            Method::POST,
            "/admin/events/switch/deny",
            Some(&json!({ "users": ["hank"] }))
        )
        .await?
        .0,
        200
    );
    let (status, resp) = app
        .admit_and_precheck("switch", "hank")
        .await?
        .expect_err("denied user");
    assert_eq!((status, code(&resp)), (403, "denied"));
    assert_eq!(
        app.admin(
            Method::POST,
            "/admin/events/switch/deny",
            Some(&json!({ "addrs": ["127.0.0.1"] }))
        )
        .await?
        .0,
        200
    );
    let (status, resp) = app
        .admit_and_precheck("switch", "ivan")
        .await?
        .expect_err("denied address");
    assert_eq!((status, code(&resp)), (403, "denied"));
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

/// Redis that cannot be reached is 503 with `Retry-After`; a script that fails on the data is
/// our problem, 500 `internal`, with no retry advice and no detail for the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_errors_are_500_and_an_unreachable_redis_is_503() -> Result<()> {
    let (redis, _pg, app) = start().await?;
    app.open_event("corrupt", json!({ "stock": 10 })).await?;
    let token = app
        .admit_and_precheck("corrupt", "victim")
        .await?
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let buy = || {
        app.http
            .post(format!("{}/api/events/corrupt/buy", app.base_url))
            .bearer_auth(jwt_for("victim"))
            .json(&json!({ "purchase_token": token }))
            .send()
    };
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    redis::pipe()
        .cmd("DEL")
        .arg("{sk:corrupt}:bought")
        .cmd("SET")
        .arg("{sk:corrupt}:bought")
        .arg("not a hash")
        .query_async::<()>(&mut conn)
        .await?;
    let resp = buy().await?;
    assert_eq!(resp.status(), 500);
    assert!(resp.headers().get("retry-after").is_none());
    let body: Value = resp.json().await?;
    assert_eq!(
        body,
        json!({ "error": { "code": "internal", "message": "internal error" } })
    );

    drop(conn);
    drop(redis);
    let resp = buy().await?;
    assert_eq!(resp.status(), 503);
    assert_eq!(
        resp.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    let body: Value = resp.json().await?;
    assert_eq!(code(&body), "unavailable");
    Ok(())
}

/// The console's refusal counts cost a sold-out storm no disk writes: with `appendfsync always`,
/// refused buys leave the AOF as it was (the count is kept out of it), and are still counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_counted_without_writing_the_aof() -> Result<()> {
    let redis = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])?;
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
    Ok(())
}
