//! The Redis key schema. An event's stock shard `s` is a slot of its own: every key of it starts
//! with the hash tag `{sk:E/s}` ([`ShardKeys`]), so one script touches any of them
//! atomically, on a single Redis or a Redis Cluster alike, and different shards live on
//! different nodes ([`crate::nodes`]). The event's own slot `{sk:E}` ([`MasterKeys`]) holds
//! the master configuration and the storefront's summary. Every key a script touches is named
//! here and passed in its KEYS (per-order data lives in hashes, never in keys a script would
//! have to build).
//!
//! | key (in the slot of shard `s`) | type | what |
//! |---|---|---|
//! | `{sk:E/s}:cfg` | hash | a copy of the configuration: `shard`, `version`, the shard's part of the admission cap and buy bucket, switches, `warmed`, `drawn`/`drawing` |
//! | `{sk:E/s}:stock` | hash | `s` → units left in this shard |
//! | `{sk:E/s}:empty` | hash | shard → until (ms): other shards this one believes empty |
//! | `{sk:E/s}:seen` | hash | shard → units it held at the drain's last summary (the tail asks the fuller first) |
//! | `{sk:E/s}:lent` / `:credited` | hash / set | transfers lent and not settled (id → record, `crates/domain/lua/lib/lent.lua`); transfers credited here |
//! | `{sk:E/s}:admitted` / `:registrants` | set | users homed here holding admission / registered for the lottery |
//! | `{sk:E/s}:deny:users` / `:deny:nets` | set | deny lists (a copy in every shard): user ids; address ranges as their bits ([`crate::net`]) |
//! | `{sk:E/s}:deny:net_lens` | set | the prefix lengths `:deny:nets` holds, by family (`4:24`, `6:128`) |
//! | `{sk:E/s}:ptok:<user>` | string, TTL | the user's one-time purchase token |
//! | `{sk:E/s}:bought` | hash | user → order id (one per user: a user only buys at home) |
//! | `{sk:E/s}:orders` | hash | order id → `status|shard|seq` ([`OrderStatus`]) |
//! | `{sk:E/s}:refunds` | hash | order id → `state|payments`: what is paid back to its buyer ([`RefundState`]) |
//! | `{sk:E/s}:queue` | stream | this shard's order intents for the drain |
//! | `{sk:E/s}:seq` / `:drained` | counter | this shard's orders accepted / drained |
//! | `{sk:E/s}:counts` | hash | refusals by reply code; orders `paid` / `expired` (for the console) |
//! | `{sk:E/s}:rl:user:<user>` / `:rl:buy` / `:rl:global` | hash, TTL | token buckets (precheck per user, buy per shard, the shard's part of the global bucket) |
//! | `{sk:E/s}:rl:addr:<addr>` | hash, TTL | a client address's admission bucket |
//! | `{sk:E/s}:pow:<id>` | string, TTL | a solved admission challenge, used once |
//! | `{sk:E/s}:drain:lease` / `:drain:fence` | string, TTL / counter | this shard's drain lease and fencing tokens |
//! | `{sk:E/s}:dead` / `:drain:errors` | stream / hash | dead letters; last error per pending entry |
//! | `{sk:E/s}:drain:nudge` | string, TTL | a poll elected to drain this shard (one per `poll_drain_ms`) |
//! | `{sk:E}:cfg` / `{sk:E}:stock` | hash | the master configuration (`version`; `soldout` when the drain last read every shard at 0); units left per shard as the drain last read them |
//! | `{sk:registry}:events` | set | every event, for the scheduled jobs (a slot of its own, on each node) |
//! | `{sk:registry}:global` | hash | the global bucket across events (`rate`, `burst`): a copy on each node; each live shard's `cfg` holds its part |
//! | `{sk:registry}:job:<job>` | string, TTL | the jobs route's lease of a job: one run at a time across the fleet (on the first node) |
//! | `{sk:registry}:archived` | set | the events an operator archived (out of the console's default list) |
//!
//! Only purchase tokens, rate buckets, challenge marks, the drain's lease and nudge, the jobs'
//! leases, and the beliefs expire; nothing a sale depends on does.

use serde::Serialize;

use crate::event::EventId;

/// An order's state as its shard's `:orders` hash holds it (and poll reports it): queued by the
/// buy, confirmed once drained into Postgres, then paid or expired (final; an expired order's
/// unit went back on sale). The words are the ones the scripts write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Accepted, waiting for the drain.
    Queued,
    /// In Postgres, waiting for payment.
    Confirmed,
    /// Paid.
    Paid,
    /// Not paid in time.
    Expired,
}

impl OrderStatus {
    /// The word the scripts write.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Queued => "queued",
            OrderStatus::Confirmed => "confirmed",
            OrderStatus::Paid => "paid",
            OrderStatus::Expired => "expired",
        }
    }

    /// The status `word` names, if any.
    pub fn parse(word: &str) -> Option<Self> {
        [
            OrderStatus::Queued,
            OrderStatus::Confirmed,
            OrderStatus::Paid,
            OrderStatus::Expired,
        ]
        .into_iter()
        .find(|s| s.as_str() == word)
    }
}

/// Where the money a buyer paid for an order and that paid nothing (a second payment, another
/// amount, a late one) stands, as the shard's `:refunds` hash holds it (and poll reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundState {
    /// Owed or under way at the provider.
    Pending,
    /// Every such payment refunded.
    Refunded,
}

