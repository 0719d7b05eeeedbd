//! One hot event over three real `redis-server` nodes, straight from the domain
//! (`seckill_domain::sharded`) over the native adapter: the same scripts the guests run, with
//! every stock shard in a slot of its own, spread over the nodes. The sale's invariants under
//! load, skew, races, a node restart and a tail cut short at each of its steps.

use std::collections::{BTreeMap, HashSet};

use anyhow::{Context, Result, bail};
use seckill_domain::error::{Dependency, Error, ErrorCode};
use seckill_domain::event::{EventConfig, EventId};
use seckill_domain::ids;
use seckill_domain::keys::ShardKeys;
use seckill_domain::nodes::{self, Nodes};
use seckill_domain::sale::Admission;
use seckill_domain::scripts::buy::{self, Back, Outcome};
use seckill_domain::scripts::{Refusal, ScriptError, shard_lend};
use seckill_domain::sharded::{EventShards, transfer};
use seckill_domain::{admin, clock, sale};
use seckill_native::NativeStore;
use seckill_testkit::RedisServer;
use serde_json::json;

const SECRET: &[u8] = b"sharded-admission-secret";

type Store = NativeStore<redis::Connection>;

/// `n` Redis nodes of this test alone.
struct Cluster {
    servers: Vec<RedisServer>,
}

impl Cluster {
    fn start(n: usize) -> Result<Self> {
        Ok(Cluster {
            servers: (0..n)
                .map(|_| RedisServer::start())
                .collect::<Result<_>>()?,
        })
    }

    fn start_durable(n: usize) -> Result<Self> {
        Ok(Cluster {
            servers: (0..n)
                .map(|_| RedisServer::start_durable())
                .collect::<Result<_>>()?,
        })
    }

    /// `redis_url`: every node, comma-separated.
    fn urls(&self) -> String {
        let urls: Vec<String> = self.servers.iter().map(RedisServer::url).collect();
        urls.join(",")
    }

    /// A connection to every node.
    fn nodes(&self) -> Nodes<Store> {
        Nodes::open(&self.urls(), |url| {
            redis::Client::open(url)?
                .get_connection()
                .map(NativeStore::new)
        })
    }

    /// The EVALSHA and EVAL calls on each node since the last take.
    fn take_script_calls(&self) -> Result<Vec<(u64, u64)>> {
        self.servers.iter().map(|s| s.take_script_calls()).collect()
    }
}

/// Creates and warms `event`: `stock` units over `shards` shards, open now, no rate limits.
fn open_event(nodes: &Nodes<Store>, event: &EventId, stock: u64, shards: u32) -> Result<()> {
    let now = clock::now_ms();
    let config: EventConfig = serde_json::from_value(json!({
        "sku": "hot", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": stock, "shards": shards, "start_ms": now - 1_000,
        "end_ms": now + 3_600_000, "user_rate": 0, "admission_multiplier": 1000,
    }))?;
    admin::upsert_event(nodes, event, &config)?;
    admin::warm_up(nodes, event)?;
    Ok(())
}

/// The address every buyer here comes from.
const ADDR: &str = "10.0.0.1";

/// `user`'s admission at their home shard.
fn admit(
    nodes: &Nodes<Store>,
    event: &EventId,
    shards: u32,
    user: &str,
) -> Result<Admission, Error> {
    let req = sale::AdmissionRequest {
        event,
        shards,
        user,
        client: Some(ADDR),
        solution: None,
    };
    sale::issue_token(nodes, &req, SECRET, clock::now_ms())
}

/// `user`'s precheck with `admission_token`.
fn precheck(
    nodes: &Nodes<Store>,
    event: &EventId,
    shards: u32,
    user: &str,
    admission_token: &str,
) -> Result<sale::PurchaseToken, Error> {
    let req = sale::PrecheckRequest {
        event,
        shards,
        user,
        client: ADDR.parse().ok(),
        admission_token,
    };
    sale::precheck(nodes, &req, SECRET, clock::now_ms())
}

