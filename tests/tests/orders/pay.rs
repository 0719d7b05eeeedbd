//! Paying through the provider: the buyer's pay route starts a payment and never marks
//! anything paid; only the provider's signed webhook does, once per provider event, for the
//! amount and currency asked, before the deadline. Forged, replayed, stale and wrong-amount
//! webhooks change nothing an order holds; every provider payment naming one of ours is
//! recorded once, and one that pays nothing (after the deadline, another amount, a second one)
//! owes a refund without blocking the order's correct payment. Every verified event is taken.

use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{TestApp, jwt_for, provider};
use serde_json::{Value, json};

use crate::{assert_books, drain_all, job, sell, start};

/// A sale of `land`, 10 units to 10 buyers, drained: every order confirmed in Postgres.
async fn drained_sale(app: &TestApp) -> Result<Vec<(String, String)>> {
    let accepted = sell(app, "land", 10, 10, json!({})).await?;
    assert_eq!(accepted.len(), 10);
    drain_all(app).await?;
    Ok(accepted)
}

/// The pay route's answer to `user` for `order` of `land`, which must be 200.
async fn payment_answer(app: &TestApp, user: &str, order: &str) -> Result<Value> {
    let (status, payment) = start_payment(app, "land", user, order).await?;
    anyhow::ensure!(status == 200, "pay: {status} {payment}");
    Ok(payment)
}

/// `user` starts paying `order` of `event`: the pay route's answer.
pub(crate) async fn start_payment(
    app: &TestApp,
    event: &str,
    user: &str,
    order: &str,
) -> Result<(u16, Value)> {
    app.call(
        Method::POST,
        &format!("/api/events/{event}/orders/{order}/pay"),
        Some(&jwt_for(user)),
        None,
    )
    .await
}

/// What `user`'s poll of `land` says.
async fn poll(app: &TestApp, user: &str) -> Result<Value> {
    let (_, polled) = app
        .call(
            Method::GET,
            "/api/events/land/orders/me",
            Some(&jwt_for(user)),
            None,
        )
        .await?;
    Ok(polled)
}

/// The order's status in Postgres, its payment's `[status, provider ref]`, and the provider
/// payments naming it, oldest first: `[status, refund reason]` each.
async fn recorded(pg: &seckill_testkit::PgServer, order: &str) -> Result<(String, Value, Value)> {
    let db = pg.client().await?;
    let status: String = db
        .query_one("SELECT status FROM orders WHERE order_id = $1", &[&order])
        .await?
        .get(0);
    let payment = db
        .query_opt(
            "SELECT status, provider_ref FROM payments WHERE order_id = $1",
            &[&order],
        )
        .await?
        .map_or(Value::Null, |r| {
            json!([r.get::<_, String>(0), r.get::<_, Option<String>>(1)])
        });
    let taken: Vec<Value> = db
        .query(
            "SELECT pp.status, pp.refund_reason FROM provider_payments pp
                 JOIN payments p ON p.payment_id = pp.payment_id
                 WHERE p.order_id = $1 ORDER BY pp.received_ms, pp.provider_ref",
            &[&order],
        )
        .await?
        .iter()
        .map(|r| json!([r.get::<_, String>(0), r.get::<_, Option<String>>(1)]))
        .collect();
    Ok((status, payment, Value::Array(taken)))
}

/// The pay route only starts a payment: asked twice, the same pending payment for the
/// event's price, and the order stays unpaid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pay_route_starts_a_payment_and_never_marks_the_order_paid() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let (user, order) = &accepted[0];
    let (status, first) = start_payment(&app, "land", user, order).await?;
    assert_eq!(
        (status, &first["status"]),
        (200, &json!("pending")),
        "{first}"
    );
    assert_eq!(
        (&first["amount"], &first["currency"]),
        (&json!(1999), &json!("eur"))
    );
    let (_, again) = start_payment(&app, "land", user, order).await?;
    assert_eq!(
        again["payment_id"], first["payment_id"],
        "one payment per order"
    );
    assert_eq!(poll(&app, user).await?["state"], "confirmed");
    assert_eq!(recorded(&pg, order).await?.0, "pending_payment");
    assert_books(&app, &pg, "land", 10, &accepted).await
}

