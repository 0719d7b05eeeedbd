//! The key schema and every Lua script on a real Redis Cluster: three masters started here on
//! loopback, driven natively through redis-rs's cluster client (Spin's Redis interface has no
//! cluster support), which routes each script by its first key. Every event is sharded: each
//! stock shard `s` of event `E` is a slot of its own, `{sk:E/s}`, and the event's own slot
//! `{sk:E}` holds its master configuration. It proves that
//!
//! - no script touches keys of two slots (no CROSSSLOT, no "non local key"): every key lives on
//!   the master that owns its tag's slot, and one event's shards spread over every master;
//! - the sale has the same outcomes as on a single node: exactly `stock` accepted per event,
//!   the rest `sold_out` (after "try again" while the buy's tail learns which shards are
//!   empty), one order per user, at its home shard, every shard drained to 0, repeat buys
//!   refused;
//! - EVALSHA falls back to EVAL after `SCRIPT FLUSH` on every master (as after a failover);
//! - the lottery, the order pipeline and the stock transfers between shards (a buy's tail,
//!   repair, rebalance, a released unit sold on another shard) run there too: every script in
//!   `crates/domain/lua/` runs on the cluster.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use redis::cluster::{ClusterClient, ClusterConnection};
use seckill_domain::admin::{self, DenyList};
use seckill_domain::error::ErrorCode;
use seckill_domain::event::{EventConfig, EventId, Switches};
use seckill_domain::keys::{MasterKeys, OrderStatus, REGISTRY, RefundState, ShardKeys};
use seckill_domain::nodes::Nodes;
use seckill_domain::sale::{self, Accepted, Admission, PollResult};
use seckill_domain::scripts;
use seckill_domain::scripts::drain_claim::{Claim, Holder, Lease};
use seckill_domain::scripts::drain_read;
use seckill_domain::scripts::set_order_status::Final;
use seckill_domain::sharded::EventShards;
use seckill_domain::sharded::transfer::{self, Repaired};
use seckill_domain::store::{Replies, Store, StoreError, StoreErrorKind};
use seckill_domain::{Error, clock, ids};
use seckill_native::NativeStore;
use seckill_testkit::{ADMISSION_SECRET, free_port, repo_root};
use serde_json::json;

