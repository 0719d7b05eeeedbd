//! Paying through the provider's checkout, with the kit's Stripe sandbox on the provider's
//! side: the pay route opens a Checkout Session for the order's own amount, the provider's
//! signed event pays the order, and timeout release expires an order's open session at the
//! provider before its unit goes back, settling a session the buyer paid first. No order is
//! ever both paid and released.

use std::time::Duration;

use anyhow::{Context, Result};
use reqwest::Method;
use seckill_testkit::stripe::{RESTRICTED_KEY, WebhookFilter};
use seckill_testkit::{
    PAYMENT_WEBHOOK_SECRET, PgServer, RedisServer, StripeSandbox, TestApp, jwt_for,
};
use serde_json::{Value, json};

use crate::pay::start_payment;
use crate::{assert_books, drain_all, job, sell, vars};

/// The app with the sandbox as its provider (the restricted key, the sandbox's API), and the
/// sandbox's events going to the app's webhook.
async fn with_sandbox() -> Result<(RedisServer, PgServer, TestApp, StripeSandbox)> {
    let sandbox = StripeSandbox::start().await?;
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let mut v = vars(&redis, &pg, &[]);
    v.push(("payment_api_url", sandbox.url().to_owned()));
    v.push(("payment_api_key", RESTRICTED_KEY.to_owned()));
    let app = TestApp::start(seckill_testkit::product_manifest(), &v).await?;
    sandbox.add_webhook_endpoint(
        &format!("{}/api/payments/webhook", app.base_url),
        &[PAYMENT_WEBHOOK_SECRET],
        &["*"],
    );
    Ok((redis, pg, app, sandbox))
}

/// The session id of a pay answer's checkout page (`…/c/pay/cs_…`).
fn session_of(payment: &Value) -> Result<String> {
    let url = payment["checkout_url"]
        .as_str()
        .with_context(|| format!("no checkout: {payment}"))?;
    Ok(url.rsplit('/').next().unwrap_or_default().to_owned())
}

/// The order's status in Postgres.
async fn order_status(pg: &PgServer, order: &str) -> Result<String> {
    Ok(pg
        .client()
        .await?
        .query_one("SELECT status FROM orders WHERE order_id = $1", &[&order])
        .await?
        .get(0))
}

