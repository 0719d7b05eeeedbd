//! The order pipeline without WASM: drain, pay, timeout release and reconcile straight from the
//! domain (`seckill-domain`) over the native adapters (`seckill-native`), against a real Redis
//! and a real PostgreSQL. Fast checks of the hardest logic; the end-to-end versions through the
//! host and the `.wasm` files are in `orders/`.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use seckill_domain::event::{EventConfig, EventId};
use seckill_domain::ids::OrderId;
use seckill_domain::nodes::Nodes;
use seckill_domain::order_events::deliver::{DeliveryOptions, Sender, deliver};
use seckill_domain::order_events::endpoints::{self, DisabledBy, Replay};
use seckill_domain::orders::{self, ConfirmOutcome, DrainOptions, PaymentStatus};
use seckill_domain::provider::{Notice, PaymentMode, Succeeded};
use seckill_domain::sale::Admission;
use seckill_domain::scripts;
use seckill_domain::sharded::EventShards;
use seckill_domain::{admin, clock, sale};
use seckill_native::{NativePg, NativeStore};
use seckill_testkit::{PgServer, RedisServer, ShopReceiver};
use serde_json::json;

/// The admission key of these tests.
const SECRET: &[u8] = b"native-admission-secret";

/// A Redis and a migrated Postgres.
fn servers() -> Result<(RedisServer, PgServer)> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(pg.migrate())?;
    Ok((redis, pg))
}

/// The nodes (one) and the orders database.
type Native = (Nodes<NativeStore<redis::Connection>>, NativePg);

/// Connects the domain's two ports to the servers.
fn connect(redis: &RedisServer, pg: &PgServer) -> Result<Native> {
    let nodes = Nodes::open(&redis.url(), |url| {
        redis::Client::open(url)?
            .get_connection()
            .map(NativeStore::new)
    });
    Ok((nodes, NativePg::connect(&pg.url())?))
}

/// Shards of the events these tests sell.
const SHARDS: u32 = 4;

/// Opens `event` with `stock` units (paying takes `payment_timeout_s`) and sells to `users`
/// buyers through the real scripts; returns the accepted (user, order id) pairs.
fn sell(
    nodes: &Nodes<NativeStore<redis::Connection>>,
    event: &EventId,
    stock: u64,
    users: usize,
    payment_timeout_s: u32,
) -> Result<Vec<(String, String)>> {
    sell_over(nodes, event, (stock, SHARDS), users, payment_timeout_s)
}

/// [`sell`] over `shards` shards.
fn sell_over(
    nodes: &Nodes<NativeStore<redis::Connection>>,
    event: &EventId,
    (stock, shards): (u64, u32),
    users: usize,
    payment_timeout_s: u32,
) -> Result<Vec<(String, String)>> {
    let now = clock::now_ms();
    let config: EventConfig = serde_json::from_value(json!({
        "sku": "native", "unit_amount": 500, "currency": "eur", "stock": stock, "shards": shards,
        "start_ms": now - 1_000, "end_ms": now + 3_600_000, "user_rate": 0,
        "payment_timeout_s": payment_timeout_s, "pow_difficulty": 0, "admission_addr_rate": 0,
    }))?;
    admin::upsert_event(nodes, event, &config)?;
    admin::warm_up(nodes, event)?;
    let mut accepted = Vec::new();
    for i in 0..users {
        let user = format!("{}-u{i}", event.as_str());
        let now = clock::now_ms();
        let Ok(Admission::Admitted { admission_token }) = sale::issue_token(
            nodes,
            &sale::AdmissionRequest {
                event,
                shards,
                user: &user,
                client: Some("127.0.0.1"),
                solution: None,
            },
            SECRET,
            now,
        ) else {
            continue; // admission closed
        };
        let Ok(token) = sale::precheck(
            nodes,
            &sale::PrecheckRequest {
                event,
                shards,
                user: &user,
                client: "127.0.0.1".parse().ok(),
                admission_token: &admission_token,
            },
            SECRET,
            now,
        ) else {
            continue; // sold out
        };
        // A tail that found its candidates empty says "try again": the buyer does.
        for _ in 0..16 {
            match sale::buy(
                nodes,
                event,
                shards,
                &user,
                &token.purchase_token,
                clock::now_ms(),
            ) {
                Ok(bought) => accepted.push((user.clone(), bought.accepted.order_id)),
                Err(e) if e.code().as_str() == "unavailable" => continue,
                Err(_) => {}
            }
            break;
        }
    }
    Ok(accepted)
}

