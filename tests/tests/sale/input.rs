//! Requests the API cannot take: an unknown or malformed event id, a buy body that is not the
//! JSON it expects or is too large, a wrong method, and a 64 MiB body. Each is refused with its
//! own status and code, and changes nothing.

use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, jwt_for};
use serde_json::{Value, json};

use crate::{code, snapshot, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_event_id_is_400_bad_event_id() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    let (status, resp) = app
        .call(
            Method::POST,
            "/api/events/bad%20id/admission",
            Some(&jwt_for("carol")),
            None,
        )
        .await?;
    assert_eq!((status, code(&resp)), (400, "bad_event_id"));
    Ok(())
}

/// Sends `body` as the JSON body of a buy on the open event `open`, as carol.
async fn raw_buy(app: &TestApp, body: Vec<u8>) -> Result<reqwest::Response> {
    Ok(app
        .http
        .post(format!("{}/api/events/open/buy", app.base_url))
        .bearer_auth(jwt_for("carol"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?)
}

/// A running app with the event `open` and its snapshot before any bad input.
async fn with_open_event() -> Result<(RedisServer, PgServer, TestApp, Value)> {
    let (redis, pg, app) = start().await?;
    app.open_event("open", json!({})).await?;
    let before = snapshot(&app, "open").await?;
    Ok((redis, pg, app, before))
}

/// Not JSON, or JSON with a field the buy does not know: 400 `malformed_json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buy_body_that_is_not_the_expected_json_is_400_and_changes_nothing() -> Result<()> {
    let (_redis, _pg, app, before) = with_open_event().await?;
    let resp = raw_buy(&app, b"{not json".to_vec()).await?;
    assert_eq!(resp.status(), 400);
    assert_eq!(code(&resp.json().await?), "malformed_json");
    let resp = raw_buy(&app, br#"{"purchase_token":"x","extra":1}"#.to_vec()).await?;
    assert_eq!(resp.status(), 400, "unknown fields are malformed");
    assert_eq!(
        snapshot(&app, "open").await?,
        before,
        "bad input changed nothing"
    );
    Ok(())
}

/// 20 KiB, more than any body the app takes: 413. The local host's limit is the app's own
/// (16 KiB, `seckill_spin_edge::http::MAX_BODY_BYTES`), so the host refuses it in its own words
/// before a guest runs; under Spin the function answers `body_too_large`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buy_body_over_its_limit_is_413_and_changes_nothing() -> Result<()> {
    let (_redis, _pg, app, before) = with_open_event().await?;
    let resp = raw_buy(&app, vec![b' '; 20 * 1024]).await?;
    assert_eq!(resp.status(), 413);
    assert!(
        resp.text().await?.contains("16384 bytes"),
        "the app's limit"
    );
    assert_eq!(
        snapshot(&app, "open").await?,
        before,
        "bad input changed nothing"
    );
    Ok(())
}

/// `GET` on the buy route: 405 `method_not_allowed`, with `Allow: POST`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_is_405_with_allow_and_changes_nothing() -> Result<()> {
    let (_redis, _pg, app, before) = with_open_event().await?;
    let jwt = jwt_for("carol");
    let (status, resp) = app
        .call(Method::GET, "/api/events/open/buy", Some(&jwt), None)
        .await?;
    assert_eq!((status, code(&resp)), (405, "method_not_allowed"));
    let resp = app
        .http
        .get(format!("{}/api/events/open/buy", app.base_url))
        .bearer_auth(&jwt)
        .send()
        .await?;
    assert_eq!(resp.headers()["allow"], "POST");
    assert_eq!(
        snapshot(&app, "open").await?,
        before,
        "bad input changed nothing"
    );
    Ok(())
}

/// A body far beyond any this API takes never reaches a guest: a declared one is refused by the
/// host from its head, a streamed one as soon as it passes the limit.
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
    // No Content-Length (chunked): the host reads at most 16 KiB of it, then answers.
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
        while !String::from_utf8_lossy(&out).contains("bytes") {
            match tokio::time::timeout(Duration::from_secs(20), rx.read(&mut buf)).await? {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        writer.abort();
        String::from_utf8_lossy(&out).into_owned()
    };
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    for _ in 0..5 {
        let (status, body) = app.get("/api/time").await?;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(app.status("big").await?["sold"], 0, "nothing was bought");
    Ok(())
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_event_is_404_event_not_found() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
        let (status, resp) = app
            .call(
                Method::POST,
                "/api/events/nope/admission",
                Some(&jwt_for("carol")),
                None,
            )
            .await?;
        assert_eq!((status, code(&resp)), (404, "event_not_found"));
        Ok(())
    }
}

/// A path in another spelling than its one canonical form (`//admin`, which the router
/// forgives while a load balancer's `/admin/*` rule does not match it) is refused, not served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_canonical_path_is_404_not_found() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("e1", json!({})).await?;
    for path in [
        "//admin/events/e1",
        "//admin/events",
        "/admin//events",
        "/api/events/e1//orders/me",
    ] {
        let (status, body) = app
            .call(Method::GET, path, Some(seckill_testkit::ADMIN_TOKEN), None)
            .await?;
        // Refused by the app (`not_found`), or by the router before it (Spin's empty 404).
        assert_eq!(status, 404, "{path}: {body}");
        assert!(
            body.as_str() == Some("") || code(&body) == "not_found",
            "{path}: {body}"
        );
    }
    let (status, body) = app
        .call(
            Method::GET,
            "/admin/events/e1",
            Some(seckill_testkit::ADMIN_TOKEN),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    Ok(())
}
