//! Stock moving between the shards of a sharded event, exactly: a transfer is lent by one
//! shard (`shard_lend.lua`: the units leave it, the transfer is recorded there) and credited by
//! another (`shard_credit.lua`, or the buy's tail in `buy.lua`: the transfer id is
//! remembered, so it credits once), then settled at the lender (`shard_settle.lua`). A crash
//! between the steps leaves a recorded transfer that [`repair`] finishes; repeating any step
//! changes nothing. Between lend and credit a unit is in transit: counted by [`stocks`]' caller
//! as `in_transit`, never lost.
//!
//! Why it is exact: every step is one script; a lend is idempotent by id, a credit by `credited`,
//! and a credit lands whatever the buy becomes. A unit lent but never credited stays recorded at
//! its lender; `transfer::repair` (each timeout release, and a repairing reconcile) credits it
//! home once, then settles it. A buyer whose last reply was lost hears `already_bought`.
//! `transfer::rebalance` (when `transfer::drifted`) moves leftovers the same way.

use serde::Serialize;

use super::EventShards;
use crate::error::Error;
use crate::ids;
use crate::scripts::{self, shard_credit, shard_lend, shard_lent, shard_refilled, shard_settle};
use crate::store::Store;

/// What a repair did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Repaired {
    /// Units credited that a tail cut short had left in transit.
    pub credited: u64,
    /// Transfers settled (credited by now, forgotten by their lender).
    pub settled: u64,
    /// Shards that could not be reached (their transfers wait for the next repair).
    pub unreachable: u32,
}

/// Finishes every transfer lent at least `min_age_ms` ago: credits it to its receiver (a no-op
/// when the buy's tail did), tells every shard the receiver has stock when it did credit, and
/// settles it at the lender.
pub fn repair<S: Store>(e: &EventShards<'_, S>, min_age_ms: u64) -> Result<Repaired, Error> {
    let mut done = Repaired::default();
    for lender in e.all() {
        let lent = match e.on_slot(lender, |store, k| shard_lent::run(store, k, min_age_ms)) {
            Ok(lent) => lent,
            Err(err) if err.is_transient() => {
                done.unreachable += 1;
                continue;
            }
            Err(err) => return Err(err),
        };
        let mut settled = Vec::new();
        for t in lent {
            match e.on_slot(t.to, |store, k| shard_credit::run(store, k, &t.id, t.units)) {
                Ok(credited) => {
                    if credited {
                        done.credited += t.units;
                        refilled(e, t.to);
                    }
                    settled.push(t.id);
                }
                Err(err) if err.is_transient() => done.unreachable += 1,
                Err(err) => return Err(err),
            }
        }
        if !settled.is_empty() {
            done.settled += settled.len() as u64;
            e.on_slot(lender, |store, k| shard_settle::run(store, k, &settled))?;
        }
    }
    Ok(done)
}

/// Tells every shard it can reach that `shard` has stock again: none believes it empty, so
/// none answers sold out. Best effort: a shard on a node that is down keeps its belief until it
/// expires (`EMPTY_BELIEF_MS`); returns how many shards were told.
pub fn refilled<S: Store>(e: &EventShards<'_, S>, shard: u32) -> u32 {
    e.all()
        .filter(|&s| {
            e.on_slot(s, |store, k| shard_refilled::run(store, k, shard))
                .is_ok()
        })
        .count() as u32
}

/// Units left in each shard (one read each).
pub fn stocks<S: Store>(e: &EventShards<'_, S>) -> Result<Vec<u64>, Error> {
    e.all()
        .map(|s| {
            let (store, k) = e.slot(s)?;
            Ok(scripts::event_info::run(store, &k)?.stock_left)
        })
        .collect()
}

/// Whether shards drifted apart enough to rebalance: the fullest holds more than one unit over
/// the emptiest and more than twice its share — or some shard is empty while another has two.
pub fn drifted(stocks: &[u64]) -> bool {
    let (Some(&max), Some(&min)) = (stocks.iter().max(), stocks.iter().min()) else {
        return false;
    };
    let mean = stocks.iter().sum::<u64>() as f64 / stocks.len() as f64;
    max > min + 1 && (max as f64 > 2.0 * mean.max(1.0) || (min == 0 && max >= 2))
}

/// Moves leftover stock from the fullest shards to the emptiest until each holds its share
/// (± 1), with the transfer steps above; returns the units moved. Safe during a sale: a lender
/// lends at most what it has at that instant.
pub fn rebalance<S: Store>(e: &EventShards<'_, S>) -> Result<u64, Error> {
    let mut stock = stocks(e)?;
    let total: u64 = stock.iter().sum();
    let n = stock.len() as u64;
    let share = |s: usize| total / n + u64::from((s as u64) < total % n);
    let mut moved = 0;
    for to in 0..stock.len() {
        while stock[to] < share(to) {
            let Some(from) = (0..stock.len()).find(|&s| stock[s] > share(s)) else {
                return Ok(moved);
            };
            let units = (share(to) - stock[to]).min(stock[from] - share(from));
            let got = transfer(e, from as u32, to as u32, units)?;
            stock[from] -= units;
            stock[to] += got;
            moved += got;
        }
    }
    Ok(moved)
}

/// One transfer of up to `units` from `from` to `to`: lend, credit, settle; the units moved.
pub fn transfer<S: Store>(
    e: &EventShards<'_, S>,
    from: u32,
    to: u32,
    units: u64,
) -> Result<u64, Error> {
    let id = ids::random_hex(8);
    let (from_store, from_k) = e.slot(from)?;
    let lent = shard_lend::run(from_store, &from_k, &id, to, units)?.lent;
    if lent == 0 {
        return Ok(0);
    }
    let (to_store, to_k) = e.slot(to)?;
    shard_credit::run(to_store, &to_k, &id, lent)?;
    refilled(e, to);
    shard_settle::run(from_store, &from_k, &[id])?;
    Ok(lent)
}

/// Writes the shards' units left into the event's own slot, for the storefront, and gives
/// every shard's slot the picture of which shards hold stock (`shard_picture.lua`): the tail
/// chooses its candidates from it, and when every shard is empty, buyers everywhere hear "sold
/// out" at once. Each shard's figure is read at its own instant: a shard refilled in between is
/// believed empty until the next summary (at most the beliefs' lifetime, `EMPTY_BELIEF_MS`).
/// A slot that cannot be reached keeps its picture, whose empties expire.
pub fn summarize<S: Store>(e: &EventShards<'_, S>, stocks: &[u64]) -> Result<(), Error> {
    let (store, k) = e.master()?;
    scripts::summarize::run(store, &k, stocks)?;
    for s in e.all() {
        match e.on_slot(s, |store, k| scripts::shard_picture::run(store, k, stocks)) {
            Err(err) if !err.is_transient() => return Err(err),
            _ => {}
        }
    }
    Ok(())
}

/// The periodic care of a sharded event (a scheduled job's step): finish transfers older than
/// `min_age_ms`, then rebalance when the shards [`drifted`]. Returns the repair and units moved.
pub fn maintain<S: Store>(
    e: &EventShards<'_, S>,
    min_age_ms: u64,
) -> Result<(Repaired, u64), Error> {
    let repaired = repair(e, min_age_ms)?;
    let moved = if drifted(&stocks(e)?) {
        rebalance(e)?
    } else {
        0
    };
    Ok((repaired, moved))
}