const STOCK: u64 = 50;
/// More buyers than units, so that most are refused.
const USERS: usize = 120;
/// Shards per sale event: one, some, more than half the stock (many shards of 1 or 2 units).
const SHARDS: [u32; 6] = [1, 8, 32, 1, 8, 32];
/// Their own slots (CRC16 of `sk:flash-<i>`) fall on all three masters' ranges, two per master.
const EVENTS: [&str; 6] = [
    "flash-0", "flash-1", "flash-2", "flash-3", "flash-4", "flash-5",
];
/// How often a buyer asks again while the buy's tail answers "try again". A tail rules out up to
/// two empty shards per ask, so 32 shards need at most 16.
const RETRIES: usize = 64;

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

    /// Forgets every master's command statistics (`CONFIG RESETSTAT`).
    fn reset_stats(&self) -> Result<()> {
        for port in self.ports() {
            let _: () = node_query(port, redis::cmd("CONFIG").arg("RESETSTAT"))?;
        }
        Ok(())
    }

    /// The EVAL commands each master ran since its statistics were reset.
    fn eval_calls(&self) -> Result<Vec<u64>> {
        self.ports()
            .map(|p| {
                let info: String = node_query(p, redis::cmd("INFO").arg("commandstats"))?;
                Ok(info
                    .lines()
                    .find_map(|l| l.strip_prefix("cmdstat_eval:calls="))
                    .and_then(|rest| rest.split(',').next())
                    .map_or(Ok(0), str::parse)?)
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
/// message (the domain would turn it into a bland `unavailable`), and recording which scripts ran
/// and which were sent by source.
struct Strict {
    inner: NativeStore<ClusterConnection>,
    ran: RefCell<BTreeSet<&'static str>>,
    /// Scripts sent with EVAL (a master answered NOSCRIPT to their EVALSHA).
    sent: RefCell<BTreeSet<&'static str>>,
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
        self.sent.borrow_mut().insert(name);
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

    /// One field of a hash.
    fn hget(&self, key: &str, field: &str) -> Option<String> {
        self.query(&["HGET", key, field])
    }
}

/// The tag of a key, `sk:E` of `{sk:E}:cfg`: what Redis Cluster hashes to its slot.
fn tag_of(key: &str) -> Option<&str> {
    key.strip_prefix('{')?.split_once('}').map(|(tag, _)| tag)
}

/// The master owning each tag's slot: `sk:E`, `sk:E/s`, `sk:registry`.
#[derive(Default)]
struct Owners(HashMap<String, u16>);

impl Owners {
    /// Records (and returns) the owner of `key`'s tag.
    fn record(&mut self, cluster: &ClusterNodes, key: &str) -> Result<u16> {
        let tag = tag_of(key).with_context(|| format!("untagged key {key}"))?;
        let port = cluster.owner(key)?;
        self.0.insert(tag.to_owned(), port);
        Ok(port)
    }

    /// Records the owners of `ev`'s own slot and of each of its shards' slots; returns the
    /// masters its shards live on.
    fn event(&mut self, cluster: &ClusterNodes, ev: &Ev) -> Result<HashSet<u16>> {
        self.record(cluster, &MasterKeys::new(&ev.id).cfg())?;
        (0..ev.shards)
            .map(|s| self.record(cluster, &ev.keys(s).cfg()))
            .collect()
    }
}

/// The whole cluster as one "node" of the domain: the cluster client sends each script to the
/// master owning its first key's slot, so every shard's slot is served where it lives.
type Cluster<'s> = Nodes<&'s Strict>;

/// The client address every precheck comes from (none is denied but `10.6.6.6`).
const ADDR: &str = "127.0.0.1";

/// One event of the test, and the sale as a buyer goes through it (always with the event's
/// true shard count, but where a test says otherwise).
struct Ev {
    id: EventId,
    shards: u32,
}

impl Ev {
    fn new(id: &str, shards: u32) -> Self {
        Ev {
            id: EventId::parse(id).unwrap(),
            shards,
        }
    }

    fn name(&self) -> &str {
        self.id.as_str()
    }

    /// `user`'s home shard: where all of their requests run.
    fn home(&self, user: &str) -> u32 {
        ids::home_shard(self.name(), user, self.shards)
    }

    /// The first user `<prefix>-<i>` homed on `shard`.
    fn homed_on(&self, prefix: &str, shard: u32) -> String {
        (0..)
            .map(|i| format!("{prefix}-{i}"))
            .find(|u| self.home(u) == shard)
            .expect("endless")
    }

    /// The keys of shard `shard`'s slot.
    fn keys(&self, shard: u32) -> ShardKeys {
        ShardKeys::new(&self.id, shard)
    }

    fn event<'a, 's>(&'a self, nodes: &'a Cluster<'s>) -> EventShards<'a, &'s Strict> {
        EventShards::new(nodes, &self.id, self.shards)
    }

    /// Units left in each shard.
    fn stocks(&self, nodes: &Cluster) -> Result<Vec<u64>> {
        Ok(transfer::stocks(&self.event(nodes))?)
    }

    fn issue(&self, nodes: &Cluster, user: &str) -> Result<Admission, Error> {
        sale::issue_token(
            nodes,
            &sale::AdmissionRequest {
                event: &self.id,
                shards: self.shards,
                user,
                client: Some("127.0.0.1"),
                solution: None,
            },
            ADMISSION_SECRET.as_bytes(),
            clock::now_ms(),
        )
    }

    fn admit(&self, nodes: &Cluster, user: &str) -> String {
        match self.issue(nodes, user) {
            Ok(Admission::Admitted { admission_token }) => admission_token,
            other => panic!("{} {user}: expected admission, got {other:?}", self.name()),
        }
    }

    /// precheck with the user's admission token (a deterministic HMAC of the event's terms:
    /// the one issue-token gave).
    fn precheck(&self, nodes: &Cluster, user: &str, addr: &str) -> Result<String, Error> {
        let terms = sale::admission_terms(nodes, &self.id)?;
        let admission = seckill_domain::auth::admission_token(
            ADMISSION_SECRET.as_bytes(),
            self.name(),
            user,
            &terms,
        );
        sale::precheck(
            nodes,
            &sale::PrecheckRequest {
                event: &self.id,
                shards: self.shards,
                user,
                client: Some(addr.parse().expect("an IP address")),
                admission_token: &admission,
            },
            ADMISSION_SECRET.as_bytes(),
            clock::now_ms(),
        )
        .map(|t| t.purchase_token)
    }

    /// buy, asked again with the same purchase token while it answers "try again"
    /// (`unavailable`: the tail found its candidate shards empty while others may still hold
    /// stock; any Redis error fails the test in [`Strict`], so no other `unavailable` comes
    /// here): the first other answer.
    fn buy(&self, nodes: &Cluster, user: &str, token: &str) -> Result<sale::Bought, Error> {
        for _ in 0..RETRIES {
            match sale::buy(nodes, &self.id, self.shards, user, token, clock::now_ms()) {
                Err(e) if e.code() == ErrorCode::Unavailable => continue,
                answer => return answer,
            }
        }
        panic!(
            "{} {user}: still \"try again\" after {RETRIES} buys",
            self.name()
        )
    }
}

/// The code of a refusal (a success fails the test).
fn refused<T: Debug>(what: &str, result: Result<T, Error>) -> &'static str {
    match result {
        Ok(v) => panic!("{what}: expected a refusal, got {v:?}"),
        Err(e) => e.code().as_str(),
    }
}

/// The same buyer again, with a new precheck and with their spent purchase token: refused,
/// naming their order — or sold out, which their home shard may say first once no unit is left
/// (`sold_out_ok`; never while one is).
fn refused_again(
    nodes: &Cluster,
    ev: &Ev,
    user: &str,
    token: &str,
    order: &str,
    sold_out_ok: bool,
) {
    let again = [
        ("precheck again", ev.precheck(nodes, user, ADDR).map(drop)),
        ("buy again", ev.buy(nodes, user, token).map(drop)),
    ];
    for (what, result) in again {
        let e = result.expect_err(what);
        match e.code() {
            ErrorCode::AlreadyBought => assert!(e.reason().contains(order), "{what} {user}: {e}"),
            ErrorCode::SoldOut if sold_out_ok => {}
            _ => panic!("{what} {user} of {}: {e}", ev.name()),
        }
    }
}

/// One pass of the order pipeline over shard `shard` of `ev`: claim the drain lease, read every
/// queued entry, note a failure on the first, confirm them all, release the lease. Returns the
/// lease as claimed (with the units the shard held then) and the entries.
fn drain(store: &Strict, ev: &Ev, shard: u32) -> Result<(Lease, Vec<drain_read::Entry>)> {
    let k = ev.keys(shard);
    let Claim::Held(lease) = scripts::drain_claim::run(store, &k, "tester", 5_000)? else {
        bail!(
            "expected the drain lease of {} shard {shard} free",
            ev.name()
        );
    };
    let held = Holder {
        owner: "tester",
        fence: lease.fence,
    };
    let limits = drain_read::Limits {
        batch: 100,
        reclaim_idle_ms: 60_000,
        max_deliveries: 5,
    };
    let entries = drain_read::run(store, &k, held, limits)?.context("the lease is ours")?;
    let confirm: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.id.as_str(), e.order.as_str()))
        .collect();
    if let Some(&(first, _)) = confirm.first() {
        scripts::drain_failed::run(store, &k, &[(first, "test")])?;
    }
    assert_eq!(
        scripts::drain_confirm::run(store, &k, &confirm)?,
        entries.len() as u64
    );
    assert!(scripts::drain_release::run(store, &k, held)?);
    Ok((lease, entries))
}

