//! Payment: a compare-and-set in Postgres, then the final state mirrored in Redis.

use serde::Serialize;

use super::{int, mirror, s, text, transaction};
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::ids::OrderId;
use crate::nodes::Nodes;
use crate::scripts::set_order_status::Final;
use crate::sql::{Param as P, Sql};
use crate::store::Store;

/// The outcome of `pay`.
#[derive(Debug, Clone, Serialize)]
pub struct Paid {
    /// The order.
    pub order_id: String,
    /// Always `paid`.
    pub status: &'static str,
}

/// Marks an order paid, by compare-and-set from `pending_payment` before its deadline. An
/// order that expired (or whose deadline passed) is refused with 409: never paid and released.
pub fn pay<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    event: &EventId,
    user: &str,
    order_id: &OrderId,
    now_ms: u64,
) -> Result<Paid, Error> {
    let order_id = order_id.as_str();
    let key = [s(order_id), s(event.as_str()), s(user)];
    let mut params = key.to_vec();
    params.push(P::Int64(now_ms as i64));
    // One transaction, committed before the answer: a 200 means the payment is in Postgres.
    // Returns the order's shard: its state is mirrored in that shard's slot.
    let shard = transaction(db, || {
        let updated = db.query(
            "UPDATE orders SET status = 'paid', paid_ms = $4
                 WHERE order_id = $1 AND event_id = $2 AND user_id = $3
                   AND status = 'pending_payment' AND pay_deadline_ms > $4
                 RETURNING shard::bigint",
            &params,
        )?;
        if let Some(row) = updated.rows.first() {
            return Ok(int(row, 0)?);
        }
        let rows = db.query(
            "SELECT status, shard::bigint FROM orders
                 WHERE order_id = $1 AND event_id = $2 AND user_id = $3",
            &key,
        )?;
        let row = rows.rows.first();
        let status = row.map(|r| text(r, 0)).transpose()?;
        match status.as_deref() {
            Some("paid") => Ok(int(row.expect("a status has its row"), 1)?),
            Some("pending_payment" | "expired") => Err(Error::refused(
                ErrorCode::OrderExpired,
                "the payment window has closed",
            )),
            Some(other) => Err(Error::refused(
                ErrorCode::Conflict,
                format!("order is {other}"),
            )),
            None => Err(Error::refused(
                ErrorCode::OrderNotFound,
                "no such order of yours (a new order takes a moment to be confirmed)",
            )),
        }
    })?;
    let shard = u32::try_from(shard).map_err(Error::bug)?;
    mirror(nodes, event, shard, Final::Paid, &[order_id.to_owned()])?;
    Ok(Paid {
        order_id: order_id.to_owned(),
        status: "paid",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::SET_ORDER_STATUS;
    use crate::sql::{Cell, DbError};
    use crate::testing::{FakeSql, FakeStore, Outcome};

    fn pay_o1(store: &FakeStore, db: &FakeSql) -> Result<Paid, Error> {
        let order = OrderId::parse("0abc").unwrap();
        pay(
            &Nodes::one(store),
            db,
            &EventId::parse("e1").unwrap(),
            "u1",
            &order,
            1_000,
        )
    }

    fn status_row(status: &str) -> Outcome {
        Outcome::Rows(vec![vec![Cell::Str(status.to_owned()), Cell::Int64(3)]])
    }

    #[test]
    fn a_payment_commits_then_mirrors_the_paid_state_in_redis() {
        let db = FakeSql::default().then(Outcome::Rows(vec![vec![Cell::Int64(3)]]));
        let store =
            FakeStore::holding_every_script().answers(&SET_ORDER_STATUS, &[0.into(), 0.into()]);
        let paid = pay_o1(&store, &db).unwrap();
        assert_eq!((paid.order_id.as_str(), paid.status), ("0abc", "paid"));
        assert_eq!(db.verbs(), ["BEGIN", "UPDATE", "COMMIT"]);
        assert_eq!(store.calls.borrow()[0].args, ["paid", "0abc"]);
        assert!(
            store.calls.borrow()[0].keys[0].starts_with("{sk:e1/3}"),
            "the order's shard"
        );
    }

    #[test]
    fn paying_twice_is_still_paid() {
        let db = FakeSql::default()
            .then(Outcome::Rows(vec![]))
            .then(status_row("paid"));
        let store =
            FakeStore::holding_every_script().answers(&SET_ORDER_STATUS, &[0.into(), 0.into()]);
        assert!(pay_o1(&store, &db).is_ok());
    }

    #[test]
    fn a_late_payment_is_refused_rolled_back_and_never_mirrored() {
        for status in ["pending_payment", "expired"] {
            let db = FakeSql::default()
                .then(Outcome::Rows(vec![]))
                .then(status_row(status));
            let store = FakeStore::holding_every_script();
            let e = pay_o1(&store, &db).unwrap_err();
            assert_eq!(e.code(), ErrorCode::OrderExpired, "{status}");
            assert_eq!(db.verbs(), ["BEGIN", "UPDATE", "SELECT", "ROLLBACK"]);
            assert!(store.calls.borrow().is_empty());
        }
    }

    #[test]
    fn someone_elses_or_an_unknown_order_is_not_found() {
        let db = FakeSql::default()
            .then(Outcome::Rows(vec![]))
            .then(Outcome::Rows(vec![]));
        let e = pay_o1(&FakeStore::holding_every_script(), &db).unwrap_err();
        assert_eq!(e.code(), ErrorCode::OrderNotFound);
    }

    #[test]
    fn a_status_of_the_wrong_type_is_a_bug_not_a_missing_order() {
        let db = FakeSql::default()
            .then(Outcome::Rows(vec![]))
            .then(Outcome::Rows(vec![vec![Cell::Int64(3)]]));
        let e = pay_o1(&FakeStore::holding_every_script(), &db).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Internal);
    }

    #[test]
    fn a_lost_database_is_unavailable() {
        let db = FakeSql::default().then_fail(DbError {
            connection: true,
            message: "connection closed".into(),
        });
        let e = pay_o1(&FakeStore::holding_every_script(), &db).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unavailable);
    }
}