/// Hostile webhooks: a forged signature, a tampered body, a stale timestamp, no signature,
/// a secret the app does not hold: 400 `bad_signature`, nothing changes. A genuine event for
/// another amount or currency owes a refund and leaves the order unpaid (the right amount then
/// pays it: the mismatch blocks nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_or_stale_webhooks_change_nothing_and_a_wrong_amount_pays_no_order() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let provider = app.provider();
    let (user, order) = &accepted[0];
    let (_, payment) = start_payment(&app, "land", user, order).await?;
    let payment_id = payment["payment_id"].as_str().unwrap_or_default();
    let (_, body) = provider.succeeded_event(payment_id, 1999, "eur");
    let now = provider::unix_s();
    let forged = provider::signature(&["whsec_mallory"], now, &body);
    let tampered = body.replace("1999", "1");
    let signed = provider::signature(&[seckill_testkit::PAYMENT_WEBHOOK_SECRET], now, &body);
    for (header, body) in [
        (forged.as_str(), body.as_str()),
        (signed.as_str(), tampered.as_str()),
        ("", body.as_str()),
        ("t=1,v1=00", body.as_str()),
    ] {
        let (status, answer) = provider.post(body, header).await?;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (400, Some("bad_signature")),
            "{header}"
        );
    }
    let (status, answer) = provider.attempt(&body, now - 301).await?;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("bad_signature"))
    );
    let (_, payment, taken) = recorded(&pg, order).await?;
    assert_eq!(
        (&payment[0], &taken),
        (&json!("pending"), &json!([])),
        "nothing changed"
    );

    // Genuine events for another amount, or another currency: refunds owed, orders unpaid,
    // and the payments still open: the right amount then pays the order.
    for ((user, order), (amount, currency)) in
        accepted[1..3].iter().zip([(1, "eur"), (1999, "usd")])
    {
        let (_, payment) = start_payment(&app, "land", user, order).await?;
        let id = payment["payment_id"].as_str().unwrap_or_default();
        let (_, wrong) = provider.succeeded_event(id, amount, currency);
        let delivered = provider.deliver(&wrong).await?;
        assert_eq!(delivered.body["outcome"], "refund_due_amount");
        let (status, payment, taken) = recorded(&pg, order).await?;
        assert_eq!(
            (status.as_str(), &payment[0], &taken),
            (
                "pending_payment",
                &json!("pending"),
                &json!([["refund_due", "amount_mismatch"]])
            )
        );
        let delivered = provider
            .pay(&payment_answer(&app, user, order).await?)
            .await?;
        assert_eq!(
            delivered.body["outcome"], "paid",
            "the mismatch blocks nothing"
        );
        let (status, _, taken) = recorded(&pg, order).await?;
        assert_eq!(
            (status.as_str(), &taken),
            (
                "paid",
                &json!([["refund_due", "amount_mismatch"], ["paid", null]])
            )
        );
    }

    let (status, _, _) = recorded(&pg, order).await?;
    assert_eq!(status, "pending_payment", "the first order is still unpaid");
    assert_books(&app, &pg, "land", 10, &accepted).await
}

/// During a rotation the provider signs each event with the old and the new secret (two `v1`
/// signatures); the app, holding only the new one, verifies it and pays the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_signed_with_two_secrets_in_rotation_pays_the_order() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let (user, order) = &accepted[0];
    let (_, payment) = start_payment(&app, "land", user, order).await?;
    let payment_id = payment["payment_id"].as_str().unwrap_or_default();
    let rotating = app
        .provider()
        .signing_with(&["whsec_retired", seckill_testkit::PAYMENT_WEBHOOK_SECRET]);
    let (_, body) = rotating.succeeded_event(payment_id, 1999, "eur");
    let delivered = rotating.deliver(&body).await?;
    assert_eq!(delivered.body["outcome"], "paid");
    assert_eq!(recorded(&pg, order).await?.0, "paid");
    assert_books(&app, &pg, "land", 10, &accepted).await
}

