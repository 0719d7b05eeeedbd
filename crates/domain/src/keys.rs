//! The Redis key schema. Every key of an event starts with the hash tag `{sk:<event>}`, so one
//! script can touch any of them atomically, on a single Redis or a Redis Cluster alike. Every
//! key a script touches is named here and passed in its KEYS (per-shard and per-order data live
//! in hashes of the event, never in keys a script would have to build).
//!
//! | key | type | what |
//! |---|---|---|
//! | `{sk:E}:cfg` | hash | configuration, switches, `soldout`, `warmed`, `drawn` |
//! | `{sk:E}:stock` | hash | shard index → units left |
//! | `{sk:E}:admitted` / `:registrants` | set | users holding admission / registered for the lottery |
//! | `{sk:E}:deny:users` / `:deny:addrs` | set | deny lists |
//! | `{sk:E}:ptok:<user>` | string, TTL | the user's one-time purchase token |
//! | `{sk:E}:bought` | hash | user → order id (one per user) |
//! | `{sk:E}:orders` | hash | order id → `status|shard|seq` (status: `queued`, `confirmed`, `paid`, `expired`) |
//! | `{sk:E}:queue` | stream | order intents for the drain |
//! | `{sk:E}:seq` / `:drained` | counter | orders accepted / drained |
//! | `{sk:E}:counts` | hash | refusals by reply code; orders `paid` / `expired` (for the console) |
//! | `{sk:E}:rl:user:<user>` / `:rl:buy` | hash, TTL | token buckets (precheck per user, buy per event) |
//! | `{sk:E}:drain:lease` / `:drain:fence` | string, TTL / counter | the drain lease and its fencing tokens |
//! | `{sk:E}:dead` / `:drain:errors` | stream / hash | dead letters; last error per pending entry |
//! | `{sk:E}:drain:nudge` | string, TTL | a poll elected to drain (one per `poll_drain_ms`) |
//! | `{sk:registry}:events` | set | every event, for the scheduled jobs (a slot of its own) |
//! | `{sk:E/s}:…` | | a sharded event's shard `s` ([`crate::sharded`]): the names above, in the shard's own slot, with `cfg` a copy holding `shard` and `version` |
//! | `{sk:E/s}:empty` | hash | shard → until (ms): other shards this one believes empty |
//! | `{sk:E/s}:lent` / `:credited` | hash / set | transfers lent and not settled; transfers credited |
//!
//! Only purchase tokens, rate buckets and the drain's lease and nudge expire; nothing a sale depends on does.

use crate::event::EventId;

/// The keys of one event.
#[derive(Debug, Clone)]
pub struct EventKeys {
    prefix: String,
}

impl EventKeys {
    /// Keys for `event`.
    pub fn new(event: &EventId) -> Self {
        EventKeys {
            prefix: format!("{{sk:{}}}:", event.as_str()),
        }
    }

    /// Keys of stock shard `shard` of a sharded event ([`crate::sharded`]): the same names in a
    /// slot of the shard's own, `{sk:E/s}` (event ids never hold `/`).
    pub fn shard(event: &EventId, shard: u32) -> Self {
        EventKeys {
            prefix: format!("{{sk:{}/{shard}}}:", event.as_str()),
        }
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    /// Configuration hash.
    pub fn cfg(&self) -> String {
        self.key("cfg")
    }
    /// Counters for the console (hash): refusals by reply code, orders `paid` and `expired`.
    pub fn counts(&self) -> String {
        self.key("counts")
    }
    /// Units left per shard (hash: shard index → units).
    pub fn stock(&self) -> String {
        self.key("stock")
    }
    /// Admitted users.
    pub fn admitted(&self) -> String {
        self.key("admitted")
    }
    /// Lottery registrants.
    pub fn registrants(&self) -> String {
        self.key("registrants")
    }
    /// Denied users.
    pub fn denied_users(&self) -> String {
        self.key("deny:users")
    }
    /// Denied client addresses.
    pub fn denied_addrs(&self) -> String {
        self.key("deny:addrs")
    }
    /// A user's purchase token.
    pub fn purchase_token(&self, user: &str) -> String {
        self.key(&format!("ptok:{user}"))
    }
    /// user → order id.
    pub fn bought(&self) -> String {
        self.key("bought")
    }
    /// Every order's state (hash: order id → `status|shard|seq`, one field so a buy writes it
    /// in one command).
    pub fn orders(&self) -> String {
        self.key("orders")
    }
    /// Order intents waiting for the drain.
    pub fn queue(&self) -> String {
        self.key("queue")
    }
    /// Orders accepted so far.
    pub fn seq(&self) -> String {
        self.key("seq")
    }
    /// Orders drained so far.
    pub fn drained(&self) -> String {
        self.key("drained")
    }
    /// A user's precheck bucket.
    pub fn user_bucket(&self, user: &str) -> String {
        self.key(&format!("rl:user:{user}"))
    }
    /// The event's buy bucket.
    pub fn buy_bucket(&self) -> String {
        self.key("rl:buy")
    }
    /// The drain lease.
    pub fn drain_lease(&self) -> String {
        self.key("drain:lease")
    }
    /// The drain's fencing-token counter.
    pub fn drain_fence(&self) -> String {
        self.key("drain:fence")
    }
    /// Set by the poll elected to drain the event; its TTL spaces the poll-carried drains.
    pub fn drain_nudge(&self) -> String {
        self.key("drain:nudge")
    }
    /// Dead letters.
    pub fn dead(&self) -> String {
        self.key("dead")
    }
    /// Last error of each pending entry.
    pub fn drain_errors(&self) -> String {
        self.key("drain:errors")
    }
    /// A shard's beliefs that other shards are empty (hash: shard → until ms).
    pub fn empty(&self) -> String {
        self.key("empty")
    }
    /// Units a shard lent and has not settled (hash: transfer id → `to|units|ms`).
    pub fn lent(&self) -> String {
        self.key("lent")
    }
    /// Transfers a shard was credited with (set of transfer ids): each credits once.
    pub fn credited(&self) -> String {
        self.key("credited")
    }
}

/// Every event, for the scheduled jobs.
pub const REGISTRY: &str = "{sk:registry}:events";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_event_tag() {
        let k = EventKeys::new(&EventId::parse("e1").unwrap());
        for key in [
            k.cfg(),
            k.stock(),
            k.purchase_token("u"),
            k.orders(),
            k.queue(),
            k.buy_bucket(),
        ] {
            assert!(key.starts_with("{sk:e1}:"), "{key}");
        }
    }
}