/// The drain's tuning for these tests.
fn drain_options() -> DrainOptions {
    DrainOptions {
        owner: "native-test".into(),
        batch: 7,
        max_batches: 100,
        lease_ms: 5_000,
        reclaim_idle_ms: 1_000,
        max_deliveries: 3,
        until: None,
    }
}

/// Counts the event's orders in Postgres with `status`.
fn count(pg: &PgServer, event: &EventId, status: &str) -> Result<i64> {
    let mut client = postgres::Client::connect(&pg.url(), postgres::NoTls)?;
    Ok(client
        .query_one(
            "SELECT count(*) FROM orders WHERE event_id = $1 AND status = $2",
            &[&event.as_str(), &status],
        )?
        .get(0))
}

/// `user` pays `order` at `now_ms`: the payment started, then the provider's confirmation
/// taken (verified webhooks are the host tests' part; here the notice is what one says).
/// Returns where the payment stands.
fn pay(
    nodes: &Nodes<NativeStore<redis::Connection>>,
    db: &NativePg,
    event: &EventId,
    user: &str,
    order: &str,
    now_ms: u64,
) -> Result<PaymentStatus, seckill_domain::Error> {
    let order_id = OrderId::parse(order)?;
    let req = orders::PayRequest {
        event,
        user,
        order_id: &order_id,
        now_ms,
    };
    let payment = orders::start_payment(db, req, None)?;
    if payment.status != PaymentStatus::Pending {
        return Ok(payment.status);
    }
    let notice = Notice::Succeeded(Succeeded {
        event_id: format!("evt_{}", payment.payment_id),
        reference: format!("pi_{order}"),
        payment_id: payment.payment_id,
        amount: payment.amount,
        currency: payment.currency,
        livemode: false,
    });
    let outcome = orders::confirm(nodes, db, &notice, PaymentMode::Test, now_ms)?.outcome;
    Ok(match outcome {
        ConfirmOutcome::Paid => PaymentStatus::Succeeded,
        _ => PaymentStatus::RefundDue,
    })
}

#[test]
fn drain_pay_and_release_happen_once_and_the_books_balance() -> Result<()> {
    let (redis, pg) = servers()?;
    let (nodes, db) = connect(&redis, &pg)?;
    let event = EventId::parse("native")?;
    let accepted = sell(&nodes, &event, 30, 40, 60)?;
    assert_eq!(accepted.len(), 30, "exactly the stock is sold");

    // The drain lands every order once, in batches of 7; a second run finds nothing.
    let report = orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;
    assert_eq!((report.inserted, report.confirmed), (30, 30), "{report:?}");
    let again = orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;
    assert_eq!((again.inserted, again.confirmed), (0, 0), "{again:?}");

    // Ten pay, twice each: the second answer is the same, nothing moves twice.
    let now = clock::now_ms();
    for (user, order) in &accepted[..10] {
        for _ in 0..2 {
            let paid = pay(&nodes, &db, &event, user, order, now)?;
            assert_eq!(paid, PaymentStatus::Succeeded);
        }
    }

    // Past the deadline the other twenty expire and their units go back, exactly once.
    let later = now + 61_000;
    let released = orders::release_expired(&nodes, &db, later, 1_000)?;
    assert_eq!(
        (released.expired, released.released),
        (20, 20),
        "{released:?}"
    );
    let again = orders::release_expired(&nodes, &db, later, 1_000)?;
    assert_eq!((again.expired, again.released), (0, 0), "{again:?}");
    let (user, order) = &accepted[20];
    let late = pay(&nodes, &db, &event, user, order, later).err();
    assert_eq!(late.map(|e| e.code().as_str()), Some("order_expired"));

    assert_eq!(
        (count(&pg, &event, "paid")?, count(&pg, &event, "expired")?),
        (10, 20)
    );
    let status = admin::status(&nodes, &event)?;
    assert_eq!(
        status.event.stock_left, 20,
        "the expired units are for sale again"
    );
    let books = orders::reconcile(&nodes, &db, &event, true)?;
    assert_eq!((books.drift, books.ledger_drift), (0, Some(0)), "{books:?}");
    Ok(())
}

/// Every key of the Redis server and its serialized value: equal before and after means
/// nothing was written.
fn redis_contents(redis: &RedisServer) -> Result<Vec<(String, Vec<u8>)>> {
    let mut con = redis::Client::open(redis.url())?.get_connection()?;
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con)?;
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let value: Vec<u8> = redis::cmd("DUMP").arg(&k).query(&mut con)?;
            Ok((k, value))
        })
        .collect()
}