fn config(sku: &str, stock: u64, shards: u32, extra: serde_json::Value) -> EventConfig {
    let now = clock::now_ms();
    let mut c = json!({
        "sku": sku, "unit_amount": 100, "currency": "eur", "stock": stock, "shards": shards,
        "start_ms": now - 60_000, "end_ms": now + 3_600_000,
        // No per-user or per-address limit and no proof of work by default: they must not
        // decide who buys.
        "user_rate": 0.0, "admission_addr_rate": 0, "pow_difficulty": 0,
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
        sent: Default::default(),
    };
    let nodes: Cluster = Nodes::one(&store);
    let sales: Vec<Ev> = EVENTS
        .iter()
        .zip(SHARDS)
        .map(|(e, n)| Ev::new(e, n))
        .collect();
    let users: Vec<String> = (0..USERS).map(|u| format!("user-{u}")).collect();

    // Set-up: create (then update: same config, not created again), warm up once.
    for (i, ev) in sales.iter().enumerate() {
        // Odd events also run every buy through the event-wide bucket (generous: never empty).
        let extra = if i % 2 == 1 {
            json!({"buy_rate": 1e6, "buy_burst": 1_000_000})
        } else {
            json!({})
        };
        let cfg = config(&format!("sku-{i}"), STOCK, ev.shards, extra);
        assert!(admin::upsert_event(&nodes, &ev.id, &cfg)?.0);
        assert!(!admin::upsert_event(&nodes, &ev.id, &cfg)?.0);
        let warmed = admin::warm_up(&nodes, &ev.id)?;
        assert_eq!((warmed.stock, warmed.shards), (STOCK, ev.shards));
        assert_eq!(
            refused("second warm-up", admin::warm_up(&nodes, &ev.id)),
            "conflict"
        );
        // Each shard admits its part of 10 × stock, split exactly as the stock is.
        let (cap, n) = (10 * STOCK, u64::from(ev.shards));
        for s in 0..ev.shards {
            let part = cap / n + u64::from(u64::from(s) < cap % n);
            let held = store.hget(&ev.keys(s).cfg(), "admission_cap");
            assert_eq!(held, Some(part.to_string()), "{} shard {s}", ev.name());
        }
    }

    // The events really are spread: each master owns some of their own slots, and the shards
    // of one 32-shard event live on every master.
    let mut owners = Owners::default();
    let mut event_masters = HashSet::new();
    for ev in &sales {
        event_masters.insert(owners.record(&cluster, &MasterKeys::new(&ev.id).cfg())?);
        let shard_masters = owners.event(&cluster, ev)?;
        if ev.shards == 32 {
            assert_eq!(shard_masters.len(), 3, "{}'s shards", ev.name());
        }
    }
    assert_eq!(event_masters.len(), 3, "events per master: {:?}", owners.0);

    // Admission for everyone (each shard's cap is far above its buyers), idempotent.
    for user in &users {
        for ev in &sales {
            ev.admit(&nodes, user);
        }
    }
    assert_eq!(
        sales[0].admit(&nodes, &users[0]),
        sales[0].admit(&nodes, &users[0])
    );
    // A proof-of-work challenge reads the difficulty at the user's home shard.
    let challenge = sale::admission_challenge(
        &nodes,
        &sales[0].id,
        sales[0].shards,
        &users[0],
        ADMISSION_SECRET.as_bytes(),
        clock::now_ms(),
    )?;
    assert_eq!(
        challenge.difficulty, 0,
        "the cluster's events ask no proof of work"
    );

    // Deny lists, pause and live limits, on every event (every shard of it).
    let mallory = "mallory";
    for (i, ev) in sales.iter().enumerate() {
        let deny = DenyList {
            users: vec![mallory.into()],
            addrs: vec!["10.6.6.6".into()],
        };
        admin::deny(&nodes, &ev.id, &deny)?;
        ev.admit(&nodes, mallory);
        assert_eq!(
            refused("denied user", ev.precheck(&nodes, mallory, ADDR)),
            "denied"
        );
        assert_eq!(
            refused("denied addr", ev.precheck(&nodes, &users[0], "10.6.6.6")),
            "denied"
        );

        let pause = Switches {
            enabled: Some(false),
            ..Default::default()
        };
        admin::set_switches(&nodes, &ev.id, &pause)?;
        assert_eq!(
            refused("paused", ev.precheck(&nodes, &users[0], ADDR)),
            "sale_paused"
        );
        let resume = Switches {
            enabled: Some(true),
            ..Default::default()
        };
        admin::set_switches(&nodes, &ev.id, &resume)?;
        if i % 2 == 0 {
            // Even events run prechecks through the per-user buckets (generous: never empty).
            let limits = Switches {
                user_rate: Some(1000.0),
                user_burst: Some(1000),
                ..Default::default()
            };
            admin::set_switches(&nodes, &ev.id, &limits)?;
        }
    }

    // Every user gets a purchase token for every event before anyone buys.
    let mut tokens = HashMap::new();
    for user in &users {
        for (i, ev) in sales.iter().enumerate() {
            let token = ev
                .precheck(&nodes, user, ADDR)
                .unwrap_or_else(|e| panic!("{e}"));
            tokens.insert((i, user.as_str()), token);
        }
    }

    // Buying, events interleaved so that consecutive scripts go to different masters. The
    // first `STOCK` buyers of each event get a unit each, at their home shard (lent to it by
    // another shard when it is empty: the tail); everyone after them hears sold out.
    let mut orders: HashMap<(usize, &str), Accepted> = HashMap::new();
    // Per event: buys that took the tail (a unit lent to their home shard by another).
    let mut tails = vec![0; sales.len()];
    for (u, user) in users.iter().enumerate() {
        if u == USERS / 4 {
            // Mid-sale, every master forgets its scripts: the next EVALSHA on each gets NOSCRIPT
            // and the store falls back to EVAL, which caches the script again on that master.
            cluster.reset_stats()?;
            for port in cluster.ports() {
                let _: () = node_query(port, redis::cmd("SCRIPT").arg("FLUSH"))?;
            }
            assert_eq!(cluster.has_script(&scripts::BUY), [false; 3]);
            store.sent.borrow_mut().clear();
        }
        for (i, ev) in sales.iter().enumerate() {
            let token = &tokens[&(i, user.as_str())];
            let result = ev.buy(&nodes, user, token);
            if (u as u64) >= STOCK {
                assert_eq!(refused("buy after the last unit", result), "sold_out");
                continue;
            }
            let bought = result.unwrap_or_else(|e| panic!("{} {user}: {e}", ev.name()));
            match bought.round_trips {
                1 => {}
                3..=seckill_domain::sale::MAX_BUY_ROUND_TRIPS => tails[i] += 1,
                n => panic!("{} {user}: a buy of {n} round trips", ev.name()),
            }
            let accepted = bought.accepted;
            assert_eq!(accepted.shard, ev.home(user), "sold at home: {accepted:?}");
            assert!(accepted.position >= 1, "{accepted:?}");
            // Again, by the same user, right away (same purchase token or a new precheck):
            // refused, naming their order; after the last unit, maybe as sold out.
            let last = u as u64 + 1 == STOCK;
            refused_again(&nodes, ev, user, token, &accepted.order_id, last);
            orders.insert((i, user.as_str()), accepted);
        }
    }
    // Since the flush, every master was sent (EVAL) the source of the scripts it ran, each
    // once at most, and holds buy.lua again.
    let sent = store.sent.borrow().len() as u64;
    let evals = cluster.eval_calls()?;
    assert!(
        evals.iter().all(|&n| (1..=sent).contains(&n)),
        "EVALs per master {evals:?}, of {sent} scripts"
    );
    assert_eq!(
        cluster.has_script(&scripts::BUY),
        [true; 3],
        "EVAL after NOSCRIPT"
    );

    // poll agrees, for buyers and everyone else. A third of the polls come with too few
    // shards (1: the slot reached answers with the event's count), a third with one too many
    // (a slot past the last has no configuration: the master has the count); both find home.
    // Nothing is drained, so a buyer's place in their home shard's queue is still their place
    // in its sale.
    for (u, user) in users.iter().enumerate() {
        for (i, ev) in sales.iter().enumerate() {
            let shards = [ev.shards, 1, ev.shards + 1][u % 3];
            let polled = sale::poll(&nodes, &ev.id, shards, user, 0)?;
            assert_eq!(polled.shard, ev.home(user));
            match orders.get(&(i, user.as_str())) {
                Some(a) => assert!(
                    matches!(&polled.result, PollResult::Queued { order_id, position, .. }
                        if *order_id == a.order_id && *position == a.position),
                    "{polled:?}"
                ),
                // No order: sold out, as their home shard sees it (or not yet: its beliefs
                // that the other shards are empty expire).
                None => assert!(
                    matches!(polled.result, PollResult::SoldOut | PollResult::None),
                    "{user}: {polled:?}"
                ),
            }
        }
    }

    // Queue positions are per home shard: the orders of one shard hold 1, 2, … in its queue.
    for (i, ev) in sales.iter().enumerate() {
        let mut by_shard: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for (_, a) in orders.iter().filter(|((e, _), _)| *e == i) {
            by_shard.entry(a.shard).or_default().push(a.position);
        }
        for (shard, mut positions) in by_shard {
            positions.sort_unstable();
            let expected: Vec<u64> = (1..=positions.len() as u64).collect();
            assert_eq!(positions, expected, "{} shard {shard}", ev.name());
        }
    }

    // Same end state as on one node: every shard at 0, `stock` orders, one per user, each in
    // its buyer's home shard.
    let order_ids: HashSet<&String> = orders.values().map(|a| &a.order_id).collect();
    assert_eq!(
        order_ids.len(),
        sales.len() * STOCK as usize,
        "order ids are unique"
    );
    for (i, ev) in sales.iter().enumerate() {
        let name = ev.name();
        let e = ev.event(&nodes);
        // The storefront's summary, as the drain writes it; every shard empty, it tells every
        // shard so: anyone without an order hears sold out at once, wherever their home.
        transfer::summarize(&e, &transfer::stocks(&e)?)?;
        for user in &users[STOCK as usize..] {
            let polled = sale::poll(&nodes, &ev.id, ev.shards, user, 0)?.result;
            assert_eq!(polled, PollResult::SoldOut, "{name} {user}");
        }
        let st = admin::status(&nodes, &ev.id)?;
        assert_eq!(
            st.event.stock_by_shard,
            vec![0; ev.shards as usize],
            "{name}"
        );
        assert_eq!(
            (st.event.stock_left, st.event.sold, st.event.queued),
            (0, STOCK as i64, STOCK as i64),
            "{name}"
        );
        assert_eq!(
            (st.event.admitted, st.event.registrants, st.event.drained),
            (USERS as i64 + 1, 0, 0),
            "{name}"
        );
        assert!(st.versions_agree, "{name}");
        assert_eq!(st.event.config["soldout"], "1", "{name}");
        let info = sale::event_info(&nodes, &ev.id)?;
        assert_eq!(
            (info.stock, info.stock_left, info.sold_out),
            (STOCK, 0, true),
            "{name}"
        );
        let per_shard = |key: fn(&ShardKeys) -> String| -> i64 {
            (0..ev.shards)
                .map(|s| store.query::<i64>(&["HLEN", &key(&ev.keys(s))]))
                .sum()
        };
        assert_eq!(per_shard(ShardKeys::bought), STOCK as i64, "{name}");
        assert_eq!(per_shard(ShardKeys::orders), STOCK as i64, "{name}");
        for ((_, user), a) in orders.iter().filter(|((e, _), _)| *e == i) {
            let k = ev.keys(ev.home(user));
            let state = store.hget(&k.orders(), &a.order_id);
            let expected = format!("queued|{}|{}", a.shard, a.position);
            assert_eq!(state, Some(expected), "order {} of {name}", a.order_id);
            assert_eq!(store.hget(&k.bought(), user).as_ref(), Some(&a.order_id));
            // Again, after the sale: refused, naming the order, or sold out.
            let token = &tokens[&(i, *user)];
            refused_again(&nodes, ev, user, token, &a.order_id, true);
        }
        // Every tail's transfer is recorded at its lender until the repair settles it; each
        // tail credited its unit itself, so the repair credits none, and repeats nothing.
        let repaired = transfer::repair(&e, 0)?;
        let settled = Repaired {
            credited: 0,
            settled: tails[i],
            unreachable: 0,
        };
        assert_eq!(repaired, settled, "{name}");
        assert_eq!(transfer::repair(&e, 0)?, Repaired::default(), "{name}");
        assert_eq!(ev.stocks(&nodes)?, vec![0; ev.shards as usize], "{name}");
    }
    assert!(
        tails[2] > 0,
        "32 shards of 1 or 2 units: some buys take the tail"
    );

    // The order pipeline's scripts (drain, state mirror, reconcile) on shard slots: a drain
    // pass over the one shard of flash-0 and over every shard of flash-2, each shard's queue
    // holding exactly the orders of its buyers.
    for i in [0, 2] {
        let ev = &sales[i];
        let mut drained = 0;
        for s in 0..ev.shards {
            let (lease, entries) = drain(&store, ev, s)?;
            assert_eq!(
                (lease.sku, lease.stock, lease.left),
                (format!("sku-{i}"), STOCK as i64, 0)
            );
            let queued: BTreeSet<(&str, &str, i64)> = entries
                .iter()
                .map(|e| {
                    assert_eq!(e.shard, i64::from(s), "{e:?}");
                    (e.user.as_str(), e.order.as_str(), e.seq)
                })
                .collect();
            let sold: BTreeSet<(&str, &str, i64)> = orders
                .iter()
                .filter(|((e, user), _)| *e == i && ev.home(user) == s)
                .map(|((_, user), a)| (*user, a.order_id.as_str(), a.position as i64))
                .collect();
            assert_eq!(queued, sold, "{} shard {s}", ev.name());
            drained += entries.len();
        }
        assert_eq!(
            drained, STOCK as usize,
            "every accepted order is in a queue"
        );
    }
    // Paged with HSCAN, 7 orders a call: every order of flash-0 comes back, confirmed.
    let k = sales[0].keys(0);
    let (mut cursor, mut seen) = ("0".to_owned(), BTreeSet::new());
    loop {
        let page = scripts::reconcile_orders::run(&store, &k, &cursor, 7)?;
        for (order, status) in page.orders {
            assert_eq!(status, OrderStatus::Confirmed, "{order}");
            seen.insert(order);
        }
        cursor = page.cursor;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), STOCK as usize, "every order with its status");
    // A transfer lent to this shard and not credited here counts as units in transit.
    let lent = scripts::shard_lent::Transfer {
        id: "t-never-credited".into(),
        to: 0,
        units: 3,
    };
    let books = scripts::reconcile_read::run(&store, &k, &[&lent])?;
    assert_eq!(
        (books.initial_stock, books.remaining, books.accepted),
        (STOCK as i64, 0, STOCK as i64)
    );
    assert_eq!((books.drained, books.dead_letters), (STOCK as i64, 0));
    assert_eq!(books.in_transit, 3);

    // A released unit goes back to its shard, once, and every shard learns it has stock again
    // (as orders::mirror does): a buyer homed elsewhere, refused sold out before, now gets it
    // through the tail.
    let ev = &sales[2];
    let busiest = (0..ev.shards)
        .max_by_key(|&s| {
            orders
                .keys()
                .filter(|(e, u)| *e == 2 && ev.home(u) == s)
                .count()
        })
        .unwrap();
    let ((_, owner), expired) = orders
        .iter()
        .find(|((e, u), _)| *e == 2 && ev.home(u) == busiest)
        .unwrap();
    let k = ev.keys(busiest);
    let expire = [expired.order_id.clone()];
    assert_eq!(
        scripts::set_order_status::run(&store, &k, Final::Expired, &expire)?,
        1,
        "one unit back in its shard"
    );
    assert_eq!(
        scripts::set_order_status::run(&store, &k, Final::Expired, &expire)?,
        0,
        "once"
    );
    assert_eq!(transfer::refilled(&ev.event(&nodes), busiest), ev.shards);
    let books = scripts::reconcile_read::run(&store, &k, &[])?;
    let on_busiest = orders
        .keys()
        .filter(|(e, u)| *e == 2 && ev.home(u) == busiest)
        .count() as i64;
    assert_eq!(
        (books.remaining, books.accepted, books.drained),
        (1, on_busiest, on_busiest)
    );
    let (lease, entries) = drain(&store, ev, busiest)?;
    assert_eq!((lease.left, entries.len()), (1, 0));
    let polled = sale::poll(&nodes, &ev.id, ev.shards, owner, 0)?.result;
    let expected = PollResult::Order {
        order_id: expired.order_id.clone(),
        state: OrderStatus::Expired,
        refund: None,
    };
    assert_eq!(polled, expected);
    // The refund job tells the buyer's poll, in the order's shard slot.
    assert!(scripts::set_refund::run(
        &store,
        &k,
        &expired.order_id,
        RefundState::Refunded,
        1
    )?);
    assert!(!scripts::set_refund::run(
        &store,
        &k,
        "no-such-order",
        RefundState::Pending,
        1
    )?);
    let polled = sale::poll(&nodes, &ev.id, ev.shards, owner, 0)?.result;
    assert_eq!(
        polled,
        PollResult::Order {
            order_id: expired.order_id.clone(),
            state: OrderStatus::Expired,
            refund: Some(sale::Refund {
                state: RefundState::Refunded,
                payments: 1
            }),
        }
    );
    // The jobs route's lease, in the registry's slot: one holder at a time, handed back.
    assert_eq!(
        scripts::job_lease::take(&store, "reconcile", "a", 60_000)?,
        Ok(())
    );
    let held = scripts::job_lease::take(&store, "reconcile", "b", 60_000)?;
    assert!(
        matches!(held, Err(ms) if ms > 0 && ms <= 60_000),
        "{held:?}"
    );
    scripts::job_lease::give(&store, "reconcile", "b")?;
    assert!(scripts::job_lease::take(&store, "reconcile", "b", 60_000)?.is_err());
    scripts::job_lease::give(&store, "reconcile", "a")?;
    assert_eq!(
        scripts::job_lease::take(&store, "reconcile", "b", 60_000)?,
        Ok(())
    );
    scripts::job_lease::give(&store, "reconcile", "b")?;
    // The public health summary, shared in the registry's slot for its window.
    assert_eq!(scripts::health::read(&store)?, None);
    scripts::health::store(&store, "{\"ok\":true}", 60_000)?;
    assert_eq!(
        scripts::health::read(&store)?.as_deref(),
        Some("{\"ok\":true}")
    );
    let late = users[STOCK as usize..]
        .iter()
        .find(|u| ev.home(u) != busiest)
        .unwrap();
    let token = ev.precheck(&nodes, late, ADDR)?;
    let resold = ev.buy(&nodes, late, &token)?;
    assert_eq!(resold.accepted.shard, ev.home(late));
    assert!((3..=4).contains(&resold.round_trips), "{resold:?}");
    assert_eq!(ev.stocks(&nodes)?, vec![0; ev.shards as usize]);
    let settled = Repaired {
        credited: 0,
        settled: 1,
        unreachable: 0,
    };
    assert_eq!(transfer::repair(&ev.event(&nodes), 0)?, settled);

    let drift = stock_moves_between_shards(&nodes)?;
    owners.event(&cluster, &drift)?;
    let lucky = lottery(&store, &nodes)?;
    owners.event(&cluster, &lucky)?;

    // The registry, in a slot of its own.
    owners.record(&cluster, REGISTRY)?;
    let listed: BTreeSet<String> = scripts::list_events::run(&store)?
        .into_iter()
        .map(|(id, _archived)| id)
        .collect();
    let created: BTreeSet<String> = sales
        .iter()
        .chain([&drift, &lucky])
        .map(|ev| ev.name().to_owned())
        .collect();
    assert_eq!(listed, created, "every event is registered");
    // An operator's archive flag lives beside the registry, in its slot.
    let archived = &lucky.id;
    assert!(!scripts::archive_event::run(&store, archived, true)?);
    let flagged: Vec<String> = scripts::list_events::run(&store)?
        .into_iter()
        .filter_map(|(id, on)| on.then_some(id))
        .collect();
    assert_eq!(flagged, [archived.as_str()]);
    assert!(scripts::archive_event::run(&store, archived, false)?);

    // Every key written lives with its event: tagged, on the master owning the tag's slot
    // (the event's own slot, or one of its shards').
    for port in cluster.ports() {
        let keys: Vec<String> = node_query(port, redis::cmd("KEYS").arg("*"))?;
        assert!(!keys.is_empty(), "master {port} holds no keys");
        for key in keys {
            let tag = tag_of(&key).unwrap_or_else(|| panic!("untagged key {key}"));
            assert_eq!(owners.0.get(tag), Some(&port), "{key} on master {port}");
        }
    }

    // And every script in crates/domain/lua/ ran at least once, here, on the cluster.
    let lua: BTreeSet<String> = std::fs::read_dir(repo_root().join("crates/domain/lua"))?
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".lua").map(str::to_owned))
        .collect();
    let ran: BTreeSet<String> = store.ran.borrow().iter().map(|s| s.to_string()).collect();
    assert_eq!(ran, lua, "scripts run on the cluster vs crates/domain/lua/");

    eprintln!("cluster sale test took {:?}", started.elapsed());
    Ok(())
}