/// `user`'s purchase token: admission, then precheck.
fn purchase_token(
    nodes: &Nodes<Store>,
    event: &EventId,
    shards: u32,
    user: &str,
) -> Result<String> {
    let Admission::Admitted { admission_token } = admit(nodes, event, shards, user)? else {
        bail!("{user} not admitted")
    };
    let token = precheck(nodes, event, shards, user, &admission_token)?;
    Ok(token.purchase_token)
}

/// What one buyer got.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Order { order_id: String, round_trips: u32 },
    SoldOut,
}

/// A buyer's whole journey: admission, precheck, then buy, asking again (same token) while
/// the tail answers "try again".
fn buyer(nodes: &Nodes<Store>, event: &EventId, shards: u32, user: &str) -> Result<Got> {
    let admission = match admit(nodes, event, shards, user) {
        Ok(Admission::Admitted { admission_token }) => admission_token,
        Err(e) if e.code() == ErrorCode::SoldOut => return Ok(Got::SoldOut),
        other => bail!("{user}: admission {other:?}"),
    };
    let token = match precheck(nodes, event, shards, user, &admission) {
        Ok(t) => t.purchase_token,
        Err(e) if e.code() == ErrorCode::SoldOut => return Ok(Got::SoldOut),
        Err(e) => bail!("{user}: precheck {e}"),
    };
    for _ in 0..100 {
        match sale::buy(nodes, event, shards, user, &token, clock::now_ms()) {
            Ok(b) => {
                return Ok(Got::Order {
                    order_id: b.accepted.order_id,
                    round_trips: b.round_trips,
                });
            }
            Err(e) if e.code() == ErrorCode::SoldOut => return Ok(Got::SoldOut),
            Err(Error::Unavailable {
                dependency: Dependency::Redis,
                ..
            }) => continue,
            Err(e) => bail!("{user}: buy {e}"),
        }
    }
    bail!("{user}: still looking after 100 tries")
}

/// Every shard's units left, orders accepted and order stream, read from the nodes.
struct Books {
    stock: Vec<i64>,
    sold: Vec<i64>,
    /// Units lent and not credited anywhere (in transit).
    in_transit: i64,
    /// Orders per user over every shard.
    orders_by_user: BTreeMap<String, usize>,
}

fn books(nodes: &Nodes<Store>, event: &EventId, shards: u32) -> Result<Books> {
    let e = EventShards::new(nodes, event, shards);
    let mut b = Books {
        stock: Vec::new(),
        sold: Vec::new(),
        in_transit: 0,
        orders_by_user: BTreeMap::new(),
    };
    let mut lent = Vec::new();
    let mut credited = HashSet::new();
    for s in e.all() {
        let store = nodes.for_shard(event, s)?;
        let k = ShardKeys::new(event, s);
        for t in seckill_domain::scripts::shard_lent::run(store, &k, 0)? {
            lent.push((t.id, t.units as i64));
        }
        let mut conn = store.0.lock().unwrap();
        let units: Option<i64> = redis::cmd("HGET").arg(k.stock()).arg(s).query(&mut *conn)?;
        b.stock.push(units.unwrap_or(0));
        let seq: Option<i64> = redis::cmd("GET").arg(k.seq()).query(&mut *conn)?;
        b.sold.push(seq.unwrap_or(0));
        let bought: BTreeMap<String, String> =
            redis::cmd("HGETALL").arg(k.bought()).query(&mut *conn)?;
        for user in bought.into_keys() {
            *b.orders_by_user.entry(user).or_default() += 1;
        }
        let c: Vec<String> = redis::cmd("SMEMBERS").arg(k.credited()).query(&mut *conn)?;
        credited.extend(c);
    }
    b.in_transit = lent
        .iter()
        .filter(|(id, _)| !credited.contains(id))
        .map(|(_, u)| u)
        .sum();
    Ok(b)
}

