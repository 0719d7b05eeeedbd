//! The operators' switches: pausing and resuming a sale, and deny lists by user and by address
//! range, the client's address read through the trusted proxies (`trusted_proxies`).

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars, jwt_for};
use serde_json::json;

use crate::{assert_sold_exactly, code, start};

/// With `deny` applied to a 5-unit event, `user`'s precheck is 403 denied and nothing sells.
async fn denied_is_403(deny: serde_json::Value, user: &str) -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("switch", json!({ "stock": 5 })).await?;
    let (status, body) = app
        .admin(Method::POST, "/admin/events/switch/deny", Some(&deny))
        .await?;
    assert_eq!(status, 200, "{body}");
    let (status, resp) = app
        .admit_and_precheck("switch", user)
        .await?
        .expect_err("denied");
    assert_eq!((status, code(&resp)), (403, "denied"));
    assert_sold_exactly(&app, "switch", 5, 0).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_address_is_403_denied() -> Result<()> {
    denied_is_403(json!({ "addrs": ["127.0.0.1"] }), "ivan").await
}

/// The app behind a proxy the test plays: the host's peer, 127.0.0.1, is trusted.
pub(crate) async fn start_behind_a_proxy() -> Result<(RedisServer, PgServer, TestApp)> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let mut vars = app_vars(&redis, &pg);
    vars.push(("trusted_proxies", "127.0.0.1/32".into()));
    let app = TestApp::start(seckill_testkit::product_manifest(), &vars).await?;
    Ok((redis, pg, app))
}

/// `user` admitted, then precheck sent with `X-Forwarded-For: forwarded`: its status and code.
async fn precheck_forwarded(
    app: &TestApp,
    event: &str,
    user: &str,
    forwarded: &str,
) -> Result<(u16, String)> {
    let jwt = jwt_for(user);
    let (status, body) = app
        .call(
            Method::POST,
            &app.sale_path(event, "admission"),
            Some(&jwt),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{user}: admission {body}");
    let admission = json!({ "admission_token": body["admission_token"] });
    let (status, body) = app
        .call_with_headers(
            Method::POST,
            &app.sale_path(event, "precheck"),
            Some(&jwt),
            Some(&admission),
            &[("X-Forwarded-For", forwarded)],
        )
        .await?;
    let refusal = if status == 200 { "" } else { code(&body) };
    Ok((status, refusal.to_owned()))
}

async fn deny_addrs(app: &TestApp, event: &str, addrs: &[&str]) -> Result<()> {
    let (status, body) = app
        .admin(
            Method::POST,
            &format!("/admin/events/{event}/deny"),
            Some(&json!({ "addrs": addrs })),
        )
        .await?;
    assert_eq!(status, 200, "deny {addrs:?}: {body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_range_refuses_the_clients_in_it_behind_a_trusted_proxy() -> Result<()> {
    let (_redis, _pg, app) = start_behind_a_proxy().await?;
    app.open_event("ranges", json!({ "stock": 50 })).await?;
    deny_addrs(&app, "ranges", &["203.0.113.0/24"]).await?;
    let denied = (403, "denied".to_owned());
    let allowed = (200, String::new());
    for (user, forwarded, want) in [
        ("in-range", "203.0.113.9", &denied),
        ("in-range-mapped", "::ffff:203.0.113.200", &denied),
        ("next-range", "203.0.114.9", &allowed),
        // The proxy appends the address it was reached from: entries left of it are the
        // client's own and prove nothing, either way.
        ("hides-behind", "198.51.100.1, 203.0.113.9", &denied),
        ("claims-inside", "203.0.113.9, 198.51.100.1", &allowed),
        // The proxy's own address is trusted, so the walk goes on to the client's.
        ("two-hops", "203.0.113.9, 127.0.0.1", &denied),
    ] {
        assert_eq!(
            &precheck_forwarded(&app, "ranges", user, forwarded).await?,
            want,
            "{user}: X-Forwarded-For {forwarded}"
        );
    }
    // A bad range is refused and changes nothing.
    let (status, body) = app
        .admin(
            Method::POST,
            "/admin/events/ranges/deny",
            Some(&json!({ "addrs": ["198.51.100.0/24", "198.51.100.0/33"] })),
        )
        .await?;
    assert_eq!((status, code(&body)), (400, "invalid_deny_list"));
    assert_eq!(
        precheck_forwarded(&app, "ranges", "after-bad", "198.51.100.1").await?,
        allowed,
        "the valid range sent with the bad one was not added"
    );
    assert_sold_exactly(&app, "ranges", 50, 0).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_peers_x_forwarded_for_is_ignored() -> Result<()> {
    let (_redis, _pg, app) = start().await?;
    app.open_event("spoof", json!({ "stock": 50 })).await?;
    deny_addrs(&app, "spoof", &["203.0.113.0/24"]).await?;
    assert_eq!(
        precheck_forwarded(&app, "spoof", "frames-a-range", "203.0.113.9").await?,
        (200, String::new()),
        "no proxy is trusted: the header names nobody"
    );
    deny_addrs(&app, "spoof", &["127.0.0.0/8"]).await?;
    assert_eq!(
        precheck_forwarded(&app, "spoof", "claims-elsewhere", "198.51.100.1").await?,
        (403, "denied".to_owned()),
        "the peer, 127.0.0.1, is the client whatever the header says"
    );
    assert_sold_exactly(&app, "spoof", 50, 0).await
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paused_sale_is_503_sale_paused_until_resumed() -> Result<()> {
        let (_redis, _pg, app) = start().await?;
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
        assert_sold_exactly(&app, "switch", 5, 0).await
    }
}

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_denied_user_is_403_denied() -> Result<()> {
        denied_is_403(json!({ "users": ["hank"] }), "hank").await
    }
}