/// Reconcile reads only unless asked to repair: units a shard lent that their receiver never
/// credited (a tail cut short) count as in transit, so the books balance and nothing is
/// written; the repair then credits them.
#[test]
fn a_reconcile_without_repair_counts_units_in_transit_and_writes_nothing() -> Result<()> {
    let (redis, pg) = servers()?;
    let (nodes, db) = connect(&redis, &pg)?;
    let event = EventId::parse("transit")?;
    sell(&nodes, &event, 40, 5, 60)?;
    orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;
    let (e, _) = EventShards::open(&nodes, &event)?;
    let (store, k) = e.slot(0)?;
    assert_eq!(
        scripts::shard_lend::run(store, &k, "cut-short", 1, 2)?.lent,
        2
    );
    let before = redis_contents(&redis)?;
    let books = orders::reconcile(&nodes, &db, &event, false)?;
    assert_eq!(
        (books.in_transit, books.drift, books.repaired),
        (2, 0, false),
        "{books:?}"
    );
    assert_eq!(redis_contents(&redis)?, before, "nothing written");
    let books = orders::reconcile(&nodes, &db, &event, true)?;
    assert_eq!((books.in_transit, books.drift), (0, 0), "{books:?}");
    assert_ne!(
        redis_contents(&redis)?,
        before,
        "the repair credited the transfer"
    );
    Ok(())
}

#[test]
fn a_payment_and_a_release_at_the_deadline_never_both_win() -> Result<()> {
    let (redis, pg) = servers()?;
    let (nodes, db) = connect(&redis, &pg)?;
    let event = EventId::parse("deadline")?;
    let accepted = sell(&nodes, &event, 10, 10, 1)?;
    orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;
    let mut client = postgres::Client::connect(&pg.url(), postgres::NoTls)?;
    let deadline: i64 = client
        .query_one(
            "SELECT max(pay_deadline_ms) FROM orders WHERE event_id = $1",
            &[&event.as_str()],
        )?
        .get(0);
    // Half pay a millisecond before their deadline, then the release runs a millisecond after
    // every deadline, then the other half try to pay: each order ends paid xor expired.
    let at = u64::try_from(deadline).context("a deadline")?;
    let pay_just_in_time =
        |(user, order): &(String, String)| pay(&nodes, &db, &event, user, order, at - 1_001);
    for sold in &accepted[..5] {
        pay_just_in_time(sold)?;
    }
    let released = orders::release_expired(&nodes, &db, at + 1, 1_000)?;
    assert_eq!(released.expired, 5, "{released:?}");
    for sold in &accepted[5..] {
        let refused = pay_just_in_time(sold).err();
        assert_eq!(refused.map(|e| e.code().as_str()), Some("order_expired"));
    }
    assert_eq!(
        (count(&pg, &event, "paid")?, count(&pg, &event, "expired")?),
        (5, 5)
    );
    let books = orders::reconcile(&nodes, &db, &event, true)?;
    assert_eq!(books.drift, 0, "{books:?}");
    assert_eq!(admin::status(&nodes, &event)?.event.stock_left, 5);
    Ok(())
}

/// Commands the Redis server ran since its statistics were last reset, scripts' own included
/// (`INFO commandstats` counts a command called from Lua like any other).
fn commands_run(redis: &RedisServer) -> Result<u64> {
    let mut con = redis::Client::open(redis.url())?.get_connection()?;
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut con)?;
    let total = info
        .lines()
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(&mut con)?;
    Ok(total)
}

