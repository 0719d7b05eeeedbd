//! The key schema and every Lua script on a real Redis Cluster: three masters started here on
//! loopback, driven natively through redis-rs's cluster client (Spin's Redis interface has no
//! cluster support). It proves that
//!
//! - no script touches keys of two slots (no CROSSSLOT, no "non local key"): every key an event
//!   uses carries its `{sk:<event>}` tag and lives on the master that owns that tag's slot;
//! - the sale has the same outcomes as on a single node: exactly `stock` accepted per event, the
//!   rest `sold_out`, one order per user, every stock shard drained to 0, repeat buys refused;
//! - EVALSHA falls back to EVAL after `SCRIPT FLUSH` on every master (as after a failover).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use redis::cluster::{ClusterClient, ClusterConnection};
use seckill_domain::admin::{self, DenyList};
use seckill_domain::event::{EventConfig, EventId, Switches};
use seckill_domain::keys::EventKeys;
use seckill_domain::sale::{self, Admission, PollResult};
use seckill_domain::scripts;
use seckill_domain::scripts::drain_claim::Claim;
use seckill_domain::scripts::drain_read;
use seckill_domain::scripts::set_order_status::Final;
use seckill_domain::store::{Replies, Store, StoreError, StoreErrorKind};
use seckill_domain::{Error, clock};
use seckill_native::NativeStore;
use seckill_testkit::{ADMISSION_SECRET, free_port, repo_root};
use serde_json::json;

const STOCK: u64 = 50;
/// More buyers than units, so that most are refused.
const USERS: usize = 120;
/// Shards per sale event: one, some, more than half the stock (many shards of 1 or 2 units).
const SHARDS: [u32; 6] = [1, 8, 32, 1, 8, 32];
/// Their slots (CRC16 of `sk:flash-<i>`) fall on all three masters' ranges, two per master.
const EVENTS: [&str; 6] = [
    "flash-0", "flash-1", "flash-2", "flash-3", "flash-4", "flash-5",
];

fn on_path(name: &str) -> Result<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .with_context(|| format!("`{name}` not on PATH: run scripts/setup.sh"))
}

fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<()> {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > timeout {
            bail!("{what}: not within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A direct (non-cluster) command to one node.
fn node_query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> redis::RedisResult<T> {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))?.get_connection()?;
    cmd.query(&mut conn)
}

/// One cluster-enabled `redis-server`.
struct Node {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

/// Three masters on loopback, each in its own temp dir; killed on drop.
struct ClusterNodes {
    nodes: Vec<Node>,
}

impl ClusterNodes {
    fn start(masters: usize) -> Result<Self> {
        let server = on_path("redis-server")?;
        let cli = on_path("redis-cli")?;
        // Built up in place, so that a failure half-way still kills what started.
        let mut cluster = ClusterNodes { nodes: Vec::new() };
        while cluster.nodes.len() < masters {
            let node = cluster.spawn(&server)?;
            cluster.nodes.push(node);
        }
        let out = Command::new(cli)
            .args(["--cluster", "create"])
            .args(
                cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port)),
            )
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .context("running redis-cli --cluster create")?;
        ensure!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for port in cluster.ports() {
            wait_until(
                &format!("cluster_state:ok on 127.0.0.1:{port}"),
                Duration::from_secs(20),
                || {
                    node_query::<String>(port, redis::cmd("CLUSTER").arg("INFO"))
                        .is_ok_and(|info| info.contains("cluster_state:ok"))
                },
            )?;
        }
        Ok(cluster)
    }

    /// Starts one node on a port whose cluster bus port (+10000) is free too; retries if
    /// another process takes a port between the check and the bind.
    fn spawn(&self, server: &Path) -> Result<Node> {
        let taken: Vec<u16> = self.ports().flat_map(|p| [p, p + 10_000]).collect();
        let bindable = |p: u16| !taken.contains(&p) && TcpListener::bind(("127.0.0.1", p)).is_ok();
        for _ in 0..5 {
            let port = std::iter::repeat_with(free_port)
                .find(|&p| p < 55_535 && bindable(p) && bindable(p + 10_000))
                .expect("endless");
            let dir = tempfile::tempdir()?;
            let mut child = Command::new(server)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(dir.path().join("nodes.conf"))
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(dir.path())
                .stdout(Stdio::null())
                .spawn()
                .context("starting redis-server")?;
            let up = wait_until("redis-server", Duration::from_secs(10), || {
                matches!(child.try_wait(), Ok(Some(_)))
                    || node_query::<String>(port, &redis::cmd("PING")).is_ok()
            });
            if up.is_ok() && child.try_wait()?.is_none() {
                return Ok(Node {
                    child,
                    port,
                    _dir: dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        bail!("could not start a cluster node in 5 attempts")
    }

    fn ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.nodes.iter().map(|n| n.port)
    }

    fn urls(&self) -> Vec<String> {
        self.ports()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// The master serving `key`: the one node that answers instead of redirecting (MOVED).
    fn owner(&self, key: &str) -> Result<u16> {
        let owners: Vec<u16> = self
            .ports()
            .filter(|&p| node_query::<i64>(p, redis::cmd("EXISTS").arg(key)).is_ok())
            .collect();
        match owners[..] {
            [one] => Ok(one),
            _ => bail!("{key} is served by {owners:?}"),
        }
    }

    /// Whether each master has `script` cached.
    fn has_script(&self, script: &scripts::Script) -> Vec<bool> {
        self.ports()
            .map(|p| {
                let exists: Vec<bool> =
                    node_query(p, redis::cmd("SCRIPT").arg("EXISTS").arg(script.sha)).unwrap();
                exists[0]
            })
            .collect()
    }
}

impl Drop for ClusterNodes {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
            let _ = node.child.wait();
        }
    }
}

/// The native store over the cluster connection, failing the test on any Redis error with its
/// message (the domain would turn it into a bland `unavailable`), and recording which scripts ran.
struct Strict {
    inner: NativeStore<ClusterConnection>,
    ran: RefCell<BTreeSet<&'static str>>,
}

impl Store for Strict {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        let name = scripts::by_sha(sha).map_or("an unknown script", |s| s.name);
        self.ran.borrow_mut().insert(name);
        match self.inner.evalsha(sha, keys, args) {
            // A master that has not seen the script yet: the domain sends EVAL next.
            Err(e) if e.kind == StoreErrorKind::NoScript => Err(e),
            replies => Self::strict(name, keys, replies),
        }
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        let name = scripts::ALL
            .iter()
            .find(|s| s.source == source)
            .map_or("an unknown script", |s| s.name);
        Self::strict(name, keys, self.inner.eval(source, keys, args))
    }
}

impl Strict {
    /// Fails the test on a Redis error. redis-rs words CROSSSLOT as "CrossSlot: Keys in request
    /// don't hash to the same slot"; a derived key on another master is "Script attempted to
    /// access a non local key".
    fn strict(
        name: &str,
        keys: &[String],
        replies: Result<Replies, StoreError>,
    ) -> Result<Replies, StoreError> {
        if let Err(e) = &replies {
            panic!("{name} on the cluster, keys {keys:?}: {e}");
        }
        replies
    }

    /// A plain command through the cluster client (routed by its key).
    fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut conn = self.inner.0.lock().unwrap();
        redis::cmd(args[0])
            .arg(&args[1..])
            .query(&mut *conn)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }
}

fn admit(store: &Strict, event: &EventId, user: &str) -> String {
    match sale::issue_token(store, event, user, ADMISSION_SECRET.as_bytes()) {
        Ok(Admission::Admitted { admission_token }) => admission_token,
        other => panic!(
            "{} {user}: expected admission, got {other:?}",
            event.as_str()
        ),
    }
}

