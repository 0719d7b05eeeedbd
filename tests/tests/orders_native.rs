//! The order pipeline without WASM: drain, pay, timeout release and reconcile straight from the
//! domain (`seckill-domain`) over the native adapters (`seckill-native`), against a real Redis
//! and a real PostgreSQL. Fast checks of the hardest logic; the end-to-end versions through the
//! host and the `.wasm` files are in `orders/`.

use anyhow::{Context, Result};
use seckill_domain::event::{EventConfig, EventId};
use seckill_domain::ids::OrderId;
use seckill_domain::nodes::Nodes;
use seckill_domain::orders::{self, ConfirmOutcome, DrainOptions, PaymentStatus};
use seckill_domain::provider::{Notice, PaymentMode, Succeeded};
use seckill_domain::sale::Admission;
use seckill_domain::scripts;
use seckill_domain::sharded::EventShards;
use seckill_domain::{admin, clock, sale};
use seckill_native::{NativePg, NativeStore};
use seckill_testkit::{PgServer, RedisServer};
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