impl Books {
    /// Every unit is somewhere: on a shard, sold, or in transit.
    fn units(&self) -> i64 {
        self.stock.iter().sum::<i64>() + self.sold.iter().sum::<i64>() + self.in_transit
    }
}

/// Users whose home shard of `event` is `shard`.
fn homed_on(event: &EventId, shards: u32, shard: u32, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("skew-{i}"))
        .filter(|u| ids::home_shard(event.as_str(), u, shards) == shard)
        .take(n)
        .collect()
}

#[test]
fn ten_thousand_buyers_sell_a_thousand_units_over_32_shards_on_3_nodes_exactly() -> Result<()> {
    let cluster = Cluster::start(3)?;
    let event = EventId::parse("hot-item")?;
    open_event(&cluster.nodes(), &event, 1_000, 32)?;
    // Every node holds some of the event's shards.
    let urls = cluster.urls();
    let urls = nodes::parse(&urls);
    let mut shards_per_node = vec![0; 3];
    for s in 0..32 {
        shards_per_node[nodes::index_for_shard(&event, s, &urls)] += 1;
    }
    assert!(
        shards_per_node.iter().all(|&n| n >= 6),
        "{shards_per_node:?}"
    );
    cluster.take_script_calls()?;

    let got: Vec<(String, Got)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let cluster = &cluster;
                let event = &event;
                scope.spawn(move || -> Result<Vec<(String, Got)>> {
                    let nodes = cluster.nodes();
                    (0..2_500)
                        .map(|i| {
                            let user = format!("user{}", i * 4 + w);
                            Ok((user.clone(), buyer(&nodes, event, 32, &user)?))
                        })
                        .collect()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("no panic"))
            .collect::<Result<Vec<_>>>()
            .map(|v| v.into_iter().flatten().collect())
    })?;

    let orders: Vec<u32> = got
        .iter()
        .filter_map(|(_, g)| match g {
            Got::Order { round_trips, .. } => Some(*round_trips),
            Got::SoldOut => None,
        })
        .collect();
    assert_eq!(orders.len(), 1_000, "every unit sold, none twice");
    let b = books(&cluster.nodes(), &event, 32)?;
    assert!(
        b.stock.iter().all(|&s| s == 0),
        "every shard empty: {:?}",
        b.stock
    );
    assert_eq!(b.sold.iter().sum::<i64>(), 1_000);
    assert_eq!(b.in_transit, 0);
    assert!(b.orders_by_user.values().all(|&n| n == 1));
    assert_eq!(b.orders_by_user.len(), 1_000);
    let max = *orders.iter().max().unwrap();
    let mean = orders.iter().sum::<u32>() as f64 / orders.len() as f64;
    println!("round trips per accepted buy: mean {mean:.3}, max {max}");
    assert!(
        max <= seckill_domain::sale::MAX_BUY_ROUND_TRIPS,
        "a buy took {max} round trips"
    );
    // The scripts ran on every node, about by its share of the shards.
    let calls = cluster.take_script_calls()?;
    println!("script calls per node: {calls:?} (shards per node {shards_per_node:?})");
    assert!(
        calls.iter().all(|&(evalsha, _)| evalsha > 1_000),
        "{calls:?}"
    );
    // After the sale, sold out is what everyone hears, in one round trip at home.
    let nodes = cluster.nodes();
    assert_eq!(buyer(&nodes, &event, 32, "late-comer")?, Got::SoldOut);
    let status = admin::status(&nodes, &event)?;
    assert_eq!((status.event.sold, status.event.stock_left), (1_000, 0));
    assert!(status.versions_agree);
    Ok(())
}