/// A confirmation that arrives after the deadline, once timeout release has put the unit back
/// on sale: the order stays expired, the unit stays for sale, the payment owes a refund.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_after_the_deadline_owes_a_refund_and_never_resurrects_the_unit()
-> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = sell(&app, "late", 2, 2, json!({ "payment_timeout_s": 2 })).await?;
    drain_all(&app).await?;
    let (user, order) = &accepted[0];
    let (status, payment) = start_payment(&app, "late", user, order).await?;
    assert_eq!(status, 200, "{payment}");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    job(&app, "timeout-release").await?;
    let left = app.status("late").await?["stock_left"].as_i64();
    let delivered = app.provider().pay(&payment).await?;
    assert_eq!(delivered.body["outcome"], "refund_due_late");
    let (status, payment, taken) = recorded(&pg, order).await?;
    assert_eq!(
        (status.as_str(), &payment[0], &taken),
        (
            "expired",
            &json!("pending"),
            &json!([["refund_due", "late"]])
        )
    );
    assert_eq!(
        app.status("late").await?["stock_left"].as_i64(),
        left,
        "the unit stays for sale"
    );
    let (status, body) = start_payment(&app, "late", user, order).await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("order_expired"))
    );
    // The operators see it, to refund at the provider.
    let (status, listed) = app
        .admin(
            Method::GET,
            "/admin/events/late/payments?status=refund_due",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{listed}");
    let owed = listed["payments"].as_array().cloned().unwrap_or_default();
    assert_eq!(owed.len(), 1, "{listed}");
    assert_eq!(
        (
            &owed[0]["order_id"],
            &owed[0]["refund_reason"],
            &owed[0]["amount"]
        ),
        (&json!(order), &json!("late"), &json!(1999))
    );
    assert!(
        owed[0]["provider_ref"]
            .as_str()
            .is_some_and(|r| r.starts_with("pi_"))
    );
    let (status, body) = app
        .admin(Method::GET, "/admin/events/late/payments?status=paid", None)
        .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_query"))
    );
    assert_books(&app, &pg, "late", 2, &accepted).await
}

/// Someone else's order is not found for a stranger, before and after its buyer pays it, and
/// the stranger's attempts change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paying_someone_elses_order_is_404_order_not_found() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let (user, order) = &accepted[0];
    let (status, body) = start_payment(&app, "land", "stranger", order).await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("order_not_found"))
    );
    let polled = poll(&app, user).await?;
    assert_eq!(polled["state"], "confirmed", "still unpaid: {polled}");
    assert_eq!(app.pay("land", user, order).await?.1["outcome"], "paid");
    let (status, body) = start_payment(&app, "land", "stranger", order).await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("order_not_found"))
    );
    assert_books(&app, &pg, "land", 10, &accepted).await
}