/// The operator's status and a drain run walk the shards in O(shards) commands: learning the
/// count is one read of the master, and each shard's status reads its own stock only. At 16
/// and 64 shards (four buyers per shard), each costs at most a fixed number of commands per
/// shard, so 64 shards cost about four times 16 (a walk that read every shard from every
/// shard would cost sixteen times).
#[test]
fn a_status_and_a_drain_run_cost_commands_in_proportion_to_the_shards() -> Result<()> {
    let mut costs = Vec::new();
    for shards in [16u32, 64] {
        // Servers of each size's own: a drain run walks every event they hold.
        let (redis, pg) = servers()?;
        let (nodes, db) = connect(&redis, &pg)?;
        let event = EventId::parse(&format!("linear-{shards}"))?;
        let sold = sell_over(
            &nodes,
            &event,
            (u64::from(shards) * 4, shards),
            shards as usize * 4,
            60,
        )?;
        assert!(!sold.is_empty(), "{shards} shards: nothing sold");
        commands_run(&redis)?;
        let status = admin::status(&nodes, &event)?;
        let for_status = commands_run(&redis)?;
        assert_eq!(status.event.stock_by_shard.len(), shards as usize);
        let report = orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;
        let for_drain = commands_run(&redis)?;
        assert_eq!(
            report.confirmed as usize,
            sold.len(),
            "{shards} shards: {report:?}"
        );
        println!("{shards} shards: status {for_status} commands, drain run {for_drain}");
        let per_shard = u64::from(shards);
        assert!(
            for_status <= 16 * per_shard + 8,
            "status: {for_status} commands at {shards} shards"
        );
        assert!(
            for_drain <= 64 * per_shard + 32,
            "drain: {for_drain} commands at {shards} shards"
        );
        costs.push((for_status, for_drain));
    }
    let (small, large) = (costs[0], costs[1]);
    assert!(
        large.0 * 10 <= small.0 * 45,
        "status grew faster than the shards: {costs:?}"
    );
    assert!(
        large.1 * 10 <= small.1 * 45,
        "drain grew faster than the shards: {costs:?}"
    );
    Ok(())
}

/// The network between the deliverer and the shop: an endpoint's URL names a public host, and
/// this brings its request to the shop's receiver on loopback, path and all.
struct ToShop<'a>(&'a ShopReceiver);

impl Sender for ToShop<'_> {
    fn post(&mut self, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16, String> {
        let (_, path) = endpoints::split_url(url).ok_or("not an https URL")?;
        self.0.post(&path, headers, body).map_err(|e| e.to_string())
    }
}

/// Retries after 1 s and 2 s, disabled after 10 s of failing.
fn quick_retries() -> DeliveryOptions {
    DeliveryOptions {
        retry_after_ms: vec![1_000, 2_000],
        disable_after_ms: 10_000,
        ..DeliveryOptions::default()
    }
}

/// The order's payment id, and a second payment of it the provider took (a double charge the
/// refund job owes back) refunded: the refund job's last write. Its talk with the provider is
/// `orders/checkout.rs`'s.
fn refund_a_double_charge(pg: &PgServer, order: &str, now_ms: u64) -> Result<()> {
    let mut client = postgres::Client::connect(&pg.url(), postgres::NoTls)?;
    let mut tx = client.transaction()?;
    tx.execute(
        "INSERT INTO provider_payments (provider_ref, payment_id, event_id, amount, currency,
             received_ms, status, refund_reason)
         SELECT 'pi_twice', payment_id, event_id, amount, currency, $2, 'refund_due', 'duplicate'
         FROM payments WHERE order_id = $1",
        &[&order, &(now_ms as i64)],
    )?;
    tx.execute(
        "UPDATE provider_payments SET status = 'refunded', refund_id = 're_1', refunded_ms = $1
         WHERE provider_ref = 'pi_twice'",
        &[&(now_ms as i64)],
    )?;
    tx.commit()?;
    Ok(())
}

#[test]
fn order_events_reach_the_shop_signed_once_each_and_in_order() -> Result<()> {
    let (redis, pg) = servers()?;
    let (nodes, db) = connect(&redis, &pg)?;
    let shop = ShopReceiver::start()?;
    let now = clock::now_ms();
    let ep = endpoints::register(&db, "https://shop.example.com/hooks", "fulfilment", now)?;
    shop.hold_secrets(&[&ep.secret])?;

    let event = EventId::parse("events")?;
    let accepted = sell(&nodes, &event, 6, 6, 60)?;
    orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;
    for (user, order) in &accepted[..2] {
        assert_eq!(
            pay(&nodes, &db, &event, user, order, now)?,
            PaymentStatus::Succeeded
        );
    }
    orders::release_expired(&nodes, &db, now + 61_000, 1_000)?;
    refund_a_double_charge(&pg, &accepted[0].1, now + 62_000)?;

    let run_now = || {
        deliver(
            &db,
            &mut ToShop(&shop),
            &quick_retries(),
            clock::now_ms(),
            || false,
        )
    };
    let report = run_now()?;
    let got = shop.received()?;
    assert_eq!(report.delivered as usize, got.len(), "{report:?}");
    assert!(
        got.iter().all(|r| r.verified && r.answered == 204),
        "{got:?}"
    );
    let ids: BTreeSet<_> = got.iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids.len(), got.len(), "each event once");
    let story = |order: &str| -> Vec<String> {
        got.iter()
            .filter(|r| r.order_id.as_deref() == Some(order))
            .filter_map(|r| r.kind.clone())
            .collect()
    };
    assert_eq!(
        story(&accepted[0].1),
        ["order.landed", "order.paid", "payment.refunded"]
    );
    assert_eq!(story(&accepted[1].1), ["order.landed", "order.paid"]);
    for (_, order) in &accepted[2..] {
        assert_eq!(story(order), ["order.landed", "order.expired"]);
    }

    // Nothing new: nothing sent. A replay sends the message again, with its id.
    let again = run_now()?;
    assert_eq!(again.delivered, 0, "{again:?}");
    let first = got[0].id.clone().expect("an id");
    let queued = endpoints::replay(
        &db,
        &ep.endpoint.endpoint_id,
        &Replay::Message(first.clone()),
    )?;
    assert_eq!(queued, 1);
    run_now()?;
    let after = shop.received()?;
    assert_eq!(after.len(), got.len() + 1);
    assert_eq!(after.last().and_then(|r| r.id.clone()), Some(first));
    let log = endpoints::deliveries(&db, &ep.endpoint.endpoint_id, 100)?;
    assert_eq!(log.len(), after.len(), "every attempt logged");
    assert!(log[0].replay, "the newest was the replay");
    Ok(())
}