impl RefundState {
    /// The word the scripts write.
    pub fn as_str(self) -> &'static str {
        match self {
            RefundState::Pending => "pending",
            RefundState::Refunded => "refunded",
        }
    }

    /// The state `word` names, if any.
    pub fn parse(word: &str) -> Option<Self> {
        [RefundState::Pending, RefundState::Refunded]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

/// The keys every slot of an event holds, its own and each shard's: scripts that run on any
/// of them (`--- keys(slot):`) take these.
pub trait Slot {
    /// Configuration hash.
    fn cfg(&self) -> String;
    /// Units left per shard (hash: shard index → units): a shard's own, or the master's
    /// summary of all.
    fn stock(&self) -> String;
}

/// The keys of an event's own slot `{sk:E}`: the master configuration and the storefront's
/// summary.
#[derive(Debug, Clone)]
pub struct MasterKeys {
    prefix: String,
}

impl MasterKeys {
    /// The keys of `event`'s own slot.
    pub fn new(event: &EventId) -> Self {
        MasterKeys {
            prefix: format!("{{sk:{}}}:", event.as_str()),
        }
    }

    /// The master configuration hash.
    pub fn cfg(&self) -> String {
        format!("{}cfg", self.prefix)
    }
    /// Units left per shard as the drain last read them, `soldout` when all were 0.
    pub fn stock(&self) -> String {
        format!("{}stock", self.prefix)
    }
}

impl Slot for MasterKeys {
    fn cfg(&self) -> String {
        MasterKeys::cfg(self)
    }
    fn stock(&self) -> String {
        MasterKeys::stock(self)
    }
}

/// The keys of stock shard `s` of an event ([`crate::sharded`]): a slot of the shard's own,
/// `{sk:E/s}` (event ids never hold `/`).
#[derive(Debug, Clone)]
pub struct ShardKeys {
    prefix: String,
}

impl Slot for ShardKeys {
    fn cfg(&self) -> String {
        ShardKeys::cfg(self)
    }
    fn stock(&self) -> String {
        ShardKeys::stock(self)
    }
}

impl ShardKeys {
    /// The keys of `event`'s shard `shard`.
    pub fn new(event: &EventId, shard: u32) -> Self {
        ShardKeys {
            prefix: format!("{{sk:{}/{shard}}}:", event.as_str()),
        }
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    /// Configuration hash (the copy in this shard).
    pub fn cfg(&self) -> String {
        self.key("cfg")
    }
    /// This shard's units left (hash: shard index → units).
    pub fn stock(&self) -> String {
        self.key("stock")
    }
    /// Counters for the console (hash): refusals by reply code, orders `paid` and `expired`.
    pub fn counts(&self) -> String {
        self.key("counts")
    }
    /// This shard's part of the global bucket, across events (hash, TTL).
    pub fn global_bucket(&self) -> String {
        self.key("rl:global")
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
    /// Denied address ranges, as their bit strings ([`crate::net::Cidr::bits`]).
    pub fn denied_nets(&self) -> String {
        self.key("deny:nets")
    }
    /// The prefix lengths [`Self::denied_nets`] holds, each with its family (`4:24`).
    pub fn denied_net_lens(&self) -> String {
        self.key("deny:net_lens")
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
    /// What is paid back to each order's buyer (hash: order id → `state|payments`), for poll.
    pub fn refunds(&self) -> String {
        self.key("refunds")
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
    /// A client address's admission bucket.
    pub fn addr_bucket(&self, addr: &str) -> String {
        self.key(&format!("rl:addr:{addr}"))
    }
    /// The mark of a solved admission challenge, by its id: used once.
    pub fn used_challenge(&self, id: &str) -> String {
        self.key(&format!("pow:{id}"))
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
    /// Units each shard held at the drain's last summary, as a shard's slot saw them (hash:
    /// shard → units): the tail asks the fuller ones first.
    pub fn seen(&self) -> String {
        self.key("seen")
    }
    /// Units a shard lent and has not settled (hash: transfer id → record, `lib/lent.lua`).
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

/// The keys of the registry's slot, a copy on each node (`--- keys(registry):`).
#[derive(Debug, Clone, Copy)]
pub struct Registry;

impl Registry {
    /// Every event ([`REGISTRY`]).
    pub fn registry(&self) -> String {
        REGISTRY.to_owned()
    }
    /// The registered events an operator archived.
    pub fn archived(&self) -> String {
        "{sk:registry}:archived".to_owned()
    }
    /// The global bucket across events (`rate`, `burst`).
    pub fn global_limit(&self) -> String {
        "{sk:registry}:global".to_owned()
    }
    /// The lease of a job run from the jobs route (`drain`, `timeout-release`, `reconcile`):
    /// the run that holds it, until it gives it back or it expires.
    pub fn job_lease(&self, job: &str) -> String {
        format!("{{sk:registry}}:job:{job}")
    }
    /// The public health summary of the last full probe, kept briefly (`lua/health.lua`).
    pub fn health(&self) -> String {
        "{sk:registry}:health".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_status_reads_back_and_serializes_as_the_word_the_scripts_write() {
        for status in [
            OrderStatus::Queued,
            OrderStatus::Confirmed,
            OrderStatus::Paid,
            OrderStatus::Expired,
        ] {
            assert_eq!(OrderStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::json!(status.as_str())
            );
        }
        assert_eq!(OrderStatus::parse("pending_payment"), None);
    }

    #[test]
    fn every_key_carries_its_slots_tag() {
        let e1 = EventId::parse("e1").unwrap();
        let master = MasterKeys::new(&e1);
        for key in [master.cfg(), master.stock()] {
            assert!(key.starts_with("{sk:e1}:"), "{key}");
        }
        let k = ShardKeys::new(&e1, 3);
        for key in [
            k.cfg(),
            k.stock(),
            k.purchase_token("u"),
            k.orders(),
            k.queue(),
            k.buy_bucket(),
        ] {
            assert!(key.starts_with("{sk:e1/3}:"), "{key}");
        }
    }
}