/// Every verified event is taken (`200`): a kind we do not act on, a payment naming nothing of
/// ours (another integration on the account), a body we cannot read, an event of the other
/// mode (a test card on a live shop: `ignored_livemode`, counted for the operators' alert),
/// and one as large as the provider sends (256 KiB, over the 16 KiB a buyer may send). A
/// second payment for a paid order owes a refund; the same provider payment brought by two
/// events is recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verified_event_is_taken_and_every_provider_payment_recorded_once() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let provider = app.provider();
    let (user, order) = &accepted[0];
    let payment = payment_answer(&app, user, order).await?;
    let id = payment["payment_id"].as_str().unwrap_or_default();
    let taken = |outcome: &str, body: &str| {
        let (provider, outcome, body) = (&provider, outcome.to_owned(), body.to_owned());
        async move {
            let delivered = provider.deliver(&body).await?;
            anyhow::ensure!(
                (delivered.status, delivered.attempts) == (200, 1)
                    && delivered.body["outcome"] == outcome.as_str(),
                "{outcome}: {} {}",
                delivered.status,
                delivered.body
            );
            Ok(())
        }
    };
    let refund = json!({ "id": "evt_refund_1", "object": "event", "type": "charge.refunded",
        "livemode": false, "data": { "object": { "id": "ch_1", "object": "charge" } } });
    taken("ignored", &refund.to_string()).await?;
    let (_, theirs) = provider.succeeded_event(id, 1999, "eur");
    let theirs = theirs.replace(&format!(r#""payment_id":"{id}""#), r#""order":"42""#);
    taken("ignored", &theirs).await?;
    taken(
        "ignored",
        r#"{"id":"evt_odd","type":"payment_intent.succeeded","data":{}}"#,
    )
    .await?;
    let (_, live) = provider.succeeded_event(id, 1999, "eur");
    let live = live.replace(r#""livemode":false"#, r#""livemode":true"#);
    taken("ignored_livemode", &live).await?;
    assert_eq!(
        recorded(&pg, order).await?.0,
        "pending_payment",
        "nothing paid"
    );
    let db = pg.client().await?;
    let counted: i64 = db
        .query_one(
            "SELECT count(*) FROM provider_events WHERE outcome = 'ignored_livemode'",
            &[],
        )
        .await?
        .get(0);
    assert_eq!(counted, 1);
    let scrape = app
        .http
        .get(format!("{}/admin/metrics", app.base_url))
        .bearer_auth(seckill_testkit::ADMIN_TOKEN)
        .send()
        .await?
        .text()
        .await?;
    assert!(
        scrape.contains(r#"seckill_provider_events_total{outcome="ignored_livemode"} 1"#),
        "the operators' alert counts it: {scrape}"
    );

    // The largest event the provider may send is taken whole.
    let (_, large) = provider.succeeded_event(id, 1999, "eur");
    let padding = "x".repeat(seckill_spin_edge::http::PROVIDER_EVENT_MAX_BYTES - large.len() - 64);
    let large = large.replace(
        r#""status":"succeeded""#,
        &format!(r#""status":"succeeded","description":"{padding}""#),
    );
    assert!(large.len() > 200 * 1024, "{}", large.len());
    taken("paid", &large).await?;

    // The same payment intent in a second event: recorded once. A second payment: refunded.
    let intent: Value = serde_json::from_str(&large)?;
    let mut again = intent.clone();
    again["id"] = json!("evt_same_intent_again");
    taken("already_recorded", &again.to_string()).await?;
    let (_, second) = provider.succeeded_event(id, 1999, "eur");
    taken("refund_due_duplicate", &second).await?;
    let (status, payment, taken) = recorded(&pg, order).await?;
    assert_eq!(
        (status.as_str(), &payment[0], &taken),
        (
            "paid",
            &json!("succeeded"),
            &json!([["paid", null], ["refund_due", "duplicate"]])
        )
    );
    assert_books(&app, &pg, "land", 10, &accepted).await
}

/// The webhook's body limit is the provider's, in the host (the manifest's
/// `request_body_limits`) as in the function.
#[test]
fn the_hosts_webhook_body_limit_is_the_functions() -> Result<()> {
    let manifest: toml::Table =
        std::fs::read_to_string(seckill_testkit::repo_root().join("spin.toml"))?.parse()?;
    let limit =
        &manifest["application"]["tool"]["seckill"]["request_body_limits"]["/api/payments/webhook"];
    assert_eq!(
        limit.as_integer(),
        Some(seckill_spin_edge::http::PROVIDER_EVENT_MAX_BYTES as i64)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paying_an_order_id_that_is_not_one_is_400_bad_order_id() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = drained_sale(&app).await?;
    let (user, _) = &accepted[0];
    let (status, body) = start_payment(&app, "land", user, "not-hex").await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_order_id"))
    );
    assert_books(&app, &pg, "land", 10, &accepted).await
}

/// Run again over the REST transport (`scripts/test.sh`): what how Redis is reached can
/// change, about one node (its commands, its being unreachable, the payment webhook's path).
mod over_rest {
    use super::*;

    /// Paid through the provider: the webhook pays the order, poll shows it, the pay route
    /// answers the succeeded payment, and a redelivery of the same event changes nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_signed_confirmation_pays_once_and_a_redelivery_is_a_duplicate() -> Result<()> {
        let (_redis, pg, app) = start(&[]).await?;
        let accepted = drained_sale(&app).await?;
        let (user, order) = &accepted[0];
        let (_, payment) = start_payment(&app, "land", user, order).await?;
        let provider = app.provider();
        let (_, body) = provider.succeeded_event(
            payment["payment_id"].as_str().unwrap_or_default(),
            1999,
            "eur",
        );
        let first = provider.deliver(&body).await?;
        assert_eq!(
            (first.status, &first.body["outcome"]),
            (200, &json!("paid"))
        );
        let again = provider.deliver(&body).await?;
        assert_eq!(
            (again.status, &again.body["outcome"]),
            (200, &json!("duplicate"))
        );
        assert_eq!(poll(&app, user).await?["state"], "paid");
        let (_, settled) = start_payment(&app, "land", user, order).await?;
        assert_eq!(settled["status"], "succeeded");
        let (status, payment, taken) = recorded(&pg, order).await?;
        assert_eq!(
            (status.as_str(), &taken),
            ("paid", &json!([["paid", null]]))
        );
        assert_eq!(payment[0], "succeeded");
        assert!(
            payment[1].as_str().is_some_and(|r| r.starts_with("pi_")),
            "{payment}"
        );
        assert_eq!(app.status("land").await?["paid"], 1);
        assert_books(&app, &pg, "land", 10, &accepted).await
    }
}

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn payment_racing_timeout_release_never_both() -> Result<()> {
        let (redis, pg, app) = start(&[]).await?;
        let (mut all, mut paid) = (Vec::new(), 0);
        for round in 0..3 {
            let event = format!("race{round}");
            // 3 s to pay: the sale and the drain (on a busy machine) must fit before the deadlines.
            let accepted = sell(&app, &event, 40, 40, json!({ "payment_timeout_s": 3 })).await?;
            drain_all(&app).await?;
            // Each payment is sent right at its order's deadline, half 50 ms before and half 50 ms
            // after, while timeout release runs every 20 ms: both outcomes race at every deadline.
            let db = pg.client().await?;
            let mut deadlines = std::collections::HashMap::new();
            for row in db
                .query(
                    "SELECT order_id, pay_deadline_ms FROM orders WHERE event_id = $1",
                    &[&event],
                )
                .await?
            {
                deadlines.insert(row.get::<_, String>(0), row.get::<_, i64>(1));
            }
            let epoch_ms = || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64)
            };
            // Every buyer starts paying at once; the provider's confirmations arrive right at the
            // orders' deadlines.
            let mut payments = Vec::new();
            for (user, order) in &accepted {
                let (status, payment) = start_payment(&app, &event, user, order).await?;
                assert_eq!(status, 200, "{payment}");
                payments.push(payment);
            }
            let provider = app.provider();
            let pays = futures::future::join_all(accepted.iter().zip(&payments).enumerate().map(
                |(i, ((_, order), payment))| {
                    let provider = &provider;
                    let at = deadlines[order] + if i % 2 == 0 { -50 } else { 50 };
                    async move {
                        tokio::time::sleep(Duration::from_millis((at - epoch_ms()).max(0) as u64))
                            .await;
                        provider.pay(payment).await.map(|d| (d.status, d.body))
                    }
                },
            ));
            let last = deadlines.values().max().copied().unwrap_or(0) + 300;
            let releases = async {
                while epoch_ms() < last {
                    let _ = job(&app, "timeout-release").await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            let (pays, ()) = tokio::join!(pays, releases);
            tokio::time::sleep(Duration::from_millis(1_100)).await;
            job(&app, "timeout-release").await?;
            let mut paid_here = 0;
            for ((user, order), pay) in accepted.iter().zip(&pays) {
                let (status, body) = pay.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
                let row = db
                    .query_one("SELECT status FROM orders WHERE order_id = $1", &[order])
                    .await?;
                let state: String = row.get(0);
                assert_eq!(*status, 200, "{user}: {body}");
                match body["outcome"].as_str() {
                    Some("paid") => {
                        assert_eq!(state, "paid", "{user}: paid answer, {state} in Postgres");
                        paid_here += 1;
                    }
                    Some("refund_due_late") => assert_eq!(state, "expired", "{user}"),
                    other => panic!("{user}: unexpected {other:?} {body}"),
                }
            }
            paid += paid_here;
            let status = app.status(&event).await?;
            let shards: i64 = status["stock_left"].as_i64().unwrap_or(-1);
            let expired: i64 = db
                .query_one(
                    "SELECT count(*) FROM orders WHERE event_id = $1 AND status = 'expired'",
                    &[&event],
                )
                .await?
                .get(0);
            assert_eq!(
                shards, expired,
                "exactly the expired units are back in Redis"
            );
            assert_eq!(
                (status["paid"].as_i64(), status["expired"].as_i64()),
                (Some(paid_here), Some(expired)),
                "the console's counts agree with Postgres: {status}"
            );
            assert_books(&app, &pg, &event, 40, &accepted).await?;
            all.push(expired);
        }
        let _ = redis;
        eprintln!("expired per round: {all:?}, paid in all: {paid}");
        assert!(
            paid > 0 && all.iter().sum::<i64>() > 0,
            "the race had both outcomes: {paid} paid, {all:?} expired"
        );
        Ok(())
    }
}