#[test]
fn buyers_all_homed_on_one_shard_still_buy_every_unit() -> Result<()> {
    let cluster = Cluster::start(3)?;
    let nodes = cluster.nodes();
    let event = EventId::parse("skewed")?;
    open_event(&nodes, &event, 200, 8)?;
    let mut sold = 0;
    for user in homed_on(&event, 8, 3, 260) {
        if let Got::Order { round_trips, .. } = buyer(&nodes, &event, 8, &user)? {
            assert!(round_trips <= 4);
            sold += 1;
        }
    }
    assert_eq!(
        sold, 200,
        "the 25 units of shard 3 and the 175 of the others"
    );
    let b = books(&nodes, &event, 8)?;
    assert!(b.stock.iter().all(|&s| s == 0), "{:?}", b.stock);
    assert_eq!((b.units(), b.in_transit), (200, 0));
    // Every tail's transfer is settled by the repair; nothing is credited twice.
    let e = EventShards::new(&nodes, &event, 8);
    let repaired = transfer::repair(&e, 0)?;
    assert_eq!(
        repaired.credited, 0,
        "the tails credited every unit themselves"
    );
    assert_eq!(repaired.settled, 175);
    assert_eq!(books(&nodes, &event, 8)?.units(), 200);
    Ok(())
}

#[test]
fn a_rebalance_moves_leftover_stock_between_shards_exactly() -> Result<()> {
    let cluster = Cluster::start(3)?;
    let nodes = cluster.nodes();
    let event = EventId::parse("drifting")?;
    open_event(&nodes, &event, 400, 8)?;
    // Buyers of shard 5 only: it runs dry, the others keep theirs.
    for user in homed_on(&event, 8, 5, 50) {
        buyer(&nodes, &event, 8, &user)?;
    }
    let e = EventShards::new(&nodes, &event, 8);
    let before = transfer::stocks(&e)?;
    assert_eq!(before[5], 0);
    assert!(transfer::drifted(&before), "{before:?}");
    let (_, moved) = transfer::maintain(&e, 0)?;
    let after = transfer::stocks(&e)?;
    assert!(moved > 0);
    assert_eq!(after.iter().sum::<u64>(), 350, "{before:?} → {after:?}");
    let (min, max) = (after.iter().min().unwrap(), after.iter().max().unwrap());
    assert!(max - min <= 1, "each shard holds its share: {after:?}");
    assert!(!transfer::drifted(&after));
    let b = books(&nodes, &event, 8)?;
    assert_eq!((b.units(), b.in_transit), (400, 0));
    Ok(())
}

#[test]
fn one_per_user_holds_when_the_same_buyer_races_on_two_shards() -> Result<()> {
    let cluster = Cluster::start(3)?;
    let nodes = cluster.nodes();
    let event = EventId::parse("race")?;
    open_event(&nodes, &event, 8, 4)?;
    let user = "racer";
    let home = ids::home_shard(event.as_str(), user, 4);
    let hash = ids::home_hash(event.as_str(), user);
    let token = purchase_token(&nodes, &event, 4, user)?;
    // A request sent to another shard's slot is refused there and changes nothing.
    let other = (home + 1) % 4;
    let (store, k) = EventShards::new(&nodes, &event, 4).slot(other)?;
    let forged = buy::run(store, &k, user, &token, hash, "00ff", &Back::default());
    assert!(matches!(
        forged,
        Err(ScriptError::Refused(Refusal::WrongShard { shards: 4 }))
    ));
    // A stale shard count is sent home: same answer, one more round trip.
    let e = EventShards::new(&nodes, &event, 4);
    // Empty the home shard so both racing buys take the tail, from different shards.
    transfer::transfer(&e, home, (home + 2) % 4, 2)?;
    let results: Vec<_> = std::thread::scope(|scope| {
        let racers: Vec<_> = [4u32, 7]
            .into_iter()
            .map(|shards| {
                let (cluster, event, token) = (&cluster, &event, &token);
                scope.spawn(move || {
                    let nodes = cluster.nodes();
                    sale::buy(&nodes, event, shards, user, token, clock::now_ms())
                })
            })
            .collect();
        racers
            .into_iter()
            .map(|r| r.join().expect("no panic"))
            .collect()
    });
    let accepted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(accepted, 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert!(
                matches!(
                    e.code(),
                    ErrorCode::AlreadyBought | ErrorCode::BadPurchaseToken | ErrorCode::Unavailable
                ),
                "{e:?}"
            );
        }
    }
    let b = books(&nodes, &event, 4)?;
    assert_eq!(b.orders_by_user.get(user), Some(&1));
    assert_eq!(b.sold.iter().sum::<i64>(), 1);
    // The loser's lent unit (if it got one) landed at home, for the next buyer: none lost.
    assert_eq!(b.units(), 8);
    Ok(())
}