/// precheck with the user's admission token (a deterministic HMAC: the one issue-token gave).
fn precheck(store: &Strict, event: &EventId, user: &str, addr: &str) -> Result<String, Error> {
    let admission =
        seckill_domain::auth::admission_token(ADMISSION_SECRET.as_bytes(), event.as_str(), user);
    sale::precheck(
        store,
        event,
        user,
        addr,
        &admission,
        ADMISSION_SECRET.as_bytes(),
    )
    .map(|t| t.purchase_token)
}

/// The code of a refusal (a success fails the test).
fn refused<T: Debug>(what: &str, result: Result<T, Error>) -> &'static str {
    match result {
        Ok(v) => panic!("{what}: expected a refusal, got {v:?}"),
        Err(e) => e.code().as_str(),
    }
}

fn config(sku: &str, stock: u64, shards: u32, extra: serde_json::Value) -> EventConfig {
    let now = clock::now_ms();
    let mut c = json!({
        "sku": sku, "stock": stock, "shards": shards,
        "start_ms": now - 60_000, "end_ms": now + 3_600_000,
        // No per-user limit by default: it must not decide who buys.
        "user_rate": 0.0,
    });
    c.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    serde_json::from_value(c).unwrap()
}

#[test]
fn every_script_runs_on_a_three_master_cluster_with_single_node_outcomes() -> Result<()> {
    let started = Instant::now();
    let cluster = ClusterNodes::start(3)?;
    let client = ClusterClient::new(cluster.urls())?;
    let store = Strict {
        inner: NativeStore::new(client.get_connection()?),
        ran: Default::default(),
    };
    let events: Vec<EventId> = EVENTS.iter().map(|e| EventId::parse(e).unwrap()).collect();
    let users: Vec<String> = (0..USERS).map(|u| format!("user-{u}")).collect();

    // Set-up: create (then update: same config, not created again), warm up once.
    for (i, event) in events.iter().enumerate() {
        // Odd events also run every buy through the event-wide bucket (generous: never empty).
        let extra = if i % 2 == 1 {
            json!({"buy_rate": 1e6, "buy_burst": 1_000_000})
        } else {
            json!({})
        };
        let cfg = config(&format!("sku-{i}"), STOCK, SHARDS[i], extra);
        assert!(admin::upsert_event(&store, event, &cfg)?);
        assert!(!admin::upsert_event(&store, event, &cfg)?);
        let warmed = admin::warm_up(&store, event)?;
        assert_eq!((warmed.stock, warmed.shards), (STOCK, SHARDS[i]));
        assert_eq!(
            refused("second warm-up", admin::warm_up(&store, event)),
            "conflict"
        );
    }

    // The events really are spread: each master owns some of them.
    let mut owner = HashMap::new();
    for event in &events {
        owner.insert(
            event.as_str().to_owned(),
            cluster.owner(&EventKeys::new(event).cfg())?,
        );
    }
    let masters: HashSet<u16> = owner.values().copied().collect();
    assert_eq!(masters.len(), 3, "events per master: {owner:?}");

    // Admission for everyone (cap 10 × stock = 500), idempotent.
    for user in &users {
        for event in &events {
            admit(&store, event, user);
        }
    }
    assert_eq!(
        admit(&store, &events[0], &users[0]),
        admit(&store, &events[0], &users[0])
    );

    // Deny lists, pause and live limits, on every event.
    let mallory = "mallory";
    for (i, event) in events.iter().enumerate() {
        let deny = DenyList {
            users: vec![mallory.into()],
            addrs: vec!["10.6.6.6".into()],
        };
        admin::deny(&store, event, &deny)?;
        admit(&store, event, mallory);
        assert_eq!(
            refused("denied user", precheck(&store, event, mallory, "127.0.0.1")),
            "denied"
        );
        assert_eq!(
            refused(
                "denied addr",
                precheck(&store, event, &users[0], "10.6.6.6")
            ),
            "denied"
        );

        let pause = Switches {
            enabled: Some(false),
            ..Default::default()
        };
        admin::set_switches(&store, event, &pause)?;
        assert_eq!(
            refused("paused", precheck(&store, event, &users[0], "127.0.0.1")),
            "sale_paused"
        );
        let resume = Switches {
            enabled: Some(true),
            ..Default::default()
        };
        admin::set_switches(&store, event, &resume)?;
        if i % 2 == 0 {
            // Even events run prechecks through the per-user buckets (generous: never empty).
            let limits = Switches {
                user_rate: Some(1000.0),
                user_burst: Some(1000),
                ..Default::default()
            };
            admin::set_switches(&store, event, &limits)?;
        }
    }

    // Every user gets a purchase token for every event before anyone buys.
    let mut tokens = HashMap::new();
    for user in &users {
        for event in &events {
            let token =
                precheck(&store, event, user, "127.0.0.1").unwrap_or_else(|e| panic!("{e}"));
            tokens.insert((event.as_str(), user.as_str()), token);
        }
    }

    // Buying, events interleaved so that consecutive scripts go to different masters.
    let mut orders: HashMap<(&str, &str), String> = HashMap::new();
    for (u, user) in users.iter().enumerate() {
        if u == USERS / 4 {
            // Mid-sale, every master forgets its scripts: the next EVALSHA on each gets NOSCRIPT
            // and the store falls back to EVAL, which caches the script again on that master.
            for port in cluster.ports() {
                let _: () = node_query(port, redis::cmd("SCRIPT").arg("FLUSH"))?;
            }
            assert_eq!(cluster.has_script(&scripts::BUY), [false; 3]);
        }
        for (i, event) in events.iter().enumerate() {
            let token = &tokens[&(event.as_str(), user.as_str())];
            let result = sale::buy(&store, event, user, token, clock::now_ms());
            if (u as u64) >= STOCK {
                assert_eq!(refused("buy after the last unit", result), "sold_out");
                continue;
            }
            let accepted = result.unwrap_or_else(|e| panic!("{} {user}: {e}", event.as_str()));
            assert_eq!(accepted.position, u as u64 + 1);
            assert!(accepted.shard < SHARDS[i], "{accepted:?}");
            // Again, by the same user (same purchase token or a new precheck): refused, naming
            // their order; after the last unit, because the sale is sold out.
            let last = u as u64 + 1 == STOCK;
            let again = [
                precheck(&store, event, user, "127.0.0.1").map(drop),
                sale::buy(&store, event, user, token, clock::now_ms()).map(drop),
            ];
            for e in again.into_iter().map(|r| r.expect_err("a second purchase")) {
                if last {
                    assert_eq!(e.code().as_str(), "sold_out", "{e}");
                } else {
                    assert_eq!(e.code().as_str(), "already_bought", "{e}");
                    assert!(e.reason().contains(&accepted.order_id), "{e}");
                }
            }
            orders.insert((event.as_str(), user.as_str()), accepted.order_id);
        }
        if u == USERS / 4 {
            assert_eq!(
                cluster.has_script(&scripts::BUY),
                [true; 3],
                "EVAL after NOSCRIPT"
            );
        }
    }

    // poll agrees, for buyers and everyone else. Nothing is drained, so a buyer's place in the
    // queue is still their place in the sale.
    for (u, user) in users.iter().enumerate() {
        for event in &events {
            let polled = sale::poll(&store, event, user, 0)?.result;
            match orders.get(&(event.as_str(), user.as_str())) {
                Some(order) => assert!(
                    matches!(&polled, PollResult::Queued { order_id, position, .. }
                        if order_id == order && *position == u as u64 + 1),
                    "{polled:?}"
                ),
                None => assert_eq!(polled, PollResult::SoldOut),
            }
        }
    }

    // Same end state as on one node: every shard at 0, `stock` orders, one per user.
    let all_orders: HashSet<&String> = orders.values().collect();
    assert_eq!(
        all_orders.len(),
        events.len() * STOCK as usize,
        "order ids are unique"
    );
    for (i, event) in events.iter().enumerate() {
        let st = admin::status(&store, event)?;
        assert_eq!(
            st.stock_by_shard,
            vec![0; SHARDS[i] as usize],
            "{}",
            event.as_str()
        );
        assert_eq!(
            (st.stock_left, st.sold, st.queued),
            (0, STOCK as i64, STOCK as i64)
        );
        assert_eq!(
            (st.admitted, st.registrants, st.drained),
            (USERS as i64 + 1, 0, 0)
        );
        let info = sale::event_info(&store, event)?;
        assert_eq!(
            (info.stock, info.stock_left, info.sold_out),
            (STOCK, 0, true),
            "{}",
            event.as_str()
        );
        assert_eq!(st.config["soldout"], "1");
        let k = EventKeys::new(event);
        assert_eq!(store.query::<i64>(&["HLEN", &k.bought()]), STOCK as i64);
        for ((e, user), order) in orders.iter().filter(|((e, _), _)| *e == event.as_str()) {
            let state: String = store.query(&["HGET", &k.orders(), order]);
            assert!(
                state.starts_with("queued|"),
                "order {order} of {e}: {state}"
            );
            let bought: String = store.query(&["HGET", &k.bought(), user]);
            assert_eq!(&bought, order);
        }
    }

    // A lottery event: register, draw once, winners buy.
    let lucky = EventId::parse("lucky-draw").unwrap();
    let cfg = config(
        "sku-lucky",
        5,
        2,
        json!({"admission_mode": "lottery", "admission_multiplier": 2}),
    );
    admin::upsert_event(&store, &lucky, &cfg)?;
    admin::warm_up(&store, &lucky)?;
    let fans: Vec<String> = (0..30).map(|u| format!("fan-{u}")).collect();
    for fan in fans.iter().chain([&fans[0]]) {
        let admission = sale::issue_token(&store, &lucky, fan, ADMISSION_SECRET.as_bytes())?;
        assert_eq!(admission, Admission::Registered);
    }
    // The draw is paged (3 winners per script call here): the first page closes registration,
    // registrants not drawn yet keep waiting, and the rest of the pages finish the draw.
    let lk = EventKeys::new(&lucky);
    let first = scripts::draw::run(&store, &lk, 3)?;
    assert_eq!(
        (first.winners, first.done),
        (3, false),
        "one page of 3, not done"
    );
    let waiting = fans
        .iter()
        .find(|f| store.query::<i64>(&["SISMEMBER", &lk.registrants(), f]) == 1)
        .expect("27 registrants are still waiting");
    assert_eq!(
        sale::issue_token(&store, &lucky, waiting, ADMISSION_SECRET.as_bytes())?,
        Admission::Registered
    );
    assert_eq!(
        refused(
            "registration closed",
            sale::issue_token(&store, &lucky, "latecomer", ADMISSION_SECRET.as_bytes())
        ),
        "not_selected"
    );
    assert_eq!(admin::draw(&store, &lucky, 3)?, 10);
    assert_eq!(
        refused("second draw", admin::draw(&store, &lucky, 3)),
        "conflict"
    );
    let mut winners = Vec::new();
    for fan in &fans {
        match sale::issue_token(&store, &lucky, fan, ADMISSION_SECRET.as_bytes()) {
            Ok(Admission::Admitted { .. }) => winners.push(fan),
            other => assert_eq!(refused("not drawn", other), "not_selected"),
        }
    }
    assert_eq!(winners.len(), 10);
    let tokens: Vec<String> = winners
        .iter()
        .map(|w| precheck(&store, &lucky, w, "127.0.0.1").unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut bought = 0;
    for (winner, token) in winners.iter().zip(&tokens) {
        match sale::buy(&store, &lucky, winner, token, clock::now_ms()) {
            Ok(_) => bought += 1,
            other => assert_eq!(refused("lottery buy", other), "sold_out"),
        }
    }
    assert_eq!(bought, 5);
    let st = admin::status(&store, &lucky)?;
    assert_eq!(
        (st.stock_left, st.sold, st.admitted, st.registrants),
        (0, 5, 10, 30)
    );
    owner.insert(
        lucky.as_str().to_owned(),
        cluster.owner(&EventKeys::new(&lucky).cfg())?,
    );

    // The order pipeline's scripts (drain, state mirror, reconcile) on the same cluster.
    let registry = seckill_domain::keys::REGISTRY.to_owned();
    owner.insert("registry".into(), cluster.owner(&registry)?);
    let listed = scripts::list_events::run(&store)?;
    assert_eq!(
        listed.len(),
        events.len() + 1,
        "every event (and the lottery) is registered"
    );
    let k = EventKeys::new(&events[0]);
    let Claim::Held(lease) = scripts::drain_claim::run(&store, &k, "tester", 5_000)? else {
        bail!("the lease is free");
    };
    let lease = format!("tester|{}", lease.fence);
    let limits = drain_read::Limits {
        batch: 100,
        reclaim_idle_ms: 60_000,
        max_deliveries: 5,
    };
    let entries = drain_read::run(&store, &k, &lease, limits)?.context("the lease is ours")?;
    assert_eq!(entries.len(), 50, "every accepted order is in the queue");
    let confirm: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.id.as_str(), e.order.as_str()))
        .collect();
    scripts::drain_failed::run(&store, &k, &[(confirm[0].0, "test")])?;
    assert_eq!(scripts::drain_confirm::run(&store, &k, &confirm)?, 50);
    assert!(scripts::drain_release::run(&store, &k, &lease)?);
    let expired =
        scripts::set_order_status::run(&store, &k, Final::Expired, &[confirm[0].1.to_owned()])?;
    assert_eq!(expired, 1, "one unit back in its shard");
    let books = scripts::reconcile_read::run(&store, &k)?;
    assert_eq!(
        (
            books.initial_stock,
            books.remaining,
            books.accepted,
            books.drained
        ),
        (50, 1, 50, 50)
    );
    // Paged with HSCAN, 7 orders a call: every order comes back, with its status.
    let (mut cursor, mut seen) = ("0".to_owned(), BTreeSet::new());
    loop {
        let page = scripts::reconcile_orders::run(&store, &k, &cursor, 7)?;
        for (order, status) in page.orders {
            assert_ne!(status, "missing");
            seen.insert(order);
        }
        cursor = page.cursor;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 50, "every order with its status");

    // Every key written lives with its event: tagged, on the master owning the tag's slot.
    for port in cluster.ports() {
        let keys: Vec<String> = node_query(port, redis::cmd("KEYS").arg("*"))?;
        assert!(!keys.is_empty(), "master {port} holds no keys");
        for key in keys {
            let event = key
                .strip_prefix("{sk:")
                .and_then(|k| k.split_once("}:"))
                .map(|(e, _)| e)
                .unwrap_or_else(|| panic!("untagged key {key}"));
            assert_eq!(owner.get(event), Some(&port), "{key} on master {port}");
        }
    }

    // And every script in shared/lua/ ran at least once, here, on the cluster.
    let lua: BTreeSet<String> = std::fs::read_dir(repo_root().join("shared/lua"))?
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".lua").map(str::to_owned))
        .filter(|f| f != "common")
        .collect();
    let ran: BTreeSet<String> = store.ran.borrow().iter().map(|s| s.to_string()).collect();
    assert_eq!(ran, lua, "scripts run on the cluster vs shared/lua/");

    eprintln!("cluster sale test took {:?}", started.elapsed());
    Ok(())
}
