//! Creating an event is two script calls on two slots (the event's configuration and the
//! registry the scheduled jobs walk). Whichever of them fails, no configured event may be left
//! out of the registry: the drain would never visit its orders. Native, over a real Redis.

use anyhow::Result;
use seckill_domain::admin;
use seckill_domain::event::{EventConfig, EventId};
use seckill_domain::keys::{MasterKeys, REGISTRY};
use seckill_domain::nodes::Nodes;
use seckill_domain::scripts;
use seckill_domain::store::{Replies, Store, StoreError};
use seckill_native::NativeStore;
use seckill_testkit::RedisServer;
use serde_json::json;

/// A real store whose connection is lost exactly when one script is about to run.
struct LostOn<S> {
    inner: S,
    script: &'static str,
}

impl<S: Store> Store for LostOn<S> {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        if scripts::by_sha(sha).is_some_and(|s| s.name == self.script) {
            return Err(StoreError::unreachable("connection lost (injected)"));
        }
        self.inner.evalsha(sha, keys, args)
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        self.inner.eval(source, keys, args)
    }
}

#[test]
fn a_configured_event_is_always_registered() -> Result<()> {
    let redis = RedisServer::start()?;
    let config: EventConfig = serde_json::from_value(json!({
        "sku": "sku", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 5, "start_ms": 0, "end_ms": 4_000_000_000_000u64
    }))?;
    let mut conn = redis.client().get_connection()?;
    for script in ["register_event", "upsert_event"] {
        let event = EventId::parse(&format!("half-{script}"))?;
        let store = LostOn {
            inner: NativeStore::new(redis.client().get_connection()?),
            script,
        };
        assert!(admin::upsert_event(&Nodes::one(store), &event, &config).is_err());
        let configured: bool = redis::cmd("EXISTS")
            .arg(MasterKeys::new(&event).cfg())
            .query(&mut conn)?;
        let registered: bool = redis::cmd("SISMEMBER")
            .arg(REGISTRY)
            .arg(event.as_str())
            .query(&mut conn)?;
        assert!(
            registered || !configured,
            "{script} failed: a configured event the jobs cannot find"
        );
        // And the retry completes the creation.
        let store = NativeStore::new(redis.client().get_connection()?);
        assert!(admin::upsert_event(&Nodes::one(store), &event, &config)?.0);
    }
    Ok(())
}

/// An operator's configuration write reads the configuration before and after it: none before
/// a new event, then each change with what it was.
#[test]
fn configuring_an_event_reads_its_configuration_before_and_after() -> Result<()> {
    let redis = RedisServer::start()?;
    let nodes = Nodes::one(NativeStore::new(redis.client().get_connection()?));
    let event = EventId::parse("configured")?;
    let config = |amount: u64| -> Result<EventConfig> {
        Ok(serde_json::from_value(json!({
            "sku": "sku", "unit_amount": amount, "currency": "eur", "pow_difficulty": 0,
            "admission_addr_rate": 0, "stock": 5, "start_ms": 0, "end_ms": 4_000_000_000_000u64
        }))?)
    };
    let created = admin::configure(&nodes, &event, &config(100)?)?;
    assert!(created.created && created.before.is_none());
    let amount = |c: &Option<admin::Config>| c.as_ref().and_then(|c| c.get("unit_amount").cloned());
    assert_eq!(amount(&created.after).as_deref(), Some("100"));
    let updated = admin::configure(&nodes, &event, &config(250)?)?;
    assert!(!updated.created);
    assert_eq!(
        (amount(&updated.before), amount(&updated.after)),
        (Some("100".to_owned()), Some("250".to_owned()))
    );
    assert_eq!(updated.shards, created.shards);
    Ok(())
}