#[test]
fn a_node_restarted_mid_sale_with_aof_loses_no_accepted_order() -> Result<()> {
    let mut cluster = Cluster::start_durable(3)?;
    let event = EventId::parse("restart")?;
    open_event(&cluster.nodes(), &event, 300, 16)?;
    let mut accepted = BTreeMap::new();
    let mut sell = |cluster: &Cluster, from: usize, to: usize| -> Result<()> {
        let nodes = cluster.nodes();
        for i in from..to {
            let user = format!("u{i}");
            if let Got::Order { order_id, .. } = buyer(&nodes, &event, 16, &user)? {
                accepted.insert(user, order_id);
            }
        }
        Ok(())
    };
    sell(&cluster, 0, 150)?;
    cluster.servers[1].crash_and_restart()?;
    sell(&cluster, 150, 600)?;
    assert_eq!(accepted.len(), 300);
    let nodes = cluster.nodes();
    let b = books(&nodes, &event, 16)?;
    assert_eq!(b.sold.iter().sum::<i64>(), 300);
    assert_eq!((b.units(), b.in_transit), (300, 0));
    // Every 202 is in its home shard, on whichever node it lives.
    for (user, order_id) in &accepted {
        let home = ids::home_shard(event.as_str(), user, 16);
        let store = nodes.for_shard(&event, home)?;
        let k = ShardKeys::new(&event, home);
        let held: Option<String> = redis::cmd("HGET")
            .arg(k.bought())
            .arg(user)
            .query(&mut *store.0.lock().unwrap())?;
        assert_eq!(held.as_ref(), Some(order_id), "{user}");
    }
    Ok(())
}

/// Where the tail is cut short: after which of its steps the caller dies (or loses the reply).
#[derive(Debug, Clone, Copy)]
enum CutAfter {
    /// After the home shard answered TAIL.
    Home,
    /// After the lender lent (its reply lost or the caller dead).
    Lend,
    /// After the home shard credited and sold (its reply lost).
    Credit,
}