#[test]
fn a_failing_endpoint_is_retried_then_disabled_and_a_rotated_secret_verifies_beside_the_old()
-> Result<()> {
    let (redis, pg) = servers()?;
    let (nodes, db) = connect(&redis, &pg)?;
    let shop = ShopReceiver::start()?;
    let t = clock::now_ms();
    let ep = endpoints::register(&db, "https://shop.example.com/hooks", "", t)?;
    let id = ep.endpoint.endpoint_id.clone();
    shop.hold_secrets(&[&ep.secret])?;
    let event = EventId::parse("failing")?;
    sell(&nodes, &event, 2, 2, 60)?;
    orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;

    // Failing: the first event is tried on the schedule, the second waits behind it.
    shop.answer_next(500, 100)?;
    let run = |at: u64| deliver(&db, &mut ToShop(&shop), &quick_retries(), at, || false);
    let everything = Replay::Range {
        from_ms: 0,
        to_ms: i64::MAX,
    };
    let replay_all = || endpoints::replay(&db, &id, &everything);
    assert_eq!(run(t)?.failed, 1);
    assert_eq!(run(t + 500)?.endpoints, 0, "not due before its retry");
    assert_eq!(run(t + 1_000)?.failed, 1);
    assert_eq!(run(t + 2_999)?.endpoints, 0, "the second retry waits 2 s");
    assert_eq!(run(t + 11_000)?.disabled, 1, "failing 10 s: disabled");
    assert_eq!(
        run(t + 60_000)?.endpoints,
        0,
        "a disabled endpoint gets nothing"
    );
    let disabled = endpoints::get(&db, &id)?;
    assert!(!disabled.enabled);
    assert_eq!(disabled.disabled_by, Some(DisabledBy::Failing));
    let got = shop.received()?;
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got.iter()
            .all(|r| r.verified && r.answered == 500 && r.id == got[0].id)
    );

    // Enabled again and its secret rotated, the shop still holding the old one: both sign.
    shop.answer_next(204, 0)?;
    endpoints::set_enabled(&db, &id, true, t)?;
    let rotated = endpoints::rotate(&db, &id, t)?;
    assert_eq!(run(t + 61_000)?.delivered, 2);
    shop.hold_secrets(&[&rotated.secret])?;
    replay_all()?;
    assert_eq!(run(t + 62_000)?.delivered, 2, "the new secret verifies too");
    let got = shop.received()?;
    assert!(got[3..].iter().all(|r| r.verified), "{got:?}");

    // After the overlap only the new secret signs: a shop that kept only the old one refuses.
    shop.hold_secrets(&[&ep.secret])?;
    replay_all()?;
    let late = t + endpoints::ROTATION_OVERLAP_MS + 1;
    assert_eq!(run(late)?.failed, 1);
    assert!(!shop.received()?.last().expect("one more").verified);

    // `410 Gone` disables at once.
    shop.hold_secrets(&[&rotated.secret])?;
    shop.answer_next(410, 1)?;
    sell(&nodes, &EventId::parse("gone")?, 1, 1, 60)?;
    orders::drain(&nodes, &db, &drain_options(), clock::now_ms())?;
    assert_eq!(run(late + 1)?.disabled, 1);
    assert_eq!(
        endpoints::get(&db, &id)?.disabled_by,
        Some(DisabledBy::Gone)
    );
    Ok(())
}