/// Stock moving between the shards of an event, exactly: a transfer, a tail cut short after
/// its lend (the unit in transit until the repair credits it, once), a rebalance.
fn stock_moves_between_shards(nodes: &Cluster) -> Result<Ev> {
    let drift = Ev::new("drifting", 8);
    admin::upsert_event(nodes, &drift.id, &config("sku-drift", 40, 8, json!({})))?;
    admin::warm_up(nodes, &drift.id)?;
    let e = drift.event(nodes);
    assert_eq!(drift.stocks(nodes)?, [5; 8]);
    assert_eq!(
        transfer::transfer(&e, 0, 1, 9)?,
        5,
        "a shard lends what it has"
    );
    assert!(transfer::drifted(&drift.stocks(nodes)?));
    let (lender, k) = e.slot(2)?;
    for _ in 0..2 {
        // Lent once, whatever the replays.
        let lent = scripts::shard_lend::run(lender, &k, "cut-short", 0, 1)?;
        assert_eq!((lent.lent, lent.left), (1, 4));
    }
    assert_eq!(drift.stocks(nodes)?, [0, 10, 4, 5, 5, 5, 5, 5]);
    let repaired = Repaired {
        credited: 1,
        settled: 1,
        unreachable: 0,
    };
    assert_eq!(transfer::repair(&e, 0)?, repaired);
    assert_eq!(transfer::repair(&e, 0)?, Repaired::default());
    assert_eq!(drift.stocks(nodes)?, [1, 10, 4, 5, 5, 5, 5, 5]);
    assert_eq!(transfer::transfer(&e, 3, 1, 5)?, 5);
    assert!(transfer::drifted(&drift.stocks(nodes)?));
    assert_eq!(transfer::maintain(&e, 0)?, (Repaired::default(), 10));
    assert_eq!(drift.stocks(nodes)?, [5; 8]);
    assert!(!transfer::drifted(&drift.stocks(nodes)?));
    transfer::summarize(&e, &drift.stocks(nodes)?)?;
    let info = sale::event_info(nodes, &drift.id)?;
    assert_eq!(
        (info.stock, info.stock_left, info.sold_out),
        (40, 40, false)
    );
    Ok(drift)
}

