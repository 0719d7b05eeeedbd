//! Orders after the buy: the drain into Postgres, payment (started by the buyer, confirmed by
//! the provider), timeout release and reconciliation.
//! Postgres is the record; Redis mirrors each order's state for poll.
//!
//! Every function here is called from a scheduled component (spin-trigger-cron) *and* from an
//! authenticated HTTP route (`functions/jobs`), for platforms without a cron trigger.
//!
//! ## Money rules
//!
//! - **The provider's word decides.** `orders::start_payment` records what is owed (the price
//!   bought at, currency, deadline) and opens a Checkout Session, idempotent by our payment id; it
//!   marks nothing paid. A verified webhook (`provider::verify`: HMAC under any configured secret,
//!   timestamp tolerance, constant time) pays through `orders::confirm`, in one transaction that
//!   first records the provider's event (`provider_events`: redelivery changes nothing), then
//!   compare-and-sets `pending_payment → paid` when amount and currency match. Each provider
//!   payment is recorded once (`provider_payments`); a late, mismatched or second one owes a
//!   refund, never pays, and `orders::pay_back` refunds it.
//! - **No unit back while a payment can succeed.** `orders::release_due` first recovers payments
//!   whose webhook was lost (`recover_events`), then expires each due order's open session at the
//!   provider or learns it was paid (`close_sessions`): an order with an open or complete session
//!   never expires. Only then does `release_expired` lock due rows (`FOR UPDATE SKIP LOCKED`),
//!   expire them and move them `held → available`, in one transaction. Row locks and the
//!   compare-and-set on `status` make paid and expired exclusive.
//! - **A unit goes back once.** `set_order_status.lua` flips the Redis order to `expired` and
//!   returns the unit in one step, never from a final status (`paid`, `expired`); Postgres marks
//!   `released_in_redis` after, so a crash between is retried, never doubled.
//! - Every verified event gets `200`, so the provider stops redelivering.

mod backstop;
mod confirm;
mod drain;
pub mod fault;
mod pay;
mod reconcile;
mod refund;
mod release;

pub use backstop::{BackstopReport, recover_events};
pub use confirm::{Confirmation, Outcome as ConfirmOutcome, confirm, provider_event_counts};
pub use drain::{DrainOptions, DrainReport, catch_up, drain};
pub use pay::{
    Checkout, MAX_PAYMENTS_LISTED, PayRequest, Payment, PaymentRecord, PaymentStatus, payments,
    start_payment,
};
pub use reconcile::{Reconciliation, Reconciliations, reconcile, reconcile_all};
pub use refund::{RefundReport, pay_back, tell_buyers};
pub use release::{
    Provider, ReleaseReport, SESSIONS_PER_RUN, SessionReport, close_sessions, release_due,
    release_expired,
};

use crate::error::{Dependency, Error};
use crate::event::EventId;
use crate::keys::ShardKeys;
use crate::nodes::Nodes;
use crate::scripts;
use crate::scripts::set_order_status::Final;
use crate::sharded::{EventShards, transfer};
use crate::sql::{int, s, text, transaction};
use crate::store::Store;

/// Orders read per reconcile script call: small enough that no call blocks Redis for long.
const RECONCILE_PAGE: u32 = 1_000;

/// Whether `e` says Postgres is gone: then every other event's work would fail too.
fn postgres_lost(e: &Error) -> bool {
    matches!(
        e,
        Error::Unavailable {
            dependency: Dependency::Postgres,
            ..
        }
    )
}

/// Mirrors final states of orders of `shard` in its slot; for `expired` this returns their
/// units to that shard, once, and tells every shard it has stock again.
fn mirror<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    shard: u32,
    status: Final,
    orders: &[String],
) -> Result<u64, Error> {
    let k = ShardKeys::new(event, shard);
    // A node that does not answer is skipped by the rest of this run.
    let released = nodes.on_shard(event, shard, |store| {
        scripts::set_order_status::run(store, &k, status, orders)
    })?;
    if released > 0 {
        // Best effort: a shard that cannot be told now (its node, or the master's, is down)
        // stops believing this one empty when its belief expires.
        if let Ok((e, _)) = EventShards::open(nodes, event) {
            transfer::refilled(&e, shard);
        }
    }
    Ok(released)
}
