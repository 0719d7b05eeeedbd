//! The global bucket: the third layer of limits (after each user's and each event's), across
//! every event, so the whole sale site admits at most `rate` prechecks a second.
//!
//! A buyer's precheck touches only their home shard's slot, so the bucket is spread: every
//! shard of every live event holds its part (`global_rate`, `global_burst` in its `cfg`, the
//! tokens in `{sk:E/s}:rl:global`), the limit over the number of such shards. The parts are
//! recomputed whenever the limit or an event changes ([`spread`]); an event that ends keeps its
//! part until then, which only makes the others' parts smaller. Like the event-wide buy bucket,
//! a shard's part is exact and the whole is as exact as buyers spread over the shards.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::event::check_limit;
use crate::keys::{MasterKeys, ShardKeys};
use crate::nodes::Nodes;
use crate::registry;
use crate::scripts::{self, Refusal, ScriptError};
use crate::sharded::EventShards;
use crate::store::Store;

/// The global bucket: `rate` prechecks a second, `burst` at once; rate 0 switches it off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalLimit {
    /// Tokens a second, across events.
    pub rate: f64,
    /// Capacity.
    #[serde(deserialize_with = "crate::json_integer::number")]
    pub burst: u32,
}

/// Where the limit went: its parts, over how many live shards of how many events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// The limit.
    #[serde(flatten)]
    pub limit: GlobalLimit,
    /// Live events (not ended) holding a part.
    pub events: usize,
    /// Their shards.
    pub shards: u64,
}

/// The limit, as the first node reachable holds it (off when never set).
pub fn limit<S: Store>(nodes: &Nodes<S>) -> Result<GlobalLimit, Error> {
    let mut last = None;
    for node in nodes.all() {
        match node
            .map_err(Error::from)
            .and_then(|n| Ok(scripts::global_limit::run(n, None)?))
        {
            Ok((rate, burst)) => return Ok(GlobalLimit { rate, burst }),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::bug("no Redis node")))
}

/// Sets the limit on every node, then spreads it over the live shards.
pub fn set<S: Store>(nodes: &Nodes<S>, limit: &GlobalLimit, now_ms: u64) -> Result<Spread, Error> {
    check_limit("global", limit.rate, limit.burst)?;
    for node in nodes.all() {
        scripts::global_limit::run(node?, Some((limit.rate, limit.burst)))?;
    }
    spread(nodes, now_ms)
}

/// After an event changed: spreads the limit again when it is on (when off, every part is 0
/// since it was set so, and a new event's shards hold none, which is off too).
pub fn respread<S: Store>(nodes: &Nodes<S>, now_ms: u64) -> Result<(), Error> {
    if limit(nodes)?.rate > 0.0 {
        spread(nodes, now_ms)?;
    }
    Ok(())
}

/// Gives every shard of every live event its part of the limit: rate and burst over the
/// number of those shards (a burst part at least 1).
pub fn spread<S: Store>(nodes: &Nodes<S>, now_ms: u64) -> Result<Spread, Error> {
    let limit = limit(nodes)?;
    let mut live = Vec::new();
    for node in nodes.all() {
        for id in registry::events(node?)? {
            let config =
                match scripts::read_config::run(nodes.for_event(&id)?, &MasterKeys::new(&id)) {
                    Err(ScriptError::Refused(Refusal::NotFound)) => continue,
                    config => config?,
                };
            let number = |name: &str| config.get(name).and_then(|v| v.parse::<u64>().ok());
            if let (Some(end_ms), Some(shards)) = (number("end_ms"), number("shards"))
                && end_ms > now_ms
            {
                live.push((id, shards as u32));
            }
        }
    }
    let total: u64 = live.iter().map(|(_, s)| u64::from(*s)).sum();
    let n = total.max(1) as f64;
    let part = vec![
        ("global_rate", (limit.rate / n).to_string()),
        (
            "global_burst",
            (f64::from(limit.burst) / n).ceil().max(1.0).to_string(),
        ),
    ];
    for (id, shards) in &live {
        let e = EventShards::new(nodes, id, *shards);
        for s in e.all() {
            match e.on_slot(s, |store, k: &ShardKeys| {
                scripts::set_fields::run(store, k, part.clone())
            }) {
                // A shard whose copy is gone (an event being re-created) gets its part next time.
                Err(Error::Refused { .. }) => {}
                other => other?,
            }
        }
    }
    Ok(Spread {
        limit,
        events: live.len(),
        shards: total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_may_be_written_as_any_whole_json_number() {
        for body in [
            r#"{"rate":2,"burst":5}"#,
            r#"{"rate":2,"burst":5.0}"#,
            r#"{"rate":2,"burst":5e0}"#,
        ] {
            let l: GlobalLimit = serde_json::from_str(body).unwrap();
            assert_eq!(l.burst, 5, "{body}");
        }
        for body in [r#"{"rate":2,"burst":5.5}"#, r#"{"rate":2,"burst":-5}"#] {
            assert!(serde_json::from_str::<GlobalLimit>(body).is_err(), "{body}");
        }
    }
}
