//! The web component through the whole chain (the real `spin.toml`, real Redis and Postgres,
//! the host): pages and assets, their headers, the demo login's switch, the event info. The
//! browser side is in `tests/browser/` (scripts/browser-tests.sh).

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars, product_manifest};
use serde_json::json;

async fn app(redis: &RedisServer, pg: &PgServer, demo: bool) -> Result<TestApp> {
    let mut vars = app_vars(redis, pg);
    vars.push(("demo_login", demo.to_string()));
    TestApp::start(product_manifest(), &vars).await
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> &'a str {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_and_assets_are_served_with_their_types_caching_and_gzip() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = app(&redis, &pg, false).await?;
    // Pages and assets go around the kit's recorder: the OpenAPI document covers the JSON
    // routes and names the pages only.
    let get = |path: &str, gzip: bool| {
        let mut req = app.http.get(format!("{}{path}", app.base_url));
        if gzip {
            req = req.header("accept-encoding", "gzip, br");
        }
        req.send()
    };
    let resp = get("/shop/e1", false).await?;
    assert_eq!(resp.status(), 200);
    let html = resp.text().await?;
    assert!(html.contains("<html lang=\"en\">"), "{html}");
    let assets: Vec<&str> = html
        .split('"')
        .filter(|s| s.starts_with("/shop/assets/"))
        .collect();
    // style, the two catalogues, common, shop, and the PoW worker
    assert_eq!(assets.len(), 6, "{assets:?}");
    for page in ["/shop", "/shop/", "/console"] {
        let resp = get(page, false).await?;
        assert_eq!(resp.status(), 200, "{page}");
        assert_eq!(header(&resp, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header(&resp, "cache-control"), "no-cache");
        assert!(header(&resp, "content-security-policy").contains("default-src 'none'"));
    }
    let mut total = (0, 0);
    for asset in &assets {
        let plain = get(asset, false).await?;
        assert_eq!(plain.status(), 200, "{asset}");
        assert_eq!(
            header(&plain, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        assert_eq!(header(&plain, "content-encoding"), "");
        let kind = if asset.ends_with(".css") {
            "text/css"
        } else if asset.ends_with(".json") {
            "application/json"
        } else {
            "text/javascript"
        };
        assert!(header(&plain, "content-type").starts_with(kind), "{asset}");
        let etag = header(&plain, "etag").to_owned();
        let raw = plain.bytes().await?.len();
        let zipped = get(asset, true).await?;
        assert_eq!(header(&zipped, "content-encoding"), "gzip");
        let gz = zipped.bytes().await?;
        assert_eq!(&gz[..2], &[0x1f, 0x8b], "a gzip stream");
        assert!(gz.len() * 2 < raw, "{asset}: {} of {raw} bytes", gz.len());
        total = (total.0 + raw, total.1 + gz.len());
        let again = app
            .http
            .get(format!("{}{asset}", app.base_url))
            .header("if-none-match", &etag)
            .send()
            .await?;
        assert_eq!(again.status(), 304);
    }
    eprintln!("storefront assets: {} bytes, {} gzipped", total.0, total.1);
    let missing = get("/shop/assets/shop.0000000000.js", false).await?;
    assert_eq!(missing.status(), 404);
    let resp = app
        .http
        .post(format!("{}/console", app.base_url))
        .send()
        .await?;
    assert_eq!(
        (resp.status().as_u16(), header(&resp, "allow")),
        (405, "GET, HEAD")
    );
    let resp = app
        .http
        .head(format!("{}/console", app.base_url))
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "text/html; charset=utf-8");
    assert!(resp.bytes().await?.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_login_is_off_unless_switched_on_and_signs_a_buyer_token() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let off = app(&redis, &pg, false).await?;
    assert_eq!(
        off.get_json("/shop/demo-login").await?,
        (200, json!({ "enabled": false }))
    );
    let alice = json!({ "user": "alice" });
    let (status, body) = off
        .call(Method::POST, "/shop/demo-login", None, Some(&alice))
        .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("demo_login_off"))
    );
    drop(off);

    let on = app(&redis, &pg, true).await?;
    assert_eq!(
        on.get_json("/shop/demo-login").await?,
        (200, json!({ "enabled": true }))
    );
    let (status, body) = on
        .call(Method::POST, "/shop/demo-login", None, Some(&alice))
        .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user"], "alice");
    // The token is a buyer's: the sale accepts it.
    on.open_event("w1", json!({})).await?;
    let jwt = body["token"].as_str().unwrap_or_default();
    let (status, adm) = on
        .call(Method::POST, "/api/events/w1/admission", Some(jwt), None)
        .await?;
    assert_eq!(status, 200, "{adm}");
    let bad = json!({ "user": "two words" });
    let (status, body) = on
        .call(Method::POST, "/shop/demo-login", None, Some(&bad))
        .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_user_id"))
    );
    let (status, body) = on
        .call(Method::POST, "/shop/demo-login", None, Some(&json!({})))
        .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("malformed_json"))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_info_tells_a_buyer_the_window_and_what_is_left() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = app(&redis, &pg, false).await?;
    app.open_event(
        "w2",
        json!({ "stock": 7, "shards": 2, "start_ms": 1_000, "end_ms": 4_000_000_000_000u64 }),
    )
    .await?;
    let (status, info) = app.get_json("/shop/events/w2").await?;
    assert_eq!(status, 200, "{info}");
    assert_eq!(
        info,
        json!({
            "event_id": "w2", "sku": "sku-w2", "stock": 7, "stock_left": 7,
            "start_ms": 1_000, "end_ms": 4_000_000_000_000u64, "admission_mode": "fcfs",
            "enabled": true, "warmed": true, "sold_out": false, "shards": 2,
            "unit_amount": 1999, "currency": "eur", "admission_opens_ms": 0, "pow_difficulty": 0,
        })
    );
    let (status, body) = app.get_json("/shop/events/nope").await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("event_not_found"))
    );
    let (status, body) = app.get_json("/shop/events/bad!id").await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_event_id"))
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_info_is_cacheable_for_a_second_with_an_etag_and_304s() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = app(&redis, &pg, false).await?;
    app.open_event("w3", json!({ "stock": 5, "shards": 1 }))
        .await?;
    let url = format!("{}/shop/events/w3", app.base_url);
    let cached = "public, max-age=1, stale-while-revalidate=2";
    // Through the kit's recorder, so the OpenAPI check sees the headers.
    let (status, info) = app.get_json("/shop/events/w3").await?;
    assert_eq!((status, info["stock_left"].as_u64()), (200, Some(5)));
    let first = app.http.get(&url).send().await?;
    assert_eq!(first.status(), 200);
    assert_eq!(header(&first, "cache-control"), cached);
    assert_eq!(header(&first, "content-type"), "application/json");
    let etag = header(&first, "etag").to_owned();
    let hex = etag.trim_matches('"');
    assert!(
        etag.len() == 34 && etag.starts_with('"') && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "a strong ETag: {etag}"
    );
    let body = first.bytes().await?;
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&body)?, info);

    // The client (or the CDN) holds it: 304, no body, the same validator and freshness.
    let conditional = |tags: &str| {
        app.http
            .get(&url)
            .header("if-none-match", tags.to_owned())
            .send()
    };
    for tags in [
        etag.clone(),
        format!("\"0000\", {etag}"),
        format!("W/{etag}"),
        "*".into(),
    ] {
        let resp = conditional(&tags).await?;
        assert_eq!(resp.status(), 304, "If-None-Match: {tags}");
        assert_eq!(header(&resp, "etag"), etag);
        assert_eq!(header(&resp, "cache-control"), cached);
        assert!(resp.bytes().await?.is_empty());
    }
    let other = conditional("\"00000000000000000000000000000000\"").await?;
    assert_eq!(other.status(), 200);
    assert_eq!(other.bytes().await?, body, "the same body, byte for byte");
    let head = app.http.head(&url).send().await?;
    assert_eq!(
        (head.status().as_u16(), header(&head, "etag")),
        (200, etag.as_str())
    );
    assert!(head.bytes().await?.is_empty());

    // A unit sold and drained: the drain rewrites the summary, the body and its ETag change,
    // and the old validator no longer matches.
    let token = app.admit_and_precheck("w3", "etag-buyer").await?;
    let token = token.map_err(|(s, b)| anyhow::anyhow!("precheck: {s} {b}"))?;
    assert_eq!(app.buy("w3", "etag-buyer", &token).await?.0, 202);
    let (status, drained) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!(status, 200, "{drained}");
    let changed = conditional(&etag).await?;
    assert_eq!(changed.status(), 200);
    let new_etag = header(&changed, "etag").to_owned();
    assert_ne!(new_etag, etag);
    let now: serde_json::Value = changed.json().await?;
    assert_eq!(now["stock_left"].as_u64(), Some(4));
    assert_eq!(conditional(&new_etag).await?.status(), 304);

    // Errors are never stored by a cache; nor is the server's clock.
    for path in ["/shop/events/nope", "/shop/events/bad!id"] {
        let resp = app
            .http
            .get(format!("{}{path}", app.base_url))
            .send()
            .await?;
        assert!(resp.status().is_client_error(), "{path}");
        assert_eq!(header(&resp, "cache-control"), "no-store", "{path}");
        assert_eq!(header(&resp, "etag"), "", "{path}");
    }
    let post = app.http.post(&url).send().await?;
    assert_eq!(
        (post.status().as_u16(), header(&post, "allow")),
        (405, "GET, HEAD")
    );
    let time = app
        .http
        .get(format!("{}/api/time", app.base_url))
        .send()
        .await?;
    assert_eq!(header(&time, "cache-control"), "no-store");
    assert_eq!(header(&time, "etag"), "");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_landing_page_lists_the_live_and_upcoming_sales_and_links_the_console() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = app(&redis, &pg, false).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    let (hour, day) = (3_600_000, 86_400_000);
    app.open_event(
        "live-b",
        json!({ "start_ms": now - 1_000, "end_ms": now + day }),
    )
    .await?;
    app.open_event(
        "live-a",
        json!({ "start_ms": now - 1_000, "end_ms": now + hour, "unit_amount": 500, "currency": "usd" }),
    )
    .await?;
    app.open_event(
        "soon",
        json!({ "start_ms": now + hour, "end_ms": now + 2 * hour }),
    )
    .await?;
    // Ended (one archived, one not): neither is a sale a person can go to.
    for id in ["ended", "archived"] {
        app.open_event(id, json!({ "start_ms": 1_000, "end_ms": 2_000 }))
            .await?;
    }
    let (status, body) = app
        .admin(Method::POST, "/admin/events/archived/archive", None)
        .await?;
    assert_eq!(status, 200, "{body}");

    // The page: served at `/` like the others, naming its script, linking the console.
    let resp = app.http.get(format!("{}/", app.base_url)).send().await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&resp, "cache-control"), "no-cache");
    assert!(header(&resp, "content-security-policy").contains("default-src 'none'"));
    let html = resp.text().await?;
    assert!(html.contains("<html lang=\"en\">"), "{html}");
    assert!(html.contains("href=\"/console\""), "{html}");
    let script = html
        .split('"')
        .find(|s| s.starts_with("/shop/assets/index."))
        .expect("the page names its script");
    let resp = app
        .http
        .get(format!("{}{script}", app.base_url))
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await?.contains("/shop/events"));

    // The list: live sales first (soonest to end first), then the upcoming; public fields only.
    let (status, list) = app.get_json("/shop/events").await?;
    assert_eq!(status, 200, "{list}");
    let sale = |id: &str, state: &str, start: u64, end: u64, amount: u64, currency: &str| {
        json!({
            "event_id": id, "state": state, "sku": format!("sku-{id}"), "start_ms": start,
            "end_ms": end, "unit_amount": amount, "currency": currency, "sold_out": false,
        })
    };
    assert_eq!(
        list,
        json!({ "events": [
            sale("live-a", "live", now - 1_000, now + hour, 500, "usd"),
            sale("live-b", "live", now - 1_000, now + day, 1999, "eur"),
            sale("soon", "upcoming", now + hour, now + 2 * hour, 1999, "eur"),
        ] })
    );

    // Cacheable for seconds, revalidated by its ETag; other methods refused.
    let url = format!("{}/shop/events", app.base_url);
    let first = app.http.get(&url).send().await?;
    assert_eq!(
        header(&first, "cache-control"),
        "public, max-age=5, stale-while-revalidate=10"
    );
    let etag = header(&first, "etag").to_owned();
    let again = app
        .http
        .get(&url)
        .header("if-none-match", &etag)
        .send()
        .await?;
    assert_eq!(again.status(), 304);
    let post = app.http.post(&url).send().await?;
    assert_eq!(
        (post.status().as_u16(), header(&post, "allow")),
        (405, "GET, HEAD")
    );
    Ok(())
}
