//! Which Redis node holds which slot.
//!
//! `redis_url` may list several independent Redis nodes, comma-separated (standalone nodes,
//! Upstash databases). Each stock shard of an event is a slot of its own (`{sk:E/s}`), dealt
//! out over the nodes in rounds ranked by rendezvous hashing of (event, round, node)
//! ([`index_for_shard`]), so one event spans every node evenly; the event's own slot (`{sk:E}`:
//! the master configuration and the storefront's summary) and the registry's go by their
//! names alone. A node's identity is its `host:port`, not its credentials, so rotating a
//! password moves nothing. Changing the node list moves most shards: the list stays fixed
//! while events hold stock. (A Redis Cluster places keys by its own slot hash and answers
//! `MOVED` elsewhere, which Spin's Redis interface does not follow: list its primaries as
//! independent nodes only if each owns every slot it is sent — ARCHITECTURE.md.)

use std::cell::{OnceCell, RefCell};

use crate::error::{Dependency, Error};
use crate::event::EventId;
use crate::ids::hash64;
use crate::scripts::ScriptError;
use crate::store::{Store, StoreError};

/// An error that may say a node did not answer: Redis could not be reached, timed out or was
/// not ready (a transient store error, however it is wrapped). A refusal or a reply of the
/// wrong shape means the node answered. The one rule [`Nodes::on_shard`] marks nodes down by.
pub trait NodeFailure {
    /// Whether the node did not answer.
    fn node_down(&self) -> bool;
}

impl NodeFailure for StoreError {
    fn node_down(&self) -> bool {
        self.is_transient()
    }
}

impl NodeFailure for ScriptError {
    fn node_down(&self) -> bool {
        matches!(self, ScriptError::Store(e) if e.node_down())
    }
}

/// A domain error says so as the transient store error it was made from (see
/// `From<StoreError> for Error`).
impl NodeFailure for Error {
    fn node_down(&self) -> bool {
        matches!(
            self,
            Error::Unavailable {
                dependency: Dependency::Redis,
                ..
            }
        )
    }
}

/// The node URLs listed in `redis_url`, in order.
pub fn parse(urls: &str) -> Vec<&str> {
    urls.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect()
}