/// A lottery event: register, draw once, winners buy. Each shard draws its own part
/// (admission cap 5 × 2 / 2 = 5) from its own registrants.
fn lottery(store: &Strict, nodes: &Cluster) -> Result<Ev> {
    let lucky = Ev::new("lucky-draw", 2);
    let cfg = config(
        "sku-lucky",
        5,
        2,
        json!({"admission_mode": "lottery", "admission_multiplier": 2}),
    );
    admin::upsert_event(nodes, &lucky.id, &cfg)?;
    admin::warm_up(nodes, &lucky.id)?;
    let fans: Vec<String> = (0..30).map(|u| format!("fan-{u}")).collect();
    for fan in fans.iter().chain([&fans[0]]) {
        assert_eq!(lucky.issue(nodes, fan)?, Admission::Registered);
    }
    // The draw allots the 10 winners to the shards as a uniform draw over all 30 fans would
    // (admin::lottery_quotas, from each shard's registrants), then pages (3 winners per script
    // call here): on the shard with the most to draw, the first page closes registration,
    // registrants not drawn yet keep waiting, and the rest of the pages (and the other
    // shard's) finish the draw.
    let on = |s: u32| -> Vec<&String> { fans.iter().filter(|f| lucky.home(f) == s).collect() };
    let pools = [on(0).len() as u64, on(1).len() as u64];
    let quotas = admin::lottery_quotas(&lucky.id, &pools, 10);
    assert_eq!(quotas.iter().sum::<u64>(), 10, "{quotas:?}");
    let big = if quotas[0] >= quotas[1] { 0 } else { 1 };
    assert!(quotas[big as usize] > 3, "more than one page: {quotas:?}");
    let k = lucky.keys(big);
    let first = scripts::draw::run(store, &k, 3, quotas[big as usize])?;
    assert_eq!(
        (first.winners, first.done),
        (3, false),
        "one page of 3, not done"
    );
    let waiting = on(big)
        .into_iter()
        .find(|f| store.query::<i64>(&["SISMEMBER", &k.registrants(), f]) == 1)
        .expect("registrants of the shard are still waiting");
    assert_eq!(lucky.issue(nodes, waiting)?, Admission::Registered);
    let latecomer = lucky.homed_on("latecomer", big);
    assert_eq!(
        refused("registration closed", lucky.issue(nodes, &latecomer)),
        "not_selected"
    );
    assert_eq!(admin::draw(nodes, &lucky.id, 3)?, 10);
    assert_eq!(
        refused("second draw", admin::draw(nodes, &lucky.id, 3)),
        "conflict"
    );
    let mut winners = Vec::new();
    for fan in &fans {
        match lucky.issue(nodes, fan) {
            Ok(Admission::Admitted { .. }) => winners.push(fan),
            other => assert_eq!(refused("not drawn", other), "not_selected"),
        }
    }
    assert_eq!(winners.len(), 10);
    for s in 0..2 {
        let drawn = winners.iter().filter(|w| lucky.home(w) == s).count() as u64;
        assert_eq!(drawn, quotas[s as usize], "shard {s} admits its allotment");
    }
    let tokens: Vec<String> = winners
        .iter()
        .map(|w| {
            lucky
                .precheck(nodes, w, ADDR)
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    let mut bought = 0;
    for (winner, token) in winners.iter().zip(&tokens) {
        match lucky.buy(nodes, winner, token) {
            Ok(_) => bought += 1,
            other => assert_eq!(refused("lottery buy", other), "sold_out"),
        }
    }
    assert_eq!(bought, 5);
    let st = admin::status(nodes, &lucky.id)?.event;
    assert_eq!(
        (st.stock_left, st.sold, st.admitted, st.registrants),
        (0, 5, 10, 30)
    );
    Ok(lucky)
}