/// Waits (bounded) until the order's status is `want`.
async fn until_status(pg: &PgServer, order: &str, want: &str) -> Result<()> {
    for _ in 0..100 {
        if order_status(pg, order).await? == want {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!(
        "order {order} is {}, not {want}",
        order_status(pg, order).await?
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_charges_the_orders_own_amount_and_its_payment_pays_the_order() -> Result<()> {
    let (_redis, pg, app, sandbox) = with_sandbox().await?;
    let accepted = sell(&app, "land", 4, 4, json!({})).await?;
    drain_all(&app).await?;
    let (user, order) = &accepted[0];
    let (status, payment) = start_payment(&app, "land", user, order).await?;
    assert_eq!(status, 200, "{payment}");
    let checkout = payment["checkout_url"].as_str().unwrap_or_default();
    assert!(
        checkout.starts_with(&format!("{}/c/pay/cs_", sandbox.url())),
        "{payment}"
    );
    let id = session_of(&payment)?;
    let session = sandbox.session(&id).context("the session")?;
    let payment_id = payment["payment_id"].as_str().unwrap_or_default();
    assert_eq!(
        (session.amount_total, session.currency.as_str()),
        (1999, "eur")
    );
    assert_eq!(
        session.metadata.get("payment_id").map(String::as_str),
        Some(payment_id)
    );
    assert_eq!(
        session
            .payment_intent_metadata
            .get("payment_id")
            .map(String::as_str),
        Some(payment_id)
    );
    assert_eq!(session.client_reference_id.as_deref(), Some(order.as_str()));
    // Paying again: the same open session, asked of the provider once.
    let (_, again) = start_payment(&app, "land", user, order).await?;
    assert_eq!(again["checkout_url"], payment["checkout_url"]);
    assert_eq!(sandbox.calls_to("POST", "/v1/checkout/sessions").len(), 1);
    let created = &sandbox.calls_to("POST", "/v1/checkout/sessions")[0];
    assert_eq!(
        created.idempotency_key.as_deref(),
        Some(&*format!("session-{payment_id}"))
    );
    // A buyer who edits the page's address pays what the session says, not what they wrote.
    let hosted = reqwest::Client::new()
        .post(format!("{checkout}?amount=1&currency=usd"))
        .form(&[("amount", "1")])
        .send()
        .await?;
    assert!(hosted.status().is_success() || hosted.status().is_redirection());
    let charged = sandbox.payment_intents();
    assert_eq!(
        charged
            .iter()
            .map(|p| (p.amount, p.currency.as_str()))
            .collect::<Vec<_>>(),
        [(1999, "eur")]
    );
    until_status(&pg, order, "paid").await?;
    let (_, polled) = app
        .call(
            Method::GET,
            "/api/events/land/orders/me",
            Some(&jwt_for(user)),
            None,
        )
        .await?;
    assert_eq!(polled["state"], "paid", "{polled}");
    assert_money(&pg, &sandbox).await?;
    assert_books(&app, &pg, "land", 4, &accepted).await
}

/// The storefront names its language: the session opens the provider's page in it (Stripe's
/// `zh` for `zh-CN`); without one the provider follows the browser (`auto`). A language the
/// storefront does not speak is `400 bad_query`, and no payment is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkout_opens_in_the_storefronts_language() -> Result<()> {
    let (_redis, pg, app, sandbox) = with_sandbox().await?;
    let accepted = sell(&app, "land", 3, 3, json!({})).await?;
    drain_all(&app).await?;
    let pay = |i: usize, query: &'static str| {
        let (user, order) = accepted[i].clone();
        let app = &app;
        async move {
            let path = format!("/api/events/land/orders/{order}/pay{query}");
            app.call(Method::POST, &path, Some(&jwt_for(&user)), None)
                .await
        }
    };
    let (status, refused) = pay(0, "?locale=fr").await?;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!("bad_query"))
    );
    let payments: i64 = pg
        .client()
        .await?
        .query_one("SELECT count(*) FROM payments", &[])
        .await?
        .get(0);
    assert_eq!(payments, 0, "a refused locale records nothing");
    for (i, query, locale, pay_word) in [
        (0, "?locale=zh-CN", "zh", "支付"),
        (1, "?locale=en", "en", "Pay"),
        (2, "", "auto", "Pay"),
    ] {
        let (status, payment) = pay(i, query).await?;
        assert_eq!(status, 200, "{payment}");
        let created = sandbox.calls_to("POST", "/v1/checkout/sessions");
        assert_eq!(created[i].params["locale"], locale, "{query}");
        let page = reqwest::get(payment["checkout_url"].as_str().unwrap_or_default())
            .await?
            .text()
            .await?;
        assert!(page.contains(&format!(">{pay_word} ")), "{query}: {page}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_paid_before_the_deadline_whose_webhook_is_held_is_settled_by_release_not_released()
-> Result<()> {
    let (_redis, pg, app, sandbox) = with_sandbox().await?;
    let accepted = sell(&app, "late", 2, 2, json!({ "payment_timeout_s": 2 })).await?;
    drain_all(&app).await?;
    let (user, order) = &accepted[0];
    let (_, payment) = start_payment(&app, "late", user, order).await?;
    let id = session_of(&payment)?;
    sandbox.hold_webhooks(WebhookFilter::All);
    sandbox.pay(&id)?;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        order_status(&pg, order).await?,
        "pending_payment",
        "its event is held"
    );
    let left = app.status("late").await?["stock_left"]
        .as_i64()
        .unwrap_or_default();
    // The run's first call, the events list (which would recover the payment too), is rate
    // limited: the session, expired at the deadline, tells.
    sandbox.rate_limit_next(1);
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["backstop"]["complete"], false, "{report}");
    assert_eq!(report["sessions"]["settled"], 1, "{report}");
    assert_eq!(
        order_status(&pg, order).await?,
        "paid",
        "settled from the provider's record"
    );
    assert_eq!(
        app.status("late").await?["stock_left"].as_i64(),
        Some(left + 1),
        "only the unpaid order's unit went back: {report}"
    );
    // The other buyer never paid: no session, so their order expired and its unit went back.
    assert_eq!(order_status(&pg, &accepted[1].1).await?, "expired");
    // The held event comes at last and finds the payment recorded.
    sandbox.release_webhooks();
    for _ in 0..100 {
        if sandbox.webhook_stats().pending == 0 && sandbox.webhook_stats().held == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let db = pg.client().await?;
    let outcomes: Vec<String> = db
        .query(
            "SELECT outcome FROM provider_events WHERE payment_id = $1 ORDER BY received_ms",
            &[&payment["payment_id"].as_str().unwrap_or_default()],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        outcomes.first().map(String::as_str),
        Some("paid"),
        "{outcomes:?}"
    );
    assert!(
        outcomes[1..]
            .iter()
            .all(|o| o == "already_recorded" || o == "ignored"),
        "{outcomes:?}"
    );
    assert_eq!(order_status(&pg, order).await?, "paid");
    assert_money(&pg, &sandbox).await?;
    assert_books(&app, &pg, "late", 2, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpaid_session_is_expired_at_the_provider_before_its_unit_goes_back() -> Result<()> {
    let (_redis, pg, app, sandbox) = with_sandbox().await?;
    let accepted = sell(&app, "late", 2, 2, json!({ "payment_timeout_s": 2 })).await?;
    drain_all(&app).await?;
    let (user, order) = &accepted[0];
    let (_, payment) = start_payment(&app, "late", user, order).await?;
    let id = session_of(&payment)?;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let left = app.status("late").await?["stock_left"]
        .as_i64()
        .unwrap_or_default();
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(sandbox.session(&id).context("session")?.status, "expired");
    assert_eq!(order_status(&pg, order).await?, "expired");
    assert_eq!(
        app.status("late").await?["stock_left"].as_i64(),
        Some(left + 2),
        "both units back on sale: {report}"
    );
    // Once expired at the provider, the session cannot be paid.
    assert!(sandbox.pay(&id).is_err());
    assert_money(&pg, &sandbox).await?;
    assert_books(&app, &pg, "late", 2, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_provider_reaches_the_buyer_as_503_with_retry_after() -> Result<()> {
    let (_redis, pg, app, sandbox) = with_sandbox().await?;
    let accepted = sell(&app, "land", 2, 2, json!({})).await?;
    drain_all(&app).await?;
    let (user, order) = &accepted[0];
    sandbox.rate_limit_next(1);
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/api/events/land/orders/{order}/pay",
            app.base_url
        ))
        .bearer_auth(jwt_for(user))
        .send()
        .await?;
    assert_eq!(resp.status(), 503);
    assert!(
        resp.headers().get("retry-after").is_some(),
        "{:?}",
        resp.headers()
    );
    let body: Value = resp.json().await?;
    assert_eq!(body["error"]["code"], "provider_busy", "{body}");
    // The storefront tries again and gets its session.
    let (status, payment) = start_payment(&app, "land", user, order).await?;
    assert_eq!(status, 200, "{payment}");
    session_of(&payment)?;
    assert_money(&pg, &sandbox).await?;
    assert_books(&app, &pg, "land", 2, &accepted).await
}

/// The provider payments naming `order`'s payment, oldest first: `[status, refund reason]`.
async fn provider_payments(pg: &PgServer, order: &str) -> Result<Vec<(String, Option<String>)>> {
    Ok(pg
        .client()
        .await?
        .query(
            "SELECT pp.status, pp.refund_reason FROM provider_payments pp
                 JOIN payments p USING (payment_id) WHERE p.order_id = $1
                 ORDER BY pp.received_ms, pp.provider_ref",
            &[&order],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// Waits (bounded) until `order`'s provider payments are `want` (in any order).
async fn until_provider_payments(
    pg: &PgServer,
    order: &str,
    want: &[(&str, Option<&str>)],
) -> Result<()> {
    let mut want: Vec<(String, Option<String>)> = want
        .iter()
        .map(|(s, r)| (s.to_string(), r.map(str::to_owned)))
        .collect();
    want.sort();
    for _ in 0..100 {
        let mut got = provider_payments(pg, order).await?;
        got.sort();
        if got == want {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{:?}, not {want:?}", provider_payments(pg, order).await?)
}

/// The money's books against the provider's: every provider payment that names one of ours
/// either pays exactly one order (the one paid provider payment of a paid order) or is owed,
/// or was paid, a refund of at most what it took, never refunded twice; a paid order's unit
/// was never released.
async fn assert_money(pg: &PgServer, sandbox: &StripeSandbox) -> Result<()> {
    let db = pg.client().await?;
    let refunds = sandbox.refunds();
    for pi in sandbox.payment_intents() {
        let Some(payment) = pi.metadata.get("payment_id") else {
            continue;
        };
        let row = db
            .query_opt(
                "SELECT pp.status, o.status FROM provider_payments pp
                     JOIN payments p USING (payment_id) JOIN orders o USING (order_id)
                     WHERE pp.provider_ref = $1 AND pp.payment_id = $2",
                &[&pi.id, payment],
            )
            .await?
            .with_context(|| format!("{} is recorded", pi.id))?;
        let (recorded, order): (String, String) = (row.get(0), row.get(1));
        let made = refunds
            .iter()
            .filter(|r| r.payment_intent == pi.id && r.status != "failed")
            .count();
        match recorded.as_str() {
            "paid" => {
                assert_eq!(order, "paid", "{} paid its order", pi.id);
                assert_eq!(made, 0, "{} paid an order and is not refunded", pi.id);
            }
            _ => {
                assert!(made <= 1, "{} refunded once at most: {made}", pi.id);
                assert!(pi.amount_refunded <= pi.amount, "{}", pi.id);
                if recorded == "refunded" {
                    assert_eq!(
                        (made, pi.amount_refunded),
                        (1, pi.amount),
                        "{} refunded whole",
                        pi.id
                    );
                }
            }
        }
    }
    let wrong: i64 = db
        .query_one(
            "SELECT count(*) FROM orders o WHERE status = 'paid' AND (released_in_redis
                 OR (SELECT count(*) FROM provider_payments pp JOIN payments p USING (payment_id)
                     WHERE p.order_id = o.order_id AND pp.status = 'paid') <> 1)",
            &[],
        )
        .await?
        .get(0);
    assert_eq!(
        wrong, 0,
        "each paid order has one paid provider payment and kept its unit"
    );
    Ok(())
}

/// `user`'s poll of their order at `event`.
async fn poll(app: &TestApp, event: &str, user: &str) -> Result<Value> {
    let path = app.sale_path(event, "orders/me");
    let (status, polled) = app
        .call(Method::GET, &path, Some(&jwt_for(user)), None)
        .await?;
    anyhow::ensure!(status == 200, "poll: {status} {polled}");
    Ok(polled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_that_paid_nothing_are_refunded_once_by_the_job_and_never_block_the_right_one()
-> Result<()> {
    let (_redis, pg, app, sandbox) = with_sandbox().await?;
    let accepted = sell(&app, "land", 2, 2, json!({})).await?;
    drain_all(&app).await?;
    let (user, order) = &accepted[0];
    let (_, payment) = start_payment(&app, "land", user, order).await?;
    let id = session_of(&payment)?;
    // Another integration charges one cent naming our payment: it pays nothing and owes a
    // refund, and the buyer's own payment still pays the order.
    let cent = sandbox.charge_again(&id, Some(1))?;
    until_provider_payments(&pg, order, &[("refund_due", Some("amount_mismatch"))]).await?;
    let right = sandbox.pay(&id)?;
    until_status(&pg, order, "paid").await?;
    // And a second full charge of the paid order: a duplicate.
    let second = sandbox.charge_again(&id, None)?;
    until_provider_payments(
        &pg,
        order,
        &[
            ("refund_due", Some("amount_mismatch")),
            ("paid", None),
            ("refund_due", Some("duplicate")),
        ],
    )
    .await?;
    // The provider makes the first refund and then fails it (a closed card): it is asked
    // again, under a key of its own, after its back-off.
    sandbox.fail_next_refunds(1, "expired_or_canceled_card");
    let mut retried = false;
    for _ in 0..40 {
        let (status, report) = job(&app, "timeout-release").await?;
        assert_eq!(status, 200, "{report}");
        if report["refunds"]["retrying"].as_u64() > Some(0) && !retried {
            retried = true;
            // Operators see why, while it waits for its next attempt.
            let (_, listed) = app
                .admin(
                    Method::GET,
                    "/admin/events/land/payments?status=refund_due",
                    None,
                )
                .await?;
            let errors: Vec<&str> = listed["payments"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["refund_error"].as_str())
                .collect();
            assert_eq!(errors, ["expired_or_canceled_card"], "{listed}");
            // And the buyer sees money on its way back.
            let polled = poll(&app, "land", user).await?;
            assert_eq!(polled["refund"]["state"], "pending", "{polled}");
        }
        let done = provider_payments(&pg, order).await?;
        if done.iter().filter(|(s, _)| s == "refunded").count() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(retried, "the failed refund was retried");
    until_provider_payments(
        &pg,
        order,
        &[
            ("refunded", Some("amount_mismatch")),
            ("paid", None),
            ("refunded", Some("duplicate")),
        ],
    )
    .await?;
    // Exactly one refund each, of what each took; the buyer's own payment untouched.
    let mut refunds: Vec<(String, i64, &str)> = sandbox
        .refunds()
        .into_iter()
        .filter(|r| r.status != "failed")
        .map(|r| (r.payment_intent, r.amount, r.status))
        .collect();
    assert_eq!(
        sandbox
            .refunds()
            .iter()
            .filter(|r| r.status == "failed")
            .count(),
        1
    );
    refunds.sort();
    let mut want = vec![(cent, 1, "succeeded"), (second, 1999, "succeeded")];
    want.sort();
    assert_eq!(refunds, want);
    assert!(sandbox.refunds().iter().all(|r| r.payment_intent != right));
    let (status, listed) = app
        .admin(
            Method::GET,
            "/admin/events/land/payments?status=refunded",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        listed["payments"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
    assert_eq!(order_status(&pg, order).await?, "paid");
    // The buyer's poll (from Redis) says both were refunded; the other buyer's says nothing.
    let polled = poll(&app, "land", user).await?;
    assert_eq!(
        (&polled["state"], &polled["refund"]),
        (&json!("paid"), &json!({"state": "refunded", "payments": 2})),
        "{polled}"
    );
    let other = poll(&app, "land", &accepted[1].0).await?;
    assert_eq!(other.get("refund"), None, "{other}");
    assert_money(&pg, &sandbox).await?;
    assert_books(&app, &pg, "land", 2, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_whose_webhooks_were_lost_are_recovered_from_the_events_list_across_pages()
-> Result<()> {
    let (_redis, pg, app, sandbox) = with_sandbox().await?;
    // More payments than a page of the events list holds (100).
    let n = 105;
    let accepted = sell(&app, "lost", n as u64, n, json!({})).await?;
    drain_all(&app).await?;
    for (user, order) in &accepted {
        let (status, payment) = start_payment(&app, "lost", user, order).await?;
        assert_eq!(status, 200, "{payment}");
        sandbox.pay_without_webhooks(&session_of(&payment)?)?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (_, order) in &accepted {
        assert_eq!(
            order_status(&pg, order).await?,
            "pending_payment",
            "no webhook came"
        );
    }
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["backstop"]["paid"], n, "{report}");
    assert!(report["backstop"]["pages"].as_u64() >= Some(2), "{report}");
    for (_, order) in &accepted {
        assert_eq!(order_status(&pg, order).await?, "paid");
    }
    // The next run reads the overlap again and changes nothing.
    let (_, again) = job(&app, "timeout-release").await?;
    assert_eq!(again["backstop"]["recovered"], 0, "{again}");
    assert_money(&pg, &sandbox).await?;
    assert_books(&app, &pg, "lost", n as i64, &accepted).await
}