/// A node's identity: its URL without scheme, credentials, path or query (`host:port`).
fn identity(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// The index in `urls` of the node that holds `event`.
pub fn index_for(event: &EventId, urls: &[&str]) -> usize {
    (0..urls.len())
        .max_by_key(|&i| hash64(&[event.as_str(), identity(urls[i])]))
        .unwrap_or(0)
}

/// The index in `urls` of the node that holds shard `shard` of an event ([`crate::sharded`]).
/// The shards are dealt out in rounds of one per node: round `r` (shards `r·N … r·N + N − 1`)
/// goes to the nodes in the order rendezvous hashing of (event, round, node) ranks them. So
/// every node holds ⌊S/N⌋ or ⌈S/N⌉ of an event's S shards — each node's share of a hot event
/// within one shard of even, where ranking each shard alone would leave it to chance (a binomial
/// spread: with 128 shards on 4 nodes, some node is more than 15 % off most of the time) — and
/// different events and rounds start on different nodes. It costs N hashes a request. Changing
/// the node list moves most shards: nodes are fixed while events hold stock.
pub fn index_for_shard(event: &EventId, shard: u32, urls: &[&str]) -> usize {
    let n = urls.len().max(1);
    let round = (shard as usize / n).to_string();
    let mut ranked: Vec<usize> = (0..urls.len()).collect();
    ranked
        .sort_by_key(|&i| std::cmp::Reverse(hash64(&[event.as_str(), &round, identity(urls[i])])));
    ranked.get(shard as usize % n).copied().unwrap_or(0)
}

/// The nodes of `redis_url`, each opened the first time a request needs it: a sale request
/// opens only its home shard's node (real Spin opens a new connection per `open`), the
/// scheduled jobs walk them all. A node that cannot be reached is remembered as down, so the
/// jobs still serve the shards and events of the others.
pub struct Nodes<S> {
    nodes: Vec<(String, OnceCell<Result<S, String>>)>,
    open: Opener<S>,
    /// Nodes a call found unreachable during this request: not tried again by it (a dead node
    /// costs its connect timeout once per request, not once per shard it holds).
    down: RefCell<Vec<usize>>,
}

/// How a node is opened, from its URL (a failure is remembered as the node being down).
type Opener<S> = Box<dyn Fn(&str) -> Result<S, String>>;

impl<S: Store> Nodes<S> {
    /// The nodes in `urls`, to be opened with `open`.
    pub fn open<E: std::fmt::Display>(
        urls: &str,
        open: impl Fn(&str) -> Result<S, E> + 'static,
    ) -> Self {
        Nodes {
            nodes: parse(urls)
                .into_iter()
                .map(|u| (u.to_owned(), OnceCell::new()))
                .collect(),
            open: Box::new(move |u| open(u).map_err(|e| e.to_string())),
            down: RefCell::default(),
        }
    }

    /// One node, already open: every slot on it (a single-node deployment, the unit tests).
    pub fn one(store: S) -> Self {
        Nodes {
            nodes: vec![("local".to_owned(), OnceCell::from(Ok(store)))],
            open: Box::new(|_| Err("a single node is opened already".to_owned())),
            down: RefCell::default(),
        }
    }

    fn urls(&self) -> Vec<&str> {
        self.nodes.iter().map(|(u, _)| u.as_str()).collect()
    }

    /// Node `i`, opened now if it was not yet (errors name nodes by place: URLs may carry
    /// passwords).
    fn node(&self, i: usize) -> Result<&S, StoreError> {
        let (url, cell) = self
            .nodes
            .get(i)
            .ok_or_else(|| StoreError::failed("redis_url lists no node"))?;
        if self.down.borrow().contains(&i) {
            return Err(StoreError::unreachable(format!(
                "node {i} is down: it failed earlier in this request"
            )));
        }
        cell.get_or_init(|| (self.open)(url))
            .as_ref()
            .map_err(|e| StoreError::unreachable(format!("node {i} is down: {e}")))
    }

    /// The node holding `event`'s own slot (its master configuration and registry entry).
    pub fn for_event(&self, event: &EventId) -> Result<&S, StoreError> {
        self.node(index_for(event, &self.urls()))
    }

    /// The node holding shard `shard` of `event`.
    pub fn for_shard(&self, event: &EventId, shard: u32) -> Result<&S, StoreError> {
        self.node(index_for_shard(event, shard, &self.urls()))
    }

    /// Runs `f` on the node holding shard `shard` of `event`. A node that does not answer
    /// ([`NodeFailure`]) is remembered as down for the rest of this request, so walks over
    /// every shard (the jobs, a refill) pay a dead node's timeout once.
    pub fn on_shard<'n, T, E: NodeFailure + From<StoreError>>(
        &'n self,
        event: &EventId,
        shard: u32,
        f: impl FnOnce(&'n S) -> Result<T, E>,
    ) -> Result<T, E> {
        f(self.for_shard(event, shard)?).inspect_err(|e| {
            if e.node_down() {
                let i = index_for_shard(event, shard, &self.urls());
                self.down.borrow_mut().push(i);
            }
        })
    }

    /// How many nodes `redis_url` lists.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether `redis_url` lists no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node, or why it is down.
    pub fn all(&self) -> impl Iterator<Item = Result<&S, StoreError>> {
        (0..self.nodes.len()).map(|i| self.node(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_holds_an_even_share_of_an_events_shards() {
        let urls = [
            "redis://a:1",
            "redis://b:1",
            "redis://c:1",
            "redis://d:1",
            "redis://e:1",
        ];
        for event in ["hot", "cold", "e-42"] {
            let e = EventId::parse(event).unwrap();
            for nodes in 1..=urls.len() {
                for shards in [1u32, 7, 32, 128, 256] {
                    let mut per_node = vec![0u32; nodes];
                    for s in 0..shards {
                        per_node[index_for_shard(&e, s, &urls[..nodes])] += 1;
                    }
                    let (min, max) = (per_node.iter().min(), per_node.iter().max());
                    assert!(
                        max.unwrap() - min.unwrap() <= 1,
                        "{event}, {shards} shards on {nodes} nodes: {per_node:?}"
                    );
                }
            }
        }
        // Events and rounds start on different nodes: not every event's shard 0 on node 0.
        let firsts: std::collections::HashSet<usize> = (0..50)
            .map(|i| index_for_shard(&EventId::parse(&format!("e{i}")).unwrap(), 0, &urls))
            .collect();
        assert_eq!(firsts.len(), urls.len());
    }

    #[test]
    fn identity_is_host_and_port() {
        assert_eq!(identity("redis://10.0.0.1:6379"), "10.0.0.1:6379");
        assert_eq!(identity("rediss://u:p@r.example:6380/0"), "r.example:6380");
        assert_eq!(identity("redis://:secret@h:1?protocol=resp3"), "h:1");
    }

    #[test]
    fn events_spread_over_nodes_and_stay_put_when_one_is_added() {
        let three = ["redis://a:1", "redis://b:1", "redis://c:1"];
        let four = ["redis://a:1", "redis://b:1", "redis://c:1", "redis://d:1"];
        let events: Vec<EventId> = (0..3000)
            .map(|i| EventId::parse(&format!("e{i}")).unwrap())
            .collect();
        let mut per_node = [0usize; 3];
        let mut moved = 0;
        for e in &events {
            let i = index_for(e, &three);
            per_node[i] += 1;
            let j = index_for(e, &four);
            // An event either stays or moves to the new node, never between old ones.
            assert!(j == i || j == 3, "{} moved from {i} to {j}", e.as_str());
            moved += usize::from(j == 3);
        }
        for n in per_node {
            assert!((900..=1100).contains(&n), "uneven spread {per_node:?}");
        }
        assert!(
            (600..=900).contains(&moved),
            "{moved} of 3000 moved to the 4th node"
        );
        // A password in the URL does not move anything.
        let e = &events[0];
        let with_auth = ["redis://:pw@a:1", "redis://b:1", "redis://c:1"];
        assert_eq!(index_for(e, &three), index_for(e, &with_auth));
        assert_eq!(
            parse(" redis://a:1 , ,redis://b:1"),
            ["redis://a:1", "redis://b:1"]
        );
    }
}