#[test]
fn a_tail_cut_short_after_any_step_sells_no_unit_twice_and_loses_none() -> Result<()> {
    let cluster = Cluster::start(3)?;
    let nodes = cluster.nodes();
    for cut in [CutAfter::Home, CutAfter::Lend, CutAfter::Credit] {
        let event = EventId::parse(&format!("cut-{cut:?}"))?;
        open_event(&nodes, &event, 8, 4)?;
        let e = EventShards::new(&nodes, &event, 4);
        let user = "buyer";
        let home = ids::home_shard(event.as_str(), user, 4);
        let hash = ids::home_hash(event.as_str(), user);
        transfer::transfer(&e, home, (home + 1) % 4, 2)?;
        let token = purchase_token(&nodes, &event, 4, user)?;
        // The tail's steps, as sale::buy takes them, up to the cut.
        let order_id = ids::new_order_id(clock::now_ms());
        let (store, k) = e.slot(home)?;
        let Outcome::Tail(candidates) =
            buy::run(store, &k, user, &token, hash, &order_id, &Back::default())?
        else {
            bail!("the home shard is empty: expected the tail")
        };
        if !matches!(cut, CutAfter::Home) {
            let (lender, lk) = e.slot(candidates[0])?;
            let lent = shard_lend::run(lender, &lk, "t-cut", home, 1)?;
            assert_eq!(lent.lent, 1);
            // Lent and not yet credited: in transit, counted, not lost.
            assert_eq!(books(&nodes, &event, 4)?.in_transit, 1, "{cut:?}");
            if matches!(cut, CutAfter::Credit) {
                let back = Back {
                    credit: Some(("t-cut", 1)),
                    ..Back::default()
                };
                let done = buy::run(store, &k, user, &token, hash, &order_id, &back)?;
                assert!(matches!(done, Outcome::Bought(_)));
            }
        }
        // Cut. Whatever was done, every unit is accounted for.
        assert_eq!(books(&nodes, &event, 4)?.units(), 8, "{cut:?}");
        // The repair finishes any transfer, once (twice changes nothing).
        let first = transfer::repair(&e, 0)?;
        let again = transfer::repair(&e, 0)?;
        assert_eq!(again, transfer::Repaired::default(), "{cut:?}");
        let credited = u64::from(matches!(cut, CutAfter::Lend));
        assert_eq!(first.credited, credited, "{cut:?}");
        let b = books(&nodes, &event, 4)?;
        assert_eq!((b.units(), b.in_transit), (8, 0), "{cut:?}");
        // The buyer is not blocked: they buy (or already have, when the credit sold it).
        let retried = sale::buy(&nodes, &event, 4, user, &token, clock::now_ms());
        match cut {
            CutAfter::Credit => assert_eq!(retried.unwrap_err().code(), ErrorCode::AlreadyBought),
            _ => {
                retried.with_context(|| format!("{cut:?}"))?;
            }
        }
        let b = books(&nodes, &event, 4)?;
        assert_eq!(b.orders_by_user.get(user), Some(&1), "{cut:?}");
        assert_eq!((b.units(), b.sold.iter().sum::<i64>()), (8, 1), "{cut:?}");
    }
    Ok(())
}

#[test]
fn admission_precheck_buy_and_poll_are_one_evalsha_each_at_home() -> Result<()> {
    let cluster = Cluster::start(3)?;
    let nodes = cluster.nodes();
    let event = EventId::parse("budget")?;
    open_event(&nodes, &event, 100, 32)?;
    // Load the scripts on every node first (a first call per node sends the source once).
    for i in 0..20 {
        buyer(&nodes, &event, 32, &format!("warm{i}"))?;
        sale::poll(&nodes, &event, 32, &format!("warm{i}"), 0)?;
    }
    let total = |calls: Vec<(u64, u64)>| calls.iter().fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1));
    cluster.take_script_calls()?;
    let user = "counted";
    // One EVALSHA on the node holding the buyer's home shard, and nothing on the others.
    let urls = cluster.urls();
    let home_node = nodes::index_for_shard(
        &event,
        ids::home_shard(event.as_str(), user, 32),
        &nodes::parse(&urls),
    );
    let at_home: Vec<(u64, u64)> = (0..3)
        .map(|i| if i == home_node { (1, 0) } else { (0, 0) })
        .collect();
    let Admission::Admitted { admission_token } = admit(&nodes, &event, 32, user)? else {
        bail!("not admitted")
    };
    assert_eq!(cluster.take_script_calls()?, at_home, "admission");
    let token = precheck(&nodes, &event, 32, user, &admission_token)?;
    assert_eq!(cluster.take_script_calls()?, at_home, "precheck");
    let bought = sale::buy(
        &nodes,
        &event,
        32,
        user,
        &token.purchase_token,
        clock::now_ms(),
    )?;
    assert_eq!(bought.round_trips, 1);
    assert_eq!(cluster.take_script_calls()?, at_home, "buy");
    sale::poll(&nodes, &event, 32, user, 0)?;
    assert_eq!(cluster.take_script_calls()?, at_home, "poll");
    // A caller with a stale shard count pays one more, and gets the same answer.
    sale::poll(&nodes, &event, 31, user, 0)?;
    assert!(total(cluster.take_script_calls()?).0 <= 2);
    Ok(())
}
